//! A tool's result as the model reads it: MCP's `CallToolResult` as one text. Pure.
//!
//! - Each content block becomes a piece of text, in order, joined by a blank line:
//!   - text: as is;
//!   - an image or audio: a note of its type and size, `[image/png, 1234 bytes: not shown]`
//!     (attachments are for later);
//!   - a resource link: `[resource link: NAME <URI>]`, with its type and description when
//!     given;
//!   - an embedded resource: `[resource URI]` and its text on the next line, or a note of its
//!     type and size when it is a blob.
//! - `structuredContent` is written as compact JSON after the content when the result has no
//!   text block. A text block is taken to say the same: the spec asks servers to send the
//!   serialized JSON as text too, for clients that read only content, and SDK servers wrap a
//!   plain return value as `{"result": …}` beside its text, which would say everything twice.
//! - No content and no structured content: [`NO_CONTENT`].
//! - `isError: true` makes it an error result.
//! - A text over [`RESULT_TEXT_BYTES_MAX`] is cut at a char boundary and ends with a note
//!   saying how many bytes were cut; the whole, note included, stays within the cap.

use rmcp::model::{CallToolResult, ContentBlock, ResourceContents};

use crate::limits::RESULT_TEXT_BYTES_MAX;

/// What a call returns to the model: its text and whether it is an error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallOutput {
    pub text: String,
    pub is_error: bool,
}

impl CallOutput {
    pub fn ok(text: impl Into<String>) -> CallOutput {
        CallOutput {
            text: text.into(),
            is_error: false,
        }
    }

    pub fn error(text: impl Into<String>) -> CallOutput {
        CallOutput {
            text: text.into(),
            is_error: true,
        }
    }
}

/// The text of a result with neither content nor structured content.
pub const NO_CONTENT: &str = "[no content]";

/// The bytes kept free for the note that ends a cut text (it is shorter; asserted).
const CUT_NOTE_BYTES_MAX: usize = 100;

/// The result as the model reads it (see the module docs).
pub fn render(result: &CallToolResult) -> CallOutput {
    let mut pieces: Vec<String> = result.content.iter().map(render_block).collect();
    let has_text = result
        .content
        .iter()
        .any(|block| matches!(block, ContentBlock::Text(_)));
    if let Some(structured) = result.structured_content.as_ref().filter(|_| !has_text) {
        pieces.push(structured.to_string());
    }
    let text = if pieces.is_empty() {
        NO_CONTENT.to_owned()
    } else {
        pieces.join("\n\n")
    };
    CallOutput {
        text: cap(text, RESULT_TEXT_BYTES_MAX),
        is_error: result.is_error == Some(true),
    }
}

fn render_block(block: &ContentBlock) -> String {
    match block {
        ContentBlock::Text(text) => text.text.clone(),
        ContentBlock::Image(image) => not_shown(&image.mime_type, &image.data),
        ContentBlock::Audio(audio) => not_shown(&audio.mime_type, &audio.data),
        ContentBlock::ResourceLink(link) => {
            let mut text = format!("[resource link: {} <{}>", link.name, link.uri);
            if let Some(mime_type) = &link.mime_type {
                text += &format!(", {mime_type}");
            }
            if let Some(description) = &link.description {
                text += &format!(": {description}");
            }
            text + "]"
        }
        ContentBlock::Resource(embedded) => match &embedded.resource {
            ResourceContents::TextResourceContents { uri, text, .. } => {
                format!("[resource {uri}]\n{text}")
            }
            ResourceContents::BlobResourceContents {
                uri,
                mime_type,
                blob,
                ..
            } => format!(
                "[resource {uri}: {}]",
                not_shown_inner(
                    mime_type.as_deref().unwrap_or("application/octet-stream"),
                    blob
                )
            ),
            other => format!(
                "[resource: {}]",
                serde_json::to_string(other).unwrap_or_default()
            ),
        },
        // A block of a kind newer than this client: its JSON, rather than nothing.
        other => serde_json::to_string(other).unwrap_or_default(),
    }
}

fn not_shown(mime_type: &str, base64: &str) -> String {
    format!("[{}]", not_shown_inner(mime_type, base64))
}

fn not_shown_inner(mime_type: &str, base64: &str) -> String {
    format!(
        "{mime_type}, {} bytes: not shown",
        base64_decoded_bytes(base64)
    )
}

/// The bytes `base64` decodes to, counted without decoding (whitespace and padding ignored).
fn base64_decoded_bytes(base64: &str) -> usize {
    let digits = base64
        .bytes()
        .filter(|byte| !byte.is_ascii_whitespace() && *byte != b'=')
        .count();
    digits * 3 / 4
}

