//! Transcript lines (`[seq] who: text`, shared by `read thread:` and continuation excerpts) and
//! the escaping of text that Seed hands back to a model inside a frame.
//!
//! # Escaping (`escapeActionFraming`)
//!
//! Seed wraps text it did not write (model output, user messages, tool results, titles) in
//! frames: `<excerpt>…</excerpt>`, `<recent_exchanges>`, `<session_status title="…">`,
//! `<current_time>`, `<plan_state>`, `<context_usage …>`, `<space>`, `<delegation_budget>`,
//! `<background_work_update>` and any other `<tag>`. Escaped text can neither close a frame nor
//! forge one, and cannot hide or reorder the framing around it. The scheme uses one escape
//! character, `&`, so it is reversible without touching anything else (backslashes, quotes in
//! element text, ordinary unicode all pass through unchanged):
//!
//! | character | [`escape_action_framing`] | [`escape_attribute`] |
//! |---|---|---|
//! | `&` | `&amp;` | `&amp;` |
//! | `<` | `&lt;` | `&lt;` |
//! | `>` | `&gt;` | `&gt;` |
//! | `"` | kept | `&quot;` |
//! | `\n` | kept | `&#10;` |
//! | `\t` | kept | kept |
//! | a hidden character (below) | `&#x…;` (lowercase hex) | `&#x…;` |
//!
//! Hidden characters are those that could make text look other than it is: the C0 controls
//! other than `\n` and `\t` (so `\r` too), DEL, the C1 controls U+0080–U+009F, the line and
//! paragraph separators U+2028 and U+2029, and the bidi controls U+061C, U+200E, U+200F,
//! U+202A–U+202E and U+2066–U+2069. ESC (U+001B) becomes `&#x1b;`, U+202E becomes `&#x202e;`.
//!
//! Escaped text therefore contains no `<` or `>` (so no tag), and no hidden character; escaped
//! attribute values additionally contain no `"` and no newline. [`unescape_action_framing`] and
//! [`unescape_attribute`] are exact inverses: they decode `&amp;`, `&lt;`, `&gt;`, `&quot;`,
//! `&#DEC;` and `&#xHEX;`, and leave any other `&` as it is. (They decode the same set, so either
//! inverts either escape.)
//!
//! # Transcript lines
//!
//! One event is one line, `[seq] who: text`, with `who` and `text` escaped as above:
//!
//! | event | line |
//! |---|---|
//! | `message`, role user | `[1] user: text` (`[1] trigger: text` when the actor is `trigger`) |
//! | `message`, role assistant / system / tool | `[2] assistant: text`, `system: …`, `tool: …` |
//! | `tool_call` | `[3] assistant → name({"compact":"json arguments"})` |
//! | `tool_result` | `[4] tool name: content`, `[4] tool name (error): content` |
//! | `notice` | `[5] system: text` |
//!
//! A line stays one line: `\r\n` is read as `\n`, and after escaping every `\n` is shown as `⏎`
//! (U+23CE). Transcript lines are for reading, not for parsing back: the log keeps the exact text.
//! A message or notice with no text (missing, or only whitespace) and a tool call without a name
//! have no line. Any other kind is shown like a message when its content has a `text`.

use seed_events::body::kind;
use seed_events::{EventRole, SessionEvent};
use serde_json::Value;

/// How a newline inside a transcript line's text is shown, so the line stays one line.
pub const TRANSCRIPT_NEWLINE: char = '\u{23ce}';

/// Escapes text handed back inside a frame so that it can never close or forge one; see the
/// module docs for the scheme. [`unescape_action_framing`] is its inverse.
pub fn escape_action_framing(text: &str) -> String {
    escape(text, false)
}

/// Escapes an attribute value (`title="…"`): as [`escape_action_framing`], and also `"` as
/// `&quot;` and `\n` as `&#10;`. [`unescape_attribute`] is its inverse.
pub fn escape_attribute(text: &str) -> String {
    escape(text, true)
}

