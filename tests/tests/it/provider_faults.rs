//! Both wire providers against a local server that fails the way model servers do, each case
//! through the HTTP shell: a connection closed after the response head and before the body is
//! retried; a JSON error in a `200` keeps the provider's words; and each failure's reason, in
//! plain words, says what happened and how many attempts it took.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use seed_providers::{
    Provider, ProviderConfig, ProviderError, ProviderErrorKind, ProviderKind, Request, RetryConfig,
    StreamEvent, TimeoutConfig, UserMessage,
};
use seed_tests::sse_server::{End, Reply, SseServer};
use seed_tests::wire_fixtures::{anthropic as an, openai as oa};
use serde_json::json;

const DELAY: Duration = Duration::from_millis(5);
const KINDS: [ProviderKind; 2] = [ProviderKind::Openai, ProviderKind::Anthropic];

/// A provider of `kind` for `server`: three attempts, short backoff.
fn provider(kind: ProviderKind, server: &SseServer) -> Arc<dyn Provider> {
    let config = ProviderConfig {
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
    };
    config.build().expect("the provider builds")
}

async fn collect(provider: &dyn Provider) -> Vec<StreamEvent> {
    let request = Request {
        reasoning: None,
        model: String::new(),
        system_prompt: "You are a test.".to_owned(),
        messages: vec![Arc::new(seed_providers::Message::User(UserMessage::new(
            "hello".to_owned(),
        )))],
        tools: Arc::from(Vec::new()),
        session_id: None,
    };
    provider.stream(request).collect().await
}

fn only_error(events: &[StreamEvent]) -> &ProviderError {
    match events {
        [StreamEvent::Error(error)] => error,
        other => panic!("the stream was not one error: {other:?}"),
    }
}

fn text_answer(kind: ProviderKind, pieces: &[&str]) -> Vec<String> {
    match kind {
        ProviderKind::Openai => oa::text_answer(pieces),
        _ => an::text_answer(pieces),
    }
}

/// `200` with the event stream's head, then the connection closes: no byte of the body.
fn head_then_close() -> Reply {
    Reply::Sse {
        pieces: Vec::new(),
        end: End::Cut,
    }
}

#[tokio::test]
async fn a_connection_closed_after_the_head_before_the_body_is_retried() {
    for kind in KINDS {
        let server = SseServer::start(vec![
            head_then_close(),
            Reply::sse(text_answer(kind, &["Hel", "lo"]), DELAY),
        ])
        .await
        .expect("server");
        let events = collect(provider(kind, &server).as_ref()).await;
        let text: String = events
            .iter()
            .filter_map(|event| match event {
                StreamEvent::TextDelta(text) => Some(text.as_str()),
                _ => None,
            })
            .collect();
        // One complete answer, its deltas once.
        assert_eq!(text, "Hello", "{kind}: {events:?}");
        match events.last() {
            Some(StreamEvent::Done(message)) => assert_eq!(message.text(), "Hello", "{kind}"),
            other => panic!("{kind}: {other:?}"),
        }
        assert_eq!(server.received().len(), 2, "{kind}");

        // Closed after the head every time: a failed connection, after every attempt.
        let server = SseServer::start(vec![head_then_close(); 3])
            .await
            .expect("server");
        let events = collect(provider(kind, &server).as_ref()).await;
        let error = only_error(&events);
        assert_eq!(error.kind, ProviderErrorKind::Transport, "{kind}");
        assert_eq!(error.attempts, Some(3), "{kind}");
        assert!(
            error.reason().starts_with(
                "the connection to the model server failed: gave up after 3 attempts: "
            ),
            "{kind}: {}",
            error.reason()
        );
        assert_eq!(server.received().len(), 3, "{kind}");
    }
}

#[tokio::test]
async fn a_json_error_in_a_200_keeps_the_providers_words() {
    // Anthropic's overload, as a body where the stream should be: retried as a 529 would be.
    let overloaded = || {
        Reply::status(
            200,
            json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
        )
    };
    let server = SseServer::start(vec![overloaded(), overloaded(), overloaded()])
        .await
        .expect("server");
    let events = collect(provider(ProviderKind::Anthropic, &server).as_ref()).await;
    let error = only_error(&events);
    assert_eq!(
        (&error.kind, error.message.as_str(), error.attempts),
        (
            &ProviderErrorKind::Http { status: 529 },
            "Overloaded",
            Some(3)
        )
    );
    assert_eq!(
        error.reason(),
        "the model server failed (529): gave up after 3 attempts: Overloaded"
    );
    assert_eq!(server.received().len(), 3);

    // An overload that passes: the next attempt's answer.
    let server = SseServer::start(vec![
        overloaded(),
        Reply::sse(an::text_answer(&["fine"]), DELAY),
    ])
    .await
    .expect("server");
    let events = collect(provider(ProviderKind::Anthropic, &server).as_ref()).await;
    assert!(
        matches!(events.last(), Some(StreamEvent::Done(message)) if message.text() == "fine"),
        "{events:?}"
    );

    // OpenAI's refusal of a model it does not have: not retried.
    let server = SseServer::start(vec![
        Reply::status(
            200,
            json!({"error": {"message": "The model `default-model` does not exist", "type": "invalid_request_error", "param": null, "code": "model_not_found"}}),
        ),
        Reply::sse(oa::text_answer(&["never"]), DELAY),
    ])
    .await
    .expect("server");
    let events = collect(provider(ProviderKind::Openai, &server).as_ref()).await;
    let error = only_error(&events);
    assert_eq!(
        (&error.kind, error.message.as_str()),
        (
            &ProviderErrorKind::Http { status: 400 },
            "The model `default-model` does not exist"
        )
    );
    assert_eq!(
        error.reason(),
        "the model server refused the request (400): The model `default-model` does not exist"
    );
    assert_eq!(server.received().len(), 1);
}

#[tokio::test]
async fn each_failure_says_why_in_plain_words() {
    for kind in KINDS {
        let body = |error_type: &str, message: &str| json!({"type": "error", "error": {"type": error_type, "message": message}});
        let rate_limited = || Reply::status(429, body("rate_limit_error", "Rate limit reached"));
        for (replies, reason, n_requests) in [
            (
                vec![Reply::status(
                    401,
                    body("authentication_error", "invalid x-api-key"),
                )],
                "the model server refused the key (401): invalid x-api-key",
                1,
            ),
            (
                vec![rate_limited(), rate_limited(), rate_limited()],
                "rate limited: gave up after 3 attempts: Rate limit reached",
                3,
            ),
            (
                vec![
                    Reply::Status {
                        status: 503,
                        headers: Vec::new(),
                        body: String::new(),
                    };
                    3
                ],
                "the model server failed (503): gave up after 3 attempts",
                3,
            ),
        ] {
            let server = SseServer::start(replies).await.expect("server");
            let events = collect(provider(kind, &server).as_ref()).await;
            assert_eq!(only_error(&events).reason(), reason, "{kind}");
            assert_eq!(server.received().len(), n_requests, "{kind}");
        }

        // A stream cut after part of the answer: not retried, and how long it ran.
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
        let events = collect(provider(kind, &server).as_ref()).await;
        let Some(StreamEvent::Error(error)) = events.last() else {
            panic!("{kind}: {events:?}");
        };
        assert_eq!(error.attempts, None, "{kind}");
        assert!(
            error.reason().starts_with("the stream was cut off after ")
                && error.reason().ends_with(" ms"),
            "{kind}: {}",
            error.reason()
        );
        assert_eq!(server.received().len(), 1, "{kind}");
    }
}
