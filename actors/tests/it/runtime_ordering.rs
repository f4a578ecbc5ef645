//! A message that arrives while an answer streams: the model takes it in after that answer,
//! and it is put to the model once, by its own run.
//!
//! The first response of A's turn streams its first delta and then waits for a gate the test
//! opens once B is in the log, so "B arrived while A's answer streamed" holds on every run, not
//! by luck of timing; the rest streams with a small delay between deltas.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use crate::common::{
    Fixture, assert_log_agrees_with_store, conversation, first_text_delta, input_of, log, session,
    store_state, summary, within,
};
use futures::FutureExt;
use futures::StreamExt;
use futures::channel::oneshot;
use futures::future::Shared;
use futures::stream::BoxStream;
use seed_durable::EntryBody;
use seed_events::{EventRole, RunStatus};
use seed_providers::{
    Message, Provider, Request, ScriptedProvider, ScriptedStep, StreamEvent, ToolCall,
    text_response, tool_response,
};

const A: &str = "what is the tallest mountain";
const B: &str = "and the deepest trench";

fn answer_to(input: &str) -> String {
    format!("Here is my considered answer to {input:?}, in quite a few words.")
}

fn looking_into(input: &str) -> String {
    format!("Let me look into {input:?} first.")
}

/// Each turn: a response with some text and one echo call, then a multi-word answer; streamed
/// in deltas of 4 characters, 2 ms apart.
fn talkative() -> ScriptedProvider {
    ScriptedProvider::from_fn(|request: &Request, _| {
        let input = input_of(request).unwrap_or_default().to_owned();
        let messages = conversation(request);
        let input_idx = messages
            .iter()
            .rposition(|message| matches!(message, Message::User(_)))
            .unwrap_or(0);
        let answered = messages[input_idx..]
            .iter()
            .any(|message| matches!(message, Message::Assistant(_)));
        if answered {
            ScriptedStep::Respond(text_response(&answer_to(&input)))
        } else {
            ScriptedStep::Respond(tool_response(
                &looking_into(&input),
                vec![ToolCall {
                    id: format!("echo-{}", request.messages.len()),
                    name: "echo".to_owned(),
                    arguments: serde_json::json!({ "text": input }),
                }],
            ))
        }
    })
    .with_chunk_chars(4)
    .with_delta_delay(Duration::from_millis(2))
}

/// The first request's stream yields one event, then waits for the gate before the rest.
struct GatedFirst {
    inner: ScriptedProvider,
    gate: Shared<oneshot::Receiver<()>>,
    n_requests: AtomicUsize,
}

impl Provider for GatedFirst {
    fn stream(&self, request: Request) -> BoxStream<'static, StreamEvent> {
        let events = self.inner.stream(request);
        if self.n_requests.fetch_add(1, Ordering::SeqCst) > 0 {
            return events;
        }
        let gate = self.gate.clone();
        futures::stream::unfold(
            (events, Some(gate), 0usize),
            |(mut events, gate, n_yielded)| async move {
                let gate = match gate {
                    Some(gate) if n_yielded == 1 => {
                        // A dropped sender opens the gate too.
                        let _ = gate.await;
                        None
                    }
                    gate => gate,
                };
                let event = events.next().await?;
                Some((event, (events, gate, n_yielded + 1)))
            },
        )
        .boxed()
    }
}