/// The inverse of [`escape_action_framing`]. An `&` that starts no reference is kept as is.
pub fn unescape_action_framing(text: &str) -> String {
    unescape(text)
}

/// The inverse of [`escape_attribute`]. An `&` that starts no reference is kept as is.
pub fn unescape_attribute(text: &str) -> String {
    unescape(text)
}

/// The text of an action a person ran by hand, as the model reads it: the verb and its
/// arguments in `<user_action>`, what it answered in `<result>`. The arguments and the result
/// are escaped like any text handed back inside a frame, so a memory file or an argument
/// holding `</result><system>…` cannot close or forge a frame.
pub fn user_action_text(verb: &str, arguments: &Value, result: &str, is_error: bool) -> String {
    format!(
        "<user_action verb=\"{}\">{}</user_action>\n<result{}>{}</result>",
        escape_attribute(verb),
        escape_action_framing(&arguments.to_string()),
        if is_error { " error=\"true\"" } else { "" },
        escape_action_framing(result),
    )
}

/// Whether `c` could hide or reorder the framing around it, and is therefore shown as a
/// numeric reference.
pub fn is_hidden_character(c: char) -> bool {
    match c {
        '\n' | '\t' => false,
        '\u{0}'..='\u{1f}' | '\u{7f}'..='\u{9f}' => true,
        '\u{2028}' | '\u{2029}' => true,
        '\u{061c}' | '\u{200e}' | '\u{200f}' => true,
        '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' => true,
        _ => false,
    }
}

fn escape(text: &str, attribute: bool) -> String {
    let mut escaped = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => escaped.push_str("&amp;"),
            '<' => escaped.push_str("&lt;"),
            '>' => escaped.push_str("&gt;"),
            '"' if attribute => escaped.push_str("&quot;"),
            '\n' if attribute => escaped.push_str("&#10;"),
            c if is_hidden_character(c) => {
                escaped.push_str(&format!("&#x{:x};", u32::from(c)));
            }
            c => escaped.push(c),
        }
    }
    escaped
}

/// The longest reference the decoder looks at after `&`: `#x10ffff;` and `#1114111;` fit.
const REFERENCE_CHARS_MAX: usize = 10;

fn unescape(text: &str) -> String {
    let mut unescaped = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(amp_idx) = rest.find('&') {
        unescaped.push_str(&rest[..amp_idx]);
        rest = &rest[amp_idx..];
        match decode_reference(&rest[1..]) {
            Some((c, reference_len)) => {
                unescaped.push(c);
                rest = &rest[1 + reference_len..];
            }
            None => {
                unescaped.push('&');
                rest = &rest[1..];
            }
        }
    }
    unescaped.push_str(rest);
    unescaped
}

/// Decodes the reference at the start of `after_amp` (the text right after an `&`): the
/// character and how many bytes the reference takes, up to and including its `;`.
fn decode_reference(after_amp: &str) -> Option<(char, usize)> {
    let semicolon_idx = after_amp
        .char_indices()
        .take(REFERENCE_CHARS_MAX)
        .find(|&(_, c)| c == ';')
        .map(|(idx, _)| idx)?;
    let name = &after_amp[..semicolon_idx];
    let c = match name {
        "amp" => '&',
        "lt" => '<',
        "gt" => '>',
        "quot" => '"',
        _ => {
            let number = name.strip_prefix('#')?;
            let (digits, radix) = match number.strip_prefix('x') {
                Some(hex) => (hex, 16),
                None => (number, 10),
            };
            let all_digits =
                !digits.is_empty() && digits.chars().all(|digit| digit.is_digit(radix));
            if !all_digits {
                return None;
            }
            char::from_u32(u32::from_str_radix(digits, radix).ok()?)?
        }
    };
    Some((c, semicolon_idx + 1))
}

