//! The MCP servers' tools as the runtime's verbs: each [`McpTool`] is a [`Verb`] named
//! `SERVER__TOOL`, its description the contract and its `inputSchema` the schema, safe to
//! repeat as its class says. [`offer`] puts them in the runtime's [`VerbSet`] as one group and
//! replaces the group each time a server's list changes.
//!
//! A call's arguments are checked against the schema before anything is sent (an error result
//! names the field, and the server is not called); a stopped turn cancels the call in flight.
//! A tool that is not safe to repeat gets the durable harness's treatment of every such verb:
//! its intent is committed before the call, and a call cut off by a crash is never sent again:
//! it is answered "interrupted", unless the configuration names a tool of the same server that
//! reconciles it (`seed.tools.NAME.reconcile`). That tool is called with
//! `{"call_id": …, "arguments": …}` (Seed's call id and the cut-off call's arguments) and answers
//! with the call's result when the call took effect, or with an error result when it did not
//! (or cannot tell): then the call is answered "interrupted".
//!
//! A question the server asks during a call (an elicitation) goes to the person behind the
//! call's session, on the approvals path (see [`crate::elicitation`]).

use futures::future::BoxFuture;
use seed_actors::schema::check_call_arguments;
use seed_actors::verbs::{VerbNameTaken, VerbSet};
use seed_actors::{Verb, VerbContext, VerbOutput};
use serde_json::Value;
use std::sync::Arc;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use seed_providers::ResultImage;
use seed_store::NewAttachment;

use crate::client::McpServers;
use crate::elicitation::PersonAsker;
use crate::result::CallImage;
use crate::tools::McpTool;

/// The name of the verb group the MCP tools are offered as.
pub const GROUP: &str = "mcp";

/// One MCP tool as a verb, calling it through its server's connection.
pub struct McpVerb {
    servers: McpServers,
    tool: McpTool,
    description: String,
}

impl std::fmt::Debug for McpVerb {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpVerb")
            .field("verb_name", &self.tool.verb_name)
            .finish_non_exhaustive()
    }
}

impl McpVerb {
    pub fn new(servers: McpServers, tool: McpTool) -> McpVerb {
        let description = contract(&tool);
        McpVerb {
            servers,
            tool,
            description,
        }
    }
}

/// What the model reads of a tool: its description, else its title, else where it comes from.
fn contract(tool: &McpTool) -> String {
    if !tool.description.trim().is_empty() {
        tool.description.clone()
    } else if let Some(title) = tool.title.as_ref().filter(|title| !title.trim().is_empty()) {
        title.clone()
    } else {
        format!("The tool {} of the MCP server {}.", tool.tool, tool.server)
    }
}

