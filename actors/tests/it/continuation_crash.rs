//! Crash injection at every commit point of a continuation, over a real SQLite file.
//!
//! A "process" is an actix system with its own store and runtime; a crash stops the world at a
//! named point (nothing more is written) and drops the system; the restart is a new system on
//! the same file with the boot sweep. continue_session is not safe to repeat (the spec: only
//! read, plan and status are), so a call the crash cut off is never run again; the verb's
//! reconcile asks whether it took effect:
//! - cut off before the creation committed: nothing was created; the call is answered as
//!   interrupted, and the model, asked again, decides (here it answers in the session);
//! - cut off after it: the call is answered with its effect, the same successor (found by
//!   (predecessor, call id), no error), the turn ends there, continued, and the successor
//!   answers;
//! - after the result committed: the run closes with the result it had.
//!
//! Where a successor exists: one, with its edge, manifest and two first events, answered once;
//! the predecessor's log with one continue_session call and one result; no model response
//! requested twice; log and store in agreement. Then: a crash between the edge and the
//! successor's run, with the predecessor's run lost: the boot sweep queues the successor's run,
//! and the successor is a normal session whose copied message can be retried.

use crate::common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use crate::common::continuing::{CONTINUE, good_arguments, input_of, is_projection, model};
use crate::common::within;
use crate::common::{
    assert_log_agrees_with_store, in_process, log, open_store_with_sessions, session,
};
use futures::channel::oneshot;
use seed_actors::crash::points;
use seed_actors::{CrashPoints, Runtime};
use seed_events::{EventRole, RunId, RunStatus, SessionContinuationManifest, SessionId};
use seed_providers::ScriptedProvider;
use seed_store::{Config, Store};

/// Starts a runtime with the shipped verbs and `crash_points`.
async fn start(
    store: Store,
    provider: ScriptedProvider,
    crash_points: CrashPoints,
    boot_id: &str,
) -> anyhow::Result<Runtime> {
    common::start_with_crash_points(
        store,
        Arc::new(provider),
        seed_actors::verbs::shipped(),
        crash_points,
        boot_id,
    )
    .await
}

/// Process 1: a first exchange, then "please continue", crashing the first time `point` is
/// reached. Returns the continuing run and how many requests the predecessor made.
fn crash_at(path: &std::path::Path, point: &'static str) -> anyhow::Result<(RunId, usize)> {
    let path = path.to_owned();
    in_process(move || {
        Box::pin(async move {
            let store = open_store_with_sessions(&path, 1).await?;
            let provider = model(Arc::new(Mutex::new(good_arguments())));
            let (fired, has_fired) = oneshot::channel();
            let fired = Mutex::new(Some(fired));
            let armed = Arc::new(AtomicBool::new(false));
            let crash_points = CrashPoints::new({
                let armed = Arc::clone(&armed);
                move |reached| {
                    if reached != point || !armed.load(Ordering::SeqCst) {
                        return false;
                    }
                    if let Some(fired) = fired.lock().ok().and_then(|mut fired| fired.take()) {
                        let _ = fired.send(());
                    }
                    true
                }
            });
            let runtime = start(store, provider.clone(), crash_points, "boot-1").await?;
            let (_, first) = runtime.send_message(session(0), "hello").await?;
            within("the first run", runtime.wait_for_run(first)).await?;
            armed.store(true, Ordering::SeqCst);
            let (_, run_id) = runtime.send_message(session(0), CONTINUE).await?;
            within("the crash point", has_fired).await?;
            // The predecessor's requests (the successor's run may have asked already).
            let n_predecessor = provider
                .requests()
                .iter()
                .filter(|request| !request.messages.iter().any(|m| is_projection(m)))
                .count();
            Ok((run_id, n_predecessor))
        })
    })
}

/// How the predecessor's continue_session call is answered after the restart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Expected {
    /// Nothing was created; the call is answered as interrupted and the model answers.
    NotContinued,
    /// The successor was created before the crash: the call's result names it, whether that
    /// result was committed before the crash or the recovery answered the call with its effect.
    Continued,
}

