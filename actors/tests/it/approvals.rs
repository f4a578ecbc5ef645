//! Approvals: a call of a verb that needs a person's approval has its intent committed, its run
//! parks on a pending approval, and the decision resumes the run. Approved, the call runs once
//! with the arguments approved (edited or not); denied, it never runs and the model reads the
//! reason. A restart while the approval is pending keeps it pending; approved after the restart,
//! the call runs exactly once, and a crash after it ran never runs it again. The verb counts its
//! calls, so "exactly once" is counted, not inferred.

use crate::common;

use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;
use seed_actors::crash::points;
use seed_actors::{CrashPoints, Runtime, Verb, VerbContext, VerbOutput};
use seed_events::{RunId, RunStatus};
use seed_providers::{Message, Request, ScriptedProvider, ScriptedStep, ToolCall};
use seed_providers::{text_response, tool_response};
use seed_store::{ApprovalDecision, ApprovalStatus, DecideOutcome, Store};

use crate::common::{
    Fixture, assert_log_agrees_with_store, in_process, log, open_store_with_sessions, session,
    within,
};

const CALL_ID: &str = "transfer-1";

/// A verb that needs approval and logs the arguments of every call it runs.
struct Transfer {
    calls: Arc<Mutex<Vec<serde_json::Value>>>,
}

impl Verb for Transfer {
    fn name(&self) -> &'static str {
        "transfer"
    }
    fn description(&self) -> &'static str {
        "Moves money."
    }
    fn parameters(&self) -> serde_json::Value {
        serde_json::json!({"type": "object", "properties": {"amount": {"type": "integer"}}})
    }
    fn safe_to_repeat(&self) -> bool {
        false
    }
    fn needs_approval(&self) -> bool {
        true
    }
    fn call(&self, _: VerbContext, arguments: serde_json::Value) -> BoxFuture<'static, VerbOutput> {
        let calls = Arc::clone(&self.calls);
        Box::pin(async move {
            let amount = arguments["amount"].clone();
            calls
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(arguments);
            VerbOutput::ok(format!("moved {amount}"))
        })
    }
}

/// The result of the transfer call in `request`, once it holds one.
fn transfer_result(request: &Request) -> Option<(String, bool)> {
    request.messages.iter().find_map(|m| match m.as_ref() {
        Message::ToolResult(result) if result.tool_call_id == CALL_ID => {
            Some((result.content.clone(), result.is_error))
        }
        _ => None,
    })
}

/// Calls transfer with amount 5, then answers with what its result said.
fn provider() -> ScriptedProvider {
    ScriptedProvider::from_fn(|request: &Request, _| match transfer_result(request) {
        Some((content, is_error)) => {
            ScriptedStep::Respond(text_response(&format!("result ({is_error}): {content}")))
        }
        None => ScriptedStep::Respond(tool_response(
            "",
            vec![ToolCall {
                id: CALL_ID.to_owned(),
                name: "transfer".to_owned(),
                arguments: serde_json::json!({ "amount": 5 }),
            }],
        )),
    })
}

type Calls = Arc<Mutex<Vec<serde_json::Value>>>;

fn calls_of(calls: &Calls) -> Vec<serde_json::Value> {
    calls.lock().unwrap_or_else(|p| p.into_inner()).clone()
}

async fn start(
    store: Store,
    calls: &Calls,
    crash_points: CrashPoints,
    boot_id: &str,
) -> anyhow::Result<Runtime> {
    common::start_with_crash_points(
        store,
        Arc::new(provider()),
        vec![Arc::new(Transfer {
            calls: Arc::clone(calls),
        })],
        crash_points,
        boot_id,
    )
    .await
}

/// Waits until the run is parked on the call's pending approval.
async fn parked_on_approval(store: &Store, run_id: RunId) -> anyhow::Result<()> {
    within("the run parked on its approval", async {
        loop {
            let approval = store.approval(session(0), CALL_ID).await?;
            let run = store.get_run(run_id).await?;
            if approval.is_some_and(|a| a.status == ApprovalStatus::Pending)
                && run.is_some_and(|run| run.status == RunStatus::Parked)
            {
                return anyhow::Ok(());
            }
            actix::clock::sleep(std::time::Duration::from_millis(5)).await;
        }
    })
    .await
}

/// Records `decision` and wakes the queue, as the service does.
async fn decide(runtime: &Runtime, decision: ApprovalDecision) -> anyhow::Result<DecideOutcome> {
    let outcome = runtime
        .store()
        .decide_approval(session(0), CALL_ID, decision, 1_900_000_000_000)
        .await?;
    runtime.wake();
    Ok(outcome)
}

/// The transfer call's results in the log.
async fn logged_results(store: &Store) -> anyhow::Result<Vec<serde_json::Value>> {
    Ok(log(store, session(0))
        .await?
        .into_iter()
        .filter(|e| e.kind == "tool_result")
        .map(|e| e.content)
        .collect())
}

