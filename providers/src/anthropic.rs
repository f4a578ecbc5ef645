//! Anthropic Messages over SSE: the request body (with prompt-caching marks), the event
//! decoder, and the provider that joins them to the HTTP shell.
//!
//! The wire, as the decoder reads it: `message_start` (model, usage so far),
//! `content_block_start` / `content_block_delta` / `content_block_stop` per block (text;
//! thinking, whose `signature_delta` is kept exactly; redacted_thinking; tool_use, whose input
//! arrives as `input_json_delta` fragments), `message_delta` (stop reason and cumulative usage:
//! each figure overwrites, never adds), `message_stop`; `ping` anywhere; `error` anywhere.

use std::borrow::Cow;
use std::fmt;

use futures::stream::BoxStream;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::capabilities::ImageModels;
use crate::config::{ApiKey, ProviderConfig};
use crate::http::{Decoder, HttpClient};
use crate::message::{
    AssistantBlock, AssistantMessage, Message, ReasoningLevel, Request, StopReason, ToolCall,
    Usage, UserMessage, UserPart,
};
use crate::openai::{request_model, request_model_name};
use crate::provider::{Provider, ProviderError, ProviderErrorKind, StreamEvent};

/// The API version every request names.
pub const ANTHROPIC_VERSION: &str = "2023-06-01";

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
                            "input": call.arguments,
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

/// An event as the wire sends it, every field optional: serde reads a flat struct in one pass,
/// where an internally tagged enum would buffer each event first (twice the decoding time).
/// [`typed`] turns it into a [`WireEvent`].
#[derive(Deserialize)]
struct RawEvent<'a> {
    /// Borrowed from the event's text where it can be (type names have no escapes).
    #[serde(rename = "type", borrow)]
    kind: Cow<'a, str>,
    #[serde(default)]
    index: Option<usize>,
    #[serde(default)]
    message: Option<WireMessage>,
    #[serde(default, borrow)]
    content_block: Option<RawBlock<'a>>,
    #[serde(default, borrow)]
    delta: Option<RawDelta<'a>>,
    #[serde(default)]
    usage: Option<WireUsage>,
    #[serde(default)]
    error: Option<WireError>,
}

#[derive(Deserialize)]
struct RawBlock<'a> {
    #[serde(rename = "type", borrow)]
    kind: Cow<'a, str>,
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    thinking: Option<String>,
    #[serde(default)]
    signature: Option<String>,
    #[serde(default)]
    data: Option<String>,
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    input: Option<Value>,
}

#[derive(Deserialize)]
struct RawDelta<'a> {
    #[serde(default, rename = "type", borrow)]
    kind: Option<Cow<'a, str>>,
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    thinking: Option<String>,
    #[serde(default)]
    signature: Option<String>,
    #[serde(default)]
    partial_json: Option<String>,
    #[serde(default)]
    stop_reason: Option<String>,
}

/// The events the decoder acts on.
enum WireEvent {
    MessageStart {
        message: WireMessage,
    },
    ContentBlockStart {
        index: usize,
        content_block: WireBlock,
    },
    ContentBlockDelta {
        index: usize,
        delta: WireDelta,
    },
    ContentBlockStop {
        index: usize,
    },
    MessageDelta {
        stop_reason: Option<String>,
        usage: Option<WireUsage>,
    },
    MessageStop,
    Ping,
    Error {
        error: WireError,
    },
}

#[derive(Deserialize)]
struct WireMessage {
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    usage: Option<WireUsage>,
}

enum WireBlock {
    Text {
        text: String,
    },
    Thinking {
        thinking: String,
        signature: Option<String>,
    },
    RedactedThinking {
        data: String,
    },
    ToolUse {
        id: String,
        name: String,
        input: Option<Value>,
    },
}

enum WireDelta {
    Text { text: String },
    Thinking { thinking: String },
    Signature { signature: String },
    InputJson { partial_json: String },
}

