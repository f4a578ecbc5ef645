//! The tools on offer, as verbs: each listed tool of each server with its verb name, its class
//! (safe to repeat or not) and its timeout. Pure: the shell passes what the servers listed.
//!
//! A tool is safe to repeat when its annotations say `readOnlyHint: true` or
//! `idempotentHint: true`; any other tool is not (MCP's defaults: not read-only, not
//! idempotent). `seed.tools.NAME.safe_to_repeat` overrides either way. A tool the
//! configuration disables is left out. A call of a tool whose annotations say
//! `destructiveHint: true` (and not `readOnlyHint: true`) waits for a person's approval;
//! `seed.tools.NAME.needs_approval` overrides either way. Two tools that fit to one verb name are a
//! [`NameClash`]: the first (in the configuration's server order, then the server's own order)
//! keeps the name and the other is left out.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::config::ServerConfig;
use crate::names::{self, NameClash};

/// An MCP tool as a verb.
#[derive(Debug, Clone, PartialEq)]
pub struct McpTool {
    /// `SERVER__TOOL`, fitted (see [`crate::names`]): what the model calls it.
    pub verb_name: String,
    /// The server's name in the configuration.
    pub server: String,
    /// The tool's name as the server lists it: what the server is called with.
    pub tool: String,
    pub title: Option<String>,
    /// The tool's contract for the model; empty when the server gives none.
    pub description: String,
    /// The tool's `inputSchema`, a JSON Schema object.
    pub input_schema: serde_json::Value,
    /// Whether a call cut off by a crash may run again (see the module docs).
    pub safe_to_repeat: bool,
    /// How long a call may run before it is cancelled and answered with an error.
    pub timeout: Duration,
    pub annotations: ToolHints,
    /// The verb name of the tool of the same server that reconciles a cut-off call of this one
    /// (`seed.tools.NAME.reconcile`), if the configuration names one.
    pub reconcile: Option<String>,
    /// Whether a call waits for a person's approval (see the module docs).
    pub needs_approval: bool,
}

/// A tool's annotations as the server gave them (`None`: not said). Hints, not guarantees:
/// only the configuration's override is Seed's own word.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ToolHints {
    pub read_only: Option<bool>,
    pub destructive: Option<bool>,
    pub idempotent: Option<bool>,
    pub open_world: Option<bool>,
}

impl ToolHints {
    /// The class the annotations give: read-only or idempotent tools are safe to repeat.
    pub fn safe_to_repeat(&self) -> bool {
        self.read_only == Some(true) || self.idempotent == Some(true)
    }

    /// Whether the annotations ask for a person's approval: a tool that says it is destructive
    /// (and not read-only, which makes the destructive hint meaningless).
    pub fn needs_approval(&self) -> bool {
        self.destructive == Some(true) && self.read_only != Some(true)
    }
}

/// A tool as a server lists it (`tools/list`), the fields Seed uses.
#[derive(Debug, Clone, PartialEq)]
pub struct ListedTool {
    pub name: String,
    pub title: Option<String>,
    pub description: Option<String>,
    pub input_schema: serde_json::Value,
    pub hints: ToolHints,
}

impl From<&rmcp::model::Tool> for ListedTool {
    fn from(tool: &rmcp::model::Tool) -> ListedTool {
        let annotations = tool.annotations.as_ref();
        ListedTool {
            name: tool.name.to_string(),
            title: tool
                .title
                .clone()
                .or_else(|| annotations.and_then(|hints| hints.title.clone())),
            description: tool.description.as_ref().map(|text| text.to_string()),
            input_schema: serde_json::Value::Object((*tool.input_schema).clone()),
            hints: ToolHints {
                read_only: annotations.and_then(|hints| hints.read_only_hint),
                destructive: annotations.and_then(|hints| hints.destructive_hint),
                idempotent: annotations.and_then(|hints| hints.idempotent_hint),
                open_world: annotations.and_then(|hints| hints.open_world_hint),
            },
        }
    }
}

/// The verbs of every server's listed tools, by verb name, and the clashes left out.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Catalogue {
    pub tools: BTreeMap<String, McpTool>,
    pub clashes: Vec<NameClash>,
}

