//! From the store to the log: the events each store entry becomes.
//!
//! One `pi.assistant` entry becomes an assistant message event (none when the response only
//! calls tools) and one `tool_call` event per call; one `pi.tool-result` becomes a `tool_result` event (a delegate's placeholder result is
//! not: the log keeps the call unanswered until the real result arrives). Every event carries
//! the entry's id in `pi_entry_id`; the events of one entry are appended in one transaction by
//! the caller. When a store is opened, every entry above the highest `pi_entry_id` in the log is
//! projected again, so a crash between the store's commit and the log's write loses nothing and
//! repeats nothing.

use seed_durable::{Entry, EntryBody, EntryId};
use seed_events::{
    EventBody, EventRole, MessageBody, NewEvent, RunId, SessionEvent, ToolCallBody, ToolResultBody,
};
use seed_providers::AssistantBlock;
use serde_json::{Map, json};

/// The log events of one entry: empty for entries the log does not show.
pub fn entry_events(entry: &Entry, run_id: Option<RunId>, created_at_ms: i64) -> Vec<NewEvent> {
    let event = |body: EventBody, role: EventRole, actor: &str, meta| NewEvent {
        meta,
        run_id,
        pi_entry_id: Some(entry.id as i64),
        ..NewEvent::new(body, role, actor, created_at_ms)
    };
    match &entry.body {
        EntryBody::Assistant { message, .. } => {
            let thinking: String = message
                .content
                .iter()
                .filter_map(|block| match block {
                    AssistantBlock::Thinking { thinking, .. } => Some(thinking.as_str()),
                    _ => None,
                })
                .collect();
            // A response that only calls tools says nothing: its calls stand for it (a
            // continuation's predecessor gains just the call and its result).
            let says_something =
                message.text_len() > 0 || !thinking.is_empty() || message.error_message.is_some();
            let content = MessageBody {
                thinking: (!thinking.is_empty()).then_some(thinking),
                ..MessageBody::text(message.text())
            };
            let meta = json!({
                "usage": message.usage,
                "stop_reason": message.stop_reason,
                "model": message.model,
                "error_message": message.error_message,
            });
            let calls = message.tool_calls();
            let mut events = Vec::with_capacity(1 + calls.len());
            if says_something || calls.is_empty() {
                events.push(event(
                    EventBody::Message(content),
                    EventRole::Assistant,
                    "agent",
                    meta,
                ));
            }
            for call in calls {
                let call = ToolCallBody {
                    id: call.id.clone(),
                    name: call.name.clone(),
                    arguments: call.arguments.clone(),
                    rest: Map::new(),
                };
                events.push(event(
                    EventBody::ToolCall(call),
                    EventRole::Assistant,
                    "agent",
                    json!({}),
                ));
            }
            events
        }
        EntryBody::ToolResult {
            message,
            placeholder: false,
            ..
        } => {
            let result = ToolResultBody {
                tool_call_id: message.tool_call_id.clone(),
                tool_name: message.tool_name.clone(),
                content: message.content.clone(),
                is_error: message.is_error,
                attachments: result_attachments(&message.images),
                rest: Map::new(),
            };
            vec![event(
                EventBody::ToolResult(result),
                EventRole::Tool,
                "runtime",
                json!({}),
            )]
        }
        _ => Vec::new(),
    }
}

/// The attachments that keep a result's images, as its event names them; `None` when it kept
/// none.
fn result_attachments(images: &[seed_providers::ResultImage]) -> Option<serde_json::Value> {
    let named: Vec<serde_json::Value> = images
        .iter()
        .filter_map(|image| {
            let id = image.attachment_id.as_ref()?;
            Some(json!({
                "id": id,
                "media_type": image.media_type,
                "size_bytes": crate::attachments::base64_decoded_bytes(&image.data),
            }))
        })
        .collect();
    (!named.is_empty()).then_some(serde_json::Value::Array(named))
}

/// The events of every entry above `max_pi_entry_id` (the highest the log names), in order:
/// what the log lacks of the store. `entries` are in id order, as a store holds them; those
/// above are found by bisection, so a turn of a long session does not walk its whole store.
/// Each entry's events are built once.
pub fn events_above(
    entries: &[Entry],
    max_pi_entry_id: Option<EntryId>,
    run_id: Option<RunId>,
    created_at_ms: i64,
) -> Vec<NewEvent> {
    entries_above(entries, max_pi_entry_id)
        .iter()
        .flat_map(|entry| entry_events(entry, run_id, created_at_ms))
        .collect()
}

/// The entries above `max_pi_entry_id` (the highest the log names) that the log shows: what
/// opening a store projects again. `entries` are in id order.
pub fn unprojected(entries: &[Entry], max_pi_entry_id: Option<EntryId>) -> Vec<&Entry> {
    entries_above(entries, max_pi_entry_id)
        .iter()
        .filter(|entry| !entry_events(entry, None, 0).is_empty())
        .collect()
}

