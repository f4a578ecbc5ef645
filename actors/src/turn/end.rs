//! How a run ends, decided purely: from what its turn saw at its end ([`TurnSaw`]: an answer,
//! a verb's end with a continuation, a typed child's return or a delegation, a stop, a
//! provider's failure) to the turn's end ([`turn_end`]), and from that (or why the turn broke
//! off, [`TurnBroke`]) to the run's [`EndPlan`]: its status and result, whether it checks the
//! plan, the notice it writes, the reason it warns with. The shell gathers the facts (the
//! continuation's edge, what a typed child returned) and carries the plan out.

use seed_durable::StoreState;
use seed_events::{EventBody, EventRole, NewEvent, NoticeBody, RunResult, RunStatus, SessionId};

use super::TurnError;
use crate::env::RunEnv;
use crate::run_end::{REFUSED_WRITE, RunEnd, refused_write_notice};
use crate::verb::TurnEffect;

/// The notice an open plan with unfinished steps gives a run's end, which then takes a later
/// pass (at most `plan_passes_max`, counted by the caller) instead of ending; `None` when the
/// plan (`None`: the session has none) has no unfinished step.
pub(super) fn plan_notice(
    plan: Option<&serde_json::Value>,
    run_id: seed_events::RunId,
    now_ms: i64,
) -> Option<NewEvent> {
    let open_steps: Vec<&str> = seed_projections::continuation::unfinished_steps(plan)
        .filter_map(|step| step.get("step").and_then(|s| s.as_str()))
        .collect();
    if open_steps.is_empty() {
        return None;
    }
    let text = format!(
        "The plan has {} unfinished step(s): {}. Continue with them, or update the plan.",
        open_steps.len(),
        open_steps.join("; ")
    );
    Some(NewEvent {
        meta: serde_json::json!({ "obligation": "plan" }),
        run_id: Some(run_id),
        ..NewEvent::new(NoticeBody::text(text), EventRole::System, "system", now_ms)
    })
}

/// What a typed child returned: the newest result of run `run_id` in the log of a verb that
/// returns ([`TurnEffect::Returns`], named in `returning`: `return_result`), as JSON, or its
/// text when it is not JSON.
pub(super) fn returned_result(
    log: &[seed_events::SessionEvent],
    run_id: seed_events::RunId,
    returning: &[String],
) -> Option<serde_json::Value> {
    log.iter()
        .rev()
        .filter(|event| event.run_id == Some(run_id))
        .find_map(|event| match event.body() {
            EventBody::ToolResult(result) if returning.contains(&result.tool_name) => Some(
                serde_json::from_str(&result.content)
                    .unwrap_or(serde_json::Value::String(result.content)),
            ),
            _ => None,
        })
}

/// The edge this turn's continue_session call made, if the turn ended by continuing: a result
/// of this turn of a verb that continues ([`TurnEffect::Continues`]) and the edge of its call
/// (an interrupted result too: the call may have created its successor before a crash cut it
/// off).
pub(super) async fn continued_by(
    env: &RunEnv,
    session_id: SessionId,
    state: &StoreState,
    request_id: &str,
) -> Result<Option<seed_store::ContinuationRow>, TurnError> {
    let continuing = env.verbs.names_with(TurnEffect::Continues);
    // The kind of entry first: it rules out nearly every entry of a long session at once.
    let call_ids: Vec<&str> = state
        .entries
        .iter()
        .rev()
        .filter_map(|entry| match &entry.body {
            seed_durable::EntryBody::ToolResult { message, .. }
                if continuing.contains(&message.tool_name)
                    && entry.body.request_id() == Some(request_id) =>
            {
                Some(message.tool_call_id.as_str())
            }
            _ => None,
        })
        .collect();
    for call_id in call_ids {
        if let Some(edge) = env.store.find_continuation(session_id, call_id).await? {
            return Ok(Some(edge));
        }
    }
    Ok(None)
}

/// A continuation the turn made: the edge of its continue_session call.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Continued {
    pub(crate) successor_session_id: SessionId,
    pub(crate) continuation_id: seed_events::ContinuationId,
}

