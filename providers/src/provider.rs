//! The `Provider` trait: one request in, a stream of events out; and the errors a stream ends
//! with.

use std::fmt;
use std::sync::Arc;

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
}

impl ProviderError {
    /// An error of `kind` saying `message`.
    pub fn new(kind: ProviderErrorKind, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
        }
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
    fn errors_and_events_round_trip() {
        let error = ProviderError::new(ProviderErrorKind::Http { status: 503 }, "overloaded");
        let json = serde_json::to_value(&error).expect("serializes");
        assert_eq!(
            json,
            json!({"kind": {"type": "http", "status": 503}, "message": "overloaded"})
        );
        let back: ProviderError = serde_json::from_value(json).expect("deserializes");
        assert_eq!(back, error);

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
