//! The `read` verb: a thread of this agent's own (`thread:<session id>`, as `[seq] who: text`
//! lines), a memory file (`~/memory/…`), or the text of a file a person attached
//! (`attachment:<id>`, of this account only).

use std::sync::LazyLock;

use futures::future::BoxFuture;
use seed_events::SessionId;
use seed_projections::transcript::{escape_attribute, transcript_lines};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::schema::parse_checked;
use crate::verb::{Verb, VerbContext, VerbOutput};

/// How many events a thread read shows when no `limit` is given.
pub const READ_LIMIT_DEFAULT: i64 = 200;
/// The most events one thread read shows.
pub const READ_LIMIT_MAX: i64 = 1000;

/// What the model reads of the verb, its limits stated from their constants.
static DESCRIPTION: LazyLock<String> = LazyLock::new(|| {
    format!(
        "Reads exact material back: one of your own threads, or one of your memory files. \
         With target \"thread:<session id>\" it prints the thread's events as `[seq] who: text` \
         lines (oldest first, newlines shown as ⏎), after one header line with the thread's id, \
         title and last seq (and, when the thread was continued, a `continued from` or \
         `continued to thread:<id>` line naming the session on the other side); use fromSeq \
         and toSeq (inclusive) to pick a range and limit (default {READ_LIMIT_DEFAULT}, at most \
         {READ_LIMIT_MAX}) to cap how many events come back. When the limit cuts the \
         range short, the last line says which fromSeq reads on. Only threads of your own \
         account can be read; any other id is \"thread not found\". With target \
         \"~/memory/<path>\" it returns the file's content exactly, or \"no such file\". Use it \
         to recall what was said or decided in an earlier thread (for example one you were \
         continued from) instead of guessing, and to look at a memory file before changing it. \
         With target \"attachment:<id>\" it reads the text of a file a person attached (as a \
         message names it), from fromByte on (default 0); when more follows than one read \
         returns, a last line says which fromByte reads on. Only your own account's attachments can be read."
    )
});

const THREAD_PREFIX: &str = "thread:";
const MEMORY_PREFIX: &str = "~/memory/";
const ATTACHMENT_PREFIX: &str = "attachment:";

/// Reads a thread of this agent's own, or a memory file. Safe to repeat.
#[derive(Debug, Clone, Copy, Default)]
pub struct Read;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ReadArgs {
    target: String,
    #[serde(rename = "fromSeq")]
    from_seq: Option<i64>,
    #[serde(rename = "toSeq")]
    to_seq: Option<i64>,
    limit: Option<i64>,
    #[serde(rename = "fromByte")]
    from_byte: Option<u64>,
}

impl Verb for Read {
    fn name(&self) -> &'static str {
        "read"
    }

    fn description(&self) -> &'static str {
        &DESCRIPTION
    }

    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "target": {
                    "type": "string",
                    "description": "\"thread:<session id>\", a memory path \"~/memory/<path>\", or \"attachment:<id>\""
                },
                "fromSeq": {
                    "type": "integer",
                    "minimum": 1,
                    "description": "Thread reads only: the first seq to show (default 1)"
                },
                "toSeq": {
                    "type": "integer",
                    "minimum": 1,
                    "description": "Thread reads only: the last seq to show (default: the end)"
                },
                "limit": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": READ_LIMIT_MAX,
                    "description": format!(
                        "Thread reads only: at most this many events (default {READ_LIMIT_DEFAULT})"
                    )
                },
                "fromByte": {
                    "type": "integer",
                    "minimum": 0,
                    "description": "Attachment reads only: the first byte to show (default 0)"
                }
            },
            "required": ["target"],
            "additionalProperties": false
        })
    }

    fn safe_to_repeat(&self) -> bool {
        true
    }

    fn call(&self, context: VerbContext, arguments: Value) -> BoxFuture<'static, VerbOutput> {
        let parsed = parse_checked::<ReadArgs>(self.name(), &self.parameters(), arguments);
        Box::pin(async move {
            match parsed {
                Ok(args) => read(context, args).await,
                Err(error) => error,
            }
        })
    }
}

fn invalid(message: impl std::fmt::Display) -> VerbOutput {
    VerbOutput::error(format!("invalid arguments for read: {message}"))
}

