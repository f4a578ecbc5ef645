//! Both wire providers against a local server that streams real SSE with delays: text, tool
//! calls with fragmented arguments, thinking with tool use, usage with cache fields, retries
//! (429 then success, retry-after honoured), a 400 not retried, a stream cut mid-way, a
//! malformed chunk, a stop during streaming (the server sees the close), an idle timeout.

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use seed_providers::{
    AssistantBlock, AssistantMessage, Message, Provider, ProviderConfig, ProviderError,
    ProviderErrorKind, ProviderKind, Request, RetryConfig, StopReason, StreamEvent, TimeoutConfig,
    ToolCall, ToolSpec, Usage, UserMessage,
};
use seed_tests::sse_server::{End, Reply, SseServer};
use seed_tests::wire_fixtures::{anthropic as an, openai as oa};
use serde_json::json;

const DELAY: Duration = Duration::from_millis(5);
const KINDS: [ProviderKind; 2] = [ProviderKind::Openai, ProviderKind::Anthropic];

fn config(kind: ProviderKind, server: &SseServer) -> ProviderConfig {
    ProviderConfig {
        provider: kind,
        base_url: Some(match kind {
            ProviderKind::Openai => format!("{}/v1", server.url),
            _ => server.url.clone(),
        }),
        api_key: Some(seed_providers::ApiKey::new("test-key")),
        model: Some("default-model".to_owned()),
        retry: RetryConfig {
            attempts_max: 3,
            backoff_initial_ms: 20,
            backoff_max_ms: 100,
            retry_after_max_ms: 5_000,
        },
        timeouts: TimeoutConfig {
            connect_timeout_ms: 2_000,
            idle_timeout_ms: 5_000,
            request_timeout_ms: None,
        },
        ..ProviderConfig::default()
    }
}

fn provider(config: &ProviderConfig) -> Arc<dyn Provider> {
    config.build().expect("the provider builds")
}

fn request(model: &str) -> Request {
    Request {
        reasoning: None,
        model: model.to_owned(),
        system_prompt: "You are a test.".to_owned(),
        messages: vec![Arc::new(Message::User(UserMessage::new(
            "hello".to_owned(),
        )))],
        tools: Arc::from(vec![ToolSpec {
            name: "read".to_owned(),
            description: "reads a file".to_owned(),
            parameters: json!({"type": "object", "properties": {"path": {"type": "string"}}}),
        }]),
        session_id: Some("session-42".to_owned()),
    }
}

async fn collect(provider: &dyn Provider, request: Request) -> Vec<StreamEvent> {
    provider.stream(request).collect().await
}

fn done(events: &[StreamEvent]) -> &AssistantMessage {
    match events.last() {
        Some(StreamEvent::Done(message)) => message,
        other => panic!("the stream did not end with Done: {other:?} (all: {events:?})"),
    }
}

fn error(events: &[StreamEvent]) -> &ProviderError {
    match events.last() {
        Some(StreamEvent::Error(error)) => error,
        other => panic!("the stream did not end with Error: {other:?} (all: {events:?})"),
    }
}

fn text_deltas(events: &[StreamEvent]) -> String {
    events
        .iter()
        .filter_map(|event| match event {
            StreamEvent::TextDelta(text) => Some(text.as_str()),
            _ => None,
        })
        .collect()
}

fn text_answer(kind: ProviderKind, pieces: &[&str]) -> Vec<String> {
    match kind {
        ProviderKind::Openai => oa::text_answer(pieces),
        _ => an::text_answer(pieces),
    }
}

