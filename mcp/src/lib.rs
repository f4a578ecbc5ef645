//! Tools from MCP servers: the configuration people already have, a client on the official
//! Rust SDK (`rmcp`), and tool results as the text a model reads.
//!
//! This crate knows nothing of the runtime: the adapter in the layer above turns each
//! [`McpTool`] into a verb. It depends on no Seed crate.
//!
//! # Layout
//!
//! - [`config`] (pure): `{"mcpServers": {...}}` with Seed's own `seed` section per server.
//! - [`names`] (pure): a tool's verb name, `SERVER__TOOL`, fitted to the providers' rules.
//! - [`result`] (pure): a `CallToolResult` as [`CallOutput`] (text, is_error), capped.
//! - [`limits`]: every limit, once.

pub mod config;
pub mod limits;
pub mod names;
pub mod result;

pub use config::{ConfigError, McpConfig, ServerConfig, ToolConfig, Transport};
pub use names::NameClash;
pub use result::CallOutput;