/// Approved as the model wrote it, and approved with edited arguments: the call runs once,
/// with the arguments approved, and the model reads its result.
#[actix::test]
async fn an_approved_call_runs_once_with_the_arguments_approved() -> anyhow::Result<()> {
    for edited in [None, Some(serde_json::json!({ "amount": 3 }))] {
        let fixture = Fixture::new(1).await?;
        let calls = Calls::default();
        let runtime = start(fixture.store.clone(), &calls, CrashPoints::default(), "b1").await?;
        let (_, run_id) = runtime.send_message(session(0), "pay").await?;
        parked_on_approval(&fixture.store, run_id).await?;
        assert!(
            calls_of(&calls).is_empty(),
            "nothing runs before the decision"
        );
        let pending = fixture
            .store
            .approval(session(0), CALL_ID)
            .await?
            .expect("the pending approval");
        assert_eq!(pending.verb, "transfer");
        assert_eq!(pending.arguments, serde_json::json!({ "amount": 5 }));
        assert_eq!(pending.run_id, run_id);

        let arguments = edited
            .clone()
            .unwrap_or_else(|| serde_json::json!({ "amount": 5 }));
        let outcome = decide(
            &runtime,
            ApprovalDecision::Approve {
                arguments: arguments.clone(),
            },
        )
        .await?;
        assert!(matches!(outcome, DecideOutcome::Decided(_)), "{outcome:?}");
        let run = within("the run", runtime.wait_for_run(run_id)).await?;
        assert_eq!(run.status, RunStatus::Succeeded, "{run:?}");
        assert_eq!(calls_of(&calls), vec![arguments.clone()], "ran once");
        let answer = run.result.expect("a result")["answer"].clone();
        let answer = answer.as_str().expect("an answer");
        assert!(answer.starts_with("result (false): "), "{answer}");
        assert!(
            answer.contains(&format!("moved {}", arguments["amount"])),
            "{answer}"
        );
        assert_eq!(edited.is_some(), answer.contains("edited"), "{answer}");
        assert_eq!(logged_results(&fixture.store).await?.len(), 1);
        assert_log_agrees_with_store(&fixture.store, session(0)).await?;

        // A second decision changes nothing.
        let again = decide(
            &runtime,
            ApprovalDecision::Deny {
                reason: "late".to_owned(),
            },
        )
        .await?;
        assert!(
            matches!(&again, DecideOutcome::AlreadyDecided(row) if row.status == ApprovalStatus::Approved),
            "{again:?}"
        );
    }
    Ok(())
}

/// Denied: the call never runs, and the model reads an error result with the reason.
#[actix::test]
async fn a_denied_call_never_runs_and_the_model_reads_why() -> anyhow::Result<()> {
    let fixture = Fixture::new(1).await?;
    let calls = Calls::default();
    let runtime = start(fixture.store.clone(), &calls, CrashPoints::default(), "b1").await?;
    let (_, run_id) = runtime.send_message(session(0), "pay").await?;
    parked_on_approval(&fixture.store, run_id).await?;
    decide(
        &runtime,
        ApprovalDecision::Deny {
            reason: "too much".to_owned(),
        },
    )
    .await?;
    let run = within("the run", runtime.wait_for_run(run_id)).await?;
    assert_eq!(run.status, RunStatus::Succeeded, "{run:?}");
    assert!(calls_of(&calls).is_empty(), "a denied call never runs");
    let results = logged_results(&fixture.store).await?;
    assert_eq!(results.len(), 1, "{results:?}");
    assert_eq!(results[0]["is_error"], true);
    let content = results[0]["content"].as_str().expect("text");
    assert!(content.contains("too much"), "{content}");
    let answer = run.result.expect("a result")["answer"].clone();
    assert!(
        answer
            .as_str()
            .is_some_and(|a| a.starts_with("result (true): denied")),
        "{answer}"
    );
    let row = fixture
        .store
        .approval(session(0), CALL_ID)
        .await?
        .expect("the approval");
    assert_eq!(row.status, ApprovalStatus::Denied);
    assert_eq!(row.reason.as_deref(), Some("too much"));
    assert_log_agrees_with_store(&fixture.store, session(0)).await?;
    Ok(())
}

