//! The HTTP shell the wire providers share: sending a request with bounded retries, turning a
//! response body into SSE events (eventsource-stream) and handing each to a wire's pure
//! [`Decoder`], which says what it means as [`StreamEvent`]s.
//!
//! The decision parts (how long to wait before a retry, what an error body says) are pure
//! functions, tested here; the rest is a thin loop around reqwest.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::fmt;
use std::sync::{Arc, Once};
use std::time::Duration;

use eventsource_stream::{EventStreamError, Eventsource};
use futures::stream::{self, BoxStream};
use futures::{Stream, StreamExt};
use reqwest::StatusCode;
use reqwest::header::HeaderMap;

use crate::config::{RetryConfig, TimeoutConfig};
use crate::provider::{ProviderError, ProviderErrorKind, StreamEvent};

/// The pure half of a wire protocol: reads one SSE event at a time and says what it means.
///
/// After it has pushed a `Done` or an `Error` it is asked nothing more.
pub trait Decoder: Send + 'static {
    /// Reads one SSE event (`event` is its name, `message` when the server gave none) and pushes
    /// the events it yields to `out`.
    fn event(&mut self, event: &str, data: &str, out: &mut Vec<StreamEvent>);

    /// The body ended without a final event from the server: pushes how the response ends.
    fn end(&mut self, out: &mut Vec<StreamEvent>);
}

impl From<reqwest::Error> for ProviderError {
    fn from(error: reqwest::Error) -> Self {
        let kind = if error.is_timeout() {
            ProviderErrorKind::Timeout
        } else {
            ProviderErrorKind::Transport
        };
        // reqwest's Display names the layer; its source says what broke.
        let mut message = error.to_string();
        let mut source = std::error::Error::source(&error);
        while let Some(cause) = source {
            message.push_str(": ");
            message.push_str(&cause.to_string());
            source = cause.source();
        }
        ProviderError::new(kind, message)
    }
}

impl From<Infallible> for ProviderError {
    fn from(never: Infallible) -> Self {
        match never {}
    }
}

fn is_terminal(event: &StreamEvent) -> bool {
    matches!(event, StreamEvent::Done(_) | StreamEvent::Error(_))
}

/// What a decoding stream carries between polls.
struct Decoding<S, D> {
    sse: S,
    decoder: D,
    /// Events decoded and not yet handed out.
    queue: VecDeque<StreamEvent>,
    /// Scratch space the decoder pushes into, reused for every SSE event.
    scratch: Vec<StreamEvent>,
    /// A terminal event was handed out, or the body ended: nothing follows what is queued.
    finished: bool,
}

/// Decodes a body of SSE bytes into the events of one response: every event the decoder yields,
/// in order, ending with exactly one `Done` or `Error`. A transport error or bytes that are not
/// SSE end it with an `Error` after what had arrived. The production path and the bench share
/// it: the body is `bytes_stream()` of a response or chunks from memory.
pub fn decode<S, B, E, D>(body: S, decoder: D) -> impl Stream<Item = StreamEvent> + Send
where
    S: Stream<Item = Result<B, E>> + Send + Unpin + 'static,
    B: AsRef<[u8]> + Send,
    E: Into<ProviderError> + Send,
    D: Decoder,
{
    let state = Decoding {
        sse: body.eventsource(),
        decoder,
        queue: VecDeque::new(),
        scratch: Vec::new(),
        finished: false,
    };
    stream::unfold(state, |mut state| async move {
        loop {
            if let Some(event) = state.queue.pop_front() {
                if is_terminal(&event) {
                    state.finished = true;
                    state.queue.clear();
                }
                return Some((event, state));
            }
            if state.finished {
                return None;
            }
            match state.sse.next().await {
                Some(Ok(event)) => {
                    state
                        .decoder
                        .event(&event.event, &event.data, &mut state.scratch);
                }
                Some(Err(EventStreamError::Transport(error))) => {
                    state.scratch.push(StreamEvent::Error(error.into()));
                }
                Some(Err(EventStreamError::Utf8(error))) => {
                    state.scratch.push(StreamEvent::Error(ProviderError::new(
                        ProviderErrorKind::Malformed,
                        format!("the body is not utf-8: {error}"),
                    )));
                }
                Some(Err(EventStreamError::Parser(error))) => {
                    state.scratch.push(StreamEvent::Error(ProviderError::new(
                        ProviderErrorKind::Malformed,
                        format!("the body is not an event stream: {error}"),
                    )));
                }
                None => {
                    state.decoder.end(&mut state.scratch);
                    // Nothing follows the body's end, whatever the decoder pushed.
                    state.finished = true;
                }
            }
            state.queue.extend(state.scratch.drain(..));
        }
    })
}