/// The catalogue of `servers`' tools, each server with the tools it listed.
pub fn catalogue<'a>(
    servers: impl IntoIterator<Item = (&'a ServerConfig, &'a [ListedTool])>,
) -> Catalogue {
    let mut catalogue = Catalogue::default();
    for (server, listed) in servers {
        for tool in listed {
            let config = server.tool(&tool.name);
            if !config.enabled {
                continue;
            }
            let verb_name = names::verb_name(&server.name, &tool.name);
            if let Some(first) = catalogue.tools.get(&verb_name) {
                catalogue.clashes.push(NameClash {
                    verb_name,
                    first_server: first.server.clone(),
                    first_tool: first.tool.clone(),
                    second_server: server.name.clone(),
                    second_tool: tool.name.clone(),
                });
                continue;
            }
            let mcp_tool = McpTool {
                verb_name: verb_name.clone(),
                server: server.name.clone(),
                tool: tool.name.clone(),
                title: tool.title.clone(),
                description: tool.description.clone().unwrap_or_default(),
                input_schema: tool.input_schema.clone(),
                safe_to_repeat: config
                    .safe_to_repeat
                    .unwrap_or_else(|| tool.hints.safe_to_repeat()),
                timeout: server.tool_timeout(&tool.name),
                annotations: tool.hints,
                reconcile: config
                    .reconcile
                    .as_ref()
                    .map(|other| names::verb_name(&server.name, other)),
                needs_approval: config
                    .needs_approval
                    .unwrap_or_else(|| tool.hints.needs_approval()),
            };
            catalogue.tools.insert(verb_name, mcp_tool);
        }
    }
    catalogue
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::config::McpConfig;

    fn listed(name: &str, annotations: serde_json::Value) -> ListedTool {
        let tool: rmcp::model::Tool = serde_json::from_value(json!({
            "name": name,
            "description": format!("the {name} tool"),
            "inputSchema": {"type": "object"},
            "annotations": annotations,
        }))
        .expect("a tool");
        ListedTool::from(&tool)
    }

    /// One line per verb: name, class, timeout; then the clashes.
    fn describe(catalogue: &Catalogue) -> Vec<String> {
        let mut lines: Vec<String> = catalogue
            .tools
            .values()
            .map(|tool| {
                format!(
                    "{} {} {}ms",
                    tool.verb_name,
                    if tool.safe_to_repeat {
                        "safe"
                    } else {
                        "not-safe"
                    },
                    tool.timeout.as_millis()
                )
            })
            .collect();
        lines.extend(
            catalogue
                .clashes
                .iter()
                .map(|clash| format!("clash {}", clash.verb_name)),
        );
        lines
    }

    #[test]
    fn classes_and_timeouts_from_a_table() {
        let config = McpConfig::parse(
            r#"{"mcpServers": {
                "a": {"command": "x", "seed": {"timeout_ms": 1000, "tools": {
                    "forced_safe": {"safe_to_repeat": true},
                    "forced_not": {"safe_to_repeat": false, "timeout_ms": 5},
                    "off": {"enabled": false}}}},
                "a__b": {"command": "y"},
                "a_c": {"command": "z"}}}"#,
        )
        .expect("parses");
        let a = vec![
            listed("read", json!({"readOnlyHint": true})),
            listed(
                "put",
                json!({"idempotentHint": true, "readOnlyHint": false}),
            ),
            listed(
                "write",
                json!({"readOnlyHint": false, "destructiveHint": true}),
            ),
            listed("plain", json!({})),
            listed("forced_safe", json!({"destructiveHint": true})),
            listed("forced_not", json!({"readOnlyHint": true})),
            listed("off", json!({"readOnlyHint": true})),
            listed("b__c", json!({})),
        ];
        let a_b = vec![listed("c", json!({"readOnlyHint": true}))];
        let a_c = vec![];
        let servers = [
            (&config.servers[0], a.as_slice()),
            (&config.servers[1], a_b.as_slice()),
            (&config.servers[2], a_c.as_slice()),
        ];
        assert_eq!(
            describe(&catalogue(servers)),
            [
                "a__b__c not-safe 1000ms",
                "a__forced_not not-safe 5ms",
                "a__forced_safe safe 1000ms",
                "a__plain not-safe 1000ms",
                "a__put safe 1000ms",
                "a__read safe 1000ms",
                "a__write not-safe 1000ms",
                "clash a__b__c",
            ]
        );
    }

    /// A destructive tool's calls wait for approval; the configuration decides either way.
    #[test]
    fn approvals_from_the_destructive_hint_and_the_configuration() {
        let config = McpConfig::parse(
            r#"{"mcpServers": {"a": {"command": "x", "seed": {"tools": {
                "trusted": {"needs_approval": false},
                "guarded": {"needs_approval": true}}}}}}"#,
        )
        .expect("parses");
        let listed = vec![
            listed("delete", json!({"destructiveHint": true})),
            listed(
                "reads",
                json!({"readOnlyHint": true, "destructiveHint": true}),
            ),
            listed("adds", json!({"destructiveHint": false})),
            listed("plain", json!({})),
            listed("trusted", json!({"destructiveHint": true})),
            listed("guarded", json!({"readOnlyHint": true})),
        ];
        let catalogue = catalogue([(&config.servers[0], listed.as_slice())]);
        let needing: Vec<&str> = catalogue
            .tools
            .values()
            .filter(|tool| tool.needs_approval)
            .map(|tool| tool.verb_name.as_str())
            .collect();
        assert_eq!(needing, ["a__delete", "a__guarded"]);
        let refused = McpConfig::parse(
            r#"{"mcpServers": {"a": {"command": "x", "seed": {"tools": {
                "t": {"needs_approval": "yes"}}}}}}"#,
        );
        assert!(refused.is_err(), "{refused:?}");
    }

    #[test]
    fn a_listed_tool_keeps_its_schema_and_hints() {
        let tool = listed(
            "read",
            json!({"readOnlyHint": true, "openWorldHint": false}),
        );
        assert_eq!(tool.input_schema, json!({"type": "object"}));
        assert_eq!(tool.description.as_deref(), Some("the read tool"));
        assert_eq!(
            tool.hints,
            ToolHints {
                read_only: Some(true),
                destructive: None,
                idempotent: None,
                open_world: Some(false),
            }
        );
    }
}
