//! Bearer tokens for browsers: minted by a signed request, or once by the login link; signed out
//! (revoked) with the token itself.

use actix_web::{HttpRequest, HttpResponse, delete, get, post, web};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::{AppState, Body};
use crate::error::{ApiError, ErrorBody};

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct TokenResponse {
    /// Send as `Authorization: Bearer …`, or as `?token=` on the WebSocket.
    pub token: String,
    pub expires_at_ms: i64,
}

/// Mints a short-lived bearer token for a browser; only a signed request may.
#[utoipa::path(
    responses(
        (status = 200, body = TokenResponse),
        (status = 401, body = ErrorBody),
        (status = 413, description = "The body is too large", body = ErrorBody),
        (status = 429, description = "The account holds its most tokens \
                                      (tokens_per_account_max)", body = ErrorBody),
    ),
    tag = "auth"
)]
#[post("/v1/tokens")]
pub(super) async fn mint_token(
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
    // The token is recorded with the request's nonce in one transaction: a mint over the
    // account's cap, or a replay, writes nothing.
    let (token, expires_at_ms) = super::fresh(
        state
            .tokens
            .mint(caller.nonce.clone(), caller.account_id, state.now_ms())
            .await?,
    )?;
    Ok(HttpResponse::Ok().json(TokenResponse {
        token,
        expires_at_ms,
    }))
}

/// Signs out: revokes the bearer token the request carries, and closes the WebSockets opened
/// with it. The token is refused from then on.
#[utoipa::path(
    responses(
        (status = 204, description = "The token is revoked"),
        (status = 401, description = "No bearer token, or one unknown or expired: a signed \
                                      request has no token to sign out", body = ErrorBody),
        (status = 413, description = "The body is too large", body = ErrorBody),
    ),
    tag = "auth"
)]
#[delete("/v1/tokens/current")]
pub(super) async fn revoke_token(
    state: web::Data<AppState>,
    request: HttpRequest,
    body: Body,
) -> Result<HttpResponse, ApiError> {
    let caller = state.caller(&request, &body).await?;
    let token = crate::auth::bearer_token(&request)
        .filter(|_| caller.nonce.is_none())
        .ok_or_else(|| {
            ApiError::Unauthorized(
                "a token is signed out with that token (Authorization: Bearer …); a signed \
                 request has none"
                    .to_owned(),
            )
        })?;
    if !state.tokens.revoke(token, state.now_ms()).await? {
        return Err(ApiError::Unauthorized(
            "the token is unknown or expired".to_owned(),
        ));
    }
    state
        .subscribers
        .close_token(token, &crate::subscribers::Closing::TokenRevoked);
    Ok(HttpResponse::NoContent().finish())
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct LoginQuery {
    /// The one-time code `seed serve` printed.
    pub code: String,
}

/// The one-time login link `seed serve` prints: mints a token for the browser, once, before
/// the link expires (`--login-code-ttl-secs`).
#[utoipa::path(
    params(LoginQuery),
    responses(
        (status = 200, description = "Signed in", content_type = "text/html"),
        (status = 400, body = ErrorBody),
        (status = 401, description = "The link was used, is unknown or has expired", body = ErrorBody),
    ),
    tag = "auth"
)]
#[get("/login")]
pub(super) async fn login(
    state: web::Data<AppState>,
    query: crate::error::Query<LoginQuery>,
) -> Result<HttpResponse, ApiError> {
    let account_id = state
        .tokens
        .take_login_code(&query.code, state.now_ms())
        .await?
        .map_err(|refused| ApiError::Unauthorized(refused.to_string()))?;
    let (token, expires_at_ms) =
        super::fresh(state.tokens.mint(None, account_id, state.now_ms()).await?)?;
    let lasts = crate::auth::describe_ms(state.tokens.ttl_ms());
    // The token travels in meta tags that `/ui/login.js` moves to localStorage (as `seed.token`)
    // before it opens the UI: the page runs no inline script, so the UI's CSP holds here too.
    let page = format!(
        "<!doctype html><meta charset=utf-8><title>Seed</title>\
         <meta name=seed.token content=\"{token}\">\
         <meta name=seed.token_expires_at_ms content=\"{expires_at_ms}\">\
         <meta name=seed.account content=\"{account_id}\">\
         <p>Signed in as account {account_id}. This browser's token lasts {lasts}. \
         <a href=/>Open Seed</a></p>\
         <script type=module src=/ui/login.js></script>"
    );
    Ok(crate::ui::with_security_headers(HttpResponse::Ok())
        .content_type("text/html; charset=utf-8")
        .insert_header(("Cache-Control", "no-store"))
        .body(page))
}
