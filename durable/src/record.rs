//! The store format: the lines of `entries`, `documents` and `tasks`.
//!
//! Entries are the immutable transcript; documents are small JSON state committed together with
//! entries (the newest line of a name wins); tasks are the checkpointed state machines of the
//! turn in flight, one per model request and one per tool call (the newest line of a task wins).

use seed_providers::{AssistantMessage, Message, ToolResultMessage, ToolSpec, UserMessage};
use serde::{Deserialize, Serialize};

/// An entry's id: 1, 2, 3, ... in commit order within one store.
pub type EntryId = u64;

/// One line of `entries`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    pub id: EntryId,
    #[serde(flatten)]
    pub body: EntryBody,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type")]
pub enum EntryBody {
    /// A turn's input.
    #[serde(rename = "pi.user")]
    User {
        request_id: String,
        message: UserMessage,
    },
    /// One provider response, exactly as the provider sent it.
    #[serde(rename = "pi.assistant")]
    Assistant {
        request_id: String,
        message: AssistantMessage,
    },
    /// One tool result. `ends_turn` records that the verb ended the turn after its batch;
    /// `placeholder` that it stands in for a result still to come (a parked delegate call),
    /// which the log does not show.
    #[serde(rename = "pi.tool-result")]
    ToolResult {
        request_id: String,
        message: ToolResultMessage,
        #[serde(default, skip_serializing_if = "is_false")]
        ends_turn: bool,
        #[serde(default, skip_serializing_if = "is_false")]
        placeholder: bool,
    },
    /// The system prompt and the tools on offer from here on.
    #[serde(rename = "pi.system")]
    System {
        system_prompt: String,
        tools: Vec<ToolSpec>,
    },
    /// A message Seed wrote from its log.
    #[serde(rename = "seed.replay")]
    Replay { message: Message },
    /// Starts a new context: the entries before it stay in the store, outside the context.
    #[serde(rename = "pi.reset")]
    Reset {},
    /// Carries no message of its own: replaces what `target` contributes to the context.
    #[serde(rename = "pi.edit")]
    Edit { target: EntryId, message: Message },
}

fn is_false(flag: &bool) -> bool {
    !flag
}

impl EntryBody {
    /// The request id of a turn's own entries.
    pub fn request_id(&self) -> Option<&str> {
        match self {
            EntryBody::User { request_id, .. }
            | EntryBody::Assistant { request_id, .. }
            | EntryBody::ToolResult { request_id, .. } => Some(request_id),
            _ => None,
        }
    }
}

/// One line of `documents`: the newest value of a name wins; `null` clears it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DocumentLine {
    pub name: String,
    pub value: serde_json::Value,
}

/// `pi.agent`: the model and reasoning level.
pub const AGENT_DOCUMENT: &str = "pi.agent";
/// `pi.live`: the response in flight.
pub const LIVE_DOCUMENT: &str = "pi.live";
/// `pi.turn`: the turn in flight, or the last one and how it ended.
pub const TURN_DOCUMENT: &str = "pi.turn";

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentDocument {
    pub model: String,
    pub reasoning: Option<seed_providers::ReasoningLevel>,
}

/// The response in flight: its text, reasoning and tool calls so far, committed at most every
/// live interval.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LiveDocument {
    pub request_id: String,
    pub text: String,
    pub thinking: String,
    /// The tool calls of the response so far, each once its arguments are whole.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<seed_providers::ToolCall>,
    pub state: LiveState,
    pub error: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LiveState {
    Streaming,
    /// Cut off by a stop: the text stays here, and the response stays out of the context.
    Stopped,
    /// The provider failed mid-way.
    Failed,
}

/// The turn in flight (state `open`), or how the newest turn ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TurnDocument {
    pub request_id: String,
    pub input_entry_id: EntryId,
    pub state: TurnState,
    /// The entry that answered, for `answered`.
    pub answer_entry_id: Option<EntryId>,
    /// Why the turn ended, for `ended`, `failed` and `aborted`.
    pub reason: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TurnState {
    /// Unsettled: a run is (or was, before a crash) working on it.
    Open,
    /// The model answered.
    Answered,
    /// A verb or the hook ended it after a batch of tool calls.
    Ended,
    /// A stop cut it off.
    Stopped,
    /// The provider failed; the same run may try again.
    Failed,
    /// A different run found it unsettled and gave up on it.
    Aborted,
}

