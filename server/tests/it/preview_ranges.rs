//! The recommended ranges in a continuation's preview through the service: `POST
//! /v1/sessions/{id}/continuation/preview` names the ranges worth citing, each with its
//! reasons and whether the projection loads it — here a read that failed and was not retried.

use crate::common::{Server, new_session};
use seed_server::api::{EventsResponse, MessageSessionResponse};
use serde_json::{Value, json};

#[actix_web::test]
async fn the_preview_response_names_a_failed_call_as_a_range_worth_citing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start(dir.path(), &[]);
    let client = server.client();
    let session = new_session(&client).await.id;
    for text in ["hello", "call: read {\"path\": \"~/memory/missing.md\"}"] {
        let sent: MessageSessionResponse = client
            .post(
                &format!("/v1/sessions/{session}/messages"),
                &json!({"text": text, "wait": true}),
            )
            .await
            .expect("sent");
        assert_eq!(sent.status, "succeeded", "{text}: {sent:?}");
    }
    let events: EventsResponse = client
        .get(&format!("/v1/sessions/{session}/events?from_seq=1"))
        .await
        .expect("events");
    let failed: Vec<i64> = events
        .events
        .iter()
        .filter(|event| {
            (event.event_type == "tool_call" && event.content["name"] == "read")
                || (event.event_type == "tool_result" && event.content["is_error"] == true)
        })
        .map(|event| event.seq)
        .collect();
    let [call_seq, result_seq] = failed[..] else {
        panic!("a failed read and its result: {:?}", events.events);
    };

    let arguments = json!({
        "reason": "phase change",
        "title": "Next",
        "description": "What comes next",
        "handoff": {"purpose": "Carry on"},
    });
    let answer = client
        .request(
            "POST",
            &format!("/v1/sessions/{session}/continuation/preview"),
            Some(&arguments),
        )
        .await
        .expect("answer");
    assert_eq!(answer.status, 200, "{:?}", answer.value());
    let preview: Value = answer.value();
    let recommended = preview["recommended"].as_array().expect("recommended");
    let covering = recommended
        .iter()
        .find(|range| {
            range["from_seq"]
                .as_i64()
                .is_some_and(|from| from <= call_seq)
                && range["to_seq"].as_i64().is_some_and(|to| result_seq <= to)
        })
        .unwrap_or_else(|| panic!("a range covers {call_seq}-{result_seq}: {preview}"));
    assert!(
        covering["reasons"]
            .as_array()
            .is_some_and(|reasons| reasons.contains(&json!("read failed and was not retried"))),
        "{covering}"
    );
    assert!(covering["loaded"].is_boolean(), "{covering}");
    // The exchange before the newest message is named too, for its own reason.
    assert!(
        recommended.iter().any(|range| range["reasons"]
            .as_array()
            .is_some_and(|reasons| reasons.contains(&json!("the newest exchanges")))),
        "{preview}"
    );
}
