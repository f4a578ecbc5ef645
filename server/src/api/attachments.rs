//! Attachments: files a person uploads to a session, to name in a message
//! (`POST …/messages` with `attachments: [id, …]`) and download again.
//!
//! An upload is the file's bytes as the raw request body (so a signature's `Content-Digest`
//! covers them as it covers any body), its type in `Content-Type` and its name in the `name`
//! query parameter. The bytes are sniffed ([`checked_media_type`]): a type the bytes say
//! otherwise is refused (400 naming `Content-Type`). A file larger than the service's
//! `attachment_bytes_max`, or one that would take the account's attachments past
//! `account_attachments_bytes_max`, is refused with 413, and nothing is written.

use actix_web::http::header;
use actix_web::{HttpRequest, HttpResponse, get, post, web};
use futures::StreamExt;
use seed_events::SessionId;
use seed_store::{AttachmentRow, NewAttachment, UploadOutcome};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};
use uuid::Uuid;

use super::{AppState, Body, fresh, session_path};
use crate::error::{ApiError, ErrorBody};
use crate::input::{self, Invalid};
use crate::limits::ATTACHMENT_NAME_CHARS_MAX;

/// An attachment as the API shows it.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct AttachmentInfo {
    /// What a message names it by (`attachments: [id]`), and `attachment:<id>` to the model.
    pub id: String,
    pub session_id: Uuid,
    pub name: String,
    /// The content type, as sniffed from the bytes where they tell it.
    pub media_type: String,
    pub size_bytes: i64,
    pub created_at_ms: i64,
}

impl From<AttachmentRow> for AttachmentInfo {
    fn from(row: AttachmentRow) -> AttachmentInfo {
        AttachmentInfo {
            id: row.id,
            session_id: row.session_id.0,
            name: row.name,
            media_type: row.media_type,
            size_bytes: row.size_bytes,
            created_at_ms: row.created_at_ms,
        }
    }
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct ListAttachmentsResponse {
    /// Oldest first.
    pub attachments: Vec<AttachmentInfo>,
}

/// A file's bytes, as the OpenAPI document describes a body of them (a binary string).
pub struct FileBytes;

impl utoipa::PartialSchema for FileBytes {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        use utoipa::openapi::schema::{KnownFormat, ObjectBuilder, SchemaFormat, Type};
        ObjectBuilder::new()
            .schema_type(Type::String)
            .format(Some(SchemaFormat::KnownFormat(KnownFormat::Binary)))
            .description(Some("A file's bytes"))
            .into()
    }
}

impl ToSchema for FileBytes {}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct UploadQuery {
    /// The file's name, as it is shown (1–255 characters; no `/`, `\` or control character).
    // The attributes cannot name `ATTACHMENT_NAME_CHARS_MAX`; a test in `limits` checks they
    // state it.
    #[param(
        min_length = 1,
        max_length = 255,
        pattern = r"^[^/\\\u0000-\u001F\u007F-\u009F]+$"
    )]
    pub name: String,
}

/// The content type to store for `bytes` declared as `declared`, or why they do not match
/// (the field named is `Content-Type`):
/// - bytes whose magic number names a binary type must be declared as that type (or as
///   `application/octet-stream`, which then takes the sniffed type);
/// - a type the sniffer knows but the bytes do not show (a "PNG" that is no PNG) is refused;
/// - a text type must be UTF-8;
/// - `application/octet-stream` bytes that are UTF-8 text are stored as `text/plain`;
/// - anything else is taken as declared.
pub fn checked_media_type(declared: &str, bytes: &[u8]) -> Result<String, Invalid> {
    let field = "Content-Type";
    let essence = seed_projections::attachments::essence(declared);
    let is_media_type = essence.split_once('/').is_some_and(|(kind, subtype)| {
        let token = |text: &str| {
            !text.is_empty()
                && text
                    .bytes()
                    .all(|byte| byte.is_ascii_alphanumeric() || b"!#$&-^_.+".contains(&byte))
        };
        token(kind) && token(subtype)
    });
    if !is_media_type {
        return Err(Invalid::field(
            field,
            format!("{declared:?} is not a content type (type/subtype)"),
        ));
    }
    const OCTET_STREAM: &str = "application/octet-stream";
    let sniffed = infer::get(bytes).filter(|kind| kind.matcher_type() != infer::MatcherType::Text);
    match sniffed {
        Some(kind) if essence == kind.mime_type() => Ok(essence),
        Some(kind) if essence == OCTET_STREAM => Ok(kind.mime_type().to_owned()),
        Some(kind) => Err(Invalid::field(
            field,
            format!(
                "the bytes are {}, not {essence} as Content-Type says",
                kind.mime_type()
            ),
        )),
        None if essence == OCTET_STREAM => Ok(if std::str::from_utf8(bytes).is_ok() {
            "text/plain".to_owned()
        } else {
            essence
        }),
        None if infer::is_mime_supported(&essence) => Err(Invalid::field(
            field,
            format!("the bytes are not {essence} as Content-Type says"),
        )),
        None if seed_projections::attachments::is_text_type(&essence) => {
            if std::str::from_utf8(bytes).is_err() {
                return Err(Invalid::field(
                    field,
                    format!("{essence} is text, and the bytes are not UTF-8"),
                ));
            }
            Ok(essence)
        }
        None => Ok(essence),
    }
}

