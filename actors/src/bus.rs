//! The event bus: session-change and account-change notifications and streaming text deltas,
//! for the API to forward to subscribers.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use actix::prelude::*;
use futures::channel::{mpsc, oneshot};
use seed_events::{AccountId, RunId, RunStatus, SessionId};
use seed_store::RunRow;

/// The seqs of a session's log that a commit made visible, `from` to `to` inclusive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SeqRange {
    pub from: i64,
    pub to: i64,
}

impl SeqRange {
    /// The seqs of `events`, appended together (so consecutive); `None` for none.
    pub fn of(events: &[seed_events::SessionEvent]) -> Option<SeqRange> {
        Some(SeqRange {
            from: events.first()?.seq,
            to: events.last()?.seq,
        })
    }
}

/// Something a subscriber may want to know. Every notification follows the commit of what it
/// tells: nothing is published that a crash could take back.
#[derive(Debug, Clone, PartialEq, Message)]
#[rtype(result = "()")]
pub enum Notification {
    /// The session's log, title, runs or links changed. When events were appended to its log,
    /// `seqs` are the ones the commit made visible, so a client can fetch exactly those.
    SessionChanged {
        session_id: SessionId,
        reason: &'static str,
        seqs: Option<SeqRange>,
    },
    /// The session is gone. It names the account it belonged to, since nobody can look that
    /// up any more (the wire shows it as a session change with reason `deleted`).
    SessionDeleted {
        session_id: SessionId,
        account_id: AccountId,
    },
    /// The account's list of sessions changed, for every reason given (one change, one
    /// notification).
    AccountChanged {
        account_id: AccountId,
        reasons: Vec<&'static str>,
    },
    /// More text of the response in flight, published once the commit of `pi.live` (or of the
    /// response itself) that holds it succeeded, so a viewer never sees text a crash could
    /// lose. `offset_chars` is how much of the response's text came before it, in chars
    /// (Unicode scalar values): a client that read the text in flight can tell what it has.
    TextDelta {
        session_id: SessionId,
        run_id: RunId,
        offset_chars: usize,
        text: String,
    },
    RunFinished {
        session_id: SessionId,
        run_id: RunId,
        status: RunStatus,
    },
    /// The model asked for a tool call, which runs next: published once the response that
    /// asks for it is committed, with its `tool_call` event's seq. For clients that show calls
    /// as they run.
    ToolCall {
        session_id: SessionId,
        run_id: RunId,
        seq: i64,
        call_id: String,
        name: String,
        arguments: serde_json::Value,
    },
    /// A call waits for a person's approval: published once its run parked on the pending
    /// approval (the park and the approval's row are one commit).
    ApprovalPending {
        session_id: SessionId,
        run_id: RunId,
        call_id: String,
        name: String,
        arguments: serde_json::Value,
    },
    /// An MCP server asks the person a question during a call in flight (an elicitation):
    /// published once it is recorded pending. `call_id` is the call that asked.
    ElicitationPending {
        session_id: SessionId,
        run_id: RunId,
        call_id: String,
        name: String,
        arguments: serde_json::Value,
        message: String,
        requested_schema: serde_json::Value,
    },
}

/// Keeps the subscribers and hands every notification to each.
#[derive(Default)]
pub struct EventBus {
    subscribers: Vec<mpsc::UnboundedSender<Notification>>,
    /// How many subscribers there are, for publishers to skip what nobody would read.
    n_subscribers: Arc<AtomicUsize>,
}

impl std::fmt::Debug for EventBus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventBus").finish_non_exhaustive()
    }
}

impl Actor for EventBus {
    type Context = Context<Self>;
}

/// Asks for every notification from now on.
#[derive(Message)]
#[rtype(result = "mpsc::UnboundedReceiver<Notification>")]
#[derive(Debug)]
pub struct Subscribe;

impl Handler<Subscribe> for EventBus {
    type Result = MessageResult<Subscribe>;

    fn handle(&mut self, _: Subscribe, _: &mut Context<Self>) -> Self::Result {
        let (sender, receiver) = mpsc::unbounded();
        self.subscribers.push(sender);
        self.n_subscribers
            .store(self.subscribers.len(), Ordering::Relaxed);
        MessageResult(receiver)
    }
}

impl Handler<Notification> for EventBus {
    type Result = ();

