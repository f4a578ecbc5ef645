//! Memory files: what an agent keeps under `~/memory/`, one row of `memory_files` per file,
//! scoped to the account.

use crate::error::collect_rows;
use crate::params;
use crate::sql::{Connection, OptionalExtension, Row};
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

/// Why a character may not be in a memory path, `None` when it may. Paths are shown to people
/// and to the model, so none holds what would show one path as another: control characters
/// (and line separators), the bidirectional formatting characters that reorder what follows
/// them, and zero-width characters that make two paths look the same.
pub(crate) fn refused_char(c: char) -> Option<&'static str> {
    match c {
        '\u{2028}' | '\u{2029}' => Some("has a control character"),
        c if c.is_control() => Some("has a control character"),
        '\u{061C}'
        | '\u{200E}'
        | '\u{200F}'
        | '\u{202A}'..='\u{202E}'
        | '\u{2066}'..='\u{2069}' => Some("has a bidirectional formatting character"),
        '\u{200B}'..='\u{200D}' | '\u{2060}' | '\u{FEFF}' | '\u{180E}' => {
            Some("has a zero-width character")
        }
        _ => None,
    }
}

/// Checks a memory path before anything is written or read under it: it starts with
/// `~/memory/`, is at most [`MEMORY_PATH_BYTES_MAX`] bytes, has no character
/// [`refused_char`] refuses, and every component after the prefix is a plain name (not empty,
/// not `.` or `..`), so one file has exactly one path.
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
    if let Some(reason) = path.chars().find_map(refused_char) {
        return invalid(reason);
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
             DO UPDATE SET content = memory_files.content || excluded.content,
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
    connection
        .prepare_cached("SELECT content FROM memory_files WHERE account_id = ?1 AND path = ?2")?
        .query_row(params![account_id.to_string(), path], |row| row.get(0))
        .optional()
}

/// The columns of a memory file as listed ([`memory_file_from_row`]), without its content.
pub(crate) const MEMORY_FILE_COLUMNS: &str = "path, octet_length(content), updated_at";

/// The account's memory files, sorted by path (byte order).
pub(crate) fn list_memory(
    connection: &Connection,
    account_id: AccountId,
) -> Result<Vec<MemoryFileRow>> {
    let mut statement = connection.prepare_cached(&format!(
        "SELECT {MEMORY_FILE_COLUMNS} FROM memory_files WHERE account_id = ?1 ORDER BY path"
    ))?;
    collect_rows(statement.query_map(params![account_id.to_string()], memory_file_from_row)?)
}

/// A memory file as listed, from a row of [`MEMORY_FILE_COLUMNS`].
pub(crate) fn memory_file_from_row(row: &Row<'_>) -> Result<Result<MemoryFileRow>> {
    let size_bytes: i64 = row.get(1)?;
    Ok(Ok(MemoryFileRow {
        path: row.get(0)?,
        size_bytes: match u64::try_from(size_bytes) {
            Ok(size_bytes) => size_bytes,
            Err(e) => return Ok(Err(Error::corrupt("memory_files", e))),
        },
        updated_at_ms: row.get(2)?,
    }))
}

/// What the account's memory files hold now: how many, their bytes together, and the bytes of
/// the one at `path` (`None` when there is none).
const MEMORY_USAGE: &str =
    "SELECT COUNT(*), CAST(COALESCE(SUM(octet_length(content)), 0) AS BIGINT),
         (SELECT octet_length(content) FROM memory_files WHERE account_id = ?1 AND path = ?2)
     FROM memory_files WHERE account_id = ?1";

