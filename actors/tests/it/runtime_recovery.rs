//! Crash recovery at the level of the actors, over a real SQLite file.
//!
//! A "process" is an actix system with its own `Store` and `Runtime`; a crash is that system
//! going away in the middle of a turn (every task, actor and future of it dropped, nothing
//! more committed), and a restart is a new system with a new `Runtime::start` on the same
//! database file under a different boot id.
//!
//! - A call of a verb that is not safe to repeat, cut off by the crash: the boot sweep releases
//!   the lease and requeues the run, the same run adopts its turn, the call is answered as
//!   interrupted (the verb ran once in all) and the model reads that; the response committed
//!   before the crash is not requested again.
//! - A run whose answer was committed: queued again (by hand, or left `running` by a crash and
//!   requeued by the boot sweep), it ends with the committed answer and asks the model nothing.
//! - A turn that every process dies in: the boot sweeps queue it again `run_restarts_max`
//!   times, the next one fails it, and the session goes on. A delegated child's parent hears of
//!   that failure as of any other end of the child, and takes its later pass.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use crate::common::{
    Fixture, assert_log_agrees_with_store, conversation, delegating_parent_step, in_process, log,
    open_store_with_sessions, session, start_runtime, start_runtime_with, summary, within,
};
use futures::StreamExt;
use futures::channel::oneshot;
use futures::future::BoxFuture;
use seed_actors::{BootReport, Runtime, RuntimeSettings, Verb, VerbContext, VerbOutput};
use seed_events::{RunId, RunStatus};
use seed_providers::{
    Message, Request, ScriptedProvider, ScriptedStep, ToolCall, text_response, tool_response,
};
use seed_store::{Config, Store};

/// A verb that must not run twice. Its first call tells the test it started and then never
/// returns (the crash cuts it off); later calls would return at once.
struct Launch {
    n_runs: Arc<AtomicUsize>,
    started: Mutex<Option<oneshot::Sender<()>>>,
}

impl Verb for Launch {
    fn name(&self) -> &'static str {
        "launch"
    }
    fn description(&self) -> &'static str {
        "Launches the rocket. Not safe to repeat."
    }
    fn parameters(&self) -> serde_json::Value {
        serde_json::json!({"type": "object", "properties": {}})
    }
    fn safe_to_repeat(&self) -> bool {
        false
    }
    fn call(&self, _: VerbContext, _: serde_json::Value) -> BoxFuture<'static, VerbOutput> {
        let n = self.n_runs.fetch_add(1, Ordering::SeqCst) + 1;
        if n == 1 {
            let started = self
                .started
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .take();
            if let Some(started) = started {
                let _ = started.send(());
            }
            Box::pin(futures::future::pending())
        } else {
            Box::pin(async { VerbOutput::ok("launched") })
        }
    }
}

const LAUNCH_CALL_ID: &str = "launch-1";

fn launch_call() -> ToolCall {
    ToolCall {
        id: LAUNCH_CALL_ID.to_owned(),
        name: "launch".to_owned(),
        arguments: serde_json::json!({}),
    }
}

/// The first process: the model calls `launch` (not safe to repeat); the call starts and the
/// process dies. Returns the cut-off run and the model it asked.
fn crash_mid_launch(
    path: &std::path::Path,
    n_runs: &Arc<AtomicUsize>,
) -> anyhow::Result<(RunId, ScriptedProvider)> {
    let before = ScriptedProvider::new(vec![ScriptedStep::Respond(tool_response(
        "",
        vec![launch_call()],
    ))]);
    let run_id: RunId = in_process({
        let (path, before, n_runs) = (path.to_owned(), before.clone(), Arc::clone(n_runs));
        move || {
            Box::pin(async move {
                let store = open_store_with_sessions(&path, 1).await?;
                let (started, has_started) = oneshot::channel();
                let launch = Launch {
                    n_runs,
                    started: Mutex::new(Some(started)),
                };
                let (runtime, report) =
                    start_runtime(store, Arc::new(before), vec![Arc::new(launch)], "boot-1")
                        .await?;
                assert_eq!(
                    report,
                    BootReport {
                        n_leases_released: 0,
                        n_runs_requeued: 0,
                        n_runs_given_up: 0
                    }
                );
                let (_, run_id) = runtime
                    .send_message(session(0), "launch the rocket")
                    .await?;
                within("the launch call", has_started).await?;
                Ok(run_id)
            })
        }
    })?;
    Ok((run_id, before))
}

