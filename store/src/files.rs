//! The durable file system over rows: a session's file is its `session_durable_files` rows in id
//! order, and an append is one inserted row.

use std::sync::{Arc, OnceLock};

use rusqlite::{Connection, params};
use seed_durable::{Append, DurableFs, FileName};
use seed_events::SessionId;

use crate::sessions::{key_for_read, key_for_write};
use crate::{Error, Result, Store};

/// One session's durable files, as the durable loop sees them.
#[derive(Debug, Clone)]
pub struct SessionFiles {
    store: Store,
    session_id: SessionId,
    /// The session's integer key, looked up by the first commit. Keys are never reused, so
    /// once the session is deleted a commit under this key is refused by its foreign key.
    session_key: Arc<OnceLock<i64>>,
}

impl SessionFiles {
    pub(crate) fn new(store: Store, session_id: SessionId) -> Self {
        SessionFiles {
            store,
            session_id,
            session_key: Arc::default(),
        }
    }

    pub fn session_id(&self) -> SessionId {
        self.session_id
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

    async fn commit(&self, batch: Vec<Append>) -> Result<()> {
        let session_id = self.session_id;
        let session_key = Arc::clone(&self.session_key);
        let known_key = session_key.get().copied();
        self.store
            .write_appends(session_id, known_key, move |connection| {
                let key = match session_key.get() {
                    Some(key) => *key,
                    None => {
                        let key = key_for_write(connection, session_id)?;
                        *session_key.get_or_init(|| key)
                    }
                };
                append_lines(connection, key, &batch)
            })
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
        .collect::<rusqlite::Result<Vec<String>>>()?;
    Ok(lines)
}

/// Inserts one row per append, in order. The foreign key refuses a deleted session's batch.
pub(crate) fn append_lines(
    connection: &Connection,
    session_key: i64,
    batch: &[Append],
) -> Result<()> {
    let mut insert = connection.prepare_cached(
        "INSERT INTO session_durable_files (session_key, file, line) VALUES (?1, ?2, ?3)",
    )?;
    for append in batch {
        insert.execute(params![session_key, append.file.code(), append.line])?;
    }
    Ok(())
}
