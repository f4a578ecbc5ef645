-- Version 19 on PostgreSQL: each run keeps the W3C traceparent of its newest span (see
-- sqlite-schema.sql).
ALTER TABLE runs ADD COLUMN IF NOT EXISTS trace_parent TEXT;
