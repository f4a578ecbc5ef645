//! Store entries' events in a session's log: the log follows the store commit by commit. A
//! commit of the durable files that adds entries writes their events in the same transaction
//! ([`SessionFiles::commit_projecting`]); opening a store projects again whatever the log lacks
//! ([`Store::append_projection`]), the net for a store written before or restored from elsewhere.

use std::sync::Arc;

use crate::sql::Connection;
use seed_durable::Append;
use seed_events::body::kind;
use seed_events::{EventBody, NewEvent, RunId, SessionEvent, SessionId};

use crate::files::{SessionFiles, append_lines, append_lines_locking, known_key_for_write};
use crate::runs::send_run_trace_parent;
use crate::sessions::key_for_write;
use crate::{Result, Store, log};

/// Store entries' events for a session's log.
#[derive(Debug, Clone)]
pub struct Projection {
    pub session_id: SessionId,
    pub events: Vec<NewEvent>,
    /// Calls whose result the runtime may already have written to the log (a delegated
    /// child's): such a result is written as a `notice` when the log holds one.
    pub delivered_calls: Vec<String>,
}

impl Projection {
    /// The events as the log holds them once `written`: a delivered call's result that the log
    /// answered earlier is a notice.
    fn placed(self, written: Written) -> Result<Vec<SessionEvent>> {
        let (placed, answered_earlier) = written;
        let placed = placed.placed()?;
        let mut events = self.events;
        for (idx, call_id) in answered_earlier {
            events[idx].kind = kind::NOTICE.to_owned();
            events[idx].meta = answered_earlier_meta(&call_id);
        }
        Ok(log::stored_events(self.session_id, events, &placed))
    }
}

/// Results of a projection, by their place in the batch and their call.
type ResultsAt = Vec<(usize, String)>;

/// Where a projection's rows went (once the transaction's answers are read), and its results
/// written as notices.
type Written = (log::LaterPlaced, ResultsAt);

/// A projection ready for the writer: its rows serialized on the caller's thread, and the
/// results that may have been delivered (their place in the batch, their call).
struct PreparedProjection {
    session_id: SessionId,
    rows: Vec<log::EventRow>,
    delivered: ResultsAt,
}

impl PreparedProjection {
    fn of(projection: &Projection) -> PreparedProjection {
        // Only a result's content is read back into its body, and only when a call may have
        // been delivered: an event's kind says what it is.
        let delivered = projection
            .events
            .iter()
            .enumerate()
            .filter(|(_, event)| {
                !projection.delivered_calls.is_empty() && event.kind == kind::TOOL_RESULT
            })
            .filter_map(|(idx, event)| {
                let EventBody::ToolResult(result) = event.body() else {
                    return None;
                };
                projection
                    .delivered_calls
                    .contains(&result.tool_call_id)
                    .then_some((idx, result.tool_call_id))
            })
            .collect();
        PreparedProjection {
            session_id: projection.session_id,
            rows: projection.events.iter().map(log::EventRow::of).collect(),
            delivered,
        }
    }

    /// Appends the rows, a delivered call's result as a notice where the log already answers
    /// the call. Returns where the rows went and the results written as notices. May run
    /// again after a rollback: it rewrites a copy, when it rewrites.
    fn write(&self, connection: &Connection) -> Result<Written> {
        let session_key = key_for_write(connection, self.session_id)?;
        self.write_of_key(connection, session_key, false)
    }

    /// [`PreparedProjection::write`], for a session whose key the caller knows (a step's
    /// commit, whose durable files looked it up once): it is not looked up again.
    fn write_of_key(
        &self,
        connection: &Connection,
        session_key: i64,
        row_held: bool,
    ) -> Result<Written> {
        let session_id = self.session_id;
        let mut answered_earlier = Vec::new();
        for (idx, call_id) in &self.delivered {
            if log::has_tool_result(connection, session_id, call_id)? {
                answered_earlier.push((*idx, call_id.clone()));
            }
        }
        let mut rows = std::borrow::Cow::Borrowed(&self.rows[..]);
        for (idx, call_id) in &answered_earlier {
            let row = &mut rows.to_mut()[*idx];
            row.kind = kind::NOTICE.to_owned();
            row.meta = answered_earlier_meta(call_id).to_string();
        }
        let placed =
            log::insert_rows_of_key_later(connection, session_key, session_id, &rows, row_held)?;
        Ok((placed, answered_earlier))
    }
}

/// The meta of a delegated call's result written as a notice: the call had its result already.
fn answered_earlier_meta(call_id: &str) -> serde_json::Value {
    serde_json::json!({ "answered_earlier": call_id })
}

impl Store {
    /// Appends a projection of store entries, as [`Store::append_events`], except that a
    /// `tool_result` for one of its delivered calls (calls whose result the runtime may already
    /// have written to the log: a delegated child's) is written as a `notice` when the log
    /// already holds a result for that call. Checked in the appending transaction, so a
    /// delivery racing the projection still leaves exactly one result per call in the log.
    pub async fn append_projection(&self, projection: Projection) -> Result<Vec<SessionEvent>> {
        let prepared = PreparedProjection::of(&projection);
        let written = self
            .write(Some(projection.session_id), move |connection| {
                prepared.write(connection)
            })
            .await?;
        projection.placed(written)
    }
}

impl SessionFiles {
    /// Appends `batch` to the session's durable files and, in the same transaction, the log
    /// events of the entries it adds (`projection`, as [`Store::append_projection`] writes
    /// them): the log follows the store commit by commit, and nothing is seen before both
    /// are committed. Returns the events as the log holds them (none without a projection).
    /// A refused commit writes neither.
    pub async fn commit_projecting(
        &self,
        batch: Vec<Append>,
        projection: Option<Projection>,
    ) -> Result<Vec<SessionEvent>> {
        self.commit_projecting_traced(batch, projection, None).await
    }

    /// [`SessionFiles::commit_projecting`], keeping `trace_parent`'s traceparent with its run
    /// ([`Store::set_run_trace_parent`]) in the same transaction: a traced turn's first commit
    /// carries its run's span, so that keeping it costs no commit of its own.
    pub async fn commit_projecting_traced(
        &self,
        batch: Vec<Append>,
        projection: Option<Projection>,
        trace_parent: Option<(RunId, String)>,
    ) -> Result<Vec<SessionEvent>> {
        if projection.is_none() && trace_parent.is_none() {
            use seed_durable::DurableFs;
            self.commit(batch).await?;
            return Ok(Vec::new());
        }
        let prepared = projection.as_ref().map(PreparedProjection::of);
        let session_id = self.session_id();
        let session_key = Arc::clone(&self.session_key);
        let written = self
            .store
            .write_appends(session_id, session_key.get().copied(), move |connection| {
                let key = known_key_for_write(&session_key, connection, session_id)?;
                if let Some((run_id, traceparent)) = &trace_parent {
                    send_run_trace_parent(connection, *run_id, traceparent)?;
                }
                match &prepared {
                    // The lines' insert takes the session's row for the log's append after it.
                    Some(prepared) => {
                        let (row_held, ids) = append_lines_locking(connection, key, &batch)?;
                        let written = prepared.write_of_key(connection, key, row_held)?;
                        Ok((ids, Some(written)))
                    }
                    None => append_lines(connection, key, &batch).map(|ids| (ids, None)),
                }
            })
            .await?;
        let (ids, written) = written;
        self.note_lines_written(ids);
        match (projection, written) {
            (Some(projection), Some(written)) => {
                debug_assert_eq!(projection.session_id, session_id);
                projection.placed(written)
            }
            _ => Ok(Vec::new()),
        }
    }
}
