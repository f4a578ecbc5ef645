//! Memory files: what an agent keeps under `~/memory/`, one row of `memory_files` per file,
//! scoped to the account.

use rusqlite::{Connection, OptionalExtension, params};
use seed_events::AccountId;

use crate::effects::{self, CallEffect};
use crate::{Error, Result, Store};

/// Every memory path starts with this.
pub(crate) const MEMORY_PATH_PREFIX: &str = "~/memory/";

/// The longest memory path, prefix included.
pub(crate) const MEMORY_PATH_BYTES_MAX: usize = 512;

/// One memory file, as listed (without its content).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemoryFileRow {
    /// The full path, starting with `~/memory/`.
    pub path: String,
    /// The content's length in bytes (UTF-8).
    pub size_bytes: u64,
    /// When the file was last written or appended to.
    pub updated_at_ms: i64,
}

/// Checks a memory path before anything is written or read under it: it starts with
/// `~/memory/`, is at most [`MEMORY_PATH_BYTES_MAX`] bytes, and every component after the prefix
/// is a plain name (not empty, not `.` or `..`), so one file has exactly one path.
pub(crate) fn validate_path(path: &str) -> Result<()> {
    let invalid = |reason: &'static str| {
        Err(Error::InvalidPath {
            path: path.to_owned(),
            reason,
        })
    };
    if path.len() > MEMORY_PATH_BYTES_MAX {
        return invalid("longer than 512 bytes");
    }
    let Some(relative) = path.strip_prefix(MEMORY_PATH_PREFIX) else {
        return invalid("does not start with ~/memory/");
    };
    for component in relative.split('/') {
        match component {
            "" => return invalid("has an empty component"),
            "." => return invalid("has a . component"),
            ".." => return invalid("has a .. component"),
            _ => {}
        }
    }
    Ok(())
}

/// Creates the file, or replaces its content.
pub(crate) fn write_memory(
    connection: &Connection,
    account_id: AccountId,
    path: &str,
    content: &str,
    now_ms: i64,
) -> Result<()> {
    validate_path(path)?;
    connection
        .prepare_cached(
            "INSERT INTO memory_files (account_id, path, content, updated_at)
             VALUES (?1, ?2, ?3, ?4)
             ON CONFLICT (account_id, path)
             DO UPDATE SET content = excluded.content, updated_at = excluded.updated_at",
        )?
        .execute(params![account_id.to_string(), path, content, now_ms])?;
    Ok(())
}

/// Appends `text` to the file as given (no separator added), creating the file if missing.
pub(crate) fn append_memory(
    connection: &Connection,
    account_id: AccountId,
    path: &str,
    text: &str,
    now_ms: i64,
) -> Result<()> {
    validate_path(path)?;
    connection
        .prepare_cached(
            "INSERT INTO memory_files (account_id, path, content, updated_at)
             VALUES (?1, ?2, ?3, ?4)
             ON CONFLICT (account_id, path)
             DO UPDATE SET content = content || excluded.content,
                           updated_at = excluded.updated_at",
        )?
        .execute(params![account_id.to_string(), path, text, now_ms])?;
    Ok(())
}

/// Deletes the file. Returns whether it existed.
pub(crate) fn delete_memory(
    connection: &Connection,
    account_id: AccountId,
    path: &str,
) -> Result<bool> {
    validate_path(path)?;
    let n_deleted = connection
        .prepare_cached("DELETE FROM memory_files WHERE account_id = ?1 AND path = ?2")?
        .execute(params![account_id.to_string(), path])?;
    Ok(n_deleted == 1)
}

/// The file's content, `None` when there is no such file.
pub(crate) fn read_memory(
    connection: &Connection,
    account_id: AccountId,
    path: &str,
) -> Result<Option<String>> {
    validate_path(path)?;
    Ok(connection
        .prepare_cached("SELECT content FROM memory_files WHERE account_id = ?1 AND path = ?2")?
        .query_row(params![account_id.to_string(), path], |row| row.get(0))
        .optional()?)
}