/// What a turn saw at its end: the facts the end of its run is decided from.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum TurnSaw {
    /// The model answered, or another turn had answered already (`answered_already`; then
    /// `answered_by` is the request whose turn took in and answered what this run came for).
    Answered {
        text: String,
        answered_already: bool,
        answered_by: Option<String>,
    },
    /// A verb or the hook ended the turn: by continuing (`continued`), by a typed child's
    /// `return_result` (`returned`, what it returned), or by delegating (`delegated`).
    Ended {
        reason: String,
        continued: Option<Continued>,
        returned: Option<serde_json::Value>,
        delegated: bool,
    },
    /// A call waits for a person's decision; the turn stays open.
    Waiting { call: seed_providers::ToolCall },
    /// A stop cut the turn off after `partial_text` had streamed.
    Stopped { partial_text: String },
    /// The provider failed; why, in plain words.
    Failed { reason: String },
}

/// What the shell does before the turn's end is recorded.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum EndStep {
    Nothing,
    /// What streamed before a stop goes to the log as an assistant message (`meta.stopped`),
    /// after what the turn committed; the next turn imports it.
    WriteStoppedText(String),
    /// The run parks on the children this pass delegated to, or is queued for its next pass
    /// at once when they have all ended ([`parked_status`]).
    Park,
    /// The run parks on the approval of this call, recorded pending with the park, or is
    /// queued again at once (the same pass) when the call was decided already.
    ParkOnApproval(seed_providers::ToolCall),
}

/// How a turn ended: the run's end as the turn leaves it, whether an open plan may owe the run
/// a later pass, and what the shell does first.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct TurnEnd {
    pub(crate) end: RunEnd,
    pub(crate) check_plan: bool,
    pub(crate) then: EndStep,
}

/// How a turn that saw `saw` ends. `plan_pass_left`: the run has taken fewer passes than an
/// open plan may give it.
pub(crate) fn turn_end(saw: TurnSaw, plan_pass_left: bool) -> TurnEnd {
    let ends = |status, result| TurnEnd {
        end: RunEnd { status, result },
        check_plan: false,
        then: EndStep::Nothing,
    };
    match saw {
        TurnSaw::Answered {
            text,
            answered_already,
            answered_by,
        } => {
            let result = RunResult {
                // The request (`run#pass`) whose turn took it in and answered.
                answered_by,
                ..RunResult::answered(text)
            };
            TurnEnd {
                // An open plan may owe the run a later pass; its end decides, from the plan as
                // it stands then. (A run another turn answered for owes none: that turn's run
                // does.)
                check_plan: plan_pass_left && !answered_already,
                ..ends(RunStatus::Succeeded, result)
            }
        }
        TurnSaw::Ended {
            reason,
            continued,
            returned,
            delegated,
        } => {
            if let Some(edge) = continued {
                // The successor answers; nothing is owed here any more, so no obligations.
                ends(
                    RunStatus::Succeeded,
                    RunResult::continued(edge.successor_session_id, edge.continuation_id),
                )
            } else if let Some(returned) = returned {
                ends(RunStatus::Succeeded, RunResult::returned(returned))
            } else if delegated {
                // This pass delegated: park on the children, or take the next pass at once
                // when they have already ended (read from the store's entries, so that a pass
                // adopted after a crash that came after its child started parks too).
                TurnEnd {
                    then: EndStep::Park,
                    ..ends(RunStatus::Parked, RunResult::ended(reason))
                }
            } else {
                ends(RunStatus::Succeeded, RunResult::ended(reason))
            }
        }
        TurnSaw::Waiting { call } => TurnEnd {
            end: RunEnd {
                status: RunStatus::Parked,
                result: RunResult::ended(format!(
                    "waiting for a person's approval of the {} call {}",
                    call.name, call.id
                )),
            },
            check_plan: false,
            then: EndStep::ParkOnApproval(call),
        },
        TurnSaw::Stopped { partial_text } => TurnEnd {
            // What streamed stays in the log as an assistant message, after what the turn
            // committed; the next turn imports it, so the model knows what it had said.
            then: if partial_text.is_empty() {
                EndStep::Nothing
            } else {
                EndStep::WriteStoppedText(partial_text)
            },
            ..ends(RunStatus::Canceled, RunResult::stopped())
        },
        // The reason in plain words: people, the log and the next turn's model read it.
        TurnSaw::Failed { reason } => TurnEnd {
            end: RunEnd::failed(reason),
            check_plan: false,
            then: EndStep::Nothing,
        },
    }
}

/// The status of a run [`EndStep::Park`] parked: parked on its children, or queued for its
/// next pass when they had all ended.
pub(crate) fn parked_status(parked: seed_store::ParkOutcome) -> RunStatus {
    match parked {
        seed_store::ParkOutcome::Parked => RunStatus::Parked,
        seed_store::ParkOutcome::Resumed => RunStatus::Queued,
    }
}

