//! A continuation's preview (`POST /v1/sessions/{id}/continuation/preview`): what
//! continue_session would create from these arguments — the projection's size against its
//! budget, each source's fit, what would be omitted, the successor's first request against the
//! model's window, the ranges worth citing — with nothing created. The preview_continuation
//! verb's answer, for a person. And a person's continuation (`POST
//! /v1/sessions/{id}/continuation`): the same arguments, the successor created as
//! continue_session creates it.

use actix_web::{HttpRequest, HttpResponse, post, web};
use seed_actors::continuation::person::PersonContinuation;
use seed_actors::continuation::preview::{PreviewOutcome, PreviewRefusal};
use seed_projections::continuation::preview as pure;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

use super::{AppState, Body, SessionInfo, replayed, session_path};
use crate::error::{ApiError, ErrorBody};
use crate::input::parse_json;

/// continue_session's arguments, as the verb takes them (its checks name the failing field).
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ContinuationPreviewRequest {
    /// Why continue now: topic change, phase change, refocus, context pressure or user
    /// request, with detail (at most 200 characters).
    pub reason: String,
    /// The successor's title.
    pub title: String,
    /// The successor's live status.
    pub description: String,
    /// Prose for a colleague who has read nothing: purpose, currentRequest,
    /// establishedFacts, decisions, openQuestions, nextActions, cautions (each a string or a
    /// list of strings); any other key is a section of its own.
    #[schema(value_type = Object)]
    pub handoff: serde_json::Value,
    /// Exact pointers: `{"type": "session_events", "fromSeq": 3, "toSeq": 6}`,
    /// `{"type": "session_event", "seq": 3}`, `{"type": "memory", "path": "~/memory/…"}`,
    /// `{"type": "resource", "uri": "https://…"}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Vec<Object>>)]
    pub sources: Option<Vec<serde_json::Value>>,
    /// `{"plan": "carry" | "close" | "omit"}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub transfer: Option<serde_json::Value>,
}

/// What continue_session would create. Nothing was.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct ContinuationPreview {
    /// The projection (the successor's first message), in bytes.
    pub projection_bytes: u64,
    /// The projection, in tokens, estimated from its size.
    pub projection_tokens: u64,
    pub budget_bytes: u64,
    pub budget_tokens: u64,
    /// The projection's frames in order; their bytes add up to `projection_bytes`.
    pub parts: Vec<PreviewPart>,
    /// Each cited source, in the order given.
    pub sources: Vec<PreviewSource>,
    /// The ranges the projection would list as omitted (linked, not loaded).
    pub omitted: Vec<PreviewOmitted>,
    pub first_request: PreviewFirstRequest,
    /// The ranges of the session worth citing, each with why.
    pub recommended: Vec<PreviewRecommended>,
}

/// One frame of the projection.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct PreviewPart {
    /// `continuation`, `handoff`, `sources`, `excerpt`, `recalled_excerpt`,
    /// `recent_exchanges` or `omitted`.
    pub kind: String,
    pub bytes: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from_seq: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to_seq: Option<i64>,
}

/// What the projection holds of a source.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum PreviewLoaded {
    /// An excerpt holds all of it.
    Whole,
    /// An excerpt holds its first lines; the rest is omitted.
    Cut,
    /// Nothing of it fits; it is omitted.
    Omitted,
    /// Named in the source list only, read on demand.
    Listed,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct PreviewSource {
    /// Its place in `sources`.
    pub index: usize,
    /// As the projection names it.
    pub source: String,
    /// What its excerpt takes loaded whole; absent for a listed source.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes: Option<u64>,
    /// What the projection's excerpt of it takes.
    pub loaded_bytes: u64,
    pub loaded: PreviewLoaded,
    /// Whether nothing of it is left out.
    pub fits: bool,
    /// The last seq loaded, for a cut excerpt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loaded_to_seq: Option<i64>,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct PreviewOmitted {
    pub thread: Uuid,
    pub from_seq: i64,
    pub to_seq: i64,
    /// Its transcript lines' bytes, over the events counted.
    pub bytes: u64,
    pub n_events_counted: u64,
    /// Whether every event of the range was counted.
    pub counted_whole: bool,
}

