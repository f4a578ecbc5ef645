//! How the writer commits a group of jobs on its one connection: one transaction for the
//! group (optimistic, or a savepoint per job), each job after its fencing check; a group that
//! fails is rolled back and each job redone alone, so a refused job fails alone; the WAL
//! checkpointed after. The thread that gathers the groups is `writer`'s.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use seed_events::SessionId;

use super::{Job, WriterStats};
use crate::checkpoint::Checkpointer;
use crate::error::classify;
use crate::params;
use crate::sql::Connection;
use crate::{BatchMode, Error, Result};

/// How many times a job alone is run again after PostgreSQL ended its transaction to break a
/// conflict (see [`Error::is_conflict`]).
const CONFLICT_RETRIES: u32 = 3;

/// The writing connection and what commits on it, behind the writer's lock.
pub(super) struct WriterCore {
    /// Checkpoints the WAL, mostly on a thread of its own; `None` leaves it to SQLite on this
    /// connection.
    pub(super) checkpointer: Option<Checkpointer>,
    pub(super) fenced: Arc<AtomicBool>,
    /// Checks each write of a session this node leases (PostgreSQL only; see `nodes`).
    pub(super) fencing: Option<Arc<crate::nodes::Fencing>>,
    /// Whether the open transaction holds this node's row `FOR SHARE` from a fencing check
    /// that passed: the later checks of the transaction need not ask again (see
    /// `Fencing::check`). Cleared when a transaction begins and when what took it is rolled
    /// back.
    pub(super) node_row_held: std::cell::Cell<bool>,
    /// The connection's round trips already added to [`WriterStats::n_round_trips`], which
    /// counts every lane's.
    pub(super) round_trips_counted: std::cell::Cell<u64>,
    pub(super) connection: Connection,
    pub(super) batch_mode: BatchMode,
    pub(super) stats: Arc<WriterStats>,
    pub(super) faults: Option<crate::config::FaultInjector>,
}

impl WriterCore {
    /// A fenced store is left as a crashed process leaves it: WAL not checkpointed on close.
    pub(super) fn skip_close_checkpoint(&self) {
        let Some(sqlite) = self.connection.sqlite() else {
            return;
        };
        if let Err(error) = sqlite.set_db_config(
            rusqlite::config::DbConfig::SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE,
            true,
        ) {
            tracing::warn!(%error, "could not turn off the close-time checkpoint");
        }
    }

    /// Commits the group, then (its callers have their replies) does the checkpoint's share
    /// that falls to the writer: it delays the next group only.
    pub(super) fn commit_and_checkpoint(&self, group: Vec<Box<dyn Job>>) {
        self.commit_group(group);
        let n_round_trips = self.connection.n_round_trips();
        self.stats.n_round_trips.fetch_add(
            n_round_trips.saturating_sub(self.round_trips_counted.replace(n_round_trips)),
            Ordering::Relaxed,
        );
        if let Some(checkpointer) = &self.checkpointer
            && let Some(sqlite) = self.connection.sqlite()
        {
            checkpointer.after_commit(sqlite);
        }
    }

    fn commit_group(&self, mut group: Vec<Box<dyn Job>>) {
        if self.fenced.load(Ordering::SeqCst) {
            // Fenced: the group is never committed; dropping it tells its callers the store
            // is closed, and closing the connection will skip the checkpoint.
            self.skip_close_checkpoint();
            drop(group);
            return;
        }
        if group.len() == 1 {
            if let Some(job) = group.pop() {
                self.commit_alone(job);
            }
            return;
        }
        sort_commuting_runs(&mut group);
        let outcomes = match self.batch_mode {
            BatchMode::Optimistic => self.try_group_optimistic(&mut group),
            BatchMode::Savepoint => self.try_group_savepoints(&mut group),
        };
        match outcomes {
            Some(outcomes) => {
                self.stats.n_commits.fetch_add(1, Ordering::Relaxed);
                for (job, outcome) in group.into_iter().zip(outcomes) {
                    self.finish(job, outcome);
                }
            }
            None => {
                self.stats.n_groups_redone.fetch_add(1, Ordering::Relaxed);
                for job in group {
                    self.commit_alone(job);
                }
            }
        }
    }

    /// All jobs in one transaction with no savepoints. `None`: something failed and the group
    /// was rolled back.
    fn try_group_optimistic(&self, group: &mut [Box<dyn Job>]) -> Option<Vec<Result<()>>> {
        self.begin().ok()?;
        for job in group.iter_mut() {
            if self.apply(job).is_err() {
                self.rollback();
                return None;
            }
        }
        if self.commit().is_err() {
            self.rollback();
            return None;
        }
        Some(group.iter().map(|_| Ok(())).collect())
    }

