//! Recall telemetry: `continuation_recalls`, one row per `read thread:` call and run of seqs it
//! recalled that a continuation edge's projection left out (which edge and which seqs is
//! decided by `seed_projections::continuation::recall`). The key (edge, reader, call, first
//! seq) makes a replayed read count once.

use std::sync::atomic::Ordering;

use crate::params;
use crate::sql::{Connection, Row};
use seed_events::{ContinuationId, SessionId};

use crate::{ContinuationRow, Error, Result, Store};

/// The most edges a reader's lineage is walked back (a chain longer than this is cut: its
/// oldest edges count no recalls).
pub const RECALL_LINEAGE_EDGES_MAX: usize = 64;

/// A run of seqs one read call recalled, to record against an edge.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewRecall {
    pub continuation_id: ContinuationId,
    /// The session whose read recalled the range.
    pub reader_session_id: SessionId,
    /// The read's call: with the edge, the reader and the first seq, the key.
    pub tool_call_id: String,
    pub from_seq: i64,
    pub to_seq: i64,
    pub created_at_ms: i64,
}

/// A recorded recall of a reader, with the thread it read (the edge's predecessor).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReaderRecall {
    pub continuation_id: ContinuationId,
    pub thread: SessionId,
    pub tool_call_id: String,
    pub from_seq: i64,
    pub to_seq: i64,
}

/// The recalls of one range of an edge by one reader, counted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecallSummary {
    pub continuation_id: ContinuationId,
    pub predecessor_session_id: SessionId,
    pub successor_session_id: SessionId,
    pub reader_session_id: SessionId,
    pub from_seq: i64,
    pub to_seq: i64,
    /// How many distinct read calls recalled this range.
    pub times: u64,
    pub last_recalled_at_ms: i64,
}

/// Inserts the recalls; one already recorded (a replayed read) is left as it is. Returns how
/// many were new.
pub(crate) fn record_recalls(connection: &Connection, recalls: &[NewRecall]) -> Result<usize> {
    let mut statement = connection.prepare_cached(
        "INSERT INTO continuation_recalls (continuation_id, reader_session_id, tool_call_id,
             from_seq, to_seq, created_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)
         ON CONFLICT (continuation_id, reader_session_id, tool_call_id, from_seq) DO NOTHING",
    )?;
    let mut n_new = 0;
    for recall in recalls {
        assert!(
            recall.from_seq >= 1 && recall.from_seq <= recall.to_seq,
            "a recall is a run of seqs: {recall:?}"
        );
        n_new += statement.execute(params![
            recall.continuation_id.to_string(),
            recall.reader_session_id.to_string(),
            recall.tool_call_id,
            recall.from_seq,
            recall.to_seq,
            recall.created_at_ms,
        ])?;
    }
    Ok(n_new)
}

/// The edges behind `session_id`, newest first: the edge that made it, the one that made its
/// predecessor, …, at most [`RECALL_LINEAGE_EDGES_MAX`].
pub(crate) fn lineage_edges(
    connection: &Connection,
    session_id: SessionId,
) -> Result<Vec<ContinuationRow>> {
    let mut edges: Vec<ContinuationRow> = Vec::new();
    let mut current = session_id;
    while edges.len() < RECALL_LINEAGE_EDGES_MAX {
        let Some(edge) = crate::continuations::edge_to(connection, current)? else {
            break;
        };
        current = edge.predecessor_session_id;
        // A successor has one predecessor and is created after it, so a chain never loops;
        // a loop read back is a corrupt table.
        if current == session_id || edges.iter().any(|seen| seen.id == edge.id) {
            return Err(Error::corrupt(
                "session_continuations",
                "a chain of continuations loops",
            ));
        }
        edges.push(edge);
    }
    Ok(edges)
}

fn parse_id<T>(text: &str) -> Result<T>
where
    T: std::str::FromStr,
    T::Err: std::fmt::Display,
{
    Error::parse_column("continuation_recalls", text)
}

