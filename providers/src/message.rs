//! The conversation as data: what a request to a model holds and what the model answers.
//!
//! These types are the wire-neutral form every provider translates to and from; they serialize
//! to JSON with snake_case field names, and enums that carry data are tagged by `type` (a
//! message by its `role`).

use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// Tokens a response counted, as the provider reported them (or, for a server that reports
/// none, as the harness estimated them from the request: `estimated`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// Prompt tokens read fresh (not from the provider's cache).
    pub input: u64,
    /// Tokens the model generated.
    pub output: u64,
    /// Prompt tokens served from the provider's cache.
    pub cache_read: u64,
    /// Prompt tokens written to the provider's cache.
    pub cache_write: u64,
    /// Whether the figures are estimated from the request's size ([`crate::estimate`]), the
    /// server having sent none. Left out of the JSON when false, so a counted usage reads as
    /// it always has.
    #[serde(default, skip_serializing_if = "is_false")]
    pub estimated: bool,
}

fn is_false(value: &bool) -> bool {
    !value
}

impl Usage {
    /// The whole prompt the model read, cached or not: `input + cache_read + cache_write`.
    pub fn prompt_tokens(&self) -> u64 {
        self.input + self.cache_read + self.cache_write
    }
}

/// Why a response ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// The model finished its answer.
    Stop,
    /// The model stopped to have its tool calls run.
    ToolUse,
    /// The response hit the output token limit.
    Length,
    /// The request was cancelled before the response finished.
    Aborted,
    /// The provider failed; see `AssistantMessage::error_message`.
    Error,
}

/// A call of a tool, as the model asked for it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolCall {
    /// The provider's id for the call; its result names it.
    pub id: String,
    /// The tool's name.
    pub name: String,
    /// The arguments, as a JSON value (usually an object).
    pub arguments: serde_json::Value,
}

/// One block of an assistant message, in the order the model produced them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum AssistantBlock {
    /// Text for the reader.
    Text {
        /// The text.
        text: String,
    },
    /// The model's reasoning, where the wire carries it.
    Thinking {
        /// The reasoning text.
        thinking: String,
        /// The provider's signature over the reasoning: kept exactly and sent back unchanged,
        /// since providers refuse reasoning whose signature does not match.
        signature: Option<String>,
    },
    /// Reasoning the provider sent encrypted (Anthropic's `redacted_thinking`): opaque, kept
    /// exactly and sent back unchanged.
    RedactedThinking {
        /// The provider's opaque payload.
        data: String,
    },
    /// A tool call: `{"type": "tool_call", "id": .., "name": .., "arguments": ..}`.
    ToolCall(ToolCall),
}

/// A model's response, whole.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AssistantMessage {
    /// The blocks, in the order the model produced them.
    pub content: Vec<AssistantBlock>,
    /// Tokens the response counted.
    pub usage: Usage,
    /// Why the response ended.
    pub stop_reason: StopReason,
    /// The model that answered, as the provider named it.
    pub model: String,
    /// What went wrong, when `stop_reason` is `Error` (or `Aborted`).
    pub error_message: Option<String>,
}

impl AssistantMessage {
    /// All text blocks, joined with nothing between them.
    pub fn text(&self) -> String {
        self.text_blocks().collect()
    }

    /// The length in bytes of [`AssistantMessage::text`], without building it.
    pub fn text_len(&self) -> usize {
        self.text_blocks().map(str::len).sum()
    }

    fn text_blocks(&self) -> impl Iterator<Item = &str> {
        self.content.iter().filter_map(|block| match block {
            AssistantBlock::Text { text } => Some(text.as_str()),
            _ => None,
        })
    }

    /// The tool calls, in order.
    pub fn tool_calls(&self) -> Vec<&ToolCall> {
        self.content
            .iter()
            .filter_map(|block| match block {
                AssistantBlock::ToolCall(call) => Some(call),
                _ => None,
            })
            .collect()
    }

    /// Whether the response finished (`Stop`, `ToolUse` or `Length`) rather than breaking off
    /// (`Aborted`, `Error`).
    pub fn is_complete(&self) -> bool {
        matches!(
            self.stop_reason,
            StopReason::Stop | StopReason::ToolUse | StopReason::Length
        )
    }
}

