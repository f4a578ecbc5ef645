//! Verbs a person runs by hand (the command palette).

use actix_web::{HttpRequest, HttpResponse, get, post, web};
use seed_actors::bus::{Notification, SeqRange};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

use super::{AppState, Body, fresh, session_path};
use crate::error::{ApiError, ErrorBody};
use crate::input::parse_json;

#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ActionRequest {
    /// The verb to run.
    pub verb: ByHandVerb,
    /// The verb's arguments, as its schema says.
    #[serde(default = "empty_object")]
    #[schema(value_type = Object)]
    pub arguments: serde_json::Value,
}

/// The verbs a person may run by hand.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ByHandVerb {
    Read,
    Plan,
    Status,
    Memory,
}

impl ByHandVerb {
    /// Every verb of the enum, in the order the palette lists them.
    pub const ALL: [ByHandVerb; 4] = [
        ByHandVerb::Read,
        ByHandVerb::Plan,
        ByHandVerb::Status,
        ByHandVerb::Memory,
    ];

    pub fn name(self) -> &'static str {
        match self {
            ByHandVerb::Read => "read",
            ByHandVerb::Plan => "plan",
            ByHandVerb::Status => "status",
            ByHandVerb::Memory => "memory",
        }
    }
}

fn empty_object() -> serde_json::Value {
    serde_json::json!({})
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct ActionResponse {
    pub event_id: i64,
    pub seq: i64,
    pub result: String,
    pub is_error: bool,
}

/// A verb a person may run by hand, as the palette offers it.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct ByHandVerbInfo {
    pub name: String,
    /// What it does, in its own words.
    pub description: String,
    /// Its arguments' JSON Schema (the one an action's arguments are checked against).
    #[schema(value_type = Object)]
    pub parameters: serde_json::Value,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct ActionsResponse {
    pub verbs: Vec<ByHandVerbInfo>,
}

/// The verbs a person may run by hand in the session (the command palette), each with its
/// arguments' schema.
#[utoipa::path(
    params(("session_id" = Uuid, Path, description = "The session")),
    responses(
        (status = 200, body = ActionsResponse),
        (status = 401, body = ErrorBody),
        (status = 413, description = "The body is too large", body = ErrorBody),
        (status = 404, body = ErrorBody),
    ),
    tag = "sessions"
)]
#[get("/v1/sessions/{session_id}/actions")]
pub(super) async fn list_actions(
    state: web::Data<AppState>,
    request: HttpRequest,
    path: web::Path<Uuid>,
    body: Body,
) -> Result<HttpResponse, ApiError> {
    let caller = state.caller(&request, &body).await?;
    state.own_session(&caller, session_path(&path)).await?;
    state.take_nonce(&caller).await?;
    let runtime = &state.runtime;
    let verbs = ByHandVerb::ALL
        .into_iter()
        .filter_map(|verb| {
            Some(ByHandVerbInfo {
                name: verb.name().to_owned(),
                description: runtime.verb_description_by_hand(verb.name())?,
                parameters: runtime.verb_parameters_by_hand(verb.name())?,
            })
        })
        .collect();
    Ok(HttpResponse::Ok().json(ActionsResponse { verbs }))
}

/// Runs a verb as the user (the command palette); the action and its result go to the log,
/// and the model reads them with its next turn.
#[utoipa::path(
    params(("session_id" = Uuid, Path, description = "The session")),
    request_body(content = ActionRequest, content_type = "application/json"),
    responses(
        (status = 200, body = ActionResponse),
        (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody),
        (status = 413, description = "The body is too large", body = ErrorBody),
        (status = 404, body = ErrorBody),
    ),
    tag = "sessions"
)]
#[post("/v1/sessions/{session_id}/actions")]
pub(super) async fn run_action(
    state: web::Data<AppState>,
    request: HttpRequest,
    path: web::Path<Uuid>,
    body: Body,
) -> Result<HttpResponse, ApiError> {
    let caller = state.caller(&request, &body).await?;
    let input: ActionRequest = parse_json(&body)?;
    let verb = input.verb.name();
    if !state
        .runtime
        .verbs_by_hand()
        .iter()
        .any(|name| name == verb)
    {
        return Err(ApiError::bad(
            "verb",
            format!("this service runs no verb {verb:?} by hand"),
        ));
    }
    if !input.arguments.is_object() {
        return Err(ApiError::bad("arguments", "must be an object"));
    }
    // Arguments that do not fit the verb's schema are refused before anything is written.
    state
        .runtime
        .check_verb_arguments(verb, &input.arguments)
        .map_err(|problem| {
            let field = if problem.field == "arguments" {
                problem.field
            } else {
                format!("arguments.{}", problem.field)
            };
            ApiError::bad(&field, problem.problem)
        })?;
    let session = state.own_session(&caller, session_path(&path)).await?;
    // The nonce first: a replay must not run the verb a second time.
    state.take_nonce(&caller).await?;
    let output = state
        .runtime
        .run_verb_by_hand(caller.account_id, session.id, verb, input.arguments.clone())
        .await?
        .ok_or_else(|| ApiError::bad("verb", "no such verb"))?;
    let event =
        seed_actors::verbs::by_hand::action_event(verb, &input.arguments, &output, state.now_ms());
    let stored = fresh(
        state
            .store
            .append_events_signed(None, caller.account_id, session.id, vec![event])
            .await?,
    )?
    .and_then(|mut events| events.pop())
    .ok_or(ApiError::NotFound("session"))?;
    state.publish(Notification::SessionChanged {
        session_id: session.id,
        reason: "action",
        seqs: Some(SeqRange {
            from: stored.seq,
            to: stored.seq,
        }),
    });
    Ok(HttpResponse::Ok().json(ActionResponse {
        event_id: stored.id.0,
        seq: stored.seq,
        result: output.content,
        is_error: output.is_error,
    }))
}
