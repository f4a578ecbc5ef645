//! What a person's attached files become in the model's input, with no IO: the shell asks
//! [`reading`] what to read of each file, reads it, and hands the bytes to [`attachment_parts`],
//! which returns the parts that follow the message's text.
//!
//! Every attachment starts with the line `attachment:<id> (<name>, <type>, <size> bytes)`, so the
//! model can always name it (the `read` verb reads `attachment:<id>`). Then:
//! - an image, for a model that takes images: `: the image follows`, and the image itself;
//! - a text file: its text inside `<attachment_text>`, escaped like any text handed back inside
//!   a frame; the text of one message's files together is at most
//!   [`ATTACHMENT_TEXT_BYTES_MAX`], and a file cut there says so, with where to read on;
//! - anything else: `: not shown (<why>)`, a named reference.
//!
//! Limits are defined here, once; every text that states one is built from its constant.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use seed_providers::UserPart;

use crate::transcript::escape_action_framing;

/// The most text the attached files of one message add to the model's input, all together;
/// a file past it is cut (at a character boundary) and says where to read on.
pub const ATTACHMENT_TEXT_BYTES_MAX: usize = 32 * 1024;
/// The largest image sent to a model as an image (Anthropic refuses one whose base64 passes
/// 5 MB; this is 5 MB of base64); a larger one is a named reference.
pub const ATTACHMENT_IMAGE_BYTES_MAX: u64 = 3_750_000;
/// The most image bytes one message sends, all together; an image past it is a named reference.
pub const ATTACHMENT_IMAGES_MESSAGE_BYTES_MAX: u64 = 4 * ATTACHMENT_IMAGE_BYTES_MAX;
/// The most files one message may name.
pub const ATTACHMENTS_PER_MESSAGE_MAX: usize = 16;

/// The most bytes of an attachment one `read attachment:<id>` returns; a longer file is read on
/// with `fromByte`.
pub const ATTACHMENT_READ_BYTES_MAX: usize = 64 * 1024;

/// The image types both wires take.
pub const IMAGE_MEDIA_TYPES: [&str; 4] = ["image/png", "image/jpeg", "image/gif", "image/webp"];

/// Whether a content type is text a model can read as it is.
pub fn is_text_type(media_type: &str) -> bool {
    let media_type = essence(media_type);
    media_type.starts_with("text/")
        || media_type.ends_with("+json")
        || media_type.ends_with("+xml")
        || matches!(
            media_type.as_str(),
            "application/json"
                | "application/xml"
                | "application/javascript"
                | "application/x-javascript"
                | "application/yaml"
                | "application/x-yaml"
                | "application/toml"
                | "application/x-sh"
                | "application/sql"
                | "application/csv"
                | "application/x-ndjson"
        )
}

/// A content type without its parameters, in lowercase: `Text/Plain; charset=utf-8` is
/// `text/plain`.
pub fn essence(media_type: &str) -> String {
    media_type
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase()
}

/// Why a file is a named reference rather than shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NotShown {
    /// Neither text nor an image type both wires take.
    NotTextOrImage,
    /// Text by its type, but its bytes are not UTF-8.
    NotUtf8,
    /// An image, and the session's model takes none.
    ModelTakesNoImages,
    /// An image larger than [`ATTACHMENT_IMAGE_BYTES_MAX`].
    ImageTooLarge,
    /// An image past [`ATTACHMENT_IMAGES_MESSAGE_BYTES_MAX`], with the message's earlier ones.
    ImagesOverBudget,
    /// Text, after the message's earlier files used up [`ATTACHMENT_TEXT_BYTES_MAX`].
    TextOverBudget,
    /// The message names an attachment its session does not hold (or its file is gone).
    Missing,
}

impl NotShown {
    fn why(self) -> String {
        match self {
            NotShown::NotTextOrImage => "neither text nor an image".to_owned(),
            NotShown::NotUtf8 => "its bytes are not UTF-8 text".to_owned(),
            NotShown::ModelTakesNoImages => "this model takes no images".to_owned(),
            NotShown::ImageTooLarge => format!(
                "an image larger than {ATTACHMENT_IMAGE_BYTES_MAX} bytes is not sent to a model"
            ),
            NotShown::ImagesOverBudget => format!(
                "a message sends at most {ATTACHMENT_IMAGES_MESSAGE_BYTES_MAX} bytes of images"
            ),
            NotShown::TextOverBudget => format!(
                "a message's attached text is at most {ATTACHMENT_TEXT_BYTES_MAX} bytes, used up by \
                 the files before it"
            ),
            NotShown::Missing => "this session holds no such attachment".to_owned(),
        }
    }
}

