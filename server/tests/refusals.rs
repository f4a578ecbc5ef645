//! Refused requests against a real `seed serve`: unsigned, forged, tampered, expired and
//! replayed requests (401), another account's session (404, nothing heard on the WebSocket),
//! and each bad input (413, 400 naming the field, 404, 429). Every refusal is checked to write
//! nothing, by counting the rows of every table before and after.

mod common;

use common::{Server, new_session, row_counts};
use seed_server::api::{ListSessionsResponse, MessageSessionResponse};
use seed_server::client::next_update;
use seed_server::keys::AccountKey;
use seed_server::ws::Update;
use serde_json::json;

#[actix_web::test]
async fn unsigned_badly_signed_expired_and_replayed_requests_get_401_and_write_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start(dir.path(), &[]);
    let client = server.client();
    let store = server.store();
    let session = new_session(&client).await;
    let path = format!("/v1/sessions/{}/messages", session.id);
    let body = json!({"text": "hi"}).to_string().into_bytes();
    let before = row_counts(&store).await;

    // Unsigned.
    let unsigned = client
        .send_raw("POST", &path, body.clone(), &[])
        .await
        .expect("answer");
    assert_eq!(unsigned.status, 401, "{:?}", unsigned.value());

    // Signed by a key that is not the account's, under the account's key id.
    let forger = AccountKey {
        account_id: client.key().account_id,
        ..AccountKey::generate().expect("key")
    };
    let forged = server
        .client_with(forger)
        .request("POST", &path, Some(&json!({"text": "hi"})))
        .await
        .expect("answer");
    assert_eq!(forged.status, 401);

    // A body other than the one signed.
    let fields = client.signature_fields("POST", &path, &body);
    let tampered = client
        .send_raw(
            "POST",
            &path,
            json!({"text": "ho"}).to_string().into_bytes(),
            &fields,
        )
        .await
        .expect("answer");
    assert_eq!(tampered.status, 401);

    // Signed for another path.
    let fields = client.signature_fields("POST", "/v1/sessions", &body);
    let moved = client
        .send_raw("POST", &path, body.clone(), &fields)
        .await
        .expect("answer");
    assert_eq!(moved.status, 401);

    // Created more than 300 s ago.
    let created = seed_server::serve::now_ms() / 1000 - 301;
    let fields = client.signature_fields_at("POST", &path, &body, created, "expired-nonce-0001");
    let expired = client
        .send_raw("POST", &path, body.clone(), &fields)
        .await
        .expect("answer");
    assert_eq!(expired.status, 401);
    assert_eq!(
        row_counts(&store).await,
        before,
        "refused requests wrote nothing"
    );

    // Replayed: the first use goes through, the replay is refused and writes nothing.
    let fields = client.signature_fields("POST", &path, &body);
    let first = client
        .send_raw("POST", &path, body.clone(), &fields)
        .await
        .expect("answer");
    assert_eq!(first.status, 200, "{:?}", first.value());
    let after_first = row_counts(&store).await;
    let replay = client
        .send_raw("POST", &path, body.clone(), &fields)
        .await
        .expect("answer");
    assert_eq!(replay.status, 401);
    // A replayed read is refused too.
    let read_fields = client.signature_fields("GET", "/v1/sessions", b"");
    let read = client
        .send_raw("GET", "/v1/sessions", Vec::new(), &read_fields)
        .await
        .expect("answer");
    assert_eq!(read.status, 200);
    let read_again = client
        .send_raw("GET", "/v1/sessions", Vec::new(), &read_fields)
        .await
        .expect("answer");
    assert_eq!(read_again.status, 401);
    let mut expected = after_first.clone();
    for (table, n_rows) in &mut expected {
        if *table == "request_nonces" {
            *n_rows += 1; // the first read's nonce
        }
    }
    let now = row_counts(&store).await;
    let without_runs = |counts: &[(&str, i64)]| -> Vec<(String, i64)> {
        // The first message's run may have ended and written its answer meanwhile.
        counts
            .iter()
            .filter(|(table, _)| {
                !["session_events", "session_durable_files", "session_leases"].contains(table)
            })
            .map(|(table, n)| ((*table).to_owned(), *n))
            .collect()
    };
    assert_eq!(without_runs(&now), without_runs(&expected));

    // Two concurrent uses of one nonce: exactly one goes through.
    let fields = client.signature_fields("POST", "/v1/sessions", b"{}");
    let (one, two) = futures::join!(
        client.send_raw("POST", "/v1/sessions", b"{}".to_vec(), &fields),
        client.send_raw("POST", "/v1/sessions", b"{}".to_vec(), &fields),
    );
    let mut statuses = [one.expect("answer").status, two.expect("answer").status];
    statuses.sort();
    assert_eq!(statuses, [201, 401]);
}

