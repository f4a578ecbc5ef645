//! The service end to end: a real `seed serve` process, signed requests over loopback HTTP, the
//! subscription WebSocket: answers and their deltas, continuations, a drain and restart, the
//! OpenAPI document, the command line. Refused requests are in `refusals.rs`.

use crate::common;

use crate::common::{Server, new_session, row_counts};
use seed_server::api::{
    EventsResponse, GetSessionResponse, ListSessionsResponse, MessageSessionResponse, RunInfo,
    SessionInfo,
};
use seed_server::client::next_update;
use seed_server::ws::Update;
use serde_json::json;

#[actix_web::test]
async fn a_message_is_answered_over_http_and_streamed_over_the_websocket() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start(dir.path(), &[]);
    let client = server.client();
    let mut subscription = client.subscribe().await.expect("subscribes");
    let session = new_session(&client).await;
    let sent: MessageSessionResponse = client
        .post(
            &format!("/v1/sessions/{}/messages", session.id),
            &json!({"text": "hello, seed", "wait": true}),
        )
        .await
        .expect("sent");
    assert_eq!(sent.status, "succeeded");
    assert_eq!(sent.continued_to_session_id, None);

    // The deltas of the answer, in order, until the run is reported finished.
    let mut streamed = String::new();
    let mut changes = 0;
    loop {
        match next_update(&mut subscription).await.expect("an update") {
            Update::TextDelta {
                session_id, text, ..
            } => {
                assert_eq!(session_id.0, session.id);
                streamed.push_str(&text);
            }
            Update::SessionChange { session_id, .. } => {
                assert_eq!(session_id.0, session.id);
                changes += 1;
            }
            Update::RunFinished { run_id, status, .. } => {
                assert_eq!(run_id.0, sent.run_id);
                assert_eq!(status, "succeeded");
                break;
            }
            Update::AccountChange { .. } => {}
            Update::ToolCall { name, .. } => panic!("this turn calls no tool, yet {name}"),
            Update::ApprovalPending { name, .. } => {
                panic!("this turn calls no tool, yet {name} waits for approval")
            }
            Update::Events { .. } => panic!("a socket that resumes nothing gets no catch-up"),
        }
    }
    assert_eq!(streamed, "You said: hello, seed");
    assert!(changes >= 1);

    let events: EventsResponse = client
        .get(&format!("/v1/sessions/{}/events?from_seq=1", session.id))
        .await
        .expect("events");
    let texts: Vec<(String, String)> = events
        .events
        .iter()
        .map(|event| {
            (
                event.role.clone().unwrap_or_default(),
                event.content["text"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
            )
        })
        .collect();
    assert_eq!(
        texts,
        [
            ("user".to_owned(), "hello, seed".to_owned()),
            ("assistant".to_owned(), "You said: hello, seed".to_owned())
        ]
    );
    // A seq range.
    let second: EventsResponse = client
        .get(&format!(
            "/v1/sessions/{}/events?from_seq=2&to_seq=2",
            session.id
        ))
        .await
        .expect("events");
    assert_eq!(second.events.len(), 1);
    assert_eq!(second.events[0].seq, 2);

    let info: GetSessionResponse = client
        .get(&format!("/v1/sessions/{}", session.id))
        .await
        .expect("session");
    assert_eq!(info.context_window, Some(200_000));
    assert_eq!(info.last_seq, 2);
    assert!(info.session.continued_from.is_none() && info.session.continued_to.is_none());
    let run: RunInfo = client
        .get(&format!("/v1/runs/{}", sent.run_id))
        .await
        .expect("run");
    assert_eq!(run.status, "succeeded");
}

