//! The tools on offer: every verb the account's sessions may call, built in and from MCP
//! servers, with its schema and its class, and the MCP servers' state.

use actix_web::{HttpRequest, HttpResponse, get, web};
use seed_actors::Availability;
use seed_actors::verbs::VerbInfo;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::{AppState, Body};
use crate::error::{ApiError, ErrorBody};

/// What a call cut off by a crash gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ToolClass {
    /// It runs again (a read, or a tool its server marks read-only or idempotent).
    SafeToRepeat,
    /// Its intent is committed before it runs, and a call cut off by a crash is answered
    /// "interrupted", never run again.
    NotSafeToRepeat,
}

/// Which runs a tool is offered in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum OfferedIn {
    Every,
    /// Not in a delegated child's run.
    NotChildren,
    /// Only in a typed child's run.
    TypedChildren,
}

/// One tool as the model is offered it.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ToolInfo {
    /// The name the model calls it by (`SERVER__TOOL` for an MCP server's tool).
    pub name: String,
    /// Its contract, as the model reads it.
    pub description: String,
    /// Its arguments' JSON Schema.
    #[schema(value_type = Object)]
    pub parameters: serde_json::Value,
    pub class: ToolClass,
    /// Whether the turn ends after the batch of calls it is in.
    pub ends_turn: bool,
    pub offered_in: OfferedIn,
    /// The MCP server it calls, as the configuration names it; absent for a verb built in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mcp_server: Option<String>,
}

impl From<VerbInfo> for ToolInfo {
    fn from(verb: VerbInfo) -> ToolInfo {
        ToolInfo {
            name: verb.name,
            description: verb.description,
            parameters: verb.parameters,
            class: if verb.safe_to_repeat {
                ToolClass::SafeToRepeat
            } else {
                ToolClass::NotSafeToRepeat
            },
            ends_turn: verb.ends_turn,
            offered_in: match verb.availability {
                Availability::Everywhere => OfferedIn::Every,
                Availability::NotInChildren => OfferedIn::NotChildren,
                Availability::TypedChildrenOnly => OfferedIn::TypedChildren,
            },
            mcp_server: verb.source,
        }
    }
}

/// An MCP server the service connects to.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct McpServerInfo {
    /// Its name in the configuration (the prefix of its tools' names).
    pub name: String,
    /// The name and version the server gave, once connected.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_version: Option<String>,
    /// The tools it lists.
    pub tools: usize,
    /// `starting`, `connected`, `restarting` (with the error that ended its connection) or
    /// `stopped`.
    pub state: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl From<seed_mcp::ServerInfo> for McpServerInfo {
    fn from(server: seed_mcp::ServerInfo) -> McpServerInfo {
        let (state, error) = match server.state {
            seed_mcp::ServerState::Starting => ("starting", None),
            seed_mcp::ServerState::Connected => ("connected", None),
            seed_mcp::ServerState::Restarting { error, .. } => ("restarting", Some(error)),
            seed_mcp::ServerState::Stopped => ("stopped", None),
        };
        McpServerInfo {
            name: server.name,
            server_name: server.server_name,
            server_version: server.server_version,
            tools: server.n_tools,
            state: state.to_owned(),
            error,
        }
    }
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct ToolsResponse {
    pub tools: Vec<ToolInfo>,
    pub mcp_servers: Vec<McpServerInfo>,
}

/// Every tool a session may be offered — the verbs built in and the MCP servers' tools — with
/// its schema and its class (what a call cut off by a crash gets), and the MCP servers' state.
#[utoipa::path(
    responses(
        (status = 200, body = ToolsResponse),
        (status = 401, body = ErrorBody),
        (status = 413, description = "The body is too large", body = ErrorBody),
    ),
    tag = "tools"
)]
#[get("/v1/tools")]
pub(super) async fn list_tools(
    state: web::Data<AppState>,
    request: HttpRequest,
    body: Body,
) -> Result<HttpResponse, ApiError> {
    let caller = state.caller(&request, &body).await?;
    state.take_nonce(&caller).await?;
    let tools = state
        .runtime
        .verbs()
        .describe()
        .into_iter()
        .map(ToolInfo::from)
        .collect();
    let mcp_servers = state
        .mcp
        .as_ref()
        .map(|servers| {
            servers
                .describe()
                .into_iter()
                .map(McpServerInfo::from)
                .collect()
        })
        .unwrap_or_default();
    Ok(HttpResponse::Ok().json(ToolsResponse { tools, mcp_servers }))
}
