//! Traces over OTLP/HTTP, end to end: a test receiver (an actix server on `127.0.0.1:0` that
//! takes `POST /v1/traces` and decodes each `ExportTraceServiceRequest` with
//! `opentelemetry-proto`'s types) behind a real `seed serve` with the scripted model. A turn with
//! two tool calls is one trace (HTTP request -> run -> its wait, model requests and tool calls)
//! with the GenAI attributes; a caller's `traceparent` is the request's parent; a run adopted
//! after a crash mid-turn links to the trace of the attempt the crash cut off; with no endpoint
//! nothing is sent. The batch delay is long, so every span here arrives with the flush a
//! graceful stop makes: that flush is tested too.

use std::collections::HashMap;
use std::path::Path;
use std::process::Stdio;
use std::sync::{Arc, Mutex};

use actix_web::{App, HttpResponse, HttpServer, web};
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value as Any;
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message as _;
use serde_json::json;

use crate::common::{Server, new_session};

/// Longer than any test here: spans reach the receiver only with the flush at shutdown.
const BATCH_DELAY_MS: &str = "600000";

/// What the test receiver got: each request's spans.
#[derive(Clone, Default)]
struct Received {
    n_requests: Arc<Mutex<usize>>,
    spans: Arc<Mutex<Vec<Span>>>,
}

impl Received {
    fn spans(&self) -> Vec<Span> {
        self.spans.lock().expect("the spans").clone()
    }

    fn n_requests(&self) -> usize {
        *self.n_requests.lock().expect("the count")
    }
}

/// Starts the receiver; returns its base URL (the endpoint `seed serve` is given).
fn receiver() -> (String, Received) {
    let received = Received::default();
    let state = received.clone();
    let server = HttpServer::new(move || {
        let state = state.clone();
        App::new().route(
            "/v1/traces",
            web::post().to(move |body: web::Bytes| {
                let state = state.clone();
                async move {
                    let request = ExportTraceServiceRequest::decode(body.as_ref())
                        .expect("an ExportTraceServiceRequest");
                    *state.n_requests.lock().expect("the count") += 1;
                    let spans = request
                        .resource_spans
                        .into_iter()
                        .flat_map(|resource| resource.scope_spans)
                        .flat_map(|scope| scope.spans);
                    state.spans.lock().expect("the spans").extend(spans);
                    HttpResponse::Ok()
                        .content_type("application/x-protobuf")
                        .finish()
                }
            }),
        )
    })
    .workers(1)
    .bind("127.0.0.1:0")
    .expect("the receiver binds");
    let addr = server.addrs()[0];
    actix_web::rt::spawn(server.run());
    (format!("http://{addr}"), received)
}

/// `seed serve` exporting to `endpoint`.
fn traced(data_dir: &Path, endpoint: &str, more: &[&str]) -> Server {
    let mut args = vec!["--otlp-endpoint", endpoint];
    args.extend(more);
    Server::start_with_env(
        data_dir,
        &args,
        &[("OTEL_BSP_SCHEDULE_DELAY", BATCH_DELAY_MS)],
        Stdio::inherit(),
    )
}

/// Stops the service gracefully off the test's thread (the receiver runs on it), so that
/// its exporter's flush reaches the receiver.
async fn terminate(server: Server) {
    let status = actix_web::rt::task::spawn_blocking(move || server.terminate())
        .await
        .expect("terminated");
    assert!(status.success(), "{status}");
}

fn attribute(span: &Span, key: &str) -> Option<Any> {
    span.attributes
        .iter()
        .find(|attribute| attribute.key == key)
        .and_then(|attribute| attribute.value.clone()?.value)
}

fn text(span: &Span, key: &str) -> String {
    match attribute(span, key) {
        Some(Any::StringValue(text)) => text,
        other => panic!("{} has no text {key}: {other:?}", span.name),
    }
}

fn number(span: &Span, key: &str) -> i64 {
    match attribute(span, key) {
        Some(Any::IntValue(number)) => number,
        other => panic!("{} has no number {key}: {other:?}", span.name),
    }
}

fn named<'a>(spans: &'a [Span], name: &str) -> Vec<&'a Span> {
    spans.iter().filter(|span| span.name == name).collect()
}

fn one<'a>(spans: &'a [Span], name: &str) -> &'a Span {
    let found = named(spans, name);
    assert_eq!(found.len(), 1, "one {name} in {:?}", names(spans));
    found[0]
}

fn names(spans: &[Span]) -> Vec<&str> {
    spans.iter().map(|span| span.name.as_str()).collect()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}

