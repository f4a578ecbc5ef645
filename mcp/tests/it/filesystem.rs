//! server-filesystem (npm) over stdio on a temp dir: classes from its annotations, a read and
//! a write.

use serde_json::json;

use crate::servers::{config, filesystem, start};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn filesystem_reads_and_writes_a_file() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let root = dir.path().canonicalize().expect("the temp dir's path");
    std::fs::write(root.join("note.txt"), "first line\n").expect("a file to read");
    let servers = start(config(
        "files",
        json!({"command": filesystem(), "args": [root]}),
    ))
    .await;

    let tools = servers.tools();
    let class = |verb_name: &str| {
        tools
            .iter()
            .find(|tool| tool.verb_name == verb_name)
            .unwrap_or_else(|| panic!("a tool {verb_name}"))
            .safe_to_repeat
    };
    // readOnlyHint: true; idempotentHint: true; neither.
    assert!(class("files__read_text_file"));
    assert!(class("files__write_file"));
    assert!(!class("files__move_file"));
    assert!(!class("files__edit_file"));

    let read = servers
        .call(
            "files__read_text_file",
            json!({"path": root.join("note.txt")}),
        )
        .await;
    assert_eq!(read, seed_mcp::CallOutput::ok("first line\n"));

    let written = servers
        .call(
            "files__write_file",
            json!({"path": root.join("new.txt"), "content": "written by seed"}),
        )
        .await;
    assert!(!written.is_error, "{written:?}");
    assert_eq!(
        std::fs::read_to_string(root.join("new.txt")).expect("the written file"),
        "written by seed"
    );

    // Outside the allowed directory: the server's own error, as an error result.
    let refused = servers
        .call("files__read_text_file", json!({"path": "/etc/hostname"}))
        .await;
    assert!(refused.is_error, "{refused:?}");
    servers.shutdown().await;
}
