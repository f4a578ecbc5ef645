//! The caller's own account: removing it, with everything it holds.

use actix_web::{HttpRequest, HttpResponse, delete, web};

use super::{AppState, Body, fresh};
use crate::error::{ApiError, ErrorBody};

/// Removes the caller's account and everything it holds: its sessions (their turns in flight
/// are stopped), memory files and attachments. Its key signs nothing from then on, its bearer
/// tokens are revoked and its WebSockets closed. The service's own account (the one in
/// `local.key`) cannot be removed this way.
#[utoipa::path(
    responses(
        (status = 204, description = "The account and all it held are gone"),
        (status = 401, body = ErrorBody),
        (status = 409, description = "The service's own account", body = ErrorBody),
        (status = 413, description = "The body is too large", body = ErrorBody),
    ),
    tag = "auth"
)]
#[delete("/v1/account")]
pub(super) async fn delete_account(
    state: web::Data<AppState>,
    request: HttpRequest,
    body: Body,
) -> Result<HttpResponse, ApiError> {
    let caller = state.caller(&request, &body).await?;
    if caller.account_id == state.local_account_id {
        return Err(ApiError::Conflict(
            "this is the service's own account (local.key): it cannot be removed while the \
             service runs on it"
                .to_owned(),
        ));
    }
    let removed = fresh(
        state
            .store
            .delete_account_signed(caller.nonce.clone(), caller.account_id, state.now_ms())
            .await?,
    )?;
    // An account removed by a request a moment before: the caller is no one now.
    let Some(sessions) = removed else {
        return Err(ApiError::Unauthorized(
            "the account no longer exists".to_owned(),
        ));
    };
    state.keys.forget(caller.account_id);
    state.subscribers.close_account(
        caller.account_id,
        &crate::subscribers::Closing::AccountRemoved,
    );
    for session_id in sessions {
        state
            .runtime
            .session_deleted(session_id, caller.account_id)
            .await;
    }
    tracing::info!(account_id = %caller.account_id, "an account was removed");
    Ok(HttpResponse::NoContent().finish())
}
