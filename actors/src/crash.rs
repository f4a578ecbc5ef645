//! Named crash points: places in the shell where a test (and the simulator) can stop the world
//! as a crash would — from that point nothing more is written or seen by the task that reached
//! it. In a service the hook is absent and a point costs one branch.

use std::sync::Arc;

use futures::StreamExt;
use futures::stream::BoxStream;
use seed_providers::{Provider, Request, StreamEvent};

use seed_durable::record::{Task, ToolTaskState};
use seed_durable::{Append, Batch, DurableFs, EntryBody, FileName};

/// The named points, for tests to arm and for coverage counts.
pub mod points {
    /// A model request was sent; nothing of its response has arrived.
    pub const MODEL_REQUEST_SENT: &str = "model.request_sent";
    /// A turn's input is about to be committed to the store.
    pub const INPUT_BEFORE_COMMIT: &str = "input.before_commit";
    /// A response arrived and is about to be committed.
    pub const RESPONSE_BEFORE_COMMIT: &str = "response.before_commit";
    /// A response was committed to the store, and its events to the log with it.
    pub const RESPONSE_AFTER_COMMIT: &str = "response.after_commit";
    /// A tool's intent (its task started) was committed; the tool has not run.
    pub const TOOL_INTENT_COMMITTED: &str = "tool.intent_committed";
    /// A verb ran (its effects happened); its result has not been handed back.
    pub const TOOL_MID_RUN: &str = "tool.mid_run";
    /// A tool result arrived and is about to be committed.
    pub const RESULT_BEFORE_COMMIT: &str = "result.before_commit";
    /// A tool result was committed to the store, and its event to the log with it.
    pub const RESULT_AFTER_COMMIT: &str = "result.after_commit";
    /// The boot sweep released the old leases and has not requeued the runs yet.
    pub const BOOT_SWEEP_BETWEEN: &str = "boot.sweep_between";
    /// continue_session: arguments checked, before the creation transaction.
    pub const CONTINUATION_BEFORE_CREATE: &str = "continuation.before_create";
    /// continue_session: successor, edge and events committed, before its run is queued.
    pub const CONTINUATION_AFTER_CREATE: &str = "continuation.after_create";
    /// continue_session: the successor's run queued, before the verb answers (the tool result
    /// is not committed yet).
    pub const CONTINUATION_AFTER_ENQUEUE: &str = "continuation.after_enqueue";
    /// A run's turn is over (its entries in the log); before the run is closed.
    pub const RUN_BEFORE_FINISH: &str = "run.before_finish";
    /// A person's fork: the point checked and the copy read, before the creation transaction.
    pub const FORK_BEFORE_CREATE: &str = "fork.before_create";
    /// A person's fork: session, log, attachments and edge committed, before anyone is told.
    pub const FORK_AFTER_CREATE: &str = "fork.after_create";

    /// Every named point.
    pub const ALL: [&str; 13] = [
        MODEL_REQUEST_SENT,
        INPUT_BEFORE_COMMIT,
        RESPONSE_BEFORE_COMMIT,
        RESPONSE_AFTER_COMMIT,
        TOOL_INTENT_COMMITTED,
        TOOL_MID_RUN,
        RESULT_BEFORE_COMMIT,
        RESULT_AFTER_COMMIT,
        BOOT_SWEEP_BETWEEN,
        CONTINUATION_BEFORE_CREATE,
        CONTINUATION_AFTER_CREATE,
        CONTINUATION_AFTER_ENQUEUE,
        RUN_BEFORE_FINISH,
    ];

    /// The points of a person's fork. Apart from [`ALL`], the points a turn, a continuation
    /// and a boot pass through, which the simulation (which makes no forks) fires and the
    /// service's `--crash-at` takes: a fork is a request, not a turn; its crash test arms these.
    pub const FORK: [&str; 2] = [FORK_BEFORE_CREATE, FORK_AFTER_CREATE];
}

type Hook = Arc<dyn Fn(&'static str) -> bool + Send + Sync>;

/// The crash hook: called with each point reached; `true` crashes there.
#[derive(Clone, Default)]
pub struct CrashPoints(Option<Hook>);

impl std::fmt::Debug for CrashPoints {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("CrashPoints")
            .field(&self.0.as_ref().map(|_| "armed"))
            .finish()
    }
}

