//! Bearer tokens for browsers: minted by a signed request, or once by the login link.

use actix_web::{HttpRequest, HttpResponse, get, post, web};
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
        .map_err(|refused| ApiError::Unauthorized(refused.to_string()))?;
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
