//! The REST API under `/v1`: JSON in and out, every request signed (or carrying a bearer
//! token), every route described in the OpenAPI document at `/v1/openapi.json`. Handlers are
//! thin: authenticate, parse and check the input (`input`), call the store or the runtime,
//! shape the answer.

use std::sync::Arc;
use std::time::{Duration, Instant};

use actix_web::{HttpRequest, HttpResponse, delete, get, post, put, web};
use seed_actors::bus::{Notification, SeqRange};
use seed_actors::{RunWatch, Runtime};
use seed_events::{AccountId, EventRole, NewEvent, Queue, RunId, SessionEvent, SessionId};
use seed_store::{NewSession, NonceOutcome, RunRow, SendOutcome, SessionRow, Store, TitleSource};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, OpenApi, ToSchema};
use uuid::Uuid;

use crate::auth::{self, Caller, Tokens};
use crate::error::{ApiError, ErrorBody};
use crate::input::{self, Cursor, parse_json};

/// The service's limits.
#[derive(Debug, Clone)]
pub struct Limits {
    /// Runs an account may have waiting their turn before a message is refused (429).
    pub queued_runs_per_account_max: i64,
    /// The longest a `wait` message request blocks.
    pub wait_max: Duration,
    /// The largest request body (413 above).
    pub body_bytes_max: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            queued_runs_per_account_max: 256,
            wait_max: Duration::from_secs(120),
            body_bytes_max: 1024 * 1024,
        }
    }
}

/// What every handler shares.
pub struct AppState {
    pub runtime: Runtime,
    pub store: Store,
    pub tokens: Tokens,
    /// Accounts' public keys, read once.
    pub keys: auth::KeyCache,
    pub limits: Limits,
    /// The runtime's settings: the provider, the model sessions use unless they name one, and
    /// the context windows.
    pub settings: seed_actors::RuntimeSettings,
    pub clock: Arc<dyn Fn() -> i64 + Send + Sync>,
    pub metrics: Option<metrics_exporter_prometheus::PrometheusHandle>,
    /// Turns true when the service starts draining: waits and streams end.
    pub draining: tokio::sync::watch::Receiver<bool>,
}

impl std::fmt::Debug for AppState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AppState").finish_non_exhaustive()
    }
}

impl AppState {
    pub fn now_ms(&self) -> i64 {
        (self.clock)()
    }

    pub async fn caller(&self, request: &HttpRequest, body: &[u8]) -> Result<Caller, ApiError> {
        auth::authenticate(
            &self.store,
            &self.keys,
            &self.tokens,
            request,
            body,
            self.now_ms(),
        )
        .await
    }

    /// A read-only request takes its nonce once it has its answer: a replay is refused, and a
    /// request refused before (404) wrote nothing.
    pub async fn take_nonce(&self, caller: &Caller) -> Result<(), ApiError> {
        if let Some(nonce) = caller.nonce.clone()
            && !self.store.take_nonce(nonce).await?
        {
            return Err(replayed());
        }
        Ok(())
    }

    /// The caller's session, or 404 (another account's session is not found either).
    async fn own_session(
        &self,
        caller: &Caller,
        session_id: SessionId,
    ) -> Result<SessionRow, ApiError> {
        match self.store.get_session(session_id).await? {
            Some(session) if session.account_id == caller.account_id => Ok(session),
            _ => Err(ApiError::NotFound("session")),
        }
    }

    /// The session as the API shows it, with its continuation links.
    async fn session_info(&self, session: SessionRow) -> Result<SessionInfo, ApiError> {
        let (continued_from, continued_to) = self.store.continuation_links(session.id).await?;
        Ok(SessionInfo {
            id: session.id.0,
            title: session.title,
            description: session.description,
            title_source: session.title_source.to_string(),
            model: session.model_override,
            parent_session_id: session.parent_session_id.map(|id| id.0),
            created_at_ms: session.created_at_ms,
            updated_at_ms: session.updated_at_ms,
            continued_from: continued_from.map(ContinuationLink::from),
            continued_to: continued_to.map(ContinuationLink::from),
        })
    }

    fn publish(&self, notification: Notification) {
        self.runtime.publisher().publish(notification);
    }
}

