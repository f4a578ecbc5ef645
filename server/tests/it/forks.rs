//! Forks and lineage over HTTP: `POST /v1/sessions/{id}/fork` makes a session whose log is the
//! session's up to the seq (a bad seq is a 400 naming `seq`, with nothing written; a replayed
//! request writes nothing), and `GET /v1/sessions/{id}/lineage` answers the typed graph of a
//! session with a continuation, a fork and a delegated child.

use crate::common::{Server, new_session, row_counts};
use seed_server::api::{
    EventsResponse, ForkSessionResponse, GetSessionResponse, LineageKindName, LineageResponse,
    ListSessionsResponse, MessageSessionResponse,
};
use serde_json::json;
use uuid::Uuid;

async fn say(
    client: &seed_server::client::Client,
    session: Uuid,
    text: &str,
) -> MessageSessionResponse {
    client
        .post(
            &format!("/v1/sessions/{session}/messages"),
            &json!({"text": text, "wait": true}),
        )
        .await
        .expect("sent")
}

async fn events(client: &seed_server::client::Client, session: Uuid) -> EventsResponse {
    client
        .get(&format!("/v1/sessions/{session}/events"))
        .await
        .expect("events")
}

#[actix_web::test]
async fn a_fork_has_the_sessions_log_up_to_its_seq_and_the_lineage_is_typed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start(dir.path(), &[]);
    let client = server.client();
    let session = new_session(&client).await.id;
    // seq 1 and 2: an exchange; then a delegated child; then a continuation.
    say(&client, session, "hello").await;
    say(
        &client,
        session,
        "call: delegate {\"task\": \"look it up\"}",
    )
    .await;
    let continued = say(&client, session, "continue: Lisbon hotels").await;
    let successor = continued
        .continued_to_session_id
        .expect("the answer went to a successor");
    let list: ListSessionsResponse = client.get("/v1/sessions").await.expect("list");
    let child = list
        .sessions
        .iter()
        .find(|info| info.parent_session_id == Some(session))
        .expect("the delegated child")
        .id;

    // A delegated child's session is the agent's work for its parent: not forked.
    let refused = client
        .request(
            "POST",
            &format!("/v1/sessions/{child}/fork"),
            Some(&json!({"seq": 1})),
        )
        .await
        .expect("answer");
    assert_eq!(refused.status, 409, "{:?}", refused.value());

    let forked: ForkSessionResponse = client
        .post(
            &format!("/v1/sessions/{session}/fork"),
            &json!({"seq": 2, "title": "The other way"}),
        )
        .await
        .expect("forked");
    let fork = forked.session.id;
    assert_eq!(forked.forked_from_session_id, session);
    assert_eq!(forked.seq, 2);
    assert_eq!(forked.session.title, "The other way");

    // The fork's log: the session's first two events, word for word.
    let original = events(&client, session).await.events;
    let copied = events(&client, fork).await.events;
    assert_eq!(copied.len(), 2);
    for (copy, event) in copied.iter().zip(&original) {
        assert_eq!(
            (copy.seq, &copy.event_type, &copy.role, &copy.content),
            (event.seq, &event.event_type, &event.role, &event.content)
        );
    }
    // Its edge, with a manifest that says it is a fork at seq 2.
    let edge: seed_server::api::ContinuationInfo = client
        .get(&format!("/v1/sessions/{fork}/continuation"))
        .await
        .expect("the fork's edge");
    assert_eq!(edge.continuation_id, forked.continuation_id);
    assert_eq!(edge.predecessor_session_id, session);
    assert_eq!(edge.manifest["fork"]["seq"], 2);
    assert_eq!(edge.initiating_event_id, original[1].id);
    // The session's "continued to" is its continuation still, not its fork; the fork
    // continues nothing.
    let got: GetSessionResponse = client
        .get(&format!("/v1/sessions/{session}"))
        .await
        .expect("session");
    assert_eq!(
        got.session.continued_to.expect("continued_to").session_id,
        successor
    );
    assert!(got.session.forked_from.is_none());
    let got: GetSessionResponse = client
        .get(&format!("/v1/sessions/{fork}"))
        .await
        .expect("fork");
    assert!(got.session.continued_from.is_none() && got.session.continued_to.is_none());
    let link = got.session.forked_from.expect("forked_from");
    assert_eq!(
        (link.session_id, link.continuation_id, link.reason.as_str()),
        (session, forked.continuation_id, "branched from seq 2")
    );

    // The lineage, from the fork: the four sessions and three typed edges.
    let lineage: LineageResponse = client
        .get(&format!("/v1/sessions/{fork}/lineage"))
        .await
        .expect("lineage");
    assert_eq!(lineage.session_id, fork);
    let mut nodes: Vec<Uuid> = lineage.nodes.iter().map(|node| node.session_id).collect();
    nodes.sort();
    let mut expected = vec![session, child, successor, fork];
    expected.sort();
    assert_eq!(nodes, expected);
    let mut edges: Vec<(Uuid, Uuid, LineageKindName)> = lineage
        .edges
        .iter()
        .map(|edge| (edge.from, edge.to, edge.kind))
        .collect();
    edges.sort_by_key(|edge| edge.1);
    let mut expected = vec![
        (session, child, LineageKindName::Delegation),
        (session, successor, LineageKindName::Continuation),
        (session, fork, LineageKindName::Fork),
    ];
    expected.sort_by_key(|edge| edge.1);
    assert_eq!(edges, expected);
    assert!(!lineage.truncated);
    let titled = lineage
        .nodes
        .iter()
        .find(|node| node.session_id == fork)
        .expect("the fork's node");
    assert_eq!(titled.title, "The other way");
    // The same graph from the session, seen as JSON: kinds are words.
    let raw = client
        .request("GET", &format!("/v1/sessions/{session}/lineage"), None)
        .await
        .expect("answer")
        .value();
    let kinds: Vec<&str> = raw["edges"]
        .as_array()
        .expect("edges")
        .iter()
        .filter_map(|edge| edge["kind"].as_str())
        .collect();
    assert!(
        kinds.contains(&"fork") && kinds.contains(&"continuation") && kinds.contains(&"delegation")
    );

    // The fork answers in its own right, from its own conversation.
    let answered = say(&client, fork, "and now?").await;
    assert_eq!(answered.status, "succeeded");

    // A fork of the successor, at its copied message: its log starts with the successor's
    // projection, which cites the successor's predecessor, not the fork's; fsck takes a fork's
    // first event for no projection of its own, and finds the database clean.
    let forked: ForkSessionResponse = client
        .post(
            &format!("/v1/sessions/{successor}/fork"),
            &json!({"seq": 2}),
        )
        .await
        .expect("the successor forked");
    // Its copy of the projection names the successor whose edge holds the handoff.
    let copied = events(&client, forked.session.id).await.events;
    assert_eq!(
        copied[0].meta["continuation"]["successor_session_id"],
        successor.to_string()
    );
    assert_eq!(
        say(&client, forked.session.id, "a ferry instead")
            .await
            .status,
        "succeeded"
    );
    crate::fsck::assert_clean(dir.path());
}

