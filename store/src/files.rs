//! The durable file system over rows: a session's file is its `session_durable_files` rows in id
//! order, and an append is one inserted row.

use std::sync::{Arc, Mutex, OnceLock};

use crate::params;
use crate::sql::{Connection, LaterRows, OptionalExtension};
use seed_durable::{Append, DurableFs, FileName};
use seed_events::SessionId;

use crate::sessions::{key_for_read, key_for_write};
use crate::{Error, Result, Store};

/// One session's durable files, as the durable loop sees them.
#[derive(Debug, Clone)]
pub struct SessionFiles {
    pub(crate) store: Store,
    session_id: SessionId,
    /// The session's integer key, looked up by the first commit. Keys are never reused, so
    /// once the session is deleted a commit under this key is refused by its foreign key.
    pub(crate) session_key: Arc<OnceLock<i64>>,
    /// On PostgreSQL, the id of the newest line these files committed since it was last
    /// taken ([`SessionFiles::take_newest_line_written`]).
    newest_line_written: Arc<Mutex<Option<i64>>>,
}

impl SessionFiles {
    pub(crate) fn new(store: Store, session_id: SessionId) -> Self {
        SessionFiles {
            store,
            session_id,
            session_key: Arc::default(),
            newest_line_written: Arc::default(),
        }
    }

    pub fn session_id(&self) -> SessionId {
        self.session_id
    }

    /// On PostgreSQL, the id of the newest line these files committed since the last call
    /// (`None` when they committed none; always `None` on SQLite). While the session's lease
    /// holds, no one else writes its lines: it is then the session's newest line
    /// ([`Store::newest_durable_line`]) with no read.
    pub fn take_newest_line_written(&self) -> Option<i64> {
        self.newest_line_written
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .take()
    }

    /// Notes the ids of the lines a commit wrote, once it committed. They only spare a read:
    /// ids that cannot be had (none should) leave the note as it was, and whoever takes it
    /// reads the newest line instead.
    pub(crate) fn note_lines_written(&self, ids: Vec<LaterRows<i64>>) {
        let mut newest = None;
        for ids in ids {
            let Ok(ids) = ids.values() else {
                return;
            };
            newest = ids.into_iter().max().max(newest);
        }
        if newest.is_some() {
            let mut written = self
                .newest_line_written
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            *written = newest.max(*written);
        }
    }
}

impl DurableFs for SessionFiles {
    type Error = Error;

    async fn read(&self, file: FileName) -> Result<Vec<String>> {
        let session_id = self.session_id;
        self.store
            .read(move |connection| read_lines(connection, session_id, file))
            .await
    }

    async fn open_lines(&self) -> Result<seed_durable::OpenLines> {
        self.open_lines_kept().await
    }

    async fn keep(&self, kept: &seed_durable::Kept) -> Result<()> {
        self.keep_kept(kept).await
    }

    async fn commit(&self, batch: Vec<Append>) -> Result<()> {
        let session_id = self.session_id;
        let session_key = Arc::clone(&self.session_key);
        let known_key = session_key.get().copied();
        let ids = self
            .store
            .write_appends(session_id, known_key, move |connection| {
                let key = known_key_for_write(&session_key, connection, session_id)?;
                append_lines(connection, key, &batch)
            })
            .await?;
        self.note_lines_written(ids);
        Ok(())
    }
}

/// The session's key, as `known` holds it once a commit looked it up.
pub(crate) fn known_key_for_write(
    known: &OnceLock<i64>,
    connection: &Connection,
    session_id: SessionId,
) -> Result<i64> {
    match known.get() {
        Some(key) => Ok(*key),
        None => {
            let key = key_for_write(connection, session_id)?;
            Ok(*known.get_or_init(|| key))
        }
    }
}

// `newest_line_id`'s statement names the three files by code, as the table's CHECK does.
const _: () = assert!(FileName::ALL.len() == 3, "newest_line_id names every file");

