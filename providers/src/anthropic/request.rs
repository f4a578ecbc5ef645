//! The Anthropic Messages request body: the conversation as the wire takes it (consecutive
//! user-side messages merged into one user turn, each answer sent back as it came), the thinking
//! budget, and the prompt cache's marks.

use std::sync::Arc;

use serde_json::{Value, json};

use super::cache::{CACHE_MARKS_MAX, conversation_marks, ephemeral, takes_mark};
use crate::message::{
    AssistantBlock, AssistantMessage, Message, ReasoningLevel, Request, ToolResultMessage,
    UserMessage, UserPart,
};
use crate::openai::request_model;

/// The answer's token limit when the config sets none (the wire requires one).
pub const MAX_OUTPUT_TOKENS_DEFAULT: u64 = 8_192;

/// What a request body needs besides the request.
#[derive(Debug, Clone, Default)]
pub struct BodyOptions {
    /// The model when the request names none.
    pub model_default: String,
    /// `max_tokens`; [`MAX_OUTPUT_TOKENS_DEFAULT`] when unset.
    pub max_output_tokens: Option<u64>,
    /// Extended thinking's budget; off when unset.
    pub thinking_budget_tokens: Option<u64>,
}

/// A user message's blocks: its text, then each part (an image as a base64 `image` block). The
/// wire refuses empty text blocks, so a message of parts alone starts with its first part.
fn user_blocks(user: &UserMessage) -> Vec<Value> {
    let mut blocks = Vec::with_capacity(user.parts.len() + 1);
    if !user.text.is_empty() || user.parts.is_empty() {
        blocks.push(json!({"type": "text", "text": user.text}));
    }
    blocks.extend(user.parts.iter().map(|part| match part {
        UserPart::Text { text } => json!({"type": "text", "text": text}),
        UserPart::Image { media_type, data } => json!({
            "type": "image",
            "source": {"type": "base64", "media_type": media_type, "data": data},
        }),
    }));
    blocks
}

/// A tool result's content: its text as a string, as it always was, or, with images, its text
/// block and then a base64 `image` block for each.
fn tool_result_content(result: &ToolResultMessage) -> Value {
    if result.images.is_empty() {
        return Value::String(result.content.clone());
    }
    let mut blocks = Vec::with_capacity(result.images.len() + 1);
    if !result.content.is_empty() {
        blocks.push(json!({"type": "text", "text": result.content}));
    }
    blocks.extend(result.images.iter().map(|image| {
        json!({
            "type": "image",
            "source": {"type": "base64", "media_type": image.media_type, "data": image.data},
        })
    }));
    Value::Array(blocks)
}

/// A block's place in the body: its message's index in `messages`, and its own in `content`.
type BlockAt = (usize, usize);

/// The conversation as the wire takes it, consecutive user-side messages (input, blocks, tool
/// results) merged into one user turn; and for each of `messages`, where its last block went
/// (`None` for a message that sent no block).
fn wire_messages(messages: &[Arc<Message>]) -> (Vec<Value>, Vec<Option<BlockAt>>) {
    let mut wire: Vec<Value> = Vec::with_capacity(messages.len());
    let mut last_blocks = Vec::with_capacity(messages.len());
    for message in messages {
        let (role, blocks) = match message.as_ref() {
            Message::User(user) => ("user", user_blocks(user)),
            Message::ToolResult(result) => (
                "user",
                vec![json!({
                    "type": "tool_result",
                    "tool_use_id": result.tool_call_id,
                    "content": tool_result_content(result),
                    "is_error": result.is_error,
                })],
            ),
            Message::Assistant(assistant) => ("assistant", assistant_blocks(assistant)),
        };
        last_blocks.push(push(&mut wire, role, blocks));
    }
    (wire, last_blocks)
}

/// Appends `blocks` to the last message of `wire` when it has `role`, else as a new message;
/// returns where the last of them went.
fn push(wire: &mut Vec<Value>, role: &str, blocks: Vec<Value>) -> Option<BlockAt> {
    if blocks.is_empty() {
        return None;
    }
    if wire.last().is_none_or(|last| last["role"] != role) {
        wire.push(json!({"role": role, "content": []}));
    }
    let message_idx = wire.len() - 1;
    let content = wire[message_idx]["content"]
        .as_array_mut()
        .expect("a wire message's content is an array");
    content.extend(blocks);
    Some((message_idx, content.len() - 1))
}

