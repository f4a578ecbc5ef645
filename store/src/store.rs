//! [`Store`]: the handle the rest of Seed holds. Writes go through the one writer, reads through
//! the pool; every method is async and never blocks the caller's thread on SQLite.

use std::fmt;
use std::sync::Arc;

use rusqlite::Connection;
use seed_events::{
    AccountId, ContinuationLink, EventId, NewEvent, Queue, RunId, RunStatus, SessionEvent,
    SessionId,
};

use crate::readers::Readers;
use crate::writer::{Scope, Writer};
use crate::{AccountRow, children, continuations, leases, log, runs, sessions};
use crate::{
    AttachmentRow, ChildDelivery, Config, ContinuationRow, CreatedSuccessor, LeaseOutcome,
    LeaseRow, NewAttachment, NewContinuation, NewRun, NewSession, NewSuccessor, ParkOutcome,
    Result, RunRow, SessionFiles, SessionRow, Swept, TitleSource, WriterHold, WriterStats,
};

/// The agents database. Clones share one writer and one reader pool; the last clone dropped
/// finishes the jobs already sent and closes the connections.
#[derive(Clone)]
pub struct Store {
    inner: Arc<Inner>,
}

struct Inner {
    // Field order is drop order: readers close before the writer, whose connection closing
    // last checkpoints the WAL.
    readers: Readers,
    writer: Writer,
    config: Config,
}

impl fmt::Debug for Store {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Store")
            .field("path", &self.inner.config.path)
            .finish_non_exhaustive()
    }
}

impl Store {
    /// Opens (creating if needed) the database, migrates it, and starts the writer and readers.
    pub fn open(config: Config) -> Result<Store> {
        let connection = crate::schema::open_writer(&config)?;
        // One count of waiting callers for both: a caller spins only while it waits alone.
        let replies = Arc::new(crate::spin::Replies::new(config.spin));
        let writer = Writer::start(connection, &config, Arc::clone(&replies))?;
        let readers = Readers::start(&config, replies)?;
        Ok(Store {
            inner: Arc::new(Inner {
                readers,
                writer,
                config,
            }),
        })
    }

    pub fn config(&self) -> &Config {
        &self.inner.config
    }

    /// The writer's counters.
    pub fn writer_stats(&self) -> &WriterStats {
        &self.inner.writer.stats
    }

    /// Runs `apply` in the writer's transaction, committed together with whatever else is
    /// waiting. `session_id` is named in a refusal. `apply` may run more than once.
    pub(crate) async fn write<T, F>(&self, session_id: Option<SessionId>, apply: F) -> Result<T>
    where
        F: FnMut(&Connection) -> Result<T> + Send + 'static,
        T: Send + 'static,
    {
        let scope = Scope {
            session_id,
            append_key: None,
        };
        self.inner.writer.write(scope, apply).await
    }

    /// Like `write`, for a job that only appends rows of the session whose key is `session_key`
    /// (when it is known), so the writer may order it among other sessions' appends.
    pub(crate) async fn write_appends<T, F>(
        &self,
        session_id: SessionId,
        session_key: Option<i64>,
        apply: F,
    ) -> Result<T>
    where
        F: FnMut(&Connection) -> Result<T> + Send + 'static,
        T: Send + 'static,
    {
        let scope = Scope {
            append_key: session_key,
            ..Scope::session(session_id)
        };
        self.inner.writer.write(scope, apply).await
    }

    pub(crate) async fn read<T, F>(&self, read: F) -> Result<T>
    where
        F: FnOnce(&Connection) -> Result<T> + Send + 'static,
        T: Send + 'static,
    {
        self.inner.readers.read(read).await
    }

    /// Stops the writer between two groups until the hold is dropped, so that the writes sent
    /// meanwhile commit as one group. For tests of group commit.
    pub fn hold_writer(&self) -> Result<WriterHold> {
        self.inner.writer.hold()
    }

    /// Stops every write from now on, as a crash of the process would: writes not committed
    /// yet never are (their callers get [`crate::Error::Closed`]), later writes are refused, and
    /// closing the store skips the close-time checkpoint, so the files are left as a killed
    /// process leaves them. For crash simulation: fence, drop everything, open the file again.
    pub fn fence(&self) {
        self.inner.writer.fence();
    }

