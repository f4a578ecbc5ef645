//! Closing a run: its end, a delegated child's delivery to its parent, the lease let go and
//! the later pass a plan may owe it, in one transaction.

use std::fmt;

use seed_events::{NewEvent, RunId, RunStatus, SessionId};

use crate::{ChildDelivery, Result, Store, children, leases, log, runs, sessions};

impl Store {
    /// Closes a run ([`RunClosing`]): ends it and, for a delegated child, delivers its result to
    /// the parent and resumes the parent once all its children have ended; with a lease (a
    /// session and its holder), lets that lease go too. One transaction: a crash cannot leave a
    /// parent parked on a child that has ended, nor a session leased to a run that has ended.
    /// The turn's entries are in the log already (each commit of the store wrote its own).
    ///
    /// With a plan check, the session's plan as it stands in this transaction may owe a run
    /// that is still running a later pass instead ([`PlanCheck`]): then the plan's notice goes
    /// to the log, the run is queued again with its pass counted up, the lease is let go, and
    /// the end asked for (with its delivery) is not written.
    pub async fn finish_run_releasing(&self, closing: RunClosing) -> Result<RunEndOutcome> {
        let RunClosing {
            run_id,
            status,
            result,
            now_ms,
            delivery,
            lease,
            plan_check,
            notice,
        } = closing;
        let scope = lease.as_ref().map(|(session_id, _)| *session_id);
        let fencing_scope = scope;
        // Serialized here, not on the writer's thread, which every session's commits wait on.
        let result = result.map(|result| result.to_string());
        let notice = notice.map(log::PreparedEvent::of);
        let outcome = self
            .write(scope, move |connection| {
                if let Some((session_id, owner)) = &lease {
                    leases::let_go_lease(connection, *session_id, owner)?;
                }
                // The plan is read here, in the end's own transaction, so what it owes is decided
                // from the plan as it is when the run ends. Only a run still running is resumed
                // (one stopped meanwhile is owed nothing); its notice follows the turn's entries.
                if let Some(check) = &plan_check
                    && let Some(notice) =
                        (check.notice)(sessions::plan_of(connection, check.session_id)?.as_ref())
                    && children::resume_run(connection, run_id, now_ms)?
                {
                    let written = log::append_events(connection, check.session_id, &[notice])?;
                    return Ok(EndWritten::Now(RunEndOutcome::LaterPass {
                        notice_seq: written.first().map_or(0, |event| event.seq),
                    }));
                }
                // Nothing else to write with the end: its answer is read with the commit's.
                if delivery.is_none() && notice.is_none() {
                    return runs::send_finish_run(
                        connection,
                        run_id,
                        status,
                        result.as_deref(),
                        now_ms,
                    )
                    .map(EndWritten::Sent);
                }
                let (ended, delivered_seq) = children::finish_run_delivering(
                    connection,
                    run_id,
                    status,
                    result.as_deref(),
                    now_ms,
                    delivery.as_ref(),
                )?;
                if !ended {
                    return Ok(EndWritten::Now(RunEndOutcome::Unchanged));
                }
                let notice_seq = match (&notice, &lease) {
                    (Some(notice), Some((session_id, _))) => {
                        Some(notice.append(connection, *session_id)?.seq)
                    }
                    _ => None,
                };
                Ok(EndWritten::Now(RunEndOutcome::Ended {
                    delivered_seq,
                    notice_seq,
                }))
            })
            .await
            .and_then(EndWritten::outcome);
        // The lease was let go with the end (or the end was refused, the lease lost).
        if let Some(session_id) = fencing_scope {
            self.fencing().let_go(session_id);
        }
        outcome
    }
}

/// What a run's end wrote: its outcome, or (the end alone) the answer of its update to come.
enum EndWritten {
    Now(RunEndOutcome),
    Sent(crate::sql::LaterRows<()>),
}

impl EndWritten {
    /// The outcome, once the write's answers were read.
    fn outcome(self) -> Result<RunEndOutcome> {
        match self {
            EndWritten::Now(outcome) => Ok(outcome),
            EndWritten::Sent(ended) => Ok(match ended.values()?.is_empty() {
                true => RunEndOutcome::Unchanged,
                false => RunEndOutcome::Ended {
                    delivered_seq: None,
                    notice_seq: None,
                },
            }),
        }
    }
}

/// How a run is closed, for [`Store::finish_run_releasing`].
#[derive(Debug)]
pub struct RunClosing {
    pub run_id: RunId,
    pub status: RunStatus,
    pub result: Option<serde_json::Value>,
    pub now_ms: i64,
    /// A delegated child's result for its parent, delivered in the same transaction.
    pub delivery: Option<ChildDelivery>,
    /// The session's lease and its holder, let go in the same transaction.
    pub lease: Option<(SessionId, String)>,
    /// What the session's plan may owe an answered run (a later pass instead of the end).
    pub plan_check: Option<PlanCheck>,
    /// A notice of why the run ended, for the session's log (with the lease's session), written
    /// with the end when this call ends the run.
    pub notice: Option<NewEvent>,
}

/// What a run's plan may owe it when its turn was answered: a later pass, decided in the run's
/// end transaction ([`Store::finish_run_releasing`]) from the session's plan as it stands then,
/// since a person may change the plan while the turn runs.
#[derive(Clone)]
pub struct PlanCheck {
    /// The run's session, whose plan is read.
    pub session_id: SessionId,
    /// Given the session's plan (`None` when it has none), the notice that gives the run a
    /// later pass, or `None` when the plan owes it nothing. Pure: it may run twice.
    pub notice: PlanNotice,
}

/// [`PlanCheck::notice`]: from a session's plan, the notice that gives the run a later pass.
pub type PlanNotice =
    std::sync::Arc<dyn Fn(Option<&serde_json::Value>) -> Option<NewEvent> + Send + Sync>;

impl fmt::Debug for PlanCheck {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PlanCheck")
            .field("session_id", &self.session_id)
            .finish_non_exhaustive()
    }
}

/// What [`Store::finish_run_releasing`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunEndOutcome {
    /// The run ended as asked; a child's result was delivered with it, at this seq of its
    /// parent's log (`None`: no delivery, or the parent is gone), and its notice written at
    /// `notice_seq` of its own.
    Ended {
        delivered_seq: Option<i64>,
        notice_seq: Option<i64>,
    },
    /// The run had already ended, or is gone: it was left as it was.
    Unchanged,
    /// The plan owed the run a later pass: its notice is in the log (at `notice_seq`) after
    /// the turn's entries, and the run is queued again with its pass counted up. It did not
    /// end.
    LaterPass { notice_seq: i64 },
}
