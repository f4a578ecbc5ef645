//! [`Store`]: the handle the rest of Seed holds — opening, the writer and reader plumbing, and
//! what belongs to no table; each table's methods live in its own module. Writes go through
//! the one writer, reads through the pool; every method is async and never blocks the caller's
//! thread on SQLite.

use std::fmt;
use std::sync::Arc;

use crate::params;
use crate::sql::Connection;
use seed_events::SessionId;

use crate::readers::Readers;
use crate::writer::{Scope, Writer};
use crate::{Config, Result, SessionFiles, WriterHold, WriterStats};

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
    fencing: Arc<crate::nodes::Fencing>,
    /// Recalls recorded since the store opened, for `/metrics` (`recalls`).
    n_recalls: std::sync::atomic::AtomicU64,
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
        let connection = crate::sql::Connection::open_writer(&config)?;
        // One count of waiting callers for both: a caller spins only while it waits alone.
        let replies = Arc::new(crate::spin::Replies::new(config.spin));
        let fencing = Arc::new(crate::nodes::Fencing::default());
        let writer = Writer::start(connection, &config, Arc::clone(&replies), &fencing)?;
        let readers = Readers::start(&config, replies)?;
        Ok(Store {
            inner: Arc::new(Inner {
                readers,
                writer,
                config,
                fencing,
                n_recalls: std::sync::atomic::AtomicU64::new(0),
            }),
        })
    }

    pub fn config(&self) -> &Config {
        &self.inner.config
    }

    pub(crate) fn fencing(&self) -> &crate::nodes::Fencing {
        &self.inner.fencing
    }

    pub(crate) fn recall_counter(&self) -> &std::sync::atomic::AtomicU64 {
        &self.inner.n_recalls
    }

    /// Notes the run's session as leased by this process when the run is running for this
    /// node: its writes are fenced from then on (see `nodes`).
    pub(crate) fn note_claimed(&self, run: &crate::RunRow) {
        let fencing = self.fencing();
        if run.status == seed_events::RunStatus::Running
            && fencing
                .node()
                .is_some_and(|node| run.owner.as_deref() == Some(node.id.as_str()))
        {
            fencing.hold(run.session_id);
        }
    }

    /// The writer's counters.
    pub fn writer_stats(&self) -> &WriterStats {
        &self.inner.writer.stats
    }

    /// How many times the store's readers waited on the database server's answers:
    /// PostgreSQL's round trips, 0 on SQLite.
    pub fn reader_round_trips(&self) -> u64 {
        self.inner.readers.n_round_trips()
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

    /// Runs `apply` on each of the writer's connections (one on SQLite, a lane each on
    /// PostgreSQL), in a transaction of its own; the outputs in lane order.
    pub(crate) async fn write_on_every_connection<T, F>(&self, apply: F) -> Result<Vec<T>>
    where
        F: FnMut(&Connection) -> Result<T> + Clone + Send + 'static,
        T: Send + 'static,
    {
        self.inner.writer.write_on_every_lane(apply).await
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
        F: FnMut(&Connection) -> Result<T> + Send + 'static,
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

    /// Whether the database answers: one `SELECT 1` through a reader, so that a health check
    /// costs one round trip and never waits behind the writer.
    pub async fn ping(&self) -> Result<()> {
        self.read(|connection| {
            connection
                .prepare_cached("SELECT 1")?
                .query_row(params![], |_| Ok(()))
        })
        .await
    }

    /// How many pages the database holds (`PRAGMA page_count`): its size in pages, as
    /// `Config::max_page_count` counts them.
    pub async fn page_count(&self) -> Result<u32> {
        self.read(|connection| {
            connection.query_row("PRAGMA page_count", params![], |row| row.get(0))
        })
        .await
    }

    /// SQLite's own checks of the file: `PRAGMA integrity_check` and `foreign_key_check`.
    /// Returns the problems found; empty when the database is sound.
    pub async fn check_integrity(&self) -> Result<Vec<String>> {
        self.read(integrity_problems).await
    }
}

/// SQLite's `PRAGMA integrity_check` and `foreign_key_check` on `connection`: the problems
/// found, empty when the database is sound.
pub(crate) fn integrity_problems(connection: &Connection) -> Result<Vec<String>> {
    let mut problems = Vec::new();
    let mut integrity = connection.prepare("PRAGMA integrity_check")?;
    for row in integrity.query_map(params![], |row| row.get::<_, String>(0))? {
        let row = row?;
        if row != "ok" {
            problems.push(row);
        }
    }
    let mut foreign_keys = connection.prepare("PRAGMA foreign_key_check")?;
    for row in foreign_keys.query_map(params![], |row| {
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
}
