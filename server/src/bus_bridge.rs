//! The bus between the nodes of one PostgreSQL database: what a turn on one node publishes on
//! its bus reaches the subscribers of every other node, so a client sees a session the same
//! from whichever node it is connected to.
//!
//! Two tasks per node:
//! - the sender (`outgoing`) reads the node's own bus and sends each notification as a notice
//!   ([`seed_store::notices`]) on a connection of its own. One sender per node, so the others
//!   hear its notices in the order it published them. A notification is published after the
//!   commit of what it tells, so a notice never tells of anything a crash could take back.
//! - the receiver (`incoming`) listens to the notices of every node, skips its own, and publishes the
//!   others' on the node's bus, where the subscribers' forwarder (`subscribers::forward`)
//!   delivers them like its own. Where notices may have been missed (a connection lost and made
//!   again, a reader behind, a sender that lost some), it publishes a change, without seqs, of
//!   every session and account it heard of, so each subscriber re-reads them from the log.
//!
//! What the receiver publishes comes back to the sender through the bus; the sender skips
//! those (they are in `Echoes`), so a notice is never sent on again.
//!
//! Text deltas: the bus counts a response's text in chars, a notice in bytes (it is split on
//! byte counts). The sender keeps, per run, the chars and bytes of the response it has sent so
//! far; the receiver keeps what it has heard so far, and a chunk that does not continue it is a
//! gap in that run's text: the receiver drops it and what follows until the next response
//! starts (offset 0), and has subscribers re-read the session once.

mod incoming;
mod outgoing;

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use seed_actors::bus::{Notification, Publisher};
use seed_events::RunId;
use seed_store::notices::{CHANNEL, Listener, NOTICES_BUFFERED_MAX_DEFAULT, Notifier, Sent};

use incoming::publish_others;
use outgoing::send_own;

/// The reasons a session changes for, as the bus names them: a reason heard from another node
/// is published as the one of these it names (the bus holds `&'static str`).
const SESSION_REASONS: &[&str] = &[
    "action",
    "approval",
    "child-result",
    "continued",
    "continued-from",
    "events",
    "forked",
    "forked-from",
    "message",
    "model",
    "run-finished",
    "schedule-cancelled",
    "scheduled-wakeup",
];

/// What a session change of a reason not in [`SESSION_REASONS`] is published as (a peer of a
/// newer version): a change that has subscribers re-read the session.
const SESSION_REASON_OTHER: &str = "events";

/// The reasons an account's list of sessions changes for, as the bus names them.
const ACCOUNT_REASONS: &[&str] = &[
    "session-continued",
    "session-created",
    "session-deleted",
    "session-forked",
    "session-updated",
];

/// What an account change of a reason not in [`ACCOUNT_REASONS`] is published as.
const ACCOUNT_REASON_OTHER: &str = "session-updated";

/// Runs whose streamed text either side keeps count of; past it, it forgets them all (the
/// receiver then has subscribers re-read a run whose text goes on).
const RUNS_TRACKED_MAX: usize = 65_536;

/// Notifications the receiver published that the sender has not seen come back yet; past it
/// (a bus that stopped), they are forgotten.
const ECHOES_MAX: usize = 65_536;

/// The bridge of one node; dropping it stops both its tasks.
#[derive(Debug)]
pub struct BusBridge {
    sender: tokio::task::AbortHandle,
    receiver: tokio::task::AbortHandle,
    sent: Arc<Sent>,
}

impl BusBridge {
    /// The notices this node's sender has sent to the other nodes so far, and the batches
    /// (statements, each its own transaction) that carried them.
    pub fn sent(&self) -> (u64, u64) {
        (self.sent.notices(), self.sent.statements())
    }

    /// The counts [`BusBridge::sent`] reads, shared: they go on counting while the bridge runs.
    pub fn sent_counts(&self) -> Arc<Sent> {
        Arc::clone(&self.sent)
    }
}

impl Drop for BusBridge {
    fn drop(&mut self) {
        self.sender.abort();
        self.receiver.abort();
    }
}

