//! Approvals: the calls that wait for a person's decision, listed, and decided. A decision
//! resumes the run that waits on it: approved, the call runs once with the arguments approved;
//! denied, it never runs and the model reads the reason.

use actix_web::{HttpRequest, HttpResponse, get, post, web};
use seed_actors::bus::Notification;
use seed_store::{ApprovalDecision, ApprovalRow, DecideOutcome};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

use super::{AppState, Body, fresh, session_path};
use crate::error::{ApiError, ErrorBody};
use crate::input::parse_json;

/// What a person decides on a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum DecisionName {
    Approve,
    Deny,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct DecideApprovalRequest {
    pub decision: DecisionName,
    /// Why the call is denied: the model reads it. Only with `deny`.
    #[serde(default)]
    pub reason: Option<String>,
    /// The arguments the call runs with, in place of the model's (edit, then approve). Only
    /// with `approve`; without it the call runs as the model wrote it.
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    pub arguments: Option<serde_json::Value>,
}

/// One approval: a call that waits for a decision, or was decided.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct ApprovalInfo {
    pub session_id: Uuid,
    /// The run that waits on it.
    pub run_id: Uuid,
    pub call_id: String,
    /// The verb (tool) the model called.
    pub name: String,
    /// The arguments as the model wrote them.
    #[schema(value_type = Object)]
    pub arguments: serde_json::Value,
    /// `pending`, `approved`, `denied` or `timed_out`.
    pub status: String,
    /// The arguments the call runs with, once approved.
    #[schema(value_type = Option<Object>)]
    pub decided_arguments: Option<serde_json::Value>,
    /// Why it was denied (or timed out).
    pub reason: Option<String>,
    pub created_at_ms: i64,
    pub decided_at_ms: Option<i64>,
    /// When no answer by then denies it.
    pub deadline_at_ms: Option<i64>,
}

impl From<ApprovalRow> for ApprovalInfo {
    fn from(row: ApprovalRow) -> ApprovalInfo {
        ApprovalInfo {
            session_id: row.session_id.0,
            run_id: row.run_id.0,
            call_id: row.tool_call_id,
            name: row.verb,
            arguments: row.arguments,
            status: row.status.as_str().to_owned(),
            decided_arguments: row.decided_arguments,
            reason: row.reason,
            created_at_ms: row.created_at_ms,
            decided_at_ms: row.decided_at_ms,
            deadline_at_ms: row.deadline_at_ms,
        }
    }
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct ApprovalsResponse {
    /// Pending and decided, oldest first.
    pub approvals: Vec<ApprovalInfo>,
}

/// The reason a denial without one gives the model.
const NO_REASON: &str = "no reason given";

/// The decision a request asks for, or why it is refused (nothing is written then).
fn decision_of(input: DecideApprovalRequest) -> Result<ApprovalDecision, ApiError> {
    match input.decision {
        DecisionName::Approve => {
            if input.reason.is_some() {
                return Err(ApiError::bad("reason", "only a denial has a reason"));
            }
            match input.arguments {
                Some(arguments) if !arguments.is_object() => {
                    Err(ApiError::bad("arguments", "must be an object"))
                }
                Some(arguments) => Ok(ApprovalDecision::Approve { arguments }),
                // Filled in with the model's arguments once the approval is found.
                None => Ok(ApprovalDecision::Approve {
                    arguments: serde_json::Value::Null,
                }),
            }
        }
        DecisionName::Deny => {
            if input.arguments.is_some() {
                return Err(ApiError::bad("arguments", "only an approval has arguments"));
            }
            let reason = input
                .reason
                .map(|reason| reason.trim().to_owned())
                .filter(|reason| !reason.is_empty())
                .unwrap_or_else(|| NO_REASON.to_owned());
            Ok(ApprovalDecision::Deny { reason })
        }
    }
}

/// The session's approvals, pending and decided, oldest first.
#[utoipa::path(
    params(("session_id" = Uuid, Path, description = "The session")),
    responses(
        (status = 200, body = ApprovalsResponse),
        (status = 401, body = ErrorBody),
        (status = 413, description = "The body is too large", body = ErrorBody),
        (status = 404, body = ErrorBody),
    ),
    tag = "sessions"
)]
#[get("/v1/sessions/{session_id}/approvals")]
pub(super) async fn list_approvals(
    state: web::Data<AppState>,
    request: HttpRequest,
    path: web::Path<Uuid>,
    body: Body,
) -> Result<HttpResponse, ApiError> {
    let caller = state.caller(&request, &body).await?;
    let session = state.own_session(&caller, session_path(&path)).await?;
    let approvals = state.store.approvals(session.id).await?;
    state.take_nonce(&caller).await?;
    Ok(HttpResponse::Ok().json(ApprovalsResponse {
        approvals: approvals.into_iter().map(ApprovalInfo::from).collect(),
    }))
}

