//! Named crash points: places in the shell where a test (and the simulator) can stop the world
//! as a crash would — from that point nothing more is written or seen by the task that reached
//! it. In a service the hook is absent and a point costs one branch.

use std::sync::Arc;

use seed_durable::{Append, DurableFs, FileName};

/// The named points, for tests to arm and for coverage counts.
pub mod points {
    /// A model request was sent; nothing of its response has arrived.
    pub const MODEL_REQUEST_SENT: &str = "model.request_sent";
    /// A turn's input is about to be committed to the store.
    pub const INPUT_BEFORE_COMMIT: &str = "input.before_commit";
    /// A response arrived and is about to be committed.
    pub const RESPONSE_BEFORE_COMMIT: &str = "response.before_commit";
    /// A response was committed to the store and is not yet in the log.
    pub const RESPONSE_AFTER_COMMIT: &str = "response.after_commit";
    /// A tool's intent (its task started) was committed; the tool has not run.
    pub const TOOL_INTENT_COMMITTED: &str = "tool.intent_committed";
    /// A verb ran (its effects happened); its result has not been handed back.
    pub const TOOL_MID_RUN: &str = "tool.mid_run";
    /// A tool result arrived and is about to be committed.
    pub const RESULT_BEFORE_COMMIT: &str = "result.before_commit";
    /// A tool result was committed to the store and is not yet in the log.
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
    /// A run's turn is over and its entries projected; before the run is closed.
    pub const RUN_BEFORE_FINISH: &str = "run.before_finish";

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
}

/// The points around a batch's commit, by what the batch holds.
fn commit_points(batch: &[Append]) -> (Option<&'static str>, Option<&'static str>) {
    let holds = |file: FileName, needle: &str| {
        batch
            .iter()
            .any(|append| append.file == file && append.line.contains(needle))
    };
    if holds(FileName::Entries, "\"type\":\"pi.assistant\"") {
        (
            Some(points::RESPONSE_BEFORE_COMMIT),
            Some(points::RESPONSE_AFTER_COMMIT),
        )
    } else if holds(FileName::Entries, "\"type\":\"pi.tool-result\"") {
        (
            Some(points::RESULT_BEFORE_COMMIT),
            Some(points::RESULT_AFTER_COMMIT),
        )
    } else if holds(FileName::Tasks, "\"state\":\"started\"") {
        (None, Some(points::TOOL_INTENT_COMMITTED))
    } else if holds(FileName::Entries, "\"type\":\"pi.user\"") {
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

    async fn commit(&self, batch: Vec<Append>) -> Result<(), Self::Error> {
        let (before, after) = if self.points.is_armed() {
            commit_points(&batch)
        } else {
            (None, None)
        };
        if let Some(point) = before {
            self.points.reach(point).await;
        }
        self.inner.commit(batch).await?;
        if let Some(point) = after {
            self.points.reach(point).await;
        }
        Ok(())
    }
}
