//! The log: `session_events`, the canonical record of each session. Appending to it is
//! `append`'s; here, reading it and its marks.

use crate::params;
use crate::schema::Engine;
use crate::sql::{Connection, OptionalExtension, Row};
use seed_events::{EventId, NewEvent, SessionEvent, SessionId};

use crate::Store;
use crate::sessions::{key_for_read, key_for_write};
use crate::{Error, Result};

mod append;
pub(crate) use append::*;

pub(crate) const EVENT_COLUMNS: &str =
    "id, seq, type, role, actor, content, meta, run_id, pi_entry_id, created_at";

pub(crate) fn event_from_row(session_id: SessionId, row: &Row<'_>) -> Result<Result<SessionEvent>> {
    let role: Option<String> = row.get(3)?;
    let content: String = row.get(5)?;
    let meta: String = row.get(6)?;
    let run_id: Option<String> = row.get(7)?;
    let parsed = (|| {
        let corrupt = |e: &dyn std::fmt::Display| Error::corrupt("session_events", e);
        Ok(SessionEvent {
            id: EventId(row.get(0)?),
            session_id,
            seq: row.get(1)?,
            kind: row.get(2)?,
            role: role
                .map(|r| r.parse())
                .transpose()
                .map_err(|e| corrupt(&e))?,
            actor: row.get(4)?,
            content: serde_json::from_str(&content).map_err(|e| corrupt(&e))?,
            meta: serde_json::from_str(&meta).map_err(|e| corrupt(&e))?,
            run_id: run_id
                .map(|r| r.parse())
                .transpose()
                .map_err(|e| corrupt(&e))?,
            pi_entry_id: row.get(8)?,
            created_at_ms: row.get(9)?,
        })
    })();
    Ok(parsed)
}

/// The session's events with `from_seq <= seq <= to_seq`, in seq order, at most `limit`.
pub(crate) fn read_events(
    connection: &Connection,
    session_id: SessionId,
    from_seq: i64,
    to_seq: i64,
    limit: usize,
) -> Result<Vec<SessionEvent>> {
    let session_key = key_for_read(connection, session_id)?;
    let mut statement = connection.prepare_cached(&format!(
        "SELECT {EVENT_COLUMNS} FROM session_events
         WHERE session_key = ?1 AND seq BETWEEN ?2 AND ?3 ORDER BY seq LIMIT ?4"
    ))?;
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    let rows = statement.query_map(params![session_key, from_seq, to_seq, limit], |row| {
        event_from_row(session_id, row)
    })?;
    let mut events = Vec::new();
    let mut previous_seq = from_seq - 1;
    for row in rows {
        let event = row??;
        // Seqs come back ascending and unique, or the table is not what we wrote.
        if event.seq <= previous_seq {
            return Err(Error::corrupt("session_events", "seqs out of order"));
        }
        previous_seq = event.seq;
        events.push(event);
    }
    Ok(events)
}

/// The session's events in each of `ranges` (seqs, both ends included), in seq order, each
/// once: what a rebuild reads besides the events it has.
pub(crate) fn read_event_ranges(
    connection: &Connection,
    session_id: SessionId,
    ranges: &[(i64, i64)],
) -> Result<Vec<SessionEvent>> {
    // One snapshot for all of them.
    let snapshot = connection.snapshot()?;
    let mut events: Vec<SessionEvent> = Vec::new();
    let mut sorted = ranges.to_vec();
    sorted.sort_unstable();
    for (from_seq, to_seq) in sorted {
        let from_seq = events
            .last()
            .map_or(from_seq, |last| from_seq.max(last.seq + 1));
        if from_seq > to_seq {
            continue;
        }
        events.extend(read_events(
            connection,
            session_id,
            from_seq,
            to_seq,
            usize::MAX,
        )?);
    }
    snapshot.finish()?;
    Ok(events)
}

/// The highest store entry id the session's log was projected from, if any.
pub(crate) fn max_pi_entry_id(
    connection: &Connection,
    session_id: SessionId,
) -> Result<Option<i64>> {
    newest_pi_entry_id(connection, key_for_read(connection, session_id)?)
}

/// The query of [`newest_pi_entry_id`]: back from the newest seq by the (session, seq) index.
pub(crate) const NEWEST_PI_ENTRY_ID: &str = "SELECT pi_entry_id FROM session_events
     WHERE session_key = ?1 AND pi_entry_id IS NOT NULL
     ORDER BY seq DESC LIMIT 1";

