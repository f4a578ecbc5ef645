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
use seed_events::{EventId, EventRole, NewEvent, SessionEvent, SessionId, message_attachments};
use seed_projections::attachments::{AttachedContent, AttachedFile};
use seed_projections::import::{
    AttachedFiles, ImportMode, ImportPlan, RunView, SYNC_DOCUMENT, SyncDocument, merged,
    plan_import, rebuild_reads,
};
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
        let import = Import {
            log: &self.log,
            store: harness.state(),
            sync: &sync,
            own_event_ids: own,
            waiting_event_ids: &waiting,
            rebuild,
        };
        let plan = import.plan_from_the_whole_log();
        assert_eq!(
            import.plan_as_a_turn_reads().plan,
            plan,
            "the plan from what a turn reads of the log is the plan from the whole log"
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

/// An import to plan: a whole log, the store it goes into, and the importing run.
pub struct Import<'a> {
    pub log: &'a [SessionEvent],
    pub store: &'a StoreState,
    pub sync: &'a SyncDocument,
    pub own_event_ids: &'a [EventId],
    pub waiting_event_ids: &'a BTreeSet<EventId>,
    pub rebuild: bool,
}

/// A plan made from what was read of the log, and how much was read.
pub struct PlanRead {
    pub plan: ImportPlan,
    /// Events read, each time one was read.
    pub n_events_read: usize,
    /// Of those, the events read before the plan was known to be a rebuild.
    pub n_events_read_first: usize,
}

impl Import<'_> {
    /// The plan made from every event of the log.
    pub fn plan_from_the_whole_log(&self) -> ImportPlan {
        self.plan(self.log, &files_named(self.log))
    }

    /// The plan made as a turn reads the log: first the events past the mark that came from no
    /// store entry, those left out before and the run's own messages (what the store's
    /// `pending_events` and `read_events_at` return), with the files they name; for a
    /// rebuild, then what `rebuild_reads` names of the log, with its files. The first read
    /// goes through the log's newest seq, and the mark follows it there.
    pub fn plan_as_a_turn_reads(&self) -> PlanRead {
        let mut read = self.read_and_plan();
        let through_seq = self.log.last().map_or(0, |event| event.seq);
        read.plan.sync.mark = read.plan.sync.mark.max(through_seq);
        read
    }

    fn read_and_plan(&self) -> PlanRead {
        let first: Vec<SessionEvent> = self
            .log
            .iter()
            .filter(|event| {
                (event.seq > self.sync.mark && event.pi_entry_id.is_none())
                    || self.sync.left_out.contains(&event.seq)
                    || self.own_event_ids.contains(&event.id)
            })
            .cloned()
            .collect();
        let n_events_read_first = first.len();
        let mut attached = files_named(&first);
        let plan = self.plan(&first, &attached);
        if plan.mode != ImportMode::Rebuild {
            return PlanRead {
                plan,
                n_events_read: n_events_read_first,
                n_events_read_first,
            };
        }
        let ranges = rebuild_reads(&first);
        let rest: Vec<SessionEvent> = self
            .log
            .iter()
            .filter(|event| {
                ranges
                    .iter()
                    .any(|(from_seq, to_seq)| (*from_seq..=*to_seq).contains(&event.seq))
            })
            .cloned()
            .collect();
        attached.extend(files_named(&rest));
        let n_events_read = n_events_read_first + rest.len();
        let log = merged(first, rest);
        PlanRead {
            plan: self.plan(&log, &attached),
            n_events_read,
            n_events_read_first,
        }
    }

    fn plan(&self, log: &[SessionEvent], attached: &AttachedFiles) -> ImportPlan {
        let run = RunView {
            own_event_ids: self.own_event_ids,
            waiting_event_ids: self.waiting_event_ids,
            attached,
        };
        plan_import(log, self.store, self.sync, run, self.rebuild)
    }
}

/// The files `events` name, as a shell would read them: each a text file that says its id.
pub fn files_named(events: &[SessionEvent]) -> AttachedFiles {
    events
        .iter()
        .flat_map(|event| message_attachments(&event.content))
        .map(|named| {
            let file = AttachedFile {
                id: named.id.clone(),
                name: format!("{}.txt", named.id),
                media_type: "text/plain".to_owned(),
                size_bytes: 8,
                content: AttachedContent::Text(format!("file {}", named.id).into_bytes()),
            };
            (named.id, file)
        })
        .collect()
}
