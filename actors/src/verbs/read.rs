//! The `read` verb: a thread of this agent's own (`thread:<session id>`, as `[seq] who: text`
//! lines), a memory file (`~/memory/…`), or the text of a file a person attached
//! (`attachment:<id>`, of this account only). Also [`parse_checked`], the argument check the shipped
//! verbs share: the arguments are checked against the verb's own JSON schema, so that an error
//! names the field.

use std::sync::LazyLock;

use futures::future::BoxFuture;
use seed_events::SessionId;
use seed_projections::transcript::{escape_attribute, transcript_lines};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use crate::verb::{Verb, VerbContext, VerbOutput, parse_arguments};

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

/// Parses a call's arguments into `T` after checking them against `schema` (the verb's
/// [`Verb::parameters`]), so that an invalid argument is answered with an error naming the
/// field: `invalid arguments for <verb>: <field>: <problem>`.
///
/// The schema subset checked: `type` (object, array, string, integer, number, boolean), `enum`,
/// `properties`, `required`, `additionalProperties: false`, `items`, `minimum`, `maximum`,
/// `minLength`, `maxLength` (in characters) and `maxItems`. A `null` for a property that is not
/// required counts as absent.
pub(crate) fn parse_checked<T: DeserializeOwned>(
    verb: &str,
    schema: &Value,
    mut arguments: Value,
) -> Result<T, VerbOutput> {
    if let Err(problem) = check(schema, &mut arguments, "", Nulls::Absent) {
        return Err(VerbOutput::error(format!(
            "invalid arguments for {verb}: {problem}"
        )));
    }
    parse_arguments(verb, arguments)
}

/// What is wrong with a verb's arguments, and where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArgumentProblem {
    /// The path to the field (`steps[1].state`), or `arguments` for the whole object.
    pub field: String,
    pub problem: String,
}

impl std::fmt::Display for ArgumentProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.field, self.problem)
    }
}

/// Checks `arguments` against a verb's schema (the subset [`parse_checked`] describes) as JSON
/// Schema reads it, for a person's action: a `null` is a value of the wrong type, not an absent
/// field (a model's call is let off that).
pub fn check_arguments(schema: &Value, arguments: &Value) -> Result<(), ArgumentProblem> {
    check(schema, &mut arguments.clone(), "", Nulls::Typed)
}

/// How a `null` for a property that is not required counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Nulls {
    /// As if the property were absent (what models send for "nothing").
    Absent,
    /// As a value, checked against the property's type (JSON Schema).
    Typed,
}

/// Checks `value` against `schema`. A number with no fractional part where an integer is
/// wanted (`5.0`) is one, as in JSON Schema, and is rewritten as an integer for the parse.
fn check(
    schema: &Value,
    value: &mut Value,
    path: &str,
    nulls: Nulls,
) -> Result<(), ArgumentProblem> {
    let at = |problem: String| ArgumentProblem {
        field: if path.is_empty() {
            "arguments".to_owned()
        } else {
            path.to_owned()
        },
        problem,
    };
    if let Some(allowed) = schema.get("enum").and_then(Value::as_array)
        && !allowed.contains(value)
    {
        let names: Vec<String> = allowed
            .iter()
            .map(|name| {
                name.as_str()
                    .map_or_else(|| name.to_string(), str::to_owned)
            })
            .collect();
        return Err(at(format!(
            "expected one of {}, got {value}",
            names.join(", ")
        )));
    }
    let Some(kind) = schema.get("type").and_then(Value::as_str) else {
        return Ok(());
    };
    if kind == "integer"
        && let Some(number) = value.as_f64().filter(|number| {
            !(value.is_i64() || value.is_u64())
                && number.fract() == 0.0
                && number.abs() < 9_007_199_254_740_992.0
        })
    {
        *value = Value::from(number as i64);
    }
    let fits = match kind {
        "object" => value.is_object(),
        "array" => value.is_array(),
        "string" => value.is_string(),
        "integer" => value.is_i64() || value.is_u64(),
        "number" => value.is_number(),
        "boolean" => value.is_boolean(),
        _ => true,
    };
    if !fits {
        return Err(at(format!(
            "expected {}, got {}",
            kind_with_article(kind),
            describe(value)
        )));
    }
    match value {
        Value::Object(fields) => check_object(schema, fields, path, nulls),
        Value::Array(items) => {
            if let Some(max) = schema.get("maxItems").and_then(Value::as_u64)
                && items.len() as u64 > max
            {
                return Err(at(format!("at most {max} items, got {}", items.len())));
            }
            if let Some(item_schema) = schema.get("items") {
                for (idx, item) in items.iter_mut().enumerate() {
                    check(item_schema, item, &format!("{path}[{idx}]"), nulls)?;
                }
            }
            Ok(())
        }
        Value::String(text) => {
            let n_chars = text.chars().count() as u64;
            if let Some(min) = schema.get("minLength").and_then(Value::as_u64)
                && n_chars < min
            {
                return Err(at(if min == 1 {
                    "must not be empty".to_owned()
                } else {
                    format!("at least {min} characters, got {n_chars}")
                }));
            }
            if let Some(max) = schema.get("maxLength").and_then(Value::as_u64)
                && n_chars > max
            {
                return Err(at(format!("at most {max} characters, got {n_chars}")));
            }
            Ok(())
        }
        Value::Number(number) => {
            let as_f64 = number.as_f64().unwrap_or(f64::NAN);
            if let Some(min) = schema.get("minimum").and_then(Value::as_f64)
                && as_f64 < min
            {
                return Err(at(format!("at least {min}, got {number}")));
            }
            if let Some(max) = schema.get("maximum").and_then(Value::as_f64)
                && as_f64 > max
            {
                return Err(at(format!("at most {max}, got {number}")));
            }
            Ok(())
        }
        Value::Null | Value::Bool(_) => Ok(()),
    }
}

fn check_object(
    schema: &Value,
    fields: &mut serde_json::Map<String, Value>,
    path: &str,
    nulls: Nulls,
) -> Result<(), ArgumentProblem> {
    let field_path = |name: &str| {
        if path.is_empty() {
            name.to_owned()
        } else {
            format!("{path}.{name}")
        }
    };
    let empty = serde_json::Map::new();
    let properties = schema
        .get("properties")
        .and_then(Value::as_object)
        .unwrap_or(&empty);
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|names| names.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let closed = schema.get("additionalProperties") == Some(&Value::Bool(false));
    // A misspelt name first: it explains a missing required field too.
    if closed && let Some(name) = fields.keys().find(|name| !properties.contains_key(*name)) {
        let mut known: Vec<&str> = properties.keys().map(String::as_str).collect();
        known.sort_unstable();
        return Err(ArgumentProblem {
            field: field_path(name),
            problem: format!("unknown field (expected {})", known.join(", ")),
        });
    }
    for name in &required {
        if fields.get(*name).is_none_or(Value::is_null) {
            return Err(ArgumentProblem {
                field: field_path(name),
                problem: "required".to_owned(),
            });
        }
    }
    for (name, value) in fields.iter_mut() {
        if let Some(property) = properties.get(name)
            && (nulls == Nulls::Typed || !value.is_null())
        {
            check(property, value, &field_path(name), nulls)?;
        }
    }
    Ok(())
}

fn kind_with_article(kind: &str) -> String {
    match kind {
        "object" | "array" | "integer" => format!("an {kind}"),
        _ => format!("a {kind}"),
    }
}

fn describe(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(number) if number.is_i64() || number.is_u64() => "an integer",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}
