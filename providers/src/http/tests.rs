//! The HTTP shell's tests: retries, timeouts, SSE framing, errors in the body.

use super::*;

fn retry() -> RetryConfig {
    RetryConfig {
        attempts_max: 4,
        backoff_initial_ms: 500,
        backoff_max_ms: 8_000,
        retry_after_max_ms: 30_000,
    }
}

/// Echoes each event's data as a text delta; `data: done` ends the response, `data: fail`
/// fails it; at the body's end it pushes `at_end`.
struct Echo {
    at_end: Vec<StreamEvent>,
}

impl Decoder for Echo {
    fn event(&mut self, _event: &str, data: &str, out: &mut Vec<StreamEvent>) {
        match data {
            "done" => out.push(StreamEvent::Done(crate::scripted::text_response("ok"))),
            "fail" => out.push(StreamEvent::Error(ProviderError::new(
                ProviderErrorKind::Transport,
                "failed",
            ))),
            other => out.push(StreamEvent::TextDelta(other.to_owned())),
        }
    }

    fn end(&mut self, out: &mut Vec<StreamEvent>) {
        out.append(&mut self.at_end);
    }
}

#[test]
fn a_stream_ends_once() {
    let echo = |at_end| Echo { at_end };
    let delta = |text: &str| StreamEvent::TextDelta(text.to_owned());
    // Nothing follows a terminal event, not even the rest of the body.
    let events = decode_all(
        "data: a\n\ndata: fail\n\ndata: b\n\ndata: done\n\n",
        3,
        echo(vec![]),
    );
    assert_eq!(events.len(), 2, "{events:?}");
    assert_eq!(events[0], delta("a"));
    // The body's end ends the stream whatever the decoder pushes then, even nothing.
    assert_eq!(decode_all("data: a\n\n", 4, echo(vec![])), [delta("a")]);
    assert_eq!(
        decode_all("data: a\n\n", 4, echo(vec![delta("end")])),
        [delta("a"), delta("end")]
    );
    // Bytes that are not UTF-8 end it as malformed, after what arrived.
    let chunks = vec![
        b"data: a\n\n".to_vec(),
        vec![b'd', 0xff, 0xfe, b'\n', b'\n'],
    ];
    let events: Vec<_> = futures::executor::block_on(decode_chunks(chunks, echo(vec![])).collect());
    assert_eq!(events[0], delta("a"));
    assert!(
        matches!(&events[1], StreamEvent::Error(error) if error.kind == ProviderErrorKind::Malformed),
        "{events:?}"
    );
    assert_eq!(events.len(), 2);
}

#[test]
fn a_stream_that_began_records_how_long_it_ran_when_it_breaks() {
    let began_at = Instant::now().checked_sub(Duration::from_millis(3_000));
    assert!(began_at.is_some(), "the clock reaches back 3 s");
    let cut = || {
        vec![StreamEvent::Error(ProviderError::new(
            ProviderErrorKind::Transport,
            "the stream ended before the response finished",
        ))]
    };
    let run = |sse: &str, at_end, began_at| {
        let chunks = vec![sse.as_bytes().to_vec()];
        let body = stream::iter(chunks.into_iter().map(Ok::<_, Infallible>));
        let events: Vec<_> =
            futures::executor::block_on(decode_since(body, Echo { at_end }, began_at).collect());
        match events.last() {
            Some(StreamEvent::Error(error)) => error.clone(),
            other => panic!("{other:?}"),
        }
    };
    // The body ended before the answer finished: the time since it began.
    let error = run("data: a\n\n", cut(), began_at);
    assert!(error.elapsed_ms.is_some_and(|ms| ms >= 3_000), "{error:?}");
    assert_eq!(error.attempts, None);
    assert!(
        error
            .reason()
            .starts_with("the stream was cut off after 3 s")
    );
    // An error the server reported in the stream says what it said, with no time.
    let error = run("data: a\n\ndata: fail\n\n", cut(), began_at);
    assert_eq!(error.elapsed_ms, None);
    // A body from memory has no time.
    assert_eq!(run("data: a\n\n", cut(), None).elapsed_ms, None);
}

