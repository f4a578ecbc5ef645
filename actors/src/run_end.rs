//! A run's end, recorded: the runs table closes it (a delegated child's with its delivery to
//! the parent's call, and the session's lease released, in one transaction) and subscribers
//! hear of it. A turn the database refused a write of ends with an error and a notice saying so;
//! while the disk refuses even the end, it is written again after a pause, by the run's task.

use seed_events::{EventRole, NewEvent, NoticeBody, RunResult, RunStatus};
use seed_store::{PlanCheck, RunClosing, RunEndOutcome, RunRow};

use crate::bus::{Notification, SeqRange};
use crate::env::RunEnv;

/// How a run ended, for the runs table (its `result` column is `result.to_value()`).
#[derive(Debug, Clone, PartialEq)]
pub struct RunEnd {
    pub status: RunStatus,
    pub result: RunResult,
}

impl RunEnd {
    pub(crate) fn failed(reason: impl std::fmt::Display) -> RunEnd {
        RunEnd {
            status: RunStatus::Failed,
            result: RunResult::failed(reason.to_string()),
        }
    }
}

/// Why a run's end could not be recorded now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum EndRefused {
    /// The disk was full: the end is written again after a pause.
    DiskFull,
    /// The database could not be reached: the end is written again after a pause.
    DatabaseAway,
}

/// Why a turn the database refused a write of ended: its run's result, and its notice.
pub const REFUSED_WRITE: &str = "the database refused a write: disk full";

/// How the reason of a run given up after more than `restarts_max` restarts begins.
const GIVEN_UP: &str = "the turn was cut off by more than";

/// Why a run more sweeps than `restarts_max` found cut off was failed: its run's result.
pub fn given_up_reason(restarts_max: i64) -> String {
    format!("{GIVEN_UP} {restarts_max} restarts of the service; it is not started again")
}

/// Whether a failed run's reason is [`given_up_reason`]'s.
pub fn is_given_up_reason(reason: &str) -> bool {
    reason.starts_with(GIVEN_UP)
}

/// The notice a turn the database refused leaves in the log: the person and the next turn's
/// model read that it stopped, and why.
pub(crate) fn refused_write_notice(run_id: seed_events::RunId, now_ms: i64) -> NewEvent {
    failed_run_notice(
        run_id,
        REFUSED_WRITE,
        &format!(
            "The turn stopped: {REFUSED_WRITE}. What it had done is kept; send the message again \
             once there is room."
        ),
        now_ms,
    )
}

/// The notice a failed run leaves in its log, with its end: the transcript shows why the turn
/// failed, and `read thread:` and the next turn's model read it. `meta.run_failed` names the
/// run, `meta.reason` says why in plain words.
pub(crate) fn failed_run_notice(
    run_id: seed_events::RunId,
    reason: &str,
    text: &str,
    now_ms: i64,
) -> NewEvent {
    NewEvent {
        meta: serde_json::json!({ "run_failed": run_id, "reason": reason }),
        run_id: Some(run_id),
        ..NewEvent::new(NoticeBody::text(text), EventRole::System, "runtime", now_ms)
    }
}

impl RunEnd {
    /// Why the run failed, as its result says; `None` for a run that did not fail.
    pub fn failure_reason(&self) -> Option<&str> {
        (self.status == RunStatus::Failed)
            .then(|| self.result.error.as_deref().unwrap_or("an unknown error"))
    }

    /// The notice this end leaves in the log: for a failed run, why it failed.
    pub(crate) fn notice(&self, run_id: seed_events::RunId, now_ms: i64) -> Option<NewEvent> {
        let reason = self.failure_reason()?;
        let text = format!("The turn failed: {reason}");
        Some(failed_run_notice(run_id, reason, &text, now_ms))
    }
}

/// Records a run's end: closes it (a child's with its delivery to the parent, and the release
/// of the session's lease, in one transaction) and tells subscribers.
pub(crate) async fn finish(env: &RunEnv, run: &RunRow, end: RunEnd) -> RunEnd {
    if let Some(reason) = end.failure_reason() {
        tracing::warn!(session_id = %run.session_id, run_id = %run.id, reason, "a run failed");
    }
    let notice = end.notice(run.id, (env.clock)());
    record_end(env, run, end.clone(), None, notice)
        .await
        .unwrap_or(end)
}

