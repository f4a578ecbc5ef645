//! Every named crash point is reached where it says: a hook that never crashes records the
//! points a turn with an unsafe verb call, a continuation and a boot pass through.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};

use crate::common::continuing::{CONTINUE, good_arguments, model};
use crate::common::{open_store_with_sessions, session, test_clock, within};
use seed_actors::crash::points;
use seed_actors::{CrashPoints, Runtime, RuntimeSettings};
use seed_events::RunStatus;

#[actix::test]
async fn every_named_point_is_reached() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let store = open_store_with_sessions(&dir.path().join("seed.db"), 1).await?;
    let reached: Arc<Mutex<BTreeSet<&'static str>>> = Arc::default();
    let crash_points = CrashPoints::new({
        let reached = Arc::clone(&reached);
        move |point| {
            reached.lock().map(|mut set| set.insert(point)).ok();
            false
        }
    });
    let settings = RuntimeSettings {
        crash_points,
        ..RuntimeSettings::default()
    };
    let provider = model(Arc::new(Mutex::new(good_arguments())));
    // A previous process's lease, so the boot sweep has something to release.
    store.acquire_lease(session(0), "old-boot", None, 1).await?;
    let (runtime, report) = Runtime::start(
        store.clone(),
        Arc::new(provider),
        seed_actors::verbs::shipped(),
        settings,
        "boot-1".to_owned(),
        test_clock(),
    )
    .await?;
    assert_eq!(report.n_leases_released, 1);
    // A first exchange; a continuation; then a memory write (a verb not safe to repeat: its
    // intent is committed before it runs).
    let (_, hello) = runtime.send_message(session(0), "hello").await?;
    within("the first run", runtime.wait_for_run(hello)).await?;
    let (_, run_id) = runtime.send_message(session(0), CONTINUE).await?;
    let run = within("the run", runtime.wait_for_run(run_id)).await?;
    assert_eq!(run.status, RunStatus::Succeeded);
    let (_, memory_run) = runtime
        .send_message(session(0), "memory: remember this")
        .await?;
    within("the memory run", runtime.wait_for_run(memory_run)).await?;
    let reached = reached.lock().map(|set| set.clone()).unwrap_or_default();
    let missing: Vec<&str> = points::ALL
        .iter()
        .copied()
        .filter(|point| !reached.contains(point))
        .collect();
    assert_eq!(missing, Vec::<&str>::new(), "reached: {reached:?}");
    Ok(())
}
