//! Approvals through a real `seed serve --mcp`: the Python test server's `count_keyed` (it
//! appends its key to a counter file, so every run of it is counted) is configured to need a
//! person's approval. A call of it parks its run on a pending approval, which a socket hears
//! of; the service is killed with SIGKILL while it is pending and started again; the approval
//! is still pending, and approved through the API the call runs exactly once. A denied call
//! never runs, and the model reads the reason. Bad decisions are refused with nothing written.

use std::time::Duration;

use serde_json::{Value, json};

use crate::common::new_session;
use crate::mcp::{beside, install, lines_of, process_gone, python_service, tool_results};
use seed_server::api::{ApprovalInfo, ApprovalsResponse, MessageSessionResponse, RunInfo};
use seed_server::client::{Client, next_update};
use seed_server::ws::Update;

/// The `seed` section that has `count_keyed` wait for approval.
fn needs_approval() -> Value {
    json!({"tools": {"count_keyed": {"needs_approval": true}}})
}

/// The session's approvals and questions, pending and decided.
pub(crate) async fn approvals(client: &Client, session: uuid::Uuid) -> Vec<ApprovalInfo> {
    let listed: ApprovalsResponse = client
        .get(&format!("/v1/sessions/{session}/approvals"))
        .await
        .expect("the approvals");
    listed.approvals
}

/// Waits (up to 30 s) until the session has a pending approval (or question), and returns it.
pub(crate) async fn pending_approval(client: &Client, session: uuid::Uuid) -> ApprovalInfo {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(pending) = approvals(client, session)
            .await
            .into_iter()
            .find(|approval| approval.status == "pending")
        {
            return pending;
        }
        assert!(std::time::Instant::now() < deadline, "nothing came pending");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Decides (or answers) the call's approval with `body`: the status and the JSON answer.
pub(crate) async fn decide(
    client: &Client,
    session: uuid::Uuid,
    call_id: &str,
    body: Value,
) -> (u16, Value) {
    let answer = client
        .request(
            "POST",
            &format!("/v1/sessions/{session}/approvals/{call_id}"),
            Some(&body),
        )
        .await
        .expect("answered");
    let value = serde_json::from_slice(&answer.body).unwrap_or(Value::Null);
    (answer.status, value)
}

#[actix_web::test]
async fn an_approval_pending_over_a_kill_9_runs_the_call_exactly_once() {
    install();
    let dir = tempfile::tempdir().expect("tempdir");
    let count_file = dir.path().join("count");
    let started = beside(&count_file, ".started");
    let mut server = python_service(dir.path(), &count_file, &needs_approval(), None);
    let client = server.client();
    let session = new_session(&client).await;
    let mut socket = client.subscribe().await.expect("subscribed");
    let sent: MessageSessionResponse = client
        .post(
            &format!("/v1/sessions/{}/messages", session.id),
            &json!({"text": "call: py__count_keyed {\"key\": \"k1\"}", "wait": false}),
        )
        .await
        .expect("sent");

    // The socket hears of the pending approval.
    let heard = tokio::time::timeout(Duration::from_secs(30), async {
        loop {
            match next_update(&mut socket).await {
                Some(Update::ApprovalPending {
                    session_id,
                    call_id,
                    name,
                    arguments,
                    ..
                }) => break (session_id, call_id, name, arguments),
                Some(_) => {}
                None => panic!("the socket closed"),
            }
        }
    })
    .await
    .expect("an approval-pending update");
    assert_eq!(heard.0.0, session.id);
    assert_eq!(heard.2, "py__count_keyed");
    assert_eq!(heard.3, json!({"key": "k1"}));
    let pending = pending_approval(&client, session.id).await;
    assert_eq!(pending.call_id, heard.1);
    assert_eq!(pending.run_id, sent.run_id);
    assert!(
        lines_of(&started).is_empty(),
        "nothing ran before a decision"
    );

    server.child.kill().expect("SIGKILL");
    server.child.wait().expect("the service is gone");
    drop(server);
    for pid in lines_of(&beside(&count_file, ".pids")) {
        crate::mcp::wait_until("the orphaned MCP server is gone", || process_gone(&pid));
    }

    let server = python_service(dir.path(), &count_file, &needs_approval(), None);
    let client = server.client();
    let still = pending_approval(&client, session.id).await;
    assert_eq!(
        still.call_id, pending.call_id,
        "still pending after the restart"
    );
    let run: RunInfo = client
        .get(&format!("/v1/runs/{}", sent.run_id))
        .await
        .expect("the run");
    assert_eq!(run.status, "parked", "{run:?}");

    // Refused, nothing written: an unknown call, a decision that is not one, a reason with an
    // approval, arguments that are not an object.
    let call_id = pending.call_id.as_str();
    let (status, body) = decide(
        &client,
        session.id,
        "no-such-call",
        json!({"decision": "approve"}),
    )
    .await;
    assert_eq!(status, 404, "{body}");
    for (bad, field) in [
        (json!({"decision": "maybe"}), "decision"),
        (json!({"decision": "approve", "reason": "fine"}), "reason"),
        (
            json!({"decision": "approve", "arguments": "k2"}),
            "arguments",
        ),
    ] {
        let (status, body) = decide(&client, session.id, call_id, bad.clone()).await;
        assert_eq!(status, 400, "{bad}: {body}");
        assert_eq!(body["field"], field, "{bad}: {body}");
    }
    let listed = approvals(&client, session.id).await;
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].status, "pending", "nothing written");

    let (status, body) = decide(&client, session.id, call_id, json!({"decision": "approve"})).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["status"], "approved");
    assert_eq!(body["decided_arguments"], json!({"key": "k1"}));
    let (status, body) = decide(&client, session.id, call_id, json!({"decision": "deny"})).await;
    assert_eq!(status, 409, "decided already: {body}");

    let run: RunInfo = client
        .get(&format!("/v1/runs/{}?wait=true", sent.run_id))
        .await
        .expect("the run ends");
    assert_eq!(run.status, "succeeded", "{run:?}");
    assert_eq!(lines_of(&started), ["count_keyed"], "it ran exactly once");
    assert_eq!(lines_of(&count_file), ["k1"]);
    assert_eq!(tool_results(&client, session.id).await, ["counted k1"]);

    // Denied: the call never runs, and the model reads why.
    let denied_session = new_session(&client).await;
    let sent: MessageSessionResponse = client
        .post(
            &format!("/v1/sessions/{}/messages", denied_session.id),
            &json!({"text": "call: py__count_keyed {\"key\": \"k2\"}", "wait": false}),
        )
        .await
        .expect("sent");
    let pending = pending_approval(&client, denied_session.id).await;
    let (status, body) = decide(
        &client,
        denied_session.id,
        &pending.call_id,
        json!({"decision": "deny", "reason": "not today"}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["status"], "denied");
    let run: RunInfo = client
        .get(&format!("/v1/runs/{}?wait=true", sent.run_id))
        .await
        .expect("the run ends");
    assert_eq!(run.status, "succeeded", "{run:?}");
    assert_eq!(
        lines_of(&started),
        ["count_keyed"],
        "the denied call never ran"
    );
    assert_eq!(lines_of(&count_file), ["k1"]);
    let results = tool_results(&client, denied_session.id).await;
    assert_eq!(results.len(), 1, "{results:?}");
    assert!(results[0].contains("not today"), "{results:?}");
}

