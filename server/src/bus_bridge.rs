//! The bus between the nodes of one PostgreSQL database: what a turn on one node publishes on
//! its bus reaches the subscribers of every other node, so a client sees a session the same
//! from whichever node it is connected to.
//!
//! Two tasks per node:
//! - the sender reads the node's own bus and sends each notification as a notice
//!   ([`seed_store::notices`]) on a connection of its own. One sender per node, so the others
//!   hear its notices in the order it published them. A notification is published after the
//!   commit of what it tells, so a notice never tells of anything a crash could take back.
//! - the receiver listens to the notices of every node, skips its own, and publishes the
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

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex};

use futures::StreamExt as _;
use futures::channel::mpsc::UnboundedReceiver;
use seed_actors::bus::{Notification, Publisher, SeqRange};
use seed_events::{AccountId, RunId, SessionId};
use seed_store::notices::{
    Batch, CHANNEL, Heard, Listener, NOTICES_BUFFERED_MAX_DEFAULT, Notice, Notifier, Sent,
};

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

/// Sessions and accounts the receiver remembers hearing of, to have them re-read after a gap;
/// past it, it forgets them all and starts again.
const HEARD_OF_MAX: usize = 16_384;

/// Notifications the receiver published that the sender has not seen come back yet; past it
/// (a bus that stopped), they are forgotten.
const ECHOES_MAX: usize = 65_536;

/// The most notices the sender puts in one batch (one statement); what the bus holds past it
/// goes in the next.
const NOTICES_A_BATCH_MAX: usize = 256;

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

/// Sends this node's notifications, in the order the bus hands them over, until the bus stops.
/// What the bus holds when the sender gets to it goes in one batch (one statement): while a
/// batch is on its way, the next gathers, as a group commit's jobs do.
async fn send_own(
    mut bus: UnboundedReceiver<Notification>,
    mut notifier: Notifier,
    echoes: Echoes,
) {
    let mut outgoing = Outgoing::default();
    while let Some(first) = bus.next().await {
        let mut batch = notifier.batch();
        gather(first, &mut bus, &echoes, &mut outgoing, &mut batch);
        if let Err(error) = notifier.send_batch(batch).await {
            tracing::warn!(%error, "notices to the other nodes were not sent");
        }
    }
}

/// Adds to `batch` the notices of `first` and of what else `bus` holds now, in order, up to
/// [`NOTICES_A_BATCH_MAX`] notices (the rest stays on the bus for the next batch); echoes of
/// what the receiver published are skipped.
fn gather(
    first: Notification,
    bus: &mut UnboundedReceiver<Notification>,
    echoes: &Echoes,
    outgoing: &mut Outgoing,
    batch: &mut Batch,
) {
    let mut next = Some(first);
    while let Some(notification) = next.take() {
        if !echoes.take(&notification) {
            for notice in outgoing.notices(notification) {
                add(batch, &notice);
            }
        }
        if batch.len() < NOTICES_A_BATCH_MAX {
            next = bus.try_recv().ok();
        }
    }
}

/// Adds `notice` to `batch`; one too long to send is replaced by the session change that
/// stands for it, or else dropped.
fn add(batch: &mut Batch, notice: &Notice) {
    let Err(too_long) = batch.add(notice) else {
        return;
    };
    // A call's arguments too long for a notice: its session's change goes instead, and
    // subscribers read the call from the log.
    let Some(instead) = instead_of_too_long(notice) else {
        tracing::warn!(%too_long, "a notice too long to send, dropped");
        return;
    };
    if let Err(too_long) = batch.add(&instead) {
        tracing::warn!(%too_long, "a notice to the other nodes was not sent");
    }
}

/// The session change that stands for `notice` when it is too long to send.
fn instead_of_too_long(notice: &Notice) -> Option<Notice> {
    let (session_id, reason, seqs) = match notice {
        Notice::ToolCall {
            session_id, seq, ..
        } => (*session_id, "events", Some((*seq, *seq))),
        Notice::ApprovalPending { session_id, .. }
        | Notice::ElicitationPending { session_id, .. } => (*session_id, "approval", None),
        _ => return None,
    };
    Some(Notice::SessionChanged {
        session_id,
        reason: reason.to_owned(),
        seqs,
    })
}

