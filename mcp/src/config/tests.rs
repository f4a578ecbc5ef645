//! The configuration from a table: a row is the JSON and what it gives, a configuration in a
//! short form (see `describe`) or the error's text.

use super::*;

/// A configuration in one line per server.
fn describe(config: &McpConfig) -> String {
    let mut lines = Vec::new();
    for server in &config.servers {
        let mut line = format!("{}:", server.name);
        match &server.transport {
            Transport::Stdio(stdio) => {
                line += &format!(" stdio {:?} args={:?}", stdio.command, stdio.args);
                if !stdio.env.is_empty() {
                    line += &format!(" env={:?}", stdio.env);
                }
                if let Some(cwd) = &stdio.cwd {
                    line += &format!(" cwd={}", cwd.display());
                }
            }
            Transport::Http(http) => {
                line += &format!(" http {}", http.url);
                if !http.headers.is_empty() {
                    line += &format!(" headers={:?}", http.headers);
                }
            }
        }
        line += if server.enabled { " on" } else { " off" };
        line += &format!(" timeout={}ms", server.timeout.as_millis());
        for (tool, config) in &server.tools {
            line += &format!(
                " tool {tool}({}{}{}{})",
                if config.enabled { "on" } else { "off" },
                config
                    .safe_to_repeat
                    .map(|safe| format!(" safe={safe}"))
                    .unwrap_or_default(),
                config
                    .timeout
                    .map(|timeout| format!(" timeout={}ms", timeout.as_millis()))
                    .unwrap_or_default(),
                config
                    .reconcile
                    .as_ref()
                    .map(|other| format!(" reconcile={other}"))
                    .unwrap_or_default(),
            );
        }
        lines.push(line);
    }
    lines.join("\n")
}

fn check(json: &str) -> String {
    match McpConfig::parse(json) {
        Ok(config) => describe(&config),
        Err(error) => format!("error: {error}"),
    }
}

