//! From the log to the store: which pending events a turn imports, and how.
//!
//! Many things write to the log without the harness: a user message, a verb the user ran, a
//! system notice, the result of a delegated child. Before a turn, every event past the import
//! mark that has no `pi_entry_id` is pending (and so is every event the mark passed over on
//! purpose, listed in `seed.sync`). [`plan_import`] decides, with no IO:
//!
//! - **Append**: user messages, user actions, notices (framed as `<notice>`) and assistant text
//!   Seed wrote itself are appended behind the entries the harness produced, as `seed.replay`
//!   entries; the run's newest user message becomes the input.
//! - **Edit**: a delegated child's result, whose call was answered with a placeholder still in
//!   the context, becomes a `pi.edit` of that placeholder. When nobody said anything new, the
//!   input is `<background_work_update>`.
//! - **Rebuild**: anything else (a result the runtime wrote for a call a restart cut off, a late
//!   result whose placeholder left the context, a session with no store) starts a new context:
//!   a `pi.reset` and the whole log replayed behind it, each result behind its call. A rebuilt
//!   context keeps the text, calls and results of the log, not the provider's own record.
//!
//! What a person wrote is put to the model once, by the run queued for it: an import leaves out
//! a message that arrived after the run's own, and one that belongs to another run still
//! waiting its turn (a parked run is not waiting: the model read its message before it parked).
//! Those are listed in `seed.sync` with the mark, committed together with the imported entries.

use std::collections::{BTreeMap, BTreeSet};

use base64::Engine as _;
use seed_durable::{EntryBody, EntryId, StoreState};
use seed_events::body::kind;
use seed_events::{EventBody, EventId, EventRole, SessionEvent, message_attachments};
use seed_providers::{
    AssistantBlock, AssistantMessage, Message, ResultImage, StopReason, ToolCall,
    ToolResultMessage, Usage, UserMessage,
};
use serde::{Deserialize, Serialize};

use crate::attachments::{AttachedContent, AttachedFile, attachment_parts};

/// The document that holds the import mark.
pub const SYNC_DOCUMENT: &str = "seed.sync";

/// The input of a turn when nobody said anything new.
pub const BACKGROUND_WORK_UPDATE: &str = "<background_work_update>";

/// `seed.sync`: how far the log has been imported.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SyncDocument {
    /// Every event with a seq at or below this was imported, came from the store, or is listed
    /// in `left_out`.
    pub mark: i64,
    /// Seqs at or below the mark left out on purpose, to import when their turn comes.
    pub left_out: Vec<i64>,
    /// The event the newest import made the input; `None` for `<background_work_update>`.
    pub input_event_id: Option<EventId>,
}

/// What the importing run is, and who else is waiting.
#[derive(Debug, Clone, Copy)]
pub struct RunView<'a> {
    /// The messages this run answers.
    pub own_event_ids: &'a [EventId],
    /// Messages of other runs still waiting their turn (queued; a parked run is not waiting).
    pub waiting_event_ids: &'a BTreeSet<EventId>,
    /// The files the imported messages name, as the shell read them, by attachment id
    /// ([`NO_FILES`] when none do).
    pub attached: &'a AttachedFiles,
}

/// Attached files by attachment id, as the shell read them for the messages a turn imports.
pub type AttachedFiles = BTreeMap<String, AttachedFile>;

/// No attached files.
pub static NO_FILES: AttachedFiles = BTreeMap::new();

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ImportMode {
    Append,
    Edit,
    Rebuild,
}

/// What a turn imports: entries to commit before its input, the input, and the new mark.
#[derive(Debug, Clone, PartialEq)]
pub struct ImportPlan {
    pub mode: ImportMode,
    /// In order, committed with the input and the sync document in one batch.
    pub entries: Vec<EntryBody>,
    pub input: UserMessage,
    pub sync: SyncDocument,
}

