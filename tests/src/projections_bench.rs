//! The sessions the `projections` bench suite measures: stores shaped like real sessions (with
//! or without a `pi.reset` keeping the context bounded), the turn blocks sent with a request,
//! and a log with events pending import on top of a long history.

use seed_durable::{Batch, EntryBody, EntryId, StoreState};
use seed_events::{EventId, EventRole, SessionEvent, SessionId};
use seed_projections::blocks::{MemoryIndexEntry, TurnBlocks, render_turn_blocks};
use seed_projections::import::SyncDocument;
use seed_projections::store_to_log::entry_events;
use seed_providers::{Message, ToolCall, ToolResultMessage, ToolSpec, UserMessage, text_response};
use serde_json::json;

/// The most entries a context holds when the session resets: a `pi.reset` comes before any
/// turn that would take the entries since the newest reset past this.
pub const CONTEXT_ENTRIES_MAX: usize = 200;

/// Entries of a finished turn: the input, a response calling `read`, its result, the answer.
const TURN_ENTRIES: usize = 4;

/// The most entries of the turn in progress at the end of a session.
const OPEN_TURN_ENTRIES_MAX: usize = 8;

const SYSTEM_PROMPT: &str = "You are a helpful agent. Your memory lives in ~/memory; read it \
     before you answer, keep it current, and answer briefly.";

/// What `read` returns: about 200 bytes.
const NOTES: &str = "# Notes\n\n- The user prefers short answers, in English, with code in fenced \
     blocks.\n- Trip to Lisbon in May: flights compared, hotel not booked.\n- Open question: \
     which day to visit Sintra.\n";

/// The answer that closes each turn: about 300 bytes.
const ANSWER: &str = "Your notes say the flights to Lisbon are compared and the hotel is not \
     booked yet. The open question is which day to visit Sintra: a weekday is quieter, and the \
     palace opens at 9:30. I can draft a day-by-day plan next, or book the hotel you marked as \
     your favourite, if you tell me which dates to hold.";

/// A session's store and the input entry of the turn in progress.
#[derive(Debug)]
pub struct Session {
    pub state: StoreState,
    pub input_entry_id: EntryId,
}

impl Session {
    /// Entries since the newest `pi.reset` (all of them when there is none).
    pub fn context_entries(&self) -> usize {
        let entries = &self.state.entries;
        let start = entries
            .iter()
            .rposition(|entry| matches!(entry.body, EntryBody::Reset {}))
            .map_or(0, |idx| idx + 1);
        entries.len() - start
    }
}

