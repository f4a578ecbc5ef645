//! Sessions: create, list, read, delete, stop, the model, and a successor's continuation.

use actix_web::{HttpRequest, HttpResponse, delete, get, post, put, web};
use seed_actors::bus::Notification;
use seed_events::SessionId;
use seed_store::{NewSession, TitleSource};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};
use uuid::Uuid;

use super::{AppState, Body, fresh, session_path};
use crate::error::{ApiError, ErrorBody};
use crate::input::{self, Cursor, parse_json};
use crate::limits;

/// A link along a continuation edge.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ContinuationLink {
    pub continuation_id: Uuid,
    /// The session at the other end.
    pub session_id: Uuid,
    pub title: String,
    pub reason: String,
    pub created_at_ms: i64,
}

impl From<seed_events::ContinuationLink> for ContinuationLink {
    fn from(link: seed_events::ContinuationLink) -> ContinuationLink {
        ContinuationLink {
            continuation_id: link.continuation_id.0,
            session_id: link.session_id.0,
            title: link.title,
            reason: link.reason,
            created_at_ms: link.created_at_ms,
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct SessionInfo {
    pub id: Uuid,
    pub title: String,
    pub description: String,
    /// Who named it: none, agent, user or fallback.
    pub title_source: String,
    /// The session's own model, when it has one.
    pub model: Option<String>,
    /// How hard the session's model reasons, when a person set it: `low`, `medium` or `high`
    /// (else as the provider is configured).
    pub reasoning_level: Option<String>,
    /// Set for a delegated child.
    pub parent_session_id: Option<Uuid>,
    pub created_at_ms: i64,
    pub updated_at_ms: i64,
    /// The predecessor this session continues, if any.
    pub continued_from: Option<ContinuationLink>,
    /// The newest successor this session continued into, if any.
    pub continued_to: Option<ContinuationLink>,
    /// The session this one is a fork of, if a person branched it from there (its `reason`
    /// names the seq).
    pub forked_from: Option<ContinuationLink>,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct GetSessionResponse {
    pub session: SessionInfo,
    /// The model the session's turns ask: its own, else the service's default.
    pub model: String,
    /// The model's context window in tokens, for the context meter; null when unknown.
    pub context_window: Option<u64>,
    /// The highest seq in the session's log (0 for an empty log).
    pub last_seq: i64,
}

/// The edge that made a successor, with the manifest of what its projection was built from.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct ContinuationInfo {
    pub continuation_id: Uuid,
    pub predecessor_session_id: Uuid,
    pub successor_session_id: Uuid,
    /// The first session of the chain.
    pub origin_session_id: Uuid,
    /// The predecessor's continue_session call.
    pub tool_call_id: String,
    /// The predecessor's message the successor answers.
    pub initiating_event_id: i64,
    pub reason: String,
    pub created_at_ms: i64,
    /// The manifest: title, description, handoff sections, sources, the ranges loaded as
    /// excerpts and recent exchanges, and what was left out (ranges to read on demand).
    #[schema(value_type = Object)]
    pub manifest: serde_json::Value,
    /// What was read back of what this edge's projection left out: ranges of the predecessor
    /// a `read thread:` call of this session (or of a later session of its lineage) recalled,
    /// per range and reader, by seq.
    pub recalls: Vec<ContinuationRecall>,
    /// The edges out of this session that have recalls, oldest first, each with them (what
    /// its successors read back of this session's log that their projections left out).
    pub continued_to: Vec<EdgeRecalls>,
}

/// One range of a predecessor that reads recalled after its projection left it out.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ContinuationRecall {
    pub from_seq: i64,
    pub to_seq: i64,
    /// How many distinct read calls recalled it (a replayed call counts once).
    pub times: u64,
    /// The session whose reads recalled it.
    pub reader_session_id: Uuid,
    pub last_recalled_at_ms: i64,
}

/// An edge out of a session with the recalls counted against it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct EdgeRecalls {
    pub continuation_id: Uuid,
    pub successor_session_id: Uuid,
    pub recalls: Vec<ContinuationRecall>,
}

impl From<&seed_store::RecallSummary> for ContinuationRecall {
    fn from(summary: &seed_store::RecallSummary) -> ContinuationRecall {
        ContinuationRecall {
            from_seq: summary.from_seq,
            to_seq: summary.to_seq,
            times: summary.times,
            reader_session_id: summary.reader_session_id.0,
            last_recalled_at_ms: summary.last_recalled_at_ms,
        }
    }
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct ListSessionsResponse {
    pub sessions: Vec<SessionInfo>,
    /// Pass as `cursor` for the next page; null on the last page.
    pub next_cursor: Option<String>,
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateSessionRequest {
    #[schema(max_length = 200)]
    pub title: Option<String>,
    #[schema(min_length = 1, max_length = 200)]
    pub model: Option<String>,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct StopResponse {
    /// Whether a turn was in flight and was cut off.
    pub stopped: bool,
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SetModelRequest {
    /// The model for this session; null for the service's default; left out: as it was.
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<String>, min_length = 1, max_length = 200)]
    pub model: Option<Option<String>>,
    /// How hard the model reasons: `low`, `medium` or `high` (OpenAI's reasoning effort,
    /// Anthropic's thinking budget); null for the provider's configuration; left out: as it
    /// was.
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<ReasoningLevelName>)]
    pub reasoning_level: Option<Option<ReasoningLevelName>>,
}

/// A reasoning level, as the API names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum ReasoningLevelName {
    Low,
    Medium,
    High,
}

