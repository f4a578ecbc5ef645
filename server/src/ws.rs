//! The WebSocket `/v1/subscribe`: session-change and account-change notifications and the text
//! deltas of turns in flight, for the signed-in account's sessions only. Sign the upgrade
//! request, or pass a bearer token (header, or `?token=` where a browser cannot set headers).
//! Each message is one JSON object with a `type`. A client that reconnects may resume a session
//! where it left off (see [`crate::resume`]).

use std::sync::Arc;
use std::time::Duration;

use actix_web::{HttpRequest, HttpResponse, get, web};
use actix_ws::Message;
use seed_actors::bus::{Notification, SeqRange};
use seed_events::{AccountId, EventRole, RunId, SessionId};
use seed_store::Store;
use serde::Serialize;
use tokio::sync::mpsc;

use crate::api::{AppState, EventInfo};
use crate::error::{ApiError, ErrorBody};
use crate::resume::{CatchUp, ResumePoint, Seam, live_delta};
use crate::subscribers::{Closing, Subscription};

/// What a subscriber receives. Each follows the commit of what it tells, so nothing a
/// subscriber sees can be lost by a crash.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
#[serde(tag = "type", rename_all = "kebab-case")]
pub enum Update {
    SessionChange {
        session_id: SessionId,
        reason: String,
        /// The first and last seq of the events the change appended to the log, when it
        /// appended some: fetch exactly those.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        from_seq: Option<i64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        to_seq: Option<i64>,
    },
    AccountChange {
        account_id: AccountId,
        /// Every reason of this one change.
        reasons: Vec<String>,
        /// The first of `reasons`. Deprecated: read `reasons`; kept for one release.
        reason: String,
    },
    /// More text of the response in flight, sent once the store holds it.
    TextDelta {
        session_id: SessionId,
        run_id: seed_events::RunId,
        /// How much of the response's text came before this delta, in chars (Unicode scalar
        /// values): with the text in flight read from `GET /v1/sessions/{id}/live`, a client
        /// keeps only what it lacks.
        offset_chars: usize,
        text: String,
    },
    RunFinished {
        session_id: SessionId,
        run_id: seed_events::RunId,
        status: String,
    },
    /// A tool call the model asked for, about to run: sent once the response that asks for it
    /// is committed (its `tool_call` event is at `seq`).
    ToolCall {
        session_id: SessionId,
        run_id: seed_events::RunId,
        seq: i64,
        call_id: String,
        name: String,
        arguments: serde_json::Value,
    },
    /// A call waits for a person's decision (decide it with `POST
    /// /v1/sessions/{id}/approvals/{call_id}`): of `kind` `approval`, sent once its run parked
    /// on it; of `kind` `elicitation`, an MCP server's question during the call (`message`, and
    /// the `requested_schema` of the answer's content), sent once it is recorded.
    ApprovalPending {
        session_id: SessionId,
        run_id: seed_events::RunId,
        call_id: String,
        name: String,
        arguments: serde_json::Value,
        #[serde(default = "approval_kind")]
        kind: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        message: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        requested_schema: Option<serde_json::Value>,
    },
    /// Committed events of the session a socket resumes, after the seq it resumed from, in
    /// order (at most a page each): the catch-up that comes before its live updates.
    Events {
        session_id: SessionId,
        events: Vec<EventInfo>,
    },
}

/// The kind of a pending decision that is a call's approval.
fn approval_kind() -> String {
    "approval".to_owned()
}