    fn handle(&mut self, notification: Notification, _: &mut Context<Self>) {
        // A subscriber that went away is dropped here.
        self.subscribers
            .retain(|subscriber| subscriber.unbounded_send(notification.clone()).is_ok());
        self.n_subscribers
            .store(self.subscribers.len(), Ordering::Relaxed);
    }
}

/// A handle for publishing; cheap to clone.
#[derive(Clone)]
pub struct Publisher {
    bus: Addr<EventBus>,
    n_subscribers: Arc<AtomicUsize>,
    waiters: Arc<RunWaiters>,
}

impl std::fmt::Debug for Publisher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Publisher").finish_non_exhaustive()
    }
}

impl Publisher {
    /// Starts a bus and returns its publisher. Call inside a running actix system.
    pub fn start() -> Publisher {
        let n_subscribers = Arc::new(AtomicUsize::new(0));
        let bus = EventBus {
            subscribers: Vec::new(),
            n_subscribers: Arc::clone(&n_subscribers),
        }
        .start();
        Publisher {
            bus,
            n_subscribers,
            waiters: Arc::default(),
        }
    }

    /// Whether anyone subscribes: a publisher may skip making a notification nobody reads.
    pub fn is_listened_to(&self) -> bool {
        self.n_subscribers.load(Ordering::Relaxed) > 0
    }

    pub fn publish(&self, notification: Notification) {
        if let Notification::RunFinished { run_id, .. } = &notification {
            self.waiters.wake(*run_id, None);
        }
        // Text deltas are many: none are sent while nobody listens.
        if !self.is_listened_to() {
            return;
        }
        // Notifications are advisory: a full or stopped bus loses them, never the caller.
        self.bus.do_send(notification);
    }

    /// Resolves when `run_id` is reported finished (or the runtime goes away), with the run as
    /// it was recorded when the one who ended it knows that. Register before looking at the
    /// run, so a run that ends in between is not missed.
    pub fn run_finished(&self, run_id: RunId) -> oneshot::Receiver<Option<RunRow>> {
        self.waiters.register(run_id)
    }

    /// Drops the waits for `run_id` whose waiter went away: one registered for a run that was
    /// never queued would otherwise stay registered for good.
    pub fn forget_run_waiters(&self, run_id: RunId) {
        self.waiters.forget_canceled(run_id);
    }

    /// How many runs have someone registered to wait for them.
    pub fn n_runs_waited_for(&self) -> usize {
        self.waiters.lock().len()
    }

    /// Reports that `run` ended, recorded as it is: its waiters have it without reading it.
    pub fn run_ended(&self, run: RunRow) {
        let notification = Notification::RunFinished {
            session_id: run.session_id,
            run_id: run.id,
            status: run.status,
        };
        self.waiters.wake(run.id, Some(run));
        self.publish(notification);
    }

    pub async fn subscribe(&self) -> Option<mpsc::UnboundedReceiver<Notification>> {
        self.bus.send(Subscribe).await.ok()
    }
}

/// Who waits for which run: woken directly when it finishes, without a bus subscription each.
#[derive(Default)]
struct RunWaiters {
    waiting: Mutex<HashMap<RunId, Vec<oneshot::Sender<Option<RunRow>>>>>,
}

impl RunWaiters {
    fn register(&self, run_id: RunId) -> oneshot::Receiver<Option<RunRow>> {
        let (sender, receiver) = oneshot::channel();
        self.lock().entry(run_id).or_default().push(sender);
        receiver
    }

    fn wake(&self, run_id: RunId, run: Option<RunRow>) {
        for waiter in self.lock().remove(&run_id).unwrap_or_default() {
            let _ = waiter.send(run.clone());
        }
    }

    fn forget_canceled(&self, run_id: RunId) {
        let mut waiting = self.lock();
        if let Some(waiters) = waiting.get_mut(&run_id) {
            waiters.retain(|waiter| !waiter.is_canceled());
            if waiters.is_empty() {
                waiting.remove(&run_id);
            }
        }
    }

    #[allow(clippy::type_complexity)]
    fn lock(
        &self,
    ) -> std::sync::MutexGuard<'_, HashMap<RunId, Vec<oneshot::Sender<Option<RunRow>>>>> {
        self.waiting
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}
