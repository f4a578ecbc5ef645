//! Recall telemetry through the service: a successor's reads of what its projection left out
//! shown on `GET /v1/sessions/{id}/continuation` (on the successor's edge, and on the edges out
//! of a session its own successors read back), counted by `/metrics`, and carried into the
//! next continuation's projection.

use crate::common::{Server, new_session};
use seed_server::api::{ContinuationInfo, EventsResponse, MessageSessionResponse};
use seed_server::client::Client;
use serde_json::json;
use uuid::Uuid;

/// Sends `text` to `session` and waits for its run; the session the answer went to.
async fn say(client: &Client, session: Uuid, text: &str) -> MessageSessionResponse {
    let sent: MessageSessionResponse = client
        .post(
            &format!("/v1/sessions/{session}/messages"),
            &json!({"text": text, "wait": true}),
        )
        .await
        .expect("sent");
    assert_eq!(sent.status, "succeeded", "{text}");
    sent
}

/// Continues `session` (after a long turn, so its successor's projection leaves its early
/// events out) and returns the successor with its continuation.
async fn continue_long(client: &Client, session: Uuid, topic: &str) -> (Uuid, ContinuationInfo) {
    say(client, session, "[steps 25] a long stretch of work").await;
    let sent = say(client, session, &format!("continue: {topic}")).await;
    let Some(successor) = sent.continued_to_session_id else {
        let events: EventsResponse = client
            .get(&format!("/v1/sessions/{session}/events?from_seq=1"))
            .await
            .expect("events");
        let tail: Vec<_> = events
            .events
            .iter()
            .rev()
            .take(4)
            .map(|e| e.content.clone())
            .collect();
        panic!("not continued: {tail:#?}");
    };
    let info: ContinuationInfo = client
        .get(&format!("/v1/sessions/{successor}/continuation"))
        .await
        .expect("the continuation");
    (successor, info)
}

/// The first range the projection left out of its predecessor: its first two seqs.
fn left_out(info: &ContinuationInfo) -> (i64, i64) {
    let omitted = &info.manifest["omitted"][0];
    assert_eq!(
        omitted["thread"],
        json!(info.predecessor_session_id),
        "{omitted}"
    );
    let from_seq = omitted["from_seq"].as_i64().expect("from_seq");
    let to_seq = omitted["to_seq"].as_i64().expect("to_seq");
    assert!(to_seq > from_seq, "{omitted}");
    (from_seq, from_seq + 1)
}

fn read_line(thread: Uuid, (from_seq, to_seq): (i64, i64)) -> String {
    format!(
        "call: read {}",
        json!({"target": format!("thread:{thread}"), "fromSeq": from_seq, "toSeq": to_seq})
    )
}

async fn recalls_metric(client: &Client) -> String {
    let metrics = client
        .send_raw("GET", "/metrics", Vec::new(), &[])
        .await
        .expect("answer");
    String::from_utf8_lossy(&metrics.body)
        .lines()
        .filter(|line| line.contains("seed_continuation_recalls_total"))
        .collect::<Vec<_>>()
        .join("\n")
}

#[actix_web::test]
async fn recalls_are_shown_per_edge_counted_and_carried_into_the_next_projection() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start(dir.path(), &[]);
    let client = server.client();
    assert_eq!(
        recalls_metric(&client).await,
        "# TYPE seed_continuation_recalls_total counter\nseed_continuation_recalls_total 0"
    );
    let origin = new_session(&client).await.id;
    let (first, into_first) = continue_long(&client, origin, "Lisbon hotels").await;
    assert!(into_first.recalls.is_empty());
    assert!(into_first.continued_to.is_empty());

    // The successor reads a range its projection left out, in two calls of one turn.
    let recalled = left_out(&into_first);
    let line = read_line(origin, recalled);
    say(&client, first, &format!("{line}\n{line}")).await;
    let into_first: ContinuationInfo = client
        .get(&format!("/v1/sessions/{first}/continuation"))
        .await
        .expect("the continuation");
    assert_eq!(into_first.recalls.len(), 1, "{:?}", into_first.recalls);
    let recall = &into_first.recalls[0];
    assert_eq!(
        (
            recall.from_seq,
            recall.to_seq,
            recall.times,
            recall.reader_session_id
        ),
        (recalled.0, recalled.1, 2, first)
    );
    assert!(
        recalls_metric(&client)
            .await
            .ends_with("seed_continuation_recalls_total 2")
    );

    // It continues: the next projection loads the range, saying it was recalled; and the next
    // successor reads back a range of it, which the first's continuation shows on its edge out.
    let (second, into_second) = continue_long(&client, first, "Lisbon flights").await;
    assert_eq!(
        into_second.manifest["recalled"],
        json!([{
            "range": {"thread": origin, "from_seq": recalled.0, "to_seq": recalled.1},
            "times": 2,
            "loaded": true,
        }])
    );
    let events: EventsResponse = client
        .get(&format!("/v1/sessions/{second}/events"))
        .await
        .expect("events");
    let projection = events.events[0].content["text"]
        .as_str()
        .unwrap_or_default();
    assert!(
        projection.contains(&format!(
            "<excerpt thread=\"{origin}\" from=\"{}\" to=\"{}\" recalled=\"2 times after the last \
             continuation\">",
            recalled.0, recalled.1
        )),
        "{projection}"
    );
    let read_back = left_out(&into_second);
    say(&client, second, &read_line(first, read_back)).await;
    let into_first: ContinuationInfo = client
        .get(&format!("/v1/sessions/{first}/continuation"))
        .await
        .expect("the continuation");
    assert_eq!(into_first.recalls.len(), 1);
    assert_eq!(into_first.continued_to.len(), 1);
    let out = &into_first.continued_to[0];
    assert_eq!(
        (out.continuation_id, out.successor_session_id),
        (into_second.continuation_id, second)
    );
    assert_eq!(
        out.recalls
            .iter()
            .map(|recall| (
                recall.from_seq,
                recall.to_seq,
                recall.times,
                recall.reader_session_id
            ))
            .collect::<Vec<_>>(),
        [(read_back.0, read_back.1, 1, second)]
    );
    // The second's own continuation shows the same recall on its edge.
    let into_second: ContinuationInfo = client
        .get(&format!("/v1/sessions/{second}/continuation"))
        .await
        .expect("the continuation");
    assert_eq!(into_second.recalls, out.recalls);
    assert!(
        recalls_metric(&client)
            .await
            .ends_with("seed_continuation_recalls_total 3")
    );
    // seed fsck finds every excerpt, the recalled one too, the events it cites.
    crate::fsck::assert_clean(dir.path());

    // The OpenAPI document describes the recalls.
    let document = client
        .send_raw("GET", "/v1/openapi.json", Vec::new(), &[])
        .await
        .expect("answer")
        .value();
    let schemas = &document["components"]["schemas"];
    let info = &schemas["ContinuationInfo"]["properties"];
    assert!(
        info["recalls"].is_object() && info["continued_to"].is_object(),
        "{info}"
    );
    for (name, field) in [("ContinuationRecall", "times"), ("EdgeRecalls", "recalls")] {
        assert!(
            schemas[name]["properties"][field].is_object(),
            "{name}: {}",
            schemas[name]
        );
    }
}
