//! Messages and runs: a person's message queues a run (optionally waited for); a run is read
//! by id.

use std::time::Instant;

use actix_web::{HttpRequest, HttpResponse, get, post, web};
use seed_actors::RunWatch;
use seed_actors::bus::{Notification, SeqRange};
use seed_events::{AttachmentRef, EventRole, MessageBody, NewEvent, Queue, RunId, SessionEvent};
use seed_store::{NonceOutcome, RetryOutcome, RunRow, SendOutcome, SignedMessage, SignedRetry};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};
use uuid::Uuid;

use super::{AppState, Body, fresh, session_path};
use crate::error::{ApiError, ErrorBody};
use crate::input::{self, parse_json};
use crate::limits;

#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SendMessageRequest {
    #[schema(min_length = 1, max_length = 65536)]
    pub text: String,
    /// Block until the run ends (at most the server's wait limit).
    #[serde(default)]
    pub wait: bool,
    /// Attachments of this session (ids from `POST …/attachments`) the message carries, in
    /// order; the model sees them after the text.
    // `max_items` is `ATTACHMENTS_PER_MESSAGE_MAX`, which the attribute cannot name; a test
    // checks it.
    #[serde(default)]
    #[schema(max_items = 16)]
    pub attachments: Vec<String>,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct MessageSessionResponse {
    pub run_id: Uuid,
    pub event_id: i64,
    pub seq: i64,
    /// The run's status when the response was made.
    pub status: String,
    /// The run's result once it ended.
    #[schema(value_type = Option<Object>)]
    pub result: Option<serde_json::Value>,
    /// When the answer went to a successor session, its id.
    pub continued_to_session_id: Option<Uuid>,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct RunInfo {
    pub id: Uuid,
    pub session_id: Uuid,
    pub queue: String,
    pub status: String,
    pub attempts: i64,
    pub pass: i64,
    /// The messages (their event ids) the run answers.
    pub user_event_ids: Vec<i64>,
    #[schema(value_type = Option<Object>)]
    pub result: Option<serde_json::Value>,
    pub created_at_ms: i64,
    pub updated_at_ms: i64,
}

impl From<RunRow> for RunInfo {
    fn from(run: RunRow) -> RunInfo {
        RunInfo {
            id: run.id.0,
            session_id: run.session_id.0,
            queue: run.queue.to_string(),
            status: run.status.to_string(),
            attempts: run.attempts,
            pass: run.pass,
            user_event_ids: run.user_event_ids.iter().map(|id| id.0).collect(),
            result: run.result,
            created_at_ms: run.created_at_ms,
            updated_at_ms: run.updated_at_ms,
        }
    }
}

/// Sends a person's message; a run is queued to answer it.
#[utoipa::path(
    params(("session_id" = Uuid, Path, description = "The session")),
    request_body(content = SendMessageRequest, content_type = "application/json"),
    responses(
        (status = 200, body = MessageSessionResponse),
        (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody),
        (status = 404, body = ErrorBody),
        (status = 413, description = "The body is too large", body = ErrorBody),
        (status = 429, body = ErrorBody),
    ),
    tag = "messages"
)]
#[post("/v1/sessions/{session_id}/messages")]
pub(super) async fn send_message(
    state: web::Data<AppState>,
    request: HttpRequest,
    path: web::Path<Uuid>,
    body: Body,
) -> Result<HttpResponse, ApiError> {
    let caller = state.caller(&request, &body).await?;
    let input: SendMessageRequest = parse_json(&body)?;
    input::check_chars("text", &input.text, 1, limits::MESSAGE_CHARS_MAX)?;
    let session_id = session_path(&path);
    let now_ms = state.now_ms();
    let attachments = if input.attachments.is_empty() {
        None
    } else {
        let named = named_attachments(&state, &caller, session_id, &input.attachments).await?;
        Some(serde_json::to_value(named).map_err(|error| ApiError::Internal(error.into()))?)
    };
    let message = persons_message(input.text, attachments);
    let event = NewEvent::new(message, EventRole::User, "user", now_ms);
    // A waiting caller's watch is registered before the run is queued, so its end is had
    // without reading the run; dropped on a refusal, it leaves nothing behind.
    let run_id = RunId::new_v7();
    let watch = input.wait.then(|| state.runtime.watch_run(run_id));
    let started = Instant::now();
    let store = state.store.clone();
    let nonce = caller.nonce.clone();
    let account_id = caller.account_id;
    let queued_runs_max = state.limits.queued_runs_per_account_max;
    // With a slot free, the run is claimed in the message's own transaction and starts at once.
    let outcome = state
        .runtime
        .queue_run_with(move |claim_for| async move {
            let outcome = store
                .send_user_message_signed(SignedMessage {
                    nonce,
                    account_id,
                    session_id,
                    event,
                    run_id,
                    queue: Queue::Interactive,
                    queued_runs_max,
                    now_ms,
                    claim_for,
                })
                .await?;
            let run = match &outcome {
                NonceOutcome::Fresh(SendOutcome::Sent { run, .. }) => Some(run.as_ref().clone()),
                _ => None,
            };
            Ok((outcome, run))
        })
        .await?;
    metrics::histogram!("seed_message_commit_seconds").record(started.elapsed().as_secs_f64());
    let (event, run) = match fresh(outcome)? {
        SendOutcome::Sent { event, run } => (*event, *run),
        SendOutcome::NotFound => return Err(ApiError::NotFound("session")),
        SendOutcome::TooManyQueued => {
            return Err(ApiError::TooManyQueued(
                state.limits.queued_runs_per_account_max,
            ));
        }
    };
    state.publish(Notification::SessionChanged {
        session_id,
        reason: "message",
        seqs: Some(SeqRange {
            from: event.seq,
            to: event.seq,
        }),
    });
    let run = match watch {
        Some(watch) => wait_for_run(&state, run, Some(watch)).await?,
        None => run,
    };
    Ok(HttpResponse::Ok().json(message_response(event, run)))
}