#[test]
fn a_crash_mid_call_of_an_unsafe_verb_is_recovered_without_running_it_again() -> anyhow::Result<()>
{
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("seed.db");
    let n_runs = Arc::new(AtomicUsize::new(0));

    // The first process: the model calls `launch`; the call starts and the process dies.
    let (run_id, before) = crash_mid_launch(&path, &n_runs)?;
    assert_eq!(n_runs.load(Ordering::SeqCst), 1);
    assert_eq!(before.n_requests(), 1);

    // The second process, on the same file, with a different boot id.
    let after = ScriptedProvider::from_fn(|request: &Request, _| {
        let interrupted = request.messages.iter().any(|message| {
            matches!(message.as_ref(), Message::ToolResult(result)
                if result.content.starts_with("interrupted"))
        });
        ScriptedStep::Respond(text_response(if interrupted {
            "The launch was cut off; I will check whether it happened."
        } else {
            "unexpected request"
        }))
    });
    let system = actix::System::new();
    system.block_on({
        let (after, n_runs) = (after.clone(), Arc::clone(&n_runs));
        async move {
            let store = Store::open(Config::new(&path))?;
            let launch = Launch {
                n_runs,
                started: Mutex::new(None),
            };
            let (runtime, report) = start_runtime(
                store.clone(),
                Arc::new(after),
                vec![Arc::new(launch)],
                "boot-2",
            )
            .await?;
            assert_eq!(
                report,
                BootReport {
                    n_leases_released: 1,
                    n_runs_requeued: 1,
                    n_runs_given_up: 0
                },
                "the boot sweep found the crashed run and its lease"
            );
            let run = within("the recovered run", runtime.wait_for_run(run_id)).await?;
            assert_eq!(run.status, RunStatus::Succeeded, "{run:?}");
            assert_eq!(run.attempts, 2, "claimed once by each process");
            assert_eq!(
                run.result,
                Some(serde_json::json!({
                    "answer": "The launch was cut off; I will check whether it happened."
                }))
            );

            let events = log(&store, session(0)).await?;
            let kinds: Vec<&str> = events.iter().map(|event| event.kind.as_str()).collect();
            assert_eq!(
                kinds,
                ["message", "tool_call", "tool_result", "message"],
                "{events:#?}"
            );
            let result = &events[2];
            assert_eq!(result.content["tool_call_id"], LAUNCH_CALL_ID);
            assert_eq!(result.content["is_error"], true);
            assert!(
                result.content["content"]
                    .as_str()
                    .is_some_and(|text| text.starts_with("interrupted")),
                "{result:?}"
            );
            assert!(
                events
                    .iter()
                    .all(|event| event.run_id.is_none_or(|id| id == run_id))
            );
            assert_log_agrees_with_store(&store, session(0)).await?;
            anyhow::Ok(())
        }
    })?;
    drop(system);

    // The unsafe verb ran once in all: its cut-off call was answered, not repeated.
    assert_eq!(n_runs.load(Ordering::SeqCst), 1, "launch ran exactly once");
    // Each model step was requested once: step 0 before the crash, step 1 after it. The
    // response committed before the crash was not requested again.
    assert_eq!(before.n_requests(), 1);
    let requests = after.requests();
    assert_eq!(requests.len(), 1, "{requests:#?}");
    assert_eq!(
        summary(&conversation(&requests[0])),
        [
            "user: launch the rocket".to_owned(),
            "assistant:  [call launch]".to_owned(),
            format!(
                "result: {}",
                seed_durable::record::interrupted_result(LAUNCH_CALL_ID, "launch").content
            ),
        ]
    );
    let Message::Assistant(committed) = conversation(&requests[0])[1] else {
        unreachable!("checked above")
    };
    assert_eq!(
        committed,
        &tool_response("", vec![launch_call()]),
        "the committed response, exactly as the provider sent it"
    );
    Ok(())
}

