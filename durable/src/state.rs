//! The store folded into memory, and the batches that change it.
//!
//! A [`Batch`] holds typed records; it is serialized into one atomic commit of the durable files
//! and, once that commit succeeds, applied to the [`StoreState`] by the same fold that opening
//! uses, so the state in memory is always exactly what the store holds.

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

/// Everything a store holds, folded.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StoreState {
    pub entries: Vec<Entry>,
    /// The newest value of each document; a cleared document is absent.
    pub documents: BTreeMap<String, serde_json::Value>,
    /// The newest line of each task, by [`Task::key`].
    pub tasks: BTreeMap<String, Task>,
    /// Where the newest `pi.system` entry sits, so finding it does not scan the history.
    newest_system_idx: Option<usize>,
}

impl StoreState {
    /// Folds the three files' lines, in commit order.
    pub fn fold(
        entries: &[String],
        documents: &[String],
        tasks: &[String],
    ) -> Result<StoreState, CorruptLine> {
        let mut state = StoreState::default();
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
        Ok(state)
    }

    /// The id the next entry gets.
    pub fn next_entry_id(&self) -> EntryId {
        self.entries.last().map_or(1, |entry| entry.id + 1)
    }

    pub fn entry(&self, id: EntryId) -> Option<&Entry> {
        // Ids are dense from 1, so the entry sits at index id - 1.
        let entry = self
            .entries
            .get(usize::try_from(id).ok()?.checked_sub(1)?)?;
        debug_assert_eq!(entry.id, id);
        Some(entry)
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
        match &self.entries.get(self.newest_system_idx?)?.body {
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
