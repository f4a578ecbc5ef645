//! Delegated children and the runs that wait on them: a child started (session, task, run) in
//! one transaction; its end delivered to the parent's delegate call in the transaction that
//! ends it (a notice instead when the call already has a result); a parent parked on its
//! children, or resumed for a later pass once they have all ended.

use crate::params;
use crate::sql::Connection;
use seed_events::{
    EventRole, NewEvent, NoticeBody, RunId, RunStatus, SessionEvent, SessionId, ToolResultBody,
};

use crate::NewSession;
use crate::Store;
use crate::error::collect_rows;
use crate::runs::{NewRun, RUN_COLUMNS, RunRow, finish_run, insert_run, run_from_row, run_is_open};
use crate::{Error, Result, log};

/// The meta key of a delegated child's task (its seq 1) that names the parent's session, run
/// and delegate call.
pub const DELEGATED_BY: &str = "delegated_by";

/// The parent's session and delegate call named by a child's task meta ([`DELEGATED_BY`]).
pub fn delegated_by(task_meta: &serde_json::Value) -> Option<(SessionId, String)> {
    let by = task_meta.get(DELEGATED_BY)?;
    let session_id = by.get("session_id")?.as_str()?.parse().ok()?;
    let call_id = by
        .get("tool_call_id")
        .and_then(|id| id.as_str())
        .unwrap_or_default()
        .to_owned();
    Some((session_id, call_id))
}

/// What a delegated child's end delivers to its parent, in the transaction that ends it.
#[derive(Debug, Clone, PartialEq)]
pub struct ChildDelivery {
    pub parent_session_id: SessionId,
    pub parent_run_id: RunId,
    /// The parent's delegate call.
    pub tool_call_id: String,
    /// The call's result, appended to the parent's log when the call has none yet.
    pub result: NewEvent,
    /// Appended instead when the call already has a result (a crash had it answered as
    /// interrupted), so the call keeps one result and the child's answer is still told.
    pub notice: NewEvent,
}

/// The child whose delivery it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeliveringChild {
    pub session_id: SessionId,
    pub run_id: RunId,
    pub parent_run_id: RunId,
}

impl ChildDelivery {
    /// The delivery of `child`'s outcome, `content` (an error when `is_error`), to the parent's
    /// delegate call `tool_call_id` in session `parent_session_id`.
    pub fn new(
        child: DeliveringChild,
        parent_session_id: SessionId,
        tool_call_id: String,
        content: String,
        is_error: bool,
        now_ms: i64,
    ) -> ChildDelivery {
        let meta = serde_json::json!({
            "child_session_id": child.session_id,
            "child_run_id": child.run_id,
            "tool_call_id": tool_call_id,
        });
        let notice = NoticeBody::text(format!(
            "The delegated task of call {tool_call_id} finished after that call was answered \
             as interrupted. Its result: {content}"
        ));
        let result = ToolResultBody {
            tool_call_id: tool_call_id.clone(),
            tool_name: "delegate".to_owned(),
            content,
            is_error,
            attachments: None,
            rest: serde_json::Map::new(),
        };
        let result = NewEvent {
            meta: meta.clone(),
            run_id: Some(child.parent_run_id),
            ..NewEvent::new(result, EventRole::Tool, "runtime", now_ms)
        };
        let notice = NewEvent {
            meta,
            run_id: Some(child.parent_run_id),
            ..NewEvent::new(notice, EventRole::System, "runtime", now_ms)
        };
        ChildDelivery {
            parent_session_id,
            parent_run_id: child.parent_run_id,
            tool_call_id,
            result,
            notice,
        }
    }
}

