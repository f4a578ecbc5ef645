//! What a turn reads before it starts, in one read transaction: one snapshot of the session, its
//! runs, its log and its account's memory, in one trip to a reader instead of one trip each.

use crate::params;
use crate::sql::Connection;
use seed_events::{EventId, RunId, SessionEvent, SessionId};

use crate::error::collect_rows;
use crate::log::{EVENT_COLUMNS, event_from_row, last_seq_of_key};
use crate::memory::{MEMORY_FILE_COLUMNS, MemoryFileRow, memory_file_from_row};
use crate::sessions::{SESSION_COLUMNS, SessionRow, key_for_read, session_from_row};
use crate::{Error, Result, Store};
use seed_durable::FileName;

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
            read_turn_view(connection, session_id, run_id, after_mark, newest_line)
        })
        .await
    }

    /// [`PendingEvents`] past `mark` alone.
    pub async fn pending_events(&self, session_id: SessionId, mark: i64) -> Result<PendingEvents> {
        self.read(move |connection| pending_events(connection, session_id, mark))
            .await
    }
}

/// [`Store::turn_view`] on a reader's connection: five queries in one snapshot, sent together
/// (on PostgreSQL the `COMMIT` reads all their answers: two round trips in all).
fn read_turn_view(
    connection: &Connection,
    session_id: SessionId,
    run_id: RunId,
    after_mark: Option<i64>,
    newest_line: bool,
) -> Result<Option<TurnView>> {
    let snapshot = connection.snapshot()?;
    let id = session_id.to_string();
    let head = snapshot
        .prepare_cached(turn_head_query(newest_line))?
        .send_query_map(params![id, run_id.to_string()], |row| {
            let session = session_from_row(row)?;
            let newest_lines: [Option<i64>; 3] = [row.get(14)?, row.get(15)?, row.get(16)?];
            Ok((
                session,
                TurnHead {
                    n_children: row.get(11)?,
                    max_pi_entry_id: row.get(12)?,
                    last_seq: row.get(13)?,
                    newest_line: newest_lines.into_iter().flatten().max(),
                },
            ))
        })?;
    let queued = snapshot
        .prepare_cached(crate::runs::QUEUED_EVENT_IDS)?
        .send_query_map(params![id], |row| row.get::<_, String>(0))?;
    let memory = snapshot
        .prepare_cached(&format!(
            "SELECT {MEMORY_FILE_COLUMNS} FROM memory_files
             WHERE account_id = (SELECT account_id FROM sessions WHERE id = ?1) ORDER BY path"
        ))?
        .send_query_map(params![id], memory_file_from_row)?;
    let schedules = snapshot
        .prepare_cached(crate::schedules::active_schedules())?
        .send_query_map(params![id], crate::schedules::schedule_from_row)?;
    let pending = after_mark
        .map(|mark| {
            snapshot
                .prepare_cached(&format!(
                    "SELECT {EVENT_COLUMNS} FROM session_events {PENDING_EVENTS_OF_SESSION}"
                ))?
                .send_query_map(params![id, mark], move |row| {
                    event_from_row(session_id, row)
                })
                .map(|events| (mark, events))
        })
        .transpose()?;
    snapshot.finish()?;

    let Some((session, head)) = head.values()?.pop() else {
        return Ok(None);
    };
    let pending = match pending {
        Some((mark, events)) => Some(pending_in_order(
            events.values()?.into_iter().collect::<Result<_>>()?,
            head.last_seq.max(mark),
        )?),
        None => None,
    };
    let mut queued_event_ids = Vec::new();
    for ids in queued.values()? {
        let ids: Vec<i64> = serde_json::from_str(&ids).map_err(|e| Error::corrupt("runs", e))?;
        queued_event_ids.extend(ids.into_iter().map(EventId));
    }
    Ok(Some(TurnView {
        session: session?,
        n_children: usize::try_from(head.n_children).unwrap_or(0),
        max_pi_entry_id: head.max_pi_entry_id,
        queued_event_ids,
        memory: memory.values()?.into_iter().collect::<Result<_>>()?,
        pending,
        schedules: schedules.values()?.into_iter().collect::<Result<_>>()?,
        newest_line: head.newest_line,
    }))
}

/// What [`turn_head_query`] reads beside the session's row.
struct TurnHead {
    n_children: i64,
    max_pi_entry_id: Option<i64>,
    last_seq: i64,
    newest_line: Option<i64>,
}

/// The session `?1`'s row ([`SESSION_COLUMNS`]), then: the runs run `?2` started, the log's
/// highest mark ([`NEWEST_PI_ENTRY_ID`]), its newest seq, and with `newest_line` the newest
/// line of each durable file (see [`crate::files::newest_line_id`]), else three NULLs.
fn turn_head_query(newest_line: bool) -> &'static str {
    static QUERIES: std::sync::OnceLock<[String; 2]> = std::sync::OnceLock::new();
    let [without, with] = QUERIES.get_or_init(|| {
        let query = |newest_lines: &str| {
            format!(
                "SELECT {SESSION_COLUMNS},
                     (SELECT count(*) FROM runs WHERE parent_run_id = ?2),
                     (SELECT pi_entry_id FROM session_events
                      WHERE session_key = s.key AND pi_entry_id IS NOT NULL
                      ORDER BY seq DESC LIMIT 1),
                     (SELECT COALESCE(MAX(seq), 0) FROM session_events WHERE session_key = s.key),
                     {newest_lines}
                 FROM sessions AS s WHERE s.id = ?1"
            )
        };
        let newest: Vec<String> = FileName::ALL
            .iter()
            .map(|file| {
                format!(
                    "(SELECT MAX(id) FROM session_durable_files
                      WHERE session_key = s.key AND file = {})",
                    file.code()
                )
            })
            .collect();
        [
            query("CAST(NULL AS BIGINT), CAST(NULL AS BIGINT), CAST(NULL AS BIGINT)"),
            query(&newest.join(", ")),
        ]
    });
    if newest_line { with } else { without }
}

/// Which events [`pending_events`] reads: by the index of just the events no store entry was
/// projected from (`session_events_pending`), so that the events projected since the mark are
/// not read at all.
pub(crate) const PENDING_EVENTS: &str =
    "WHERE session_key = ?1 AND seq > ?2 AND seq <= ?3 AND pi_entry_id IS NULL ORDER BY seq";

/// [`PENDING_EVENTS`] of the session `?1` past `?2`, by the same index, within a snapshot: its
/// newest seq, read in the same snapshot, bounds them already.
pub(crate) const PENDING_EVENTS_OF_SESSION: &str =
    "WHERE session_key = (SELECT key FROM sessions WHERE id = ?1)
     AND seq > ?2 AND pi_entry_id IS NULL ORDER BY seq";

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
    pending_in_order(collect_rows(rows)?, through_seq)
}

/// The events read as pending up to `through_seq`, checked to be in seq order.
fn pending_in_order(events: Vec<SessionEvent>, through_seq: i64) -> Result<PendingEvents> {
    if events.windows(2).any(|pair| pair[0].seq >= pair[1].seq) {
        return Err(Error::corrupt("session_events", "seqs out of order"));
    }
    Ok(PendingEvents {
        events,
        through_seq,
    })
}
