//! Approvals: a call that waits for a person's decision. The run that made it parks on it (its
//! pending row and the park in one transaction); a decision is recorded and the run queued
//! again, with the same pass, in one transaction, so its turn picks the call up where it waits.
//! While a session has a pending approval no other run of it is claimed: the person's answer
//! comes before anything else the session does.

use crate::params;
use crate::sql::{Connection, OptionalExtension, Row};
use seed_events::{AccountId, RunId, SessionId};

use crate::children::ParkOutcome;
use crate::error::collect_rows;
use crate::nonces::{NonceOutcome, RequestNonce, owned_by, take_nonce};
use crate::{Error, Result, Store};

/// Where an approval stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ApprovalStatus {
    Pending,
    Approved,
    Denied,
    /// Denied because no one answered before its deadline.
    TimedOut,
}

impl ApprovalStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            ApprovalStatus::Pending => "pending",
            ApprovalStatus::Approved => "approved",
            ApprovalStatus::Denied => "denied",
            ApprovalStatus::TimedOut => "timed_out",
        }
    }

    fn parse(text: &str) -> Result<ApprovalStatus> {
        Ok(match text {
            "pending" => ApprovalStatus::Pending,
            "approved" => ApprovalStatus::Approved,
            "denied" => ApprovalStatus::Denied,
            "timed_out" => ApprovalStatus::TimedOut,
            other => {
                return Err(Error::corrupt(
                    "approvals",
                    format_args!("status {other:?}"),
                ));
            }
        })
    }
}

/// A call waiting for a decision, as its run parks on it.
#[derive(Debug, Clone, PartialEq)]
pub struct NewApproval {
    pub session_id: SessionId,
    pub run_id: RunId,
    /// The call's id, unique within the session.
    pub tool_call_id: String,
    pub verb: String,
    /// The arguments as the model wrote them.
    pub arguments: serde_json::Value,
    /// When no answer by then denies it; `None`: it waits as long as it takes.
    pub deadline_at_ms: Option<i64>,
}

/// One approval as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct ApprovalRow {
    pub session_id: SessionId,
    pub run_id: RunId,
    pub tool_call_id: String,
    pub verb: String,
    pub arguments: serde_json::Value,
    pub status: ApprovalStatus,
    /// The arguments the call runs with, for an approved one (the model's, or as edited).
    pub decided_arguments: Option<serde_json::Value>,
    /// Why it was denied (or timed out).
    pub reason: Option<String>,
    pub created_at_ms: i64,
    pub decided_at_ms: Option<i64>,
    pub deadline_at_ms: Option<i64>,
}

/// A person's decision.
#[derive(Debug, Clone, PartialEq)]
pub enum ApprovalDecision {
    /// Run the call with these arguments.
    Approve { arguments: serde_json::Value },
    /// Never run it; the model reads the reason.
    Deny { reason: String },
    /// No answer came in time: denied with the reason.
    TimeOut { reason: String },
}

/// What recording a decision did.
#[derive(Debug, Clone, PartialEq)]
pub enum DecideOutcome {
    /// Recorded; the run is queued again (when it was parked on it). The row as it is now.
    Decided(ApprovalRow),
    /// It was decided already: nothing changed. The row as it is.
    AlreadyDecided(ApprovalRow),
    /// No such approval in the session.
    NotFound,
}

const COLUMNS: &str = "session_id, run_id, tool_call_id, verb, arguments, status, \
                       decided_arguments, reason, created_at, decided_at, deadline_at";

fn json_column(text: &str) -> Result<serde_json::Value> {
    serde_json::from_str(text).map_err(|error| Error::corrupt("approvals", error))
}

fn row_of(row: &Row<'_>) -> Result<Result<ApprovalRow>> {
    let session_id: String = row.get(0)?;
    let run_id: String = row.get(1)?;
    let arguments: String = row.get(4)?;
    let status: String = row.get(5)?;
    let decided_arguments: Option<String> = row.get(6)?;
    let tool_call_id: String = row.get(2)?;
    let verb: String = row.get(3)?;
    let reason: Option<String> = row.get(7)?;
    let created_at_ms: i64 = row.get(8)?;
    let decided_at_ms: Option<i64> = row.get(9)?;
    let deadline_at_ms: Option<i64> = row.get(10)?;
    Ok((|| {
        Ok(ApprovalRow {
            session_id: Error::parse_column("approvals", &session_id)?,
            run_id: Error::parse_column("approvals", &run_id)?,
            tool_call_id,
            verb,
            arguments: json_column(&arguments)?,
            status: ApprovalStatus::parse(&status)?,
            decided_arguments: decided_arguments.as_deref().map(json_column).transpose()?,
            reason,
            created_at_ms,
            decided_at_ms,
            deadline_at_ms,
        })
    })())
}