/// The bytes standard base64 `data` decodes to, counted without decoding (whitespace and
/// padding passed over).
pub fn base64_decoded_bytes(data: &str) -> u64 {
    let digits = data
        .bytes()
        .filter(|byte| !byte.is_ascii_whitespace() && *byte != b'=')
        .count() as u64;
    digits * 3 / 4
}

/// What the shell reads of a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reading {
    /// The whole file, to send as an image.
    Image,
    /// Its first `bytes_max` bytes, to show as text.
    Text { bytes_max: usize },
    /// Nothing: it is a named reference.
    Nothing(NotShown),
}

/// What to read of a file of `media_type` and `size_bytes` for a model that does or does not
/// take images.
pub fn reading(media_type: &str, size_bytes: u64, takes_images: bool) -> Reading {
    let media_type = essence(media_type);
    if IMAGE_MEDIA_TYPES.contains(&media_type.as_str()) {
        return if !takes_images {
            Reading::Nothing(NotShown::ModelTakesNoImages)
        } else if size_bytes > ATTACHMENT_IMAGE_BYTES_MAX {
            Reading::Nothing(NotShown::ImageTooLarge)
        } else {
            Reading::Image
        };
    }
    if is_text_type(&media_type) {
        return Reading::Text {
            bytes_max: ATTACHMENT_TEXT_BYTES_MAX,
        };
    }
    Reading::Nothing(NotShown::NotTextOrImage)
}

/// One attached file as the shell read it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttachedFile {
    pub id: String,
    pub name: String,
    pub media_type: String,
    pub size_bytes: u64,
    pub content: AttachedContent,
}

/// What was read of a file, as [`reading`] asked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AttachedContent {
    /// The whole image.
    Image(Vec<u8>),
    /// The file's first bytes (all of them when it is no longer than was asked).
    Text(Vec<u8>),
    NotShown(NotShown),
}

impl AttachedFile {
    /// A file the message names that its session does not hold.
    pub fn missing(id: &str) -> AttachedFile {
        AttachedFile {
            id: id.to_owned(),
            name: "?".to_owned(),
            media_type: "?".to_owned(),
            size_bytes: 0,
            content: AttachedContent::NotShown(NotShown::Missing),
        }
    }

    fn header(&self) -> String {
        format!(
            "attachment:{} ({}, {}, {} bytes)",
            escape_action_framing(&self.id),
            escape_action_framing(&self.name),
            escape_action_framing(&self.media_type),
            self.size_bytes
        )
    }
}

/// The parts that follow a message's text for its attached `files`, in order, within the
/// message's budgets.
pub fn attachment_parts(files: &[AttachedFile]) -> Vec<UserPart> {
    let mut parts = Vec::new();
    let mut text_left = ATTACHMENT_TEXT_BYTES_MAX;
    let mut images_left = ATTACHMENT_IMAGES_MESSAGE_BYTES_MAX;
    let not_shown = |file: &AttachedFile, why: NotShown| UserPart::Text {
        text: format!("{}: not shown ({})", file.header(), why.why()),
    };
    for file in files {
        match &file.content {
            AttachedContent::Image(bytes) if bytes.len() as u64 > images_left => {
                parts.push(not_shown(file, NotShown::ImagesOverBudget));
            }
            AttachedContent::Image(bytes) => {
                images_left -= bytes.len() as u64;
                parts.push(UserPart::Text {
                    text: format!("{}: the image follows", file.header()),
                });
                parts.push(UserPart::Image {
                    media_type: essence(&file.media_type),
                    data: STANDARD.encode(bytes),
                });
            }
            AttachedContent::Text(_) if text_left == 0 => {
                parts.push(not_shown(file, NotShown::TextOverBudget));
            }
            AttachedContent::Text(bytes) => match utf8_prefix(bytes, text_left) {
                None => parts.push(not_shown(file, NotShown::NotUtf8)),
                Some(text) => {
                    text_left -= text.len();
                    let mut shown = format!(
                        "{}:\n<attachment_text>\n{}\n</attachment_text>",
                        file.header(),
                        escape_action_framing(text)
                    );
                    if (text.len() as u64) < file.size_bytes {
                        shown.push_str(&format!(
                            "\n(cut: the first {} of {} bytes are shown; a message's attached \
                             text is at most {ATTACHMENT_TEXT_BYTES_MAX} bytes; read \
                             attachment:{} with fromByte {} for the rest)",
                            text.len(),
                            file.size_bytes,
                            escape_action_framing(&file.id),
                            text.len()
                        ));
                    }
                    parts.push(UserPart::Text { text: shown });
                }
            },
            AttachedContent::NotShown(why) => parts.push(not_shown(file, *why)),
        }
    }
    parts
}

