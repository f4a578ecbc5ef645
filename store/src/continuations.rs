//! Continuation edges: `session_continuations`, one row per predecessor → successor.

use crate::params;
use crate::schema::Engine;
use crate::sql::{Connection, OptionalExtension, Row};
use seed_events::{ContinuationId, ContinuationLink, EventId, NewEvent, SessionEvent, SessionId};

use crate::Store;
use crate::{Error, Result};

/// An edge to insert. The manifest arrives already encoded as CBOR by the caller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewContinuation {
    pub id: ContinuationId,
    pub predecessor_session_id: SessionId,
    pub successor_session_id: SessionId,
    /// The first session of the chain.
    pub origin_session_id: SessionId,
    /// With the predecessor, the idempotency key of the continue_session call.
    pub tool_call_id: String,
    pub initiating_event_id: EventId,
    pub reason: String,
    pub manifest_cbor: Vec<u8>,
    pub created_at_ms: i64,
}

/// An edge as stored: the same fields as [`NewContinuation`].
pub type ContinuationRow = NewContinuation;

pub(crate) fn insert_continuation(connection: &Connection, edge: &NewContinuation) -> Result<()> {
    connection
        .prepare_cached(
            "INSERT INTO session_continuations (id, predecessor_session_id, successor_session_id,
                 origin_session_id, tool_call_id, initiating_event_id, reason, manifest_cbor,
                 created_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
        )?
        .execute(params![
            edge.id.to_string(),
            edge.predecessor_session_id.to_string(),
            edge.successor_session_id.to_string(),
            edge.origin_session_id.to_string(),
            edge.tool_call_id,
            edge.initiating_event_id.0,
            edge.reason,
            edge.manifest_cbor,
            edge.created_at_ms,
        ])?;
    Ok(())
}

const EDGE_COLUMNS: &str = "id, predecessor_session_id, successor_session_id, origin_session_id,
     tool_call_id, initiating_event_id, reason, manifest_cbor, created_at";

fn edge_from_row(row: &Row<'_>) -> Result<Result<ContinuationRow>> {
    let ids: [String; 4] = [row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?];
    let tool_call_id: String = row.get(4)?;
    let initiating_event_id: i64 = row.get(5)?;
    let reason: String = row.get(6)?;
    let manifest_cbor: Vec<u8> = row.get(7)?;
    let created_at_ms: i64 = row.get(8)?;
    let parsed = (|| {
        const TABLE: &str = "session_continuations";
        Ok(ContinuationRow {
            id: Error::parse_column(TABLE, &ids[0])?,
            predecessor_session_id: Error::parse_column(TABLE, &ids[1])?,
            successor_session_id: Error::parse_column(TABLE, &ids[2])?,
            origin_session_id: Error::parse_column(TABLE, &ids[3])?,
            tool_call_id,
            initiating_event_id: EventId(initiating_event_id),
            reason,
            manifest_cbor,
            created_at_ms,
        })
    })();
    Ok(parsed)
}

/// The edge a continue_session call made, found by its idempotency key.
pub(crate) fn find_continuation(
    connection: &Connection,
    predecessor_session_id: SessionId,
    tool_call_id: &str,
) -> Result<Option<ContinuationRow>> {
    connection
        .prepare_cached(&format!(
            "SELECT {EDGE_COLUMNS} FROM session_continuations
             WHERE predecessor_session_id = ?1 AND tool_call_id = ?2"
        ))?
        .query_row(
            params![predecessor_session_id.to_string(), tool_call_id],
            edge_from_row,
        )
        .optional()?
        .transpose()
}

/// A successor to create, all in one transaction: its session, the edge, its two first events
/// (the projection and the initiating message's copy), its attachments, and what the plan
/// transfer does to the predecessor.
#[derive(Debug, Clone, PartialEq)]
pub struct NewSuccessor {
    pub session: crate::NewSession,
    pub edge: NewContinuation,
    /// `message`, role user, actor system: the projection.
    pub projection: NewEvent,
    /// The initiating message, copied word for word with `meta.continued_from`.
    pub message: NewEvent,
    /// Attachments of the predecessor the copied message names, linked into the successor (a
    /// hard link on SQLite, a copy of the bytes' row on PostgreSQL).
    pub attachment_ids: Vec<String>,
    /// `transfer.plan = close`: the predecessor's plan is cleared.
    pub close_predecessor_plan: bool,
}

