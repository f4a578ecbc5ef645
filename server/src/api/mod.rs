//! The REST API under `/v1`: JSON in and out, every request signed (or carrying a bearer
//! token), every route described in the OpenAPI document at `/v1/openapi.json`. Handlers are
//! thin: authenticate, parse and check the input (`input`), call the store or the runtime,
//! shape the answer.
//!
//! Layout, one resource a module: `sessions`, `messages` (and runs), `attachments` (files to
//! name in a message), `events` (the log), `forks` (a person's fork, the lineage), `preview`
//! (a continuation's preview, and a person's continuation), `actions`
//! (verbs run by hand), `tokens`,
//! `operations` (health, metrics); `openapi` (the
//! document, and what answers a request no route took). Here: the state every handler shares.

use std::sync::Arc;
use std::time::Duration;

use actix_web::{HttpMessage as _, HttpRequest, web};
use seed_actors::Runtime;
use seed_actors::bus::Notification;
use seed_events::{AccountId, SessionId};
use seed_store::{NonceOutcome, SessionRow, Store};
use uuid::Uuid;

use crate::auth::{self, Caller, Tokens};
use crate::error::ApiError;

mod account;
mod actions;
mod approvals;
mod attachments;
mod events;
mod forks;
mod messages;
mod openapi;
mod operations;
mod preview;
mod schedules;
mod sessions;
mod tokens;
mod tools;

pub use actions::{ActionRequest, ActionResponse, ActionsResponse, ByHandVerb, ByHandVerbInfo};
pub use approvals::{ApprovalInfo, ApprovalsResponse, DecideApprovalRequest, DecisionName};
pub use attachments::{
    AttachmentInfo, ListAttachmentsResponse, UploadQuery, checked_media_type, content_disposition,
};
pub(crate) use events::live_info;
pub use events::{
    EventInfo, EventsQuery, EventsResponse, LiveInfo, LiveResponse, TranscriptLine,
    TranscriptResponse,
};
pub use forks::{
    ForkSessionRequest, ForkSessionResponse, LineageEdgeInfo, LineageKindName, LineageNodeInfo,
    LineageResponse,
};
pub use messages::{
    MessageSessionResponse, RetryMessageRequest, RunInfo, RunQuery, SendMessageRequest,
    SessionRunsResponse,
};
pub use openapi::{
    allowed_methods, base_document, document_text, no_route, openapi, openapi_json, routes_of,
};
pub use preview::{
    ContinuationPreview, ContinuationPreviewRequest, ContinueSessionResponse, PreviewFirstRequest,
    PreviewLoaded, PreviewOmitted, PreviewPart, PreviewRecommended, PreviewSource,
};
pub use schedules::{ScheduleInfo, SchedulesResponse};
pub use sessions::{
    ContinuationInfo, ContinuationLink, ContinuationRecall, CreateSessionRequest, EdgeRecalls,
    GetSessionResponse, ListSessionsQuery, ListSessionsResponse, ReasoningLevelName, SessionInfo,
    SetModelRequest, StopResponse,
};
pub use tokens::{LoginQuery, TokenResponse};
pub use tools::{McpServerInfo, OfferedIn, ToolClass, ToolInfo, ToolsResponse};

/// The largest attachment by default: 10 MiB.
pub const ATTACHMENT_BYTES_MAX_DEFAULT: usize = 10 * 1024 * 1024;
/// What an account's attachments may hold by default: 1 GiB.
pub const ACCOUNT_ATTACHMENTS_BYTES_MAX_DEFAULT: i64 = 1024 * 1024 * 1024;
/// How long a request body may take to arrive by default, in milliseconds.
pub const BODY_TIMEOUT_MS_DEFAULT: u64 = 60_000;

/// The service's limits.
#[derive(Debug, Clone)]
pub struct Limits {
    /// Runs an account may have waiting their turn before a message is refused (429).
    pub queued_runs_per_account_max: i64,
    /// The longest a `wait` message request blocks.
    pub wait_max: Duration,
    /// The largest request body (413 above).
    pub body_bytes_max: usize,
    /// The largest file one attachment may be (413 above); its upload is the one body past
    /// `body_bytes_max`.
    pub attachment_bytes_max: usize,
    /// The most bytes an account's attachments may hold, all together (413 above).
    pub account_attachments_bytes_max: i64,
    /// How long a request body may take to arrive, once its head is authenticated (408 after).
    pub body_timeout: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            queued_runs_per_account_max: 256,
            wait_max: Duration::from_secs(120),
            body_bytes_max: 1024 * 1024,
            attachment_bytes_max: ATTACHMENT_BYTES_MAX_DEFAULT,
            account_attachments_bytes_max: ACCOUNT_ATTACHMENTS_BYTES_MAX_DEFAULT,
            body_timeout: Duration::from_millis(BODY_TIMEOUT_MS_DEFAULT),
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
    /// The MCP servers whose tools are verbs, when `--mcp` names some.
    pub mcp: Option<seed_mcp::McpServers>,
    /// The open sockets of `/v1/subscribe`, by account.
    pub subscribers: Arc<crate::subscribers::Subscribers>,
    /// The service's own account (`local.key`), which cannot be removed while it runs.
    pub local_account_id: AccountId,
    /// This process among the nodes on one database: the boot id it claims runs with.
    pub node_id: String,
    /// On a shared database, the notices this node has sent the other nodes (`/metrics`), once
    /// its bus bridge runs.
    pub notices_sent: std::sync::OnceLock<Arc<seed_store::notices::Sent>>,
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

