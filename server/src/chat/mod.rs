//! `seed chat`: a terminal conversation with an agent — messages sent, answers streamed as they
//! commit, tool calls and results as they run, the context meter, a continuation followed into
//! its successor; `/attach PATH` uploads a file that the next message carries, and `/retry`
//! asks again for the answer to a message whose run failed. A call that waits for approval is
//! asked about: approve, deny with a reason, or edit its arguments and approve.

use std::io::Write;

use anyhow::Context as _;
use seed_events::SessionId;

use crate::api::{
    AttachmentInfo, EventInfo, GetSessionResponse, MessageSessionResponse, RunInfo, SessionInfo,
    SessionRunsResponse,
};
use crate::cli::{all_events, describe};
use crate::client::{Client, next_update};
use crate::ws::Update;

pub mod view;

use view::{RunView, printable};

/// The line that uploads a file for the next message: `/attach PATH`.
pub const ATTACH_COMMAND: &str = "/attach ";

/// The line that retries the message of the session's newest run, when that run failed or
/// was stopped: `/retry`.
pub const RETRY_COMMAND: &str = "/retry";

/// The message to retry: the one the session's newest run (the last of `runs`) answered, when
/// that run failed or was stopped. A message answered since, or a run still going, has none.
fn message_to_retry(runs: &[RunInfo]) -> Option<i64> {
    let newest = runs.last()?;
    ["failed", "canceled"]
        .contains(&newest.status.as_str())
        .then(|| newest.user_event_ids.last().copied())
        .flatten()
}

/// Retries the message of the session's newest run, if it failed or was stopped; `None` when
/// there is none to retry.
async fn retry(
    client: &Client,
    session_id: &str,
) -> anyhow::Result<Option<MessageSessionResponse>> {
    let runs: SessionRunsResponse = client
        .get(&format!("/v1/sessions/{session_id}/runs?limit=1"))
        .await?;
    let Some(event_id) = message_to_retry(&runs.runs) else {
        return Ok(None);
    };
    let retried = client
        .post(
            &format!("/v1/sessions/{session_id}/messages/{event_id}/retry"),
            &serde_json::json!({}),
        )
        .await?;
    Ok(Some(retried))
}

/// Uploads the file at `path` to the session, its type left to the service to tell from its
/// bytes.
async fn attach(
    client: &Client,
    session_id: &str,
    path: &std::path::Path,
) -> anyhow::Result<AttachmentInfo> {
    let bytes = std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
    let name = path
        .file_name()
        .and_then(|name| name.to_str())
        .with_context(|| format!("{} names no file", path.display()))?;
    let query: String = form_urlencoded::Serializer::new(String::new())
        .append_pair("name", name)
        .finish();
    client
        .upload(
            &format!("/v1/sessions/{session_id}/attachments?{query}"),
            "application/octet-stream",
            bytes,
        )
        .await?
        .json()
}

/// The context meter: the newest answer's prompt size against the model's window.
fn context_meter(events: &[EventInfo], window: Option<u64>) -> Option<String> {
    let usage = events
        .iter()
        .rev()
        .find(|event| {
            event.event_type == seed_events::body::kind::MESSAGE
                && event.role.as_deref() == Some("assistant")
        })?
        .meta
        .get("usage")?;
    let tokens: u64 = ["input", "cache_read", "cache_write"]
        .iter()
        .filter_map(|field| usage.get(field).and_then(|n| n.as_u64()))
        .sum();
    let window = window?;
    // A model server that reports no usage leaves the runtime to estimate it.
    let estimated = usage.get("estimated").and_then(|e| e.as_bool()) == Some(true);
    let (about, estimate) = if estimated {
        ("~", ", estimated")
    } else {
        ("", "")
    };
    let percent = tokens as f64 * 100.0 / window as f64;
    let level = if percent >= 85.0 {
        " (full: expect a continuation)"
    } else if percent >= 70.0 {
        " (filling)"
    } else {
        ""
    };
    Some(format!(
        "[context {about}{tokens} / {window} tokens, {percent:.1}%{estimate}{level}]"
    ))
}

