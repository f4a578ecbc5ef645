//! What a log event says, typed: [`EventBody`] over an event's `kind` and `content`, and
//! [`RunResult`] over a run's `result`. The columns and the wire stay JSON, as they always were;
//! these types are how code reads and writes them, so that a field is named in one place.
//!
//! Both keep what they do not know: a field this version does not name rides along in `rest`
//! and is written back as it came, so reading and writing an event changes none of its bytes'
//! meaning (a test round-trips every kind the simulation produces).

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::{Map, Value};

use crate::{ContinuationId, EventRole, NewEvent, SessionEvent, SessionId};

/// The kinds of log event, as the `kind` column names them.
pub mod kind {
    /// Something said: a person's message, an answer, a handoff.
    pub const MESSAGE: &str = "message";
    /// A tool call the model asked for.
    pub const TOOL_CALL: &str = "tool_call";
    /// A tool call's result.
    pub const TOOL_RESULT: &str = "tool_result";
    /// Something the runtime says: a failed turn, a plan with open steps, a late result.
    pub const NOTICE: &str = "notice";
    /// A verb a person ran by hand.
    pub const ACTION: &str = "action";
}

/// An event's content, by its kind.
#[derive(Debug, Clone, PartialEq)]
pub enum EventBody {
    Message(MessageBody),
    ToolCall(ToolCallBody),
    ToolResult(ToolResultBody),
    Notice(NoticeBody),
    Action(ActionBody),
    /// A kind this version does not know, or content that is not its kind's shape: kept whole.
    Other {
        kind: String,
        content: Value,
    },
}

/// A message's content: `{"text", "thinking"?, "attachments"?}`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct MessageBody {
    #[serde(default)]
    pub text: String,
    /// The model's reasoning, for an answer that had some.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thinking: Option<String>,
    /// The files a person's message carried, as the API recorded them (read them with
    /// [`crate::message_attachments`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attachments: Option<Value>,
    #[serde(flatten)]
    pub rest: Map<String, Value>,
}

/// A tool call: `{"id", "name", "arguments"}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCallBody {
    pub id: String,
    pub name: String,
    /// The arguments as the model sent them: an object, or the text of arguments that did
    /// not parse.
    #[serde(default)]
    pub arguments: Value,
    #[serde(flatten)]
    pub rest: Map<String, Value>,
}

/// A tool result: `{"tool_call_id", "tool_name", "content", "is_error", "attachments"?}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolResultBody {
    pub tool_call_id: String,
    #[serde(default)]
    pub tool_name: String,
    #[serde(default)]
    pub content: String,
    #[serde(default)]
    pub is_error: bool,
    /// The images the tool returned, kept as the session's attachments (`[{"id",
    /// "media_type", "size_bytes"}]`; read them with [`crate::message_attachments`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attachments: Option<Value>,
    #[serde(flatten)]
    pub rest: Map<String, Value>,
}

/// A notice: `{"text"}` (a result that came after its call was answered keeps the result's
/// fields in `rest`).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct NoticeBody {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    #[serde(flatten)]
    pub rest: Map<String, Value>,
}

/// A verb run by hand: `{"text", "verb", "arguments", "result", "is_error"}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ActionBody {
    /// The line the model reads for it.
    #[serde(default)]
    pub text: String,
    pub verb: String,
    #[serde(default)]
    pub arguments: Value,
    #[serde(default)]
    pub result: String,
    #[serde(default)]
    pub is_error: bool,
    #[serde(flatten)]
    pub rest: Map<String, Value>,
}

impl EventBody {
    /// The body of an event of `kind` with `content`; content that is not its kind's shape is
    /// [`EventBody::Other`].
    pub fn parse(kind: &str, content: &Value) -> EventBody {
        fn typed<T: serde::de::DeserializeOwned>(content: &Value) -> Option<T> {
            content
                .is_object()
                .then(|| T::deserialize(content).ok())
                .flatten()
        }
        let body = match kind {
            kind::MESSAGE => typed(content).map(EventBody::Message),
            kind::TOOL_CALL => typed(content).map(EventBody::ToolCall),
            kind::TOOL_RESULT => typed(content).map(EventBody::ToolResult),
            kind::NOTICE => typed(content).map(EventBody::Notice),
            kind::ACTION => typed(content).map(EventBody::Action),
            _ => None,
        };
        body.unwrap_or_else(|| EventBody::Other {
            kind: kind.to_owned(),
            content: content.clone(),
        })
    }

    /// The `kind` column for it.
    pub fn kind(&self) -> &str {
        match self {
            EventBody::Message(_) => kind::MESSAGE,
            EventBody::ToolCall(_) => kind::TOOL_CALL,
            EventBody::ToolResult(_) => kind::TOOL_RESULT,
            EventBody::Notice(_) => kind::NOTICE,
            EventBody::Action(_) => kind::ACTION,
            EventBody::Other { kind, .. } => kind,
        }
    }

