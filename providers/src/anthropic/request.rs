//! The Anthropic Messages request body: the conversation as the wire takes it (consecutive
//! user-side messages merged into one user turn, each answer sent back as it came), the thinking
//! budget, and the prompt cache's marks.

use serde_json::{Value, json};

use crate::message::{AssistantBlock, Message, ReasoningLevel, Request, UserMessage, UserPart};
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

/// The Messages body for `request`: the system prompt and the last tool marked for the prompt
/// cache (so the stable prefix is written once and read after), the conversation with
/// consecutive user-side messages (input, tool results, blocks) merged into one user turn, each
/// assistant message sent back as it came (thinking with its signature, redacted thinking,
/// text, tool_use with its id), and the session id as `metadata.user_id`.
pub fn request_body(request: &Request, options: &BodyOptions) -> Value {
    let mut messages: Vec<Value> = Vec::with_capacity(request.messages.len());
    let mut push = |role: &str, blocks: Vec<Value>| {
        if blocks.is_empty() {
            return;
        }
        match messages.last_mut() {
            Some(last) if last["role"] == role => {
                if let Some(content) = last["content"].as_array_mut() {
                    content.extend(blocks);
                }
            }
            _ => messages.push(json!({"role": role, "content": blocks})),
        }
    };
    for message in &request.messages {
        match message.as_ref() {
            Message::User(user) => push("user", user_blocks(user)),
            Message::ToolResult(result) => push(
                "user",
                vec![json!({
                    "type": "tool_result",
                    "tool_use_id": result.tool_call_id,
                    "content": result.content,
                    "is_error": result.is_error,
                })],
            ),
            Message::Assistant(assistant) => {
                let blocks = assistant
                    .content
                    .iter()
                    .filter_map(|block| match block {
                        // The wire refuses empty text blocks.
                        AssistantBlock::Text { text } if text.is_empty() => None,
                        AssistantBlock::Text { text } => {
                            Some(json!({"type": "text", "text": text}))
                        }
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
                    .collect();
                push("assistant", blocks);
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
            "cache_control": {"type": "ephemeral"},
        }]);
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
                    wire["cache_control"] = json!({"type": "ephemeral"});
                }
                wire
            })
            .collect();
    }
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