#[test]
fn configurations_from_a_table() {
    let rows: &[(&str, &str)] = &[
        // The usual shapes.
        (r#"{"mcpServers": {}}"#, ""),
        (
            r#"{"mcpServers": {"files": {"command": "npx", "args": ["-y", "server-filesystem", "/tmp"]}}}"#,
            r#"files: stdio "npx" args=["-y", "server-filesystem", "/tmp"] on timeout=60000ms"#,
        ),
        (
            r#"{"mcpServers": {"files": {"command": "node", "env": {"A": "1"}, "cwd": "/srv", "type": "stdio"}}}"#,
            r#"files: stdio "node" args=[] env={"A": "1"} cwd=/srv on timeout=60000ms"#,
        ),
        (
            r#"{"mcpServers": {"web": {"url": "https://example.com/mcp", "headers": {"Authorization": "Bearer x"}, "type": "streamable-http"}}}"#,
            r#"web: http https://example.com/mcp headers={"Authorization": "Bearer x"} on timeout=60000ms"#,
        ),
        (
            r#"{"mcpServers": {"web": {"url": "http://127.0.0.1:3000/mcp", "type": "http"}}}"#,
            "web: http http://127.0.0.1:3000/mcp on timeout=60000ms",
        ),
        // Servers keep the file's order.
        (
            r#"{"mcpServers": {"b": {"command": "b"}, "a": {"command": "a"}}}"#,
            "b: stdio \"b\" args=[] on timeout=60000ms\na: stdio \"a\" args=[] on timeout=60000ms",
        ),
        // Other hosts' fields are tolerated; `disabled` is honoured; null is absent.
        (
            r#"{"globalShortcut": "x", "mcpServers": {"f": {"command": "f", "autoApprove": [], "disabled": true, "cwd": null}}}"#,
            r#"f: stdio "f" args=[] off timeout=60000ms"#,
        ),
        // The seed section.
        (
            r#"{"mcpServers": {"f": {"command": "f", "seed": {"enabled": false, "timeout_ms": 5000,
                "tools": {"write": {"safe_to_repeat": true, "timeout_ms": 100}, "move": {"enabled": false}, "read": {}}}}}}"#,
            r#"f: stdio "f" args=[] off timeout=5000ms tool move(off) tool read(on) tool write(on safe=true timeout=100ms)"#,
        ),
        // Bad JSON names line and column.
        (
            "{\"mcpServers\": {\n  \"f\": {\"command\": \"f\",}\n}}",
            "error: bad JSON at line 2 column 24: trailing comma",
        ),
        (
            "",
            "error: bad JSON at line 1 column 0: EOF while parsing a value",
        ),
        (
            r#"{"mcpServers": {}} x"#,
            "error: bad JSON at line 1 column 20: trailing characters",
        ),
        // Duplicates.
        (
            "{\"mcpServers\": {\n \"f\": {\"command\": \"a\"},\n \"f\": {\"command\": \"b\"}}}",
            "error: mcpServers.f: duplicate server name (line 3 column 4)",
        ),
        (
            r#"{"mcpServers": {"f": {"command": "a", "env": {"A": "1", "A": "2"}}}}"#,
            "error: mcpServers.f.env.A: duplicate key (line 1 column 59)",
        ),
        (
            r#"{"mcpServers": {}, "mcpServers": {}}"#,
            "error: mcpServers: duplicate key (line 1 column 31)",
        ),
        // Wrong types name the field.
        ("[]", "error: (top level): expected an object"),
        (r#"{"servers": {}}"#, "error: mcpServers: missing"),
        (
            r#"{"mcpServers": []}"#,
            "error: mcpServers: expected an object",
        ),
        (
            r#"{"mcpServers": {"files": "npx"}}"#,
            "error: mcpServers.files: expected an object",
        ),
        (
            r#"{"mcpServers": {"files": {"command": 1}}}"#,
            "error: mcpServers.files.command: expected a string",
        ),
        (
            r#"{"mcpServers": {"files": {"command": ""}}}"#,
            "error: mcpServers.files.command: must not be empty",
        ),
        (
            r#"{"mcpServers": {"files": {"command": "x", "args": "-y"}}}"#,
            "error: mcpServers.files.args: expected an array of strings",
        ),
        (
            r#"{"mcpServers": {"files": {"command": "x", "args": ["-y", 2]}}}"#,
            "error: mcpServers.files.args[1]: expected a string",
        ),
        (
            r#"{"mcpServers": {"files": {"command": "x", "env": {"PORT": 80}}}}"#,
            "error: mcpServers.files.env.PORT: expected a string",
        ),
        (
            r#"{"mcpServers": {"my files": {"command": "x", "env": {"a b": 1}}}}"#,
            r#"error: mcpServers["my files"].env["a b"]: expected a string"#,
        ),
        // Command or url, not both, not neither.
        (
            r#"{"mcpServers": {"f": {"command": "x", "url": "http://h/"}}}"#,
            "error: mcpServers.f: a server has a command (stdio) or a url (streamable HTTP), not both",
        ),
        (
            r#"{"mcpServers": {"f": {"args": []}}}"#,
            "error: mcpServers.f: a server needs a command (stdio) or a url (streamable HTTP)",
        ),
        (
            r#"{"mcpServers": {"f": {"url": "http://h/", "args": []}}}"#,
            "error: mcpServers.f.args: only for a server with a command",
        ),
        (
            r#"{"mcpServers": {"f": {"command": "x", "headers": {}}}}"#,
            "error: mcpServers.f.headers: only for a server with a url",
        ),
        // The type agrees with the fields.
        (
            r#"{"mcpServers": {"f": {"url": "http://h/", "type": "stdio"}}}"#,
            "error: mcpServers.f.type: type \"stdio\" needs a command",
        ),
        (
            r#"{"mcpServers": {"f": {"command": "x", "type": "http"}}}"#,
            "error: mcpServers.f.type: type \"http\" needs a url",
        ),
        (
            r#"{"mcpServers": {"f": {"url": "http://h/sse", "type": "sse"}}}"#,
            "error: mcpServers.f.type: the SSE transport is not supported: use streamable HTTP (type \"http\")",
        ),
        (
            r#"{"mcpServers": {"f": {"command": "x", "type": "pipe"}}}"#,
            "error: mcpServers.f.type: unknown type \"pipe\", expected one of: stdio, http, streamable-http",
        ),
        // URLs and headers.
        (
            r#"{"mcpServers": {"f": {"url": "ftp://h/"}}}"#,
            "error: mcpServers.f.url: expected an http:// or https:// URL",
        ),
        (
            r#"{"mcpServers": {"f": {"url": "http://h/", "headers": {"X Y": "1"}}}}"#,
            r#"error: mcpServers.f.headers["X Y"]: not a valid HTTP header name"#,
        ),
        (
            r#"{"mcpServers": {"f": {"url": "http://h/", "headers": {"X": "a\nb"}}}}"#,
            "error: mcpServers.f.headers.X: not a valid HTTP header value (visible ASCII, spaces and tabs only)",
        ),
        (
            r#"{"mcpServers": {"f": {"url": "http://h/", "headers": {"Mcp-Session-Id": "1"}}}}"#,
            "error: mcpServers.f.headers.Mcp-Session-Id: set by the transport itself",
        ),
        // The seed section is strict.
        (
            r#"{"mcpServers": {"f": {"command": "x", "seed": {"enable": false}}}}"#,
            "error: mcpServers.f.seed.enable: unknown field, expected one of: enabled, timeout_ms, tools",
        ),
        (
            r#"{"mcpServers": {"f": {"command": "x", "seed": {"tools": {"w": {"safe": true}}}}}}"#,
            "error: mcpServers.f.seed.tools.w.safe: unknown field, expected one of: enabled, safe_to_repeat, timeout_ms, reconcile, needs_approval",
        ),
        // A tool that reconciles another's cut-off calls.
        (
            r#"{"mcpServers": {"f": {"command": "x", "seed": {"tools": {"w": {"reconcile": "found"}}}}}}"#,
            r#"f: stdio "x" args=[] on timeout=60000ms tool w(on reconcile=found)"#,
        ),
        (
            r#"{"mcpServers": {"f": {"command": "x", "seed": {"tools": {"w": {"reconcile": ""}}}}}}"#,
            "error: mcpServers.f.seed.tools.w.reconcile: must not be empty",
        ),
        (
            r#"{"mcpServers": {"f": {"command": "x", "seed": {"tools": {"w": {"reconcile": 3}}}}}}"#,
            "error: mcpServers.f.seed.tools.w.reconcile: expected a string",
        ),
        (
            r#"{"mcpServers": {"f": {"command": "x", "seed": {"tools": {"w": {"safe_to_repeat": "yes"}}}}}}"#,
            "error: mcpServers.f.seed.tools.w.safe_to_repeat: expected true or false",
        ),
        (
            r#"{"mcpServers": {"f": {"command": "x", "seed": {"timeout_ms": 0}}}}"#,
            "error: mcpServers.f.seed.timeout_ms: expected milliseconds from 1 to 3600000",
        ),
        (
            r#"{"mcpServers": {"f": {"command": "x", "seed": {"timeout_ms": 1.5}}}}"#,
            "error: mcpServers.f.seed.timeout_ms: expected milliseconds from 1 to 3600000",
        ),
        (
            r#"{"mcpServers": {"f": {"command": "x", "seed": null}}}"#,
            "error: mcpServers.f.seed: expected an object",
        ),
        // Names.
        (
            r#"{"mcpServers": {"": {"command": "x"}}}"#,
            r#"error: mcpServers[""]: must not be empty"#,
        ),
        (
            r#"{"mcpServers": {"a.b": {"command": "x"}, "a_b": {"command": "y"}}}"#,
            "error: mcpServers.a_b: fits to the same verb name prefix \"a_b\" as server \"a.b\"",
        ),
    ];
    let mut failures = Vec::new();
    for (json, expected) in rows {
        let actual = check(json);
        if actual != *expected {
            failures.push(format!(
                "{json}\n  expected: {expected}\n    actual: {actual}"
            ));
        }
    }
    assert!(failures.is_empty(), "\n{}", failures.join("\n"));
}

#[test]
fn a_tool_takes_the_server_timeout_unless_it_names_its_own() {
    let config = McpConfig::parse(
        r#"{"mcpServers": {"f": {"command": "x", "seed": {"timeout_ms": 2000,
            "tools": {"slow": {"timeout_ms": 9000}}}}}}"#,
    )
    .expect("parses");
    let server = &config.servers[0];
    assert_eq!(server.tool_timeout("slow"), Duration::from_millis(9000));
    assert_eq!(server.tool_timeout("other"), Duration::from_millis(2000));
    assert_eq!(server.tool("other"), ToolConfig::default());
}
