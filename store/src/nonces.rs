//! Signed requests against replay: a request's `(key id, nonce)` pair is taken in the same
//! writer job as the request's writes, so a replay inside the signature window fails, two
//! concurrent uses of one nonce let exactly one through, and a request refused for any other
//! reason (an unknown session, a full queue) writes nothing, its nonce included.
//!
//! Each signed write checks first (the session is the account's, the queue has room), then
//! takes the nonce, then writes: a rejection is a value, returned before anything was written.

use crate::params;
use crate::sql::{Connection, OptionalExtension};
use seed_events::{AccountId, NewEvent, Queue, RunId, SessionEvent, SessionId};

use crate::{NewSession, Result, RunRow, Store, runs, sessions};

/// A signed request's nonce, to be taken once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestNonce {
    /// The signing key's id: the account id.
    pub key_id: AccountId,
    pub nonce: String,
    /// When the signature stops being acceptable; the row may be pruned after it.
    pub expires_at_ms: i64,
}

/// What a write taken with a nonce came to.
#[derive(Debug, Clone, PartialEq)]
pub enum NonceOutcome<T> {
    /// The nonce was fresh (or there was none): the write's own outcome.
    Fresh(T),
    /// The nonce was used before: nothing was written.
    Replayed,
}

/// What sending a message came to.
#[derive(Debug, Clone, PartialEq)]
pub enum SendOutcome {
    Sent {
        event: Box<SessionEvent>,
        run: Box<RunRow>,
    },
    /// The session does not exist or is another account's: nothing was written.
    NotFound,
    /// The account has `queued_runs_max` runs waiting already: nothing was written.
    TooManyQueued,
}

/// Takes the nonce; `false` when it was taken before (and nothing was written).
pub(crate) fn take_nonce(connection: &Connection, nonce: Option<&RequestNonce>) -> Result<bool> {
    let Some(nonce) = nonce else {
        return Ok(true);
    };
    let n_inserted = connection
        .prepare_cached(
            "INSERT INTO request_nonces (key_id, nonce, expires_at) VALUES (?1, ?2, ?3)
             ON CONFLICT DO NOTHING",
        )?
        .execute(params![
            nonce.key_id.to_string(),
            nonce.nonce,
            nonce.expires_at_ms
        ])?;
    Ok(n_inserted == 1)
}

/// The account a session belongs to, `None` when there is no such session.
pub(crate) fn session_owner(
    connection: &Connection,
    session_id: SessionId,
) -> Result<Option<AccountId>> {
    let owner: Option<String> = connection
        .prepare_cached("SELECT account_id FROM sessions WHERE id = ?1")?
        .query_row(params![session_id.to_string()], |row| row.get(0))
        .optional()?;
    owner
        .map(|owner| crate::Error::parse_column("sessions", &owner))
        .transpose()
}

pub(crate) fn owned_by(
    connection: &Connection,
    session_id: SessionId,
    account_id: AccountId,
) -> Result<bool> {
    Ok(session_owner(connection, session_id)? == Some(account_id))
}

/// Runs waiting their turn in the account's sessions.
pub(crate) fn queued_runs_of_account(
    connection: &Connection,
    account_id: AccountId,
) -> Result<i64> {
    connection
        .prepare_cached("SELECT count(*) FROM runs WHERE account_id = ?1 AND status = 'queued'")?
        .query_row(params![account_id.to_string()], |row| row.get(0))
}

/// Deletes the nonces whose signatures can no longer be accepted.
pub(crate) fn prune_nonces(connection: &Connection, now_ms: i64) -> Result<usize> {
    connection
        .prepare_cached("DELETE FROM request_nonces WHERE expires_at < ?1")?
        .execute(params![now_ms])
}

impl Store {
    /// Takes a nonce alone (a request that writes nothing else). Returns whether it was fresh.
    pub async fn take_nonce(&self, nonce: RequestNonce) -> Result<bool> {
        self.write(None, move |connection| take_nonce(connection, Some(&nonce)))
            .await
    }