/// [`finish`], saying whether the store refused the end because the disk was full (then it
/// tells no one the run finished). The turn's entries are in the log already: each commit of
/// the store wrote its own; `notice` goes there with a terminal end, in its transaction.
///
/// With `plan_check`, the end's transaction may give the run a later pass instead (see
/// [`seed_store::PlanCheck`]): the end returned is then `Queued`.
pub(crate) async fn record_end(
    env: &RunEnv,
    run: &RunRow,
    mut end: RunEnd,
    plan_check: Option<PlanCheck>,
    notice: Option<NewEvent>,
) -> Result<RunEnd, EndRefused> {
    let now = (env.clock)();
    // The run holds its session's lease (the queue's claim took it); its end lets it go. The
    // lease goes with the session when it was deleted; nothing to release then.
    let release_alone = || async {
        let _ = env.store.release_lease(run.session_id, &env.boot_id).await;
    };
    if end.status.is_terminal() {
        // A child's end and its delivery to the parent are one transaction: a crash between
        // them would leave the parent parked on a child that had ended.
        let delivery = match run.parent_run_id {
            Some(parent_run_id) => delivery_to_parent(env, run, parent_run_id, &end, now).await,
            None => None,
        };
        let parent_session = delivery.as_ref().map(|delivery| delivery.parent_session_id);
        let recorded = env
            .store
            .finish_run_releasing(RunClosing {
                run_id: run.id,
                status: end.status,
                result: Some(end.result.to_value()),
                now_ms: now,
                delivery,
                lease: Some((run.session_id, env.boot_id.clone())),
                plan_check,
                notice,
            })
            .await;
        let outcome = match recorded {
            Ok(outcome) => outcome,
            Err(error) => {
                tracing::warn!(run_id = %run.id, %error, "could not record the end of a run");
                // The lease is let go of all the same.
                release_alone().await;
                if error.is_disk_full() {
                    return Err(EndRefused::DiskFull);
                }
                if error.is_unavailable() {
                    return Err(EndRefused::DatabaseAway);
                }
                RunEndOutcome::Unchanged
            }
        };
        if let RunEndOutcome::LaterPass { notice_seq } = outcome {
            // The plan's notice is in the log, and the run is queued again; no child's result
            // was delivered.
            env.publisher.publish(Notification::SessionChanged {
                session_id: run.session_id,
                reason: "events",
                seqs: Some(SeqRange {
                    from: notice_seq,
                    to: notice_seq,
                }),
            });
            end.status = RunStatus::Queued;
        } else {
            let recorded = matches!(outcome, RunEndOutcome::Ended { .. });
            if let RunEndOutcome::Ended {
                notice_seq: Some(seq),
                ..
            } = outcome
            {
                env.publisher.publish(Notification::SessionChanged {
                    session_id: run.session_id,
                    reason: "events",
                    seqs: Some(SeqRange { from: seq, to: seq }),
                });
            }
            if let Some(parent_session) = parent_session {
                let delivered_seq = match outcome {
                    RunEndOutcome::Ended { delivered_seq, .. } => delivered_seq,
                    _ => None,
                };
                env.publisher.publish(Notification::SessionChanged {
                    session_id: parent_session,
                    reason: "child-result",
                    seqs: delivered_seq.map(|seq| SeqRange { from: seq, to: seq }),
                });
            }
            if recorded {
                // What the row holds now: the run as claimed, ended.
                env.publisher.run_ended(RunRow {
                    status: end.status,
                    result: Some(end.result.to_value()),
                    updated_at_ms: now,
                    ..run.clone()
                });
            } else {
                env.publisher.publish(Notification::RunFinished {
                    session_id: run.session_id,
                    run_id: run.id,
                    status: end.status,
                });
            }
        }
    } else {
        // Parked, or queued again at once (its children had all ended): the turn set that
        // itself.
        release_alone().await;
    }
    env.publisher.publish(Notification::SessionChanged {
        session_id: run.session_id,
        reason: "run-finished",
        seqs: None,
    });
    Ok(end)
}

/// What a child's end delivers to its parent: its result as the result of the parent's
/// delegate call (or, when a crash had that call answered as interrupted meanwhile, as a
/// notice), after which the parent, once all its children have ended, takes its later pass.
async fn delivery_to_parent(
    env: &RunEnv,
    child: &RunRow,
    parent_run_id: seed_events::RunId,
    end: &RunEnd,
    now: i64,
) -> Option<seed_store::ChildDelivery> {
    let store = &env.store;
    let delegated_by = match store.read_events(child.session_id, 1, 1, 1).await {
        Ok(events) => events
            .first()
            .and_then(|event| seed_store::delegated_by(&event.meta)),
        Err(error) => {
            tracing::warn!(run_id = %child.id, %error, "cannot read a child's task");
            None
        }
    };
    let Some((parent_session_id, call_id)) = delegated_by else {
        tracing::warn!(run_id = %child.id, "a child run names no parent call");
        return None;
    };
    let content = delivered_content(end);
    let child = seed_store::DeliveringChild {
        session_id: child.session_id,
        run_id: child.id,
        parent_run_id,
    };
    Some(seed_store::ChildDelivery::new(
        child,
        parent_session_id,
        call_id,
        content,
        end.status != RunStatus::Succeeded,
        now,
    ))
}