/// What `read attachment:<id>` answers for `bytes`, the file's bytes from `from_byte` on (at
/// most [`ATTACHMENT_READ_BYTES_MAX`]): a header line naming the file, then its text exactly as
/// it is; when more follows, a last line says which `fromByte` reads on. A file that is not
/// text, or whose bytes are not UTF-8, is an error saying so. `from_byte` inside a character
/// starts at the next one.
pub fn attachment_read_text(
    file: &AttachedFile,
    from_byte: u64,
    bytes: &[u8],
) -> Result<String, String> {
    let header = file.header();
    if !is_text_type(&file.media_type) {
        return Err(format!(
            "{header}: not text; it can be read only as the message that carries it shows it"
        ));
    }
    let skipped = bytes
        .iter()
        .take(3)
        .take_while(|byte| (**byte & 0b1100_0000) == 0b1000_0000)
        .count();
    let Some(text) = utf8_prefix(&bytes[skipped..], ATTACHMENT_READ_BYTES_MAX) else {
        return Err(format!("{header}: its bytes are not UTF-8 text"));
    };
    let start = from_byte + skipped as u64;
    let end = start + text.len() as u64;
    let mut answer = format!("{header}, bytes {start} to {end}:\n{text}");
    if end < file.size_bytes {
        answer.push_str(&format!(
            "\n(read on with fromByte {end}: one read returns at most {ATTACHMENT_READ_BYTES_MAX} bytes)"
        ));
    }
    Ok(answer)
}