    /// The `content` column for it.
    pub fn content(&self) -> Value {
        let value = match self {
            EventBody::Message(body) => serde_json::to_value(body),
            EventBody::ToolCall(body) => serde_json::to_value(body),
            EventBody::ToolResult(body) => serde_json::to_value(body),
            EventBody::Notice(body) => serde_json::to_value(body),
            EventBody::Action(body) => serde_json::to_value(body),
            EventBody::Other { content, .. } => return content.clone(),
        };
        // Plain structs of strings, bools and JSON values always serialize.
        value.unwrap_or(Value::Null)
    }

    /// The text a person or the model reads in it, when it has one.
    pub fn text(&self) -> Option<&str> {
        match self {
            EventBody::Message(body) => Some(&body.text),
            EventBody::Notice(body) => body.text.as_deref(),
            EventBody::Action(body) => Some(&body.text),
            EventBody::ToolResult(body) => Some(&body.content),
            EventBody::ToolCall(_) | EventBody::Other { .. } => None,
        }
    }
}

impl MessageBody {
    /// A message saying `text`.
    pub fn text(text: impl Into<String>) -> MessageBody {
        MessageBody {
            text: text.into(),
            ..MessageBody::default()
        }
    }
}

impl NoticeBody {
    /// A notice saying `text`.
    pub fn text(text: impl Into<String>) -> NoticeBody {
        NoticeBody {
            text: Some(text.into()),
            rest: Map::new(),
        }
    }
}

impl From<MessageBody> for EventBody {
    fn from(body: MessageBody) -> EventBody {
        EventBody::Message(body)
    }
}

impl From<ToolCallBody> for EventBody {
    fn from(body: ToolCallBody) -> EventBody {
        EventBody::ToolCall(body)
    }
}

impl From<ToolResultBody> for EventBody {
    fn from(body: ToolResultBody) -> EventBody {
        EventBody::ToolResult(body)
    }
}

impl From<NoticeBody> for EventBody {
    fn from(body: NoticeBody) -> EventBody {
        EventBody::Notice(body)
    }
}

impl From<ActionBody> for EventBody {
    fn from(body: ActionBody) -> EventBody {
        EventBody::Action(body)
    }
}

impl SessionEvent {
    /// What the event says, typed.
    pub fn body(&self) -> EventBody {
        EventBody::parse(&self.kind, &self.content)
    }
}

impl NewEvent {
    /// An event saying `body` (its `kind` and `content`), by `role` and `actor`, with empty meta,
    /// no run and no store entry (pending import).
    pub fn new(
        body: impl Into<EventBody>,
        role: EventRole,
        actor: &str,
        created_at_ms: i64,
    ) -> NewEvent {
        let body = body.into();
        NewEvent {
            kind: body.kind().to_owned(),
            role: Some(role),
            actor: Some(actor.to_owned()),
            content: body.content(),
            meta: Value::Object(Map::new()),
            run_id: None,
            pi_entry_id: None,
            created_at_ms,
        }
    }

    /// What the event says, typed.
    pub fn body(&self) -> EventBody {
        EventBody::parse(&self.kind, &self.content)
    }
}

/// A run's `result`, typed. Which fields are set says how the run ended:
///
/// - answered: `answer` (and `answered_by`, the request whose turn answered it, when another
///   turn had taken the message in);
/// - continued: `continued_to_session_id` and `continuation_id`;
/// - a typed child's return: `returned`;
/// - ended by a verb or the hook: `ended`;
/// - stopped: `stopped: true`;
/// - failed: `error`, the reason in plain words.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct RunResult {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answered_by: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub continued_to_session_id: Option<SessionId>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub continuation_id: Option<ContinuationId>,
    /// What a typed child returned, `null` included (`Some(Value::Null)`).
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub returned: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended: Option<String>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub stopped: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(flatten)]
    pub rest: Map<String, Value>,
}

/// A field that is there, whatever it holds: `null` reads as `Some(Value::Null)`, where serde's
/// `Option` would read it as absent.
fn present<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(deserializer).map(Some)
}

impl RunResult {
    /// Reads a run's `result` column; a value that is not a result's shape reads as empty,
    /// with the value kept in `rest` when it is an object.
    pub fn parse(value: &Value) -> RunResult {
        RunResult::deserialize(value).unwrap_or_else(|_| RunResult {
            rest: value.as_object().cloned().unwrap_or_default(),
            ..RunResult::default()
        })
    }

    /// The `result` column for it.
    pub fn to_value(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }

    /// An answered run's result.
    pub fn answered(answer: impl Into<String>) -> RunResult {
        RunResult {
            answer: Some(answer.into()),
            ..RunResult::default()
        }
    }

    /// A failed run's result: why, in plain words.
    pub fn failed(reason: impl Into<String>) -> RunResult {
        RunResult {
            error: Some(reason.into()),
            ..RunResult::default()
        }
    }

    /// A stopped run's result.
    pub fn stopped() -> RunResult {
        RunResult {
            stopped: true,
            ..RunResult::default()
        }
    }

    /// A typed child's result: what it returned.
    pub fn returned(returned: Value) -> RunResult {
        RunResult {
            returned: Some(returned),
            ..RunResult::default()
        }
    }

    /// A run a verb or the hook ended, and why.
    pub fn ended(reason: impl Into<String>) -> RunResult {
        RunResult {
            ended: Some(reason.into()),
            ..RunResult::default()
        }
    }