/// Where the sender is in each run's response text.
#[derive(Debug, Default)]
struct Outgoing {
    runs: RunTexts,
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

impl Outgoing {
    /// The notices that tell `notification` to the other nodes.
    fn notices(&mut self, notification: Notification) -> Vec<Notice> {
        let notice = match notification {
            Notification::SessionChanged {
                session_id,
                reason,
                seqs,
            } => Notice::SessionChanged {
                session_id,
                reason: reason.to_owned(),
                seqs: seqs.map(|seqs| (seqs.from, seqs.to)),
            },
            Notification::SessionDeleted {
                session_id,
                account_id,
            } => Notice::SessionDeleted {
                session_id,
                account_id,
            },
            Notification::AccountChanged {
                account_id,
                reasons,
            } => Notice::AccountChanged {
                account_id,
                reasons: reasons.into_iter().map(str::to_owned).collect(),
            },
            Notification::TextDelta {
                session_id,
                run_id,
                offset_chars,
                text,
            } => return self.delta(session_id, run_id, offset_chars, text),
            Notification::RunFinished {
                session_id,
                run_id,
                status,
            } => {
                self.runs.end(run_id);
                Notice::RunFinished {
                    session_id,
                    run_id,
                    status,
                }
            }
            Notification::ToolCall {
                session_id,
                run_id,
                seq,
                call_id,
                name,
                arguments,
            } => Notice::ToolCall {
                session_id,
                run_id,
                seq,
                call_id,
                name,
                arguments,
            },
            Notification::ApprovalPending {
                session_id,
                run_id,
                call_id,
                name,
                arguments,
            } => Notice::ApprovalPending {
                session_id,
                run_id,
                call_id,
                name,
                arguments,
            },
            Notification::ElicitationPending {
                session_id,
                run_id,
                call_id,
                name,
                arguments,
                message,
                requested_schema,
            } => Notice::ElicitationPending {
                session_id,
                run_id,
                call_id,
                name,
                arguments,
                message,
                requested_schema,
            },
        };
        vec![notice]
    }

    /// A text delta at `offset_chars` as a notice at its byte offset. A response starts at 0;
    /// a delta that does not continue what was sent (the bridge started mid-response) cannot
    /// be placed in bytes: the run's deltas are not sent until its next response, and the
    /// other nodes' subscribers are told once to re-read the session instead.
    fn delta(
        &mut self,
        session_id: SessionId,
        run_id: RunId,
        offset_chars: usize,
        text: String,
    ) -> Vec<Notice> {
        let lengths = (text.chars().count() as u64, text.len() as u64);
        let offset_bytes = match self.runs.place(run_id, offset_chars as u64, lengths) {
            Placed::At(offset_bytes) => offset_bytes,
            Placed::Gap => return vec![reread(session_id)],
            Placed::Dropped => return Vec::new(),
        };
        vec![Notice::TextDelta {
            session_id,
            run_id,
            offset_bytes,
            chunk: text,
        }]
    }
}

/// A change of `session_id` that has its subscribers re-read it from the log.
fn reread(session_id: SessionId) -> Notice {
    Notice::SessionChanged {
        session_id,
        reason: SESSION_REASON_OTHER.to_owned(),
        seqs: None,
    }
}

/// Publishes the other nodes' notices on this node's bus, until the listener ends; wakes this
/// node's queue where one may have queued or freed a run.
async fn publish_others(
    mut listener: Listener,
    node_id: String,
    publisher: Publisher,
    echoes: Echoes,
    wake: impl Fn(),
) {
    let mut incoming = Incoming::default();
    while let Some(heard) = listener.next().await {
        let notifications = match heard {
            Heard::Notice { origin, .. } if origin == node_id => continue,
            Heard::Notice { notice, .. } => incoming.notifications(notice),
            Heard::Gap(gap) => {
                tracing::info!(?gap, "notices from the other nodes may have been missed");
                // What was missed may have queued runs.
                wake();
                incoming.resync()
            }
        };
        if notifications.iter().any(may_start_a_run) {
            wake();
        }
        for notification in notifications {
            echoes.push(notification.clone());
            publisher.publish(notification);
        }
    }
}

/// What the receiver heard so far: where each run's response text is, and the sessions and
/// accounts to have re-read after a gap.
#[derive(Debug, Default)]
struct Incoming {
    /// Where each run's response text is, in bytes as heard and in chars.
    runs: RunTexts,
    sessions: HashSet<SessionId>,
    accounts: HashSet<AccountId>,
}

impl Incoming {
    /// The notifications that tell `notice` on this node's bus.
    fn notifications(&mut self, notice: Notice) -> Vec<Notification> {
        let notification = match notice {
            // The store's own notice of a commit: it names no session id, and the bus tells of
            // commits by the session change that follows them.
            Notice::EventsCommitted { .. } => return Vec::new(),
            Notice::Missed => return self.resync(),
            Notice::TextDelta {
                session_id,
                run_id,
                offset_bytes,
                chunk,
            } => {
                self.heard_of_session(session_id);
                return self.delta(session_id, run_id, offset_bytes, chunk);
            }
            Notice::RunFinished {
                session_id,
                run_id,
                status,
            } => {
                self.heard_of_session(session_id);
                self.runs.end(run_id);
                Notification::RunFinished {
                    session_id,
                    run_id,
                    status,
                }
            }
            Notice::SessionChanged {
                session_id,
                reason,
                seqs,
            } => {
                self.heard_of_session(session_id);
                Notification::SessionChanged {
                    session_id,
                    reason: named(SESSION_REASONS, &reason).unwrap_or(SESSION_REASON_OTHER),
                    seqs: seqs.map(|(from, to)| SeqRange { from, to }),
                }
            }
            Notice::SessionDeleted {
                session_id,
                account_id,
            } => {
                self.sessions.remove(&session_id);
                self.heard_of_account(account_id);
                Notification::SessionDeleted {
                    session_id,
                    account_id,
                }
            }
            Notice::AccountChanged {
                account_id,
                reasons,
            } => {
                self.heard_of_account(account_id);
                Notification::AccountChanged {
                    account_id,
                    reasons: reasons
                        .iter()
                        .map(|reason| {
                            named(ACCOUNT_REASONS, reason).unwrap_or(ACCOUNT_REASON_OTHER)
                        })
                        .collect(),
                }
            }
            Notice::ToolCall {
                session_id,
                run_id,
                seq,
                call_id,
                name,
                arguments,
            } => {
                self.heard_of_session(session_id);
                Notification::ToolCall {
                    session_id,
                    run_id,
                    seq,
                    call_id,
                    name,
                    arguments,
                }
            }
            Notice::ApprovalPending {
                session_id,
                run_id,
                call_id,
                name,
                arguments,
            } => {
                self.heard_of_session(session_id);
                Notification::ApprovalPending {
                    session_id,
                    run_id,
                    call_id,
                    name,
                    arguments,
                }
            }
            Notice::ElicitationPending {
                session_id,
                run_id,
                call_id,
                name,
                arguments,
                message,
                requested_schema,
            } => {
                self.heard_of_session(session_id);
                Notification::ElicitationPending {
                    session_id,
                    run_id,
                    call_id,
                    name,
                    arguments,
                    message,
                    requested_schema,
                }
            }
        };
        vec![notification]
    }

