//! Named crash points: places in the shell where a test (and the simulator) can stop the world
//! as a crash would — from that point nothing more is written or seen by the task that reached
//! it. In a service the hook is absent and a point costs one branch.

use std::sync::Arc;

/// The named points, for tests to arm and for coverage counts.
pub mod points {
    /// continue_session: arguments checked, before the creation transaction.
    pub const CONTINUATION_BEFORE_CREATE: &str = "continuation.before_create";
    /// continue_session: successor, edge and events committed, before its run is queued.
    pub const CONTINUATION_AFTER_CREATE: &str = "continuation.after_create";
    /// continue_session: the successor's run queued, before the verb answers (the tool result
    /// is not committed yet).
    pub const CONTINUATION_AFTER_ENQUEUE: &str = "continuation.after_enqueue";
    /// A run's turn is over and its entries projected; before the run is closed.
    pub const RUN_BEFORE_FINISH: &str = "run.before_finish";
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
