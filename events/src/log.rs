//! Log events: the rows of `session_events`, the canonical record of a session.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::{EventId, RunId, SessionId, UnknownName};

/// Who speaks in a message event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EventRole {
    User,
    Assistant,
    System,
    Tool,
}

impl EventRole {
    pub const ALL: [EventRole; 4] = [
        EventRole::User,
        EventRole::Assistant,
        EventRole::System,
        EventRole::Tool,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            EventRole::User => "user",
            EventRole::Assistant => "assistant",
            EventRole::System => "system",
            EventRole::Tool => "tool",
        }
    }
}

impl fmt::Display for EventRole {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for EventRole {
    type Err = UnknownName;
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        EventRole::ALL
            .into_iter()
            .find(|role| role.as_str() == text)
            .ok_or_else(|| UnknownName {
                kind: "event role",
                value: text.to_owned(),
            })
    }
}

/// An event to append to a session's log. The store assigns its id and `seq`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NewEvent {
    /// `message`, `tool_call`, `tool_result`, `notice`, ...
    pub kind: String,
    pub role: Option<EventRole>,
    /// `user`, `system`, `trigger`, `agent`, ... : who caused the event.
    pub actor: Option<String>,
    pub content: serde_json::Value,
    pub meta: serde_json::Value,
    pub run_id: Option<RunId>,
    /// The store entry this event was projected from; `None` for events written without the
    /// harness (user messages, verbs run by hand, notices), which are pending import.
    pub pi_entry_id: Option<i64>,
    pub created_at_ms: i64,
}

impl NewEvent {
    /// A plain message event with empty meta.
    pub fn message(
        role: EventRole,
        actor: &str,
        content: serde_json::Value,
        created_at_ms: i64,
    ) -> Self {
        NewEvent {
            kind: "message".to_owned(),
            role: Some(role),
            actor: Some(actor.to_owned()),
            content,
            meta: serde_json::Value::Object(Default::default()),
            run_id: None,
            pi_entry_id: None,
            created_at_ms,
        }
    }
}

/// An event as stored in a session's log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionEvent {
    pub id: EventId,
    pub session_id: SessionId,
    /// Position in the session's log: 1, 2, 3, ... with no gaps.
    pub seq: i64,
    pub kind: String,
    pub role: Option<EventRole>,
    pub actor: Option<String>,
    pub content: serde_json::Value,
    pub meta: serde_json::Value,
    pub run_id: Option<RunId>,
    pub pi_entry_id: Option<i64>,
    pub created_at_ms: i64,
}