/// The event `raw` is: `Ok(None)` for a type this decoder does not know (the wire adds some;
/// they are skipped), `Err` naming what a known type lacks.
fn typed(raw: RawEvent<'_>) -> Result<Option<WireEvent>, String> {
    let index = || {
        raw.index
            .ok_or_else(|| format!("{} without an index", raw.kind))
    };
    Ok(Some(match &*raw.kind {
        "message_start" => WireEvent::MessageStart {
            message: raw.message.ok_or("message_start without a message")?,
        },
        "content_block_start" => {
            let index = index()?;
            let block = raw
                .content_block
                .ok_or("content_block_start without a block")?;
            let content_block = match &*block.kind {
                "text" => WireBlock::Text {
                    text: block.text.unwrap_or_default(),
                },
                "thinking" => WireBlock::Thinking {
                    thinking: block.thinking.unwrap_or_default(),
                    signature: block.signature,
                },
                "redacted_thinking" => WireBlock::RedactedThinking {
                    data: block.data.ok_or("redacted_thinking without data")?,
                },
                "tool_use" => WireBlock::ToolUse {
                    id: block.id.ok_or("tool_use without an id")?,
                    name: block.name.ok_or("tool_use without a name")?,
                    input: block.input,
                },
                other => return Err(format!("a block of unknown type {other:?}")),
            };
            WireEvent::ContentBlockStart {
                index,
                content_block,
            }
        }
        "content_block_delta" => {
            let index = index()?;
            let delta = raw.delta.ok_or("content_block_delta without a delta")?;
            let missing = |field: &str| format!("a delta without its {field}");
            let delta = match delta.kind.as_deref() {
                Some("text_delta") => WireDelta::Text {
                    text: delta.text.ok_or_else(|| missing("text"))?,
                },
                Some("thinking_delta") => WireDelta::Thinking {
                    thinking: delta.thinking.ok_or_else(|| missing("thinking"))?,
                },
                Some("signature_delta") => WireDelta::Signature {
                    signature: delta.signature.ok_or_else(|| missing("signature"))?,
                },
                Some("input_json_delta") => WireDelta::InputJson {
                    partial_json: delta.partial_json.ok_or_else(|| missing("partial_json"))?,
                },
                other => return Err(format!("a delta of unknown type {other:?}")),
            };
            WireEvent::ContentBlockDelta { index, delta }
        }
        "content_block_stop" => WireEvent::ContentBlockStop { index: index()? },
        "message_delta" => WireEvent::MessageDelta {
            stop_reason: raw.delta.and_then(|delta| delta.stop_reason),
            usage: raw.usage,
        },
        "message_stop" => WireEvent::MessageStop,
        "ping" => WireEvent::Ping,
        "error" => WireEvent::Error {
            error: raw.error.ok_or("an error event without its error")?,
        },
        _ => return Ok(None),
    }))
}

/// Usage as the wire reports it: each figure present overwrites the one held.
#[derive(Deserialize)]
struct WireUsage {
    #[serde(default)]
    input_tokens: Option<u64>,
    #[serde(default)]
    output_tokens: Option<u64>,
    #[serde(default)]
    cache_read_input_tokens: Option<u64>,
    #[serde(default)]
    cache_creation_input_tokens: Option<u64>,
}

#[derive(Deserialize)]
struct WireError {
    #[serde(default, rename = "type")]
    kind: String,
    #[serde(default)]
    message: String,
}

/// The HTTP status Anthropic documents for each error type, so a mid-stream error reads like
/// the same error answered up front.
fn error_status(kind: &str) -> Option<u16> {
    Some(match kind {
        "invalid_request_error" => 400,
        "authentication_error" => 401,
        "permission_error" => 403,
        "not_found_error" => 404,
        "request_too_large" => 413,
        "rate_limit_error" => 429,
        "api_error" => 500,
        "overloaded_error" => 529,
        _ => return None,
    })
}

/// A block being assembled, at the wire's index.
#[derive(Debug)]
enum Block {
    Text(String),
    Thinking {
        thinking: String,
        signature: Option<String>,
    },
    Redacted(String),
    Tool {
        id: String,
        name: String,
        /// The input from the block's start, used when no fragments follow.
        input: Option<Value>,
        /// The `input_json_delta` fragments so far, joined.
        partial_json: String,
    },
}

