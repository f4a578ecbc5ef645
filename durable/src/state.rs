//! The store folded into memory, and the batches that change it.
//!
//! A [`Batch`] holds typed records; it is serialized into one atomic commit of the durable files
//! and, once that commit succeeds, applied to the [`StoreState`] by the same fold that opening
//! uses, so the state in memory is always exactly what the store holds.
//!
//! A state need not hold the whole history: [`Kept`] is what a turn can still read of a store
//! folded up to some line (the entries from the newest reset on, the newest system entry, the
//! newest value of each document, the tasks not ended), and
//! [`StoreState::open_kept`] folds the lines after it onto it, so that opening a long session
//! costs its context rather than its history.

use std::collections::BTreeMap;

use crate::fs::{Append, FileName};
use crate::record::{
    AgentDocument, DocumentLine, Entry, EntryBody, EntryId, LIVE_DOCUMENT, LiveDocument,
    TURN_DOCUMENT, Task, TurnDocument,
};

/// A line of a durable file that does not parse as what that file holds.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("corrupt line {line_idx} of {file}: {detail}")]
pub struct CorruptLine {
    pub file: FileName,
    pub line_idx: usize,
    pub detail: String,
}

/// Everything a store holds, folded; or, opened from a [`Kept`], everything a turn can read.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StoreState {
    /// The entries from the first one kept on (ids rise by one from `entries[0].id`): all of
    /// them when folded from every line, those from the newest reset on when opened kept.
    pub entries: Vec<Entry>,
    /// The newest value of each document; a cleared document is absent.
    pub documents: BTreeMap<String, serde_json::Value>,
    /// The newest line of each task, by [`Task::key`].
    pub tasks: BTreeMap<String, Task>,
    /// Where the newest `pi.system` entry sits, so finding it does not scan the history.
    newest_system_idx: Option<usize>,
    /// The newest `pi.system` entry when it comes before the entries held (opened kept).
    older_system: Option<Entry>,
    /// The id the first entry has, or would have while there is none: 1 unless opened kept.
    first_entry_id: EntryId,
}

/// What a turn can still read of a store folded up to some line: a store keeps it, and opens
/// from it and the lines after it ([`StoreState::open_kept`]).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Kept {
    /// The first entry a turn can read: the newest reset (the context starts after it), or 1.
    pub first_entry_id: EntryId,
    /// The newest `pi.system` entry, when it comes before `first_entry_id`.
    pub system: Option<Entry>,
    /// The newest value of each document set.
    pub documents: BTreeMap<String, serde_json::Value>,
    /// The tasks not ended: all a turn can tell apart from a task never started. A turn looks
    /// up a call's task only to find it awaiting a decision or started without a result; an
    /// ended one reads as none. Keeping the newest turn's ended tasks as well would not be
    /// exact: a run whose turn another run aborted after a restart starts a new turn with the
    /// same request id, which would make an ended task dropped earlier the newest turn's.
    pub tasks: Vec<Task>,
}

impl StoreState {
    /// Folds the three files' lines, in commit order.
    pub fn fold(
        entries: &[String],
        documents: &[String],
        tasks: &[String],
    ) -> Result<StoreState, CorruptLine> {
        let mut state = StoreState::default();
        state.fold_lines(entries, documents, tasks)?;
        Ok(state)
    }

    /// Folds lines onto this state, in commit order.
    fn fold_lines(
        &mut self,
        entries: &[String],
        documents: &[String],
        tasks: &[String],
    ) -> Result<(), CorruptLine> {
        let state = self;
        for (line_idx, line) in entries.iter().enumerate() {
            let entry: Entry = parse(FileName::Entries, line_idx, line)?;
            if entry.id != state.next_entry_id() {
                return Err(CorruptLine {
                    file: FileName::Entries,
                    line_idx,
                    detail: format!(
                        "entry id {} where {} was due",
                        entry.id,
                        state.next_entry_id()
                    ),
                });
            }
            state.push_entry(entry);
        }
        for (line_idx, line) in documents.iter().enumerate() {
            state.apply_document(parse(FileName::Documents, line_idx, line)?);
        }
        for (line_idx, line) in tasks.iter().enumerate() {
            state.apply_task(parse(FileName::Tasks, line_idx, line)?);
        }
        Ok(())
    }