/// Checks an attachment's name: shown to people and the model, never a path.
fn check_name(name: &str) -> Result<(), Invalid> {
    input::check_chars("name", name, 1, ATTACHMENT_NAME_CHARS_MAX)?;
    if name
        .chars()
        .any(|c| c == '/' || c == '\\' || c.is_control())
    {
        return Err(Invalid::field(
            "name",
            "a name has no '/', '\\' or control character",
        ));
    }
    Ok(())
}

/// The request body of an upload, read up to the service's `attachment_bytes_max`: more is
/// refused with 413 (a `Content-Length` over it before anything is read). As for any body, the
/// request's head is authenticated first and the body must arrive within the body timeout.
#[derive(Debug)]
pub struct UploadBody(pub web::Bytes);

impl actix_web::FromRequest for UploadBody {
    type Error = ApiError;
    type Future = futures::future::LocalBoxFuture<'static, Result<UploadBody, ApiError>>;

    fn from_request(request: &HttpRequest, payload: &mut actix_web::dev::Payload) -> Self::Future {
        let bytes_max = request
            .app_data::<web::Data<AppState>>()
            .map_or(0, |state| state.limits.attachment_bytes_max);
        let too_large = move || {
            ApiError::OverLimit(format!(
                "the file is larger than the {bytes_max} bytes an attachment may have \
                 (attachment_bytes_max)"
            ))
        };
        let declared = request
            .headers()
            .get(header::CONTENT_LENGTH)
            .and_then(|value| value.to_str().ok())
            .and_then(|value| value.parse::<usize>().ok());
        let mut payload = payload.take();
        let request = request.clone();
        Box::pin(async move {
            let state = super::authenticate_head(&request).await?;
            if declared.is_some_and(|length| length > bytes_max) {
                return Err(too_large());
            }
            let body = async {
                let mut body = web::BytesMut::with_capacity(declared.unwrap_or(0));
                while let Some(chunk) = payload.next().await {
                    let chunk = chunk.map_err(|error| {
                        ApiError::BadRequest(Invalid {
                            field: None,
                            message: format!("the body could not be read: {error}"),
                        })
                    })?;
                    if body.len() + chunk.len() > bytes_max {
                        return Err(too_large());
                    }
                    body.extend_from_slice(&chunk);
                }
                Ok(UploadBody(body.freeze()))
            };
            super::within_body_timeout(&state, body).await
        })
    }
}