#[actix::test]
async fn a_message_sent_while_an_answer_streams_follows_that_answer_and_is_answered_once()
-> anyhow::Result<()> {
    let fixture = Fixture::new(1).await?;
    let model = talkative();
    let (open_gate, gate) = oneshot::channel::<()>();
    let provider = GatedFirst {
        inner: model.clone(),
        gate: gate.shared(),
        n_requests: AtomicUsize::new(0),
    };
    let runtime = fixture.start(provider, "boot-1").await?;
    let mut bus = runtime.publisher().subscribe().await.expect("the bus");

    let (a_event, a_run) = runtime.send_message(session(0), A).await?;
    first_text_delta(&mut bus, a_run).await;
    // A's first response is streaming (and held after its first delta): B arrives now.
    let (b_event, b_run) = runtime.send_message(session(0), B).await?;
    let a_row = fixture.store.get_run(a_run).await?.expect("A's run");
    assert_eq!(a_row.status, RunStatus::Running, "A was still streaming");
    let _ = open_gate.send(());

    let a_done = within("A's run", runtime.wait_for_run(a_run)).await?;
    let b_done = within("B's run", runtime.wait_for_run(b_run)).await?;
    assert_eq!(a_done.status, RunStatus::Succeeded, "{a_done:?}");
    assert_eq!(b_done.status, RunStatus::Succeeded, "{b_done:?}");
    assert_eq!(
        a_done.result,
        Some(serde_json::json!({ "answer": answer_to(A) }))
    );
    assert_eq!(
        b_done.result,
        Some(serde_json::json!({ "answer": answer_to(B) }))
    );
    assert_eq!(a_done.user_event_ids, [a_event]);
    assert_eq!(b_done.user_event_ids, [b_event]);

    // The requests: A's turn asked twice, then B's turn asked twice; B is nowhere in A's.
    let requests = model.requests();
    let inputs: Vec<&str> = requests
        .iter()
        .map(|request| input_of(request).unwrap_or_default())
        .collect();
    assert_eq!(inputs, [A, A, B, B], "each turn asks with its own input");
    for request in &requests[..2] {
        let mentions_b = request
            .messages
            .iter()
            .any(|message| match message.as_ref() {
                Message::User(user) => user.text.contains(B),
                Message::Assistant(assistant) => assistant.text().contains(B),
                Message::ToolResult(result) => result.content.contains(B),
            });
        assert!(
            !mentions_b,
            "A's run never puts B to the model: {request:#?}"
        );
    }
    // B's first request: A, A's whole turn with its answer, then B.
    assert_eq!(
        summary(&conversation(&requests[2])),
        [
            format!("user: {A}"),
            format!("assistant: {} [call echo]", looking_into(A)),
            format!("result: echo: {A}"),
            format!("assistant: {}", answer_to(A)),
            format!("user: {B}"),
        ]
    );
    // B's second request carries its own turn on top, B still once.
    assert_eq!(
        summary(&conversation(&requests[3])),
        [
            format!("user: {A}"),
            format!("assistant: {} [call echo]", looking_into(A)),
            format!("result: echo: {A}"),
            format!("assistant: {}", answer_to(A)),
            format!("user: {B}"),
            format!("assistant: {} [call echo]", looking_into(B)),
            format!("result: echo: {B}"),
        ]
    );
    // Put to the model once: one request takes B in as a new input (nothing answered behind
    // it yet), and no request holds B twice.
    let takes_b_in = requests
        .iter()
        .filter(|request| {
            let messages = conversation(request);
            matches!(messages.last(), Some(Message::User(user)) if user.text == B)
        })
        .count();
    assert_eq!(takes_b_in, 1, "B was taken in as an input once");
    for request in &requests {
        let n_b = conversation(request)
            .iter()
            .filter(|message| matches!(message, Message::User(user) if user.text == B))
            .count();
        assert!(n_b <= 1, "B at most once in a request: {request:#?}");
    }

    // The store holds B once, as the input of B's run (no replay of it).
    let state = store_state(&fixture.store, session(0)).await?;
    let b_entries: Vec<&EntryBody> = state
        .entries
        .iter()
        .map(|entry| &entry.body)
        .filter(|body| match body {
            EntryBody::User { message, .. } => message.text == B,
            EntryBody::Replay {
                message: Message::User(user),
            } => user.text == B,
            _ => false,
        })
        .collect();
    assert_eq!(b_entries.len(), 1, "{b_entries:#?}");
    assert!(
        matches!(b_entries[0], EntryBody::User { request_id, .. } if request_id.split('#').next() == Some(b_run.to_string().as_str())),
        "B is the input of its own run: {:?}",
        b_entries[0]
    );

    // The log is canonical and append-only: B's message was committed when it arrived, while
    // A's answer was streaming, so it precedes the events of A's answer; every event of A's
    // turn comes before every event of B's turn, and each run wrote its own.
    let events = log(&fixture.store, session(0)).await?;
    let view: Vec<(&str, Option<EventRole>, Option<seed_events::RunId>, &str)> = events
        .iter()
        .map(|event| {
            (
                event.kind.as_str(),
                event.role,
                event.run_id,
                event.content["text"].as_str().unwrap_or(""),
            )
        })
        .collect();
    let (user, assistant, tool) = (
        Some(EventRole::User),
        Some(EventRole::Assistant),
        Some(EventRole::Tool),
    );
    let (looking_a, looking_b) = (looking_into(A), looking_into(B));
    let (answer_a, answer_b) = (answer_to(A), answer_to(B));
    let expected = vec![
        ("message", user, None, A),
        ("message", user, None, B),
        ("message", assistant, Some(a_run), looking_a.as_str()),
        ("tool_call", assistant, Some(a_run), ""),
        ("tool_result", tool, Some(a_run), ""),
        ("message", assistant, Some(a_run), answer_a.as_str()),
        ("message", assistant, Some(b_run), looking_b.as_str()),
        ("tool_call", assistant, Some(b_run), ""),
        ("tool_result", tool, Some(b_run), ""),
        ("message", assistant, Some(b_run), answer_b.as_str()),
    ];
    assert_eq!(view, expected);
    assert_log_agrees_with_store(&fixture.store, session(0)).await?;
    Ok(())
}

