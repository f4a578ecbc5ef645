//! What a turn reads before it starts, in one read transaction: one snapshot of the session, its
//! runs, its log and its account's memory, in one trip to a reader instead of one trip each.

use crate::params;
use crate::sql::Connection;
use seed_events::{EventId, RunId, SessionEvent, SessionId};

use crate::log::{EVENT_COLUMNS, event_from_row, last_seq_of_key, newest_pi_entry_id};
use crate::memory::{MemoryFileRow, list_memory};
use crate::sessions::{SessionRow, get_session, key_for_read};
use crate::{Error, Result, Store};

/// A session as its next turn starts.
#[derive(Debug, Clone)]
pub struct TurnView {
    pub session: SessionRow,
    /// Runs the run has started (children it delegated to).
    pub n_children: usize,
    /// The highest store entry the session's log names.
    pub max_pi_entry_id: Option<i64>,
    /// The messages of the session's queued runs.
    pub queued_event_ids: Vec<EventId>,
    /// The account's memory files.
    pub memory: Vec<MemoryFileRow>,
    /// Asked for with a mark: what the log holds past it for the store to import.
    pub pending: Option<PendingEvents>,
    /// The session's wake-ups still to fire, soonest first.
    pub schedules: Vec<crate::ScheduleRow>,
    /// Asked for: the session's newest durable line (see [`Store::newest_durable_line`]).
    pub newest_line: Option<i64>,
}

/// The events past a mark that no store entry was projected from (`pi_entry_id` unset), in seq
/// order: the only ones past the mark an import can take.
#[derive(Debug, Clone, PartialEq)]
pub struct PendingEvents {
    pub events: Vec<SessionEvent>,
    /// The newest seq of the log when it was read: the events up to it that are not listed
    /// came from the store.
    pub through_seq: i64,
}

impl Store {
    /// The view run `run_id` of `session_id` starts its turn from; with `after_mark`, the
    /// pending events past it too, and with `newest_line` the session's newest durable line.
    /// `None` when the session is gone.
    pub async fn turn_view(
        &self,
        session_id: SessionId,
        run_id: RunId,
        after_mark: Option<i64>,
        newest_line: bool,
    ) -> Result<Option<TurnView>> {
        self.read(move |connection| {
            // One snapshot for all of it.
            let snapshot = connection.snapshot()?;
            let Some(session) = get_session(connection, session_id)? else {
                return Ok(None);
            };
            let session_key = key_for_read(connection, session_id)?;
            let pending = after_mark
                .map(|mark| pending_events_of_key(connection, session_id, session_key, mark))
                .transpose()?;
            let newest_line = match newest_line {
                true => crate::files::newest_line_id(connection, session_id)?,
                false => None,
            };
            let view = TurnView {
                n_children: count_children(connection, run_id)?,
                max_pi_entry_id: newest_pi_entry_id(connection, session_key)?,
                queued_event_ids: crate::runs::queued_event_ids(connection, session_id)?,
                memory: list_memory(connection, session.account_id)?,
                pending,
                schedules: crate::schedules::list_active(connection, session_id)?,
                newest_line,
                session,
            };
            snapshot.finish()?;
            Ok(Some(view))
        })
        .await
    }

    /// [`PendingEvents`] past `mark` alone.
    pub async fn pending_events(&self, session_id: SessionId, mark: i64) -> Result<PendingEvents> {
        self.read(move |connection| pending_events(connection, session_id, mark))
            .await
    }
}

fn count_children(connection: &Connection, run_id: RunId) -> Result<usize> {
    let n: i64 = connection
        .prepare_cached("SELECT count(*) FROM runs WHERE parent_run_id = ?1")?
        .query_row(params![run_id.to_string()], |row| row.get(0))?;
    Ok(usize::try_from(n).unwrap_or(0))
}

/// Which events [`pending_events`] reads: by the index of just the events no store entry was
/// projected from (`session_events_pending`), so that the events projected since the mark are
/// not read at all.
pub(crate) const PENDING_EVENTS: &str =
    "WHERE session_key = ?1 AND seq > ?2 AND seq <= ?3 AND pi_entry_id IS NULL ORDER BY seq";

pub(crate) fn pending_events(
    connection: &Connection,
    session_id: SessionId,
    mark: i64,
) -> Result<PendingEvents> {
    let session_key = key_for_read(connection, session_id)?;
    pending_events_of_key(connection, session_id, session_key, mark)
}

/// [`pending_events`] of the session whose key the caller looked up.
fn pending_events_of_key(
    connection: &Connection,
    session_id: SessionId,
    session_key: i64,
    mark: i64,
) -> Result<PendingEvents> {
    // The newest seq first, and no event past it: an event committed between the two reads is
    // left for the next turn rather than passed over by the mark.
    let through_seq = last_seq_of_key(connection, session_key)?.max(mark);
    let mut statement = connection.prepare_cached(&format!(
        "SELECT {EVENT_COLUMNS} FROM session_events {PENDING_EVENTS}"
    ))?;
    let rows = statement.query_map(params![session_key, mark, through_seq], |row| {
        event_from_row(session_id, row)
    })?;
    let mut events: Vec<SessionEvent> = Vec::new();
    for row in rows {
        let event = row??;
        if events.last().is_some_and(|last| last.seq >= event.seq) {
            return Err(Error::corrupt("session_events", "seqs out of order"));
        }
        events.push(event);
    }
    Ok(PendingEvents {
        events,
        through_seq,
    })
}
