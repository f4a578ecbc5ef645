//! A session's log: its events by seq range, the same range as the transcript lines the model
//! reads (`read thread:`), and the response in flight.

use actix_web::{HttpRequest, HttpResponse, get, web};
use seed_durable::record::LiveState;
use seed_events::{EventBody, RunStatus, SessionEvent};
use seed_projections::transcript::transcript_event_line;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};
use uuid::Uuid;

use super::{AppState, Body, session_path};
use crate::error::{ApiError, ErrorBody};
use crate::input;
use crate::limits;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct EventInfo {
    pub id: i64,
    pub seq: i64,
    /// message, tool_call, tool_result, action, notice, ...
    #[serde(rename = "type")]
    pub event_type: String,
    /// The same as `type`. Deprecated: read `type`; kept for one release.
    #[schema(deprecated)]
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

impl EventInfo {
    /// What the event says, typed.
    pub fn body(&self) -> EventBody {
        EventBody::parse(&self.event_type, &self.content)
    }
}

impl From<SessionEvent> for EventInfo {
    fn from(event: SessionEvent) -> EventInfo {
        EventInfo {
            id: event.id.0,
            seq: event.seq,
            event_type: event.kind.clone(),
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
        (status = 413, description = "The body is too large", body = ErrorBody),
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
    let (events, next_seq) = read_range(&state, &request, &path, &query, &body).await?;
    Ok(HttpResponse::Ok().json(EventsResponse {
        events: events.into_iter().map(EventInfo::from).collect(),
        next_seq,
    }))
}

/// The events a range query of the caller's session asks for, read (the nonce taken once the
/// answer is there), and where the next page starts.
async fn read_range(
    state: &AppState,
    request: &HttpRequest,
    path: &Uuid,
    query: &EventsQuery,
    body: &[u8],
) -> Result<(Vec<SessionEvent>, Option<i64>), ApiError> {
    let caller = state.caller(request, body).await?;
    let (from_seq, to_seq) = seq_range(query.from_seq, query.to_seq)?;
    let limit = input::page_limit(query.limit, limits::PAGE_EVENTS_DEFAULT)?;
    let session = state.own_session(&caller, session_path(path)).await?;
    let events = state
        .store
        .read_events(session.id, from_seq, to_seq, limit)
        .await?;
    state.take_nonce(&caller).await?;
    let next_seq = next_seq(&events, limit, to_seq);
    Ok((events, next_seq))
}

/// The first and last seq a range query asks for (`from_seq` defaults to 1, `to_seq` to the
/// log's end), checked.
fn seq_range(from_seq: Option<i64>, to_seq: Option<i64>) -> Result<(i64, i64), ApiError> {
    let from_seq = from_seq.unwrap_or(1);
    if from_seq < 1 {
        return Err(ApiError::bad("from_seq", "must be at least 1"));
    }
    // A range that ends before it starts is empty.
    let to_seq = to_seq.unwrap_or(i64::MAX);
    if to_seq < 1 {
        return Err(ApiError::bad("to_seq", "must be at least 1"));
    }
    Ok((from_seq, to_seq))
}

/// Where the next page of a range starts: after a full page that did not reach `to_seq`.
fn next_seq(events: &[SessionEvent], limit: usize, to_seq: i64) -> Option<i64> {
    (events.len() == limit)
        .then(|| events.last().map(|event| event.seq + 1))
        .flatten()
        .filter(|next| *next <= to_seq)
}

/// One line of a transcript, as the model reads it.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct TranscriptLine {
    pub seq: i64,
    /// `[seq] who: text`, escaped as inside a frame, on one line.
    pub line: String,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct TranscriptResponse {
    /// The range's events that show in a transcript, one line each.
    pub lines: Vec<TranscriptLine>,
    /// Where the next page starts; null when this page reached `to_seq` or the log's end.
    pub next_seq: Option<i64>,
}

/// Reads a range of a session's log as transcript lines, exactly as the model reads them with
/// `read thread:` and in a successor's excerpts (`[seq] assistant: …`).
#[utoipa::path(
    params(("session_id" = Uuid, Path, description = "The session"), EventsQuery),
    responses(
        (status = 200, body = TranscriptResponse),
        (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody),
        (status = 413, description = "The body is too large", body = ErrorBody),
        (status = 404, body = ErrorBody),
    ),
    tag = "sessions"
)]
#[get("/v1/sessions/{session_id}/transcript")]
pub(super) async fn transcript(
    state: web::Data<AppState>,
    request: HttpRequest,
    path: web::Path<Uuid>,
    query: crate::error::Query<EventsQuery>,
    body: Body,
) -> Result<HttpResponse, ApiError> {
    let (events, next_seq) = read_range(&state, &request, &path, &query, &body).await?;
    let lines = events
        .iter()
        .filter_map(|event| {
            Some(TranscriptLine {
                seq: event.seq,
                line: transcript_event_line(event)?,
            })
        })
        .collect();
    Ok(HttpResponse::Ok().json(TranscriptResponse { lines, next_seq }))
}

/// The response in flight: its text so far, as the store holds it.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct LiveInfo {
    pub run_id: Uuid,
    /// The text so far. Text deltas on the WebSocket carry their `offset_chars` into it.
    pub text: String,
    /// The model's reasoning so far, where the wire carries it.
    pub thinking: String,
    /// The tool calls the response has asked for so far, each once its arguments are whole.
    #[schema(value_type = Vec<Object>)]
    pub tool_calls: Vec<serde_json::Value>,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct LiveResponse {
    /// Null when no response of a running turn is in flight.
    pub live: Option<LiveInfo>,
}

/// The response in flight in the session's turn, as committed to the store (at most the live
/// interval behind the model): what a page opened mid-turn shows until the response is in the
/// log.
#[utoipa::path(
    params(("session_id" = Uuid, Path, description = "The session")),
    responses(
        (status = 200, body = LiveResponse),
        (status = 401, body = ErrorBody),
        (status = 413, description = "The body is too large", body = ErrorBody),
        (status = 404, body = ErrorBody),
    ),
    tag = "sessions"
)]
#[get("/v1/sessions/{session_id}/live")]
pub(super) async fn live(
    state: web::Data<AppState>,
    request: HttpRequest,
    path: web::Path<Uuid>,
    body: Body,
) -> Result<HttpResponse, ApiError> {
    let caller = state.caller(&request, &body).await?;
    let session = state.own_session(&caller, session_path(&path)).await?;
    let live = live_info(&state.store, session.id).await?;
    state.take_nonce(&caller).await?;
    Ok(HttpResponse::Ok().json(LiveResponse { live }))
}

/// The response in flight in the session's turn, as the store holds it; `None` when none
/// streams in a run still running (one a crash cut off stays in the store until its run takes
/// the turn up again).
pub(crate) async fn live_info(
    store: &seed_store::Store,
    session_id: seed_events::SessionId,
) -> Result<Option<LiveInfo>, ApiError> {
    let document = store.live_document(session_id).await?;
    let mut in_flight = None;
    if let Some(document) = document.filter(|document| document.state == LiveState::Streaming)
        && let Some(run_id) = seed_actors::turn::run_of_request(&document.request_id)
        && let Some(run) = store.get_run(run_id).await?
        && run.status == RunStatus::Running
        && run.session_id == session_id
    {
        in_flight = Some(LiveInfo {
            run_id: run_id.0,
            text: document.text,
            thinking: document.thinking,
            tool_calls: document
                .tool_calls
                .iter()
                .map(|call| {
                    serde_json::json!({
                        "id": call.id, "name": call.name, "arguments": call.arguments
                    })
                })
                .collect(),
        });
    }
    Ok(in_flight)
}