/// The arguments to send: checked against the tool's schema (the error result names the
/// field), with the `null`s a model writes for optional properties left out, as a JSON Schema
/// validator on the server would refuse them.
fn arguments_to_send(tool: &McpTool, mut arguments: Value) -> Result<Value, VerbOutput> {
    if arguments.is_null() {
        arguments = Value::Object(serde_json::Map::new());
    }
    if let Err(problem) = check_call_arguments(&tool.input_schema, &mut arguments) {
        return Err(VerbOutput::error(format!(
            "invalid arguments for {}: {problem}; the tool was not called",
            tool.verb_name
        )));
    }
    if let Value::Object(fields) = &mut arguments {
        let required: Vec<&str> = tool
            .input_schema
            .get("required")
            .and_then(Value::as_array)
            .map(|names| names.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        fields.retain(|name, value| !value.is_null() || required.contains(&name.as_str()));
    }
    Ok(arguments)
}

impl Verb for McpVerb {
    fn name(&self) -> &str {
        &self.tool.verb_name
    }

    fn description(&self) -> &str {
        &self.description
    }

    fn parameters(&self) -> Value {
        self.tool.input_schema.clone()
    }

    fn safe_to_repeat(&self) -> bool {
        self.tool.safe_to_repeat
    }

    fn needs_approval(&self) -> bool {
        self.tool.needs_approval
    }

    fn source(&self) -> Option<&str> {
        Some(&self.tool.server)
    }

    fn reconcile(
        &self,
        context: VerbContext,
        arguments: Value,
    ) -> BoxFuture<'static, Option<VerbOutput>> {
        let Some(reconciler) = self.tool.reconcile.clone() else {
            return Box::pin(async { None });
        };
        let asked = serde_json::json!({
            "call_id": context.tool_call_id,
            "arguments": arguments,
        });
        let call = self.servers.call(&reconciler, asked);
        Box::pin(async move {
            let output = call.await;
            (!output.is_error && !output.text.is_empty()).then(|| VerbOutput::ok(output.text))
        })
    }

    fn call(&self, context: VerbContext, arguments: Value) -> BoxFuture<'static, VerbOutput> {
        // The server that serves the call is part of its trace.
        if let Some(span) = &context.call_span {
            span.set_attribute("seed.mcp.server", self.tool.server.clone());
        }
        let arguments = match arguments_to_send(&self.tool, arguments) {
            Ok(arguments) => arguments,
            Err(refused) => return Box::pin(async move { refused }),
        };
        let stopped = context.stop.stopped();
        // A question the server asks during the call goes to the session's person.
        let asker = Arc::new(PersonAsker {
            people: Arc::clone(self.servers.people()),
            store: context.store.clone(),
            session_id: context.session_id,
            run_id: context.run_id,
            tool_call_id: context.tool_call_id.clone(),
            verb: self.tool.verb_name.clone(),
            arguments: arguments.clone(),
        });
        let call = self
            .servers
            .call_asking(&self.tool.verb_name, arguments, stopped, asker);
        let verb_name = self.tool.verb_name.clone();
        Box::pin(async move {
            let output = call.await;
            let images = keep_images(&context, &verb_name, output.images).await;
            VerbOutput {
                images,
                ..if output.is_error {
                    VerbOutput::error(output.text)
                } else {
                    VerbOutput::ok(output.text)
                }
            }
        })
    }
}

/// A result's images as the model is sent them, each kept first as an attachment of the
/// session (`CALL_ID-K`, named `VERB-K.EXT`), which the log's result names so that people can
/// open it. An image the store cannot keep (a full disk) is still sent, unnamed in the log.
async fn keep_images(
    context: &VerbContext,
    verb_name: &str,
    images: Vec<CallImage>,
) -> Vec<ResultImage> {
    let mut kept = Vec::with_capacity(images.len());
    for (idx, image) in images.into_iter().enumerate() {
        let data = STANDARD.encode(&image.bytes);
        let attachment = NewAttachment {
            session_id: context.session_id,
            id: attachment_id(&context.tool_call_id, idx + 1),
            name: format!(
                "{verb_name}-{}.{}",
                idx + 1,
                image.media_type.trim_start_matches("image/")
            ),
            media_type: image.media_type.clone(),
            bytes: image.bytes,
            created_at_ms: context.now_ms,
        };
        let attachment_id = match context
            .store
            .get_attachment(context.session_id, &attachment.id)
            .await
        {
            // A call run again after a crash: its first run kept the image already.
            Ok(Some(row)) => Some(row.id),
            Ok(None) | Err(_) => match context.store.add_attachment(attachment).await {
                Ok(row) => Some(row.id),
                Err(error) => {
                    tracing::warn!(%error, verb = verb_name, "a tool's image could not be kept as an attachment");
                    None
                }
            },
        };
        kept.push(ResultImage {
            media_type: image.media_type,
            data,
            attachment_id,
        });
    }
    kept
}

/// The attachment id of a call's `k`th image: the call's id with what an attachment id may not
/// hold replaced (the providers' ids are letters, digits, `_` and `-` already).
fn attachment_id(tool_call_id: &str, k: usize) -> String {
    let call: String = tool_call_id
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_'))
        .take(100)
        .collect();
    if call.is_empty() {
        format!("image-{k}")
    } else {
        format!("{call}-{k}")
    }
}