/// `text` within `bytes_max`: cut at a char boundary, with a note of how much was cut.
pub fn cap(text: String, bytes_max: usize) -> String {
    if text.len() <= bytes_max {
        return text;
    }
    assert!(
        bytes_max > CUT_NOTE_BYTES_MAX,
        "a cap leaves room for its note"
    );
    let mut kept = bytes_max - CUT_NOTE_BYTES_MAX;
    while !text.is_char_boundary(kept) {
        kept -= 1;
    }
    let note = format!(
        "\n[cut: {} of {} bytes not shown, over the {bytes_max}-byte limit]",
        text.len() - kept,
        text.len()
    );
    assert!(
        note.len() <= CUT_NOTE_BYTES_MAX,
        "the cut note fits its room"
    );
    let mut capped = text;
    capped.truncate(kept);
    capped + &note
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// A result from its wire form.
    fn result(json: serde_json::Value) -> CallToolResult {
        serde_json::from_value(json).expect("a CallToolResult")
    }

    #[test]
    fn results_from_a_table() {
        // (the result's JSON, the text, whether it is an error)
        let rows: Vec<(serde_json::Value, &str, bool)> = vec![
            (
                json!({"content": [{"type": "text", "text": "Echo: hi"}]}),
                "Echo: hi",
                false,
            ),
            (
                json!({"content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}),
                "a\n\nb",
                false,
            ),
            (
                json!({"content": [{"type": "text", "text": "no such file"}], "isError": true}),
                "no such file",
                true,
            ),
            (json!({"content": [], "isError": false}), NO_CONTENT, false),
            (json!({"content": [], "isError": true}), NO_CONTENT, true),
            // Structured content: alone, said again as text, or beside other text.
            (
                json!({"content": [], "structuredContent": {"sum": 3}}),
                r#"{"sum":3}"#,
                false,
            ),
            (
                json!({"content": [{"type": "text", "text": "{\n  \"sum\": 3\n}"}],
                       "structuredContent": {"sum": 3}}),
                "{\n  \"sum\": 3\n}",
                false,
            ),
            (
                json!({"content": [{"type": "text", "text": "The sum is 3"}],
                       "structuredContent": {"sum": 3}}),
                "The sum is 3",
                false,
            ),
            (
                json!({"content": [{"type": "image", "data": "AAAA", "mimeType": "image/png"}],
                       "structuredContent": {"width": 1}}),
                "[image/png, 3 bytes: not shown]\n\n{\"width\":1}",
                false,
            ),
            // Images and audio: noted, not shown (8 base64 digits, one padding: 5 bytes).
            (
                json!({"content": [{"type": "image", "data": "aGVsbG8=", "mimeType": "image/png"}]}),
                "[image/png, 5 bytes: not shown]",
                false,
            ),
            (
                json!({"content": [{"type": "audio", "data": "AAAA", "mimeType": "audio/wav"}]}),
                "[audio/wav, 3 bytes: not shown]",
                false,
            ),
            // Resource links and embedded resources.
            (
                json!({"content": [{"type": "resource_link", "uri": "file:///tmp/a.txt", "name": "a.txt"}]}),
                "[resource link: a.txt <file:///tmp/a.txt>]",
                false,
            ),
            (
                json!({"content": [{"type": "resource_link", "uri": "test://1", "name": "one",
                                    "mimeType": "text/plain", "description": "the first"}]}),
                "[resource link: one <test://1>, text/plain: the first]",
                false,
            ),
            (
                json!({"content": [{"type": "resource", "resource":
                    {"uri": "test://2", "mimeType": "text/plain", "text": "two"}}]}),
                "[resource test://2]\ntwo",
                false,
            ),
            (
                json!({"content": [{"type": "resource", "resource":
                    {"uri": "test://3", "mimeType": "application/pdf", "blob": "AAAAAAAA"}}]}),
                "[resource test://3: application/pdf, 6 bytes: not shown]",
                false,
            ),
            (
                json!({"content": [{"type": "resource", "resource": {"uri": "test://4", "blob": "AA=="}}]}),
                "[resource test://4: application/octet-stream, 1 bytes: not shown]",
                false,
            ),
        ];
        let mut failures = Vec::new();
        for (json, text, is_error) in rows {
            let output = render(&result(json.clone()));
            let expected = CallOutput {
                text: text.to_owned(),
                is_error,
            };
            if output != expected {
                failures.push(format!(
                    "{json}\n  expected: {expected:?}\n    actual: {output:?}"
                ));
            }
        }
        assert!(failures.is_empty(), "\n{}", failures.join("\n"));
    }

    #[test]
    fn a_long_text_is_cut_at_a_char_boundary_with_a_note() {
        // (text, cap, expected)
        let long_ascii = "a".repeat(300);
        let long_wide = "é".repeat(150); // 300 bytes, two per char
        let rows: Vec<(&str, usize, String)> = vec![
            ("short", 200, "short".to_owned()),
            (
                &long_ascii,
                200,
                format!(
                    "{}\n[cut: 200 of 300 bytes not shown, over the 200-byte limit]",
                    "a".repeat(100)
                ),
            ),
            (
                &long_wide,
                201,
                format!(
                    "{}\n[cut: 200 of 300 bytes not shown, over the 201-byte limit]",
                    "é".repeat(50)
                ),
            ),
        ];
        for (text, bytes_max, expected) in rows {
            let capped = cap(text.to_owned(), bytes_max);
            assert_eq!(capped, expected);
            assert!(capped.len() <= bytes_max);
        }
    }

    #[test]
    fn a_result_over_the_limit_stays_within_it() {
        let big = "x".repeat(RESULT_TEXT_BYTES_MAX * 2);
        let output = render(&result(json!({"content": [{"type": "text", "text": big}]})));
        assert!(output.text.len() <= RESULT_TEXT_BYTES_MAX);
        assert!(output.text.ends_with(&format!(
            "bytes not shown, over the {RESULT_TEXT_BYTES_MAX}-byte limit]"
        )));
    }
}
