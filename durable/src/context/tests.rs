//! The context's rules, each shown on entries: resets, edits, responses that did not complete,
//! tool results placed behind their calls, and the cache that shares messages between requests.

use super::*;
use seed_providers::{AssistantMessage, StopReason, ToolCall, text_response, tool_response};

fn call(id: &str) -> ToolCall {
    ToolCall {
        id: id.to_owned(),
        name: "read".to_owned(),
        arguments: serde_json::json!({}),
    }
}

fn result(id: &str, text: &str) -> ToolResultMessage {
    ToolResultMessage {
        tool_call_id: id.to_owned(),
        tool_name: "read".to_owned(),
        content: text.to_owned(),
        is_error: false,
        images: Vec::new(),
    }
}

fn entries(bodies: Vec<EntryBody>) -> Vec<Entry> {
    bodies
        .into_iter()
        .enumerate()
        .map(|(idx, body)| Entry {
            id: idx as u64 + 1,
            body,
        })
        .collect()
}

fn user(text: &str) -> EntryBody {
    EntryBody::User {
        request_id: "r".to_owned(),
        message: UserMessage::new(text.to_owned()),
    }
}

fn assistant(message: AssistantMessage) -> EntryBody {
    EntryBody::Assistant {
        request_id: "r".to_owned(),
        message,
    }
}

fn tool_result(message: ToolResultMessage) -> EntryBody {
    EntryBody::ToolResult {
        request_id: "r".to_owned(),
        message,
        ends_turn: false,
        placeholder: false,
    }
}

fn summary(context: &[ContextMessage]) -> Vec<String> {
    context
        .iter()
        .map(|item| match item.message.as_ref() {
            Message::User(m) => format!("{}:user {}", item.entry_id, m.text),
            Message::Assistant(m) => format!("{}:assistant {}", item.entry_id, m.text()),
            Message::ToolResult(m) => {
                format!("{}:result {} {}", item.entry_id, m.tool_call_id, m.content)
            }
        })
        .collect()
}

/// The placing of results as it was before the in-order shortcut: every result indexed by
/// call id up front. The shortcut must place exactly the same.
fn conversation_reference(entries: &[Entry]) -> Vec<ContextMessage> {
    let start = entries
        .iter()
        .rposition(|entry| matches!(entry.body, EntryBody::Reset {}))
        .map_or(0, |reset_idx| reset_idx + 1);
    let window = &entries[start..];
    let mut edits: BTreeMap<EntryId, EntryId> = BTreeMap::new();
    for entry in window {
        if let EntryBody::Edit { target, .. } = &entry.body {
            edits.insert(*target, entry.id);
        }
    }
    let contributions: Vec<(EntryId, Arc<Message>)> = window
        .iter()
        .filter(|entry| !matches!(entry.body, EntryBody::Edit { .. }))
        .filter_map(|entry| {
            let source = edits
                .get(&entry.id)
                .and_then(|edit_id| window.iter().find(|e| e.id == *edit_id))
                .unwrap_or(entry);
            Some((entry.id, Arc::new(own_message(source)?)))
        })
        .collect();
    let mut results: BTreeMap<&str, VecDeque<(EntryId, &Arc<Message>)>> = BTreeMap::new();
    for (entry_id, message) in &contributions {
        if let Message::ToolResult(result) = message.as_ref() {
            results
                .entry(result.tool_call_id.as_str())
                .or_default()
                .push_back((*entry_id, message));
        }
    }
    let mut context = Vec::new();
    for (entry_id, message) in &contributions {
        match message.as_ref() {
            Message::ToolResult(_) => {}
            Message::User(_) => context.push(ContextMessage {
                entry_id: *entry_id,
                message: Arc::clone(message),
            }),
            Message::Assistant(assistant) => {
                if !assistant.is_complete() {
                    continue;
                }
                context.push(ContextMessage {
                    entry_id: *entry_id,
                    message: Arc::clone(message),
                });
                for call in assistant.tool_calls() {
                    let mut result = None;
                    if let Some(queue) = results.get_mut(call.id.as_str()) {
                        while queue.front().is_some_and(|(id, _)| id < entry_id) {
                            queue.pop_front();
                        }
                        result = queue.pop_front();
                    }
                    context.push(match result {
                        Some((result_entry_id, result)) => ContextMessage {
                            entry_id: result_entry_id,
                            message: Arc::clone(result),
                        },
                        None => missing_result(*entry_id, call),
                    });
                }
            }
        }
    }
    context
}

/// Entries drawn from a small set of call ids, so ids repeat, results stray, come out of
/// order or go missing, responses stop short, edits replace and resets cut.
fn arbitrary_entries() -> impl proptest::strategy::Strategy<Value = Vec<Entry>> {
    use proptest::prelude::*;
    let id = || proptest::sample::select(vec!["a", "b", "c"]);
    let body = prop_oneof![
        3 => Just(user("u")),
        4 => (proptest::collection::vec(id(), 0..=3), any::<bool>()).prop_map(
            |(ids, complete)| {
                let mut message = tool_response("", ids.into_iter().map(call).collect());
                if !complete {
                    message.stop_reason = StopReason::Aborted;
                }
                assistant(message)
            }
        ),
        6 => (id(), 0..3u8)
            .prop_map(|(id, n)| tool_result(result(id, &format!("{id}{n}")))),
        1 => (1..30u64, id()).prop_map(|(target, id)| EntryBody::Edit {
            target,
            message: Message::ToolResult(result(id, "edited")),
        }),
        1 => Just(EntryBody::Reset {}),
    ];
    proptest::collection::vec(body, 0..30).prop_map(entries)
}