/// The servers' tools now, as verbs.
pub fn verbs_of(servers: &McpServers) -> Vec<Arc<dyn Verb>> {
    servers
        .tools()
        .into_iter()
        .map(|tool| Arc::new(McpVerb::new(servers.clone(), tool)) as Arc<dyn Verb>)
        .collect()
}

/// Offers every tool of `servers` in `verbs` (the group [`GROUP`]), and again each time their
/// list changes. Refused when a tool's verb name is taken by a verb compiled in; a later list
/// that would take one is logged and not offered (the tools offered before stay). Call on the
/// runtime's actix system thread: each verb's actor starts there, and so does the task that
/// follows the changes.
pub fn offer(verbs: &VerbSet, servers: &McpServers) -> Result<(), VerbNameTaken> {
    let mut changes = servers.changes();
    changes.mark_unchanged();
    verbs.set_group(GROUP, verbs_of(servers))?;
    let verbs = verbs.clone();
    let servers = servers.clone();
    tokio::task::spawn_local(async move {
        while changes.changed().await.is_ok() {
            match verbs.set_group(GROUP, verbs_of(&servers)) {
                Ok(()) => tracing::info!(
                    tools = servers.tools().len(),
                    "the MCP servers' tools changed; the verbs follow"
                ),
                Err(taken) => tracing::error!(
                    %taken,
                    "an MCP server's new tools were not offered: a name is taken"
                ),
            }
        }
    });
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::ToolHints;
    use serde_json::json;
    use std::time::Duration;

    fn tool(schema: Value) -> McpTool {
        McpTool {
            verb_name: "files__write".to_owned(),
            server: "files".to_owned(),
            tool: "write".to_owned(),
            title: None,
            description: String::new(),
            input_schema: schema,
            safe_to_repeat: false,
            timeout: Duration::from_secs(1),
            annotations: ToolHints::default(),
            reconcile: None,
            needs_approval: false,
        }
    }

    #[test]
    fn arguments_are_checked_against_the_schema_before_the_call() {
        let schema = json!({
            "type": "object",
            "properties": {
                "path": {"type": "string"},
                "count": {"type": "integer"},
                "note": {"type": "string"}
            },
            "required": ["path"]
        });
        let cases = [
            (json!({"path": "a"}), Ok(json!({"path": "a"}))),
            (json!({"path": "a", "note": null}), Ok(json!({"path": "a"}))),
            (
                json!({"path": "a", "count": 2.0}),
                Ok(json!({"path": "a", "count": 2})),
            ),
            (
                json!({"count": 1}),
                Err("invalid arguments for files__write: path: required; the tool was not called"),
            ),
            (
                json!({"path": 7}),
                Err(
                    "invalid arguments for files__write: path: expected a string, got an integer; \
                     the tool was not called",
                ),
            ),
            (
                json!("text"),
                Err(
                    "invalid arguments for files__write: arguments: expected an object, got a \
                     string; the tool was not called",
                ),
            ),
        ];
        let mut wrong = Vec::new();
        for (arguments, expected) in cases {
            let got = arguments_to_send(&tool(schema.clone()), arguments.clone())
                .map_err(|refused| refused.content);
            let expected = expected.map_err(str::to_owned);
            if got != expected {
                wrong.push(format!("{arguments}: got {got:?}, expected {expected:?}"));
            }
        }
        assert!(wrong.is_empty(), "{}", wrong.join("\n"));
        assert_eq!(
            arguments_to_send(&tool(json!({"type": "object"})), Value::Null),
            Ok(json!({})),
            "no arguments are an empty object"
        );
    }

    #[test]
    fn the_contract_is_the_description_else_the_title_else_where_it_comes_from() {
        let mut described = tool(json!({}));
        assert_eq!(
            contract(&described),
            "The tool write of the MCP server files."
        );
        described.title = Some("Write a file".to_owned());
        assert_eq!(contract(&described), "Write a file");
        described.description = "Writes a file.".to_owned();
        assert_eq!(contract(&described), "Writes a file.");
    }
}
