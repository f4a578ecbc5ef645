//! The people of a simulation run: they decide the calls that wait for their approval —
//! approve, approve with edited arguments, or deny — as the seed says.

use seed_events::SessionId;
use seed_store::Store;

use crate::model::account;
use crate::observer::{Shared, hash_of, lock};

/// The decision `choice` (a seeded number) makes on a call: approve (half), approve with
/// edited arguments, or deny.
pub(crate) fn decision_of(
    choice: u64,
    arguments: &serde_json::Value,
) -> seed_store::ApprovalDecision {
    match choice % 8 {
        0..4 => seed_store::ApprovalDecision::Approve {
            arguments: arguments.clone(),
        },
        4 => seed_store::ApprovalDecision::Approve {
            arguments: serde_json::json!({ "item": format!("edited {choice:x}") }),
        },
        _ => seed_store::ApprovalDecision::Deny {
            reason: format!("not now {choice:x}"),
        },
    }
}

/// Decides the oldest pending approval of the first of `sessions` that has one, as `choice`
/// says; returns the call decided.
pub(crate) async fn answer_an_approval(
    store: &Store,
    sessions: &[SessionId],
    choice: u64,
) -> anyhow::Result<Option<String>> {
    for session in sessions {
        let pending = store
            .approvals(*session)
            .await?
            .into_iter()
            .find(|approval| approval.status == seed_store::ApprovalStatus::Pending);
        if let Some(approval) = pending {
            let decision = decision_of(choice, &approval.arguments);
            // A full disk may refuse it: the approval waits for the next answer.
            let _ = store
                .decide_approval(*session, &approval.tool_call_id, decision, 0)
                .await;
            return Ok(Some(approval.tool_call_id));
        }
    }
    Ok(None)
}

/// Decides every pending approval of the account's sessions (from a hash of its call id, so a
/// replay decides the same), as a person answering everything before the process ends.
pub(crate) async fn answer_every_approval(store: &Store, shared: &Shared) -> anyhow::Result<()> {
    for session in store.list_sessions(account()).await? {
        for approval in store.approvals(session.id).await? {
            if approval.status != seed_store::ApprovalStatus::Pending {
                continue;
            }
            let choice = hash_of(&approval.tool_call_id);
            let decision = decision_of(choice, &approval.arguments);
            let _ = store
                .decide_approval(session.id, &approval.tool_call_id, decision, 0)
                .await;
            *lock(&shared.n_decisions) += 1;
        }
    }
    Ok(())
}