#[actix_web::test]
async fn a_bad_seq_is_a_400_naming_it_and_writes_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start(dir.path(), &[]);
    let client = server.client();
    let store = server.store();
    let session = new_session(&client).await.id;
    say(&client, session, "hello").await;
    // seq 3, a message asking for a call; 4 and 5, the call and its result; 6, the answer.
    say(
        &client,
        session,
        "call: status {\"description\": \"checking\"}",
    )
    .await;
    let log = events(&client, session).await.events;
    let kinds: Vec<&str> = log.iter().map(|event| event.event_type.as_str()).collect();
    assert_eq!(
        kinds,
        [
            "message",
            "message",
            "message",
            "tool_call",
            "tool_result",
            "message"
        ]
    );
    let before = row_counts(&store).await;
    let path = format!("/v1/sessions/{session}/fork");
    for (body, saying) in [
        (json!({"seq": 0}), "not in the session"),
        (json!({"seq": 7}), "not in the session"),
        (json!({"seq": -3}), "not in the session"),
        (json!({"seq": 4}), "tool_call event"),
        (json!({"seq": 5}), "tool_result event"),
    ] {
        let answer = client
            .request("POST", &path, Some(&body))
            .await
            .expect("answer");
        assert_eq!(answer.status, 400, "{body}: {:?}", answer.value());
        assert_eq!(answer.value()["field"], "seq", "{body}");
        let error = answer.value()["error"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        assert!(error.contains(saying), "{body}: {error}");
    }
    for body in [
        json!({}),
        json!({"seq": "2"}),
        json!({"seq": 2, "extra": 1}),
    ] {
        let answer = client
            .request("POST", &path, Some(&body))
            .await
            .expect("answer");
        assert_eq!(answer.status, 400, "{body}");
    }
    let other = client
        .request(
            "POST",
            &format!("/v1/sessions/{}/fork", Uuid::now_v7()),
            Some(&json!({"seq": 2})),
        )
        .await
        .expect("answer");
    assert_eq!(other.status, 404);
    assert_eq!(
        row_counts(&store).await,
        before,
        "a refused fork writes nothing"
    );

    // A good seq forks once; the same signed request again is refused and writes nothing.
    let body = json!({"seq": 6}).to_string().into_bytes();
    let fields = client.signature_fields("POST", &path, &body);
    let first = client
        .send_raw("POST", &path, body.clone(), &fields)
        .await
        .expect("answer");
    assert_eq!(first.status, 201, "{:?}", first.value());
    let after = row_counts(&store).await;
    let again = client
        .send_raw("POST", &path, body, &fields)
        .await
        .expect("answer");
    assert_eq!(again.status, 401);
    assert_eq!(row_counts(&store).await, after);
}

