//! An in-memory session for tests: a log (a vector of events), a durable store (`MemoryFs`),
//! and the steps Seed takes around a turn — on open, clear stale marks and project what the log
//! lacks; import what is pending; run the turn; project its entries.

#![allow(dead_code)]

use std::collections::BTreeSet;
use std::sync::Arc;

use futures::executor::block_on;
use futures::future::BoxFuture;
use seed_durable::{
    Harness, HarnessConfig, MemoryFs, StoreState, Tool, ToolOutput, ToolSet, TurnOutcome,
    TurnRequest,
};
use seed_events::{EventId, EventRole, NewEvent, SessionEvent, SessionId};
use seed_projections::import::{RunView, SYNC_DOCUMENT, SyncDocument, plan_import};
use seed_projections::store_to_log::{entry_events, stale_marks_above, unprojected};
use seed_providers::{
    Message, Request, ScriptedProvider, ScriptedStep, ToolCall, ToolSpec, UserMessage,
    text_response, tool_response,
};

/// A read-only tool: safe to repeat.
struct Read;

impl Tool for Read {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "read".to_owned(),
            description: "Reads a file.".to_owned(),
            parameters: serde_json::json!({"type": "object", "properties": {"path": {"type": "string"}}}),
        }
    }
    fn safe_to_repeat(&self) -> bool {
        true
    }
    fn call<'a>(&'a self, call: &'a ToolCall) -> BoxFuture<'a, ToolOutput> {
        Box::pin(async move { ToolOutput::ok(format!("contents of {}", call.arguments["path"])) })
    }
}

/// Answers every turn with one `read` call, then text: "answer N" where N counts the user
/// messages the request holds.
pub fn provider() -> ScriptedProvider {
    ScriptedProvider::from_fn(|request: &Request, _| {
        let last_user = request
            .messages
            .iter()
            .rposition(|m| matches!(m.as_ref(), Message::User(_)))
            .unwrap_or(0);
        let n_responses = request.messages[last_user..]
            .iter()
            .filter(|m| matches!(m.as_ref(), Message::Assistant(_)))
            .count();
        let n_users = request
            .messages
            .iter()
            .filter(|m| matches!(m.as_ref(), Message::User(u) if !u.text.starts_with('<')))
            .count();
        if n_responses == 0 {
            ScriptedStep::Respond(tool_response(
                "",
                vec![ToolCall {
                    id: format!("call-{n_users}"),
                    name: "read".to_owned(),
                    arguments: serde_json::json!({"path": format!("~/memory/{n_users}.md")}),
                }],
            ))
        } else {
            ScriptedStep::Respond(text_response(&format!("answer {n_users}")))
        }
    })
}

pub struct Session {
    pub log: Vec<SessionEvent>,
    pub fs: MemoryFs,
    pub provider: ScriptedProvider,
    pub tools: ToolSet,
    next_event_id: i64,
}

impl Session {
    pub fn new() -> Session {
        Session {
            log: Vec::new(),
            fs: MemoryFs::new(),
            provider: provider(),
            tools: ToolSet::new().with(Arc::new(Read)),
            next_event_id: 1,
        }
    }

    pub fn append(&mut self, events: Vec<NewEvent>) -> Vec<SessionEvent> {
        let mut stored = Vec::new();
        for event in events {
            let seq = self.log.len() as i64 + 1;
            let row = SessionEvent {
                id: EventId(self.next_event_id),
                session_id: SessionId::from_u128(1),
                seq,
                kind: event.kind,
                role: event.role,
                actor: event.actor,
                content: event.content,
                meta: event.meta,
                run_id: event.run_id,
                pi_entry_id: event.pi_entry_id,
                created_at_ms: event.created_at_ms,
            };
            self.next_event_id += 1;
            self.log.push(row.clone());
            stored.push(row);
        }
        stored
    }

