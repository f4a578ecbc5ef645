//! The runtime end to end over a real SQLite file and the scripted model.

use crate::common;

use crate::common::{Fixture, assert_log_agrees_with_store, echo_then_answer, log, session};
use seed_events::RunStatus;

#[actix::test]
async fn a_message_gets_an_answer_its_verb_runs_and_the_log_agrees_with_the_store()
-> anyhow::Result<()> {
    let fixture = Fixture::new(1).await?;
    let runtime = fixture.start(echo_then_answer(), "boot-1").await?;
    let (_, run_id) = runtime.send_message(session(0), "hello there").await?;
    let run = runtime.wait_for_run(run_id).await?;
    assert_eq!(run.status, RunStatus::Succeeded, "{run:?}");
    assert_eq!(
        run.result,
        Some(serde_json::json!({ "answer": "answer: hello there" }))
    );

    let log = log(&fixture.store, session(0)).await?;
    let kinds: Vec<(&str, Option<&str>)> = log
        .iter()
        .map(|event| {
            (
                event.kind.as_str(),
                event.content.get("text").and_then(|t| t.as_str()),
            )
        })
        .collect();
    assert_eq!(
        kinds,
        [
            ("message", Some("hello there")),
            // The response that only called the verb says nothing: its call stands for it.
            ("tool_call", None),
            ("tool_result", None),
            ("message", Some("answer: hello there")),
        ]
    );
    assert_eq!(log[2].content["content"], "echo: hello there");
    assert_log_agrees_with_store(&fixture.store, session(0)).await?;

    // The fallback namer titled the session from its first message.
    let row = fixture
        .store
        .get_session(session(0))
        .await?
        .expect("session");
    assert_eq!(row.title, "hello there");
    Ok(())
}

#[actix::test]
async fn invalid_arguments_give_the_model_an_error_naming_the_field() -> anyhow::Result<()> {
    let fixture = Fixture::new(1).await?;
    let provider = seed_providers::ScriptedProvider::new(vec![
        seed_providers::ScriptedStep::Respond(seed_providers::tool_response(
            "",
            vec![seed_providers::ToolCall {
                id: "bad".to_owned(),
                name: "echo".to_owned(),
                arguments: serde_json::json!({ "txet": "typo" }),
            }],
        )),
        seed_providers::ScriptedStep::Respond(seed_providers::text_response("sorry")),
    ]);
    let runtime = fixture.start(provider.clone(), "boot-1").await?;
    let (_, run_id) = runtime.send_message(session(0), "say hi").await?;
    runtime.wait_for_run(run_id).await?;
    let log = log(&fixture.store, session(0)).await?;
    let result = log
        .iter()
        .find(|event| event.kind == "tool_result")
        .expect("a result");
    assert_eq!(result.content["is_error"], true);
    let text = result.content["content"].as_str().unwrap_or_default();
    assert!(text.contains("text"), "the error names the field: {text}");
    Ok(())
}

#[actix::test]
async fn a_watched_run_ends_as_recorded_and_a_watch_leaves_nothing_registered() -> anyhow::Result<()>
{
    let fixture = Fixture::new(1).await?;
    let runtime = fixture.start(echo_then_answer(), "boot-1").await?;
    let (_, watch) = runtime
        .send_message_watched(session(0), "hello there")
        .await?;
    let run_id = watch.run_id();
    assert_eq!(runtime.n_runs_waited_for(), 1);
    let run = watch.ended().await?;
    assert_eq!(run.status, RunStatus::Succeeded, "{run:?}");
    assert_eq!(fixture.store.get_run(run_id).await?, Some(run));
    assert_eq!(runtime.n_runs_waited_for(), 0);

    // A message the store refuses (no such session) queues no run: its watch goes with it.
    let missing = seed_events::SessionId::new_v7();
    let refused = runtime.send_message_watched(missing, "anyone?").await;
    assert!(refused.is_err(), "{refused:?}");
    assert_eq!(runtime.n_runs_waited_for(), 0);
    // A watch given up before its run ends leaves nothing either, unused or while it waits.
    drop(runtime.watch_run(seed_events::RunId::new_v7()));
    assert_eq!(runtime.n_runs_waited_for(), 0);
    let never_queued = runtime.watch_run(seed_events::RunId::new_v7());
    assert_eq!(runtime.n_runs_waited_for(), 1);
    let gave_up =
        actix::clock::timeout(std::time::Duration::from_millis(20), never_queued.ended()).await;
    assert!(gave_up.is_err(), "{gave_up:?}");
    assert_eq!(runtime.n_runs_waited_for(), 0);
    Ok(())
}

