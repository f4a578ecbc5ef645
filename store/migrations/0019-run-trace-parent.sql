-- Migration 19: each run keeps the W3C traceparent of its newest span, so that after a crash the
-- attempt that takes the run up links to the one cut off (see sqlite-schema.sql).
-- `add_run_trace_parent` in src/schema.rs adds the column where it is missing.
SELECT 1;
