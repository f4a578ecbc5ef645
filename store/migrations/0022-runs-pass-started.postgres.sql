-- Version 22 on PostgreSQL: each run says whether its pass has started, so that a run queued
-- again with its turn open goes before the session's other queued runs (see
-- sqlite-schema.sql). The runs left running or parked have theirs started.
ALTER TABLE runs ADD COLUMN IF NOT EXISTS pass_started BIGINT NOT NULL DEFAULT 0
    CHECK (pass_started BETWEEN 0 AND 1);
UPDATE runs SET pass_started = 1 WHERE status = 'running' OR status = 'parked';
