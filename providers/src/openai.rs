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
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::http::decode_all;
    use crate::message::{ToolResultMessage, ToolSpec, UserMessage};

    /// SSE for `chunks`, one `data:` event each, then `[DONE]`.
    fn sse(chunks: &[Value]) -> String {
        let mut out = String::new();
        for chunk in chunks {
            out.push_str(&format!("data: {chunk}\n\n"));
        }
        out.push_str("data: [DONE]\n\n");
        out
    }

    /// Decodes `text` whole and cut into pieces of several sizes: the events must not depend
    /// on where the socket split the bytes.
    fn decode(text: &str) -> Vec<StreamEvent> {
        let whole = decode_all(text, usize::MAX, OpenAiDecoder::new("requested-model"));
        for piece_bytes in [1, 3, 17, 64] {
            let pieces = decode_all(text, piece_bytes, OpenAiDecoder::new("requested-model"));
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

    fn delta(content: Value) -> Value {
        json!({"id": "c1", "model": "gpt-4o-2024", "choices": [{"index": 0, "delta": content, "finish_reason": null}]})
    }

    #[test]
    fn text_deltas_finish_and_usage_with_cached_tokens() {
        let text = sse(&[
            delta(json!({"role": "assistant", "content": ""})),
            delta(json!({"content": "Hel"})),
            delta(json!({"content": "lo, ünï"})),
            json!({"model": "gpt-4o-2024", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}),
            json!({"model": "gpt-4o-2024", "choices": [], "usage": {"prompt_tokens": 1200, "completion_tokens": 9, "total_tokens": 1209, "prompt_tokens_details": {"cached_tokens": 1024}}}),
        ]);
        let events = decode(&text);
        let usage = Usage {
            input: 176,
            output: 9,
            cache_read: 1024,
            cache_write: 0,
        };
        assert_eq!(
            events[..3],
            [
                StreamEvent::TextDelta("Hel".to_owned()),
                StreamEvent::TextDelta("lo, ünï".to_owned()),
                StreamEvent::Usage(usage),
            ]
        );
        assert_eq!(
            *done(&events),
            AssistantMessage {
                content: vec![AssistantBlock::Text {
                    text: "Hello, ünï".to_owned()
                }],
                usage,
                stop_reason: StopReason::Stop,
                model: "gpt-4o-2024".to_owned(),
                error_message: None,
            }
        );
    }

    #[test]
    fn interleaved_tool_calls_with_fragmented_arguments() {
        let call = |index: u32, id: Option<&str>, name: Option<&str>, arguments: &str| {
            let mut function = json!({"arguments": arguments});
            if let Some(name) = name {
                function["name"] = json!(name);
            }
            let mut call = json!({"index": index, "function": function});
            if let Some(id) = id {
                call["id"] = json!(id);
                call["type"] = json!("function");
            }
            delta(json!({"tool_calls": [call]}))
        };
        let text = sse(&[
            delta(json!({"content": "Looking."})),
            call(0, Some("call_a"), Some("read"), ""),
            call(1, Some("call_b"), Some("ls"), "{\"di"),
            call(0, None, None, "{\"path\": "),
            call(1, None, None, "r\": \"/tmp\"}"),
            call(0, None, None, "\"notes.md\"}"),
            // Both fragments in one chunk.
            delta(json!({"tool_calls": [
                {"index": 2, "id": "call_c", "type": "function", "function": {"name": "noop", "arguments": ""}},
            ]})),
            json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}),
            // Some compatible servers send `choices: null` with the usage.
            json!({"choices": null, "usage": {"prompt_tokens": 50, "completion_tokens": 20}}),
        ]);
        let events = decode(&text);
        let calls = [
            ToolCall {
                id: "call_a".to_owned(),
                name: "read".to_owned(),
                arguments: json!({"path": "notes.md"}),
            },
            ToolCall {
                id: "call_b".to_owned(),
                name: "ls".to_owned(),
                arguments: json!({"dir": "/tmp"}),
            },
            ToolCall {
                id: "call_c".to_owned(),
                name: "noop".to_owned(),
                arguments: json!({}),
            },
        ];
        let emitted: Vec<_> = events
            .iter()
            .filter_map(|event| match event {
                StreamEvent::ToolCall(call) => Some(call.clone()),
                _ => None,
            })
            .collect();
        assert_eq!(emitted, calls);
        let message = done(&events);
        assert_eq!(message.stop_reason, StopReason::ToolUse);
        assert_eq!(message.text(), "Looking.");
        assert_eq!(message.tool_calls(), calls.iter().collect::<Vec<_>>());
        assert_eq!(message.usage.input, 50);
        assert_eq!(message.usage.output, 20);
        assert_eq!(message.model, "gpt-4o-2024");
    }

    #[test]
    fn reasoning_text_where_the_server_sends_it() {
        let text = sse(&[
            delta(json!({"reasoning_content": "The user "})),
            delta(json!({"reasoning_content": "greets."})),
            delta(json!({"reasoning": " Answer."})),
            delta(json!({"content": "Hi!"})),
            json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "length"}]}),
        ]);
        let events = decode(&text);
        assert_eq!(
            events[0],
            StreamEvent::ThinkingDelta("The user ".to_owned())
        );
        let message = done(&events);
        assert_eq!(
            message.content,
            [
                AssistantBlock::Thinking {
                    thinking: "The user greets. Answer.".to_owned(),
                    signature: None,
                },
                AssistantBlock::Text {
                    text: "Hi!".to_owned()
                },
            ]
        );
        assert_eq!(message.stop_reason, StopReason::Length);
        assert_eq!(message.model, "gpt-4o-2024");
    }

    #[test]
    fn finish_reasons() {
        for (reason, expected) in [
            ("stop", StopReason::Stop),
            ("length", StopReason::Length),
            ("tool_calls", StopReason::ToolUse),
            ("function_call", StopReason::ToolUse),
            ("content_filter", StopReason::Error),
        ] {
            let text = sse(&[
                json!({"choices": [{"index": 0, "delta": {"content": "x"}, "finish_reason": reason}]}),
            ]);
            let message = done(&decode(&text)).clone();
            assert_eq!(message.stop_reason, expected, "{reason}");
            assert_eq!(
                message.error_message.is_some(),
                expected == StopReason::Error
            );
            // No chunk named a model: the request's stays.
            assert_eq!(message.model, "requested-model");
        }
    }

    #[test]
    fn broken_streams_end_with_an_error_after_what_arrived() {
        // A malformed chunk.
        let text = format!(
            "data: {}\n\ndata: {{\"choices\": [{{\"delta\": \n\n{}",
            delta(json!({"content": "partial"})),
            sse(&[delta(json!({"content": "never seen"}))]),
        );
        let events = decode(&text);
        assert_eq!(events.len(), 2, "{events:?}");
        assert_eq!(events[0], StreamEvent::TextDelta("partial".to_owned()));
        let StreamEvent::Error(error) = &events[1] else {
            panic!("{events:?}");
        };
        assert_eq!(error.kind, ProviderErrorKind::Malformed);

        // A body that stops before the answer finished.
        let text = format!("data: {}\n\n", delta(json!({"content": "cut"})));
        let events = decode(&text);
        assert_eq!(events[0], StreamEvent::TextDelta("cut".to_owned()));
        assert!(
            matches!(&events[1], StreamEvent::Error(error) if error.kind == ProviderErrorKind::Transport),
            "{events:?}"
        );

        // An error the server reports in the stream.
        let text = format!(
            "data: {}\n\ndata: {}\n\n",
            delta(json!({"content": "so far"})),
            json!({"error": {"message": "the model crashed", "code": 500}})
        );
        let events = decode(&text);
        assert_eq!(
            events[1],
            StreamEvent::Error(ProviderError::new(
                ProviderErrorKind::Transport,
                "the model crashed"
            ))
        );

        // A server that finished but closed without `[DONE]` still answered.
        let text = format!(
            "data: {}\n\n",
            json!({"choices": [{"index": 0, "delta": {"content": "ok"}, "finish_reason": "stop"}]})
        );
        assert_eq!(done(&decode(&text)).text(), "ok");
    }

    fn request() -> Request {
        Request {
            reasoning: None,
            model: String::new(),
            system_prompt: "You are terse.".to_owned(),
            messages: vec![
                Arc::new(Message::User(UserMessage::new("list /tmp".to_owned()))),
                Arc::new(Message::Assistant(AssistantMessage {
                    content: vec![
                        AssistantBlock::Thinking {
                            thinking: "ls it".to_owned(),
                            signature: None,
                        },
                        AssistantBlock::ToolCall(ToolCall {
                            id: "call_1".to_owned(),
                            name: "ls".to_owned(),
                            arguments: json!({"dir": "/tmp"}),
                        }),
                        AssistantBlock::ToolCall(ToolCall {
                            id: "call_2".to_owned(),
                            name: "raw".to_owned(),
                            arguments: json!("{not json"),
                        }),
                    ],
                    usage: Usage::default(),
                    stop_reason: StopReason::ToolUse,
                    model: "m".to_owned(),
                    error_message: None,
                })),
                Arc::new(Message::ToolResult(ToolResultMessage {
                    tool_call_id: "call_1".to_owned(),
                    tool_name: "ls".to_owned(),
                    content: "a b".to_owned(),
                    is_error: false,
                })),
            ],
            tools: Arc::from(vec![ToolSpec {
                name: "ls".to_owned(),
                description: "lists".to_owned(),
                parameters: json!({"type": "object"}),
            }]),
            session_id: Some("session-7".to_owned()),
        }
    }

    #[test]
    fn the_request_body() {
        let options = BodyOptions {
            model_default: "gpt-4.1-mini".to_owned(),
            max_output_tokens: Some(1000),
        };
        let body = request_body(&request(), &options);
        assert_eq!(
            body,
            json!({
                "model": "gpt-4.1-mini",
                "messages": [
                    {"role": "system", "content": "You are terse."},
                    {"role": "user", "content": "list /tmp"},
                    {"role": "assistant", "content": null, "tool_calls": [
                        {"id": "call_1", "type": "function",
                         "function": {"name": "ls", "arguments": "{\"dir\":\"/tmp\"}"}},
                        {"id": "call_2", "type": "function",
                         "function": {"name": "raw", "arguments": "{not json"}},
                    ]},
                    {"role": "tool", "tool_call_id": "call_1", "content": "a b"},
                ],
                "tools": [{"type": "function", "function": {
                    "name": "ls", "description": "lists", "parameters": {"type": "object"}}}],
                "stream": true,
                "stream_options": {"include_usage": true},
                "max_completion_tokens": 1000,
                "prompt_cache_key": "session-7",
            })
        );
        // A session's own model goes on the wire instead of the default.
        let request = Request {
            model: "gpt-5".to_owned(),
            session_id: None,
            ..request()
        };
        let body = request_body(&request, &options);
        assert_eq!(body["model"], "gpt-5");
        assert!(body.get("prompt_cache_key").is_none());
        // A session's reasoning level goes as the wire's reasoning effort; none without one.
        assert!(body.get("reasoning_effort").is_none());
        for level in crate::ReasoningLevel::ALL {
            let request = Request {
                reasoning: Some(level),
                ..request.clone()
            };
            assert_eq!(
                request_body(&request, &options)["reasoning_effort"],
                level.name()
            );
        }
    }

    /// A message with attached files: an array of parts, the image as a `data:` URL.
    fn attached() -> Message {
        Message::User(UserMessage {
            text: "what is this?".to_owned(),
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
        })
    }

    #[test]
    fn a_message_with_an_image_sends_parts() {
        let request = Request {
            messages: vec![Arc::new(attached())],
            ..request()
        };
        let body = request_body(&request, &BodyOptions::default());
        assert_eq!(
            body["messages"][1],
            json!({"role": "user", "content": [
                {"type": "text", "text": "what is this?"},
                {"type": "text",
                 "text": "attachment:a1 (dot.png, image/png, 68 bytes): the image follows."},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
            ]})
        );
    }
}
