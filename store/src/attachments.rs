//! Attachments: files attached to messages, one `attachments` row each. Where their bytes are
//! depends on the engine:
//! - SQLite (one process beside its data dir): a file under the data dir
//!   (`attachments/<session id>/<attachment id>`, the row's `path`), written before the row; a
//!   successor's copy is a hard link to the same file under its own session's folder; a deleted
//!   session's folder is removed after the delete commits (and swept at boot).
//! - PostgreSQL (several nodes over one database, none sharing a disk): a row of
//!   `attachment_contents`, inserted in the transaction of the attachment's row, so whichever
//!   node runs, downloads or reads the message finds them; a successor's copy is a copy of that
//!   row; they go with their attachment's row (`ON DELETE CASCADE`). No file is written, and
//!   the row's `path` names none.

use std::path::{Path, PathBuf};

use crate::params;
use crate::schema::Engine;
use crate::sql::{Connection, OptionalExtension, Row};
use seed_events::{AccountId, SessionId};

use crate::error::collect_rows;
use crate::nonces::{NonceOutcome, RequestNonce, session_owner, take_nonce};
use crate::{Error, Result, Store};

/// An attachment as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttachmentRow {
    pub session_id: SessionId,
    pub id: String,
    pub name: String,
    pub media_type: String,
    pub size_bytes: i64,
    /// The file, relative to the data dir (the database's folder): SQLite's alone; on
    /// PostgreSQL the bytes are in the database and no file is there.
    pub path: String,
    pub created_at_ms: i64,
}

/// An attachment to add: its bytes are stored with the row (a file on SQLite, a row on
/// PostgreSQL).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewAttachment {
    pub session_id: SessionId,
    pub id: String,
    pub name: String,
    pub media_type: String,
    pub bytes: Vec<u8>,
    pub created_at_ms: i64,
}

/// The data dir: the folder the database file is in.
pub(crate) fn data_dir(database: &Path) -> PathBuf {
    database
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("."))
}

/// Where an attachment of a session lives, relative to the data dir. An id that could leave its
/// folder is refused.
pub(crate) fn relative_path(session_id: SessionId, id: &str) -> Result<String> {
    let plain = !id.is_empty()
        && id.len() <= 128
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        && !id.starts_with('.');
    if !plain {
        return Err(Error::InvalidPath {
            path: id.to_owned(),
            reason: "an attachment id is 1-128 letters, digits, '-', '_' or '.', not starting with '.'",
        });
    }
    Ok(format!("attachments/{session_id}/{id}"))
}

/// Removes the attachment folders under `data_dir` whose session is not in the database (a
/// deleted session's rows went with it; its files go here). `only`: that session's folder
/// alone, the one a delete just emptied of rows. Returns how many folders it removed. A crash
/// between a delete and this leaves a folder that the next full sweep (at boot) removes.
pub(crate) fn remove_orphan_folders(
    connection: &Connection,
    data_dir: &Path,
    only: Option<SessionId>,
) -> Result<usize> {
    let root = data_dir.join("attachments");
    let candidates: Vec<(SessionId, PathBuf)> = match only {
        Some(session_id) => vec![(session_id, root.join(session_id.to_string()))],
        None => match std::fs::read_dir(&root) {
            Ok(entries) => entries
                .filter_map(|entry| entry.ok())
                .filter_map(|entry| {
                    let session_id = entry.file_name().to_str()?.parse().ok()?;
                    Some((session_id, entry.path()))
                })
                .collect(),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(error) => return Err(error.into()),
        },
    };
    let mut n_removed = 0;
    for (session_id, folder) in candidates {
        if crate::sessions::session_exists(connection, session_id)? {
            continue;
        }
        match std::fs::remove_dir_all(&folder) {
            Ok(()) => n_removed += 1,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
            Err(error) => return Err(error.into()),
        }
    }
    Ok(n_removed)
}

/// Creates a folder and its missing parents, each its owner's alone (0700): attachments are
/// the accounts' files.
fn create_private_dir(folder: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(folder)
}

/// Writes an attachment's file, readable by its owner only (0600), its folder made if missing.
fn write_private(full: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt;
    if let Some(folder) = full.parent() {
        create_private_dir(folder)?;
    }
    std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(full)?
        .write_all(bytes)
}