/// A session of exactly `n_entries` entries whose context (the entries since the newest
/// `pi.reset`) is exactly `context_entries` of them: at least 2, and either the whole session
/// or at most [`CONTEXT_ENTRIES_MAX`] behind at least a `pi.system` and a `pi.reset`.
///
/// It opens with a `pi.system`; then, when the context is not the whole session, windows of
/// finished turns each closed by a `pi.reset` (at most [`CONTEXT_ENTRIES_MAX`] entries since
/// the reset before, as continuing or rebuilding would keep it), the last reset exactly
/// `context_entries` from the end. A finished turn is `TURN_ENTRIES` entries: the input, a
/// response calling `read`, its result, the answer. The session ends in a turn in progress at
/// a request: its input, then call/result pairs (with a notice imported in front of the input
/// when the count calls for it). Where turns do not fill a window exactly, imported notices do.
pub fn session(n_entries: usize, context_entries: usize) -> Session {
    assert!(
        (2..=n_entries).contains(&context_entries),
        "a context needs an input and fits in the session"
    );
    let whole = context_entries == n_entries;
    assert!(
        whole || (context_entries <= CONTEXT_ENTRIES_MAX && n_entries - context_entries >= 2),
        "a context after a reset holds at most {CONTEXT_ENTRIES_MAX} entries, and follows the \
         system prompt and the reset"
    );
    let mut state = StoreState::default();
    let mut batch = Batch::new(&state);
    batch.entry(EntryBody::System {
        system_prompt: SYSTEM_PROMPT.to_owned(),
        tools: vec![read_spec()],
    });
    state.apply(batch);

    let mut turn = 0;
    if !whole {
        // Up to and including the newest reset.
        let head = n_entries - context_entries;
        let mut window = 1;
        while state.entries.len() < head {
            let remaining = head - state.entries.len();
            let mut batch = Batch::new(&state);
            if remaining == 1 || window + TURN_ENTRIES > CONTEXT_ENTRIES_MAX {
                batch.entry(EntryBody::Reset {});
                window = 0;
            } else if remaining > TURN_ENTRIES {
                finished_turn(&mut batch, turn);
                turn += 1;
                window += TURN_ENTRIES;
            } else {
                batch.entry(notice());
                window += 1;
            }
            state.apply(batch);
        }
    }

    // The context: finished turns, then the turn in progress.
    while n_entries - state.entries.len() > OPEN_TURN_ENTRIES_MAX {
        let mut batch = Batch::new(&state);
        finished_turn(&mut batch, turn);
        turn += 1;
        state.apply(batch);
    }
    let mut remaining = n_entries - state.entries.len();
    let mut batch = Batch::new(&state);
    if remaining.is_multiple_of(2) {
        batch.entry(notice());
        remaining -= 1;
    }
    let request_id = format!("r{turn}");
    let input_entry_id = batch.entry(input(&request_id, turn));
    for round in 0..(remaining - 1) / 2 {
        let call_id = format!("call-{turn}-{round}");
        batch.entry(call(&request_id, &call_id));
        batch.entry(result(&request_id, &call_id));
    }
    state.apply(batch);
    assert_eq!(state.entries.len(), n_entries);
    Session {
        state,
        input_entry_id,
    }
}

/// A notice Seed imported from its log.
fn notice() -> EntryBody {
    EntryBody::Replay {
        message: Message::User(UserMessage::new("The plan has 2 open steps.".to_owned())),
    }
}

fn finished_turn(batch: &mut Batch, turn: usize) {
    let request_id = format!("r{turn}");
    let call_id = format!("call-{turn}");
    batch.entry(input(&request_id, turn));
    batch.entry(call(&request_id, &call_id));
    batch.entry(result(&request_id, &call_id));
    batch.entry(EntryBody::Assistant {
        request_id,
        message: text_response(ANSWER),
    });
}

fn input(request_id: &str, turn: usize) -> EntryBody {
    EntryBody::User {
        request_id: request_id.to_owned(),
        message: UserMessage::new(format!(
            "Question {turn}: what do my notes say about the trip to Lisbon, and what is \
                 still open?"
        )),
    }
}

fn call(request_id: &str, call_id: &str) -> EntryBody {
    EntryBody::Assistant {
        request_id: request_id.to_owned(),
        message: seed_providers::tool_response(
            "",
            vec![ToolCall {
                id: call_id.to_owned(),
                name: "read".to_owned(),
                arguments: json!({"path": "~/memory/notes.md"}),
            }],
        ),
    }
}

fn result(request_id: &str, call_id: &str) -> EntryBody {
    EntryBody::ToolResult {
        request_id: request_id.to_owned(),
        message: ToolResultMessage {
            tool_call_id: call_id.to_owned(),
            tool_name: "read".to_owned(),
            content: NOTES.to_owned(),
            is_error: false,
            images: Vec::new(),
        },
        ends_turn: false,
        placeholder: false,
    }
}

fn read_spec() -> ToolSpec {
    ToolSpec {
        name: "read".to_owned(),
        description: "Reads a file of the agent's memory.".to_owned(),
        parameters: json!({
            "type": "object",
            "properties": {"path": {"type": "string"}},
            "required": ["path"],
        }),
    }
}

