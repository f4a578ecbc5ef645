//! The one writer: the only writing connection, and a thread that commits the jobs waiting for
//! it together, one transaction for many sessions (group commit). The connection sits behind a
//! lock the thread takes per group; a lone caller that no tokio runtime drives takes it itself
//! and commits its job alone on its own thread, when nothing sent to the thread is unfinished
//! ([`Writer::lone_caller_lock`]).
//!
//! A job is a closure over the open transaction. It may run more than once: when a group fails
//! (a job refused, or the commit itself), the group is rolled back and each job is redone in a
//! transaction of its own, so a refused job fails alone and the others commit.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::sql::Connection;
use crossbeam_channel::{Receiver, Sender, TryRecvError};
use futures::channel::oneshot;
use seed_events::SessionId;

use crate::checkpoint::Checkpointer;
use crate::spin::Replies;
use crate::{Config, Error, Result};

mod group;

use group::WriterCore;
#[cfg(test)]
use group::sort_commuting_runs;

/// What a job writes for: named in its errors, and used to order it within a group.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Scope {
    pub(crate) session_id: Option<SessionId>,
    /// Set when the job only appends rows of the session with this key. Such jobs commute
    /// with those of other sessions, so the writer sorts a run of them by key (keeping each
    /// session's own order): their rows then go into neighbouring index pages, which makes a
    /// group of many sessions measurably cheaper to commit (docs/design/group-commit.md).
    pub(crate) append_key: Option<i64>,
}

impl Scope {
    pub(crate) fn session(session_id: SessionId) -> Scope {
        Scope {
            session_id: Some(session_id),
            append_key: None,
        }
    }
}

/// One unit of work for the writer.
pub(crate) trait Job: Send {
    fn scope(&self) -> Scope;
    /// Runs the job's statements inside the open transaction. May be called again after a
    /// rollback, so it must not consume what it writes.
    fn apply(&mut self, connection: &Connection) -> Result<()>;
    /// Hands the outcome to whoever is waiting.
    fn finish(self: Box<Self>, outcome: Result<()>);
}

struct FnJob<F, T> {
    scope: Scope,
    apply: F,
    output: Option<T>,
    reply: oneshot::Sender<Result<T>>,
}

impl<F, T> Job for FnJob<F, T>
where
    F: FnMut(&Connection) -> Result<T> + Send,
    T: Send,
{
    fn scope(&self) -> Scope {
        self.scope
    }

    fn apply(&mut self, connection: &Connection) -> Result<()> {
        self.output = Some((self.apply)(connection)?);
        Ok(())
    }

    fn finish(self: Box<Self>, outcome: Result<()>) {
        let FnJob { output, reply, .. } = *self;
        let result = outcome.and_then(|()| {
            output.ok_or_else(|| Error::corrupt("writer", "a job finished without output"))
        });
        // The caller may have stopped waiting; its write stands either way.
        let _ = reply.send(result);
    }
}

enum Message {
    Job(Box<dyn Job>),
    /// Stop between groups until `release` is dropped; `started` says the writer has stopped.
    Hold {
        started: Sender<()>,
        release: Receiver<()>,
        /// Counts the hold in flight until the thread drops it, after the release.
        in_flight: InFlight,
    },
}

/// Counts a job or hold sent to the thread in [`Writer::in_flight`] while it lives.
struct InFlight(Arc<AtomicUsize>);

