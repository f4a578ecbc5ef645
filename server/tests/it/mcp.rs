//! Tools from MCP servers through a real `seed serve --mcp`: the reference servers
//! (`@modelcontextprotocol/server-everything` and `server-filesystem` from npm) and the Python
//! SDK's test server (tests/mcp/test_server.py), installed by scripts/mcp-servers.sh when
//! missing. The scripted model calls them with `call:` lines.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Once;

use serde_json::{Value, json};

use crate::common::{SEED, Server, new_session};
use seed_server::api::{EventsResponse, MessageSessionResponse, RunInfo, ToolsResponse};
use seed_server::client::Client;

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("server/ has a parent")
        .to_path_buf()
}

pub(crate) fn installed() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace().join("target"))
        .join("mcp-servers")
}

/// Runs scripts/mcp-servers.sh when a server is missing, once per process, under the lock the
/// other MCP tests take.
pub(crate) fn install() {
    static INSTALL: Once = Once::new();
    INSTALL.call_once(|| {
        let bin = installed().join("node/node_modules/.bin");
        if bin.join("mcp-server-everything").exists()
            && bin.join("mcp-server-filesystem").exists()
            && python().exists()
        {
            return;
        }
        let target = installed().parent().expect("the target dir").to_path_buf();
        std::fs::create_dir_all(&target).expect("the target dir");
        let status = Command::new("flock")
            .arg(target.join("mcp-servers.lock"))
            .arg(workspace().join("scripts/mcp-servers.sh"))
            .env("CARGO_TARGET_DIR", &target)
            .status()
            .expect("flock runs scripts/mcp-servers.sh");
        assert!(status.success(), "scripts/mcp-servers.sh failed: {status}");
    });
}

fn python() -> PathBuf {
    installed().join("venv/bin/python")
}

/// Writes `servers` as an `mcpServers` file in `dir`.
pub(crate) fn config_file(dir: &Path, servers: Value) -> PathBuf {
    let path = dir.join("mcp.json");
    std::fs::write(&path, json!({"mcpServers": servers}).to_string()).expect("the config");
    path
}

pub(crate) fn python_server(count_file: &Path) -> Value {
    json!({
        "command": python(),
        "args": [workspace().join("tests/mcp/test_server.py")],
        "env": {"SEED_MCP_COUNT_FILE": count_file},
    })
}

async fn send(client: &Client, session: uuid::Uuid, text: &str) -> MessageSessionResponse {
    client
        .post(
            &format!("/v1/sessions/{session}/messages"),
            &json!({"text": text, "wait": true}),
        )
        .await
        .expect("sent")
}

async fn events(client: &Client, session: uuid::Uuid) -> Vec<seed_server::api::EventInfo> {
    let events: EventsResponse = client
        .get(&format!("/v1/sessions/{session}/events"))
        .await
        .expect("events");
    events.events
}

/// The texts of the session's tool results, in the log's order.
pub(crate) async fn tool_results(client: &Client, session: uuid::Uuid) -> Vec<String> {
    events(client, session)
        .await
        .into_iter()
        .filter(|event| event.kind == "tool_result")
        .map(|event| {
            event.content["content"]
                .as_str()
                .unwrap_or_default()
                .to_owned()
        })
        .collect()
}

fn answer_of(run: &MessageSessionResponse) -> String {
    run.result
        .as_ref()
        .and_then(|result| result["answer"].as_str())
        .unwrap_or_default()
        .to_owned()
}