/// The result a child's end gives its parent's delegate call: what a typed child returned (as
/// JSON), else its answer, else its whole result; for a child that did not succeed, how it
/// ended.
fn delivered_content(end: &RunEnd) -> String {
    let result = &end.result;
    match end.status {
        RunStatus::Succeeded => result
            .returned
            .as_ref()
            .map(|value| value.to_string())
            .or_else(|| result.answer.clone())
            .unwrap_or_else(|| result.to_value().to_string()),
        status => format!("the child run ended {status}: {}", result.to_value()),
    }
}

/// Fails a run that more sweeps than the limit found cut off: it may be what stops the
/// process, so it is not started again.
pub(crate) async fn fail_given_up(env: &RunEnv, run: &RunRow) {
    tracing::error!(
        run_id = %run.id,
        session_id = %run.session_id,
        restarts_max = env.settings.run_restarts_max,
        "a run cut off by every restart is failed"
    );
    let end = RunEnd::failed(given_up_reason(env.settings.run_restarts_max));
    finish(env, run, end).await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_given_up_runs_reason_is_told_apart() {
        assert_eq!(
            given_up_reason(3),
            "the turn was cut off by more than 3 restarts of the service; it is not started again"
        );
        assert!(is_given_up_reason(&given_up_reason(3)));
        assert!(!is_given_up_reason(REFUSED_WRITE));
    }

    #[test]
    fn a_failed_end_says_why_in_its_result() {
        let end = RunEnd::failed("rate limited");
        assert_eq!(end.result.to_value(), json!({ "error": "rate limited" }));
        assert_eq!(end.failure_reason(), Some("rate limited"));
        let answered = RunEnd {
            status: RunStatus::Succeeded,
            result: RunResult::answered("four"),
        };
        assert_eq!(answered.failure_reason(), None);
        let no_reason = RunEnd {
            status: RunStatus::Failed,
            result: RunResult::default(),
        };
        assert_eq!(no_reason.failure_reason(), Some("an unknown error"));
    }

    #[test]
    fn a_failed_runs_notice_names_the_run_and_the_reason() {
        let run_id = seed_events::RunId::from_u128(7);
        let notice = RunEnd::failed("rate limited")
            .notice(run_id, 1_000)
            .expect("a failed end writes a notice");
        assert_eq!(
            notice,
            NewEvent {
                kind: "notice".to_owned(),
                role: Some(EventRole::System),
                actor: Some("runtime".to_owned()),
                content: json!({ "text": "The turn failed: rate limited" }),
                meta: json!({ "run_failed": run_id, "reason": "rate limited" }),
                run_id: Some(run_id),
                pi_entry_id: None,
                created_at_ms: 1_000,
            }
        );
    }

    /// What a parent's delegate call reads of its child's end, from the child's result as the
    /// runs table holds it.
    #[test]
    fn what_a_child_delivers_to_its_parent() {
        let cases = [
            (RunStatus::Succeeded, json!({ "answer": "four" }), "four"),
            (
                RunStatus::Succeeded,
                json!({ "returned": { "n": 1 } }),
                r#"{"n":1}"#,
            ),
            // A typed child that returned null delivers null, not its whole result.
            (RunStatus::Succeeded, json!({ "returned": null }), "null"),
            (
                RunStatus::Succeeded,
                json!({ "returned": "text" }),
                r#""text""#,
            ),
            (
                RunStatus::Succeeded,
                json!({ "ended": "delegate" }),
                r#"{"ended":"delegate"}"#,
            ),
            (
                RunStatus::Failed,
                json!({ "error": "rate limited" }),
                r#"the child run ended failed: {"error":"rate limited"}"#,
            ),
            (
                RunStatus::Canceled,
                json!({ "stopped": true }),
                r#"the child run ended canceled: {"stopped":true}"#,
            ),
        ];
        for (status, result, expected) in cases {
            let end = RunEnd {
                status,
                result: RunResult::parse(&result),
            };
            assert_eq!(end.result.to_value(), result, "{result}");
            assert_eq!(delivered_content(&end), expected, "{result}");
        }
    }
}
