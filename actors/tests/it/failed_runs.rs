//! A failed turn says why: in its run's result, in a notice in the log that the transcript,
//! `read thread:` and the next turn's model all read.

use crate::common;

use crate::common::{Fixture, assert_log_agrees_with_store, log, session};
use seed_events::RunStatus;
use seed_providers::{
    Message, ProviderError, ProviderErrorKind, ScriptedProvider, ScriptedStep, text_response,
};

#[actix::test]
async fn a_failed_turn_leaves_its_reason_in_the_log_and_the_next_turn_reads_it()
-> anyhow::Result<()> {
    let fixture = Fixture::new(1).await?;
    let provider = ScriptedProvider::new(vec![
        ScriptedStep::FailAfter {
            text: String::new(),
            error: ProviderError::new(ProviderErrorKind::Http { status: 401 }, "invalid x-api-key"),
        },
        ScriptedStep::Respond(text_response("here now")),
    ]);
    let runtime = fixture.start(provider.clone(), "boot-1").await?;
    let (_, run_id) = runtime.send_message(session(0), "hello").await?;
    let failed = runtime.wait_for_run(run_id).await?;
    assert_eq!(failed.status, RunStatus::Failed, "{failed:?}");
    let reason = failed.result.as_ref().expect("a result")["error"]
        .as_str()
        .expect("a reason")
        .to_owned();
    // In plain words, with the server's own.
    assert_eq!(
        reason,
        "the model server refused the key (401): invalid x-api-key"
    );

    // The log says the turn failed, and why, after the message it did not answer; the notice
    // names the run.
    let events = log(&fixture.store, session(0)).await?;
    let notice = events.last().expect("events");
    assert_eq!(notice.kind, "notice", "{events:?}");
    assert_eq!(notice.run_id, Some(run_id));
    assert_eq!(notice.meta["run_failed"], serde_json::json!(run_id));
    assert_eq!(notice.meta["reason"], reason.as_str());
    let text = notice.content["text"].as_str().expect("text");
    assert_eq!(text, format!("The turn failed: {reason}"));
    // `read thread:` shows it.
    let line = seed_projections::transcript::transcript_event_line(notice).expect("a line");
    assert!(
        line.ends_with(&format!("system: The turn failed: {reason}")),
        "{line}"
    );

    // The next turn's model reads that the previous one failed, framed as a notice.
    let (_, next) = runtime.send_message(session(0), "are you there?").await?;
    let answered = runtime.wait_for_run(next).await?;
    assert_eq!(answered.status, RunStatus::Succeeded, "{answered:?}");
    let request = provider.requests().pop().expect("a request");
    let texts: Vec<&str> = request
        .messages
        .iter()
        .filter_map(|message| match message.as_ref() {
            Message::User(user) => Some(user.text.as_str()),
            _ => None,
        })
        .collect();
    let framed = format!("<notice>The turn failed: {reason}</notice>");
    let at = texts.iter().position(|text| *text == framed);
    let hello = texts.iter().position(|text| *text == "hello");
    let input = texts.iter().position(|text| *text == "are you there?");
    assert!(
        hello < at && at < input && at.is_some(),
        "the notice sits between the failed message and the input: {texts:?}"
    );
    assert_log_agrees_with_store(&fixture.store, session(0)).await?;
    Ok(())
}

#[actix::test]
async fn a_turn_that_succeeds_or_is_stopped_leaves_no_failure_notice() -> anyhow::Result<()> {
    let fixture = Fixture::new(1).await?;
    let runtime = fixture.start(common::echo_then_answer(), "boot-1").await?;
    let (_, run_id) = runtime.send_message(session(0), "hello").await?;
    assert_eq!(
        runtime.wait_for_run(run_id).await?.status,
        RunStatus::Succeeded
    );
    let events = log(&fixture.store, session(0)).await?;
    assert!(
        events.iter().all(|event| event.kind != "notice"),
        "{events:?}"
    );
    Ok(())
}

#[actix::test]
async fn a_reply_cut_off_by_the_token_limit_is_marked_and_the_next_request_is_unchanged()
-> anyhow::Result<()> {
    let fixture = Fixture::new(1).await?;
    let mut cut = text_response("The list: one, two, thr");
    cut.stop_reason = seed_providers::StopReason::Length;
    let provider = ScriptedProvider::new(vec![
        ScriptedStep::Respond(cut),
        ScriptedStep::Respond(text_response("three, four.")),
    ]);
    let runtime = fixture.start(provider.clone(), "boot-1").await?;
    let (_, run_id) = runtime.send_message(session(0), "list them").await?;
    // Cut off is still an answer: the run succeeds, and the log's message says why it ended.
    let run = runtime.wait_for_run(run_id).await?;
    assert_eq!(run.status, RunStatus::Succeeded, "{run:?}");
    let events = log(&fixture.store, session(0)).await?;
    let answer = events.last().expect("the answer");
    assert_eq!(answer.content["text"], "The list: one, two, thr");
    assert_eq!(answer.meta["stop_reason"], "length");
    assert!(events.iter().all(|event| event.kind != "notice"));

    // Asked to go on, the model reads its cut-off reply as it was, and nothing more.
    let (_, next) = runtime.send_message(session(0), "go on").await?;
    runtime.wait_for_run(next).await?;
    let request = provider.requests().pop().expect("a request");
    assert_eq!(
        common::summary(&common::conversation(&request)),
        [
            "user: list them",
            "assistant: The list: one, two, thr",
            "user: go on"
        ]
    );
    Ok(())
}

