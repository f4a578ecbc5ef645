//! Elicitations through a real `seed serve --mcp` and the reference server
//! `@modelcontextprotocol/server-everything`: its `trigger-elicitation-request` tool asks the
//! person for a form during the call (a name, a boolean, numbers, enums) and returns what it
//! got. The question takes the approvals path: a socket hears of it, the session's approvals
//! list it, and the answer posted at the call's id goes back to the server, whose result the
//! model reads. Content that does not fit is refused with nothing written; a question no one
//! answers in time is cancelled; one pending when the service is killed is closed at its next
//! boot; a question that cannot be tied to one call is refused, saying why.

use std::time::Duration;

use serde_json::json;

use crate::approvals::{approvals, decide, pending_approval};
use crate::common::{Server, new_session};
use crate::mcp::{config_file, install, installed, tool_results};
use seed_server::api::{MessageSessionResponse, RunInfo};
use seed_server::client::{Client, next_update};
use seed_server::ws::Update;

const TOOL: &str = "everything__trigger-elicitation-request";

/// `seed serve` with the reference server, once its elicitation tool is on offer (the server
/// registers it after the handshake, seeing that Seed can answer questions).
async fn everything_service(dir: &std::path::Path, extra_args: &[&str]) -> Server {
    install();
    let config = config_file(
        dir,
        json!({"everything": {
            "command": installed().join("node/node_modules/.bin/mcp-server-everything"),
        }}),
    );
    let mut args = vec!["--mcp", config.to_str().expect("utf-8")];
    args.extend_from_slice(extra_args);
    let server = Server::start(&dir.join("data"), &args);
    let client = server.client();
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let tools: seed_server::api::ToolsResponse = client.get("/v1/tools").await.expect("tools");
        if tools.tools.iter().any(|tool| tool.name == TOOL) {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the elicitation tool was never offered"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    server
}

async fn ask(client: &Client, session: uuid::Uuid) -> MessageSessionResponse {
    client
        .post(
            &format!("/v1/sessions/{session}/messages"),
            &json!({"text": format!("call: {TOOL} {{}}"), "wait": false}),
        )
        .await
        .expect("sent")
}

async fn run_ends(client: &Client, run_id: uuid::Uuid) -> RunInfo {
    client
        .get(&format!("/v1/runs/{run_id}?wait=true"))
        .await
        .expect("the run ends")
}

#[actix_web::test]
async fn an_mcp_servers_question_is_answered_through_the_approvals_path() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = everything_service(dir.path(), &[]).await;
    let client = server.client();
    let session = new_session(&client).await;
    let mut socket = client.subscribe().await.expect("subscribed");
    let sent = ask(&client, session.id).await;

    // The socket hears of the question, with its kind, message and schema.
    let heard = tokio::time::timeout(Duration::from_secs(30), async {
        loop {
            match next_update(&mut socket).await {
                Some(update @ Update::ApprovalPending { .. }) => break update,
                Some(_) => {}
                None => panic!("the socket closed"),
            }
        }
    })
    .await
    .expect("an approval-pending update");
    let Update::ApprovalPending {
        session_id,
        call_id,
        name,
        kind,
        message,
        requested_schema,
        ..
    } = heard
    else {
        unreachable!()
    };
    assert_eq!(session_id.0, session.id);
    assert_eq!(name, TOOL);
    assert_eq!(kind, "elicitation");
    assert_eq!(
        message.as_deref(),
        Some("Please provide inputs for the following fields:")
    );
    let schema = requested_schema.expect("the requested schema");
    assert_eq!(schema["properties"]["integer"]["type"], "integer");
    let pending = pending_approval(&client, session.id).await;
    assert_eq!(pending.kind, "elicitation");
    assert_eq!(pending.call_id, call_id);
    assert_eq!(pending.run_id, sent.run_id);
    assert_eq!(pending.requested_schema, Some(schema));

    // A second call in flight on the same connection asks too: the request does not say which
    // call it serves, so it is refused, saying why, and that call's turn goes on.
    let other = new_session(&client).await;
    let other_sent = ask(&client, other.id).await;
    let other_run = run_ends(&client, other_sent.run_id).await;
    assert_eq!(other_run.status, "succeeded", "{other_run:?}");
    let refused = tool_results(&client, other.id).await;
    assert!(
        refused[0].contains("2 of seed's calls are in flight on this connection"),
        "{refused:?}"
    );
    assert!(approvals(&client, other.id).await.is_empty());

    // Refused, nothing written: content that does not fit, an approval's decision.
    for (bad, field) in [
        (
            json!({"decision": "accept", "content": {"name": "Ada", "integer": "seven"}}),
            "content.integer",
        ),
        (
            json!({"decision": "accept", "content": {"name": "Ada", "integer": 500}}),
            "content.integer",
        ),
        (
            json!({"decision": "accept", "content": {"check": true}}),
            "content.name",
        ),
        (
            json!({"decision": "decline", "content": {"name": "Ada"}}),
            "content",
        ),
        (json!({"decision": "approve"}), "decision"),
    ] {
        let (status, body) = decide(&client, session.id, &call_id, bad.clone()).await;
        assert_eq!(status, 400, "{bad}: {body}");
        assert_eq!(body["field"], field, "{bad}: {body}");
    }
    let still = approvals(&client, session.id).await;
    assert_eq!(still.len(), 1);
    assert_eq!(still[0].status, "pending", "nothing written");

    let (status, body) = decide(
        &client,
        session.id,
        &call_id,
        json!({"decision": "accept", "content": {"name": "Ada", "check": true, "integer": 7}}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["status"], "accepted");
    let (status, body) = decide(&client, session.id, &call_id, json!({"decision": "cancel"})).await;
    assert_eq!(status, 409, "answered already: {body}");
    let run = run_ends(&client, sent.run_id).await;
    assert_eq!(run.status, "succeeded", "{run:?}");
    let results = tool_results(&client, session.id).await;
    assert!(
        results[0].contains("User provided the requested information"),
        "{results:?}"
    );
    assert!(results[0].contains("- Name: Ada"), "{results:?}");
    assert!(results[0].contains("- Favorite Integer: 7"), "{results:?}");

    // Declined: the server hears it, and the turn goes on.
    let declined = new_session(&client).await;
    let sent = ask(&client, declined.id).await;
    let pending = pending_approval(&client, declined.id).await;
    let (status, body) = decide(
        &client,
        declined.id,
        &pending.call_id,
        json!({"decision": "decline"}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["status"], "declined");
    let run = run_ends(&client, sent.run_id).await;
    assert_eq!(run.status, "succeeded", "{run:?}");
    let results = tool_results(&client, declined.id).await;
    assert!(
        results[0].contains("User declined to provide the requested information"),
        "{results:?}"
    );
}

/// `--approval-timeout-secs`: a question no one answers in time is answered "cancel", and the
/// list says why.
#[actix_web::test]
async fn an_mcp_servers_question_no_one_answers_in_time_is_cancelled() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = everything_service(dir.path(), &["--approval-timeout-secs", "1"]).await;
    let client = server.client();
    let session = new_session(&client).await;
    let sent = ask(&client, session.id).await;
    let run = run_ends(&client, sent.run_id).await;
    assert_eq!(run.status, "succeeded", "{run:?}");
    let listed = approvals(&client, session.id).await;
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].status, "timed_out");
    assert_eq!(listed[0].reason.as_deref(), Some("no answer in 1 s"));
    let results = tool_results(&client, session.id).await;
    assert!(
        results[0].contains("User cancelled the elicitation dialog"),
        "{results:?}"
    );
}