/// Decodes SSE bytes held in memory, cut into `chunks` as they would arrive from a socket: the
/// path of [`decode`], for tests and the bench.
pub fn decode_chunks<D: Decoder>(
    chunks: Vec<Vec<u8>>,
    decoder: D,
) -> impl Stream<Item = StreamEvent> + Send {
    decode(
        stream::iter(chunks.into_iter().map(Ok::<_, Infallible>)),
        decoder,
    )
}

/// Decodes `sse` cut into pieces of `piece_bytes` (which may split a UTF-8 character or a
/// line), synchronously; for tests.
pub fn decode_all<D: Decoder>(sse: &str, piece_bytes: usize, decoder: D) -> Vec<StreamEvent> {
    let chunks = sse
        .as_bytes()
        .chunks(piece_bytes.max(1))
        .map(<[u8]>::to_vec)
        .collect();
    futures::executor::block_on(decode_chunks(chunks, decoder).collect())
}

/// The wait before retry number `retry` (1 for the first retry) after a refused attempt:
/// the server's `retry-after` in seconds when it sent one (capped at `retry_after_max_ms`),
/// otherwise exponential backoff from `backoff_initial_ms`, capped at `backoff_max_ms`.
pub fn retry_delay(retry: u32, retry_after: Option<&str>, config: &RetryConfig) -> Duration {
    if let Some(seconds) = retry_after
        .map(str::trim)
        .and_then(|value| value.parse::<f64>().ok())
        .filter(|seconds| seconds.is_finite() && *seconds >= 0.0)
    {
        let millis = (seconds * 1000.0).min(config.retry_after_max_ms as f64);
        return Duration::from_millis(millis as u64);
    }
    let factor = 2u64.saturating_pow(retry.saturating_sub(1));
    Duration::from_millis(
        config
            .backoff_initial_ms
            .saturating_mul(factor)
            .min(config.backoff_max_ms),
    )
}

/// Whether an answer with `status` is worth another attempt: 429 and every 5xx.
pub fn is_retryable(status: u16) -> bool {
    status == 429 || (500..600).contains(&status)
}

/// The error an HTTP error answer means: the provider's own `error.message` when its body is
/// the usual JSON, else the body itself (cut to `ERROR_BODY_CHARS_MAX`), else the status.
pub fn http_error(status: u16, body: &str) -> ProviderError {
    let kind = ProviderErrorKind::Http { status };
    let parsed: Option<serde_json::Value> = serde_json::from_str(body).ok();
    let message = parsed.as_ref().and_then(|value| {
        value
            .pointer("/error/message")
            .or_else(|| value.get("message"))
            .or_else(|| value.get("error").filter(|error| error.is_string()))
            .and_then(|message| message.as_str())
    });
    match message {
        Some(message) => ProviderError::new(kind, message),
        None if !body.trim().is_empty() => ProviderError::new(
            kind,
            body.trim()
                .chars()
                .take(ERROR_BODY_CHARS_MAX)
                .collect::<String>(),
        ),
        None => ProviderError::new(
            kind,
            StatusCode::from_u16(status)
                .ok()
                .and_then(|status| status.canonical_reason())
                .unwrap_or("error"),
        ),
    }
}

/// The most of an error body that is quoted in an error message.
const ERROR_BODY_CHARS_MAX: usize = 500;

/// Installs ring as the process's TLS crypto provider, once (unless one is installed already).
fn install_crypto_provider() {
    static INSTALL: Once = Once::new();
    INSTALL.call_once(|| {
        if rustls::crypto::CryptoProvider::get_default().is_none() {
            // Losing a race with another installer leaves theirs, which serves as well.
            let _ = rustls::crypto::ring::default_provider().install_default();
        }
    });
}

