//! OpenAI-compatible Chat Completions over SSE: the request body, the chunk decoder, and the
//! provider that joins them to the HTTP shell. The same wire serves OpenAI and local servers
//! (llama.cpp's server, vLLM, Ollama's OpenAI endpoint) through the base URL.
//!
//! The wire, as the decoder reads it: each `data:` line is a chunk
//! `{"model", "choices": [{"delta": {"content", "reasoning_content" | "reasoning",
//! "tool_calls": [{"index", "id", "function": {"name", "arguments"}}]}, "finish_reason"}]}`;
//! a tool call's arguments arrive as fragments keyed by `index`, several calls interleaved; with
//! `stream_options.include_usage` a last chunk with `choices: []` (or `null`) carries `usage`
//! (`prompt_tokens` includes `prompt_tokens_details.cached_tokens`); `data: [DONE]` ends it.

use std::fmt;

use futures::stream::BoxStream;
use reqwest::header::{AUTHORIZATION, HeaderMap, HeaderValue};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::capabilities::ImageModels;
use crate::config::{ApiKey, ProviderConfig};
use crate::http::{Decoder, HttpClient};
use crate::message::{
    AssistantBlock, AssistantMessage, Message, Request, StopReason, ToolCall, Usage, UserMessage,
    UserPart,
};
use crate::provider::{Provider, ProviderError, ProviderErrorKind, StreamEvent};

/// What a request body needs besides the request.
#[derive(Debug, Clone, Default)]
pub struct BodyOptions {
    /// The model when the request names none.
    pub model_default: String,
    /// `max_completion_tokens`, when set.
    pub max_output_tokens: Option<u64>,
}

/// The model a request goes to: its own (the session's), else the configured default.
pub(crate) fn request_model<'a>(request: &'a Request, model_default: &'a str) -> &'a str {
    request_model_name(&request.model, model_default)
}

/// `model`, or the configured default when it is empty.
pub(crate) fn request_model_name<'a>(model: &'a str, model_default: &'a str) -> &'a str {
    if model.is_empty() {
        model_default
    } else {
        model
    }
}

/// A tool call's arguments as the wire carries them: a JSON text. Arguments that arrived as
/// text that was not JSON are kept as a string and sent back as they came.
fn arguments_text(arguments: &Value) -> String {
    match arguments {
        Value::String(raw) => raw.clone(),
        other => other.to_string(),
    }
}

/// A user message's content: its text as a string, as it always was, or, with parts, an array
/// of `text` and `image_url` parts (an image as a `data:` URL).
fn user_content(user: &UserMessage) -> Value {
    if user.parts.is_empty() {
        return Value::String(user.text.clone());
    }
    let mut parts = Vec::with_capacity(user.parts.len() + 1);
    if !user.text.is_empty() {
        parts.push(json!({"type": "text", "text": user.text}));
    }
    parts.extend(user.parts.iter().map(|part| match part {
        UserPart::Text { text } => json!({"type": "text", "text": text}),
        UserPart::Image { media_type, data } => json!({
            "type": "image_url",
            "image_url": {"url": format!("data:{media_type};base64,{data}")},
        }),
    }));
    Value::Array(parts)
}