/// The successor's first request, estimated.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct PreviewFirstRequest {
    pub tokens: u64,
    pub projection_tokens: u64,
    /// The copied user message.
    pub message_tokens: u64,
    /// The system prompt and the verbs.
    pub fixed_tokens: u64,
    /// The model's context window, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window_tokens: Option<u64>,
    /// `tokens` as a percentage of the window, to a tenth.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window_percent: Option<f64>,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct PreviewRecommended {
    pub from_seq: i64,
    pub to_seq: i64,
    pub reasons: Vec<String>,
    /// Whether the projection already loads it whole.
    pub loaded: bool,
}

impl From<pure::Preview> for ContinuationPreview {
    fn from(preview: pure::Preview) -> ContinuationPreview {
        ContinuationPreview {
            projection_bytes: preview.projection_bytes,
            projection_tokens: preview.projection_tokens,
            budget_bytes: preview.budget_bytes,
            budget_tokens: preview.budget_tokens,
            parts: preview
                .parts
                .into_iter()
                .map(|part| PreviewPart {
                    kind: part.kind,
                    bytes: part.bytes,
                    from_seq: part.from_seq,
                    to_seq: part.to_seq,
                })
                .collect(),
            sources: preview
                .sources
                .into_iter()
                .map(|source| PreviewSource {
                    index: source.index,
                    source: source.source,
                    bytes: source.bytes,
                    loaded_bytes: source.loaded_bytes,
                    loaded: match source.loaded {
                        pure::Loaded::Whole => PreviewLoaded::Whole,
                        pure::Loaded::Cut => PreviewLoaded::Cut,
                        pure::Loaded::Omitted => PreviewLoaded::Omitted,
                        pure::Loaded::Listed => PreviewLoaded::Listed,
                    },
                    fits: source.fits,
                    loaded_to_seq: source.loaded_to_seq,
                })
                .collect(),
            omitted: preview
                .omitted
                .into_iter()
                .map(|range| PreviewOmitted {
                    thread: range.thread.0,
                    from_seq: range.from_seq,
                    to_seq: range.to_seq,
                    bytes: range.bytes,
                    n_events_counted: range.n_events_counted,
                    counted_whole: range.counted_whole,
                })
                .collect(),
            first_request: PreviewFirstRequest {
                tokens: preview.first_request.tokens,
                projection_tokens: preview.first_request.projection_tokens,
                message_tokens: preview.first_request.message_tokens,
                fixed_tokens: preview.first_request.fixed_tokens,
                window_tokens: preview.first_request.window_tokens,
                window_percent: preview.first_request.window_percent,
            },
            recommended: preview
                .recommended
                .into_iter()
                .map(|range| PreviewRecommended {
                    from_seq: range.from_seq,
                    to_seq: range.to_seq,
                    reasons: range.reasons,
                    loaded: range.loaded,
                })
                .collect(),
        }
    }
}

