//! A tool's result as the model reads it: MCP's `CallToolResult` as one text and the images
//! to send with it. Pure.
//!
//! - Each content block becomes a piece of text, in order, joined by a blank line:
//!   - text: as is;
//!   - an image a model can be shown (PNG, JPEG, GIF or WebP, its base64 sound, within
//!     [`RESULT_IMAGE_BYTES_MAX`] and the result's [`RESULT_IMAGES_MAX`]):
//!     `[image/png, 1234 bytes: attached]`, and the image goes in [`CallOutput::images`] (the
//!     verb keeps each as an attachment of the session and sends it where the model and its
//!     wire take images in tool results);
//!   - any other image, or audio: a note of its type and size, `[audio/wav, 1234 bytes: not
//!     shown]`, or why it is not (`too large`, `not valid base64`, `over N images`);
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

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use rmcp::model::{CallToolResult, ContentBlock, ResourceContents};
use seed_projections::attachments::IMAGE_MEDIA_TYPES;

use crate::limits::{RESULT_IMAGE_BYTES_MAX, RESULT_IMAGES_MAX, RESULT_TEXT_BYTES_MAX};

/// What a call returns to the model: its text, its images, and whether it is an error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallOutput {
    pub text: String,
    pub is_error: bool,
    /// The images to show the model, in the order the text names them.
    pub images: Vec<CallImage>,
}

/// An image a tool returned, decoded.
#[derive(Clone, PartialEq, Eq)]
pub struct CallImage {
    /// One of the media types a model is shown.
    pub media_type: String,
    pub bytes: Vec<u8>,
}

impl std::fmt::Debug for CallImage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CallImage")
            .field("media_type", &self.media_type)
            .field("bytes", &self.bytes.len())
            .finish()
    }
}

impl CallOutput {
    pub fn ok(text: impl Into<String>) -> CallOutput {
        CallOutput {
            text: text.into(),
            is_error: false,
            images: Vec::new(),
        }
    }

    pub fn error(text: impl Into<String>) -> CallOutput {
        CallOutput {
            text: text.into(),
            is_error: true,
            images: Vec::new(),
        }
    }
}

/// The text of a result with neither content nor structured content.
pub const NO_CONTENT: &str = "[no content]";

/// The bytes kept free for the note that ends a cut text (it is shorter; asserted).
const CUT_NOTE_BYTES_MAX: usize = 100;

/// The result as the model reads it (see the module docs).
pub fn render(result: &CallToolResult) -> CallOutput {
    let mut images = Vec::new();
    let mut pieces: Vec<String> = result
        .content
        .iter()
        .map(|block| render_block(block, &mut images))
        .collect();
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
        images,
    }
}

fn render_block(block: &ContentBlock, images: &mut Vec<CallImage>) -> String {
    match block {
        ContentBlock::Text(text) => text.text.clone(),
        ContentBlock::Image(image) => image_block(&image.mime_type, &image.data, images),
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

/// An image block: kept in `images` when a model can be shown it, and named in the text either
/// way.
fn image_block(mime_type: &str, base64: &str, images: &mut Vec<CallImage>) -> String {
    let media_type = mime_type.trim().to_ascii_lowercase();
    if !IMAGE_MEDIA_TYPES.contains(&media_type.as_str()) {
        return not_shown(mime_type, base64);
    }
    let size = base64_decoded_bytes(base64);
    let why_not = if size as u64 > RESULT_IMAGE_BYTES_MAX {
        format!("too large, over {RESULT_IMAGE_BYTES_MAX} bytes")
    } else if images.len() >= RESULT_IMAGES_MAX {
        format!("over {RESULT_IMAGES_MAX} images")
    } else {
        let digits: String = base64
            .chars()
            .filter(|c| !c.is_ascii_whitespace())
            .collect();
        match STANDARD.decode(digits) {
            Ok(bytes) => {
                let n_bytes = bytes.len();
                images.push(CallImage { media_type, bytes });
                return format!("[{mime_type}, {n_bytes} bytes: attached]");
            }
            Err(_) => "not valid base64".to_owned(),
        }
    };
    format!("[{mime_type}, {size} bytes: not shown, {why_not}]")
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
                "[image/png, 3 bytes: attached]\n\n{\"width\":1}",
                false,
            ),
            // Images a model is shown are attached (8 base64 digits, one padding: 5 bytes);
            // others, and audio, are noted.
            (
                json!({"content": [{"type": "image", "data": "aGVsbG8=", "mimeType": "image/png"}]}),
                "[image/png, 5 bytes: attached]",
                false,
            ),
            (
                json!({"content": [{"type": "image", "data": "aGVs\nbG8=", "mimeType": "Image/JPEG"}]}),
                "[Image/JPEG, 5 bytes: attached]",
                false,
            ),
            (
                json!({"content": [{"type": "image", "data": "aGVsbG8=", "mimeType": "image/svg+xml"}]}),
                "[image/svg+xml, 5 bytes: not shown]",
                false,
            ),
            (
                json!({"content": [{"type": "image", "data": "a*Vs", "mimeType": "image/png"}]}),
                "[image/png, 3 bytes: not shown, not valid base64]",
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
            let n_attached = text.matches(": attached]").count();
            let expected = (text, is_error, n_attached);
            if (output.text.as_str(), output.is_error, output.images.len()) != expected {
                failures.push(format!(
                    "{json}\n  expected: {expected:?}\n    actual: {output:?}"
                ));
            }
        }
        assert!(failures.is_empty(), "\n{}", failures.join("\n"));
    }

    /// An image's bytes are decoded; past the size cap or the count cap, an image is named,
    /// not attached.
    #[test]
    fn images_are_attached_within_their_caps() {
        let png = |data: &str| json!({"type": "image", "data": data, "mimeType": "image/png"});
        let output = render(&result(json!({"content": [png("aGVsbG8=")]})));
        assert_eq!(
            output.images,
            [CallImage {
                media_type: "image/png".to_owned(),
                bytes: b"hello".to_vec(),
            }]
        );

        let five: Vec<serde_json::Value> = (0..RESULT_IMAGES_MAX + 1)
            .map(|_| png("aGVsbG8="))
            .collect();
        let output = render(&result(json!({ "content": five })));
        assert_eq!(output.images.len(), RESULT_IMAGES_MAX);
        assert!(
            output.text.ends_with(&format!(
                "[image/png, 5 bytes: not shown, over {RESULT_IMAGES_MAX} images]"
            )),
            "{}",
            output.text
        );

        let big = STANDARD.encode(vec![0u8; RESULT_IMAGE_BYTES_MAX as usize + 3]);
        let output = render(&result(json!({"content": [png(&big)]})));
        assert!(output.images.is_empty());
        assert_eq!(
            output.text,
            format!(
                "[image/png, {} bytes: not shown, too large, over {RESULT_IMAGE_BYTES_MAX} bytes]",
                RESULT_IMAGE_BYTES_MAX + 3
            )
        );
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
