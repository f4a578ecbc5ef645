-- Version 20 on PostgreSQL: an index of the log's events no store entry was projected from (see
-- sqlite-schema.sql).
CREATE INDEX IF NOT EXISTS session_events_pending ON session_events (session_key, seq)
    WHERE pi_entry_id IS NULL;
