//! Approvals: the calls that wait for a person's decision, listed, and decided. A decision
//! resumes the run that waits on it: approved, the call runs once with the arguments approved;
//! denied, it never runs and the model reads the reason.
//!
//! An MCP server's question during a call (an elicitation) takes the same path: it is listed
//! with the approvals (`kind` `elicitation`, with its message and the schema of the answer) and
//! answered at the call's id: accept with content that fits the schema, decline or cancel. The
//! answer goes back to the server, and the call goes on.

use actix_web::{HttpRequest, HttpResponse, get, post, web};
use seed_actors::bus::Notification;
use seed_store::{
    AnswerOutcome, ApprovalDecision, ApprovalRow, DecideOutcome, ElicitationAnswer, ElicitationRow,
};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

use super::{AppState, Body, fresh, session_path};
use crate::error::{ApiError, ErrorBody};
use crate::input::parse_json;

/// What a person decides on a call: `approve` or `deny` an approval; `accept` (with
/// `content`), `decline` or `cancel` an elicitation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum DecisionName {
    Approve,
    Deny,
    Accept,
    Decline,
    Cancel,
}

impl DecisionName {
    /// An answer to an elicitation rather than a decision on an approval.
    fn answers_a_question(self) -> bool {
        matches!(
            self,
            DecisionName::Accept | DecisionName::Decline | DecisionName::Cancel
        )
    }
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
    /// The answer to an elicitation, fitting its `requested_schema`. Only with `accept`.
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    pub content: Option<serde_json::Value>,
}

/// One approval: a call that waits for a decision, or was decided; or an MCP server's
/// question during a call (`kind` `elicitation`), pending or answered.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct ApprovalInfo {
    /// `approval` or `elicitation`.
    #[serde(default = "approval_kind")]
    pub kind: String,
    pub session_id: Uuid,
    /// The run that waits on it.
    pub run_id: Uuid,
    pub call_id: String,
    /// The verb (tool) the model called.
    pub name: String,
    /// The arguments as the model wrote them.
    #[schema(value_type = Object)]
    pub arguments: serde_json::Value,
    /// An approval: `pending`, `approved`, `denied` or `timed_out`. An elicitation: `pending`,
    /// `accepted`, `declined`, `cancelled`, `timed_out` or `closed` (its call ended first).
    pub status: String,
    /// What an elicitation's server asks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// The JSON Schema of an elicitation's answer: an object of primitive fields.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub requested_schema: Option<serde_json::Value>,
    /// An accepted elicitation's answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub content: Option<serde_json::Value>,
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

fn approval_kind() -> String {
    "approval".to_owned()
}

impl From<ElicitationRow> for ApprovalInfo {
    fn from(row: ElicitationRow) -> ApprovalInfo {
        ApprovalInfo {
            kind: "elicitation".to_owned(),
            session_id: row.session_id.0,
            run_id: row.run_id.0,
            call_id: row.tool_call_id,
            name: row.verb,
            arguments: row.arguments,
            status: row.status.as_str().to_owned(),
            message: Some(row.message),
            requested_schema: Some(row.requested_schema),
            content: row.content,
            decided_arguments: None,
            reason: row.reason,
            created_at_ms: row.created_at_ms,
            decided_at_ms: row.decided_at_ms,
            deadline_at_ms: row.deadline_at_ms,
        }
    }
}