/// Sends `text` to `session_id` signed, with `traceparent` when given, waiting for the answer.
async fn send(
    client: &seed_server::client::Client,
    session_id: uuid::Uuid,
    text: &str,
    traceparent: Option<&str>,
) -> anyhow::Result<seed_server::client::Answer> {
    let path = format!("/v1/sessions/{session_id}/messages");
    let body = json!({"text": text, "wait": true}).to_string().into_bytes();
    let mut fields = client.signature_fields("POST", &path, &body);
    if let Some(traceparent) = traceparent {
        fields.push(("traceparent", traceparent.to_owned()));
    }
    client.send_raw("POST", &path, body, &fields).await
}

/// Sends `text` to `session` without waiting for its answer; returns what the send said.
async fn send_unwaited(
    client: &seed_server::client::Client,
    session: uuid::Uuid,
    text: &str,
) -> seed_server::api::MessageSessionResponse {
    client
        .post(
            &format!("/v1/sessions/{session}/messages"),
            &json!({"text": text, "wait": false}),
        )
        .await
        .expect("sent")
}

/// Waits for run `run_id` to end, and checks that it succeeded.
async fn succeeded(client: &seed_server::client::Client, run_id: impl std::fmt::Display) {
    let run: seed_server::api::RunInfo = client
        .get(&format!("/v1/runs/{run_id}?wait=true"))
        .await
        .expect("the run ends");
    assert_eq!(run.status, "succeeded", "{run:?}");
}

/// The first run of `session` (the message's, or a successor's copied message's).
async fn first_run(client: &seed_server::client::Client, session: uuid::Uuid) -> uuid::Uuid {
    let runs: seed_server::api::SessionRunsResponse = client
        .get(&format!("/v1/sessions/{session}/runs"))
        .await
        .expect("runs");
    runs.runs.first().expect("a run").id
}

const TWO_CALLS: &str =
    "call: status {\"description\": \"one\"}\ncall: status {\"description\": \"two\"}";

#[actix_web::test]
async fn a_turn_with_two_tool_calls_is_one_trace_under_the_callers() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (endpoint, received) = receiver();
    let server = traced(&dir.path().join("data"), &endpoint, &[]);
    let client = server.client();
    let session = new_session(&client).await;
    let trace_id = "4bf92f3577b34da6a3ce929d0e0e4736";
    let caller_span_id = "00f067aa0ba902b7";
    let answer = send(
        &client,
        session.id,
        TWO_CALLS,
        Some(&format!("00-{trace_id}-{caller_span_id}-01")),
    )
    .await
    .expect("answered");
    assert_eq!(
        answer.status,
        200,
        "{}",
        String::from_utf8_lossy(&answer.body)
    );
    terminate(server).await;

    let spans = received.spans();
    let mine: Vec<Span> = spans
        .iter()
        .filter(|span| hex(&span.trace_id) == trace_id)
        .cloned()
        .collect();
    let by_id: HashMap<Vec<u8>, &Span> = mine
        .iter()
        .map(|span| (span.span_id.clone(), span))
        .collect();
    let parent_name = |span: &Span| {
        by_id
            .get(&span.parent_span_id)
            .map(|parent| parent.name.clone())
    };

    // The request: the caller's span is its parent.
    let request = one(&mine, "POST /v1/sessions/{session_id}/messages");
    assert_eq!(hex(&request.parent_span_id), caller_span_id);
    assert_eq!(text(request, "http.request.method"), "POST");
    assert_eq!(number(request, "http.response.status_code"), 200);

    // The run, under the request.
    let run = one(&mine, "invoke_agent seed");
    assert_eq!(run.parent_span_id, request.span_id);
    assert_eq!(text(run, "gen_ai.operation.name"), "invoke_agent");
    assert_eq!(text(run, "seed.session_id"), session.id.to_string());
    assert_eq!(text(run, "gen_ai.conversation.id"), session.id.to_string());
    assert_eq!(text(run, "seed.run.queue"), "interactive");
    assert_eq!(number(run, "seed.run.pass"), 0);
    assert_eq!(text(run, "seed.run.outcome"), "succeeded");
    assert!(!text(run, "seed.run_id").is_empty());

    // Its wait in the queue, its model requests and its tool calls, under it.
    let queued = one(&mine, "seed.run.queued");
    assert_eq!(parent_name(queued).as_deref(), Some("invoke_agent seed"));
    let chats = named(&mine, "chat scripted");
    assert!(chats.len() >= 2, "{:?}", names(&mine));
    for chat in &chats {
        assert_eq!(chat.parent_span_id, run.span_id, "{chat:?}");
        assert_eq!(text(chat, "gen_ai.operation.name"), "chat");
        assert_eq!(text(chat, "gen_ai.system"), "scripted");
        assert_eq!(text(chat, "gen_ai.request.model"), "scripted");
        assert!(number(chat, "gen_ai.usage.input_tokens") > 0, "{chat:?}");
        assert!(number(chat, "gen_ai.usage.output_tokens") >= 0, "{chat:?}");
        assert!(number(chat, "gen_ai.usage.cache_read.input_tokens") >= 0);
        assert!(attribute(chat, "gen_ai.server.time_to_first_token").is_some());
        // No message text without --otlp-content.
        assert_eq!(attribute(chat, "gen_ai.input.messages"), None);
        assert_eq!(attribute(chat, "gen_ai.output.messages"), None);
    }
    let finish_reasons: Vec<String> = chats
        .iter()
        .map(|chat| text(chat, "gen_ai.response.finish_reasons"))
        .collect();
    assert!(
        finish_reasons.contains(&"tool_calls".to_owned()),
        "{finish_reasons:?}"
    );
    assert_eq!(finish_reasons.last().map(String::as_str), Some("stop"));
    let calls = named(&mine, "execute_tool status");
    assert_eq!(calls.len(), 2, "{:?}", names(&mine));
    let mut call_ids = Vec::new();
    for call in &calls {
        assert_eq!(call.parent_span_id, run.span_id, "{call:?}");
        assert_eq!(text(call, "gen_ai.operation.name"), "execute_tool");
        assert_eq!(text(call, "gen_ai.tool.name"), "status");
        assert!(matches!(
            attribute(call, "seed.tool.safe_to_repeat"),
            Some(Any::BoolValue(_))
        ));
        assert_eq!(attribute(call, "error.type"), None);
        call_ids.push(text(call, "gen_ai.tool.call.id"));
    }
    call_ids.dedup();
    assert_eq!(call_ids.len(), 2, "two calls, two ids: {call_ids:?}");

    // Everything of the turn is in the caller's trace.
    for span in &spans {
        if [
            "invoke_agent seed",
            "chat scripted",
            "execute_tool status",
            "seed.run.queued",
        ]
        .contains(&span.name.as_str())
        {
            assert_eq!(hex(&span.trace_id), trace_id, "{}", span.name);
        }
    }
}