    /// Creates a session, taking the nonce in the same transaction, while its account has
    /// fewer sessions than its quota ([`crate::Quotas::sessions_max`]). `Fresh(false)`: the
    /// account has its quota of sessions, and nothing was written.
    pub async fn create_session_signed(
        &self,
        nonce: Option<RequestNonce>,
        session: NewSession,
    ) -> Result<NonceOutcome<bool>> {
        let sessions_max = self.config().quotas.sessions_max;
        self.write(Some(session.id), move |connection| {
            let n_sessions =
                sessions::count_account_sessions(connection, session.account_id, sessions_max)?;
            if n_sessions >= sessions_max {
                return Ok(NonceOutcome::Fresh(false));
            }
            if !take_nonce(connection, nonce.as_ref())? {
                return Ok(NonceOutcome::Replayed);
            }
            sessions::insert_session(connection, &session)?;
            Ok(NonceOutcome::Fresh(true))
        })
        .await
    }

    /// Deletes the account's session (and all it owns), taking the nonce in the same
    /// transaction. `Fresh(false)`: no such session of this account, and nothing was written.
    pub async fn delete_session_signed(
        &self,
        nonce: Option<RequestNonce>,
        account_id: AccountId,
        session_id: SessionId,
        now_ms: i64,
    ) -> Result<NonceOutcome<bool>> {
        let outcome = self
            .write(Some(session_id), move |connection| {
                if !owned_by(connection, session_id, account_id)? {
                    return Ok(NonceOutcome::Fresh(false));
                }
                if !take_nonce(connection, nonce.as_ref())? {
                    return Ok(NonceOutcome::Replayed);
                }
                Ok(NonceOutcome::Fresh(sessions::delete_session(
                    connection, session_id, now_ms,
                )?))
            })
            .await?;
        if outcome == NonceOutcome::Fresh(true) {
            self.remove_attachment_files(Some(session_id)).await;
        }
        Ok(outcome)
    }

    /// Removes an account and everything it holds (its sessions as [`Store::delete_session`]
    /// removes each, its memory files, its nonces), the nonce taken in the same transaction.
    /// `Fresh(None)` when there is no such account; otherwise the sessions removed.
    pub async fn delete_account_signed(
        &self,
        nonce: Option<RequestNonce>,
        account_id: AccountId,
        now_ms: i64,
    ) -> Result<NonceOutcome<Option<Vec<SessionId>>>> {
        let outcome = self
            .write(None, move |connection| {
                if sessions::get_account(connection, account_id)?.is_none() {
                    return Ok(NonceOutcome::Fresh(None));
                }
                if !take_nonce(connection, nonce.as_ref())? {
                    return Ok(NonceOutcome::Replayed);
                }
                let ids: Vec<SessionId> = connection
                    .prepare_cached("SELECT id FROM sessions WHERE account_id = ?1")?
                    .query_map(params![account_id.to_string()], |row| {
                        row.get::<_, String>(0)
                    })?
                    .map(|id| {
                        id?.parse::<SessionId>()
                            .map_err(|e| crate::Error::corrupt("sessions", e))
                    })
                    .collect::<Result<_>>()?;
                for id in &ids {
                    sessions::delete_session(connection, *id, now_ms)?;
                }
                // The memory files and nonces go with the row (ON DELETE CASCADE).
                connection
                    .prepare_cached("DELETE FROM accounts WHERE id = ?1")?
                    .execute(params![account_id.to_string()])?;
                Ok(NonceOutcome::Fresh(Some(ids)))
            })
            .await?;
        if matches!(outcome, NonceOutcome::Fresh(Some(_))) {
            self.remove_attachment_files(None).await;
        }
        Ok(outcome)
    }

    /// A person's message and its run ([`Store::send_user_message`]), for the account's own
    /// session only and while the account has fewer than `queued_runs_max` runs waiting; the
    /// nonce is taken in the same transaction. With `claim_for`, the run is claimed at once as
    /// [`Store::send_user_message`] says.
    pub async fn send_user_message_signed(
        &self,
        message: SignedMessage,
    ) -> Result<NonceOutcome<SendOutcome>> {
        let SignedMessage {
            nonce,
            account_id,
            session_id,
            event,
            run_id,
            queue,
            queued_runs_max,
            now_ms,
            claim_for,
        } = message;
        let event = crate::log::PreparedEvent::of(event);
        self.write(Some(session_id), move |connection| {
            if !owned_by(connection, session_id, account_id)? {
                return Ok(NonceOutcome::Fresh(SendOutcome::NotFound));
            }
            if queued_runs_of_account(connection, account_id)? >= queued_runs_max {
                return Ok(NonceOutcome::Fresh(SendOutcome::TooManyQueued));
            }
            if !take_nonce(connection, nonce.as_ref())? {
                return Ok(NonceOutcome::Replayed);
            }
            let (event, run) = runs::send_user_message(
                connection,
                session_id,
                &event,
                run_id,
                queue,
                now_ms,
                claim_for.as_ref(),
            )?;
            Ok(NonceOutcome::Fresh(SendOutcome::Sent {
                event: Box::new(event),
                run: Box::new(run),
            }))
        })
        .await
        .inspect(|outcome| {
            if let NonceOutcome::Fresh(SendOutcome::Sent { run, .. }) = outcome {
                self.note_claimed(run);
            }
        })
    }

