//! The HTTP shell the wire providers share: sending a request with bounded retries, turning a
//! response body into SSE events (eventsource-stream) and handing each to a wire's pure
//! [`Decoder`], which says what it means as [`StreamEvent`]s.
//!
//! The decision parts (how long to wait before a retry, what an error body says) are pure
//! functions, tested here; the rest is a thin loop around reqwest.
//!
//! An attempt is retried while nothing of the answer has arrived: a connection that failed, a
//! status worth retrying (429, 5xx), a JSON error where the event stream should be whose type
//! stands for such a status, and a connection that closed after the response head but before
//! any byte of the body. Once a byte of the body arrived the answer has begun, and a failure
//! ends the stream instead. Every failure records its attempts and how long it went on, for
//! [`ProviderError::reason`].

use std::collections::VecDeque;
use std::convert::Infallible;
use std::fmt;
use std::sync::{Arc, Once};
use std::time::{Duration, Instant};

use eventsource_stream::{EventStreamError, Eventsource};
use futures::stream::{self, BoxStream};
use futures::{Stream, StreamExt, future};
use reqwest::StatusCode;
use reqwest::header::{CONTENT_TYPE, HeaderMap};
use serde_json::Value;

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
    /// When the answer began, for the shell: an error of the body breaking or ending early
    /// records how long the stream had run. `None` for bodies from memory.
    began_at: Option<Instant>,
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
    decode_since(body, decoder, None)
}

/// [`decode`], for an answer that began at `began_at`: an error of the body breaking or ending
/// before the response finished records the time since.
fn decode_since<S, B, E, D>(
    body: S,
    decoder: D,
    began_at: Option<Instant>,
) -> impl Stream<Item = StreamEvent> + Send
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
        began_at,
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
                    let error = streamed_for(error.into(), state.began_at);
                    state.scratch.push(StreamEvent::Error(error));
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
                    for event in &mut state.scratch {
                        if let StreamEvent::Error(error) = event {
                            *error = streamed_for(error.clone(), state.began_at);
                        }
                    }
                    // Nothing follows the body's end, whatever the decoder pushed.
                    state.finished = true;
                }
            }
            state.queue.extend(state.scratch.drain(..));
        }
    })
}

/// `error`, with the time since the answer began at `began_at` (when known).
fn streamed_for(error: ProviderError, began_at: Option<Instant>) -> ProviderError {
    match began_at {
        Some(began_at) => error.with_elapsed(began_at.elapsed()),
        None => error,
    }
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
    match provider_message(body) {
        Some(message) => ProviderError::new(kind, message),
        None => ProviderError::new(
            kind,
            StatusCode::from_u16(status)
                .ok()
                .and_then(|status| status.canonical_reason())
                .unwrap_or("error"),
        ),
    }
}

/// The error a JSON body means where an event stream should be (a server that answers `200`
/// and reports its error in the body): the provider's message, as an HTTP error of the status
/// the error's `code` or `type` stands for (a transport error when neither says one); a body
/// with no `error` in it did not parse as an answer.
pub fn json_error(body: &str) -> ProviderError {
    let parsed: Option<Value> = serde_json::from_str(body).ok();
    let Some(error) = parsed.as_ref().and_then(|value| value.get("error")) else {
        return ProviderError::new(
            ProviderErrorKind::Malformed,
            format!(
                "the answer is JSON, not an event stream: {}",
                cut(body.trim())
            ),
        );
    };
    let status = error.get("code").and_then(code_status).or_else(|| {
        error
            .get("type")
            .and_then(Value::as_str)
            .and_then(error_type_status)
    });
    let kind = match status {
        Some(status) => ProviderErrorKind::Http { status },
        None => ProviderErrorKind::Transport,
    };
    let message = provider_message(body).unwrap_or_default();
    ProviderError::new(kind, message)
}

/// An error's `code` as an HTTP status, when it is one (`503` or `"503"`).
fn code_status(code: &Value) -> Option<u16> {
    let code = match code {
        Value::Number(number) => number.as_u64()?,
        Value::String(text) => text.parse().ok()?,
        _ => return None,
    };
    u16::try_from(code)
        .ok()
        .filter(|status| (400..600).contains(status))
}

/// The HTTP status the two wires document for an error `type`, so an error reported in a body
/// reads like the same error answered with its status.
pub fn error_type_status(error_type: &str) -> Option<u16> {
    Some(match error_type {
        "invalid_request_error" => 400,
        "authentication_error" => 401,
        "permission_error" => 403,
        "not_found_error" => 404,
        "request_too_large" => 413,
        "rate_limit_error" | "insufficient_quota" => 429,
        "api_error" | "server_error" => 500,
        "overloaded_error" => 529,
        _ => return None,
    })
}

/// What the provider said in an error body: its `error.message` (or `message`, or an `error`
/// that is a string) when the body is the usual JSON, else the body itself, cut; `None` for an
/// empty body.
fn provider_message(body: &str) -> Option<String> {
    let parsed: Option<Value> = serde_json::from_str(body).ok();
    let message = parsed.as_ref().and_then(|value| {
        value
            .pointer("/error/message")
            .or_else(|| value.get("message"))
            .or_else(|| value.get("error").filter(|error| error.is_string()))
            .and_then(|message| message.as_str())
            .filter(|message| !message.trim().is_empty())
    });
    match message {
        Some(message) => Some(message.to_owned()),
        None if !body.trim().is_empty() => Some(cut(body.trim())),
        None => None,
    }
}

