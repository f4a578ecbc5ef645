//! The web UI: plain ES modules, HTML and CSS under `server/ui/`, embedded in the binary and
//! served at `/` (and `/s/{session_id}`, the same page) and `/ui/{file}`, with a strict content
//! security policy: the page loads scripts, styles and connections from this origin only, so
//! nothing is fetched from outside and no model text can run as script.

use actix_web::{HttpRequest, HttpResponse, HttpResponseBuilder, web};

/// The policy every UI page and asset is served with.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; \
     style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; \
     form-action 'self'; frame-ancestors 'none'";

/// The embedded files: name under `/ui/`, content type, bytes.
pub const ASSETS: &[(&str, &str, &str)] = &[
    (
        "index.html",
        "text/html; charset=utf-8",
        include_str!("../ui/index.html"),
    ),
    (
        "app.js",
        "text/javascript; charset=utf-8",
        include_str!("../ui/app.js"),
    ),
    (
        "api.js",
        "text/javascript; charset=utf-8",
        include_str!("../ui/api.js"),
    ),
    (
        "attachments.js",
        "text/javascript; charset=utf-8",
        include_str!("../ui/attachments.js"),
    ),
    (
        "transcript.js",
        "text/javascript; charset=utf-8",
        include_str!("../ui/transcript.js"),
    ),
    (
        "markdown.js",
        "text/javascript; charset=utf-8",
        include_str!("../ui/markdown.js"),
    ),
    (
        "logic.js",
        "text/javascript; charset=utf-8",
        include_str!("../ui/logic.js"),
    ),
    (
        "forms.js",
        "text/javascript; charset=utf-8",
        include_str!("../ui/forms.js"),
    ),
    (
        "palette.js",
        "text/javascript; charset=utf-8",
        include_str!("../ui/palette.js"),
    ),
    (
        "modelpicker.js",
        "text/javascript; charset=utf-8",
        include_str!("../ui/modelpicker.js"),
    ),
    (
        "approvals.js",
        "text/javascript; charset=utf-8",
        include_str!("../ui/approvals.js"),
    ),
    (
        "elicitation.js",
        "text/javascript; charset=utf-8",
        include_str!("../ui/elicitation.js"),
    ),
    (
        "schedules.js",
        "text/javascript; charset=utf-8",
        include_str!("../ui/schedules.js"),
    ),
    (
        "runs.js",
        "text/javascript; charset=utf-8",
        include_str!("../ui/runs.js"),
    ),
    (
        "login.js",
        "text/javascript; charset=utf-8",
        include_str!("../ui/login.js"),
    ),
    (
        "signin.js",
        "text/javascript; charset=utf-8",
        include_str!("../ui/signin.js"),
    ),
    (
        "lineage.js",
        "text/javascript; charset=utf-8",
        include_str!("../ui/lineage.js"),
    ),
    (
        "branch.js",
        "text/javascript; charset=utf-8",
        include_str!("../ui/branch.js"),
    ),
    (
        "continue_dialog.js",
        "text/javascript; charset=utf-8",
        include_str!("../ui/continue_dialog.js"),
    ),
    (
        "style.css",
        "text/css; charset=utf-8",
        include_str!("../ui/style.css"),
    ),
    (
        "favicon.svg",
        "image/svg+xml",
        include_str!("../ui/favicon.svg"),
    ),
];

/// The security headers every UI response carries.
pub fn with_security_headers(mut builder: HttpResponseBuilder) -> HttpResponseBuilder {
    builder
        .insert_header(("Content-Security-Policy", CONTENT_SECURITY_POLICY))
        .insert_header(("X-Content-Type-Options", "nosniff"))
        .insert_header(("Referrer-Policy", "no-referrer"));
    builder
}

fn asset(name: &str) -> Option<(&'static str, &'static str)> {
    ASSETS
        .iter()
        .find(|(asset_name, _, _)| *asset_name == name)
        .map(|(_, content_type, body)| (*content_type, *body))
}

fn serve_asset(name: &str) -> HttpResponse {
    match asset(name) {
        Some((content_type, body)) => with_security_headers(HttpResponse::Ok())
            .content_type(content_type)
            // Small files: revalidated each load, so a new binary's UI is seen at once.
            .insert_header(("Cache-Control", "no-cache"))
            .body(body),
        None => HttpResponse::NotFound()
            .content_type("text/plain; charset=utf-8")
            .body("no such file"),
    }
}

async fn index() -> HttpResponse {
    serve_asset("index.html")
}

async fn file(request: HttpRequest) -> HttpResponse {
    let name = request.match_info().get("file").unwrap_or_default();
    serve_asset(name)
}

/// Registers the UI's routes on the plain app (they are pages, not API operations, so the
/// OpenAPI document leaves them out).
pub fn configure(config: &mut web::ServiceConfig) {
    config
        .route("/", web::get().to(index))
        .route("/s/{session_id}", web::get().to(index))
        .route("/ui/{file}", web::get().to(file));
}

#[cfg(test)]
mod tests {
    use super::*;
    use actix_web::{App, test as web_test};

    #[actix_web::test]
    async fn pages_and_assets_are_served_with_their_types_and_the_policy() {
        let app = web_test::init_service(App::new().configure(configure)).await;
        for (path, content_type) in [
            ("/", "text/html; charset=utf-8"),
            (
                "/s/0190f0e0-0000-7000-8000-000000000000",
                "text/html; charset=utf-8",
            ),
            ("/ui/app.js", "text/javascript; charset=utf-8"),
            ("/ui/style.css", "text/css; charset=utf-8"),
        ] {
            let response =
                web_test::call_service(&app, web_test::TestRequest::get().uri(path).to_request())
                    .await;
            assert_eq!(response.status(), 200, "{path}");
            let header = |name: &str| {
                response
                    .headers()
                    .get(name)
                    .and_then(|value| value.to_str().ok())
                    .map(str::to_owned)
            };
            assert_eq!(
                header("content-type").as_deref(),
                Some(content_type),
                "{path}"
            );
            assert_eq!(
                header("content-security-policy").as_deref(),
                Some(CONTENT_SECURITY_POLICY)
            );
            assert_eq!(header("x-content-type-options").as_deref(), Some("nosniff"));
        }
        let missing = web_test::call_service(
            &app,
            web_test::TestRequest::get()
                .uri("/ui/nothing.js")
                .to_request(),
        )
        .await;
        assert_eq!(missing.status(), 404);
    }

    #[test]
    fn every_module_a_file_imports_is_served() {
        let mut n_imports = 0;
        for (name, _, body) in ASSETS {
            for line in body.lines() {
                let Some((_, rest)) = line.split_once("from \"./") else {
                    continue;
                };
                let imported = rest.split_once('"').map_or(rest, |(imported, _)| imported);
                assert!(
                    asset(imported).is_some(),
                    "{name} imports {imported}, which is not served"
                );
                n_imports += 1;
            }
        }
        assert!(n_imports > 0, "the modules import one another");
    }

    #[test]
    fn no_asset_reaches_outside() {
        for (name, _, body) in ASSETS {
            for outside in ["http://", "https://", "//cdn", "@import"] {
                let hits: Vec<&str> = body
                    .lines()
                    .filter(|line| line.contains(outside))
                    .filter(|line| !line.trim_start().starts_with("//"))
                    .filter(|line| !line.contains("http://www.w3.org/2000/svg"))
                    .filter(|line| !line.contains("allowed-scheme"))
                    .collect();
                assert!(hits.is_empty(), "{name} reaches outside: {hits:?}");
            }
        }
    }
}