/// Messages events → stream events; pure.
#[derive(Debug, Default)]
pub struct AnthropicDecoder {
    model: String,
    /// Blocks by the wire's index.
    blocks: Vec<Option<Block>>,
    usage: Usage,
    stop_reason: Option<String>,
}

impl AnthropicDecoder {
    /// A decoder for a response to a request for `model`.
    pub fn new(model: impl Into<String>) -> Self {
        Self {
            model: model.into(),
            ..Self::default()
        }
    }

    fn overwrite_usage(&mut self, usage: WireUsage, out: &mut Vec<StreamEvent>) {
        let held = &mut self.usage;
        if let Some(tokens) = usage.input_tokens {
            held.input = tokens;
        }
        if let Some(tokens) = usage.output_tokens {
            held.output = tokens;
        }
        if let Some(tokens) = usage.cache_read_input_tokens {
            held.cache_read = tokens;
        }
        if let Some(tokens) = usage.cache_creation_input_tokens {
            held.cache_write = tokens;
        }
        out.push(StreamEvent::Usage(*held));
    }

    fn block(&mut self, index: usize) -> Option<&mut Block> {
        self.blocks.get_mut(index).and_then(Option::as_mut)
    }

    fn malformed(message: String, out: &mut Vec<StreamEvent>) {
        out.push(StreamEvent::Error(ProviderError::new(
            ProviderErrorKind::Malformed,
            message,
        )));
    }

    fn finish(&mut self, out: &mut Vec<StreamEvent>) {
        let (stop_reason, error_message) = match self.stop_reason.as_deref() {
            Some("tool_use") => (StopReason::ToolUse, None),
            Some("max_tokens" | "model_context_window_exceeded") => (StopReason::Length, None),
            Some("refusal") => (
                StopReason::Error,
                Some("the model refused to answer".to_owned()),
            ),
            _ => (StopReason::Stop, None),
        };
        let content = std::mem::take(&mut self.blocks)
            .into_iter()
            .flatten()
            .map(|block| match block {
                Block::Text(text) => AssistantBlock::Text { text },
                Block::Thinking {
                    thinking,
                    signature,
                } => AssistantBlock::Thinking {
                    thinking,
                    signature,
                },
                Block::Redacted(data) => AssistantBlock::RedactedThinking { data },
                Block::Tool {
                    id,
                    name,
                    input,
                    partial_json,
                } => AssistantBlock::ToolCall(tool_call(id, name, input, &partial_json)),
            })
            .collect();
        out.push(StreamEvent::Done(AssistantMessage {
            content,
            usage: self.usage,
            stop_reason,
            model: std::mem::take(&mut self.model),
            error_message,
        }));
    }
}

/// A whole tool call: the joined fragments, else the start's input, else `{}`; fragments that
/// are not JSON are kept as the text that came.
fn tool_call(id: String, name: String, input: Option<Value>, partial_json: &str) -> ToolCall {
    let arguments = if partial_json.trim().is_empty() {
        input.unwrap_or_else(|| json!({}))
    } else {
        serde_json::from_str(partial_json)
            .unwrap_or_else(|_| Value::String(partial_json.to_owned()))
    };
    ToolCall {
        id,
        name,
        arguments,
    }
}