#[derive(Debug, Default, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RetryMessageRequest {
    /// Block until the run ends (at most the server's wait limit).
    #[serde(default)]
    pub wait: bool,
}

/// Retries a person's message whose run failed, was canceled or was lost (a successor's
/// copied message, for one): a new run answers it. A message another turn already answered
/// gets that answer again, and the model is not asked.
#[utoipa::path(
    params(
        ("session_id" = Uuid, Path, description = "The session"),
        ("event_id" = i64, Path, description = "The message: its event's id"),
    ),
    request_body(content = RetryMessageRequest, content_type = "application/json"),
    responses(
        (status = 200, body = MessageSessionResponse),
        (status = 400, description = "The event is no message a person wrote", body = ErrorBody),
        (status = 401, body = ErrorBody),
        (status = 404, description = "No such session or message", body = ErrorBody),
        (status = 409, description = "A run for the message is still open", body = ErrorBody),
        (status = 413, description = "The body is too large", body = ErrorBody),
        (status = 429, body = ErrorBody),
    ),
    tag = "messages"
)]
#[post("/v1/sessions/{session_id}/messages/{event_id}/retry")]
pub(super) async fn retry_message(
    state: web::Data<AppState>,
    request: HttpRequest,
    path: web::Path<(Uuid, i64)>,
    body: Body,
) -> Result<HttpResponse, ApiError> {
    let caller = state.caller(&request, &body).await?;
    let input: RetryMessageRequest = parse_json(&body)?;
    let (session_id, event_id) = path.into_inner();
    let session_id = seed_events::SessionId(session_id);
    let event_id = seed_events::EventId(event_id);
    let run_id = RunId::new_v7();
    let watch = input.wait.then(|| state.runtime.watch_run(run_id));
    let store = state.store.clone();
    let nonce = caller.nonce.clone();
    let account_id = caller.account_id;
    let queued_runs_max = state.limits.queued_runs_per_account_max;
    let now_ms = state.now_ms();
    let outcome = state
        .runtime
        .queue_run_with(move |claim_for| async move {
            let outcome = store
                .retry_message_signed(SignedRetry {
                    nonce,
                    account_id,
                    session_id,
                    event_id,
                    run_id,
                    queued_runs_max,
                    now_ms,
                    claim_for,
                })
                .await?;
            let run = match &outcome {
                NonceOutcome::Fresh(RetryOutcome::Queued { run, .. }) => Some(run.as_ref().clone()),
                _ => None,
            };
            Ok((outcome, run))
        })
        .await?;
    let (event, run) = match fresh(outcome)? {
        RetryOutcome::Queued { event, run } => (*event, *run),
        RetryOutcome::SessionNotFound => return Err(ApiError::NotFound("session")),
        RetryOutcome::MessageNotFound => return Err(ApiError::NotFound("message")),
        RetryOutcome::NotAPersonsMessage => {
            return Err(ApiError::bad(
                "event_id",
                "only a message a person (or a trigger) wrote can be retried",
            ));
        }
        RetryOutcome::StillOpen { run_id } => {
            return Err(ApiError::Conflict(format!(
                "run {run_id} for this message is still open: stop it, or wait for it to end"
            )));
        }
        RetryOutcome::TooManyQueued => {
            return Err(ApiError::TooManyQueued(queued_runs_max));
        }
    };
    let run = match watch {
        Some(watch) => wait_for_run(&state, run, Some(watch)).await?,
        None => run,
    };
    Ok(HttpResponse::Ok().json(message_response(event, run)))
}