impl From<ReasoningLevelName> for seed_providers::ReasoningLevel {
    fn from(level: ReasoningLevelName) -> seed_providers::ReasoningLevel {
        match level {
            ReasoningLevelName::Low => seed_providers::ReasoningLevel::Low,
            ReasoningLevelName::Medium => seed_providers::ReasoningLevel::Medium,
            ReasoningLevelName::High => seed_providers::ReasoningLevel::High,
        }
    }
}

/// A field given, null or not: `Some(None)` for null (left out is the field's default, `None`).
fn present<'de, D, T>(deserializer: D) -> Result<Option<Option<T>>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    Option::<T>::deserialize(deserializer).map(Some)
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ListSessionsQuery {
    /// Sessions per page (1 to 500, default 50).
    #[param(minimum = 1, maximum = 500)]
    pub limit: Option<u64>,
    /// From the previous page's `next_cursor`.
    #[param(
        pattern = r"^[0-9]{1,18}_[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$"
    )]
    pub cursor: Option<String>,
}

/// Creates a session.
#[utoipa::path(
    request_body(content = CreateSessionRequest, content_type = "application/json"),
    responses(
        (status = 201, body = SessionInfo),
        (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody),
        (status = 413, description = "The body is too large", body = ErrorBody),
        (status = 429, description = "The account has as many sessions as it may \
                                      (account_sessions_max)", body = ErrorBody),
    ),
    tag = "sessions"
)]
#[post("/v1/sessions")]
pub(super) async fn create_session(
    state: web::Data<AppState>,
    request: HttpRequest,
    body: Body,
) -> Result<HttpResponse, ApiError> {
    let caller = state.caller(&request, &body).await?;
    let input: CreateSessionRequest = parse_json(&body)?;
    let title = input.title.unwrap_or_default();
    input::check_chars("title", &title, 0, limits::SESSION_TITLE_CHARS_MAX)?;
    if let Some(model) = &input.model {
        input::check_chars("model", model, 1, limits::MODEL_CHARS_MAX)?;
    }
    let now_ms = state.now_ms();
    let session_id = SessionId::new_v7();
    let mut session = NewSession::new(session_id, caller.account_id, now_ms);
    if !title.is_empty() {
        session.title = title;
        session.title_source = TitleSource::User;
    }
    session.model_override = input.model;
    let created = fresh(
        state
            .store
            .create_session_signed(caller.nonce.clone(), session)
            .await?,
    )?;
    if !created {
        return Err(ApiError::TooMany(format!(
            "the account has {} sessions, the most it may have (account_sessions_max); \
             delete some to create another",
            state.store.config().quotas.sessions_max
        )));
    }
    state.publish(Notification::AccountChanged {
        account_id: caller.account_id,
        reasons: vec!["session-created"],
    });
    let session = state.own_session(&caller, session_id).await?;
    Ok(HttpResponse::Created().json(state.session_info(session).await?))
}

