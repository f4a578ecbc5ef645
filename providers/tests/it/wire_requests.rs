//! What each wire provider puts on the wire, asserted by a wiremock server: the path, the auth
//! and version headers, the body's session affinity, caching marks and model, and that a 429
//! is retried after its `retry-after` while a 401 is not retried at all.

use std::sync::Arc;

use futures::StreamExt;
use seed_providers::{
    ApiKey, Message, ProviderConfig, ProviderErrorKind, ProviderKind, Request, RetryConfig,
    StreamEvent, ToolSpec, UserMessage,
};
use serde_json::json;
use wiremock::matchers::{body_partial_json, header, method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

fn request() -> Request {
    Request {
        reasoning: None,
        model: "session-model".to_owned(),
        system_prompt: "Be brief.".to_owned(),
        messages: vec![Arc::new(Message::User(UserMessage::new("hi".to_owned())))],
        tools: Arc::from(vec![ToolSpec {
            name: "read".to_owned(),
            description: "reads".to_owned(),
            parameters: json!({"type": "object"}),
        }]),
        session_id: Some("s-1".to_owned()),
    }
}

fn config(kind: ProviderKind, server: &MockServer) -> ProviderConfig {
    ProviderConfig {
        provider: kind,
        base_url: Some(match kind {
            ProviderKind::Openai => format!("{}/v1", server.uri()),
            _ => server.uri(),
        }),
        api_key: Some(ApiKey::new("k-123")),
        model: Some("default-model".to_owned()),
        retry: RetryConfig {
            attempts_max: 3,
            backoff_initial_ms: 10_000,
            backoff_max_ms: 10_000,
            retry_after_max_ms: 1_000,
        },
        ..ProviderConfig::default()
    }
}

fn sse(kind: ProviderKind) -> String {
    match kind {
        ProviderKind::Openai => concat!(
            "data: {\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"ok\"},\"finish_reason\":\"stop\"}]}\n\n",
            "data: {\"model\":\"m\",\"choices\":[],\"usage\":{\"prompt_tokens\":5,\"completion_tokens\":1}}\n\n",
            "data: [DONE]\n\n",
        )
        .to_owned(),
        _ => concat!(
            "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"model\":\"m\",\"usage\":{\"input_tokens\":5,\"output_tokens\":1}}}\n\n",
            "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n",
            "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"ok\"}}\n\n",
            "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n",
            "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":1}}\n\n",
            "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
        )
        .to_owned(),
    }
}

fn streamed(kind: ProviderKind) -> ResponseTemplate {
    ResponseTemplate::new(200)
        .insert_header("content-type", "text/event-stream")
        .set_body_string(sse(kind))
}

async fn run(config: &ProviderConfig) -> Vec<StreamEvent> {
    let provider = config.build().expect("builds");
    provider.stream(request()).collect().await
}

#[tokio::test]
async fn openai_request_on_the_wire() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .and(header("authorization", "Bearer k-123"))
        .and(header("content-type", "application/json"))
        .and(body_partial_json(json!({
            "model": "session-model",
            "stream": true,
            "stream_options": {"include_usage": true},
            "prompt_cache_key": "s-1",
            "messages": [
                {"role": "system", "content": "Be brief."},
                {"role": "user", "content": "hi"},
            ],
        })))
        .respond_with(streamed(ProviderKind::Openai))
        .expect(1)
        .mount(&server)
        .await;
    let events = run(&config(ProviderKind::Openai, &server)).await;
    assert!(
        matches!(events.last(), Some(StreamEvent::Done(message)) if message.text() == "ok"),
        "{events:?}"
    );
}

#[tokio::test]
async fn anthropic_request_on_the_wire() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/messages"))
        .and(header("x-api-key", "k-123"))
        .and(header("anthropic-version", "2023-06-01"))
        .and(body_partial_json(json!({
            "model": "session-model",
            "stream": true,
            "metadata": {"user_id": "s-1"},
            "system": [{"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}],
            "tools": [{"name": "read", "cache_control": {"type": "ephemeral"}}],
        })))
        .respond_with(streamed(ProviderKind::Anthropic))
        .expect(1)
        .mount(&server)
        .await;
    let events = run(&config(ProviderKind::Anthropic, &server)).await;
    assert!(
        matches!(events.last(), Some(StreamEvent::Done(message)) if message.text() == "ok"),
        "{events:?}"
    );
}

#[tokio::test]
async fn a_429_is_retried_after_retry_after_and_a_401_is_not() {
    for kind in [ProviderKind::Openai, ProviderKind::Anthropic] {
        let server = MockServer::start().await;
        Mock::given(method("POST"))
            .respond_with(
                ResponseTemplate::new(429)
                    .insert_header("retry-after", "0")
                    .set_body_json(json!({"error": {"message": "slow down"}})),
            )
            .up_to_n_times(2)
            .expect(2)
            .mount(&server)
            .await;
        Mock::given(method("POST"))
            .respond_with(streamed(kind))
            .expect(1)
            .mount(&server)
            .await;
        // The backoff would wait 10 s per retry: retry-after 0 is honoured, or this times out.
        let events = tokio::time::timeout(
            std::time::Duration::from_secs(5),
            run(&config(kind, &server)),
        )
        .await
        .expect("retry-after was honoured");
        assert!(
            matches!(events.last(), Some(StreamEvent::Done(_))),
            "{kind}: {events:?}"
        );

        let server = MockServer::start().await;
        Mock::given(method("POST"))
            .respond_with(ResponseTemplate::new(401).set_body_json(
                json!({"error": {"type": "authentication_error", "message": "invalid x-api-key"}}),
            ))
            .expect(1)
            .mount(&server)
            .await;
        let events = run(&config(kind, &server)).await;
        let Some(StreamEvent::Error(error)) = events.last() else {
            panic!("{kind}: {events:?}");
        };
        assert_eq!(error.kind, ProviderErrorKind::Http { status: 401 });
        assert_eq!(error.message, "invalid x-api-key");
    }
}
