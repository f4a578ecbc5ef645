//! The end of a turn: what it saw at its end (a continuation's edge, what a typed child
//! returned) and the notice an open plan gives a run's end.

use seed_durable::StoreState;
use seed_events::{EventRole, NewEvent, SessionId};
use seed_store::RunRow;

use super::TurnError;
use crate::env::RunEnv;
use crate::verbs::continue_session::CONTINUE_SESSION;

/// The notice an open plan with unfinished steps gives a run's end, which then takes a later
/// pass (at most `plan_passes_max`, counted by the caller) instead of ending; `None` when the
/// plan (`None`: the session has none) has no unfinished step.
pub(super) fn plan_notice(
    plan: Option<&serde_json::Value>,
    run_id: seed_events::RunId,
    now_ms: i64,
) -> Option<NewEvent> {
    let open_steps: Vec<&str> = seed_projections::continuation::unfinished_steps(plan)
        .filter_map(|step| step.get("step").and_then(|s| s.as_str()))
        .collect();
    if open_steps.is_empty() {
        return None;
    }
    Some(NewEvent {
        kind: "notice".to_owned(),
        role: Some(EventRole::System),
        actor: Some("system".to_owned()),
        content: serde_json::json!({
            "text": format!(
                "The plan has {} unfinished step(s): {}. Continue with them, or update the plan.",
                open_steps.len(),
                open_steps.join("; ")
            )
        }),
        meta: serde_json::json!({ "obligation": "plan" }),
        run_id: Some(run_id),
        pi_entry_id: None,
        created_at_ms: now_ms,
    })
}

/// What a typed child returned: the newest `return_result` result of this run in the log.
pub(super) fn returned_result(
    log: &[seed_events::SessionEvent],
    run: &RunRow,
) -> Option<serde_json::Value> {
    log.iter().rev().find_map(|event| {
        let content = &event.content;
        (event.kind == "tool_result"
            && event.run_id == Some(run.id)
            && content.get("tool_name").and_then(|n| n.as_str()) == Some("return_result"))
        .then(|| {
            let text = content
                .get("content")
                .and_then(|c| c.as_str())
                .unwrap_or_default();
            serde_json::from_str(text)
                .unwrap_or_else(|_| serde_json::Value::String(text.to_owned()))
        })
    })
}

/// The edge this turn's continue_session call made, if the turn ended by continuing: a
/// continue_session result of this turn and the edge of its call (an interrupted result too:
/// the call may have created its successor before a crash cut it off).
pub(super) async fn continued_by(
    env: &RunEnv,
    session_id: SessionId,
    state: &StoreState,
    request_id: &str,
) -> Result<Option<seed_store::ContinuationRow>, TurnError> {
    // The kind of entry first: it rules out nearly every entry of a long session at once.
    let call_ids: Vec<&str> = state
        .entries
        .iter()
        .rev()
        .filter_map(|entry| match &entry.body {
            seed_durable::EntryBody::ToolResult { message, .. }
                if message.tool_name == CONTINUE_SESSION
                    && entry.body.request_id() == Some(request_id) =>
            {
                Some(message.tool_call_id.as_str())
            }
            _ => None,
        })
        .collect();
    for call_id in call_ids {
        if let Some(edge) = env.store.find_continuation(session_id, call_id).await? {
            return Ok(Some(edge));
        }
    }
    Ok(None)
}