/// The mark of the session's newest event projected from the store, walking back from its
/// newest seq past the events Seed wrote itself. It is also the highest mark: a projection is
/// always of the entries above the log's highest mark, in entry order, so marks never go down
/// along the log ([`insert_rows`] asserts it in debug builds). So no index of the marks is
/// kept, which would cost every projected event an entry on a leaf of its session's
/// (migration 7 drops the one there was).
pub(crate) fn newest_pi_entry_id(connection: &Connection, session_key: i64) -> Result<Option<i64>> {
    connection
        .prepare_cached(NEWEST_PI_ENTRY_ID)?
        .query_row(params![session_key], |row| row.get(0))
        .optional()
}

/// The session's highest seq, 0 for an empty log.
pub(crate) fn last_seq(connection: &Connection, session_id: SessionId) -> Result<i64> {
    last_seq_of_key(connection, key_for_read(connection, session_id)?)
}

pub(crate) fn last_seq_of_key(connection: &Connection, session_key: i64) -> Result<i64> {
    connection
        .prepare_cached("SELECT COALESCE(MAX(seq), 0) FROM session_events WHERE session_key = ?1")?
        .query_row(params![session_key], |row| row.get(0))
}

/// Clears the `pi_entry_id` marks above `entry_id`: the store was lost or restored from an older
/// copy, and those entries are not in it. Their events then import like any other. Returns how
/// many events were cleared.
pub(crate) fn clear_pi_entry_ids_above(
    connection: &Connection,
    session_id: SessionId,
    entry_id: i64,
) -> Result<usize> {
    let session_key = key_for_write(connection, session_id)?;
    connection
        .prepare_cached(
            "UPDATE session_events SET pi_entry_id = NULL
             WHERE session_key = ?1 AND pi_entry_id > ?2",
        )?
        .execute(params![session_key, entry_id])
}

/// The session's newest message written by a user or a trigger (the message a continuation
/// answers), if any; with `at_or_before`, the newest whose id is at most that (a message that
/// arrived later is not the one a turn answers). Walks back from the newest seq by the
/// (session, seq) index.
pub(crate) fn newest_person_message(
    connection: &Connection,
    session_id: SessionId,
    at_or_before: Option<EventId>,
) -> Result<Option<SessionEvent>> {
    let session_key = key_for_read(connection, session_id)?;
    connection
        .prepare_cached(&format!(
            "SELECT {EVENT_COLUMNS} FROM session_events
             WHERE session_key = ?1 AND type = 'message' AND role = 'user'
                 AND actor IN ('user', 'trigger') AND (CAST(?2 AS BIGINT) IS NULL OR id <= ?2)
             ORDER BY seq DESC LIMIT 1"
        ))?
        .query_row(params![session_key, at_or_before.map(|id| id.0)], |row| {
            event_from_row(session_id, row)
        })
        .optional()?
        .transpose()
}

/// The session's events whose seq is in `seqs` or whose id is in `ids`, in seq order: what an
/// import needs besides the events past its mark (those it left out before, and the run's own
/// messages).
pub(crate) fn read_events_at(
    connection: &Connection,
    session_id: SessionId,
    seqs: &[i64],
    ids: &[EventId],
) -> Result<Vec<SessionEvent>> {
    let session_key = key_for_read(connection, session_id)?;
    let mut by_seq = connection.prepare_cached(&format!(
        "SELECT {EVENT_COLUMNS} FROM session_events WHERE session_key = ?1 AND seq = ?2"
    ))?;
    let mut by_id = connection.prepare_cached(&format!(
        "SELECT {EVENT_COLUMNS} FROM session_events WHERE session_key = ?1 AND id = ?2"
    ))?;
    let mut events = std::collections::BTreeMap::new();
    for seq in seqs {
        if let Some(event) = by_seq
            .query_row(params![session_key, seq], |row| {
                event_from_row(session_id, row)
            })
            .optional()?
        {
            let event = event?;
            events.insert(event.seq, event);
        }
    }
    for id in ids {
        if let Some(event) = by_id
            .query_row(params![session_key, id.0], |row| {
                event_from_row(session_id, row)
            })
            .optional()?
        {
            let event = event?;
            events.insert(event.seq, event);
        }
    }
    Ok(events.into_values().collect())
}

/// Whether the session's log already holds a result for the call `tool_call_id`.
pub(crate) fn has_tool_result(
    connection: &Connection,
    session_id: SessionId,
    tool_call_id: &str,
) -> Result<bool> {
    let session_key = key_for_read(connection, session_id)?;
    connection
        .prepare_cached(match connection.engine() {
            Engine::Sqlite => {
                "SELECT EXISTS (SELECT 1 FROM session_events
                 WHERE session_key = ?1 AND type = 'tool_result'
                     AND json_extract(content, '$.tool_call_id') = ?2)"
            }
            Engine::Postgres => {
                "SELECT EXISTS (SELECT 1 FROM session_events
                 WHERE session_key = ?1 AND type = 'tool_result'
                     AND content::json ->> 'tool_call_id' = ?2)"
            }
        })?
        .query_row(params![session_key, tool_call_id], |row| row.get(0))
}

