-- Migration 16: the nodes serving the database and the epoch of each session lease (see
-- sqlite-schema.sql). `add_lease_epoch` in src/schema.rs adds the column where it is missing.
CREATE TABLE IF NOT EXISTS nodes (
    id          TEXT PRIMARY KEY,
    epoch       INTEGER NOT NULL UNIQUE,
    started_at  INTEGER NOT NULL,
    renewed_at  INTEGER NOT NULL,
    expires_at  INTEGER NOT NULL,
    ended_at    INTEGER
) STRICT, WITHOUT ROWID;