/// What continue_session would create from these arguments, had the session's agent called
/// it now: checked and refused exactly as it would be, and nothing created or changed.
#[utoipa::path(
    params(("session_id" = Uuid, Path, description = "The session to continue")),
    request_body(content = ContinuationPreviewRequest, content_type = "application/json"),
    responses(
        (status = 200, body = ContinuationPreview),
        (status = 400, description = "An argument is not valid (`field` names it: `title`, \
                                      `handoff`, `sources[2].fromSeq`), or the body is not \
                                      valid", body = ErrorBody),
        (status = 401, body = ErrorBody),
        (status = 404, body = ErrorBody),
        (status = 409, description = "The session cannot continue now: a delegated child, \
                                      continued as often as it may be, no user message, or \
                                      nothing new said since it was last continued",
         body = ErrorBody),
        (status = 413, description = "The body is too large", body = ErrorBody),
    ),
    tag = "sessions"
)]
#[post("/v1/sessions/{session_id}/continuation/preview")]
pub(super) async fn preview_continuation(
    state: web::Data<AppState>,
    request: HttpRequest,
    path: web::Path<Uuid>,
    body: Body,
) -> Result<HttpResponse, ApiError> {
    let caller = state.caller(&request, &body).await?;
    let input: ContinuationPreviewRequest = parse_json(&body)?;
    let arguments =
        serde_json::to_value(&input).map_err(|error| ApiError::Internal(error.into()))?;
    let session_id = session_path(&path);
    let outcome = state
        .runtime
        .preview_continuation(caller.account_id, session_id, arguments)
        .await?;
    let preview = match outcome {
        PreviewOutcome::Previewed(preview) => *preview,
        PreviewOutcome::Refused(why) => return Err(refusal(why)),
    };
    // Read-only: the nonce is taken once the answer is ready.
    state.take_nonce(&caller).await?;
    Ok(HttpResponse::Ok().json(ContinuationPreview::from(preview)))
}

/// What a person's continuation made.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct ContinueSessionResponse {
    /// The successor: its first events are the projection and the session's newest user
    /// message, copied; its run answers that message.
    pub session: SessionInfo,
    /// The edge, as `GET /v1/sessions/{successor}/continuation` shows it.
    pub continuation_id: Uuid,
    pub continued_from_session_id: Uuid,
}

/// A refusal continue_session would give, as the API answers it.
fn refusal(refusal: PreviewRefusal) -> ApiError {
    match refusal {
        PreviewRefusal::Invalid { field, message } => ApiError::bad(&field, message),
        PreviewRefusal::Refused(why) => ApiError::Conflict(why),
    }
}

/// Carries the session into a successor now, as continue_session would from these arguments
/// (the preview shows what it will start from): the successor, its edge and its first two
/// events (the projection, and the session's newest user message copied word for word) in one
/// transaction with the request's nonce; then the successor's run answers the message.
#[utoipa::path(
    params(("session_id" = Uuid, Path, description = "The session to continue")),
    request_body(content = ContinuationPreviewRequest, content_type = "application/json"),
    responses(
        (status = 201, body = ContinueSessionResponse),
        (status = 400, description = "An argument is not valid (`field` names it), or the body \
                                      is not valid", body = ErrorBody),
        (status = 401, body = ErrorBody),
        (status = 404, body = ErrorBody),
        (status = 409, description = "The session cannot continue now: a turn is running, a \
                                      delegated child, continued as often as it may be, no \
                                      user message, or nothing new said since it was last \
                                      continued", body = ErrorBody),
        (status = 413, description = "The body is too large", body = ErrorBody),
    ),
    tag = "sessions"
)]
#[post("/v1/sessions/{session_id}/continuation")]
pub(super) async fn continue_session(
    state: web::Data<AppState>,
    request: HttpRequest,
    path: web::Path<Uuid>,
    body: Body,
) -> Result<HttpResponse, ApiError> {
    let caller = state.caller(&request, &body).await?;
    let input: ContinuationPreviewRequest = parse_json(&body)?;
    let arguments =
        serde_json::to_value(&input).map_err(|error| ApiError::Internal(error.into()))?;
    let predecessor = session_path(&path);
    let outcome = state
        .runtime
        .continue_by_person(
            caller.account_id,
            predecessor,
            arguments,
            caller.nonce.clone(),
        )
        .await?;
    let (successor, continuation_id) = match outcome {
        PersonContinuation::Continued {
            successor_session_id,
            continuation_id,
        } => (successor_session_id, continuation_id),
        PersonContinuation::Refused(why) => return Err(refusal(why)),
        PersonContinuation::Replayed => return Err(replayed()),
    };
    let session = state.own_session(&caller, successor).await?;
    Ok(HttpResponse::Created().json(ContinueSessionResponse {
        session: state.session_info(session).await?,
        continuation_id: continuation_id.0,
        continued_from_session_id: predecessor.0,
    }))
}