impl Update {
    pub(crate) fn of(notification: Notification) -> Update {
        match notification {
            Notification::SessionChanged {
                session_id,
                reason,
                seqs,
            } => Update::SessionChange {
                session_id,
                reason: reason.to_owned(),
                from_seq: seqs.map(|seqs: SeqRange| seqs.from),
                to_seq: seqs.map(|seqs| seqs.to),
            },
            Notification::SessionDeleted { session_id, .. } => Update::SessionChange {
                session_id,
                reason: "deleted".to_owned(),
                from_seq: None,
                to_seq: None,
            },
            Notification::AccountChanged {
                account_id,
                reasons,
            } => Update::AccountChange {
                account_id,
                reason: reasons.first().copied().unwrap_or_default().to_owned(),
                reasons: reasons.into_iter().map(str::to_owned).collect(),
            },
            Notification::TextDelta {
                session_id,
                run_id,
                offset_chars,
                text,
            } => Update::TextDelta {
                session_id,
                run_id,
                offset_chars,
                text,
            },
            Notification::RunFinished {
                session_id,
                run_id,
                status,
            } => Update::RunFinished {
                session_id,
                run_id,
                status: status.to_string(),
            },
            Notification::ToolCall {
                session_id,
                run_id,
                seq,
                call_id,
                name,
                arguments,
            } => Update::ToolCall {
                session_id,
                run_id,
                seq,
                call_id,
                name,
                arguments,
            },
            Notification::ApprovalPending {
                session_id,
                run_id,
                call_id,
                name,
                arguments,
            } => Update::ApprovalPending {
                session_id,
                run_id,
                call_id,
                name,
                arguments,
                kind: approval_kind(),
                message: None,
                requested_schema: None,
            },
            Notification::ElicitationPending {
                session_id,
                run_id,
                call_id,
                name,
                arguments,
                message,
                requested_schema,
            } => Update::ApprovalPending {
                session_id,
                run_id,
                call_id,
                name,
                arguments,
                kind: "elicitation".to_owned(),
                message: Some(message),
                requested_schema: Some(requested_schema),
            },
        }
    }
}

#[derive(Debug, serde::Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct SubscribeQuery {
    /// A bearer token, for clients that cannot set headers.
    pub token: Option<String>,
    /// A session of the account to resume: its missed events and text in flight come first.
    pub session: Option<uuid::Uuid>,
    /// With `session`: the last seq of its log the client holds (default 0, none).
    #[param(minimum = 0)]
    pub after_seq: Option<i64>,
    /// With `session`: how much of the response in flight the client holds, in chars (Unicode
    /// scalar values, as `text-delta` counts them; default 0).
    #[param(minimum = 0)]
    pub offset_chars: Option<usize>,
}

impl SubscribeQuery {
    /// Where the client resumes, when it names a session; checked.
    fn resume_point(&self) -> Result<Option<ResumePoint>, ApiError> {
        let Some(session) = self.session else {
            if self.after_seq.is_some() || self.offset_chars.is_some() {
                return Err(ApiError::bad(
                    "session",
                    "after_seq and offset_chars resume a session: name it",
                ));
            }
            return Ok(None);
        };
        let after_seq = self.after_seq.unwrap_or(0);
        if after_seq < 0 {
            return Err(ApiError::bad("after_seq", "must be at least 0"));
        }
        Ok(Some(ResumePoint {
            session_id: SessionId(session),
            after_seq,
            offset_chars: self.offset_chars.unwrap_or(0),
        }))
    }
}