/// The id of the session's newest durable line, of any file; `None` when it has none or is
/// gone. A line's id is its row's, which only grows: a harness folded up to this line is
/// current as long as it is still the newest. Three seeks of `session_durable_files_by_file`,
/// one statement.
pub(crate) fn newest_line_id(
    connection: &Connection,
    session_id: SessionId,
) -> Result<Option<i64>> {
    let newest: [Option<i64>; 3] = connection
        .prepare_cached(
            "SELECT (SELECT MAX(id) FROM session_durable_files WHERE session_key = s.key AND file = 0),
                    (SELECT MAX(id) FROM session_durable_files WHERE session_key = s.key AND file = 1),
                    (SELECT MAX(id) FROM session_durable_files WHERE session_key = s.key AND file = 2)
             FROM sessions AS s WHERE s.id = ?1",
        )?
        .query_row(params![session_id.to_string()], |row| {
            Ok([row.get(0)?, row.get(1)?, row.get(2)?])
        })
        .optional()?
        .unwrap_or_default();
    Ok(newest.into_iter().flatten().max())
}

impl Store {
    /// The id of the session's newest durable line (see `newest_line_id`): on a database
    /// several nodes share, a node that kept a session's harness since its last run asks
    /// whether another node has written the session since.
    pub async fn newest_durable_line(&self, session_id: SessionId) -> Result<Option<i64>> {
        self.read(move |connection| newest_line_id(connection, session_id))
            .await
    }
}

pub(crate) fn read_lines(
    connection: &Connection,
    session_id: SessionId,
    file: FileName,
) -> Result<Vec<String>> {
    let session_key = key_for_read(connection, session_id)?;
    let mut statement = connection.prepare_cached(
        "SELECT line FROM session_durable_files WHERE session_key = ?1 AND file = ?2 ORDER BY id",
    )?;
    let lines = statement
        .query_map(params![session_key, file.code()], |row| row.get(0))?
        .collect::<Result<Vec<String>>>()?;
    Ok(lines)
}

/// The most rows one insert of a batch of appends carries on PostgreSQL.
const LINES_PER_INSERT_MAX: usize = 8;

/// The statements that insert 1 to [`LINES_PER_INSERT_MAX`] appends at once, by count - 1;
/// with `locking`, each takes the session's row first, as an append to its log does (see
/// [`append_lines_locking`]).
fn multi_row_inserts(locking: bool) -> &'static [String] {
    static INSERTS: OnceLock<[Vec<String>; 2]> = OnceLock::new();
    let [plain, locked] = INSERTS.get_or_init(|| {
        let plain = (1..=LINES_PER_INSERT_MAX)
            .map(|n_rows| {
                let rows: Vec<String> = (0..n_rows)
                    .map(|row| format!("(?1, ?{}, ?{})", 2 + 2 * row, 3 + 2 * row))
                    .collect();
                format!(
                    "INSERT INTO session_durable_files (session_key, file, line) VALUES {}
                     RETURNING id",
                    rows.join(", ")
                )
            })
            .collect();
        // The session's key NULL when its row is gone: the insert fails, as the foreign key
        // would fail it. The rows go in the order given.
        let locked = (1..=LINES_PER_INSERT_MAX)
            .map(|n_rows| {
                let rows: Vec<String> = (0..n_rows)
                    .map(|row| {
                        format!(
                            "({}, CAST(?{} AS BIGINT), CAST(?{} AS TEXT))",
                            row + 1,
                            2 + 2 * row,
                            3 + 2 * row
                        )
                    })
                    .collect();
                format!(
                    "WITH locked AS MATERIALIZED (
                         SELECT key FROM sessions WHERE key = CAST(?1 AS BIGINT) FOR NO KEY UPDATE)
                     INSERT INTO session_durable_files (session_key, file, line)
                     SELECT (SELECT key FROM locked), v.file, v.line
                     FROM (VALUES {}) AS v (n, file, line)
                     ORDER BY v.n
                     RETURNING id",
                    rows.join(", ")
                )
            })
            .collect();
        [plain, locked]
    });
    if locking { locked } else { plain }
}