#[actix::test]
async fn a_requeued_run_that_was_already_answered_returns_its_answer_without_asking_again()
-> anyhow::Result<()> {
    let fixture = Fixture::new(1).await?;
    let provider = ScriptedProvider::new(vec![ScriptedStep::Respond(text_response("forty-two"))]);
    let runtime = fixture.start(provider.clone(), "boot-1").await?;
    let (_, run_id) = runtime
        .send_message(session(0), "what is the answer")
        .await?;
    let first = within("the run", runtime.wait_for_run(run_id)).await?;
    assert_eq!(first.status, RunStatus::Succeeded, "{first:?}");
    assert_eq!(provider.n_requests(), 1);
    let events_before = log(&fixture.store, session(0)).await?;

    // As if the run had not been closed after its answer's commit: queued again.
    let now = 1_900_000_000_000;
    assert!(
        fixture
            .store
            .set_run_status(run_id, RunStatus::Queued, None, now)
            .await?
    );
    runtime.wake();
    let again = within("the requeued run", runtime.wait_for_run(run_id)).await?;
    assert_eq!(again.status, RunStatus::Succeeded, "{again:?}");
    assert_eq!(
        again.result,
        Some(serde_json::json!({ "answer": "forty-two" }))
    );
    assert_eq!(again.attempts, 2);
    assert_eq!(
        provider.n_requests(),
        1,
        "the committed answer was returned, the model not asked again"
    );
    let events_after = log(&fixture.store, session(0)).await?;
    assert_eq!(events_after, events_before, "nothing new reached the log");
    assert_log_agrees_with_store(&fixture.store, session(0)).await?;
    Ok(())
}

#[test]
fn a_crash_after_the_answer_was_committed_is_recovered_without_asking_again() -> anyhow::Result<()>
{
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("seed.db");

    // The first process answers, and dies after the answer's commit but before the run was
    // closed: the run is left `running` under its boot id, and so is its lease.
    let before = ScriptedProvider::new(vec![ScriptedStep::Respond(text_response("forty-two"))]);
    let run_id: RunId = in_process({
        let (path, before) = (path.clone(), before.clone());
        move || {
            Box::pin(async move {
                let store = open_store_with_sessions(&path, 1).await?;
                let (runtime, _) =
                    start_runtime(store.clone(), Arc::new(before), Vec::new(), "boot-1").await?;
                let (_, run_id) = runtime
                    .send_message(session(0), "what is the answer")
                    .await?;
                let run = within("the run", runtime.wait_for_run(run_id)).await?;
                assert_eq!(run.status, RunStatus::Succeeded, "{run:?}");
                let now = 1_900_000_000_000;
                store
                    .set_run_status(run_id, RunStatus::Running, None, now)
                    .await?;
                let lease = store
                    .acquire_lease(session(0), "boot-1", Some(run_id), now)
                    .await?;
                assert!(matches!(lease, seed_store::LeaseOutcome::Acquired(_)));
                Ok(run_id)
            })
        }
    })?;
    assert_eq!(before.n_requests(), 1);

    let after = ScriptedProvider::new(Vec::new());
    let system = actix::System::new();
    system.block_on({
        let after = after.clone();
        async move {
            let store = Store::open(Config::new(&path))?;
            let events_before = log(&store, session(0)).await?;
            let (runtime, report) =
                start_runtime(store.clone(), Arc::new(after), Vec::new(), "boot-2").await?;
            assert_eq!(
                report,
                BootReport {
                    n_leases_released: 1,
                    n_runs_requeued: 1,
                    n_runs_given_up: 0
                }
            );
            let run = within("the recovered run", runtime.wait_for_run(run_id)).await?;
            assert_eq!(run.status, RunStatus::Succeeded, "{run:?}");
            assert_eq!(
                run.result,
                Some(serde_json::json!({ "answer": "forty-two" }))
            );
            assert_eq!(
                log(&store, session(0)).await?,
                events_before,
                "nothing new reached the log"
            );
            assert_log_agrees_with_store(&store, session(0)).await?;
            anyhow::Ok(())
        }
    })?;
    drop(system);
    assert_eq!(after.n_requests(), 0, "the model was not asked again");
    Ok(())
}

