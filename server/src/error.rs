//! The API's errors: each a status and a JSON body `{"error": …, "field": …}` that says what to
//! fix. Internal failures are logged with their cause and shown as a plain 500.

use actix_web::http::StatusCode;
use actix_web::{HttpResponse, ResponseError};
use serde::Serialize;
use utoipa::ToSchema;

use crate::input::Invalid;

/// What an error response carries.
#[derive(Debug, Serialize, ToSchema)]
pub struct ErrorBody {
    /// What went wrong, for a person.
    pub error: String,
    /// The request field at fault, when one is.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error("unauthorized: {0}")]
    Unauthorized(String),
    #[error("{0} not found")]
    NotFound(&'static str),
    #[error("{}", .0.message)]
    BadRequest(Invalid),
    #[error("too many runs queued for this account (at most {0}); try again when some have run")]
    TooManyQueued(i64),
    /// Over a limit on what a client may hold at once (429), saying which.
    #[error("{0}")]
    TooMany(String),
    /// The request body did not arrive within the body timeout (408).
    #[error("the request body did not arrive within {timeout_ms} ms (body_timeout_ms)")]
    BodyTimeout { timeout_ms: u128 },
    /// Over a size limit of an attachment's (413), saying which.
    #[error("{0}")]
    OverLimit(String),
    #[error("the request body is larger than the service takes ({limit_bytes} bytes at most)")]
    TooLarge { limit_bytes: usize },
    /// The request is at odds with what is going on (409), saying what.
    #[error("{0}")]
    Conflict(String),
    #[error("the service is shutting down")]
    Unavailable,
    /// The store's database cannot be reached now (503), saying why; nothing was written.
    #[error("the database cannot be reached now ({0}); nothing was written; try again shortly")]
    DatabaseAway(String),
    /// This node lost the session's lease (it was paused or cut off past it): another node
    /// may run the session now (503); nothing was written.
    #[error("this node no longer holds the session; nothing was written; try again (another node)")]
    Fenced,
    /// The request's Host names another service than this one (421), saying which it answers
    /// for.
    #[error("{0}")]
    Misdirected(String),
    #[error("internal error")]
    Internal(#[source] anyhow::Error),
}

impl ApiError {
    pub fn bad(field: &str, message: impl Into<String>) -> ApiError {
        ApiError::BadRequest(Invalid::field(field, message))
    }
}

impl From<Invalid> for ApiError {
    fn from(invalid: Invalid) -> ApiError {
        ApiError::BadRequest(invalid)
    }
}

impl From<seed_store::Error> for ApiError {
    fn from(error: seed_store::Error) -> ApiError {
        match error.refusal() {
            Some(seed_store::Refusal::SessionDeleted) => ApiError::NotFound("session"),
            Some(seed_store::Refusal::Fenced) => ApiError::Fenced,
            _ if error.is_unavailable() => {
                tracing::warn!(%error, "the database cannot be reached");
                ApiError::DatabaseAway(error.to_string())
            }
            _ => ApiError::Internal(error.into()),
        }
    }
}

impl From<seed_actors::runtime::Error> for ApiError {
    fn from(error: seed_actors::runtime::Error) -> ApiError {
        use seed_actors::runtime::Error;
        match error {
            Error::SessionNotFound(_) => ApiError::NotFound("session"),
            Error::RunGone(_) => ApiError::NotFound("run"),
            Error::Closed => ApiError::Unavailable,
            Error::Store(error) => error.into(),
        }
    }
}

impl ResponseError for ApiError {
    fn status_code(&self) -> StatusCode {
        match self {
            ApiError::Unauthorized(_) => StatusCode::UNAUTHORIZED,
            ApiError::NotFound(_) => StatusCode::NOT_FOUND,
            ApiError::BadRequest(_) => StatusCode::BAD_REQUEST,
            ApiError::TooManyQueued(_) => StatusCode::TOO_MANY_REQUESTS,
            ApiError::TooMany(_) => StatusCode::TOO_MANY_REQUESTS,
            ApiError::BodyTimeout { .. } => StatusCode::REQUEST_TIMEOUT,
            ApiError::OverLimit(_) => StatusCode::PAYLOAD_TOO_LARGE,
            ApiError::TooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
            ApiError::Conflict(_) => StatusCode::CONFLICT,
            ApiError::Unavailable | ApiError::DatabaseAway(_) | ApiError::Fenced => {
                StatusCode::SERVICE_UNAVAILABLE
            }
            ApiError::Misdirected(_) => StatusCode::MISDIRECTED_REQUEST,
            ApiError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    fn error_response(&self) -> HttpResponse {
        if let ApiError::Internal(error) = self {
            tracing::error!(error = format!("{error:#}"), "request failed");
        }
        let field = match self {
            ApiError::BadRequest(invalid) => invalid.field.clone(),
            _ => None,
        };
        let mut response = HttpResponse::build(self.status_code());
        if matches!(self, ApiError::Unauthorized(_)) {
            response.insert_header(("WWW-Authenticate", "Signature, Bearer"));
        }
        response.json(ErrorBody {
            error: self.to_string(),
            field,
        })
    }
}

/// A query string parsed with the parameter at fault named (a 400 [`ApiError`] otherwise);
/// actix-web's own `Query` reports serde_urlencoded's message, which names none.
#[derive(Debug)]
pub struct Query<T>(pub T);

impl<T> std::ops::Deref for Query<T> {
    type Target = T;

    fn deref(&self) -> &T {
        &self.0
    }
}

impl<T: serde::de::DeserializeOwned> actix_web::FromRequest for Query<T> {
    type Error = ApiError;
    type Future = std::future::Ready<Result<Query<T>, ApiError>>;

    fn from_request(
        request: &actix_web::HttpRequest,
        _: &mut actix_web::dev::Payload,
    ) -> Self::Future {
        std::future::ready(
            crate::input::parse_query(request.query_string())
                .map(Query)
                .map_err(ApiError::BadRequest),
        )
    }
}
