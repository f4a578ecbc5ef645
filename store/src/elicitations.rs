//! Elicitations: an MCP server, during one of Seed's calls to it, asks the person for input
//! (`elicitation/create`: a message and the schema of the answer). Each is a row here, pending
//! until a person answers it (accept with content, decline, cancel), no one answers in time,
//! or it is closed. They are kept apart from `approvals` because they live differently: an
//! approval parks its run and outlives the process, while an elicitation is asked from inside a
//! call in flight, whose run goes on running, and its answer can only reach the connection that
//! asked; one call can ask several times, an approved call too. So a pending one never outlives
//! the process: the call's end closes it, and the next boot closes any a crash left pending.
//! A call has at most one pending elicitation, so its call id names it.

use crate::params;
use crate::sql::{Connection, OptionalExtension, Row};
use seed_events::{AccountId, RunId, SessionId};

use crate::error::collect_rows;
use crate::nonces::{NonceOutcome, RequestNonce, owned_by, take_nonce};
use crate::{Error, Result, Store};

/// Where an elicitation stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ElicitationStatus {
    Pending,
    /// The person answered with content.
    Accepted,
    Declined,
    Cancelled,
    /// No one answered before its deadline: the server was answered "cancel".
    TimedOut,
    /// The call that asked ended first, or the process that held it did.
    Closed,
}

impl ElicitationStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            ElicitationStatus::Pending => "pending",
            ElicitationStatus::Accepted => "accepted",
            ElicitationStatus::Declined => "declined",
            ElicitationStatus::Cancelled => "cancelled",
            ElicitationStatus::TimedOut => "timed_out",
            ElicitationStatus::Closed => "closed",
        }
    }

    fn parse(text: &str) -> Result<ElicitationStatus> {
        Ok(match text {
            "pending" => ElicitationStatus::Pending,
            "accepted" => ElicitationStatus::Accepted,
            "declined" => ElicitationStatus::Declined,
            "cancelled" => ElicitationStatus::Cancelled,
            "timed_out" => ElicitationStatus::TimedOut,
            "closed" => ElicitationStatus::Closed,
            other => {
                return Err(Error::corrupt(
                    "elicitations",
                    format_args!("status {other:?}"),
                ));
            }
        })
    }
}

/// A server's question, as the call it came in is known.
#[derive(Debug, Clone, PartialEq)]
pub struct NewElicitation {
    pub session_id: SessionId,
    pub run_id: RunId,
    /// The id of the call in flight that asked.
    pub tool_call_id: String,
    /// The verb (tool) of that call, and its arguments.
    pub verb: String,
    pub arguments: serde_json::Value,
    /// What the server asks, for the person.
    pub message: String,
    /// The JSON Schema of the answer's content (an object of primitive fields).
    pub requested_schema: serde_json::Value,
    /// When no answer by then answers "cancel"; `None`: it waits as long as the call does.
    pub deadline_at_ms: Option<i64>,
}

/// One elicitation as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct ElicitationRow {
    pub session_id: SessionId,
    pub tool_call_id: String,
    /// 1 for the call's first question, 2 for its second, …
    pub n: i64,
    pub run_id: RunId,
    pub verb: String,
    pub arguments: serde_json::Value,
    pub message: String,
    pub requested_schema: serde_json::Value,
    pub status: ElicitationStatus,
    /// What the person answered, for an accepted one.
    pub content: Option<serde_json::Value>,
    /// Why it timed out or was closed.
    pub reason: Option<String>,
    pub created_at_ms: i64,
    pub decided_at_ms: Option<i64>,
    pub deadline_at_ms: Option<i64>,
}

/// An answer to a pending elicitation.
#[derive(Debug, Clone, PartialEq)]
pub enum ElicitationAnswer {
    /// The person's content, checked against the requested schema already.
    Accept {
        content: serde_json::Value,
    },
    Decline,
    Cancel,
    /// No answer came in time.
    TimeOut {
        reason: String,
    },
    /// The call ended first, or the process that held it did.
    Close {
        reason: String,
    },
}

/// What asking recorded.
#[derive(Debug, Clone, PartialEq)]
pub enum AskOutcome {
    /// Recorded pending (boxed: a row is large beside `Busy`).
    Asked(Box<ElicitationRow>),
    /// The call has a pending elicitation already: nothing written.
    Busy,
}

/// What recording an answer did.
#[derive(Debug, Clone, PartialEq)]
pub enum AnswerOutcome {
    /// Recorded; the row as it is now.
    Answered(ElicitationRow),
    /// No elicitation of the call is pending; its newest one, if it has any.
    NotPending(Option<ElicitationRow>),
}