/// A question cannot outlive the call that asked: the call's end closes it, and a question
/// pending when the service is killed is closed at its next boot, never left pending.
#[actix_web::test]
async fn an_mcp_servers_question_ends_with_its_call() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut server = everything_service(dir.path(), &[]).await;
    let client = server.client();
    let session = new_session(&client).await;
    ask(&client, session.id).await;
    let pending = pending_approval(&client, session.id).await;
    server.child.kill().expect("SIGKILL");
    server.child.wait().expect("the service is gone");
    drop(server);

    let server = everything_service(dir.path(), &[]).await;
    let client = server.client();
    let listed = approvals(&client, session.id).await;
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(listed[0].call_id, pending.call_id);
    assert_eq!(listed[0].status, "closed");
    assert!(
        listed[0]
            .reason
            .as_deref()
            .is_some_and(|reason| reason.contains("the service stopped before anyone answered")),
        "{listed:?}"
    );
    drop(server);

    // The call's own timeout ends it first.
    let timed = tempfile::tempdir().expect("tempdir");
    install();
    let config = config_file(
        timed.path(),
        json!({"everything": {
            "command": installed().join("node/node_modules/.bin/mcp-server-everything"),
            "seed": {"tools": {"trigger-elicitation-request": {"timeout_ms": 1000}}},
        }}),
    );
    let server = Server::start(
        &timed.path().join("data"),
        &["--mcp", config.to_str().expect("utf-8")],
    );
    let client = server.client();
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let tools: seed_server::api::ToolsResponse = client.get("/v1/tools").await.expect("tools");
        if tools.tools.iter().any(|tool| tool.name == TOOL) {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "no elicitation tool");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let session = new_session(&client).await;
    let sent = ask(&client, session.id).await;
    let run = run_ends(&client, sent.run_id).await;
    assert_eq!(run.status, "succeeded", "{run:?}");
    // The call's end closes its question as the call returns: wait for the row to say so.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let listed = loop {
        let listed = approvals(&client, session.id).await;
        if listed.iter().all(|question| question.status != "pending") {
            break listed;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "still pending: {listed:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(listed[0].status, "closed");
    assert_eq!(
        listed[0].reason.as_deref(),
        Some("the call ended before anyone answered")
    );
}

