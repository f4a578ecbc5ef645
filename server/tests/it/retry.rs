//! Retrying a message over HTTP against a real `seed serve`: a successor whose run failed has
//! its copied message retried and answered; the session's runs say how each message went; a
//! retry of what is no person's message, of no message, of another account's, or of a message
//! whose run is still open is refused and writes nothing.

use crate::common;

use std::time::{Duration, Instant};

use crate::common::{Server, new_session, row_counts};
use seed_server::api::{MessageSessionResponse, SessionRunsResponse};
use seed_server::client::Client;
use serde_json::json;

/// The session's runs, once the newest has ended.
async fn ended_runs(client: &Client, session_id: uuid::Uuid) -> SessionRunsResponse {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let runs: SessionRunsResponse = client
            .get(&format!("/v1/sessions/{session_id}/runs"))
            .await
            .expect("runs");
        let ended = runs
            .runs
            .last()
            .is_some_and(|run| !["queued", "running", "parked"].contains(&run.status.as_str()));
        if ended {
            return runs;
        }
        assert!(Instant::now() < deadline, "the run never ended: {runs:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[actix_web::test]
async fn a_successors_failed_message_is_retried_and_answered() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start(dir.path(), &[]);
    let client = server.client();
    let session = new_session(&client).await;
    // The predecessor continues; the successor's model fails the copied message.
    let sent: MessageSessionResponse = client
        .post(
            &format!("/v1/sessions/{}/messages", session.id),
            &json!({"text": "continue: Trip [fail]", "wait": true}),
        )
        .await
        .expect("sent");
    assert_eq!(sent.status, "succeeded");
    let successor = sent.continued_to_session_id.expect("a successor");

    let runs = ended_runs(&client, successor).await;
    assert_eq!(runs.runs.len(), 1, "{runs:?}");
    let failed = &runs.runs[0];
    assert_eq!(failed.status, "failed");
    let reason = failed.result.as_ref().expect("a result")["error"].to_string();
    assert!(reason.contains("[fail]"), "{reason}");
    let copied = failed.user_event_ids[0];

    // Retried, the copied message is answered.
    let retry_path = format!("/v1/sessions/{successor}/messages/{copied}/retry");
    let retried: MessageSessionResponse = client
        .post(&retry_path, &json!({"wait": true}))
        .await
        .expect("retried");
    assert_eq!(retried.status, "succeeded", "{retried:?}");
    assert_eq!(retried.event_id, copied);
    assert_eq!(
        retried.result.as_ref().expect("a result")["answer"],
        "You said: continue: Trip"
    );
    let runs = ended_runs(&client, successor).await;
    let statuses: Vec<&str> = runs.runs.iter().map(|run| run.status.as_str()).collect();
    assert_eq!(statuses, ["failed", "succeeded"]);
    assert!(runs.runs.iter().all(|run| run.user_event_ids == [copied]));

    // Retried once more, it finds its message answered: the same answer, the model not asked.
    let again: MessageSessionResponse = client
        .post(&retry_path, &json!({"wait": true}))
        .await
        .expect("retried again");
    let result = again.result.expect("a result");
    assert_eq!(result["answer"], "You said: continue: Trip");
    assert_eq!(result["answered_by"], format!("{}#0", retried.run_id));

    // The runs list takes a limit, within bounds.
    let newest: SessionRunsResponse = client
        .get(&format!("/v1/sessions/{successor}/runs?limit=1"))
        .await
        .expect("runs");
    assert_eq!(newest.runs.len(), 1);
    assert_eq!(newest.runs[0].id, again.run_id);
    let out_of_bounds = client
        .request(
            "GET",
            &format!("/v1/sessions/{successor}/runs?limit=0"),
            None,
        )
        .await
        .expect("answer");
    assert_eq!(out_of_bounds.status, 400);
    assert_eq!(out_of_bounds.value()["field"], "limit");
}

#[actix_web::test]
async fn refused_retries_write_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start(dir.path(), &[]);
    let client = server.client();
    let store = server.store();
    let session = new_session(&client).await;
    let answered: MessageSessionResponse = client
        .post(
            &format!("/v1/sessions/{}/messages", session.id),
            &json!({"text": "hello", "wait": true}),
        )
        .await
        .expect("sent");
    assert_eq!(answered.status, "succeeded");
    // A message whose run is still going: a retry is refused, and queues nothing.
    let open: MessageSessionResponse = client
        .post(
            &format!("/v1/sessions/{}/messages", session.id),
            &json!({"text": "[slow 500] take your time"}),
        )
        .await
        .expect("sent");
    let retry = |event_id: i64| format!("/v1/sessions/{}/messages/{event_id}/retry", session.id);
    let still_open = client
        .request("POST", &retry(open.event_id), Some(&json!({})))
        .await
        .expect("answer");
    assert_eq!(still_open.status, 409, "{:?}", still_open.value());
    assert!(
        still_open.value()["error"]
            .as_str()
            .is_some_and(|error| error.contains(&open.run_id.to_string())),
        "{:?}",
        still_open.value()
    );
    let runs = ended_runs(&client, session.id).await;
    assert_eq!(runs.runs.len(), 2, "{runs:?}");

    let events = client
        .request("GET", &format!("/v1/sessions/{}/events", session.id), None)
        .await
        .expect("events")
        .value();
    let answer_event = events["events"]
        .as_array()
        .expect("events")
        .iter()
        .find(|event| event["role"] == "assistant")
        .and_then(|event| event["id"].as_i64())
        .expect("an answer");
    let other = server.client_with(server.add_account());
    let before = row_counts(&store).await;
    let not_a_persons = client
        .request("POST", &retry(answer_event), Some(&json!({})))
        .await
        .expect("answer");
    assert_eq!(not_a_persons.status, 400, "{:?}", not_a_persons.value());
    assert_eq!(not_a_persons.value()["field"], "event_id");
    let no_message = client
        .request("POST", &retry(answered.event_id + 1000), Some(&json!({})))
        .await
        .expect("answer");
    assert_eq!(no_message.status, 404);
    let unknown_field = client
        .request(
            "POST",
            &retry(answered.event_id),
            Some(&json!({"wiat": true})),
        )
        .await
        .expect("answer");
    assert_eq!(unknown_field.status, 400);
    let others = other
        .request("POST", &retry(answered.event_id), Some(&json!({})))
        .await
        .expect("answer");
    assert_eq!(others.status, 404);
    assert_eq!(row_counts(&store).await, before);
}

#[actix_web::test]
async fn seed_chat_retries_a_successors_failed_message() {
    let dir = tempfile::tempdir().expect("tempdir");
    let _server = Server::start(dir.path(), &[]);
    let out = common::seed_cli(
        dir.path(),
        &["chat"],
        "/retry\ncontinue: Trip [fail]\n/retry\n/retry\n",
    );
    assert!(
        out.contains("(nothing to retry: the newest run did not fail)"),
        "{out}"
    );
    assert!(
        out.contains("the conversation continued in session"),
        "{out}"
    );
    // The successor's failed turn says why.
    let failure = out
        .lines()
        .find(|line| line.contains("(the turn failed: "))
        .unwrap_or_else(|| panic!("no failure line: {out}"));
    assert!(
        failure.contains("the scripted model fails this message"),
        "{out}"
    );
    // The first retry is answered in the successor; the second finds nothing failed.
    assert_eq!(out.matches("You said: continue: Trip").count(), 1, "{out}");
    assert_eq!(
        out.matches("(nothing to retry: the newest run did not fail)")
            .count(),
        2,
        "{out}"
    );
}
