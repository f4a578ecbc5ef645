//! The WebSocket `/v1/subscribe`: session-change and account-change notifications and the text
//! deltas of turns in flight, for the signed-in account's sessions only. Sign the upgrade
//! request, or pass a bearer token (header, or `?token=` where a browser cannot set headers).
//! Each message is one JSON object with a `type`.

use std::collections::HashMap;

use actix_web::{HttpRequest, HttpResponse, get, web};
use futures::StreamExt;
use seed_actors::bus::{Notification, SeqRange};
use seed_events::{AccountId, SessionId};
use serde::Serialize;

use crate::api::AppState;
use crate::error::{ApiError, ErrorBody};

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
    fn of(notification: Notification) -> Update {
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

/// Subscribes to the account's notifications over a WebSocket.
#[utoipa::path(
    params(SubscribeQuery),
    responses(
        (status = 101, description = "Switching to the WebSocket protocol"),
        (status = 400, description = "Not a WebSocket upgrade"),
        (status = 401, body = ErrorBody),
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
    let account_id = match &query.token {
        Some(token) => state
            .tokens
            .check(token, state.now_ms())
            .ok_or_else(|| ApiError::Unauthorized("the token is unknown or expired".to_owned()))?,
        None => {
            let caller = state.caller(&request, &[]).await?;
            state.take_nonce(&caller).await?;
            caller.account_id
        }
    };
    let (response, mut session, mut incoming) = actix_ws::handle(&request, payload)?;
    let mut notifications = state
        .runtime
        .publisher()
        .subscribe()
        .await
        .ok_or(ApiError::Unavailable)?;
    let mut draining = state.draining.clone();
    let store = state.store.clone();
    actix_web::rt::spawn(async move {
        // Whose each session is, as far as this subscriber has asked.
        let mut ours: HashMap<SessionId, bool> = HashMap::new();
        loop {
            tokio::select! {
                notification = notifications.next() => {
                    let Some(notification) = notification else { break };
                    let session_id = match &notification {
                        Notification::SessionChanged { session_id, .. }
                        | Notification::TextDelta { session_id, .. }
                        | Notification::ToolCall { session_id, .. }
                        | Notification::RunFinished { session_id, .. } => Some(*session_id),
                        Notification::AccountChanged { account_id: owner, .. }
                        | Notification::SessionDeleted { account_id: owner, .. } => {
                            if *owner != account_id {
                                continue;
                            }
                            None
                        }
                    };
                    if let Some(session_id) = session_id {
                        let mine = match ours.get(&session_id) {
                            Some(mine) => *mine,
                            None => {
                                let owner = crate::api::session_owner(&store, session_id).await;
                                let Some(owner) = owner else { continue };
                                let mine = owner == account_id;
                                ours.insert(session_id, mine);
                                mine
                            }
                        };
                        if !mine {
                            continue;
                        }
                    }
                    let Ok(text) = serde_json::to_string(&Update::of(notification)) else { continue };
                    if session.text(text).await.is_err() {
                        break;
                    }
                }
                message = incoming.recv() => match message {
                    Some(Ok(actix_ws::Message::Ping(bytes))) => {
                        if session.pong(&bytes).await.is_err() {
                            break;
                        }
                    }
                    Some(Ok(actix_ws::Message::Close(_))) | None | Some(Err(_)) => break,
                    Some(Ok(_)) => {}
                },
                _ = draining.wait_for(|draining| *draining) => break,
            }
        }
        let _ = session.close(None).await;
    });
    Ok(response)
}