    /// The flag [`Store::fence`] sets, for a write that fences the store after itself.
    pub(crate) fn fence_flag(&self) -> std::sync::Arc<std::sync::atomic::AtomicBool> {
        self.inner.writer.fence_flag()
    }

    /// Writes sent and not yet taken up by the writer (the queue a held writer builds up).
    pub fn queued_writes(&self) -> usize {
        self.inner.writer.queued()
    }

    /// The durable file system of one session.
    pub fn session_files(&self, session_id: SessionId) -> SessionFiles {
        SessionFiles::new(self.clone(), session_id)
    }

    // Accounts and sessions.

    pub async fn create_account(
        &self,
        id: AccountId,
        public_key: Vec<u8>,
        created_at_ms: i64,
    ) -> Result<()> {
        self.write(None, move |connection| {
            sessions::insert_account(connection, id, &public_key, created_at_ms)
        })
        .await
    }

    pub async fn get_account(&self, id: AccountId) -> Result<Option<AccountRow>> {
        self.read(move |connection| sessions::get_account(connection, id))
            .await
    }

    pub async fn create_session(&self, session: NewSession) -> Result<()> {
        self.write(Some(session.id), move |connection| {
            sessions::insert_session(connection, &session)
        })
        .await
    }

    pub async fn get_session(&self, id: SessionId) -> Result<Option<SessionRow>> {
        self.read(move |connection| sessions::get_session(connection, id))
            .await
    }

    /// The account's sessions, most recently updated first.
    pub async fn list_sessions(&self, account_id: AccountId) -> Result<Vec<SessionRow>> {
        self.read(move |connection| sessions::list_sessions(connection, account_id))
            .await
    }

    /// Deletes the session with its log, store, runs, lease, edges, attachments and delegated
    /// children. Returns whether it existed. A delegated child's open run answers its parent's
    /// call with an error in the same transaction, and the parent is resumed once its other
    /// children have ended.
    pub async fn delete_session(&self, id: SessionId, now_ms: i64) -> Result<bool> {
        let deleted = self
            .write(Some(id), move |connection| {
                sessions::delete_session(connection, id, now_ms)
            })
            .await?;
        if deleted {
            self.remove_attachment_files(Some(id)).await;
        }
        Ok(deleted)
    }

    /// Removes the attachment files of deleted sessions: `only` that session's, or (at boot)
    /// every folder whose session is gone, which a crash between a delete and its files' removal
    /// left. Off the caller's thread, like every store call; a failure is logged, not returned
    /// (the delete itself has committed).
    pub async fn remove_attachment_files(&self, only: Option<SessionId>) -> usize {
        let data_dir = crate::attachments::data_dir(&self.inner.config.path);
        let removed = self
            .read(move |connection| {
                crate::attachments::remove_orphan_folders(connection, &data_dir, only)
            })
            .await;
        match removed {
            Ok(n_removed) => n_removed,
            Err(error) => {
                tracing::warn!(%error, "could not remove a deleted session's attachment files");
                0
            }
        }
    }

    /// Sets the session's title, description and who named it (the status verb, a rename by
    /// the user). Returns whether the session exists.
    pub async fn set_session_status(
        &self,
        session_id: SessionId,
        title: String,
        description: String,
        source: TitleSource,
        now_ms: i64,
    ) -> Result<bool> {
        self.write(Some(session_id), move |connection| {
            sessions::set_session_status(
                connection,
                session_id,
                &title,
                &description,
                source,
                now_ms,
            )
        })
        .await
    }

    /// The fallback namer: titles the session (as [`TitleSource::Fallback`]) only while nobody
    /// has named it, never over an agent's or a user's title. Returns whether it named it.
    pub async fn name_session_if_untitled(
        &self,
        session_id: SessionId,
        title: String,
        now_ms: i64,
    ) -> Result<bool> {
        self.write(Some(session_id), move |connection| {
            sessions::name_session_if_untitled(connection, session_id, &title, now_ms)
        })
        .await
    }

    /// Sets the session's plan (a JSON checklist), or clears it with `None`. Returns whether
    /// the session exists.
    pub async fn set_session_plan(
        &self,
        session_id: SessionId,
        plan: Option<serde_json::Value>,
        now_ms: i64,
    ) -> Result<bool> {
        self.write(Some(session_id), move |connection| {
            sessions::set_session_plan(connection, session_id, plan.as_ref(), now_ms)
        })
        .await
    }