/// The attachments a message names, as its content records them (id, name, type, size): each
/// must be one of the session's, named once; the session must be the caller's (404 first).
/// Attachments go only with their session, whose delete the message's own transaction would
/// find, so what is read here still holds when the message is written.
async fn named_attachments(
    state: &AppState,
    caller: &crate::auth::Caller,
    session_id: seed_events::SessionId,
    ids: &[String],
) -> Result<Vec<AttachmentRef>, ApiError> {
    let max = seed_projections::attachments::ATTACHMENTS_PER_MESSAGE_MAX;
    if ids.len() > max {
        return Err(ApiError::bad(
            "attachments",
            format!("a message carries at most {max} attachments"),
        ));
    }
    state.own_session(caller, session_id).await?;
    let held = state.store.list_attachments(session_id).await?;
    let mut named = Vec::with_capacity(ids.len());
    for (idx, id) in ids.iter().enumerate() {
        let field = format!("attachments[{idx}]");
        if ids[..idx].contains(id) {
            return Err(ApiError::bad(&field, format!("{id:?} is named twice")));
        }
        let row = held.iter().find(|row| row.id == *id).ok_or_else(|| {
            ApiError::bad(&field, format!("{id:?} is no attachment of this session"))
        })?;
        named.push(AttachmentRef {
            id: row.id.clone(),
            name: Some(row.name.clone()),
            media_type: Some(row.media_type.clone()),
            size_bytes: u64::try_from(row.size_bytes).ok(),
        });
    }
    Ok(named)
}

/// Waits for the run to end, at most the wait limit, and no longer than the service runs.
/// `watch`, when given, was registered for the run before it was queued.
pub(super) async fn wait_for_run(
    state: &AppState,
    run: RunRow,
    watch: Option<RunWatch>,
) -> Result<RunRow, ApiError> {
    let mut draining = state.draining.clone();
    let runtime = &state.runtime;
    let wait = async move {
        match watch {
            Some(watch) => watch.ended().await,
            None => runtime.wait_for_run(run.id).await,
        }
    };
    let drained = async move {
        let _ = draining.wait_for(|draining| *draining).await;
    };
    tokio::select! {
        ended = tokio::time::timeout(state.limits.wait_max, wait) => match ended {
            Ok(ended) => Ok(ended?),
            Err(_) => Ok(state.store.get_run(run.id).await?.unwrap_or(run)),
        },
        () = drained => Ok(state.store.get_run(run.id).await?.unwrap_or(run)),
    }
}

/// A person's message: its text, and the files it names when it names any.
fn persons_message(text: String, attachments: Option<serde_json::Value>) -> MessageBody {
    MessageBody {
        attachments,
        ..MessageBody::text(text)
    }
}