fn replayed() -> ApiError {
    ApiError::Unauthorized("the nonce was used before: a replayed request".to_owned())
}

fn fresh<T>(outcome: NonceOutcome<T>) -> Result<T, ApiError> {
    match outcome {
        NonceOutcome::Fresh(value) => Ok(value),
        NonceOutcome::Replayed => Err(replayed()),
    }
}

/// The request body as bytes: it is read whole, because the signature covers its digest
/// (`web::Bytes` itself would be described as a binary body by the OpenAPI generator).
#[derive(Debug)]
pub struct Body(pub web::Bytes);

impl std::ops::Deref for Body {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.0
    }
}

impl actix_web::FromRequest for Body {
    type Error = actix_web::Error;
    type Future = futures::future::LocalBoxFuture<'static, Result<Body, actix_web::Error>>;

    fn from_request(request: &HttpRequest, payload: &mut actix_web::dev::Payload) -> Self::Future {
        let bytes = web::Bytes::from_request(request, payload);
        Box::pin(async move { Ok(Body(bytes.await?)) })
    }
}

fn session_path(path: &Uuid) -> SessionId {
    SessionId(*path)
}

// Types.

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
    /// Set for a delegated child.
    pub parent_session_id: Option<Uuid>,
    pub created_at_ms: i64,
    pub updated_at_ms: i64,
    /// The predecessor this session continues, if any.
    pub continued_from: Option<ContinuationLink>,
    /// The newest successor this session continued into, if any.
    pub continued_to: Option<ContinuationLink>,
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
#[serde(deny_unknown_fields)]
pub struct SendMessageRequest {
    #[schema(min_length = 1, max_length = 65536)]
    pub text: String,
    /// Block until the run ends (at most the server's wait limit).
    #[serde(default)]
    pub wait: bool,
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

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct RunInfo {
    pub id: Uuid,
    pub session_id: Uuid,
    pub queue: String,
    pub status: String,
    pub attempts: i64,
    pub pass: i64,
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
            result: run.result,
            created_at_ms: run.created_at_ms,
            updated_at_ms: run.updated_at_ms,
        }
    }
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct StopResponse {
    /// Whether a turn was in flight and was cut off.
    pub stopped: bool,
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SetModelRequest {
    /// The model for this session; null for the service's default.
    #[schema(min_length = 1, max_length = 200)]
    pub model: Option<String>,
}

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

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct TokenResponse {
    /// Send as `Authorization: Bearer …`, or as `?token=` on the WebSocket.
    pub token: String,
    pub expires_at_ms: i64,
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

// Handlers.

/// Creates a session.
#[utoipa::path(
    request_body(content = CreateSessionRequest, content_type = "application/json"),
    responses(
        (status = 201, body = SessionInfo),
        (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody),
        (status = 413, description = "The body is too large"),
    ),
    tag = "sessions"
)]
#[post("/v1/sessions")]
async fn create_session(
    state: web::Data<AppState>,
    request: HttpRequest,
    body: Body,
) -> Result<HttpResponse, ApiError> {
    let caller = state.caller(&request, &body).await?;
    let input: CreateSessionRequest = parse_json(&body)?;
    let title = input.title.unwrap_or_default();
    input::check_chars("title", &title, 0, input::TITLE_CHARS_MAX)?;
    if let Some(model) = &input.model {
        input::check_chars("model", model, 1, input::MODEL_CHARS_MAX)?;
    }
    let now_ms = state.now_ms();
    let session_id = SessionId::new_v7();
    let mut session = NewSession::new(session_id, caller.account_id, now_ms);
    if !title.is_empty() {
        session.title = title;
        session.title_source = TitleSource::User;
    }
    session.model_override = input.model;
    fresh(
        state
            .store
            .create_session_signed(caller.nonce.clone(), session)
            .await?,
    )?;
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
        (status = 413, description = "The body is too large"),
    ),
    tag = "sessions"
)]
#[get("/v1/sessions")]
async fn list_sessions(
    state: web::Data<AppState>,
    request: HttpRequest,
    query: crate::error::Query<ListSessionsQuery>,
    body: Body,
) -> Result<HttpResponse, ApiError> {
    let caller = state.caller(&request, &body).await?;
    let limit = input::page_limit(query.limit, input::PAGE_SESSIONS_DEFAULT)?;
    let cursor = query.cursor.as_deref().map(Cursor::decode).transpose()?;
    let sessions = state.store.list_sessions(caller.account_id).await?;
    let (page, next) = input::page_sessions(sessions, cursor, limit);
    let mut infos = Vec::with_capacity(page.len());
    for session in page {
        infos.push(state.session_info(session).await?);
    }
    state.take_nonce(&caller).await?;
    Ok(HttpResponse::Ok().json(ListSessionsResponse {
        sessions: infos,
        next_cursor: next.map(|cursor| cursor.encode()),
    }))
}