/// Plans the import of `log` (the session's events in seq order) into `store`. `rebuild`
/// forces a new context (a different run gave up on an unsettled turn).
///
/// The cost follows the events given. For an append or an edit, only the events past the mark,
/// those in `left_out` and the run's own messages matter, so a caller reads just those; a
/// rebuild needs the whole log (a caller that finds the plan is a rebuild reads what
/// [`rebuild_reads`] names, adds it with [`merged`] and plans again).
pub fn plan_import(
    log: &[SessionEvent],
    store: &StoreState,
    sync: &SyncDocument,
    run: RunView<'_>,
    rebuild: bool,
) -> ImportPlan {
    let own: BTreeSet<EventId> = run.own_event_ids.iter().copied().collect();
    let own_newest_seq = log
        .iter()
        .filter(|event| own.contains(&event.id))
        .map(|event| event.seq)
        .max();
    let previously_left_out: BTreeSet<i64> = sync.left_out.iter().copied().collect();

    let mut left_out: BTreeSet<i64> = BTreeSet::new();
    let mut imported: Vec<&SessionEvent> = Vec::new();
    for event in log {
        let pending = event.seq > sync.mark || previously_left_out.contains(&event.seq);
        if !pending || event.pi_entry_id.is_some() {
            continue;
        }
        let someone_elses = is_person_message(event)
            && !own.contains(&event.id)
            && (run.waiting_event_ids.contains(&event.id)
                || own_newest_seq.is_some_and(|seq| event.seq > seq));
        if someone_elses {
            left_out.insert(event.seq);
        } else {
            imported.push(event);
        }
    }

    let input_event = imported
        .iter()
        .rev()
        .find(|event| own.contains(&event.id) && is_person_message(event))
        .copied();
    let input = match input_event {
        Some(event) => user_message(event, run.attached),
        None => UserMessage::new(BACKGROUND_WORK_UPDATE.to_owned()),
    };

    let placeholders = placeholders_in_context(store);
    let needs_rebuild = rebuild
        || store.entries.is_empty()
        || imported.iter().any(|event| match event.kind.as_str() {
            kind::TOOL_CALL => true,
            kind::TOOL_RESULT => tool_result(event, run.attached)
                .is_none_or(|result| !placeholders.contains_key(result.tool_call_id.as_str())),
            _ => false,
        });
    let mode = if needs_rebuild {
        ImportMode::Rebuild
    } else if imported.iter().any(|event| event.kind == kind::TOOL_RESULT) {
        ImportMode::Edit
    } else {
        ImportMode::Append
    };

    let input_id = input_event.map(|event| event.id);
    let mark = log
        .iter()
        .map(|event| event.seq)
        .max()
        .unwrap_or(0)
        .max(sync.mark);
    let imported_seqs: BTreeSet<i64> = imported.iter().map(|event| event.seq).collect();
    let mut still_left_out: BTreeSet<i64> = previously_left_out
        .difference(&imported_seqs)
        .copied()
        .collect();
    still_left_out.extend(left_out);
    let entries = match mode {
        ImportMode::Rebuild => {
            let replayed = log
                .iter()
                .filter(|event| Some(event.id) != input_id && !still_left_out.contains(&event.seq));
            let mut entries = vec![EntryBody::Reset {}];
            entries.extend(
                replay_messages(replayed, run.attached)
                    .into_iter()
                    .map(|message| EntryBody::Replay { message }),
            );
            entries
        }
        ImportMode::Append | ImportMode::Edit => imported
            .iter()
            .filter(|event| Some(event.id) != input_id)
            .filter_map(|event| {
                if event.kind == kind::TOOL_RESULT {
                    let result = tool_result(event, run.attached)?;
                    let target = *placeholders.get(result.tool_call_id.as_str())?;
                    return Some(EntryBody::Edit {
                        target,
                        message: Message::ToolResult(result),
                    });
                }
                replay_message(event, run.attached).map(|message| EntryBody::Replay { message })
            })
            .collect(),
    };

    ImportPlan {
        mode,
        entries,
        input,
        sync: SyncDocument {
            mark,
            left_out: still_left_out.into_iter().collect(),
            input_event_id: input_id,
        },
    }
}

/// A range of a log's seqs, both ends included.
pub type SeqRange = (i64, i64);

/// What a rebuild reads of the log besides `given` (events in seq order, as an append or an
/// edit reads them: those past the mark that came from no store entry, those left out before,
/// the run's own messages). A rebuild replays every event of the log, so it needs each seq
/// `given` lacks, and nothing twice: the gaps between the given seqs from 1 on, and every seq
/// after the newest given. That last range is open-ended: the log may have grown since `given`
/// was read (the results a given-up turn's calls got are written to it after the turn's
/// view), and a rebuild replays those too.
pub fn rebuild_reads(given: &[SessionEvent]) -> Vec<SeqRange> {
    let mut ranges = Vec::new();
    let mut next_seq = 1;
    for event in given {
        if event.seq > next_seq {
            ranges.push((next_seq, event.seq - 1));
        }
        next_seq = next_seq.max(event.seq + 1);
    }
    ranges.push((next_seq, i64::MAX));
    ranges
}