/// `--approval-timeout-secs`: a call no one decides in time is denied with "no answer in N s",
/// and never runs.
#[actix_web::test]
async fn a_call_no_one_decides_in_time_is_denied_by_the_service() {
    install();
    let dir = tempfile::tempdir().expect("tempdir");
    let count_file = dir.path().join("count");
    let mut py = crate::mcp::python_server(&count_file);
    py["seed"] = needs_approval();
    let config = crate::mcp::config_file(dir.path(), json!({"py": py}));
    let server = crate::common::Server::start(
        &dir.path().join("data"),
        &[
            "--mcp",
            config.to_str().expect("utf-8"),
            "--approval-timeout-secs",
            "1",
        ],
    );
    let client = server.client();
    let session = new_session(&client).await;
    let sent: MessageSessionResponse = client
        .post(
            &format!("/v1/sessions/{}/messages", session.id),
            &json!({"text": "call: py__count_keyed {\"key\": \"k1\"}", "wait": false}),
        )
        .await
        .expect("sent");
    let run: RunInfo = client
        .get(&format!("/v1/runs/{}?wait=true", sent.run_id))
        .await
        .expect("the run ends");
    assert_eq!(run.status, "succeeded", "{run:?}");
    assert!(lines_of(&count_file).is_empty(), "it never ran");
    let listed = approvals(&client, session.id).await;
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].status, "timed_out");
    assert_eq!(listed[0].reason.as_deref(), Some("no answer in 1 s"));
    let results = tool_results(&client, session.id).await;
    assert!(results[0].contains("no answer in 1 s"), "{results:?}");
}

