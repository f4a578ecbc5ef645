//! Retrying a message: a person's message whose run failed, was canceled or was lost (a
//! successor's copied message whose run a crash took) gets a run of its own again. The checks
//! and the new run are one transaction, so a message never has two open runs.

use crate::params;
use crate::sql::{Connection, OptionalExtension};
use seed_events::body::kind;
use seed_events::{AccountId, EventId, Queue, RunId, SessionEvent, SessionId};

use crate::nonces::{RequestNonce, owned_by, queued_runs_of_account, take_nonce};
use crate::runs::{NewRun, queue_run};
use crate::{NonceOutcome, Result, RunRow, Store, log, sessions};

/// What asking for a message's retry came to. Every refusal wrote nothing.
#[derive(Debug, Clone, PartialEq)]
pub enum RetryOutcome {
    /// The message has a new run.
    Queued {
        event: Box<SessionEvent>,
        run: Box<RunRow>,
    },
    /// The session does not exist or is another account's.
    SessionNotFound,
    /// The session has no event with that id.
    MessageNotFound,
    /// The event is not a message a person (or a trigger) wrote: only those are answered.
    NotAPersonsMessage,
    /// A run for the message is still queued, running or parked on its children.
    StillOpen { run_id: RunId },
    /// The account has `queued_runs_max` runs waiting already.
    TooManyQueued,
}

/// The message `event_id` of `session_id`, when a person or a trigger wrote it.
fn persons_message(
    connection: &Connection,
    session_id: SessionId,
    event_id: EventId,
) -> Result<std::result::Result<SessionEvent, RetryOutcome>> {
    let session_key = sessions::key_for_read(connection, session_id)?;
    let event = connection
        .prepare_cached(&format!(
            "SELECT {} FROM session_events WHERE session_key = ?1 AND id = ?2",
            log::EVENT_COLUMNS
        ))?
        .query_row(params![session_key, event_id.0], |row| {
            log::event_from_row(session_id, row)
        })
        .optional()?
        .transpose()?;
    Ok(match event {
        None => Err(RetryOutcome::MessageNotFound),
        Some(event)
            if event.kind == kind::MESSAGE
                && event.role == Some(seed_events::EventRole::User)
                && matches!(event.actor.as_deref(), Some("user" | "trigger")) =>
        {
            Ok(event)
        }
        Some(_) => Err(RetryOutcome::NotAPersonsMessage),
    })
}

/// The open run (queued, running or parked) that answers `event_id`, if any.
fn open_run_for(
    connection: &Connection,
    session_id: SessionId,
    event_id: EventId,
) -> Result<Option<RunId>> {
    let run_id: Option<String> = connection
        .prepare_cached(match connection.engine() {
            crate::Engine::Sqlite => {
                "SELECT id FROM runs
                 WHERE session_id = ?1 AND status IN ('queued', 'running', 'parked')
                     AND EXISTS (SELECT 1 FROM json_each(runs.user_event_ids) WHERE value = ?2)
                 LIMIT 1"
            }
            crate::Engine::Postgres => {
                "SELECT id FROM runs
                 WHERE session_id = ?1 AND status IN ('queued', 'running', 'parked')
                     AND EXISTS (SELECT 1 FROM json_array_elements_text(runs.user_event_ids::json)
                                 WHERE CAST(value AS BIGINT) = ?2)
                 LIMIT 1"
            }
        })?
        .query_row(params![session_id.to_string(), event_id.0], |row| {
            row.get(0)
        })
        .optional()?;
    run_id
        .map(|id| crate::Error::parse_column("runs", &id))
        .transpose()
}

/// A retry as [`retry`] checks and writes it.
struct Retry<'a> {
    nonce: Option<&'a RequestNonce>,
    /// When given, the account that must own the session.
    account_id: Option<AccountId>,
    /// How many runs the account may have waiting.
    queued_runs_max: i64,
    session_id: SessionId,
    event_id: EventId,
    run_id: RunId,
    now_ms: i64,
    claim_for: Option<&'a crate::ClaimFor>,
}

