//! A continuation's preview through the service: `POST /v1/sessions/{id}/continuation/preview`
//! writes nothing (every table's rows counted before and after), says what the
//! preview_continuation verb says from the same arguments and message, and the verb says what
//! continue_session then creates (the successor's projection, byte for byte its size); bad
//! arguments get 400 naming the field, another account's session 404, and nothing is written.

use crate::common::{Server, new_session, row_counts};
use crate::hardening_ws::mint;
use seed_server::api::{ContinuationInfo, EventsResponse, MessageSessionResponse};
use seed_server::client::Client;
use serde_json::{Value, json};
use uuid::Uuid;

/// Sends `text` to `session` and waits for its run.
async fn say(client: &Client, session: Uuid, text: &str) -> MessageSessionResponse {
    let sent: MessageSessionResponse = client
        .post(
            &format!("/v1/sessions/{session}/messages"),
            &json!({"text": text, "wait": true}),
        )
        .await
        .expect("sent");
    assert_eq!(sent.status, "succeeded", "{text}: {sent:?}");
    sent
}

/// continue_session's arguments, citing seqs 1–2 of the session and a resource.
fn arguments() -> Value {
    json!({
        "reason": "phase change",
        "title": "Lisbon hotels",
        "description": "Comparing three hotels",
        "handoff": {
            "purpose": "Book a hotel in Lisbon for May",
            "currentRequest": "Compare the shortlisted hotels",
            "decisions": ["Stay near Baixa", "At most €150 a night"]
        },
        "sources": [
            {"type": "session_events", "fromSeq": 1, "toSeq": 2},
            {"type": "resource", "uri": "https://example.org/hotels"}
        ]
    })
}

/// The results of the session's preview_continuation calls, oldest first, as JSON.
async fn verb_previews(client: &Client, session: Uuid) -> Vec<Value> {
    let events: EventsResponse = client
        .get(&format!("/v1/sessions/{session}/events?from_seq=1"))
        .await
        .expect("events");
    events
        .events
        .iter()
        .filter(|event| {
            event.event_type == "tool_result"
                && event.content["tool_name"] == "preview_continuation"
        })
        .map(|event| {
            assert_eq!(event.content["is_error"], false, "{}", event.content);
            let text = event.content["content"].as_str().unwrap_or_default();
            serde_json::from_str(text).expect("the verb's preview is JSON")
        })
        .collect()
}

/// `preview` without what depends on the log past the message (the recommended ranges read
/// the session's newest events).
fn measured(mut preview: Value) -> Value {
    preview
        .as_object_mut()
        .map(|fields| fields.remove("recommended"));
    preview
}