/// The blocks of a busy turn: a memory index of 20 files, a delegation budget, a plan of five
/// steps, the context usage, the status and the time.
pub fn turn_blocks() -> Vec<UserMessage> {
    let memory_index = (0..20)
        .map(|idx| MemoryIndexEntry {
            path: format!("notes/topic-{idx:02}.md"),
            size_bytes: 200 + idx * 37,
            updated_at_ms: 1_795_989_900_000 - i64::try_from(idx).unwrap_or(0) * 86_400_000,
        })
        .collect();
    let plan = json!([
        {"step": "Read the notes", "done": true},
        {"step": "Compare the flights", "done": true},
        {"step": "Book the hotel", "done": false},
        {"step": "Plan the Sintra day", "done": false},
        {"step": "Send the itinerary", "done": false},
    ]);
    render_turn_blocks(&TurnBlocks {
        memory_index,
        delegation: Some((1, 4)),
        plan: Some(plan),
        context: Some(seed_projections::blocks::ContextUsage {
            tokens: 61_000,
            window: 200_000,
            estimated: false,
        }),
        advice: None,
        status: (
            "Trip to Lisbon".to_owned(),
            "Booking the hotel, then the Sintra day.".to_owned(),
        ),
        now_ms: 1_795_989_900_000,
        utc_offset_minutes: 60,
    })
}

/// A log with events pending import, the store it was imported into, its import mark, and the
/// importing run's own message.
#[derive(Debug)]
pub struct PendingLog {
    pub log: Vec<SessionEvent>,
    /// The store the history came from.
    pub store: StoreState,
    pub sync: SyncDocument,
    pub own_event_ids: Vec<EventId>,
}

/// A log to import: a history of `n_history` events, all imported (the projection of a
/// session's entries, with the user messages and notices that Seed wrote first and imported),
/// and then `n_pending` events the harness did not write (user messages, notices, assistant
/// text Seed wrote), the newest of them a user message: the importing run's own.
pub fn pending_log(n_history: usize, n_pending: usize) -> PendingLog {
    assert!(n_pending >= 1, "the run's own message is pending");
    // About one event per entry (an assistant entry that only calls is one event, a reset or
    // a system entry none): twice as many entries as events is plenty.
    let n_entries = (2 * n_history).max(2);
    let source = session(n_entries, n_entries.min(100));
    let mut log: Vec<SessionEvent> = Vec::with_capacity(n_history + n_pending);
    let mut store = StoreState::default();
    for entry in &source.state.entries {
        if log.len() >= n_history {
            break;
        }
        let mut batch = Batch::new(&store);
        batch.entry(entry.body.clone());
        store.apply(batch);
        let created_at_ms = log.len() as i64;
        match &entry.body {
            // Inputs and notices were in the log first: written by Seed, then imported.
            EntryBody::User { message, .. } => log.push(event(
                log.len(),
                "message",
                Some(EventRole::User),
                "user",
                json!({"text": message.text}),
                None,
            )),
            EntryBody::Replay {
                message: Message::User(message),
            } => log.push(event(
                log.len(),
                "notice",
                None,
                "system",
                json!({"text": message.text}),
                None,
            )),
            _ => {
                for new_event in entry_events(entry, None, created_at_ms) {
                    log.push(SessionEvent {
                        id: EventId(log.len() as i64 + 1),
                        session_id: session_id(),
                        seq: log.len() as i64 + 1,
                        kind: new_event.kind,
                        role: new_event.role,
                        actor: new_event.actor,
                        content: new_event.content,
                        meta: new_event.meta,
                        run_id: new_event.run_id,
                        pi_entry_id: new_event.pi_entry_id,
                        created_at_ms,
                    });
                }
            }
        }
    }
    log.truncate(n_history);
    let mark = log.len() as i64;
    for idx in 0..n_pending {
        let is_own = idx + 1 == n_pending;
        let (kind, role, actor, text) = match idx % 3 {
            _ if is_own => ("message", Some(EventRole::User), "user", "And the hotel?"),
            0 => (
                "message",
                Some(EventRole::User),
                "user",
                "Also, keep Friday free.",
            ),
            1 => ("notice", None, "system", "The plan has 3 open steps."),
            _ => (
                "message",
                Some(EventRole::Assistant),
                "system",
                "Reminder set for Friday.",
            ),
        };
        log.push(event(
            log.len(),
            kind,
            role,
            actor,
            json!({"text": text}),
            None,
        ));
    }
    let own_event_ids = vec![log.last().expect("a pending event").id];
    PendingLog {
        log,
        store,
        sync: SyncDocument {
            mark,
            left_out: Vec::new(),
            input_event_id: None,
        },
        own_event_ids,
    }
}

