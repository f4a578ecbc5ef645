//! Crash injection around a `memory` write, over a real SQLite file. `memory` is not safe to
//! repeat (an append run twice appends twice), so a call a crash cut off is never run again;
//! its change records the call's effect in its own transaction, and on recovery the verb's
//! reconcile answers the call with it:
//! - cut off once its intent was committed, before it ran: nothing was written; the call is
//!   answered as interrupted, and the model decides;
//! - cut off after it ran (before or after its result reached the store): the call is answered
//!   with what it did, no error, and the file holds the append once.
//!
//! A "process" is an actix system with its own store and runtime; a crash stops the world at a
//! named point (nothing more is written) and drops the system; the restart is a new system on
//! the same file with the boot sweep.

use crate::common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::common::{
    account, assert_log_agrees_with_store, in_process, log, open_store_with_sessions, session,
    within,
};
use seed_actors::crash::points;
use seed_actors::verbs::memory::Memory;
use seed_actors::{CrashPoints, Runtime};
use seed_events::{RunId, RunStatus};
use seed_providers::{
    Message, Request, ScriptedProvider, ScriptedStep, ToolCall, text_response, tool_response,
};
use seed_store::{Config, Store};

const PATH: &str = "~/memory/notes.md";
const APPENDED: &str = "appended 5 bytes to ~/memory/notes.md";

/// Appends "fact\n" to the notes, then says what the call's result was.
fn provider(requests: Arc<AtomicUsize>) -> ScriptedProvider {
    ScriptedProvider::from_fn(move |request: &Request, _| {
        requests.fetch_add(1, Ordering::SeqCst);
        let result = request.messages.iter().find_map(|m| match m.as_ref() {
            Message::ToolResult(result) => Some(result.content.clone()),
            _ => None,
        });
        match result {
            Some(result) => ScriptedStep::Respond(text_response(&format!("memory said: {result}"))),
            None => ScriptedStep::Respond(tool_response(
                "",
                vec![ToolCall {
                    id: "m1".to_owned(),
                    name: "memory".to_owned(),
                    arguments: serde_json::json!({
                        "action": "append", "path": PATH, "content": "fact\n"
                    }),
                }],
            )),
        }
    })
}

async fn start(
    store: Store,
    crash_points: CrashPoints,
    requests: Arc<AtomicUsize>,
    boot_id: &str,
) -> anyhow::Result<Runtime> {
    common::start_with_crash_points(
        store,
        Arc::new(provider(requests)),
        vec![Arc::new(Memory)],
        crash_points,
        boot_id,
    )
    .await
}

/// Process 1: "remember", crashing the first time `point` is reached. Returns the run.
fn crash_at(path: &std::path::Path, point: &'static str) -> anyhow::Result<RunId> {
    let path = path.to_owned();
    in_process(move || {
        Box::pin(async move {
            let store = open_store_with_sessions(&path, 1).await?;
            let (crash_points, has_fired) = common::crash_once_at(point);
            let requests = Arc::default();
            let runtime = start(store, crash_points, requests, "boot-1").await?;
            let (_, run_id) = runtime.send_message(session(0), "remember").await?;
            within("the crash point", has_fired).await?;
            Ok(run_id)
        })
    })
}

/// Process 2: restart on the same file and let the run end; returns the call's one result
/// event, the run's answer, the notes as stored, and the model's requests in this process.
fn restart(
    path: &std::path::Path,
    run_id: RunId,
) -> anyhow::Result<(serde_json::Value, String, Option<String>, usize)> {
    let path = path.to_owned();
    in_process(move || {
        Box::pin(async move {
            let store = Store::open(Config::new(&path))?;
            let requests = Arc::new(AtomicUsize::new(0));
            let runtime = start(
                store.clone(),
                CrashPoints::default(),
                Arc::clone(&requests),
                "boot-2",
            )
            .await?;
            let run = within("the run", runtime.wait_for_run(run_id)).await?;
            assert_eq!(run.status, RunStatus::Succeeded, "{run:?}");
            let answer = run.result.as_ref().and_then(|r| r["answer"].as_str());
            let events = log(&store, session(0)).await?;
            let results: Vec<serde_json::Value> = events
                .iter()
                .filter(|event| event.kind == "tool_result")
                .map(|event| event.content.clone())
                .collect();
            assert_eq!(results.len(), 1, "one result for the call: {events:#?}");
            assert_log_agrees_with_store(&store, session(0)).await?;
            let notes = store.read_memory(account(), PATH).await?;
            Ok((
                results[0].clone(),
                answer.unwrap_or_default().to_owned(),
                notes,
                requests.load(Ordering::SeqCst),
            ))
        })
    })
}

/// A crash at `point` is recovered with the call answered by its effect.
fn answered_with_its_effect(point: &'static str) -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("seed.db");
    let run_id = crash_at(&path, point)?;
    let (result, answer, notes, n_requests) = restart(&path, run_id)?;
    assert_eq!(result["is_error"], false, "{point}: {result}");
    assert_eq!(result["content"], APPENDED, "{point}");
    assert_eq!(answer, format!("memory said: {APPENDED}"), "{point}");
    assert_eq!(notes.as_deref(), Some("fact\n"), "{point}: appended once");
    // The response that asked for the call was committed: asked no more, only the answer.
    assert_eq!(n_requests, 1, "{point}");
    Ok(())
}

#[test]
fn a_crash_before_the_write_ran_creates_nothing_and_the_call_is_interrupted() -> anyhow::Result<()>
{
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("seed.db");
    let run_id = crash_at(&path, points::TOOL_INTENT_COMMITTED)?;
    let (result, answer, notes, _) = restart(&path, run_id)?;
    assert_eq!(result["is_error"], true, "{result}");
    assert!(
        result["content"]
            .as_str()
            .is_some_and(|text| text.starts_with("interrupted:")),
        "{result}"
    );
    assert!(answer.starts_with("memory said: interrupted:"), "{answer}");
    assert_eq!(notes, None, "the write never ran");
    Ok(())
}

#[test]
fn a_crash_after_the_write_ran_answers_the_call_with_what_it_did() -> anyhow::Result<()> {
    answered_with_its_effect(points::TOOL_MID_RUN)
}

#[test]
fn a_crash_before_the_result_commits_answers_the_call_with_what_it_did() -> anyhow::Result<()> {
    answered_with_its_effect(points::RESULT_BEFORE_COMMIT)
}

#[test]
fn a_crash_after_the_result_commits_keeps_the_result_it_had() -> anyhow::Result<()> {
    answered_with_its_effect(points::RESULT_AFTER_COMMIT)
}
