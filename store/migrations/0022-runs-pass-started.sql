-- Migration 22: each run says whether its pass has started, so that a run queued again with
-- its turn open goes before the session's other queued runs (see sqlite-schema.sql).
-- `add_runs_pass_started` in src/schema.rs adds the column where it is missing.
SELECT 1;