/// The events of `given` and `more` as one log, in seq order, each seq once.
pub fn merged(given: Vec<SessionEvent>, more: Vec<SessionEvent>) -> Vec<SessionEvent> {
    let mut by_seq: BTreeMap<i64, SessionEvent> = BTreeMap::new();
    for event in given.into_iter().chain(more) {
        by_seq.entry(event.seq).or_insert(event);
    }
    by_seq.into_values().collect()
}

/// A message a person wrote: put to the model once, by the run queued for it.
fn is_person_message(event: &SessionEvent) -> bool {
    (event.kind == kind::MESSAGE
        && event.role == Some(EventRole::User)
        && matches!(event.actor.as_deref(), Some("user" | "trigger") | None))
        || event.kind == kind::ACTION
}

/// Whether the store's current turn, of `request_id`, answered a call with a placeholder (a
/// delegate call whose child is still owed): then its run parks on its children instead of
/// ending. Read from the entries, which a pass cut off by a crash and adopted again still has,
/// whenever its child started.
pub fn delegated_in_turn(store: &StoreState, request_id: &str) -> bool {
    let Some(turn) = store.turn().filter(|turn| turn.request_id == request_id) else {
        return false;
    };
    store
        .entries
        .iter()
        .rev()
        .take_while(|entry| entry.id > turn.input_entry_id)
        .any(|entry| {
            matches!(
                &entry.body,
                EntryBody::ToolResult { request_id, placeholder: true, .. }
                    if *request_id == turn.request_id
            )
        })
}

/// The answer of another turn that already took in and answered what this run (asking as
/// `request_id`) came for, read from what its import found; `None` when the model must be
/// asked.
///
/// A run whose import takes in nothing (no entry to commit) and finds no message of its own
/// to put to the model (the input `seed.sync` would record is none) came for something
/// another turn already took in: a message of its own that an earlier import took in, or the
/// results of the children it was parked on, imported by the turn of a message that arrived
/// in between. When the store's newest turn is another request's and it answered, with nothing
/// after its answer, that answer is this run's too: asking the model again would answer the
/// same context twice. A turn that failed, ended or was stopped answered nothing, so the model
/// is asked.
pub fn answered_already(
    plan: &ImportPlan,
    store: &StoreState,
    request_id: &str,
) -> Option<(EntryId, AssistantMessage)> {
    if plan.mode == ImportMode::Rebuild
        || !plan.entries.is_empty()
        || plan.sync.input_event_id.is_some()
    {
        return None;
    }
    let turn = store.turn().filter(|turn| {
        turn.request_id != request_id && turn.state == seed_durable::record::TurnState::Answered
    })?;
    let answer = store
        .entries
        .last()
        .filter(|entry| Some(entry.id) == turn.answer_entry_id && entry.id > turn.input_entry_id)?;
    match &answer.body {
        EntryBody::Assistant { message, .. } => Some((answer.id, message.clone())),
        _ => None,
    }
}

/// The placeholder results in the current context, by call id.
fn placeholders_in_context(store: &StoreState) -> BTreeMap<&str, EntryId> {
    let start = store
        .entries
        .iter()
        .rposition(|entry| matches!(entry.body, EntryBody::Reset {}))
        .map_or(0, |idx| idx + 1);
    store.entries[start..]
        .iter()
        .filter_map(|entry| match &entry.body {
            EntryBody::ToolResult {
                message,
                placeholder: true,
                ..
            } => Some((message.tool_call_id.as_str(), entry.id)),
            _ => None,
        })
        .collect()
}

/// A message a person (or Seed) wrote, with the files it names after its text, exactly as the
/// model reads them.
fn user_message(event: &SessionEvent, attached: &AttachedFiles) -> UserMessage {
    let named = message_attachments(&event.content);
    let files: Vec<AttachedFile> = named
        .iter()
        .map(|named| {
            attached
                .get(&named.id)
                .cloned()
                .unwrap_or_else(|| AttachedFile::missing(&named.id))
        })
        .collect();
    UserMessage {
        text: event_text(event),
        parts: attachment_parts(&files),
    }
}

fn event_text(event: &SessionEvent) -> String {
    match event.content.get("text").and_then(|text| text.as_str()) {
        Some(text) => text.to_owned(),
        None => event.content.to_string(),
    }
}

/// A result as the log holds it, with the images its event names where the shell read them
/// (a rebuilt context shows a tool's images as the first one did).
fn tool_result(event: &SessionEvent, attached: &AttachedFiles) -> Option<ToolResultMessage> {
    match event.body() {
        EventBody::ToolResult(result) => Some(ToolResultMessage {
            tool_call_id: result.tool_call_id,
            tool_name: result.tool_name,
            content: result.content,
            is_error: result.is_error,
            images: result_images(event, attached),
        }),
        _ => None,
    }
}