/// Stores the bytes and inserts the row. On SQLite the file is written first (a crash in
/// between leaves a file no row names, never a row without its file); on PostgreSQL the bytes
/// are a row of `attachment_contents` in the same transaction.
pub(crate) fn add_attachment(
    connection: &Connection,
    data_dir: &Path,
    attachment: &NewAttachment,
) -> Result<AttachmentRow> {
    let path = relative_path(attachment.session_id, &attachment.id)?;
    crate::sessions::key_for_write(connection, attachment.session_id)?;
    let row = AttachmentRow {
        session_id: attachment.session_id,
        id: attachment.id.clone(),
        name: attachment.name.clone(),
        media_type: attachment.media_type.clone(),
        size_bytes: attachment.bytes.len() as i64,
        path,
        created_at_ms: attachment.created_at_ms,
    };
    match connection.engine() {
        Engine::Sqlite => {
            write_private(&data_dir.join(&row.path), &attachment.bytes)?;
            insert_row(connection, &row)?;
        }
        Engine::Postgres => {
            insert_row(connection, &row)?;
            insert_contents(connection, &row, &attachment.bytes)?;
        }
    }
    Ok(row)
}

/// The attachment's bytes as a row of `attachment_contents` (PostgreSQL's; its `attachments`
/// row first).
fn insert_contents(connection: &Connection, row: &AttachmentRow, bytes: &[u8]) -> Result<()> {
    assert_eq!(
        usize::try_from(row.size_bytes).ok(),
        Some(bytes.len()),
        "an attachment's row names its size"
    );
    connection
        .prepare_cached(
            "INSERT INTO attachment_contents (session_id, id, bytes) VALUES (?1, ?2, ?3)",
        )?
        .execute(params![row.session_id.to_string(), row.id, bytes])?;
    Ok(())
}

/// Gives `to` a copy of `from`'s bytes of the attachment `id` (PostgreSQL's; `to`'s
/// `attachments` row first). Copying again is harmless.
fn copy_contents(connection: &Connection, from: SessionId, to: SessionId, id: &str) -> Result<()> {
    let n_copied = connection
        .prepare_cached(
            "INSERT INTO attachment_contents (session_id, id, bytes)
             SELECT CAST(?1 AS TEXT), id, bytes FROM attachment_contents
             WHERE session_id = ?2 AND id = ?3
             ON CONFLICT DO NOTHING",
        )?
        .execute(params![to.to_string(), from.to_string(), id])?;
    if n_copied == 0 && !has_contents(connection, to, id)? {
        return Err(contents_not_found(from, id));
    }
    Ok(())
}

fn has_contents(connection: &Connection, session_id: SessionId, id: &str) -> Result<bool> {
    Ok(connection
        .prepare_cached("SELECT 1 FROM attachment_contents WHERE session_id = ?1 AND id = ?2")?
        .query_row(params![session_id.to_string(), id], |row| {
            row.get::<_, i64>(0)
        })
        .optional()?
        .is_some())
}

/// An attachment whose bytes are not in the database: its session was deleted meanwhile, or
/// it was stored before they were kept there (version 17).
fn contents_not_found(session_id: SessionId, id: &str) -> Error {
    Error::NotFound {
        what: "the bytes of attachment",
        id: format!("{session_id}/{id}"),
    }
}

/// At most `bytes_max` of the attachment's bytes from `offset` on, from `attachment_contents`
/// (PostgreSQL's). An offset at or past the end gives none.
fn read_contents(
    connection: &Connection,
    attachment: &AttachmentRow,
    offset: u64,
    bytes_max: usize,
) -> Result<Vec<u8>> {
    // substring counts from 1, in int4s: a bytea holds at most 1 GiB, so a range clamped to
    // end by i32::MAX reads what an unclamped one would (and start + count cannot overflow).
    let int4_max = i64::from(i32::MAX);
    let start = i64::try_from(offset)
        .unwrap_or(i64::MAX)
        .saturating_add(1)
        .min(int4_max);
    let count = i64::try_from(bytes_max)
        .unwrap_or(i64::MAX)
        .min(int4_max - start);
    let (bytes, size_bytes): (Vec<u8>, i64) = connection
        .prepare_cached(
            "SELECT substring(bytes FROM CAST(?3 AS INTEGER) FOR CAST(?4 AS INTEGER)),
                 CAST(octet_length(bytes) AS BIGINT)
             FROM attachment_contents WHERE session_id = ?1 AND id = ?2",
        )?
        .query_row(
            params![
                attachment.session_id.to_string(),
                attachment.id,
                start,
                count
            ],
            |row| Ok((row.get(0)?, row.get(1)?)),
        )
        .optional()?
        .ok_or_else(|| contents_not_found(attachment.session_id, &attachment.id))?;
    if size_bytes != attachment.size_bytes {
        return Err(Error::corrupt(
            "attachment_contents",
            format_args!(
                "attachment {}/{} holds {size_bytes} bytes, its row says {}",
                attachment.session_id, attachment.id, attachment.size_bytes
            ),
        ));
    }
    Ok(bytes)
}