/// Uploads a file to the session: the raw body is the file, `Content-Type` its type (checked
/// against the bytes), `name` its name. Name it in a message with `attachments: [id]`.
#[utoipa::path(
    params(("session_id" = Uuid, Path, description = "The session"), UploadQuery),
    request_body(
        content = FileBytes,
        content_type = "application/octet-stream",
        description = "The file's bytes, with its own Content-Type (any type; \
                       application/octet-stream when unknown)"
    ),
    responses(
        (status = 201, body = AttachmentInfo),
        (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody),
        (status = 404, body = ErrorBody),
        (status = 413, description = "Over attachment_bytes_max, or the account's \
                                      account_attachments_bytes_max", body = ErrorBody),
    ),
    tag = "attachments"
)]
#[post("/v1/sessions/{session_id}/attachments")]
pub(super) async fn upload_attachment(
    state: web::Data<AppState>,
    request: HttpRequest,
    path: web::Path<Uuid>,
    query: crate::error::Query<UploadQuery>,
    body: UploadBody,
) -> Result<HttpResponse, ApiError> {
    let caller = state.caller(&request, &body.0).await?;
    let session_id = session_path(&path);
    state.own_session(&caller, session_id).await?;
    check_name(&query.name)?;
    let declared = request
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .ok_or_else(|| Invalid::field("Content-Type", "an upload says its type in Content-Type"))?;
    let media_type = checked_media_type(declared, &body.0)?;
    let limit_bytes = state.limits.account_attachments_bytes_max;
    let attachment = NewAttachment {
        session_id,
        id: Uuid::now_v7().to_string(),
        name: query.name.clone(),
        media_type,
        bytes: body.0.to_vec(),
        created_at_ms: state.now_ms(),
    };
    let outcome = state
        .store
        .add_attachment_signed(
            caller.nonce.clone(),
            caller.account_id,
            attachment,
            limit_bytes,
        )
        .await?;
    match fresh(outcome)? {
        UploadOutcome::Added(row) => Ok(HttpResponse::Created().json(AttachmentInfo::from(row))),
        UploadOutcome::NotFound => Err(ApiError::NotFound("session")),
        UploadOutcome::OverAccountLimit {
            used_bytes,
            limit_bytes,
        } => Err(ApiError::OverLimit(format!(
            "the account's attachments hold {used_bytes} bytes; with this file they would pass \
             their limit of {limit_bytes} bytes (account_attachments_bytes_max)"
        ))),
    }
}

/// The session's attachments, oldest first.
#[utoipa::path(
    params(("session_id" = Uuid, Path, description = "The session")),
    responses(
        (status = 200, body = ListAttachmentsResponse),
        (status = 401, body = ErrorBody),
        (status = 404, body = ErrorBody),
        (status = 413, description = "The body is too large", body = ErrorBody),
    ),
    tag = "attachments"
)]
#[get("/v1/sessions/{session_id}/attachments")]
pub(super) async fn list_attachments(
    state: web::Data<AppState>,
    request: HttpRequest,
    path: web::Path<Uuid>,
    body: Body,
) -> Result<HttpResponse, ApiError> {
    let caller = state.caller(&request, &body).await?;
    let session = state.own_session(&caller, session_path(&path)).await?;
    let attachments = state.store.list_attachments(session.id).await?;
    state.take_nonce(&caller).await?;
    Ok(HttpResponse::Ok().json(ListAttachmentsResponse {
        attachments: attachments.into_iter().map(AttachmentInfo::from).collect(),
    }))
}

/// Downloads an attachment: its bytes, with its type, as a file to save (never shown inline).
#[utoipa::path(
    params(
        ("session_id" = Uuid, Path, description = "The session"),
        ("attachment_id" = String, Path, description = "The attachment"),
    ),
    responses(
        (status = 200, description = "The file's bytes, with its own Content-Type", content_type = "*/*", body = FileBytes),
        (status = 401, body = ErrorBody),
        (status = 404, body = ErrorBody),
        (status = 413, description = "The body is too large", body = ErrorBody),
    ),
    tag = "attachments"
)]
#[get("/v1/sessions/{session_id}/attachments/{attachment_id}")]
pub(super) async fn download_attachment(
    state: web::Data<AppState>,
    request: HttpRequest,
    path: web::Path<(Uuid, String)>,
    body: Body,
) -> Result<HttpResponse, ApiError> {
    let caller = state.caller(&request, &body).await?;
    let (session_id, attachment_id) = path.into_inner();
    let session = state.own_session(&caller, SessionId(session_id)).await?;
    let row = state
        .store
        .get_attachment(session.id, &attachment_id)
        .await?
        .ok_or(ApiError::NotFound("attachment"))?;
    let size_bytes = usize::try_from(row.size_bytes).unwrap_or(0);
    let bytes = state
        .store
        .read_attachment_bytes(&row, 0, size_bytes)
        .await?;
    state.take_nonce(&caller).await?;
    Ok(HttpResponse::Ok()
        .insert_header((header::CONTENT_TYPE, row.media_type.as_str()))
        .insert_header((header::CONTENT_DISPOSITION, content_disposition(&row.name)))
        .insert_header((header::X_CONTENT_TYPE_OPTIONS, "nosniff"))
        // Opened as a page anyway, it runs nothing.
        .insert_header((
            header::CONTENT_SECURITY_POLICY,
            "sandbox; default-src 'none'",
        ))
        .body(bytes))
}

