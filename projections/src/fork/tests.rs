//! The fork point's rule from a table, the copies, and that a fork's first turn is put exactly
//! the predecessor's conversation up to the point.

use std::collections::BTreeSet;

use seed_durable::{EntryBody, StoreState};
use seed_events::{EventId, EventRole, SessionEvent, SessionId};
use seed_providers::{AssistantBlock, Message};
use serde_json::{Value, json};

use super::*;
use crate::import::{ImportMode, NO_FILES, RunView, SyncDocument, plan_import};

fn predecessor() -> SessionId {
    SessionId::from_u128(7)
}

fn event(seq: i64, kind: &str, role: EventRole, actor: &str, content: Value) -> SessionEvent {
    SessionEvent {
        id: EventId(100 + seq),
        session_id: predecessor(),
        seq,
        kind: kind.to_owned(),
        role: Some(role),
        actor: Some(actor.to_owned()),
        content,
        meta: json!({}),
        run_id: None,
        pi_entry_id: (role != EventRole::User).then_some(seq),
        created_at_ms: seq,
    }
}

/// A predecessor's log: an exchange, a tool call answered, a notice, a message with a file
/// (copied from an earlier session), and a delegated call still waiting for its result.
fn log() -> Vec<SessionEvent> {
    let text = |text: &str| json!({ "text": text });
    let mut with_file = event(
        8,
        "message",
        EventRole::User,
        "user",
        json!({
            "text": "and this file",
            "attachments": [{ "id": "att-1", "name": "a.txt", "media_type": "text/plain",
                              "size_bytes": 3 }],
        }),
    );
    with_file.meta = json!({
        "continued_from": { "session_id": predecessor(), "event_id": 1, "seq": 1 },
        "kept": true,
    });
    vec![
        event(1, "message", EventRole::User, "user", text("hello")),
        event(2, "message", EventRole::Assistant, "agent", text("hi")),
        event(3, "message", EventRole::User, "user", text("read it")),
        event(
            4,
            "tool_call",
            EventRole::Assistant,
            "agent",
            json!({ "id": "c1", "name": "read", "arguments": { "path": "x" } }),
        ),
        event(
            5,
            "tool_result",
            EventRole::Tool,
            "runtime",
            json!({ "tool_call_id": "c1", "tool_name": "read", "content": "x holds 3",
                    "is_error": false }),
        ),
        event(
            6,
            "message",
            EventRole::Assistant,
            "agent",
            text("x holds 3"),
        ),
        event(
            7,
            "notice",
            EventRole::System,
            "system",
            text("a plan step"),
        ),
        with_file,
        event(
            9,
            "tool_call",
            EventRole::Assistant,
            "agent",
            json!({ "id": "c2", "name": "delegate", "arguments": {} }),
        ),
        event(10, "message", EventRole::User, "user", text("still there?")),
    ]
}

#[test]
fn a_fork_point_is_a_whole_conversations_end() {
    let log = log();
    let last_seq = log.len() as i64;
    let outcome = |seq: i64| -> String {
        match check_fork_point(&log, seq, last_seq) {
            Ok(at) => format!(
                "ok: the {} message at seq {}",
                at.role.map_or("?", |r| r.as_str()),
                at.seq
            ),
            Err(error) => error.to_string(),
        }
    };
    let table: Vec<String> = (0..=11)
        .map(|seq| format!("{seq}: {}", outcome(seq)))
        .collect();
    assert_eq!(
        table,
        [
            "0: seq 0 is not in the session, whose log has 10 events",
            "1: ok: the user message at seq 1",
            "2: ok: the assistant message at seq 2",
            "3: ok: the user message at seq 3",
            "4: seq 4 is a tool_call event (assistant), not a message a person or the agent wrote; give the seq of a user or assistant message",
            "5: seq 5 is a tool_result event (tool), not a message a person or the agent wrote; give the seq of a user or assistant message",
            "6: ok: the assistant message at seq 6",
            "7: seq 7 is a notice event (system), not a message a person or the agent wrote; give the seq of a user or assistant message",
            "8: ok: the user message at seq 8",
            "9: seq 9 is a tool_call event (assistant), not a message a person or the agent wrote; give the seq of a user or assistant message",
            "10: seq 10 cuts into a tool call: the call at seq 9 has no result at or before it; give the seq of a message after its result",
            "11: seq 11 is not in the session, whose log has 10 events",
        ]
    );
}