    /// The id the next entry gets.
    pub fn next_entry_id(&self) -> EntryId {
        self.entries
            .last()
            .map_or(self.first_entry_id.max(1), |entry| entry.id + 1)
    }

    /// The entry `id`, when it is held (an entry before the newest reset is not, once opened
    /// kept; a turn never asks for one).
    pub fn entry(&self, id: EntryId) -> Option<&Entry> {
        // Ids are dense from the first held, so the entry sits at index id - first.
        let idx = self.entry_index(id)?;
        let entry = self.entries.get(idx)?;
        debug_assert_eq!(entry.id, id);
        Some(entry)
    }

    /// Where entry `id` sits among the entries held (it may be one past the end).
    pub fn entry_index(&self, id: EntryId) -> Option<usize> {
        usize::try_from(id.checked_sub(self.first_entry_id.max(1))?).ok()
    }

    /// What a turn can still read of this state: a store keeps it to open from later.
    pub fn kept(&self) -> Kept {
        let first_entry_id = self
            .entries
            .iter()
            .rev()
            .find(|entry| matches!(entry.body, EntryBody::Reset {}))
            .map_or(self.first_entry_id.max(1), |reset| reset.id);
        let system = match self.newest_system_idx {
            Some(idx) if self.entries[idx].id < first_entry_id => Some(self.entries[idx].clone()),
            Some(_) => None,
            None => self.older_system.clone(),
        };
        let tasks = self
            .tasks
            .values()
            .filter(|task| !task.is_ended())
            .cloned()
            .collect();
        Kept {
            first_entry_id,
            system,
            documents: self.documents.clone(),
            tasks,
        }
    }

    /// Opens from `kept` and the lines after it: `entries` every entry line from
    /// `kept.first_entry_id` on, `documents` and `tasks` the lines committed after the line
    /// `kept` was folded to.
    pub fn open_kept(
        kept: Kept,
        entries: &[String],
        documents: &[String],
        tasks: &[String],
    ) -> Result<StoreState, CorruptLine> {
        let mut state = StoreState {
            first_entry_id: kept.first_entry_id.max(1),
            older_system: kept.system,
            documents: kept.documents,
            tasks: kept
                .tasks
                .into_iter()
                .map(|task| (task.key(), task))
                .collect(),
            ..StoreState::default()
        };
        state.fold_lines(entries, documents, tasks)?;
        Ok(state)
    }

    pub fn document<T: serde::de::DeserializeOwned>(&self, name: &str) -> Option<T> {
        // Read in place: `&Value` is a deserializer, so the document is not cloned first.
        T::deserialize(self.documents.get(name)?).ok()
    }

    pub fn turn(&self) -> Option<TurnDocument> {
        self.document(TURN_DOCUMENT)
    }

    pub fn live(&self) -> Option<LiveDocument> {
        self.document(LIVE_DOCUMENT)
    }

    pub fn agent(&self) -> Option<AgentDocument> {
        self.document(crate::record::AGENT_DOCUMENT)
    }

    pub fn task(&self, key: &str) -> Option<&Task> {
        self.tasks.get(key)
    }

    /// The newest `pi.system` entry.
    pub fn system(&self) -> Option<(&str, &[seed_providers::ToolSpec])> {
        let entry = match self.newest_system_idx {
            Some(idx) => self.entries.get(idx)?,
            None => self.older_system.as_ref()?,
        };
        match &entry.body {
            EntryBody::System {
                system_prompt,
                tools,
            } => Some((system_prompt.as_str(), tools.as_slice())),
            _ => None,
        }
    }

    /// Where the newest system entry is among the entries: it changes only when a new one is
    /// committed.
    pub fn newest_system_index(&self) -> Option<usize> {
        self.newest_system_idx
    }

    fn push_entry(&mut self, entry: Entry) {
        if matches!(entry.body, EntryBody::System { .. }) {
            self.newest_system_idx = Some(self.entries.len());
        }
        self.entries.push(entry);
    }

    fn apply_document(&mut self, line: DocumentLine) {
        if line.value.is_null() {
            self.documents.remove(&line.name);
        } else {
            self.documents.insert(line.name, line.value);
        }
    }

    fn apply_task(&mut self, task: Task) {
        self.tasks.insert(task.key(), task);
    }