pub async fn chat(client: Client, session: Option<String>) -> anyhow::Result<()> {
    let mut session_id = match session {
        Some(session) => session,
        None => {
            let info: SessionInfo = client.post("/v1/sessions", &serde_json::json!({})).await?;
            info.id.to_string()
        }
    };
    let mut subscription = client.subscribe().await?;
    let mut info: GetSessionResponse = client.get(&format!("/v1/sessions/{session_id}")).await?;
    println!(
        "session {session_id} ({}) — type a message (/attach PATH sends a file with the \
         next one; /retry asks again when a run failed); Ctrl-D quits",
        describe(&info.session)
    );
    let mut seen_seq = info.last_seq;
    // Uploaded with /attach, for the next message.
    let mut attachments: Vec<String> = Vec::new();
    let (lines_sender, mut lines) = futures::channel::mpsc::unbounded::<String>();
    std::thread::spawn(move || {
        for line in std::io::stdin().lines().map_while(Result::ok) {
            if lines_sender.unbounded_send(line).is_err() {
                break;
            }
        }
    });
    loop {
        print!("> ");
        std::io::stdout().flush()?;
        let Some(line) = next_line(&mut lines, &mut subscription).await? else {
            println!();
            return Ok(());
        };
        if line.trim().is_empty() {
            continue;
        }
        if let Some(path) = line.trim().strip_prefix(ATTACH_COMMAND) {
            match attach(&client, &session_id, std::path::Path::new(path.trim())).await {
                Ok(attached) => {
                    println!(
                        "attached {} ({} bytes, {}): the next message carries it",
                        printable(&attached.name),
                        attached.size_bytes,
                        printable(&attached.media_type)
                    );
                    attachments.push(attached.id);
                }
                Err(error) => println!("  (not attached: {})", printable(&format!("{error:#}"))),
            }
            continue;
        }
        let sent: MessageSessionResponse = if line.trim() == RETRY_COMMAND {
            match retry(&client, &session_id).await {
                Ok(Some(retried)) => retried,
                Ok(None) => {
                    println!("  (nothing to retry: the newest run did not fail)");
                    continue;
                }
                Err(error) => {
                    println!("  (not retried: {})", printable(&format!("{error:#}")));
                    continue;
                }
            }
        } else {
            let sent = client
                .post(
                    &format!("/v1/sessions/{session_id}/messages"),
                    &serde_json::json!({ "text": line, "attachments": attachments }),
                )
                .await?;
            attachments.clear();
            sent
        };
        seen_seq = seen_seq.max(sent.seq);
        let run_id = sent.run_id;
        let target: SessionId = session_id.parse()?;
        let mut view = RunView::new();
        // Other sessions' updates that came while this run went on: a successor's run may
        // start (and even end) before this one has, and is replayed from here.
        let mut others: Vec<Update> = Vec::new();
        loop {
            let Some(update) = next_update(&mut subscription).await else {
                anyhow::bail!("the subscription closed");
            };
            match update {
                Update::TextDelta {
                    session_id: s,
                    offset_chars,
                    text,
                    ..
                } if s == target => print_now(&view.delta(offset_chars, &text))?,
                Update::SessionChange { session_id: s, .. } if s == target => {
                    seen_seq = print_log(&client, &session_id, seen_seq, &mut view).await?;
                }
                Update::ApprovalPending {
                    session_id: s,
                    call_id,
                    name,
                    kind,
                    message,
                    requested_schema,
                    ..
                } if s == target && kind == "elicitation" => {
                    seen_seq = print_log(&client, &session_id, seen_seq, &mut view).await?;
                    let question = Question {
                        name: &name,
                        message: message.as_deref().unwrap_or_default(),
                        schema: requested_schema
                            .as_ref()
                            .unwrap_or(&serde_json::Value::Null),
                    };
                    if !answer_question(
                        &client,
                        &session_id,
                        &call_id,
                        &question,
                        &mut lines,
                        &mut subscription,
                    )
                    .await?
                    {
                        println!();
                        return Ok(());
                    }
                }
                Update::ApprovalPending {
                    session_id: s,
                    call_id,
                    name,
                    arguments,
                    ..
                } if s == target => {
                    seen_seq = print_log(&client, &session_id, seen_seq, &mut view).await?;
                    let Some(body) =
                        ask_approval(&mut lines, &mut subscription, &name, &arguments).await?
                    else {
                        println!();
                        return Ok(());
                    };
                    let answer = client
                        .request(
                            "POST",
                            &format!("/v1/sessions/{session_id}/approvals/{call_id}"),
                            Some(&body),
                        )
                        .await?;
                    if !(200..300).contains(&answer.status) {
                        println!(
                            "  (not decided: {})",
                            printable(&String::from_utf8_lossy(&answer.body))
                        );
                    }
                }
                Update::RunFinished {
                    run_id: r, status, ..
                } if r.0 == run_id => {
                    // The run's end and its notice are in the log before it is announced.
                    seen_seq = print_log(&client, &session_id, seen_seq, &mut view).await?;
                    let reason = if status == "failed" {
                        run_reason(&client, run_id).await
                    } else {
                        None
                    };
                    print_now(&view.finished(&status, reason.as_deref()))?;
                    break;
                }
                other @ (Update::TextDelta { .. }
                | Update::RunFinished { .. }
                | Update::SessionChange { .. })
                    if others.len() < OTHERS_KEPT_MAX =>
                {
                    others.push(other);
                }
                _ => {}
            }
        }
        let run: crate::api::RunInfo = client.get(&format!("/v1/runs/{run_id}")).await?;
        let successor = run
            .result
            .as_ref()
            .and_then(|result| seed_events::RunResult::parse(result).continued_to_session_id)
            .map(|id| id.to_string());
        if let Some(successor) = successor {
            println!("— the conversation continued in session {successor}; following it —");
            session_id = successor;
            seen_seq = 0;
            follow_successor(&client, &mut subscription, &session_id, others).await?;
        }
        info = client.get(&format!("/v1/sessions/{session_id}")).await?;
        let events = all_events(&client, &session_id, 1).await?;
        if let Some(meter) = context_meter(&events, info.context_window) {
            println!("{meter}");
        }
        seen_seq = seen_seq.max(info.last_seq);
    }
}