#[actix_web::test]
async fn sigterm_during_a_turn_then_restart_completes_the_run_once() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start(dir.path(), &["--scripted-delay-ms", "300"]);
    let client = server.client();
    let mut subscription = client.subscribe().await.expect("subscribes");
    let session = new_session(&client).await;
    let text = "a long message, so that its echo streams for a few seconds: ".repeat(3);
    let sent: MessageSessionResponse = client
        .post(
            &format!("/v1/sessions/{}/messages", session.id),
            &json!({"text": text}),
        )
        .await
        .expect("sent");
    // Wait for the answer to be streaming, then stop the service.
    loop {
        if let Update::TextDelta { .. } = next_update(&mut subscription).await.expect("update") {
            break;
        }
    }
    let data_dir = server.data_dir.clone();
    // A second service on the same data dir is refused while the first runs.
    let second = std::process::Command::new(common::SEED)
        .arg("serve")
        .arg("--data-dir")
        .arg(&data_dir)
        .args(["--listen", "127.0.0.1:0"])
        .output()
        .expect("runs");
    assert!(!second.status.success());
    assert!(
        String::from_utf8_lossy(&second.stderr).contains("another seed serve is running"),
        "{second:?}"
    );
    let status = server.terminate();
    assert!(
        status.success(),
        "seed serve drained and exited 0: {status:?}"
    );
    {
        let store = common::open_store(&data_dir);
        let counts = row_counts(&store).await;
        assert!(
            counts.contains(&("session_leases", 0)),
            "the drain released its leases: {counts:?}"
        );
        let run = store
            .get_run(seed_events::RunId(sent.run_id))
            .await
            .expect("reads")
            .expect("the run");
        assert_eq!(
            run.status,
            seed_events::RunStatus::Running,
            "cut off, for the next boot"
        );
    }

    let server = Server::start(dir.path(), &[]);
    let client = server.client();
    let run: RunInfo = client
        .get(&format!("/v1/runs/{}?wait=true", sent.run_id))
        .await
        .expect("run");
    assert_eq!(run.status, "succeeded");
    let events: EventsResponse = client
        .get(&format!("/v1/sessions/{}/events", session.id))
        .await
        .expect("events");
    let messages: Vec<(String, String)> = events
        .events
        .iter()
        .filter(|event| event.kind == "message")
        .map(|event| {
            (
                event.role.clone().unwrap_or_default(),
                event.content["text"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
            )
        })
        .collect();
    assert_eq!(
        messages,
        [
            ("user".to_owned(), text.clone()),
            ("assistant".to_owned(), format!("You said: {text}")),
        ],
        "nothing lost, nothing repeated"
    );
}