    /// The sessions delegated from `parent`, oldest first.
    pub async fn list_child_sessions(&self, parent: SessionId) -> Result<Vec<SessionRow>> {
        self.read(move |connection| sessions::list_child_sessions(connection, parent))
            .await
    }

    // The log.

    /// Appends events to the session's log in one transaction, assigning the next seqs.
    pub async fn append_events(
        &self,
        session_id: SessionId,
        events: Vec<NewEvent>,
    ) -> Result<Vec<SessionEvent>> {
        // Serialized here, on the caller's thread: the writer only inserts.
        let rows: Vec<log::EventRow> = events.iter().map(log::EventRow::of).collect();
        let placed = self
            .write(Some(session_id), move |connection| {
                log::insert_rows(connection, session_id, &rows)
            })
            .await?;
        Ok(log::stored_events(session_id, events, &placed))
    }

    /// Events with `from_seq <= seq <= to_seq`, in order, at most `limit` of them.
    pub async fn read_events(
        &self,
        session_id: SessionId,
        from_seq: i64,
        to_seq: i64,
        limit: usize,
    ) -> Result<Vec<SessionEvent>> {
        self.read(move |connection| {
            log::read_events(connection, session_id, from_seq, to_seq, limit)
        })
        .await
    }

    /// The session's events whose seq is in `seqs` or whose id is in `ids`, in seq order (each
    /// once); ids and seqs the session lacks are skipped.
    pub async fn read_events_at(
        &self,
        session_id: SessionId,
        seqs: Vec<i64>,
        ids: Vec<EventId>,
    ) -> Result<Vec<SessionEvent>> {
        self.read(move |connection| log::read_events_at(connection, session_id, &seqs, &ids))
            .await
    }

    /// The highest `pi_entry_id` in the session's log.
    pub async fn max_pi_entry_id(&self, session_id: SessionId) -> Result<Option<i64>> {
        self.read(move |connection| log::max_pi_entry_id(connection, session_id))
            .await
    }

    /// Clears the `pi_entry_id` marks above `entry_id` (a store lost or restored from an older
    /// copy); returns how many events were cleared.
    pub async fn clear_pi_entry_ids_above(
        &self,
        session_id: SessionId,
        entry_id: i64,
    ) -> Result<usize> {
        self.write(Some(session_id), move |connection| {
            log::clear_pi_entry_ids_above(connection, session_id, entry_id)
        })
        .await
    }

    /// The session's highest seq, 0 for an empty log.
    pub async fn last_seq(&self, session_id: SessionId) -> Result<i64> {
        self.read(move |connection| log::last_seq(connection, session_id))
            .await
    }

    // Runs.

    pub async fn enqueue_run(&self, run: NewRun) -> Result<()> {
        self.write(Some(run.session_id), move |connection| {
            runs::insert_run(connection, &run)
        })
        .await
    }

    /// Claims the oldest queued run on `queue` whose session has no run in flight.
    pub async fn claim_next_run(
        &self,
        queue: Queue,
        owner: &str,
        now_ms: i64,
    ) -> Result<Option<RunRow>> {
        let owner = owner.to_owned();
        self.write(None, move |connection| {
            runs::claim_next_run(connection, queue, &owner, now_ms)
        })
        .await
    }

    /// Claims runs of several queues in one transaction: up to `max` runs of each `(queue,
    /// max)`, in that order (oldest first, one per session), each with its session's store lease
    /// taken for it (a run whose session's lease is held by someone else stays queued).
    pub async fn claim_runs_of_queues(
        &self,
        queues: Vec<(Queue, usize)>,
        owner: &str,
        now_ms: i64,
    ) -> Result<Vec<RunRow>> {
        let owner = owner.to_owned();
        self.write(None, move |connection| {
            let mut claimed = Vec::new();
            for &(queue, max) in &queues {
                claimed.extend(runs::claim_runs_leased(
                    connection, queue, &owner, max, now_ms,
                )?);
            }
            Ok(claimed)
        })
        .await
    }

    /// Moves a run to `status` (keeping its result unless a new one is given). Returns whether
    /// the run exists.
    pub async fn set_run_status(
        &self,
        id: RunId,
        status: RunStatus,
        result: Option<serde_json::Value>,
        now_ms: i64,
    ) -> Result<bool> {
        let result = result.map(|result| result.to_string());
        self.write(None, move |connection| {
            runs::set_run_status(connection, id, status, result.as_deref(), now_ms)
        })
        .await
    }

