-- Migration 5: a session's runs are found by two indexes instead of one on (session_id, status).
-- That one was written at every change of a run's status, on a page of the run's session, so a
-- group commit of many sessions' turns wrote a page for each of them (4.5 of a commit's 39
-- pages at 100 sessions). `runs_by_session` now holds every run and changes only
-- when a run is added or removed; the runs still open, which the queue and a turn look up by
-- session and status, are in a small index of their own, whose few pages all sessions share.
-- `runs_by_queue` holds only the queued runs, which is all the queue reads, so that a run's
-- end no longer moves it there.
-- On a database made as version 1 with these indexes, this drops and rebuilds two of them.
DROP INDEX IF EXISTS runs_by_queue;
CREATE INDEX runs_by_queue ON runs (queue) WHERE status = 'queued';
DROP INDEX IF EXISTS runs_by_session;
CREATE INDEX runs_by_session ON runs (session_id);
CREATE INDEX IF NOT EXISTS runs_open_by_session ON runs (session_id, status)
    WHERE status = 'queued' OR status = 'running' OR status = 'parked';
