-- Migration 12: what a session's durable files fold to, kept (see sqlite-schema.sql).
CREATE TABLE IF NOT EXISTS session_durable_kept (
    session_key      INTEGER PRIMARY KEY REFERENCES sessions (key) ON DELETE CASCADE,
    upto_id          INTEGER NOT NULL,
    first_entry_id   INTEGER NOT NULL,
    entries_from_id  INTEGER NOT NULL,
    kept             TEXT NOT NULL
) STRICT;