    /// Applies a batch that was committed.
    pub fn apply(&mut self, batch: Batch) {
        for entry in batch.entries {
            assert_eq!(entry.id, self.next_entry_id(), "batch entries out of order");
            self.push_entry(entry);
        }
        for document in batch.documents {
            self.apply_document(document);
        }
        for task in batch.tasks {
            self.apply_task(task);
        }
    }
}

fn parse<T: serde::de::DeserializeOwned>(
    file: FileName,
    line_idx: usize,
    line: &str,
) -> Result<T, CorruptLine> {
    serde_json::from_str(line).map_err(|error| CorruptLine {
        file,
        line_idx,
        detail: error.to_string(),
    })
}

/// Records to commit together. Entries get their ids as they are added.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Batch {
    entries: Vec<Entry>,
    documents: Vec<DocumentLine>,
    tasks: Vec<Task>,
    next_entry_id: EntryId,
}

impl Batch {
    /// An empty batch for a store whose next entry id is `state.next_entry_id()`.
    pub fn new(state: &StoreState) -> Batch {
        Batch {
            next_entry_id: state.next_entry_id(),
            ..Batch::default()
        }
    }

    /// Adds an entry and returns the id it will have.
    pub fn entry(&mut self, body: EntryBody) -> EntryId {
        let id = self.next_entry_id;
        self.entries.push(Entry { id, body });
        self.next_entry_id += 1;
        id
    }

    /// Sets a document; `None` clears it.
    pub fn document<T: serde::Serialize>(&mut self, name: &str, value: Option<&T>) {
        let value = value.map_or(serde_json::Value::Null, |value| {
            serde_json::to_value(value).expect("store records serialize")
        });
        self.documents.push(DocumentLine {
            name: name.to_owned(),
            value,
        });
    }

    pub fn task(&mut self, task: Task) {
        self.tasks.push(task);
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty() && self.documents.is_empty() && self.tasks.is_empty()
    }

    /// The entries, with the ids they will have.
    pub fn entries(&self) -> &[Entry] {
        &self.entries
    }

    /// The documents set (a `null` value clears one), in order.
    pub fn documents(&self) -> &[DocumentLine] {
        &self.documents
    }

    pub fn tasks(&self) -> &[Task] {
        &self.tasks
    }

    /// The lines to append, entries first.
    pub fn to_appends(&self) -> Vec<Append> {
        let entries = self
            .entries
            .iter()
            .map(|e| Append::new(FileName::Entries, line(e)));
        let documents = self
            .documents
            .iter()
            .map(|d| Append::new(FileName::Documents, line(d)));
        let tasks = self
            .tasks
            .iter()
            .map(|t| Append::new(FileName::Tasks, line(t)));
        entries.chain(documents).chain(tasks).collect()
    }
}

