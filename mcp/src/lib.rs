//! Tools from MCP servers: the configuration people already have, a client on the official
//! Rust SDK (`rmcp`), and tool results as the text a model reads.
//!
//! The client and its pure parts know nothing of the runtime; [`verb`] is the adapter that
//! turns each [`McpTool`] into one of the runtime's verbs (and keeps a result's images as the
//! session's attachments).
//!
//! # Layout
//!
//! - [`config`] (pure): `{"mcpServers": {...}}` with Seed's own `seed` section per server.
//! - [`names`] (pure): a tool's verb name, `SERVER__TOOL`, fitted to the providers' rules.
//! - [`tools`] (pure): the servers' listed tools as [`McpTool`]s: verb name, class, timeout.
//! - [`result`] (pure): a `CallToolResult` as [`CallOutput`] (text, is_error, images), capped.
//! - [`elicitation`]: a server's question to the person during a call, on the approvals path
//!   (which call asked and the answer's check are pure; the rest is the shell).
//! - [`client`] (the shell): [`McpServers`], the connections, kept up, and calls; each
//!   connection's supervisor, handshake and handler in `client/connection.rs`.
//! - [`limits`]: every limit, once.
//!
//! # The API the adapter uses
//!
//! ```no_run
//! # async fn example(file_text: &str) -> Result<(), Box<dyn std::error::Error>> {
//! use seed_mcp::{McpConfig, McpServers};
//!
//! let config = McpConfig::parse(file_text)?; // ConfigError names the field at fault
//! let servers = McpServers::start(config).await?; // StartError names each server that failed
//! for tool in servers.tools() {
//!     // tool.verb_name, tool.description, tool.input_schema, tool.safe_to_repeat, …
//! }
//! let output = servers
//!     .call("files__read_text_file", serde_json::json!({"path": "/srv/a.txt"}))
//!     .await; // CallOutput { text, is_error, images }: every failure is an error result
//! let mut changes = servers.changes(); // a generation: rebuild the verbs when it moves
//! changes.changed().await?;
//! # Ok(())
//! # }
//! ```
//!
//! - [`McpServers`] is a cheap `Clone` (`Send + Sync`); its connections run as tasks on the
//!   tokio runtime `start` ran on and outlive the caller's task; they end with the last clone
//!   or at [`McpServers::shutdown`].
//! - [`McpServers::call`] returns a `'static` future: dropping it cancels the call on the
//!   server (`notifications/cancelled`), as a timeout does; [`McpServers::call_until`] takes a
//!   stop future (a stopped turn).
//! - [`McpServers::describe`] gives each server's name, version, tool count and state, for
//!   the logs and `seed tools`.

pub mod client;
pub mod config;
pub mod elicitation;
pub mod limits;
pub mod names;
pub mod result;
pub mod tools;
pub mod verb;

pub use client::{ConnectError, McpServers, ServerInfo, ServerStartError, ServerState, StartError};
pub use config::{ConfigError, McpConfig, ServerConfig, ToolConfig, Transport};
pub use names::NameClash;
pub use result::{CallImage, CallOutput};
pub use tools::{McpTool, ToolHints};
