//! The continue_session arguments normalized and checked ([`normalize_input`], [`parse_input`]),
//! naming the field that is wrong; see the module above for what each field takes.

use seed_events::limits::{SESSION_DESCRIPTION_CHARS_MAX, SESSION_TITLE_CHARS_MAX};
use seed_events::{ContinueSessionInput, Handoff, PlanTransfer, SeqRange, SessionId, Source};
use serde_json::{Map, Value};

use super::{HANDOFF_BYTES_MAX, REASON_CHARS_MAX, SOURCE_BYTES_MAX, SOURCES_MAX};

/// The keys hoisted out of `handoff` when the top level lacks them.
const HOISTED: [&str; 3] = ["sources", "transfer", "description"];

/// Hoists `sources`, `transfer` and `description` nested inside `handoff` to the top level:
/// a key given only inside the handoff moves up; one given at both levels takes the top
/// level's value (the nested copy is dropped). Anything else is left as it is.
pub fn normalize_input(mut arguments: Value) -> Value {
    let Some(fields) = arguments.as_object_mut() else {
        return arguments;
    };
    for key in HOISTED {
        let nested = match fields.get_mut("handoff") {
            Some(Value::Object(handoff)) => handoff.remove(key),
            _ => None,
        };
        if let Some(value) = nested
            && fields.get(key).is_none_or(Value::is_null)
        {
            fields.insert(key.to_owned(), value);
        }
    }
    arguments
}

/// Checks normalized arguments and turns them into a [`ContinueSessionInput`]; `this_thread` is
/// what a thread source that names no thread cites. The error names the field:
/// `title: required`, `sources[2].fromSeq: expected an integer of at least 1`.
pub fn parse_input(
    arguments: &Value,
    this_thread: SessionId,
) -> Result<ContinueSessionInput, String> {
    let Some(fields) = arguments.as_object() else {
        return Err("arguments: expected an object".to_owned());
    };
    let reason = required_text(fields, "reason", REASON_CHARS_MAX)?;
    let title = required_text(fields, "title", SESSION_TITLE_CHARS_MAX)?;
    let description = required_text(fields, "description", SESSION_DESCRIPTION_CHARS_MAX)?;
    let handoff = parse_handoff(fields.get("handoff"))?;
    let sources = match fields.get("sources") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(items)) => {
            if items.len() > SOURCES_MAX {
                return Err(format!(
                    "sources: at most {SOURCES_MAX} sources, got {}",
                    items.len()
                ));
            }
            items
                .iter()
                .enumerate()
                .map(|(idx, item)| parse_source(item, this_thread, &format!("sources[{idx}]")))
                .collect::<Result<_, _>>()?
        }
        Some(_) => return Err("sources: expected a list".to_owned()),
    };
    let plan = match fields.get("transfer") {
        None | Some(Value::Null) => None,
        Some(Value::Object(transfer)) => match transfer.get("plan") {
            None | Some(Value::Null) => None,
            Some(Value::String(plan)) => Some(match plan.as_str() {
                "carry" => PlanTransfer::Carry,
                "close" => PlanTransfer::Close,
                "omit" => PlanTransfer::Omit,
                other => {
                    return Err(format!(
                        "transfer.plan: expected one of carry, close, omit, got {other:?}"
                    ));
                }
            }),
            Some(_) => return Err("transfer.plan: expected one of carry, close, omit".to_owned()),
        },
        Some(_) => return Err("transfer: expected an object like {\"plan\": \"carry\"}".to_owned()),
    };
    Ok(ContinueSessionInput {
        reason,
        title,
        description,
        handoff,
        sources,
        plan,
    })
}

fn required_text(
    fields: &Map<String, Value>,
    name: &str,
    chars_max: usize,
) -> Result<String, String> {
    match fields.get(name) {
        None | Some(Value::Null) => Err(format!("{name}: required")),
        Some(Value::String(text)) => {
            let text = text.trim();
            if text.is_empty() {
                return Err(format!("{name}: must not be empty"));
            }
            let n_chars = text.chars().count();
            if n_chars > chars_max {
                return Err(format!(
                    "{name}: at most {chars_max} characters, got {n_chars}"
                ));
            }
            Ok(text.to_owned())
        }
        Some(_) => Err(format!("{name}: expected a string")),
    }
}

