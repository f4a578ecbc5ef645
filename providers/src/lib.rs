//! Seed's model-provider layer: the messages a model reads and writes, the streaming `Provider`
//! trait, the scripted model, and what each model can hold.
//!
//! This crate depends on no other Seed crate: it could be published alone.
//!
//! # Layout
//!
//! - [`message`]: the conversation as data — `Request`, `Message`, `AssistantMessage` and its
//!   blocks (text, thinking with its signature, tool calls), `Usage`, `StopReason`.
//! - [`provider`]: the `Provider` trait, the `StreamEvent`s a response streams as, and
//!   `ProviderError`.
//! - [`scripted`]: `ScriptedProvider`, which replays a script of responses: the default when no
//!   key is configured and the model of every test; `text_response` and `tool_response` build
//!   scripted messages.
//! - [`capabilities`]: `model_context_window`, the one table of context windows.
//! - [`estimate`]: token counts estimated from a request's size, for a server that reports no
//!   usage.
//! - [`config`]: `ProviderConfig` (TOML file and environment variables) and `build`, which
//!   makes the provider it describes (the scripted model when nothing is configured).
//! - [`openai`], [`anthropic`]: the two wire protocols, each a pure request builder and a pure
//!   SSE event decoder, joined to the HTTP shell in [`http`] (retries, timeouts, SSE framing).

pub mod anthropic;
pub mod capabilities;
pub mod config;
#[cfg(test)]
mod decoder_table;
pub mod estimate;
pub mod http;
pub mod message;
pub mod openai;
pub mod provider;
pub mod scripted;

pub use anthropic::{AnthropicDecoder, AnthropicProvider};
pub use capabilities::{ImageModels, model_context_window, model_takes_images};
pub use config::{ApiKey, ProviderConfig, ProviderKind, RetryConfig, TimeoutConfig};
pub use message::{
    AssistantBlock, AssistantMessage, Message, ReasoningLevel, Request, ResultImage, StopReason,
    ToolCall, ToolResultMessage, ToolSpec, Usage, UserMessage, UserPart,
};
pub use openai::{OpenAiDecoder, OpenAiProvider};
pub use provider::{Provider, ProviderError, ProviderErrorKind, StreamEvent};
pub use scripted::{ScriptedProvider, ScriptedStep, text_response, tool_response};
