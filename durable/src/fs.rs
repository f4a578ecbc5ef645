//! The durable file system: append-only line files, one set per session.

use std::collections::BTreeMap;
use std::fmt;
use std::future::Future;
use std::sync::{Arc, Mutex};

use crate::state::{Batch, Kept};

/// The files a durable store keeps. Each is an append-only list of lines (JSON documents).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum FileName {
    /// The immutable transcript.
    Entries,
    /// Small JSON state committed together with entries.
    Documents,
    /// The checkpointed state machines of the turn in flight.
    Tasks,
}

impl FileName {
    pub const ALL: [FileName; 3] = [FileName::Entries, FileName::Documents, FileName::Tasks];

    /// The file's name as stored (`entries.jsonl`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            FileName::Entries => "entries.jsonl",
            FileName::Documents => "documents.jsonl",
            FileName::Tasks => "tasks.jsonl",
        }
    }

    /// A small number for the file, for stores that keep it in a column: 0, 1, 2.
    pub fn code(self) -> u8 {
        match self {
            FileName::Entries => 0,
            FileName::Documents => 1,
            FileName::Tasks => 2,
        }
    }

    /// The file with this stored name, if it is one of ours.
    pub fn parse(name: &str) -> Option<FileName> {
        FileName::ALL.into_iter().find(|file| file.as_str() == name)
    }
}

impl fmt::Display for FileName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One line appended to one file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Append {
    pub file: FileName,
    pub line: String,
}

impl Append {
    pub fn new(file: FileName, line: impl Into<String>) -> Self {
        Append {
            file,
            line: line.into(),
        }
    }
}

/// One session's durable files.
///
/// Invariant: a committed batch is visible whole or not at all, and lines come back in the
/// order they were committed. An error from `commit` means nothing of the batch was written;
/// the harness treats it as the end of its turn (the store may be full, or the session gone).
pub trait DurableFs: Send + Sync {
    type Error: std::error::Error + Send + Sync + 'static;

    /// Every line of `file`, in commit order.
    fn read(&self, file: FileName)
    -> impl Future<Output = Result<Vec<String>, Self::Error>> + Send;

    /// Appends every line of `batch` atomically, across files, in the order given.
    fn commit(&self, batch: Vec<Append>) -> impl Future<Output = Result<(), Self::Error>> + Send;

    /// Commits a harness's batch: its lines, as [`DurableFs::commit`] appends them. A file
    /// system that writes more in the same transaction (Seed's log, projected from the batch's
    /// entries) reads the typed records here instead of parsing the lines again.
    fn commit_batch(&self, batch: &Batch) -> impl Future<Output = Result<(), Self::Error>> + Send {
        self.commit(batch.to_appends())
    }

    /// The lines a harness opens from: what the store last kept ([`DurableFs::keep`]) and the
    /// lines after it, or, when it kept nothing, every line. Keeping nothing by default.
    fn open_lines(&self) -> impl Future<Output = Result<OpenLines, Self::Error>> + Send {
        async move {
            let entries = self.read(FileName::Entries).await?;
            let documents = self.read(FileName::Documents).await?;
            let tasks = self.read(FileName::Tasks).await?;
            Ok(OpenLines {
                n_after_kept: entries.len() + documents.len() + tasks.len(),
                kept: None,
                entries,
                documents,
                tasks,
            })
        }
    }

    /// Keeps what a turn can still read of the store as it is now (every committed line
    /// folded), so that a later open reads only the lines after it. The caller holds the files
    /// (no commit in flight). A file system that keeps nothing ignores it.
    fn keep(&self, kept: &Kept) -> impl Future<Output = Result<(), Self::Error>> + Send {
        let _ = kept;
        async { Ok(()) }
    }
}

/// What [`DurableFs::open_lines`] reads.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct OpenLines {
    /// What the store kept, when it kept something: `entries` are then the entry lines from
    /// its `first_entry_id` on, `documents` and `tasks` the lines committed after it.
    pub kept: Option<Kept>,
    pub entries: Vec<String>,
    pub documents: Vec<String>,
    pub tasks: Vec<String>,
    /// Lines committed after what was kept (every line when nothing was).
    pub n_after_kept: usize,
}

