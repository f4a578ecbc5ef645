//! The durable file system over rows: a session's file is its `session_durable_files` rows in id
//! order, and an append is one inserted row.

use rusqlite::{Connection, params};
use seed_durable::{Append, DurableFs, FileName};
use seed_events::SessionId;

use crate::{Error, Result, Store};

/// One session's durable files, as the durable loop sees them.
#[derive(Debug, Clone)]
pub struct SessionFiles {
    store: Store,
    session_id: SessionId,
}

impl SessionFiles {
    pub(crate) fn new(store: Store, session_id: SessionId) -> Self {
        SessionFiles { store, session_id }
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
            .read(move |connection| {
                if !crate::sessions::session_exists(connection, session_id)? {
                    return Err(Error::NotFound {
                        what: "session",
                        id: session_id.to_string(),
                    });
                }
                read_lines(connection, session_id, file)
            })
            .await
    }

    async fn commit(&self, batch: Vec<Append>) -> Result<()> {
        let session_id = self.session_id;
        self.store
            .write(Some(session_id), move |connection| {
                append_lines(connection, session_id, &batch)
            })
            .await
    }
}

pub(crate) fn read_lines(
    connection: &Connection,
    session_id: SessionId,
    file: FileName,
) -> Result<Vec<String>> {
    let mut statement = connection.prepare_cached(
        "SELECT line FROM session_durable_files WHERE session_id = ?1 AND file = ?2 ORDER BY id",
    )?;
    let lines = statement
        .query_map(params![session_id.to_string(), file.as_str()], |row| {
            row.get(0)
        })?
        .collect::<rusqlite::Result<Vec<String>>>()?;
    Ok(lines)
}

/// Inserts one row per append, in order. The session's foreign key refuses a deleted session.
pub(crate) fn append_lines(
    connection: &Connection,
    session_id: SessionId,
    batch: &[Append],
) -> Result<()> {
    let session_text = session_id.to_string();
    let mut insert = connection.prepare_cached(
        "INSERT INTO session_durable_files (session_id, file, line) VALUES (?1, ?2, ?3)",
    )?;
    for append in batch {
        insert.execute(params![session_text, append.file.as_str(), append.line])?;
    }
    Ok(())
}