/// Decides a call that waits for approval: `approve` (with `arguments` to run it with edited
/// ones) or `deny` (with a `reason` the model reads). The run waiting on it resumes: an
/// approved call runs once, a denied one never. 409 when it was decided already.
#[utoipa::path(
    params(
        ("session_id" = Uuid, Path, description = "The session"),
        ("call_id" = String, Path, description = "The call's id"),
    ),
    request_body(content = DecideApprovalRequest, content_type = "application/json"),
    responses(
        (status = 200, body = ApprovalInfo),
        (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody),
        (status = 413, description = "The body is too large", body = ErrorBody),
        (status = 404, body = ErrorBody),
        (status = 409, description = "The call was decided already", body = ErrorBody),
    ),
    tag = "sessions"
)]
#[post("/v1/sessions/{session_id}/approvals/{call_id}")]
pub(super) async fn decide_approval(
    state: web::Data<AppState>,
    request: HttpRequest,
    path: web::Path<(Uuid, String)>,
    body: Body,
) -> Result<HttpResponse, ApiError> {
    let caller = state.caller(&request, &body).await?;
    let input: DecideApprovalRequest = parse_json(&body)?;
    let mut decision = decision_of(input)?;
    let (session_id, call_id) = path.into_inner();
    let session = state
        .own_session(&caller, session_path(&session_id))
        .await?;
    if let ApprovalDecision::Approve { arguments } = &mut decision
        && arguments.is_null()
    {
        let approval = state
            .store
            .approval(session.id, &call_id)
            .await?
            .ok_or(ApiError::NotFound("approval"))?;
        *arguments = approval.arguments;
    }
    let outcome = fresh(
        state
            .store
            .decide_approval_signed(
                caller.nonce.clone(),
                caller.account_id,
                session.id,
                &call_id,
                decision,
                state.now_ms(),
            )
            .await?,
    )?;
    let decided = match outcome {
        DecideOutcome::Decided(row) => row,
        DecideOutcome::AlreadyDecided(row) => {
            return Err(ApiError::Conflict(format!(
                "the call {call_id} was {} already",
                row.status.as_str().replace('_', " ")
            )));
        }
        DecideOutcome::NotFound => return Err(ApiError::NotFound("approval")),
    };
    // The run waiting on it is queued again: the queue claims it now.
    state.runtime.wake();
    state.publish(Notification::SessionChanged {
        session_id: session.id,
        reason: "approval",
        seqs: None,
    });
    Ok(HttpResponse::Ok().json(ApprovalInfo::from(decided)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(body: serde_json::Value) -> Result<ApprovalDecision, ApiError> {
        let input: DecideApprovalRequest = serde_json::from_value(body)
            .map_err(|error| ApiError::bad("body", error.to_string()))?;
        decision_of(input)
    }

    /// A decision names what it may: a reason only with a denial, arguments (an object) only
    /// with an approval; a denial without a reason says so.
    #[test]
    fn a_decision_is_checked_before_anything_is_written() {
        let edited = serde_json::json!({ "amount": 3 });
        assert_eq!(
            request(serde_json::json!({ "decision": "approve", "arguments": edited }))
                .expect("an approval"),
            ApprovalDecision::Approve { arguments: edited }
        );
        assert_eq!(
            request(serde_json::json!({ "decision": "deny", "reason": " too much " }))
                .expect("a denial"),
            ApprovalDecision::Deny {
                reason: "too much".to_owned()
            }
        );
        assert_eq!(
            request(serde_json::json!({ "decision": "deny" })).expect("a denial"),
            ApprovalDecision::Deny {
                reason: NO_REASON.to_owned()
            }
        );
        for (body, field) in [
            (
                serde_json::json!({ "decision": "approve", "reason": "ok" }),
                "reason",
            ),
            (
                serde_json::json!({ "decision": "approve", "arguments": [1] }),
                "arguments",
            ),
            (
                serde_json::json!({ "decision": "deny", "arguments": {} }),
                "arguments",
            ),
        ] {
            match request(body.clone()) {
                Err(ApiError::BadRequest(invalid)) => {
                    assert_eq!(invalid.field.as_deref(), Some(field), "{body}")
                }
                other => panic!("{body}: {other:?}"),
            }
        }
    }
}