/// The next line typed (`None` at the end of input), answering the subscription's pings
/// meanwhile: the service closes a socket that answers none. Updates that come while nobody
/// asked are about earlier runs or other sessions, and are dropped.
async fn next_line(
    lines: &mut futures::channel::mpsc::UnboundedReceiver<String>,
    subscription: &mut actix_codec::Framed<awc::BoxedSocket, awc::ws::Codec>,
) -> anyhow::Result<Option<String>> {
    use futures::{SinkExt as _, StreamExt as _};
    loop {
        tokio::select! {
            line = lines.next() => return Ok(line),
            frame = subscription.next() => match frame {
                Some(Ok(awc::ws::Frame::Ping(bytes))) => subscription
                    .send(awc::ws::Message::Pong(bytes))
                    .await
                    .context("the subscription closed")?,
                Some(Ok(awc::ws::Frame::Close(reason))) => {
                    anyhow::bail!("the subscription closed: {reason:?}")
                }
                Some(Err(error)) => anyhow::bail!("the subscription failed: {error}"),
                None => anyhow::bail!("the subscription closed"),
                Some(Ok(_)) => {}
            },
        }
    }
}

/// What a person's answer to the approval prompt asks for, as the decision's request body:
/// `y` (or nothing) approves, `n [REASON]` denies, `e JSON` approves with the arguments edited
/// to JSON (an object). `None` for an answer that is none of these.
fn approval_answer(line: &str) -> Option<serde_json::Value> {
    let line = line.trim();
    let (word, rest) = line.split_once(char::is_whitespace).unwrap_or((line, ""));
    let rest = rest.trim();
    match word {
        "" | "y" | "yes" if rest.is_empty() => Some(serde_json::json!({ "decision": "approve" })),
        "n" | "no" if rest.is_empty() => Some(serde_json::json!({ "decision": "deny" })),
        "n" | "no" => Some(serde_json::json!({ "decision": "deny", "reason": rest })),
        "e" | "edit" => {
            let arguments: serde_json::Value = serde_json::from_str(rest).ok()?;
            arguments
                .is_object()
                .then(|| serde_json::json!({ "decision": "approve", "arguments": arguments }))
        }
        _ => None,
    }
}