/// The approval of call `tool_call_id` in the session, if there is one.
pub(crate) fn find(
    connection: &Connection,
    session_id: SessionId,
    tool_call_id: &str,
) -> Result<Option<ApprovalRow>> {
    connection
        .prepare_cached(&format!(
            "SELECT {COLUMNS} FROM approvals WHERE session_id = ?1 AND tool_call_id = ?2"
        ))?
        .query_row(params![session_id.to_string(), tool_call_id], row_of)
        .optional()?
        .transpose()
}

/// Every approval of the session, oldest first.
pub(crate) fn list(connection: &Connection, session_id: SessionId) -> Result<Vec<ApprovalRow>> {
    let mut statement = connection.prepare_cached(&format!(
        "SELECT {COLUMNS} FROM approvals WHERE session_id = ?1 ORDER BY created_at, tool_call_id"
    ))?;
    collect_rows(statement.query_map(params![session_id.to_string()], row_of)?)
}

/// Records `approval` as pending unless its call has a row already (a pass adopted after a
/// crash parks on the same call again), then parks its run on it; when the call was decided
/// already, the run is queued again at once instead. One transaction, so a decision recorded
/// meanwhile is never missed.
pub(crate) fn park_on(
    connection: &Connection,
    approval: &NewApproval,
    now_ms: i64,
) -> Result<ParkOutcome> {
    connection
        .prepare_cached(
            "INSERT INTO approvals
                 (session_id, run_id, tool_call_id, verb, arguments, status, created_at, deadline_at)
             VALUES (?1, ?2, ?3, ?4, ?5, 'pending', ?6, ?7)
             ON CONFLICT DO NOTHING",
        )?
        .execute(params![
            approval.session_id.to_string(),
            approval.run_id.to_string(),
            approval.tool_call_id,
            approval.verb,
            approval.arguments.to_string(),
            now_ms,
            approval.deadline_at_ms,
        ])?;
    let pending = find(connection, approval.session_id, &approval.tool_call_id)?
        .is_some_and(|row| row.status == ApprovalStatus::Pending);
    if pending {
        connection
            .prepare_cached(
                "UPDATE runs SET status = 'parked', owner = NULL, updated_at = ?2
                 WHERE id = ?1 AND status = 'running'",
            )?
            .execute(params![approval.run_id.to_string(), now_ms])?;
        Ok(ParkOutcome::Parked)
    } else {
        queue_again(connection, approval.run_id, now_ms)?;
        Ok(ParkOutcome::Resumed)
    }
}

/// Queues a run parked on an approval again, with the same pass: its turn, still open, picks
/// the decided call up.
fn queue_again(connection: &Connection, run_id: RunId, now_ms: i64) -> Result<bool> {
    let n_updated = connection
        .prepare_cached(
            "UPDATE runs SET status = 'queued', owner = NULL, updated_at = ?2
             WHERE id = ?1 AND (status = 'parked' OR status = 'running')",
        )?
        .execute(params![run_id.to_string(), now_ms])?;
    Ok(n_updated == 1)
}

/// Records `decision` on a pending approval and queues its run again, in one transaction.
pub(crate) fn decide(
    connection: &Connection,
    session_id: SessionId,
    tool_call_id: &str,
    decision: &ApprovalDecision,
    now_ms: i64,
) -> Result<DecideOutcome> {
    let Some(row) = find(connection, session_id, tool_call_id)? else {
        return Ok(DecideOutcome::NotFound);
    };
    if row.status != ApprovalStatus::Pending {
        return Ok(DecideOutcome::AlreadyDecided(row));
    }
    let (status, arguments, reason) = match decision {
        ApprovalDecision::Approve { arguments } => {
            (ApprovalStatus::Approved, Some(arguments.to_string()), None)
        }
        ApprovalDecision::Deny { reason } => (ApprovalStatus::Denied, None, Some(reason.clone())),
        ApprovalDecision::TimeOut { reason } => {
            (ApprovalStatus::TimedOut, None, Some(reason.clone()))
        }
    };
    connection
        .prepare_cached(
            "UPDATE approvals SET status = ?3, decided_arguments = ?4, reason = ?5, decided_at = ?6
             WHERE session_id = ?1 AND tool_call_id = ?2 AND status = 'pending'",
        )?
        .execute(params![
            session_id.to_string(),
            tool_call_id,
            status.as_str(),
            arguments,
            reason,
            now_ms
        ])?;
    // A run still running has not parked yet: its park finds the decision and queues it then.
    let parked: bool = connection
        .prepare_cached("SELECT EXISTS (SELECT 1 FROM runs WHERE id = ?1 AND status = 'parked')")?
        .query_row(params![row.run_id.to_string()], |row| row.get(0))?;
    if parked {
        queue_again(connection, row.run_id, now_ms)?;
    }
    let decided = find(connection, session_id, tool_call_id)?
        .ok_or_else(|| Error::corrupt("approvals", "a decided approval is gone"))?;
    Ok(DecideOutcome::Decided(decided))
}

