//! The `Provider` trait: one request in, a stream of events out; and the errors a stream ends
//! with.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use futures::stream::BoxStream;
use serde::{Deserialize, Serialize};

use crate::message::{AssistantMessage, Request, ToolCall, Usage};

/// What a response streams as. A stream ends after `Done` or `Error`, whichever comes; nothing
/// follows either.
///
/// Serialized adjacently tagged (`{"type": "text_delta", "data": "..."}`), since a delta's
/// payload is a bare string.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", content = "data", rename_all = "snake_case")]
pub enum StreamEvent {
    /// More text for the reader.
    TextDelta(String),
    /// More reasoning.
    ThinkingDelta(String),
    /// A whole tool call, once its arguments are complete.
    ToolCall(ToolCall),
    /// Tokens counted, as the provider reported them.
    Usage(Usage),
    /// The final message, exactly as the provider sent it; ends the stream.
    Done(AssistantMessage),
    /// The response failed; ends the stream.
    Error(ProviderError),
}

/// Why a response failed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[error("{kind}: {message}")]
pub struct ProviderError {
    /// The kind of failure, for callers that retry or report.
    pub kind: ProviderErrorKind,
    /// What happened, in the provider's words or ours.
    pub message: String,
    /// How many attempts the request made before it gave up: set by the HTTP shell when the
    /// failure came before any of the answer (a refused status, a connection that failed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attempts: Option<u32>,
    /// How long it went on: since the request started, for a failure before any of the answer;
    /// since the answer began, for a stream that broke or stalled. Set by the HTTP shell.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub elapsed_ms: Option<u64>,
}

impl ProviderError {
    /// An error of `kind` saying `message`.
    pub fn new(kind: ProviderErrorKind, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
            attempts: None,
            elapsed_ms: None,
        }
    }

    /// This error, after `attempts` attempts.
    pub fn with_attempts(mut self, attempts: u32) -> Self {
        self.attempts = Some(attempts);
        self
    }

    /// This error, `elapsed` after its request (or its stream) began.
    pub fn with_elapsed(mut self, elapsed: Duration) -> Self {
        self.elapsed_ms = Some(u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX));
        self
    }

    /// The failure in plain words for a person: what went wrong, then what the provider said.
    ///
    /// A failure before any of the answer (it carries `attempts`) says how many attempts were
    /// made when there was more than one; a stream that broke or stalled after it began (it
    /// carries `elapsed_ms` alone) says how long it had run.
    pub fn reason(&self) -> String {
        let message = Some(self.message.trim())
            .filter(|message| !message.is_empty())
            .map(str::to_owned);
        let gave_up = self
            .attempts
            .filter(|attempts| *attempts > 1)
            .map(|attempts| format!("gave up after {attempts} attempts"));
        let elapsed = self.elapsed_ms.map(plain_duration);
        // The shell marks a stream that broke after the answer began with its time alone.
        let streamed_for = elapsed.as_ref().filter(|_| self.attempts.is_none());
        match &self.kind {
            ProviderErrorKind::Http { status } => {
                let status = *status;
                let head = match status {
                    401 => format!("the model server refused the key ({status})"),
                    403 => format!("the model server refused access ({status})"),
                    429 => "rate limited".to_owned(),
                    500..=599 => format!("the model server failed ({status})"),
                    400..=499 => format!("the model server refused the request ({status})"),
                    _ => format!("the model server answered {status}"),
                };
                // An empty body leaves the status's own name, which says nothing more.
                let message =
                    message.filter(|message| Some(message.as_str()) != status_name(status));
                chain([Some(head), gave_up, message])
            }
            ProviderErrorKind::Transport => match streamed_for {
                Some(elapsed) => format!("the stream was cut off after {elapsed}"),
                None if self.attempts.is_some() => chain([
                    Some("the connection to the model server failed".to_owned()),
                    gave_up,
                    message,
                ]),
                None => chain([Some("the model server failed".to_owned()), None, message]),
            },
            ProviderErrorKind::Timeout => match (streamed_for, &elapsed) {
                (Some(elapsed), _) => format!("the stream timed out after {elapsed}"),
                (None, Some(elapsed)) => chain([
                    Some(format!("the model server did not answer within {elapsed}")),
                    gave_up,
                    None,
                ]),
                (None, None) => chain([
                    Some("the model server did not answer in time".to_owned()),
                    gave_up,
                    message,
                ]),
            },
            ProviderErrorKind::Malformed => chain([
                Some("the model server sent something that did not parse".to_owned()),
                None,
                message,
            ]),
            ProviderErrorKind::Refused => {
                chain([Some("the model refused".to_owned()), None, message])
            }
            ProviderErrorKind::ScriptExhausted => chain([
                Some("the scripted model has no more replies".to_owned()),
                None,
                message,
            ]),
        }
    }
}