/// One session, with its model's context window.
#[utoipa::path(
    params(("session_id" = Uuid, Path, description = "The session")),
    responses(
        (status = 200, body = GetSessionResponse),
        (status = 401, body = ErrorBody),
        (status = 413, description = "The body is too large"),
        (status = 404, body = ErrorBody),
    ),
    tag = "sessions"
)]
#[get("/v1/sessions/{session_id}")]
async fn get_session(
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

/// The continuation that made this session, with its manifest (404 when it continues none).
#[utoipa::path(
    params(("session_id" = Uuid, Path, description = "The successor session")),
    responses(
        (status = 200, body = ContinuationInfo),
        (status = 401, body = ErrorBody),
        (status = 413, description = "The body is too large"),
        (status = 404, body = ErrorBody),
    ),
    tag = "sessions"
)]
#[get("/v1/sessions/{session_id}/continuation")]
async fn get_continuation(
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
    }))
}

/// Deletes a session and everything it owns; a turn in flight is cut off.
#[utoipa::path(
    params(("session_id" = Uuid, Path, description = "The session")),
    responses(
        (status = 204, description = "Deleted"),
        (status = 401, body = ErrorBody),
        (status = 413, description = "The body is too large"),
        (status = 404, body = ErrorBody),
    ),
    tag = "sessions"
)]
#[delete("/v1/sessions/{session_id}")]
async fn delete_session(
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

/// Sends a person's message; a run is queued to answer it.
#[utoipa::path(
    params(("session_id" = Uuid, Path, description = "The session")),
    request_body(content = SendMessageRequest, content_type = "application/json"),
    responses(
        (status = 200, body = MessageSessionResponse),
        (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody),
        (status = 404, body = ErrorBody),
        (status = 413, description = "The body is too large"),
        (status = 429, body = ErrorBody),
    ),
    tag = "messages"
)]
#[post("/v1/sessions/{session_id}/messages")]
async fn send_message(
    state: web::Data<AppState>,
    request: HttpRequest,
    path: web::Path<Uuid>,
    body: Body,
) -> Result<HttpResponse, ApiError> {
    let caller = state.caller(&request, &body).await?;
    let input: SendMessageRequest = parse_json(&body)?;
    input::check_chars("text", &input.text, 1, input::MESSAGE_CHARS_MAX)?;
    let session_id = session_path(&path);
    let now_ms = state.now_ms();
    let event = NewEvent::message(
        EventRole::User,
        "user",
        serde_json::json!({ "text": input.text }),
        now_ms,
    );
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
                .send_user_message_signed(
                    nonce,
                    account_id,
                    session_id,
                    event,
                    run_id,
                    Queue::Interactive,
                    queued_runs_max,
                    now_ms,
                    claim_for,
                )
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

/// Waits for the run to end, at most the wait limit, and no longer than the service runs.
/// `watch`, when given, was registered for the run before it was queued.
async fn wait_for_run(
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

fn message_response(event: SessionEvent, run: RunRow) -> MessageSessionResponse {
    // A run that ended by continuing names its successor in its result.
    let continued_to_session_id = run
        .result
        .as_ref()
        .and_then(|result| result.get("continued_to_session_id"))
        .and_then(|id| id.as_str())
        .and_then(|id| id.parse().ok());
    MessageSessionResponse {
        run_id: run.id.0,
        event_id: event.id.0,
        seq: event.seq,
        status: run.status.to_string(),
        result: run.result,
        continued_to_session_id,
    }
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
async fn list_events(
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
        (status = 413, description = "The body is too large"),
        (status = 404, body = ErrorBody),
    ),
    tag = "runs"
)]
#[get("/v1/runs/{run_id}")]
async fn get_run(
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

/// Cuts off the session's turn in flight; the text already streamed stays in the log.
#[utoipa::path(
    params(("session_id" = Uuid, Path, description = "The session")),
    responses(
        (status = 200, body = StopResponse),
        (status = 401, body = ErrorBody),
        (status = 413, description = "The body is too large"),
        (status = 404, body = ErrorBody),
    ),
    tag = "sessions"
)]
#[post("/v1/sessions/{session_id}/stop")]
async fn stop_session(
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

/// Sets the session's model (null: the service's default).
#[utoipa::path(
    params(("session_id" = Uuid, Path, description = "The session")),
    request_body(content = SetModelRequest, content_type = "application/json"),
    responses(
        (status = 200, body = SessionInfo),
        (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody),
        (status = 413, description = "The body is too large"),
        (status = 404, body = ErrorBody),
    ),
    tag = "sessions"
)]
#[put("/v1/sessions/{session_id}/model")]
async fn set_model(
    state: web::Data<AppState>,
    request: HttpRequest,
    path: web::Path<Uuid>,
    body: Body,
) -> Result<HttpResponse, ApiError> {
    let caller = state.caller(&request, &body).await?;
    let input: SetModelRequest = parse_json(&body)?;
    if let Some(model) = &input.model {
        input::check_chars("model", model, 1, input::MODEL_CHARS_MAX)?;
    }
    let session_id = session_path(&path);
    let updated = fresh(
        state
            .store
            .set_session_model_signed(
                caller.nonce.clone(),
                caller.account_id,
                session_id,
                input.model,
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

/// Runs a verb as the user (the command palette); the action and its result go to the log,
/// and the model reads them with its next turn.
#[utoipa::path(
    params(("session_id" = Uuid, Path, description = "The session")),
    request_body(content = ActionRequest, content_type = "application/json"),
    responses(
        (status = 200, body = ActionResponse),
        (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody),
        (status = 413, description = "The body is too large"),
        (status = 404, body = ErrorBody),
    ),
    tag = "sessions"
)]
#[post("/v1/sessions/{session_id}/actions")]
async fn run_action(
    state: web::Data<AppState>,
    request: HttpRequest,
    path: web::Path<Uuid>,
    body: Body,
) -> Result<HttpResponse, ApiError> {
    let caller = state.caller(&request, &body).await?;
    let input: ActionRequest = parse_json(&body)?;
    let verb = input.verb.name();
    if !state.runtime.verbs_by_hand().contains(&verb) {
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

/// Mints a short-lived bearer token for a browser; only a signed request may.
#[utoipa::path(
    responses(
        (status = 200, body = TokenResponse),
        (status = 401, body = ErrorBody),
        (status = 413, description = "The body is too large"),
    ),
    tag = "auth"
)]
#[post("/v1/tokens")]
async fn mint_token(
    state: web::Data<AppState>,
    request: HttpRequest,
    body: Body,
) -> Result<HttpResponse, ApiError> {
    let caller = state.caller(&request, &body).await?;
    if caller.nonce.is_none() {
        return Err(ApiError::Unauthorized(
            "a token is minted by a signed request only".to_owned(),
        ));
    }
    state.take_nonce(&caller).await?;
    let (token, expires_at_ms) = state.tokens.mint(caller.account_id, state.now_ms())?;
    Ok(HttpResponse::Ok().json(TokenResponse {
        token,
        expires_at_ms,
    }))
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct LoginQuery {
    /// The one-time code `seed serve` printed.
    pub code: String,
}

/// The one-time login link `seed serve` prints: mints a token for the browser, once.
#[utoipa::path(
    params(LoginQuery),
    responses(
        (status = 200, description = "Signed in", content_type = "text/html"),
        (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody),
    ),
    tag = "auth"
)]
#[get("/login")]
async fn login(
    state: web::Data<AppState>,
    query: crate::error::Query<LoginQuery>,
) -> Result<HttpResponse, ApiError> {
    let account_id = state.tokens.take_login_code(&query.code).ok_or_else(|| {
        ApiError::Unauthorized("the login link was used or is unknown".to_owned())
    })?;
    let (token, expires_at_ms) = state.tokens.mint(account_id, state.now_ms())?;
    // The token travels in meta tags that `/ui/login.js` moves to localStorage (as `seed.token`)
    // before it opens the UI: the page runs no inline script, so the UI's CSP holds here too.
    let page = format!(
        "<!doctype html><meta charset=utf-8><title>Seed</title>\
         <meta name=seed.token content=\"{token}\">\
         <meta name=seed.token_expires_at_ms content=\"{expires_at_ms}\">\
         <meta name=seed.account content=\"{account_id}\">\
         <p>Signed in as account {account_id}. This browser's token lasts an hour. \
         <a href=/>Open Seed</a></p>\
         <script type=module src=/ui/login.js></script>"
    );
    Ok(crate::ui::with_security_headers(HttpResponse::Ok())
        .content_type("text/html; charset=utf-8")
        .insert_header(("Cache-Control", "no-store"))
        .body(page))
}