/// The Chat Completions body for `request`: the system prompt, the conversation, the tools,
/// streaming with usage, and the session id as `prompt_cache_key` (OpenAI routes requests with
/// the same key to the same cache).
pub fn request_body(request: &Request, options: &BodyOptions) -> Value {
    let mut messages = Vec::with_capacity(request.messages.len() + 1);
    if !request.system_prompt.is_empty() {
        messages.push(json!({"role": "system", "content": request.system_prompt}));
    }
    for message in &request.messages {
        messages.push(match message.as_ref() {
            Message::User(user) => json!({"role": "user", "content": user_content(user)}),
            // A tool message takes text alone on this wire: a result's images are left out
            // (its text names each one).
            Message::ToolResult(result) => json!({
                "role": "tool",
                "tool_call_id": result.tool_call_id,
                "content": result.content,
            }),
            Message::Assistant(assistant) => {
                let text = assistant.text();
                let calls: Vec<Value> = assistant
                    .tool_calls()
                    .into_iter()
                    .map(|call| {
                        json!({
                            "id": call.id,
                            "type": "function",
                            "function": {
                                "name": call.name,
                                "arguments": arguments_text(&call.arguments),
                            },
                        })
                    })
                    .collect();
                let mut wire = json!({"role": "assistant"});
                wire["content"] = if text.is_empty() && !calls.is_empty() {
                    Value::Null
                } else {
                    Value::String(text)
                };
                if !calls.is_empty() {
                    wire["tool_calls"] = Value::Array(calls);
                }
                wire
            }
        });
    }
    let mut body = json!({
        "model": request_model(request, &options.model_default),
        "messages": messages,
        "stream": true,
        "stream_options": {"include_usage": true},
    });
    if !request.tools.is_empty() {
        body["tools"] = request
            .tools
            .iter()
            .map(|tool| {
                json!({
                    "type": "function",
                    "function": {
                        "name": tool.name,
                        "description": tool.description,
                        "parameters": tool.parameters,
                    },
                })
            })
            .collect();
    }
    if let Some(max_output_tokens) = options.max_output_tokens {
        body["max_completion_tokens"] = json!(max_output_tokens);
    }
    // The session's reasoning level, for the models that take one.
    if let Some(level) = request.reasoning {
        body["reasoning_effort"] = json!(level.name());
    }
    if let Some(session_id) = &request.session_id {
        body["prompt_cache_key"] = json!(session_id);
    }
    body
}

#[derive(Deserialize)]
struct Chunk {
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    choices: Option<Vec<Choice>>,
    #[serde(default)]
    usage: Option<WireUsage>,
    #[serde(default)]
    error: Option<WireError>,
}

#[derive(Deserialize)]
struct Choice {
    #[serde(default)]
    delta: Option<Delta>,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
struct Delta {
    #[serde(default)]
    content: Option<String>,
    #[serde(default)]
    reasoning_content: Option<String>,
    #[serde(default)]
    reasoning: Option<String>,
    #[serde(default)]
    tool_calls: Option<Vec<ToolCallDelta>>,
}

#[derive(Deserialize)]
struct ToolCallDelta {
    #[serde(default)]
    index: Option<u32>,
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    function: Option<FunctionDelta>,
}

#[derive(Deserialize)]
struct FunctionDelta {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    arguments: Option<String>,
}

#[derive(Deserialize)]
struct WireUsage {
    #[serde(default)]
    prompt_tokens: u64,
    #[serde(default)]
    completion_tokens: u64,
    #[serde(default)]
    prompt_tokens_details: Option<PromptTokensDetails>,
}

#[derive(Deserialize)]
struct PromptTokensDetails {
    #[serde(default)]
    cached_tokens: Option<u64>,
}

#[derive(Deserialize)]
struct WireError {
    #[serde(default)]
    message: Option<String>,
}

/// A block being assembled.
#[derive(Debug)]
enum Block {
    Text(String),
    Thinking(String),
    Tool {
        /// The wire's `index` for the call.
        index: u32,
        id: String,
        name: String,
        /// The argument fragments so far, joined.
        arguments: String,
    },
}

/// Chat Completions chunks → stream events; pure.
#[derive(Debug, Default)]
pub struct OpenAiDecoder {
    /// The model the request named, until a chunk names the one that answered.
    model: String,
    blocks: Vec<Block>,
    usage: Option<Usage>,
    finish_reason: Option<String>,
    /// The tool calls were handed out as events (at the finish reason).
    calls_emitted: bool,
}

impl OpenAiDecoder {
    /// A decoder for a response to a request for `model`.
    pub fn new(model: impl Into<String>) -> Self {
        Self {
            model: model.into(),
            ..Self::default()
        }
    }