/// A message sent while an approval is pending waits behind it: the session's other runs are
/// not claimed until the person decides.
#[actix::test]
async fn a_pending_approval_holds_the_session() -> anyhow::Result<()> {
    let fixture = Fixture::new(1).await?;
    let calls = Calls::default();
    let runtime = start(fixture.store.clone(), &calls, CrashPoints::default(), "b1").await?;
    let (_, first) = runtime.send_message(session(0), "pay").await?;
    parked_on_approval(&fixture.store, first).await?;
    let (_, second) = runtime.send_message(session(0), "and again").await?;
    runtime.wake();
    // The queue has looked (a wake claims synchronously with the store's answer): the second
    // run is still queued.
    actix::clock::sleep(std::time::Duration::from_millis(50)).await;
    let waiting = fixture.store.get_run(second).await?.expect("the run");
    assert_eq!(waiting.status, RunStatus::Queued, "{waiting:?}");
    decide(
        &runtime,
        ApprovalDecision::Approve {
            arguments: serde_json::json!({ "amount": 5 }),
        },
    )
    .await?;
    let first = within("the first run", runtime.wait_for_run(first)).await?;
    assert_eq!(first.status, RunStatus::Succeeded, "{first:?}");
    let second = within("the second run", runtime.wait_for_run(second)).await?;
    assert_eq!(second.status, RunStatus::Succeeded, "{second:?}");
    Ok(())
}

/// Process 1: the message, until its run is parked on the pending approval; then the process
/// dies. Returns the run.
fn until_pending(path: &std::path::Path, calls: &Calls) -> anyhow::Result<RunId> {
    let path = path.to_owned();
    let calls = Arc::clone(calls);
    in_process(move || {
        Box::pin(async move {
            let store = open_store_with_sessions(&path, 1).await?;
            let runtime = start(store.clone(), &calls, CrashPoints::default(), "boot-1").await?;
            let (_, run_id) = runtime.send_message(session(0), "pay").await?;
            parked_on_approval(&store, run_id).await?;
            Ok(run_id)
        })
    })
}

/// A restart while the approval is pending: it is still pending and the run still parked;
/// approved after the restart, the call runs exactly once.
#[test]
fn a_restart_while_pending_then_approve_runs_the_call_exactly_once() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("seed.db");
    let calls = Calls::default();
    let run_id = until_pending(&path, &calls)?;
    let process_calls = Arc::clone(&calls);
    in_process(move || {
        Box::pin(async move {
            let store = Store::open(seed_store::Config::new(&path))?;
            let runtime = start(
                store.clone(),
                &process_calls,
                CrashPoints::default(),
                "boot-2",
            )
            .await?;
            parked_on_approval(&store, run_id).await?;
            decide(
                &runtime,
                ApprovalDecision::Approve {
                    arguments: serde_json::json!({ "amount": 5 }),
                },
            )
            .await?;
            let run = within("the run", runtime.wait_for_run(run_id)).await?;
            assert_eq!(run.status, RunStatus::Succeeded, "{run:?}");
            assert_eq!(logged_results(&store).await?.len(), 1);
            assert_log_agrees_with_store(&store, session(0)).await?;
            Ok(())
        })
    })?;
    assert_eq!(
        calls_of(&calls),
        vec![serde_json::json!({ "amount": 5 })],
        "ran exactly once"
    );
    Ok(())
}

/// Approved, the call runs, and the process dies before its result is committed: after the
/// restart the call is not run again (answered as interrupted), so it ran exactly once.
#[test]
fn a_crash_after_an_approved_call_ran_never_runs_it_again() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("seed.db");
    let calls = Calls::default();
    let run_id = until_pending(&path, &calls)?;
    let process = |calls: Calls, crash: bool| {
        let path = path.clone();
        in_process(move || {
            Box::pin(async move {
                let store = Store::open(seed_store::Config::new(&path))?;
                if crash {
                    let (crash_points, has_fired) = common::crash_once_at(points::TOOL_MID_RUN);
                    let runtime = start(store.clone(), &calls, crash_points, "boot-2").await?;
                    decide(
                        &runtime,
                        ApprovalDecision::Approve {
                            arguments: serde_json::json!({ "amount": 5 }),
                        },
                    )
                    .await?;
                    within("the crash point", has_fired).await?;
                } else {
                    let runtime =
                        start(store.clone(), &calls, CrashPoints::default(), "boot-3").await?;
                    let run = within("the run", runtime.wait_for_run(run_id)).await?;
                    assert_eq!(run.status, RunStatus::Succeeded, "{run:?}");
                    let results = logged_results(&store).await?;
                    assert_eq!(results.len(), 1, "{results:?}");
                    let content = results[0]["content"].as_str().unwrap_or_default();
                    assert!(content.starts_with("interrupted"), "{content}");
                    assert_log_agrees_with_store(&store, session(0)).await?;
                }
                Ok(())
            })
        })
    };
    process(Arc::clone(&calls), true)?;
    assert_eq!(
        calls_of(&calls).len(),
        1,
        "the approved call ran before the crash"
    );
    process(Arc::clone(&calls), false)?;
    assert_eq!(calls_of(&calls).len(), 1, "and never again");
    Ok(())
}

