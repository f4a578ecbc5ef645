//! A session's actor stays in memory while its session is in use, and stops a while
//! (`session_idle`) after its last run, however many runs it took.

use std::time::{Duration, Instant};

use crate::common::{Fixture, session, within_for};
use seed_actors::RuntimeSettings;
use seed_events::RunStatus;
use seed_providers::{ScriptedProvider, ScriptedStep, text_response};

#[actix::test]
async fn an_actor_stops_a_while_after_its_last_run_and_not_before() -> anyhow::Result<()> {
    let fixture = Fixture::new(1).await?;
    let idle = Duration::from_millis(600);
    let runtime = fixture
        .start_with(
            ScriptedProvider::from_fn(|_, _| ScriptedStep::Respond(text_response("done"))),
            RuntimeSettings {
                session_idle: idle,
                ..RuntimeSettings::default()
            },
            "boot-a",
        )
        .await?;
    let guard = Duration::from_secs(10);

    // Runs a third of the while apart, for twice the while and more: the actor stays
    // throughout, although the while since it started (and since its first runs) is up.
    let mut last_end = Instant::now();
    for turn in 0..6 {
        if turn > 0 {
            assert_eq!(
                runtime.n_active_sessions(),
                1,
                "the actor stopped before turn {turn}, {:?} after the last run ended",
                last_end.elapsed()
            );
        }
        let (_, run_id) = runtime.send_message(session(0), "hello").await?;
        let run = within_for("a run", guard, runtime.wait_for_run(run_id)).await?;
        assert_eq!(run.status, RunStatus::Succeeded, "{run:?}");
        last_end = Instant::now();
        actix::clock::sleep(idle / 3).await;
    }

    // Then it stops, once the while since its last run is up and not before.
    within_for("the idle actor to stop", guard, async {
        while runtime.n_active_sessions() > 0 {
            actix::clock::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
    let stopped_after = last_end.elapsed();
    assert!(
        stopped_after >= idle * 9 / 10,
        "the actor stopped {stopped_after:?} after its last run, before the while ({idle:?}) was up"
    );
    Ok(())
}