#[actix_web::test]
async fn a_preview_writes_nothing_and_agrees_with_the_verb_and_the_successor() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start(dir.path(), &[]);
    let client = server.client();
    let store = server.store();
    let session = new_session(&client).await.id;
    say(&client, session, "hello").await;
    let path = format!("/v1/sessions/{session}/continuation/preview");

    // The model previews from a message; then a person previews the same arguments, the same
    // message being the newest.
    say(
        &client,
        session,
        &format!("call: preview_continuation {}", arguments()),
    )
    .await;
    let by_verb = verb_previews(&client, session).await;
    assert_eq!(by_verb.len(), 1);

    // By bearer token (no nonce to take): not a row of any table changes.
    let token = mint(&client).await;
    let bearer = vec![("Authorization", format!("Bearer {token}"))];
    let before = row_counts(&store).await;
    let answer = client
        .send_raw("POST", &path, arguments().to_string().into_bytes(), &bearer)
        .await
        .expect("answer");
    assert_eq!(answer.status, 200, "{:?}", answer.value());
    assert_eq!(row_counts(&store).await, before, "a preview writes nothing");
    let by_person = answer.value();
    assert_eq!(measured(by_person.clone()), measured(by_verb[0].clone()));
    assert_eq!(by_person["sources"][0]["loaded"], "whole");
    assert_eq!(by_person["sources"][1]["loaded"], "listed");
    assert!(
        by_person["first_request"]["window_percent"]
            .as_f64()
            .is_some(),
        "{by_person}"
    );

    // Signed, the same, and only the request's nonce is kept.
    let signed = client
        .request("POST", &path, Some(&arguments()))
        .await
        .expect("answer");
    assert_eq!(signed.status, 200, "{:?}", signed.value());
    assert_eq!(measured(signed.value()), measured(by_person.clone()));
    let after: Vec<(&str, i64)> = row_counts(&store).await;
    for ((table, n_before), (_, n_after)) in before.iter().zip(&after) {
        let expected = n_before + i64::from(*table == "request_nonces");
        assert_eq!(*n_after, expected, "{table}");
    }

    // The model previews, then continues with the same arguments: the successor's projection
    // is the size its preview said.
    let line = format!("call: preview_continuation {}", arguments());
    let call = format!("call: continue_session {}", arguments());
    let sent = say(&client, session, &format!("{line}\n{call}")).await;
    let successor = sent.continued_to_session_id.expect("continued");
    let by_verb = verb_previews(&client, session).await;
    assert_eq!(by_verb.len(), 2);
    let info: ContinuationInfo = client
        .get(&format!("/v1/sessions/{successor}/continuation"))
        .await
        .expect("the continuation");
    let events: EventsResponse = client
        .get(&format!("/v1/sessions/{successor}/events?from_seq=1"))
        .await
        .expect("events");
    let projection = events.events[0].content["text"]
        .as_str()
        .unwrap_or_default();
    assert!(projection.starts_with("<continuation"), "{projection}");
    assert_eq!(
        by_verb[1]["projection_bytes"],
        info.manifest["projection_bytes"]
    );
    assert_eq!(by_verb[1]["projection_bytes"], json!(projection.len()));
    let omitted: Vec<Value> = by_verb[1]["omitted"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .map(|range| json!([range["from_seq"], range["to_seq"]]))
        .collect();
    let manifest_omitted: Vec<Value> = info.manifest["omitted"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .map(|range| json!([range["from_seq"], range["to_seq"]]))
        .collect();
    assert_eq!(omitted, manifest_omitted);

    // Now the newest message has been carried on (and the successor has answered it): a
    // preview says continue_session would refuse, and writes nothing.
    let runs: seed_server::api::SessionRunsResponse = client
        .get(&format!("/v1/sessions/{successor}/runs"))
        .await
        .expect("the successor's runs");
    let answered: Value = client
        .get(&format!("/v1/runs/{}?wait=true", runs.runs[0].id))
        .await
        .expect("the successor's run");
    assert_eq!(answered["status"], "succeeded", "{answered}");
    let before = row_counts(&store).await;
    let refused = client
        .request("POST", &path, Some(&arguments()))
        .await
        .expect("answer");
    assert_eq!(refused.status, 409, "{:?}", refused.value());
    assert_eq!(row_counts(&store).await, before);
}

#[actix_web::test]
async fn bad_arguments_get_400_naming_the_field_and_write_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start(dir.path(), &[]);
    let client = server.client();
    let store = server.store();
    let session = new_session(&client).await.id;
    let path = format!("/v1/sessions/{session}/continuation/preview");

    // No message yet: nothing to carry.
    let empty = client
        .request("POST", &path, Some(&arguments()))
        .await
        .expect("answer");
    assert_eq!(empty.status, 409, "{:?}", empty.value());

    say(&client, session, "hello").await;
    let other = server.client_with(server.add_account());
    let before = row_counts(&store).await;
    let with = |key: &str, value: Value| {
        let mut body = arguments();
        body[key] = value;
        body
    };
    let without = |key: &str| {
        let mut body = arguments();
        body.as_object_mut().map(|fields| fields.remove(key));
        body
    };
    for (body, field) in [
        (without("title"), "title"),
        (without("handoff"), "handoff"),
        (with("title", json!("   ")), "title"),
        (with("reason", json!("r".repeat(201))), "reason"),
        (with("handoff", json!({})), "handoff"),
        (with("handoff", json!("a string")), "handoff"),
        (
            with(
                "sources",
                json!([{"type": "session_events", "fromSeq": 5, "toSeq": 2}]),
            ),
            "sources[0].toSeq",
        ),
        (
            with(
                "sources",
                json!([{"type": "session_events", "fromSeq": 1, "toSeq": 999}]),
            ),
            "sources[0]",
        ),
        (
            with(
                "sources",
                json!([{"type": "memory", "path": "~/memory/none.md"}]),
            ),
            "sources[0]",
        ),
        (with("sources", json!(["ftp://nowhere"])), "sources[0]"),
        (with("transfer", json!({"plan": "keep"})), "transfer.plan"),
        (with("extra", json!(1)), "extra"),
    ] {
        let answer = client
            .request("POST", &path, Some(&body))
            .await
            .expect("answer");
        assert_eq!(answer.status, 400, "{body}: {:?}", answer.value());
        assert_eq!(
            answer.value()["field"],
            field,
            "{body}: {:?}",
            answer.value()
        );
    }
    let not_json = client
        .send_raw(
            "POST",
            &path,
            b"not json".to_vec(),
            &client.signature_fields("POST", &path, b"not json"),
        )
        .await
        .expect("answer");
    assert_eq!(not_json.status, 400);

    // Another account's session, and none, are not found.
    let theirs = other
        .request("POST", &path, Some(&arguments()))
        .await
        .expect("answer");
    assert_eq!(theirs.status, 404, "{:?}", theirs.value());
    let none = client
        .request(
            "POST",
            &format!("/v1/sessions/{}/continuation/preview", Uuid::now_v7()),
            Some(&arguments()),
        )
        .await
        .expect("answer");
    assert_eq!(none.status, 404);
    assert_eq!(
        row_counts(&store).await,
        before,
        "refused previews write nothing"
    );
}