/// The two events a successor starts with, as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct CreatedSuccessor {
    pub projection: SessionEvent,
    pub message: SessionEvent,
}

pub(crate) fn create_successor(
    connection: &Connection,
    data_dir: &std::path::Path,
    successor: &NewSuccessor,
) -> Result<CreatedSuccessor> {
    let predecessor = successor.edge.predecessor_session_id;
    let now = successor.edge.created_at_ms;
    // The predecessor must still exist: a continuation of a deleted session is refused.
    crate::sessions::key_for_write(connection, predecessor)?;
    crate::sessions::insert_session(connection, &successor.session)?;
    insert_continuation(connection, &successor.edge)?;
    let mut stored = crate::log::append_events(
        connection,
        successor.session.id,
        &[successor.projection.clone(), successor.message.clone()],
    )?;
    let message = stored
        .pop()
        .ok_or_else(|| Error::corrupt("session_events", "an append stored no event"))?;
    let projection = stored
        .pop()
        .ok_or_else(|| Error::corrupt("session_events", "an append stored no event"))?;
    for id in &successor.attachment_ids {
        crate::attachments::link_attachment(
            connection,
            data_dir,
            predecessor,
            successor.session.id,
            id,
            now,
        )?;
    }
    if successor.close_predecessor_plan {
        crate::sessions::set_session_plan(connection, predecessor, None, now)?;
    } else {
        crate::sessions::touch_session(connection, predecessor, now)?;
    }
    Ok(CreatedSuccessor {
        projection,
        message,
    })
}

/// The edge that already carried `initiating_event_id` of `predecessor` into a successor, if any.
pub(crate) fn edge_from_message(
    connection: &Connection,
    predecessor: SessionId,
    initiating_event_id: EventId,
) -> Result<Option<ContinuationRow>> {
    connection
        .prepare_cached(&format!(
            "SELECT {EDGE_COLUMNS} FROM session_continuations
             WHERE predecessor_session_id = ?1 AND initiating_event_id = ?2
               AND kind = 'continuation'
             ORDER BY created_at DESC LIMIT 1"
        ))?
        .query_row(
            params![predecessor.to_string(), initiating_event_id.0],
            edge_from_row,
        )
        .optional()?
        .transpose()
}

/// Successors whose copied message (their seq 2, marked `continued_from`) is in no run: a crash
/// or a full disk came between their creation and the queueing of their run, and their call
/// was not replayed. Found by the copy, not by the edge, since deleting the predecessor takes
/// the edge with it; and a person may have written to the successor meanwhile, so it may have
/// other runs. One indexed lookup per session. Oldest first.
pub(crate) fn successors_without_their_run(connection: &Connection) -> Result<Vec<SessionId>> {
    let mut statement = connection.prepare_cached(match connection.engine() {
        Engine::Sqlite => {
            "SELECT s.id FROM sessions s
             JOIN session_events e ON e.session_key = s.key AND e.seq = 2
             WHERE json_extract(e.meta, '$.continued_from') IS NOT NULL
               AND NOT EXISTS (
                   SELECT 1 FROM runs r, json_each(r.user_event_ids) j
                   WHERE r.session_id = s.id AND j.value = e.id)
             ORDER BY s.key"
        }
        Engine::Postgres => {
            "SELECT s.id FROM sessions s
             JOIN session_events e ON e.session_key = s.key AND e.seq = 2
             WHERE e.meta::json ->> 'continued_from' IS NOT NULL
               AND NOT EXISTS (
                   SELECT 1 FROM runs r, json_array_elements_text(r.user_event_ids::json) j
                   WHERE r.session_id = s.id AND j.value = e.id::text)
             ORDER BY s.key"
        }
    })?;
    let ids = statement.query_map(params![], |row| row.get::<_, String>(0))?;
    let mut successors = Vec::new();
    for id in ids {
        successors.push(Error::parse_column("sessions", &id?)?);
    }
    Ok(successors)
}

