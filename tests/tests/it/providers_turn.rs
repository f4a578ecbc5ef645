//! Whole turns through the durable harness with each wire provider against a loopback server:
//! a response with two tool calls, then the answer; the second request the server received
//! carries the first response exactly (thinking signature, tool call ids and arguments, the
//! results under the same ids). A response that breaks mid-way leaves its partial text in
//! `pi.live`; a stop mid-stream closes the connection.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use futures::future::BoxFuture;
use futures::stream::BoxStream;
use seed_durable::{
    Harness, HarnessConfig, MemoryFs, StopSignal, Tool, ToolOutput, ToolSet, TurnOutcome,
    TurnRequest,
};
use seed_providers::{
    AssistantBlock, Provider, ProviderConfig, ProviderErrorKind, ProviderKind, Request,
    RetryConfig, StreamEvent, ToolCall, ToolSpec,
};
use seed_tests::sse_server::{End, Reply, SseServer};
use seed_tests::wire_fixtures::{anthropic as an, openai as oa};
use serde_json::{Value, json};

const DELAY: Duration = Duration::from_millis(3);
const SIGNATURE: &str = "ErUBCkYIBRgCIkDr/+sig==\n\"quoted\" ünï";

/// `read` answers with the path it was given.
#[derive(Debug)]
struct Read;

impl Tool for Read {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "read".to_owned(),
            description: "Reads a file.".to_owned(),
            parameters: json!({"type": "object", "properties": {"path": {"type": "string"}}}),
        }
    }

    fn safe_to_repeat(&self) -> bool {
        true
    }

    fn call<'a>(&'a self, call: &'a ToolCall) -> BoxFuture<'a, ToolOutput> {
        let path = call.arguments["path"].as_str().unwrap_or("?").to_owned();
        Box::pin(async move { ToolOutput::ok(format!("contents of {path}")) })
    }
}

fn config(kind: ProviderKind, server: &SseServer) -> ProviderConfig {
    ProviderConfig {
        provider: kind,
        base_url: Some(match kind {
            ProviderKind::Openai => format!("{}/v1", server.url),
            _ => server.url.clone(),
        }),
        api_key: Some(seed_providers::ApiKey::new("test-key")),
        retry: RetryConfig {
            attempts_max: 1,
            ..RetryConfig::default()
        },
        ..ProviderConfig::default()
    }
}

async fn harness(kind: ProviderKind, server: &SseServer) -> Harness<MemoryFs, Arc<dyn Provider>> {
    harness_with(config(kind, server).build().expect("provider")).await
}

async fn harness_with(provider: Arc<dyn Provider>) -> Harness<MemoryFs, Arc<dyn Provider>> {
    let mut config = HarnessConfig::new("", "You are a test.");
    config.session_id = Some("session-1".to_owned());
    config.live_interval = Duration::ZERO;
    Harness::open(
        MemoryFs::new(),
        provider,
        ToolSet::new().with(Arc::new(Read)),
        config,
    )
    .await
    .expect("harness")
}

fn two_calls(kind: ProviderKind) -> Vec<String> {
    match kind {
        ProviderKind::Openai => vec![
            oa::role(),
            oa::reasoning("Two reads."),
            oa::text("Reading."),
            oa::call_start(0, "call_a", "read", "{\"pa"),
            oa::call_start(1, "call_b", "read", ""),
            oa::call_arguments(1, "{\"path\": \"b.md\"}"),
            oa::call_arguments(0, "th\": \"a.md\"}"),
            oa::finish("tool_calls"),
            oa::usage(800, 512, 30),
            oa::done(),
        ],
        _ => vec![
            an::message_start(20, 0, 900),
            an::thinking_start(0),
            an::thinking(0, "Two reads."),
            an::signature(0, SIGNATURE),
            an::block_stop(0),
            an::text_start(1),
            an::text(1, "Reading."),
            an::block_stop(1),
            an::tool_start(2, "call_a", "read"),
            an::tool_input(2, "{\"pa"),
            an::tool_input(2, "th\": \"a.md\"}"),
            an::block_stop(2),
            an::tool_start(3, "call_b", "read"),
            an::tool_input(3, "{\"path\": \"b.md\"}"),
            an::block_stop(3),
            an::message_delta("tool_use", 30),
            an::message_stop(),
        ],
    }
}

