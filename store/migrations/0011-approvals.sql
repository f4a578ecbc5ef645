-- Migration 11: calls that wait for a person's decision (see sqlite-schema.sql).
CREATE TABLE IF NOT EXISTS approvals (
    session_id         TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    tool_call_id       TEXT NOT NULL,
    run_id             TEXT NOT NULL,
    verb               TEXT NOT NULL,
    arguments          TEXT NOT NULL,     -- JSON, as the model wrote them
    status             TEXT NOT NULL
                       CHECK (status = 'pending' OR status = 'approved' OR status = 'denied'
                              OR status = 'timed_out'),
    decided_arguments  TEXT,              -- JSON: what an approved call runs with
    reason             TEXT,              -- why it was denied or timed out
    created_at         INTEGER NOT NULL,
    decided_at         INTEGER,
    deadline_at        INTEGER,           -- no answer by then denies it
    PRIMARY KEY (session_id, tool_call_id)
) STRICT, WITHOUT ROWID;

CREATE INDEX IF NOT EXISTS approvals_due ON approvals (deadline_at)
    WHERE status = 'pending' AND deadline_at IS NOT NULL;
