//! Anthropic Messages over SSE: the request body (`request`: the conversation with the prompt
//! cache's marks), the event decoder, and the provider that joins them to the HTTP shell.
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
use crate::message::{AssistantBlock, AssistantMessage, Request, StopReason, ToolCall, Usage};
use crate::openai::{request_model, request_model_name};
use crate::provider::{Provider, ProviderError, ProviderErrorKind, StreamEvent};

pub mod cache;
mod request;

pub use request::{
    BodyOptions, MAX_OUTPUT_TOKENS_DEFAULT, THINKING_BUDGET_TOKENS_MIN, request_body,
    thinking_budget,
};

/// The API version every request names.
pub const ANTHROPIC_VERSION: &str = "2023-06-01";

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
mod cache_tests;
#[cfg(test)]
mod tests;