/// Starts the bridge of node `node_id` (its notices' origin: printable ASCII, no spaces, at
/// most 64 bytes) between `publisher`'s bus and the database `database_url` names. `wake` asks
/// this node's queue to look for runs: called when another node tells of something that may
/// have queued one (a message, a child's result, a wake-up, a decision, a successor) or freed
/// one to run (a run's end), so that a run the node that queued it has no room for starts here
/// at once rather than at this node's next renewal. Returns once it listens and can send, so
/// nothing published after it returns is missed; an error when the database cannot be
/// reached. Call inside a tokio runtime (an actix system is one).
pub async fn start(
    publisher: Publisher,
    node_id: &str,
    database_url: &str,
    wake: impl Fn() + Send + 'static,
) -> anyhow::Result<BusBridge> {
    let notifier = Notifier::connect(database_url, CHANNEL, node_id).await?;
    let listener = Listener::connect(database_url, CHANNEL, NOTICES_BUFFERED_MAX_DEFAULT).await?;
    let bus = publisher
        .subscribe()
        .await
        .ok_or_else(|| anyhow::anyhow!("the bus stopped before its bridge started"))?;
    let echoes = Echoes::default();
    let sent = notifier.sent();
    let sender = tokio::spawn(send_own(bus, notifier, echoes.clone())).abort_handle();
    let receiver = tokio::spawn(publish_others(
        listener,
        node_id.to_owned(),
        publisher,
        echoes,
        wake,
    ))
    .abort_handle();
    Ok(BusBridge {
        sender,
        receiver,
        sent,
    })
}

/// What the receiver published, in order, until the sender sees it come back on the bus.
#[derive(Debug, Clone, Default)]
struct Echoes(Arc<Mutex<VecDeque<Notification>>>);

impl Echoes {
    fn push(&self, notification: Notification) {
        let mut echoes = self.lock();
        if echoes.len() >= ECHOES_MAX {
            echoes.clear();
        }
        echoes.push_back(notification);
    }

    /// Whether `notification` is one the receiver published (and forgets it). A notification
    /// of this node's own equal to one is taken for it, which sends the same thing once.
    fn take(&self, notification: &Notification) -> bool {
        let mut echoes = self.lock();
        match echoes.iter().position(|echo| echo == notification) {
            Some(at) => {
                echoes.remove(at);
                true
            }
            None => false,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, VecDeque<Notification>> {
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// Where each run's response text is, counted both ways: in the unit its pieces' offsets come
/// in, and in the unit they go on in (chars and bytes, one way or the other).
#[derive(Debug, Default)]
struct RunTexts {
    /// The text so far, `(in, out)`; `None` once a piece did not continue it, until the run's
    /// next response starts (offset 0).
    runs: HashMap<RunId, Option<(u64, u64)>>,
}

/// Where a piece of a run's text goes.
#[derive(Debug, PartialEq, Eq)]
enum Placed {
    /// At this offset, counted the other way.
    At(u64),
    /// It does not continue the text: the first such piece of a response has the session
    /// re-read; it and the rest of the response are dropped.
    Gap,
    /// A later piece of a response that had a gap: dropped.
    Dropped,
}

impl RunTexts {
    /// Places the piece at `offset` (counted the way it came) whose length is `lengths`
    /// (`(in, out)`), and notes the text as continued by it.
    fn place(&mut self, run_id: RunId, offset: u64, lengths: (u64, u64)) -> Placed {
        let at = match self.runs.get(&run_id) {
            _ if offset == 0 => Some(0),
            Some(Some((so_far, at))) if *so_far == offset => Some(*at),
            _ => None,
        };
        if self.runs.len() >= RUNS_TRACKED_MAX && !self.runs.contains_key(&run_id) {
            self.runs.clear();
        }
        match at {
            Some(at) => {
                self.runs
                    .insert(run_id, Some((offset + lengths.0, at + lengths.1)));
                Placed::At(at)
            }
            None => match self.runs.insert(run_id, None) {
                Some(None) => Placed::Dropped,
                _ => Placed::Gap,
            },
        }
    }

    /// Forgets an ended run.
    fn end(&mut self, run_id: RunId) {
        self.runs.remove(&run_id);
    }
}

#[cfg(test)]
mod tests {
    use seed_events::SessionId;

    use super::incoming::Incoming;
    use super::outgoing::Outgoing;
    use super::*;

    #[test]
    fn a_delta_s_char_offsets_become_byte_offsets_and_back() {
        let (session_id, run_id) = (SessionId::new_v7(), RunId::new_v7());
        let mut outgoing = Outgoing::default();
        let mut incoming = Incoming::default();
        let mut offset_chars = 0;
        for text in ["héllo ", "wörld ✓ ", "🦀 and more", ""] {
            for notice in outgoing.notices(Notification::TextDelta {
                session_id,
                run_id,
                offset_chars,
                text: text.to_owned(),
            }) {
                assert_eq!(
                    incoming.notifications(notice),
                    vec![Notification::TextDelta {
                        session_id,
                        run_id,
                        offset_chars,
                        text: text.to_owned(),
                    }]
                );
            }
            offset_chars += text.chars().count();
        }
    }
}
