-- Migration 7: the log keeps no index of its events' store entry ids. Marks never go down along
-- a session's log, so the highest is the newest, found back from the newest seq by the
-- (session_key, seq) index; the index cost every projected event an entry on a leaf of its
-- session's, a page of each session in every group commit (docs/design/group-commit.md).
DROP INDEX IF EXISTS session_events_by_entry;
