//! A message's run claimed in the message's own transaction: when the caller stops waiting
//! (a dropped request) after the write went to the store, the run still starts and ends, and
//! its slot comes back for the next message; when the session is busy, the slot taken for the
//! run comes back at once.

use std::time::Duration;

use crate::common::{Fixture, echo_then_answer, session, within_for};
use seed_actors::RuntimeSettings;
use seed_events::RunStatus;
use seed_providers::{Message, Request, ScriptedProvider, ScriptedStep, text_response};

#[actix::test]
async fn a_message_whose_caller_stopped_waiting_is_still_answered_and_frees_its_slot()
-> anyhow::Result<()> {
    let fixture = Fixture::new(1).await?;
    // One slot: were the dropped message's slot kept, the next message would wait forever.
    let runtime = fixture
        .start_with(
            echo_then_answer(),
            RuntimeSettings {
                interactive_runs_max: 1,
                ..RuntimeSettings::default()
            },
            "boot-a",
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

#[actix::test]
async fn a_slot_taken_for_a_message_whose_session_is_busy_goes_back() -> anyhow::Result<()> {
    let fixture = Fixture::new(2).await?;
    // "hang" streams forever; anything else is answered at once.
    let provider = ScriptedProvider::from_fn(|request: &Request, _| {
        let hang = request
            .messages
            .iter()
            .any(|message| matches!(message.as_ref(), Message::User(user) if user.text == "hang"));
        if hang {
            ScriptedStep::Hang {
                text: "thinking".to_owned(),
            }
        } else {
            ScriptedStep::Respond(text_response("done"))
        }
    });
    // Two slots: the hanging turn holds one for good.
    let runtime = fixture
        .start_with(
            provider,
            RuntimeSettings {
                interactive_runs_max: 2,
                ..RuntimeSettings::default()
            },
            "boot-a",
        )
        .await?;
    let (_, hanging) = runtime.send_message(session(0), "hang").await?;
    let hanging = fixture.store.get_run(hanging).await?.expect("the run");
    assert_eq!(
        hanging.status,
        RunStatus::Running,
        "claimed with its message"
    );
    // The second slot is taken for this message, and cannot be used: its session is busy.
    let (_, behind) = runtime.send_message(session(0), "behind").await?;
    let behind = fixture.store.get_run(behind).await?.expect("the run");
    assert_eq!(behind.status, RunStatus::Queued);
    // Were that slot kept, another session's message would wait behind the hanging turn.
    let (_, other) = runtime.send_message(session(1), "other").await?;
    let guard = Duration::from_secs(10);
    let other = within_for(
        "the other session's run",
        guard,
        runtime.wait_for_run(other),
    )
    .await?;
    assert_eq!(other.status, RunStatus::Succeeded, "{other:?}");
    Ok(())
}
