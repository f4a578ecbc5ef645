//! Streamable HTTP: tests/mcp/test_server.py served by the Python SDK on a free port.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use seed_mcp::CallOutput;
use serde_json::json;

use crate::servers::{config, install, python, start, test_server};

/// The test server over HTTP; killed (by its handle) when dropped.
struct HttpServer {
    child: std::process::Child,
    port: u16,
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn serve_http(count_file: &std::path::Path) -> HttpServer {
    install();
    let mut child = Command::new(python())
        .arg(test_server())
        .arg("--http")
        .env("SEED_MCP_COUNT_FILE", count_file)
        .stdout(Stdio::piped())
        .spawn()
        .expect("the test server starts");
    let stdout = child.stdout.take().expect("its stdout");
    let mut line = String::new();
    BufReader::new(stdout)
        .read_line(&mut line)
        .expect("its first line");
    let port = line
        .trim()
        .strip_prefix("listening on ")
        .and_then(|port| port.parse().ok())
        .unwrap_or_else(|| panic!("`listening on PORT`, not {line:?}"));
    HttpServer { child, port }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_over_streamable_http() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let server = serve_http(&dir.path().join("count"));
    let servers = start(config(
        "web",
        json!({
            "url": format!("http://127.0.0.1:{}/mcp", server.port),
            "headers": {"X-Seed-Test": "1"},
        }),
    ))
    .await;
    assert_eq!(
        servers.describe()[0].server_name.as_deref(),
        Some("seed-test-server")
    );
    assert_eq!(
        servers.call("web__count", json!({})).await,
        CallOutput::ok("counted 1")
    );
    assert_eq!(
        servers
            .call("web__fail", json!({"message": "over http"}))
            .await,
        CallOutput::error("Error executing tool fail: over http")
    );
    servers.shutdown().await;
}