proptest::proptest! {
    #[test]
    fn the_in_order_shortcut_places_results_as_the_full_index_does(
        log in arbitrary_entries()
    ) {
        let ids = |context: &[ContextMessage]| {
            context.iter().map(|item| item.entry_id).collect::<Vec<_>>()
        };
        // Through one cache, as a harness asks again with more entries: after each one,
        // and after each few (more than one new entry, and the same entries twice).
        let mut cache = MessageCache::default();
        let mut every_few = MessageCache::default();
        for n_entries in 0..=log.len() {
            let reference = conversation_reference(&log[..n_entries]);
            let context = conversation_cached(&log[..n_entries], &mut cache);
            proptest::prop_assert_eq!(summary(&context), summary(&reference));
            proptest::prop_assert_eq!(ids(&context), ids(&reference));
            if n_entries % 3 == 0 {
                for _ in 0..2 {
                    let context = conversation_cached(&log[..n_entries], &mut every_few);
                    proptest::prop_assert_eq!(summary(&context), summary(&reference));
                }
            }
        }

        // Ids in reverse (which a store never writes) lose no entry: the cache reaches
        // down to them. (Which result a call takes then follows the entries' order, where
        // the full placing went by id; and edits find their target by position, so the
        // edits are left out here.)
        let mut shuffled: Vec<Entry> = log
            .iter()
            .filter(|entry| !matches!(entry.body, EntryBody::Edit { .. }))
            .cloned()
            .collect();
        let n = shuffled.len() as u64;
        for (idx, entry) in shuffled.iter_mut().enumerate() {
            entry.id = n - idx as u64;
        }
        let users = |context: &[ContextMessage]| {
            context
                .iter()
                .filter(|item| matches!(item.message.as_ref(), Message::User(_)))
                .map(|item| item.entry_id)
                .collect::<Vec<_>>()
        };
        let context = conversation_cached(&shuffled, &mut MessageCache::default());
        proptest::prop_assert_eq!(
            users(&context),
            users(&conversation_reference(&shuffled))
        );
        proptest::prop_assert!(!has_orphans(context.iter().map(|item| &item.message)));
    }
}

#[test]
fn results_follow_their_calls_and_orphans_are_mended() {
    let log = entries(vec![
        user("before reset"),
        EntryBody::Reset {},
        user("go"),
        // A result recorded before its call's neighbours: it moves behind its call.
        assistant(tool_response("", vec![call("a"), call("b")])),
        tool_result(result("b", "B")),
        tool_result(result("a", "A")),
        tool_result(result("stray", "no call")),
        // A call that never got a result.
        assistant(tool_response("", vec![call("c")])),
        user("next"),
    ]);
    let context = conversation(&log);
    assert_eq!(
        summary(&context),
        [
            "3:user go",
            "4:assistant ",
            "6:result a A",
            "5:result b B",
            "8:assistant ",
            "8:result c no result was recorded for this call",
            "9:user next",
        ]
    );
    assert!(!has_orphans(context.iter().map(|item| &item.message)));
}

#[test]
fn a_call_id_used_again_by_a_later_response_gets_its_own_result() {
    let log = entries(vec![
        user("one"),
        assistant(tool_response("", vec![call("x")])),
        tool_result(result("x", "first")),
        assistant(text_response("ok")),
        user("two"),
        assistant(tool_response("", vec![call("x")])),
        tool_result(result("x", "second")),
    ]);
    let context = conversation(&log);
    assert_eq!(
        summary(&context),
        [
            "1:user one",
            "2:assistant ",
            "3:result x first",
            "4:assistant ok",
            "5:user two",
            "6:assistant ",
            "7:result x second",
        ]
    );
    assert!(!has_orphans(context.iter().map(|item| &item.message)));
}

#[test]
fn edits_replace_a_contribution_and_incomplete_responses_stay_out() {
    let mut stopped = text_response("half an ans");
    stopped.stop_reason = StopReason::Aborted;
    let log = entries(vec![
        user("delegate it"),
        assistant(tool_response("", vec![call("d")])),
        tool_result(result("d", "child still running")),
        assistant(stopped),
        EntryBody::Edit {
            target: 3,
            message: Message::ToolResult(result("d", "child says 42")),
        },
        assistant(text_response("it is 42")),
    ]);
    assert_eq!(
        summary(&conversation(&log)),
        [
            "1:user delegate it",
            "2:assistant ",
            "3:result d child says 42",
            "6:assistant it is 42",
        ]
    );
}

#[test]
fn blocks_sit_right_behind_the_input() {
    let log = entries(vec![
        user("earlier"),
        assistant(text_response("ok")),
        user("now"),
        assistant(tool_response("", vec![call("x")])),
        tool_result(result("x", "X")),
    ]);
    let blocks = [UserMessage::new(
        "<current_time>noon</current_time>".to_owned(),
    )];
    let messages = request_messages(conversation(&log), 3, &block_messages(&blocks));
    let roles: Vec<String> = messages
        .iter()
        .map(|message| match message.as_ref() {
            Message::User(m) => m.text.clone(),
            Message::Assistant(m) => format!("assistant {}", m.text()),
            Message::ToolResult(m) => format!("result {}", m.content),
        })
        .collect();
    assert_eq!(
        roles,
        [
            "earlier",
            "assistant ok",
            "now",
            "<current_time>noon</current_time>",
            "assistant ",
            "result X"
        ]
    );
}