/// A section's value: a string (one paragraph) or a list of strings; empty ones dropped.
/// A value as the texts of a handoff section, however a model shaped it: a string as it is; a
/// number or a boolean as written; an object as one `key: value` text per field, in the order
/// of the keys; a list as a text per item (an object item as its fields `key: value`, joined by `; `). A value inside an
/// object that is not a string is its compact JSON. Texts are trimmed; empty ones dropped.
/// The web UI renders a call's handoff by the same rule (`server/ui/logic.js`), checked against
/// the same cases (`projections/tests/handoff_normalization.json`).
pub fn section_texts(value: &Value) -> Vec<String> {
    let field_text = |(key, value): (&String, &Value)| match value {
        Value::String(text) => format!("{key}: {text}"),
        other => format!("{key}: {other}"),
    };
    let texts = match value {
        Value::Null => Vec::new(),
        Value::String(text) => vec![text.clone()],
        Value::Number(_) | Value::Bool(_) => vec![value.to_string()],
        Value::Object(fields) => fields.iter().map(field_text).collect(),
        Value::Array(items) => items
            .iter()
            .map(|item| match item {
                Value::String(text) => text.clone(),
                Value::Object(fields) => {
                    fields.iter().map(field_text).collect::<Vec<_>>().join("; ")
                }
                other => other.to_string(),
            })
            .collect(),
    };
    texts
        .into_iter()
        .map(|text| text.trim().to_owned())
        .filter(|text| !text.is_empty())
        .collect()
}

fn parse_handoff(value: Option<&Value>) -> Result<Handoff, String> {
    let fields = match value {
        None | Some(Value::Null) => return Err("handoff: required".to_owned()),
        Some(Value::Object(fields)) => fields,
        Some(_) => return Err("handoff: expected an object of sections".to_owned()),
    };
    let mut handoff = Handoff::default();
    for (key, value) in fields {
        if key.trim().is_empty() {
            return Err("handoff: a section has an empty name".to_owned());
        }
        // A model that already nests its extra sections under `extra` keeps them.
        if let ("extra", Value::Object(extra)) = (key.as_str(), value) {
            for (extra_key, extra_value) in extra {
                let texts = section_texts(extra_value);
                if !texts.is_empty() {
                    handoff
                        .extra
                        .entry(extra_key.clone())
                        .or_default()
                        .extend(texts);
                }
            }
            continue;
        }
        let texts = section_texts(value);
        match handoff.section_mut(key) {
            Some(section) => section.extend(texts),
            None if !texts.is_empty() => {
                handoff.extra.entry(key.clone()).or_default().extend(texts);
            }
            None => {}
        }
    }
    if handoff.is_empty() {
        return Err(
            "handoff: empty; write at least the purpose and the current request".to_owned(),
        );
    }
    let n_bytes: usize = handoff
        .sections()
        .iter()
        .flat_map(|(_, _, texts)| texts.iter())
        .chain(handoff.extra.values().flatten())
        .map(String::len)
        .sum();
    if n_bytes > HANDOFF_BYTES_MAX {
        return Err(format!(
            "handoff: at most {HANDOFF_BYTES_MAX} bytes of text, got {n_bytes}"
        ));
    }
    Ok(handoff)
}

const RESOURCE_SCHEMES: [&str; 4] = ["hm://", "ipfs://", "http://", "https://"];
const MEMORY_PREFIX: &str = "~/memory/";

