//! A full disk mid-turn loses nothing and repeats nothing, and says so, as the spec has it: a
//! store operation the database refuses closes the harness and the turn ends with an error —
//! "the database refused a write: disk full" in the run's result and in a notice in the log —
//! while what it had committed stays (log and store agree); the next message works once there
//! is room. A run's end the disk refuses is written again after a pause. Both with injected
//! faults and with a real SQLITE_FULL (`max_page_count`).

use crate::common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use crate::common::{
    Echo, account, assert_log_agrees_with_store, echo_then_answer, log, session, test_clock,
};
use seed_actors::{Runtime, RuntimeSettings};
use seed_events::RunStatus;
use seed_store::{Config, Fault, FaultInjector, NewSession, Store};

/// Fails the `skip`-th and following commits, `n_failures` of them, once armed.
fn injector(
    armed: Arc<AtomicBool>,
    skip: usize,
    n_failures: usize,
) -> (FaultInjector, Arc<AtomicUsize>) {
    let seen = Arc::new(AtomicUsize::new(0));
    let failed = Arc::new(AtomicUsize::new(0));
    let (seen_by, failed_by) = (Arc::clone(&seen), Arc::clone(&failed));
    let injector = FaultInjector(Arc::new(move || {
        if !armed.load(Ordering::SeqCst) {
            return None;
        }
        let idx = seen_by.fetch_add(1, Ordering::SeqCst);
        let fail = idx >= skip && idx < skip + n_failures;
        if fail {
            failed_by.fetch_add(1, Ordering::SeqCst);
        }
        fail.then_some(Fault::DiskFull)
    }));
    (injector, failed)
}

/// A store in `dir` whose commits `faults` may refuse, with one session, and a runtime over it.
async fn start(
    dir: &tempfile::TempDir,
    faults: FaultInjector,
    settings: RuntimeSettings,
) -> anyhow::Result<(Store, Runtime)> {
    start_with(dir, faults, settings, echo_then_answer()).await
}

/// [`start`] with `model`.
async fn start_with(
    dir: &tempfile::TempDir,
    faults: FaultInjector,
    settings: RuntimeSettings,
    model: seed_providers::ScriptedProvider,
) -> anyhow::Result<(Store, Runtime)> {
    let store = Store::open(Config {
        faults: Some(faults),
        ..Config::new(dir.path().join("seed.db"))
    })?;
    store.create_account(account(), vec![1], 0).await?;
    store
        .create_session(NewSession::new(session(0), account(), 0))
        .await?;
    let (runtime, _) = Runtime::start(
        store.clone(),
        Arc::new(model),
        vec![Arc::new(Echo)],
        settings,
        "boot-1".to_owned(),
        test_clock(),
    )
    .await?;
    Ok((store, runtime))
}

/// Once the log agrees with the store: how many times the answer and a verb's result are in
/// the log, and the log.
async fn answers_and_results(
    store: &Store,
) -> anyhow::Result<(usize, usize, Vec<seed_events::SessionEvent>)> {
    assert_log_agrees_with_store(store, session(0)).await?;
    let log = log(store, session(0)).await?;
    let answers = log
        .iter()
        .filter(|event| event.content["text"] == "answer: hello there")
        .count();
    let results = log
        .iter()
        .filter(|event| event.kind == "tool_result")
        .count();
    Ok((answers, results, log))
}

/// The run's end as the turn the disk refused leaves it: failed, saying why, with its notice
/// in the log once.
fn assert_refused_write(run: &seed_store::RunRow, log: &[seed_events::SessionEvent]) {
    assert_eq!(run.status, RunStatus::Failed, "{run:?}");
    assert_eq!(
        run.result,
        Some(serde_json::json!({ "error": seed_actors::run_end::REFUSED_WRITE }))
    );
    let notices: Vec<&seed_events::SessionEvent> = log
        .iter()
        .filter(|event| event.meta["run_failed"] == serde_json::json!(run.id))
        .collect();
    assert_eq!(notices.len(), 1, "{log:#?}");
    let text = notices[0].content["text"].as_str().unwrap_or_default();
    assert!(text.contains(seed_actors::run_end::REFUSED_WRITE), "{text}");
}