impl InFlight {
    fn new(counter: &Arc<AtomicUsize>) -> InFlight {
        counter.fetch_add(1, Ordering::SeqCst);
        InFlight(Arc::clone(counter))
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// A job sent to the thread: in flight until its outcome goes to its caller (or it is dropped
/// unanswered), so that a caller answered can commit its next job on its own thread.
struct SentJob {
    job: Box<dyn Job>,
    in_flight: InFlight,
}

impl Job for SentJob {
    fn scope(&self) -> Scope {
        self.job.scope()
    }

    fn apply(&mut self, connection: &Connection) -> Result<()> {
        self.job.apply(connection)
    }

    fn finish(self: Box<Self>, outcome: Result<()>) {
        let SentJob { job, in_flight } = *self;
        drop(in_flight);
        job.finish(outcome);
    }
}

/// Counters of the writer's work, for the bench and `/metrics`.
#[derive(Debug, Default)]
pub struct WriterStats {
    /// Transactions committed (groups and redone jobs alike).
    pub n_commits: AtomicU64,
    /// Jobs that ended committed.
    pub n_jobs_committed: AtomicU64,
    /// Jobs the database refused.
    pub n_jobs_refused: AtomicU64,
    /// Groups that failed and were redone job by job.
    pub n_groups_redone: AtomicU64,
    /// How long each `COMMIT` took (the step's durable write), for `/metrics`.
    pub commit_latency: LatencyHistogram,
    /// How many times the writer waited on the database server's answers (PostgreSQL's round
    /// trips; 0 on SQLite).
    pub n_round_trips: AtomicU64,
}

/// A latency histogram in fixed buckets, lock-free, in the Prometheus shape.
#[derive(Debug, Default)]
pub struct LatencyHistogram {
    /// Observations at or below each of [`LatencyHistogram::BOUNDS_US`], then above them all.
    buckets: [AtomicU64; 12],
    sum_ns: AtomicU64,
}

impl LatencyHistogram {
    /// The buckets' upper bounds, in microseconds.
    pub const BOUNDS_US: [u64; 11] = [
        50, 100, 250, 500, 1_000, 2_500, 5_000, 10_000, 25_000, 50_000, 100_000,
    ];

    pub fn observe(&self, elapsed: Duration) {
        let micros = elapsed.as_micros() as u64;
        let idx = Self::BOUNDS_US
            .iter()
            .position(|bound| micros <= *bound)
            .unwrap_or(Self::BOUNDS_US.len());
        self.buckets[idx].fetch_add(1, Ordering::Relaxed);
        self.sum_ns
            .fetch_add(elapsed.as_nanos() as u64, Ordering::Relaxed);
    }

    /// Cumulative counts by upper bound in seconds (the last is +Inf), the sum in seconds and
    /// the count.
    pub fn snapshot(&self) -> (Vec<(f64, u64)>, f64, u64) {
        let mut cumulative = 0;
        let mut buckets = Vec::with_capacity(self.buckets.len());
        for (idx, bucket) in self.buckets.iter().enumerate() {
            cumulative += bucket.load(Ordering::Relaxed);
            let bound = Self::BOUNDS_US
                .get(idx)
                .map_or(f64::INFINITY, |micros| *micros as f64 / 1e6);
            buckets.push((bound, cumulative));
        }
        let sum = self.sum_ns.load(Ordering::Relaxed) as f64 / 1e9;
        (buckets, sum, cumulative)
    }
}

/// The handle the store keeps; dropping it stops the thread after the jobs already sent.
pub(crate) struct Writer {
    /// `None` inline ([`Config::inline`]): no thread, and every job commits on its caller's.
    sender: Option<Sender<Message>>,
    thread: Option<JoinHandle<()>>,
    /// The connection and what commits on it: locked by the thread for each group, and by a
    /// caller that commits on its own thread ([`Writer::lone_caller_lock`]).
    core: Arc<Mutex<WriterCore>>,
    /// Jobs sent to the thread and not yet answered, and holds not yet released
    /// ([`InFlight`]). A caller commits on its own thread only while this is 0, so it never
    /// overtakes a write sent before it.
    in_flight: Arc<AtomicUsize>,
    /// How callers wait for their outcomes (shared with the readers).
    replies: Arc<Replies>,
    pub(crate) stats: Arc<WriterStats>,
    /// Set by [`Writer::fence`]: nothing more is committed.
    fenced: Arc<AtomicBool>,
}

impl Writer {
    pub(crate) fn start(
        connection: Connection,
        config: &Config,
        replies: Arc<Replies>,
        fencing: &Arc<crate::nodes::Fencing>,
    ) -> Result<Writer> {
        let (sender, receiver) = crossbeam_channel::unbounded();
        let stats = Arc::new(WriterStats::default());
        let fenced = Arc::new(AtomicBool::new(false));
        let in_flight = Arc::new(AtomicUsize::new(0));
        // Inline (one thread for everything) and in memory (no WAL), SQLite checkpoints on
        // the writer's connection as usual.
        let checkpointer = match connection.sqlite() {
            Some(sqlite) if !config.inline && !crate::memory_disk::is_memory(config) => {
                Some(Checkpointer::start(sqlite, config)?)
            }
            _ => None,
        };
        let core = Arc::new(Mutex::new(WriterCore {
            checkpointer,
            fenced: Arc::clone(&fenced),
            fencing: (connection.engine() == crate::Engine::Postgres).then(|| Arc::clone(fencing)),
            node_row_held: std::cell::Cell::new(false),
            connection,
            batch_mode: config.batch_mode,
            stats: Arc::clone(&stats),
            faults: config.faults.clone(),
        }));
        if config.inline {
            return Ok(Writer {
                sender: None,
                thread: None,
                core,
                in_flight,
                replies,
                stats,
                fenced,
            });
        }
        let mut thread = WriterThread {
            core: Arc::clone(&core),
            receiver,
            commit_batch_jobs_max: config.commit_batch_jobs_max.max(1),
            gather_gap: config.gather_gap,
            gather_max: config.gather_max,
            spin: config.spin,
        };
        let thread = std::thread::Builder::new()
            .name("seed-store-writer".to_owned())
            .spawn(move || thread.run())?;
        Ok(Writer {
            sender: Some(sender),
            thread: Some(thread),
            core,
            in_flight,
            replies,
            stats,
            fenced,
        })
    }

    /// Queues `apply` and waits for its group to commit.
    pub(crate) async fn write<T, F>(&self, scope: Scope, apply: F) -> Result<T>
    where
        F: FnMut(&Connection) -> Result<T> + Send + 'static,
        T: Send + 'static,
    {
        let (reply, outcome) = oneshot::channel();
        let job = Box::new(FnJob {
            scope,
            apply,
            output: None,
            reply,
        });
        // Counted as waiting from here on, so that callers asking together see each other.
        let outcome = self.replies.wait(outcome);
        if let Some(job) = self.commit_here(job).await? {
            let in_flight = InFlight::new(&self.in_flight);
            self.send(Message::Job(Box::new(SentJob { job, in_flight })))?;
        }
        outcome.await.map_err(|_| Error::Closed)?
    }

    /// Commits `job` alone on the caller's thread when that is allowed (inline, or
    /// [`Writer::lone_caller_lock`]); otherwise hands it back, to be sent to the thread.
    async fn commit_here(&self, job: Box<dyn Job>) -> Result<Option<Box<dyn Job>>> {
        let core = if self.sender.is_none() {
            self.core.lock().map_err(|_| Error::Closed)?
        } else {
            match self.lone_caller_lock().await? {
                Some(core) => core,
                None => return Ok(Some(job)),
            }
        };
        if self.fenced.load(Ordering::SeqCst) {
            return Err(Error::Closed);
        }
        core.commit_and_checkpoint(vec![job]);
        Ok(None)
    }

    /// The connection, for a caller that may commit on its own thread: one that no tokio
    /// runtime drives (actix is one), so blocking it on SQLite holds up no actor or request
    /// handler (their threads never qualify); that no other caller of the store waits for,
    /// before and after one yield to its executor (whose other tasks ask for their writes
    /// meanwhile); while no job or hold sent to the thread is unfinished, so the job overtakes
    /// nothing. `None` otherwise. A lone caller then pays no
    /// hand-off between threads, which costs more than the commit itself on a busy virtual
    /// machine (docs/design/group-commit.md); callers asking together still commit as a group.
    async fn lone_caller_lock(&self) -> Result<Option<MutexGuard<'_, WriterCore>>> {
        if tokio::runtime::Handle::try_current().is_ok() {
            return Ok(None);
        }
        let lone = || self.replies.alone() && self.in_flight.load(Ordering::SeqCst) == 0;
        if !lone() {
            return Ok(None);
        }
        // Off any runtime, this wakes the task at once: its executor polls its other ready
        // tasks first.
        tokio::task::yield_now().await;
        if !lone() {
            return Ok(None);
        }
        // Held at most while the thread finishes a group whose jobs are all answered (its
        // checkpoint share), or by another lone caller: the thread would wait for it as well.
        let core = self.core.lock().map_err(|_| Error::Closed)?;
        // Checked again under the lock: a job sent meanwhile goes first.
        Ok((self.in_flight.load(Ordering::SeqCst) == 0).then_some(core))
    }

    /// Stops the writer between two groups until the returned hold is dropped. Jobs sent
    /// meanwhile wait and then commit together: tests use it to put chosen jobs in one group.
    /// Inline, there is no group to hold jobs for: the hold does nothing.
    pub(crate) fn hold(&self) -> Result<WriterHold> {
        let (started_sender, started) = crossbeam_channel::bounded(1);
        let (release, release_receiver) = crossbeam_channel::bounded(0);
        if self.sender.is_none() {
            return Ok(WriterHold { _release: release });
        }
        self.send(Message::Hold {
            started: started_sender,
            release: release_receiver,
            // In flight from now, so that no caller commits on its own thread under the hold.
            in_flight: InFlight::new(&self.in_flight),
        })?;
        started.recv().map_err(|_| Error::Closed)?;
        Ok(WriterHold { _release: release })
    }

    /// Jobs sent and not yet taken up by the writer.
    pub(crate) fn queued(&self) -> usize {
        self.sender.as_ref().map_or(0, Sender::len)
    }

    /// The flag [`Writer::fence`] sets, for a job that fences the writer after itself.
    pub(crate) fn fence_flag(&self) -> Arc<AtomicBool> {
        Arc::clone(&self.fenced)
    }

    /// Stops every commit from now on, as a crash would: see [`crate::Store::fence`].
    pub(crate) fn fence(&self) {
        self.fenced.store(true, Ordering::SeqCst);
    }

    fn send(&self, message: Message) -> Result<()> {
        if self.fenced.load(Ordering::SeqCst) {
            return Err(Error::Closed);
        }
        self.sender
            .as_ref()
            .ok_or(Error::Closed)?
            .send(message)
            .map_err(|_| Error::Closed)
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        self.sender = None;
        if let Some(thread) = self.thread.take()
            && thread.join().is_err()
        {
            tracing::error!("the store writer thread panicked");
        }
        // The connection closes when the last handle on the core goes, which is this one.
        if self.fenced.load(Ordering::SeqCst)
            && let Ok(core) = self.core.lock()
        {
            core.skip_close_checkpoint();
        }
    }
}

/// Keeps the writer stopped between groups while it lives. See [`crate::Store::hold_writer`].
#[derive(Debug)]
pub struct WriterHold {
    _release: Sender<()>,
}

/// The thread's side: gathers the jobs sent to it into groups and commits each on the core.
struct WriterThread {
    core: Arc<Mutex<WriterCore>>,
    receiver: Receiver<Message>,
    commit_batch_jobs_max: usize,
    gather_gap: Duration,
    gather_max: Duration,
    spin: Duration,
}

impl WriterThread {
    fn run(&mut self) {
        let mut group: Vec<Box<dyn Job>> = Vec::with_capacity(self.commit_batch_jobs_max);
        // A lone committer (the last group had one job) is not kept waiting for company that
        // is not coming; after a real group, the writer waits for the next one to gather.
        let mut gather_gap = Duration::ZERO;
        while let Some(first) = self.next_message() {
            let mut hold = self.push(&mut group, first);
            let gather_started = Instant::now();
            while hold.is_none()
                && group.len() < self.commit_batch_jobs_max
                && gather_started.elapsed() < self.gather_max
            {
                match self.poll_for(gather_gap) {
                    Some(message) => hold = self.push(&mut group, message),
                    None => break,
                }
            }
            gather_gap = if group.len() > 1 {
                self.gather_gap
            } else {
                Duration::ZERO
            };
            if !group.is_empty() {
                match self.core.lock() {
                    Ok(core) => core.commit_and_checkpoint(std::mem::take(&mut group)),
                    // A caller's job panicked on its own thread: the jobs go unanswered, and
                    // their callers are told the store is closed.
                    Err(_) => group.clear(),
                }
            }
            if let Some((started, release, _in_flight)) = hold {
                let _ = started.send(());
                // Returns when the hold is dropped.
                let _ = release.recv();
            }
        }
        if let Ok(mut core) = self.core.lock() {
            if core.fenced.load(Ordering::SeqCst) {
                core.skip_close_checkpoint();
            }
            // Its connection closes first, so that this one, closing last, checkpoints the WAL.
            core.checkpointer = None;
        }
    }