/// `text` cut to `ERROR_BODY_CHARS_MAX` characters.
fn cut(text: &str) -> String {
    text.chars().take(ERROR_BODY_CHARS_MAX).collect()
}

/// Whether `headers` say the body is JSON (`application/json`, or a `+json` type).
fn is_json(headers: &HeaderMap) -> bool {
    let Some(content_type) = headers
        .get(CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
    else {
        return false;
    };
    let essence = content_type
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase();
    essence == "application/json" || essence.ends_with("+json")
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
                // The answer begins with the body's first bytes, which have arrived.
                Ok(body) => decode_since(body, decoder, Some(Instant::now())).boxed(),
                Err(error) => stream::iter([StreamEvent::Error(error)]).boxed(),
            }
        })
        .flatten()
        .boxed()
    }

    /// Sends `request` until its answer begins (a success whose body's first bytes arrived),
    /// it fails in a way not worth retrying, or the attempts run out; returns the body from
    /// its first bytes, or the last failure with its attempts and the time since the first.
    async fn send(
        &self,
        request: reqwest::Request,
    ) -> Result<
        BoxStream<'static, Result<impl AsRef<[u8]> + Send + 'static, reqwest::Error>>,
        ProviderError,
    > {
        let started_at = Instant::now();
        let attempts_max = self.retry.attempts_max.max(1);
        let mut attempt = 1;
        loop {
            let Some(this_try) = request.try_clone() else {
                // A JSON body is bytes in memory: it always clones.
                unreachable!("a request with a body in memory clones");
            };
            let (error, retry_after) = match self.attempt(this_try).await {
                Attempt::Began(body) => return Ok(body),
                Attempt::Failed {
                    error,
                    retryable,
                    retry_after,
                } => {
                    let error = error
                        .with_attempts(attempt)
                        .with_elapsed(started_at.elapsed());
                    if !retryable || attempt >= attempts_max {
                        return Err(error);
                    }
                    (error, retry_after)
                }
            };
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

    /// Makes one attempt at `request`: its answer began, or nothing of it arrived.
    async fn attempt(
        &self,
        request: reqwest::Request,
    ) -> Attempt<BoxStream<'static, Result<impl AsRef<[u8]> + Send + 'static, reqwest::Error>>>
    {
        let response = match self.client.execute(request).await {
            Ok(response) => response,
            // A connection that never opened is worth another try; one that broke after the
            // request left may have been answered, but a model request has no side effects,
            // so it is retried too.
            Err(error) => {
                let retryable = error.is_connect() || error.is_request();
                return Attempt::failed(error.into(), retryable);
            }
        };
        let status = response.status().as_u16();
        if !response.status().is_success() {
            let retry_after = response
                .headers()
                .get(reqwest::header::RETRY_AFTER)
                .and_then(|value| value.to_str().ok())
                .map(str::to_owned);
            let body = response.text().await.unwrap_or_default();
            return Attempt::Failed {
                error: http_error(status, &body),
                retryable: is_retryable(status),
                retry_after,
            };
        }
        if is_json(response.headers()) {
            // An error reported in a success: retried as its status would be.
            let error = match response.text().await {
                Ok(body) => json_error(&body),
                Err(error) => return Attempt::failed(error.into(), true),
            };
            let retryable =
                matches!(error.kind, ProviderErrorKind::Http { status } if is_retryable(status));
            return Attempt::failed(error, retryable);
        }
        let mut body = response.bytes_stream();
        loop {
            match body.next().await {
                Some(Ok(bytes)) if bytes.is_empty() => continue,
                Some(Ok(bytes)) => {
                    return Attempt::Began(
                        stream::once(future::ready(Ok(bytes))).chain(body).boxed(),
                    );
                }
                // The connection closed (or went silent) after the response head: nothing of
                // the answer arrived, as with a reset before it.
                Some(Err(error)) => {
                    let mut error = ProviderError::from(error);
                    error.message = format!(
                        "after the response head, before any of the body: {}",
                        error.message
                    );
                    return Attempt::failed(error, true);
                }
                None => {
                    let error = ProviderError::new(
                        ProviderErrorKind::Transport,
                        "the connection closed after the response head, before any of the body",
                    );
                    return Attempt::failed(error, true);
                }
            }
        }
    }
}

/// What one attempt at a request came to.
enum Attempt<S> {
    /// The answer began: its body, from the first bytes.
    Began(S),
    /// Nothing of the answer arrived.
    Failed {
        error: ProviderError,
        /// Another attempt may fare better.
        retryable: bool,
        /// The server's `retry-after`, when it sent one.
        retry_after: Option<String>,
    },
}

impl<S> Attempt<S> {
    fn failed(error: ProviderError, retryable: bool) -> Self {
        Self::Failed {
            error,
            retryable,
            retry_after: None,
        }
    }
}

#[cfg(test)]
mod tests;