    /// A chunk of a run's response text at `offset_bytes`, as a delta at its char offset when
    /// it continues what was heard (or starts a response); else the run's text has a gap, and
    /// its subscribers are told once to re-read the session.
    fn delta(
        &mut self,
        session_id: SessionId,
        run_id: RunId,
        offset_bytes: u64,
        chunk: String,
    ) -> Vec<Notification> {
        let lengths = (chunk.len() as u64, chunk.chars().count() as u64);
        let offset_chars = match self.runs.place(run_id, offset_bytes, lengths) {
            Placed::At(offset_chars) => offset_chars as usize,
            Placed::Gap => return vec![reread_notification(session_id)],
            Placed::Dropped => return Vec::new(),
        };
        vec![Notification::TextDelta {
            session_id,
            run_id,
            offset_chars,
            text: chunk,
        }]
    }

    /// After a gap: a change of every session and account heard of, so their subscribers
    /// re-read them from the log.
    fn resync(&self) -> Vec<Notification> {
        let sessions = self
            .sessions
            .iter()
            .map(|session_id| reread_notification(*session_id));
        let accounts = self
            .accounts
            .iter()
            .map(|account_id| Notification::AccountChanged {
                account_id: *account_id,
                reasons: vec![ACCOUNT_REASON_OTHER],
            });
        sessions.chain(accounts).collect()
    }

    fn heard_of_session(&mut self, session_id: SessionId) {
        if self.sessions.len() >= HEARD_OF_MAX && !self.sessions.contains(&session_id) {
            self.sessions.clear();
        }
        self.sessions.insert(session_id);
    }

