-- Version 17 on PostgreSQL: attachments' bytes in the database, where every node reads them
-- (see sqlite-schema.sql).
CREATE TABLE IF NOT EXISTS attachment_contents (
    session_id  TEXT NOT NULL,
    id          TEXT NOT NULL,
    bytes       BYTEA NOT NULL,
    PRIMARY KEY (session_id, id),
    FOREIGN KEY (session_id, id) REFERENCES attachments (session_id, id) ON DELETE CASCADE
);
