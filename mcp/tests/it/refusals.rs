//! Servers that cannot start refuse the start, naming the server.

use serde_json::json;

use crate::servers::{config, install, python};

async fn refusal(config: seed_mcp::McpConfig) -> String {
    install();
    seed_mcp::McpServers::start(config)
        .await
        .expect_err("the start is refused")
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_command_is_refused_with_its_name() {
    let error = refusal(config(
        "ghost",
        json!({"command": "/nonexistent/seed-no-such-server"}),
    ))
    .await;
    assert_eq!(
        error,
        "mcp server \"ghost\" did not start: cannot run \"/nonexistent/seed-no-such-server\": \
         No such file or directory (os error 2)"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_exits_at_once_is_refused_with_its_stderr() {
    let error = refusal(config(
        "broken",
        json!({
            "command": python(),
            "args": ["-c", "import sys; sys.stderr.write('bad token\\n'); sys.exit(2)"],
        }),
    ))
    .await;
    assert!(
        error.starts_with("mcp server \"broken\" did not start: initialize failed: "),
        "{error}"
    );
    assert!(
        error.ends_with("; its stderr ended with: bad token"),
        "{error}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_connection_is_refused_with_the_name() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
    let port = listener.local_addr().expect("its address").port();
    drop(listener);
    let error = refusal(config(
        "web",
        json!({"url": format!("http://127.0.0.1:{port}/mcp")}),
    ))
    .await;
    assert!(
        error.starts_with("mcp server \"web\" did not start: initialize failed: "),
        "{error}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_failed_server_is_named() {
    let config = seed_mcp::McpConfig::parse(
        r#"{"mcpServers": {
            "one": {"command": "/nonexistent/one"},
            "two": {"command": "/nonexistent/two"},
            "off": {"command": "/nonexistent/off", "seed": {"enabled": false}}}}"#,
    )
    .expect("parses");
    let error = refusal(config).await;
    assert_eq!(
        error,
        "mcp server \"one\" did not start: cannot run \"/nonexistent/one\": No such file or \
         directory (os error 2); mcp server \"two\" did not start: cannot run \
         \"/nonexistent/two\": No such file or directory (os error 2)"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_answers_garbage_is_refused() {
    let error = refusal(config(
        "garbled",
        json!({"command": python(), "args": ["-c", "print('this is not JSON-RPC')"]}),
    ))
    .await;
    assert!(
        error.starts_with("mcp server \"garbled\" did not start: initialize failed: "),
        "{error}"
    );
}