    pub async fn get_run(&self, id: RunId) -> Result<Option<RunRow>> {
        self.read(move |connection| runs::get_run(connection, id))
            .await
    }

    /// Every run left `running`, oldest first.
    pub async fn list_running_runs(&self) -> Result<Vec<RunRow>> {
        self.read(runs::list_running).await
    }

    /// Every run not yet ended (queued, running or parked), oldest first.
    pub async fn list_open_runs(&self) -> Result<Vec<RunRow>> {
        self.read(runs::list_open).await
    }

    /// How many pages the database holds (`PRAGMA page_count`): its size in pages, as
    /// `Config::max_page_count` counts them.
    pub async fn page_count(&self) -> Result<u32> {
        self.read(|connection| Ok(connection.query_row("PRAGMA page_count", [], |row| row.get(0))?))
            .await
    }

    /// SQLite's own checks of the file: `PRAGMA integrity_check` and `foreign_key_check`.
    /// Returns the problems found; empty when the database is sound.
    pub async fn check_integrity(&self) -> Result<Vec<String>> {
        self.read(|connection| {
            let mut problems = Vec::new();
            let mut integrity = connection.prepare("PRAGMA integrity_check")?;
            for row in integrity.query_map([], |row| row.get::<_, String>(0))? {
                let row = row?;
                if row != "ok" {
                    problems.push(row);
                }
            }
            let mut foreign_keys = connection.prepare("PRAGMA foreign_key_check")?;
            for row in foreign_keys.query_map([], |row| {
                Ok(format!(
                    "foreign key: {} row {} -> {}",
                    row.get::<_, String>(0)?,
                    row.get::<_, Option<i64>>(1)?.unwrap_or_default(),
                    row.get::<_, String>(2)?
                ))
            })? {
                problems.push(row?);
            }
            Ok(problems)
        })
        .await
    }

    pub async fn list_session_runs(&self, session_id: SessionId) -> Result<Vec<RunRow>> {
        self.read(move |connection| runs::list_session_runs(connection, session_id, None))
            .await
    }

    /// The session's newest `limit` runs, oldest first.
    pub async fn recent_session_runs(
        &self,
        session_id: SessionId,
        limit: usize,
    ) -> Result<Vec<RunRow>> {
        self.read(move |connection| runs::list_session_runs(connection, session_id, Some(limit)))
            .await
    }

    /// A person's message and the run that answers it, in one transaction: appends `event` to
    /// the session's log (at the next seq, as [`Store::append_events`] does), queues run
    /// `run_id` on `queue` with `user_event_ids = [event.id]`, and sets the session's
    /// `updated_at` to `now_ms`. Returns both rows as stored. A deleted session refuses the
    /// whole write; nothing of it is committed. With `claim_for` (the caller holds a slot of
    /// the queue for the run), the run is claimed for that owner in the same transaction
    /// (running, with the session's lease) when it is the session's next run and may start;
    /// otherwise it is queued.
    pub async fn send_user_message(
        &self,
        session_id: SessionId,
        event: NewEvent,
        run_id: RunId,
        queue: Queue,
        now_ms: i64,
        claim_for: Option<String>,
    ) -> Result<(SessionEvent, RunRow)> {
        let event = log::PreparedEvent::of(event);
        self.write(Some(session_id), move |connection| {
            runs::send_user_message(
                connection,
                session_id,
                &event,
                run_id,
                queue,
                now_ms,
                claim_for.as_deref(),
            )
        })
        .await
    }

    /// Starts a delegated child in one transaction: its session, the task as its first message,
    /// and its run (`run.user_event_ids` is replaced by the message's id).
    pub async fn start_child(
        &self,
        child: NewSession,
        task: NewEvent,
        run: NewRun,
    ) -> Result<(SessionEvent, RunRow)> {
        let scope = child.parent_session_id;
        self.write(scope, move |connection| {
            children::start_child(connection, &child, &task, &run)
        })
        .await
    }

    /// The runs `parent_run_id` started as children, oldest first.
    pub async fn child_runs(&self, parent_run_id: RunId) -> Result<Vec<RunRow>> {
        self.read(move |connection| children::child_runs(connection, parent_run_id))
            .await
    }