/// Liveness: 200 while the service answers.
#[utoipa::path(
    responses(
        (status = 200, description = "ok", content_type = "text/plain"),
        (status = 503, description = "Draining: the service is shutting down", content_type = "text/plain"),
    ),
    security(()),
    tag = "operations"
)]
#[get("/healthz")]
async fn healthz(state: web::Data<AppState>) -> HttpResponse {
    if *state.draining.borrow() {
        return HttpResponse::ServiceUnavailable().body("draining");
    }
    HttpResponse::Ok().content_type("text/plain").body("ok")
}

/// Prometheus metrics.
#[utoipa::path(
    responses((status = 200, description = "Prometheus text format", content_type = "text/plain")),
    security(()),
    tag = "operations"
)]
#[get("/metrics")]
async fn metrics_route(state: web::Data<AppState>) -> Result<HttpResponse, ApiError> {
    let text = crate::metrics::render(&state).await?;
    Ok(HttpResponse::Ok()
        .content_type("text/plain; version=0.0.4")
        .body(text))
}

#[derive(OpenApi)]
#[openapi(
    info(
        title = "Seed",
        description = "A durable agent runtime. Requests are signed (RFC 9421: Signature-Input, \
                       Signature and Content-Digest, ed25519, keyid = the account id) or carry \
                       a bearer token minted by a signed POST /v1/tokens. A method a path does \
                       not offer is answered 405 with an Allow header naming those it does; a \
                       path no route has, 404."
    ),
    components(schemas(ErrorBody)),
    modifiers(&Security),
    security(("signature" = []), ("bearer" = []))
)]
struct ApiDoc;

