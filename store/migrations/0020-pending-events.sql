-- Migration 20: an index of the log's events no store entry was projected from, the only ones a
-- turn's import can take, so that reading them past a mark no longer reads every event since it
-- (see sqlite-schema.sql).
CREATE INDEX IF NOT EXISTS session_events_pending ON session_events (session_key, seq)
    WHERE pi_entry_id IS NULL;