#[actix_web::test]
async fn the_openapi_document_lists_every_route_the_server_answers() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start(dir.path(), &[]);
    let client = server.client();
    let answer = client
        .send_raw("GET", "/v1/openapi.json", Vec::new(), &[])
        .await
        .expect("answer");
    assert_eq!(answer.status, 200);
    let document = answer.value();
    assert!(
        document["openapi"]
            .as_str()
            .is_some_and(|v| v.starts_with("3."))
    );
    let mut routes: Vec<String> = Vec::new();
    for (path, item) in document["paths"].as_object().expect("paths") {
        for method in item.as_object().expect("path item").keys() {
            if ["get", "post", "put", "delete", "patch"].contains(&method.as_str()) {
                routes.push(format!("{} {path}", method.to_uppercase()));
            }
        }
    }
    routes.sort();
    let mut expected = vec![
        "GET /",
        "GET /s/{session_id}",
        "GET /ui/{file}",
        "DELETE /v1/account",
        "DELETE /v1/sessions/{session_id}",
        "DELETE /v1/sessions/{session_id}/schedules/{schedule_id}",
        "DELETE /v1/tokens/current",
        "GET /healthz",
        "GET /login",
        "GET /metrics",
        "GET /v1/openapi.json",
        "GET /v1/runs/{run_id}",
        "GET /v1/sessions",
        "GET /v1/sessions/{session_id}",
        "GET /v1/sessions/{session_id}/actions",
        "GET /v1/sessions/{session_id}/approvals",
        "GET /v1/sessions/{session_id}/attachments",
        "GET /v1/sessions/{session_id}/attachments/{attachment_id}",
        "GET /v1/sessions/{session_id}/continuation",
        "GET /v1/sessions/{session_id}/events",
        "GET /v1/sessions/{session_id}/lineage",
        "GET /v1/sessions/{session_id}/live",
        "GET /v1/sessions/{session_id}/runs",
        "GET /v1/sessions/{session_id}/schedules",
        "GET /v1/sessions/{session_id}/transcript",
        "GET /v1/subscribe",
        "GET /v1/tools",
        "POST /v1/sessions",
        "POST /v1/sessions/{session_id}/actions",
        "POST /v1/sessions/{session_id}/approvals/{call_id}",
        "POST /v1/sessions/{session_id}/attachments",
        "POST /v1/sessions/{session_id}/continuation",
        "POST /v1/sessions/{session_id}/continuation/preview",
        "POST /v1/sessions/{session_id}/fork",
        "POST /v1/sessions/{session_id}/messages",
        "POST /v1/sessions/{session_id}/messages/{event_id}/retry",
        "POST /v1/sessions/{session_id}/stop",
        "POST /v1/tokens",
        "PUT /v1/sessions/{session_id}/model",
    ];
    expected.sort();
    assert_eq!(routes, expected);
    // Every documented route is answered (a status it documents), none is unknown to the server.
    let id = uuid::Uuid::now_v7();
    for route in &routes {
        let (method, path) = route.split_once(' ').expect("method and path");
        let concrete = path
            .replace("{session_id}", &id.to_string())
            .replace("{run_id}", &id.to_string())
            .replace("{schedule_id}", &id.to_string())
            .replace("{attachment_id}", "none")
            .replace("{call_id}", "none")
            .replace("{event_id}", "1");
        let answer = client
            .request(method, &concrete, None)
            .await
            .expect("answer");
        let documented = &document["paths"][path][method.to_lowercase()]["responses"];
        assert!(
            documented.get(answer.status.to_string()).is_some(),
            "{route} answered {} which it does not document: {:?}",
            answer.status,
            answer.value()
        );
    }
    // The UI's files are documented with the media types they are served with.
    let app_js = client
        .send_raw("GET", "/ui/app.js", Vec::new(), &[])
        .await
        .expect("answer");
    assert_eq!(app_js.status, 200);
    assert!(
        document["paths"]["/ui/{file}"]["get"]["responses"]["200"]["content"]
            .get("text/javascript")
            .is_some()
    );
    // Every operation that reads a body documents the 413 a body over the limit gets and the
    // 408 of one that is too slow: all of those that take a signature.
    for route in &routes {
        let (method, path) = route.split_once(' ').expect("method and path");
        let responses = &document["paths"][path][method.to_lowercase()]["responses"];
        if responses.get("401").is_some() && path != "/v1/subscribe" && path != "/login" {
            assert!(responses.get("413").is_some(), "{route} leaves out 413");
            assert!(responses.get("408").is_some(), "{route} leaves out 408");
        }
        // Any route refuses a request whose Host names another service.
        assert!(responses.get("421").is_some(), "{route} leaves out 421");
    }
    // A method a path does not offer: 405, naming those it does.
    let wrong = client
        .send_raw("POST", "/healthz", Vec::new(), &[])
        .await
        .expect("answer");
    assert_eq!(wrong.status, 405);

    // And the operations all parse as the document says: JSON bodies are objects.
    let healthz = client
        .send_raw("GET", "/healthz", Vec::new(), &[])
        .await
        .expect("answer");
    assert_eq!(healthz.status, 200);
    let metrics = client
        .send_raw("GET", "/metrics", Vec::new(), &[])
        .await
        .expect("answer");
    let text = String::from_utf8_lossy(&metrics.body);
    assert!(text.contains("seed_runs{state=\"queued\"}"), "{text}");
    assert!(text.contains("seed_active_session_actors"), "{text}");
    assert!(
        text.contains("seed_store_commit_seconds_bucket{le=\"+Inf\"}"),
        "{text}"
    );
    assert!(text.contains("seed_queue_depth"), "{text}");
}

