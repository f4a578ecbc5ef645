//! tests/mcp/test_server.py (the Python SDK) over stdio: the cases the reference servers lack.

use std::time::Duration;

use seed_mcp::{CallOutput, ServerState};
use serde_json::json;

use crate::servers::{python_config, start};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn classes_follow_the_annotations_and_the_configuration() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let servers = start(python_config(
        &dir.path().join("count"),
        json!({"tools": {"exit_now": {"safe_to_repeat": true}, "garbage": {"enabled": false}}}),
    ))
    .await;
    let classes: Vec<(String, bool)> = servers
        .tools()
        .into_iter()
        .map(|tool| (tool.verb_name, tool.safe_to_repeat))
        .collect();
    let expected = [
        ("py__add_tool", false),
        ("py__cancellations", true),
        ("py__count", false),
        ("py__count_keyed", false),
        // Not safe by its annotations, safe by the configuration.
        ("py__exit_now", true),
        ("py__fail", true),
        ("py__find_count", true),
        ("py__hang", true),
        ("py__hangs", true),
        ("py__read_count", true),
    ];
    let expected: Vec<(String, bool)> = expected
        .iter()
        .map(|(name, safe)| (name.to_string(), *safe))
        .collect();
    assert_eq!(classes, expected);
    let info = &servers.describe()[0];
    assert_eq!(info.server_name.as_deref(), Some("seed-test-server"));
    assert_eq!(info.server_version.as_deref(), Some("1.0.0"));
    // garbage is listed but disabled.
    assert_eq!(info.n_tools, 11);
    servers.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_is_error_result_is_an_error() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let servers = start(python_config(&dir.path().join("count"), json!({}))).await;
    let output = servers
        .call("py__fail", json!({"message": "no such order"}))
        .await;
    assert_eq!(
        output,
        CallOutput::error("Error executing tool fail: no such order")
    );
    // Arguments that are not an object are refused before any call.
    let output = servers.call("py__fail", json!(["no"])).await;
    assert_eq!(
        output,
        CallOutput::error("the arguments of py__fail must be a JSON object, not [\"no\"]")
    );
    servers.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_past_its_timeout_is_cancelled_on_the_server_which_stays_usable() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let count_file = dir.path().join("count");
    let servers = start(python_config(
        &count_file,
        json!({"tools": {"hang": {"timeout_ms": 1000}}}),
    ))
    .await;
    let output = servers.call("py__hang", json!({})).await;
    assert_eq!(
        output,
        CallOutput::error(
            "mcp server \"py\": hang did not answer within 1 s; the call was cancelled"
        )
    );
    // The server was told (notifications/cancelled): its handler was cancelled.
    let cancelled = servers
        .call("py__cancellations", json!({"at_least": 1}))
        .await;
    assert_eq!(cancelled, CallOutput::ok("1"));

    // A dropped call is cancelled the same way: dropped once the server runs it.
    let call = tokio::spawn(servers.call("py__hang", json!({})));
    assert_eq!(
        servers.call("py__hangs", json!({"at_least": 2})).await,
        CallOutput::ok("2")
    );
    call.abort();
    assert!(call.await.expect_err("the call was dropped").is_cancelled());
    let cancelled = servers
        .call("py__cancellations", json!({"at_least": 2}))
        .await;
    assert_eq!(cancelled, CallOutput::ok("2"));

    // A stopped call too.
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let call = servers.call_until("py__hang", json!({}), async move {
        let _ = stopped.await;
    });
    let call = tokio::spawn(call);
    // Stopped once the server runs it.
    assert_eq!(
        servers.call("py__hangs", json!({"at_least": 3})).await,
        CallOutput::ok("3")
    );
    stop.send(()).expect("the call is waiting");
    let output = call.await.expect("the call's task");
    assert_eq!(
        output,
        CallOutput::error(
            "the call was stopped before it answered; the server was asked to cancel it"
        )
    );
    assert_eq!(
        servers
            .call("py__cancellations", json!({"at_least": 3}))
            .await,
        CallOutput::ok("3")
    );

    assert_eq!(
        servers.call("py__count", json!({})).await,
        CallOutput::ok("counted 1")
    );
    servers.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_exits_mid_call_fails_the_call_and_is_restarted() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let count_file = dir.path().join("count");
    let servers = start(python_config(&count_file, json!({}))).await;
    assert_eq!(
        servers.call("py__count", json!({})).await,
        CallOutput::ok("counted 1")
    );

    let output = servers.call("py__exit_now", json!({})).await;
    assert_eq!(
        output,
        CallOutput::error(
            "mcp server \"py\" closed the connection during the call to exit_now (it exited or \
             its output broke off); it is being restarted"
        )
    );
    // The next call waits for the restart.
    assert_eq!(
        servers.call("py__count", json!({})).await,
        CallOutput::ok("counted 2")
    );
    assert_eq!(servers.describe()[0].state, ServerState::Connected);
    assert_eq!(
        std::fs::read_to_string(&count_file).expect("the count file"),
        "counted\ncounted\n"
    );
    servers.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbage_on_stdout_is_skipped() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let servers = start(python_config(&dir.path().join("count"), json!({}))).await;
    assert_eq!(
        servers.call("py__garbage", json!({})).await,
        CallOutput::ok("after garbage")
    );
    assert_eq!(
        servers.call("py__read_count", json!({})).await,
        CallOutput::ok("0")
    );
    servers.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tools_list_changed_notification_refreshes_the_tools() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let servers = start(python_config(&dir.path().join("count"), json!({}))).await;
    let mut changes = servers.changes();
    let before = *changes.borrow_and_update();
    assert!(
        !servers
            .tools()
            .iter()
            .any(|tool| tool.verb_name == "py__added")
    );

    assert_eq!(
        servers.call("py__add_tool", json!({})).await,
        CallOutput::ok("added a tool")
    );
    tokio::time::timeout(
        Duration::from_secs(10),
        changes.wait_for(|generation| *generation > before),
    )
    .await
    .expect("the tools change within 10 s")
    .expect("the servers are running");
    let added = servers
        .tools()
        .into_iter()
        .find(|tool| tool.verb_name == "py__added")
        .expect("the added tool is on offer");
    assert!(added.safe_to_repeat);
    assert_eq!(
        servers.call("py__added", json!({})).await,
        CallOutput::ok("added")
    );
    servers.shutdown().await;
}