/// At most `bytes_max` bytes of the file `full` from `offset` on (SQLite's). A file shorter than
/// `offset` gives none (even past what a seek takes).
fn read_file(full: &Path, offset: u64, bytes_max: usize) -> Result<Vec<u8>> {
    use std::io::{Read, Seek};
    let mut file = std::fs::File::open(full)?;
    if offset >= file.metadata()?.len() {
        return Ok(Vec::new());
    }
    file.seek(std::io::SeekFrom::Start(offset))?;
    let mut bytes = Vec::new();
    file.take(bytes_max as u64).read_to_end(&mut bytes)?;
    Ok(bytes)
}

fn insert_row(connection: &Connection, row: &AttachmentRow) -> Result<()> {
    connection
        .prepare_cached(
            "INSERT INTO attachments (session_id, id, name, media_type, size_bytes, path, created_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
        )?
        .execute(params![
            row.session_id.to_string(),
            row.id,
            row.name,
            row.media_type,
            row.size_bytes,
            row.path,
            row.created_at_ms,
        ])?;
    Ok(())
}

const ATTACHMENT_COLUMNS: &str = "session_id, id, name, media_type, size_bytes, path, created_at";

fn attachment_from_row(row: &Row<'_>) -> Result<Result<AttachmentRow>> {
    let session_id: String = row.get(0)?;
    let parsed = (|| {
        Ok(AttachmentRow {
            session_id: Error::parse_column("attachments", &session_id)?,
            id: row.get(1)?,
            name: row.get(2)?,
            media_type: row.get(3)?,
            size_bytes: row.get(4)?,
            path: row.get(5)?,
            created_at_ms: row.get(6)?,
        })
    })();
    Ok(parsed)
}

pub(crate) fn get_attachment(
    connection: &Connection,
    session_id: SessionId,
    id: &str,
) -> Result<Option<AttachmentRow>> {
    connection
        .prepare_cached(&format!(
            "SELECT {ATTACHMENT_COLUMNS} FROM attachments WHERE session_id = ?1 AND id = ?2"
        ))?
        .query_row(params![session_id.to_string(), id], attachment_from_row)
        .optional()?
        .transpose()
}

pub(crate) fn list_attachments(
    connection: &Connection,
    session_id: SessionId,
) -> Result<Vec<AttachmentRow>> {
    let mut statement = connection.prepare_cached(&format!(
        "SELECT {ATTACHMENT_COLUMNS} FROM attachments WHERE session_id = ?1 ORDER BY created_at, id"
    ))?;
    collect_rows(statement.query_map(params![session_id.to_string()], attachment_from_row)?)
}

/// Gives `to` the attachment `id` of `from` under the same id: a row of its own, and on SQLite
/// a hard link to the same file, on PostgreSQL a copy of the bytes' row. Linking again is
/// harmless (the job may be redone). An id `from` lacks is refused, and so are bytes it lacks.
pub(crate) fn link_attachment(
    connection: &Connection,
    data_dir: &Path,
    from: SessionId,
    to: SessionId,
    id: &str,
    now_ms: i64,
) -> Result<()> {
    let source = get_attachment(connection, from, id)?.ok_or_else(|| Error::NotFound {
        what: "attachment",
        id: format!("{from}/{id}"),
    })?;
    let path = relative_path(to, id)?;
    let source_path = data_dir.join(&source.path);
    let row = AttachmentRow {
        session_id: to,
        path,
        created_at_ms: now_ms,
        ..source
    };
    match connection.engine() {
        Engine::Sqlite => {
            let full = data_dir.join(&row.path);
            if let Some(folder) = full.parent() {
                create_private_dir(folder)?;
            }
            match std::fs::hard_link(&source_path, &full) {
                Ok(()) => {}
                Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => {}
                Err(error) => return Err(error.into()),
            }
            insert_row(connection, &row)
        }
        Engine::Postgres => {
            insert_row(connection, &row)?;
            copy_contents(connection, from, to, id)
        }
    }
}