/// One line of `tasks`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Task {
    /// The `step`-th model request of a turn.
    Model {
        request_id: String,
        step: u32,
        state: ModelTaskState,
    },
    /// One tool call.
    Tool {
        request_id: String,
        call_id: String,
        name: String,
        state: ToolTaskState,
    },
}

impl Task {
    /// The key under which the newest line of a task wins.
    pub fn key(&self) -> String {
        match self {
            Task::Model {
                request_id, step, ..
            } => format!("model:{request_id}:{step}"),
            Task::Tool { call_id, .. } => format!("tool:{call_id}"),
        }
    }

    /// The turn the task belongs to.
    pub fn request_id(&self) -> &str {
        match self {
            Task::Model { request_id, .. } | Task::Tool { request_id, .. } => request_id,
        }
    }

    /// Whether the task reached an end it never leaves: a request completed or aborted, a call
    /// answered or interrupted.
    pub fn is_ended(&self) -> bool {
        match self {
            Task::Model { state, .. } => !matches!(state, ModelTaskState::Streaming),
            Task::Tool { state, .. } => matches!(
                state,
                ToolTaskState::Completed { .. } | ToolTaskState::Interrupted { .. }
            ),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum ModelTaskState {
    /// Streaming; its partial text is in `pi.live`.
    Streaming,
    Completed {
        entry_id: EntryId,
    },
    /// Stopped or failed; the response is not in the context.
    Aborted,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum ToolTaskState {
    /// The call waits for a person's decision; the tool has not begun. Approved, the call moves
    /// to `started` and runs; denied, it is answered with the reason and never runs.
    Awaiting,
    /// The tool may have begun: a cut-off call of a tool that is not safe to repeat is not
    /// run again.
    Started,
    Completed {
        entry_id: EntryId,
    },
    /// Answered with an interrupted result instead of being run (again).
    Interrupted {
        entry_id: EntryId,
    },
}

/// The result given to a call whose tool may have run but left no result, when the tool is not
/// safe to repeat.
pub fn interrupted_result(call_id: &str, tool_name: &str) -> ToolResultMessage {
    ToolResultMessage {
        tool_call_id: call_id.to_owned(),
        tool_name: tool_name.to_owned(),
        content: format!(
            "interrupted: the {tool_name} call was cut off before its result was recorded, and \
             it was not run again because it is not safe to repeat. Check whether it took \
             effect before relying on it."
        ),
        is_error: true,
        images: Vec::new(),
    }
}

/// The result a different run gives to the calls an earlier run left without one.
pub fn restart_result(call_id: &str, tool_name: &str) -> ToolResultMessage {
    ToolResultMessage {
        tool_call_id: call_id.to_owned(),
        tool_name: tool_name.to_owned(),
        content: "interrupted by a service restart".to_owned(),
        is_error: true,
        images: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_serialize_with_their_spec_names() {
        let entry = Entry {
            id: 7,
            body: EntryBody::User {
                request_id: "r1".to_owned(),
                message: UserMessage::new("hi".to_owned()),
            },
        };
        let line = serde_json::to_string(&entry).expect("serializable");
        assert_eq!(
            line,
            r#"{"id":7,"type":"pi.user","request_id":"r1","message":{"text":"hi"}}"#
        );
        assert_eq!(serde_json::from_str::<Entry>(&line).ok(), Some(entry));
        let reset = serde_json::to_string(&Entry {
            id: 8,
            body: EntryBody::Reset {},
        })
        .expect("serializable");
        assert_eq!(reset, r#"{"id":8,"type":"pi.reset"}"#);
    }

    #[test]
    fn tasks_are_keyed_per_request_step_and_per_call() {
        let model = Task::Model {
            request_id: "r".to_owned(),
            step: 2,
            state: ModelTaskState::Streaming,
        };
        assert_eq!(model.key(), "model:r:2");
        let tool = Task::Tool {
            request_id: "r".to_owned(),
            call_id: "c9".to_owned(),
            name: "read".to_owned(),
            state: ToolTaskState::Completed { entry_id: 4 },
        };
        assert_eq!(tool.key(), "tool:c9");
        let line = serde_json::to_string(&tool).expect("serializable");
        assert_eq!(serde_json::from_str::<Task>(&line).ok(), Some(tool));
    }
}
