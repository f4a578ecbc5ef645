//! A full disk mid-turn loses nothing and repeats nothing: the run whose commit (or log write)
//! the store refused waits a moment and tries again, and its next attempt projects what had
//! committed, so the log and the store agree and the answer is there once.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use common::{
    Echo, account, assert_log_agrees_with_store, echo_then_answer, log, session, test_clock,
};
use seed_actors::{Runtime, RuntimeSettings};
use seed_events::RunStatus;
use seed_store::{Config, FaultInjector, NewSession, Store};

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
            return false;
        }
        let idx = seen_by.fetch_add(1, Ordering::SeqCst);
        let fail = idx >= skip && idx < skip + n_failures;
        if fail {
            failed_by.fetch_add(1, Ordering::SeqCst);
        }
        fail
    }));
    (injector, failed)
}

/// A store in `dir` whose commits `faults` may refuse, with one session, and a runtime over it.
async fn start(
    dir: &tempfile::TempDir,
    faults: FaultInjector,
    settings: RuntimeSettings,
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
        Arc::new(echo_then_answer()),
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

#[actix::test]
async fn a_turn_cut_off_by_a_full_disk_tries_again_and_the_log_catches_up() -> anyhow::Result<()> {
    // Each skip puts the refusal at a different commit of the turn: the run's claim (with its
    // lease), the input, the response, the verb's result, the answer, the run's end with the
    // log write, and what comes after (how many commits a turn takes varies a little: an empty
    // claim may share a commit with another). So the skips go on until one lands past the
    // turn's last commit, which has to come after the six above. The run's end has a test of
    // its own, below.
    const TURN_COMMITS_MIN: usize = 6;
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
        assert_eq!(run.status, RunStatus::Succeeded, "skip {skip}: {run:?}");
        // Let the run's last projection land, then compare.
        actix::clock::sleep(std::time::Duration::from_millis(50)).await;
        let (answers, results, log) = answers_and_results(&store).await?;
        assert_eq!((answers, results), (1, 1), "skip {skip}: {log:#?}");
        if failed.load(Ordering::SeqCst) == 0 {
            assert!(
                skip >= TURN_COMMITS_MIN,
                "skip {skip}: no fault landed, yet a turn commits at least {TURN_COMMITS_MIN} times"
            );
            break;
        }
    }
    Ok(())
}

#[actix::test]
async fn a_runs_end_refused_by_a_full_disk_is_recorded_after_a_pause() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    // Armed once the turn is over and projected: the next commit is the run's end (with its
    // lease's release), and the one after it the run's requeueing.
    let armed = Arc::new(AtomicBool::new(false));
    let (faults, failed) = injector(Arc::clone(&armed), 0, 2);
    let n_finishing = Arc::new(AtomicUsize::new(0));
    let settings = RuntimeSettings {
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
    let (store, runtime) = start(&dir, faults, settings).await?;
    let (_, run_id) = runtime.send_message(session(0), "hello there").await?;
    let run = common::within("the run", runtime.wait_for_run(run_id)).await?;
    assert_eq!(run.status, RunStatus::Succeeded, "{run:?}");
    assert_eq!(failed.load(Ordering::SeqCst), 2);
    // The first attempt reached its end and was refused; the second adopted the answered turn.
    assert_eq!(n_finishing.load(Ordering::SeqCst), 2);
    assert_eq!(
        run.result,
        Some(serde_json::json!({ "answer": "answer: hello there" }))
    );
    assert!(store.get_lease(session(0)).await?.is_none());
    let (answers, results, log) = answers_and_results(&store).await?;
    assert_eq!((answers, results), (1, 1), "{log:#?}");
    Ok(())
}

#[actix::test]
async fn a_run_pausing_after_a_full_disk_keeps_its_actor_past_the_idle_while() -> anyhow::Result<()>
{
    let dir = tempfile::tempdir()?;
    let armed = Arc::new(AtomicBool::new(false));
    // The turn's third commit (its first model response) is refused, twice.
    let (faults, failed) = injector(Arc::clone(&armed), 3, 2);
    // The actor would be idle long before the pause is over, were the pause not activity.
    let idle = std::time::Duration::from_millis(100);
    assert!(idle < seed_actors::session::DISK_FULL_PAUSE / 4);
    let settings = RuntimeSettings {
        session_idle: idle,
        ..RuntimeSettings::default()
    };
    let (store, runtime) = start(&dir, faults, settings).await?;
    armed.store(true, Ordering::SeqCst);
    let (_, run_id) = runtime.send_message(session(0), "hello there").await?;
    let run = common::within("the run", runtime.wait_for_run(run_id)).await?;
    assert_eq!(run.status, RunStatus::Succeeded, "{run:?}");
    assert!(failed.load(Ordering::SeqCst) >= 1, "no fault landed");
    let (answers, results, log) = answers_and_results(&store).await?;
    assert_eq!((answers, results), (1, 1), "{log:#?}");
    Ok(())
}
