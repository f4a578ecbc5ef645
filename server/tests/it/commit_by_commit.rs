//! The log and the subscribers follow the store commit by commit, against a real `seed serve`:
//! each step of a turn is in `GET …/events` (and heard of on the WebSocket, with the seqs it
//! made visible) while the turn still runs; and a subscriber never sees text that a crash takes
//! back — every delta it received before a SIGKILL is in the store after it.

use crate::common::{Server, new_session, responses_of};
use seed_server::api::{EventsResponse, MessageSessionResponse, RunInfo, SessionInfo};
use seed_server::client::{Client, next_update};
use seed_server::ws::Update;
use serde_json::json;

async fn events(client: &Client, session: &SessionInfo, from: i64, to: i64) -> EventsResponse {
    client
        .get(&format!(
            "/v1/sessions/{}/events?from_seq={from}&to_seq={to}",
            session.id
        ))
        .await
        .expect("events")
}

#[actix_web::test]
async fn each_step_of_a_turn_is_in_the_log_and_heard_of_before_the_run_ends() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start(dir.path(), &[]);
    let client = server.client();
    let mut subscription = client.subscribe().await.expect("subscribes");
    let session = new_session(&client).await;
    // Three steps: two responses that each call the status verb, then the answer; each
    // response streams slowly, so the turn runs for a while after each step's commit.
    let sent: MessageSessionResponse = client
        .post(
            &format!("/v1/sessions/{}/messages", session.id),
            &json!({"text": "[steps 3] [slow 150] plan the trip"}),
        )
        .await
        .expect("sent");

    let mut ranges = Vec::new();
    let mut step_kinds = Vec::new();
    let mut deltas = Vec::new();
    let mut tool_calls = Vec::new();
    loop {
        match next_update(&mut subscription).await.expect("an update") {
            Update::SessionChange {
                session_id,
                from_seq: Some(from),
                to_seq: Some(to),
                ..
            } if session_id.0 == session.id => {
                ranges.push((from, to));
                // Exactly the events the change made visible are there to be read.
                let read = events(&client, &session, from, to).await;
                let seqs: Vec<i64> = read.events.iter().map(|event| event.seq).collect();
                assert_eq!(seqs, (from..=to).collect::<Vec<_>>());
                for event in read.events {
                    if event.event_type == "tool_call" || event.event_type == "tool_result" {
                        // A step's call and result, read while the run still runs.
                        let run: RunInfo = client
                            .get(&format!("/v1/runs/{}", sent.run_id))
                            .await
                            .expect("the run");
                        assert_eq!(run.status, "running", "seq {}", event.seq);
                        step_kinds.push(event.event_type);
                    }
                }
            }
            Update::ToolCall {
                session_id,
                seq,
                call_id,
                name,
                ..
            } if session_id.0 == session.id => {
                // Heard of once its response is committed: its event is in the log.
                let read = events(&client, &session, seq, seq).await;
                assert_eq!(read.events.len(), 1);
                assert_eq!(read.events[0].content["id"], json!(call_id));
                assert_eq!(name, "status");
                tool_calls.push(seq);
            }
            Update::TextDelta {
                session_id,
                offset_chars,
                text,
                ..
            } if session_id.0 == session.id => deltas.push((offset_chars, text)),
            Update::RunFinished { run_id, status, .. } if run_id.0 == sent.run_id => {
                assert_eq!(status, "succeeded");
                break;
            }
            _ => {}
        }
    }
    assert_eq!(
        step_kinds,
        ["tool_call", "tool_result", "tool_call", "tool_result"],
        "each step heard of, and read, before the run's end"
    );
    assert_eq!(tool_calls.len(), 2);
    // The ranges made visible cover the log from the message on, in order, without a gap.
    let log = events(&client, &session, 1, i64::MAX).await.events;
    assert_eq!(ranges.first().map(|range| range.0), Some(sent.seq));
    for pair in ranges.windows(2) {
        assert_eq!(pair[1].0, pair[0].1 + 1, "{ranges:?}");
    }
    assert_eq!(
        ranges.last().map(|range| range.1),
        log.last().map(|e| e.seq)
    );
    // The text of each response, whole, as its deltas carried it.
    assert_eq!(
        responses_of(&deltas),
        ["Step 1 of 3.", "Step 2 of 3.", "You said: plan the trip"]
    );
}

#[actix_web::test]
async fn every_delta_a_subscriber_saw_before_a_sigkill_is_in_the_store() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start(dir.path(), &[]);
    let client = server.client();
    let mut subscription = client.subscribe().await.expect("subscribes");
    let session = new_session(&client).await;
    let words: Vec<String> = (0..80).map(|idx| format!("word{idx}")).collect();
    let input = words.join(" ");
    let sent: MessageSessionResponse = client
        .post(
            &format!("/v1/sessions/{}/messages", session.id),
            &json!({"text": format!("[slow 25] {input}")}),
        )
        .await
        .expect("sent");

    // Some of the answer streams, then the service is killed mid-response.
    let mut deltas = Vec::new();
    while deltas.len() < 4 {
        match next_update(&mut subscription).await.expect("an update") {
            Update::TextDelta {
                session_id,
                offset_chars,
                text,
                ..
            } if session_id.0 == session.id => deltas.push((offset_chars, text)),
            Update::RunFinished { .. } => panic!("the answer ended before the kill"),
            _ => {}
        }
    }
    let mut server = server;
    server.child.kill().expect("SIGKILL");
    server.child.wait().expect("the service is gone");
    // What was already on its way to the subscriber.
    while let Some(update) = next_update(&mut subscription).await {
        if let Update::TextDelta {
            offset_chars, text, ..
        } = update
        {
            deltas.push((offset_chars, text));
        }
    }
    let seen = responses_of(&deltas);
    assert_eq!(seen.len(), 1, "{seen:?}");
    let seen = &seen[0];
    let answer = format!("You said: {input}");
    assert!(
        answer.starts_with(seen.as_str()) && seen.len() < answer.len(),
        "{seen:?}"
    );

    // The store holds every character the subscriber saw: in the response in flight, or in
    // a committed answer.
    let store = server.store();
    let session_id = seed_events::SessionId(session.id);
    let live = store
        .live_document(session_id)
        .await
        .expect("reads pi.live")
        .map(|live| live.text)
        .unwrap_or_default();
    let committed = store
        .read_events(session_id, 1, i64::MAX, usize::MAX)
        .await
        .expect("the log")
        .into_iter()
        .filter(|event| event.kind == "message" && event.actor.as_deref() == Some("agent"))
        .filter_map(|event| event.content["text"].as_str().map(str::to_owned))
        .collect::<Vec<_>>();
    assert!(
        live.starts_with(seen.as_str()) || committed.iter().any(|text| text.starts_with(seen)),
        "saw {seen:?}; the store has {live:?} in flight and {committed:?}"
    );
    drop(store);

    // After the restart the turn is taken up again and answered whole.
    drop(server);
    let server = Server::start(dir.path(), &[]);
    let client = server.client();
    let run: RunInfo = client
        .get(&format!("/v1/runs/{}?wait=true", sent.run_id))
        .await
        .expect("the run");
    assert_eq!(run.status, "succeeded", "{run:?}");
    assert_eq!(run.result, Some(json!({ "answer": answer })));
}