    /// Parks a run whose turn ended on a delegation, or resumes it at once when its children
    /// have all ended (one transaction, so a child that ends meanwhile is never missed).
    pub async fn park_run(&self, run_id: RunId, now_ms: i64) -> Result<ParkOutcome> {
        self.write(None, move |connection| {
            children::park_run(connection, run_id, now_ms)
        })
        .await
    }

    /// Resumes a parked run once its children have all ended; returns whether it did.
    pub async fn resume_if_children_done(&self, run_id: RunId, now_ms: i64) -> Result<bool> {
        self.write(None, move |connection| {
            children::resume_if_children_done(connection, run_id, now_ms)
        })
        .await
    }

    /// The boot sweep's step: every run left `running` counts a restart and goes back to
    /// `queued`, owner cleared and attempts kept, unless it has now been found cut off more
    /// than `restarts_max` times: then it stays `running` for the caller to fail.
    pub async fn requeue_running_runs(&self, now_ms: i64, restarts_max: i64) -> Result<Swept> {
        self.write(None, move |connection| {
            runs::requeue_running(connection, now_ms, restarts_max)
        })
        .await
    }

    /// Ends a run: [`Store::set_run_status`], except that a run already terminal (succeeded,
    /// failed, canceled) is left as it is. Returns whether the run was updated: `false` for a
    /// terminal or missing run, and then nothing was written.
    pub async fn finish_run(
        &self,
        run_id: RunId,
        status: RunStatus,
        result: Option<serde_json::Value>,
        now_ms: i64,
    ) -> Result<bool> {
        let result = result.map(|result| result.to_string());
        self.write(None, move |connection| {
            runs::finish_run(connection, run_id, status, result.as_deref(), now_ms)
        })
        .await
    }

    /// Closes a run ([`RunClosing`]): ends it and, for a delegated child, delivers its result to
    /// the parent and resumes the parent once all its children have ended; with a lease (a
    /// session and its holder), lets that lease go too. One transaction: a crash cannot leave a
    /// parent parked on a child that has ended, nor a session leased to a run that has ended.
    /// The turn's entries are in the log already (each commit of the store wrote its own).
    ///
    /// With a plan check, the session's plan as it stands in this transaction may owe a run
    /// that is still running a later pass instead ([`PlanCheck`]): then the plan's notice goes
    /// to the log, the run is queued again with its pass counted up, the lease is let go, and
    /// the end asked for (with its delivery) is not written.
    pub async fn finish_run_releasing(&self, closing: RunClosing) -> Result<RunEndOutcome> {
        let RunClosing {
            run_id,
            status,
            result,
            now_ms,
            delivery,
            lease,
            plan_check,
            notice,
        } = closing;
        let scope = lease.as_ref().map(|(session_id, _)| *session_id);
        // Serialized here, not on the writer's thread, which every session's commits wait on.
        let result = result.map(|result| result.to_string());
        let notice = notice.map(log::PreparedEvent::of);
        self.write(scope, move |connection| {
            if let Some((session_id, owner)) = &lease {
                leases::release_lease(connection, *session_id, owner)?;
            }
            // The plan is read here, in the end's own transaction, so what it owes is decided
            // from the plan as it is when the run ends. Only a run still running is resumed
            // (one stopped meanwhile is owed nothing); its notice follows the turn's entries.
            if let Some(check) = &plan_check
                && let Some(notice) =
                    (check.notice)(sessions::plan_of(connection, check.session_id)?.as_ref())
                && children::resume_run(connection, run_id, now_ms)?
            {
                let written = log::append_events(connection, check.session_id, &[notice])?;
                return Ok(RunEndOutcome::LaterPass {
                    notice_seq: written.first().map_or(0, |event| event.seq),
                });
            }
            let (ended, delivered_seq) = children::finish_run_delivering(
                connection,
                run_id,
                status,
                result.as_deref(),
                now_ms,
                delivery.as_ref(),
            )?;
            if !ended {
                return Ok(RunEndOutcome::Unchanged);
            }
            let notice_seq = match (&notice, &lease) {
                (Some(notice), Some((session_id, _))) => {
                    Some(notice.append(connection, *session_id)?.seq)
                }
                _ => None,
            };
            Ok(RunEndOutcome::Ended {
                delivered_seq,
                notice_seq,
            })
        })
        .await
    }