/// One record as a JSON line. Our records are plain data: failing to serialize one is a bug.
fn line<T: serde::Serialize>(record: &T) -> String {
    // Most lines are a few hundred bytes: one allocation rather than a string grown by doubling.
    let mut bytes = Vec::with_capacity(512);
    serde_json::to_writer(&mut bytes, record).expect("store records serialize");
    String::from_utf8(bytes).expect("serde_json writes UTF-8")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{ModelTaskState, TurnState};
    use seed_providers::UserMessage;

    fn lines(batch: &Batch, file: FileName) -> Vec<String> {
        batch
            .to_appends()
            .into_iter()
            .filter(|append| append.file == file)
            .map(|append| append.line)
            .collect()
    }

    #[test]
    fn a_committed_batch_folds_to_the_state_it_was_applied_to() {
        let mut state = StoreState::default();
        let mut batch = Batch::new(&state);
        let input = batch.entry(EntryBody::User {
            request_id: "r".to_owned(),
            message: UserMessage::new("hi".to_owned()),
        });
        assert_eq!(input, 1);
        batch.document(
            TURN_DOCUMENT,
            Some(&TurnDocument {
                request_id: "r".to_owned(),
                input_entry_id: input,
                state: TurnState::Open,
                answer_entry_id: None,
                reason: None,
            }),
        );
        batch.task(Task::Model {
            request_id: "r".to_owned(),
            step: 0,
            state: ModelTaskState::Streaming,
        });
        let entries = lines(&batch, FileName::Entries);
        let documents = lines(&batch, FileName::Documents);
        let tasks = lines(&batch, FileName::Tasks);
        state.apply(batch);

        let mut clear = Batch::new(&state);
        clear.document::<TurnDocument>(TURN_DOCUMENT, None);
        let documents: Vec<String> = documents
            .into_iter()
            .chain(lines(&clear, FileName::Documents))
            .collect();
        let folded = StoreState::fold(&entries, &documents[..1], &tasks).expect("folds");
        assert_eq!(folded, state);
        state.apply(clear);
        let folded = StoreState::fold(&entries, &documents, &tasks).expect("folds");
        assert_eq!(folded, state);
        assert_eq!(state.turn(), None);
        assert_eq!(state.next_entry_id(), 2);
    }

    /// A store written turn by turn, each batch's lines kept apart: turns with a reset before
    /// some, system entries, responses with calls, results (some calls left parked, without
    /// one), edits, the live document set and cleared, turns that end and one left open, and
    /// turns that take an earlier turn's request id again (a run whose turn another run
    /// aborted after a restart comes back with its own request id and starts a new turn).
    fn written(choices: &[u8]) -> (StoreState, Vec<[Vec<String>; 3]>) {
        use crate::record::{LIVE_DOCUMENT, LiveDocument, ToolTaskState, TurnState};
        use seed_providers::{Message, ToolCall, ToolResultMessage, UserMessage, tool_response};

        let mut state = StoreState::default();
        let mut batches = Vec::new();
        let mut turn: Option<TurnDocument> = None;
        let mut open_calls: Vec<String> = Vec::new();
        let mut request_ids: Vec<String> = Vec::new();
        for (step, &choice) in choices.iter().enumerate() {
            let mut batch = Batch::new(&state);
            let request_id = turn.as_ref().map(|turn| turn.request_id.clone());
            match (choice % 8, request_id) {
                (0..=2, _) | (_, None) => {
                    let request_id = match request_ids.len() {
                        n if n > 0 && choice >= 128 => request_ids[usize::from(choice) % n].clone(),
                        _ => format!("r{step}"),
                    };
                    request_ids.push(request_id.clone());
                    if choice % 3 == 0 {
                        batch.entry(EntryBody::Reset {});
                    }
                    if choice % 5 == 0 {
                        batch.entry(EntryBody::System {
                            system_prompt: format!("system {step}"),
                            tools: Vec::new(),
                        });
                    }
                    let input_entry_id = batch.entry(EntryBody::User {
                        request_id: request_id.clone(),
                        message: UserMessage::new(format!("message {step}")),
                    });
                    let doc = TurnDocument {
                        request_id: request_id.clone(),
                        input_entry_id,
                        state: TurnState::Open,
                        answer_entry_id: None,
                        reason: None,
                    };
                    batch.document(TURN_DOCUMENT, Some(&doc));
                    batch.task(Task::Model {
                        request_id,
                        step: 0,
                        state: ModelTaskState::Streaming,
                    });
                    turn = Some(doc);
                    open_calls.clear();
                }
                (3, Some(request_id)) => {
                    let calls: Vec<ToolCall> = (0..choice % 3)
                        .map(|k| ToolCall {
                            id: format!("c{step}-{k}"),
                            name: "read".to_owned(),
                            arguments: serde_json::json!({}),
                        })
                        .collect();
                    let entry_id = batch.entry(EntryBody::Assistant {
                        request_id: request_id.clone(),
                        message: tool_response(&format!("response {step}"), calls.clone()),
                    });
                    batch.task(Task::Model {
                        request_id: request_id.clone(),
                        step: 0,
                        state: ModelTaskState::Completed { entry_id },
                    });
                    for call in calls {
                        batch.task(Task::Tool {
                            request_id: request_id.clone(),
                            call_id: call.id.clone(),
                            name: call.name,
                            state: ToolTaskState::Started,
                        });
                        open_calls.push(call.id);
                    }
                }
                (4, Some(request_id)) if !open_calls.is_empty() => {
                    let call_id = open_calls.remove(0);
                    let entry_id = batch.entry(EntryBody::ToolResult {
                        request_id: request_id.clone(),
                        message: ToolResultMessage {
                            tool_call_id: call_id.clone(),
                            tool_name: "read".to_owned(),
                            content: format!("result {step}"),
                            is_error: false,
                            images: Vec::new(),
                        },
                        ends_turn: false,
                        placeholder: false,
                    });
                    batch.task(Task::Tool {
                        request_id,
                        call_id,
                        name: "read".to_owned(),
                        state: ToolTaskState::Completed { entry_id },
                    });
                }
                (5, Some(request_id)) => batch.document(
                    LIVE_DOCUMENT,
                    Some(&LiveDocument {
                        request_id,
                        text: format!("so far {step}"),
                        thinking: String::new(),
                        tool_calls: Vec::new(),
                        state: crate::record::LiveState::Streaming,
                        error: None,
                    }),
                ),
                (6, _) => {
                    batch.document::<LiveDocument>(LIVE_DOCUMENT, None);
                    let target = u64::from(choice) % state.next_entry_id().max(2) + 1;
                    batch.entry(EntryBody::Edit {
                        target,
                        message: Message::User(UserMessage::new(format!("edited {step}"))),
                    });
                }
                (_, Some(_)) => {
                    if let Some(mut doc) = turn.take() {
                        doc.state = TurnState::Answered;
                        batch.document(TURN_DOCUMENT, Some(&doc));
                    }
                }
            }
            batches.push([
                lines(&batch, FileName::Entries),
                lines(&batch, FileName::Documents),
                lines(&batch, FileName::Tasks),
            ]);
            state.apply(batch);
        }
        (state, batches)
    }

    fn file_lines(batches: &[[Vec<String>; 3]], file: usize) -> Vec<String> {
        batches
            .iter()
            .flat_map(|batch| batch[file].clone())
            .collect()
    }

    proptest::proptest! {
        /// A state opened from what was kept at any line, and the lines after it, reads as the
        /// state folded from every line: the same context, system prompt, documents, next
        /// entry, next action of the open turn and tasks not ended, and it keeps the same
        /// again, also when a new turn takes an earlier turn's request id.
        #[test]
        fn a_state_opened_kept_reads_as_the_state_folded_from_every_line(
            choices in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..60)
        ) {
            use proptest::prop_assert_eq;
            let (applied, batches) = written(&choices);
            let all = |file| file_lines(&batches, file);
            let full = StoreState::fold(&all(0), &all(1), &all(2)).expect("folds");
            prop_assert_eq!(&full, &applied);
            for split in 0..=batches.len() {
                let before = |file| file_lines(&batches[..split], file);
                let after = |file| file_lines(&batches[split..], file);
                let kept = StoreState::fold(&before(0), &before(1), &before(2))
                    .expect("folds")
                    .kept();
                let entries: Vec<String> = all(0)
                    .into_iter()
                    .skip(usize::try_from(kept.first_entry_id - 1).expect("fits"))
                    .collect();
                let opened =
                    StoreState::open_kept(kept, &entries, &after(1), &after(2)).expect("opens");
                prop_assert_eq!(
                    crate::context::conversation(&opened.entries),
                    crate::context::conversation(&full.entries)
                );
                prop_assert_eq!(opened.system(), full.system());
                prop_assert_eq!(&opened.documents, &full.documents);
                prop_assert_eq!(opened.next_entry_id(), full.next_entry_id());
                prop_assert_eq!(opened.kept(), full.kept());
                if let Some(turn) = full.turn() {
                    prop_assert_eq!(
                        crate::turn::next_action(&opened, &turn, |_| false),
                        crate::turn::next_action(&full, &turn, |_| false)
                    );
                    for task in full.tasks.values().filter(|task| !task.is_ended()) {
                        prop_assert_eq!(opened.task(&task.key()), Some(task));
                    }
                }
            }
        }
    }

    #[test]
    fn a_bad_line_is_reported_with_its_place() {
        let error = StoreState::fold(
            &[
                "{\"id\":1,\"type\":\"pi.reset\"}".to_owned(),
                "{".to_owned(),
            ],
            &[],
            &[],
        )
        .expect_err("a torn line");
        assert_eq!((error.file, error.line_idx), (FileName::Entries, 1));
        let gap = StoreState::fold(&["{\"id\":2,\"type\":\"pi.reset\"}".to_owned()], &[], &[])
            .expect_err("ids must start at 1");
        assert!(gap.detail.contains("entry id 2"), "{gap}");
    }
}
