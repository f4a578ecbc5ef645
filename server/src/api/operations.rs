//! For operators: liveness and Prometheus metrics.

use actix_web::{HttpResponse, get, web};

use super::AppState;
use crate::error::ApiError;

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
pub(super) async fn healthz(state: web::Data<AppState>) -> HttpResponse {
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
pub(super) async fn metrics_route(state: web::Data<AppState>) -> Result<HttpResponse, ApiError> {
    let text = crate::metrics::render(&state).await?;
    Ok(HttpResponse::Ok()
        .content_type("text/plain; version=0.0.4")
        .body(text))
}
