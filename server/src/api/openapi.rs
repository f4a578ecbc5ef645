//! The OpenAPI document: every route described, the web UI's pages added, `ActionRequest`
//! stated per verb; and what answers a request no route took (405 with `Allow`, or 404).

use actix_web::{HttpRequest, HttpResponse, web};
use seed_actors::Runtime;
use utoipa::OpenApi;

use super::{ByHandVerb, configure};
use crate::error::ErrorBody;

#[derive(OpenApi)]
#[openapi(
    info(
        title = "Seed",
        description = "A durable agent runtime. Requests are signed (RFC 9421: Signature-Input, \
                       Signature and Content-Digest, ed25519, keyid = the account id) or carry \
                       a bearer token minted by a signed POST /v1/tokens. A method a path does \
                       not offer is answered 405 with an Allow header naming those it does; a \
                       path no route has, 404."
    ),
    components(schemas(ErrorBody)),
    modifiers(&Security),
    security(("signature" = []), ("bearer" = []))
)]
struct ApiDoc;

struct Security;

impl utoipa::Modify for Security {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        use utoipa::openapi::security::{
            ApiKey, ApiKeyValue, HttpAuthScheme, HttpBuilder, SecurityScheme,
        };
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "signature",
            SecurityScheme::ApiKey(ApiKey::Header(ApiKeyValue::with_description(
                "Signature",
                "RFC 9421 signature over @method @authority @path @query content-digest, \
                 with Signature-Input and Content-Digest",
            ))),
        );
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build()),
        );
    }
}

/// The base document the routes are added to.
pub fn base_document() -> utoipa::openapi::OpenApi {
    ApiDoc::openapi()
}

/// The whole OpenAPI document, as the server serves it.
pub fn openapi() -> utoipa::openapi::OpenApi {
    use utoipa_actix_web::AppExt;
    let (_, mut document) = actix_web::App::new()
        .into_utoipa_app()
        .openapi(base_document())
        .configure(configure)
        .split_for_parts();
    document.paths.add_path_operation(
        "/v1/openapi.json",
        vec![utoipa::openapi::HttpMethod::Get],
        utoipa::openapi::path::OperationBuilder::new()
            .summary(Some("This document"))
            .tag("operations")
            .response(
                "200",
                utoipa::openapi::ResponseBuilder::new()
                    .description("The OpenAPI document")
                    .build(),
            )
            .security(utoipa::openapi::security::SecurityRequirement::default())
            .build(),
    );
    add_ui_pages(&mut document);
    add_transport_refusals(&mut document);
    document
}

/// Every operation that reads a body (those that document the 413 of one too large) may also
/// answer 408: the body did not arrive within the body timeout. And every operation may answer
/// 421: the request's Host names another service (`crate::guard`).
fn add_transport_refusals(document: &mut utoipa::openapi::OpenApi) {
    use utoipa::openapi::{ContentBuilder, Ref, ResponseBuilder};
    let error = |description: &str| {
        ResponseBuilder::new()
            .description(description)
            .content(
                "application/json",
                ContentBuilder::new()
                    .schema(Some(Ref::from_schema_name("ErrorBody")))
                    .build(),
            )
            .build()
    };
    let timeout = error("The body did not arrive within body_timeout_ms");
    let misdirected = error(
        "The request's Host names another service than this one (its listen address or \
         --public-url)",
    );
    for item in document.paths.paths.values_mut() {
        let operations = [
            &mut item.get,
            &mut item.put,
            &mut item.post,
            &mut item.delete,
            &mut item.patch,
        ];
        for operation in operations.into_iter().flatten() {
            let responses = &mut operation.responses.responses;
            if responses.contains_key("413") {
                responses.insert("408".to_owned(), timeout.clone().into());
            }
            responses.insert("421".to_owned(), misdirected.clone().into());
        }
    }
}

/// The web UI's routes (`crate::ui`), which answer without signing: the page at `/` and
/// `/s/{session_id}`, and its files at `/ui/{file}`. A method a path does not offer is
/// answered 405 with `Allow` (see the document's description).
fn add_ui_pages(document: &mut utoipa::openapi::OpenApi) {
    use utoipa::openapi::path::{OperationBuilder, ParameterBuilder, ParameterIn};
    use utoipa::openapi::{ContentBuilder, HttpMethod, Required, ResponseBuilder};
    let media = |content_type: &str| {
        content_type
            .split(';')
            .next()
            .unwrap_or(content_type)
            .trim()
            .to_owned()
    };
    let response = |description: &str, media_types: &[String]| {
        media_types
            .iter()
            .fold(
                ResponseBuilder::new().description(description),
                |builder, media_type| {
                    builder.content(media_type.as_str(), ContentBuilder::new().build())
                },
            )
            .build()
    };
    let html = vec!["text/html".to_owned()];
    let not_found = vec!["text/plain".to_owned(), "application/json".to_owned()];
    let mut file_types: Vec<String> = crate::ui::ASSETS
        .iter()
        .map(|(_, content_type, _)| media(content_type))
        .collect();
    file_types.sort();
    file_types.dedup();
    let path_parameter = |name: &str, description: &str| {
        ParameterBuilder::new()
            .name(name)
            .parameter_in(ParameterIn::Path)
            .required(Required::True)
            .description(Some(description))
            .schema(Some(
                utoipa::openapi::ObjectBuilder::new()
                    .schema_type(utoipa::openapi::schema::Type::String),
            ))
            .build()
    };
    let page = |parameter: Option<utoipa::openapi::path::Parameter>| {
        let mut operation = OperationBuilder::new()
            .summary(Some("The web UI's page"))
            .tag("ui")
            .response("200", response("The page", &html))
            .response("404", response("No such route", &not_found))
            .security(utoipa::openapi::security::SecurityRequirement::default());
        if let Some(parameter) = parameter {
            operation = operation.parameter(parameter);
        }
        operation.build()
    };
    document
        .paths
        .add_path_operation("/", vec![HttpMethod::Get], page(None));
    document.paths.add_path_operation(
        "/s/{session_id}",
        vec![HttpMethod::Get],
        page(Some(path_parameter(
            "session_id",
            "The session the page opens",
        ))),
    );
    document.paths.add_path_operation(
        "/ui/{file}",
        vec![HttpMethod::Get],
        OperationBuilder::new()
            .summary(Some("A file of the web UI"))
            .tag("ui")
            .parameter(path_parameter("file", "The file's name, e.g. app.js"))
            .response("200", response("The file", &file_types))
            .response("404", response("No such file", &not_found))
            .security(utoipa::openapi::security::SecurityRequirement::default())
            .build(),
    );
}

