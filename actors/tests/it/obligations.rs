//! Obligations: an open plan with unfinished steps gives the run a later pass, a bounded number
//! of times, with a notice the model reads.

use crate::common::{Fixture, log, session};
use seed_events::RunStatus;
use seed_providers::{Message, ScriptedProvider, ScriptedStep, text_response};

#[actix::test]
async fn an_open_plan_gives_the_run_later_passes_with_a_notice() -> anyhow::Result<()> {
    let fixture = Fixture::new(1).await?;
    fixture
        .store
        .set_session_plan(
            session(0),
            Some(serde_json::json!([
                { "step": "draft", "done": true },
                { "step": "review", "done": false }
            ])),
            0,
        )
        .await?;
    let provider = ScriptedProvider::from_fn(|_, idx| {
        ScriptedStep::Respond(text_response(&format!("pass answer {idx}")))
    });
    let runtime = fixture.start(provider.clone(), "boot-1").await?;
    let (_, run_id) = runtime.send_message(session(0), "work on it").await?;
    let run = runtime.wait_for_run(run_id).await?;
    assert_eq!(run.status, RunStatus::Succeeded);
    // The first turn and two later passes, then the bound stops it.
    assert_eq!(run.pass, 2);
    assert_eq!(provider.n_requests(), 3);

    let notices: Vec<_> = log(&fixture.store, session(0))
        .await?
        .into_iter()
        .filter(|event| event.kind == "notice")
        .collect();
    assert_eq!(notices.len(), 2);
    let text = notices[0].content["text"].as_str().unwrap_or_default();
    assert!(text.contains("review") && !text.contains("draft"), "{text}");

    // A later pass's request carries the notice, with the background-update input.
    let second = &provider.requests()[1];
    let users: Vec<String> = second
        .messages
        .iter()
        .filter_map(|m| match m.as_ref() {
            Message::User(u) => Some(u.text.clone()),
            _ => None,
        })
        .collect();
    assert!(
        users.iter().any(|t| t.contains("unfinished step")),
        "{users:?}"
    );
    assert!(
        users.iter().any(|t| t == "<background_work_update>"),
        "{users:?}"
    );
    Ok(())
}

/// What the plan owes is decided from the plan as it stands when the run ends, not as the turn
/// found it: a person who finishes the plan while the turn runs owes the run no later pass.
#[actix::test]
async fn a_plan_finished_while_the_turn_runs_owes_no_later_pass() -> anyhow::Result<()> {
    let fixture = Fixture::new(1).await?;
    let open = serde_json::json!([{ "step": "review", "done": false }]);
    fixture
        .store
        .set_session_plan(session(0), Some(open), 0)
        .await?;
    let store = fixture.store.clone();
    let provider = ScriptedProvider::from_fn(move |_, idx| {
        // During the first request, the plan's last step is marked done (the writer is a
        // thread of its own, so waiting for it here holds up nothing it needs).
        if idx == 0 {
            let done = serde_json::json!([{ "step": "review", "done": true }]);
            futures::executor::block_on(store.set_session_plan(session(0), Some(done), 1))
                .expect("the plan is set");
        }
        ScriptedStep::Respond(text_response(&format!("pass answer {idx}")))
    });
    let runtime = fixture.start(provider.clone(), "boot-1").await?;
    let (_, run_id) = runtime.send_message(session(0), "work on it").await?;
    let run = runtime.wait_for_run(run_id).await?;
    assert_eq!((run.status, run.pass), (RunStatus::Succeeded, 0));
    assert_eq!(provider.n_requests(), 1);
    let log = log(&fixture.store, session(0)).await?;
    assert!(log.iter().all(|event| event.kind != "notice"), "{log:?}");
    Ok(())
}
