//! Refused requests against a real `seed serve`: unsigned, forged, tampered, expired and
//! replayed requests (401), another account's session (404, nothing heard on the WebSocket),
//! and each bad input (413, 400 naming the field, 404, 429). Every refusal is checked to write
//! nothing, by counting the rows of every table before and after.

use crate::common::{Server, new_session, row_counts};
use seed_server::api::{ListSessionsResponse, MessageSessionResponse};
use seed_server::client::next_update;
use seed_server::keys::AccountKey;
use seed_server::limits::{
    MODEL_CHARS_MAX, PAGE_ITEMS_MAX, SESSION_DESCRIPTION_CHARS_MAX, SESSION_TITLE_CHARS_MAX,
};
use seed_server::ws::Update;
use serde_json::json;

/// A request the service must refuse, and how: a row of the bad-input table.
struct BadRequest {
    /// What is wrong with it, for the failure message.
    what: &'static str,
    method: &'static str,
    path: String,
    /// The raw body; none for a GET.
    body: Option<String>,
    status: u16,
    /// The field the answer names; none when no one field is at fault.
    field: Option<String>,
    /// Words the answer's `error` holds (every refusal's body is JSON with one).
    saying: String,
}

impl BadRequest {
    fn get(path: &str, status: u16, field: Option<&str>) -> BadRequest {
        BadRequest {
            what: "a bad query",
            method: "GET",
            path: path.to_owned(),
            body: None,
            status,
            field: field.map(str::to_owned),
            saying: String::new(),
        }
    }

    fn post(path: &str, status: u16, field: Option<&str>) -> BadRequest {
        BadRequest {
            method: "POST",
            ..BadRequest::get(path, status, field)
        }
    }