    /// A run that continued into `successor` over the edge `continuation_id`.
    pub fn continued(successor: SessionId, continuation_id: ContinuationId) -> RunResult {
        RunResult {
            continued_to_session_id: Some(successor),
            continuation_id: Some(continuation_id),
            ..RunResult::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn round_trips(kind: &str, content: Value) -> EventBody {
        let body = EventBody::parse(kind, &content);
        assert_eq!(body.kind(), kind);
        assert_eq!(body.content(), content, "{kind}");
        body
    }

    #[test]
    fn every_kind_reads_typed_and_writes_back_as_it_came() {
        let message = round_trips(
            kind::MESSAGE,
            json!({"text": "hi", "attachments": ["a1", {"id": "a2", "name": "n.txt"}]}),
        );
        assert_eq!(message.text(), Some("hi"));
        round_trips(kind::MESSAGE, json!({"text": "", "thinking": "hmm"}));
        let call = round_trips(
            kind::TOOL_CALL,
            json!({"id": "c", "name": "echo", "arguments": {"text": "x"}}),
        );
        assert!(
            matches!(call, EventBody::ToolCall(ToolCallBody { ref name, .. }) if name == "echo")
        );
        round_trips(
            kind::TOOL_CALL,
            json!({"id": "c", "name": "echo", "arguments": "{\"text\": \"cut"}),
        );
        let result = round_trips(
            kind::TOOL_RESULT,
            json!({"tool_call_id": "c", "tool_name": "echo", "content": "ok", "is_error": false}),
        );
        assert_eq!(result.text(), Some("ok"));
        round_trips(kind::NOTICE, json!({"text": "The turn failed: boom"}));
        // A late child's result written as a notice keeps the result's fields.
        round_trips(
            kind::NOTICE,
            json!({"tool_call_id": "c", "tool_name": "delegate", "content": "done", "is_error": false}),
        );
        round_trips(
            kind::ACTION,
            json!({"text": "[status] set", "verb": "status", "arguments": {"title": "T"}, "result": "set", "is_error": false}),
        );
        // Unknown kinds and shapes are kept whole.
        let other = round_trips("future_kind", json!({"x": 1}));
        assert!(matches!(other, EventBody::Other { .. }));
        assert!(matches!(
            EventBody::parse(kind::TOOL_CALL, &json!("not an object")),
            EventBody::Other { .. }
        ));
    }

    #[test]
    fn run_results_read_typed_and_write_back_as_they_came() {
        let successor = SessionId::from_u128(7);
        let edge = ContinuationId::from_u128(8);
        for (result, value) in [
            (RunResult::answered("hi"), json!({"answer": "hi"})),
            (RunResult::failed("boom"), json!({"error": "boom"})),
            (RunResult::stopped(), json!({"stopped": true})),
            (RunResult::ended("delegate"), json!({"ended": "delegate"})),
            (
                RunResult::returned(json!({"n": 1})),
                json!({"returned": {"n": 1}}),
            ),
            // A typed child may return null: it is kept, not read as no return.
            (RunResult::returned(Value::Null), json!({"returned": null})),
            (
                RunResult {
                    answered_by: Some("r#0".to_owned()),
                    ..RunResult::answered("hi")
                },
                json!({"answer": "hi", "answered_by": "r#0"}),
            ),
            (
                RunResult::continued(successor, edge),
                json!({"continued_to_session_id": successor, "continuation_id": edge}),
            ),
        ] {
            assert_eq!(result.to_value(), value);
            assert_eq!(RunResult::parse(&value), result);
        }
        let odd = json!({"answer": "hi", "answered_by": "r#0", "something_new": [1]});
        let parsed = RunResult::parse(&odd);
        assert_eq!(parsed.answered_by.as_deref(), Some("r#0"));
        assert_eq!(parsed.to_value(), odd);
        assert_eq!(
            RunResult::parse(&json!({"continued_to_session_id": successor}))
                .continued_to_session_id,
            Some(successor)
        );
    }

    #[test]
    fn a_new_event_writes_its_body_as_kind_and_content() {
        let event = NewEvent::new(
            NoticeBody::text("The turn failed: boom"),
            EventRole::System,
            "runtime",
            5,
        );
        assert_eq!(event.kind, kind::NOTICE);
        assert_eq!(event.content, json!({"text": "The turn failed: boom"}));
        assert_eq!(event.meta, json!({}));
        assert_eq!(
            (
                event.role,
                event.actor.as_deref(),
                event.run_id,
                event.pi_entry_id
            ),
            (Some(EventRole::System), Some("runtime"), None, None)
        );
        assert_eq!(event.created_at_ms, 5);
        assert_eq!(
            event.body(),
            EventBody::Notice(NoticeBody::text("The turn failed: boom"))
        );
        // A message as NewEvent::message writes it from its content.
        let message = NewEvent::new(MessageBody::text("hi"), EventRole::User, "user", 5);
        assert_eq!(
            message,
            NewEvent::message(EventRole::User, "user", json!({"text": "hi"}), 5)
        );
    }
}