/// `seed approvals` lists a server's question with the fields it asks for and declines it;
/// `seed chat` puts a question to the person, asks again when the content does not fit, and
/// sends the answer, which the tool's result carries.
#[actix_web::test]
async fn seed_approvals_and_seed_chat_answer_a_servers_question() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = everything_service(dir.path(), &[]).await;
    let client = server.client();
    let data_dir = server.data_dir.clone();
    let cli = move |args: Vec<String>, stdin: &'static str| {
        let data_dir = data_dir.clone();
        std::thread::spawn(move || {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            crate::common::seed_cli(&data_dir, &args, stdin)
        })
        .join()
        .expect("seed ran")
    };

    let session = new_session(&client).await;
    let sent = ask(&client, session.id).await;
    let pending = pending_approval(&client, session.id).await;
    let session_id = session.id.to_string();
    let listed = cli(vec!["approvals".to_owned(), session_id.clone()], "");
    assert!(
        listed.contains(&format!(
            "{}  pending  {TOOL} {{}}  asks: Please provide inputs for the following fields:",
            pending.call_id
        )),
        "{listed}"
    );
    assert!(
        listed.contains("integer (integer)") && listed.contains("name (string, required)"),
        "{listed}"
    );
    let declined = cli(
        vec![
            "approvals".to_owned(),
            session_id.clone(),
            "--decline".to_owned(),
            pending.call_id.clone(),
        ],
        "",
    );
    assert!(
        declined.contains(&format!("{}  declined", pending.call_id)),
        "{declined}"
    );
    let run = run_ends(&client, sent.run_id).await;
    assert_eq!(run.status, "succeeded", "{run:?}");

    let chatted = new_session(&client).await;
    let printed = cli(
        vec!["chat".to_owned(), chatted.id.to_string()],
        "call: everything__trigger-elicitation-request {}\nmaybe\na {\"integer\": 7}\na {\"name\": \"Ada\", \"integer\": 7}\n",
    );
    assert!(
        printed.contains(&format!(
            "{TOOL} asks: Please provide inputs for the following fields:"
        )),
        "{printed}"
    );
    assert!(
        printed.contains("(answer a with the content as a JSON object, d or c)"),
        "{printed}"
    );
    assert!(
        printed.contains("(not answered:") && printed.contains("content.name"),
        "{printed}"
    );
    let results = tool_results(&client, chatted.id).await;
    assert!(results[0].contains("- Name: Ada"), "{results:?}");
    assert!(results[0].contains("- Favorite Integer: 7"), "{results:?}");
}