    fn saying(self, words: &str) -> BadRequest {
        BadRequest {
            saying: words.to_owned(),
            ..self
        }
    }
}

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
        // The first message's run may have ended and written its answer (and what its
        // harness keeps) meanwhile.
        counts
            .iter()
            .filter(|(table, _)| {
                ![
                    "session_events",
                    "session_durable_files",
                    "session_durable_kept",
                    "session_leases",
                ]
                .contains(table)
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

    // Each bad request: its answer's status, the field it names (none when no one field is at
    // fault), and words its error must hold. Every answer is JSON, as every error of the API.
    let session_path = format!("/v1/sessions/{}", session.id);
    let actions = format!("{session_path}/actions");
    let events = format!("{session_path}/events");
    let title_too_long = "t".repeat(SESSION_TITLE_CHARS_MAX + 1);
    let title_limit = format!("at most {SESSION_TITLE_CHARS_MAX} characters");
    let status_call = |arguments: serde_json::Value| {
        Some(json!({"verb": "status", "arguments": arguments}).to_string())
    };
    let cases: Vec<BadRequest> = vec![
        BadRequest {
            what: "a body over --body-bytes-max",
            body: Some(format!("{{\"text\": \"{}\"}}", "x".repeat(5000))),
            ..BadRequest::post(&messages, 413, None).saying("bytes at most")
        },
        BadRequest {
            what: "a body cut off inside a field",
            body: Some("{\"text\": ".to_owned()),
            ..BadRequest::post(&messages, 400, Some("text"))
        },
        BadRequest {
            what: "a struct's fields in order as an array (serde would take it; the API does not)",
            body: Some("[\"hi\"]".to_owned()),
            ..BadRequest::post(&messages, 400, None)
        },
        BadRequest {
            what: "a required field missing",
            body: Some("{}".to_owned()),
            ..BadRequest::post(&messages, 400, Some("text"))
        },
        BadRequest {
            what: "a field of the wrong type",
            body: Some("{\"text\": 7}".to_owned()),
            ..BadRequest::post(&messages, 400, Some("text"))
        },
        BadRequest {
            what: "an unknown field",
            body: Some("{\"text\": \"a\", \"colour\": 1}".to_owned()),
            ..BadRequest::post(&messages, 400, Some("colour"))
        },
        BadRequest {
            what: "an empty message",
            body: Some("{\"text\": \"\"}".to_owned()),
            ..BadRequest::post(&messages, 400, Some("text")).saying("at least 1 characters")
        },
        BadRequest {
            what: "a title over the session title limit",
            body: Some(json!({"title": title_too_long}).to_string()),
            ..BadRequest::post("/v1/sessions", 400, Some("title")).saying(&title_limit)
        },
        BadRequest {
            what: "an empty model name",
            body: Some(json!({"model": ""}).to_string()),
            ..BadRequest::post("/v1/sessions", 400, Some("model"))
        },
        BadRequest {
            what: "a model name over its limit",
            body: Some(json!({"model": "m".repeat(MODEL_CHARS_MAX + 1)}).to_string()),
            method: "PUT",
            ..BadRequest::post(&format!("{session_path}/model"), 400, Some("model"))
                .saying(&format!("at most {MODEL_CHARS_MAX} characters"))
        },
        BadRequest {
            what: "a verb that cannot be run by hand",
            body: Some("{\"verb\": \"delegate\"}".to_owned()),
            ..BadRequest::post(&actions, 400, Some("verb"))
        },
        // Arguments that do not fit the verb's schema: refused with the field named, and
        // neither the verb's writes, nor an action event, nor the nonce are stored.
        BadRequest {
            what: "a verb's argument of the wrong type",
            body: status_call(json!({"title": 5, "description": "x"})),
            ..BadRequest::post(&actions, 400, Some("arguments.title"))
        },
        BadRequest {
            what: "the agent's title over the same limit as a person's",
            body: status_call(json!({"title": title_too_long, "description": "x"})),
            ..BadRequest::post(&actions, 400, Some("arguments.title")).saying(&title_limit)
        },
        BadRequest {
            what: "a description over its limit",
            body: status_call(
                json!({"description": "d".repeat(SESSION_DESCRIPTION_CHARS_MAX + 1)}),
            ),
            ..BadRequest::post(&actions, 400, Some("arguments.description")).saying(&format!(
                "at most {SESSION_DESCRIPTION_CHARS_MAX} characters"
            ))
        },
        BadRequest {
            what: "a wrong type deep in a verb's arguments",
            body: Some(
                json!({"verb": "plan", "arguments": {"steps": [{"step": "a", "done": "maybe"}]}})
                    .to_string(),
            ),
            ..BadRequest::post(&actions, 400, Some("arguments.steps[0].done"))
        },
        BadRequest {
            what: "an unknown argument",
            body: status_call(json!({"colour": "red"})),
            ..BadRequest::post(&actions, 400, Some("arguments.colour"))
        },
        BadRequest::get(&format!("{events}?to_seq=0"), 400, Some("to_seq")),
        BadRequest::get(&format!("{events}?from_seq=x"), 400, Some("from_seq")),
        BadRequest::get("/v1/sessions?limit=0", 400, Some("limit")),
        BadRequest::get(
            &format!("/v1/sessions?limit={}", PAGE_ITEMS_MAX + 1),
            400,
            Some("limit"),
        )
        .saying(&format!("between 1 and {PAGE_ITEMS_MAX}")),
        // A parameter that does not parse at all is named too.
        BadRequest::get("/v1/sessions?limit=abc", 400, Some("limit")),
        BadRequest::get(&format!("{session_path}/runs?limit=0"), 400, Some("limit")),
        BadRequest::get(
            &format!("/v1/runs/{}?wait=maybe", uuid::Uuid::now_v7()),
            400,
            Some("wait"),
        ),
        BadRequest {
            what: "a message to a session that does not exist",
            body: Some("{\"text\": \"a\"}".to_owned()),
            ..BadRequest::post(
                &format!("/v1/sessions/{}/messages", uuid::Uuid::now_v7()),
                404,
                None,
            )
        },
        BadRequest {
            what: "a message to a deleted session",
            body: Some("{\"text\": \"a\"}".to_owned()),
            ..BadRequest::post(&format!("/v1/sessions/{}/messages", gone.id), 404, None)
        },
        BadRequest::get("/v1/sessions/nope", 404, None),
    ];
    let mut wrong = Vec::new();
    for case in &cases {
        let body = case.body.clone().unwrap_or_default().into_bytes();
        let fields = client.signature_fields(case.method, &case.path, &body);
        let answer = client
            .send_raw(case.method, &case.path, body, &fields)
            .await
            .expect("answer");
        let value = answer.value();
        let fits = answer.status == case.status
            && value["field"].as_str() == case.field.as_deref()
            && value["error"]
                .as_str()
                .is_some_and(|error| error.contains(&case.saying));
        if !fits {
            wrong.push(format!(
                "{}: {} {}: expected {} {:?} saying {:?}, got {} {}",
                case.what,
                case.method,
                case.path,
                case.status,
                case.field,
                case.saying,
                answer.status,
                String::from_utf8_lossy(&answer.body)
            ));
        }
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
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
