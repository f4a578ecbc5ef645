//! What a session's durable files fold to, kept (`session_durable_kept`): a harness opens from
//! it and the lines after it (`seed_durable::Kept`), so that opening a long session reads its
//! context — the entries since the newest reset — and the lines of its last few hundred, not
//! its whole history.

use std::sync::Arc;

use crate::params;
use crate::sql::{Connection, OptionalExtension};
use seed_durable::{FileName, Kept, OpenLines};
use seed_events::SessionId;

use crate::files::{SessionFiles, known_key_for_write};
use crate::sessions::key_for_read;
use crate::{Error, Result};

impl SessionFiles {
    /// The lines a harness opens from: what was kept and the lines after it, or every line.
    pub(crate) async fn open_lines_kept(&self) -> Result<OpenLines> {
        let session_id = self.session_id();
        self.store
            .read(move |connection| open_lines(connection, session_id))
            .await
    }

    /// Keeps `kept`, the state folded from every line committed so far.
    pub(crate) async fn keep_kept(&self, kept: &Kept) -> Result<()> {
        let text =
            serde_json::to_string(kept).map_err(|e| Error::corrupt("session_durable_kept", e))?;
        let first_entry_id = i64::try_from(kept.first_entry_id)
            .map_err(|e| Error::corrupt("session_durable_kept", e))?;
        let session_id = self.session_id();
        let session_key = Arc::clone(&self.session_key);
        self.store
            .write(Some(session_id), move |connection| {
                let key = known_key_for_write(&session_key, connection, session_id)?;
                keep(connection, key, first_entry_id, &text)
            })
            .await
    }
}

/// A file's lines of the session `key` from the row `from_id` on, with their rows.
fn lines_from(
    connection: &Connection,
    key: i64,
    file: FileName,
    from_id: i64,
) -> Result<Vec<(i64, String)>> {
    let mut statement = connection.prepare_cached(
        "SELECT id, line FROM session_durable_files
         WHERE session_key = ?1 AND file = ?2 AND id >= ?3 ORDER BY id",
    )?;
    let lines = statement
        .query_map(params![key, file.code(), from_id], |row| {
            Ok((row.get(0)?, row.get(1)?))
        })?
        .collect::<Result<Vec<(i64, String)>>>()?;
    Ok(lines)
}

fn lines_only(lines: Vec<(i64, String)>) -> Vec<String> {
    lines.into_iter().map(|(_, line)| line).collect()
}

pub(crate) fn open_lines(connection: &Connection, session_id: SessionId) -> Result<OpenLines> {
    let key = key_for_read(connection, session_id)?;
    let kept: Option<(i64, i64, String)> = connection
        .prepare_cached(
            "SELECT upto_id, entries_from_id, kept FROM session_durable_kept
             WHERE session_key = ?1",
        )?
        .query_row(params![key], |row| {
            Ok((row.get(0)?, row.get(1)?, row.get(2)?))
        })
        .optional()?;
    let Some((upto_id, entries_from_id, text)) = kept else {
        let entries = lines_only(lines_from(connection, key, FileName::Entries, 0)?);
        let documents = lines_only(lines_from(connection, key, FileName::Documents, 0)?);
        let tasks = lines_only(lines_from(connection, key, FileName::Tasks, 0)?);
        return Ok(OpenLines {
            n_after_kept: entries.len() + documents.len() + tasks.len(),
            kept: None,
            entries,
            documents,
            tasks,
        });
    };
    let kept: Kept =
        serde_json::from_str(&text).map_err(|e| Error::corrupt("session_durable_kept", e))?;
    let entries = lines_from(connection, key, FileName::Entries, entries_from_id)?;
    let documents = lines_only(lines_from(
        connection,
        key,
        FileName::Documents,
        upto_id + 1,
    )?);
    let tasks = lines_only(lines_from(connection, key, FileName::Tasks, upto_id + 1)?);
    let n_entries_after = entries.iter().filter(|(id, _)| *id > upto_id).count();
    Ok(OpenLines {
        n_after_kept: n_entries_after + documents.len() + tasks.len(),
        kept: Some(kept),
        entries: lines_only(entries),
        documents,
        tasks,
    })
}

/// Keeps `text` (a `Kept` whose context starts at entry `first_entry_id`) as the fold of every
/// line of the session `key` committed so far. The row of that entry is found from the one
/// kept before (entries are dense, one row each, in order): a count over the entries since,
/// not over the history.
fn keep(connection: &Connection, key: i64, first_entry_id: i64, text: &str) -> Result<()> {
    let mut newest = connection.prepare_cached(
        "SELECT max(id) FROM session_durable_files WHERE session_key = ?1 AND file = ?2",
    )?;
    let mut upto_id = 0;
    for file in FileName::ALL {
        let newest: Option<i64> = newest.query_row(params![key, file.code()], |row| row.get(0))?;
        upto_id = upto_id.max(newest.unwrap_or(0));
    }
    let before: Option<(i64, i64)> = connection
        .prepare_cached(
            "SELECT first_entry_id, entries_from_id FROM session_durable_kept
             WHERE session_key = ?1",
        )?
        .query_row(params![key], |row| Ok((row.get(0)?, row.get(1)?)))
        .optional()?;
    let (from_id, skip) = match before {
        Some((kept_first, kept_from)) if kept_first <= first_entry_id => {
            (kept_from, first_entry_id - kept_first)
        }
        _ => (0, first_entry_id - 1),
    };
    let entries_from_id: i64 = connection
        .prepare_cached(
            "SELECT id FROM session_durable_files
             WHERE session_key = ?1 AND file = 0 AND id >= ?2 ORDER BY id LIMIT 1 OFFSET ?3",
        )?
        .query_row(params![key, from_id, skip.max(0)], |row| row.get(0))
        .optional()?
        // No such entry yet: the context starts with the next one committed.
        .unwrap_or(upto_id + 1);
    connection
        .prepare_cached(
            "INSERT INTO session_durable_kept
                 (session_key, upto_id, first_entry_id, entries_from_id, kept)
             VALUES (?1, ?2, ?3, ?4, ?5)
             ON CONFLICT (session_key) DO UPDATE SET
                 upto_id = excluded.upto_id, first_entry_id = excluded.first_entry_id,
                 entries_from_id = excluded.entries_from_id, kept = excluded.kept
             WHERE excluded.upto_id > session_durable_kept.upto_id",
        )?
        .execute(params![key, upto_id, first_entry_id, entries_from_id, text])?;
    Ok(())
}