fn parse_source(value: &Value, this_thread: SessionId, path: &str) -> Result<Source, String> {
    let fields = match value {
        // A bare address or memory path.
        Value::String(text) => {
            return if text.starts_with(MEMORY_PREFIX) {
                memory_source(text, path)
            } else {
                resource_source(text, path)
            };
        }
        Value::Object(fields) => fields,
        _ => return Err(format!("{path}: expected an object with a type")),
    };
    let kind = match fields.get("type").or_else(|| fields.get("kind")) {
        Some(Value::String(kind)) => kind.as_str(),
        _ => {
            return Err(format!(
                "{path}.type: required (resource, memory, session_events or session_event)"
            ));
        }
    };
    let text_field = |names: &[&str]| {
        names
            .iter()
            .find_map(|name| fields.get(*name).and_then(Value::as_str))
            .ok_or_else(|| format!("{path}.{}: required", names[0]))
    };
    match kind {
        "resource" => resource_source(text_field(&["uri", "url", "address"])?, path),
        "memory" => memory_source(text_field(&["path"])?, path),
        "session_events" | "session_event" => {
            let thread = match fields.get("thread").or_else(|| fields.get("session_id")) {
                None | Some(Value::Null) => this_thread,
                Some(Value::String(thread)) => {
                    let id = thread.strip_prefix("thread:").unwrap_or(thread).trim();
                    id.parse().map_err(|_| {
                        format!("{path}.thread: {thread:?} is not a thread id; expected thread:<session id>")
                    })?
                }
                Some(_) => return Err(format!("{path}.thread: expected thread:<session id>")),
            };
            let seq = |names: &[&str]| -> Result<i64, String> {
                let value = names.iter().find_map(|name| fields.get(*name));
                match value.and_then(Value::as_i64) {
                    Some(seq) if seq >= 1 => Ok(seq),
                    _ if value.is_none() => Err(format!("{path}.{}: required", names[0])),
                    _ => Err(format!(
                        "{path}.{}: expected an integer of at least 1",
                        names[0]
                    )),
                }
            };
            if kind == "session_event" {
                return Ok(Source::SessionEvent {
                    thread,
                    seq: seq(&["seq"])?,
                });
            }
            let from_seq = seq(&["fromSeq", "from_seq"])?;
            let to_seq = seq(&["toSeq", "to_seq"])?;
            if to_seq < from_seq {
                return Err(format!(
                    "{path}.toSeq: {to_seq} is before fromSeq {from_seq}"
                ));
            }
            Ok(Source::SessionEvents {
                thread,
                from_seq,
                to_seq,
            })
        }
        other => Err(format!(
            "{path}.type: expected resource, memory, session_events or session_event, got {other:?}"
        )),
    }
}

fn resource_source(uri: &str, path: &str) -> Result<Source, String> {
    let uri = uri.trim();
    let Some(scheme) = RESOURCE_SCHEMES
        .iter()
        .find(|scheme| uri.starts_with(**scheme))
    else {
        return Err(format!(
            "{path}: {uri:?} is not a resource address (hm://, ipfs://, http:// or https://) nor a ~/memory/ path"
        ));
    };
    if uri.len() == scheme.len()
        || uri.len() > SOURCE_BYTES_MAX
        || uri.chars().any(char::is_whitespace)
    {
        return Err(format!("{path}: {uri:?} is not a valid {scheme} address"));
    }
    Ok(Source::Resource {
        uri: uri.to_owned(),
    })
}

fn memory_source(memory_path: &str, path: &str) -> Result<Source, String> {
    let memory_path = memory_path.trim();
    if !memory_path.starts_with(MEMORY_PREFIX)
        || memory_path.len() == MEMORY_PREFIX.len()
        || memory_path.len() > SOURCE_BYTES_MAX
    {
        return Err(format!("{path}: {memory_path:?} is not a ~/memory/ path"));
    }
    Ok(Source::Memory {
        path: memory_path.to_owned(),
    })
}

/// Where a range a source cites stands against its thread's newest seq: `Err` says why it is
/// refused.
pub fn check_range(range: &SeqRange, last_seq: i64) -> Result<(), String> {
    if range.from_seq > last_seq {
        return Err(format!(
            "thread:{} has no seq {} (its last seq is {last_seq})",
            range.thread, range.from_seq
        ));
    }
    if range.to_seq > last_seq {
        return Err(format!(
            "thread:{} ends at seq {last_seq}, before toSeq {}",
            range.thread, range.to_seq
        ));
    }
    Ok(())
}