/// The third case: the run that was cut off did not come back (it was failed across the
/// restart), and a later run of the session finds its turn unsettled. It gives that turn up:
/// the cut-off call gets the runtime's "interrupted by a service restart" result in the log,
/// the context is rebuilt from the log, and the unsafe verb is not run again.
#[test]
fn a_later_run_gives_up_a_turn_a_crashed_run_left_unsettled() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("seed.db");
    let n_runs = Arc::new(AtomicUsize::new(0));

    let (crashed_run, _) = crash_mid_launch(&path, &n_runs)?;

    let after = ScriptedProvider::new(vec![ScriptedStep::Respond(text_response(
        "The launch was cut off by a restart; shall I check on it?",
    ))]);
    let system = actix::System::new();
    system.block_on({
        let (after, n_runs) = (after.clone(), Arc::clone(&n_runs));
        async move {
            let store = Store::open(Config::new(&path))?;
            // The crashed run is not coming back.
            assert!(
                store
                    .set_run_status(crashed_run, RunStatus::Failed, None, 1_900_000_000_000)
                    .await?
            );
            let launch = Launch {
                n_runs,
                started: Mutex::new(None),
            };
            let (runtime, report) = start_runtime(
                store.clone(),
                Arc::new(after),
                vec![Arc::new(launch)],
                "boot-2",
            )
            .await?;
            assert_eq!(
                report,
                BootReport {
                    n_leases_released: 1,
                    n_runs_requeued: 0,
                    n_runs_given_up: 0
                }
            );
            let (_, run_id) = runtime.send_message(session(0), "did it launch?").await?;
            let run = within("the later run", runtime.wait_for_run(run_id)).await?;
            assert_eq!(run.status, RunStatus::Succeeded, "{run:?}");
            assert_eq!(
                store.get_run(crashed_run).await?.map(|run| run.status),
                Some(RunStatus::Failed)
            );

            let events = log(&store, session(0)).await?;
            let results: Vec<_> = events
                .iter()
                .filter(|event| event.kind == "tool_result")
                .collect();
            assert_eq!(results.len(), 1, "{events:#?}");
            assert_eq!(results[0].content["tool_call_id"], LAUNCH_CALL_ID);
            assert_eq!(
                results[0].content["content"],
                seed_durable::record::restart_result(LAUNCH_CALL_ID, "launch").content
            );
            assert_log_agrees_with_store(&store, session(0)).await?;
            anyhow::Ok(())
        }
    })?;
    drop(system);

    assert_eq!(n_runs.load(Ordering::SeqCst), 1, "launch ran exactly once");
    let requests = after.requests();
    assert_eq!(requests.len(), 1, "{requests:#?}");
    assert_eq!(
        summary(&conversation(&requests[0])),
        [
            "user: launch the rocket".to_owned(),
            "assistant:  [call launch]".to_owned(),
            format!(
                "result: {}",
                seed_durable::record::restart_result(LAUNCH_CALL_ID, "launch").content
            ),
            "user: did it launch?".to_owned(),
        ],
        "a context rebuilt from the log"
    );
    Ok(())
}

/// A runtime on `store` whose boot sweeps may queue a cut-off run again `restarts_max` times.
async fn start_with_restarts_max(
    store: Store,
    provider: ScriptedProvider,
    verbs: Vec<Arc<dyn Verb>>,
    restarts_max: i64,
    boot_id: &str,
) -> anyhow::Result<(Runtime, BootReport)> {
    let settings = RuntimeSettings {
        run_restarts_max: restarts_max,
        ..RuntimeSettings::default()
    };
    start_runtime_with(store, Arc::new(provider), verbs, settings, boot_id).await
}