    fn push_text(&mut self, delta: String, thinking: bool, out: &mut Vec<StreamEvent>) {
        if delta.is_empty() {
            return;
        }
        match (self.blocks.last_mut(), thinking) {
            (Some(Block::Text(text)), false) | (Some(Block::Thinking(text)), true) => {
                text.push_str(&delta);
            }
            (_, false) => self.blocks.push(Block::Text(delta.clone())),
            (_, true) => self.blocks.push(Block::Thinking(delta.clone())),
        }
        out.push(if thinking {
            StreamEvent::ThinkingDelta(delta)
        } else {
            StreamEvent::TextDelta(delta)
        });
    }

    fn push_tool_delta(&mut self, position: usize, delta: ToolCallDelta) {
        let index = delta.index.unwrap_or(position as u32);
        let existing = self.blocks.iter_mut().rev().find_map(|block| match block {
            Block::Tool {
                index: block_index,
                id,
                name,
                arguments,
            } if *block_index == index => Some((id, name, arguments)),
            _ => None,
        });
        let function = delta.function.unwrap_or(FunctionDelta {
            name: None,
            arguments: None,
        });
        match existing {
            Some((id, name, arguments)) => {
                if let Some(more) = delta.id {
                    id.push_str(&more);
                }
                if let Some(more) = function.name {
                    name.push_str(&more);
                }
                if let Some(more) = function.arguments {
                    arguments.push_str(&more);
                }
            }
            None => self.blocks.push(Block::Tool {
                index,
                id: delta.id.unwrap_or_default(),
                name: function.name.unwrap_or_default(),
                arguments: function.arguments.unwrap_or_default(),
            }),
        }
    }

    fn emit_calls(&mut self, out: &mut Vec<StreamEvent>) {
        if self.calls_emitted {
            return;
        }
        self.calls_emitted = true;
        for block in &self.blocks {
            if let Block::Tool {
                id,
                name,
                arguments,
                ..
            } = block
            {
                out.push(StreamEvent::ToolCall(tool_call(id, name, arguments)));
            }
        }
    }

    fn finish(&mut self, out: &mut Vec<StreamEvent>) {
        self.emit_calls(out);
        let has_calls = self
            .blocks
            .iter()
            .any(|block| matches!(block, Block::Tool { .. }));
        let (stop_reason, error_message) = match self.finish_reason.as_deref() {
            Some("stop") => (StopReason::Stop, None),
            Some("length") => (StopReason::Length, None),
            Some("tool_calls" | "function_call") => (StopReason::ToolUse, None),
            Some("content_filter") => (
                StopReason::Error,
                Some("the provider's content filter stopped the response".to_owned()),
            ),
            _ if has_calls => (StopReason::ToolUse, None),
            _ => (StopReason::Stop, None),
        };
        let content = std::mem::take(&mut self.blocks)
            .into_iter()
            .map(|block| match block {
                Block::Text(text) => AssistantBlock::Text { text },
                Block::Thinking(thinking) => AssistantBlock::Thinking {
                    thinking,
                    signature: None,
                },
                Block::Tool {
                    id,
                    name,
                    arguments,
                    ..
                } => AssistantBlock::ToolCall(tool_call(&id, &name, &arguments)),
            })
            .collect();
        out.push(StreamEvent::Done(AssistantMessage {
            content,
            usage: self.usage.unwrap_or_default(),
            stop_reason,
            model: std::mem::take(&mut self.model),
            error_message,
        }));
    }
}

/// A whole tool call; arguments that are not JSON are kept as the text that came.
fn tool_call(id: &str, name: &str, arguments: &str) -> ToolCall {
    let arguments = if arguments.trim().is_empty() {
        json!({})
    } else {
        serde_json::from_str(arguments).unwrap_or_else(|_| Value::String(arguments.to_owned()))
    };
    ToolCall {
        id: id.to_owned(),
        name: name.to_owned(),
        arguments,
    }
}

impl Decoder for OpenAiDecoder {
    fn event(&mut self, _event: &str, data: &str, out: &mut Vec<StreamEvent>) {
        let data = data.trim();
        if data == "[DONE]" {
            self.finish(out);
            return;
        }
        if data.is_empty() {
            return;
        }
        let chunk: Chunk = match serde_json::from_str(data) {
            Ok(chunk) => chunk,
            Err(error) => {
                out.push(StreamEvent::Error(ProviderError::new(
                    ProviderErrorKind::Malformed,
                    format!("a chunk does not parse: {error}"),
                )));
                return;
            }
        };
        if let Some(error) = chunk.error {
            out.push(StreamEvent::Error(ProviderError::new(
                ProviderErrorKind::Transport,
                error
                    .message
                    .unwrap_or_else(|| "the provider reported an error".to_owned()),
            )));
            return;
        }
        if let Some(model) = chunk.model.filter(|model| !model.is_empty()) {
            self.model = model;
        }
        for choice in chunk.choices.into_iter().flatten() {
            if let Some(delta) = choice.delta {
                if let Some(reasoning) = delta.reasoning_content.or(delta.reasoning) {
                    self.push_text(reasoning, true, out);
                }
                if let Some(content) = delta.content {
                    self.push_text(content, false, out);
                }
                for (position, call) in delta.tool_calls.into_iter().flatten().enumerate() {
                    self.push_tool_delta(position, call);
                }
            }
            if let Some(reason) = choice.finish_reason {
                self.finish_reason = Some(reason);
                self.emit_calls(out);
            }
        }
        if let Some(usage) = chunk.usage {
            let cached = usage
                .prompt_tokens_details
                .and_then(|details| details.cached_tokens)
                .unwrap_or(0);
            let usage = Usage {
                input: usage.prompt_tokens.saturating_sub(cached),
                output: usage.completion_tokens,
                cache_read: cached,
                cache_write: 0,
                estimated: false,
            };
            self.usage = Some(usage);
            out.push(StreamEvent::Usage(usage));
        }
    }

