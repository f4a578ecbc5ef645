//! Schedules: the wake-ups a session's agent set for itself (the `schedule` verb), listed and
//! cancelled by the person whose session it is.

use actix_web::{HttpRequest, HttpResponse, delete, get, web};
use seed_actors::bus::Notification;
use seed_events::ScheduleId;
use seed_store::ScheduleRow;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

use super::{AppState, Body, fresh, session_path};
use crate::error::{ApiError, ErrorBody};

/// One wake-up still to fire.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct ScheduleInfo {
    pub id: Uuid,
    pub session_id: Uuid,
    /// `delay`, `at`, `cron` or `interval`.
    pub kind: String,
    /// The kind's spec as stored: milliseconds for `delay` and `interval`, unix milliseconds
    /// for `at`, the five-field expression (UTC) for `cron`.
    pub spec: String,
    /// When, as a person reads it: `every 60 s`, `cron "0 9 * * MON" (UTC)`.
    pub when: String,
    /// What the agent wrote to itself for when it fires.
    pub note: String,
    pub next_due_at_ms: Option<i64>,
    /// How many times it fired.
    pub fired: u64,
    pub last_fired_at_ms: Option<i64>,
    pub created_at_ms: i64,
}

impl From<ScheduleRow> for ScheduleInfo {
    fn from(row: ScheduleRow) -> ScheduleInfo {
        ScheduleInfo {
            id: row.id.0,
            session_id: row.session_id.0,
            kind: row.kind.as_str().to_owned(),
            when: row.describe(),
            spec: row.spec,
            note: row.note,
            next_due_at_ms: row.next_due_at_ms,
            fired: row.fired,
            last_fired_at_ms: row.last_fired_at_ms,
            created_at_ms: row.created_at_ms,
        }
    }
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct SchedulesResponse {
    /// The wake-ups still to fire, soonest first.
    pub schedules: Vec<ScheduleInfo>,
}

/// The session's wake-ups still to fire, soonest first.
#[utoipa::path(
    params(("session_id" = Uuid, Path, description = "The session")),
    responses(
        (status = 200, body = SchedulesResponse),
        (status = 401, body = ErrorBody),
        (status = 413, description = "The body is too large", body = ErrorBody),
        (status = 404, body = ErrorBody),
    ),
    tag = "sessions"
)]
#[get("/v1/sessions/{session_id}/schedules")]
pub(super) async fn list_schedules(
    state: web::Data<AppState>,
    request: HttpRequest,
    path: web::Path<Uuid>,
    body: Body,
) -> Result<HttpResponse, ApiError> {
    let caller = state.caller(&request, &body).await?;
    let session = state.own_session(&caller, session_path(&path)).await?;
    let schedules = state.store.list_schedules(session.id).await?;
    state.take_nonce(&caller).await?;
    Ok(HttpResponse::Ok().json(SchedulesResponse {
        schedules: schedules.into_iter().map(ScheduleInfo::from).collect(),
    }))
}

/// Cancels one of the session's wake-ups: it never fires again. 404 when the session has no
/// such wake-up still to fire.
#[utoipa::path(
    params(
        ("session_id" = Uuid, Path, description = "The session"),
        ("schedule_id" = Uuid, Path, description = "The wake-up"),
    ),
    responses(
        (status = 204, description = "Cancelled"),
        (status = 401, body = ErrorBody),
        (status = 413, description = "The body is too large", body = ErrorBody),
        (status = 404, body = ErrorBody),
    ),
    tag = "sessions"
)]
#[delete("/v1/sessions/{session_id}/schedules/{schedule_id}")]
pub(super) async fn cancel_schedule(
    state: web::Data<AppState>,
    request: HttpRequest,
    path: web::Path<(Uuid, Uuid)>,
    body: Body,
) -> Result<HttpResponse, ApiError> {
    let caller = state.caller(&request, &body).await?;
    let (session_id, schedule_id) = path.into_inner();
    let session_id = session_path(&session_id);
    let cancelled = fresh(
        state
            .store
            .cancel_schedule_signed(
                caller.nonce.clone(),
                caller.account_id,
                session_id,
                ScheduleId(schedule_id),
                state.now_ms(),
            )
            .await?,
    )?;
    if !cancelled {
        // Another account's session, or no such wake-up: the same answer.
        return Err(ApiError::NotFound("schedule"));
    }
    state.publish(Notification::SessionChanged {
        session_id,
        reason: "schedule-cancelled",
        seqs: None,
    });
    Ok(HttpResponse::NoContent().finish())
}