#[actix_web::test]
async fn a_session_calls_an_echo_tool_and_a_read_tool() {
    install();
    let dir = tempfile::tempdir().expect("tempdir");
    let files = dir.path().join("files");
    std::fs::create_dir_all(&files).expect("files dir");
    std::fs::write(files.join("notes.txt"), "the notes say hello").expect("a file");
    let config = config_file(
        dir.path(),
        json!({
            "everything": {"command": installed().join("node/node_modules/.bin/mcp-server-everything")},
            "files": {
                "command": installed().join("node/node_modules/.bin/mcp-server-filesystem"),
                "args": [&files],
            },
        }),
    );
    let data = dir.path().join("data");
    let server = Server::start(&data, &["--mcp", config.to_str().expect("utf-8")]);
    let client = server.client();

    // Every tool is listed with its class and its server.
    let tools: ToolsResponse = client.get("/v1/tools").await.expect("tools");
    let echo = tools
        .tools
        .iter()
        .find(|tool| tool.name == "everything__echo")
        .expect("everything's echo is a verb");
    assert_eq!(echo.mcp_server.as_deref(), Some("everything"));
    let read = tools
        .tools
        .iter()
        .find(|tool| tool.name == "files__read_text_file")
        .expect("the filesystem server's read is a verb");
    assert_eq!(read.class, seed_server::api::ToolClass::SafeToRepeat);
    assert!(
        tools
            .tools
            .iter()
            .any(|tool| tool.name == "read" && tool.mcp_server.is_none())
    );
    let names: Vec<&str> = tools.mcp_servers.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["everything", "files"]);
    assert!(
        tools
            .mcp_servers
            .iter()
            .all(|s| s.state == "connected" && s.tools > 0)
    );

    let session = new_session(&client).await;
    let path = files.join("notes.txt");
    let run = send(
        &client,
        session.id,
        &format!(
            "call: everything__echo {}\ncall: files__read_text_file {}",
            json!({"message": "hello from seed"}),
            json!({"path": path}),
        ),
    )
    .await;
    assert_eq!(run.status, "succeeded", "{run:?}");
    // The answer quotes the results as the model's last request held them.
    let answer = answer_of(&run);
    assert!(
        answer.contains("everything__echo: Echo: hello from seed"),
        "{answer}"
    );
    assert!(
        answer.contains("files__read_text_file: the notes say hello"),
        "{answer}"
    );
    // Both results are in the log, as the tools gave them.
    let results: Vec<(String, String)> = events(&client, session.id)
        .await
        .into_iter()
        .filter(|event| event.kind == "tool_result")
        .map(|event| {
            (
                event.content["tool_name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
                event.content["content"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
            )
        })
        .collect();
    assert_eq!(
        results,
        [
            (
                "everything__echo".to_owned(),
                "Echo: hello from seed".to_owned()
            ),
            (
                "files__read_text_file".to_owned(),
                "the notes say hello".to_owned()
            ),
        ]
    );

    // Arguments that do not fit the schema: an error result naming the field, nothing called.
    let run = send(
        &client,
        session.id,
        "call: everything__echo {\"message\": 7}",
    )
    .await;
    let answer = answer_of(&run);
    assert!(
        answer.contains("error: invalid arguments for everything__echo: message:"),
        "{answer}"
    );

    // An image is kept as the session's attachment, named in the log's result, and sent to
    // the model (the scripted model takes images) after the result's text.
    let run = send(&client, session.id, "call: everything__get-tiny-image {}").await;
    assert_eq!(run.status, "succeeded", "{run:?}");
    let answer = answer_of(&run);
    let shown = answer
        .split_once("[image/png, ")
        .and_then(|(_, rest)| rest.split_once(" bytes: attached]"))
        .map(|(n_bytes, _)| n_bytes.to_owned())
        .unwrap_or_else(|| panic!("the image is named in the text: {answer}"));
    assert!(
        answer.contains("Here's the image you requested:")
            && answer.ends_with(&format!("[shown: image/png {shown} bytes]")),
        "{answer}"
    );
    let n_bytes: u64 = shown.parse().expect("a size");
    let attachments: seed_server::api::ListAttachmentsResponse = client
        .get(&format!("/v1/sessions/{}/attachments", session.id))
        .await
        .expect("attachments");
    let kept = attachments
        .attachments
        .iter()
        .find(|attachment| attachment.media_type == "image/png")
        .expect("the image is an attachment of the session");
    assert_eq!(kept.size_bytes as u64, n_bytes);
    assert_eq!(kept.name, "everything__get-tiny-image-1.png");
    let result = events(&client, session.id)
        .await
        .into_iter()
        .rfind(|event| event.kind == "tool_result")
        .expect("the image's result");
    assert_eq!(
        result.content["attachments"],
        json!([{"id": kept.id, "media_type": "image/png", "size_bytes": n_bytes}])
    );

    // seed tools prints the same list.
    let printed = crate::common::seed_cli(&data, &["tools"], "");
    assert!(printed.contains("mcp server files ("), "{printed}");
    assert!(printed.contains("everything__echo"), "{printed}");
}

/// The Python server's tools, as the service is asked to run them and crash at `point`.
pub(crate) fn python_service(
    dir: &Path,
    count_file: &Path,
    seed: &Value,
    crash_at: Option<&str>,
) -> Server {
    let mut py = python_server(count_file);
    py["seed"] = seed.clone();
    let config = config_file(dir, json!({"py": py}));
    let mut args = vec![
        "--mcp".to_owned(),
        config.to_str().expect("utf-8").to_owned(),
    ];
    if let Some(point) = crash_at {
        args.extend(["--crash-at".to_owned(), point.to_owned()]);
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    Server::start(&dir.join("data"), &args)
}

/// The lines the test server's count tool wrote: each is one run of it.
fn counted(count_file: &Path) -> usize {
    std::fs::read_to_string(count_file)
        .map(|text| text.lines().count())
        .unwrap_or(0)
}

/// Sends `text` to a service (the Python server with its `seed` section) that aborts at the
/// crash point mid-call, restarts it without the point, and returns the run once it ended,
/// with the session's tool results.
async fn crash_mid_call(
    dir: &Path,
    count_file: &Path,
    seed: Value,
    text: &str,
) -> (RunInfo, Vec<String>) {
    let mut server = python_service(dir, count_file, &seed, Some("tool.mid_run"));
    let client = server.client();
    let session = new_session(&client).await;
    let sent = client
        .request(
            "POST",
            &format!("/v1/sessions/{}/messages", session.id),
            Some(&json!({"text": text, "wait": true})),
        )
        .await;
    // The process aborted once the tool ran, before its result was handed back.
    assert!(sent.is_err() || sent.is_ok_and(|answer| answer.status >= 500));
    let status = server.child.wait().expect("the service exited");
    assert!(!status.success(), "it aborted at the crash point: {status}");
    drop(server);

    let server = python_service(dir, count_file, &seed, None);
    let client = server.client();
    let runs: seed_server::api::SessionRunsResponse = client
        .get(&format!("/v1/sessions/{}/runs", session.id))
        .await
        .expect("runs");
    let run_id = runs.runs.first().expect("the message's run").id;
    let run: RunInfo = client
        .get(&format!("/v1/runs/{run_id}?wait=true"))
        .await
        .expect("the run ends");
    let results = tool_results(&client, session.id).await;
    (run, results)
}

/// The lines of a file the test server appends to (`COUNT_FILE.started`, `COUNT_FILE.pids`).
pub(crate) fn lines_of(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .map(|text| text.lines().map(str::to_owned).collect())
        .unwrap_or_default()
}

/// `path` with `suffix` added to its file name.
pub(crate) fn beside(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
}

/// Waits (up to 30 s) until `done` holds, polling.
pub(crate) fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while !done() {
        assert!(
            std::time::Instant::now() < deadline,
            "gave up waiting: {what}"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// Whether process `pid` is gone (or a zombie nobody reaped: it runs nothing either).
pub(crate) fn process_gone(pid: &str) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).map_or(true, |stat| {
        stat.rsplit_once(") ")
            .is_some_and(|(_, rest)| rest.starts_with('Z'))
    })
}

/// Sends `text` (a call of the Python server's `tool`, which waits before doing anything) to a
/// service, SIGKILLs the service while the tool runs, waits for the server it orphaned to be
/// gone, starts the service again, and returns the run once it ended, the session's tool
/// results, and the tools the server started (`COUNT_FILE.started`), in order.
async fn kill_mid_call(
    dir: &Path,
    count_file: &Path,
    text: &str,
) -> (RunInfo, Vec<String>, Vec<String>) {
    let started = beside(count_file, ".started");
    let mut server = python_service(dir, count_file, &json!({}), None);
    let client = server.client();
    let session = new_session(&client).await;
    let sent: MessageSessionResponse = client
        .post(
            &format!("/v1/sessions/{}/messages", session.id),
            &json!({"text": text, "wait": false}),
        )
        .await
        .expect("sent");
    wait_until("the tool starts", || !lines_of(&started).is_empty());
    server.child.kill().expect("SIGKILL");
    server.child.wait().expect("the service is gone");
    drop(server);
    // The server the service started is orphaned; it runs nothing once its stdin closed.
    for pid in lines_of(&beside(count_file, ".pids")) {
        wait_until("the orphaned MCP server is gone", || process_gone(&pid));
    }

    let server = python_service(dir, count_file, &json!({}), None);
    let client = server.client();
    let run: RunInfo = client
        .get(&format!("/v1/runs/{}?wait=true", sent.run_id))
        .await
        .expect("the run ends");
    let results = tool_results(&client, session.id).await;
    (run, results, lines_of(&started))
}

#[actix_web::test]
async fn a_tool_not_safe_to_repeat_cut_off_by_sigkill_is_never_run_again() {
    install();
    let dir = tempfile::tempdir().expect("tempdir");
    let count_file = dir.path().join("count");
    let (run, results, started) = kill_mid_call(
        dir.path(),
        &count_file,
        "call: py__count {\"delay_ms\": 2000}",
    )
    .await;
    assert_eq!(run.status, "succeeded", "{run:?}");
    assert_eq!(
        started,
        ["count"],
        "the count started once, before the kill, never again"
    );
    assert!(counted(&count_file) <= 1, "its write happened at most once");
    assert_eq!(results.len(), 1, "{results:?}");
    assert!(results[0].contains("interrupted"), "{results:?}");
}

#[actix_web::test]
async fn a_read_only_tool_cut_off_by_sigkill_runs_again() {
    install();
    let dir = tempfile::tempdir().expect("tempdir");
    let count_file = dir.path().join("count");
    std::fs::write(&count_file, "counted\ncounted\n").expect("two lines");
    let (run, results, started) = kill_mid_call(
        dir.path(),
        &count_file,
        "call: py__read_count {\"delay_ms\": 1000}",
    )
    .await;
    assert_eq!(run.status, "succeeded", "{run:?}");
    assert_eq!(
        started,
        ["read_count", "read_count"],
        "it ran again after the restart"
    );
    assert_eq!(results, ["2"], "and answered");
}

#[actix_web::test]
async fn failing_hanging_and_dying_servers_give_error_results_and_the_service_goes_on() {
    install();
    let dir = tempfile::tempdir().expect("tempdir");
    let count_file = dir.path().join("count");
    let mut server_config = python_server(&count_file);
    server_config["seed"] = json!({"tools": {"hang": {"timeout_ms": 500}}});
    let config = config_file(dir.path(), json!({"py": server_config}));
    let server = Server::start(
        &dir.path().join("data"),
        &["--mcp", config.to_str().expect("utf-8")],
    );
    let client = server.client();
    let session = new_session(&client).await;
    let cases = [
        (
            "call: py__fail {\"message\": \"no such thing\"}",
            "py__fail: error: ",
        ),
        ("call: py__hang {}", "py__hang: error: "),
        ("call: py__exit_now {}", "py__exit_now: error: "),
        // A line that is not JSON on its stdout is passed over; the answer after it comes.
        ("call: py__garbage {}", "py__garbage: after garbage"),
        ("call: py__count {}", "py__count: counted 1"),
    ];
    for (text, expected) in cases {
        let run = send(&client, session.id, text).await;
        assert_eq!(run.status, "succeeded", "{text}: {run:?}");
        let answer = answer_of(&run);
        assert!(answer.contains(expected), "{text}: {answer}");
    }
}

#[test]
fn bad_configuration_stops_the_start_naming_what_is_wrong() {
    let dir = tempfile::tempdir().expect("tempdir");
    let cases = [
        (
            "{\"mcpServers\": {\"a\": {\"command\": 7}}}",
            "mcpServers.a.command",
        ),
        ("{\"mcpServers\": ", "line 1"),
        (
            "{\"mcpServers\": {\"a\": {\"command\": \"x\"}, \"a\": {\"command\": \"y\"}}}",
            "duplicate",
        ),
        (
            "{\"mcpServers\": {\"ghost\": {\"command\": \"/nonexistent/mcp-ghost\"}}}",
            "ghost",
        ),
    ];
    for (text, named) in cases {
        let config = dir.path().join("mcp.json");
        std::fs::write(&config, text).expect("config");
        let output = Command::new(SEED)
            .arg("serve")
            .arg("--data-dir")
            .arg(dir.path().join("data"))
            .args(["--listen", "127.0.0.1:0", "--mcp"])
            .arg(&config)
            .env("SEED_PROVIDER", "scripted")
            .output()
            .expect("seed serve runs");
        assert!(!output.status.success(), "{text}: it refused to start");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains(named), "{text}: {stderr}");
        assert!(
            !String::from_utf8_lossy(&output.stdout).contains("listening"),
            "{text}: it never listened"
        );
    }
}

/// The Python test server over streamable HTTP on a free port; killed by its handle when
/// dropped.
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

fn serve_http(count_file: &Path) -> HttpServer {
    use std::io::BufRead as _;
    let mut child = Command::new(python())
        .arg(workspace().join("tests/mcp/test_server.py"))
        .arg("--http")
        .env("SEED_MCP_COUNT_FILE", count_file)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("the test server starts");
    let stdout = child.stdout.take().expect("its stdout");
    let mut line = String::new();
    std::io::BufReader::new(stdout)
        .read_line(&mut line)
        .expect("its first line");
    let port = line
        .trim()
        .strip_prefix("listening on ")
        .and_then(|port| port.parse().ok())
        .unwrap_or_else(|| panic!("`listening on PORT`, not {line:?}"));
    HttpServer { child, port }
}

#[actix_web::test]
async fn a_server_over_streamable_http_serves_a_session() {
    install();
    let dir = tempfile::tempdir().expect("tempdir");
    let count_file = dir.path().join("count");
    let http = serve_http(&count_file);
    let config = config_file(
        dir.path(),
        json!({"web": {
            "url": format!("http://127.0.0.1:{}/mcp", http.port),
            "headers": {"X-Seed-Test": "1"},
        }}),
    );
    let server = Server::start(
        &dir.path().join("data"),
        &["--mcp", config.to_str().expect("utf-8")],
    );
    let client = server.client();
    let session = new_session(&client).await;
    let run = send(
        &client,
        session.id,
        "call: web__count {}\ncall: web__read_count {}",
    )
    .await;
    assert_eq!(run.status, "succeeded", "{run:?}");
    let answer = answer_of(&run);
    assert!(
        answer.contains("web__count: counted 1 | web__read_count: 1"),
        "{answer}"
    );
    assert_eq!(counted(&count_file), 1);
}

#[actix_web::test]
async fn a_stopped_turn_cancels_its_mcp_call_on_the_server() {
    install();
    let dir = tempfile::tempdir().expect("tempdir");
    let count_file = dir.path().join("count");
    let config = config_file(dir.path(), json!({"py": python_server(&count_file)}));
    let server = Server::start(
        &dir.path().join("data"),
        &["--mcp", config.to_str().expect("utf-8")],
    );
    let client = server.client();
    let session = new_session(&client).await;
    let mut updates = client.subscribe().await.expect("subscribed");
    // The hang tool never answers (its timeout is the default minute).
    let sent: MessageSessionResponse = client
        .post(
            &format!("/v1/sessions/{}/messages", session.id),
            &json!({"text": "call: py__hang {}"}),
        )
        .await
        .expect("sent");
    // Its call is committed, and then sent to the server.
    loop {
        let update = seed_server::client::next_update(&mut updates)
            .await
            .expect("the subscription stays open");
        if let seed_server::ws::Update::ToolCall { name, .. } = update
            && name == "py__hang"
        {
            break;
        }
    }
    let run_id = sent.run_id;
    client
        .request(
            "POST",
            &format!("/v1/sessions/{}/stop", session.id),
            Some(&json!({})),
        )
        .await
        .expect("stopped");
    let run: RunInfo = client
        .get(&format!("/v1/runs/{run_id}?wait=true"))
        .await
        .expect("the run ends");
    assert_ne!(run.status, "running", "{run:?}");
    let results: Vec<String> = tool_results(&client, session.id).await;
    assert!(
        results.iter().any(|result| result.contains("stopped")),
        "the call is answered as stopped: {results:?}"
    );
    // The server was told: its count of cancelled calls (it waits for one) says so.
    let run = send(
        &client,
        session.id,
        "call: py__cancellations {\"at_least\": 1}",
    )
    .await;
    let answer = answer_of(&run);
    assert!(answer.contains("py__cancellations: 1"), "{answer}");
}

#[actix_web::test]
async fn a_tool_a_server_adds_while_running_is_offered_to_the_next_turn() {
    install();
    let dir = tempfile::tempdir().expect("tempdir");
    let count_file = dir.path().join("count");
    let config = config_file(dir.path(), json!({"py": python_server(&count_file)}));
    let server = Server::start(
        &dir.path().join("data"),
        &["--mcp", config.to_str().expect("utf-8")],
    );
    let client = server.client();
    let session = new_session(&client).await;
    let offered = |tools: &ToolsResponse| tools.tools.iter().any(|tool| tool.name == "py__added");
    let tools: ToolsResponse = client.get("/v1/tools").await.expect("tools");
    assert!(!offered(&tools), "not offered before the server adds it");
    // The server adds a tool and says its list changed (notifications/tools/list_changed).
    let run = send(&client, session.id, "call: py__add_tool {}").await;
    assert!(
        answer_of(&run).contains("py__add_tool: added a tool"),
        "{run:?}"
    );
    // The list is read again and the verbs follow, on their own time: wait for it, within
    // a bound.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let tools: ToolsResponse = client.get("/v1/tools").await.expect("tools");
        if offered(&tools) {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "py__added was not offered within 20 s"
        );
        actix_web::rt::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    // The same session's next turn (its harness kept from the last) is offered it and calls it.
    let run = send(&client, session.id, "call: py__added {}").await;
    let answer = answer_of(&run);
    assert!(answer.contains("py__added: added"), "{answer}");
}

#[actix_web::test]
async fn a_cut_off_call_the_configuration_reconciles_is_answered_with_its_effect() {
    install();
    let dir = tempfile::tempdir().expect("tempdir");
    let count_file = dir.path().join("count");
    let (run, results) = crash_mid_call(
        dir.path(),
        &count_file,
        json!({"tools": {"count_keyed": {"reconcile": "find_count"}}}),
        "call: py__count_keyed {\"key\": \"k1\"}",
    )
    .await;
    assert_eq!(run.status, "succeeded", "{run:?}");
    assert_eq!(
        results,
        ["counted k1"],
        "answered with its effect, not interrupted"
    );
    assert_eq!(
        std::fs::read_to_string(&count_file).expect("the count"),
        "k1\n",
        "run once, before the crash"
    );
}
