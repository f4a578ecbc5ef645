//! The `seed` commands that talk to a running service with the local key (`token`, `tools`,
//! `sessions`, `show`, `fork`, `schedules`, `approvals`), and the text they print.

use anyhow::Context as _;

use crate::api::{
    EventInfo, EventsResponse, GetSessionResponse, ListSessionsResponse, SessionInfo,
};
use crate::client::Client;
use crate::serve;

pub(super) async fn token(client: Client) -> anyhow::Result<()> {
    let minted: crate::api::TokenResponse =
        client.post("/v1/tokens", &serde_json::json!({})).await?;
    println!("{}", minted.token);
    // To the nearest minute: the clock moved since it was minted.
    let minutes = (minted.expires_at_ms - serve::now_ms() + 30_000) / 60_000;
    let lasts = crate::auth::describe_ms(minutes * 60_000);
    eprintln!(
        "a bearer token for this account, good for about {lasts}: paste it into the web UI's \
         sign-in form"
    );
    Ok(())
}

pub(super) async fn tools(client: Client) -> anyhow::Result<()> {
    let list: crate::api::ToolsResponse = client.get("/v1/tools").await?;
    // Descriptions and errors come from MCP servers.
    print!("{}", crate::chat::view::printable(&tools_text(&list)));
    Ok(())
}

/// `seed tools`' text: the built-in verbs, then each MCP server with its state and its tools,
/// a tool a line with its class and the first line of its contract.
pub(crate) fn tools_text(list: &crate::api::ToolsResponse) -> String {
    use crate::api::ToolClass;
    let line = |tool: &crate::api::ToolInfo| {
        let class = match tool.class {
            ToolClass::SafeToRepeat => "safe to repeat",
            ToolClass::NotSafeToRepeat => "not safe to repeat",
        };
        let contract: String = tool
            .description
            .lines()
            .next()
            .unwrap_or("")
            .chars()
            .take(72)
            .collect();
        format!("  {:<32} {class:<19} {contract}\n", tool.name)
    };
    let mut text = String::from("built in:\n");
    for tool in list.tools.iter().filter(|tool| tool.mcp_server.is_none()) {
        text.push_str(&line(tool));
    }
    for server in &list.mcp_servers {
        let named = match (&server.server_name, &server.server_version) {
            (Some(name), Some(version)) => format!("{name} {version}, "),
            (Some(name), None) => format!("{name}, "),
            _ => String::new(),
        };
        let error = server
            .error
            .as_ref()
            .map(|error| format!(": {error}"))
            .unwrap_or_default();
        text.push_str(&format!(
            "mcp server {} ({named}{}{error}, {} tools):\n",
            server.name, server.state, server.tools
        ));
        for tool in list
            .tools
            .iter()
            .filter(|tool| tool.mcp_server.as_deref() == Some(server.name.as_str()))
        {
            text.push_str(&line(tool));
        }
    }
    text
}

pub(super) async fn sessions(client: Client, limit: u64) -> anyhow::Result<()> {
    let list: ListSessionsResponse = client.get(&format!("/v1/sessions?limit={limit}")).await?;
    if list.sessions.is_empty() {
        println!("no sessions yet: `seed chat` starts one");
    }
    for session in list.sessions {
        println!("{}  {}", session.id, describe(&session));
    }
    Ok(())
}

/// `seed schedules SESSION [--cancel ID]`: the session's wake-ups still to fire, one a line
/// (id, when, next due, times fired, note), or cancels one.
pub(super) async fn schedules(
    client: Client,
    session: String,
    cancel: Option<String>,
) -> anyhow::Result<()> {
    if let Some(schedule_id) = cancel {
        let answer = client
            .request(
                "DELETE",
                &format!("/v1/sessions/{session}/schedules/{schedule_id}"),
                None,
            )
            .await?;
        if !(200..300).contains(&answer.status) {
            anyhow::bail!(
                "the service answered {}: {}",
                answer.status,
                String::from_utf8_lossy(&answer.body)
            );
        }
        println!("cancelled wake-up {schedule_id}");
        return Ok(());
    }
    let list: crate::api::SchedulesResponse = client
        .get(&format!("/v1/sessions/{session}/schedules"))
        .await?;
    if list.schedules.is_empty() {
        println!("no wake-ups scheduled in this session");
    }
    for schedule in list.schedules {
        let next = schedule
            .next_due_at_ms
            .map(seed_events::schedule::format_ms)
            .unwrap_or_default();
        let line = format!(
            "{}  {}  next {}  fired {}  {}",
            schedule.id, schedule.when, next, schedule.fired, schedule.note
        );
        println!("{}", crate::chat::view::printable(&line.replace('\n', " ")));
    }
    Ok(())
}