#[tokio::test]
async fn plain_text_streams_in_deltas_with_the_wire_facts_on_the_request() {
    for kind in KINDS {
        let pieces = ["Hel", "lo ", "wörld", "!"];
        let server = SseServer::start(vec![
            Reply::sse(text_answer(kind, &pieces), DELAY),
            Reply::sse(text_answer(kind, &["again"]), DELAY),
        ])
        .await
        .expect("server");
        let config = config(kind, &server);
        let provider = provider(&config);
        let events = collect(provider.as_ref(), request("")).await;
        let deltas: Vec<_> = events
            .iter()
            .filter(|event| matches!(event, StreamEvent::TextDelta(_)))
            .collect();
        assert_eq!(deltas.len(), pieces.len(), "{kind}: {events:?}");
        assert_eq!(text_deltas(&events), "Hello wörld!");
        let message = done(&events);
        assert_eq!(message.text(), "Hello wörld!");
        assert_eq!(message.stop_reason, StopReason::Stop);

        // A session's own model goes on the wire instead of the default.
        let events = collect(provider.as_ref(), request("session-model")).await;
        assert_eq!(done(&events).text(), "again");

        let received = server.received();
        assert_eq!(received.len(), 2);
        assert_eq!(received[0].method, "POST");
        assert_eq!(received[0].body["model"], "default-model", "{kind}");
        assert_eq!(received[1].body["model"], "session-model", "{kind}");
        assert_eq!(received[0].body["stream"], true);
        match kind {
            ProviderKind::Openai => {
                assert_eq!(received[0].path, "/v1/chat/completions");
                assert_eq!(received[0].header("authorization"), Some("Bearer test-key"));
                assert_eq!(
                    received[0].body["stream_options"],
                    json!({"include_usage": true})
                );
                // Session affinity.
                assert_eq!(received[0].body["prompt_cache_key"], "session-42");
            }
            _ => {
                assert_eq!(received[0].path, "/v1/messages");
                assert_eq!(received[0].header("x-api-key"), Some("test-key"));
                assert_eq!(received[0].header("anthropic-version"), Some("2023-06-01"));
                assert_eq!(received[0].body["metadata"]["user_id"], "session-42");
                // Prompt-caching marks on the stable prefix: the system prompt, the last tool.
                assert_eq!(
                    received[0].body["system"][0]["cache_control"],
                    json!({"type": "ephemeral"})
                );
                assert_eq!(
                    received[0].body["tools"][0]["cache_control"],
                    json!({"type": "ephemeral"})
                );
            }
        }
    }
}

#[tokio::test]
async fn several_tool_calls_with_fragmented_arguments() {
    let openai = vec![
        oa::role(),
        oa::text("Reading both."),
        oa::call_start(0, "call_a", "read", ""),
        oa::call_start(1, "call_b", "read", "{\"pa"),
        oa::call_arguments(0, "{\"path\":"),
        oa::call_arguments(1, "th\": \"b.md\"}"),
        oa::call_arguments(0, " \"a.md\"}"),
        oa::finish("tool_calls"),
        oa::usage(1500, 1024, 40),
        oa::done(),
    ];
    let anthropic = vec![
        an::message_start(20, 1400, 80),
        an::text_start(0),
        an::text(0, "Reading both."),
        an::block_stop(0),
        an::tool_start(1, "call_a", "read"),
        an::tool_input(1, "{\"path\":"),
        an::ping(),
        an::tool_input(1, " \"a.md\"}"),
        an::block_stop(1),
        an::tool_start(2, "call_b", "read"),
        an::tool_input(2, "{\"pa"),
        an::tool_input(2, "th\": \"b.md\"}"),
        an::block_stop(2),
        an::message_delta("tool_use", 40),
        an::message_stop(),
    ];
    for (kind, pieces, usage) in [
        (
            ProviderKind::Openai,
            openai,
            Usage {
                input: 476,
                output: 40,
                cache_read: 1024,
                cache_write: 0,
                ..Default::default()
            },
        ),
        (
            ProviderKind::Anthropic,
            anthropic,
            Usage {
                input: 20,
                output: 40,
                cache_read: 1400,
                cache_write: 80,
                ..Default::default()
            },
        ),
    ] {
        let server = SseServer::start(vec![Reply::sse(pieces, DELAY)])
            .await
            .expect("server");
        let events = collect(provider(&config(kind, &server)).as_ref(), request("")).await;
        let calls = [
            ToolCall {
                id: "call_a".to_owned(),
                name: "read".to_owned(),
                arguments: json!({"path": "a.md"}),
            },
            ToolCall {
                id: "call_b".to_owned(),
                name: "read".to_owned(),
                arguments: json!({"path": "b.md"}),
            },
        ];
        let emitted: Vec<_> = events
            .iter()
            .filter_map(|event| match event {
                StreamEvent::ToolCall(call) => Some(call.clone()),
                _ => None,
            })
            .collect();
        assert_eq!(emitted, calls, "{kind}");
        let message = done(&events);
        assert_eq!(
            message.tool_calls(),
            calls.iter().collect::<Vec<_>>(),
            "{kind}"
        );
        assert_eq!(message.text(), "Reading both.");
        assert_eq!(message.stop_reason, StopReason::ToolUse);
        // Usage with the cache fields, mapped to ours.
        assert_eq!(message.usage, usage, "{kind}");
        assert!(events.contains(&StreamEvent::Usage(usage)), "{kind}");
    }
}