/// The images a result's event names, as read: a file not read as an image (gone, or a model
/// that takes none) is left out, and the result's text still names it.
fn result_images(event: &SessionEvent, attached: &AttachedFiles) -> Vec<ResultImage> {
    message_attachments(&event.content)
        .iter()
        .filter_map(|named| {
            let file = attached.get(&named.id)?;
            let AttachedContent::Image(bytes) = &file.content else {
                return None;
            };
            Some(ResultImage {
                media_type: file.media_type.clone(),
                data: base64::engine::general_purpose::STANDARD.encode(bytes),
                attachment_id: Some(file.id.clone()),
            })
        })
        .collect()
}

fn tool_call(event: &SessionEvent) -> Option<ToolCall> {
    match event.body() {
        EventBody::ToolCall(call) => Some(ToolCall {
            id: call.id,
            name: call.name,
            arguments: call.arguments,
        }),
        _ => None,
    }
}

fn assistant(text: String, calls: Vec<ToolCall>) -> AssistantMessage {
    let mut content = Vec::new();
    if !text.is_empty() {
        content.push(AssistantBlock::Text { text });
    }
    let stop_reason = if calls.is_empty() {
        StopReason::Stop
    } else {
        StopReason::ToolUse
    };
    content.extend(calls.into_iter().map(AssistantBlock::ToolCall));
    AssistantMessage {
        content,
        usage: Usage::default(),
        stop_reason,
        model: "seed.replay".to_owned(),
        error_message: None,
    }
}

/// One pending event as the message it appends.
fn replay_message(event: &SessionEvent, attached: &AttachedFiles) -> Option<Message> {
    match (event.kind.as_str(), event.role) {
        (kind::MESSAGE, Some(EventRole::Assistant)) => {
            let text = event_text(event);
            (!text.is_empty()).then(|| Message::Assistant(assistant(text, Vec::new())))
        }
        (kind::TOOL_RESULT, _) => tool_result(event, attached).map(Message::ToolResult),
        (kind::TOOL_CALL, _) => {
            tool_call(event).map(|call| Message::Assistant(assistant(String::new(), vec![call])))
        }
        (kind::NOTICE, _) => Some(Message::User(UserMessage::new(notice_text(event)))),
        _ => Some(Message::User(user_message(event, attached))),
    }
}

/// A notice Seed wrote (a plan with open steps, a failed turn, a child's late result), as the
/// model reads it: framed, so that it is never taken for what a person said.
fn notice_text(event: &SessionEvent) -> String {
    format!(
        "<notice>{}</notice>",
        crate::transcript::escape_action_framing(&event_text(event))
    )
}

/// The log replayed as messages: an assistant message and the calls projected from the same
/// entry (or the calls alone, for a response that only called) become one message; results are placed behind their calls by the context.
fn replay_messages<'a>(
    events: impl Iterator<Item = &'a SessionEvent>,
    attached: &AttachedFiles,
) -> Vec<Message> {
    let mut messages: Vec<Message> = Vec::new();
    // The entry the last assistant message came from, while its calls may still follow.
    let mut open_entry: Option<i64> = None;
    for event in events {
        match (event.kind.as_str(), event.role) {
            (kind::MESSAGE, Some(EventRole::Assistant)) => {
                messages.push(Message::Assistant(assistant(event_text(event), Vec::new())));
                open_entry = event.pi_entry_id;
            }
            (kind::TOOL_CALL, _) => {
                let Some(call) = tool_call(event) else {
                    continue;
                };
                match messages.last_mut() {
                    Some(Message::Assistant(message))
                        if open_entry.is_some() && open_entry == event.pi_entry_id =>
                    {
                        message.content.push(AssistantBlock::ToolCall(call));
                        message.stop_reason = StopReason::ToolUse;
                    }
                    _ => {
                        // A response of calls alone has no message event: its calls start it.
                        messages.push(Message::Assistant(assistant(String::new(), vec![call])));
                        open_entry = event.pi_entry_id;
                    }
                }
            }
            _ => {
                open_entry = None;
                if let Some(message) = replay_message(event, attached) {
                    messages.push(message);
                }
            }
        }
    }
    // An assistant message with neither text nor calls says nothing.
    messages.retain(|message| match message {
        Message::Assistant(assistant) => !assistant.content.is_empty(),
        _ => true,
    });
    messages
}