/// Subscribes to the account's notifications over a WebSocket. The service pings it every
/// `ws_ping_interval_ms` and closes it, saying why in the close frame, when the client answered
/// no ping for a whole interval, fell `ws_queue_max` updates behind, or its bearer token expired
/// or was revoked.
///
/// A client that reconnects resumes a session of its account with `session`, `after_seq` (the
/// last seq it holds) and `offset_chars` (how much of the response in flight it holds). Before
/// any other update of that session it gets the committed events after `after_seq` (`events`
/// updates, in order), then the text in flight it lacks (one `text-delta`: past
/// `offset_chars` while the response it held part of still streams, from 0 when that response
/// was committed since), then the live updates, none of them repeating the catch-up: every
/// event and every char once. Another account's session, or an unknown one, is refused (404)
/// before the upgrade.
#[utoipa::path(
    params(SubscribeQuery),
    responses(
        (status = 101, description = "Switching to the WebSocket protocol"),
        (status = 400, description = "Not a WebSocket upgrade, or a resume point that is not \
                                      one", body = ErrorBody),
        (status = 401, body = ErrorBody),
        (status = 404, description = "The session to resume is not the account's", body = ErrorBody),
        (status = 429, description = "The account (ws_per_account_max) or the token \
                                      (ws_per_token_max) holds its most sockets", body = ErrorBody),
    ),
    tag = "subscriptions"
)]
#[get("/v1/subscribe")]
pub async fn subscribe(
    state: web::Data<AppState>,
    request: HttpRequest,
    query: crate::error::Query<SubscribeQuery>,
    payload: web::Payload,
) -> Result<HttpResponse, actix_web::Error> {
    let token = query
        .token
        .as_deref()
        .or_else(|| crate::auth::bearer_token(&request));
    let (caller, token_expires_at_ms) = match token {
        Some(token) => {
            let (account_id, expires_at_ms) = state
                .tokens
                .check_until(token, state.now_ms())
                .await?
                .ok_or_else(|| {
                    ApiError::Unauthorized("the token is unknown or expired".to_owned())
                })?;
            let caller = crate::auth::Caller {
                account_id,
                nonce: None,
            };
            (caller, Some(expires_at_ms))
        }
        None => (state.caller(&request, &[]).await?, None),
    };
    let resume = match query.resume_point()? {
        Some(point) => Some(resumable(&state.store, &caller, point).await?),
        None => None,
    };
    // A socket over a cap is refused before the signed upgrade's nonce is taken: the refusal
    // writes nothing.
    let subscription = state.subscribers.join(caller.account_id, token)?;
    state.take_nonce(&caller).await?;
    let (response, session, incoming) = actix_ws::handle(&request, payload)?;
    let token_expires_in = token_expires_at_ms.map(|expires_at_ms| {
        Duration::from_millis(u64::try_from(expires_at_ms - state.now_ms()).unwrap_or(0))
    });
    let socket = Socket {
        session,
        incoming,
        subscription,
        resume,
        draining: state.draining.clone(),
        ping_interval: state.subscribers.limits().ping_interval,
        close_wait: state.subscribers.limits().close_wait,
        token_expires_at: token_expires_in.map(|wait| tokio::time::Instant::now() + wait),
    };
    actix_web::rt::spawn(socket.run());
    Ok(response)
}

/// `point`, checked: in a session of the caller's (404 otherwise), at a seq its log holds.
async fn resumable(
    store: &Store,
    caller: &crate::auth::Caller,
    point: ResumePoint,
) -> Result<Resume, ApiError> {
    match store.get_session(point.session_id).await? {
        Some(session) if session.account_id == caller.account_id => {}
        _ => return Err(ApiError::NotFound("session")),
    }
    if point.after_seq > 0
        && store
            .read_events(point.session_id, point.after_seq, point.after_seq, 1)
            .await?
            .is_empty()
    {
        return Err(ApiError::bad(
            "after_seq",
            "the session's log ends before it: resume from a seq you were sent",
        ));
    }
    Ok(Resume {
        point,
        store: store.clone(),
    })
}

/// One subscriber's socket and what ends it.
struct Socket {
    session: actix_ws::Session,
    incoming: actix_ws::MessageStream,
    subscription: Subscription,
    /// The session it resumes, and where.
    resume: Option<Resume>,
    draining: tokio::sync::watch::Receiver<bool>,
    ping_interval: Duration,
    /// How long its close frame waits for room.
    close_wait: Duration,
    /// When the bearer token it was opened with expires.
    token_expires_at: Option<tokio::time::Instant>,
}

/// A session to resume, and the store to read its catch-up from.
struct Resume {
    point: ResumePoint,
    store: Store,
}

/// How sending one frame went.
enum Sending {
    Done,
    /// The client went away.
    Gone,
    /// The service wants the socket closed, and the send was given up.
    Stopped(Closing),
}

