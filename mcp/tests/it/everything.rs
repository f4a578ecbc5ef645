//! server-everything (npm) over stdio: its tools listed, echo and an image called.

use serde_json::json;

use crate::servers::{config, everything, start};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn everything_lists_its_tools_and_echoes() {
    let servers = start(config("everything", json!({"command": everything()}))).await;

    let info = &servers.describe()[0];
    assert_eq!(info.name, "everything");
    assert_eq!(info.state, seed_mcp::ServerState::Connected);
    assert!(
        info.server_name.is_some() && info.server_version.is_some(),
        "{info:?}"
    );
    let tools = servers.tools();
    assert_eq!(info.n_tools, tools.len());
    let echo = tools
        .iter()
        .find(|tool| tool.verb_name == "everything__echo")
        .expect("an echo tool");
    assert_eq!(echo.tool, "echo");
    assert_eq!(echo.description, "Echoes back the input string");
    assert_eq!(echo.input_schema["properties"]["message"]["type"], "string");
    // Names with a hyphen stay: get-tiny-image fits as it is.
    assert!(
        tools
            .iter()
            .any(|tool| tool.verb_name == "everything__get-tiny-image")
    );

    let output = servers
        .call("everything__echo", json!({"message": "hello from seed"}))
        .await;
    assert_eq!(output, seed_mcp::CallOutput::ok("Echo: hello from seed"));

    let image = servers.call("everything__get-tiny-image", json!({})).await;
    assert!(!image.is_error, "{image:?}");
    assert!(
        image.text.contains("[image/png, ") && image.text.contains(" bytes: attached]"),
        "{}",
        image.text
    );
    assert_eq!(image.images.len(), 1, "{image:?}");
    assert!(image.images[0].bytes.starts_with(b"\x89PNG"), "{image:?}");

    let unknown = servers.call("everything__nope", json!({})).await;
    assert_eq!(
        unknown,
        seed_mcp::CallOutput::error("no MCP tool is named \"everything__nope\"")
    );
    servers.shutdown().await;
}