/// Messages sent back to back, before the first run has taken anything in: each is put to the
/// model once, by its own run, in the order they were sent, whatever the timing of the runs.
#[actix::test]
async fn messages_sent_back_to_back_are_each_taken_in_once_by_their_own_run() -> anyhow::Result<()>
{
    const MESSAGES: [&str; 3] = ["first question", "second question", "third question"];
    let fixture = Fixture::new(1).await?;
    let model = talkative();
    let runtime = fixture.start(model.clone(), "boot-1").await?;
    let mut runs = Vec::new();
    for text in MESSAGES {
        runs.push(runtime.send_message(session(0), text).await?.1);
    }
    for (run_id, text) in runs.iter().zip(MESSAGES) {
        let run = within("a run", runtime.wait_for_run(*run_id)).await?;
        assert_eq!(run.status, RunStatus::Succeeded, "{run:?}");
        assert_eq!(
            run.result,
            Some(serde_json::json!({ "answer": answer_to(text) }))
        );
    }

    let requests = model.requests();
    let inputs: Vec<&str> = requests
        .iter()
        .map(|request| input_of(request).unwrap_or_default())
        .collect();
    let expected_inputs: Vec<&str> = MESSAGES.iter().flat_map(|text| [*text, *text]).collect();
    assert_eq!(inputs, expected_inputs, "one turn per message, in order");
    // The last request holds every turn, each message once, in the order they were sent.
    let mut expected = Vec::new();
    for text in MESSAGES {
        expected.extend([
            format!("user: {text}"),
            format!("assistant: {} [call echo]", looking_into(text)),
            format!("result: echo: {text}"),
        ]);
        if text != MESSAGES[2] {
            expected.push(format!("assistant: {}", answer_to(text)));
        }
    }
    let last = requests.last().expect("requests");
    assert_eq!(summary(&conversation(last)), expected);
    // No request holds a message sent after its own input.
    for request in &requests {
        let input = input_of(request).unwrap_or_default();
        let input_idx = MESSAGES
            .iter()
            .position(|text| *text == input)
            .expect("an input");
        for later in &MESSAGES[input_idx + 1..] {
            assert!(
                !conversation(request)
                    .iter()
                    .any(|message| matches!(message, Message::User(user) if user.text == *later)),
                "a request for {input:?} holds the later {later:?}"
            );
        }
    }
    assert_log_agrees_with_store(&fixture.store, session(0)).await?;
    Ok(())
}