struct Security;

impl utoipa::Modify for Security {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        use utoipa::openapi::security::{
            ApiKey, ApiKeyValue, HttpAuthScheme, HttpBuilder, SecurityScheme,
        };
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "signature",
            SecurityScheme::ApiKey(ApiKey::Header(ApiKeyValue::with_description(
                "Signature",
                "RFC 9421 signature over @method @authority @path @query content-digest, \
                 with Signature-Input and Content-Digest",
            ))),
        );
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build()),
        );
    }
}

/// Registers every route with its OpenAPI description.
pub fn configure(config: &mut utoipa_actix_web::service_config::ServiceConfig) {
    config
        .service(create_session)
        .service(list_sessions)
        .service(get_session)
        .service(get_continuation)
        .service(delete_session)
        .service(send_message)
        .service(list_events)
        .service(get_run)
        .service(stop_session)
        .service(set_model)
        .service(run_action)
        .service(mint_token)
        .service(crate::ws::subscribe)
        .service(login)
        .service(healthz)
        .service(metrics_route);
}

/// The base document the routes are added to.
pub fn base_document() -> utoipa::openapi::OpenApi {
    ApiDoc::openapi()
}

/// The whole OpenAPI document, as the server serves it.
pub fn openapi() -> utoipa::openapi::OpenApi {
    use utoipa_actix_web::AppExt;
    let (_, mut document) = actix_web::App::new()
        .into_utoipa_app()
        .openapi(base_document())
        .configure(configure)
        .split_for_parts();
    document.paths.add_path_operation(
        "/v1/openapi.json",
        vec![utoipa::openapi::HttpMethod::Get],
        utoipa::openapi::path::OperationBuilder::new()
            .summary(Some("This document"))
            .tag("operations")
            .response(
                "200",
                utoipa::openapi::ResponseBuilder::new()
                    .description("The OpenAPI document")
                    .build(),
            )
            .security(utoipa::openapi::security::SecurityRequirement::default())
            .build(),
    );
    add_ui_pages(&mut document);
    document
}