/// What the second request must carry of the first response, in the wire's own form.
fn expected_echo(kind: ProviderKind, body: &Value) {
    let messages = body["messages"].as_array().expect("messages");
    match kind {
        ProviderKind::Openai => {
            let assistant = messages
                .iter()
                .find(|message| message["role"] == "assistant")
                .expect("the first response is sent back");
            assert_eq!(assistant["content"], "Reading.");
            let calls = assistant["tool_calls"].as_array().expect("tool calls");
            assert_eq!(calls.len(), 2);
            for (call, (id, path)) in calls.iter().zip([("call_a", "a.md"), ("call_b", "b.md")]) {
                assert_eq!(call["id"], id);
                assert_eq!(call["type"], "function");
                assert_eq!(call["function"]["name"], "read");
                let arguments: Value = serde_json::from_str(
                    call["function"]["arguments"].as_str().expect("a json text"),
                )
                .expect("arguments parse");
                assert_eq!(arguments, json!({"path": path}));
            }
            let results: Vec<_> = messages
                .iter()
                .filter(|message| message["role"] == "tool")
                .map(|message| (message["tool_call_id"].clone(), message["content"].clone()))
                .collect();
            assert_eq!(
                results,
                [
                    (json!("call_a"), json!("contents of a.md")),
                    (json!("call_b"), json!("contents of b.md")),
                ]
            );
        }
        _ => {
            let assistant = messages
                .iter()
                .find(|message| message["role"] == "assistant")
                .expect("the first response is sent back");
            assert_eq!(
                assistant["content"],
                json!([
                    {"type": "thinking", "thinking": "Two reads.", "signature": SIGNATURE},
                    {"type": "text", "text": "Reading."},
                    {"type": "tool_use", "id": "call_a", "name": "read", "input": {"path": "a.md"}},
                    {"type": "tool_use", "id": "call_b", "name": "read", "input": {"path": "b.md"}},
                ])
            );
            let last = messages.last().expect("a last message");
            assert_eq!(last["role"], "user");
            let results: Vec<_> = last["content"]
                .as_array()
                .expect("blocks")
                .iter()
                .filter(|block| block["type"] == "tool_result")
                .map(|block| (block["tool_use_id"].clone(), block["content"].clone()))
                .collect();
            assert_eq!(
                results,
                [
                    (json!("call_a"), json!("contents of a.md")),
                    (json!("call_b"), json!("contents of b.md")),
                ]
            );
        }
    }
}

fn answer(kind: ProviderKind) -> Vec<String> {
    match kind {
        ProviderKind::Openai => oa::text_answer(&["Both ", "read."]),
        _ => an::text_answer(&["Both ", "read."]),
    }
}

#[tokio::test]
async fn a_turn_with_two_tool_calls_sends_the_first_response_back_exactly() {
    for kind in [ProviderKind::Openai, ProviderKind::Anthropic] {
        let server = SseServer::start(vec![
            Reply::sse(two_calls(kind), DELAY),
            Reply::sse(answer(kind), DELAY),
        ])
        .await
        .expect("server");
        let mut harness = harness(kind, &server).await;
        let outcome = harness
            .run_turn(TurnRequest::new("req-1", "read a.md and b.md"))
            .await
            .expect("turn");
        let TurnOutcome::Answered { message, .. } = outcome else {
            panic!("{kind}: {outcome:?}");
        };
        assert_eq!(message.text(), "Both read.");

        let received = server.received();
        assert_eq!(received.len(), 2, "{kind}");
        expected_echo(kind, &received[1].body);
        // The first request is a prefix of the second: the cache-stable prefix.
        let first = received[0].body["messages"].as_array().expect("messages");
        let second = received[1].body["messages"].as_array().expect("messages");
        assert_eq!(first[..], second[..first.len()], "{kind}");

        // The stored response is the provider's, exactly: what the store sends back later.
        let stored: Vec<_> = harness
            .state()
            .entries
            .iter()
            .filter_map(|entry| match &entry.body {
                seed_durable::EntryBody::Assistant { message, .. } => Some(message.clone()),
                _ => None,
            })
            .collect();
        assert_eq!(stored.len(), 2);
        let first_stored = &stored[0];
        assert_eq!(first_stored.tool_calls().len(), 2);
        match kind {
            ProviderKind::Openai => {
                assert_eq!(first_stored.usage.cache_read, 512);
                assert_eq!(first_stored.usage.input, 288);
            }
            _ => {
                assert_eq!(
                    first_stored.content[0],
                    AssistantBlock::Thinking {
                        thinking: "Two reads.".to_owned(),
                        signature: Some(SIGNATURE.to_owned()),
                    }
                );
                assert_eq!(first_stored.usage.cache_write, 900);
                assert_eq!(first_stored.model, an::MODEL);
            }
        }
    }
}