/// Lists the account's sessions, most recently updated first.
#[utoipa::path(
    params(ListSessionsQuery),
    responses(
        (status = 200, body = ListSessionsResponse),
        (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody),
        (status = 413, description = "The body is too large", body = ErrorBody),
    ),
    tag = "sessions"
)]
#[get("/v1/sessions")]
pub(super) async fn list_sessions(
    state: web::Data<AppState>,
    request: HttpRequest,
    query: crate::error::Query<ListSessionsQuery>,
    body: Body,
) -> Result<HttpResponse, ApiError> {
    let caller = state.caller(&request, &body).await?;
    let limit = input::page_limit(query.limit, limits::PAGE_SESSIONS_DEFAULT)?;
    let cursor = query.cursor.as_deref().map(Cursor::decode).transpose()?;
    let page = state
        .store
        .list_sessions_page(caller.account_id, cursor.map(Into::into), limit)
        .await?;
    let mut infos = Vec::with_capacity(page.sessions.len());
    for session in page.sessions {
        infos.push(state.session_info(session).await?);
    }
    state.take_nonce(&caller).await?;
    Ok(HttpResponse::Ok().json(ListSessionsResponse {
        sessions: infos,
        next_cursor: page.next.map(|after| Cursor::from(after).encode()),
    }))
}

/// One session, with its model's context window.
#[utoipa::path(
    params(("session_id" = Uuid, Path, description = "The session")),
    responses(
        (status = 200, body = GetSessionResponse),
        (status = 401, body = ErrorBody),
        (status = 413, description = "The body is too large", body = ErrorBody),
        (status = 404, body = ErrorBody),
    ),
    tag = "sessions"
)]
#[get("/v1/sessions/{session_id}")]
pub(super) async fn get_session(
    state: web::Data<AppState>,
    request: HttpRequest,
    path: web::Path<Uuid>,
    body: Body,
) -> Result<HttpResponse, ApiError> {
    let caller = state.caller(&request, &body).await?;
    let session = state.own_session(&caller, session_path(&path)).await?;
    let last_seq = state.store.last_seq(session.id).await?;
    let model = state.settings.session_model(&session);
    let context_window = state.settings.context_window(&model);
    state.take_nonce(&caller).await?;
    Ok(HttpResponse::Ok().json(GetSessionResponse {
        session: state.session_info(session).await?,
        model,
        context_window,
        last_seq,
    }))
}

/// The continuation that made this session, with its manifest and the recalls of what its
/// projection left out, and the edges this session was continued into with theirs (404 when
/// it continues none: an origin's recalls are on its successors' continuations).
#[utoipa::path(
    params(("session_id" = Uuid, Path, description = "The successor session")),
    responses(
        (status = 200, body = ContinuationInfo),
        (status = 401, body = ErrorBody),
        (status = 413, description = "The body is too large", body = ErrorBody),
        (status = 404, body = ErrorBody),
    ),
    tag = "sessions"
)]
#[get("/v1/sessions/{session_id}/continuation")]
pub(super) async fn get_continuation(
    state: web::Data<AppState>,
    request: HttpRequest,
    path: web::Path<Uuid>,
    body: Body,
) -> Result<HttpResponse, ApiError> {
    let caller = state.caller(&request, &body).await?;
    let session = state.own_session(&caller, session_path(&path)).await?;
    let edge = state
        .store
        .edge_to(session.id)
        .await?
        .ok_or(ApiError::NotFound("continuation"))?;
    let manifest = seed_events::SessionContinuationManifest::from_cbor(&edge.manifest_cbor)
        .map_err(|error| ApiError::Internal(error.into()))?;
    let summaries = state.store.recalls_of_edges(session.id).await?;
    let recalls = summaries
        .iter()
        .filter(|summary| summary.continuation_id == edge.id)
        .map(ContinuationRecall::from)
        .collect();
    let mut continued_to: Vec<EdgeRecalls> = Vec::new();
    for summary in summaries
        .iter()
        .filter(|summary| summary.predecessor_session_id == session.id)
    {
        match continued_to.last_mut() {
            Some(out) if out.continuation_id == summary.continuation_id.0 => {
                out.recalls.push(summary.into());
            }
            _ => continued_to.push(EdgeRecalls {
                continuation_id: summary.continuation_id.0,
                successor_session_id: summary.successor_session_id.0,
                recalls: vec![summary.into()],
            }),
        }
    }
    state.take_nonce(&caller).await?;
    Ok(HttpResponse::Ok().json(ContinuationInfo {
        continuation_id: edge.id.0,
        predecessor_session_id: edge.predecessor_session_id.0,
        successor_session_id: edge.successor_session_id.0,
        origin_session_id: edge.origin_session_id.0,
        tool_call_id: edge.tool_call_id,
        initiating_event_id: edge.initiating_event_id.0,
        reason: edge.reason,
        created_at_ms: edge.created_at_ms,
        manifest: serde_json::to_value(&manifest)
            .map_err(|error| ApiError::Internal(error.into()))?,
        recalls,
        continued_to,
    }))
}