#[actix_web::test]
async fn actions_model_stop_tokens_paging_and_the_login_link() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start(dir.path(), &[]);
    let client = server.client();
    let session = new_session(&client).await;

    // The palette's verbs, each with what it does and its arguments' schema.
    let palette: seed_server::api::ActionsResponse = client
        .get(&format!("/v1/sessions/{}/actions", session.id))
        .await
        .expect("actions");
    let names: Vec<&str> = palette
        .verbs
        .iter()
        .map(|verb| verb.name.as_str())
        .collect();
    assert_eq!(names, ["read", "plan", "status", "memory"]);
    let status = &palette.verbs[2];
    assert!(!status.description.is_empty());
    assert!(
        status.parameters["properties"]["title"].is_object(),
        "{status:?}"
    );

    // A verb run by hand: the action and its result go to the log.
    let action: seed_server::api::ActionResponse = client
        .post(
            &format!("/v1/sessions/{}/actions", session.id),
            &json!({"verb": "status", "arguments": {"title": "By hand", "description": "set from the palette"}}),
        )
        .await
        .expect("action");
    assert!(!action.is_error, "{}", action.result);
    let events: EventsResponse = client
        .get(&format!("/v1/sessions/{}/events", session.id))
        .await
        .expect("events");
    assert_eq!(events.events.len(), 1);
    assert_eq!(events.events[0].kind, "action");
    assert_eq!(events.events[0].content["verb"], "status");
    let info: GetSessionResponse = client
        .get(&format!("/v1/sessions/{}", session.id))
        .await
        .expect("session");
    assert_eq!(info.session.title, "By hand");

    // The model.
    let answer = client
        .request(
            "PUT",
            &format!("/v1/sessions/{}/model", session.id),
            Some(&json!({"model": "claude-sonnet-4-5"})),
        )
        .await
        .expect("answer");
    assert_eq!(answer.status, 200);
    let updated: SessionInfo = answer.json().expect("session");
    assert_eq!(updated.model.as_deref(), Some("claude-sonnet-4-5"));
    assert_eq!(updated.reasoning_level, None);

    // The reasoning level: set, kept when left out, cleared with null, refused when unknown.
    let put_model = |body: serde_json::Value| {
        let client = &client;
        let path = format!("/v1/sessions/{}/model", session.id);
        async move {
            client
                .request("PUT", &path, Some(&body))
                .await
                .expect("answer")
        }
    };
    let set: SessionInfo = put_model(json!({"model": null, "reasoning_level": "high"}))
        .await
        .json()
        .expect("session");
    assert_eq!(
        (set.model, set.reasoning_level.as_deref()),
        (None, Some("high"))
    );
    let kept: SessionInfo = put_model(json!({"model": "gpt-5"}))
        .await
        .json()
        .expect("session");
    assert_eq!(kept.reasoning_level.as_deref(), Some("high"));
    let cleared: SessionInfo = put_model(json!({"model": "gpt-5", "reasoning_level": null}))
        .await
        .json()
        .expect("session");
    assert_eq!(cleared.reasoning_level, None);
    // Each field left out is kept: the model when only the level is set, and the other way.
    let level_only: SessionInfo = put_model(json!({"reasoning_level": "low"}))
        .await
        .json()
        .expect("session");
    assert_eq!(
        (
            level_only.model.as_deref(),
            level_only.reasoning_level.as_deref()
        ),
        (Some("gpt-5"), Some("low"))
    );
    let default_model: SessionInfo = put_model(json!({"model": null}))
        .await
        .json()
        .expect("session");
    assert_eq!(
        (
            default_model.model,
            default_model.reasoning_level.as_deref()
        ),
        (None, Some("low"))
    );
    let refused = put_model(json!({"model": "gpt-5", "reasoning_level": "extreme"})).await;
    assert_eq!(refused.status, 400, "{:?}", refused.value());
    assert_eq!(refused.value()["field"], "reasoning_level");

    // Stop with nothing in flight.
    let stopped: seed_server::api::StopResponse = client
        .post(&format!("/v1/sessions/{}/stop", session.id), &json!({}))
        .await
        .expect("stop");
    assert!(!stopped.stopped);

    // Paging: three sessions, two a page.
    new_session(&client).await;
    new_session(&client).await;
    let first: ListSessionsResponse = client.get("/v1/sessions?limit=2").await.expect("page");
    assert_eq!(first.sessions.len(), 2);
    let cursor = first.next_cursor.expect("a next page");
    let second: ListSessionsResponse = client
        .get(&format!("/v1/sessions?limit=2&cursor={cursor}"))
        .await
        .expect("page");
    assert_eq!(second.sessions.len(), 1);
    assert!(second.next_cursor.is_none());

    // A token minted by a signed request works as a bearer; forged ones do not.
    let token: seed_server::api::TokenResponse =
        client.post("/v1/tokens", &json!({})).await.expect("token");
    let bearer = [("Authorization", format!("Bearer {}", token.token))];
    let listed = client
        .send_raw("GET", "/v1/sessions", Vec::new(), &bearer)
        .await
        .expect("answer");
    assert_eq!(listed.status, 200);
    let forged = [("Authorization", "Bearer forged".to_owned())];
    let refused = client
        .send_raw("GET", "/v1/sessions", Vec::new(), &forged)
        .await
        .expect("answer");
    assert_eq!(refused.status, 401);
    let minted_by_bearer = client
        .send_raw("POST", "/v1/tokens", Vec::new(), &bearer)
        .await
        .expect("answer");
    assert_eq!(minted_by_bearer.status, 401);

    // The token opens the subscription where a browser cannot set headers; a forged one not.
    let (_, mut updates) = awc::Client::new()
        .ws(format!("{}/v1/subscribe?token={}", server.url, token.token))
        .connect()
        .await
        .expect("subscribes with a token");
    let forged_ws = awc::Client::new()
        .ws(format!("{}/v1/subscribe?token=forged", server.url))
        .connect()
        .await;
    assert!(forged_ws.is_err(), "a forged token is refused");
    new_session(&client).await;
    match next_update(&mut updates).await.expect("an update") {
        Update::AccountChange { reason, .. } => assert_eq!(reason, "session-created"),
        other => panic!("unexpected {other:?}"),
    }

    // The login link `seed serve` printed works once, and leaves a token in the page.
    let login_path = server
        .login_url
        .strip_prefix(&server.url)
        .expect("a link to this server");
    let login = client
        .send_raw("GET", login_path, Vec::new(), &[])
        .await
        .expect("answer");
    assert_eq!(login.status, 200);
    assert!(String::from_utf8_lossy(&login.body).contains("seed.token"));
    let again = client
        .send_raw("GET", login_path, Vec::new(), &[])
        .await
        .expect("answer");
    assert_eq!(again.status, 401);
}