/// The longest prefix of `bytes`, at most `bytes_max` long, that is whole UTF-8 text; `None`
/// when the bytes are not UTF-8 (a character cut at the end is not a fault: it is left out).
pub fn utf8_prefix(bytes: &[u8], bytes_max: usize) -> Option<&str> {
    let bytes = &bytes[..bytes.len().min(bytes_max)];
    match std::str::from_utf8(bytes) {
        Ok(text) => Some(text),
        // Only a character cut at the end (no invalid byte, and at most three left over).
        Err(error) if error.error_len().is_none() && bytes.len() - error.valid_up_to() < 4 => {
            std::str::from_utf8(&bytes[..error.valid_up_to()]).ok()
        }
        Err(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(
        id: &str,
        name: &str,
        media_type: &str,
        size: u64,
        content: AttachedContent,
    ) -> AttachedFile {
        AttachedFile {
            id: id.to_owned(),
            name: name.to_owned(),
            media_type: media_type.to_owned(),
            size_bytes: size,
            content,
        }
    }

    fn texts(parts: &[UserPart]) -> Vec<String> {
        parts
            .iter()
            .map(|part| match part {
                UserPart::Text { text } => text.clone(),
                UserPart::Image { media_type, data } => format!("[{media_type} {data}]"),
            })
            .collect()
    }

    #[test]
    fn what_to_read() {
        for (media_type, size, takes_images, expected) in [
            ("image/png", 10, true, Reading::Image),
            ("Image/JPEG", 10, true, Reading::Image),
            (
                "image/png",
                10,
                false,
                Reading::Nothing(NotShown::ModelTakesNoImages),
            ),
            (
                "image/webp",
                ATTACHMENT_IMAGE_BYTES_MAX + 1,
                true,
                Reading::Nothing(NotShown::ImageTooLarge),
            ),
            (
                "text/plain; charset=utf-8",
                1 << 30,
                true,
                Reading::Text {
                    bytes_max: ATTACHMENT_TEXT_BYTES_MAX,
                },
            ),
            (
                "application/vnd.api+json",
                5,
                false,
                Reading::Text {
                    bytes_max: ATTACHMENT_TEXT_BYTES_MAX,
                },
            ),
            (
                "image/svg+xml",
                5,
                true,
                Reading::Text {
                    bytes_max: ATTACHMENT_TEXT_BYTES_MAX,
                },
            ),
            (
                "application/pdf",
                5,
                true,
                Reading::Nothing(NotShown::NotTextOrImage),
            ),
            (
                "image/tiff",
                5,
                true,
                Reading::Nothing(NotShown::NotTextOrImage),
            ),
        ] {
            assert_eq!(
                reading(media_type, size, takes_images),
                expected,
                "{media_type}"
            );
        }
    }

    #[test]
    fn an_image_a_text_and_a_reference() {
        let parts = attachment_parts(&[
            file(
                "a1",
                "dot.png",
                "image/png",
                3,
                AttachedContent::Image(vec![1, 2, 3]),
            ),
            file(
                "a2",
                "notes.txt",
                "text/plain",
                24,
                AttachedContent::Text(b"hello </attachment_text>".to_vec()),
            ),
            file(
                "a3",
                "report.pdf",
                "application/pdf",
                9000,
                AttachedContent::NotShown(NotShown::NotTextOrImage),
            ),
            AttachedFile::missing("a4"),
        ]);
        assert_eq!(
            texts(&parts),
            [
                "attachment:a1 (dot.png, image/png, 3 bytes): the image follows",
                "[image/png AQID]",
                "attachment:a2 (notes.txt, text/plain, 24 bytes):\n<attachment_text>\nhello \
                 &lt;/attachment_text&gt;\n</attachment_text>",
                "attachment:a3 (report.pdf, application/pdf, 9000 bytes): not shown (neither \
                 text nor an image)",
                "attachment:a4 (?, ?, 0 bytes): not shown (this session holds no such attachment)",
            ]
        );
    }

    #[test]
    fn text_past_the_budget_is_cut_and_says_where_to_read_on() {
        let long = "é".repeat(ATTACHMENT_TEXT_BYTES_MAX); // two bytes each
        let read = long.as_bytes()[..ATTACHMENT_TEXT_BYTES_MAX - 1].to_vec();
        let parts = attachment_parts(&[
            file(
                "a1",
                "long.md",
                "text/markdown",
                long.len() as u64,
                AttachedContent::Text(read),
            ),
            file(
                "a2",
                "more.txt",
                "text/plain",
                3,
                AttachedContent::Text(b"abc".to_vec()),
            ),
        ]);
        let shown_texts = texts(&parts);
        let shown = ATTACHMENT_TEXT_BYTES_MAX - 2;
        assert!(
            shown_texts[0].ends_with(&format!(
                "\n</attachment_text>\n(cut: the first {shown} of {} bytes are shown; a \
                 message's attached text is at most {ATTACHMENT_TEXT_BYTES_MAX} bytes; read \
                 attachment:a1 with fromByte {shown} for the rest)",
                long.len()
            )),
            "{}",
            &shown_texts[0][shown_texts[0].len() - 300..]
        );
        // Two bytes of the budget are left: the next file gets them.
        assert_eq!(
            shown_texts[1],
            "attachment:a2 (more.txt, text/plain, 3 bytes):\n<attachment_text>\nab\n\
             </attachment_text>\n(cut: the first 2 of 3 bytes are shown; a message's attached \
             text is at most 32768 bytes; read attachment:a2 with fromByte 2 for the rest)"
        );
        let spent = attachment_parts(&[
            file(
                "a1",
                "long.txt",
                "text/plain",
                1 << 20,
                AttachedContent::Text(vec![b'x'; ATTACHMENT_TEXT_BYTES_MAX]),
            ),
            file(
                "a2",
                "more.txt",
                "text/plain",
                3,
                AttachedContent::Text(b"abc".to_vec()),
            ),
        ]);
        assert!(texts(&spent)[1].ends_with(&format!(
            "not shown (a message's attached text is at most {ATTACHMENT_TEXT_BYTES_MAX} bytes, \
             used up by the files before it)"
        )));
    }

    #[test]
    fn bytes_that_are_not_utf8_are_a_reference_and_images_have_a_budget() {
        let parts = attachment_parts(&[file(
            "a1",
            "data.csv",
            "text/csv",
            3,
            AttachedContent::Text(vec![b'a', 0xff, b'b']),
        )]);
        assert_eq!(
            texts(&parts),
            [
                "attachment:a1 (data.csv, text/csv, 3 bytes): not shown (its bytes are not UTF-8 text)"
            ]
        );
        let image = vec![0u8; ATTACHMENT_IMAGE_BYTES_MAX as usize];
        let files: Vec<AttachedFile> = (0..5)
            .map(|idx| {
                file(
                    &format!("a{idx}"),
                    "big.png",
                    "image/png",
                    ATTACHMENT_IMAGE_BYTES_MAX,
                    AttachedContent::Image(image.clone()),
                )
            })
            .collect();
        let parts = attachment_parts(&files);
        let n_images = parts
            .iter()
            .filter(|part| matches!(part, UserPart::Image { .. }))
            .count();
        assert_eq!(n_images, 4);
        assert!(texts(&parts).last().is_some_and(|text| text.ends_with(&format!(
            "not shown (a message sends at most {ATTACHMENT_IMAGES_MESSAGE_BYTES_MAX} bytes of images)"
        ))));
    }

    #[test]
    fn reading_an_attachment_from_a_byte() {
        let notes = file(
            "a1",
            "notes.md",
            "text/markdown",
            7,
            AttachedContent::Text(Vec::new()),
        );
        assert_eq!(
            attachment_read_text(&notes, 0, "héllo!".as_bytes()),
            Ok(
                "attachment:a1 (notes.md, text/markdown, 7 bytes), bytes 0 to 7:\nhéllo!"
                    .to_owned()
            )
        );
        // From inside the é: the next character.
        assert_eq!(
            attachment_read_text(&notes, 2, &"héllo!".as_bytes()[2..]),
            Ok("attachment:a1 (notes.md, text/markdown, 7 bytes), bytes 3 to 7:\nllo!".to_owned())
        );
        assert_eq!(
            attachment_read_text(&notes, 1, &"héllo!".as_bytes()[1..3]),
            Ok(
                "attachment:a1 (notes.md, text/markdown, 7 bytes), bytes 1 to 3:\né\n\
                (read on with fromByte 3: one read returns at most 65536 bytes)"
                    .to_owned()
            )
        );
        let long = file(
            "a2",
            "long.txt",
            "text/plain",
            100_000,
            AttachedContent::Text(Vec::new()),
        );
        let read =
            attachment_read_text(&long, 0, &vec![b'x'; ATTACHMENT_READ_BYTES_MAX]).expect("text");
        assert!(read.ends_with(&format!(
            "\n(read on with fromByte {ATTACHMENT_READ_BYTES_MAX}: one read returns at most {ATTACHMENT_READ_BYTES_MAX} bytes)"
        )));
        let image = file(
            "a3",
            "dot.png",
            "image/png",
            3,
            AttachedContent::Image(Vec::new()),
        );
        assert_eq!(
            attachment_read_text(&image, 0, &[1, 2, 3]),
            Err("attachment:a3 (dot.png, image/png, 3 bytes): not text; it can be read only as the message that carries it shows it".to_owned())
        );
    }

    #[test]
    fn base64_is_counted_in_the_bytes_it_decodes_to() {
        for bytes in [&b""[..], b"a", b"ab", b"abc", b"abcd", &[0xff; 1000]] {
            let data = STANDARD.encode(bytes);
            assert_eq!(base64_decoded_bytes(&data), bytes.len() as u64, "{data}");
        }
        assert_eq!(base64_decoded_bytes("iVBO\nRw0K\r\nGgo="), 8);
    }

    #[test]
    fn a_utf8_prefix() {
        assert_eq!(utf8_prefix("héllo".as_bytes(), 2), Some("h"));
        assert_eq!(utf8_prefix("héllo".as_bytes(), 3), Some("hé"));
        assert_eq!(utf8_prefix(b"abc", 10), Some("abc"));
        assert_eq!(utf8_prefix(&[b'a', 0xff], 10), None);
        assert_eq!(utf8_prefix(&[0xff, b'a'], 1), None);
    }
}