    /// Sets the account's session's model and, when `change` names one, its reasoning level,
    /// taking the nonce in the same transaction. `Fresh(false)`: no such session of this
    /// account.
    pub async fn set_session_model_signed(
        &self,
        nonce: Option<RequestNonce>,
        account_id: AccountId,
        session_id: SessionId,
        change: ModelChange,
        now_ms: i64,
    ) -> Result<NonceOutcome<bool>> {
        self.write(Some(session_id), move |connection| {
            if !owned_by(connection, session_id, account_id)? {
                return Ok(NonceOutcome::Fresh(false));
            }
            if !take_nonce(connection, nonce.as_ref())? {
                return Ok(NonceOutcome::Replayed);
            }
            // Each field is set only when the change names it.
            let n_updated = connection
                .prepare_cached(
                    "UPDATE sessions SET
                         model_override = CASE WHEN ?2 THEN ?3 ELSE model_override END,
                         reasoning_level = CASE WHEN ?4 THEN ?5 ELSE reasoning_level END,
                         updated_at = ?6
                     WHERE id = ?1",
                )?
                .execute(params![
                    session_id.to_string(),
                    change.model.is_some(),
                    change.model.clone().flatten(),
                    change.reasoning_level.is_some(),
                    change.reasoning_level.clone().flatten(),
                    now_ms
                ])?;
            Ok(NonceOutcome::Fresh(n_updated == 1))
        })
        .await
    }

    /// Appends events to the account's session, taking the nonce in the same transaction.
    /// `Fresh(None)`: no such session of this account.
    pub async fn append_events_signed(
        &self,
        nonce: Option<RequestNonce>,
        account_id: AccountId,
        session_id: SessionId,
        events: Vec<NewEvent>,
    ) -> Result<NonceOutcome<Option<Vec<SessionEvent>>>> {
        self.write(Some(session_id), move |connection| {
            if !owned_by(connection, session_id, account_id)? {
                return Ok(NonceOutcome::Fresh(None));
            }
            if !take_nonce(connection, nonce.as_ref())? {
                return Ok(NonceOutcome::Replayed);
            }
            let stored = crate::log::append_events(connection, session_id, &events)?;
            Ok(NonceOutcome::Fresh(Some(stored)))
        })
        .await
    }

    /// Deletes the nonces that expired before `now_ms`; returns how many.
    pub async fn prune_nonces(&self, now_ms: i64) -> Result<usize> {
        self.write(None, move |connection| prune_nonces(connection, now_ms))
            .await
    }

    /// Runs waiting their turn in the account's sessions.
    pub async fn queued_runs_of_account(&self, account_id: AccountId) -> Result<i64> {
        self.read(move |connection| queued_runs_of_account(connection, account_id))
            .await
    }
}

/// A person's signed message and the run that answers it
/// ([`Store::send_user_message_signed`]).
#[derive(Debug, Clone)]
pub struct SignedMessage {
    pub nonce: Option<RequestNonce>,
    /// The account that signed the request: the session must be its own.
    pub account_id: AccountId,
    pub session_id: SessionId,
    pub event: NewEvent,
    /// The id of the run to queue.
    pub run_id: RunId,
    pub queue: Queue,
    /// How many runs the account may have waiting; at this many, nothing is written.
    pub queued_runs_max: i64,
    pub now_ms: i64,
    /// The owner to claim the run for at once, and the share of runs in flight each account
    /// may hold (the caller holds a slot of the queue).
    pub claim_for: Option<crate::ClaimFor>,
}

/// A person's change of a session's model ([`Store::set_session_model_signed`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ModelChange {
    /// The session's own model (`Some(None)`: the service's default); `None`: unchanged.
    pub model: Option<Option<String>>,
    /// The reasoning level (`Some(None)`: the provider's configuration); `None`: unchanged.
    pub reasoning_level: Option<Option<String>>,
}