#[actix_web::test]
async fn a_continuation_is_reported_to_the_sender_and_to_subscribers_of_both_sessions() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start(dir.path(), &[]);
    let client = server.client();
    let mut subscription = client.subscribe().await.expect("subscribes");
    let session = new_session(&client).await;
    let sent: MessageSessionResponse = client
        .post(
            &format!("/v1/sessions/{}/messages", session.id),
            &json!({"text": "continue: Lisbon hotels", "wait": true}),
        )
        .await
        .expect("sent");
    assert_eq!(sent.status, "succeeded");
    let successor = sent
        .continued_to_session_id
        .expect("the answer went to a successor");
    assert_ne!(successor, session.id);

    // Session-change for both sessions.
    let (mut predecessor_changed, mut successor_changed) = (false, false);
    while !(predecessor_changed && successor_changed) {
        if let Update::SessionChange {
            session_id, reason, ..
        } = next_update(&mut subscription).await.expect("an update")
        {
            predecessor_changed |= session_id.0 == session.id && reason == "continued";
            successor_changed |= session_id.0 == successor && reason == "continued-from";
        }
    }

    let predecessor: GetSessionResponse = client
        .get(&format!("/v1/sessions/{}", session.id))
        .await
        .expect("predecessor");
    let link = predecessor.session.continued_to.expect("continued_to");
    assert_eq!(link.session_id, successor);
    assert_eq!(link.title, "Lisbon hotels");
    let next: GetSessionResponse = client
        .get(&format!("/v1/sessions/{successor}"))
        .await
        .expect("successor");
    assert_eq!(
        next.session
            .continued_from
            .expect("continued_from")
            .session_id,
        session.id
    );
    let list: ListSessionsResponse = client.get("/v1/sessions").await.expect("list");
    assert_eq!(list.sessions.len(), 2);

    // The edge with its manifest, for the successor's handoff card; a session that continues
    // nothing has none.
    let edge: seed_server::api::ContinuationInfo = client
        .get(&format!("/v1/sessions/{successor}/continuation"))
        .await
        .expect("continuation");
    assert_eq!(edge.predecessor_session_id, session.id);
    assert_eq!(edge.successor_session_id, successor);
    assert_eq!(edge.reason, "user request");
    assert_eq!(edge.manifest["title"], "Lisbon hotels");
    assert_eq!(
        edge.manifest["handoff"]["purpose"][0],
        "Carry on with: Lisbon hotels"
    );
    let none = client
        .request(
            "GET",
            &format!("/v1/sessions/{}/continuation", session.id),
            None,
        )
        .await
        .expect("answer");
    assert_eq!(none.status, 404);
    assert_eq!(next.model, "scripted");
}