/// `seed approvals`: lists a session's pending call, approves it with edited arguments, and
/// lists it decided.
#[actix_web::test]
async fn seed_approvals_lists_and_decides_a_call() {
    install();
    let dir = tempfile::tempdir().expect("tempdir");
    let count_file = dir.path().join("count");
    let server = python_service(dir.path(), &count_file, &needs_approval(), None);
    let client = server.client();
    let session = new_session(&client).await;
    let sent: MessageSessionResponse = client
        .post(
            &format!("/v1/sessions/{}/messages", session.id),
            &json!({"text": "call: py__count_keyed {\"key\": \"k1\"}", "wait": false}),
        )
        .await
        .expect("sent");
    let pending = pending_approval(&client, session.id).await;
    let data_dir = server.data_dir.clone();
    let session_id = session.id.to_string();
    let cli = |args: Vec<String>| {
        let data_dir = data_dir.clone();
        std::thread::spawn(move || {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            crate::common::seed_cli(&data_dir, &args, "")
        })
        .join()
        .expect("seed ran")
    };
    let listed = cli(vec!["approvals".to_owned(), session_id.clone()]);
    assert!(
        listed.contains(&format!("{}  pending  py__count_keyed", pending.call_id)),
        "{listed}"
    );
    let decided = cli(vec![
        "approvals".to_owned(),
        session_id.clone(),
        "--approve".to_owned(),
        pending.call_id.clone(),
        "--arguments".to_owned(),
        r#"{"key": "k9"}"#.to_owned(),
    ]);
    assert!(decided.contains("approved"), "{decided}");
    let run: RunInfo = client
        .get(&format!("/v1/runs/{}?wait=true", sent.run_id))
        .await
        .expect("the run ends");
    assert_eq!(run.status, "succeeded", "{run:?}");
    assert_eq!(lines_of(&count_file), ["k9"], "it ran once, as edited");
    let listed = cli(vec!["approvals".to_owned(), session_id]);
    assert!(
        listed.contains(&format!("{}  approved", pending.call_id)),
        "{listed}"
    );
}

/// `seed chat` asks about a call that waits for approval: an answer that is none is asked
/// again, and a denial with a reason is sent; the call never runs.
#[actix_web::test]
async fn seed_chat_asks_about_a_call_waiting_for_approval() {
    install();
    let dir = tempfile::tempdir().expect("tempdir");
    let count_file = dir.path().join("count");
    let server = python_service(dir.path(), &count_file, &needs_approval(), None);
    let client = server.client();
    let session = new_session(&client).await;
    let data_dir = server.data_dir.clone();
    let session_id = session.id.to_string();
    let printed = std::thread::spawn(move || {
        crate::common::seed_cli(
            &data_dir,
            &["chat", &session_id],
            "call: py__count_keyed {\"key\": \"k1\"}\nmaybe\nn not today\n",
        )
    })
    .join()
    .expect("seed chat ran");
    assert!(
        printed.contains("py__count_keyed {\"key\":\"k1\"} waits for your approval"),
        "{printed}"
    );
    assert!(printed.contains("(answer y, n with a reason"), "{printed}");
    assert!(
        lines_of(&count_file).is_empty(),
        "the denied call never ran"
    );
    let listed = approvals(&client, session.id).await;
    assert_eq!(listed[0].status, "denied");
    assert_eq!(listed[0].reason.as_deref(), Some("not today"));
}

/// `--approval-required status`: a built-in verb the configuration names waits for approval
/// too; a name no verb has refuses the start, saying which.
#[actix_web::test]
async fn a_verb_the_configuration_names_waits_for_approval() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server =
        crate::common::Server::start(&dir.path().join("data"), &["--approval-required", "status"]);
    let client = server.client();
    let session = new_session(&client).await;
    let sent: MessageSessionResponse = client
        .post(
            &format!("/v1/sessions/{}/messages", session.id),
            &json!({"text": "title: Trip plans", "wait": false}),
        )
        .await
        .expect("sent");
    let pending = pending_approval(&client, session.id).await;
    assert_eq!(pending.name, "status");
    let (status, body) = decide(
        &client,
        session.id,
        &pending.call_id,
        json!({"decision": "approve"}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let run: RunInfo = client
        .get(&format!("/v1/runs/{}?wait=true", sent.run_id))
        .await
        .expect("the run ends");
    assert_eq!(run.status, "succeeded", "{run:?}");
    let info: seed_server::api::GetSessionResponse = client
        .get(&format!("/v1/sessions/{}", session.id))
        .await
        .expect("the session");
    assert_eq!(info.session.title, "Trip plans", "the approved call ran");

    let refused = std::process::Command::new(crate::common::SEED)
        .arg("serve")
        .arg("--data-dir")
        .arg(dir.path().join("other"))
        .args([
            "--listen",
            "127.0.0.1:0",
            "--approval-required",
            "no_such_verb",
        ])
        .env("SEED_PROVIDER", "scripted")
        .output()
        .expect("seed serve runs");
    assert!(!refused.status.success());
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(
        said.contains("\"no_such_verb\", which no verb has"),
        "{said}"
    );
}
