//! Continuation edges: `session_continuations`, one row per predecessor → successor.

use rusqlite::{Connection, OptionalExtension, Row, params};
use seed_events::{ContinuationId, EventId, SessionId};

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

fn edge_from_row(row: &Row<'_>) -> rusqlite::Result<Result<ContinuationRow>> {
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