/// With a timeout, a call no one decides in time is denied with "no answer in N": it never
/// runs, and the model reads why.
#[actix::test]
async fn a_call_no_one_decides_in_time_is_denied_and_never_runs() -> anyhow::Result<()> {
    let fixture = Fixture::new(1).await?;
    let calls = Calls::default();
    let settings = seed_actors::RuntimeSettings {
        approval_timeout: Some(std::time::Duration::from_millis(50)),
        ..seed_actors::RuntimeSettings::default()
    };
    // The deadline is read on the wall clock.
    let clock = Arc::new(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |elapsed| elapsed.as_millis() as i64)
    });
    let (runtime, _) = Runtime::start(
        fixture.store.clone(),
        Arc::new(provider()),
        vec![Arc::new(Transfer {
            calls: Arc::clone(&calls),
        })],
        settings,
        "b1".to_owned(),
        clock,
    )
    .await?;
    let (_, run_id) = runtime.send_message(session(0), "pay").await?;
    let run = within("the run", runtime.wait_for_run(run_id)).await?;
    assert_eq!(run.status, RunStatus::Succeeded, "{run:?}");
    assert!(
        calls_of(&calls).is_empty(),
        "a call no one approved never runs"
    );
    let row = fixture
        .store
        .approval(session(0), CALL_ID)
        .await?
        .expect("the approval");
    assert_eq!(row.status, ApprovalStatus::TimedOut);
    assert_eq!(row.reason.as_deref(), Some("no answer in 50 ms"));
    let results = logged_results(&fixture.store).await?;
    let content = results[0]["content"].as_str().unwrap_or_default();
    assert!(content.contains("no answer in 50 ms"), "{content}");
    Ok(())
}

/// A pass that delegates and calls a verb needing approval in one batch: the child ending
/// while the approval is pending does not take the run past it (its later pass waits for the
/// decision); approved, the call runs once, and the child's result comes in the later pass.
#[actix::test]
async fn a_child_ending_while_an_approval_waits_does_not_pass_it_by() -> anyhow::Result<()> {
    let fixture = Fixture::new(1).await?;
    let calls = Calls::default();
    let provider = ScriptedProvider::from_fn(|request: &Request, _| {
        let is_child = request
            .messages
            .iter()
            .any(|m| matches!(m.as_ref(), Message::User(user) if user.text == "find it"));
        if is_child {
            return ScriptedStep::Respond(text_response("42"));
        }
        match transfer_result(request) {
            Some((content, _)) => {
                let delegated = common::delegate_result(request).unwrap_or_default();
                ScriptedStep::Respond(text_response(&format!("{content}; {delegated}")))
            }
            None => ScriptedStep::Respond(tool_response(
                "",
                vec![
                    ToolCall {
                        id: "d1".to_owned(),
                        name: "delegate".to_owned(),
                        arguments: serde_json::json!({ "task": "find it" }),
                    },
                    ToolCall {
                        id: CALL_ID.to_owned(),
                        name: "transfer".to_owned(),
                        arguments: serde_json::json!({ "amount": 5 }),
                    },
                ],
            )),
        }
    });
    let (runtime, _) = common::start_runtime(
        fixture.store.clone(),
        Arc::new(provider),
        vec![
            Arc::new(seed_actors::verbs::delegate::Delegate),
            Arc::new(seed_actors::verbs::delegate::ReturnResult),
            Arc::new(Transfer {
                calls: Arc::clone(&calls),
            }),
        ],
        "b1",
    )
    .await?;
    let (_, run_id) = runtime.send_message(session(0), "pay").await?;
    parked_on_approval(&fixture.store, run_id).await?;
    within("the child's end", async {
        loop {
            let children = fixture.store.child_runs(run_id).await?;
            if children
                .first()
                .is_some_and(|child| child.status.is_terminal())
            {
                return anyhow::Ok(());
            }
            actix::clock::sleep(std::time::Duration::from_millis(5)).await;
        }
    })
    .await?;
    let parent = fixture.store.get_run(run_id).await?.expect("the run");
    assert_eq!(
        parent.status,
        RunStatus::Parked,
        "still waiting: {parent:?}"
    );
    assert_eq!(parent.pass, 0, "no later pass while the approval waits");
    decide(
        &runtime,
        ApprovalDecision::Approve {
            arguments: serde_json::json!({ "amount": 5 }),
        },
    )
    .await?;
    let run = within("the run", runtime.wait_for_run(run_id)).await?;
    assert_eq!(run.status, RunStatus::Succeeded, "{run:?}");
    assert_eq!(calls_of(&calls).len(), 1, "the approved call ran once");
    assert_eq!(
        run.result,
        Some(serde_json::json!({ "answer": "moved 5; 42" })),
        "the later pass read both results"
    );
    Ok(())
}