/// The pending approvals whose deadline is at or before `now_ms`, oldest deadline first.
pub(crate) fn overdue(connection: &Connection, now_ms: i64) -> Result<Vec<ApprovalRow>> {
    let mut statement = connection.prepare_cached(&format!(
        "SELECT {COLUMNS} FROM approvals
         WHERE status = 'pending' AND deadline_at IS NOT NULL AND deadline_at <= ?1
         ORDER BY deadline_at"
    ))?;
    collect_rows(statement.query_map(params![now_ms], row_of)?)
}

impl Store {
    /// Parks run `approval.run_id` on its call's approval, recorded pending unless the call has
    /// one already; a call decided already queues the run again at once (one transaction).
    pub async fn park_on_approval(
        &self,
        approval: NewApproval,
        now_ms: i64,
    ) -> Result<ParkOutcome> {
        let scope = Some(approval.session_id);
        self.write(scope, move |connection| {
            park_on(connection, &approval, now_ms)
        })
        .await
    }

    /// Records a decision on a pending approval and queues its run again (one transaction).
    pub async fn decide_approval(
        &self,
        session_id: SessionId,
        tool_call_id: &str,
        decision: ApprovalDecision,
        now_ms: i64,
    ) -> Result<DecideOutcome> {
        let tool_call_id = tool_call_id.to_owned();
        self.write(Some(session_id), move |connection| {
            decide(connection, session_id, &tool_call_id, &decision, now_ms)
        })
        .await
    }

    /// [`Store::decide_approval`] for a request of `account_id`: a session that is not the
    /// account's is [`DecideOutcome::NotFound`]; the request's nonce is taken in the
    /// transaction of the decision, and only when there is one to record (a refusal writes
    /// nothing).
    pub async fn decide_approval_signed(
        &self,
        nonce: Option<RequestNonce>,
        account_id: AccountId,
        session_id: SessionId,
        tool_call_id: &str,
        decision: ApprovalDecision,
        now_ms: i64,
    ) -> Result<NonceOutcome<DecideOutcome>> {
        let tool_call_id = tool_call_id.to_owned();
        self.write(Some(session_id), move |connection| {
            if !owned_by(connection, session_id, account_id)? {
                return Ok(NonceOutcome::Fresh(DecideOutcome::NotFound));
            }
            match find(connection, session_id, &tool_call_id)? {
                None => return Ok(NonceOutcome::Fresh(DecideOutcome::NotFound)),
                Some(row) if row.status != ApprovalStatus::Pending => {
                    return Ok(NonceOutcome::Fresh(DecideOutcome::AlreadyDecided(row)));
                }
                Some(_) => {}
            }
            if !take_nonce(connection, nonce.as_ref())? {
                return Ok(NonceOutcome::Replayed);
            }
            decide(connection, session_id, &tool_call_id, &decision, now_ms)
                .map(NonceOutcome::Fresh)
        })
        .await
    }

    /// The approval of call `tool_call_id` in the session, if there is one.
    pub async fn approval(
        &self,
        session_id: SessionId,
        tool_call_id: &str,
    ) -> Result<Option<ApprovalRow>> {
        let tool_call_id = tool_call_id.to_owned();
        self.read(move |connection| find(connection, session_id, &tool_call_id))
            .await
    }

    /// Every approval of the session, pending and decided, oldest first.
    pub async fn approvals(&self, session_id: SessionId) -> Result<Vec<ApprovalRow>> {
        self.read(move |connection| list(connection, session_id))
            .await
    }

    /// The pending approvals whose deadline has come, oldest deadline first.
    pub async fn overdue_approvals(&self, now_ms: i64) -> Result<Vec<ApprovalRow>> {
        self.read(move |connection| overdue(connection, now_ms))
            .await
    }
}