/// What the user said: the text, then the parts that came with it (files a person attached, as
/// the model reads them). A message without parts is `{"text": ..}` on the wire and in a store,
/// as it always was.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UserMessage {
    /// The text.
    pub text: String,
    /// What follows the text, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub parts: Vec<UserPart>,
}

impl UserMessage {
    /// A message of text alone.
    pub fn new(text: impl Into<String>) -> Self {
        UserMessage {
            text: text.into(),
            parts: Vec::new(),
        }
    }
}

/// One part of a user message after its text: `{"type": "text", "text": ..}` or
/// `{"type": "image", "media_type": "image/png", "data": "<base64>"}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum UserPart {
    /// More text (an attached file's text, or a line naming a file).
    Text {
        /// The text.
        text: String,
    },
    /// An image, for a model that takes images.
    Image {
        /// `image/png`, `image/jpeg`, `image/gif` or `image/webp`.
        media_type: String,
        /// The image's bytes in standard base64, exactly as both wires carry them.
        data: String,
    },
}

/// The result of one tool call, sent back to the model.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolResultMessage {
    /// The `ToolCall::id` this answers.
    pub tool_call_id: String,
    /// The tool's name.
    pub tool_name: String,
    /// The result as text.
    pub content: String,
    /// Whether the tool failed; `content` then says how.
    pub is_error: bool,
    /// Images the tool returned, after its text, for a wire that takes images in tool results
    /// (Anthropic's does, Chat Completions' does not) and a model that takes images; `content`
    /// names each one, so a model that is not shown them still knows they exist.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub images: Vec<ResultImage>,
}

/// An image in a tool's result: `{"media_type": "image/png", "data": "<base64>",
/// "attachment_id"?}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResultImage {
    /// `image/png`, `image/jpeg`, `image/gif` or `image/webp`.
    pub media_type: String,
    /// The image's bytes in standard base64, exactly as the wires carry them.
    pub data: String,
    /// The session's attachment that keeps the image, where one does (named in the log's
    /// result, so that people can open it); not sent to the model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attachment_id: Option<String>,
}

/// One message of the conversation, tagged by its `role`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "role", rename_all = "snake_case")]
pub enum Message {
    /// `{"role": "user", "text": ..}`.
    User(UserMessage),
    /// `{"role": "assistant", "content": [..], ..}`.
    Assistant(AssistantMessage),
    /// `{"role": "tool_result", "tool_call_id": .., ..}`.
    ToolResult(ToolResultMessage),
}

/// A tool the model may call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolSpec {
    /// The name the model calls it by.
    pub name: String,
    /// What it does, for the model.
    pub description: String,
    /// Its parameters, as a JSON Schema.
    pub parameters: serde_json::Value,
}

impl AsRef<Message> for Message {
    fn as_ref(&self) -> &Message {
        self
    }
}

/// One request to a model.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Request {
    /// The model to ask, as the provider names it.
    pub model: String,
    /// How hard the model reasons, where the provider and model take a level (OpenAI's
    /// `reasoning_effort`, Anthropic's thinking budget); `None`: the provider's configuration.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning: Option<ReasoningLevel>,
    /// The system prompt, sent first.
    pub system_prompt: String,
    /// The conversation so far, oldest first. Shared, not copied: a harness sends the same
    /// messages again with every request of a session, and a request costs a reference each.
    pub messages: Vec<Arc<Message>>,
    /// The tools the model may call.
    pub tools: Arc<[ToolSpec]>,
    /// The conversation's own id, for providers that route (and cache) by it.
    pub session_id: Option<String>,
}

/// How hard a model reasons before it answers: a session's setting, sent as each wire takes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ReasoningLevel {
    Low,
    Medium,
    High,
}

impl ReasoningLevel {
    /// Every level, lowest first.
    pub const ALL: [ReasoningLevel; 3] = [
        ReasoningLevel::Low,
        ReasoningLevel::Medium,
        ReasoningLevel::High,
    ];