#[actix::test]
async fn a_call_whose_arguments_did_not_parse_is_answered_with_why_and_not_run()
-> anyhow::Result<()> {
    let fixture = Fixture::new(1).await?;
    // The output limit cut the call's arguments off: the wire kept them as the text that came.
    let mut cut = seed_providers::tool_response(
        "",
        vec![seed_providers::ToolCall {
            id: "cut".to_owned(),
            name: "echo".to_owned(),
            arguments: serde_json::json!("{\"text\": \"a long tex"),
        }],
    );
    cut.stop_reason = seed_providers::StopReason::Length;
    let provider = ScriptedProvider::new(vec![
        ScriptedStep::Respond(cut),
        ScriptedStep::Respond(text_response("I will say less.")),
    ]);
    let runtime = fixture.start(provider.clone(), "boot-1").await?;
    let (_, run_id) = runtime.send_message(session(0), "say a lot").await?;
    let run = runtime.wait_for_run(run_id).await?;
    assert_eq!(run.status, RunStatus::Succeeded, "{run:?}");
    let events = log(&fixture.store, session(0)).await?;
    let result = events
        .iter()
        .find(|event| event.kind == "tool_result")
        .expect("a result");
    assert_eq!(result.content["is_error"], true);
    let text = result.content["content"].as_str().unwrap_or_default();
    assert!(
        text.starts_with("the arguments of this echo call are not JSON"),
        "{text}"
    );
    assert!(text.ends_with("{\"text\": \"a long tex"), "{text}");
    // The store keeps the text as it came.
    let call = events
        .iter()
        .find(|event| event.kind == "tool_call")
        .expect("a call");
    assert_eq!(call.content["arguments"], "{\"text\": \"a long tex");
    // The model read why, after its call.
    let request = provider.requests().pop().expect("a request");
    let last = request.messages.last().expect("messages");
    assert!(
        request.messages.iter().any(|message| matches!(
            message.as_ref(),
            Message::ToolResult(result) if result.content.starts_with("the arguments of this echo")
        )),
        "{last:?}"
    );
    assert_log_agrees_with_store(&fixture.store, session(0)).await?;
    Ok(())
}

/// A turn the store refuses with an error that is not a full disk (here an I/O error, injected
/// at the turn's first commit) fails with the store's own words: the run's result and the log's
/// notice both carry the chain down to SQLite's message, not one word.
#[actix::test]
async fn a_turn_the_store_refuses_fails_with_the_stores_own_words() -> anyhow::Result<()> {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

    let dir = tempfile::tempdir()?;
    let armed = Arc::new(AtomicBool::new(false));
    let seen = Arc::new(AtomicUsize::new(0));
    let (armed_by, seen_by) = (Arc::clone(&armed), Arc::clone(&seen));
    let arming = Arc::clone(&armed);
    // Armed when the turn's input is about to be committed: that commit, the next, fails once.
    let faults = seed_store::FaultInjector(Arc::new(move || {
        if !armed_by.swap(false, Ordering::SeqCst) {
            return None;
        }
        seen_by.fetch_add(1, Ordering::SeqCst);
        Some(seed_store::Fault::Io)
    }));
    let store = seed_store::Store::open(seed_store::Config {
        faults: Some(faults),
        ..seed_store::Config::new(dir.path().join("seed.db"))
    })?;
    store.create_account(common::account(), vec![1], 0).await?;
    store
        .create_session(seed_store::NewSession::new(
            session(0),
            common::account(),
            0,
        ))
        .await?;
    let (runtime, _) = common::start_runtime_with(
        store.clone(),
        Arc::new(ScriptedProvider::new(vec![ScriptedStep::Respond(
            text_response("never"),
        )])),
        Vec::new(),
        seed_actors::RuntimeSettings {
            crash_points: seed_actors::CrashPoints::new(move |point| {
                if point == seed_actors::crash::points::INPUT_BEFORE_COMMIT {
                    arming.store(true, Ordering::SeqCst);
                }
                false
            }),
            ..seed_actors::RuntimeSettings::default()
        },
        "boot-1",
    )
    .await?;
    let (_, run_id) = runtime.send_message(session(0), "hello").await?;
    let failed = runtime.wait_for_run(run_id).await?;
    assert_eq!(seen.load(Ordering::SeqCst), 1, "the fault fired once");
    assert_eq!(failed.status, RunStatus::Failed, "{failed:?}");
    let reason = failed.result.as_ref().expect("a result")["error"]
        .as_str()
        .expect("a reason")
        .to_owned();
    assert!(
        reason.contains("sqlite: an injected fault: disk I/O error"),
        "the reason keeps the store's words: {reason}"
    );
    let events = log(&store, session(0)).await?;
    let notice = events.last().expect("events");
    assert_eq!(notice.kind, "notice", "{events:?}");
    assert_eq!(
        notice.content["text"].as_str(),
        Some(format!("The turn failed: {reason}").as_str())
    );
    Ok(())
}