/// A client for one provider: the connection pool, its timeouts, and how to retry.
#[derive(Clone)]
pub struct HttpClient {
    client: reqwest::Client,
    retry: RetryConfig,
}

impl fmt::Debug for HttpClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HttpClient")
            .field("retry", &self.retry)
            .finish_non_exhaustive()
    }
}

impl HttpClient {
    /// A client with `timeouts`; `retry` bounds the attempts of each request.
    pub fn new(retry: RetryConfig, timeouts: &TimeoutConfig) -> Result<Self, ProviderError> {
        install_crypto_provider();
        let mut builder = reqwest::Client::builder()
            .connect_timeout(Duration::from_millis(timeouts.connect_timeout_ms))
            .read_timeout(Duration::from_millis(timeouts.idle_timeout_ms));
        if let Some(request_timeout_ms) = timeouts.request_timeout_ms {
            builder = builder.timeout(Duration::from_millis(request_timeout_ms));
        }
        let client = builder.build().map_err(|error| {
            ProviderError::new(
                ProviderErrorKind::Transport,
                format!("cannot build the http client: {error}"),
            )
        })?;
        Ok(Self { client, retry })
    }

    /// Posts `body` as JSON to `url` with `headers` and streams the answer through `decoder`.
    /// Dropping the stream drops the connection.
    pub fn stream<D: Decoder>(
        &self,
        url: &str,
        headers: HeaderMap,
        body: Vec<u8>,
        decoder: D,
    ) -> BoxStream<'static, StreamEvent> {
        let request = self
            .client
            .post(url)
            .headers(headers)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .header(reqwest::header::ACCEPT, "text/event-stream")
            .body(body)
            .build();
        let shell = Arc::new(self.clone());
        stream::once(async move {
            let sent = match request {
                Ok(request) => shell.send(request).await,
                Err(error) => Err(ProviderError::from(error)),
            };
            match sent {
                Ok(response) => decode(Box::pin(response.bytes_stream()), decoder).boxed(),
                Err(error) => stream::iter([StreamEvent::Error(error)]).boxed(),
            }
        })
        .flatten()
        .boxed()
    }

    /// Sends `request` until it is answered with success, a status not worth retrying, or the
    /// attempts run out.
    async fn send(&self, request: reqwest::Request) -> Result<reqwest::Response, ProviderError> {
        let attempts_max = self.retry.attempts_max.max(1);
        let mut attempt = 1;
        loop {
            let Some(this_try) = request.try_clone() else {
                // A JSON body is bytes in memory: it always clones.
                unreachable!("a request with a body in memory clones");
            };
            let refused = match self.client.execute(this_try).await {
                Ok(response) if response.status().is_success() => return Ok(response),
                Ok(response) => {
                    let status = response.status().as_u16();
                    let retry_after = response
                        .headers()
                        .get(reqwest::header::RETRY_AFTER)
                        .and_then(|value| value.to_str().ok())
                        .map(str::to_owned);
                    let body = response.text().await.unwrap_or_default();
                    let error = http_error(status, &body);
                    if !is_retryable(status) {
                        return Err(error);
                    }
                    (error, retry_after)
                }
                // A connection that never opened is worth another try; one that broke after
                // the request left may have been answered, but a model request has no side
                // effects, so it is retried too.
                Err(error) if error.is_connect() || error.is_request() => (error.into(), None),
                Err(error) => return Err(error.into()),
            };
            let (error, retry_after) = refused;
            if attempt >= attempts_max {
                return Err(error);
            }
            let delay = retry_delay(attempt, retry_after.as_deref(), &self.retry);
            tracing::warn!(
                attempt,
                attempts_max,
                delay_ms = delay.as_millis() as u64,
                %error,
                "provider request refused; retrying"
            );
            tokio::time::sleep(delay).await;
            attempt += 1;
        }
    }
}

#[cfg(test)]
mod tests {
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
        let events: Vec<_> =
            futures::executor::block_on(decode_chunks(chunks, echo(vec![])).collect());
        assert_eq!(events[0], delta("a"));
        assert!(
            matches!(&events[1], StreamEvent::Error(error) if error.kind == ProviderErrorKind::Malformed),
            "{events:?}"
        );
        assert_eq!(events.len(), 2);
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
}