    /// The log events the session's queued runs (those waiting their turn) answer, flattened,
    /// in run order.
    pub async fn queued_event_ids(&self, session_id: SessionId) -> Result<Vec<EventId>> {
        self.read(move |connection| runs::queued_event_ids(connection, session_id))
            .await
    }

    /// The sessions with a run `queued`, `running` or `parked`, each once, in the order of
    /// their oldest open run.
    pub async fn list_sessions_with_open_runs(&self) -> Result<Vec<SessionId>> {
        self.read(runs::sessions_with_open_runs).await
    }

    // Leases.

    /// Takes the session's store lease for `owner`, unless another holds it.
    pub async fn acquire_lease(
        &self,
        session_id: SessionId,
        owner: &str,
        run_id: Option<RunId>,
        now_ms: i64,
    ) -> Result<LeaseOutcome> {
        let owner = owner.to_owned();
        self.write(Some(session_id), move |connection| {
            leases::acquire_lease(connection, session_id, &owner, run_id, now_ms)
        })
        .await
    }

    /// Releases the lease if `owner` holds it; returns whether it did.
    pub async fn release_lease(&self, session_id: SessionId, owner: &str) -> Result<bool> {
        let owner = owner.to_owned();
        self.write(Some(session_id), move |connection| {
            leases::release_lease(connection, session_id, &owner)
        })
        .await
    }

    pub async fn get_lease(&self, session_id: SessionId) -> Result<Option<LeaseRow>> {
        self.read(move |connection| leases::get_lease(connection, session_id))
            .await
    }

    /// Releases every lease that `owner` (this process's boot id) does not hold.
    pub async fn release_leases_not_owned_by(&self, owner: &str) -> Result<Vec<LeaseRow>> {
        let owner = owner.to_owned();
        self.write(None, move |connection| {
            leases::release_leases_not_owned_by(connection, &owner)
        })
        .await
    }

    // Continuations.

    /// Inserts an edge. A second edge for the same successor, or for the same predecessor and
    /// tool call, is refused as a duplicate.
    pub async fn insert_continuation(&self, edge: NewContinuation) -> Result<()> {
        self.write(Some(edge.predecessor_session_id), move |connection| {
            continuations::insert_continuation(connection, &edge)
        })
        .await
    }

    pub async fn find_continuation(
        &self,
        predecessor_session_id: SessionId,
        tool_call_id: &str,
    ) -> Result<Option<ContinuationRow>> {
        let tool_call_id = tool_call_id.to_owned();
        self.read(move |connection| {
            continuations::find_continuation(connection, predecessor_session_id, &tool_call_id)
        })
        .await
    }

    /// Creates a successor in one transaction: its session, the edge with its manifest, its
    /// two first events, its hard-linked attachments, and (for `transfer.plan = close`) the
    /// predecessor's plan cleared. A second successor for the same (predecessor, tool call) is
    /// refused as a duplicate; nothing of a refused creation is committed.
    pub async fn create_successor(&self, successor: NewSuccessor) -> Result<CreatedSuccessor> {
        let data_dir = crate::attachments::data_dir(&self.inner.config.path);
        self.write(
            Some(successor.edge.predecessor_session_id),
            move |connection| continuations::create_successor(connection, &data_dir, &successor),
        )
        .await
    }

    /// The edge that already carried the predecessor's message `initiating_event_id` into a
    /// successor, if any.
    pub async fn edge_from_message(
        &self,
        predecessor: SessionId,
        initiating_event_id: EventId,
    ) -> Result<Option<ContinuationRow>> {
        self.read(move |connection| {
            continuations::edge_from_message(connection, predecessor, initiating_event_id)
        })
        .await
    }

    /// Successors that never got the run for their copied message (a crash or a full disk
    /// came between their creation and the queueing of the run), oldest first: the boot sweep
    /// queues it.
    pub async fn successors_without_their_run(&self) -> Result<Vec<SessionId>> {
        self.read(continuations::successors_without_their_run).await
    }

    /// How many successors the session has.
    pub async fn count_successors(&self, predecessor: SessionId) -> Result<usize> {
        self.read(move |connection| continuations::count_successors(connection, predecessor))
            .await
    }

    /// The edge that made `successor`, if it is one.
    pub async fn edge_to(&self, successor: SessionId) -> Result<Option<ContinuationRow>> {
        self.read(move |connection| continuations::edge_to(connection, successor))
            .await
    }