    /// A person says something; returns the message's event id.
    pub fn say(&mut self, text: &str) -> EventId {
        let event = NewEvent::message(
            EventRole::User,
            "user",
            serde_json::json!({ "text": text }),
            0,
        );
        self.append(vec![event])[0].id
    }

    /// Opens the store the way Seed does: clears marks the store cannot back, then projects
    /// every entry the log lacks.
    pub fn open(&mut self, fs: MemoryFs) -> Harness<MemoryFs, ScriptedProvider> {
        let harness = block_on(Harness::open(
            fs,
            self.provider.clone(),
            self.tools.clone(),
            HarnessConfig::new("scripted", "You are a careful assistant."),
        ))
        .expect("open");
        let last = harness.state().entries.last().map(|entry| entry.id);
        if let Some(above) = stale_marks_above(last, self.max_pi_entry_id()) {
            for event in &mut self.log {
                if event.pi_entry_id.is_some_and(|id| id as u64 > above) {
                    event.pi_entry_id = None;
                }
            }
        }
        self.project(harness.state(), usize::MAX);
        harness
    }

    pub fn max_pi_entry_id(&self) -> Option<u64> {
        self.log
            .iter()
            .filter_map(|event| event.pi_entry_id)
            .max()
            .map(|id| id as u64)
    }

    /// Projects at most `max_entries` of the entries the log lacks, one append per entry.
    pub fn project(&mut self, state: &StoreState, max_entries: usize) {
        let max = self.max_pi_entry_id();
        let events: Vec<Vec<NewEvent>> = unprojected(&state.entries, max)
            .into_iter()
            .take(max_entries)
            .map(|entry| entry_events(entry, None, 0))
            .collect();
        for entry_events in events {
            self.append(entry_events);
        }
    }

    /// Runs a turn for the run that answers `own`: Seed's steps around the harness.
    pub fn turn_with(
        &mut self,
        harness: &mut Harness<MemoryFs, ScriptedProvider>,
        request_id: &str,
        own: &[EventId],
        blocks: Vec<UserMessage>,
    ) -> Result<TurnOutcome, seed_durable::Error> {
        self.turn_projecting(harness, request_id, own, blocks, usize::MAX)
    }

    /// Like `turn_with`, but the log gets at most `projected_after` entries' events after the
    /// turn: the process died before writing the rest.
    pub fn turn_projecting(
        &mut self,
        harness: &mut Harness<MemoryFs, ScriptedProvider>,
        request_id: &str,
        own: &[EventId],
        blocks: Vec<UserMessage>,
        projected_after: usize,
    ) -> Result<TurnOutcome, seed_durable::Error> {
        let rebuild = block_on(harness.abort_unsettled(request_id))?;
        self.project(harness.state(), usize::MAX);
        let sync: SyncDocument = harness.state().document(SYNC_DOCUMENT).unwrap_or_default();
        let waiting = BTreeSet::new();
        let plan = plan_import(
            &self.log,
            harness.state(),
            &sync,
            RunView {
                own_event_ids: own,
                waiting_event_ids: &waiting,
                attached: &seed_projections::import::NO_FILES,
            },
            rebuild,
        );
        let mut turn = TurnRequest::new(request_id, plan.input.text.clone());
        turn.blocks = blocks;
        turn.imports = plan.entries;
        turn.documents = vec![(
            SYNC_DOCUMENT.to_owned(),
            serde_json::to_value(&plan.sync).expect("sync serializes"),
        )];
        let outcome = block_on(harness.run_turn(turn));
        self.project(harness.state(), projected_after);
        outcome
    }

    /// A whole turn on a freshly opened store.
    pub fn turn(&mut self, request_id: &str, text: &str) -> TurnOutcome {
        let own = self.say(text);
        let mut harness = self.open(self.fs.clone());
        self.turn_with(&mut harness, request_id, &[own], Vec::new())
            .expect("a turn on a working store")
    }
}

pub fn user_text(text: &str) -> UserMessage {
    UserMessage::new(text.to_owned())
}
