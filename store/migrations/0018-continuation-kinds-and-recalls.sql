-- Migration 18: each continuation edge has a kind (a continuation, or a fork a person made
-- from an earlier point), and the recalls of ranges a projection left out are counted against
-- their edge (see sqlite-schema.sql). `add_continuation_kind` in src/schema.rs adds the column
-- where it is missing.
CREATE TABLE IF NOT EXISTS continuation_recalls (
    continuation_id    TEXT NOT NULL REFERENCES session_continuations (id) ON DELETE CASCADE,
    reader_session_id  TEXT NOT NULL,
    tool_call_id       TEXT NOT NULL,
    from_seq           INTEGER NOT NULL,
    to_seq             INTEGER NOT NULL,
    created_at         INTEGER NOT NULL,
    PRIMARY KEY (continuation_id, reader_session_id, tool_call_id, from_seq)
) STRICT, WITHOUT ROWID;