impl From<ApprovalRow> for ApprovalInfo {
    fn from(row: ApprovalRow) -> ApprovalInfo {
        ApprovalInfo {
            kind: approval_kind(),
            session_id: row.session_id.0,
            run_id: row.run_id.0,
            call_id: row.tool_call_id,
            name: row.verb,
            arguments: row.arguments,
            status: row.status.as_str().to_owned(),
            message: None,
            requested_schema: None,
            content: None,
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
    /// Pending and decided, approvals and elicitations, oldest first.
    pub approvals: Vec<ApprovalInfo>,
}

/// The reason a denial without one gives the model.
const NO_REASON: &str = "no reason given";

/// The decision a request asks for, or why it is refused (nothing is written then).
fn decision_of(input: DecideApprovalRequest) -> Result<ApprovalDecision, ApiError> {
    if input.content.is_some() {
        return Err(ApiError::bad(
            "content",
            "only an accepted elicitation has content",
        ));
    }
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
        DecisionName::Accept | DecisionName::Decline | DecisionName::Cancel => Err(ApiError::bad(
            "decision",
            "accept, decline and cancel answer an MCP server's question, not an approval",
        )),
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

/// The answer a request gives a pending elicitation, or why it is refused (nothing is written
/// then): content only with `accept`, where it must fit the requested schema.
fn answer_of(
    input: DecideApprovalRequest,
    pending: &ElicitationRow,
) -> Result<ElicitationAnswer, ApiError> {
    if input.reason.is_some() {
        return Err(ApiError::bad(
            "reason",
            "an elicitation is answered with content, not a reason",
        ));
    }
    if input.arguments.is_some() {
        return Err(ApiError::bad("arguments", "only an approval has arguments"));
    }
    match input.decision {
        DecisionName::Accept => {
            let content = input
                .content
                .unwrap_or_else(|| serde_json::Value::Object(serde_json::Map::new()));
            seed_mcp::elicitation::check_content(&pending.requested_schema, &content)
                .map_err(|refused| ApiError::bad(&refused.field, refused.problem))?;
            Ok(ElicitationAnswer::Accept { content })
        }
        DecisionName::Decline | DecisionName::Cancel if input.content.is_some() => Err(
            ApiError::bad("content", "only an accepted elicitation has content"),
        ),
        DecisionName::Decline => Ok(ElicitationAnswer::Decline),
        DecisionName::Cancel => Ok(ElicitationAnswer::Cancel),
        DecisionName::Approve | DecisionName::Deny => Err(ApiError::bad(
            "decision",
            "the call's MCP server asks a question: answer it with accept, decline or cancel",
        )),
    }
}

/// Answers the pending elicitation of call `call_id`: recorded, then handed to the call that
/// waits for it, which replies to the server.
async fn answer_elicitation(
    state: &AppState,
    caller: &crate::auth::Caller,
    session_id: seed_events::SessionId,
    call_id: &str,
    input: DecideApprovalRequest,
) -> Result<HttpResponse, ApiError> {
    let Some(pending) = state.store.pending_elicitation(session_id, call_id).await? else {
        let asked = state.store.elicitations(session_id).await?;
        return Err(
            match asked.iter().rev().find(|row| row.tool_call_id == call_id) {
                Some(row) => ApiError::Conflict(format!(
                    "the question of call {call_id} was {} already",
                    row.status.as_str().replace('_', " ")
                )),
                None => ApiError::NotFound("elicitation"),
            },
        );
    };
    let answer = answer_of(input, &pending)?;
    let outcome = fresh(
        state
            .store
            .answer_elicitation_signed(
                caller.nonce.clone(),
                caller.account_id,
                session_id,
                call_id,
                answer,
                state.now_ms(),
            )
            .await?,
    )?;
    let answered = match outcome {
        AnswerOutcome::Answered(row) => row,
        AnswerOutcome::NotPending(Some(row)) => {
            return Err(ApiError::Conflict(format!(
                "the question of call {call_id} was {} already",
                row.status.as_str().replace('_', " ")
            )));
        }
        AnswerOutcome::NotPending(None) => return Err(ApiError::NotFound("elicitation")),
    };
    if let Some(mcp) = &state.mcp {
        mcp.people().answered(answered.clone());
    }
    state.publish(Notification::SessionChanged {
        session_id,
        reason: "approval",
        seqs: None,
    });
    Ok(HttpResponse::Ok().json(ApprovalInfo::from(answered)))
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
    let elicitations = state.store.elicitations(session.id).await?;
    state.take_nonce(&caller).await?;
    let mut listed: Vec<ApprovalInfo> = approvals
        .into_iter()
        .map(ApprovalInfo::from)
        .chain(elicitations.into_iter().map(ApprovalInfo::from))
        .collect();
    listed.sort_by_key(|listed| listed.created_at_ms);
    Ok(HttpResponse::Ok().json(ApprovalsResponse { approvals: listed }))
}

/// Decides a call that waits for approval: `approve` (with `arguments` to run it with edited
/// ones) or `deny` (with a `reason` the model reads). The run waiting on it resumes: an
/// approved call runs once, a denied one never. 409 when it was decided already. A call whose
/// MCP server asks a question (an elicitation) is answered `accept` with `content` that fits
/// the question's schema (400 naming the field when it does not), `decline` or `cancel`.
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
    let (session_id, call_id) = path.into_inner();
    if input.decision.answers_a_question() {
        let session = state
            .own_session(&caller, session_path(&session_id))
            .await?;
        return answer_elicitation(&state, &caller, session.id, &call_id, input).await;
    }
    let mut decision = decision_of(input)?;
    let session = state
        .own_session(&caller, session_path(&session_id))
        .await?;
    let approval_pending = state
        .store
        .approval(session.id, &call_id)
        .await?
        .is_some_and(|approval| approval.status == seed_store::ApprovalStatus::Pending);
    if !approval_pending
        && state
            .store
            .pending_elicitation(session.id, &call_id)
            .await?
            .is_some()
    {
        return Err(ApiError::bad(
            "decision",
            "the call's MCP server asks a question: answer it with accept, decline or cancel",
        ));
    }
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