impl Socket {
    /// Sends the socket its updates, answers and sends pings, until the client leaves or the
    /// service closes it with a reason. Every send gives way to a reason to close, so a client
    /// that stopped reading never holds this task. A socket the service closed keeps its place
    /// among its account's sockets until its client goes away: one that stops reading cannot
    /// open more.
    async fn run(self) {
        let Socket {
            mut session,
            mut incoming,
            subscription,
            resume,
            mut draining,
            ping_interval,
            close_wait,
            token_expires_at,
        } = self;
        // What is left of the subscription (its place among the account's sockets) is given up
        // when this task ends.
        let Subscription {
            mut updates,
            closing,
            ..
        } = subscription;
        let mut draining_too = draining.clone();
        let stop = async move {
            let expiry = async {
                match token_expires_at {
                    Some(at) => tokio::time::sleep_until(at).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                Ok(closing) = closing => closing,
                Ok(_) = draining.wait_for(|draining| *draining) => Closing::Draining,
                () = expiry => Closing::TokenExpired,
                else => std::future::pending().await,
            }
        };
        tokio::pin!(stop);
        // The catch-up of a resumed session first, while the live feed queues; then the seam
        // that keeps what was queued from repeating it.
        let mut seam = None;
        // How the catch-up ended the socket, when it did: with the service's reason, or none
        // when the client went.
        let mut ended: Option<Option<Closing>> = None;
        if let Some(resume) = resume {
            match catch_up(&mut session, &mut updates, &resume, &mut stop).await {
                Ok(caught_up) => seam = Some(caught_up),
                Err(Sending::Stopped(closing)) => ended = Some(Some(closing)),
                Err(Sending::Done | Sending::Gone) => ended = Some(None),
            }
        }
        let mut pings =
            tokio::time::interval_at(tokio::time::Instant::now() + ping_interval, ping_interval);
        pings.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        // Whether the client said anything since the last ping.
        let mut heard = true;
        let closing: Option<Closing> = match ended {
            Some(closing) => closing,
            None => loop {
                let sent = tokio::select! {
                    biased;
                    closing = &mut stop => break Some(closing),
                    update = updates.recv() => match update {
                        Some(update) => match past_the_seam(&mut seam, update) {
                            Some(update) => send(&mut session, Message::Text(update.to_string().into()), &mut stop).await,
                            None => Sending::Done,
                        },
                        // Taken out by the service, which says why.
                        None => break Some((&mut stop).await),
                    },
                    message = incoming.recv() => {
                        heard = true;
                        match message {
                            Some(Ok(Message::Ping(bytes))) => send(&mut session, Message::Pong(bytes), &mut stop).await,
                            Some(Ok(Message::Close(_))) | None | Some(Err(_)) => Sending::Gone,
                            Some(Ok(_)) => Sending::Done,
                        }
                    }
                    _ = pings.tick() => {
                        if !heard {
                            break Some(Closing::NoPong { ping_interval_ms: ping_interval.as_millis() });
                        }
                        heard = false;
                        send(&mut session, Message::Ping(web::Bytes::new()), &mut stop).await
                    }
                };
                match sent {
                    Sending::Done => {}
                    // The client closed, or went: the close frame answers one that closed.
                    Sending::Gone => break None,
                    Sending::Stopped(closing) => break Some(closing),
                }
            },
        };
        let reason = closing.as_ref().map(|closing| actix_ws::CloseReason {
            code: closing.code(),
            description: Some(closing.description()),
        });
        // A client that reads nothing leaves no room for the close frame: it is given up after
        // a while (`--ws-close-wait-ms`).
        let _ = tokio::time::timeout(close_wait, session.close(reason)).await;
        if closing.is_some() {
            // The service closed it: its place is held until the client goes (or the service
            // stops).
            loop {
                tokio::select! {
                    message = incoming.recv() => match message {
                        Some(Ok(Message::Close(_))) | None | Some(Err(_)) => break,
                        Some(Ok(_)) => {}
                    },
                    _ = draining_too.wait_for(|draining| *draining) => break,
                }
            }
        }
    }
}

/// Events per `events` update of a catch-up.
const CATCH_UP_PAGE: usize = 200;

/// Sends a resumed session's catch-up: its events after the resume point, page by page, then the
/// text in flight the client lacks, then what the live feed queued meanwhile, past the seam.
/// The text in flight is read once the log is read to its end, and read again until the log
/// did not grow meanwhile, so that the two agree. Returns the seam for the updates to come;
/// how the socket ends when it does.
async fn catch_up(
    session: &mut actix_ws::Session,
    updates: &mut mpsc::Receiver<Arc<str>>,
    resume: &Resume,
    stop: &mut (impl std::future::Future<Output = Closing> + Unpin),
) -> Result<Seam, Sending> {
    let Resume { point, store } = resume;
    let session_id = point.session_id;
    let unreadable = |error: ApiError| {
        tracing::warn!(%session_id, %error, "a resumed session's catch-up could not be read");
        Sending::Stopped(Closing::CatchUpFailed)
    };
    let mut last_seq = point.after_seq;
    let mut response_seqs = Vec::new();
    let live = loop {
        loop {
            let events = store
                .read_events(session_id, last_seq + 1, i64::MAX, CATCH_UP_PAGE)
                .await
                .map_err(|error| unreadable(error.into()))?;
            let Some(last) = events.last() else { break };
            last_seq = last.seq;
            response_seqs.extend(
                events
                    .iter()
                    .filter(|event| event.role == Some(EventRole::Assistant))
                    .map(|event| event.seq),
            );
            let full = events.len() == CATCH_UP_PAGE;
            let update = Update::Events {
                session_id,
                events: events.into_iter().map(EventInfo::from).collect(),
            };
            send_update(session, &update, stop).await?;
            if !full {
                break;
            }
        }
        let live = crate::api::live_info(store, session_id)
            .await
            .map_err(unreadable)?;
        let grew = !store
            .read_events(session_id, last_seq + 1, i64::MAX, 1)
            .await
            .map_err(|error| unreadable(error.into()))?
            .is_empty();
        if !grew {
            break live;
        }
    };
    let caught_up = CatchUp {
        last_seq,
        response_seqs,
        live: live.map(|live| (RunId(live.run_id), live.text)),
    };
    if let Some(update) = live_delta(point, &caught_up) {
        send_update(session, &update, stop).await?;
    }
    let mut queued = Vec::new();
    while let Ok(text) = updates.try_recv() {
        if let Ok(update) = serde_json::from_str::<Update>(&text) {
            queued.push(update);
        }
    }
    let mut seam = Seam::new(session_id, &caught_up);
    for update in seam.buffered(&caught_up, queued) {
        send_update(session, &update, stop).await?;
    }
    Ok(seam)
}

/// Sends one update; how the socket ends when the send did not go.
async fn send_update(
    session: &mut actix_ws::Session,
    update: &Update,
    stop: &mut (impl std::future::Future<Output = Closing> + Unpin),
) -> Result<(), Sending> {
    let text = serde_json::to_string(update).unwrap_or_default();
    match send(session, Message::Text(text.into()), stop).await {
        Sending::Done => Ok(()),
        ended => Err(ended),
    }
}

/// A queued update as a resumed socket sends it, past its seam: `None` when the catch-up
/// covered it. Once the seam lets everything through, it is dropped.
fn past_the_seam(seam: &mut Option<Seam>, text: Arc<str>) -> Option<Arc<str>> {
    let Some(open) = seam.as_mut() else {
        return Some(text);
    };
    let Ok(update) = serde_json::from_str::<Update>(&text) else {
        return Some(text);
    };
    let kept = open.pass(update);
    if open.is_through() {
        *seam = None;
    }
    kept.and_then(|update| serde_json::to_string(&update).ok())
        .map(Arc::from)
}

/// Sends one frame, giving way to a reason to close.
async fn send(
    session: &mut actix_ws::Session,
    message: Message,
    stop: &mut (impl std::future::Future<Output = Closing> + Unpin),
) -> Sending {
    use futures::SinkExt as _;
    tokio::select! {
        biased;
        closing = stop => Sending::Stopped(closing),
        sent = session.send(message) => match sent {
            Ok(()) => Sending::Done,
            Err(_) => Sending::Gone,
        },
    }
}