impl Store {
    /// Appends events to the session's log in one transaction, assigning the next seqs.
    pub async fn append_events(
        &self,
        session_id: SessionId,
        events: Vec<NewEvent>,
    ) -> Result<Vec<SessionEvent>> {
        // Serialized here, on the caller's thread: the writer only inserts.
        let rows: Vec<EventRow> = events.iter().map(EventRow::of).collect();
        let placed = self
            .write(Some(session_id), move |connection| {
                insert_rows(connection, session_id, &rows)
            })
            .await?;
        Ok(stored_events(session_id, events, &placed))
    }

    /// Events with `from_seq <= seq <= to_seq`, in order, at most `limit` of them.
    pub async fn read_events(
        &self,
        session_id: SessionId,
        from_seq: i64,
        to_seq: i64,
        limit: usize,
    ) -> Result<Vec<SessionEvent>> {
        self.read(move |connection| read_events(connection, session_id, from_seq, to_seq, limit))
            .await
    }

    /// The session's events in each of `ranges` (seqs, both ends included), in seq order, each
    /// once, in one read.
    pub async fn read_event_ranges(
        &self,
        session_id: SessionId,
        ranges: Vec<(i64, i64)>,
    ) -> Result<Vec<SessionEvent>> {
        self.read(move |connection| read_event_ranges(connection, session_id, &ranges))
            .await
    }

    /// The session's events whose seq is in `seqs` or whose id is in `ids`, in seq order (each
    /// once); ids and seqs the session lacks are skipped.
    pub async fn read_events_at(
        &self,
        session_id: SessionId,
        seqs: Vec<i64>,
        ids: Vec<EventId>,
    ) -> Result<Vec<SessionEvent>> {
        self.read(move |connection| read_events_at(connection, session_id, &seqs, &ids))
            .await
    }

    /// The highest `pi_entry_id` in the session's log.
    pub async fn max_pi_entry_id(&self, session_id: SessionId) -> Result<Option<i64>> {
        self.read(move |connection| max_pi_entry_id(connection, session_id))
            .await
    }

    /// Clears the `pi_entry_id` marks above `entry_id` (a store lost or restored from an older
    /// copy); returns how many events were cleared.
    pub async fn clear_pi_entry_ids_above(
        &self,
        session_id: SessionId,
        entry_id: i64,
    ) -> Result<usize> {
        self.write(Some(session_id), move |connection| {
            clear_pi_entry_ids_above(connection, session_id, entry_id)
        })
        .await
    }

    /// The session's highest seq, 0 for an empty log.
    pub async fn last_seq(&self, session_id: SessionId) -> Result<i64> {
        self.read(move |connection| last_seq(connection, session_id))
            .await
    }

    /// The session's newest message written by a user or a trigger; with `at_or_before`, the
    /// newest whose event id is at most that.
    pub async fn newest_person_message(
        &self,
        session_id: SessionId,
        at_or_before: Option<EventId>,
    ) -> Result<Option<SessionEvent>> {
        self.read(move |connection| newest_person_message(connection, session_id, at_or_before))
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The log's highest mark is read as its newest, which holds only while marks never go
    /// down along a session's log: an append that would break that is a bug, and stops there.
    #[test]
    #[cfg(debug_assertions)]
    fn an_event_projected_from_an_older_entry_than_the_newest_mark_is_refused() {
        let session_id = SessionId::from_u128(1);
        let (_dir, connection) = crate::schema::database_with_a_session(&session_id.to_string());
        let projected = |entry_id| {
            let mut event = NewEvent::message(
                seed_events::EventRole::Assistant,
                "agent",
                serde_json::json!({"text": "hi"}),
                0,
            );
            event.pi_entry_id = Some(entry_id);
            event
        };
        append_events(&connection, session_id, &[projected(4), projected(4)])
            .expect("one entry's events share its mark");
        let refused = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            append_events(&connection, session_id, &[projected(3)])
        }));
        let message = refused
            .expect_err("a lower mark is refused")
            .downcast::<String>()
            .map(|message| *message)
            .unwrap_or_default();
        assert!(message.contains("projected after entry"), "{message}");
        assert_eq!(
            max_pi_entry_id(&connection, session_id).expect("read"),
            Some(4)
        );
    }
}