#[actix_web::test]
async fn a_person_continues_into_the_successor_the_preview_showed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start(dir.path(), &[]);
    let client = server.client();
    let store = server.store();
    let session = new_session(&client).await.id;
    say(&client, session, "hello").await;
    say(&client, session, "what about trains?").await;
    let preview = client
        .request(
            "POST",
            &format!("/v1/sessions/{session}/continuation/preview"),
            Some(&arguments()),
        )
        .await
        .expect("answer");
    assert_eq!(preview.status, 200, "{:?}", preview.value());
    let preview = preview.value();

    // Bad arguments: 400 naming the field, nothing written.
    let path = format!("/v1/sessions/{session}/continuation");
    let before = row_counts(&store).await;
    let mut bad = arguments();
    bad["sources"] = json!([{"type": "session_events", "fromSeq": 1, "toSeq": 999}]);
    let answer = client
        .request("POST", &path, Some(&bad))
        .await
        .expect("answer");
    assert_eq!(answer.status, 400, "{:?}", answer.value());
    assert_eq!(answer.value()["field"], "sources[0]");
    assert_eq!(row_counts(&store).await, before, "a refusal writes nothing");

    // Continued: the successor starts from the projection the preview measured.
    let body = arguments().to_string().into_bytes();
    let fields = client.signature_fields("POST", &path, &body);
    let created = client
        .send_raw("POST", &path, body.clone(), &fields)
        .await
        .expect("answer");
    assert_eq!(created.status, 201, "{:?}", created.value());
    let created = created.value();
    let successor: Uuid = serde_json::from_value(created["session"]["id"].clone()).expect("an id");
    assert_eq!(created["continued_from_session_id"], json!(session));
    assert_eq!(created["session"]["title"], "Lisbon hotels");
    let info: ContinuationInfo = client
        .get(&format!("/v1/sessions/{successor}/continuation"))
        .await
        .expect("the continuation");
    assert_eq!(info.predecessor_session_id, session);
    assert_eq!(
        info.manifest["projection_bytes"],
        preview["projection_bytes"]
    );
    let events: EventsResponse = client
        .get(&format!("/v1/sessions/{successor}/events?from_seq=1"))
        .await
        .expect("events");
    let projection = events.events[0].content["text"]
        .as_str()
        .unwrap_or_default();
    assert_eq!(json!(projection.len()), preview["projection_bytes"]);
    assert_eq!(events.events[1].content["text"], "what about trains?");

    // Its run answers the copied message; the predecessor names it.
    let runs: seed_server::api::SessionRunsResponse = client
        .get(&format!("/v1/sessions/{successor}/runs"))
        .await
        .expect("runs");
    let answered: Value = client
        .get(&format!("/v1/runs/{}?wait=true", runs.runs[0].id))
        .await
        .expect("the successor's run");
    assert_eq!(answered["status"], "succeeded", "{answered}");
    let predecessor: Value = client
        .get(&format!("/v1/sessions/{session}"))
        .await
        .expect("the predecessor");
    assert_eq!(
        predecessor["session"]["continued_to"]["session_id"],
        json!(successor),
        "{predecessor}"
    );

    // The same signed request again is refused (the message it would carry is carried
    // already, which is checked before its nonce), and so is a new one: neither writes
    // anything.
    let after = row_counts(&store).await;
    let again = client
        .send_raw("POST", &path, body, &fields)
        .await
        .expect("answer");
    assert_eq!(again.status, 409, "{:?}", again.value());
    let twice = client
        .request("POST", &path, Some(&arguments()))
        .await
        .expect("answer");
    assert_eq!(twice.status, 409, "{:?}", twice.value());
    assert_eq!(row_counts(&store).await, after);
}
