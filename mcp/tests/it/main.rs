//! seed-mcp against real MCP servers: the npm reference servers (server-everything,
//! server-filesystem) and tests/mcp/test_server.py on the official Python SDK, installed and
//! pinned by scripts/mcp-servers.sh (run here, under a lock, when a server is missing).
//!
//! One test binary; a module per server or concern.

mod everything;
mod filesystem;
mod http;
mod python;
mod refusals;
mod servers;
