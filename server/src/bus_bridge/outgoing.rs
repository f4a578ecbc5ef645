//! The sender: this node's notifications, as notices to the other nodes.

use futures::StreamExt as _;
use futures::channel::mpsc::UnboundedReceiver;
use seed_actors::bus::Notification;
use seed_events::{RunId, SessionId};
use seed_store::notices::{Batch, Notice, Notifier};

use super::{Echoes, Placed, RunTexts, SESSION_REASON_OTHER};

/// The most notices the sender puts in one batch (one statement); what the bus holds past it
/// goes in the next.
const NOTICES_A_BATCH_MAX: usize = 256;

/// Sends this node's notifications, in the order the bus hands them over, until the bus stops.
/// What the bus holds when the sender gets to it goes in one batch (one statement): while a
/// batch is on its way, the next gathers, as a group commit's jobs do.
pub(super) async fn send_own(
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
pub(super) struct Outgoing {
    runs: RunTexts,
}

impl Outgoing {
    /// The notices that tell `notification` to the other nodes.
    pub(super) fn notices(&mut self, notification: Notification) -> Vec<Notice> {
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

#[cfg(test)]
mod tests {
    use seed_actors::bus::SeqRange;

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
}
