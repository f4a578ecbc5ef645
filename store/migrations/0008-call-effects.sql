-- Migration 8: what a call of a verb that is not safe to repeat did, recorded in the
-- transaction of its effect, so that a call cut off by a crash after it took effect is answered
-- with its result (see sqlite-schema.sql).
CREATE TABLE IF NOT EXISTS call_effects (
    session_key   INTEGER NOT NULL REFERENCES sessions (key) ON DELETE CASCADE,
    tool_call_id  TEXT NOT NULL,
    verb          TEXT NOT NULL,
    result        TEXT NOT NULL,
    created_at    INTEGER NOT NULL,
    PRIMARY KEY (session_key, tool_call_id)
) STRICT, WITHOUT ROWID;
