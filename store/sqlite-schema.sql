-- Seed's agents database: the current schema, applied as migration 1 by the list in
-- src/schema.rs. A later change goes here and into a migration of its own that does nothing
-- where it is in place already (`IF NOT EXISTS`, or a check of the table's columns), so that it
-- is a no-op on a database this file created.
-- Times are unix milliseconds (INTEGER columns ending in _at). Ids are uuid text, except log
-- events, whose id is the row id. Every table that belongs to a session cascades from `sessions`,
-- so deleting a session deletes its log, store, runs, lease, edges and attachments with it.
--
-- The two tables written at every step of a turn (session_events, session_durable_files) refer
-- to their session by its integer `key` rather than its uuid: their indexes stay small enough
-- that the rows of many sessions committed in one group share index pages, which is most of
-- what group commit saves (docs/design/group-commit.md has the figures). The other tables use
-- the uuid, for readability.
--
-- A CHECK names its allowed values with OR or BETWEEN, never an IN list: SQLite builds an IN
-- list into a temporary b-tree each time the check runs, which cost 2-3 us of every insert
-- (migration 4 rewrites the checks of databases made before).

CREATE TABLE accounts (
    id          TEXT PRIMARY KEY,
    public_key  BLOB NOT NULL UNIQUE,
    created_at  INTEGER NOT NULL
) STRICT;

-- Files an agent keeps under ~/memory/, one row per file.
CREATE TABLE memory_files (
    account_id  TEXT NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    path        TEXT NOT NULL CHECK (path LIKE '~/memory/%'),
    content     TEXT NOT NULL,
    updated_at  INTEGER NOT NULL,
    PRIMARY KEY (account_id, path)
) STRICT;

CREATE TABLE sessions (
    -- never reused (AUTOINCREMENT), so a key held by a writer cannot come to mean another session
    key                INTEGER PRIMARY KEY AUTOINCREMENT,
    id                 TEXT NOT NULL UNIQUE,
    account_id         TEXT NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    title              TEXT NOT NULL DEFAULT '',
    description        TEXT NOT NULL DEFAULT '',
    -- who named the session: nobody yet, the agent (status or continue_session), the user, or
    -- the fallback namer
    title_source       TEXT NOT NULL DEFAULT 'none'
                       CHECK (title_source = 'none' OR title_source = 'agent' OR title_source = 'user'
                              OR title_source = 'fallback'),
    model_override     TEXT,
    reasoning_level    TEXT,
    plan               TEXT,          -- JSON checklist, NULL when there is none
    -- set for a delegated child: deleting the parent deletes its children
    parent_session_id  TEXT REFERENCES sessions (id) ON DELETE CASCADE,
    created_at         INTEGER NOT NULL,
    updated_at         INTEGER NOT NULL
) STRICT;

CREATE INDEX sessions_by_account ON sessions (account_id, updated_at);
CREATE INDEX sessions_by_parent ON sessions (parent_session_id) WHERE parent_session_id IS NOT NULL;

-- The log: the canonical record of a session. seq is 1, 2, 3, ... per session, assigned inside
-- the appending transaction.
CREATE TABLE session_events (
    id           INTEGER PRIMARY KEY,
    session_key  INTEGER NOT NULL REFERENCES sessions (key) ON DELETE CASCADE,
    seq          INTEGER NOT NULL CHECK (seq >= 1),
    type         TEXT NOT NULL,
    role         TEXT CHECK (role = 'user' OR role = 'assistant' OR role = 'system' OR role = 'tool'),
    actor        TEXT,
    content      TEXT NOT NULL,      -- JSON
    meta         TEXT NOT NULL,      -- JSON
    run_id       TEXT,
    -- the store entry this event was projected from; NULL: written without the harness
    pi_entry_id  INTEGER,
    created_at   INTEGER NOT NULL,
    UNIQUE (session_key, seq)
) STRICT;

-- No index of pi_entry_id: the log's highest mark is its newest one, found back from the newest
-- seq (src/log.rs, `newest_pi_entry_id`). Migration 7 drops the index databases had before.

-- The events no store entry was projected from (user messages, verbs run by hand, notices): the
-- only ones a turn's import can take past its mark (src/turn_view.rs, `pending_events`). Of just
-- those, so that the read costs the pending events, not every event since the mark: the events
-- of a session lie on pages of their own, one page each when sessions interleave. Migration 20.
CREATE INDEX session_events_pending ON session_events (session_key, seq)
    WHERE pi_entry_id IS NULL;

-- The store: a session's durable files, where a file is its rows in id order and an append is
-- one inserted row. file: 0 entries.jsonl, 1 documents.jsonl, 2 tasks.jsonl.
CREATE TABLE session_durable_files (
    id           INTEGER PRIMARY KEY,
    session_key  INTEGER NOT NULL REFERENCES sessions (key) ON DELETE CASCADE,
    file         INTEGER NOT NULL CHECK (file BETWEEN 0 AND 2),
    line         TEXT NOT NULL
) STRICT;

CREATE INDEX session_durable_files_by_file ON session_durable_files (session_key, file, id);

CREATE TABLE runs (
    id              TEXT PRIMARY KEY,
    session_id      TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    queue           TEXT NOT NULL CHECK (queue = 'interactive' OR queue = 'background'),
    status          TEXT NOT NULL
                    CHECK (status = 'queued' OR status = 'running' OR status = 'parked'
                           OR status = 'succeeded' OR status = 'failed' OR status = 'canceled'),
    user_event_ids  TEXT NOT NULL DEFAULT '[]',   -- JSON array of session_events ids
    parent_run_id   TEXT REFERENCES runs (id) ON DELETE SET NULL,
    typed           INTEGER NOT NULL DEFAULT 0 CHECK (typed BETWEEN 0 AND 1),   -- a return_result child
    owner           TEXT,             -- the boot id of the process running it
    attempts        INTEGER NOT NULL DEFAULT 0,
    -- how many later passes the run took (a child's result, an open plan): a pass is a turn of
    -- its own, with its own request id
    pass            INTEGER NOT NULL DEFAULT 0,
    result          TEXT,             -- JSON
    created_at      INTEGER NOT NULL,
    updated_at      INTEGER NOT NULL,
    -- the session's account, for the limit on its queued runs (added by migration 3: last, and
    -- left NULL-able, so that a new database and an upgraded one are the same)
    account_id      TEXT,
    -- the boot sweeps that found the run cut off mid-turn (`running`): past the runtime's
    -- limit the sweep fails the run instead of queueing it again, so a run that kills its
    -- process each time it runs cannot crash the service at every boot (added by migration 6)
    restarts        INTEGER NOT NULL DEFAULT 0,
    -- the W3C traceparent of the run's newest span, when traces are exported: the attempt that
    -- takes the run up after a crash links to it (added by migration 19)
    trace_parent    TEXT,
    -- whether the run's pass has started: set by the claim, cleared by a later pass. A run
    -- queued again with it set (cut off by a restart, decided on an approval, after a panic)
    -- comes back to a turn it may have left open, and goes before the session's other queued
    -- runs, so that it adopts its turn rather than another run aborting it (added by
    -- migration 22)
    pass_started    INTEGER NOT NULL DEFAULT 0 CHECK (pass_started BETWEEN 0 AND 1)
) STRICT;

-- The runs waiting on each queue; rowid orders them: first queued, first claimed. Of just the
-- queued runs, so that a run's end leaves it alone. Migration 5.
CREATE INDEX runs_by_queue ON runs (queue) WHERE status = 'queued';
-- A session's runs, all of them: changed only when a run is added or removed. Migration 5.
CREATE INDEX runs_by_session ON runs (session_id);
-- A session's open runs by status (is one running? which wait?): an index of just those, so a
-- run's changes of status write to its few pages, which every session shares, rather than to a
-- page of its own session's. SQLite uses it for a query that names one of these statuses.
-- Migration 5.
CREATE INDEX runs_open_by_session ON runs (session_id, status)
    WHERE status = 'queued' OR status = 'running' OR status = 'parked';
CREATE INDEX runs_by_status ON runs (status);
-- A run's children (delegation): read at every turn, so never a scan of every run. Added by
-- migration 2 to databases made before it.
CREATE INDEX runs_by_parent ON runs (parent_run_id) WHERE parent_run_id IS NOT NULL;
-- An account's queued runs, counted at every message (the limit on them): an index of just
-- those, rather than a walk over every queued run of every account. Migration 3.
CREATE INDEX runs_queued_by_account ON runs (account_id) WHERE status = 'queued';
-- An account's runs in flight, counted at every claim (its share of the slots, and which
-- account's run starts next): an index of just the running runs, a few pages every account
-- shares. Migration 9.
CREATE INDEX runs_running_by_account ON runs (account_id) WHERE status = 'running';

-- Which harness owns a session's store now: one row per held lease.
CREATE TABLE session_leases (
    session_id   TEXT PRIMARY KEY REFERENCES sessions (id) ON DELETE CASCADE,
    owner        TEXT NOT NULL,       -- boot id of the holding process
    run_id       TEXT,
    acquired_at  INTEGER NOT NULL,
    epoch        INTEGER NOT NULL DEFAULT 0   -- the holding node's epoch (nodes.epoch); migration 16
) STRICT;

-- One row per continuation edge. A session has one immediate predecessor (successor unique);
-- (predecessor, tool_call_id) is the idempotency key of the continue_session call (of the fork
-- request, for a fork). The kind says which: a continuation, or a fork a person made from an
-- earlier point of the predecessor.
CREATE TABLE session_continuations (
    id                      TEXT PRIMARY KEY,
    predecessor_session_id  TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    successor_session_id    TEXT NOT NULL UNIQUE REFERENCES sessions (id) ON DELETE CASCADE,
    origin_session_id       TEXT NOT NULL,   -- the first session of the chain (may be gone)
    tool_call_id            TEXT NOT NULL,
    initiating_event_id     INTEGER NOT NULL,
    reason                  TEXT NOT NULL,
    manifest_cbor           BLOB NOT NULL,
    created_at              INTEGER NOT NULL,
    kind                    TEXT NOT NULL DEFAULT 'continuation'   -- migration 18
                            CHECK (kind = 'continuation' OR kind = 'fork'),
    UNIQUE (predecessor_session_id, tool_call_id)
) STRICT;

-- Each range of a predecessor's log that a read recalled where the edge's projection left it
-- out (or cut it): one row per read call and range, so a read that is replayed counts once.
CREATE TABLE continuation_recalls (
    continuation_id    TEXT NOT NULL REFERENCES session_continuations (id) ON DELETE CASCADE,
    reader_session_id  TEXT NOT NULL,   -- the session whose read recalled the range
    tool_call_id       TEXT NOT NULL,   -- the read's call
    from_seq           INTEGER NOT NULL,
    to_seq             INTEGER NOT NULL,
    created_at         INTEGER NOT NULL,
    PRIMARY KEY (continuation_id, reader_session_id, tool_call_id, from_seq)
) STRICT, WITHOUT ROWID;

-- Files attached to messages; on SQLite their bytes are a file under the data dir (on
-- PostgreSQL a row of attachment_contents). A successor holds the same attachment id as its
-- predecessor (a hard link, or a copy of the row), so the key is per session.
CREATE TABLE attachments (
    session_id  TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    id          TEXT NOT NULL,
    name        TEXT NOT NULL,
    media_type  TEXT NOT NULL,
    size_bytes  INTEGER NOT NULL CHECK (size_bytes >= 0),
    path        TEXT NOT NULL,      -- relative to the data dir; the file on SQLite alone
    created_at  INTEGER NOT NULL,
    PRIMARY KEY (session_id, id)
) STRICT;

-- An attachment's bytes in the database, on PostgreSQL alone, where several nodes share the
-- database but not a disk; on SQLite, one process beside its data dir, this table stays empty
-- and the bytes are the file `attachments.path` names. A row goes with its attachment's row
-- (and so with its session). Migration 17.
CREATE TABLE attachment_contents (
    session_id  TEXT NOT NULL,
    id          TEXT NOT NULL,
    bytes       BLOB NOT NULL,
    PRIMARY KEY (session_id, id),
    FOREIGN KEY (session_id, id) REFERENCES attachments (session_id, id) ON DELETE CASCADE
) STRICT;

-- Signed requests seen, against replay: a (key id, nonce) pair is taken in the same transaction
-- as the request's writes, so a replay fails and two concurrent uses let exactly one through.
-- A row is kept until its signature could no longer be accepted (expires_at), then pruned.
CREATE TABLE request_nonces (
    key_id      TEXT NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    nonce       TEXT NOT NULL,
    expires_at  INTEGER NOT NULL,
    PRIMARY KEY (key_id, nonce)
) STRICT, WITHOUT ROWID;

CREATE INDEX request_nonces_by_expiry ON request_nonces (expires_at);

-- What a call of a verb that is not safe to repeat did, recorded in the transaction of its
-- effect (a memory write): a call cut off by a crash after it took effect is answered with
-- this result instead of as interrupted (the verb's reconcile), and never run again.
CREATE TABLE call_effects (
    session_key   INTEGER NOT NULL REFERENCES sessions (key) ON DELETE CASCADE,
    tool_call_id  TEXT NOT NULL,
    verb          TEXT NOT NULL,
    result        TEXT NOT NULL,
    created_at    INTEGER NOT NULL,
    PRIMARY KEY (session_key, tool_call_id)
) STRICT, WITHOUT ROWID;

-- Calls that wait for a person's decision: the run that made a call parks on its pending row
-- (recorded with the park, in one transaction); the decision is recorded and the run queued
-- again in one transaction. While a session has a pending approval, none of its other runs is
-- claimed. Migration 11.
CREATE TABLE approvals (
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

-- The pending approvals with a deadline, soonest first. Migration 11.
CREATE INDEX approvals_due ON approvals (deadline_at)
    WHERE status = 'pending' AND deadline_at IS NOT NULL;

-- The questions MCP servers ask people during Seed's calls (elicitations): pending until a
-- person answers (accepted with content, declined, cancelled), no one answers in time
-- (timed_out) or the call that asked ends first (closed; the boot closes what a crash left
-- pending, as no call outlives its process). A call asks one question at a time; n counts its
-- questions. Migration 13.
CREATE TABLE elicitations (
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

-- The pending elicitations, which the boot closes. Migration 13.
CREATE INDEX elicitations_pending ON elicitations (session_id)
    WHERE status = 'pending';

-- Wake-ups a session scheduled for itself (the `schedule` verb). When one is due, one
-- background run is queued for its session, with its notice in the log, in the transaction
-- that advances next_due_at (or ends a one-shot), so no occurrence fires twice and none is
-- lost. kind and spec say when (seed_events::schedule::When); next_due_at is NULL once it
-- ended: done (a one-shot fired), cancelled (unschedule, a person), or invalid (a stored spec
-- that no longer parses). created_by_call_id is the schedule call that set it: a call cut off
-- by a crash finds its row instead of setting a second one. Migration 10.
CREATE TABLE schedules (
    id                  TEXT PRIMARY KEY,
    session_id          TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    account_id          TEXT NOT NULL,
    kind                TEXT NOT NULL
                        CHECK (kind = 'delay' OR kind = 'at' OR kind = 'cron' OR kind = 'interval'),
    spec                TEXT NOT NULL,
    note                TEXT NOT NULL,
    next_due_at         INTEGER,
    created_by_call_id  TEXT,
    fired               INTEGER NOT NULL DEFAULT 0 CHECK (fired >= 0),   -- times it fired
    last_fired_at       INTEGER,
    ended               TEXT
                        CHECK (ended IS NULL OR ended = 'done' OR ended = 'cancelled'
                               OR ended = 'invalid'),
    created_at          INTEGER NOT NULL,
    updated_at          INTEGER NOT NULL,
    UNIQUE (session_id, created_by_call_id)
) STRICT;

-- The wake-ups still to fire, soonest first: what the scheduler sleeps until.
CREATE INDEX schedules_due ON schedules (next_due_at) WHERE ended IS NULL;
CREATE INDEX schedules_by_session ON schedules (session_id);

-- What a turn can still read of a session's durable files folded up to the line upto_id
-- (seed_durable::Kept, as JSON: the first entry of the context, the newest system entry before
-- it, the newest value of each document, the tasks a turn can look up). A harness opens from
-- it, the entry lines from entries_from_id (the row of entry first_entry_id, the context's
-- first) on, and the other lines after upto_id: opening a long session reads its context, not
-- its history. Written by the session's harness every few hundred lines, and replaced by a
-- newer one only. Migration 12.
CREATE TABLE session_durable_kept (
    session_key      INTEGER PRIMARY KEY REFERENCES sessions (key) ON DELETE CASCADE,
    upto_id          INTEGER NOT NULL,
    first_entry_id   INTEGER NOT NULL,
    entries_from_id  INTEGER NOT NULL,
    kept             TEXT NOT NULL
) STRICT;

-- Bearer tokens and one-time login codes, by the SHA-256 of each (hex; the token itself is
-- never stored): in the database, a restart keeps browsers signed in and any process sharing
-- the database can check them. Swept once expired; they go with their account. Migration 14.
CREATE TABLE bearer_tokens (
    token_hash  TEXT PRIMARY KEY,
    account_id  TEXT NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    expires_at  INTEGER NOT NULL
) STRICT, WITHOUT ROWID;

CREATE INDEX bearer_tokens_by_account ON bearer_tokens (account_id, expires_at);
CREATE INDEX bearer_tokens_by_expiry ON bearer_tokens (expires_at);

CREATE TABLE login_codes (
    code_hash   TEXT PRIMARY KEY,
    account_id  TEXT NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    expires_at  INTEGER NOT NULL
) STRICT, WITHOUT ROWID;

CREATE INDEX login_codes_by_account ON login_codes (account_id);

-- The processes serving one database (several only on PostgreSQL), by boot id: a node's
-- leases hold while its row is renewed (expires_at, in the database's clock, unix ms); once
-- it lapses, any other node sweeps the node's leases and runs as a boot sweep would, and the
-- node's writes are refused. epoch numbers the nodes in the order they joined; rows stay
-- (ended_at set once swept) so that it only grows. Migration 16.
CREATE TABLE nodes (
    id          TEXT PRIMARY KEY,
    epoch       INTEGER NOT NULL UNIQUE,
    started_at  INTEGER NOT NULL,
    renewed_at  INTEGER NOT NULL,
    expires_at  INTEGER NOT NULL,
    ended_at    INTEGER
) STRICT, WITHOUT ROWID;