#[actix::test]
async fn a_turn_the_disk_refuses_ends_with_the_error_and_loses_nothing() -> anyhow::Result<()> {
    // Each skip puts the refusal at a different commit of the turn: the run's claim (with its
    // lease), the input, the response, the verb's result, the answer, the run's end, and what
    // comes after (how many commits a turn takes varies a little: an empty claim may share a
    // commit with another). So the skips go on until one lands past the turn's last commit,
    // which has to come after the six above.
    const TURN_COMMITS_MIN: usize = 6;
    let mut n_refused_turns = 0;
    for skip in 0.. {
        anyhow::ensure!(
            skip < 4 * TURN_COMMITS_MIN,
            "faults kept landing at skip {skip}"
        );
        let dir = tempfile::tempdir()?;
        let armed = Arc::new(AtomicBool::new(false));
        // Armed before the message, whose own commit comes first and is never refused: the
        // turn's commits then come in a fixed order.
        let (faults, failed) = injector(Arc::clone(&armed), skip + 1, 2);
        let (store, runtime) = start(&dir, faults, RuntimeSettings::default()).await?;
        armed.store(true, Ordering::SeqCst);
        let (_, run_id) = runtime.send_message(session(0), "hello there").await?;
        let run = common::within("the run", runtime.wait_for_run(run_id)).await?;
        let (answers, results, log) = answers_and_results(&store).await?;
        if run.status == RunStatus::Failed {
            // Refused mid-turn: it says why, and what it committed is kept, once.
            assert_refused_write(&run, &log);
            assert!(answers <= 1 && results <= 1, "skip {skip}: {log:#?}");
            n_refused_turns += 1;
        } else {
            // Refused around the turn (its claim, its end), which is tried again: answered once.
            assert_eq!(run.status, RunStatus::Succeeded, "skip {skip}: {run:?}");
            assert_eq!((answers, results), (1, 1), "skip {skip}: {log:#?}");
        }
        // The next message works once there is room again.
        armed.store(false, Ordering::SeqCst);
        let (_, next) = runtime.send_message(session(0), "and again").await?;
        let next = common::within("the next run", runtime.wait_for_run(next)).await?;
        assert_eq!(next.status, RunStatus::Succeeded, "skip {skip}: {next:?}");
        assert_log_agrees_with_store(&store, session(0)).await?;
        if failed.load(Ordering::SeqCst) == 0 {
            assert!(
                skip >= TURN_COMMITS_MIN,
                "skip {skip}: no fault landed, yet a turn commits at least {TURN_COMMITS_MIN} times"
            );
            break;
        }
    }
    assert!(
        n_refused_turns >= 3,
        "the faults landed mid-turn {n_refused_turns} times"
    );
    Ok(())
}

