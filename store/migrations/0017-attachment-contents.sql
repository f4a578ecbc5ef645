-- Migration 17: attachments' bytes in the database, a table that stays empty on SQLite (see
-- sqlite-schema.sql).
CREATE TABLE IF NOT EXISTS attachment_contents (
    session_id  TEXT NOT NULL,
    id          TEXT NOT NULL,
    bytes       BLOB NOT NULL,
    PRIMARY KEY (session_id, id),
    FOREIGN KEY (session_id, id) REFERENCES attachments (session_id, id) ON DELETE CASCADE
) STRICT;
