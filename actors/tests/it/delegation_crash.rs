//! A crash in the middle of a delegation, over a real SQLite file: after the restart the parent
//! still parks on its child (or takes its later pass at once when the child has ended), and its
//! model reads the child's real result in its call's place. delegate is not safe to repeat: a
//! call cut off after its child started is not run again; its reconcile finds the child by the
//! call's id and the call is answered as it would have been (the placeholder), so the adopted
//! turn ends there and parks, and the child's result replaces the placeholder like any other.
//! A parent that ended "succeeded" here would never take the later pass its child's result is
//! owed (the first two points did, before the run's end read the placeholder from the store's
//! entries).
//!
//! A "process" is an actix system with its own store and runtime; a crash stops the world at a
//! named point (nothing more is written) and drops the system; the restart is a new system on
//! the same file with the boot sweep.

use crate::common;

use std::sync::Arc;

use crate::common::within;
use crate::common::{
    assert_log_agrees_with_store, in_process, log, open_store_with_sessions, session,
};
use seed_actors::crash::points;
use seed_actors::verbs::delegate::{Delegate, ReturnResult};
use seed_actors::{CrashPoints, Runtime};
use seed_events::{RunId, RunStatus};
use seed_providers::{
    Message, Request, ScriptedProvider, ScriptedStep, ToolCall, text_response, tool_response,
};
use seed_store::{Config, Store};

const TASK: &str = "find the answer";

/// The parent delegates `TASK`; the child answers "42" (or, with `child_hangs`, never answers
/// in this process, so that only the parent's run reaches the crash point); the parent reports
/// the result it reads.
fn provider(child_hangs: bool) -> ScriptedProvider {
    ScriptedProvider::from_fn(move |request: &Request, _| {
        let is_child = request.messages.iter().any(|m| match m.as_ref() {
            Message::User(user) => user.text == TASK,
            _ => false,
        });
        if is_child && child_hangs {
            return ScriptedStep::Hang {
                text: String::new(),
            };
        }
        if is_child {
            return ScriptedStep::Respond(text_response("42"));
        }
        let delegated = request.messages.iter().find_map(|m| match m.as_ref() {
            Message::ToolResult(result) if result.tool_name == "delegate" => {
                Some(result.content.clone())
            }
            _ => None,
        });
        match delegated {
            Some(result) => ScriptedStep::Respond(text_response(&format!("parent: got {result}"))),
            None => ScriptedStep::Respond(tool_response(
                "",
                vec![ToolCall {
                    id: "d1".to_owned(),
                    name: "delegate".to_owned(),
                    arguments: serde_json::json!({ "task": TASK }),
                }],
            )),
        }
    })
}

async fn start(
    store: Store,
    crash_points: CrashPoints,
    child_hangs: bool,
    boot_id: &str,
) -> anyhow::Result<Runtime> {
    common::start_with_crash_points(
        store,
        Arc::new(provider(child_hangs)),
        vec![Arc::new(Delegate), Arc::new(ReturnResult)],
        crash_points,
        boot_id,
    )
    .await
}

/// Process 1: the parent's message, crashing the first time `point` is reached (the child's
/// model never answers here, so that is the parent's run). Returns the parent's run.
fn crash_at(path: &std::path::Path, point: &'static str) -> anyhow::Result<RunId> {
    let path = path.to_owned();
    in_process(move || {
        Box::pin(async move {
            let store = open_store_with_sessions(&path, 1).await?;
            let (crash_points, has_fired) = common::crash_once_at(point);
            let runtime = start(store, crash_points, true, "boot-1").await?;
            let (_, run_id) = runtime.send_message(session(0), "research it").await?;
            within("the crash point", has_fired).await?;
            Ok(run_id)
        })
    })
}

/// Process 2: restart on the same file and let everything run to its end.
fn restart(path: &std::path::Path, run_id: RunId, point: &'static str) -> anyhow::Result<()> {
    let path = path.to_owned();
    in_process(move || {
        Box::pin(async move {
            let store = Store::open(Config::new(&path))?;
            let runtime = start(store.clone(), CrashPoints::default(), false, "boot-2").await?;
            let run = within("the parent's run", runtime.wait_for_run(run_id)).await?;
            assert_eq!(run.status, RunStatus::Succeeded, "{point}: {run:?}");
            assert_eq!(
                run.result,
                Some(serde_json::json!({ "answer": "parent: got 42" })),
                "{point}: the parent read its child's real result"
            );
            let children = store.child_runs(run_id).await?;
            assert_eq!(children.len(), 1, "{point}: one child, started once");
            assert_eq!(children[0].status, RunStatus::Succeeded, "{point}");

            let parent_log = log(&store, session(0)).await?;
            let results: Vec<&serde_json::Value> = parent_log
                .iter()
                .filter(|e| e.kind == "tool_result")
                .map(|e| &e.content)
                .collect();
            assert_eq!(results.len(), 1, "{point}: one result for the call");
            // The call is answered with its effect (the child, then its real result), never
            // as interrupted, wherever the crash cut it off.
            assert_eq!(results[0]["content"], "42", "{point}");
            assert_eq!(results[0]["is_error"], false, "{point}");
            let notices = parent_log.iter().filter(|e| e.kind == "notice").count();
            assert_eq!(notices, 0, "{point}: the result came in its call's place");
            assert_log_agrees_with_store(&store, session(0)).await?;
            Ok(())
        })
    })
}

fn crash_and_recover(point: &'static str) -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("seed.db");
    let run_id = crash_at(&path, point)?;
    restart(&path, run_id, point)
}

#[test]
fn a_crash_after_the_child_started_and_before_the_placeholder_commits_still_parks()
-> anyhow::Result<()> {
    crash_and_recover(points::TOOL_MID_RUN)
}

#[test]
fn a_crash_after_the_placeholder_commits_still_parks() -> anyhow::Result<()> {
    crash_and_recover(points::RESULT_AFTER_COMMIT)
}

/// `run.before_finish` comes after the end's decision: the run is parked already, and the
/// restart finds it parked (the boot sweep leaves it) until its child's end resumes it.
#[test]
fn a_crash_after_the_run_parked_and_before_its_end_is_recorded_is_recovered() -> anyhow::Result<()>
{
    crash_and_recover(points::RUN_BEFORE_FINISH)
}