/// The store of a "process": the first makes the database with its one session, a restart
/// opens what the processes before it left.
async fn open_for_process(path: &std::path::Path, first: bool) -> anyhow::Result<Store> {
    if first {
        open_store_with_sessions(path, 1).await
    } else {
        Ok(Store::open(Config::new(path))?)
    }
}

/// A process whose model is asked for the run's answer and never gives it, killed there: a turn
/// that brings every process down. Process 0 sends the message; each later one finds the run
/// requeued by its boot sweep and starts it again. Returns the run.
fn die_while_the_model_streams(
    path: &std::path::Path,
    process_idx: i64,
    restarts_max: i64,
    sent: Option<RunId>,
) -> anyhow::Result<RunId> {
    let path = path.to_owned();
    in_process(move || {
        Box::pin(async move {
            let store = open_for_process(&path, sent.is_none()).await?;
            let (asked, mut was_asked) = futures::channel::mpsc::unbounded();
            let provider = ScriptedProvider::from_fn(move |_, _| {
                let _ = asked.unbounded_send(());
                ScriptedStep::Hang {
                    text: "Let me think".to_owned(),
                }
            });
            let (runtime, report) = start_with_restarts_max(
                store,
                provider,
                Vec::new(),
                restarts_max,
                &format!("boot-{process_idx}"),
            )
            .await?;
            let requeued = usize::from(sent.is_some());
            assert_eq!(
                report,
                BootReport {
                    n_leases_released: requeued,
                    n_runs_requeued: requeued,
                    n_runs_given_up: 0
                },
                "process {process_idx}"
            );
            let run_id = match sent {
                Some(run_id) => run_id,
                None => runtime.send_message(session(0), "hello").await?.1,
            };
            within("the model is asked", was_asked.next()).await;
            Ok(run_id)
        })
    })
}

#[test]
fn a_run_cut_off_by_every_restart_is_failed_after_the_limit_and_its_session_goes_on()
-> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("seed.db");
    let restarts_max = 2;
    // The first process and `restarts_max` restarts each die in the run's turn.
    let mut run_id = None;
    for process_idx in 0..=restarts_max {
        run_id = Some(die_while_the_model_streams(
            &path,
            process_idx,
            restarts_max,
            run_id,
        )?);
    }
    let run_id = run_id.expect("the run");

    // The next boot gives the run up: it ends failed, and the model is not asked for it.
    let after = ScriptedProvider::new(vec![ScriptedStep::Respond(text_response("Hello again."))]);
    let system = actix::System::new();
    system.block_on({
        let after = after.clone();
        async move {
            let store = Store::open(Config::new(&path))?;
            let (runtime, report) = start_with_restarts_max(
                store.clone(),
                after,
                Vec::new(),
                restarts_max,
                "boot-last",
            )
            .await?;
            assert_eq!(
                report,
                BootReport {
                    n_leases_released: 1,
                    n_runs_requeued: 0,
                    n_runs_given_up: 1
                }
            );
            let run = store.get_run(run_id).await?.expect("the run");
            assert_eq!(run.status, RunStatus::Failed, "{run:?}");
            assert_eq!(
                run.attempts,
                restarts_max + 1,
                "started by each process once"
            );
            let error = run
                .result
                .as_ref()
                .and_then(|result| result["error"].as_str());
            assert!(
                error.is_some_and(|error| error.contains("restarts")),
                "{run:?}"
            );
            assert!(
                store.list_running_runs().await?.is_empty(),
                "nothing left running"
            );

            // The session goes on: a new message is answered by a run of its own.
            let (_, next_run) = runtime.send_message(session(0), "are you there?").await?;
            let next = within("the next run", runtime.wait_for_run(next_run)).await?;
            assert_eq!(next.status, RunStatus::Succeeded, "{next:?}");
            assert_eq!(
                next.result,
                Some(serde_json::json!({"answer": "Hello again."}))
            );
            assert_log_agrees_with_store(&store, session(0)).await?;
            anyhow::Ok(())
        }
    })?;
    drop(system);
    let requests = after.requests();
    assert_eq!(
        requests.len(),
        1,
        "only the new message's run asked: {requests:#?}"
    );
    Ok(())
}

