//! For operators: health (the service's and its database's) and Prometheus metrics.

use actix_web::{HttpResponse, get, web};

use super::AppState;
use crate::error::ApiError;

/// Health: whether the service answers and its database does, with the engine and the node.
/// The body is plain text, one line each: the state first (`ok`, `draining`, or `database
/// unreachable: WHY`), then `engine: sqlite|postgres` and `node: ID`, the boot id this process
/// claims runs with. A caller that reads only the status reads 200 as healthy. The database is
/// checked with one cheap read.
#[utoipa::path(
    responses(
        (status = 200, description = "Healthy: `ok`, then `engine: sqlite|postgres` and `node: ID` lines", content_type = "text/plain"),
        (status = 503, description = "Draining (`draining`: the service is shutting down) or the database does not answer (`database unreachable: WHY`), then the `engine:` and `node:` lines", content_type = "text/plain"),
    ),
    security(()),
    tag = "operations"
)]
#[get("/healthz")]
pub(super) async fn healthz(state: web::Data<AppState>) -> HttpResponse {
    let lines = |state_line: &str| {
        format!(
            "{state_line}\nengine: {}\nnode: {}\n",
            crate::serve::engine_name(&state.store),
            state.node_id
        )
    };
    if *state.draining.borrow() {
        return HttpResponse::ServiceUnavailable()
            .content_type("text/plain")
            .body(lines("draining"));
    }
    match state.store.ping().await {
        Ok(()) => HttpResponse::Ok()
            .content_type("text/plain")
            .body(lines("ok")),
        Err(error) => HttpResponse::ServiceUnavailable()
            .content_type("text/plain")
            .body(lines(&format!("database unreachable: {error}"))),
    }
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
