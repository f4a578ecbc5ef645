//! Forks and lineage: a person branches a session from an earlier message (`POST
//! /v1/sessions/{id}/fork`), and the typed graph of the sessions joined to one by continuation,
//! fork and delegation (`GET /v1/sessions/{id}/lineage`).

use actix_web::{HttpRequest, HttpResponse, get, post, web};
use seed_actors::fork::{ForkOutcome, ForkRefusal, ForkRequest};
use seed_events::LineageEdgeKind;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

use super::{AppState, Body, SessionInfo, replayed, session_path};
use crate::error::{ApiError, ErrorBody};
use crate::input::{self, Invalid, parse_json};
use crate::limits;

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ForkSessionRequest {
    /// The seq of the message the fork's conversation ends with: a user or assistant message
    /// of the session, with every tool call before it answered at or before it.
    #[schema(minimum = 1)]
    pub seq: i64,
    /// The fork's title; left out: the session's.
    #[schema(max_length = 200)]
    pub title: Option<String>,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct ForkSessionResponse {
    /// The new session: its log is the session's events up to `seq`, copied.
    pub session: SessionInfo,
    /// The edge in the lineage (kind `fork`), as `GET /v1/sessions/{id}/continuation` shows it.
    pub continuation_id: Uuid,
    /// The session it branched from.
    pub forked_from_session_id: Uuid,
    pub seq: i64,
}

/// How two sessions of a lineage are joined.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum LineageKindName {
    /// An agent carried the conversation into a successor (continue_session).
    Continuation,
    /// A person branched from an earlier message.
    Fork,
    /// A delegated run of the parent works in the child.
    Delegation,
}

impl From<LineageEdgeKind> for LineageKindName {
    fn from(kind: LineageEdgeKind) -> LineageKindName {
        match kind {
            LineageEdgeKind::Continuation => LineageKindName::Continuation,
            LineageEdgeKind::Fork => LineageKindName::Fork,
            LineageEdgeKind::Delegation => LineageKindName::Delegation,
        }
    }
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct LineageNodeInfo {
    pub session_id: Uuid,
    pub title: String,
    pub created_at_ms: i64,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct LineageEdgeInfo {
    /// The earlier session: the predecessor, or the parent.
    pub from: Uuid,
    /// The later one: the successor, the fork, or the child.
    pub to: Uuid,
    pub kind: LineageKindName,
    pub created_at_ms: i64,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct LineageResponse {
    /// The session asked about.
    pub session_id: Uuid,
    /// Every session of the connected lineage, oldest first.
    pub nodes: Vec<LineageNodeInfo>,
    pub edges: Vec<LineageEdgeInfo>,
    /// Whether the lineage reaches past the sessions shown (at most `LINEAGE_SESSIONS_MAX`,
    /// the nearest to this one).
    pub truncated: bool,
}

/// Branches the session at an earlier message: a new session whose log is this one's up to
/// `seq`, created whole in one transaction, with its edge (kind `fork`) and manifest. The
/// fork waits for the person's next message; this session is unchanged.
#[utoipa::path(
    params(("session_id" = Uuid, Path, description = "The session to branch from")),
    request_body(content = ForkSessionRequest, content_type = "application/json"),
    responses(
        (status = 201, body = ForkSessionResponse),
        (status = 400, description = "`seq` is not a whole conversation's end (it names why \
                                      and which seq would do), or the body is not valid",
         body = ErrorBody),
        (status = 401, body = ErrorBody),
        (status = 404, body = ErrorBody),
        (status = 409, description = "A delegated child's session cannot be forked",
         body = ErrorBody),
        (status = 413, description = "The body is too large", body = ErrorBody),
        (status = 429, description = "The account has as many sessions as it may, or the \
                                      session as many forks", body = ErrorBody),
    ),
    tag = "sessions"
)]
#[post("/v1/sessions/{session_id}/fork")]
pub(super) async fn fork_session(
    state: web::Data<AppState>,
    request: HttpRequest,
    path: web::Path<Uuid>,
    body: Body,
) -> Result<HttpResponse, ApiError> {
    let caller = state.caller(&request, &body).await?;
    let input: ForkSessionRequest = parse_json(&body)?;
    if let Some(title) = &input.title {
        input::check_chars("title", title, 0, limits::SESSION_TITLE_CHARS_MAX)?;
    }
    let predecessor = session_path(&path);
    let outcome = state
        .runtime
        .fork_session(ForkRequest {
            account_id: caller.account_id,
            session_id: predecessor,
            seq: input.seq,
            title: input.title.filter(|title| !title.is_empty()),
            nonce: caller.nonce.clone(),
        })
        .await?;
    let (fork, continuation_id) = match outcome {
        ForkOutcome::Forked {
            session_id,
            continuation_id,
        } => (session_id, continuation_id),
        ForkOutcome::Replayed => return Err(replayed()),
        ForkOutcome::Refused(refusal) => {
            return Err(match refusal {
                ForkRefusal::NoSuchSession => ApiError::NotFound("session"),
                ForkRefusal::Point(problem) => {
                    ApiError::BadRequest(Invalid::field("seq", problem.to_string()))
                }
                ForkRefusal::DelegatedChild => ApiError::Conflict(refusal.to_string()),
                ForkRefusal::SessionsFull => ApiError::TooMany(format!(
                    "the account has {} sessions, the most it may have (account_sessions_max); \
                     delete some to fork",
                    state.store.config().quotas.sessions_max
                )),
                ForkRefusal::ForksFull => ApiError::TooMany(refusal.to_string()),
            });
        }
    };
    let session = state.own_session(&caller, fork).await?;
    Ok(HttpResponse::Created().json(ForkSessionResponse {
        session: state.session_info(session).await?,
        continuation_id: continuation_id.0,
        forked_from_session_id: predecessor.0,
        seq: input.seq,
    }))
}

/// The typed graph around the session: every session joined to it by continuation, fork or
/// delegation, directly or not, up to a bound.
#[utoipa::path(
    params(("session_id" = Uuid, Path, description = "The session")),
    responses(
        (status = 200, body = LineageResponse),
        (status = 401, body = ErrorBody),
        (status = 404, body = ErrorBody),
        (status = 413, description = "The body is too large", body = ErrorBody),
    ),
    tag = "sessions"
)]
#[get("/v1/sessions/{session_id}/lineage")]
pub(super) async fn lineage(
    state: web::Data<AppState>,
    request: HttpRequest,
    path: web::Path<Uuid>,
    body: Body,
) -> Result<HttpResponse, ApiError> {
    let caller = state.caller(&request, &body).await?;
    let session = state.own_session(&caller, session_path(&path)).await?;
    let lineage = state.store.lineage(session.id).await?;
    state.take_nonce(&caller).await?;
    Ok(HttpResponse::Ok().json(LineageResponse {
        session_id: session.id.0,
        nodes: lineage
            .nodes
            .into_iter()
            .map(|node| LineageNodeInfo {
                session_id: node.session_id.0,
                title: node.title,
                created_at_ms: node.created_at_ms,
            })
            .collect(),
        edges: lineage
            .edges
            .into_iter()
            .map(|edge| LineageEdgeInfo {
                from: edge.from.0,
                to: edge.to.0,
                kind: edge.kind.into(),
                created_at_ms: edge.created_at_ms,
            })
            .collect(),
        truncated: lineage.truncated,
    }))
}