/// The checks and the run of a retry, in the caller's transaction; `account_id`, when given,
/// must own the session, and `queued_runs_max` bounds its waiting runs.
fn retry(connection: &Connection, retry: &Retry<'_>) -> Result<NonceOutcome<RetryOutcome>> {
    let &Retry {
        nonce,
        account_id,
        queued_runs_max,
        session_id,
        event_id,
        run_id,
        now_ms,
        claim_for,
    } = retry;
    let refused = |outcome| Ok(NonceOutcome::Fresh(outcome));
    let owned = match account_id {
        Some(account_id) => owned_by(connection, session_id, account_id)?,
        None => sessions::session_key(connection, session_id)?.is_some(),
    };
    if !owned {
        return refused(RetryOutcome::SessionNotFound);
    }
    let event = match persons_message(connection, session_id, event_id)? {
        Ok(event) => event,
        Err(refusal) => return refused(refusal),
    };
    if let Some(run_id) = open_run_for(connection, session_id, event_id)? {
        return refused(RetryOutcome::StillOpen { run_id });
    }
    if let Some(account_id) = account_id
        && queued_runs_of_account(connection, account_id)? >= queued_runs_max
    {
        return refused(RetryOutcome::TooManyQueued);
    }
    if !take_nonce(connection, nonce)? {
        return Ok(NonceOutcome::Replayed);
    }
    let run = NewRun {
        id: run_id,
        session_id,
        queue: Queue::Interactive,
        user_event_ids: vec![event_id],
        parent_run_id: None,
        typed: false,
        created_at_ms: now_ms,
    };
    let run = queue_run(connection, &run, now_ms, claim_for)?;
    Ok(NonceOutcome::Fresh(RetryOutcome::Queued {
        event: Box::new(event),
        run: Box::new(run),
    }))
}

impl Store {
    /// Gives the person's message `event_id` of the account's session a new run, unless one
    /// is still open for it, as [`RetryOutcome`] says; the nonce is taken in the same
    /// transaction, and a refusal writes nothing. With `claim_for`, the run is claimed at once
    /// as [`Store::send_user_message`] says.
    pub async fn retry_message_signed(
        &self,
        signed: SignedRetry,
    ) -> Result<NonceOutcome<RetryOutcome>> {
        let session_id = signed.session_id;
        self.write(Some(session_id), move |connection| {
            retry(
                connection,
                &Retry {
                    nonce: signed.nonce.as_ref(),
                    account_id: Some(signed.account_id),
                    queued_runs_max: signed.queued_runs_max,
                    session_id,
                    event_id: signed.event_id,
                    run_id: signed.run_id,
                    now_ms: signed.now_ms,
                    claim_for: signed.claim_for.as_ref(),
                },
            )
        })
        .await
        .inspect(|outcome| {
            if let NonceOutcome::Fresh(RetryOutcome::Queued { run, .. }) = outcome {
                self.note_claimed(run);
            }
        })
    }

    /// [`Store::retry_message_signed`] for the runtime itself: any session, no queue bound.
    pub async fn retry_message(
        &self,
        session_id: SessionId,
        event_id: EventId,
        run_id: RunId,
        now_ms: i64,
    ) -> Result<RetryOutcome> {
        let outcome = self
            .write(Some(session_id), move |connection| {
                retry(
                    connection,
                    &Retry {
                        nonce: None,
                        account_id: None,
                        queued_runs_max: i64::MAX,
                        session_id,
                        event_id,
                        run_id,
                        now_ms,
                        claim_for: None,
                    },
                )
            })
            .await?;
        match outcome {
            NonceOutcome::Fresh(outcome) => Ok(outcome),
            // Only a nonce is ever replayed, and none was given.
            NonceOutcome::Replayed => Err(crate::Error::corrupt(
                "request_nonces",
                "a retry that took no nonce was refused as replayed",
            )),
        }
    }
}

/// A person's signed retry of their message ([`Store::retry_message_signed`]).
#[derive(Debug, Clone)]
pub struct SignedRetry {
    pub nonce: Option<RequestNonce>,
    /// The account that signed the request: the session must be its own.
    pub account_id: AccountId,
    pub session_id: SessionId,
    /// The person's message to answer again.
    pub event_id: EventId,
    /// The id of the new run.
    pub run_id: RunId,
    /// How many runs the account may have waiting; at this many, nothing is written.
    pub queued_runs_max: i64,
    pub now_ms: i64,
    /// The owner to claim the run for at once, and the share of runs in flight each account
    /// may hold (the caller holds a slot of the queue).
    pub claim_for: Option<crate::ClaimFor>,
}

impl RetryOutcome {
    /// The new run's id, when the message has one.
    pub fn run_id(&self) -> Option<RunId> {
        match self {
            RetryOutcome::Queued { run, .. } => Some(run.id),
            _ => None,
        }
    }
}