/// The bytes an account's attachments hold, each attachment once (a successor's copy of it, a
/// hard link on SQLite or a copied row on PostgreSQL, is not counted again).
pub(crate) fn account_attachment_bytes(
    connection: &Connection,
    account_id: AccountId,
) -> Result<i64> {
    connection
        .prepare_cached(
            "SELECT CAST(coalesce(sum(size_bytes), 0) AS BIGINT) FROM (
                 SELECT DISTINCT attachments.id, attachments.size_bytes
                 FROM attachments JOIN sessions ON sessions.id = attachments.session_id
                 WHERE sessions.account_id = ?1) AS owned",
        )?
        .query_row(params![account_id.to_string()], |row| row.get(0))
}

/// The attachment `id` as the account holds it: `session_id`'s own when it has one, else
/// another session's of the same account (the newest). Another account's is never found.
pub(crate) fn find_account_attachment(
    connection: &Connection,
    account_id: AccountId,
    session_id: SessionId,
    id: &str,
) -> Result<Option<AttachmentRow>> {
    connection
        .prepare_cached(
            "SELECT attachments.session_id, attachments.id, name, media_type, size_bytes, path,
                 attachments.created_at
             FROM attachments JOIN sessions ON sessions.id = attachments.session_id
             WHERE attachments.id = ?1 AND sessions.account_id = ?2
             ORDER BY attachments.session_id = ?3 DESC, attachments.created_at DESC
             LIMIT 1",
        )?
        .query_row(
            params![id, account_id.to_string(), session_id.to_string()],
            attachment_from_row,
        )
        .optional()?
        .transpose()
}

/// What uploading an attachment came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UploadOutcome {
    Added(AttachmentRow),
    /// The session does not exist or is another account's: nothing was written.
    NotFound,
    /// The account's attachments would hold more than its limit: nothing was written.
    OverAccountLimit {
        used_bytes: i64,
        limit_bytes: i64,
    },
}

/// Whether an upload may go in: the session is the account's, and the account stays within
/// its limit.
fn upload_check(
    connection: &Connection,
    account_id: AccountId,
    attachment: &NewAttachment,
    account_bytes_max: i64,
) -> Result<Option<UploadOutcome>> {
    if session_owner(connection, attachment.session_id)? != Some(account_id) {
        return Ok(Some(UploadOutcome::NotFound));
    }
    let used_bytes = account_attachment_bytes(connection, account_id)?;
    if used_bytes + attachment.bytes.len() as i64 > account_bytes_max {
        return Ok(Some(UploadOutcome::OverAccountLimit {
            used_bytes,
            limit_bytes: account_bytes_max,
        }));
    }
    Ok(None)
}

impl Store {
    /// Adds an attachment to the account's session, within `account_bytes_max` for all the
    /// account's attachments, taking the nonce in the same transaction as the row. A refused
    /// upload leaves nothing behind. On SQLite the file is written first, on a reader's thread
    /// (so the writer never waits on a large file), and removed again when the row is refused;
    /// a crash between the two leaves a file no row names, in its session's folder, which goes
    /// with the session. On PostgreSQL the bytes are inserted with the row, in its transaction.
    pub async fn add_attachment_signed(
        &self,
        nonce: Option<RequestNonce>,
        account_id: AccountId,
        attachment: NewAttachment,
        account_bytes_max: i64,
    ) -> Result<NonceOutcome<UploadOutcome>> {
        let data_dir = data_dir(&self.config().path);
        let path = relative_path(attachment.session_id, &attachment.id)?;
        let full = data_dir.join(&path);
        let attachment = std::sync::Arc::new(attachment);
        let checked = {
            let attachment = std::sync::Arc::clone(&attachment);
            let full = full.clone();
            self.read(move |connection| {
                if let Some(refused) =
                    upload_check(connection, account_id, &attachment, account_bytes_max)?
                {
                    return Ok(Err(refused));
                }
                let writes_file = connection.engine() == Engine::Sqlite;
                if writes_file {
                    write_private(&full, &attachment.bytes)?;
                }
                Ok(Ok(writes_file))
            })
            .await?
        };
        let wrote_file = match checked {
            Ok(wrote_file) => wrote_file,
            Err(refused) => return Ok(NonceOutcome::Fresh(refused)),
        };
        let row = AttachmentRow {
            session_id: attachment.session_id,
            id: attachment.id.clone(),
            name: attachment.name.clone(),
            media_type: attachment.media_type.clone(),
            size_bytes: attachment.bytes.len() as i64,
            path,
            created_at_ms: attachment.created_at_ms,
        };
        let written = {
            let attachment = std::sync::Arc::clone(&attachment);
            self.write(Some(row.session_id), move |connection| {
                if let Some(refused) =
                    upload_check(connection, account_id, &attachment, account_bytes_max)?
                {
                    return Ok(NonceOutcome::Fresh(refused));
                }
                if !take_nonce(connection, nonce.as_ref())? {
                    return Ok(NonceOutcome::Replayed);
                }
                insert_row(connection, &row)?;
                if connection.engine() == Engine::Postgres {
                    insert_contents(connection, &row, &attachment.bytes)?;
                }
                Ok(NonceOutcome::Fresh(UploadOutcome::Added(row.clone())))
            })
            .await
        };
        if wrote_file && !matches!(written, Ok(NonceOutcome::Fresh(UploadOutcome::Added(_)))) {
            let removed = self
                .read(move |_| match std::fs::remove_file(&full) {
                    Err(error) if error.kind() != std::io::ErrorKind::NotFound => Err(error.into()),
                    _ => Ok(()),
                })
                .await;
            if let Err(error) = removed {
                tracing::warn!(%error, "could not remove a refused attachment's file");
            }
        }
        written
    }

