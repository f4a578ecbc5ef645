//! A session's log, read by seq range.

use actix_web::{HttpRequest, HttpResponse, get, web};
use seed_events::SessionEvent;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};
use uuid::Uuid;

use super::{AppState, Body, session_path};
use crate::error::{ApiError, ErrorBody};
use crate::input;

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct EventInfo {
    pub id: i64,
    pub seq: i64,
    /// message, tool_call, tool_result, action, notice, ...
    pub kind: String,
    pub role: Option<String>,
    pub actor: Option<String>,
    #[schema(value_type = Object)]
    pub content: serde_json::Value,
    #[schema(value_type = Object)]
    pub meta: serde_json::Value,
    pub run_id: Option<Uuid>,
    pub created_at_ms: i64,
}

impl From<SessionEvent> for EventInfo {
    fn from(event: SessionEvent) -> EventInfo {
        EventInfo {
            id: event.id.0,
            seq: event.seq,
            kind: event.kind,
            role: event.role.map(|role| role.to_string()),
            actor: event.actor,
            content: event.content,
            meta: event.meta,
            run_id: event.run_id.map(|id| id.0),
            created_at_ms: event.created_at_ms,
        }
    }
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct EventsResponse {
    pub events: Vec<EventInfo>,
    /// Where the next page starts; null when this page reached `to_seq` or the log's end.
    pub next_seq: Option<i64>,
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct EventsQuery {
    /// The first seq (default 1).
    #[param(minimum = 1)]
    pub from_seq: Option<i64>,
    /// The last seq, inclusive (default: the end of the log).
    #[param(minimum = 1)]
    pub to_seq: Option<i64>,
    /// Events per page (1 to 500, default 200).
    #[param(minimum = 1, maximum = 500)]
    pub limit: Option<u64>,
}

/// Reads a session's log by seq range.
#[utoipa::path(
    params(("session_id" = Uuid, Path, description = "The session"), EventsQuery),
    responses(
        (status = 200, body = EventsResponse),
        (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody),
        (status = 413, description = "The body is too large"),
        (status = 404, body = ErrorBody),
    ),
    tag = "sessions"
)]
#[get("/v1/sessions/{session_id}/events")]
pub(super) async fn list_events(
    state: web::Data<AppState>,
    request: HttpRequest,
    path: web::Path<Uuid>,
    query: crate::error::Query<EventsQuery>,
    body: Body,
) -> Result<HttpResponse, ApiError> {
    let caller = state.caller(&request, &body).await?;
    let from_seq = query.from_seq.unwrap_or(1);
    if from_seq < 1 {
        return Err(ApiError::bad("from_seq", "must be at least 1"));
    }
    // A range that ends before it starts is empty.
    let to_seq = query.to_seq.unwrap_or(i64::MAX);
    if to_seq < 1 {
        return Err(ApiError::bad("to_seq", "must be at least 1"));
    }
    let limit = input::page_limit(query.limit, 200)?;
    let session = state.own_session(&caller, session_path(&path)).await?;
    let events = state
        .store
        .read_events(session.id, from_seq, to_seq, limit)
        .await?;
    state.take_nonce(&caller).await?;
    let next_seq = (events.len() == limit)
        .then(|| events.last().map(|event| event.seq + 1))
        .flatten()
        .filter(|next| *next <= to_seq);
    Ok(HttpResponse::Ok().json(EventsResponse {
        events: events.into_iter().map(EventInfo::from).collect(),
        next_seq,
    }))
}
