-- Migration 10: wake-ups a session schedules for itself (see sqlite-schema.sql).
CREATE TABLE IF NOT EXISTS schedules (
    id                  TEXT PRIMARY KEY,
    session_id          TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    account_id          TEXT NOT NULL,
    kind                TEXT NOT NULL
                        CHECK (kind = 'delay' OR kind = 'at' OR kind = 'cron' OR kind = 'interval'),
    spec                TEXT NOT NULL,
    note                TEXT NOT NULL,
    next_due_at         INTEGER,
    created_by_call_id  TEXT,
    fired               INTEGER NOT NULL DEFAULT 0 CHECK (fired >= 0),
    last_fired_at       INTEGER,
    ended               TEXT
                        CHECK (ended IS NULL OR ended = 'done' OR ended = 'cancelled'
                               OR ended = 'invalid'),
    created_at          INTEGER NOT NULL,
    updated_at          INTEGER NOT NULL,
    UNIQUE (session_id, created_by_call_id)
) STRICT;

CREATE INDEX IF NOT EXISTS schedules_due ON schedules (next_due_at) WHERE ended IS NULL;
CREATE INDEX IF NOT EXISTS schedules_by_session ON schedules (session_id);