/// The web UI's routes (`crate::ui`), which answer without signing: the page at `/` and
/// `/s/{session_id}`, and its files at `/ui/{file}`. A method a path does not offer is
/// answered 405 with `Allow` (see the document's description).
fn add_ui_pages(document: &mut utoipa::openapi::OpenApi) {
    use utoipa::openapi::path::{OperationBuilder, ParameterBuilder, ParameterIn};
    use utoipa::openapi::{ContentBuilder, HttpMethod, Required, ResponseBuilder};
    let media = |content_type: &str| {
        content_type
            .split(';')
            .next()
            .unwrap_or(content_type)
            .trim()
            .to_owned()
    };
    let response = |description: &str, media_types: &[String]| {
        media_types
            .iter()
            .fold(
                ResponseBuilder::new().description(description),
                |builder, media_type| {
                    builder.content(media_type.as_str(), ContentBuilder::new().build())
                },
            )
            .build()
    };
    let html = vec!["text/html".to_owned()];
    let not_found = vec!["text/plain".to_owned(), "application/json".to_owned()];
    let mut file_types: Vec<String> = crate::ui::ASSETS
        .iter()
        .map(|(_, content_type, _)| media(content_type))
        .collect();
    file_types.sort();
    file_types.dedup();
    let path_parameter = |name: &str, description: &str| {
        ParameterBuilder::new()
            .name(name)
            .parameter_in(ParameterIn::Path)
            .required(Required::True)
            .description(Some(description))
            .schema(Some(
                utoipa::openapi::ObjectBuilder::new()
                    .schema_type(utoipa::openapi::schema::Type::String),
            ))
            .build()
    };
    let page = |parameter: Option<utoipa::openapi::path::Parameter>| {
        let mut operation = OperationBuilder::new()
            .summary(Some("The web UI's page"))
            .tag("ui")
            .response("200", response("The page", &html))
            .response("404", response("No such route", &not_found))
            .security(utoipa::openapi::security::SecurityRequirement::default());
        if let Some(parameter) = parameter {
            operation = operation.parameter(parameter);
        }
        operation.build()
    };
    document
        .paths
        .add_path_operation("/", vec![HttpMethod::Get], page(None));
    document.paths.add_path_operation(
        "/s/{session_id}",
        vec![HttpMethod::Get],
        page(Some(path_parameter(
            "session_id",
            "The session the page opens",
        ))),
    );
    document.paths.add_path_operation(
        "/ui/{file}",
        vec![HttpMethod::Get],
        OperationBuilder::new()
            .summary(Some("A file of the web UI"))
            .tag("ui")
            .parameter(path_parameter("file", "The file's name, e.g. app.js"))
            .response("200", response("The file", &file_types))
            .response("404", response("No such file", &not_found))
            .security(utoipa::openapi::security::SecurityRequirement::default())
            .build(),
    );
}