    /// The next message: polled for `spin`, then waited for. `None` once every sender is gone
    /// and the queue is drained.
    fn next_message(&self) -> Option<Message> {
        self.poll_for(self.spin)
            .or_else(|| self.receiver.recv().ok())
    }

    /// A message that arrives within `window`, polling without parking the thread.
    fn poll_for(&self, window: Duration) -> Option<Message> {
        let started = Instant::now();
        loop {
            match self.receiver.try_recv() {
                Ok(message) => return Some(message),
                Err(TryRecvError::Disconnected) => return None,
                Err(TryRecvError::Empty) if started.elapsed() >= window => return None,
                Err(TryRecvError::Empty) => std::hint::spin_loop(),
            }
        }
    }

    /// Adds a job to the group, or returns a hold to serve after the group.
    fn push(
        &self,
        group: &mut Vec<Box<dyn Job>>,
        message: Message,
    ) -> Option<(Sender<()>, Receiver<()>, InFlight)> {
        match message {
            Message::Job(job) => {
                group.push(job);
                None
            }
            Message::Hold {
                started,
                release,
                in_flight,
            } => Some((started, release, in_flight)),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::task::Context;

    use super::*;
    use crate::params;

    /// A job that does nothing; its session id says which one it is.
    struct Probe(Scope);

    impl Job for Probe {
        fn scope(&self) -> Scope {
            self.0
        }
        fn apply(&mut self, _: &Connection) -> Result<()> {
            Ok(())
        }
        fn finish(self: Box<Self>, _: Result<()>) {}
    }

    #[test]
    fn appends_sort_by_session_within_runs_and_keep_each_sessions_order() {
        // (probe number, append key): None is a job that may depend on what came before.
        let probes = [
            (0, Some(3)),
            (1, Some(1)),
            (2, Some(3)),
            (3, None),
            (4, Some(2)),
            (5, Some(1)),
            (6, Some(1)),
        ];
        let mut group: Vec<Box<dyn Job>> = probes
            .iter()
            .map(|&(number, append_key)| {
                Box::new(Probe(Scope {
                    session_id: Some(SessionId::from_u128(number)),
                    append_key,
                })) as Box<dyn Job>
            })
            .collect();
        sort_commuting_runs(&mut group);
        let order: Vec<SessionId> = group
            .iter()
            .filter_map(|job| job.scope().session_id)
            .collect();
        let expected: Vec<SessionId> = [1, 0, 2, 3, 5, 6, 4]
            .into_iter()
            .map(SessionId::from_u128)
            .collect();
        assert_eq!(order, expected);
    }

    /// Which thread ran a write, and the write's row landed.
    fn thread_of_a_write(store: &crate::Store) -> impl Future<Output = Result<String>> + use<> {
        let store = store.clone();
        async move {
            let name = store
                .write(None, |connection| {
                    connection.execute_batch(
                        "CREATE TABLE IF NOT EXISTS probe (x INTEGER); INSERT INTO probe VALUES (1)",
                    )?;
                    Ok(std::thread::current().name().unwrap_or("").to_owned())
                })
                .await?;
            let n_rows: i64 = store
                .read(|connection| {
                    connection.query_row("SELECT count(*) FROM probe", params![], |row| row.get(0))
                })
                .await?;
            assert!(n_rows >= 1, "the write landed");
            Ok(name)
        }
    }

    fn open_store(dir: &tempfile::TempDir) -> crate::Store {
        crate::Store::open(Config::new(dir.path().join("store.db"))).expect("opens")
    }

    #[test]
    fn a_lone_caller_off_any_async_runtime_commits_on_its_own_thread() {
        let dir = tempfile::tempdir().expect("a temp dir");
        let store = open_store(&dir);
        let here = std::thread::current().name().unwrap_or("").to_owned();
        let ran_on = futures::executor::block_on(thread_of_a_write(&store)).expect("writes");
        assert_eq!(ran_on, here);
        assert_eq!(store.writer_stats().n_commits.load(Ordering::Relaxed), 1);
    }

    #[test]
    fn a_caller_on_an_async_runtime_hands_its_write_to_the_thread() {
        let dir = tempfile::tempdir().expect("a temp dir");
        let store = open_store(&dir);
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("a runtime");
        let ran_on = runtime.block_on(thread_of_a_write(&store)).expect("writes");
        assert_eq!(ran_on, "seed-store-writer");
    }

    #[test]
    fn a_caller_never_overtakes_what_was_sent_to_the_thread_before_it() {
        let dir = tempfile::tempdir().expect("a temp dir");
        let store = open_store(&dir);
        // A hold counts as sent: while it lasts, a write waits in the queue.
        let hold = store.hold_writer().expect("holds");
        let mut write = Box::pin(thread_of_a_write(&store));
        let mut context = Context::from_waker(futures::task::noop_waker_ref());
        for _ in 0..3 {
            assert!(
                write.as_mut().poll(&mut context).is_pending(),
                "the write committed under the hold"
            );
        }
        assert_eq!(store.queued_writes(), 1);
        drop(hold);
        let ran_on = futures::executor::block_on(write).expect("writes");
        assert_eq!(ran_on, "seed-store-writer");
        // With nothing left in flight, the next lone write commits on this thread again.
        let here = std::thread::current().name().unwrap_or("").to_owned();
        let ran_on = futures::executor::block_on(thread_of_a_write(&store)).expect("writes");
        assert_eq!(ran_on, here);
    }

    #[test]
    fn tasks_of_one_executor_asking_together_commit_on_the_thread() {
        let dir = tempfile::tempdir().expect("a temp dir");
        let store = open_store(&dir);
        let mut pool = futures::executor::LocalPool::new();
        let spawner = pool.spawner();
        let firsts = (0..8)
            .map(|_| {
                let store = store.clone();
                futures::task::LocalSpawnExt::spawn_local_with_handle(&spawner, async move {
                    thread_of_a_write(&store).await
                })
                .expect("spawns")
            })
            .collect::<Vec<_>>();
        for ran_on in pool.run_until(futures::future::join_all(firsts)) {
            assert_eq!(ran_on.expect("writes"), "seed-store-writer");
        }
    }
}