/// An error from [`MemoryFs`]: its only failure is one a test asked for.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MemoryFsError {
    #[error("commit refused: injected failure")]
    Injected,
    #[error("commit refused: the store crashed")]
    Crashed,
}

/// An in-memory [`DurableFs`] for tests. Clones share the same files.
#[derive(Debug, Clone, Default)]
pub struct MemoryFs {
    inner: Arc<Mutex<MemoryFsState>>,
}

#[derive(Debug, Default)]
struct MemoryFsState {
    files: BTreeMap<FileName, Vec<String>>,
    /// Commits left before the next one is refused; `None` never refuses.
    fail_after_commits: Option<usize>,
    /// Commits left before the store "crashes": from then on every commit is refused and
    /// nothing more is written.
    crash_after_commits: Option<usize>,
    crashed: bool,
    n_commits: usize,
}

impl MemoryFs {
    pub fn new() -> Self {
        Self::default()
    }

    /// Refuses the commit after `n_commits` more have succeeded (0: the very next one).
    pub fn fail_after(&self, n_commits: usize) {
        self.lock().fail_after_commits = Some(n_commits);
    }

    /// Crashes after `n_commits` more commits: every commit after those is refused and leaves
    /// nothing behind, as if the process had died. [`MemoryFs::revive`] reopens what survived.
    pub fn crash_after(&self, n_commits: usize) {
        let mut state = self.lock();
        state.crash_after_commits = Some(n_commits);
        state.crashed = n_commits == 0;
    }

    pub fn is_crashed(&self) -> bool {
        self.lock().crashed
    }

    /// Commits that succeeded so far.
    pub fn n_commits(&self) -> usize {
        self.lock().n_commits
    }

    /// A new store holding what this one held when it crashed (or now), working again.
    pub fn revive(&self) -> MemoryFs {
        let files = self.snapshot();
        let revived = MemoryFs::new();
        revived.lock().files = files;
        revived
    }

    /// A copy of every file's lines.
    pub fn snapshot(&self) -> BTreeMap<FileName, Vec<String>> {
        self.lock().files.clone()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, MemoryFsState> {
        // A panic while holding this lock is a test failure already; keep serving its data.
        self.inner
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl DurableFs for MemoryFs {
    type Error = MemoryFsError;

    async fn read(&self, file: FileName) -> Result<Vec<String>, MemoryFsError> {
        Ok(self.lock().files.get(&file).cloned().unwrap_or_default())
    }

    async fn commit(&self, batch: Vec<Append>) -> Result<(), MemoryFsError> {
        let mut state = self.lock();
        if state.crashed {
            return Err(MemoryFsError::Crashed);
        }
        match state.fail_after_commits {
            Some(0) => {
                state.fail_after_commits = None;
                return Err(MemoryFsError::Injected);
            }
            Some(n) => state.fail_after_commits = Some(n - 1),
            None => {}
        }
        for append in batch {
            state
                .files
                .entry(append.file)
                .or_default()
                .push(append.line);
        }
        state.n_commits += 1;
        if let Some(left) = state.crash_after_commits.as_mut() {
            *left = left.saturating_sub(1);
            state.crashed = *left == 0;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::executor::block_on;

    #[test]
    fn memory_fs_keeps_commit_order_and_refuses_whole_batches() {
        let fs = MemoryFs::new();
        block_on(async {
            fs.commit(vec![
                Append::new(FileName::Entries, "a"),
                Append::new(FileName::Documents, "d"),
            ])
            .await
            .expect("first commit");
            fs.fail_after(0);
            let refused = fs
                .commit(vec![Append::new(FileName::Entries, "lost")])
                .await;
            assert_eq!(refused, Err(MemoryFsError::Injected));
            fs.commit(vec![Append::new(FileName::Entries, "b")])
                .await
                .expect("third commit");
            assert_eq!(
                fs.read(FileName::Entries).await,
                Ok(vec!["a".to_owned(), "b".to_owned()])
            );
            assert_eq!(fs.read(FileName::Tasks).await, Ok(vec![]));
        });
    }

    #[test]
    fn file_names_parse_back() {
        for file in FileName::ALL {
            assert_eq!(FileName::parse(file.as_str()), Some(file));
            assert_eq!(FileName::ALL[usize::from(file.code())], file);
        }
        assert_eq!(FileName::parse("other.jsonl"), None);
    }
}