impl CrashPoints {
    /// Crash points that call `hook` at every point reached; it returns whether to crash there.
    pub fn new(hook: impl Fn(&'static str) -> bool + Send + Sync + 'static) -> CrashPoints {
        CrashPoints(Some(Arc::new(hook)))
    }

    /// Whether a hook is set (a service has none).
    pub fn is_armed(&self) -> bool {
        self.0.is_some()
    }

    /// Reaches `point`: returns at once, or — when the hook says crash — never, so the task
    /// writes nothing more (the test then drops the whole actor system).
    pub async fn reach(&self, point: &'static str) {
        if let Some(hook) = &self.0
            && hook(point)
        {
            futures::future::pending::<()>().await;
        }
    }
}

/// A durable file system whose commits reach the crash points around them: the commit of a
/// turn's input, of a response, of a tool's intent, of a result. Without a hook it is the
/// inner file system.
#[derive(Debug, Clone)]
pub struct CrashFs<F> {
    inner: F,
    points: CrashPoints,
}

impl<F> CrashFs<F> {
    pub fn new(inner: F, points: CrashPoints) -> CrashFs<F> {
        CrashFs { inner, points }
    }

    /// The files it wraps.
    pub fn inner(&self) -> &F {
        &self.inner
    }
}

/// The points around a batch's commit, by what the batch holds.
fn commit_points(batch: &Batch) -> (Option<&'static str>, Option<&'static str>) {
    let holds = |matches: fn(&EntryBody) -> bool| batch.entries().iter().any(|e| matches(&e.body));
    if holds(|body| matches!(body, EntryBody::Assistant { .. })) {
        (
            Some(points::RESPONSE_BEFORE_COMMIT),
            Some(points::RESPONSE_AFTER_COMMIT),
        )
    } else if holds(|body| matches!(body, EntryBody::ToolResult { .. })) {
        (
            Some(points::RESULT_BEFORE_COMMIT),
            Some(points::RESULT_AFTER_COMMIT),
        )
    } else if batch.tasks().iter().any(|task| {
        matches!(
            task,
            Task::Tool {
                state: ToolTaskState::Started,
                ..
            }
        )
    }) {
        (None, Some(points::TOOL_INTENT_COMMITTED))
    } else if holds(|body| matches!(body, EntryBody::User { .. })) {
        (Some(points::INPUT_BEFORE_COMMIT), None)
    } else {
        (None, None)
    }
}

impl<F: DurableFs> DurableFs for CrashFs<F> {
    type Error = F::Error;

    fn read(
        &self,
        file: FileName,
    ) -> impl std::future::Future<Output = Result<Vec<String>, Self::Error>> + Send {
        self.inner.read(file)
    }

    fn open_lines(
        &self,
    ) -> impl std::future::Future<Output = Result<seed_durable::OpenLines, Self::Error>> + Send
    {
        self.inner.open_lines()
    }

    fn keep(
        &self,
        kept: &seed_durable::Kept,
    ) -> impl std::future::Future<Output = Result<(), Self::Error>> + Send {
        self.inner.keep(kept)
    }

    /// Lines committed other than by the harness pass no point.
    fn commit(
        &self,
        batch: Vec<Append>,
    ) -> impl std::future::Future<Output = Result<(), Self::Error>> + Send {
        self.inner.commit(batch)
    }

    async fn commit_batch(&self, batch: &Batch) -> Result<(), Self::Error> {
        let (before, after) = if self.points.is_armed() {
            commit_points(batch)
        } else {
            (None, None)
        };
        if let Some(point) = before {
            self.points.reach(point).await;
        }
        self.inner.commit_batch(batch).await?;
        if let Some(point) = after {
            self.points.reach(point).await;
        }
        Ok(())
    }
}

/// A provider whose requests reach [`points::MODEL_REQUEST_SENT`] once sent. Without a hook it
/// is the inner provider.
pub struct CrashProvider {
    inner: Arc<dyn Provider>,
    points: CrashPoints,
}

impl std::fmt::Debug for CrashProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CrashProvider").finish_non_exhaustive()
    }
}

impl CrashProvider {
    pub fn new(inner: Arc<dyn Provider>, points: CrashPoints) -> CrashProvider {
        CrashProvider { inner, points }
    }
}

impl Provider for CrashProvider {
    fn takes_images(&self, model: &str) -> bool {
        self.inner.takes_images(model)
    }

    fn stream(&self, request: Request) -> BoxStream<'static, StreamEvent> {
        let stream = self.inner.stream(request);
        if !self.points.is_armed() {
            return stream;
        }
        // The request has left; a crash here loses its response before any of it arrives.
        let points = self.points.clone();
        futures::stream::once(async move {
            points.reach(points::MODEL_REQUEST_SENT).await;
        })
        .filter_map(|()| futures::future::ready(None))
        .chain(stream)
        .boxed()
    }
}
