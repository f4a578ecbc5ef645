//! Stopping and deleting a session while its answer streams, over a real SQLite file and the
//! scripted model.
//!
//! - A stop cuts the stream off: the run ends `Canceled`, what had streamed stays in the log as
//!   an assistant message (`meta.stopped`, no `pi_entry_id`), and the next turn puts it to the
//!   model once, as an assistant message, with no cut-off response besides.
//! - A delete under a streaming turn ends the run with an error (its next commit is refused, or
//!   its end finds the session gone) and leaves nothing of the session: no row, no log, no runs,
//!   no store files, no lease.

use crate::common::{
    Fixture, assert_log_agrees_with_store, conversation, first_text_delta, log, run_finished,
    session, store_state, summary, within,
};
use seed_events::{EventRole, RunStatus};
use seed_providers::{Message, ScriptedProvider, ScriptedStep, text_response};

const STREAMED: &str = "Once upon a time, in a village by the sea, there lived";

#[actix::test]
async fn a_stop_mid_stream_keeps_the_streamed_text_and_the_next_turn_reads_it_once()
-> anyhow::Result<()> {
    let fixture = Fixture::new(1).await?;
    let provider = ScriptedProvider::new(vec![
        ScriptedStep::Hang {
            text: STREAMED.to_owned(),
        },
        ScriptedStep::Respond(text_response("Sorry, I stopped. Shall I go on?")),
    ]);
    let runtime = fixture.start(provider.clone(), "boot-1").await?;
    let mut bus = runtime.publisher().subscribe().await.expect("the bus");

    let (_, run_id) = runtime.send_message(session(0), "tell me a story").await?;
    first_text_delta(&mut bus, run_id).await;
    assert!(
        runtime.stop_session(session(0)).await,
        "the session had a turn in flight"
    );
    let run = within("the stopped run", runtime.wait_for_run(run_id)).await?;
    assert_eq!(run.status, RunStatus::Canceled, "{run:?}");
    assert_eq!(run.result, Some(serde_json::json!({ "stopped": true })));

    // The streamed text is in the log as an assistant message Seed wrote itself.
    let events = log(&fixture.store, session(0)).await?;
    assert_eq!(events.len(), 2, "{events:#?}");
    let stopped = &events[1];
    assert_eq!(stopped.kind, "message");
    assert_eq!(stopped.role, Some(EventRole::Assistant));
    assert_eq!(stopped.content["text"], STREAMED);
    assert_eq!(stopped.meta, serde_json::json!({ "stopped": true }));
    assert_eq!(
        stopped.pi_entry_id, None,
        "the stopped text is no store entry"
    );
    assert_eq!(stopped.run_id, Some(run_id));
    // The cut-off response is no entry of the store either.
    let state = store_state(&fixture.store, session(0)).await?;
    assert!(
        !state
            .entries
            .iter()
            .any(|entry| matches!(&entry.body, seed_durable::EntryBody::Assistant { .. })),
        "no provider response was committed: {:?}",
        state.entries
    );

    // The next turn is answered, and the model reads what it had said exactly once.
    let (_, next_run_id) = runtime.send_message(session(0), "go on").await?;
    let next = within("the next run", runtime.wait_for_run(next_run_id)).await?;
    assert_eq!(next.status, RunStatus::Succeeded, "{next:?}");
    assert_eq!(
        next.result,
        Some(serde_json::json!({ "answer": "Sorry, I stopped. Shall I go on?" }))
    );

    let requests = provider.requests();
    assert_eq!(requests.len(), 2, "one request per turn");
    assert_eq!(
        summary(&conversation(&requests[0])),
        ["user: tell me a story"]
    );
    let next_request = conversation(&requests[1]);
    assert_eq!(
        summary(&next_request),
        [
            "user: tell me a story".to_owned(),
            format!("assistant: {STREAMED}"),
            "user: go on".to_owned(),
        ]
    );
    let assistants: Vec<_> = next_request
        .iter()
        .filter_map(|message| match message {
            Message::Assistant(assistant) => Some(assistant),
            _ => None,
        })
        .collect();
    assert_eq!(
        assistants.len(),
        1,
        "the stopped text once and no cut-off response besides"
    );
    assert!(
        assistants[0].is_complete(),
        "the stopped text is sent as a whole message, not as the cut-off response: {:?}",
        assistants[0]
    );
    let mentions = requests[1]
        .messages
        .iter()
        .filter(|message| match message.as_ref() {
            Message::Assistant(assistant) => assistant.text().contains(STREAMED),
            Message::User(user) => user.text.contains(STREAMED),
            Message::ToolResult(result) => result.content.contains(STREAMED),
        })
        .count();
    assert_eq!(
        mentions, 1,
        "the streamed text is in the request exactly once"
    );

    let events = log(&fixture.store, session(0)).await?;
    let texts: Vec<(Option<EventRole>, &str)> = events
        .iter()
        .map(|event| (event.role, event.content["text"].as_str().unwrap_or("")))
        .collect();
    assert_eq!(
        texts,
        [
            (Some(EventRole::User), "tell me a story"),
            (Some(EventRole::Assistant), STREAMED),
            (Some(EventRole::User), "go on"),
            (
                Some(EventRole::Assistant),
                "Sorry, I stopped. Shall I go on?"
            ),
        ]
    );
    assert_eq!(events[3].run_id, Some(next_run_id));
    assert!(
        events[3].pi_entry_id.is_some(),
        "the answer came from the store"
    );
    assert_log_agrees_with_store(&fixture.store, session(0)).await?;
    Ok(())
}