    /// The attachment `id` as the account holds it: `session_id`'s own first, else another of
    /// the account's sessions'; never another account's.
    pub async fn find_account_attachment(
        &self,
        account_id: AccountId,
        session_id: SessionId,
        id: &str,
    ) -> Result<Option<AttachmentRow>> {
        let id = id.to_owned();
        self.read(move |connection| {
            find_account_attachment(connection, account_id, session_id, &id)
        })
        .await
    }

    /// The bytes the account's attachments hold, each attachment once.
    pub async fn account_attachment_bytes(&self, account_id: AccountId) -> Result<i64> {
        self.read(move |connection| account_attachment_bytes(connection, account_id))
            .await
    }

    /// At most `bytes_max` bytes of an attachment from `offset` on, read on a reader's thread:
    /// from its file on SQLite, from the database on PostgreSQL (whichever node stored it).
    /// An offset at or past the end gives none; bytes that are not there (a file removed, a
    /// session deleted meanwhile) are an error.
    pub async fn read_attachment_bytes(
        &self,
        attachment: &AttachmentRow,
        offset: u64,
        bytes_max: usize,
    ) -> Result<Vec<u8>> {
        let full = data_dir(&self.config().path).join(&attachment.path);
        let attachment = attachment.clone();
        self.read(move |connection| match connection.engine() {
            Engine::Sqlite => read_file(&full, offset, bytes_max),
            Engine::Postgres => read_contents(connection, &attachment, offset, bytes_max),
        })
        .await
    }
}

impl Store {
    /// Removes the attachment files of deleted sessions: `only` that session's, or (at boot)
    /// every folder whose session is gone, which a crash between a delete and its files' removal
    /// left. Off the caller's thread, like every store call; a failure is logged, not returned
    /// (the delete itself has committed). On PostgreSQL there are no files (the bytes' rows went
    /// with the session's): nothing to do.
    pub async fn remove_attachment_files(&self, only: Option<SessionId>) -> usize {
        let data_dir = data_dir(&self.config().path);
        let removed = self
            .read(move |connection| match connection.engine() {
                Engine::Sqlite => remove_orphan_folders(connection, &data_dir, only),
                Engine::Postgres => Ok(0),
            })
            .await;
        match removed {
            Ok(n_removed) => n_removed,
            Err(error) => {
                tracing::warn!(%error, "could not remove a deleted session's attachment files");
                0
            }
        }
    }

    /// Stores an attachment's row and its bytes: a file under the data dir on SQLite, a row in
    /// the same transaction on PostgreSQL.
    pub async fn add_attachment(&self, attachment: NewAttachment) -> Result<AttachmentRow> {
        let data_dir = data_dir(&self.config().path);
        self.write(Some(attachment.session_id), move |connection| {
            add_attachment(connection, &data_dir, &attachment)
        })
        .await
    }

    /// The session's attachment `id` (`attachment:<id>` in its messages), if it has one.
    pub async fn get_attachment(
        &self,
        session_id: SessionId,
        id: &str,
    ) -> Result<Option<AttachmentRow>> {
        let id = id.to_owned();
        self.read(move |connection| get_attachment(connection, session_id, &id))
            .await
    }

    pub async fn list_attachments(&self, session_id: SessionId) -> Result<Vec<AttachmentRow>> {
        self.read(move |connection| list_attachments(connection, session_id))
            .await
    }

    /// Where an attachment's file is on disk: SQLite's alone. On PostgreSQL the bytes are in the
    /// database and this names no file; read them with [`Store::read_attachment_bytes`].
    pub fn attachment_file(&self, attachment: &AttachmentRow) -> std::path::PathBuf {
        data_dir(&self.config().path).join(&attachment.path)
    }
}