    /// Who is asking. A request whose head was authenticated before its body was read (by
    /// [`Body`]) has only its body checked against the signed digest here.
    pub async fn caller(&self, request: &HttpRequest, body: &[u8]) -> Result<Caller, ApiError> {
        if let Some(head) = request.extensions().get::<auth::HeadCaller>() {
            return head.with_body(body);
        }
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
    pub(super) async fn own_session(
        &self,
        caller: &Caller,
        session_id: SessionId,
    ) -> Result<SessionRow, ApiError> {
        match self.store.get_session(session_id).await? {
            Some(session) if session.account_id == caller.account_id => Ok(session),
            _ => Err(ApiError::NotFound("session")),
        }
    }

    /// The session as the API shows it, with its continuation links and the one it was forked
    /// from.
    async fn session_info(&self, session: SessionRow) -> Result<SessionInfo, ApiError> {
        let (continued_from, continued_to) = self.store.continuation_links(session.id).await?;
        let forked_from = self.store.fork_link(session.id).await?;
        Ok(SessionInfo {
            id: session.id.0,
            title: session.title,
            description: session.description,
            title_source: session.title_source.to_string(),
            model: session.model_override,
            reasoning_level: session.reasoning_level,
            parent_session_id: session.parent_session_id.map(|id| id.0),
            created_at_ms: session.created_at_ms,
            updated_at_ms: session.updated_at_ms,
            continued_from: continued_from.map(ContinuationLink::from),
            continued_to: continued_to.map(ContinuationLink::from),
            forked_from: forked_from.map(ContinuationLink::from),
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

/// Authenticates a request from its head, before its body is read, and keeps who it is for
/// [`AppState::caller`]: a client that is not who it says is refused (401) without a byte of
/// its body read. Returns the service's state.
pub(crate) async fn authenticate_head(
    request: &HttpRequest,
) -> Result<web::Data<AppState>, ApiError> {
    let state = request
        .app_data::<web::Data<AppState>>()
        .cloned()
        .ok_or_else(|| ApiError::Internal(anyhow::anyhow!("no service state")))?;
    let head = auth::authenticate_head(
        &state.store,
        &state.keys,
        &state.tokens,
        request,
        state.now_ms(),
    )
    .await?;
    request.extensions_mut().insert(head);
    Ok(state)
}

/// Reads a request body within the service's body timeout (408 after it).
pub(crate) async fn within_body_timeout<T>(
    state: &AppState,
    body: impl std::future::Future<Output = Result<T, ApiError>>,
) -> Result<T, ApiError> {
    let timeout = state.limits.body_timeout;
    tokio::time::timeout(timeout, body)
        .await
        .unwrap_or(Err(ApiError::BodyTimeout {
            timeout_ms: timeout.as_millis(),
        }))
}

/// The request body as bytes: it is read whole, because the signature covers its digest
/// (`web::Bytes` itself would be described as a binary body by the OpenAPI generator). The
/// request's head is authenticated first (`authenticate_head`), and the body must arrive
/// within the body timeout.
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
        let request = request.clone();
        let mut payload = payload.take();
        Box::pin(async move {
            let state = authenticate_head(&request).await?;
            let limit_bytes = state.limits.body_bytes_max;
            let bytes = async {
                match web::Bytes::from_request(&request, &mut payload).await {
                    Ok(bytes) => Ok(Ok(bytes)),
                    // Every error of the API is JSON, this one too (actix-web's own is plain
                    // text).
                    Err(error)
                        if error.as_response_error().status_code()
                            == actix_web::http::StatusCode::PAYLOAD_TOO_LARGE =>
                    {
                        Err(ApiError::TooLarge { limit_bytes })
                    }
                    Err(error) => Ok(Err(error)),
                }
            };
            Ok(Body(within_body_timeout(&state, bytes).await??))
        })
    }
}

fn session_path(path: &Uuid) -> SessionId {
    SessionId(*path)
}

/// Registers every route with its OpenAPI description.
pub fn configure(config: &mut utoipa_actix_web::service_config::ServiceConfig) {
    config
        .service(sessions::create_session)
        .service(sessions::list_sessions)
        .service(sessions::get_session)
        .service(sessions::get_continuation)
        .service(preview::preview_continuation)
        .service(preview::continue_session)
        .service(sessions::delete_session)
        .service(forks::fork_session)
        .service(forks::lineage)
        .service(messages::send_message)
        .service(messages::retry_message)
        .service(attachments::upload_attachment)
        .service(attachments::list_attachments)
        .service(attachments::download_attachment)
        .service(events::list_events)
        .service(events::transcript)
        .service(events::live)
        .service(messages::get_run)
        .service(messages::list_session_runs)
        .service(sessions::stop_session)
        .service(sessions::set_model)
        .service(actions::run_action)
        .service(actions::list_actions)
        .service(approvals::list_approvals)
        .service(approvals::decide_approval)
        .service(schedules::list_schedules)
        .service(schedules::cancel_schedule)
        .service(tools::list_tools)
        .service(tokens::mint_token)
        .service(tokens::revoke_token)
        .service(account::delete_account)
        .service(crate::ws::subscribe)
        .service(tokens::login)
        .service(operations::healthz)
        .service(operations::metrics_route);
}

/// The account a session belongs to (for subscribers).
pub async fn session_owner(store: &Store, session_id: SessionId) -> Option<AccountId> {
    store.session_owner(session_id).await.ok().flatten()
}