#[tokio::test]
async fn a_response_that_breaks_midway_keeps_its_partial_text_in_pi_live() {
    for kind in [ProviderKind::Openai, ProviderKind::Anthropic] {
        let mut pieces = answer(kind);
        pieces.truncate(match kind {
            ProviderKind::Openai => 2,
            _ => 4,
        });
        let server = SseServer::start(vec![Reply::Sse {
            pieces: pieces.into_iter().map(|piece| (DELAY, piece)).collect(),
            end: End::Cut,
        }])
        .await
        .expect("server");
        let mut harness = harness(kind, &server).await;
        let outcome = harness
            .run_turn(TurnRequest::new("req-1", "hello"))
            .await
            .expect("turn");
        let TurnOutcome::Failed {
            error,
            partial_text,
        } = outcome
        else {
            panic!("{kind}: {outcome:?}");
        };
        assert_eq!(error.kind, ProviderErrorKind::Transport, "{kind}");
        assert_eq!(partial_text, "Both ");
        let live = harness.state().live().expect("pi.live");
        assert_eq!(live.text, "Both ", "{kind}");
    }
}

/// Passes its provider's events on and fires the stop at the first text delta: a user pressing
/// stop while the answer streams (the server then holds the stream open, sending nothing).
struct StopOnFirstDelta {
    inner: Arc<dyn Provider>,
    stop: StopSignal,
}

impl Provider for StopOnFirstDelta {
    fn stream(&self, request: Request) -> BoxStream<'static, StreamEvent> {
        let stop = self.stop.clone();
        self.inner
            .stream(request)
            .inspect(move |event| {
                if matches!(event, StreamEvent::TextDelta(_)) {
                    stop.stop();
                }
            })
            .boxed()
    }
}

#[tokio::test]
async fn a_stop_mid_stream_closes_the_connection() {
    for kind in [ProviderKind::Openai, ProviderKind::Anthropic] {
        let mut pieces = answer(kind);
        pieces.truncate(match kind {
            ProviderKind::Openai => 2,
            _ => 4,
        });
        let server = SseServer::start(vec![Reply::Sse {
            pieces: pieces.into_iter().map(|piece| (DELAY, piece)).collect(),
            end: End::Hang,
        }])
        .await
        .expect("server");
        let stop = StopSignal::new();
        let inner = config(kind, &server).build().expect("provider");
        let mut harness = harness_with(Arc::new(StopOnFirstDelta {
            inner,
            stop: stop.clone(),
        }))
        .await;
        let mut request = TurnRequest::new("req-1", "hello");
        request.stop = stop.clone();
        let outcome = harness.run_turn(request).await.expect("turn");
        assert_eq!(
            outcome,
            TurnOutcome::Stopped {
                partial_text: "Both ".to_owned()
            },
            "{kind}"
        );
        assert_eq!(
            server.wait_closed(Duration::from_secs(5)).await,
            Some(0),
            "{kind}: the server never saw the connection close"
        );
    }
}