/// The delegation verbs, for a parent to delegate with.
fn delegation_verbs() -> Vec<Arc<dyn Verb>> {
    use seed_actors::verbs::delegate::{Delegate, ReturnResult};
    vec![Arc::new(Delegate), Arc::new(ReturnResult)]
}

/// The user's newest message in `request`, past what the runtime adds to each turn.
fn newest_user_text(request: &Request) -> Option<&str> {
    request
        .messages
        .iter()
        .rev()
        .find_map(|m| match m.as_ref() {
            Message::User(user) if !user.text.starts_with('<') => Some(user.text.as_str()),
            _ => None,
        })
}

/// The parent delegates "find the answer" and then reports what it reads; the child's model
/// is asked (told on `asked`) and never answers.
fn delegating_provider(asked: futures::channel::mpsc::UnboundedSender<()>) -> ScriptedProvider {
    ScriptedProvider::from_fn(move |request: &Request, _| {
        if newest_user_text(request) == Some("find the answer") {
            let _ = asked.unbounded_send(());
            return ScriptedStep::Hang {
                text: "Looking".to_owned(),
            };
        }
        delegating_parent_step(request, false)
    })
}

#[test]
fn a_delegated_child_cut_off_by_every_restart_is_failed_and_its_parent_hears_of_it()
-> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("seed.db");
    let restarts_max = 1;
    // The first process delegates; it and each restart die while the child's model streams.
    let mut parent_run = None;
    for process_idx in 0..=restarts_max {
        let path = path.clone();
        parent_run = Some(in_process(move || {
            Box::pin(async move {
                let store = open_for_process(&path, parent_run.is_none()).await?;
                let (asked, mut child_asked) = futures::channel::mpsc::unbounded();
                let (runtime, report) = start_with_restarts_max(
                    store,
                    delegating_provider(asked),
                    delegation_verbs(),
                    restarts_max,
                    &format!("boot-{process_idx}"),
                )
                .await?;
                assert_eq!(report.n_runs_given_up, 0, "process {process_idx}");
                let parent_run = match parent_run {
                    Some(run_id) => run_id,
                    None => runtime.send_message(session(0), "research it").await?.1,
                };
                within("the child's model is asked", child_asked.next()).await;
                Ok(parent_run)
            })
        })?);
    }
    let parent_run = parent_run.expect("the parent's run");

    // The next boot gives the child up; the parent hears of it and answers with what it heard.
    let (asked, mut child_asked) = futures::channel::mpsc::unbounded();
    let provider = delegating_provider(asked);
    let system = actix::System::new();
    let child_run = system.block_on({
        let provider = provider.clone();
        async move {
            let store = Store::open(Config::new(&path))?;
            let (runtime, report) = start_with_restarts_max(
                store.clone(),
                provider,
                delegation_verbs(),
                restarts_max,
                "boot-last",
            )
            .await?;
            assert_eq!(report.n_runs_given_up, 1, "{report:?}");
            let parent = within("the parent's run", runtime.wait_for_run(parent_run)).await?;
            assert_eq!(parent.status, RunStatus::Succeeded, "{parent:?}");
            let answer = parent.result.as_ref().and_then(|r| r["answer"].as_str());
            assert!(
                answer.is_some_and(|a| a.contains("ended failed") && a.contains("restarts")),
                "the parent read the child's failure: {parent:?}"
            );
            assert!(
                store.list_running_runs().await?.is_empty(),
                "nothing left running"
            );
            assert_log_agrees_with_store(&store, session(0)).await?;
            anyhow::Ok(child_asked.try_recv().is_ok())
        }
    })?;
    drop(system);
    assert!(!child_run, "the given-up child's model is not asked again");
    Ok(())
}
