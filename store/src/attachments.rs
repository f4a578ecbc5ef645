//! Attachments: files attached to messages, kept under the data dir beside the database
//! (`attachments/<session id>/<attachment id>`), one `attachments` row each. A successor's copy of
//! an attachment is a hard link to the same file, under its own session's folder.

use std::path::{Path, PathBuf};

use crate::params;
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
    /// Relative to the data dir (the database's folder).
    pub path: String,
    pub created_at_ms: i64,
}

/// An attachment to add: its bytes are written under the data dir with the row.
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

/// Writes the file (before the row: a crash in between leaves a file no row names, never a row
/// without its file) and inserts the row.
pub(crate) fn add_attachment(
    connection: &Connection,
    data_dir: &Path,
    attachment: &NewAttachment,
) -> Result<AttachmentRow> {
    let path = relative_path(attachment.session_id, &attachment.id)?;
    crate::sessions::key_for_write(connection, attachment.session_id)?;
    let full = data_dir.join(&path);
    write_private(&full, &attachment.bytes)?;
    let row = AttachmentRow {
        session_id: attachment.session_id,
        id: attachment.id.clone(),
        name: attachment.name.clone(),
        media_type: attachment.media_type.clone(),
        size_bytes: attachment.bytes.len() as i64,
        path,
        created_at_ms: attachment.created_at_ms,
    };
    insert_row(connection, &row)?;
    Ok(row)
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

/// Gives `to` the attachment `id` of `from` under the same id: a hard link to the same file and
/// a row of its own. Linking again is harmless (the job may be redone). An id `from` lacks is
/// refused.
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
    let full = data_dir.join(&path);
    if let Some(folder) = full.parent() {
        create_private_dir(folder)?;
    }
    match std::fs::hard_link(data_dir.join(&source.path), &full) {
        Ok(()) => {}
        Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(error) => return Err(error.into()),
    }
    insert_row(
        connection,
        &AttachmentRow {
            session_id: to,
            path,
            created_at_ms: now_ms,
            ..source
        },
    )
}

/// The bytes an account's attachments hold, each file once (a successor's hard link to the
/// same attachment is not counted again).
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
    /// account's attachments, taking the nonce in the same transaction as the row. The file is
    /// written first, on a reader's thread (so the writer never waits on a large file), and
    /// removed again when the row is refused: a refused upload leaves nothing behind. A crash
    /// between the two leaves a file no row names, in its session's folder, which goes with
    /// the session.
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
                    return Ok(Some(refused));
                }
                write_private(&full, &attachment.bytes)?;
                Ok(None)
            })
            .await?
        };
        if let Some(refused) = checked {
            return Ok(NonceOutcome::Fresh(refused));
        }
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
                Ok(NonceOutcome::Fresh(UploadOutcome::Added(row.clone())))
            })
            .await
        };
        if !matches!(written, Ok(NonceOutcome::Fresh(UploadOutcome::Added(_)))) {
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

    /// The bytes the account's attachments hold, each file once.
    pub async fn account_attachment_bytes(&self, account_id: AccountId) -> Result<i64> {
        self.read(move |connection| account_attachment_bytes(connection, account_id))
            .await
    }

    /// At most `bytes_max` bytes of an attachment's file from `offset` on, read on a reader's
    /// thread. A file shorter than `offset` gives none.
    pub async fn read_attachment_bytes(
        &self,
        attachment: &AttachmentRow,
        offset: u64,
        bytes_max: usize,
    ) -> Result<Vec<u8>> {
        use std::io::{Read, Seek};
        let full = self.attachment_file(attachment);
        self.read(move |_| {
            let mut file = std::fs::File::open(&full)?;
            file.seek(std::io::SeekFrom::Start(offset))?;
            let mut bytes = Vec::new();
            file.take(bytes_max as u64).read_to_end(&mut bytes)?;
            Ok(bytes)
        })
        .await
    }
}

impl Store {
    /// Removes the attachment files of deleted sessions: `only` that session's, or (at boot)
    /// every folder whose session is gone, which a crash between a delete and its files' removal
    /// left. Off the caller's thread, like every store call; a failure is logged, not returned
    /// (the delete itself has committed).
    pub async fn remove_attachment_files(&self, only: Option<SessionId>) -> usize {
        let data_dir = data_dir(&self.config().path);
        let removed = self
            .read(move |connection| remove_orphan_folders(connection, &data_dir, only))
            .await;
        match removed {
            Ok(n_removed) => n_removed,
            Err(error) => {
                tracing::warn!(%error, "could not remove a deleted session's attachment files");
                0
            }
        }
    }

    /// Stores an attachment's bytes under the data dir and its row.
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

    /// Where an attachment's file is on disk.
    pub fn attachment_file(&self, attachment: &AttachmentRow) -> std::path::PathBuf {
        data_dir(&self.config().path).join(&attachment.path)
    }
}