    fn end(&mut self, out: &mut Vec<StreamEvent>) {
        // A server that finished its answer but closed without `[DONE]` still answered.
        if self.finish_reason.is_some() {
            self.finish(out);
        } else {
            out.push(StreamEvent::Error(ProviderError::new(
                ProviderErrorKind::Transport,
                "the stream ended before the response finished",
            )));
        }
    }
}

/// The OpenAI-compatible provider.
pub struct OpenAiProvider {
    client: HttpClient,
    url: String,
    api_key: Option<ApiKey>,
    options: BodyOptions,
    images: ImageModels,
}

impl fmt::Debug for OpenAiProvider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpenAiProvider")
            .field("url", &self.url)
            .field("api_key", &self.api_key)
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

impl OpenAiProvider {
    /// The provider `config` describes.
    pub fn new(config: &ProviderConfig) -> Result<Self, ProviderError> {
        Ok(Self {
            client: HttpClient::new(config.retry, &config.timeouts)?,
            url: format!("{}/chat/completions", config.base_url()),
            api_key: config.api_key.clone(),
            images: config.images(),
            options: BodyOptions {
                model_default: config.model().to_owned(),
                max_output_tokens: config.max_output_tokens,
            },
        })
    }

    fn headers(&self) -> HeaderMap {
        let mut headers = HeaderMap::new();
        if let Some(key) = &self.api_key
            && let Ok(mut value) = HeaderValue::from_str(&format!("Bearer {}", key.expose()))
        {
            value.set_sensitive(true);
            headers.insert(AUTHORIZATION, value);
        }
        headers
    }
}

impl Provider for OpenAiProvider {
    fn takes_images(&self, model: &str) -> bool {
        self.images
            .takes(request_model_name(model, &self.options.model_default))
    }

    fn stream(&self, request: Request) -> BoxStream<'static, StreamEvent> {
        let body = request_body(&request, &self.options);
        let decoder = OpenAiDecoder::new(request_model(&request, &self.options.model_default));
        self.client.stream(
            &self.url,
            self.headers(),
            body.to_string().into_bytes(),
            decoder,
        )
    }
}

#[cfg(test)]
mod tests;