#[actix_web::test]
async fn the_command_line_chats_lists_shows_and_adds_accounts() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start(dir.path(), &[]);
    let out = common::seed_cli(
        dir.path(),
        &["chat"],
        "hello there\ntitle: Demo chat\ncontinue: Next topic\n",
    );
    assert!(out.contains("You said: hello there"), "{out}");
    assert!(
        out.contains("tool call: status("),
        "the status call shows: {out}"
    );
    // In the log's order: the call before the answer of its turn.
    assert!(
        out.find("tool call: status(") < out.find("You said: title: Demo chat"),
        "the call shows before the answer: {out}"
    );
    assert!(out.contains("[context "), "the context meter shows: {out}");
    assert!(
        out.contains("the conversation continued in session"),
        "the continuation is followed with a note: {out}"
    );
    assert_eq!(
        out.matches("You said: continue: Next topic").count(),
        1,
        "the successor answers, once: {out}"
    );

    let sessions = common::seed_cli(dir.path(), &["sessions"], "");
    assert_eq!(sessions.lines().count(), 2, "{sessions}");
    assert!(sessions.contains("Next topic"), "{sessions}");
    assert!(sessions.contains("[continued in"), "{sessions}");
    let predecessor = sessions
        .lines()
        .find(|line| line.contains("[continued in"))
        .and_then(|line| line.split_whitespace().next())
        .expect("the predecessor");
    let shown = common::seed_cli(dir.path(), &["show", predecessor], "");
    assert!(shown.contains("[1] user: hello there"), "{shown}");
    assert!(shown.contains("tool call: continue_session("), "{shown}");

    let key = common::seed_cli(dir.path(), &["key"], "");
    assert!(
        key.contains(&server.local_key().public_key_base64()),
        "{key}"
    );
    let bob_key = dir.path().join("bob.key");
    let created = common::seed_cli(
        dir.path(),
        &["key", "--new", bob_key.to_str().expect("path")],
        "",
    );
    let public_key = created
        .lines()
        .find_map(|line| line.strip_prefix("public key: "))
        .expect("a public key");
    common::seed_cli(dir.path(), &["account", "add", public_key], "");
    let bob_sessions = common::seed_cli(
        dir.path(),
        &["--key", bob_key.to_str().expect("path"), "sessions"],
        "",
    );
    assert!(bob_sessions.contains("no sessions yet"), "{bob_sessions}");

    // A token for a browser, minted by a signed request: it lists Bob's sessions only.
    let token = common::seed_cli(
        dir.path(),
        &["--key", bob_key.to_str().expect("path"), "token"],
        "",
    );
    let client = server.client();
    let listed = client
        .send_raw(
            "GET",
            "/v1/sessions",
            Vec::new(),
            &[("Authorization", format!("Bearer {}", token.trim()))],
        )
        .await
        .expect("answer");
    assert_eq!(listed.status, 200);
    let listed: ListSessionsResponse = listed.json().expect("sessions");
    assert!(listed.sessions.is_empty(), "{:?}", listed.sessions);
}