#[actix_web::test]
async fn message_text_is_exported_only_with_the_content_switch() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (endpoint, received) = receiver();
    let server = traced(&dir.path().join("data"), &endpoint, &["--otlp-content"]);
    let client = server.client();
    let session = new_session(&client).await;
    let answer = send(&client, session.id, "hello traces", None)
        .await
        .expect("answered");
    assert_eq!(answer.status, 200);
    terminate(server).await;
    let spans = received.spans();
    let chat = one(&spans, "chat scripted");
    assert!(text(chat, "gen_ai.input.messages").contains("hello traces"));
    assert!(text(chat, "gen_ai.output.messages").contains("hello traces"));
    // A request with no traceparent starts a trace of its own, and its run is in it.
    let request = one(&spans, "POST /v1/sessions/{session_id}/messages");
    assert!(request.parent_span_id.is_empty());
    assert_eq!(one(&spans, "invoke_agent seed").trace_id, request.trace_id);
}

#[actix_web::test]
async fn a_run_adopted_after_a_crash_links_to_the_attempt_it_cut_off() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    let (endpoint, received) = receiver();
    // On PostgreSQL the restarted service takes the run over once the killed node's lease
    // lapses: soon, here.
    let nodes: &[&str] = if crate::common::on_postgres() {
        &["--node-renew-ms", "100", "--node-expire-ms", "400"]
    } else {
        &[]
    };
    let crash_args = [&["--crash-at", "tool.mid_run"][..], nodes].concat();
    let mut server = traced(&data, &endpoint, &crash_args);
    let client = server.client();
    let session = new_session(&client).await;
    let trace_id = "0af7651916cd43dd8448eb211c80319c";
    let sent = send(
        &client,
        session.id,
        "call: status {\"description\": \"cut off\"}",
        Some(&format!("00-{trace_id}-b7ad6b7169203331-01")),
    )
    .await;
    // The process aborted once the tool ran.
    assert!(sent.is_err() || sent.is_ok_and(|answer| answer.status >= 500));
    let status = server.child.wait().expect("the service exited");
    assert!(!status.success(), "it aborted at the crash point: {status}");
    drop(server);

    let server = traced(&data, &endpoint, nodes);
    let client = server.client();
    let run_id = first_run(&client, session.id).await;
    succeeded(&client, run_id).await;
    terminate(server).await;

    let spans = received.spans();
    let adopted: Vec<&Span> = named(&spans, "invoke_agent seed")
        .into_iter()
        .filter(|span| text(span, "seed.run_id") == run_id.to_string())
        .collect();
    assert_eq!(adopted.len(), 1, "{:?}", names(&spans));
    let adopted = adopted[0];
    assert!(matches!(
        attribute(adopted, "seed.run.adopted"),
        Some(Any::BoolValue(true))
    ));
    // The link names the cut-off attempt's span, in the caller's trace.
    assert_eq!(adopted.links.len(), 1, "{adopted:?}");
    let link = &adopted.links[0];
    assert_eq!(hex(&link.trace_id), trace_id);
    assert_eq!(link.span_id.len(), 8);
    assert_ne!(link.span_id, adopted.span_id);
}