/// How many successors the session was continued into (its forks are not counted).
pub(crate) fn count_successors(connection: &Connection, predecessor: SessionId) -> Result<usize> {
    let n: i64 = connection
        .prepare_cached(
            "SELECT COUNT(*) FROM session_continuations
             WHERE predecessor_session_id = ?1 AND kind = 'continuation'",
        )?
        .query_row(params![predecessor.to_string()], |row| row.get(0))?;
    Ok(usize::try_from(n).unwrap_or(usize::MAX))
}

/// The edge that made `successor`, if it is one.
pub(crate) fn edge_to(
    connection: &Connection,
    successor: SessionId,
) -> Result<Option<ContinuationRow>> {
    connection
        .prepare_cached(&format!(
            "SELECT {EDGE_COLUMNS} FROM session_continuations WHERE successor_session_id = ?1"
        ))?
        .query_row(params![successor.to_string()], edge_from_row)
        .optional()?
        .transpose()
}

/// A session's links: the edge it was continued from, and the newest it was continued to, each
/// with the other session's title. Continuations alone: a fork is neither (see
/// [`fork_link`]).
pub(crate) fn links(
    connection: &Connection,
    session_id: SessionId,
) -> Result<(Option<ContinuationLink>, Option<ContinuationLink>)> {
    let link = |sql: &str| -> Result<Option<ContinuationLink>> {
        connection
            .prepare_cached(sql)?
            .query_row(params![session_id.to_string()], |row| {
                let continuation_id: String = row.get(0)?;
                let other: String = row.get(1)?;
                let title: Option<String> = row.get(2)?;
                let reason: String = row.get(3)?;
                let created_at_ms: i64 = row.get(4)?;
                Ok((|| {
                    const TABLE: &str = "session_continuations";
                    Ok(ContinuationLink {
                        continuation_id: Error::parse_column(TABLE, &continuation_id)?,
                        session_id: Error::parse_column(TABLE, &other)?,
                        title: title.unwrap_or_default(),
                        reason,
                        created_at_ms,
                    })
                })())
            })
            .optional()?
            .transpose()
    };
    let from = link(
        "SELECT c.id, c.predecessor_session_id, s.title, c.reason, c.created_at
         FROM session_continuations c LEFT JOIN sessions s ON s.id = c.predecessor_session_id
         WHERE c.successor_session_id = ?1 AND c.kind = 'continuation'",
    )?;
    let to = link(
        "SELECT c.id, c.successor_session_id, s.title, c.reason, c.created_at
         FROM session_continuations c LEFT JOIN sessions s ON s.id = c.successor_session_id
         WHERE c.predecessor_session_id = ?1 AND c.kind = 'continuation'
         ORDER BY c.created_at DESC, c.rowid DESC LIMIT 1",
    )?;
    Ok((from, to))
}

/// The edge a fork was made by, as a link to the session it branched from.
pub(crate) fn fork_link(
    connection: &Connection,
    session_id: SessionId,
) -> Result<Option<ContinuationLink>> {
    connection
        .prepare_cached(
            "SELECT c.id, c.predecessor_session_id, s.title, c.reason, c.created_at
             FROM session_continuations c LEFT JOIN sessions s ON s.id = c.predecessor_session_id
             WHERE c.successor_session_id = ?1 AND c.kind = 'fork'",
        )?
        .query_row(params![session_id.to_string()], link_from_row)
        .optional()?
        .transpose()
}

fn link_from_row(row: &Row<'_>) -> Result<Result<ContinuationLink>> {
    let continuation_id: String = row.get(0)?;
    let other: String = row.get(1)?;
    let title: Option<String> = row.get(2)?;
    let reason: String = row.get(3)?;
    let created_at_ms: i64 = row.get(4)?;
    Ok((|| {
        const TABLE: &str = "session_continuations";
        Ok(ContinuationLink {
            continuation_id: Error::parse_column(TABLE, &continuation_id)?,
            session_id: Error::parse_column(TABLE, &other)?,
            title: title.unwrap_or_default(),
            reason,
            created_at_ms,
        })
    })())
}