/// Process 2: restart on the same file and let everything run to its end, checking the outcome
/// `expected`. Returns the model's requests in this process.
fn restart(
    path: &std::path::Path,
    run_id: RunId,
    expected: Expected,
) -> anyhow::Result<Vec<seed_providers::Request>> {
    let path = path.to_owned();
    in_process(move || {
        Box::pin(async move {
            let store = Store::open(Config::new(&path))?;
            let provider = model(Arc::new(Mutex::new(good_arguments())));
            let runtime = start(
                store.clone(),
                provider.clone(),
                CrashPoints::default(),
                "boot-2",
            )
            .await?;
            let run = within("the continuing run", runtime.wait_for_run(run_id)).await?;
            assert_eq!(run.status, RunStatus::Succeeded, "{:?}", run.result);
            if expected == Expected::NotContinued {
                assert_not_continued(&store, &run).await?;
                return Ok(provider.requests());
            }
            let successor = run
                .continued_to_session_id()
                .ok_or_else(|| anyhow::anyhow!("no successor in {:?}", run.result))?;
            let runs = store.list_session_runs(successor).await?;
            assert_eq!(runs.len(), 1, "exactly one run for the successor");
            let successor_run =
                within("the successor's run", runtime.wait_for_run(runs[0].id)).await?;
            assert_eq!(successor_run.status, RunStatus::Succeeded);
            assert_one_continuation(&store, successor).await?;
            Ok(provider.requests())
        })
    })
}

/// The predecessor's one continue_session call and its one result.
async fn the_call_and_its_result(
    store: &Store,
) -> anyhow::Result<(Vec<seed_events::SessionEvent>, seed_events::SessionEvent)> {
    let predecessor_log = log(store, session(0)).await?;
    let n_calls = predecessor_log
        .iter()
        .filter(|event| event.kind == "tool_call")
        .count();
    let results: Vec<_> = predecessor_log
        .iter()
        .filter(|event| event.kind == "tool_result")
        .cloned()
        .collect();
    assert_eq!((n_calls, results.len()), (1, 1), "one call, one result");
    let result = results[0].clone();
    Ok((predecessor_log, result))
}

fn is_interrupted(result: &seed_events::SessionEvent) -> bool {
    result.content["is_error"] == serde_json::json!(true)
        && result.content["content"]
            .as_str()
            .is_some_and(|text| text.starts_with("interrupted:"))
}

/// A call cut off before its creation committed: no successor, the call answered as
/// interrupted, and the model's answer after it.
async fn assert_not_continued(store: &Store, run: &seed_store::RunRow) -> anyhow::Result<()> {
    assert_eq!(run.continued_to_session_id(), None, "{:?}", run.result);
    assert_eq!(store.count_successors(session(0)).await?, 0, "no edge");
    assert_eq!(store.list_sessions(common::account()).await?.len(), 1);
    let (predecessor_log, result) = the_call_and_its_result(store).await?;
    assert!(is_interrupted(&result), "{}", result.content);
    let answer = predecessor_log.last().expect("an answer");
    assert_eq!(
        answer.content["text"],
        serde_json::json!("the continuation was refused; answering here")
    );
    assert_log_agrees_with_store(store, session(0)).await
}

/// The outcome every crash after the creation must come to.
async fn assert_one_continuation(store: &Store, successor: SessionId) -> anyhow::Result<()> {
    assert_eq!(store.count_successors(session(0)).await?, 1, "one edge");
    assert_eq!(
        store.list_sessions(common::account()).await?.len(),
        2,
        "one successor"
    );
    let edge = store.edge_to(successor).await?.expect("the edge");
    let manifest = SessionContinuationManifest::from_cbor(&edge.manifest_cbor)?;
    assert_eq!(manifest.predecessor_session_id, session(0));

    let successor_log = log(store, successor).await?;
    let kinds: Vec<(Option<EventRole>, Option<&str>)> = successor_log
        .iter()
        .map(|event| (event.role, event.actor.as_deref()))
        .collect();
    assert_eq!(
        kinds,
        [
            (Some(EventRole::User), Some("system")),
            (Some(EventRole::User), Some("user")),
            (Some(EventRole::Assistant), Some("agent")),
        ],
        "projection, copied message, one answer"
    );

    // Recovered or not, the call's result is its effect: the successor, no error.
    let (predecessor_log, result) = the_call_and_its_result(store).await?;
    assert_eq!(result.content["is_error"], serde_json::json!(false));
    assert!(
        result.content["content"]
            .as_str()
            .is_some_and(|text| text.contains(&successor.to_string())),
        "{}",
        result.content
    );
    // The turn ended at the call: no answer in the predecessor after it.
    assert_eq!(
        predecessor_log.last().map(|event| event.kind.as_str()),
        Some("tool_result")
    );
    assert_log_agrees_with_store(store, session(0)).await?;
    assert_log_agrees_with_store(store, successor).await?;
    Ok(())
}