const COLUMNS: &str = "session_id, tool_call_id, n, run_id, verb, arguments, message, \
                       requested_schema, status, content, reason, created_at, decided_at, \
                       deadline_at";

fn json_column(text: &str) -> Result<serde_json::Value> {
    serde_json::from_str(text).map_err(|error| Error::corrupt("elicitations", error))
}

fn row_of(row: &Row<'_>) -> Result<Result<ElicitationRow>> {
    let session_id: String = row.get(0)?;
    let tool_call_id: String = row.get(1)?;
    let n: i64 = row.get(2)?;
    let run_id: String = row.get(3)?;
    let verb: String = row.get(4)?;
    let arguments: String = row.get(5)?;
    let message: String = row.get(6)?;
    let requested_schema: String = row.get(7)?;
    let status: String = row.get(8)?;
    let content: Option<String> = row.get(9)?;
    let reason: Option<String> = row.get(10)?;
    let created_at_ms: i64 = row.get(11)?;
    let decided_at_ms: Option<i64> = row.get(12)?;
    let deadline_at_ms: Option<i64> = row.get(13)?;
    Ok((|| {
        Ok(ElicitationRow {
            session_id: Error::parse_column("elicitations", &session_id)?,
            tool_call_id,
            n,
            run_id: Error::parse_column("elicitations", &run_id)?,
            verb,
            arguments: json_column(&arguments)?,
            message,
            requested_schema: json_column(&requested_schema)?,
            status: ElicitationStatus::parse(&status)?,
            content: content.as_deref().map(json_column).transpose()?,
            reason,
            created_at_ms,
            decided_at_ms,
            deadline_at_ms,
        })
    })())
}

/// The newest elicitation of call `tool_call_id` in the session, if it has any.
fn newest(
    connection: &Connection,
    session_id: SessionId,
    tool_call_id: &str,
) -> Result<Option<ElicitationRow>> {
    connection
        .prepare_cached(&format!(
            "SELECT {COLUMNS} FROM elicitations WHERE session_id = ?1 AND tool_call_id = ?2
             ORDER BY n DESC LIMIT 1"
        ))?
        .query_row(params![session_id.to_string(), tool_call_id], row_of)
        .optional()?
        .transpose()
}

/// The pending elicitation of call `tool_call_id` in the session, if there is one.
fn pending(
    connection: &Connection,
    session_id: SessionId,
    tool_call_id: &str,
) -> Result<Option<ElicitationRow>> {
    Ok(newest(connection, session_id, tool_call_id)?
        .filter(|row| row.status == ElicitationStatus::Pending))
}

/// Every elicitation of the session, oldest first.
fn list(connection: &Connection, session_id: SessionId) -> Result<Vec<ElicitationRow>> {
    let mut statement = connection.prepare_cached(&format!(
        "SELECT {COLUMNS} FROM elicitations WHERE session_id = ?1
         ORDER BY created_at, tool_call_id, n"
    ))?;
    collect_rows(statement.query_map(params![session_id.to_string()], row_of)?)
}

fn ask(connection: &Connection, asked: &NewElicitation, now_ms: i64) -> Result<AskOutcome> {
    let newest = newest(connection, asked.session_id, &asked.tool_call_id)?;
    if newest
        .as_ref()
        .is_some_and(|row| row.status == ElicitationStatus::Pending)
    {
        return Ok(AskOutcome::Busy);
    }
    let n = newest.map_or(1, |row| row.n + 1);
    connection
        .prepare_cached(
            "INSERT INTO elicitations
                 (session_id, tool_call_id, n, run_id, verb, arguments, message,
                  requested_schema, status, created_at, deadline_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, 'pending', ?9, ?10)",
        )?
        .execute(params![
            asked.session_id.to_string(),
            asked.tool_call_id,
            n,
            asked.run_id.to_string(),
            asked.verb,
            asked.arguments.to_string(),
            asked.message,
            asked.requested_schema.to_string(),
            now_ms,
            asked.deadline_at_ms,
        ])?;
    let row = pending(connection, asked.session_id, &asked.tool_call_id)?
        .ok_or_else(|| Error::corrupt("elicitations", "an elicitation just asked is gone"))?;
    Ok(AskOutcome::Asked(Box::new(row)))
}

