//! A person's continuation and its preview, as the runtime offers them to the service: the
//! session checked to be the account's, then the shell in `crate::continuation` (`preview`,
//! `person`). Apart from `runtime` so that `continuation` depends on nothing of the runtime's
//! (the runtime's boot sweep depends on it).

use seed_events::{AccountId, SessionId};
use seed_store::RequestNonce;
use serde_json::Value;

use crate::continuation::person::PersonContinuation;
use crate::continuation::preview::{Asker, PreviewOutcome, preview};
use crate::runtime::{Error, Runtime};

impl Runtime {
    /// Whether `session_id` is `account_id`'s session; [`Error::SessionNotFound`] otherwise
    /// (another account's session is not found either).
    async fn own(&self, account_id: AccountId, session_id: SessionId) -> Result<(), Error> {
        let own = self
            .env
            .store
            .get_session(session_id)
            .await?
            .is_some_and(|session| session.account_id == account_id);
        if own {
            Ok(())
        } else {
            Err(Error::SessionNotFound(session_id))
        }
    }

    /// A person's preview of continuing the account's session `session_id` with `arguments`
    /// (continue_session's): what it would create, or why it would refuse. Nothing is written.
    pub async fn preview_continuation(
        &self,
        account_id: AccountId,
        session_id: SessionId,
        arguments: Value,
    ) -> Result<PreviewOutcome, Error> {
        self.own(account_id, session_id).await?;
        let asker = Asker {
            account_id,
            session_id,
            run_id: None,
        };
        Ok(preview(&self.env, asker, arguments).await?)
    }

    /// A person's continuation of the account's session `session_id` with `arguments`
    /// (continue_session's), taking `nonce` in the creation's transaction; the queue is woken
    /// for the successor's run.
    pub async fn continue_by_person(
        &self,
        account_id: AccountId,
        session_id: SessionId,
        arguments: Value,
        nonce: Option<RequestNonce>,
    ) -> Result<PersonContinuation, Error> {
        self.own(account_id, session_id).await?;
        let outcome = crate::continuation::person::continue_by_person(
            &self.env, account_id, session_id, arguments, nonce,
        )
        .await?;
        if matches!(outcome, PersonContinuation::Continued { .. }) {
            // The queue claims the successor's run and spawns its actor.
            self.wake();
        }
        Ok(outcome)
    }
}