/// The entries with an id above `max_pi_entry_id` (all of them for `None`), `entries` being in
/// id order.
fn entries_above(entries: &[Entry], max_pi_entry_id: Option<EntryId>) -> &[Entry] {
    let start = max_pi_entry_id.map_or(0, |max| entries.partition_point(|entry| entry.id <= max));
    &entries[start..]
}

/// How a session's log disagrees with its store, one line per problem: an entry the log
/// shows that is projected other than exactly once (its events, consecutive, count once), or a
/// `pi_entry_id` naming an entry the store does not hold. Empty when they agree.
pub fn log_store_disagreements(entries: &[Entry], log: &[SessionEvent]) -> Vec<String> {
    let mut groups: std::collections::BTreeMap<i64, usize> = std::collections::BTreeMap::new();
    let mut previous: Option<(i64, i64)> = None;
    for event in log {
        if let Some(entry_id) = event.pi_entry_id {
            if previous.is_none_or(|(id, seq)| id != entry_id || seq + 1 != event.seq) {
                *groups.entry(entry_id).or_default() += 1;
            }
            previous = Some((entry_id, event.seq));
        }
    }
    let mut problems = Vec::new();
    for entry in unprojected(entries, None) {
        let n = groups.get(&(entry.id as i64)).copied().unwrap_or(0);
        if n != 1 {
            problems.push(format!("entry {} is in the log {n} times", entry.id));
        }
    }
    let held: std::collections::BTreeSet<i64> =
        entries.iter().map(|entry| entry.id as i64).collect();
    for entry_id in groups.keys().filter(|id| !held.contains(id)) {
        problems.push(format!(
            "the log names entry {entry_id}, which the store lacks"
        ));
    }
    problems
}

/// When the log names entry ids the store does not hold (the store was lost, or restored from
/// an older copy than the log), the marks above the store's newest entry must be cleared before
/// anything new is written, so those events import like anything else the store has not seen
/// and no new entry is mistaken for one the log already holds. Returns the id above which
/// marks are stale, if any are.
pub fn stale_marks_above(
    store_last_entry_id: Option<EntryId>,
    log_max_pi_entry_id: Option<EntryId>,
) -> Option<EntryId> {
    let held = store_last_entry_id.unwrap_or(0);
    log_max_pi_entry_id.filter(|max| *max > held).map(|_| held)
}

#[cfg(test)]
mod tests {
    use super::*;
    use seed_providers::{ToolCall, ToolResultMessage, tool_response};

    #[test]
    fn disagreements_name_entries_projected_other_than_once_and_marks_without_entries() {
        let answer = |id| Entry {
            id,
            body: EntryBody::Assistant {
                request_id: "r".to_owned(),
                message: seed_providers::text_response("hi"),
            },
        };
        let entries = [answer(1), answer(2)];
        let log_of = |marks: &[i64]| -> Vec<SessionEvent> {
            marks
                .iter()
                .enumerate()
                .map(|(idx, mark)| SessionEvent {
                    id: seed_events::EventId(idx as i64 + 1),
                    session_id: seed_events::SessionId::from_u128(1),
                    seq: idx as i64 + 1,
                    kind: "message".to_owned(),
                    role: Some(EventRole::Assistant),
                    actor: Some("agent".to_owned()),
                    content: json!({"text": "hi"}),
                    meta: json!({}),
                    run_id: None,
                    pi_entry_id: Some(*mark),
                    created_at_ms: 0,
                })
                .collect()
        };
        assert_eq!(
            log_store_disagreements(&entries, &log_of(&[1, 2])),
            Vec::<String>::new()
        );
        assert_eq!(
            log_store_disagreements(&entries, &log_of(&[1, 2, 1, 9])),
            [
                "entry 1 is in the log 2 times",
                "the log names entry 9, which the store lacks"
            ]
        );
        assert_eq!(
            log_store_disagreements(&entries, &log_of(&[2])),
            ["entry 1 is in the log 0 times"]
        );
    }

    #[test]
    fn an_assistant_entry_becomes_a_message_and_one_event_per_call() {
        let entry = Entry {
            id: 4,
            body: EntryBody::Assistant {
                request_id: "r".to_owned(),
                message: tool_response(
                    "let me look",
                    vec![
                        ToolCall {
                            id: "c1".to_owned(),
                            name: "read".to_owned(),
                            arguments: json!({"path": "~/memory/a.md"}),
                        },
                        ToolCall {
                            id: "c2".to_owned(),
                            name: "plan".to_owned(),
                            arguments: json!({}),
                        },
                    ],
                ),
            },
        };
        let events = entry_events(&entry, None, 9);
        let kinds: Vec<(&str, Option<i64>)> = events
            .iter()
            .map(|event| (event.kind.as_str(), event.pi_entry_id))
            .collect();
        assert_eq!(
            kinds,
            [
                ("message", Some(4)),
                ("tool_call", Some(4)),
                ("tool_call", Some(4))
            ]
        );
        assert_eq!(events[0].content, json!({"text": "let me look"}));
        assert_eq!(events[1].content["name"], "read");
        assert_eq!(events[2].content["id"], "c2");
    }