/// Asks the person whether call `name` with `arguments` may run, until the answer is one
/// ([`approval_answer`]); `None` at the end of input.
async fn ask_approval(
    lines: &mut futures::channel::mpsc::UnboundedReceiver<String>,
    subscription: &mut actix_codec::Framed<awc::BoxedSocket, awc::ws::Codec>,
    name: &str,
    arguments: &serde_json::Value,
) -> anyhow::Result<Option<serde_json::Value>> {
    println!(
        "\n{} {} waits for your approval.",
        printable(name),
        printable(&arguments.to_string())
    );
    loop {
        print!("approve? [y]es, [n]o REASON, [e]dit JSON: ");
        std::io::stdout().flush()?;
        let Some(line) = next_line(lines, subscription).await? else {
            return Ok(None);
        };
        match approval_answer(&line) {
            Some(body) => return Ok(Some(body)),
            None => println!("  (answer y, n with a reason, or e with the arguments as JSON)"),
        }
    }
}

/// An MCP server's question during a call, as `seed chat` puts it.
struct Question<'a> {
    /// The call's verb.
    name: &'a str,
    message: &'a str,
    /// The JSON Schema of the answer's content.
    schema: &'a serde_json::Value,
}

/// The body an answer to a question stands for: `a JSON` (accept with that content),
/// `d` (decline) or `c` (cancel); `None` when it is none of them.
fn question_answer(line: &str) -> Option<serde_json::Value> {
    let line = line.trim();
    let (word, rest) = line.split_once(char::is_whitespace).unwrap_or((line, ""));
    let rest = rest.trim();
    match word {
        "a" | "accept" => {
            let content: serde_json::Value = serde_json::from_str(rest).ok()?;
            content
                .is_object()
                .then(|| serde_json::json!({ "decision": "accept", "content": content }))
        }
        "d" | "decline" if rest.is_empty() => Some(serde_json::json!({ "decision": "decline" })),
        "c" | "cancel" if rest.is_empty() => Some(serde_json::json!({ "decision": "cancel" })),
        _ => None,
    }
}