/// Refuses `change` of the account's file at `path` with [`Error::OverQuota`] when it would
/// add a file past `quotas.memory_files_max`, or grow the files' bytes past
/// `quotas.memory_bytes_max`. A change that adds no file and no bytes (a delete, a shorter
/// write) always passes.
fn check_quotas(
    connection: &Connection,
    account_id: AccountId,
    path: &str,
    change: &MemoryChange,
    quotas: &crate::Quotas,
) -> Result<()> {
    let added_bytes = match change {
        MemoryChange::Write { content } => content.len(),
        MemoryChange::Append { text } => text.len(),
        MemoryChange::Delete => return Ok(()),
    };
    let (n_files, n_bytes, file_bytes): (i64, i64, Option<i64>) = connection
        .prepare_cached(MEMORY_USAGE)?
        .query_row(params![account_id.to_string(), path], |row| {
            Ok((row.get(0)?, row.get(1)?, row.get(2)?))
        })?;
    let as_u64 = |n: i64| u64::try_from(n).map_err(|e| Error::corrupt("memory_files", e));
    let (n_files, n_bytes) = (as_u64(n_files)?, as_u64(n_bytes)?);
    if file_bytes.is_none() && n_files >= quotas.memory_files_max {
        return Err(Error::OverQuota {
            what: "the account's memory files",
            would_be: n_files + 1,
            max: quotas.memory_files_max,
            quota: "memory_files_max",
        });
    }
    let kept_bytes = match change {
        MemoryChange::Write { .. } => n_bytes.saturating_sub(as_u64(file_bytes.unwrap_or(0))?),
        _ => n_bytes,
    };
    let would_be = kept_bytes + added_bytes as u64;
    if would_be > n_bytes && would_be > quotas.memory_bytes_max {
        return Err(Error::OverQuota {
            what: "the bytes of the account's memory files",
            would_be,
            max: quotas.memory_bytes_max,
            quota: "memory_bytes_max",
        });
    }
    Ok(())
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
    /// before anything is sent to the writer; a change that would take the account past its
    /// quotas of memory files or their bytes ([`crate::Quotas`]) with
    /// [`crate::Error::OverQuota`], and nothing is written.
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
        let quotas = self.config().quotas;
        self.write(scope, move |connection| {
            check_quotas(connection, account_id, &path, &change, &quotas)?;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_with_invisible_or_reordering_characters_are_refused() {
        let control = Some("has a control character");
        let bidi = Some("has a bidirectional formatting character");
        let zero_width = Some("has a zero-width character");
        for (path, expected) in [
            ("~/memory/notes.md", None),
            ("~/memory/people/ana-maría.md", None),
            ("~/memory/日本語/メモ.md", None),
            ("~/memory/emoji 🌱.md", None),
            ("~/memory/a\u{0}b", control),
            ("~/memory/a\nb", control),
            ("~/memory/a\tb", control),
            ("~/memory/a\u{1b}[31mb", control),
            ("~/memory/a\u{7f}b", control),
            ("~/memory/a\u{85}b", control),
            ("~/memory/a\u{2028}b", control),
            ("~/memory/a\u{202E}dm.exe", bidi),
            ("~/memory/a\u{202A}b", bidi),
            ("~/memory/a\u{2066}b\u{2069}", bidi),
            ("~/memory/a\u{200E}b", bidi),
            ("~/memory/a\u{200F}b", bidi),
            ("~/memory/a\u{061C}b", bidi),
            ("~/memory/a\u{200B}b", zero_width),
            ("~/memory/a\u{200C}b", zero_width),
            ("~/memory/a\u{200D}b", zero_width),
            ("~/memory/a\u{2060}b", zero_width),
            ("~/memory/\u{FEFF}a", zero_width),
        ] {
            let refused = match validate_path(path) {
                Ok(()) => None,
                Err(Error::InvalidPath { reason, .. }) => Some(reason),
                Err(other) => panic!("{path:?}: {other}"),
            };
            assert_eq!(refused, expected, "{path:?}");
        }
        // The refusal shows the character escaped, never as itself.
        let message = validate_path("~/memory/a\u{202E}b")
            .expect_err("refused")
            .to_string();
        assert_eq!(
            message,
            "invalid memory path \"~/memory/a\\u{202e}b\": has a bidirectional formatting character"
        );
    }
}