#[actix::test]
async fn a_stop_with_no_turn_in_flight_says_so() -> anyhow::Result<()> {
    let fixture = Fixture::new(1).await?;
    let provider = ScriptedProvider::new(vec![ScriptedStep::Respond(text_response("hi"))]);
    let runtime = fixture.start(provider, "boot-1").await?;
    assert!(!runtime.stop_session(session(0)).await, "no actor yet");
    let (_, run_id) = runtime.send_message(session(0), "hello").await?;
    within("the run", runtime.wait_for_run(run_id)).await?;
    assert!(
        !runtime.stop_session(session(0)).await,
        "the actor is idle: nothing to stop"
    );
    Ok(())
}

#[actix::test]
async fn a_delete_mid_turn_ends_the_run_and_leaves_nothing_of_the_session() -> anyhow::Result<()> {
    a_delete_mid_turn(STREAMED).await
}

/// Nothing has streamed when the delete lands: there is no text to keep, and the run still ends
/// with an error (the turn's settling commit is refused), not as a person's stop.
#[actix::test]
async fn a_delete_before_anything_streamed_ends_the_run_with_an_error() -> anyhow::Result<()> {
    a_delete_mid_turn("").await
}

async fn a_delete_mid_turn(streamed: &str) -> anyhow::Result<()> {
    let fixture = Fixture::new(2).await?;
    let provider = ScriptedProvider::new(vec![
        ScriptedStep::Hang {
            text: streamed.to_owned(),
        },
        ScriptedStep::Respond(text_response("yes")),
    ]);
    let runtime = fixture.start(provider.clone(), "boot-1").await?;
    let mut bus = runtime.publisher().subscribe().await.expect("the bus");

    let (_, run_id) = runtime.send_message(session(0), "tell me a story").await?;
    if streamed.is_empty() {
        within("the model's request", async {
            while provider.n_requests() == 0 {
                actix::clock::sleep(std::time::Duration::from_millis(2)).await;
            }
        })
        .await;
    } else {
        first_text_delta(&mut bus, run_id).await;
    }
    assert!(runtime.delete_session(session(0)).await?, "it existed");

    // Waiting for the run returns: its row went with the session, so it is reported gone
    // (or, had the waiter looked before the delete, as ended).
    match within("wait_for_run", runtime.wait_for_run(run_id)).await {
        Err(seed_actors::runtime::Error::RunGone(gone)) => assert_eq!(gone, run_id),
        Ok(run) => assert!(run.status.is_terminal(), "{run:?}"),
        Err(error) => panic!("waiting for a deleted session's run: {error}"),
    }
    // The run itself ends with an error, whether its next commit was refused or the delete's
    // stop got there first. The bus is where its end shows.
    let status = run_finished(&mut bus, run_id).await;
    assert_eq!(status, RunStatus::Failed);

    let store = &fixture.store;
    assert!(store.get_session(session(0)).await?.is_none());
    match store.read_events(session(0), 1, i64::MAX, usize::MAX).await {
        Err(seed_store::Error::NotFound { .. }) => {}
        Ok(events) => assert!(events.is_empty(), "the log is gone: {events:#?}"),
        Err(error) => panic!("reading a deleted session's log: {error}"),
    }
    assert!(store.list_session_runs(session(0)).await?.is_empty());
    assert!(store.get_run(run_id).await?.is_none());
    assert!(store.get_lease(session(0)).await?.is_none());
    match store_state(store, session(0)).await {
        Ok(state) => assert!(
            state.entries.is_empty(),
            "the store files are gone: {:?}",
            state.entries
        ),
        Err(error) => assert!(
            error
                .downcast_ref::<seed_store::Error>()
                .is_some_and(|error| matches!(error, seed_store::Error::NotFound { .. })),
            "reading a deleted session's store: {error:#}"
        ),
    }
    // A message to it is refused, and nothing was written for it.
    assert!(runtime.send_message(session(0), "hello?").await.is_err());
    assert!(store.list_session_runs(session(0)).await?.is_empty());

    // The runtime goes on: another session is answered.
    let (_, other_run_id) = runtime.send_message(session(1), "still there?").await?;
    let other = within("another session's run", runtime.wait_for_run(other_run_id)).await?;
    assert_eq!(other.status, RunStatus::Succeeded, "{other:?}");
    assert_eq!(provider.n_requests(), 2);
    Ok(())
}