/// Delivers to the parent, when its session is still there: the result of its call, or a
/// notice when the call has one already; then resumes the parent once all its children have
/// ended.
/// Delivers a child's result to its parent's log; returns the seq it was written at, `None`
/// when the parent is gone.
fn deliver(connection: &Connection, delivery: &ChildDelivery, now_ms: i64) -> Result<Option<i64>> {
    if !crate::sessions::session_exists(connection, delivery.parent_session_id)? {
        return Ok(None);
    }
    let answered = log::has_tool_result(
        connection,
        delivery.parent_session_id,
        &delivery.tool_call_id,
    )?;
    let event = if answered {
        &delivery.notice
    } else {
        &delivery.result
    };
    let written = log::append_events(
        connection,
        delivery.parent_session_id,
        std::slice::from_ref(event),
    )?;
    resume_if_children_done(connection, delivery.parent_run_id, now_ms)?;
    Ok(written.first().map(|event| event.seq))
}

/// What deleting session `session_id` owes the parents of its open delegated runs: each
/// parent's call is answered with an error saying the child was deleted. Read before the
/// delete (the task's meta goes with it); delivered after it (the child's run is gone then, so
/// it no longer holds its parent).
pub(crate) fn deliveries_owed_by_deleting(
    connection: &Connection,
    session_id: SessionId,
    now_ms: i64,
) -> Result<Vec<ChildDelivery>> {
    let mut statement = connection.prepare_cached(concat!(
        "SELECT id, parent_run_id FROM runs WHERE session_id = ?1 AND parent_run_id IS NOT NULL
           AND ",
        run_is_open!(),
        " ORDER BY rowid"
    ))?;
    let open = collect_rows(statement.query_map(params![session_id.to_string()], |row| {
        let (run_id, parent_run_id): (String, String) = (row.get(0)?, row.get(1)?);
        Ok(Error::parse_column("runs", &run_id)
            .and_then(|run_id| Ok((run_id, Error::parse_column("runs", &parent_run_id)?))))
    })?)?;
    if open.is_empty() {
        return Ok(Vec::new());
    }
    let Some(task) = log::read_events(connection, session_id, 1, 1, 1)?.pop() else {
        return Ok(Vec::new());
    };
    let Some((parent_session_id, call_id)) = delegated_by(&task.meta) else {
        return Ok(Vec::new());
    };
    let mut deliveries = Vec::with_capacity(open.len());
    for (run_id, parent_run_id) in open {
        let child = DeliveringChild {
            session_id,
            run_id,
            parent_run_id,
        };
        deliveries.push(ChildDelivery::new(
            child,
            parent_session_id,
            call_id.clone(),
            "the child session was deleted before its task finished".to_owned(),
            true,
            now_ms,
        ));
    }
    Ok(deliveries)
}

/// Delivers what [`deliveries_owed_by_deleting`] found, once the child's rows are deleted.
pub(crate) fn deliver_owed(
    connection: &Connection,
    deliveries: &[ChildDelivery],
    now_ms: i64,
) -> Result<()> {
    for delivery in deliveries {
        deliver(connection, delivery, now_ms)?;
    }
    Ok(())
}

/// Ends a run (as [`finish_run`]) and, for a child that this call ended, delivers its result to
/// the parent and resumes the parent once all its children have ended. Returns whether the run
/// was ended by this call, and the seq of the result in the parent's log when it was delivered.
pub(crate) fn finish_run_delivering(
    connection: &Connection,
    id: RunId,
    status: RunStatus,
    result: Option<&str>,
    now_ms: i64,
    delivery: Option<&ChildDelivery>,
) -> Result<(bool, Option<i64>)> {
    let finished = finish_run(connection, id, status, result, now_ms)?;
    let delivered = match delivery.filter(|_| finished) {
        Some(delivery) => deliver(connection, delivery, now_ms)?,
        None => None,
    };
    Ok((finished, delivered))
}