#[actix_web::test]
async fn seed_fork_branches_a_session_from_the_command_line() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start(dir.path(), &[]);
    let client = server.client();
    let session = new_session(&client).await.id;
    say(&client, session, "hello").await;
    say(&client, session, "and more").await;
    let data_dir = dir.path().to_owned();
    let session_arg = session.to_string();
    let out = actix_web::rt::task::spawn_blocking(move || {
        crate::common::seed_cli(
            &data_dir,
            &["fork", &session_arg, "2", "--title", "From the shell"],
            "",
        )
    })
    .await
    .expect("seed fork ran");
    let fork: Uuid = out.trim().parse().expect("seed fork prints the fork's id");
    let got: GetSessionResponse = client
        .get(&format!("/v1/sessions/{fork}"))
        .await
        .expect("the fork");
    assert_eq!(got.session.title, "From the shell");
    assert_eq!(got.last_seq, 2);
}

#[actix_web::test]
async fn fsck_finds_a_fork_that_is_not_its_predecessors_copy() {
    if !crate::common::sqlite_only("planting damage in the database file") {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start(dir.path(), &[]);
    let client = server.client();
    let session = new_session(&client).await.id;
    say(&client, session, "lighthouses").await;
    let forked: ForkSessionResponse = client
        .post(&format!("/v1/sessions/{session}/fork"), &json!({"seq": 2}))
        .await
        .expect("forked");
    let fork = forked.session.id;
    assert!(server.terminate().success());
    crate::fsck::assert_clean(dir.path());

    let copy = crate::fsck::copy_of(dir.path());
    crate::fsck::plant(
        copy.path(),
        &format!(
            "UPDATE session_events SET content = replace(content, 'lighthouses', 'lightHouses') \
             WHERE session_key = (SELECT key FROM sessions WHERE id = '{fork}') AND seq = 1"
        ),
    );
    let output = crate::fsck::fsck(copy.path());
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(1), "{stdout}");
    assert!(
        stdout.lines().any(|line| line
            == format!("session {fork}: its seq 1 is not a copy of its predecessor's seq 1")),
        "{stdout}"
    );
}