#[test]
fn json_where_the_stream_should_be() {
    for (body, kind, message) in [
        (
            r#"{"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}"#,
            ProviderErrorKind::Http { status: 529 },
            "Overloaded",
        ),
        (
            r#"{"error": {"type": "overloaded_error", "message": "Overloaded"}}"#,
            ProviderErrorKind::Http { status: 529 },
            "Overloaded",
        ),
        (
            r#"{"error": {"message": "The model `gpt-9` does not exist", "type": "invalid_request_error", "code": "model_not_found"}}"#,
            ProviderErrorKind::Http { status: 400 },
            "The model `gpt-9` does not exist",
        ),
        (
            r#"{"error": {"message": "quota", "type": "insufficient_quota", "code": "insufficient_quota"}}"#,
            ProviderErrorKind::Http { status: 429 },
            "quota",
        ),
        // A code that is a status wins over the type.
        (
            r#"{"error": {"message": "busy", "type": "server_error", "code": 503}}"#,
            ProviderErrorKind::Http { status: 503 },
            "busy",
        ),
        (
            r#"{"error": {"message": "busy", "code": "502"}}"#,
            ProviderErrorKind::Http { status: 502 },
            "busy",
        ),
        // A type neither wire documents: the message, as a failure of the server.
        (
            r#"{"error": {"message": "the GPU fell over", "type": "gpu_error", "code": null}}"#,
            ProviderErrorKind::Transport,
            "the GPU fell over",
        ),
        (
            r#"{"error": "model not loaded"}"#,
            ProviderErrorKind::Transport,
            "model not loaded",
        ),
        // JSON that is no error: not an answer this shell reads.
        (
            r#"{"id": "c1", "choices": []}"#,
            ProviderErrorKind::Malformed,
            r#"the answer is JSON, not an event stream: {"id": "c1", "choices": []}"#,
        ),
        (
            "not json",
            ProviderErrorKind::Malformed,
            "the answer is JSON, not an event stream: not json",
        ),
    ] {
        assert_eq!(
            json_error(body),
            ProviderError::new(kind, message),
            "{body}"
        );
    }
}

#[test]
fn json_content_types() {
    for (content_type, json) in [
        ("application/json", true),
        ("application/json; charset=utf-8", true),
        ("Application/JSON", true),
        ("application/problem+json", true),
        ("text/event-stream", false),
        ("text/event-stream; charset=utf-8", false),
        ("text/plain", false),
    ] {
        let mut headers = HeaderMap::new();
        headers.insert(CONTENT_TYPE, content_type.parse().expect("a header value"));
        assert_eq!(is_json(&headers), json, "{content_type}");
    }
    assert!(!is_json(&HeaderMap::new()));
}

#[test]
fn retry_delays() {
    let config = retry();
    for (retry, header, expected_ms) in [
        (1, None, 500),
        (2, None, 1_000),
        (3, None, 2_000),
        (10, None, 8_000),
        (1, Some("2"), 2_000),
        (1, Some(" 0.25 "), 250),
        (3, Some("0"), 0),
        (1, Some("3600"), 30_000),
        (2, Some("Wed, 21 Oct 2015 07:28:00 GMT"), 1_000),
        (1, Some("-1"), 500),
    ] {
        assert_eq!(
            retry_delay(retry, header, &config),
            Duration::from_millis(expected_ms),
            "{retry} {header:?}"
        );
    }
}

#[test]
fn which_statuses_are_retried() {
    for (status, retried) in [
        (429, true),
        (500, true),
        (503, true),
        (529, true),
        (400, false),
        (401, false),
        (404, false),
        (413, false),
    ] {
        assert_eq!(is_retryable(status), retried, "{status}");
    }
}

#[test]
fn error_bodies_say_what_the_provider_said() {
    for (status, body, expected) in [
        (
            400,
            r#"{"error": {"message": "max_tokens: too large", "type": "invalid_request_error"}}"#,
            "http 400: max_tokens: too large",
        ),
        (
            400,
            r#"{"type": "error", "error": {"type": "invalid_request_error", "message": "bad"}}"#,
            "http 400: bad",
        ),
        (
            404,
            r#"{"error": "model not found"}"#,
            "http 404: model not found",
        ),
        (
            502,
            "<html>bad gateway</html>",
            "http 502: <html>bad gateway</html>",
        ),
        (503, "", "http 503: Service Unavailable"),
    ] {
        assert_eq!(http_error(status, body).to_string(), expected, "{body}");
    }
    let long = "x".repeat(10_000);
    assert_eq!(
        http_error(500, &long).message.len(),
        ERROR_BODY_CHARS_MAX,
        "a long body is cut"
    );
}