#[actix_web::test]
async fn another_account_gets_404_for_a_session_and_hears_nothing_of_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start(dir.path(), &[]);
    let alice = server.client();
    let bob = server.client_with(server.add_account());
    let mut bob_updates = bob.subscribe().await.expect("subscribes");
    let session = new_session(&alice).await;
    let sent: MessageSessionResponse = alice
        .post(
            &format!("/v1/sessions/{}/messages", session.id),
            &json!({"text": "private", "wait": true}),
        )
        .await
        .expect("sent");
    let store = server.store();
    let before = row_counts(&store).await;
    for (method, path, body) in [
        ("GET", format!("/v1/sessions/{}", session.id), None),
        ("GET", format!("/v1/sessions/{}/events", session.id), None),
        ("GET", format!("/v1/runs/{}", sent.run_id), None),
        ("DELETE", format!("/v1/sessions/{}", session.id), None),
        ("POST", format!("/v1/sessions/{}/stop", session.id), None),
        (
            "POST",
            format!("/v1/sessions/{}/messages", session.id),
            Some(json!({"text": "let me in"})),
        ),
        (
            "PUT",
            format!("/v1/sessions/{}/model", session.id),
            Some(json!({"model": "x"})),
        ),
        (
            "POST",
            format!("/v1/sessions/{}/actions", session.id),
            Some(json!({"verb": "status", "arguments": {"description": "mine now"}})),
        ),
    ] {
        let answer = bob
            .request(method, &path, body.as_ref())
            .await
            .expect("answer");
        assert_eq!(answer.status, 404, "{method} {path}: {:?}", answer.value());
    }
    assert_eq!(row_counts(&store).await, before, "nothing was written");
    let list: ListSessionsResponse = bob.get("/v1/sessions").await.expect("list");
    assert!(list.sessions.is_empty());

    // Bob's first update is about his own session: none of Alice's went to him.
    let own = new_session(&bob).await;
    match next_update(&mut bob_updates).await.expect("an update") {
        Update::AccountChange {
            account_id, reason, ..
        } => {
            assert_eq!(account_id, bob.key().account_id);
            assert_eq!(reason, "session-created");
        }
        other => panic!("bob heard {other:?} before his own session {}", own.id),
    }
}

