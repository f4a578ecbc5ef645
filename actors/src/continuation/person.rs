//! A person's continuation: `POST /v1/sessions/{id}/continuation` (through
//! `Runtime::continue_by_person`, `crate::by_person`), what the "Continue in a new session"
//! dialog confirms. The same checks (`prepare`, with no run), the same rows
//! (`gather`) and projection, and the same atomic creation as continue_session, with the
//! request's nonce taken in its transaction; then the successor's run is queued and both
//! sessions told. Refused, writing nothing, while a turn of the session runs (its answer
//! would land in a session that was carried on). No tool call stands for it in the
//! predecessor's transcript: its `continued_to` names the successor.

use seed_events::{AccountId, ContinuationId, SessionId};
use seed_store::{NonceOutcome, RequestNonce};
use serde_json::Value;

use super::preview::PreviewRefusal;
use super::{Failure, Prepared, announce, gather, new_successor, prepare, queue_successor_run};
use crate::env::RunEnv;

/// What a person's continuation came to.
#[derive(Debug)]
pub enum PersonContinuation {
    Continued {
        successor_session_id: SessionId,
        continuation_id: ContinuationId,
    },
    /// Refused as continue_session refuses (or a turn is running): nothing was written.
    Refused(PreviewRefusal),
    /// The request's nonce was used before: nothing was written.
    Replayed,
}

/// Continues the account's session `session_id` (the caller checked it is the account's) with
/// `arguments` (continue_session's), taking `nonce` in the creation's transaction. When it
/// continued, the successor's run is queued; the caller wakes the queue.
pub(crate) async fn continue_by_person(
    env: &RunEnv,
    account_id: AccountId,
    session_id: SessionId,
    arguments: Value,
    nonce: Option<RequestNonce>,
) -> Result<PersonContinuation, seed_store::Error> {
    let store = &env.store;
    let refused = |why: &str| {
        Ok(PersonContinuation::Refused(PreviewRefusal::Refused(
            why.to_owned(),
        )))
    };
    let running = store
        .list_session_runs(session_id)
        .await?
        .into_iter()
        .any(|run| !run.status.is_terminal());
    if running {
        return refused("a turn of this session is running; wait for it to end");
    }
    let Prepared {
        input,
        predecessor,
        initiating,
        plan,
    } = match prepare(store, account_id, session_id, None, arguments).await {
        Ok(prepared) => prepared,
        Err(Failure::Store(error)) => return Err(error),
        Err(Failure::Invalid { field, message }) => {
            return Ok(PersonContinuation::Refused(PreviewRefusal::Invalid {
                field,
                message,
            }));
        }
        Err(Failure::Refused(why)) => return refused(&why),
    };
    let projection = gather(store, &predecessor, &initiating, &input)
        .await?
        .compile(&input, &initiating, plan);
    let now = (env.clock)();
    // The edge's key: a person's request has no call id, so one of its own.
    let key = format!("person:{}", ContinuationId::new_v7());
    let successor = new_successor(
        &predecessor,
        &initiating,
        &input,
        plan,
        projection,
        key,
        now,
    );
    let successor_id = successor.session.id;
    let continuation_id = successor.edge.id;
    let created = match store.create_successor_signed(nonce, successor).await? {
        NonceOutcome::Fresh(created) => created,
        NonceOutcome::Replayed => return Ok(PersonContinuation::Replayed),
    };
    let traces = Some(&env.settings.traces);
    let queued = queue_successor_run(store, traces, successor_id, created.message.id, now).await;
    if let Err(error) = queued {
        // The boot sweep queues it; meanwhile the successor is a normal session.
        tracing::warn!(%successor_id, %error, "could not queue a successor's run");
    }
    announce(env, &predecessor, successor_id, &created);
    Ok(PersonContinuation::Continued {
        successor_session_id: successor_id,
        continuation_id,
    })
}