/// A run's end the disk refuses is written again after a pause, in the run's own task: the
/// turn is not run again, and the session's actor stays for it past its idle while.
#[actix::test]
async fn a_runs_end_refused_by_a_full_disk_is_recorded_after_a_pause() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    // Armed once the turn is over: the next commits are the run's end (with its lease's
    // release) and the lease's release alone.
    let armed = Arc::new(AtomicBool::new(false));
    let (faults, failed) = injector(Arc::clone(&armed), 0, 2);
    let n_finishing = Arc::new(AtomicUsize::new(0));
    // The actor would be idle long before the pause is over, were the end's retry not activity.
    let idle = std::time::Duration::from_millis(100);
    assert!(idle < seed_actors::session::DISK_FULL_PAUSE / 4);
    let settings = RuntimeSettings {
        session_idle: idle,
        crash_points: seed_actors::CrashPoints::new({
            let (armed, n_finishing) = (Arc::clone(&armed), Arc::clone(&n_finishing));
            move |point| {
                if point == seed_actors::crash::points::RUN_BEFORE_FINISH
                    && n_finishing.fetch_add(1, Ordering::SeqCst) == 0
                {
                    armed.store(true, Ordering::SeqCst);
                }
                false
            }
        }),
        ..RuntimeSettings::default()
    };
    let model = echo_then_answer();
    let (store, runtime) = start_with(&dir, faults, settings, model.clone()).await?;
    let (_, run_id) = runtime.send_message(session(0), "hello there").await?;
    let run = common::within("the run", runtime.wait_for_run(run_id)).await?;
    assert_eq!(run.status, RunStatus::Succeeded, "{run:?}");
    assert_eq!(failed.load(Ordering::SeqCst), 2);
    // One turn, ended once it could be written: not run again, the model asked twice in all.
    assert_eq!(n_finishing.load(Ordering::SeqCst), 1);
    assert_eq!(model.n_requests(), 2);
    assert_eq!(
        run.result,
        Some(serde_json::json!({ "answer": "answer: hello there" }))
    );
    assert!(store.get_lease(session(0)).await?.is_none());
    let (answers, results, log) = answers_and_results(&store).await?;
    assert_eq!((answers, results), (1, 1), "{log:#?}");
    Ok(())
}

/// A real SQLITE_FULL: the database capped a few pages above what it holds, a message whose
/// turn does not fit. The turn ends with the error; once room is made (a memory file deleted),
/// the run's end is in and the next message is answered.
#[actix::test]
async fn a_real_full_database_ends_the_turn_and_the_next_message_works_once_room_is_made()
-> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("seed.db");
    {
        let store = Store::open(Config::new(&path))?;
        store.create_account(account(), vec![1], 0).await?;
        store
            .create_session(NewSession::new(session(0), account(), 0))
            .await?;
        // Room to give back later: 160 KiB of memory.
        store
            .write_memory(account(), "~/memory/big.md", "m".repeat(160 * 1024), 1)
            .await?;
    }
    let n_pages = Store::open(Config::new(&path))?.page_count().await?;
    // About 200 KiB of room: the message (40 KiB) fits; its turn (the input, the echo's call
    // and result, the answer: four more copies of it, and the log's) does not.
    let store = Store::open(Config {
        max_page_count: Some(n_pages + 50),
        ..Config::new(&path)
    })?;
    // Told when the turn is over (refused by the full disk): its end is written next, or tried
    // again after a pause while there is no room for it either.
    let (turn_over, turn_is_over) = futures::channel::oneshot::channel::<()>();
    let turn_over = std::sync::Mutex::new(Some(turn_over));
    let settings = RuntimeSettings {
        crash_points: seed_actors::CrashPoints::new(move |point| {
            if point == seed_actors::crash::points::RUN_BEFORE_FINISH
                && let Some(turn_over) = turn_over.lock().ok().and_then(|mut sender| sender.take())
            {
                let _ = turn_over.send(());
            }
            false
        }),
        ..RuntimeSettings::default()
    };
    let model = echo_then_answer();
    let (runtime, _) = Runtime::start(
        store.clone(),
        Arc::new(model),
        vec![Arc::new(Echo)],
        settings,
        "boot-1".to_owned(),
        test_clock(),
    )
    .await?;
    let (_, run_id) = runtime
        .send_message(session(0), &"x".repeat(40 * 1024))
        .await?;
    common::within("the turn's end", turn_is_over).await?;
    assert!(store.delete_memory(account(), "~/memory/big.md").await?);
    let run = common::within("the run", runtime.wait_for_run(run_id)).await?;
    let log = log(&store, session(0)).await?;
    assert_refused_write(&run, &log);
    assert_log_agrees_with_store(&store, session(0)).await?;
    let (_, next) = runtime.send_message(session(0), "small now").await?;
    let next = common::within("the next run", runtime.wait_for_run(next)).await?;
    assert_eq!(next.status, RunStatus::Succeeded, "{next:?}");
    Ok(())
}