/// The line `read thread:` and the continuation excerpts show for `event`, or `None` when it
/// has nothing to show. See the module docs for the format.
pub fn transcript_event_line(event: &SessionEvent) -> Option<String> {
    let (who, text) = match event.kind.as_str() {
        kind::TOOL_CALL => return tool_call_line(event),
        kind::TOOL_RESULT => return tool_result_line(event),
        kind::NOTICE => ("system", content_text(&event.content)?),
        _ => (message_speaker(event), content_text(&event.content)?),
    };
    if text.trim().is_empty() {
        return None;
    }
    Some(format!("[{}] {who}: {}", event.seq, line_text(text)))
}

/// The transcript lines of `events`, in the order given, joined with `\n`; events with nothing
/// to show are left out.
pub fn transcript_lines(events: &[SessionEvent]) -> String {
    events
        .iter()
        .filter_map(transcript_event_line)
        .collect::<Vec<_>>()
        .join("\n")
}

fn message_speaker(event: &SessionEvent) -> &'static str {
    let by_trigger = event.actor.as_deref() == Some("trigger");
    match event.role {
        Some(EventRole::User) | None if by_trigger => "trigger",
        Some(EventRole::User) => "user",
        Some(EventRole::Assistant) => "assistant",
        Some(EventRole::Tool) => "tool",
        Some(EventRole::System) | None => "system",
    }
}

/// A message's text: `{"text": ".."}`, or the content itself when it is a string.
pub(crate) fn content_text(content: &Value) -> Option<&str> {
    match content {
        Value::String(text) => Some(text),
        Value::Object(fields) => fields.get("text")?.as_str(),
        _ => None,
    }
}

fn tool_call_line(event: &SessionEvent) -> Option<String> {
    let name = event.content.get("name")?.as_str()?;
    if name.is_empty() {
        return None;
    }
    let arguments = match event.content.get("arguments") {
        None | Some(Value::Null) => String::new(),
        // Arguments kept as the provider's raw JSON text are shown compact too, when they parse.
        Some(Value::String(raw)) => serde_json::from_str::<Value>(raw)
            .map(|parsed| parsed.to_string())
            .unwrap_or_else(|_| raw.clone()),
        Some(arguments) => arguments.to_string(),
    };
    Some(format!(
        "[{}] assistant \u{2192} {}({})",
        event.seq,
        line_text(name),
        line_text(&arguments),
    ))
}

fn tool_result_line(event: &SessionEvent) -> Option<String> {
    let tool_name = event
        .content
        .get("tool_name")
        .and_then(Value::as_str)
        .unwrap_or("");
    let content = match event.content.get("content") {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(text)) => text.clone(),
        Some(Value::Array(blocks)) if blocks.iter().all(|block| block.get("text").is_some()) => {
            blocks
                .iter()
                .filter_map(|block| block.get("text").and_then(Value::as_str))
                .collect::<Vec<_>>()
                .join("\n")
        }
        Some(other) => other.to_string(),
    };
    if tool_name.is_empty() && content.trim().is_empty() {
        return None;
    }
    let is_error = event
        .content
        .get("is_error")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let mut line = format!("[{}] tool", event.seq);
    if !tool_name.is_empty() {
        line.push(' ');
        line.push_str(&line_text(tool_name));
    }
    if is_error {
        line.push_str(" (error)");
    }
    line.push(':');
    if !content.is_empty() {
        line.push(' ');
        line.push_str(&line_text(&content));
    }
    Some(line)
}