#[test]
fn a_fork_past_the_most_events_it_copies_is_refused() {
    let seq = FORK_EVENTS_MAX as i64 + 1;
    assert_eq!(
        check_fork_point(&[], seq, seq),
        Err(ForkPointError::TooLong { seq })
    );
}

#[test]
fn the_copies_are_the_predecessors_events_up_to_the_point_without_store_marks() {
    let log = log();
    let copies = fork_events(&log, 8, 99);
    assert_eq!(copies.len(), 8);
    for (copy, original) in copies.iter().zip(&log) {
        assert_eq!(copy.kind, original.kind);
        assert_eq!(copy.role, original.role);
        assert_eq!(copy.actor, original.actor);
        assert_eq!(copy.content, original.content);
        assert_eq!(copy.pi_entry_id, None, "seq {}", original.seq);
        assert_eq!(copy.run_id, None);
        assert_eq!(copy.created_at_ms, 99);
    }
    // The copy of a successor's copied message is not taken for one (the boot sweep queues a
    // run for those); the rest of its meta stays.
    assert_eq!(copies[7].meta, json!({ "kept": true }));
    assert_eq!(fork_attachment_ids(&copies), vec!["att-1".to_owned()]);
    assert!(fork_attachment_ids(&copies[..7]).is_empty());
}

#[test]
fn a_forks_manifest_names_its_point_and_loads_nothing() {
    let log = log();
    let manifest = fork_manifest(ForkManifestInput {
        predecessor_session_id: predecessor(),
        origin_session_id: predecessor(),
        at: &log[5],
        predecessor_last_seq: 10,
        title: "Branch",
        description: "",
    });
    assert_eq!(
        manifest.fork,
        Some(ForkPoint {
            seq: 6,
            event_id: EventId(106)
        })
    );
    assert_eq!(manifest.initiating_event.seq, 6);
    assert_eq!(manifest.reason, "branched from seq 6");
    assert!(manifest.excerpts.is_empty() && manifest.omitted.is_empty());
    assert_eq!(manifest.recent_exchanges, None);
    let decoded = SessionContinuationManifest::from_cbor(&manifest.to_cbor()).expect("decodes");
    assert_eq!(decoded, manifest);
}

/// The fork's log as its store would read it (seqs 1.., new ids), with `message` after it.
fn fork_log(copies: &[NewEvent], message: &str) -> Vec<SessionEvent> {
    let fork = SessionId::from_u128(8);
    let mut events: Vec<SessionEvent> = copies
        .iter()
        .zip(1..)
        .map(|(copy, seq)| SessionEvent {
            id: EventId(1000 + seq),
            session_id: fork,
            seq,
            kind: copy.kind.clone(),
            role: copy.role,
            actor: copy.actor.clone(),
            content: copy.content.clone(),
            meta: copy.meta.clone(),
            run_id: None,
            pi_entry_id: copy.pi_entry_id,
            created_at_ms: copy.created_at_ms,
        })
        .collect();
    let seq = events.len() as i64 + 1;
    let mut new = event(
        seq,
        "message",
        EventRole::User,
        "user",
        json!({ "text": message }),
    );
    new.id = EventId(1000 + seq);
    new.session_id = fork;
    events.push(new);
    events
}

/// What a message says, as a line: who, then its text, calls and results.
fn said(message: &Message) -> String {
    match message {
        Message::User(user) => format!("user: {}", user.text),
        Message::Assistant(assistant) => {
            let parts: Vec<String> = assistant
                .content
                .iter()
                .map(|block| match block {
                    AssistantBlock::Text { text } => text.clone(),
                    AssistantBlock::ToolCall(call) => format!("call {} {}", call.id, call.name),
                    other => format!("{other:?}"),
                })
                .collect();
            format!("assistant: {}", parts.join(" + "))
        }
        Message::ToolResult(result) => {
            format!("result {}: {}", result.tool_call_id, result.content)
        }
    }
}