/// The document as served: [`openapi`], with `ActionRequest` stated exactly, one shape per
/// verb a person may run by hand with that verb's own argument schema (the one the API checks
/// arguments against), instead of "any object".
pub fn document_text(
    document: &utoipa::openapi::OpenApi,
    runtime: &Runtime,
) -> serde_json::Result<String> {
    let mut value = serde_json::to_value(document)?;
    let mut shapes = Vec::new();
    for verb in [
        ByHandVerb::Read,
        ByHandVerb::Plan,
        ByHandVerb::Status,
        ByHandVerb::Memory,
    ] {
        let Some(parameters) = runtime.verb_parameters_by_hand(verb.name()) else {
            continue;
        };
        // Arguments may be left out (they are `{}` then) only when the verb requires none.
        let requires_some = parameters["required"]
            .as_array()
            .is_some_and(|required| !required.is_empty());
        let required = if requires_some {
            serde_json::json!(["verb", "arguments"])
        } else {
            serde_json::json!(["verb"])
        };
        shapes.push(serde_json::json!({
            "type": "object",
            "properties": {
                "verb": { "type": "string", "enum": [verb.name()], "description": "The verb to run." },
                "arguments": parameters,
            },
            "required": required,
            "additionalProperties": false,
        }));
    }
    if let Some(schemas) = value
        .pointer_mut("/components/schemas")
        .and_then(|schemas| schemas.as_object_mut())
    {
        schemas.insert(
            "ActionRequest".to_owned(),
            serde_json::json!({
                "description": "A verb to run by hand, with its arguments as its schema says.",
                "oneOf": shapes,
            }),
        );
    }
    serde_json::to_string(&value)
}

/// Serves the document.
pub async fn openapi_json(document: web::Data<String>) -> HttpResponse {
    HttpResponse::Ok()
        .content_type("application/json")
        .body(document.get_ref().clone())
}

/// Every route of a document: its path template and the methods it answers.
pub fn routes_of(document: &utoipa::openapi::OpenApi) -> Vec<(String, Vec<String>)> {
    let value = serde_json::to_value(document).unwrap_or_default();
    let mut routes = Vec::new();
    if let Some(paths) = value["paths"].as_object() {
        for (path, item) in paths {
            let methods = item
                .as_object()
                .map(|item| {
                    item.keys()
                        .filter(|key| {
                            ["get", "put", "post", "delete", "patch", "head", "options"]
                                .contains(&key.as_str())
                        })
                        .map(|key| key.to_uppercase())
                        .collect()
                })
                .unwrap_or_default();
            routes.push((path.clone(), methods));
        }
    }
    routes
}

/// The methods a path answers, when it matches a route's template (`{name}` matches one
/// segment); `None` for a path no route has.
pub fn allowed_methods(routes: &[(String, Vec<String>)], path: &str) -> Option<Vec<String>> {
    let segments: Vec<&str> = path.split('/').collect();
    routes
        .iter()
        .find(|(template, _)| {
            let template: Vec<&str> = template.split('/').collect();
            template.len() == segments.len()
                && template.iter().zip(&segments).all(|(want, have)| {
                    (want.starts_with('{') && want.ends_with('}') && !have.is_empty())
                        || want == have
                })
        })
        .map(|(_, methods)| methods.clone())
}

/// What answers a request no route took: 405 with `Allow` when the path exists, else 404.
pub async fn no_route(
    request: HttpRequest,
    routes: web::Data<Vec<(String, Vec<String>)>>,
) -> HttpResponse {
    match allowed_methods(&routes, request.path()) {
        Some(methods) => HttpResponse::MethodNotAllowed()
            .insert_header(("Allow", methods.join(", ")))
            .json(ErrorBody {
                error: format!("{} is not allowed here", request.method()),
                field: None,
            }),
        None => HttpResponse::NotFound().json(ErrorBody {
            error: "no such route".to_owned(),
            field: None,
        }),
    }
}

/// The account a session belongs to (for subscribers).
pub async fn session_owner(store: &Store, session_id: SessionId) -> Option<AccountId> {
    store.session_owner(session_id).await.ok().flatten()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_document_routes_and_their_methods() {
        let routes = routes_of(&openapi());
        let allowed = |path: &str| allowed_methods(&routes, path);
        assert_eq!(
            allowed("/v1/sessions").map(|mut m| {
                m.sort();
                m
            }),
            Some(vec!["GET".to_owned(), "POST".to_owned()])
        );
        assert_eq!(
            allowed("/v1/sessions/abc/messages"),
            Some(vec!["POST".to_owned()])
        );
        assert_eq!(allowed("/v1/sessions//messages"), None);
        assert_eq!(allowed("/v1/nothing"), None);
        assert_eq!(allowed("/v1/openapi.json"), Some(vec!["GET".to_owned()]));
    }
}