impl Decoder for AnthropicDecoder {
    fn event(&mut self, _event: &str, data: &str, out: &mut Vec<StreamEvent>) {
        let event = match serde_json::from_str(data).map_err(|error| error.to_string()) {
            Ok(raw) => typed(raw),
            Err(error) => Err(error),
        };
        let event = match event {
            Ok(Some(event)) => event,
            // An event type this decoder does not know is skipped: the wire adds some.
            Ok(None) => return,
            Err(error) => {
                return Self::malformed(format!("an event does not parse: {error}"), out);
            }
        };
        match event {
            WireEvent::MessageStart { message } => {
                if let Some(model) = message.model.filter(|model| !model.is_empty()) {
                    self.model = model;
                }
                if let Some(usage) = message.usage {
                    self.overwrite_usage(usage, out);
                }
            }
            WireEvent::ContentBlockStart {
                index,
                content_block,
            } => {
                let block = match content_block {
                    WireBlock::Text { text } => {
                        if !text.is_empty() {
                            out.push(StreamEvent::TextDelta(text.clone()));
                        }
                        Block::Text(text)
                    }
                    WireBlock::Thinking {
                        thinking,
                        signature,
                    } => {
                        if !thinking.is_empty() {
                            out.push(StreamEvent::ThinkingDelta(thinking.clone()));
                        }
                        Block::Thinking {
                            thinking,
                            signature,
                        }
                    }
                    WireBlock::RedactedThinking { data } => Block::Redacted(data),
                    WireBlock::ToolUse { id, name, input } => Block::Tool {
                        id,
                        name,
                        // The start carries `{}` as a placeholder when fragments follow.
                        input,
                        partial_json: String::new(),
                    },
                };
                if self.blocks.len() <= index {
                    self.blocks.resize_with(index + 1, || None);
                }
                self.blocks[index] = Some(block);
            }
            WireEvent::ContentBlockDelta { index, delta } => {
                let Some(block) = self.block(index) else {
                    return Self::malformed(
                        format!("a delta for block {index}, never started"),
                        out,
                    );
                };
                match (block, delta) {
                    (Block::Text(text), WireDelta::Text { text: more }) => {
                        text.push_str(&more);
                        out.push(StreamEvent::TextDelta(more));
                    }
                    (Block::Thinking { thinking, .. }, WireDelta::Thinking { thinking: more }) => {
                        thinking.push_str(&more);
                        out.push(StreamEvent::ThinkingDelta(more));
                    }
                    (
                        Block::Thinking { signature, .. },
                        WireDelta::Signature { signature: more },
                    ) => {
                        signature.get_or_insert_with(String::new).push_str(&more);
                    }
                    (
                        Block::Tool { partial_json, .. },
                        WireDelta::InputJson { partial_json: more },
                    ) => {
                        partial_json.push_str(&more);
                    }
                    _ => {
                        Self::malformed(
                            format!("a delta of the wrong kind for block {index}"),
                            out,
                        );
                    }
                }
            }
            WireEvent::ContentBlockStop { index } => {
                if let Some(Block::Tool {
                    id,
                    name,
                    input,
                    partial_json,
                }) = self.block(index)
                {
                    let call = tool_call(id.clone(), name.clone(), input.clone(), partial_json);
                    out.push(StreamEvent::ToolCall(call));
                }
            }
            WireEvent::MessageDelta { stop_reason, usage } => {
                if let Some(reason) = stop_reason {
                    self.stop_reason = Some(reason);
                }
                if let Some(usage) = usage {
                    self.overwrite_usage(usage, out);
                }
            }
            WireEvent::MessageStop => self.finish(out),
            WireEvent::Ping => {}
            WireEvent::Error { error } => {
                let kind = match error_status(&error.kind) {
                    Some(status) => ProviderErrorKind::Http { status },
                    None => ProviderErrorKind::Transport,
                };
                let message = if error.message.is_empty() {
                    error.kind
                } else {
                    error.message
                };
                out.push(StreamEvent::Error(ProviderError::new(kind, message)));
            }
        }
    }

    fn end(&mut self, out: &mut Vec<StreamEvent>) {
        out.push(StreamEvent::Error(ProviderError::new(
            ProviderErrorKind::Transport,
            "the stream ended before the response finished",
        )));
    }
}

/// The Anthropic provider.
pub struct AnthropicProvider {
    client: HttpClient,
    url: String,
    api_key: Option<ApiKey>,
    options: BodyOptions,
    images: ImageModels,
}

impl fmt::Debug for AnthropicProvider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AnthropicProvider")
            .field("url", &self.url)
            .field("api_key", &self.api_key)
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

