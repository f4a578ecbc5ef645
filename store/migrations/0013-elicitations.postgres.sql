-- Version 13 on PostgreSQL: the questions MCP servers ask people during calls (see
-- postgres-schema.sql).
CREATE TABLE IF NOT EXISTS elicitations (
    session_id        TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    tool_call_id      TEXT NOT NULL,
    n                 BIGINT NOT NULL,
    run_id            TEXT NOT NULL,
    verb              TEXT NOT NULL,
    arguments         TEXT NOT NULL,
    message           TEXT NOT NULL,
    requested_schema  TEXT NOT NULL,
    status            TEXT NOT NULL
                      CHECK (status = 'pending' OR status = 'accepted' OR status = 'declined'
                             OR status = 'cancelled' OR status = 'timed_out'
                             OR status = 'closed'),
    content           TEXT,
    reason            TEXT,
    created_at        BIGINT NOT NULL,
    decided_at        BIGINT,
    deadline_at       BIGINT,
    PRIMARY KEY (session_id, tool_call_id, n)
);

CREATE INDEX IF NOT EXISTS elicitations_pending ON elicitations (session_id)
    WHERE status = 'pending';