/// An assistant message's blocks, sent back as they came: thinking with its signature, redacted
/// thinking, text, tool_use with its id.
fn assistant_blocks(assistant: &AssistantMessage) -> Vec<Value> {
    assistant
        .content
        .iter()
        .filter_map(|block| match block {
            // The wire refuses empty text blocks.
            AssistantBlock::Text { text } if text.is_empty() => None,
            AssistantBlock::Text { text } => Some(json!({"type": "text", "text": text})),
            // Reasoning without a signature (another provider's) cannot be sent.
            AssistantBlock::Thinking {
                signature: None, ..
            } => None,
            AssistantBlock::Thinking {
                thinking,
                signature: Some(signature),
            } => Some(json!({
                "type": "thinking",
                "thinking": thinking,
                "signature": signature,
            })),
            AssistantBlock::RedactedThinking { data } => {
                Some(json!({"type": "redacted_thinking", "data": data}))
            }
            AssistantBlock::ToolCall(call) => Some(json!({
                "type": "tool_use",
                "id": call.id,
                "name": call.name,
                "input": tool_input(&call.arguments),
            })),
        })
        .collect()
}

/// The Messages body for `request`: the conversation (`wire_messages`), the prompt cache's
/// marks on the last tool, the system prompt, the turn's input and its newest step (the rule is
/// in [`super::cache`]; never more than [`CACHE_MARKS_MAX`]), the thinking budget, and the
/// session id as `metadata.user_id`.
pub fn request_body(request: &Request, options: &BodyOptions) -> Value {
    let (mut messages, last_blocks) = wire_messages(&request.messages);
    let mut n_marks = 0;
    for idx in conversation_marks(&request.messages) {
        if let Some((message_idx, block_idx)) = last_blocks[idx] {
            let block = &mut messages[message_idx]["content"][block_idx];
            if takes_mark(block) {
                block["cache_control"] = ephemeral();
                n_marks += 1;
            }
        }
    }
    let max_tokens = options
        .max_output_tokens
        .unwrap_or(MAX_OUTPUT_TOKENS_DEFAULT);
    let mut body = json!({
        "model": request_model(request, &options.model_default),
        "max_tokens": max_tokens,
        "messages": messages,
        "stream": true,
    });
    if !request.system_prompt.is_empty() {
        body["system"] = json!([{
            "type": "text",
            "text": request.system_prompt,
            "cache_control": ephemeral(),
        }]);
        n_marks += 1;
    }
    if !request.tools.is_empty() {
        let n_tools = request.tools.len();
        body["tools"] = request
            .tools
            .iter()
            .enumerate()
            .map(|(idx, tool)| {
                let mut wire = json!({
                    "name": tool.name,
                    "description": tool.description,
                    "input_schema": tool.parameters,
                });
                if idx + 1 == n_tools {
                    wire["cache_control"] = ephemeral();
                }
                wire
            })
            .collect();
        n_marks += 1;
    }
    assert!(
        n_marks <= CACHE_MARKS_MAX,
        "{n_marks} cache marks: the wire takes {CACHE_MARKS_MAX}"
    );
    // The session's reasoning level, over the configured budget.
    let budget_tokens = match request.reasoning {
        Some(level) => Some(thinking_budget(level, max_tokens)),
        None => options.thinking_budget_tokens,
    };
    if let Some(budget_tokens) = budget_tokens {
        body["thinking"] = json!({"type": "enabled", "budget_tokens": budget_tokens});
    }
    if let Some(session_id) = &request.session_id {
        body["metadata"] = json!({"user_id": session_id});
    }
    body
}

/// A call's `input` as the wire takes it: always an object. Arguments that did not parse (a
/// token limit cut the call mid-way) are stored as the text that came, a JSON string; the wire
/// refuses a string (or any other non-object) there, and with it every later request of the
/// conversation, so such a call goes back as `{}`. The store keeps the text, and the call's
/// result, an error from the verb's argument check, tells the model what went wrong.
fn tool_input(arguments: &Value) -> Value {
    if arguments.is_object() {
        arguments.clone()
    } else {
        json!({})
    }
}

/// The smallest thinking budget the wire takes.
pub const THINKING_BUDGET_TOKENS_MIN: u64 = 1024;

/// The thinking budget of a reasoning level: 1,024, 4,096 or 16,384 tokens, and always below
/// `max_tokens` (the wire refuses a budget that is not), down to the wire's least.
pub fn thinking_budget(level: ReasoningLevel, max_tokens: u64) -> u64 {
    let wanted: u64 = match level {
        ReasoningLevel::Low => THINKING_BUDGET_TOKENS_MIN,
        ReasoningLevel::Medium => 4096,
        ReasoningLevel::High => 16_384,
    };
    wanted
        .min(max_tokens.saturating_sub(1))
        .max(THINKING_BUDGET_TOKENS_MIN)
}
