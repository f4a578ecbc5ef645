//! A message's run claimed in the message's own transaction, when the caller stops waiting
//! (a dropped request) after the write went to the store: the run still starts and ends, and
//! its slot comes back for the next message.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{Echo, Fixture, echo_then_answer, session, test_clock, within_for};
use seed_actors::{Runtime, RuntimeSettings};
use seed_events::RunStatus;

#[actix::test]
async fn a_message_whose_caller_stopped_waiting_is_still_answered_and_frees_its_slot()
-> anyhow::Result<()> {
    let fixture = Fixture::new(1).await?;
    // One slot: were the dropped message's slot kept, the next message would wait forever.
    let (runtime, _) = Runtime::start(
        fixture.store.clone(),
        Arc::new(echo_then_answer()),
        vec![Arc::new(Echo)],
        RuntimeSettings {
            interactive_runs_max: 1,
            ..RuntimeSettings::default()
        },
        "boot-a".to_owned(),
        test_clock(),
    )
    .await?;
    {
        // Polled once, so its write is on its way to the store, then dropped.
        let mut send = Box::pin(runtime.send_message(session(0), "hello"));
        assert!(futures::poll!(send.as_mut()).is_pending());
    }
    let guard = Duration::from_secs(10);
    let run_id = within_for("the dropped message's run", guard, async {
        loop {
            if let Some(run) = fixture.store.list_session_runs(session(0)).await?.pop() {
                return anyhow::Ok(run.id);
            }
            actix::clock::sleep(Duration::from_millis(5)).await;
        }
    })
    .await?;
    let run = within_for(
        "the dropped message's run",
        guard,
        runtime.wait_for_run(run_id),
    )
    .await?;
    assert_eq!(run.status, RunStatus::Succeeded, "{run:?}");

    // Its slot came back: the next message is answered too.
    let (_, next) = runtime.send_message(session(0), "again").await?;
    let next = within_for("the next run", guard, runtime.wait_for_run(next)).await?;
    assert_eq!(next.status, RunStatus::Succeeded, "{next:?}");
    Ok(())
}
