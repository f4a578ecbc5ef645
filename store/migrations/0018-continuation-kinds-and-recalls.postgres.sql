-- Version 18 on PostgreSQL: each continuation edge has a kind, and the recalls of ranges a
-- projection left out are counted against their edge (see sqlite-schema.sql).
ALTER TABLE session_continuations ADD COLUMN IF NOT EXISTS kind TEXT NOT NULL
    DEFAULT 'continuation' CHECK (kind = 'continuation' OR kind = 'fork');

CREATE TABLE IF NOT EXISTS continuation_recalls (
    continuation_id    TEXT NOT NULL REFERENCES session_continuations (id) ON DELETE CASCADE,
    reader_session_id  TEXT NOT NULL,
    tool_call_id       TEXT NOT NULL,
    from_seq           BIGINT NOT NULL,
    to_seq             BIGINT NOT NULL,
    created_at         BIGINT NOT NULL,
    PRIMARY KEY (continuation_id, reader_session_id, tool_call_id, from_seq)
);