#[test]
fn a_forks_first_turn_is_put_exactly_the_conversation_up_to_the_point() {
    let log = log();
    let copies = fork_events(&log, 6, 99);
    let fork = fork_log(&copies, "now the other way");
    let own = [fork.last().expect("the new message").id];
    let waiting = BTreeSet::new();
    // A fork's store is empty: its first turn rebuilds its context from the log.
    let plan = plan_import(
        &fork,
        &StoreState::default(),
        &SyncDocument::default(),
        RunView {
            own_event_ids: &own,
            waiting_event_ids: &waiting,
            attached: &NO_FILES,
        },
        false,
    );
    assert_eq!(plan.mode, ImportMode::Rebuild);
    assert_eq!(plan.entries.first(), Some(&EntryBody::Reset {}));
    let replayed: Vec<String> = plan.entries[1..]
        .iter()
        .map(|entry| match entry {
            EntryBody::Replay { message } => said(message),
            other => format!("{other:?}"),
        })
        .collect();
    assert_eq!(
        replayed,
        [
            "user: hello",
            "assistant: hi",
            "user: read it",
            "assistant: call c1 read",
            "result c1: x holds 3",
            "assistant: x holds 3",
        ]
    );
    assert_eq!(plan.input.text, "now the other way");
    assert_eq!(plan.sync.mark, 7);
}

#[test]
fn a_copied_projection_names_the_successor_it_was_made_for() {
    let successor = SessionId::from_u128(9);
    let mut projection = event(
        1,
        "message",
        EventRole::User,
        "system",
        json!({ "text": "<continuation>" }),
    );
    projection.session_id = successor;
    projection.meta =
        json!({ "continuation": { "continuation_id": "c", "predecessor_session_id": "p" } });
    let copies = fork_events(&[projection], 1, 5);
    assert_eq!(
        copies[0].meta,
        json!({ "continuation": { "continuation_id": "c", "predecessor_session_id": "p",
                                  "successor_session_id": successor.to_string() } })
    );
    // A fork of the fork keeps the successor it names.
    let mut copied = projection_of(&copies[0], SessionId::from_u128(10));
    copied.seq = 1;
    let again = fork_events(&[copied], 1, 6);
    assert_eq!(again[0].meta, copies[0].meta);
}

/// `copy` as the log of session `session_id` holds it.
fn projection_of(copy: &NewEvent, session_id: SessionId) -> SessionEvent {
    SessionEvent {
        id: EventId(1),
        session_id,
        seq: 1,
        kind: copy.kind.clone(),
        role: copy.role,
        actor: copy.actor.clone(),
        content: copy.content.clone(),
        meta: copy.meta.clone(),
        run_id: None,
        pi_entry_id: None,
        created_at_ms: copy.created_at_ms,
    }
}

#[test]
fn fsck_finds_a_fork_that_is_not_its_predecessors_copy() {
    let log = log();
    let point = ForkPoint {
        seq: 6,
        event_id: EventId(106),
    };
    let fork = fork_log(&fork_events(&log, 6, 99), "next");
    assert_eq!(fork_findings(&fork, point, &log), Vec::<String>::new());

    let mut changed = fork.clone();
    changed[2].content = json!({ "text": "read it twice" });
    changed.remove(4);
    assert_eq!(
        fork_findings(&changed, point, &log),
        [
            "its seq 3 is not a copy of its predecessor's seq 3",
            "it lacks seq 5, which it copied from its predecessor",
        ]
    );
    assert_eq!(
        fork_findings(&fork, point, &log[..5]),
        ["its predecessor lacks seq 6, which the fork copied (forked at seq 6)"]
    );
    let elsewhere = ForkPoint {
        event_id: EventId(7),
        ..point
    };
    assert_eq!(
        fork_findings(&fork, elsewhere, &log),
        ["its manifest forks at event 7 but its predecessor's seq 6 is event 106"]
    );
}