#[actix_web::test]
async fn turns_beyond_the_runs_in_flight_wait_their_turn_in_the_queue() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start(
        dir.path(),
        &["--interactive-runs-max", "1", "--scripted-delay-ms", "100"],
    );
    let client = server.client();
    let mut subscription = client.subscribe().await.expect("subscribes");
    let (first, second) = (new_session(&client).await, new_session(&client).await);
    let send = |session: &SessionInfo| {
        let client = client.clone();
        let path = format!("/v1/sessions/{}/messages", session.id);
        async move {
            let sent: MessageSessionResponse = client
                .post(
                    &path,
                    &json!({"text": "a message whose echo streams for a while"}),
                )
                .await
                .expect("sent");
            (sent.run_id, sent.status)
        }
    };
    // A free slot and a free session: the message's own transaction claimed its run.
    let (first_run, status) = send(&first).await;
    assert_eq!(status, "running");
    // The first turn is streaming: it holds the one slot.
    loop {
        if let Update::TextDelta { .. } = next_update(&mut subscription).await.expect("update") {
            break;
        }
    }
    let (second_run, status) = send(&second).await;
    assert_eq!(status, "queued");
    let waiting: RunInfo = client
        .get(&format!("/v1/runs/{second_run}"))
        .await
        .expect("run");
    assert_eq!(waiting.status, "queued", "{waiting:?}");
    for run_id in [first_run, second_run] {
        let run: RunInfo = client
            .get(&format!("/v1/runs/{run_id}?wait=true"))
            .await
            .expect("run");
        assert_eq!(run.status, "succeeded", "{run:?}");
    }
}

/// A subscriber that never heard of a session before hears of its deletion too: the
/// notification names the account, since the session's row is gone by then.
#[actix_web::test]
async fn a_deletion_is_reported_to_a_subscriber_that_never_saw_the_session() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start(dir.path(), &[]);
    let client = server.client();
    let session = new_session(&client).await;
    let mut subscription = client.subscribe().await.expect("subscribes");
    let answer = client
        .request("DELETE", &format!("/v1/sessions/{}", session.id), None)
        .await
        .expect("answer");
    assert_eq!(answer.status, 204);
    let heard = actix_web::rt::time::timeout(std::time::Duration::from_secs(30), async {
        loop {
            match next_update(&mut subscription).await {
                Some(Update::SessionChange {
                    session_id, reason, ..
                }) if reason == "deleted" => {
                    return Some(session_id.0);
                }
                Some(_) => {}
                None => return None,
            }
        }
    })
    .await
    .expect("the deletion is reported within 30 s");
    assert_eq!(heard, Some(session.id));
}
