//! The WebSocket `/v1/subscribe`: session-change and account-change notifications and the text
//! deltas of turns in flight, for the signed-in account's sessions only. Sign the upgrade
//! request, or pass a bearer token (header, or `?token=` where a browser cannot set headers).
//! Each message is one JSON object with a `type`.

use std::time::Duration;

use actix_web::{HttpRequest, HttpResponse, get, web};
use actix_ws::Message;
use seed_actors::bus::{Notification, SeqRange};
use seed_events::{AccountId, SessionId};
use serde::Serialize;

use crate::api::AppState;
use crate::error::{ApiError, ErrorBody};
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
        }
    }
}

#[derive(Debug, serde::Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct SubscribeQuery {
    /// A bearer token, for clients that cannot set headers.
    pub token: Option<String>,
}

/// Subscribes to the account's notifications over a WebSocket. The service pings it every
/// `ws_ping_interval_ms` and closes it, saying why in the close frame, when the client answered
/// no ping for a whole interval, fell `ws_queue_max` updates behind, or its bearer token expired
/// or was revoked.
#[utoipa::path(
    params(SubscribeQuery),
    responses(
        (status = 101, description = "Switching to the WebSocket protocol"),
        (status = 400, description = "Not a WebSocket upgrade"),
        (status = 401, body = ErrorBody),
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
        draining: state.draining.clone(),
        ping_interval: state.subscribers.limits().ping_interval,
        token_expires_at: token_expires_in.map(|wait| tokio::time::Instant::now() + wait),
    };
    actix_web::rt::spawn(socket.run());
    Ok(response)
}

/// One subscriber's socket and what ends it.
struct Socket {
    session: actix_ws::Session,
    incoming: actix_ws::MessageStream,
    subscription: Subscription,
    draining: tokio::sync::watch::Receiver<bool>,
    ping_interval: Duration,
    /// When the bearer token it was opened with expires.
    token_expires_at: Option<tokio::time::Instant>,
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
            mut draining,
            ping_interval,
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
        let mut pings =
            tokio::time::interval_at(tokio::time::Instant::now() + ping_interval, ping_interval);
        pings.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        // Whether the client said anything since the last ping.
        let mut heard = true;
        let closing: Option<Closing> = loop {
            let sent = tokio::select! {
                biased;
                closing = &mut stop => break Some(closing),
                update = updates.recv() => match update {
                    Some(update) => send(&mut session, Message::Text(update.to_string().into()), &mut stop).await,
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
        };
        let reason = closing.as_ref().map(|closing| actix_ws::CloseReason {
            code: closing.code(),
            description: Some(closing.description()),
        });
        // A client that reads nothing leaves no room for the close frame: it is given up after
        // a while.
        let _ = tokio::time::timeout(CLOSE_FRAME_WAIT, session.close(reason)).await;
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

/// How long a close frame waits for room in the socket.
const CLOSE_FRAME_WAIT: Duration = Duration::from_secs(5);

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