    /// The content each kind is stored with, field for field.
    #[test]
    fn each_event_is_stored_with_its_kinds_content() {
        let mut message = tool_response(
            "let me look",
            vec![ToolCall {
                id: "c1".to_owned(),
                name: "read".to_owned(),
                arguments: json!({"path": "~/memory/a.md"}),
            }],
        );
        message.content.insert(
            0,
            AssistantBlock::Thinking {
                thinking: "first, read".to_owned(),
                signature: None,
            },
        );
        let answer = Entry {
            id: 4,
            body: EntryBody::Assistant {
                request_id: "r".to_owned(),
                message,
            },
        };
        let result = Entry {
            id: 5,
            body: EntryBody::ToolResult {
                request_id: "r".to_owned(),
                message: ToolResultMessage {
                    tool_call_id: "c1".to_owned(),
                    tool_name: "read".to_owned(),
                    content: "a".to_owned(),
                    is_error: true,
                    images: Vec::new(),
                },
                ends_turn: false,
                placeholder: false,
            },
        };
        let stored: Vec<(String, serde_json::Value)> = [answer, result]
            .iter()
            .flat_map(|entry| entry_events(entry, None, 0))
            .map(|event| (event.kind, event.content))
            .collect();
        assert_eq!(
            stored,
            [
                (
                    "message".to_owned(),
                    json!({"text": "let me look", "thinking": "first, read"})
                ),
                (
                    "tool_call".to_owned(),
                    json!({"id": "c1", "name": "read", "arguments": {"path": "~/memory/a.md"}})
                ),
                (
                    "tool_result".to_owned(),
                    json!({"tool_call_id": "c1", "tool_name": "read", "content": "a", "is_error": true})
                ),
            ]
        );
    }

    #[test]
    fn a_response_that_only_calls_tools_becomes_its_calls_alone() {
        let entry = |message| Entry {
            id: 6,
            body: EntryBody::Assistant {
                request_id: "r".to_owned(),
                message,
            },
        };
        let continue_call = ToolCall {
            id: "c1".to_owned(),
            name: "continue_session".to_owned(),
            arguments: json!({}),
        };
        let kinds = |message| -> Vec<String> {
            entry_events(&entry(message), None, 0)
                .into_iter()
                .map(|event| event.kind)
                .collect()
        };
        assert_eq!(
            kinds(tool_response("", vec![continue_call.clone()])),
            ["tool_call"]
        );
        // Thinking is something said; so is an empty answer (no calls).
        let mut thought = tool_response("", vec![continue_call]);
        thought.content.insert(
            0,
            AssistantBlock::Thinking {
                thinking: "first, continue".to_owned(),
                signature: None,
            },
        );
        assert_eq!(kinds(thought), ["message", "tool_call"]);
        assert_eq!(kinds(seed_providers::text_response("")), ["message"]);
    }

    #[test]
    fn results_become_events_but_placeholders_and_inputs_do_not() {
        let result = |placeholder| Entry {
            id: 5,
            body: EntryBody::ToolResult {
                request_id: "r".to_owned(),
                message: ToolResultMessage {
                    tool_call_id: "c1".to_owned(),
                    tool_name: "delegate".to_owned(),
                    content: "the child is still running".to_owned(),
                    is_error: false,
                    images: Vec::new(),
                },
                ends_turn: true,
                placeholder,
            },
        };
        assert_eq!(entry_events(&result(false), None, 0).len(), 1);
        assert!(entry_events(&result(true), None, 0).is_empty());
        let input = Entry {
            id: 1,
            body: EntryBody::Reset {},
        };
        assert!(entry_events(&input, None, 0).is_empty());
        let entries = [input, result(false)];
        assert_eq!(unprojected(&entries, None).len(), 1);
        assert!(unprojected(&entries, Some(5)).is_empty());
        // The events above a mark are those of the entries above it that show.
        assert_eq!(
            events_above(&entries, None, None, 0),
            entry_events(&result(false), None, 0)
        );
        assert_eq!(
            events_above(&entries, Some(1), None, 0),
            entry_events(&result(false), None, 0)
        );
        assert!(events_above(&entries, Some(5), None, 0).is_empty());
        // A mark between two ids, below the first or past the last.
        for (mark, n_events) in [(0, 1), (4, 1), (9, 0)] {
            assert_eq!(events_above(&entries, Some(mark), None, 0).len(), n_events);
            assert_eq!(unprojected(&entries, Some(mark)).len(), n_events);
        }
    }

    #[test]
    fn marks_above_the_store_are_stale() {
        assert_eq!(stale_marks_above(Some(10), Some(10)), None);
        assert_eq!(stale_marks_above(Some(10), Some(14)), Some(10));
        assert_eq!(stale_marks_above(None, Some(3)), Some(0), "a lost store");
        assert_eq!(stale_marks_above(Some(3), None), None);
    }
}