/// The decision `seed approvals` was asked to make, as the call's id and the request's body;
/// `None` to list.
pub(super) fn approval_request(
    approve: &Option<String>,
    deny: &Option<String>,
    reason: &Option<String>,
    arguments: &Option<String>,
) -> anyhow::Result<Option<(String, serde_json::Value)>> {
    Ok(match (approve, deny) {
        (Some(call_id), _) => {
            let mut body = serde_json::json!({ "decision": "approve" });
            if let Some(arguments) = arguments {
                body["arguments"] =
                    serde_json::from_str(arguments).context("--arguments is not JSON")?;
            }
            Some((call_id.clone(), body))
        }
        (None, Some(call_id)) => {
            let mut body = serde_json::json!({ "decision": "deny" });
            if let Some(reason) = reason {
                body["reason"] = serde_json::Value::String(reason.clone());
            }
            Some((call_id.clone(), body))
        }
        (None, None) => None,
    })
}

/// The answer `seed approvals` was asked to give an MCP server's question, as the call's id
/// and the request's body; `None` when it was asked for none.
pub(super) fn question_request(
    accept: &Option<String>,
    content: &Option<String>,
    decline: &Option<String>,
    cancel: &Option<String>,
) -> anyhow::Result<Option<(String, serde_json::Value)>> {
    Ok(match (accept, decline, cancel) {
        (Some(call_id), _, _) => {
            let content: serde_json::Value = match content {
                Some(content) => serde_json::from_str(content).context("--content is not JSON")?,
                None => serde_json::json!({}),
            };
            Some((
                call_id.clone(),
                serde_json::json!({ "decision": "accept", "content": content }),
            ))
        }
        (None, Some(call_id), _) => Some((
            call_id.clone(),
            serde_json::json!({ "decision": "decline" }),
        )),
        (None, None, Some(call_id)) => {
            Some((call_id.clone(), serde_json::json!({ "decision": "cancel" })))
        }
        (None, None, None) => None,
    })
}

/// `seed approvals SESSION [--approve ID | --deny ID | --accept ID | --decline ID | --cancel
/// ID]`: the session's approvals, one a line (call id, status, the call, the reason; for a
/// server's question, what it asks and the fields, or the answer), or a decision on one.
pub(super) async fn approvals(
    client: Client,
    session: String,
    decision: Option<(String, serde_json::Value)>,
) -> anyhow::Result<()> {
    let line = |approval: &crate::api::ApprovalInfo| {
        let mut line = format!(
            "{}  {}  {} {}",
            approval.call_id, approval.status, approval.name, approval.arguments
        );
        if let Some(message) = &approval.message {
            line.push_str(&format!("  asks: {message}"));
            match (&approval.content, &approval.requested_schema) {
                (Some(content), _) => line.push_str(&format!("  answered {content}")),
                (None, Some(schema)) if approval.status == "pending" => line.push_str(&format!(
                    "  fields: {}",
                    crate::chat::question_fields(schema)
                )),
                _ => {}
            }
        }
        if let Some(reason) = &approval.reason {
            line.push_str(&format!("  ({reason})"));
        }
        crate::chat::view::printable(&line.replace('\n', " "))
    };
    if let Some((call_id, body)) = decision {
        let answer = client
            .request(
                "POST",
                &format!("/v1/sessions/{session}/approvals/{call_id}"),
                Some(&body),
            )
            .await?;
        if !(200..300).contains(&answer.status) {
            anyhow::bail!(
                "the service answered {}: {}",
                answer.status,
                String::from_utf8_lossy(&answer.body)
            );
        }
        let decided: crate::api::ApprovalInfo = answer.json()?;
        println!("{}", line(&decided));
        return Ok(());
    }
    let list: crate::api::ApprovalsResponse = client
        .get(&format!("/v1/sessions/{session}/approvals"))
        .await?;
    if list.approvals.is_empty() {
        println!("no call in this session waited for approval");
    }
    for approval in &list.approvals {
        println!("{}", line(approval));
    }
    Ok(())
}

/// A session's title and its continuations as one line, printable on a terminal (titles are
/// the model's or a person's text).
pub(crate) fn describe(session: &SessionInfo) -> String {
    let title = if session.title.is_empty() {
        "(untitled)"
    } else {
        &session.title
    };
    let mut text = title.to_owned();
    if let Some(to) = &session.continued_to {
        text.push_str(&format!(
            "  [continued in {} \u{201c}{}\u{201d} ({})]",
            to.session_id, to.title, to.reason
        ));
    }
    if let Some(from) = &session.continued_from {
        text.push_str(&format!(
            "  [continued from {} \u{201c}{}\u{201d}]",
            from.session_id, from.title
        ));
    }
    if let Some(from) = &session.forked_from {
        text.push_str(&format!(
            "  [a fork of {} \u{201c}{}\u{201d} ({})]",
            from.session_id, from.title, from.reason
        ));
    }
    crate::chat::view::printable(&text)
}