async fn read(context: VerbContext, args: ReadArgs) -> VerbOutput {
    if let Some(id) = args.target.strip_prefix(ATTACHMENT_PREFIX) {
        if let Some(field) = only_for_threads(&args) {
            return invalid(format_args!("{field}: only for thread reads"));
        }
        return crate::attachments::read_attachment(
            &context,
            id.trim(),
            args.from_byte.unwrap_or(0),
        )
        .await;
    }
    if args.from_byte.is_some() {
        return invalid("fromByte: only for attachment reads");
    }
    if let Some(id) = args.target.strip_prefix(THREAD_PREFIX) {
        let Ok(thread_id) = id.trim().parse::<SessionId>() else {
            return invalid(format_args!(
                "target: {:?} is not a thread id; expected thread:<session id>",
                args.target
            ));
        };
        let from_seq = args.from_seq.unwrap_or(1);
        let to_seq = args.to_seq.unwrap_or(i64::MAX);
        if to_seq < from_seq {
            return invalid(format_args!("toSeq: {to_seq} is before fromSeq {from_seq}"));
        }
        let limit = args.limit.unwrap_or(READ_LIMIT_DEFAULT);
        read_thread(context, thread_id, from_seq, to_seq, limit).await
    } else if args.target.starts_with(MEMORY_PREFIX) {
        if let Some(field) = only_for_threads(&args) {
            return invalid(format_args!("{field}: only for thread reads"));
        }
        read_memory(context, &args.target).await
    } else {
        invalid(format_args!(
            "target: expected thread:<session id>, a ~/memory/ path or attachment:<id>, got {:?}",
            args.target
        ))
    }
}

/// The first argument given that only a thread read takes.
fn only_for_threads(args: &ReadArgs) -> Option<&'static str> {
    [
        ("fromSeq", args.from_seq.is_some()),
        ("toSeq", args.to_seq.is_some()),
        ("limit", args.limit.is_some()),
    ]
    .into_iter()
    .find_map(|(field, given)| given.then_some(field))
}

async fn read_thread(
    context: VerbContext,
    thread_id: SessionId,
    from_seq: i64,
    to_seq: i64,
    limit: i64,
) -> VerbOutput {
    let not_found = || VerbOutput::error("thread not found");
    let failed = |error: seed_store::Error| VerbOutput::error(format!("read failed: {error}"));
    // Only the caller's own account: the caller's session says which account that is.
    let caller = match context.store.get_session(context.session_id).await {
        Ok(Some(caller)) => caller,
        Ok(None) => return not_found(),
        Err(error) => return failed(error),
    };
    let thread = match context.store.get_session(thread_id).await {
        Ok(Some(thread)) if thread.account_id == caller.account_id => thread,
        Ok(_) => return not_found(),
        Err(error) => return failed(error),
    };
    let last_seq = match context.store.last_seq(thread_id).await {
        Ok(last_seq) => last_seq,
        Err(error) => return failed(error),
    };
    let limit_usize = usize::try_from(limit).unwrap_or(usize::MAX);
    let events = match context
        .store
        .read_events(thread_id, from_seq, to_seq, limit_usize)
        .await
    {
        Ok(events) => events,
        Err(error) => return failed(error),
    };
    // What this read brought back of what a continuation's projection left out is counted
    // against that edge; the telemetry failing never costs the agent its read.
    if let (Some(first), Some(last)) = (events.first(), events.last()) {
        let read = crate::recalls::ThreadRead {
            reader: context.session_id,
            tool_call_id: &context.tool_call_id,
            thread: thread_id,
            from_seq: first.seq,
            to_seq: last.seq,
            now_ms: context.now_ms,
        };
        if let Err(error) = crate::recalls::record_read(&context.store, &read).await {
            tracing::warn!(
                session_id = %context.session_id,
                %thread_id,
                %error,
                "a recall was not recorded"
            );
        }
    }

    let mut lines = Vec::new();
    lines.push(if thread.title.is_empty() {
        format!("thread {thread_id} (untitled), last seq {last_seq}")
    } else {
        format!(
            "thread {thread_id} \"{}\", last seq {last_seq}",
            escape_attribute(&thread.title)
        )
    });
    // Where the thread came from and where it went, so a chain can be walked back and forth.
    let (continued_from, continued_to) = match context.store.continuation_links(thread_id).await {
        Ok(links) => links,
        Err(error) => return failed(error),
    };
    for (direction, link) in [("from", continued_from), ("to", continued_to)] {
        if let Some(link) = link {
            lines.push(format!(
                "continued {direction} thread:{} \"{}\" (reason: {})",
                link.session_id,
                escape_attribute(&link.title),
                escape_attribute(&link.reason)
            ));
        }
    }
    match events.last() {
        None if to_seq == i64::MAX => lines.push(format!("no events from seq {from_seq}")),
        None => lines.push(format!("no events in seq {from_seq} to {to_seq}")),
        Some(last_event) => {
            let transcript = transcript_lines(&events);
            if !transcript.is_empty() {
                lines.push(transcript);
            }
            let cut_short = events.len() == limit_usize && last_event.seq < to_seq.min(last_seq);
            if cut_short {
                lines.push(format!(
                    "(limit {limit} reached: read on with fromSeq {})",
                    last_event.seq + 1
                ));
            }
        }
    }
    VerbOutput::ok(lines.join("\n"))
}

async fn read_memory(context: VerbContext, path: &str) -> VerbOutput {
    match context.store.read_memory(context.account_id, path).await {
        Ok(Some(content)) => VerbOutput::ok(content),
        Ok(None) => VerbOutput::error(format!("no such file: {path}")),
        Err(error @ seed_store::Error::InvalidPath { .. }) => VerbOutput::error(error.to_string()),
        Err(error) => VerbOutput::error(format!("read failed: {error}")),
    }
}