/// The parts that are there, joined as a chain: "outer: inner".
fn chain(parts: [Option<String>; 3]) -> String {
    parts.into_iter().flatten().collect::<Vec<_>>().join(": ")
}

/// The name HTTP gives `status` ("Service Unavailable"), for the few the shell may quote.
fn status_name(status: u16) -> Option<&'static str> {
    Some(match status {
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        408 => "Request Timeout",
        413 => "Payload Too Large",
        422 => "Unprocessable Entity",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        _ => return None,
    })
}

/// `elapsed_ms` as a person reads it: "400 ms", "3 s", "2 min 5 s".
fn plain_duration(elapsed_ms: u64) -> String {
    if elapsed_ms < 1_000 {
        return format!("{elapsed_ms} ms");
    }
    let seconds = (elapsed_ms + 500) / 1_000;
    match (seconds / 60, seconds % 60) {
        (0..2, _) => format!("{seconds} s"),
        (minutes, 0) => format!("{minutes} min"),
        (minutes, seconds) => format!("{minutes} min {seconds} s"),
    }
}

/// The kinds of provider failure.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ProviderErrorKind {
    /// The connection failed or broke.
    Transport,
    /// The provider answered with an HTTP error status.
    Http {
        /// The status code, e.g. 429.
        status: u16,
    },
    /// The provider's answer did not parse.
    Malformed,
    /// The provider took longer than the configured timeout to connect, or to send more.
    Timeout,
    /// The provider refused the request (a policy or safety refusal).
    Refused,
    /// The scripted provider was asked more often than its script has steps.
    ScriptExhausted,
}

impl fmt::Display for ProviderErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Transport => f.write_str("transport"),
            Self::Http { status } => write!(f, "http {status}"),
            Self::Malformed => f.write_str("malformed"),
            Self::Timeout => f.write_str("timeout"),
            Self::Refused => f.write_str("refused"),
            Self::ScriptExhausted => f.write_str("script exhausted"),
        }
    }
}

/// A model provider.
pub trait Provider: Send + Sync {
    /// Streams one response. Dropping the stream cancels the request.
    fn stream(&self, request: Request) -> BoxStream<'static, StreamEvent>;

    /// Whether `model` takes images as input (`UserPart::Image`); a provider that does not say
    /// takes none. A wrapper answers as the provider it wraps.
    fn takes_images(&self, model: &str) -> bool {
        let _ = model;
        false
    }
}