/// `read thread:` of the session's own thread, mid-turn, shows the turn's earlier steps: each
/// step is in the log as soon as it commits, not at the run's end.
#[actix::test]
async fn a_turn_reading_its_own_thread_finds_its_earlier_steps() -> anyhow::Result<()> {
    use seed_providers::{Message, ScriptedProvider, ScriptedStep, ToolCall};
    let fixture = Fixture::new(1).await?;
    let thread = format!("thread:{}", session(0));
    let provider = ScriptedProvider::from_fn(move |request: &seed_providers::Request, _| {
        let results: Vec<&str> = request
            .messages
            .iter()
            .filter_map(|message| match message.as_ref() {
                Message::ToolResult(result) => Some(result.content.as_str()),
                _ => None,
            })
            .collect();
        let call = |id: &str, name: &str, arguments| {
            ScriptedStep::Respond(seed_providers::tool_response(
                "",
                vec![ToolCall {
                    id: id.to_owned(),
                    name: name.to_owned(),
                    arguments,
                }],
            ))
        };
        match results.as_slice() {
            [] => call(
                "s1",
                "status",
                serde_json::json!({"description": "looking"}),
            ),
            [_] => call("r1", "read", serde_json::json!({"target": thread})),
            [_, read, ..] => ScriptedStep::Respond(seed_providers::text_response(read)),
        }
    });
    let (runtime, _) = common::start_runtime(
        fixture.store.clone(),
        std::sync::Arc::new(provider),
        seed_actors::verbs::shipped(),
        "boot-1",
    )
    .await?;
    let (_, run_id) = runtime.send_message(session(0), "look back").await?;
    let run = runtime.wait_for_run(run_id).await?;
    assert_eq!(run.status, RunStatus::Succeeded, "{run:?}");
    let read = run.result.as_ref().and_then(|r| r["answer"].as_str());
    let read = read.unwrap_or_default();
    // The message, the status call and its result, and the read call itself.
    assert!(read.contains("[1] user: look back"), "{read}");
    assert!(
        read.contains("[2] assistant \u{2192} status({\"description\":\"looking\"})"),
        "{read}"
    );
    assert!(read.contains("[3] "), "the status call's result: {read}");
    assert!(read.contains("[4] assistant \u{2192} read("), "{read}");
    Ok(())
}

/// Text that arrived and then waits, the stream gone quiet, is committed to `pi.live` and
/// heard of within an interval: a timer commits it, with no later delta to trigger that.
#[actix::test]
async fn text_is_committed_and_heard_within_an_interval_when_the_stream_goes_quiet()
-> anyhow::Result<()> {
    use seed_providers::{ScriptedProvider, ScriptedStep};
    let fixture = Fixture::new(1).await?;
    // The whole text arrives at once, well within the first interval, then nothing more.
    let provider = ScriptedProvider::new(vec![ScriptedStep::Hang {
        text: "all of it at once".to_owned(),
    }]);
    let settings = seed_actors::RuntimeSettings {
        live_interval: std::time::Duration::from_millis(50),
        ..seed_actors::RuntimeSettings::default()
    };
    let runtime = fixture.start_with(provider, settings, "boot-1").await?;
    let mut bus = runtime.publisher().subscribe().await.expect("the bus");
    let (_, run_id) = runtime.send_message(session(0), "talk").await?;
    let heard = common::first_text_delta(&mut bus, run_id).await;
    assert_eq!(heard, "all of it at once");
    let live = fixture.store.live_document(session(0)).await?;
    assert_eq!(
        live.map(|live| live.text).as_deref(),
        Some("all of it at once")
    );
    assert!(runtime.stop_session(session(0)).await);
    Ok(())
}

/// A session's reasoning level reaches the provider with every request, and a change of it
/// reaches the next turn (a harness kept from the last run is opened afresh for it).
#[actix::test]
async fn a_sessions_reasoning_level_reaches_the_provider() -> anyhow::Result<()> {
    use seed_providers::{ReasoningLevel, ScriptedProvider, ScriptedStep};
    let fixture = Fixture::new(1).await?;
    let model = ScriptedProvider::from_fn(|_, _| {
        ScriptedStep::Respond(seed_providers::text_response("ok"))
    });
    let runtime = fixture.start(model.clone(), "boot-1").await?;
    let set = |level: Option<&str>| {
        fixture.store.set_session_model_signed(
            None,
            common::account(),
            session(0),
            seed_store::ModelChange {
                model: None,
                reasoning_level: Some(level.map(str::to_owned)),
            },
            1,
        )
    };
    let mut seen = Vec::new();
    for level in [None, Some("high"), Some("low")] {
        set(level).await?;
        let (_, run_id) = runtime.send_message(session(0), "think").await?;
        runtime.wait_for_run(run_id).await?;
        seen.push(model.requests().pop().expect("a request").reasoning);
    }
    assert_eq!(
        seen,
        [None, Some(ReasoningLevel::High), Some(ReasoningLevel::Low)]
    );
    Ok(())
}