/// Inserts a delegated child: its session, the task as its first message, and its run, in one
/// transaction. The message's meta names the parent's session, run and call.
pub(crate) fn start_child(
    connection: &Connection,
    child: &crate::NewSession,
    task: &NewEvent,
    run: &NewRun,
) -> Result<(SessionEvent, RunRow)> {
    crate::sessions::insert_session(connection, child)?;
    let stored = log::append_events(connection, child.id, std::slice::from_ref(task))?
        .pop()
        .ok_or_else(|| Error::corrupt("session_events", "an append stored no event"))?;
    let run = NewRun {
        user_event_ids: vec![stored.id],
        ..run.clone()
    };
    insert_run(connection, &run)?;
    Ok((stored, run.queued()))
}

/// The runs a run started as children, oldest first.
pub(crate) fn child_runs(connection: &Connection, parent_run_id: RunId) -> Result<Vec<RunRow>> {
    let mut statement = connection.prepare_cached(&format!(
        "SELECT {RUN_COLUMNS} FROM runs WHERE parent_run_id = ?1 ORDER BY rowid"
    ))?;
    collect_rows(statement.query_map(params![parent_run_id.to_string()], run_from_row)?)
}

/// Gives a run a later pass: back in the queue with its pass counted up. Only a run that is
/// parked or still running (the pass is decided at its end) is resumed; returns whether it was.
pub(crate) fn resume_run(connection: &Connection, run_id: RunId, now_ms: i64) -> Result<bool> {
    let n_updated = connection
        .prepare_cached(
            "UPDATE runs SET status = 'queued', owner = NULL, pass = pass + 1, updated_at = ?2,
                 pass_started = 0
             WHERE id = ?1 AND status IN ('parked', 'running')",
        )?
        .execute(params![run_id.to_string(), now_ms])?;
    Ok(n_updated == 1)
}

/// Whether run `?1` has a child still open.
pub(crate) const HAS_OPEN_CHILDREN: &str = concat!(
    "SELECT EXISTS (SELECT 1 FROM runs WHERE parent_run_id = ?1 AND ",
    run_is_open!(),
    ")"
);

/// [`resume_if_children_done`]'s statement. A run parked on a call's pending approval (its
/// pass delegated and called a verb that needs approval) is not resumed here: its pass is not
/// over, and the decision takes it on (see `approvals`), to park on its children again then.
pub(crate) const RESUME_IF_CHILDREN_DONE: &str = concat!(
    "UPDATE runs SET status = 'queued', owner = NULL, pass = pass + 1, updated_at = ?2,
         pass_started = 0
     WHERE id = ?1 AND status = 'parked'
       AND NOT EXISTS (SELECT 1 FROM runs WHERE parent_run_id = ?1 AND ",
    run_is_open!(),
    ")
       AND NOT EXISTS (SELECT 1 FROM approvals AS waiting
                       WHERE waiting.session_id = runs.session_id AND waiting.run_id = ?1
                         AND waiting.status = 'pending')"
);

/// Where a run whose turn ended on a delegation goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ParkOutcome {
    /// A child is still running: the run waits for it.
    Parked,
    /// Every child had already ended: the run takes its later pass at once.
    Resumed,
}

/// Parks a run on its children, or resumes it when they have all ended, in one transaction: a
/// child that ends while its parent's turn is still closing is never missed.
pub(crate) fn park_run(connection: &Connection, run_id: RunId, now_ms: i64) -> Result<ParkOutcome> {
    if connection.engine() == crate::Engine::Postgres {
        // A child that ends on another node delivers its result to this session's log, which
        // holds the session's row, and then resumes the parent if it is parked. Holding that
        // row here too puts the two in turn: a child's end that commits first is seen by the
        // check below (a statement after the lock), and one that commits after sees the run
        // parked. Without it, each could miss the other's change and the run stay parked.
        connection
            .prepare_cached(
                "SELECT 1 FROM sessions WHERE id = (SELECT session_id FROM runs WHERE id = ?1)
                 FOR NO KEY UPDATE",
            )?
            .send(params![run_id.to_string()])?;
    }
    let open_children: bool = connection
        .prepare_cached(HAS_OPEN_CHILDREN)?
        .query_row(params![run_id.to_string()], |row| row.get(0))?;
    if open_children {
        connection
            .prepare_cached("UPDATE runs SET status = 'parked', updated_at = ?2 WHERE id = ?1")?
            .execute(params![run_id.to_string(), now_ms])?;
        Ok(ParkOutcome::Parked)
    } else {
        resume_run(connection, run_id, now_ms)?;
        Ok(ParkOutcome::Resumed)
    }
}

