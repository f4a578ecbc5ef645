-- Migration 13: the questions MCP servers ask people during calls (see sqlite-schema.sql).
CREATE TABLE IF NOT EXISTS elicitations (
    session_id        TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    tool_call_id      TEXT NOT NULL,
    n                 INTEGER NOT NULL,  -- the call's first question is 1, its next 2, ...
    run_id            TEXT NOT NULL,
    verb              TEXT NOT NULL,
    arguments         TEXT NOT NULL,     -- JSON: the call's, as the model wrote them
    message           TEXT NOT NULL,     -- what the server asks
    requested_schema  TEXT NOT NULL,     -- JSON Schema of the answer's content
    status            TEXT NOT NULL
                      CHECK (status = 'pending' OR status = 'accepted' OR status = 'declined'
                             OR status = 'cancelled' OR status = 'timed_out'
                             OR status = 'closed'),
    content           TEXT,              -- JSON: an accepted answer's content
    reason            TEXT,              -- why it timed out or was closed
    created_at        INTEGER NOT NULL,
    decided_at        INTEGER,
    deadline_at       INTEGER,           -- no answer by then answers "cancel"
    PRIMARY KEY (session_id, tool_call_id, n)
) STRICT, WITHOUT ROWID;

-- The pending elicitations, which the boot closes.
CREATE INDEX IF NOT EXISTS elicitations_pending ON elicitations (session_id)
    WHERE status = 'pending';