pub(crate) async fn all_events(
    client: &Client,
    session_id: &str,
    from_seq: i64,
) -> anyhow::Result<Vec<EventInfo>> {
    let mut events = Vec::new();
    let mut next = Some(from_seq);
    while let Some(from_seq) = next {
        let page: EventsResponse = client
            .get(&format!(
                "/v1/sessions/{session_id}/events?from_seq={from_seq}&limit=500"
            ))
            .await?;
        events.extend(page.events);
        next = page.next_seq;
    }
    Ok(events)
}

pub(super) async fn show(client: Client, session: String) -> anyhow::Result<()> {
    let info: GetSessionResponse = client.get(&format!("/v1/sessions/{session}")).await?;
    println!("session {}  {}", info.session.id, describe(&info.session));
    for line in crate::chat::view::transcript(&all_events(&client, &session, 1).await?) {
        println!("{line}");
    }
    Ok(())
}

/// `seed fork SESSION SEQ`: a new session whose conversation is the session's up to `seq`.
/// Prints the fork's id, then what it is.
pub(super) async fn fork(
    client: Client,
    session: String,
    seq: i64,
    title: Option<String>,
) -> anyhow::Result<()> {
    let mut body = serde_json::json!({ "seq": seq });
    if let Some(title) = title {
        body["title"] = serde_json::Value::String(title);
    }
    let forked: crate::api::ForkSessionResponse = client
        .post(&format!("/v1/sessions/{session}/fork"), &body)
        .await
        .with_context(|| format!("forking session {session} at seq {seq}"))?;
    println!("{}", forked.session.id);
    eprintln!(
        "forked from session {} at seq {}: {}",
        forked.forked_from_session_id,
        forked.seq,
        describe(&forked.session)
    );
    Ok(())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn assistant(input: u64) -> EventInfo {
        EventInfo {
            id: 1,
            seq: 1,
            event_type: "message".to_owned(),
            kind: "message".to_owned(),
            role: Some("assistant".to_owned()),
            actor: Some("agent".to_owned()),
            content: serde_json::json!({"text": "hi"}),
            meta: serde_json::json!({"usage": {"input": input, "output": 1, "cache_read": 0, "cache_write": 0}}),
            run_id: None,
            created_at_ms: 0,
        }
    }

    #[test]
    fn transcript_lines() {
        let mut call = assistant(0);
        call.event_type = "tool_call".to_owned();
        call.content =
            serde_json::json!({"id": "c", "name": "status", "arguments": {"title": "x"}});
        let line = crate::chat::view::event_line;
        assert_eq!(
            line(&call).as_deref(),
            Some(r#"[1] tool call: status({"title":"x"})"#)
        );
        assert_eq!(line(&assistant(0)).as_deref(), Some("[1] agent: hi"));
    }

    #[test]
    fn seed_tools_lists_each_tool_with_its_class_under_where_it_comes_from() {
        use crate::api::{McpServerInfo, OfferedIn, ToolClass, ToolInfo, ToolsResponse};
        let tool = |name: &str, class, server: Option<&str>, description: &str| ToolInfo {
            name: name.to_owned(),
            description: description.to_owned(),
            parameters: serde_json::json!({"type": "object"}),
            class,
            ends_turn: false,
            offered_in: OfferedIn::Every,
            mcp_server: server.map(str::to_owned),
        };
        let list = ToolsResponse {
            tools: vec![
                tool("read", ToolClass::SafeToRepeat, None, "Reads.\nMore."),
                tool(
                    "files__write_file",
                    ToolClass::NotSafeToRepeat,
                    Some("files"),
                    "Writes a file.",
                ),
                tool(
                    "files__read_text_file",
                    ToolClass::SafeToRepeat,
                    Some("files"),
                    "",
                ),
            ],
            mcp_servers: vec![
                McpServerInfo {
                    name: "files".to_owned(),
                    server_name: Some("secure-filesystem-server".to_owned()),
                    server_version: Some("0.2.0".to_owned()),
                    tools: 2,
                    state: "connected".to_owned(),
                    error: None,
                },
                McpServerInfo {
                    name: "gone".to_owned(),
                    server_name: None,
                    server_version: None,
                    tools: 0,
                    state: "restarting".to_owned(),
                    error: Some("the server exited".to_owned()),
                },
            ],
        };
        let pad = |name: &str, class: &str, contract: &str| {
            format!("  {name:<32} {class:<19} {contract}\n")
        };
        assert_eq!(
            tools_text(&list),
            [
                "built in:\n".to_owned(),
                pad("read", "safe to repeat", "Reads."),
                "mcp server files (secure-filesystem-server 0.2.0, connected, 2 tools):\n"
                    .to_owned(),
                pad("files__write_file", "not safe to repeat", "Writes a file."),
                pad("files__read_text_file", "safe to repeat", ""),
                "mcp server gone (restarting: the server exited, 0 tools):\n".to_owned(),
            ]
            .concat()
        );
    }
}
