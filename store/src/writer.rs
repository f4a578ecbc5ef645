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
    /// Jobs run again because PostgreSQL ended their transaction to break a conflict with
    /// another lane's or node's (a deadlock).
    pub n_conflicts_retried: AtomicU64,
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

/// The handle the store keeps; dropping it stops the threads after the jobs already sent.
pub(crate) struct Writer {
    /// One lane on SQLite; on PostgreSQL [`Config::writer_lanes`], each a connection with a
    /// thread of its own. A session's jobs always go to the same lane ([`Writer::lane_of`]).
    lanes: Vec<Lane>,
    /// Jobs sent to a thread and not yet answered, and holds not yet released ([`InFlight`]),
    /// over every lane. A caller commits on its own thread only while this is 0, so it never
    /// overtakes a write sent before it.
    in_flight: Arc<AtomicUsize>,
    /// How callers wait for their outcomes (shared with the readers).
    replies: Arc<Replies>,
    pub(crate) stats: Arc<WriterStats>,
    /// Set by [`Writer::fence`]: nothing more is committed, on any lane.
    fenced: Arc<AtomicBool>,
}

/// Which of `n_lanes` lanes commits the jobs of `session_id`: the same one every time, spread
/// evenly; the first for a job of no session.
fn lane_index(n_lanes: usize, session_id: Option<SessionId>) -> usize {
    use std::hash::{BuildHasher as _, BuildHasherDefault};
    match (n_lanes, session_id) {
        (0 | 1, _) | (_, None) => 0,
        (n_lanes, Some(session_id)) => {
            let hash = BuildHasherDefault::<std::collections::hash_map::DefaultHasher>::default()
                .hash_one(session_id);
            (hash % n_lanes as u64) as usize
        }
    }
}

/// One writing connection and the thread that commits its groups.
struct Lane {
    /// `None` inline ([`Config::inline`]): no thread, and every job commits on its caller's.
    sender: Option<Sender<Message>>,
    thread: Option<JoinHandle<()>>,
    /// The connection and what commits on it: locked by the thread for each group, and by a
    /// caller that commits on its own thread ([`Writer::lone_caller_lock`]).
    core: Arc<Mutex<WriterCore>>,
}

impl Writer {
    pub(crate) fn start(
        connection: Connection,
        config: &Config,
        replies: Arc<Replies>,
        fencing: &Arc<crate::nodes::Fencing>,
    ) -> Result<Writer> {
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
        let n_lanes = match config.inline {
            true => 1,
            false => config.writer_lanes.max(1),
        };
        let mut connections = vec![(connection, checkpointer)];
        while connections.len() < n_lanes {
            match Connection::open_lane(config)? {
                Some(lane) => connections.push((lane, None)),
                None => break,
            }
        }
        let lanes = connections
            .into_iter()
            .map(|(connection, checkpointer)| {
                let core = Arc::new(Mutex::new(WriterCore {
                    checkpointer,
                    fenced: Arc::clone(&fenced),
                    fencing: (connection.engine() == crate::Engine::Postgres)
                        .then(|| Arc::clone(fencing)),
                    node_row_held: std::cell::Cell::new(false),
                    round_trips_counted: std::cell::Cell::new(0),
                    connection,
                    batch_mode: config.batch_mode,
                    stats: Arc::clone(&stats),
                    faults: config.faults.clone(),
                }));
                Lane::start(core, config)
            })
            .collect::<Result<Vec<Lane>>>()?;
        Ok(Writer {
            lanes,
            in_flight,
            replies,
            stats,
            fenced,
        })
    }

    /// The lane that commits the jobs of `scope`: a session's always the same one, and a job
    /// of no session the first.
    fn lane_of(&self, scope: Scope) -> &Lane {
        &self.lanes[lane_index(self.lanes.len(), scope.session_id)]
    }

    /// Queues `apply` and waits for its group to commit.
    pub(crate) async fn write<T, F>(&self, scope: Scope, apply: F) -> Result<T>
    where
        F: FnMut(&Connection) -> Result<T> + Send + 'static,
        T: Send + 'static,
    {
        self.write_on(self.lane_of(scope), scope, apply).await
    }

    /// Runs `apply` on every lane's connection, one lane after the other, each in a
    /// transaction of its lane's: for what each connection must hold (a setting of its
    /// session's).
    pub(crate) async fn write_on_every_lane<T, F>(&self, apply: F) -> Result<Vec<T>>
    where
        F: FnMut(&Connection) -> Result<T> + Clone + Send + 'static,
        T: Send + 'static,
    {
        let mut outputs = Vec::with_capacity(self.lanes.len());
        for lane in &self.lanes {
            outputs.push(self.write_on(lane, Scope::default(), apply.clone()).await?);
        }
        Ok(outputs)
    }

