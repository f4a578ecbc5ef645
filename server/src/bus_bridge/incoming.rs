//! The receiver: the other nodes' notices, as notifications on this node's bus.

use std::collections::HashSet;

use futures::StreamExt as _;
use seed_actors::bus::{Notification, Publisher, SeqRange};
use seed_events::{AccountId, RunId, SessionId};
use seed_store::notices::{Heard, Listener, Notice};

use super::{
    ACCOUNT_REASON_OTHER, ACCOUNT_REASONS, Echoes, Placed, RunTexts, SESSION_REASON_OTHER,
    SESSION_REASONS,
};

/// Sessions and accounts the receiver remembers hearing of, to have them re-read after a gap;
/// past it, it forgets them all and starts again.
const HEARD_OF_MAX: usize = 16_384;

/// Publishes the other nodes' notices on this node's bus, until the listener ends; wakes this
/// node's queue where one may have queued or freed a run.
pub(super) async fn publish_others(
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
pub(super) struct Incoming {
    /// Where each run's response text is, in bytes as heard and in chars.
    runs: RunTexts,
    sessions: HashSet<SessionId>,
    accounts: HashSet<AccountId>,
}

impl Incoming {
    /// The notifications that tell `notice` on this node's bus.
    pub(super) fn notifications(&mut self, notice: Notice) -> Vec<Notification> {
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