#[actix_web::test]
async fn an_export_that_fails_is_named_in_the_log() {
    let dir = tempfile::tempdir().expect("tempdir");
    // A port nothing listens on.
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("a free port");
    let endpoint = format!("http://{closed}");
    let log_path = dir.path().join("stderr.log");
    let log = std::fs::File::create(&log_path).expect("the log file");
    let server = Server::start_with_env(
        &dir.path().join("data"),
        &["--otlp-endpoint", &endpoint],
        &[("OTEL_BSP_SCHEDULE_DELAY", BATCH_DELAY_MS)],
        Stdio::from(log),
    );
    let client = server.client();
    let session = new_session(&client).await;
    let answer = send(&client, session.id, "hello", None)
        .await
        .expect("answered");
    assert_eq!(
        answer.status, 200,
        "a turn runs whatever becomes of its spans"
    );
    terminate(server).await;

    let log = std::fs::read_to_string(&log_path).expect("the log");
    assert!(
        log.lines()
            .any(|line| line.contains("opentelemetry") && line.contains("ExportError")),
        "the failed export is in the log:\n{log}"
    );
}

#[actix_web::test]
async fn with_no_endpoint_nothing_is_sent() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (endpoint, received) = receiver();
    // The exporter's own variable for the traces' URL names the receiver: were an exporter
    // built without --otlp-endpoint, it would send there.
    let traces_url = format!("{endpoint}/v1/traces");
    let server = Server::start_with_env(
        &dir.path().join("data"),
        &[],
        &[
            ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", traces_url.as_str()),
            ("OTEL_BSP_SCHEDULE_DELAY", "1"),
        ],
        Stdio::inherit(),
    );
    let client = server.client();
    let session = new_session(&client).await;
    let answer = send(
        &client,
        session.id,
        TWO_CALLS,
        Some("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"),
    )
    .await
    .expect("answered");
    assert_eq!(answer.status, 200);
    terminate(server).await;
    assert_eq!(received.n_requests(), 0);
    assert!(received.spans().is_empty());
}

#[actix_web::test]
async fn a_run_that_awaited_an_approval_shows_the_wait_as_its_own_span() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (endpoint, received) = receiver();
    let server = traced(
        &dir.path().join("data"),
        &endpoint,
        &["--approval-required", "status"],
    );
    let client = server.client();
    let session = new_session(&client).await;
    let sent = send_unwaited(
        &client,
        session.id,
        "call: status {\"description\": \"approved\"}",
    )
    .await;
    let pending = crate::approvals::pending_approval(&client, session.id).await;
    let (status, _) = crate::approvals::decide(
        &client,
        session.id,
        &pending.call_id,
        json!({"decision": "approve"}),
    )
    .await;
    assert_eq!(status, 200);
    succeeded(&client, sent.run_id).await;
    terminate(server).await;

    let spans = received.spans();
    let passes: Vec<&Span> = named(&spans, "invoke_agent seed")
        .into_iter()
        .filter(|span| text(span, "seed.run_id") == sent.run_id.to_string())
        .collect();
    assert_eq!(passes.len(), 2, "the pass that parked, the pass after");
    let parked = passes
        .iter()
        .find(|span| text(span, "seed.run.outcome") == "parked")
        .expect("the pass that parked");
    let resumed = passes
        .iter()
        .find(|span| text(span, "seed.run.outcome") == "succeeded")
        .expect("the pass after the approval");
    let waited = one(&spans, "seed.run.awaiting_approval");
    assert_eq!(waited.parent_span_id, resumed.span_id);
    assert_eq!(waited.trace_id, resumed.trace_id);
    assert!(waited.end_time_unix_nano >= waited.start_time_unix_nano);
    // The pass after links to the one that parked, not adopted.
    assert_eq!(resumed.links.len(), 1);
    assert_eq!(resumed.links[0].span_id, parked.span_id);
    assert!(matches!(
        attribute(resumed, "seed.run.adopted"),
        Some(Any::BoolValue(false))
    ));
}