#[actix_web::test]
async fn bad_input_gets_its_status_and_writes_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start(
        dir.path(),
        &[
            "--body-bytes-max",
            "4096",
            "--queued-runs-max",
            "2",
            // Runs take far longer than the test: the queue only grows while it runs.
            "--scripted-delay-ms",
            "60000",
        ],
    );
    let client = server.client();
    let store = server.store();
    let session = new_session(&client).await;
    let gone = new_session(&client).await;
    assert_eq!(
        client
            .request("DELETE", &format!("/v1/sessions/{}", gone.id), None)
            .await
            .expect("answer")
            .status,
        204
    );
    let messages = format!("/v1/sessions/{}/messages", session.id);
    let before = row_counts(&store).await;

    let raw = |path: String, body: &str| {
        let body = body.as_bytes().to_vec();
        let fields = client.signature_fields("POST", &path, &body);
        let client = client.clone();
        async move {
            client
                .send_raw("POST", &path, body, &fields)
                .await
                .expect("answer")
        }
    };
    let too_large = raw(
        messages.clone(),
        &format!("{{\"text\": \"{}\"}}", "x".repeat(5000)),
    )
    .await;
    assert_eq!(too_large.status, 413);
    // JSON, as every error of the API.
    assert!(
        too_large.value()["error"]
            .as_str()
            .is_some_and(|error| error.contains("bytes at most")),
        "{:?}",
        std::str::from_utf8(&too_large.body)
    );
    let not_json = raw(messages.clone(), "{\"text\": ").await;
    assert_eq!(not_json.status, 400);
    let missing = raw(messages.clone(), "{}").await;
    assert_eq!(
        (missing.status, missing.value()["field"].clone()),
        (400, json!("text"))
    );
    let wrong_type = raw(messages.clone(), "{\"text\": 7}").await;
    assert_eq!(
        (wrong_type.status, wrong_type.value()["field"].clone()),
        (400, json!("text"))
    );
    let unknown_field = raw(messages.clone(), "{\"text\": \"a\", \"colour\": 1}").await;
    assert_eq!(
        (unknown_field.status, unknown_field.value()["field"].clone()),
        (400, json!("colour"))
    );
    let empty = raw(messages.clone(), "{\"text\": \"\"}").await;
    assert_eq!(
        (empty.status, empty.value()["field"].clone()),
        (400, json!("text"))
    );
    let bad_verb = raw(
        format!("/v1/sessions/{}/actions", session.id),
        "{\"verb\": \"delegate\"}",
    )
    .await;
    assert_eq!(
        (bad_verb.status, bad_verb.value()["field"].clone()),
        (400, json!("verb"))
    );
    // Arguments that do not fit the verb's schema: refused with the field named, and neither
    // the verb's writes, nor an action event, nor the nonce are stored.
    for (arguments, field) in [
        (json!({"title": 5, "description": "x"}), "arguments.title"),
        (
            json!({"steps": [{"step": "a", "done": "maybe"}]}),
            "arguments.steps[0].done",
        ),
        (json!({"colour": "red"}), "arguments.colour"),
    ] {
        let verb = if field.contains("steps") {
            "plan"
        } else {
            "status"
        };
        let body = json!({"verb": verb, "arguments": arguments}).to_string();
        let answer = raw(format!("/v1/sessions/{}/actions", session.id), &body).await;
        assert_eq!(
            (answer.status, answer.value()["field"].clone()),
            (400, json!(field)),
            "{body}: {:?}",
            answer.value()
        );
    }
    // A struct's fields in order as an array: serde would take it; the API does not.
    let array_body = raw(messages.clone(), "[\"hi\"]").await;
    assert_eq!(array_body.status, 400);
    let bad_to_seq = client
        .request(
            "GET",
            &format!("/v1/sessions/{}/events?to_seq=0", session.id),
            None,
        )
        .await
        .expect("answer");
    assert_eq!(
        (bad_to_seq.status, bad_to_seq.value()["field"].clone()),
        (400, json!("to_seq"))
    );
    let bad_limit = client
        .request("GET", "/v1/sessions?limit=0", None)
        .await
        .expect("answer");
    assert_eq!(
        (bad_limit.status, bad_limit.value()["field"].clone()),
        (400, json!("limit"))
    );
    // A parameter that does not parse at all is named too.
    for (path, field) in [
        ("/v1/sessions?limit=abc".to_owned(), "limit"),
        (
            format!("/v1/sessions/{}/events?from_seq=x", session.id),
            "from_seq",
        ),
        (
            format!("/v1/runs/{}?wait=maybe", uuid::Uuid::now_v7()),
            "wait",
        ),
    ] {
        let answer = client.request("GET", &path, None).await.expect("answer");
        assert_eq!(
            (answer.status, answer.value()["field"].clone()),
            (400, json!(field)),
            "{path}: {:?}",
            answer.value()
        );
    }
    let unknown = raw(
        format!("/v1/sessions/{}/messages", uuid::Uuid::now_v7()),
        "{\"text\": \"a\"}",
    )
    .await;
    assert_eq!(unknown.status, 404);
    let to_deleted = raw(
        format!("/v1/sessions/{}/messages", gone.id),
        "{\"text\": \"a\"}",
    )
    .await;
    assert_eq!(to_deleted.status, 404);
    let not_a_uuid = client
        .request("GET", "/v1/sessions/nope", None)
        .await
        .expect("answer");
    assert_eq!(not_a_uuid.status, 404);
    assert_eq!(row_counts(&store).await, before, "bad input wrote nothing");

    // Too many runs queued: messages are taken until the account has two waiting, then 429.
    // The first message's run starts first (and runs far longer than the test), so that no
    // run leaves the queue while the limit is tried.
    let first = raw(messages.clone(), "{\"text\": \"message 0\"}").await;
    assert_eq!(first.status, 200);
    let run_path = format!(
        "/v1/runs/{}",
        first.value()["run_id"].as_str().expect("a run id")
    );
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let run = client
            .request("GET", &run_path, None)
            .await
            .expect("answer");
        if run.value()["status"] == "running" {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{:?}", run.value());
        actix_web::rt::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    let mut statuses = Vec::new();
    for idx in 1..5 {
        let answer = raw(
            messages.clone(),
            &format!("{{\"text\": \"message {idx}\"}}"),
        )
        .await;
        statuses.push(answer.status);
        if answer.status == 429 {
            break;
        }
    }
    assert_eq!(statuses.last(), Some(&429), "{statuses:?}");
    assert!(
        statuses[..statuses.len() - 1]
            .iter()
            .all(|status| *status == 200)
    );
    let counts = row_counts(&store).await;
    let refused = raw(messages.clone(), "{\"text\": \"one more\"}").await;
    assert_eq!(refused.status, 429);
    let runs = |counts: &[(&str, i64)]| counts.iter().find(|(t, _)| *t == "runs").map(|(_, n)| *n);
    assert_eq!(
        runs(&row_counts(&store).await),
        runs(&counts),
        "the refused message queued nothing"
    );
}