#[tokio::test]
async fn anthropic_thinking_plus_tool_use_keeps_the_signature_exactly() {
    let signature = "EpYBCkgIBxABGAIiQL+/sig==\\u00fc\n ünï";
    let server = SseServer::start(vec![Reply::sse(
        [
            an::message_start(30, 0, 2048),
            an::thinking_start(0),
            an::thinking(0, "The user wants "),
            an::ping(),
            an::thinking(0, "a file."),
            an::signature(0, signature),
            an::block_stop(0),
            an::tool_start(1, "toolu_01", "read"),
            an::tool_input(1, "{\"path\": \"notes.md\"}"),
            an::block_stop(1),
            an::message_delta("tool_use", 64),
            an::message_stop(),
        ],
        DELAY,
    )])
    .await
    .expect("server");
    let events = collect(
        provider(&config(ProviderKind::Anthropic, &server)).as_ref(),
        request(""),
    )
    .await;
    assert!(events.contains(&StreamEvent::ThinkingDelta("The user wants ".to_owned())));
    let message = done(&events);
    assert_eq!(
        message.content,
        [
            AssistantBlock::Thinking {
                thinking: "The user wants a file.".to_owned(),
                signature: Some(signature.to_owned()),
            },
            AssistantBlock::ToolCall(ToolCall {
                id: "toolu_01".to_owned(),
                name: "read".to_owned(),
                arguments: json!({"path": "notes.md"}),
            }),
        ]
    );
    assert_eq!(message.model, an::MODEL);
    assert_eq!(
        message.usage,
        Usage {
            input: 30,
            output: 64,
            cache_read: 0,
            cache_write: 2048,
            ..Default::default()
        }
    );
}

#[tokio::test]
async fn openai_reasoning_text_streams_as_thinking() {
    let server = SseServer::start(vec![Reply::sse(
        [
            oa::role(),
            oa::reasoning("Think "),
            oa::reasoning("first."),
            oa::text("Answer."),
            oa::finish("stop"),
            oa::usage(10, 0, 5),
            oa::done(),
        ],
        DELAY,
    )])
    .await
    .expect("server");
    let events = collect(
        provider(&config(ProviderKind::Openai, &server)).as_ref(),
        request(""),
    )
    .await;
    assert_eq!(
        done(&events).content,
        [
            AssistantBlock::Thinking {
                thinking: "Think first.".to_owned(),
                signature: None,
            },
            AssistantBlock::Text {
                text: "Answer.".to_owned()
            },
        ]
    );
}

fn rate_limited(kind: ProviderKind, retry_after: &str) -> Reply {
    let body = match kind {
        ProviderKind::Openai => {
            json!({"error": {"message": "Rate limit reached", "type": "requests"}})
        }
        _ => {
            json!({"type": "error", "error": {"type": "rate_limit_error", "message": "Rate limit reached"}})
        }
    };
    Reply::Status {
        status: 429,
        headers: vec![("retry-after".to_owned(), retry_after.to_owned())],
        body: body.to_string(),
    }
}

#[tokio::test]
async fn a_429_is_retried_after_the_servers_retry_after() {
    for kind in KINDS {
        let server = SseServer::start(vec![
            rate_limited(kind, "1"),
            Reply::sse(text_answer(kind, &["fine"]), DELAY),
        ])
        .await
        .expect("server");
        // The backoff alone would wait 4 s: finishing in between shows retry-after was used.
        let mut config = config(kind, &server);
        config.retry.backoff_initial_ms = 4_000;
        config.retry.backoff_max_ms = 4_000;
        let started = Instant::now();
        let events = collect(provider(&config).as_ref(), request("")).await;
        let elapsed = started.elapsed();
        assert_eq!(done(&events).text(), "fine", "{kind}");
        assert_eq!(server.received().len(), 2, "{kind}");
        assert!(
            elapsed >= Duration::from_secs(1) && elapsed < Duration::from_secs(3),
            "{kind}: {elapsed:?}"
        );
    }
}