#[actix_web::test]
async fn a_continuation_is_a_span_under_its_tool_call_with_the_successor_and_the_projections_size()
{
    let dir = tempfile::tempdir().expect("tempdir");
    let (endpoint, received) = receiver();
    let server = traced(&dir.path().join("data"), &endpoint, &[]);
    let client = server.client();
    let session = new_session(&client).await;
    let answer = send(&client, session.id, "continue: Lisbon hotels", None)
        .await
        .expect("answered");
    assert_eq!(answer.status, 200);
    let sent: seed_server::api::MessageSessionResponse =
        serde_json::from_slice(&answer.body).expect("the send's answer");
    let successor = sent.continued_to_session_id.expect("continued");
    // The successor answers the message in a run of its own.
    succeeded(&client, first_run(&client, successor).await).await;
    terminate(server).await;

    let spans = received.spans();
    let continuation = one(&spans, "seed.continuation");
    assert_eq!(
        text(continuation, "seed.continuation.successor_session_id"),
        successor.to_string()
    );
    assert!(number(continuation, "seed.continuation.projection_bytes") > 0);
    let call = one(&spans, "execute_tool continue_session");
    let parent = spans
        .iter()
        .find(|span| span.span_id == continuation.parent_span_id)
        .map(|span| span.name.as_str());
    assert_eq!(parent, Some(call.name.as_str()));
    assert_eq!(continuation.trace_id, call.trace_id);
    // The successor's run continues the trace, under the continuation.
    let successor_run = run_of(&spans, successor);
    assert_eq!(successor_run.trace_id, continuation.trace_id);
    assert_eq!(successor_run.parent_span_id, continuation.span_id);
}

/// The span of the run of `session` (its only pass).
fn run_of(spans: &[Span], session: uuid::Uuid) -> &Span {
    let runs: Vec<&Span> = named(spans, "invoke_agent seed")
        .into_iter()
        .filter(|span| text(span, "gen_ai.conversation.id") == session.to_string())
        .collect();
    assert_eq!(runs.len(), 1, "one run span of {session}");
    runs[0]
}

#[actix_web::test]
async fn a_delegated_childs_run_continues_the_trace_under_its_delegate_call() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (endpoint, received) = receiver();
    let server = traced(&dir.path().join("data"), &endpoint, &[]);
    let client = server.client();
    let session = new_session(&client).await;
    let sent = send_unwaited(
        &client,
        session.id,
        "call: delegate {\"task\": \"look it up\"}",
    )
    .await;
    succeeded(&client, sent.run_id).await;
    terminate(server).await;

    let spans = received.spans();
    let call = one(&spans, "execute_tool delegate");
    let children: Vec<&Span> = named(&spans, "invoke_agent seed")
        .into_iter()
        .filter(|span| text(span, "gen_ai.conversation.id") != session.id.to_string())
        .collect();
    assert_eq!(children.len(), 1, "one child run span");
    assert_eq!(children[0].trace_id, call.trace_id);
    assert_eq!(children[0].parent_span_id, call.span_id);
}

#[actix_web::test]
async fn an_mcp_tool_call_names_its_server_and_an_error_result_is_an_error() {
    crate::mcp::install();
    let dir = tempfile::tempdir().expect("tempdir");
    let count_file = dir.path().join("count");
    let config = crate::mcp::config_file(
        dir.path(),
        json!({"py": crate::mcp::python_server(&count_file)}),
    );
    let (endpoint, received) = receiver();
    let config = config.to_str().expect("utf-8");
    let server = traced(&dir.path().join("data"), &endpoint, &["--mcp", config]);
    let client = server.client();
    let session = new_session(&client).await;
    let answer = send(
        &client,
        session.id,
        "call: py__count {}\ncall: py__fail {\"message\": \"boom\"}",
        None,
    )
    .await
    .expect("answered");
    assert_eq!(answer.status, 200);
    terminate(server).await;

    let spans = received.spans();
    let counted = one(&spans, "execute_tool py__count");
    assert_eq!(text(counted, "seed.mcp.server"), "py");
    assert_eq!(attribute(counted, "error.type"), None);
    let failed = one(&spans, "execute_tool py__fail");
    assert_eq!(text(failed, "seed.mcp.server"), "py");
    assert_eq!(text(failed, "error.type"), "tool_error");
}