fn answer(
    connection: &Connection,
    session_id: SessionId,
    tool_call_id: &str,
    answer: &ElicitationAnswer,
    now_ms: i64,
) -> Result<AnswerOutcome> {
    let Some(row) = pending(connection, session_id, tool_call_id)? else {
        return Ok(AnswerOutcome::NotPending(newest(
            connection,
            session_id,
            tool_call_id,
        )?));
    };
    let (status, content, reason) = match answer {
        ElicitationAnswer::Accept { content } => {
            (ElicitationStatus::Accepted, Some(content.to_string()), None)
        }
        ElicitationAnswer::Decline => (ElicitationStatus::Declined, None, None),
        ElicitationAnswer::Cancel => (ElicitationStatus::Cancelled, None, None),
        ElicitationAnswer::TimeOut { reason } => {
            (ElicitationStatus::TimedOut, None, Some(reason.clone()))
        }
        ElicitationAnswer::Close { reason } => {
            (ElicitationStatus::Closed, None, Some(reason.clone()))
        }
    };
    connection
        .prepare_cached(
            "UPDATE elicitations SET status = ?4, content = ?5, reason = ?6, decided_at = ?7
             WHERE session_id = ?1 AND tool_call_id = ?2 AND n = ?3 AND status = 'pending'",
        )?
        .execute(params![
            session_id.to_string(),
            tool_call_id,
            row.n,
            status.as_str(),
            content,
            reason,
            now_ms
        ])?;
    let answered = newest(connection, session_id, tool_call_id)?
        .ok_or_else(|| Error::corrupt("elicitations", "an answered elicitation is gone"))?;
    Ok(AnswerOutcome::Answered(answered))
}

impl Store {
    /// Records a server's question as pending, unless its call has one pending already.
    pub async fn ask_elicitation(&self, asked: NewElicitation, now_ms: i64) -> Result<AskOutcome> {
        let scope = Some(asked.session_id);
        self.write(scope, move |connection| ask(connection, &asked, now_ms))
            .await
    }

    /// Records an answer on the call's pending elicitation (a time-out or a close, from the
    /// process that holds the call).
    pub async fn answer_elicitation(
        &self,
        session_id: SessionId,
        tool_call_id: &str,
        reply: ElicitationAnswer,
        now_ms: i64,
    ) -> Result<AnswerOutcome> {
        let tool_call_id = tool_call_id.to_owned();
        self.write(Some(session_id), move |connection| {
            answer(connection, session_id, &tool_call_id, &reply, now_ms)
        })
        .await
    }

    /// [`Store::answer_elicitation`] for a request of `account_id`: a session that is not the
    /// account's has nothing pending; the request's nonce is taken in the transaction of the
    /// answer, and only when there is one to record.
    pub async fn answer_elicitation_signed(
        &self,
        nonce: Option<RequestNonce>,
        account_id: AccountId,
        session_id: SessionId,
        tool_call_id: &str,
        reply: ElicitationAnswer,
        now_ms: i64,
    ) -> Result<NonceOutcome<AnswerOutcome>> {
        let tool_call_id = tool_call_id.to_owned();
        self.write(Some(session_id), move |connection| {
            if !owned_by(connection, session_id, account_id)? {
                return Ok(NonceOutcome::Fresh(AnswerOutcome::NotPending(None)));
            }
            if pending(connection, session_id, &tool_call_id)?.is_none() {
                return Ok(NonceOutcome::Fresh(AnswerOutcome::NotPending(newest(
                    connection,
                    session_id,
                    &tool_call_id,
                )?)));
            }
            if !take_nonce(connection, nonce.as_ref())? {
                return Ok(NonceOutcome::Replayed);
            }
            answer(connection, session_id, &tool_call_id, &reply, now_ms).map(NonceOutcome::Fresh)
        })
        .await
    }

    /// The pending elicitation of call `tool_call_id` in the session, if there is one.
    pub async fn pending_elicitation(
        &self,
        session_id: SessionId,
        tool_call_id: &str,
    ) -> Result<Option<ElicitationRow>> {
        let tool_call_id = tool_call_id.to_owned();
        self.read(move |connection| pending(connection, session_id, &tool_call_id))
            .await
    }

    /// Every elicitation of the session, answered or not, oldest first.
    pub async fn elicitations(&self, session_id: SessionId) -> Result<Vec<ElicitationRow>> {
        self.read(move |connection| list(connection, session_id))
            .await
    }

    /// Closes every pending elicitation with `reason`: at boot, none of the calls that asked
    /// is in flight any more. Returns how many it closed.
    pub async fn close_pending_elicitations(&self, reason: &str, now_ms: i64) -> Result<usize> {
        let reason = reason.to_owned();
        self.write(None, move |connection| {
            connection
                .prepare_cached(
                    "UPDATE elicitations SET status = 'closed', reason = ?1, decided_at = ?2
                     WHERE status = 'pending'",
                )?
                .execute(params![reason, now_ms])
        })
        .await
    }
}