#[tokio::test]
async fn server_errors_are_retried_a_bounded_number_of_times() {
    for kind in KINDS {
        let overloaded = || Reply::status(503, json!({"error": {"message": "overloaded"}}));
        let server = SseServer::start(vec![overloaded(), overloaded(), overloaded(), overloaded()])
            .await
            .expect("server");
        let events = collect(provider(&config(kind, &server)).as_ref(), request("")).await;
        assert_eq!(
            (&error(&events).kind, error(&events).message.as_str()),
            (&ProviderErrorKind::Http { status: 503 }, "overloaded")
        );
        assert_eq!(error(&events).attempts, Some(3), "{kind}");
        assert_eq!(events.len(), 1);
        // attempts_max is 3.
        assert_eq!(server.received().len(), 3, "{kind}");
    }
}

#[tokio::test]
async fn a_400_is_not_retried_and_says_what_the_provider_said() {
    for kind in KINDS {
        let body = match kind {
            ProviderKind::Openai => {
                json!({"error": {"message": "Invalid 'messages[1].content': expected a string.", "type": "invalid_request_error", "param": "messages", "code": null}})
            }
            _ => {
                json!({"type": "error", "error": {"type": "invalid_request_error", "message": "Invalid 'messages[1].content': expected a string."}})
            }
        };
        let server = SseServer::start(vec![
            Reply::status(400, body),
            Reply::sse(text_answer(kind, &["never"]), DELAY),
        ])
        .await
        .expect("server");
        let events = collect(provider(&config(kind, &server)).as_ref(), request("")).await;
        assert_eq!(
            (&error(&events).kind, error(&events).message.as_str()),
            (
                &ProviderErrorKind::Http { status: 400 },
                "Invalid 'messages[1].content': expected a string."
            ),
            "{kind}"
        );
        assert_eq!(error(&events).attempts, Some(1), "{kind}");
        assert_eq!(server.received().len(), 1, "{kind}");
    }
}

#[tokio::test]
async fn a_stream_cut_midway_ends_as_an_error_after_what_arrived() {
    for kind in KINDS {
        let mut pieces = text_answer(kind, &["Partial ", "answer", " never finished"]);
        pieces.truncate(match kind {
            ProviderKind::Openai => 3,
            _ => 5,
        });
        let server = SseServer::start(vec![Reply::Sse {
            pieces: pieces.into_iter().map(|piece| (DELAY, piece)).collect(),
            end: End::Cut,
        }])
        .await
        .expect("server");
        let events = collect(provider(&config(kind, &server)).as_ref(), request("")).await;
        assert_eq!(text_deltas(&events), "Partial answer", "{kind}: {events:?}");
        assert_eq!(error(&events).kind, ProviderErrorKind::Transport, "{kind}");
    }
}

#[tokio::test]
async fn a_malformed_chunk_ends_as_an_error_after_what_arrived() {
    for kind in KINDS {
        let mut pieces = text_answer(kind, &["Before ", "the break", " and after"]);
        let at = match kind {
            ProviderKind::Openai => 3,
            _ => 5,
        };
        pieces.insert(
            at,
            "data: {\"choices\": [{\"delta\": {\"content\": \"x\"\n\n".to_owned(),
        );
        let server = SseServer::start(vec![Reply::sse(pieces, DELAY)])
            .await
            .expect("server");
        let events = collect(provider(&config(kind, &server)).as_ref(), request("")).await;
        assert_eq!(
            text_deltas(&events),
            "Before the break",
            "{kind}: {events:?}"
        );
        assert_eq!(error(&events).kind, ProviderErrorKind::Malformed, "{kind}");
    }
}