impl<P: Provider + ?Sized> Provider for Arc<P> {
    fn stream(&self, request: Request) -> BoxStream<'static, StreamEvent> {
        (**self).stream(request)
    }

    fn takes_images(&self, model: &str) -> bool {
        (**self).takes_images(model)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn errors_display_one_layer() {
        for (kind, shown) in [
            (ProviderErrorKind::Transport, "transport: boom"),
            (ProviderErrorKind::Http { status: 429 }, "http 429: boom"),
            (ProviderErrorKind::Malformed, "malformed: boom"),
            (ProviderErrorKind::Timeout, "timeout: boom"),
            (ProviderErrorKind::Refused, "refused: boom"),
            (ProviderErrorKind::ScriptExhausted, "script exhausted: boom"),
        ] {
            assert_eq!(ProviderError::new(kind, "boom").to_string(), shown);
        }
    }

    #[test]
    fn reasons_in_plain_words() {
        use ProviderErrorKind::*;
        let error = |kind, message: &str| ProviderError::new(kind, message);
        // Before any of the answer, as the shell gives up: attempts and time since the start.
        let gave_up = |kind, message: &str, attempts| {
            error(kind, message)
                .with_attempts(attempts)
                .with_elapsed(Duration::from_millis(9_400))
        };
        // After the answer began: the time since it began, alone.
        let streamed = |kind, message: &str, elapsed_ms| {
            error(kind, message).with_elapsed(Duration::from_millis(elapsed_ms))
        };
        for (error, reason) in [
            (
                gave_up(Http { status: 401 }, "Unauthorized", 1),
                "the model server refused the key (401)",
            ),
            (
                gave_up(Http { status: 401 }, "invalid x-api-key", 1),
                "the model server refused the key (401): invalid x-api-key",
            ),
            (
                gave_up(Http { status: 403 }, "not allowed", 1),
                "the model server refused access (403): not allowed",
            ),
            (
                gave_up(Http { status: 400 }, "max_tokens: too large", 1),
                "the model server refused the request (400): max_tokens: too large",
            ),
            (
                gave_up(Http { status: 429 }, "Too Many Requests", 4),
                "rate limited: gave up after 4 attempts",
            ),
            (
                gave_up(Http { status: 429 }, "You exceeded your current quota", 4),
                "rate limited: gave up after 4 attempts: You exceeded your current quota",
            ),
            (
                gave_up(Http { status: 503 }, "Service Unavailable", 4),
                "the model server failed (503): gave up after 4 attempts",
            ),
            (
                gave_up(Http { status: 503 }, "overloaded", 2),
                "the model server failed (503): gave up after 2 attempts: overloaded",
            ),
            // An error event in the stream: no attempts, no time.
            (
                error(Http { status: 529 }, "Overloaded"),
                "the model server failed (529): Overloaded",
            ),
            (
                error(Http { status: 302 }, "Found"),
                "the model server answered 302: Found",
            ),
            (
                gave_up(Transport, "tcp connect error: Connection refused", 4),
                "the connection to the model server failed: gave up after 4 attempts: \
                 tcp connect error: Connection refused",
            ),
            (
                gave_up(Transport, "redirect loop", 1),
                "the connection to the model server failed: redirect loop",
            ),
            (
                streamed(
                    Transport,
                    "the stream ended before the response finished",
                    3_200,
                ),
                "the stream was cut off after 3 s",
            ),
            (
                streamed(Transport, "connection reset", 250),
                "the stream was cut off after 250 ms",
            ),
            (
                error(Transport, "the model crashed"),
                "the model server failed: the model crashed",
            ),
            (
                error(Timeout, "operation timed out")
                    .with_attempts(1)
                    .with_elapsed(Duration::from_millis(60_020)),
                "the model server did not answer within 60 s",
            ),
            (
                error(Timeout, "operation timed out")
                    .with_attempts(4)
                    .with_elapsed(Duration::from_millis(245_000)),
                "the model server did not answer within 4 min 5 s: gave up after 4 attempts",
            ),
            (
                streamed(Timeout, "operation timed out", 120_000),
                "the stream timed out after 2 min",
            ),
            (
                error(Timeout, "operation timed out"),
                "the model server did not answer in time: operation timed out",
            ),
            (
                streamed(Malformed, "a chunk does not parse: EOF at line 1", 800),
                "the model server sent something that did not parse: \
                 a chunk does not parse: EOF at line 1",
            ),
            (
                error(
                    Refused,
                    "the provider's content filter stopped the response",
                ),
                "the model refused: the provider's content filter stopped the response",
            ),
            (
                error(
                    ScriptExhausted,
                    "the script has 2 steps and none for request 2",
                ),
                "the scripted model has no more replies: \
                 the script has 2 steps and none for request 2",
            ),
        ] {
            assert_eq!(error.reason(), reason, "{error:?}");
        }
    }

    #[test]
    fn errors_and_events_round_trip() {
        let error = ProviderError::new(ProviderErrorKind::Http { status: 503 }, "overloaded");
        let json = serde_json::to_value(&error).expect("serializes");
        assert_eq!(
            json,
            json!({"kind": {"type": "http", "status": 503}, "message": "overloaded"})
        );
        let back: ProviderError = serde_json::from_value(json).expect("deserializes");
        assert_eq!(back, error);
        // Attempts and time are written when known, and read back.
        let gave_up = error
            .clone()
            .with_attempts(4)
            .with_elapsed(Duration::from_millis(1_234));
        let json = serde_json::to_value(&gave_up).expect("serializes");
        assert_eq!(
            json,
            json!({"kind": {"type": "http", "status": 503}, "message": "overloaded",
                   "attempts": 4, "elapsed_ms": 1234})
        );
        let back: ProviderError = serde_json::from_value(json).expect("deserializes");
        assert_eq!(back, gave_up);

        let events = [
            StreamEvent::TextDelta("hel".to_owned()),
            StreamEvent::ThinkingDelta("hmm".to_owned()),
            StreamEvent::ToolCall(ToolCall {
                id: "c".to_owned(),
                name: "ls".to_owned(),
                arguments: json!({}),
            }),
            StreamEvent::Usage(Usage::default()),
            StreamEvent::Error(error),
        ];
        for event in events {
            let text = serde_json::to_string(&event).expect("serializes");
            let back: StreamEvent = serde_json::from_str(&text).expect("deserializes");
            assert_eq!(back, event);
        }
        assert_eq!(
            serde_json::to_value(StreamEvent::TextDelta("hel".to_owned())).expect("serializes"),
            json!({"type": "text_delta", "data": "hel"})
        );
    }

    struct Echo;

    impl Provider for Echo {
        fn stream(&self, request: Request) -> BoxStream<'static, StreamEvent> {
            Box::pin(futures::stream::iter([StreamEvent::TextDelta(
                request.model,
            )]))
        }
    }

    #[test]
    fn arc_forwards() {
        use futures::StreamExt;
        let provider: Arc<dyn Provider> = Arc::new(Echo);
        let request = Request {
            reasoning: None,
            model: "m".to_owned(),
            system_prompt: String::new(),
            messages: Vec::new(),
            tools: Arc::from(Vec::new()),
            session_id: None,
        };
        let events: Vec<_> =
            futures::executor::block_on(Arc::new(provider).stream(request).collect());
        assert_eq!(events, [StreamEvent::TextDelta("m".to_owned())]);
    }
}