/// A stop that lands while the text is still arriving: the log keeps exactly what had streamed
/// to subscribers, a prefix of the response, no more and no less. (Subscribers hear the text
/// as `pi.live` commits it, at most an interval after it arrived: the text streams slowly
/// enough for three of those to hold a part of it.)
#[actix::test]
async fn a_stop_keeps_exactly_the_text_subscribers_saw() -> anyhow::Result<()> {
    use futures::StreamExt;

    let fixture = Fixture::new(1).await?;
    let long: String = (0..40).map(|idx| format!("word{idx} ")).collect();
    let provider = ScriptedProvider::new(vec![ScriptedStep::Hang { text: long.clone() }])
        .with_chunk_chars(4)
        .with_delta_delay(std::time::Duration::from_millis(20));
    let runtime = fixture.start(provider, "boot-1").await?;
    let mut bus = runtime.publisher().subscribe().await.expect("the bus");

    let (_, run_id) = runtime.send_message(session(0), "talk for a while").await?;
    let mut seen = String::new();
    for _ in 0..3 {
        seen.push_str(&first_text_delta(&mut bus, run_id).await);
    }
    assert!(runtime.stop_session(session(0)).await);
    // Deltas published before the run's end come before its RunFinished.
    within("the stopped run's end", async {
        loop {
            match bus.next().await {
                Some(seed_actors::Notification::TextDelta {
                    run_id: of, text, ..
                }) if of == run_id => seen.push_str(&text),
                Some(seed_actors::Notification::RunFinished {
                    run_id: of, status, ..
                }) if of == run_id => {
                    assert_eq!(status, RunStatus::Canceled);
                    return;
                }
                Some(_) => {}
                None => panic!("the bus closed"),
            }
        }
    })
    .await;

    let events = log(&fixture.store, session(0)).await?;
    let stopped = events.last().expect("the stopped text");
    assert_eq!(stopped.meta, serde_json::json!({ "stopped": true }));
    assert_eq!(stopped.content["text"], seen.as_str());
    assert!(
        long.starts_with(&seen) && seen.len() < long.len(),
        "a prefix, cut off: {seen:?}"
    );
    Ok(())
}
