//! The event bus: session-change and account-change notifications and streaming text deltas,
//! for the API to forward to subscribers.

use actix::prelude::*;
use futures::channel::mpsc;
use seed_events::{AccountId, RunId, RunStatus, SessionId};

/// Something a subscriber may want to know.
#[derive(Debug, Clone, PartialEq, Message)]
#[rtype(result = "()")]
pub enum Notification {
    /// The session's log, title, runs or links changed.
    SessionChanged {
        session_id: SessionId,
        reason: &'static str,
    },
    /// The account's list of sessions changed.
    AccountChanged {
        account_id: AccountId,
        reason: &'static str,
    },
    /// More text of the response in flight (never stored as such: the log gets the whole).
    TextDelta {
        session_id: SessionId,
        run_id: RunId,
        text: String,
    },
    RunFinished {
        session_id: SessionId,
        run_id: RunId,
        status: RunStatus,
    },
}

/// Keeps the subscribers and hands every notification to each.
#[derive(Default)]
pub struct EventBus {
    subscribers: Vec<mpsc::UnboundedSender<Notification>>,
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
        MessageResult(receiver)
    }
}

impl Handler<Notification> for EventBus {
    type Result = ();

    fn handle(&mut self, notification: Notification, _: &mut Context<Self>) {
        // A subscriber that went away is dropped here.
        self.subscribers
            .retain(|subscriber| subscriber.unbounded_send(notification.clone()).is_ok());
    }
}

/// A handle for publishing; cheap to clone.
#[derive(Clone)]
pub struct Publisher {
    bus: Addr<EventBus>,
}

impl std::fmt::Debug for Publisher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Publisher").finish_non_exhaustive()
    }
}

impl Publisher {
    pub fn new(bus: Addr<EventBus>) -> Publisher {
        Publisher { bus }
    }

    pub fn publish(&self, notification: Notification) {
        // Notifications are advisory: a full or stopped bus loses them, never the caller.
        self.bus.do_send(notification);
    }

    pub async fn subscribe(&self) -> Option<mpsc::UnboundedReceiver<Notification>> {
        self.bus.send(Subscribe).await.ok()
    }
}