    async fn write_on<T, F>(&self, lane: &Lane, scope: Scope, apply: F) -> Result<T>
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
        if let Some(job) = self.commit_here(lane, job).await? {
            let in_flight = InFlight::new(&self.in_flight);
            self.send(lane, Message::Job(Box::new(SentJob { job, in_flight })))?;
        }
        outcome.await.map_err(|_| Error::Closed)?
    }

    /// Commits `job` alone on the caller's thread when that is allowed (inline, or
    /// [`Writer::lone_caller_lock`]); otherwise hands it back, to be sent to `lane`'s thread.
    async fn commit_here(&self, lane: &Lane, job: Box<dyn Job>) -> Result<Option<Box<dyn Job>>> {
        let core = if lane.sender.is_none() {
            lane.core.lock().map_err(|_| Error::Closed)?
        } else {
            match self.lone_caller_lock(lane).await? {
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
    async fn lone_caller_lock<'lane>(
        &self,
        lane: &'lane Lane,
    ) -> Result<Option<MutexGuard<'lane, WriterCore>>> {
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
        let core = lane.core.lock().map_err(|_| Error::Closed)?;
        // Checked again under the lock: a job sent meanwhile goes first.
        Ok((self.in_flight.load(Ordering::SeqCst) == 0).then_some(core))
    }

    /// Stops the writer between two groups (every lane) until the returned hold is dropped.
    /// Jobs sent meanwhile wait and then commit together: tests use it to put chosen jobs in
    /// one group. Inline, there is no group to hold jobs for: the hold does nothing.
    pub(crate) fn hold(&self) -> Result<WriterHold> {
        let mut releases = Vec::with_capacity(self.lanes.len());
        for lane in &self.lanes {
            let (started_sender, started) = crossbeam_channel::bounded(1);
            let (release, release_receiver) = crossbeam_channel::bounded(0);
            releases.push(release);
            if lane.sender.is_none() {
                continue;
            }
            self.send(
                lane,
                Message::Hold {
                    started: started_sender,
                    release: release_receiver,
                    // In flight from now, so that no caller commits on its own thread under
                    // the hold.
                    in_flight: InFlight::new(&self.in_flight),
                },
            )?;
            started.recv().map_err(|_| Error::Closed)?;
        }
        Ok(WriterHold {
            _releases: releases,
        })
    }

    /// Jobs sent and not yet taken up by the writer.
    pub(crate) fn queued(&self) -> usize {
        self.lanes
            .iter()
            .filter_map(|lane| lane.sender.as_ref())
            .map(Sender::len)
            .sum()
    }

    /// The flag [`Writer::fence`] sets, for a job that fences the writer after itself.
    pub(crate) fn fence_flag(&self) -> Arc<AtomicBool> {
        Arc::clone(&self.fenced)
    }

    /// Stops every commit from now on, as a crash would: see [`crate::Store::fence`].
    pub(crate) fn fence(&self) {
        self.fenced.store(true, Ordering::SeqCst);
    }

    fn send(&self, lane: &Lane, message: Message) -> Result<()> {
        if self.fenced.load(Ordering::SeqCst) {
            return Err(Error::Closed);
        }
        lane.sender
            .as_ref()
            .ok_or(Error::Closed)?
            .send(message)
            .map_err(|_| Error::Closed)
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        for lane in &mut self.lanes {
            lane.sender = None;
        }
        for lane in &mut self.lanes {
            if let Some(thread) = lane.thread.take()
                && thread.join().is_err()
            {
                tracing::error!("a store writer thread panicked");
            }
        }
        // The connection closes when the last handle on the core goes, which is this one.
        if self.fenced.load(Ordering::SeqCst) {
            for lane in &self.lanes {
                if let Ok(core) = lane.core.lock() {
                    core.skip_close_checkpoint();
                }
            }
        }
    }
}

impl Lane {
    /// The lane of `core`, with its thread (none inline).
    fn start(core: Arc<Mutex<WriterCore>>, config: &Config) -> Result<Lane> {
        if config.inline {
            return Ok(Lane {
                sender: None,
                thread: None,
                core,
            });
        }
        let (sender, receiver) = crossbeam_channel::unbounded();
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
        Ok(Lane {
            sender: Some(sender),
            thread: Some(thread),
            core,
        })
    }
}

/// Keeps the writer stopped between groups while it lives. See [`crate::Store::hold_writer`].
#[derive(Debug)]
pub struct WriterHold {
    /// One per lane.
    _releases: Vec<Sender<()>>,
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
mod tests;