#[actix::test]
async fn a_run_whose_message_another_turn_answered_returns_without_asking_again()
-> anyhow::Result<()> {
    use seed_providers::{
        ProviderError, ProviderErrorKind, ScriptedProvider, ScriptedStep, text_response,
    };
    let fixture = Fixture::new(1).await?;
    let provider = ScriptedProvider::new(vec![
        ScriptedStep::Respond(text_response("the first answer")),
        ScriptedStep::FailAfter {
            text: String::new(),
            error: ProviderError::new(ProviderErrorKind::Refused, "not this one"),
        },
        ScriptedStep::Respond(text_response("the retried answer")),
    ]);
    let runtime = fixture.start(provider.clone(), "boot-1").await?;
    let (first, run_id) = runtime.send_message(session(0), "first").await?;
    let answered = runtime.wait_for_run(run_id).await?;
    assert_eq!(answered.status, RunStatus::Succeeded);

    // Asked to answer that message again, a run finds the turn that took it in answered: it
    // returns that answer, and the model hears nothing.
    let again = runtime.retry_message(session(0), first).await?;
    let again = runtime.wait_for_run(queued(&again)).await?;
    assert_eq!(again.status, RunStatus::Succeeded, "{again:?}");
    let result = again.result.expect("a result");
    assert_eq!(result["answer"], "the first answer");
    assert_eq!(result["answered_by"], format!("{run_id}#0"));
    assert_eq!(provider.n_requests(), 1);
    assert_eq!(log(&fixture.store, session(0)).await?.len(), 2);

    // A message whose turn failed was answered by nobody: retrying it asks the model.
    let (second, failing) = runtime.send_message(session(0), "second").await?;
    let failed = runtime.wait_for_run(failing).await?;
    assert_eq!(failed.status, RunStatus::Failed, "{failed:?}");
    let retried = runtime.retry_message(session(0), second).await?;
    let retried = runtime.wait_for_run(queued(&retried)).await?;
    assert_eq!(retried.status, RunStatus::Succeeded, "{retried:?}");
    assert_eq!(
        retried.result,
        Some(serde_json::json!({ "answer": "the retried answer" }))
    );
    assert_eq!(provider.n_requests(), 3);
    assert_log_agrees_with_store(&fixture.store, session(0)).await?;
    Ok(())
}

fn queued(outcome: &seed_store::RetryOutcome) -> seed_events::RunId {
    outcome
        .run_id()
        .unwrap_or_else(|| panic!("not queued: {outcome:?}"))
}

#[actix::test]
async fn a_retry_is_refused_for_what_is_no_persons_message_and_while_its_run_is_open()
-> anyhow::Result<()> {
    use seed_events::EventId;
    use seed_providers::{ScriptedProvider, ScriptedStep};
    use seed_store::RetryOutcome;
    let fixture = Fixture::new(1).await?;
    let provider = ScriptedProvider::new(vec![ScriptedStep::Hang {
        text: "thinking".to_owned(),
    }]);
    let runtime = fixture.start(provider.clone(), "boot-1").await?;
    let (message, run_id) = runtime.send_message(session(0), "take your time").await?;
    common::within("the model's request", async {
        while provider.n_requests() == 0 {
            actix::clock::sleep(std::time::Duration::from_millis(5)).await;
        }
    })
    .await;
    let runs_before = fixture.store.list_session_runs(session(0)).await?;
    assert_eq!(
        runtime.retry_message(session(0), message).await?,
        RetryOutcome::StillOpen { run_id }
    );
    assert_eq!(
        runtime
            .retry_message(session(0), EventId(message.0 + 1000))
            .await?,
        RetryOutcome::MessageNotFound
    );
    assert_eq!(
        runtime.retry_message(session(1), message).await?,
        RetryOutcome::SessionNotFound
    );
    assert_eq!(
        fixture.store.list_session_runs(session(0)).await?,
        runs_before
    );

    // Stopped, the run is open no more; an answer of the model's is no person's message.
    assert!(runtime.stop_session(session(0)).await);
    let stopped = runtime.wait_for_run(run_id).await?;
    assert_eq!(stopped.status, RunStatus::Canceled);
    let said = log(&fixture.store, session(0))
        .await?
        .into_iter()
        .find(|event| event.role == Some(seed_events::EventRole::Assistant))
        .expect("what streamed stays in the log");
    assert_eq!(
        runtime.retry_message(session(0), said.id).await?,
        RetryOutcome::NotAPersonsMessage
    );
    Ok(())
}