    fn heard_of_account(&mut self, account_id: AccountId) {
        if self.accounts.len() >= HEARD_OF_MAX && !self.accounts.contains(&account_id) {
            self.accounts.clear();
        }
        self.accounts.insert(account_id);
    }
}

/// Whether `notification`, heard from another node, may mean a run is there to be claimed:
/// one was queued (a person's message, a child's result, a scheduled wake-up, a decision on
/// an approval, a successor made), or a session's run ended and its next may start.
fn may_start_a_run(notification: &Notification) -> bool {
    match notification {
        Notification::SessionChanged { reason, .. } => matches!(
            *reason,
            "message" | "child-result" | "scheduled-wakeup" | "approval" | "continued"
        ),
        Notification::RunFinished { .. } => true,
        _ => false,
    }
}

/// The bus's change of `session_id` that has its subscribers re-read it.
fn reread_notification(session_id: SessionId) -> Notification {
    Notification::SessionChanged {
        session_id,
        reason: SESSION_REASON_OTHER,
        seqs: None,
    }
}

/// The name in `names` equal to `name`.
fn named(names: &[&'static str], name: &str) -> Option<&'static str> {
    names.iter().copied().find(|known| *known == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What the bus holds when the sender gets to it goes in one batch, in order, up to the
    /// most a batch holds; the rest waits on the bus for the next; echoes are left out.
    #[test]
    fn what_the_bus_holds_goes_in_batches_in_order() {
        let session_id = SessionId::new_v7();
        let change = |seq: i64| Notification::SessionChanged {
            session_id,
            reason: "events",
            seqs: Some(SeqRange { from: seq, to: seq }),
        };
        let n_held = NOTICES_A_BATCH_MAX as i64 + 44;
        let (publish, mut bus) = futures::channel::mpsc::unbounded();
        for seq in 2..=n_held {
            publish
                .unbounded_send(change(seq))
                .expect("the bus holds it");
        }
        let echoes = Echoes::default();
        echoes.push(change(3));
        let mut outgoing = Outgoing::default();

        let mut first = Batch::new("node-a");
        gather(change(1), &mut bus, &echoes, &mut outgoing, &mut first);
        let mut second = Batch::new("node-a");
        let next = bus
            .try_recv()
            .expect("what a batch could not take stays on the bus");
        gather(next, &mut bus, &echoes, &mut outgoing, &mut second);

        let seqs = |batch: &Batch| -> Vec<i64> {
            batch
                .payloads()
                .iter()
                .map(
                    |payload| match Notice::decode(payload).expect("a notice").1 {
                        Notice::SessionChanged {
                            seqs: Some((from, _)),
                            ..
                        } => from,
                        other => panic!("a session's change, not {other:?}"),
                    },
                )
                .collect()
        };
        let sent: Vec<i64> = (1..=n_held).filter(|seq| *seq != 3).collect();
        assert_eq!(seqs(&first), sent[..NOTICES_A_BATCH_MAX]);
        assert_eq!(seqs(&second), sent[NOTICES_A_BATCH_MAX..]);
        assert!(bus.try_recv().is_err(), "the bus is empty");
    }

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

    #[test]
    fn a_chunk_that_does_not_continue_the_run_s_text_has_it_re_read_once() {
        let (session_id, run_id) = (SessionId::new_v7(), RunId::new_v7());
        let mut incoming = Incoming::default();
        let delta = |offset_bytes: u64, chunk: &str| Notice::TextDelta {
            session_id,
            run_id,
            offset_bytes,
            chunk: chunk.to_owned(),
        };
        assert_eq!(incoming.notifications(delta(0, "ab")).len(), 1);
        // Bytes 2..5 were missed.
        assert_eq!(
            incoming.notifications(delta(5, "cd")),
            vec![reread_notification(session_id)]
        );
        assert_eq!(incoming.notifications(delta(7, "ef")), Vec::new());
        // The next response starts afresh.
        assert_eq!(
            incoming.notifications(delta(0, "é")),
            vec![Notification::TextDelta {
                session_id,
                run_id,
                offset_chars: 0,
                text: "é".to_owned(),
            }]
        );
    }

    #[test]
    fn a_delta_sent_mid_response_has_the_others_re_read_once() {
        let (session_id, run_id) = (SessionId::new_v7(), RunId::new_v7());
        let mut outgoing = Outgoing::default();
        let delta = |offset_chars: usize, text: &str| Notification::TextDelta {
            session_id,
            run_id,
            offset_chars,
            text: text.to_owned(),
        };
        // The bridge started after the response's first 3 chars were published.
        assert_eq!(outgoing.notices(delta(3, "dé")), vec![reread(session_id)]);
        assert_eq!(outgoing.notices(delta(5, "f")), Vec::new());
        // The next response starts afresh, and goes on in bytes.
        assert_eq!(outgoing.notices(delta(0, "é")).len(), 1);
        assert_eq!(
            outgoing.notices(delta(1, "x")),
            vec![Notice::TextDelta {
                session_id,
                run_id,
                offset_bytes: 2,
                chunk: "x".to_owned(),
            }]
        );
    }

    #[test]
    fn a_reason_heard_is_the_bus_s_own_or_the_one_for_others() {
        let session_id = SessionId::new_v7();
        let mut incoming = Incoming::default();
        for (heard, published) in [
            ("approval", "approval"),
            ("forked", "forked"),
            ("forked-from", "forked-from"),
            ("from-a-newer-node", SESSION_REASON_OTHER),
        ] {
            assert_eq!(
                incoming.notifications(Notice::SessionChanged {
                    session_id,
                    reason: heard.to_owned(),
                    seqs: Some((1, 2)),
                }),
                vec![Notification::SessionChanged {
                    session_id,
                    reason: published,
                    seqs: Some(SeqRange { from: 1, to: 2 }),
                }]
            );
        }
    }
}