/// Resumes a parked run whose children have all ended; returns whether it did.
pub(crate) fn resume_if_children_done(
    connection: &Connection,
    run_id: RunId,
    now_ms: i64,
) -> Result<bool> {
    let n_updated = connection
        .prepare_cached(RESUME_IF_CHILDREN_DONE)?
        .execute(params![run_id.to_string(), now_ms])?;
    Ok(n_updated == 1)
}

impl Store {
    /// Starts a delegated child in one transaction: its session, the task as its first message,
    /// and its run (`run.user_event_ids` is replaced by the message's id).
    pub async fn start_child(
        &self,
        child: NewSession,
        task: NewEvent,
        run: NewRun,
    ) -> Result<(SessionEvent, RunRow)> {
        let scope = child.parent_session_id;
        self.write(scope, move |connection| {
            start_child(connection, &child, &task, &run)
        })
        .await
    }

    /// The runs `parent_run_id` started as children, oldest first.
    pub async fn child_runs(&self, parent_run_id: RunId) -> Result<Vec<RunRow>> {
        self.read(move |connection| child_runs(connection, parent_run_id))
            .await
    }

    /// Parks a run whose turn ended on a delegation, or resumes it at once when its children
    /// have all ended (one transaction, so a child that ends meanwhile is never missed).
    pub async fn park_run(&self, run_id: RunId, now_ms: i64) -> Result<ParkOutcome> {
        self.write(None, move |connection| park_run(connection, run_id, now_ms))
            .await
    }

    /// Resumes a parked run once its children have all ended; returns whether it did.
    pub async fn resume_if_children_done(&self, run_id: RunId, now_ms: i64) -> Result<bool> {
        self.write(None, move |connection| {
            resume_if_children_done(connection, run_id, now_ms)
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The result and the notice a child's end delivers, as the parent's log stores them.
    #[test]
    fn a_delivery_writes_the_result_and_the_notice_as_before() {
        let child = DeliveringChild {
            session_id: SessionId::from_u128(2),
            run_id: RunId::from_u128(3),
            parent_run_id: RunId::from_u128(4),
        };
        let delivery = ChildDelivery::new(
            child,
            SessionId::from_u128(1),
            "call-1".to_owned(),
            "done".to_owned(),
            true,
            7,
        );
        let meta = json!({
            "child_session_id": child.session_id,
            "child_run_id": child.run_id,
            "tool_call_id": "call-1",
        });
        assert_eq!(
            delivery.result,
            NewEvent {
                kind: "tool_result".to_owned(),
                role: Some(EventRole::Tool),
                actor: Some("runtime".to_owned()),
                content: json!({
                    "tool_call_id": "call-1",
                    "tool_name": "delegate",
                    "content": "done",
                    "is_error": true,
                }),
                meta: meta.clone(),
                run_id: Some(child.parent_run_id),
                pi_entry_id: None,
                created_at_ms: 7,
            }
        );
        assert_eq!(
            delivery.notice,
            NewEvent {
                kind: "notice".to_owned(),
                role: Some(EventRole::System),
                actor: Some("runtime".to_owned()),
                content: json!({
                    "text": "The delegated task of call call-1 finished after that call was \
                             answered as interrupted. Its result: done",
                }),
                meta,
                run_id: Some(child.parent_run_id),
                pi_entry_id: None,
                created_at_ms: 7,
            }
        );
    }
}