impl Store {
    /// Inserts an edge. A second edge for the same successor, or for the same predecessor and
    /// tool call, is refused as a duplicate.
    pub async fn insert_continuation(&self, edge: NewContinuation) -> Result<()> {
        self.write(Some(edge.predecessor_session_id), move |connection| {
            insert_continuation(connection, &edge)
        })
        .await
    }

    pub async fn find_continuation(
        &self,
        predecessor_session_id: SessionId,
        tool_call_id: &str,
    ) -> Result<Option<ContinuationRow>> {
        let tool_call_id = tool_call_id.to_owned();
        self.read(move |connection| {
            find_continuation(connection, predecessor_session_id, &tool_call_id)
        })
        .await
    }

    /// Creates a successor in one transaction: its session, the edge with its manifest, its
    /// two first events, its linked attachments, and (for `transfer.plan = close`) the
    /// predecessor's plan cleared. A second successor for the same (predecessor, tool call) is
    /// refused as a duplicate; nothing of a refused creation is committed.
    pub async fn create_successor(&self, successor: NewSuccessor) -> Result<CreatedSuccessor> {
        let data_dir = crate::attachments::data_dir(&self.config().path);
        self.write(
            Some(successor.edge.predecessor_session_id),
            move |connection| create_successor(connection, &data_dir, &successor),
        )
        .await
    }

    /// [`Store::create_successor`] for a person's request, taking its nonce in the same
    /// transaction: a nonce used before writes nothing.
    pub async fn create_successor_signed(
        &self,
        nonce: Option<crate::nonces::RequestNonce>,
        successor: NewSuccessor,
    ) -> Result<crate::nonces::NonceOutcome<CreatedSuccessor>> {
        let data_dir = crate::attachments::data_dir(&self.config().path);
        self.write(
            Some(successor.edge.predecessor_session_id),
            move |connection| {
                if !crate::nonces::take_nonce(connection, nonce.as_ref())? {
                    return Ok(crate::nonces::NonceOutcome::Replayed);
                }
                create_successor(connection, &data_dir, &successor)
                    .map(crate::nonces::NonceOutcome::Fresh)
            },
        )
        .await
    }

    /// The edge that already carried the predecessor's message `initiating_event_id` into a
    /// successor, if any.
    pub async fn edge_from_message(
        &self,
        predecessor: SessionId,
        initiating_event_id: EventId,
    ) -> Result<Option<ContinuationRow>> {
        self.read(move |connection| edge_from_message(connection, predecessor, initiating_event_id))
            .await
    }

    /// Successors that never got the run for their copied message (a crash or a full disk
    /// came between their creation and the queueing of the run), oldest first: the boot sweep
    /// queues it.
    pub async fn successors_without_their_run(&self) -> Result<Vec<SessionId>> {
        self.read(successors_without_their_run).await
    }

    /// How many successors the session has.
    pub async fn count_successors(&self, predecessor: SessionId) -> Result<usize> {
        self.read(move |connection| count_successors(connection, predecessor))
            .await
    }

    /// The edge that made `successor`, if it is one.
    pub async fn edge_to(&self, successor: SessionId) -> Result<Option<ContinuationRow>> {
        self.read(move |connection| edge_to(connection, successor))
            .await
    }

    /// The fork's link to the session it branched from, when it is a fork.
    pub async fn fork_link(&self, session_id: SessionId) -> Result<Option<ContinuationLink>> {
        self.read(move |connection| fork_link(connection, session_id))
            .await
    }

    /// The session's `continued_from` and `continued_to` links (the newest successor).
    pub async fn continuation_links(
        &self,
        session_id: SessionId,
    ) -> Result<(Option<ContinuationLink>, Option<ContinuationLink>)> {
        self.read(move |connection| links(connection, session_id))
            .await
    }
}
