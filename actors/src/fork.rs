//! A person's fork: a new session whose conversation is a session's up to an earlier message.
//!
//! The shell around `seed_projections::fork`: read the predecessor and its log up to the point,
//! check the point (pure), copy the events (pure), and create the fork in one transaction with
//! the request's nonce (`Store::create_fork_signed`: the session, its log, the attachments it
//! names, and its edge in `session_continuations` with the kind `fork` and its manifest). Then,
//! after the commit, tell both sessions' and the account's subscribers. No run is queued: the
//! fork waits for the person's next message, whose turn rebuilds the context from its log.

use seed_events::{ContinuationId, SessionId};
use seed_projections::fork::{
    FORK_EVENTS_MAX, ForkManifestInput, ForkPointError, check_fork_point, fork_attachment_ids,
    fork_events, fork_manifest, fork_reason,
};
use seed_store::{
    FORK_KEY_PREFIX, ForkCreation, NewContinuation, NewFork, NewSession, NonceOutcome,
    RequestNonce, TitleSource,
};

use crate::bus::{Notification, SeqRange};
use crate::crash::points;
use crate::runtime::Runtime;

/// A person's request to fork a session.
#[derive(Debug, Clone)]
pub struct ForkRequest {
    pub account_id: seed_events::AccountId,
    /// The session to branch from.
    pub session_id: SessionId,
    /// The seq of the message the fork's conversation ends with.
    pub seq: i64,
    /// The fork's title; `None`: the predecessor's.
    pub title: Option<String>,
    /// The signed request's nonce, taken in the creation's transaction.
    pub nonce: Option<RequestNonce>,
}

/// What a fork request came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ForkOutcome {
    Forked {
        session_id: SessionId,
        continuation_id: ContinuationId,
    },
    /// Nothing was written, and why.
    Refused(ForkRefusal),
    /// The request's nonce was used before: nothing was written.
    Replayed,
}

/// Why a fork was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ForkRefusal {
    #[error("no such session")]
    NoSuchSession,
    #[error("a delegated child's session cannot be forked; fork its parent's")]
    DelegatedChild,
    /// The seq is not a point a conversation can be cut at.
    #[error(transparent)]
    Point(#[from] ForkPointError),
    #[error("the account has as many sessions as it may")]
    SessionsFull,
    #[error(
        "the session has {} forks, the most it may have",
        seed_events::limits::FORKS_PER_SESSION_MAX
    )]
    ForksFull,
}

impl Runtime {
    /// Forks `request.session_id` at `request.seq`: checks the point, creates the fork whole
    /// (or nothing), and publishes the change.
    pub async fn fork_session(
        &self,
        request: ForkRequest,
    ) -> Result<ForkOutcome, seed_store::Error> {
        let env = &self.env;
        let store = &env.store;
        let refused = |why: ForkRefusal| Ok(ForkOutcome::Refused(why));
        let predecessor = match store.get_session(request.session_id).await? {
            Some(session) if session.account_id == request.account_id => session,
            _ => return refused(ForkRefusal::NoSuchSession),
        };
        if predecessor.parent_session_id.is_some() {
            return refused(ForkRefusal::DelegatedChild);
        }
        let last_seq = store.last_seq(predecessor.id).await?;
        let seq = request.seq;
        // Only a point inside the log (and inside what a fork copies) is worth reading up to;
        // the check names any other.
        let events = if seq >= 1 && seq <= last_seq && seq <= FORK_EVENTS_MAX as i64 {
            store
                .read_events(predecessor.id, 1, seq, FORK_EVENTS_MAX)
                .await?
        } else {
            Vec::new()
        };
        let at = match check_fork_point(&events, seq, last_seq) {
            Ok(at) => at,
            Err(problem) => return refused(problem.into()),
        };
        let origin_session_id = store
            .edge_to(predecessor.id)
            .await?
            .map_or(predecessor.id, |edge| edge.origin_session_id);

        let now = (env.clock)();
        let fork_id = SessionId::new_v7();
        let continuation_id = ContinuationId::new_v7();
        let mut session = NewSession::new(fork_id, predecessor.account_id, now);
        match &request.title {
            Some(title) => {
                session.title = title.clone();
                session.title_source = TitleSource::User;
            }
            None => {
                session.title = predecessor.title.clone();
                session.title_source = predecessor.title_source;
            }
        }
        session.description = predecessor.description.clone();
        session.model_override = predecessor.model_override.clone();
        session.reasoning_level = predecessor.reasoning_level.clone();
        let manifest = fork_manifest(ForkManifestInput {
            predecessor_session_id: predecessor.id,
            origin_session_id,
            at,
            predecessor_last_seq: last_seq,
            title: &session.title,
            description: &session.description,
        });
        let copies = fork_events(&events, seq, now);
        let fork = NewFork {
            session,
            edge: NewContinuation {
                id: continuation_id,
                predecessor_session_id: predecessor.id,
                successor_session_id: fork_id,
                origin_session_id,
                tool_call_id: format!("{FORK_KEY_PREFIX}{continuation_id}"),
                initiating_event_id: at.id,
                reason: fork_reason(seq),
                manifest_cbor: manifest.to_cbor(),
                created_at_ms: now,
            },
            attachment_ids: fork_attachment_ids(&copies),
            events: copies,
        };

        env.settings
            .crash_points
            .reach(points::FORK_BEFORE_CREATE)
            .await;
        match store.create_fork_signed(request.nonce, fork).await? {
            NonceOutcome::Replayed => return Ok(ForkOutcome::Replayed),
            NonceOutcome::Fresh(ForkCreation::Created) => {}
            NonceOutcome::Fresh(ForkCreation::NoSuchSession) => {
                return refused(ForkRefusal::NoSuchSession);
            }
            NonceOutcome::Fresh(ForkCreation::SessionsFull) => {
                return refused(ForkRefusal::SessionsFull);
            }
            NonceOutcome::Fresh(ForkCreation::ForksFull) => {
                return refused(ForkRefusal::ForksFull);
            }
        }
        env.settings
            .crash_points
            .reach(points::FORK_AFTER_CREATE)
            .await;

        let publisher = &env.publisher;
        publisher.publish(Notification::SessionChanged {
            session_id: predecessor.id,
            reason: "forked",
            seqs: None,
        });
        publisher.publish(Notification::SessionChanged {
            session_id: fork_id,
            reason: "forked-from",
            seqs: Some(SeqRange { from: 1, to: seq }),
        });
        publisher.publish(Notification::AccountChanged {
            account_id: predecessor.account_id,
            reasons: vec!["session-created", "session-forked"],
        });
        Ok(ForkOutcome::Forked {
            session_id: fork_id,
            continuation_id,
        })
    }
}