impl AnthropicProvider {
    /// The provider `config` describes.
    pub fn new(config: &ProviderConfig) -> Result<Self, ProviderError> {
        Ok(Self {
            client: HttpClient::new(config.retry, &config.timeouts)?,
            url: format!("{}/v1/messages", config.base_url()),
            api_key: config.api_key.clone(),
            images: config.images(),
            options: BodyOptions {
                model_default: config.model().to_owned(),
                max_output_tokens: config.max_output_tokens,
                thinking_budget_tokens: config.thinking_budget_tokens,
            },
        })
    }

    fn headers(&self) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(
            HeaderName::from_static("anthropic-version"),
            HeaderValue::from_static(ANTHROPIC_VERSION),
        );
        if let Some(key) = &self.api_key
            && let Ok(mut value) = HeaderValue::from_str(key.expose())
        {
            value.set_sensitive(true);
            headers.insert(HeaderName::from_static("x-api-key"), value);
        }
        headers
    }
}

impl Provider for AnthropicProvider {
    fn takes_images(&self, model: &str) -> bool {
        self.images
            .takes(request_model_name(model, &self.options.model_default))
    }

    fn stream(&self, request: Request) -> BoxStream<'static, StreamEvent> {
        let body = request_body(&request, &self.options);
        let decoder = AnthropicDecoder::new(request_model(&request, &self.options.model_default));
        self.client.stream(
            &self.url,
            self.headers(),
            body.to_string().into_bytes(),
            decoder,
        )
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::http::decode_all;
    use crate::message::{ToolResultMessage, ToolSpec, UserMessage};

    /// SSE for `events`, each named by its `type` as the server names them.
    fn sse(events: &[Value]) -> String {
        let mut out = String::new();
        for event in events {
            let name = event["type"].as_str().expect("typed");
            out.push_str(&format!("event: {name}\ndata: {event}\n\n"));
        }
        out
    }

    fn decode(text: &str) -> Vec<StreamEvent> {
        let whole = decode_all(text, usize::MAX, AnthropicDecoder::new("requested"));
        for piece_bytes in [1, 5, 33] {
            let pieces = decode_all(text, piece_bytes, AnthropicDecoder::new("requested"));
            assert_eq!(pieces, whole, "pieces of {piece_bytes}");
        }
        whole
    }

    fn done(events: &[StreamEvent]) -> &AssistantMessage {
        match events.last() {
            Some(StreamEvent::Done(message)) => message,
            other => panic!("the stream did not end with Done: {other:?}"),
        }
    }

    const SIGNATURE: &str = "EqQBCkYIARgCKkD+/sig==\n\t ünï \"q\" \\";