fn crash_and_recover(point: &'static str, expected: Expected) -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("seed.db");
    let (run_id, n_before) = crash_at(&path, point)?;
    // Before the crash: "hello" was answered and "please continue" asked once.
    assert_eq!(n_before, 2, "{point}");
    let requests = restart(&path, run_id, expected)?;
    let predecessor_requests = requests
        .iter()
        .filter(|request| !request.messages.iter().any(|m| is_projection(m)))
        .map(input_of)
        .collect::<Vec<_>>();
    let successor_requests = requests.len() - predecessor_requests.len();
    if expected == Expected::NotContinued {
        // The model is asked once more, with the interrupted result, and decides.
        assert_eq!(predecessor_requests, [CONTINUE], "{point}");
        assert_eq!(successor_requests, 0, "{point}");
    } else {
        // The committed continue_session response is not requested again.
        assert_eq!(predecessor_requests, Vec::<String>::new(), "{point}");
        // The successor asks at most once here (it may have answered before the crash).
        assert!(
            successor_requests <= 1,
            "{point}: {successor_requests} successor requests"
        );
    }
    Ok(())
}

#[test]
fn a_crash_before_the_creation_commits_creates_nothing_and_the_model_decides() -> anyhow::Result<()>
{
    crash_and_recover(points::CONTINUATION_BEFORE_CREATE, Expected::NotContinued)
}

#[test]
fn a_crash_after_the_creation_and_before_the_run_is_queued_is_recovered() -> anyhow::Result<()> {
    crash_and_recover(points::CONTINUATION_AFTER_CREATE, Expected::Continued)
}

#[test]
fn a_crash_after_the_run_is_queued_and_before_the_result_commits_is_recovered() -> anyhow::Result<()>
{
    crash_and_recover(points::CONTINUATION_AFTER_ENQUEUE, Expected::Continued)
}

#[test]
fn a_crash_after_the_result_commits_and_before_the_run_closes_is_recovered() -> anyhow::Result<()> {
    crash_and_recover(points::RUN_BEFORE_FINISH, Expected::Continued)
}

#[test]
fn a_successor_whose_run_was_lost_gets_it_from_the_boot_sweep() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("seed.db");
    let (run_id, _) = crash_at(&path, points::CONTINUATION_AFTER_CREATE)?;
    in_process(move || {
        Box::pin(async move {
            let store = Store::open(Config::new(&path))?;
            // The predecessor's run was lost across the restart (failed or canceled), so its
            // call is never replayed.
            store
                .set_run_status(run_id, RunStatus::Canceled, None, 10)
                .await?;
            let edge = store
                .find_continuation(session(0), common::continuing::CALL_ID)
                .await?
                .expect("the edge committed before the crash");
            let successor = edge.successor_session_id;
            assert_eq!(store.list_session_runs(successor).await?, Vec::new());
            let successor_log = log(&store, successor).await?;
            assert_eq!(
                successor_log.len(),
                2,
                "the projection and the copied message"
            );
            let copied = successor_log[1].clone();

            // The boot sweep queues the successor's run for its copied message.
            let provider = model(Arc::new(Mutex::new(good_arguments())));
            let runtime = start(
                store.clone(),
                provider.clone(),
                CrashPoints::default(),
                "boot-2",
            )
            .await?;
            let runs = store.list_session_runs(successor).await?;
            assert_eq!(runs.len(), 1);
            assert_eq!(runs[0].user_event_ids, vec![copied.id]);
            let run = within("the successor's run", runtime.wait_for_run(runs[0].id)).await?;
            assert_eq!(run.status, RunStatus::Succeeded);
            let answer = log(&store, successor).await?.pop().expect("an answer");
            assert_eq!(
                answer.content["text"],
                serde_json::json!(format!("successor answers: {CONTINUE}"))
            );

            // The successor is a normal session: its message can be retried, and it takes new
            // messages.
            let retry = runtime
                .retry_message(successor, copied.id)
                .await?
                .run_id()
                .expect("a run for the retried message");
            let retried = within("the retried run", runtime.wait_for_run(retry)).await?;
            assert_eq!(retried.status, RunStatus::Succeeded);
            let (_, next) = runtime.send_message(successor, "and the prices?").await?;
            let next = within("a new message", runtime.wait_for_run(next)).await?;
            assert_eq!(next.status, RunStatus::Succeeded);
            Ok(())
        })
    })
}
