//! The server's limits on what a request may ask, in one place: the input checks, the error
//! texts and the API document state them from these constants. The limits on a session's own
//! text, which the verbs check too, live in [`seed_events::limits`] and are re-exported here.
//!
//! utoipa's attributes take only literals, so the document's `maxLength` and `maximum` (and the
//! field docs that say "1 to 500") are written out; a test below checks they state these.

pub use seed_events::limits::{SESSION_DESCRIPTION_CHARS_MAX, SESSION_TITLE_CHARS_MAX};

/// The most characters a message may have.
pub const MESSAGE_CHARS_MAX: usize = 64 * 1024;
/// The most characters a model name may have.
pub const MODEL_CHARS_MAX: usize = 200;
/// The most characters an attachment's name may have.
pub const ATTACHMENT_NAME_CHARS_MAX: usize = 255;
/// Sessions per page when the client does not say.
pub const PAGE_SESSIONS_DEFAULT: usize = 50;
/// Events per page when the client does not say.
pub const PAGE_EVENTS_DEFAULT: usize = 200;
/// The most sessions (or events) one page may hold.
pub const PAGE_ITEMS_MAX: usize = 500;
/// Runs a session's runs list holds when the client does not say.
pub const SESSION_RUNS_DEFAULT: usize = 50;
/// The most runs a session's runs list holds.
pub const SESSION_RUNS_MAX: usize = 500;
/// The fewest characters a request signature's nonce may have.
pub const NONCE_CHARS_MIN: usize = 16;
/// The most characters a request signature's nonce may have.
pub const NONCE_CHARS_MAX: usize = 128;

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    fn document() -> Value {
        serde_json::to_value(crate::api::openapi()).expect("serializes")
    }

    /// The query parameter `name` of `method path`.
    fn parameter<'a>(document: &'a Value, path: &str, method: &str, name: &str) -> &'a Value {
        document["paths"][path][method]["parameters"]
            .as_array()
            .and_then(|parameters| parameters.iter().find(|p| p["name"] == name))
            .unwrap_or_else(|| panic!("{method} {path} has no parameter {name}"))
    }

    #[test]
    fn the_document_states_the_limits_the_constants_hold() {
        let document = document();
        let schemas = &document["components"]["schemas"];
        let create = &schemas["CreateSessionRequest"]["properties"];
        assert_eq!(create["title"]["maxLength"], SESSION_TITLE_CHARS_MAX);
        assert_eq!(create["model"]["maxLength"], MODEL_CHARS_MAX);
        assert_eq!(
            schemas["SetModelRequest"]["properties"]["model"]["maxLength"],
            MODEL_CHARS_MAX
        );
        assert_eq!(
            schemas["SendMessageRequest"]["properties"]["text"]["maxLength"],
            MESSAGE_CHARS_MAX
        );
        let upload = "/v1/sessions/{session_id}/attachments";
        let name = parameter(&document, upload, "post", "name");
        assert_eq!(name["schema"]["maxLength"], ATTACHMENT_NAME_CHARS_MAX);
        assert!(
            name["description"]
                .as_str()
                .is_some_and(|text| text.contains(&format!("1–{ATTACHMENT_NAME_CHARS_MAX}"))),
            "{name}"
        );
        for (path, default, max) in [
            ("/v1/sessions", PAGE_SESSIONS_DEFAULT, PAGE_ITEMS_MAX),
            (
                "/v1/sessions/{session_id}/events",
                PAGE_EVENTS_DEFAULT,
                PAGE_ITEMS_MAX,
            ),
            (
                "/v1/sessions/{session_id}/runs",
                SESSION_RUNS_DEFAULT,
                SESSION_RUNS_MAX,
            ),
        ] {
            let limit = parameter(&document, path, "get", "limit");
            assert_eq!(limit["schema"]["maximum"], max, "{path}");
            let description = limit["description"].as_str().unwrap_or_default();
            assert!(
                description.contains(&format!("default {default}"))
                    && description.contains(&max.to_string()),
                "{path}: {description:?}"
            );
        }
    }

    /// The server's input check and the verbs refuse a title at the same length: what a person
    /// may name a session, the agent may name it too (`status`) and give a successor
    /// (`continue_session`).
    #[test]
    fn every_layer_takes_the_same_longest_title() {
        use seed_actors::Verb;
        let longest = "t".repeat(SESSION_TITLE_CHARS_MAX);
        let too_long = "t".repeat(SESSION_TITLE_CHARS_MAX + 1);
        let server = |title: &str| {
            crate::input::check_chars("title", title, 0, SESSION_TITLE_CHARS_MAX).is_ok()
        };
        let status_schema = seed_actors::verbs::status::Status.parameters();
        assert_eq!(
            status_schema["properties"]["title"]["maxLength"],
            SESSION_TITLE_CHARS_MAX
        );
        assert_eq!(
            status_schema["properties"]["description"]["maxLength"],
            SESSION_DESCRIPTION_CHARS_MAX
        );
        let status_says = format!("at most {SESSION_TITLE_CHARS_MAX} characters");
        assert!(
            seed_actors::verbs::status::Status
                .description()
                .contains(&status_says)
        );
        let continuation = |title: &str| {
            let arguments = serde_json::json!({
                "reason": "r", "title": title, "description": "d",
                "handoff": { "purpose": "p" }
            });
            seed_projections::continuation::parse_input(
                &arguments,
                seed_events::SessionId::from_u128(1),
            )
            .is_ok()
        };
        assert_eq!(
            (server(&longest), continuation(&longest)),
            (true, true),
            "the longest title"
        );
        assert_eq!(
            (server(&too_long), continuation(&too_long)),
            (false, false),
            "one character more"
        );
    }
}