    fn thinking_and_tools() -> Vec<Value> {
        vec![
            json!({"type": "message_start", "message": {"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5-20250929", "content": [], "stop_reason": null, "usage": {"input_tokens": 12, "cache_creation_input_tokens": 3000, "cache_read_input_tokens": 0, "output_tokens": 1}}}),
            json!({"type": "content_block_start", "index": 0, "content_block": {"type": "thinking", "thinking": "", "signature": ""}}),
            json!({"type": "ping"}),
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "Two files "}}),
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "to read."}}),
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "signature_delta", "signature": SIGNATURE}}),
            json!({"type": "content_block_stop", "index": 0}),
            json!({"type": "content_block_start", "index": 1, "content_block": {"type": "redacted_thinking", "data": "opaque=="}}),
            json!({"type": "content_block_stop", "index": 1}),
            json!({"type": "content_block_start", "index": 2, "content_block": {"type": "text", "text": ""}}),
            json!({"type": "content_block_delta", "index": 2, "delta": {"type": "text_delta", "text": "Reading "}}),
            json!({"type": "content_block_delta", "index": 2, "delta": {"type": "text_delta", "text": "both."}}),
            json!({"type": "content_block_stop", "index": 2}),
            json!({"type": "content_block_start", "index": 3, "content_block": {"type": "tool_use", "id": "toolu_a", "name": "read", "input": {}}}),
            json!({"type": "content_block_delta", "index": 3, "delta": {"type": "input_json_delta", "partial_json": ""}}),
            json!({"type": "content_block_delta", "index": 3, "delta": {"type": "input_json_delta", "partial_json": "{\"path\": \"a"}}),
            json!({"type": "content_block_delta", "index": 3, "delta": {"type": "input_json_delta", "partial_json": ".md\"}"}}),
            json!({"type": "content_block_stop", "index": 3}),
            json!({"type": "content_block_start", "index": 4, "content_block": {"type": "tool_use", "id": "toolu_b", "name": "list", "input": {}}}),
            json!({"type": "content_block_stop", "index": 4}),
            json!({"type": "message_delta", "delta": {"stop_reason": "tool_use", "stop_sequence": null}, "usage": {"output_tokens": 87}}),
            json!({"type": "message_stop"}),
        ]
    }

    #[test]
    fn thinking_with_its_signature_text_and_tool_use() {
        let events = decode(&sse(&thinking_and_tools()));
        let read = ToolCall {
            id: "toolu_a".to_owned(),
            name: "read".to_owned(),
            arguments: json!({"path": "a.md"}),
        };
        let list = ToolCall {
            id: "toolu_b".to_owned(),
            name: "list".to_owned(),
            arguments: json!({}),
        };
        let start_usage = Usage {
            input: 12,
            output: 1,
            cache_read: 0,
            cache_write: 3000,
        };
        let final_usage = Usage {
            output: 87,
            ..start_usage
        };
        assert_eq!(
            events[..events.len() - 1],
            [
                StreamEvent::Usage(start_usage),
                StreamEvent::ThinkingDelta("Two files ".to_owned()),
                StreamEvent::ThinkingDelta("to read.".to_owned()),
                StreamEvent::TextDelta("Reading ".to_owned()),
                StreamEvent::TextDelta("both.".to_owned()),
                StreamEvent::ToolCall(read.clone()),
                StreamEvent::ToolCall(list.clone()),
                // Cumulative: overwrites the 1 output token of message_start, never adds.
                StreamEvent::Usage(final_usage),
            ]
        );
        assert_eq!(
            *done(&events),
            AssistantMessage {
                content: vec![
                    AssistantBlock::Thinking {
                        thinking: "Two files to read.".to_owned(),
                        signature: Some(SIGNATURE.to_owned()),
                    },
                    AssistantBlock::RedactedThinking {
                        data: "opaque==".to_owned()
                    },
                    AssistantBlock::Text {
                        text: "Reading both.".to_owned()
                    },
                    AssistantBlock::ToolCall(read),
                    AssistantBlock::ToolCall(list),
                ],
                usage: final_usage,
                stop_reason: StopReason::ToolUse,
                model: "claude-sonnet-4-5-20250929".to_owned(),
                error_message: None,
            }
        );
    }

    #[test]
    fn usage_from_message_delta_overwrites_every_field_it_names() {
        let events = decode(&sse(&[
            json!({"type": "message_start", "message": {"model": "claude-x", "usage": {"input_tokens": 5, "output_tokens": 1}}}),
            json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": "Hi"}}),
            json!({"type": "content_block_stop", "index": 0}),
            json!({"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"input_tokens": 7, "cache_read_input_tokens": 4000, "cache_creation_input_tokens": 20, "output_tokens": 2}}),
            json!({"type": "message_stop"}),
        ]));
        assert_eq!(events[1], StreamEvent::TextDelta("Hi".to_owned()));
        let message = done(&events);
        assert_eq!(
            message.usage,
            Usage {
                input: 7,
                output: 2,
                cache_read: 4000,
                cache_write: 20,
            }
        );
        assert_eq!(message.usage.prompt_tokens(), 4027);
        assert_eq!(message.stop_reason, StopReason::Stop);
    }

    #[test]
    fn stop_reasons() {
        for (reason, expected) in [
            ("end_turn", StopReason::Stop),
            ("stop_sequence", StopReason::Stop),
            ("tool_use", StopReason::ToolUse),
            ("max_tokens", StopReason::Length),
            ("refusal", StopReason::Error),
        ] {
            let events = decode(&sse(&[
                json!({"type": "message_start", "message": {}}),
                json!({"type": "message_delta", "delta": {"stop_reason": reason}}),
                json!({"type": "message_stop"}),
            ]));
            let message = done(&events);
            assert_eq!(message.stop_reason, expected, "{reason}");
            assert_eq!(message.model, "requested");
        }
    }

    #[test]
    fn errors_mid_stream_keep_what_arrived() {
        let mut events = thinking_and_tools()[..11].to_vec();
        events.push(json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}));
        events.extend(thinking_and_tools()[11..].iter().cloned());
        let decoded = decode(&sse(&events));
        assert_eq!(
            decoded.last(),
            Some(&StreamEvent::Error(ProviderError::new(
                ProviderErrorKind::Http { status: 529 },
                "Overloaded"
            )))
        );
        assert!(decoded.contains(&StreamEvent::TextDelta("Reading ".to_owned())));
        assert!(!decoded.contains(&StreamEvent::TextDelta("both.".to_owned())));

        // A malformed event.
        let mut text = sse(&thinking_and_tools()[..4]);
        text.push_str(
            "event: content_block_delta\ndata: {\"type\": \"content_block_delta\", \"ind\n\n",
        );
        let decoded = decode(&text);
        assert!(
            matches!(decoded.last(), Some(StreamEvent::Error(error)) if error.kind == ProviderErrorKind::Malformed),
            "{decoded:?}"
        );
        assert_eq!(decoded.len(), 3, "{decoded:?}");

        // A delta for a block that never started.
        let decoded = decode(&sse(&[
            json!({"type": "content_block_delta", "index": 9, "delta": {"type": "text_delta", "text": "x"}}),
        ]));
        assert!(
            matches!(&decoded[0], StreamEvent::Error(error) if error.kind == ProviderErrorKind::Malformed)
        );

        // Cut before message_stop.
        let decoded = decode(&sse(&thinking_and_tools()[..12]));
        assert!(
            matches!(decoded.last(), Some(StreamEvent::Error(error)) if error.kind == ProviderErrorKind::Transport),
            "{decoded:?}"
        );

        // An event type the decoder does not know is skipped.
        let mut events = thinking_and_tools();
        events.insert(3, json!({"type": "future_event", "data": 1}));
        assert_eq!(decode(&sse(&events)), decode(&sse(&thinking_and_tools())));
    }

    fn request() -> Request {
        let Some(StreamEvent::Done(first)) = decode(&sse(&thinking_and_tools())).pop() else {
            panic!("no message");
        };
        Request {
            reasoning: None,
            model: "claude-opus-4-1".to_owned(),
            system_prompt: "You are terse.".to_owned(),
            messages: vec![
                Arc::new(Message::User(UserMessage::new("read both".to_owned()))),
                Arc::new(Message::Assistant(first)),
                Arc::new(Message::ToolResult(ToolResultMessage {
                    tool_call_id: "toolu_a".to_owned(),
                    tool_name: "read".to_owned(),
                    content: "A".to_owned(),
                    is_error: false,
                })),
                Arc::new(Message::ToolResult(ToolResultMessage {
                    tool_call_id: "toolu_b".to_owned(),
                    tool_name: "list".to_owned(),
                    content: "no such dir".to_owned(),
                    is_error: true,
                })),
                Arc::new(Message::User(UserMessage::new(
                    "<current_time>now</current_time>".to_owned(),
                ))),
            ],
            tools: Arc::from(vec![
                ToolSpec {
                    name: "read".to_owned(),
                    description: "reads".to_owned(),
                    parameters: json!({"type": "object"}),
                },
                ToolSpec {
                    name: "list".to_owned(),
                    description: "lists".to_owned(),
                    parameters: json!({"type": "object"}),
                },
            ]),
            session_id: Some("session-9".to_owned()),
        }
    }

    /// A session's reasoning level is the thinking budget, over the configured one, and always
    /// below `max_tokens`; without one, the configured budget (or none).
    #[test]
    fn a_reasoning_level_is_a_thinking_budget_below_max_tokens() {
        let options = |max_output_tokens, thinking_budget_tokens| BodyOptions {
            model_default: "claude-sonnet-4-5".to_owned(),
            max_output_tokens,
            thinking_budget_tokens,
        };
        let budget = |reasoning, options: &BodyOptions| {
            let request = Request {
                reasoning,
                ..request()
            };
            request_body(&request, options)["thinking"]["budget_tokens"].clone()
        };
        let roomy = options(Some(32_000), Some(2048));
        assert_eq!(budget(Some(ReasoningLevel::Low), &roomy), json!(1024));
        assert_eq!(budget(Some(ReasoningLevel::Medium), &roomy), json!(4096));
        assert_eq!(budget(Some(ReasoningLevel::High), &roomy), json!(16_384));
        assert_eq!(budget(None, &roomy), json!(2048));
        let tight = options(None, None);
        assert_eq!(
            budget(Some(ReasoningLevel::High), &tight),
            json!(MAX_OUTPUT_TOKENS_DEFAULT - 1)
        );
        assert_eq!(budget(None, &tight), serde_json::Value::Null);
        assert_eq!(
            thinking_budget(ReasoningLevel::High, 500),
            THINKING_BUDGET_TOKENS_MIN
        );
    }

    #[test]
    fn the_request_body_sends_the_answer_back_exactly() {
        let options = BodyOptions {
            model_default: "claude-sonnet-4-5".to_owned(),
            max_output_tokens: None,
            thinking_budget_tokens: Some(2048),
        };
        let body = request_body(&request(), &options);
        assert_eq!(
            body,
            json!({
                "model": "claude-opus-4-1",
                "max_tokens": MAX_OUTPUT_TOKENS_DEFAULT,
                "stream": true,
                "system": [{"type": "text", "text": "You are terse.",
                            "cache_control": {"type": "ephemeral"}}],
                "messages": [
                    {"role": "user", "content": [{"type": "text", "text": "read both"}]},
                    {"role": "assistant", "content": [
                        {"type": "thinking", "thinking": "Two files to read.", "signature": SIGNATURE},
                        {"type": "redacted_thinking", "data": "opaque=="},
                        {"type": "text", "text": "Reading both."},
                        {"type": "tool_use", "id": "toolu_a", "name": "read", "input": {"path": "a.md"}},
                        {"type": "tool_use", "id": "toolu_b", "name": "list", "input": {}},
                    ]},
                    {"role": "user", "content": [
                        {"type": "tool_result", "tool_use_id": "toolu_a", "content": "A", "is_error": false},
                        {"type": "tool_result", "tool_use_id": "toolu_b", "content": "no such dir", "is_error": true},
                        {"type": "text", "text": "<current_time>now</current_time>"},
                    ]},
                ],
                "tools": [
                    {"name": "read", "description": "reads", "input_schema": {"type": "object"}},
                    {"name": "list", "description": "lists", "input_schema": {"type": "object"},
                     "cache_control": {"type": "ephemeral"}},
                ],
                "thinking": {"type": "enabled", "budget_tokens": 2048},
                "metadata": {"user_id": "session-9"},
            })
        );
        // The default model when the session names none.
        let request = Request {
            model: String::new(),
            ..request()
        };
        assert_eq!(
            request_body(&request, &options)["model"],
            "claude-sonnet-4-5"
        );
    }

    #[test]
    fn a_message_with_an_image_sends_an_image_block() {
        let attached = Message::User(UserMessage {
            text: String::new(),
            parts: vec![
                UserPart::Text {
                    text: "attachment:a1 (dot.png, image/png, 68 bytes): the image follows."
                        .to_owned(),
                },
                UserPart::Image {
                    media_type: "image/png".to_owned(),
                    data: "iVBORw0KGgo=".to_owned(),
                },
            ],
        });
        let request = Request {
            messages: vec![Arc::new(attached)],
            ..request()
        };
        let body = request_body(&request, &BodyOptions::default());
        // No empty text block: the wire refuses them.
        assert_eq!(
            body["messages"],
            json!([{"role": "user", "content": [
                {"type": "text",
                 "text": "attachment:a1 (dot.png, image/png, 68 bytes): the image follows."},
                {"type": "image",
                 "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}},
            ]}])
        );
    }
}