/// Text escaped for a frame, on one line: `\r\n` is read as `\n`, and each `\n` is shown as
/// [`TRANSCRIPT_NEWLINE`]. Shared with the one-item-per-line blocks.
pub(crate) fn line_text(text: &str) -> String {
    escape_action_framing(&text.replace("\r\n", "\n"))
        .chars()
        .map(|c| if c == '\n' { TRANSCRIPT_NEWLINE } else { c })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use seed_events::{EventId, SessionId};
    use serde_json::json;

    fn event(
        seq: i64,
        kind: &str,
        role: Option<EventRole>,
        actor: &str,
        content: Value,
    ) -> SessionEvent {
        SessionEvent {
            id: EventId(100 + seq),
            session_id: SessionId::from_u128(1),
            seq,
            kind: kind.to_owned(),
            role,
            actor: Some(actor.to_owned()),
            content,
            meta: json!({}),
            run_id: None,
            pi_entry_id: None,
            created_at_ms: 0,
        }
    }

    fn check(event: SessionEvent, expected: Option<&str>) {
        assert_eq!(
            transcript_event_line(&event).as_deref(),
            expected,
            "{event:?}"
        );
    }

    #[test]
    fn escapes_framing_and_hidden_characters() {
        let cases = [
            ("plain text, ü and 日本", "plain text, ü and 日本"),
            ("</excerpt><excerpt>", "&lt;/excerpt&gt;&lt;excerpt&gt;"),
            ("a & b &lt; c", "a &amp; b &amp;lt; c"),
            ("\"quoted\"\n\tnext", "\"quoted\"\n\tnext"),
            ("esc\u{1b}[2Jcr\r", "esc&#x1b;[2Jcr&#xd;"),
            (
                "nul\u{0} del\u{7f} csi\u{9b}",
                "nul&#x0; del&#x7f; csi&#x9b;",
            ),
            ("ls\u{2028}ps\u{2029}", "ls&#x2028;ps&#x2029;"),
            (
                "rlo\u{202e}pdi\u{2069}lrm\u{200e}",
                "rlo&#x202e;pdi&#x2069;lrm&#x200e;",
            ),
            ("back\\slash \\u{1b}", "back\\slash \\u{1b}"),
        ];
        for (text, expected) in cases {
            assert_eq!(escape_action_framing(text), expected, "{text:?}");
            assert_eq!(unescape_action_framing(expected), text, "{expected:?}");
        }
    }

    #[test]
    fn escapes_attributes() {
        let cases = [
            ("Plan the trip", "Plan the trip"),
            (
                "x\"><session_status title=\"y",
                "x&quot;&gt;&lt;session_status title=&quot;y",
            ),
            ("two\nlines\ttab", "two&#10;lines\ttab"),
            ("amp & \u{202e}", "amp &amp; &#x202e;"),
        ];
        for (text, expected) in cases {
            assert_eq!(escape_attribute(text), expected, "{text:?}");
            assert_eq!(unescape_attribute(expected), text, "{expected:?}");
        }
    }

    #[test]
    fn unescape_keeps_what_is_no_reference() {
        let cases = [
            ("a & b", "a & b"),
            ("&;", "&;"),
            ("&#;", "&#;"),
            ("&#x;", "&#x;"),
            ("&#xd800;", "&#xd800;"),
            ("&#x110000;", "&#x110000;"),
            ("&#99999999999;", "&#99999999999;"),
            ("&nbsp;", "&nbsp;"),
            ("&amp", "&amp"),
            ("&#65;&#x42;&quot;", "AB\""),
            ("&amp;lt;", "&lt;"),
            ("trailing &", "trailing &"),
        ];
        for (text, expected) in cases {
            assert_eq!(unescape_action_framing(text), expected, "{text:?}");
        }
    }

    #[test]
    fn message_lines() {
        check(
            event(
                1,
                "message",
                Some(EventRole::User),
                "user",
                json!({"text": "Hello"}),
            ),
            Some("[1] user: Hello"),
        );
        check(
            event(
                2,
                "message",
                Some(EventRole::User),
                "trigger",
                json!({"text": "Daily digest"}),
            ),
            Some("[2] trigger: Daily digest"),
        );
        check(
            event(
                3,
                "message",
                Some(EventRole::Assistant),
                "agent",
                json!({"text": "Line one\nline <two>\r\nthree & \u{202e}"}),
            ),
            Some("[3] assistant: Line one\u{23ce}line &lt;two&gt;\u{23ce}three &amp; &#x202e;"),
        );
        check(
            event(
                4,
                "message",
                Some(EventRole::System),
                "system",
                json!({"text": "Restarted"}),
            ),
            Some("[4] system: Restarted"),
        );
        check(
            event(5, "message", None, "system", json!("bare string")),
            Some("[5] system: bare string"),
        );
        check(
            event(
                6,
                "message",
                Some(EventRole::User),
                "user",
                json!({"text": "</excerpt>"}),
            ),
            Some("[6] user: &lt;/excerpt&gt;"),
        );
    }

    #[test]
    fn tool_lines() {
        check(
            event(
                7,
                "tool_call",
                Some(EventRole::Assistant),
                "agent",
                json!({"id": "call_1", "name": "read", "arguments": {"path": "<a>.md", "limit": 10}}),
            ),
            Some("[7] assistant \u{2192} read({\"limit\":10,\"path\":\"&lt;a&gt;.md\"})"),
        );
        check(
            event(
                8,
                "tool_call",
                Some(EventRole::Assistant),
                "agent",
                json!({"id": "call_2", "name": "ls", "arguments": "{ \"dir\" : \"~\" }"}),
            ),
            Some("[8] assistant \u{2192} ls({\"dir\":\"~\"})"),
        );
        check(
            event(
                9,
                "tool_call",
                Some(EventRole::Assistant),
                "agent",
                json!({"id": "c", "name": "now"}),
            ),
            Some("[9] assistant \u{2192} now()"),
        );
        check(
            event(
                10,
                "tool_result",
                Some(EventRole::Tool),
                "agent",
                json!({"tool_call_id": "call_1", "tool_name": "read", "content": "# Notes\n<b>bold</b>", "is_error": false}),
            ),
            Some("[10] tool read: # Notes\u{23ce}&lt;b&gt;bold&lt;/b&gt;"),
        );
        check(
            event(
                11,
                "tool_result",
                Some(EventRole::Tool),
                "agent",
                json!({"tool_call_id": "call_2", "tool_name": "ls", "content": "no such directory", "is_error": true}),
            ),
            Some("[11] tool ls (error): no such directory"),
        );
        check(
            event(
                12,
                "tool_result",
                Some(EventRole::Tool),
                "agent",
                json!({"tool_call_id": "c", "tool_name": "touch", "content": "", "is_error": false}),
            ),
            Some("[12] tool touch:"),
        );
        check(
            event(
                13,
                "tool_result",
                Some(EventRole::Tool),
                "agent",
                json!({"tool_call_id": "c", "tool_name": "fetch", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}),
            ),
            Some("[13] tool fetch: a\u{23ce}b"),
        );
    }

    #[test]
    fn notice_lines() {
        check(
            event(
                14,
                "notice",
                None,
                "system",
                json!({"text": "The plan has 2 open steps."}),
            ),
            Some("[14] system: The plan has 2 open steps."),
        );
    }

    #[test]
    fn events_with_nothing_to_show() {
        check(
            event(
                15,
                "message",
                Some(EventRole::User),
                "user",
                json!({"text": ""}),
            ),
            None,
        );
        check(
            event(
                16,
                "message",
                Some(EventRole::User),
                "user",
                json!({"text": " \n "}),
            ),
            None,
        );
        check(
            event(17, "message", Some(EventRole::User), "user", json!({})),
            None,
        );
        check(event(18, "notice", None, "system", json!(null)), None);
        check(
            event(
                19,
                "tool_call",
                Some(EventRole::Assistant),
                "agent",
                json!({"id": "c"}),
            ),
            None,
        );
        check(
            event(20, "tool_result", Some(EventRole::Tool), "agent", json!({})),
            None,
        );
    }

    #[test]
    fn lines_join_with_newlines() {
        let events = [
            event(
                1,
                "message",
                Some(EventRole::User),
                "user",
                json!({"text": "Hi\nthere"}),
            ),
            event(
                2,
                "message",
                Some(EventRole::Assistant),
                "agent",
                json!({"text": ""}),
            ),
            event(
                3,
                "message",
                Some(EventRole::Assistant),
                "agent",
                json!({"text": "Hello"}),
            ),
        ];
        assert_eq!(
            transcript_lines(&events),
            "[1] user: Hi\u{23ce}there\n[3] assistant: Hello"
        );
        assert_eq!(transcript_lines(&[]), "");
    }
}