/// The fields a question asks for, as `name (type, required)`, for the person to fill in.
pub(crate) fn question_fields(schema: &serde_json::Value) -> String {
    let required: Vec<&str> = schema
        .get("required")
        .and_then(serde_json::Value::as_array)
        .map(|names| names.iter().filter_map(serde_json::Value::as_str).collect())
        .unwrap_or_default();
    let Some(properties) = schema
        .get("properties")
        .and_then(serde_json::Value::as_object)
    else {
        return String::new();
    };
    properties
        .iter()
        .map(|(name, field)| {
            let kind = field
                .get("type")
                .and_then(serde_json::Value::as_str)
                .unwrap_or("string");
            let mut text = format!("{name} ({kind}");
            if let Some(values) = field.get("enum").and_then(serde_json::Value::as_array) {
                let values: Vec<String> = values.iter().map(ToString::to_string).collect();
                text.push_str(&format!(": {}", values.join(" | ")));
            }
            if required.contains(&name.as_str()) {
                text.push_str(", required");
            }
            text.push(')');
            text
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// Asks the person the server's question until an answer is taken (an answer the service
/// refuses, content that does not fit, is asked again). `false` at the end of input.
async fn answer_question(
    client: &Client,
    session_id: &str,
    call_id: &str,
    question: &Question<'_>,
    lines: &mut futures::channel::mpsc::UnboundedReceiver<String>,
    subscription: &mut actix_codec::Framed<awc::BoxedSocket, awc::ws::Codec>,
) -> anyhow::Result<bool> {
    println!(
        "\n{} asks: {}\n  fields: {}",
        printable(question.name),
        printable(question.message),
        printable(&question_fields(question.schema))
    );
    loop {
        print!("answer? [a]ccept JSON, [d]ecline, [c]ancel: ");
        std::io::stdout().flush()?;
        let Some(line) = next_line(lines, subscription).await? else {
            return Ok(false);
        };
        let Some(body) = question_answer(&line) else {
            println!("  (answer a with the content as a JSON object, d or c)");
            continue;
        };
        let answer = client
            .request(
                "POST",
                &format!("/v1/sessions/{session_id}/approvals/{call_id}"),
                Some(&body),
            )
            .await?;
        if (200..300).contains(&answer.status) {
            return Ok(true);
        }
        println!(
            "  (not answered: {})",
            printable(&String::from_utf8_lossy(&answer.body))
        );
        if answer.status != 400 {
            return Ok(true);
        }
    }
}

/// How many other sessions' updates `seed chat` keeps while a run goes on.
const OTHERS_KEPT_MAX: usize = 10_000;

/// Prints the successor's answer until its run ends, as a run of this session is printed:
/// first from `earlier` (the updates that came before the successor was known), then live.
async fn follow_successor(
    client: &Client,
    subscription: &mut actix_codec::Framed<awc::BoxedSocket, awc::ws::Codec>,
    session_id: &str,
    earlier: Vec<Update>,
) -> anyhow::Result<()> {
    let target: SessionId = session_id.parse()?;
    let mut earlier = earlier.into_iter();
    let mut view = RunView::new();
    let mut seen_seq = 0;
    loop {
        let update = match earlier.next() {
            Some(update) => update,
            None => match next_update(subscription).await {
                Some(update) => update,
                None => anyhow::bail!("the subscription closed"),
            },
        };
        match update {
            Update::TextDelta {
                session_id: s,
                offset_chars,
                text,
                ..
            } if s == target => print_now(&view.delta(offset_chars, &text))?,
            Update::SessionChange { session_id: s, .. } if s == target => {
                seen_seq = print_log(client, session_id, seen_seq, &mut view).await?;
            }
            Update::RunFinished {
                session_id: s,
                run_id,
                status,
            } if s == target => {
                print_log(client, session_id, seen_seq, &mut view).await?;
                let reason = if status == "failed" {
                    run_reason(client, run_id.0).await
                } else {
                    None
                };
                print_now(&view.finished(&status, reason.as_deref()))?;
                return Ok(());
            }
            _ => {}
        }
    }
}

/// Prints what the session's log has past `seen_seq`; returns the newest seq printed.
async fn print_log(
    client: &Client,
    session_id: &str,
    seen_seq: i64,
    view: &mut RunView,
) -> anyhow::Result<i64> {
    let mut seen = seen_seq;
    for event in all_events(client, session_id, seen_seq + 1).await? {
        seen = seen.max(event.seq);
        print_now(&view.event(&event))?;
    }
    Ok(seen)
}

/// Why a failed run failed, as its result says (`None` when it cannot be read).
async fn run_reason(client: &Client, run_id: uuid::Uuid) -> Option<String> {
    let run: RunInfo = client.get(&format!("/v1/runs/{run_id}")).await.ok()?;
    seed_events::RunResult::parse(&run.result?).error
}

fn print_now(text: &str) -> anyhow::Result<()> {
    if !text.is_empty() {
        print!("{text}");
        std::io::stdout().flush()?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::remote::tests::assistant;

    fn run(status: &str, event_id: i64) -> RunInfo {
        RunInfo {
            id: uuid::Uuid::nil(),
            session_id: uuid::Uuid::nil(),
            queue: "interactive".to_owned(),
            status: status.to_owned(),
            attempts: 1,
            pass: 0,
            user_event_ids: vec![event_id],
            result: None,
            created_at_ms: 0,
            updated_at_ms: 0,
        }
    }

    #[test]
    fn the_message_to_retry_is_the_newest_runs_when_it_failed_or_stopped() {
        assert_eq!(message_to_retry(&[run("failed", 7)]), Some(7));
        assert_eq!(
            message_to_retry(&[run("succeeded", 3), run("canceled", 9)]),
            Some(9)
        );
        assert_eq!(
            message_to_retry(&[run("failed", 3), run("succeeded", 9)]),
            None
        );
        assert_eq!(message_to_retry(&[run("running", 9)]), None);
        assert_eq!(message_to_retry(&[]), None);
    }

    #[test]
    fn an_answer_to_a_servers_question() {
        let cases = [
            (
                r#"a {"name": "Ada"}"#,
                Some(serde_json::json!({"decision": "accept", "content": {"name": "Ada"}})),
            ),
            ("d", Some(serde_json::json!({"decision": "decline"}))),
            (" cancel ", Some(serde_json::json!({"decision": "cancel"}))),
            ("a Ada", None),
            ("a [1]", None),
            ("d because", None),
            ("y", None),
        ];
        for (line, expected) in cases {
            assert_eq!(question_answer(line), expected, "{line:?}");
        }
        assert_eq!(
            question_fields(&serde_json::json!({
                "properties": {
                    "name": {"type": "string"},
                    "pet": {"type": "string", "enum": ["cat", "dog"]},
                },
                "required": ["name"],
            })),
            r#"name (string, required), pet (string: "cat" | "dog")"#
        );
    }

    #[test]
    fn an_answer_to_the_approval_prompt() {
        let cases = [
            ("", Some(serde_json::json!({"decision": "approve"}))),
            ("y", Some(serde_json::json!({"decision": "approve"}))),
            (" yes ", Some(serde_json::json!({"decision": "approve"}))),
            ("n", Some(serde_json::json!({"decision": "deny"}))),
            (
                "no  not today",
                Some(serde_json::json!({"decision": "deny", "reason": "not today"})),
            ),
            (
                r#"e {"key": "k2"}"#,
                Some(serde_json::json!({"decision": "approve", "arguments": {"key": "k2"}})),
            ),
            ("e [1]", None),
            ("e not json", None),
            ("y please", None),
            ("maybe", None),
        ];
        for (line, expected) in cases {
            assert_eq!(approval_answer(line), expected, "{line:?}");
        }
    }

    #[test]
    fn the_context_meter() {
        assert_eq!(
            context_meter(&[assistant(500)], Some(1000)),
            Some("[context 500 / 1000 tokens, 50.0%]".to_owned())
        );
        assert_eq!(
            context_meter(&[assistant(900)], Some(1000)),
            Some("[context 900 / 1000 tokens, 90.0% (full: expect a continuation)]".to_owned())
        );
        let mut estimated = assistant(400);
        estimated.meta["usage"]["estimated"] = serde_json::json!(true);
        assert_eq!(
            context_meter(&[estimated], Some(1000)),
            Some("[context ~400 / 1000 tokens, 40.0%, estimated]".to_owned())
        );
        assert_eq!(context_meter(&[], Some(1000)), None);
        assert_eq!(context_meter(&[assistant(1)], None), None);
    }
}