    /// The session's `continued_from` and `continued_to` links (the newest successor).
    pub async fn continuation_links(
        &self,
        session_id: SessionId,
    ) -> Result<(Option<ContinuationLink>, Option<ContinuationLink>)> {
        self.read(move |connection| continuations::links(connection, session_id))
            .await
    }

    /// The session's newest message written by a user or a trigger; with `at_or_before`, the
    /// newest whose event id is at most that.
    pub async fn newest_person_message(
        &self,
        session_id: SessionId,
        at_or_before: Option<EventId>,
    ) -> Result<Option<SessionEvent>> {
        self.read(move |connection| {
            log::newest_person_message(connection, session_id, at_or_before)
        })
        .await
    }

    // Attachments.

    /// Stores an attachment's bytes under the data dir and its row.
    pub async fn add_attachment(&self, attachment: NewAttachment) -> Result<AttachmentRow> {
        let data_dir = crate::attachments::data_dir(&self.inner.config.path);
        self.write(Some(attachment.session_id), move |connection| {
            crate::attachments::add_attachment(connection, &data_dir, &attachment)
        })
        .await
    }

    /// The session's attachment `id` (`attachment:<id>` in its messages), if it has one.
    pub async fn get_attachment(
        &self,
        session_id: SessionId,
        id: &str,
    ) -> Result<Option<AttachmentRow>> {
        let id = id.to_owned();
        self.read(move |connection| crate::attachments::get_attachment(connection, session_id, &id))
            .await
    }

    pub async fn list_attachments(&self, session_id: SessionId) -> Result<Vec<AttachmentRow>> {
        self.read(move |connection| crate::attachments::list_attachments(connection, session_id))
            .await
    }

    /// Where an attachment's file is on disk.
    pub fn attachment_file(&self, attachment: &AttachmentRow) -> std::path::PathBuf {
        crate::attachments::data_dir(&self.inner.config.path).join(&attachment.path)
    }

    // Memory files.
}

/// How a run is closed, for [`Store::finish_run_releasing`].
#[derive(Debug)]
pub struct RunClosing {
    pub run_id: RunId,
    pub status: RunStatus,
    pub result: Option<serde_json::Value>,
    pub now_ms: i64,
    /// A delegated child's result for its parent, delivered in the same transaction.
    pub delivery: Option<ChildDelivery>,
    /// The session's lease and its holder, let go in the same transaction.
    pub lease: Option<(SessionId, String)>,
    /// What the session's plan may owe an answered run (a later pass instead of the end).
    pub plan_check: Option<PlanCheck>,
    /// A notice of why the run ended, for the session's log (with the lease's session), written
    /// with the end when this call ends the run.
    pub notice: Option<NewEvent>,
}

/// What a run's plan may owe it when its turn was answered: a later pass, decided in the run's
/// end transaction ([`Store::finish_run_releasing`]) from the session's plan as it stands then,
/// since a person may change the plan while the turn runs.
#[derive(Clone)]
pub struct PlanCheck {
    /// The run's session, whose plan is read.
    pub session_id: SessionId,
    /// Given the session's plan (`None` when it has none), the notice that gives the run a
    /// later pass, or `None` when the plan owes it nothing. Pure: it may run twice.
    pub notice: PlanNotice,
}

/// [`PlanCheck::notice`]: from a session's plan, the notice that gives the run a later pass.
pub type PlanNotice =
    std::sync::Arc<dyn Fn(Option<&serde_json::Value>) -> Option<NewEvent> + Send + Sync>;

impl fmt::Debug for PlanCheck {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PlanCheck")
            .field("session_id", &self.session_id)
            .finish_non_exhaustive()
    }
}

/// What [`Store::finish_run_releasing`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunEndOutcome {
    /// The run ended as asked; a child's result was delivered with it, at this seq of its
    /// parent's log (`None`: no delivery, or the parent is gone), and its notice written at
    /// `notice_seq` of its own.
    Ended {
        delivered_seq: Option<i64>,
        notice_seq: Option<i64>,
    },
    /// The run had already ended, or is gone: it was left as it was.
    Unchanged,
    /// The plan owed the run a later pass: its notice is in the log (at `notice_seq`) after
    /// the turn's entries, and the run is queued again with its pass counted up. It did not
    /// end.
    LaterPass { notice_seq: i64 },
}