    /// The level's name, as the API and the wires spell it: `low`, `medium`, `high`.
    pub fn name(self) -> &'static str {
        match self {
            ReasoningLevel::Low => "low",
            ReasoningLevel::Medium => "medium",
            ReasoningLevel::High => "high",
        }
    }

    /// The level named `name`, if it is one.
    pub fn parse(name: &str) -> Option<ReasoningLevel> {
        ReasoningLevel::ALL
            .into_iter()
            .find(|level| level.name() == name)
    }
}

impl std::fmt::Display for ReasoningLevel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn round_trip<T>(value: &T, expected_json: serde_json::Value)
    where
        T: Serialize + serde::de::DeserializeOwned + PartialEq + std::fmt::Debug,
    {
        let json = serde_json::to_value(value).expect("serializes");
        assert_eq!(json, expected_json);
        let text = serde_json::to_string(value).expect("serializes");
        let back: T = serde_json::from_str(&text).expect("deserializes");
        assert_eq!(&back, value);
    }

    fn assistant() -> AssistantMessage {
        AssistantMessage {
            content: vec![
                AssistantBlock::Thinking {
                    thinking: "the user wants a file".to_owned(),
                    signature: Some("EqQBCkYIARgCKkD+/sig==\n\t ünï".to_owned()),
                },
                AssistantBlock::Text {
                    text: "Reading it. ".to_owned(),
                },
                AssistantBlock::ToolCall(ToolCall {
                    id: "call_1".to_owned(),
                    name: "read".to_owned(),
                    arguments: json!({"path": "notes.md"}),
                }),
                AssistantBlock::Text {
                    text: "Done.".to_owned(),
                },
            ],
            usage: Usage {
                input: 100,
                output: 20,
                cache_read: 50,
                cache_write: 7,
                estimated: false,
            },
            stop_reason: StopReason::ToolUse,
            model: "claude-test".to_owned(),
            error_message: None,
        }
    }

    #[test]
    fn usage_and_stop_reason_round_trip() {
        let usage = Usage {
            input: 1,
            output: 2,
            cache_read: 3,
            cache_write: 4,
            estimated: false,
        };
        round_trip(
            &usage,
            json!({"input": 1, "output": 2, "cache_read": 3, "cache_write": 4}),
        );
        assert_eq!(usage.prompt_tokens(), 8);
        // An estimate says so; a counted usage stored before the field reads as counted.
        round_trip(
            &Usage {
                estimated: true,
                ..usage
            },
            json!({"input": 1, "output": 2, "cache_read": 3, "cache_write": 4, "estimated": true}),
        );
        assert_eq!(Usage::default().prompt_tokens(), 0);
        for (reason, name) in [
            (StopReason::Stop, "stop"),
            (StopReason::ToolUse, "tool_use"),
            (StopReason::Length, "length"),
            (StopReason::Aborted, "aborted"),
            (StopReason::Error, "error"),
        ] {
            round_trip(&reason, json!(name));
        }
    }

    #[test]
    fn assistant_blocks_round_trip() {
        round_trip(
            &AssistantBlock::Text {
                text: "hi".to_owned(),
            },
            json!({"type": "text", "text": "hi"}),
        );
        round_trip(
            &AssistantBlock::Thinking {
                thinking: "hmm".to_owned(),
                signature: None,
            },
            json!({"type": "thinking", "thinking": "hmm", "signature": null}),
        );
        round_trip(
            &AssistantBlock::ToolCall(ToolCall {
                id: "c".to_owned(),
                name: "ls".to_owned(),
                arguments: json!({"all": true, "n": [1, 2.5, null]}),
            }),
            json!({"type": "tool_call", "id": "c", "name": "ls",
                   "arguments": {"all": true, "n": [1, 2.5, null]}}),
        );
    }

    #[test]
    fn thinking_signature_survives_exactly() {
        let signature = "EqQBCkYIARgCKkD+/sig==\n\t ünï \"quoted\" \\ ".to_owned();
        let block = AssistantBlock::Thinking {
            thinking: String::new(),
            signature: Some(signature.clone()),
        };
        let text = serde_json::to_string(&Message::Assistant(AssistantMessage {
            content: vec![block],
            ..assistant()
        }))
        .expect("serializes");
        let Message::Assistant(back) = serde_json::from_str(&text).expect("deserializes") else {
            panic!("not an assistant message: {text}");
        };
        let [
            AssistantBlock::Thinking {
                signature: back, ..
            },
        ] = back.content.as_slice()
        else {
            panic!("not one thinking block: {text}");
        };
        assert_eq!(back.as_deref(), Some(signature.as_str()));
    }

    #[test]
    fn messages_round_trip() {
        round_trip(
            &Message::User(UserMessage::new("hello".to_owned())),
            json!({"role": "user", "text": "hello"}),
        );
        round_trip(
            &Message::User(UserMessage {
                text: "look".to_owned(),
                parts: vec![
                    UserPart::Text {
                        text: "attachment:a1 (notes.txt, text/plain, 5 bytes)".to_owned(),
                    },
                    UserPart::Image {
                        media_type: "image/png".to_owned(),
                        data: "iVBORw0KGgo=".to_owned(),
                    },
                ],
            }),
            json!({"role": "user", "text": "look", "parts": [
                {"type": "text", "text": "attachment:a1 (notes.txt, text/plain, 5 bytes)"},
                {"type": "image", "media_type": "image/png", "data": "iVBORw0KGgo="},
            ]}),
        );
        round_trip(
            &Message::ToolResult(ToolResultMessage {
                tool_call_id: "call_1".to_owned(),
                tool_name: "read".to_owned(),
                content: "no such file".to_owned(),
                is_error: true,
                images: Vec::new(),
            }),
            json!({"role": "tool_result", "tool_call_id": "call_1", "tool_name": "read",
                   "content": "no such file", "is_error": true}),
        );
        let message = assistant();
        round_trip(
            &Message::Assistant(message.clone()),
            json!({
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "the user wants a file",
                     "signature": "EqQBCkYIARgCKkD+/sig==\n\t ünï"},
                    {"type": "text", "text": "Reading it. "},
                    {"type": "tool_call", "id": "call_1", "name": "read",
                     "arguments": {"path": "notes.md"}},
                    {"type": "text", "text": "Done."},
                ],
                "usage": {"input": 100, "output": 20, "cache_read": 50, "cache_write": 7},
                "stop_reason": "tool_use",
                "model": "claude-test",
                "error_message": null,
            }),
        );
        let broken = AssistantMessage {
            stop_reason: StopReason::Error,
            error_message: Some("http 500: overloaded".to_owned()),
            ..message
        };
        round_trip(&broken, serde_json::to_value(&broken).expect("serializes"));
    }

    #[test]
    fn request_round_trips() {
        let request = Request {
            reasoning: None,
            model: "gpt-4o".to_owned(),
            system_prompt: "be brief".to_owned(),
            messages: vec![
                Arc::new(Message::User(UserMessage::new("list files".to_owned()))),
                Arc::new(Message::Assistant(assistant())),
            ],
            tools: Arc::from(vec![ToolSpec {
                name: "ls".to_owned(),
                description: "lists files".to_owned(),
                parameters: json!({"type": "object", "properties": {}}),
            }]),
            session_id: Some("s-1".to_owned()),
        };
        let json = serde_json::to_value(&request).expect("serializes");
        assert_eq!(json["session_id"], json!("s-1"));
        assert_eq!(json["tools"][0]["parameters"]["type"], json!("object"));
        round_trip(&request, json);
    }

    #[test]
    fn assistant_message_accessors() {
        let message = assistant();
        assert_eq!(message.text(), "Reading it. Done.");
        assert_eq!(message.text_len(), "Reading it. Done.".len());
        let calls = message.tool_calls();
        assert_eq!(calls.len(), 1);
        assert_eq!(calls[0].name, "read");
        assert!(message.is_complete());
        for (reason, complete) in [
            (StopReason::Stop, true),
            (StopReason::ToolUse, true),
            (StopReason::Length, true),
            (StopReason::Aborted, false),
            (StopReason::Error, false),
        ] {
            let message = AssistantMessage {
                stop_reason: reason,
                ..assistant()
            };
            assert_eq!(message.is_complete(), complete, "{reason:?}");
        }
    }
}