fn session_id() -> SessionId {
    SessionId::from_u128(1)
}

/// The event at index `idx` of the log (seq and id `idx + 1`).
fn event(
    idx: usize,
    kind: &str,
    role: Option<EventRole>,
    actor: &str,
    content: serde_json::Value,
    pi_entry_id: Option<i64>,
) -> SessionEvent {
    SessionEvent {
        id: EventId(idx as i64 + 1),
        session_id: session_id(),
        seq: idx as i64 + 1,
        kind: kind.to_owned(),
        role,
        actor: Some(actor.to_owned()),
        content,
        meta: json!({}),
        run_id: None,
        pi_entry_id,
        created_at_ms: idx as i64,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use seed_durable::context::{conversation, has_orphans, request_messages};
    use seed_projections::import::{ImportMode, RunView, plan_import};
    use std::collections::BTreeSet;

    #[test]
    fn sessions_have_their_size_and_their_context() {
        let cases = [(2, 2), (3, 3), (100, 100), (1_001, 1_001), (10_000, 10_000)]
            .into_iter()
            .chain([2, 3, 7, 99, 100, 150, 200].map(|context| (10_000, context)))
            .chain([(102, 100), (103, 2), (1_001, 200), (100_000, 100)]);
        for (n_entries, context_entries) in cases {
            let session = session(n_entries, context_entries);
            assert_eq!(session.state.entries.len(), n_entries);
            assert_eq!(session.context_entries(), context_entries, "{n_entries}");
            // Every window before the newest reset holds at most CONTEXT_ENTRIES_MAX.
            let mut window = 0;
            for entry in &session.state.entries {
                if matches!(entry.body, EntryBody::Reset {}) {
                    window = 0;
                } else {
                    window += 1;
                    assert!(
                        window <= CONTEXT_ENTRIES_MAX || context_entries == n_entries,
                        "{n_entries} {context_entries}"
                    );
                }
            }
            let blocks = seed_durable::context::block_messages(&turn_blocks());
            let messages = request_messages(
                conversation(&session.state.entries),
                session.input_entry_id,
                &blocks,
            );
            assert!(!has_orphans(&messages), "{n_entries} {context_entries}");
            // The blocks sit right behind the input, and the request ends at a result or
            // at the blocks: where a request is made.
            let input_idx = messages
                .iter()
                .rposition(
                    |message| matches!(message.as_ref(), Message::User(m) if m.text.starts_with("Question")),
                )
                .expect("the input");
            let behind_input = &messages[input_idx + 1..input_idx + 1 + blocks.len()];
            assert!(
                behind_input
                    .iter()
                    .zip(&blocks)
                    .all(|(message, block)| message == block)
            );
            assert!(!matches!(
                messages.last().map(|m| m.as_ref()),
                Some(Message::Assistant(_))
            ));
        }
    }

    #[test]
    fn the_pending_log_imports_by_appending() {
        let pending = pending_log(1_000, 100);
        assert_eq!(pending.log.len(), 1_100);
        assert!(pending.log[..1_000].iter().any(|e| e.pi_entry_id.is_some()));
        let waiting = BTreeSet::new();
        let plan = plan_import(
            &pending.log,
            &pending.store,
            &pending.sync,
            RunView {
                own_event_ids: &pending.own_event_ids,
                waiting_event_ids: &waiting,
                attached: &seed_projections::import::NO_FILES,
            },
            false,
        );
        assert_eq!(plan.mode, ImportMode::Append);
        assert_eq!(plan.entries.len(), 99);
        assert_eq!(plan.input.text, "And the hotel?");
        assert_eq!(plan.sync.mark, 1_100);
    }
}