#[tokio::test]
async fn an_anthropic_error_event_mid_stream_ends_the_response() {
    let mut pieces = an::text_answer(&["Half", " way"]);
    pieces.insert(4, an::error("overloaded_error", "Overloaded"));
    let server = SseServer::start(vec![Reply::sse(pieces, DELAY)])
        .await
        .expect("server");
    let events = collect(
        provider(&config(ProviderKind::Anthropic, &server)).as_ref(),
        request(""),
    )
    .await;
    assert_eq!(text_deltas(&events), "Half");
    assert_eq!(
        *error(&events),
        ProviderError::new(ProviderErrorKind::Http { status: 529 }, "Overloaded")
    );
}

#[tokio::test]
async fn dropping_the_stream_closes_the_connection() {
    for kind in KINDS {
        let mut pieces = text_answer(kind, &["one ", "two ", "three"]);
        pieces.truncate(4);
        let server = SseServer::start(vec![Reply::Sse {
            pieces: pieces.into_iter().map(|piece| (DELAY, piece)).collect(),
            end: End::Hang,
        }])
        .await
        .expect("server");
        let provider = provider(&config(kind, &server));
        let mut stream = provider.stream(request(""));
        let first = loop {
            match stream.next().await {
                Some(StreamEvent::TextDelta(text)) => break text,
                Some(StreamEvent::Usage(_)) => continue,
                other => panic!("{kind}: {other:?}"),
            }
        };
        assert_eq!(first, "one ");
        // Nothing more is coming; the stop drops the stream.
        assert!(
            server
                .wait_closed(Duration::from_millis(100))
                .await
                .is_none()
        );
        let stopped_at = Instant::now();
        drop(stream);
        assert_eq!(
            server.wait_closed(Duration::from_secs(5)).await,
            Some(0),
            "{kind}: the server never saw the connection close"
        );
        assert!(stopped_at.elapsed() < Duration::from_secs(1), "{kind}");
    }
}

#[tokio::test]
async fn a_silent_server_times_out() {
    for kind in KINDS {
        let mut pieces = text_answer(kind, &["slow"]);
        pieces.truncate(2);
        let server = SseServer::start(vec![Reply::Sse {
            pieces: pieces.into_iter().map(|piece| (DELAY, piece)).collect(),
            end: End::Hang,
        }])
        .await
        .expect("server");
        let mut config = config(kind, &server);
        config.timeouts.idle_timeout_ms = 300;
        let started = Instant::now();
        let events = collect(provider(&config).as_ref(), request("")).await;
        assert_eq!(
            error(&events).kind,
            ProviderErrorKind::Timeout,
            "{kind}: {events:?}"
        );
        assert!(started.elapsed() < Duration::from_secs(3), "{kind}");
    }
}

#[tokio::test]
async fn a_request_over_its_whole_time_limit_times_out() {
    for kind in KINDS {
        // A delta every 50 ms keeps the idle timeout from firing; the request's limit does.
        let mut pieces = text_answer(kind, &["slow"]);
        pieces.truncate(2);
        let delta = match kind {
            ProviderKind::Openai => oa::text("."),
            _ => an::text(0, "."),
        };
        let mut pieces: Vec<_> = pieces.into_iter().map(|piece| (DELAY, piece)).collect();
        pieces.extend((0..100).map(|_| (Duration::from_millis(50), delta.clone())));
        let server = SseServer::start(vec![Reply::Sse {
            pieces,
            end: End::Hang,
        }])
        .await
        .expect("server");
        let mut config = config(kind, &server);
        config.timeouts.idle_timeout_ms = 1_000;
        config.timeouts.request_timeout_ms = Some(400);
        let started = Instant::now();
        let events = collect(provider(&config).as_ref(), request("")).await;
        assert_eq!(
            error(&events).kind,
            ProviderErrorKind::Timeout,
            "{kind}: {events:?}"
        );
        assert!(text_deltas(&events).ends_with(".."), "{kind}: {events:?}");
        assert!(started.elapsed() < Duration::from_secs(3), "{kind}");
    }
}

#[tokio::test]
async fn nothing_listening_is_a_transport_error_after_the_retries() {
    for kind in KINDS {
        let server = SseServer::start(Vec::new()).await.expect("server");
        let mut config = config(kind, &server);
        drop(server);
        config.base_url = Some("http://127.0.0.1:9".to_owned());
        let events = collect(provider(&config).as_ref(), request("")).await;
        assert_eq!(error(&events).kind, ProviderErrorKind::Transport, "{kind}");
    }
}