/// Inserts one row per append, in order. The foreign key refuses a deleted session's batch.
/// On PostgreSQL, where each statement is a round trip to the server, the rows go several to
/// a statement (a `VALUES` list numbers its rows in order), and the ids they were given come
/// back once the transaction's answers are read (none on SQLite).
pub(crate) fn append_lines(
    connection: &Connection,
    session_key: i64,
    batch: &[Append],
) -> Result<Vec<LaterRows<i64>>> {
    append_lines_as(connection, session_key, batch, false).map(|(_, ids)| ids)
}

/// [`append_lines`], and on PostgreSQL the session's row taken first (`FOR NO KEY UPDATE`) by
/// the same statement, as an append to the session's log takes it: the log's append that
/// follows in the transaction need not take it again. Returns whether the row was taken
/// (PostgreSQL, and lines to append), and the lines' ids as [`append_lines`] does.
pub(crate) fn append_lines_locking(
    connection: &Connection,
    session_key: i64,
    batch: &[Append],
) -> Result<(bool, Vec<LaterRows<i64>>)> {
    append_lines_as(connection, session_key, batch, true)
}

fn append_lines_as(
    connection: &Connection,
    session_key: i64,
    batch: &[Append],
    locking: bool,
) -> Result<(bool, Vec<LaterRows<i64>>)> {
    if connection.engine() == crate::Engine::Postgres {
        let mut ids = Vec::new();
        for (idx, chunk) in batch.chunks(LINES_PER_INSERT_MAX).enumerate() {
            let codes: Vec<i64> = chunk
                .iter()
                .map(|append| i64::from(append.file.code()))
                .collect();
            let mut values: Vec<&dyn crate::sql::ToSql> = Vec::with_capacity(1 + 2 * chunk.len());
            values.push(&session_key);
            for (append, code) in chunk.iter().zip(&codes) {
                values.push(code);
                values.push(&append.line);
            }
            // Not waited for: the answer comes with the next statement's (see `send`).
            ids.push(
                connection
                    .prepare_cached(&multi_row_inserts(locking && idx == 0)[chunk.len() - 1])?
                    .send_query_map(&values, |row| row.get::<_, i64>(0))?,
            );
        }
        return Ok((locking && !batch.is_empty(), ids));
    }
    let mut insert = connection.prepare_cached(
        "INSERT INTO session_durable_files (session_key, file, line) VALUES (?1, ?2, ?3)",
    )?;
    for append in batch {
        insert.execute(params![session_key, append.file.code(), append.line])?;
    }
    Ok((false, Vec::new()))
}

/// How many of a session's newest document lines are searched for `pi.live`: while a response
/// streams, nothing but its own `pi.live` lines is committed to the documents, so the one in
/// flight is always among the newest few.
const LIVE_SEARCH_LINES_MAX: usize = 16;

impl Store {
    /// The response in flight in the session's store, as its newest `pi.live` line holds it:
    /// `None` when none of the newest document lines sets it (nothing streamed since, or it
    /// was cleared by the response's commit).
    pub async fn live_document(
        &self,
        session_id: SessionId,
    ) -> Result<Option<seed_durable::record::LiveDocument>> {
        self.read(move |connection| {
            let session_key = key_for_read(connection, session_id)?;
            let mut statement = connection.prepare_cached(
                "SELECT line FROM session_durable_files WHERE session_key = ?1 AND file = ?2
                 ORDER BY id DESC LIMIT ?3",
            )?;
            let mut rows = statement.query(params![
                session_key,
                FileName::Documents.code(),
                LIVE_SEARCH_LINES_MAX as i64
            ])?;
            while let Some(row) = rows.next()? {
                let line: String = row.get(0)?;
                let Ok(document) =
                    serde_json::from_str::<seed_durable::record::DocumentLine>(&line)
                else {
                    continue;
                };
                if document.name == seed_durable::record::LIVE_DOCUMENT {
                    return Ok(serde_json::from_value(document.value).ok());
                }
            }
            Ok(None)
        })
        .await
    }
}