/// Why a turn stopped short of an end of its own: a store or harness error, as its run's end
/// reads it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum TurnBroke {
    /// The store found the disk full (a refusal that may pass).
    DiskFull,
    /// The session was deleted under the turn.
    SessionGone,
    /// Anything else, with its reason (the error and its cause).
    Error(String),
}

impl TurnBroke {
    pub(crate) fn of(error: &TurnError) -> TurnBroke {
        if error.is_disk_full() {
            TurnBroke::DiskFull
        } else if let TurnError::SessionGone = error {
            TurnBroke::SessionGone
        } else {
            TurnBroke::Error(error.to_string())
        }
    }
}

/// How a run ends, as recorded: its end, whether the end checks the session's plan, the
/// notice it writes to the log with it, and the reason a warn line gives for a failed run.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct EndPlan {
    pub(crate) end: RunEnd,
    pub(crate) check_plan: bool,
    pub(crate) notice: Option<NewEvent>,
    pub(crate) warn: Option<String>,
}

/// How run `run_id` ends, at `now_ms`: from how its turn ended (or why it broke off), and
/// whether its session was found deleted after a stop (asked only of a canceled end).
pub(crate) fn run_end_plan(
    turn: Result<TurnEnd, TurnBroke>,
    session_deleted: bool,
    run_id: seed_events::RunId,
    now_ms: i64,
) -> EndPlan {
    let (end, check_plan, notice) = match turn {
        Ok(TurnEnd {
            end, check_plan, ..
        }) => {
            let notice = end.notice(run_id, now_ms);
            (end, check_plan, notice)
        }
        Err(TurnBroke::DiskFull) => (
            RunEnd::failed(REFUSED_WRITE),
            false,
            Some(refused_write_notice(run_id, now_ms)),
        ),
        // A deleted session keeps no log to write a notice to.
        Err(TurnBroke::SessionGone) => (RunEnd::failed(TurnError::SessionGone), false, None),
        Err(TurnBroke::Error(reason)) => {
            let end = RunEnd::failed(reason);
            let notice = end.notice(run_id, now_ms);
            (end, false, notice)
        }
    };
    // A delete stops the turn under it; the spec has that turn end with an error, not as a
    // person's stop.
    let end = if end.status == RunStatus::Canceled && session_deleted {
        RunEnd::failed(TurnError::SessionGone)
    } else {
        end
    };
    let warn = end.failure_reason().map(str::to_owned);
    EndPlan {
        end,
        check_plan,
        notice,
        warn,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One case: what the turn saw (or why it broke off), whether a plan pass is left, what
    /// the park found, whether the session was found deleted; and the end expected.
    struct Case {
        name: &'static str,
        turn: Result<TurnSaw, TurnBroke>,
        plan_pass_left: bool,
        parked: Option<seed_store::ParkOutcome>,
        session_deleted: bool,
        status: RunStatus,
        result: serde_json::Value,
        check_plan: bool,
        then: EndStep,
        /// The notice's `meta.reason` and text, when the end writes one.
        notice: Option<(&'static str, &'static str)>,
        warn: Option<&'static str>,
    }

    fn answered(answered_already: bool, answered_by: Option<&str>) -> TurnSaw {
        TurnSaw::Answered {
            text: "four".to_owned(),
            answered_already,
            answered_by: answered_by.map(str::to_owned),
        }
    }

    fn ended(
        continued: Option<Continued>,
        returned: Option<serde_json::Value>,
        delegated: bool,
    ) -> TurnSaw {
        TurnSaw::Ended {
            reason: "delegate".to_owned(),
            continued,
            returned,
            delegated,
        }
    }

    fn stopped(partial_text: &str) -> TurnSaw {
        TurnSaw::Stopped {
            partial_text: partial_text.to_owned(),
        }
    }

    #[test]
    fn an_open_plan_leaves_a_notice() {
        use serde_json::json;
        let run_id = seed_events::RunId::from_u128(7);
        let plan = json!([
            { "step": "read", "done": true },
            { "step": "write" },
            { "step": "check", "done": false },
        ]);
        assert_eq!(
            plan_notice(Some(&plan), run_id, 1_000),
            Some(NewEvent {
                kind: "notice".to_owned(),
                role: Some(EventRole::System),
                actor: Some("system".to_owned()),
                content: json!({
                    "text": "The plan has 2 unfinished step(s): write; check. Continue with them, \
                             or update the plan."
                }),
                meta: json!({ "obligation": "plan" }),
                run_id: Some(run_id),
                pi_entry_id: None,
                created_at_ms: 1_000,
            })
        );
        let done = json!([{ "step": "read", "done": true }]);
        assert_eq!(plan_notice(Some(&done), run_id, 1_000), None);
        assert_eq!(plan_notice(None, run_id, 1_000), None);
    }

    #[test]
    fn what_a_typed_child_returned() {
        use serde_json::json;
        let run_id = seed_events::RunId::from_u128(7);
        let other_run = seed_events::RunId::from_u128(8);
        let event =
            |seq: i64, run: seed_events::RunId, kind: &str, content| seed_events::SessionEvent {
                id: seed_events::EventId(seq),
                session_id: SessionId::from_u128(1),
                seq,
                kind: kind.to_owned(),
                role: Some(EventRole::Tool),
                actor: Some("runtime".to_owned()),
                content,
                meta: json!({}),
                run_id: Some(run),
                pi_entry_id: Some(seq),
                created_at_ms: 0,
            };
        let result = |tool_name: &str, content: &str| {
            json!({
                "tool_call_id": "c",
                "tool_name": tool_name,
                "content": content,
                "is_error": false,
            })
        };
        let returned = |log: &[seed_events::SessionEvent]| {
            returned_result(log, run_id, &["return_result".to_owned()])
        };
        let first = event(
            1,
            run_id,
            "tool_result",
            result("return_result", r#"{"n":1}"#),
        );
        assert_eq!(
            returned(std::slice::from_ref(&first)),
            Some(json!({ "n": 1 }))
        );
        // The newest of the run's returns; another run's, another verb's and a call do not
        // count.
        let log = [
            first.clone(),
            event(2, run_id, "tool_result", result("return_result", "null")),
            event(3, run_id, "tool_result", result("read", "[1]")),
            event(4, other_run, "tool_result", result("return_result", "2")),
            event(
                5,
                run_id,
                "tool_call",
                json!({ "id": "c", "name": "return_result", "arguments": {} }),
            ),
        ];
        assert_eq!(returned(&log), Some(json!(null)));
        // Text that is not JSON is returned as text.
        let text = event(1, run_id, "tool_result", result("return_result", "four"));
        assert_eq!(returned(&[text]), Some(json!("four")));
        assert_eq!(returned(&log[2..]), None);
    }

    #[test]
    fn how_a_run_ends() {
        use serde_json::json;
        let successor = SessionId::from_u128(9);
        let continuation = seed_events::ContinuationId::from_u128(10);
        let edge = Continued {
            successor_session_id: successor,
            continuation_id: continuation,
        };
        let case = |name, turn| Case {
            name,
            turn,
            plan_pass_left: false,
            parked: None,
            session_deleted: false,
            status: RunStatus::Succeeded,
            result: json!(null),
            check_plan: false,
            then: EndStep::Nothing,
            notice: None,
            warn: None,
        };
        let cases = [
            Case {
                plan_pass_left: true,
                result: json!({ "answer": "four" }),
                check_plan: true,
                ..case(
                    "answered, a plan pass left: the end checks the plan",
                    Ok(answered(false, None)),
                )
            },
            Case {
                result: json!({ "answer": "four" }),
                ..case("answered, no plan pass left", Ok(answered(false, None)))
            },
            Case {
                plan_pass_left: true,
                result: json!({ "answer": "four", "answered_by": "r#0" }),
                ..case(
                    "answered already by another turn: no plan check",
                    Ok(answered(true, Some("r#0"))),
                )
            },
            Case {
                result: json!({ "answer": "four" }),
                ..case(
                    "answered already, no turn to name",
                    Ok(answered(true, None)),
                )
            },
            Case {
                result: json!({
                    "continued_to_session_id": successor,
                    "continuation_id": continuation,
                }),
                ..case(
                    "continued: the successor answers, even after delegating",
                    Ok(ended(Some(edge.clone()), None, true)),
                )
            },
            Case {
                result: json!({ "returned": { "n": 1 } }),
                ..case(
                    "a typed child returned",
                    Ok(ended(None, Some(json!({ "n": 1 })), true)),
                )
            },
            Case {
                parked: Some(seed_store::ParkOutcome::Parked),
                status: RunStatus::Parked,
                result: json!({ "ended": "delegate" }),
                then: EndStep::Park,
                ..case(
                    "delegated, a child running: parked",
                    Ok(ended(None, None, true)),
                )
            },
            Case {
                parked: Some(seed_store::ParkOutcome::Resumed),
                status: RunStatus::Queued,
                result: json!({ "ended": "delegate" }),
                then: EndStep::Park,
                ..case(
                    "delegated, the children ended already: the next pass at once",
                    Ok(ended(None, None, true)),
                )
            },
            Case {
                result: json!({ "ended": "delegate" }),
                ..case("ended by a verb", Ok(ended(None, None, false)))
            },
            Case {
                plan_pass_left: true,
                status: RunStatus::Canceled,
                result: json!({ "stopped": true }),
                then: EndStep::WriteStoppedText("half an ans".to_owned()),
                ..case(
                    "stopped after some text: it is kept",
                    Ok(stopped("half an ans")),
                )
            },
            Case {
                status: RunStatus::Canceled,
                result: json!({ "stopped": true }),
                ..case("stopped before any text", Ok(stopped("")))
            },
            Case {
                session_deleted: true,
                status: RunStatus::Failed,
                result: json!({ "error": "the session was deleted" }),
                warn: Some("the session was deleted"),
                ..case("stopped by a delete: failed, no notice", Ok(stopped("")))
            },
            Case {
                plan_pass_left: true,
                status: RunStatus::Failed,
                result: json!({ "error": "rate limited" }),
                notice: Some(("rate limited", "The turn failed: rate limited")),
                warn: Some("rate limited"),
                ..case(
                    "the provider failed: its reason, a notice, no plan check",
                    Ok(TurnSaw::Failed {
                        reason: "rate limited".to_owned(),
                    }),
                )
            },
            Case {
                status: RunStatus::Failed,
                result: json!({ "error": REFUSED_WRITE }),
                notice: Some((
                    REFUSED_WRITE,
                    "The turn stopped: the database refused a write: disk full. What it had \
                     done is kept; send the message again once there is room.",
                )),
                warn: Some(REFUSED_WRITE),
                ..case("the disk was full", Err(TurnBroke::DiskFull))
            },
            Case {
                status: RunStatus::Failed,
                result: json!({ "error": "the session was deleted" }),
                warn: Some("the session was deleted"),
                ..case(
                    "the session was gone: no log for a notice",
                    Err(TurnBroke::SessionGone),
                )
            },
            Case {
                status: RunStatus::Failed,
                result: json!({ "error": "sqlite: database is locked" }),
                notice: Some((
                    "sqlite: database is locked",
                    "The turn failed: sqlite: database is locked",
                )),
                warn: Some("sqlite: database is locked"),
                ..case(
                    "a store error: its chain is the reason",
                    Err(TurnBroke::Error("sqlite: database is locked".to_owned())),
                )
            },
        ];
        let run_id = seed_events::RunId::from_u128(7);
        for expected in cases {
            let name = expected.name;
            let turn = expected.turn.map(|saw| {
                let mut turn = turn_end(saw, expected.plan_pass_left);
                assert_eq!(turn.then, expected.then, "{name}");
                if let Some(parked) = expected.parked {
                    turn.end.status = parked_status(parked);
                }
                turn
            });
            let plan = run_end_plan(turn, expected.session_deleted, run_id, 1_000);
            assert_eq!(plan.end.status, expected.status, "{name}");
            // The result column, as it is written.
            assert_eq!(plan.end.result.to_value(), expected.result, "{name}");
            assert_eq!(plan.check_plan, expected.check_plan, "{name}");
            assert_eq!(plan.warn.as_deref(), expected.warn, "{name}");
            let notice = plan.notice.as_ref().map(|notice| {
                assert_eq!(notice.run_id, Some(run_id), "{name}");
                assert_eq!(notice.meta["run_failed"], json!(run_id), "{name}");
                let EventBody::Notice(NoticeBody {
                    text: Some(text), ..
                }) = notice.body()
                else {
                    panic!("{name}: not a notice: {notice:?}");
                };
                (notice.meta["reason"].as_str().unwrap_or_default(), text)
            });
            assert_eq!(
                notice
                    .as_ref()
                    .map(|(reason, text)| (*reason, text.as_str())),
                expected.notice,
                "{name}"
            );
        }
    }
}