fn message_response(event: SessionEvent, run: RunRow) -> MessageSessionResponse {
    // A run that ended by continuing names its successor in its result.
    let continued_to_session_id = run.continued_to_session_id().map(|id| id.0);
    MessageSessionResponse {
        run_id: run.id.0,
        event_id: event.id.0,
        seq: event.seq,
        status: run.status.to_string(),
        result: run.result,
        continued_to_session_id,
    }
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct SessionRunsQuery {
    /// How many of the newest runs (default 50, at most 500).
    #[param(minimum = 1, maximum = 500)]
    pub limit: Option<usize>,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct SessionRunsResponse {
    /// The session's newest runs, oldest first.
    pub runs: Vec<RunInfo>,
}

/// A session's newest runs, oldest first: how each of its messages was answered (a failed
/// run's message is one to retry).
#[utoipa::path(
    params(("session_id" = Uuid, Path, description = "The session"), SessionRunsQuery),
    responses(
        (status = 200, body = SessionRunsResponse),
        (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody),
        (status = 404, body = ErrorBody),
        (status = 413, description = "The body is too large", body = ErrorBody),
    ),
    tag = "runs"
)]
#[get("/v1/sessions/{session_id}/runs")]
pub(super) async fn list_session_runs(
    state: web::Data<AppState>,
    request: HttpRequest,
    path: web::Path<Uuid>,
    query: crate::error::Query<SessionRunsQuery>,
    body: Body,
) -> Result<HttpResponse, ApiError> {
    let caller = state.caller(&request, &body).await?;
    let limit = query.limit.unwrap_or(limits::SESSION_RUNS_DEFAULT);
    if !(1..=limits::SESSION_RUNS_MAX).contains(&limit) {
        return Err(ApiError::bad(
            "limit",
            format!("between 1 and {}", limits::SESSION_RUNS_MAX),
        ));
    }
    let session_id = session_path(&path);
    state.own_session(&caller, session_id).await?;
    state.take_nonce(&caller).await?;
    let runs = state.store.recent_session_runs(session_id, limit).await?;
    Ok(HttpResponse::Ok().json(SessionRunsResponse {
        runs: runs.into_iter().map(RunInfo::from).collect(),
    }))
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct RunQuery {
    /// Block until the run ends (at most the server's wait limit).
    pub wait: Option<bool>,
}

/// One run.
#[utoipa::path(
    params(("run_id" = Uuid, Path, description = "The run"), RunQuery),
    responses(
        (status = 200, body = RunInfo),
        (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody),
        (status = 413, description = "The body is too large", body = ErrorBody),
        (status = 404, body = ErrorBody),
    ),
    tag = "runs"
)]
#[get("/v1/runs/{run_id}")]
pub(super) async fn get_run(
    state: web::Data<AppState>,
    request: HttpRequest,
    path: web::Path<Uuid>,
    query: crate::error::Query<RunQuery>,
    body: Body,
) -> Result<HttpResponse, ApiError> {
    let caller = state.caller(&request, &body).await?;
    let run = state
        .store
        .get_run(RunId(*path))
        .await?
        .ok_or(ApiError::NotFound("run"))?;
    if state.store.session_owner(run.session_id).await? != Some(caller.account_id) {
        return Err(ApiError::NotFound("run"));
    }
    state.take_nonce(&caller).await?;
    let run = if query.wait == Some(true) {
        wait_for_run(&state, run, None).await?
    } else {
        run
    };
    Ok(HttpResponse::Ok().json(RunInfo::from(run)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The event a person's message is stored as: its text, and the files it names when it
    /// names any, by the user, with empty meta.
    #[test]
    fn a_persons_message_is_stored_as_its_text_and_the_files_it_names() {
        let stored = |attachments| {
            NewEvent::new(
                persons_message("hi".to_owned(), attachments),
                EventRole::User,
                "user",
                5,
            )
        };
        assert_eq!(
            stored(None),
            NewEvent::message(EventRole::User, "user", json!({"text": "hi"}), 5)
        );
        let named =
            json!([{"id": "a1", "name": "n.txt", "media_type": "text/plain", "size_bytes": 2}]);
        assert_eq!(
            stored(Some(named.clone())),
            NewEvent::message(
                EventRole::User,
                "user",
                json!({"text": "hi", "attachments": named}),
                5
            )
        );
    }
}