/// Deletes a session and everything it owns; a turn in flight is cut off.
#[utoipa::path(
    params(("session_id" = Uuid, Path, description = "The session")),
    responses(
        (status = 204, description = "Deleted"),
        (status = 401, body = ErrorBody),
        (status = 413, description = "The body is too large", body = ErrorBody),
        (status = 404, body = ErrorBody),
    ),
    tag = "sessions"
)]
#[delete("/v1/sessions/{session_id}")]
pub(super) async fn delete_session(
    state: web::Data<AppState>,
    request: HttpRequest,
    path: web::Path<Uuid>,
    body: Body,
) -> Result<HttpResponse, ApiError> {
    let caller = state.caller(&request, &body).await?;
    let session_id = session_path(&path);
    let deleted = fresh(
        state
            .store
            .delete_session_signed(
                caller.nonce.clone(),
                caller.account_id,
                session_id,
                state.now_ms(),
            )
            .await?,
    )?;
    if !deleted {
        return Err(ApiError::NotFound("session"));
    }
    state
        .runtime
        .session_deleted(session_id, caller.account_id)
        .await;
    Ok(HttpResponse::NoContent().finish())
}

/// Cuts off the session's turn in flight; the text already streamed stays in the log.
#[utoipa::path(
    params(("session_id" = Uuid, Path, description = "The session")),
    responses(
        (status = 200, body = StopResponse),
        (status = 401, body = ErrorBody),
        (status = 413, description = "The body is too large", body = ErrorBody),
        (status = 404, body = ErrorBody),
    ),
    tag = "sessions"
)]
#[post("/v1/sessions/{session_id}/stop")]
pub(super) async fn stop_session(
    state: web::Data<AppState>,
    request: HttpRequest,
    path: web::Path<Uuid>,
    body: Body,
) -> Result<HttpResponse, ApiError> {
    let caller = state.caller(&request, &body).await?;
    let session = state.own_session(&caller, session_path(&path)).await?;
    state.take_nonce(&caller).await?;
    let stopped = state.runtime.stop_session(session.id).await;
    Ok(HttpResponse::Ok().json(StopResponse { stopped }))
}

/// Sets the session's model (null: the service's default) and, when given, its reasoning level.
#[utoipa::path(
    params(("session_id" = Uuid, Path, description = "The session")),
    request_body(content = SetModelRequest, content_type = "application/json"),
    responses(
        (status = 200, body = SessionInfo),
        (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody),
        (status = 413, description = "The body is too large", body = ErrorBody),
        (status = 404, body = ErrorBody),
    ),
    tag = "sessions"
)]
#[put("/v1/sessions/{session_id}/model")]
pub(super) async fn set_model(
    state: web::Data<AppState>,
    request: HttpRequest,
    path: web::Path<Uuid>,
    body: Body,
) -> Result<HttpResponse, ApiError> {
    let caller = state.caller(&request, &body).await?;
    let input: SetModelRequest = parse_json(&body)?;
    if let Some(Some(model)) = &input.model {
        input::check_chars("model", model, 1, limits::MODEL_CHARS_MAX)?;
    }
    let session_id = session_path(&path);
    let updated = fresh(
        state
            .store
            .set_session_model_signed(
                caller.nonce.clone(),
                caller.account_id,
                session_id,
                seed_store::ModelChange {
                    model: input.model,
                    reasoning_level: input.reasoning_level.map(|level| {
                        level.map(|level| seed_providers::ReasoningLevel::from(level).to_string())
                    }),
                },
                state.now_ms(),
            )
            .await?,
    )?;
    if !updated {
        return Err(ApiError::NotFound("session"));
    }
    state.publish(Notification::SessionChanged {
        session_id,
        reason: "model",
        seqs: None,
    });
    let session = state.own_session(&caller, session_id).await?;
    Ok(HttpResponse::Ok().json(state.session_info(session).await?))
}