/// The document as served: [`openapi`], with `ActionRequest` stated exactly, one shape per
/// verb a person may run by hand with that verb's own argument schema (the one the API checks
/// arguments against), instead of "any object".
pub fn document_text(
    document: &utoipa::openapi::OpenApi,
    runtime: &Runtime,
) -> serde_json::Result<String> {
    let mut value = serde_json::to_value(document)?;
    let mut shapes = Vec::new();
    for verb in ByHandVerb::ALL {
        let Some(parameters) = runtime.verb_parameters_by_hand(verb.name()) else {
            continue;
        };
        // Arguments may be left out (they are `{}` then) only when the verb requires none.
        let requires_some = parameters["required"]
            .as_array()
            .is_some_and(|required| !required.is_empty());
        let required = if requires_some {
            serde_json::json!(["verb", "arguments"])
        } else {
            serde_json::json!(["verb"])
        };
        shapes.push(serde_json::json!({
            "type": "object",
            "properties": {
                "verb": { "type": "string", "enum": [verb.name()], "description": "The verb to run." },
                "arguments": parameters,
            },
            "required": required,
            "additionalProperties": false,
        }));
    }
    if let Some(schemas) = value
        .pointer_mut("/components/schemas")
        .and_then(|schemas| schemas.as_object_mut())
    {
        schemas.insert(
            "ActionRequest".to_owned(),
            serde_json::json!({
                "description": "A verb to run by hand, with its arguments as its schema says.",
                "oneOf": shapes,
            }),
        );
    }
    serde_json::to_string(&value)
}

/// Serves the document.
pub async fn openapi_json(document: web::Data<String>) -> HttpResponse {
    HttpResponse::Ok()
        .content_type("application/json")
        .body(document.get_ref().clone())
}

/// Every route of a document: its path template and the methods it answers.
pub fn routes_of(document: &utoipa::openapi::OpenApi) -> Vec<(String, Vec<String>)> {
    let value = serde_json::to_value(document).unwrap_or_default();
    let mut routes = Vec::new();
    if let Some(paths) = value["paths"].as_object() {
        for (path, item) in paths {
            let methods = item
                .as_object()
                .map(|item| {
                    item.keys()
                        .filter(|key| {
                            ["get", "put", "post", "delete", "patch", "head", "options"]
                                .contains(&key.as_str())
                        })
                        .map(|key| key.to_uppercase())
                        .collect()
                })
                .unwrap_or_default();
            routes.push((path.clone(), methods));
        }
    }
    routes
}

/// The methods a path answers, when it matches a route's template (`{name}` matches one
/// segment); `None` for a path no route has.
pub fn allowed_methods(routes: &[(String, Vec<String>)], path: &str) -> Option<Vec<String>> {
    let segments: Vec<&str> = path.split('/').collect();
    routes
        .iter()
        .find(|(template, _)| {
            let template: Vec<&str> = template.split('/').collect();
            template.len() == segments.len()
                && template.iter().zip(&segments).all(|(want, have)| {
                    (want.starts_with('{') && want.ends_with('}') && !have.is_empty())
                        || want == have
                })
        })
        .map(|(_, methods)| methods.clone())
}

/// What answers a request no route took: 405 with `Allow` when the path exists, else 404.
pub async fn no_route(
    request: HttpRequest,
    routes: web::Data<Vec<(String, Vec<String>)>>,
) -> HttpResponse {
    match allowed_methods(&routes, request.path()) {
        Some(methods) => HttpResponse::MethodNotAllowed()
            .insert_header(("Allow", methods.join(", ")))
            .json(ErrorBody {
                error: format!("{} is not allowed here", request.method()),
                field: None,
            }),
        None => HttpResponse::NotFound().json(ErrorBody {
            error: "no such route".to_owned(),
            field: None,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_document_routes_and_their_methods() {
        let routes = routes_of(&openapi());
        let allowed = |path: &str| allowed_methods(&routes, path);
        assert_eq!(
            allowed("/v1/sessions").map(|mut m| {
                m.sort();
                m
            }),
            Some(vec!["GET".to_owned(), "POST".to_owned()])
        );
        assert_eq!(
            allowed("/v1/sessions/abc/messages"),
            Some(vec!["POST".to_owned()])
        );
        assert_eq!(allowed("/v1/sessions//messages"), None);
        assert_eq!(allowed("/v1/nothing"), None);
        assert_eq!(allowed("/v1/openapi.json"), Some(vec!["GET".to_owned()]));
    }
}
