//! The servers the tests run: where they are installed, installing them when missing, and
//! configurations naming them.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Once;

use seed_mcp::{McpConfig, McpServers};
use serde_json::json;

/// The workspace's root.
pub fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("mcp/ has a parent")
        .to_path_buf()
}

fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace().join("target"))
}

fn installed() -> PathBuf {
    target_dir().join("mcp-servers")
}

/// Runs scripts/mcp-servers.sh when a server is missing, once per process and under a file
/// lock across the test processes (nextest runs each test in its own).
pub fn install() {
    static INSTALL: Once = Once::new();
    INSTALL.call_once(|| {
        init_logs();
        let bin = installed().join("node/node_modules/.bin");
        let present = bin.join("mcp-server-everything").exists()
            && bin.join("mcp-server-filesystem").exists()
            && python().exists();
        if present {
            return;
        }
        std::fs::create_dir_all(target_dir()).expect("the target dir");
        let status = Command::new("flock")
            .arg(target_dir().join("mcp-servers.lock"))
            .arg(workspace().join("scripts/mcp-servers.sh"))
            .env("CARGO_TARGET_DIR", target_dir())
            .status()
            .expect("flock runs scripts/mcp-servers.sh");
        assert!(status.success(), "scripts/mcp-servers.sh failed: {status}");
    });
}

fn init_logs() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "seed_mcp=debug".into()),
        )
        .with_test_writer()
        .try_init();
}

pub fn everything() -> PathBuf {
    installed().join("node/node_modules/.bin/mcp-server-everything")
}

pub fn filesystem() -> PathBuf {
    installed().join("node/node_modules/.bin/mcp-server-filesystem")
}

pub fn python() -> PathBuf {
    installed().join("venv/bin/python")
}

pub fn test_server() -> PathBuf {
    workspace().join("tests/mcp/test_server.py")
}

/// A configuration with one server `name` of the given JSON.
pub fn config(name: &str, server: serde_json::Value) -> McpConfig {
    let json = json!({"mcpServers": {name: server}}).to_string();
    McpConfig::parse(&json).expect("a valid configuration")
}

/// The Python test server over stdio as `py`, counting into `count_file`, with `seed`.
pub fn python_config(count_file: &Path, seed: serde_json::Value) -> McpConfig {
    config(
        "py",
        json!({
            "command": python(),
            "args": [test_server()],
            "env": {"SEED_MCP_COUNT_FILE": count_file},
            "seed": seed,
        }),
    )
}

pub async fn start(config: McpConfig) -> McpServers {
    install();
    McpServers::start(config).await.expect("the servers start")
}