/// `attachment; filename="…"; filename*=UTF-8''…`: the name as a download's file name, an
/// ASCII fallback (anything else `_`) and the exact name percent-encoded (RFC 6266).
pub fn content_disposition(name: &str) -> String {
    let fallback: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_graphic() && c != '"' && c != '\\' || c == ' ' {
                c
            } else {
                '_'
            }
        })
        .collect();
    let encoded: String = name
        .bytes()
        .map(|byte| {
            if byte.is_ascii_alphanumeric() || b"!#$&+-.^_`|~".contains(&byte) {
                (byte as char).to_string()
            } else {
                format!("%{byte:02X}")
            }
        })
        .collect();
    format!("attachment; filename=\"{fallback}\"; filename*=UTF-8''{encoded}")
}

#[cfg(test)]
mod tests {
    use super::*;

    const PNG: &[u8] = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR";

    #[test]
    fn the_declared_type_is_checked_against_the_bytes() {
        for (declared, bytes, expected) in [
            ("image/png", PNG, Ok("image/png")),
            ("application/octet-stream", PNG, Ok("image/png")),
            (
                "text/plain; charset=utf-8",
                b"hello".as_slice(),
                Ok("text/plain"),
            ),
            ("text/markdown", b"# hi".as_slice(), Ok("text/markdown")),
            // Text that starts like XML or HTML is still the text it says it is.
            (
                "text/plain",
                b"<?xml version=\"1.0\"?><a/>".as_slice(),
                Ok("text/plain"),
            ),
            (
                "application/octet-stream",
                b"plain words".as_slice(),
                Ok("text/plain"),
            ),
            (
                "application/octet-stream",
                b"\xff\xfe\x00".as_slice(),
                Ok("application/octet-stream"),
            ),
            (
                "application/x-custom",
                b"\x00\x01".as_slice(),
                Ok("application/x-custom"),
            ),
            (
                "image/jpeg",
                PNG,
                Err("the bytes are image/png, not image/jpeg as Content-Type says"),
            ),
            (
                "text/plain",
                PNG,
                Err("the bytes are image/png, not text/plain as Content-Type says"),
            ),
            (
                "image/png",
                b"not a png".as_slice(),
                Err("the bytes are not image/png as Content-Type says"),
            ),
            (
                "text/csv",
                b"a,\xff".as_slice(),
                Err("text/csv is text, and the bytes are not UTF-8"),
            ),
            (
                "png",
                PNG,
                Err("\"png\" is not a content type (type/subtype)"),
            ),
            ("", PNG, Err("\"\" is not a content type (type/subtype)")),
        ] {
            let checked = checked_media_type(declared, bytes);
            assert_eq!(
                checked
                    .as_deref()
                    .map_err(|invalid| invalid.message.as_str()),
                expected,
                "{declared}"
            );
            if let Err(invalid) = checked {
                assert_eq!(invalid.field.as_deref(), Some("Content-Type"));
            }
        }
    }

    #[test]
    fn the_document_states_the_limits_the_constants_hold() {
        let document = serde_json::to_value(crate::api::openapi()).expect("serializes");
        let upload = &document["paths"]["/v1/sessions/{session_id}/attachments"]["post"];
        let name = upload["parameters"]
            .as_array()
            .and_then(|parameters| {
                parameters
                    .iter()
                    .find(|parameter| parameter["name"] == "name")
            })
            .expect("the name parameter");
        assert_eq!(name["schema"]["maxLength"], ATTACHMENT_NAME_CHARS_MAX);
        assert_eq!(
            document["components"]["schemas"]["SendMessageRequest"]["properties"]["attachments"]["maxItems"],
            seed_projections::attachments::ATTACHMENTS_PER_MESSAGE_MAX
        );
    }

    #[test]
    fn names_and_their_download_header() {
        assert!(check_name("floor plan (v2).png").is_ok());
        for bad in ["", "../etc/passwd", "a\\b", "line\nbreak"] {
            assert_eq!(
                check_name(bad).map_err(|invalid| invalid.field),
                Err(Some("name".to_owned())),
                "{bad:?}"
            );
        }
        assert!(check_name(&"x".repeat(ATTACHMENT_NAME_CHARS_MAX + 1)).is_err());
        assert_eq!(
            content_disposition("plan \"v2\" é.png"),
            "attachment; filename=\"plan _v2_ _.png\"; filename*=UTF-8''plan%20%22v2%22%20%C3%A9.png"
        );
    }
}
