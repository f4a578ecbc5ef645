-- Version 16 on PostgreSQL: the nodes serving the database and the epoch of each session
-- lease (see sqlite-schema.sql).
CREATE TABLE IF NOT EXISTS nodes (
    id          TEXT PRIMARY KEY,
    epoch       BIGINT NOT NULL UNIQUE,
    started_at  BIGINT NOT NULL,
    renewed_at  BIGINT NOT NULL,
    expires_at  BIGINT NOT NULL,
    ended_at    BIGINT
);

ALTER TABLE session_leases ADD COLUMN IF NOT EXISTS epoch BIGINT NOT NULL DEFAULT 0;