/// The account's memory files, sorted by path (byte order).
pub(crate) fn list_memory(
    connection: &Connection,
    account_id: AccountId,
) -> Result<Vec<MemoryFileRow>> {
    let mut statement = connection.prepare_cached(
        "SELECT path, length(CAST(content AS BLOB)), updated_at FROM memory_files
         WHERE account_id = ?1 ORDER BY path",
    )?;
    let rows = statement.query_map(params![account_id.to_string()], |row| {
        Ok((
            row.get::<_, String>(0)?,
            row.get::<_, i64>(1)?,
            row.get::<_, i64>(2)?,
        ))
    })?;
    let mut files = Vec::new();
    for row in rows {
        let (path, size_bytes, updated_at_ms) = row?;
        files.push(MemoryFileRow {
            path,
            size_bytes: u64::try_from(size_bytes).map_err(|e| Error::corrupt("memory_files", e))?,
            updated_at_ms,
        });
    }
    Ok(files)
}

/// One change to a memory file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MemoryChange {
    /// Creates the file, or replaces its content.
    Write { content: String },
    /// Appends `text` as given (no separator added), creating the file if it is missing.
    Append { text: String },
    /// Removes the file.
    Delete,
}

impl Store {
    /// Changes the account's memory file at `path` (under `~/memory/`). With `effect`, the
    /// same transaction records that the call took effect ([`CallEffect`]), when it did: a
    /// delete of a file that does not exist changes nothing and records nothing. Returns
    /// whether it took effect. An invalid path is refused with [`crate::Error::InvalidPath`]
    /// before anything is sent to the writer.
    pub async fn change_memory(
        &self,
        account_id: AccountId,
        path: &str,
        change: MemoryChange,
        now_ms: i64,
        effect: Option<CallEffect>,
    ) -> Result<bool> {
        validate_path(path)?;
        let path = path.to_owned();
        let scope = effect.as_ref().map(|effect| effect.session_id);
        self.write(scope, move |connection| {
            let took_effect = match &change {
                MemoryChange::Write { content } => {
                    write_memory(connection, account_id, &path, content, now_ms)?;
                    true
                }
                MemoryChange::Append { text } => {
                    append_memory(connection, account_id, &path, text, now_ms)?;
                    true
                }
                MemoryChange::Delete => delete_memory(connection, account_id, &path)?,
            };
            if took_effect && let Some(effect) = &effect {
                effects::record(connection, effect, now_ms)?;
            }
            Ok(took_effect)
        })
        .await
    }

    /// Creates the account's memory file at `path` (under `~/memory/`), or replaces its
    /// content. An invalid path is refused with [`crate::Error::InvalidPath`] before anything is sent
    /// to the writer.
    pub async fn write_memory(
        &self,
        account_id: AccountId,
        path: &str,
        content: String,
        now_ms: i64,
    ) -> Result<()> {
        validate_path(path)?;
        let path = path.to_owned();
        self.write(None, move |connection| {
            write_memory(connection, account_id, &path, &content, now_ms)
        })
        .await
    }

    /// Appends `text` to the account's memory file at `path` as given (no separator added),
    /// creating the file if it is missing. An invalid path is refused with
    /// [`crate::Error::InvalidPath`].
    pub async fn append_memory(
        &self,
        account_id: AccountId,
        path: &str,
        text: String,
        now_ms: i64,
    ) -> Result<()> {
        validate_path(path)?;
        let path = path.to_owned();
        self.write(None, move |connection| {
            append_memory(connection, account_id, &path, &text, now_ms)
        })
        .await
    }

    /// Deletes the account's memory file at `path`. Returns whether it existed.
    pub async fn delete_memory(&self, account_id: AccountId, path: &str) -> Result<bool> {
        validate_path(path)?;
        let path = path.to_owned();
        self.write(None, move |connection| {
            delete_memory(connection, account_id, &path)
        })
        .await
    }

    /// The content of the account's memory file at `path`, `None` when there is none.
    pub async fn read_memory(&self, account_id: AccountId, path: &str) -> Result<Option<String>> {
        validate_path(path)?;
        let path = path.to_owned();
        self.read(move |connection| read_memory(connection, account_id, &path))
            .await
    }

    /// The account's memory files, sorted by path.
    pub async fn list_memory(&self, account_id: AccountId) -> Result<Vec<MemoryFileRow>> {
        self.read(move |connection| list_memory(connection, account_id))
            .await
    }
}