/// The recalls `reader` made, with the thread each read, oldest first.
pub(crate) fn recalls_by_reader(
    connection: &Connection,
    reader: SessionId,
) -> Result<Vec<ReaderRecall>> {
    let mut statement = connection.prepare_cached(
        "SELECT r.continuation_id, c.predecessor_session_id, r.tool_call_id, r.from_seq, r.to_seq
         FROM continuation_recalls r
         JOIN session_continuations c ON c.id = r.continuation_id
         WHERE r.reader_session_id = ?1
         ORDER BY r.created_at, r.continuation_id, r.tool_call_id, r.from_seq",
    )?;
    let rows = statement.query_map(params![reader.to_string()], |row: &Row<'_>| {
        let ids: [String; 2] = [row.get(0)?, row.get(1)?];
        let tool_call_id: String = row.get(2)?;
        let seqs: (i64, i64) = (row.get(3)?, row.get(4)?);
        Ok((ids, tool_call_id, seqs.0, seqs.1))
    })?;
    let mut recalls = Vec::new();
    for row in rows {
        let (ids, tool_call_id, from_seq, to_seq) = row?;
        recalls.push(ReaderRecall {
            continuation_id: parse_id(&ids[0])?,
            thread: parse_id(&ids[1])?,
            tool_call_id,
            from_seq,
            to_seq,
        });
    }
    Ok(recalls)
}

/// The recalls counted against the edges `session_id` is the predecessor or the successor of,
/// one per edge, range and reader, by edge (oldest first) and range.
pub(crate) fn recalls_of_edges(
    connection: &Connection,
    session_id: SessionId,
) -> Result<Vec<RecallSummary>> {
    let mut statement = connection.prepare_cached(
        "SELECT c.id, c.predecessor_session_id, c.successor_session_id, r.reader_session_id,
             r.from_seq, r.to_seq, COUNT(*), MAX(r.created_at)
         FROM session_continuations c
         JOIN continuation_recalls r ON r.continuation_id = c.id
         WHERE c.predecessor_session_id = ?1 OR c.successor_session_id = ?1
         GROUP BY c.id, c.predecessor_session_id, c.successor_session_id, c.created_at,
             r.reader_session_id, r.from_seq, r.to_seq
         ORDER BY c.created_at, c.id, r.from_seq, r.to_seq, r.reader_session_id",
    )?;
    let rows = statement.query_map(params![session_id.to_string()], |row: &Row<'_>| {
        let ids: [String; 4] = [row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?];
        Ok((ids, row.get(4)?, row.get(5)?, row.get(6)?, row.get(7)?))
    })?;
    let mut summaries = Vec::new();
    for row in rows {
        let (ids, from_seq, to_seq, times, last_recalled_at_ms): ([String; 4], i64, i64, i64, i64) =
            row?;
        summaries.push(RecallSummary {
            continuation_id: parse_id(&ids[0])?,
            predecessor_session_id: parse_id(&ids[1])?,
            successor_session_id: parse_id(&ids[2])?,
            reader_session_id: parse_id(&ids[3])?,
            from_seq,
            to_seq,
            times: u64::try_from(times).unwrap_or(0),
            last_recalled_at_ms,
        });
    }
    Ok(summaries)
}

impl Store {
    /// Records what a read recalled, in one transaction through the writer (the reader's
    /// session is fenced like its other writes); a recall already recorded (the same call read
    /// again on replay) counts once. Returns how many were new, which [`Store::recalls_recorded`]
    /// adds up.
    pub async fn record_recalls(&self, recalls: Vec<NewRecall>) -> Result<usize> {
        let Some(reader) = recalls.first().map(|recall| recall.reader_session_id) else {
            return Ok(0);
        };
        let n_new = self
            .write(Some(reader), move |connection| {
                record_recalls(connection, &recalls)
            })
            .await?;
        self.recall_counter()
            .fetch_add(n_new as u64, Ordering::Relaxed);
        Ok(n_new)
    }

    /// Recalls this store recorded since it opened (replays not counted), for `/metrics`.
    pub fn recalls_recorded(&self) -> u64 {
        self.recall_counter().load(Ordering::Relaxed)
    }

    /// The continuation edges behind a session, newest first (see [`RECALL_LINEAGE_EDGES_MAX`]),
    /// read in one snapshot.
    pub async fn lineage_edges(&self, session_id: SessionId) -> Result<Vec<ContinuationRow>> {
        self.read(move |connection| {
            let snapshot = connection.snapshot()?;
            let edges = lineage_edges(connection, session_id)?;
            snapshot.finish()?;
            Ok(edges)
        })
        .await
    }

    /// The recalls a session's reads made, with the thread each read.
    pub async fn recalls_by_reader(&self, reader: SessionId) -> Result<Vec<ReaderRecall>> {
        self.read(move |connection| recalls_by_reader(connection, reader))
            .await
    }

    /// The recalls of the edges a session is on, either side, counted per edge, range and
    /// reader.
    pub async fn recalls_of_edges(&self, session_id: SessionId) -> Result<Vec<RecallSummary>> {
        self.read(move |connection| recalls_of_edges(connection, session_id))
            .await
    }
}