    /// Each job in a savepoint of one transaction. `None`: the transaction itself was lost
    /// (rolled back by SQLite, or the commit failed).
    fn try_group_savepoints(&self, group: &mut [Box<dyn Job>]) -> Option<Vec<Result<()>>> {
        self.begin().ok()?;
        let mut outcomes = Vec::with_capacity(group.len());
        for job in group.iter_mut() {
            if self.connection.execute_batch("SAVEPOINT job").is_err() {
                self.rollback();
                return None;
            }
            // The answers of what the job sent unanswered are read before its savepoint is
            // released, so that an error among them fails this job alone.
            match self
                .apply(job)
                .and_then(|()| self.connection.read_answers())
            {
                Ok(()) => {
                    if self.connection.execute_batch("RELEASE job").is_err() {
                        self.rollback();
                        return None;
                    }
                    outcomes.push(Ok(()));
                }
                Err(error) => {
                    // SQLite rolls back the whole transaction on some errors (a full disk
                    // among them): then the earlier jobs are gone too, and all are redone.
                    // A lock the job took goes with its savepoint.
                    self.node_row_held.set(false);
                    if self.connection.is_autocommit()
                        || self
                            .connection
                            .execute_batch("ROLLBACK TO job; RELEASE job")
                            .is_err()
                    {
                        self.rollback();
                        return None;
                    }
                    outcomes.push(Err(self.classify(error, job.scope().session_id)));
                }
            }
        }
        if self.commit().is_err() {
            self.rollback();
            return None;
        }
        Some(outcomes)
    }

    /// Runs the job in the open transaction, after its fencing check.
    fn apply(&self, job: &mut Box<dyn Job>) -> Result<()> {
        if let Some(fencing) = &self.fencing {
            fencing.check(
                &self.connection,
                job.scope().session_id,
                &self.node_row_held,
            )?;
        }
        job.apply(&self.connection)
    }

    /// Commits the job in a transaction of its own. A transaction PostgreSQL ended to break a
    /// conflict with another writer's (another lane's or node's) is run again, a few times; so
    /// is, once, one that met its connection closed (the server restarted, or cut it off, and
    /// this connection had not noticed yet) before its `COMMIT` was sent: nothing of it was
    /// committed, and the next `BEGIN` opens a connection anew. A `COMMIT` that meets the
    /// connection closed is not run again: it may have committed.
    fn commit_alone(&self, mut job: Box<dyn Job>) {
        let mut n_conflicts = 0;
        let mut reconnected = false;
        let outcome = loop {
            let mut committing = false;
            let outcome = self.begin().and_then(|()| {
                self.apply(&mut job)?;
                committing = true;
                self.commit()
            });
            match outcome {
                Ok(()) => {
                    self.stats.n_commits.fetch_add(1, Ordering::Relaxed);
                    break Ok(());
                }
                Err(error) => {
                    self.rollback();
                    if error.is_conflict() && n_conflicts < CONFLICT_RETRIES {
                        n_conflicts += 1;
                        self.stats
                            .n_conflicts_retried
                            .fetch_add(1, Ordering::Relaxed);
                        tracing::debug!(%error, "store write run again after a conflict");
                        continue;
                    }
                    if error.is_connection_closed() && !committing && !reconnected {
                        reconnected = true;
                        tracing::info!(%error, "a write met its connection closed; writing again");
                        continue;
                    }
                    break Err(self.classify(error, job.scope().session_id));
                }
            }
        };
        self.finish(job, outcome);
    }

    fn finish(&self, job: Box<dyn Job>, outcome: Result<()>) {
        let counter = match &outcome {
            Ok(()) => &self.stats.n_jobs_committed,
            Err(error) => {
                tracing::warn!(session_id = ?job.scope().session_id, %error, "store write refused");
                &self.stats.n_jobs_refused
            }
        };
        counter.fetch_add(1, Ordering::Relaxed);
        job.finish(outcome);
    }

    fn classify(&self, error: Error, session_id: Option<SessionId>) -> Error {
        classify(error, session_id, |session_id| {
            crate::sessions::session_exists(&self.connection, session_id).unwrap_or(true)
        })
    }

    /// Begins the group's transaction. On PostgreSQL nothing waits on it: it goes to the
    /// server with the first statement that is waited on (see `Statement::send`).
    fn begin(&self) -> Result<()> {
        self.node_row_held.set(false);
        self.connection
            .prepare_cached(match self.connection.engine() {
                crate::Engine::Sqlite => "BEGIN IMMEDIATE",
                crate::Engine::Postgres => "BEGIN",
            })?
            .send(params![])
    }

    fn commit(&self) -> Result<()> {
        if let Some(fault) = self.faults.as_ref().and_then(|faults| (faults.0)()) {
            let (code, text) = match fault {
                crate::config::Fault::DiskFull => (
                    rusqlite::ffi::SQLITE_FULL,
                    "an injected fault: the disk is full",
                ),
                crate::config::Fault::Io => (
                    rusqlite::ffi::SQLITE_IOERR,
                    "an injected fault: disk I/O error",
                ),
            };
            return Err(Error::Sqlite(rusqlite::Error::SqliteFailure(
                rusqlite::ffi::Error::new(code),
                Some(text.to_owned()),
            )));
        }
        let started = Instant::now();
        self.connection
            .prepare_cached("COMMIT")?
            .execute(params![])?;
        self.stats.commit_latency.observe(started.elapsed());
        Ok(())
    }

    fn rollback(&self) {
        self.node_row_held.set(false);
        if !self.connection.is_autocommit()
            && let Err(error) = self.connection.execute_batch("ROLLBACK")
        {
            tracing::error!(%error, "store writer could not roll back");
        }
    }
}

/// Sorts each run of consecutive append-only jobs by session key, stably. Other jobs stay where
/// they are and bound the runs, since a later job may depend on an earlier one.
pub(super) fn sort_commuting_runs(group: &mut [Box<dyn Job>]) {
    for run in group.split_mut(|job| job.scope().append_key.is_none()) {
        run.sort_by_key(|job| job.scope().append_key);
    }
}
