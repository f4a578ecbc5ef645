//! What `seed chat` and `seed show` print, with no IO: a log event as a transcript line, and a
//! run as it goes, from its live text and its log.
//!
//! `seed chat` prints a run from its log, in the log's order (a response's text, its calls,
//! their results, the next response), and streams only the text of the response in flight:
//! the live deltas of a response reach the terminal before its message reaches the log, and
//! when the message arrives only what the deltas had not said is printed. Deltas come on
//! another channel than the log's changes and may arrive after the log has the response; they
//! are matched to responses by counting (a delta at offset 0 starts the next response with
//! text), so a response the log has printed is never printed again.
//!
//! Everything these functions return has been through [`printable`]: text from the model, a
//! person or a tool reaches the terminal as text, never as control sequences.

use std::iter::Peekable;
use std::str::Chars;

use seed_events::EventBody;
use seed_events::body::kind;

use crate::api::EventInfo;

/// What a reply cut off by the output token limit is followed by, in `seed chat`.
pub const CUT_OFF_NOTE: &str =
    "(cut off: the reply reached the model's output limit; say \"go on\" to have it continue)";

/// Whether `event` is an answer the model's output token limit cut off.
pub fn is_cut_off(event: &EventInfo) -> bool {
    event.event_type == kind::MESSAGE
        && event.meta.get("stop_reason").and_then(|r| r.as_str()) == Some("length")
}

/// Why the run that `event` ends failed, when `event` is the notice a failed run leaves.
pub fn failure_reason(event: &EventInfo) -> Option<&str> {
    if event.event_type != kind::NOTICE || event.meta.get("run_failed").is_none() {
        return None;
    }
    Some(
        event
            .meta
            .get("reason")
            .and_then(|reason| reason.as_str())
            .unwrap_or("it said no more"),
    )
}

/// `text` made safe to print on a terminal: escape sequences removed whole (CSI such as colours
/// and cursor moves, OSC such as a window title or a hyperlink, DCS and the other control
/// strings, two-character escapes such as a reset), and every other C0 or C1 control character
/// and DEL removed, but for newline and tab. Text from the model or a person can then neither
/// restyle nor retitle the terminal, move its cursor, ring it, nor overwrite what was printed
/// (as a carriage return or a backspace would). A sequence cut off by the end of `text` is
/// removed to the end.
pub fn printable(text: &str) -> String {
    if !text
        .chars()
        .any(|c| c.is_control() && c != '\n' && c != '\t')
    {
        return text.to_owned();
    }
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\n' | '\t' => out.push(c),
            '\u{1b}' => match chars.peek() {
                Some('[') => {
                    chars.next();
                    skip_control_sequence(&mut chars);
                }
                Some(']' | 'P' | 'X' | '^' | '_') => {
                    chars.next();
                    skip_control_string(&mut chars);
                }
                _ => skip_escape(&mut chars),
            },
            // The C1 forms of CSI, and of OSC, DCS, SOS, PM and APC.
            '\u{9b}' => skip_control_sequence(&mut chars),
            '\u{9d}' | '\u{90}' | '\u{98}' | '\u{9e}' | '\u{9f}' => skip_control_string(&mut chars),
            c if c.is_control() => {}
            c => out.push(c),
        }
    }
    out
}

/// Skips the rest of a control sequence after its CSI: parameter and intermediate characters
/// (U+0020 to U+003F), then one final character (U+0040 to U+007E) if one comes.
fn skip_control_sequence(chars: &mut Peekable<Chars<'_>>) {
    while chars
        .next_if(|c| ('\u{20}'..='\u{3f}').contains(c))
        .is_some()
    {}
    chars.next_if(|c| ('\u{40}'..='\u{7e}').contains(c));
}

/// Skips the rest of a control string (OSC, DCS, SOS, PM, APC) up to and with its end: BEL,
/// ST (ESC `\` or U+009C). Another ESC ends it too, and is left for the caller.
fn skip_control_string(chars: &mut Peekable<Chars<'_>>) {
    while let Some(c) = chars.next_if(|c| *c != '\u{1b}') {
        if c == '\u{7}' || c == '\u{9c}' {
            return;
        }
    }
    if chars.peek() == Some(&'\u{1b}') {
        let mut after = chars.clone();
        after.next();
        if after.peek() == Some(&'\\') {
            chars.next();
            chars.next();
        }
    }
}

/// Skips the rest of an escape after its ESC: intermediate characters (U+0020 to U+002F), then
/// one final character (U+0030 to U+007E). An ESC before anything else is dropped alone.
fn skip_escape(chars: &mut Peekable<Chars<'_>>) {
    while chars
        .next_if(|c| ('\u{20}'..='\u{2f}').contains(c))
        .is_some()
    {}
    chars.next_if(|c| ('\u{30}'..='\u{7e}').contains(c));
}

fn text_of(event: &EventInfo) -> Option<&str> {
    event.content.get("text").and_then(|text| text.as_str())
}

/// An assistant message with nothing to read (a response that only called tools, or only
/// thought): its calls stand for it.
fn says_nothing(event: &EventInfo) -> bool {
    event.event_type == kind::MESSAGE
        && event.role.as_deref() == Some("assistant")
        && text_of(event).is_none_or(|text| text.trim().is_empty())
        && event
            .meta
            .get("error_message")
            .is_none_or(|error| error.is_null())
}

/// One log event as a transcript line (`seed show`), or `None` for one with nothing to read.
pub fn event_line(event: &EventInfo) -> Option<String> {
    line_text(event).map(|line| printable(&line))
}

/// What [`event_line`] prints, before [`printable`].
fn line_text(event: &EventInfo) -> Option<String> {
    let seq = event.seq;
    if let Some(reason) = failure_reason(event) {
        return Some(format!("[{seq}] (the turn failed: {reason})"));
    }
    if says_nothing(event) {
        return None;
    }
    let line = match event.body() {
        EventBody::ToolCall(call) => {
            format!("[{seq}] tool call: {}({})", call.name, call.arguments)
        }
        EventBody::ToolResult(result) => format!("[{seq}] tool result: {}", result.content),
        _ => format!(
            "[{seq}] {}: {}",
            event
                .actor
                .as_deref()
                .or(event.role.as_deref())
                .unwrap_or("?"),
            text_of(event).map_or_else(|| event.content.to_string(), str::to_owned)
        ),
    };
    Some(if is_cut_off(event) {
        format!("{line} [cut off at the output token limit]")
    } else {
        line
    })
}

/// A session's transcript as `seed show` prints it: a line per event with something to read,
/// each turn (from a person's message on) after an empty line.
pub fn transcript(events: &[EventInfo]) -> Vec<String> {
    let mut lines = Vec::with_capacity(events.len());
    for event in events {
        let Some(line) = event_line(event) else {
            continue;
        };
        let turn_starts =
            event.event_type == kind::MESSAGE && event.role.as_deref() == Some("user");
        if turn_starts && !lines.is_empty() {
            lines.push(String::new());
        }
        lines.push(line);
    }
    lines
}

/// One run as `seed chat` prints it. Each method returns what to print, exactly (newlines
/// included).
#[derive(Debug, Default)]
pub struct RunView {
    /// Responses with text whose message the log has given (and so has been printed).
    logged: usize,
    /// Responses whose text deltas have begun.
    delta_responses: usize,
    /// The text of the response in flight printed so far from its deltas.
    streamed: String,
    /// Whether the cursor is after text on its line.
    mid_line: bool,
    /// Whether a failed-run notice has been printed.
    failure_shown: bool,
}

impl RunView {
    /// A fresh view.
    pub fn new() -> RunView {
        RunView::default()
    }

    fn line_break(&mut self) -> &'static str {
        if std::mem::take(&mut self.mid_line) {
            "\n"
        } else {
            ""
        }
    }

    /// Live text of the response in flight: `offset_chars` chars of it came before `text`.
    pub fn delta(&mut self, offset_chars: usize, text: &str) -> String {
        printable(&self.delta_text(offset_chars, text))
    }

    /// What [`RunView::delta`] prints, before [`printable`]. Offsets count the text as it
    /// came, control characters included.
    fn delta_text(&mut self, offset_chars: usize, text: &str) -> String {
        if offset_chars == 0 {
            self.delta_responses += 1;
            if self.delta_responses > self.logged {
                let mut out = self.line_break().to_owned();
                self.streamed.clear();
                out.push_str(&self.stream(0, text));
                return out;
            }
        }
        if self.delta_responses <= self.logged {
            // The log has printed this response already.
            return String::new();
        }
        self.stream(offset_chars, text)
    }

    /// The part of `text` (at `offset_chars`) that has not been printed.
    fn stream(&mut self, offset_chars: usize, text: &str) -> String {
        let have = self.streamed.chars().count();
        if offset_chars > have {
            // Deltas were missed: the message, once logged, is printed whole.
            return String::new();
        }
        let new: String = text.chars().skip(have - offset_chars).collect();
        if !new.is_empty() {
            self.streamed.push_str(&new);
            self.mid_line = true;
        }
        new
    }

    /// An event of the run's session as the log gives it.
    pub fn event(&mut self, event: &EventInfo) -> String {
        printable(&self.event_text(event))
    }

    /// What [`RunView::event`] prints, before [`printable`].
    fn event_text(&mut self, event: &EventInfo) -> String {
        if let Some(reason) = failure_reason(event) {
            self.failure_shown = true;
            return format!("{}  (the turn failed: {reason})\n", self.line_break());
        }
        match event.event_type.as_str() {
            kind::MESSAGE if event.role.as_deref() == Some("assistant") => {
                if event.meta.get("continuation").is_some() {
                    return String::new();
                }
                let text = text_of(event).unwrap_or_default();
                let mut out = String::new();
                if !text.trim().is_empty() {
                    self.logged += 1;
                    let in_flight = self.delta_responses == self.logged;
                    match text.strip_prefix(self.streamed.as_str()) {
                        Some(rest) if in_flight && self.mid_line => out.push_str(rest),
                        _ => {
                            out.push_str(self.line_break());
                            out.push_str(text);
                        }
                    }
                    out.push('\n');
                    self.mid_line = false;
                    self.streamed.clear();
                } else if let Some(error) = event.meta.get("error_message").and_then(|e| e.as_str())
                {
                    out.push_str(self.line_break());
                    out.push_str(&format!("  (the response ended with an error: {error})\n"));
                }
                if is_cut_off(event) {
                    out.push_str(&format!("  {CUT_OFF_NOTE}\n"));
                }
                out
            }
            // What a person says is on their screen already (a handoff's message too).
            kind::MESSAGE => String::new(),
            _ => match line_text(event) {
                Some(line) => {
                    // Without the seq, indented under the answer.
                    let line = line
                        .split_once("] ")
                        .map_or(line.as_str(), |(_, rest)| rest);
                    format!("{}  {line}\n", self.line_break())
                }
                None => String::new(),
            },
        }
    }

    /// The run ended with `status`; `reason` is its result's error, for a failed run.
    pub fn finished(&mut self, status: &str, reason: Option<&str>) -> String {
        printable(&self.finished_text(status, reason))
    }

    /// What [`RunView::finished`] prints, before [`printable`].
    fn finished_text(&mut self, status: &str, reason: Option<&str>) -> String {
        let mut out = self.line_break().to_owned();
        match status {
            "succeeded" => {}
            "failed" if self.failure_shown => {}
            "failed" => out.push_str(&format!(
                "  (the turn failed: {})\n",
                reason.unwrap_or("it said no more")
            )),
            other => out.push_str(&format!("  (the run {other})\n")),
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn event(seq: i64, kind: &str, role: &str, content: serde_json::Value) -> EventInfo {
        EventInfo {
            id: seq,
            seq,
            event_type: kind.to_owned(),
            kind: kind.to_owned(),
            role: Some(role.to_owned()),
            actor: Some(if role == "assistant" { "agent" } else { role }.to_owned()),
            content,
            meta: json!({}),
            run_id: None,
            created_at_ms: 0,
        }
    }

    fn said(seq: i64, text: &str) -> EventInfo {
        event(seq, "message", "assistant", json!({ "text": text }))
    }

    fn call(seq: i64) -> EventInfo {
        event(
            seq,
            "tool_call",
            "assistant",
            json!({"id": "c", "name": "status", "arguments": {"description": "step"}}),
        )
    }

    fn result(seq: i64) -> EventInfo {
        event(
            seq,
            "tool_result",
            "tool",
            json!({"tool_call_id": "c", "content": "status set"}),
        )
    }

    fn failed(seq: i64, reason: &str) -> EventInfo {
        let mut notice = event(
            seq,
            "notice",
            "system",
            json!({ "text": format!("The turn failed: {reason}") }),
        );
        notice.meta = json!({"run_failed": "r", "reason": reason});
        notice
    }

    fn cut_off(seq: i64, text: &str) -> EventInfo {
        let mut message = said(seq, text);
        message.meta = json!({"stop_reason": "length"});
        message
    }

    #[test]
    fn a_run_prints_in_the_logs_order_whatever_order_its_deltas_come_in() {
        // The log's changes come first, the deltas of both responses after.
        let mut view = RunView::new();
        let mut out = String::new();
        for logged in [said(2, "Step 1."), call(3), result(4), said(5, "Done.")] {
            out += &view.event(&logged);
        }
        out += &view.delta(0, "Step ");
        out += &view.delta(5, "1.");
        out += &view.delta(0, "Done.");
        out += &view.finished("succeeded", None);
        assert_eq!(
            out,
            "Step 1.\n  tool call: status({\"description\":\"step\"})\n  tool result: status set\nDone.\n"
        );
    }

    #[test]
    fn streamed_text_is_not_printed_again_and_passes_are_separated() {
        let mut view = RunView::new();
        let mut out = String::new();
        out += &view.delta(0, "Step ");
        out += &view.delta(5, "1.");
        // A delta repeated from an offset the terminal has is cut to what it lacks.
        out += &view.delta(3, "p 1. More");
        out += &view.event(&said(2, "Step 1. More"));
        out += &view.event(&call(3));
        out += &view.event(&result(4));
        out += &view.delta(0, "All ");
        out += &view.delta(4, "done.");
        out += &view.event(&said(5, "All done."));
        out += &view.finished("succeeded", None);
        assert_eq!(
            out,
            "Step 1. More\n  tool call: status({\"description\":\"step\"})\n  tool result: status set\nAll done.\n"
        );
    }

    #[test]
    fn a_response_that_only_calls_tools_prints_no_empty_line() {
        let mut view = RunView::new();
        let mut out = view.event(&said(2, ""));
        out += &view.event(&call(3));
        out += &view.event(&result(4));
        assert_eq!(
            out,
            "  tool call: status({\"description\":\"step\"})\n  tool result: status set\n"
        );
        assert_eq!(event_line(&said(2, "")), None);
    }

    #[test]
    fn missed_deltas_leave_the_whole_answer_to_the_log() {
        let mut view = RunView::new();
        let mut out = view.delta(0, "Hel");
        out += &view.delta(10, "world");
        out += &view.event(&said(2, "Hello, big world"));
        assert_eq!(out, "Hello, big world\n");
        // Text that is not how the answer begins: the answer on a line of its own.
        let mut view = RunView::new();
        let mut out = view.delta(0, "Hex");
        out += &view.event(&said(2, "Hello"));
        assert_eq!(out, "Hex\nHello\n");
    }

    #[test]
    fn a_failed_turn_says_why_once() {
        let mut view = RunView::new();
        let mut out = view.delta(0, "Let me");
        out += &view.event(&failed(3, "the model server refused the key (401)"));
        out += &view.finished("failed", Some("the model server refused the key (401)"));
        assert_eq!(
            out,
            "Let me\n  (the turn failed: the model server refused the key (401))\n"
        );
        // Without the notice (a run whose session went), the run's own reason.
        let mut view = RunView::new();
        assert_eq!(
            view.finished("failed", Some("the session was deleted")),
            "  (the turn failed: the session was deleted)\n"
        );
        assert_eq!(
            RunView::new().finished("canceled", None),
            "  (the run canceled)\n"
        );
    }

    #[test]
    fn a_reply_cut_off_by_the_token_limit_says_so() {
        let mut view = RunView::new();
        let mut out = view.delta(0, "The list: one, two");
        out += &view.event(&cut_off(2, "The list: one, two"));
        assert_eq!(out, format!("The list: one, two\n  {CUT_OFF_NOTE}\n"));
        assert_eq!(
            event_line(&cut_off(2, "one, two")).as_deref(),
            Some("[2] agent: one, two [cut off at the output token limit]")
        );
    }

    #[test]
    fn printable_text_keeps_no_control_sequence_nor_control_character() {
        let cases = [
            ("plain text", "plain text"),
            ("lines\n\tand tabs", "lines\n\tand tabs"),
            (
                "h\u{e9}llo \u{2014} \u{65e5}\u{672c} \u{1f331}",
                "h\u{e9}llo \u{2014} \u{65e5}\u{672c} \u{1f331}",
            ),
            // CSI: colours, cursor moves, clearing, private modes.
            ("\u{1b}[31mred\u{1b}[0m", "red"),
            ("\u{1b}[1;38;5;196mbold\u{1b}[m", "bold"),
            ("\u{1b}[2J\u{1b}[Hhome", "home"),
            ("\u{1b}[?1049hscreen", "screen"),
            ("\u{1b}[31", ""),
            // OSC: a window title ended by BEL or by ST, a hyperlink, one never ended.
            ("\u{1b}]0;evil\u{7}after", "after"),
            ("\u{1b}]2;evil\u{1b}\\after", "after"),
            (
                "\u{1b}]8;;https://evil\u{1b}\\link\u{1b}]8;;\u{1b}\\",
                "link",
            ),
            ("\u{1b}]0;title never ended", ""),
            ("\u{1b}]0;cut\u{1b}[1mshort", "short"),
            // DCS and the other control strings.
            ("\u{1b}Pq#0;2;0;0;0\u{1b}\\x", "x"),
            ("\u{1b}_apc\u{1b}\\x", "x"),
            // Two-character escapes: a reset, a character set, a bare ESC.
            ("\u{1b}creset", "reset"),
            ("\u{1b}(0lines", "lines"),
            ("bare\u{1b}", "bare"),
            ("a\u{1b}\nb", "a\nb"),
            // C0 controls but newline and tab; DEL.
            ("over\rwrite", "overwrite"),
            ("abc\u{8}\u{8}\u{8}xyz", "abcxyz"),
            ("bell\u{7}", "bell"),
            ("\u{0}nul\u{7f}del\u{c}feed\u{b}", "nuldelfeed"),
            // C1 controls: CSI, OSC with its ST, NEL.
            ("\u{9b}31mred", "red"),
            ("\u{9d}0;title\u{9c}rest", "rest"),
            ("next\u{85}line", "nextline"),
        ];
        for (text, expected) in cases {
            assert_eq!(printable(text), expected, "{text:?}");
        }
    }

    #[test]
    fn seed_show_and_seed_chat_print_no_terminal_control_sequences() {
        // A person's message that retitles the window, an answer that recolours and clears
        // the screen, a tool result that overwrites its line.
        let user = event(
            1,
            "message",
            "user",
            json!({"text": "\u{1b}]0;evil\u{7}hi \u{1b}[31mthere\u{1b}[0m"}),
        );
        let answer = said(2, "\u{1b}[2J\u{1b}[Hdone\u{9b}1m!");
        let mut tool = result(3);
        tool.content = json!({"tool_call_id": "c", "content": "ok\rFAKE\u{8}"});
        let events = [user, answer, tool];
        assert_eq!(
            transcript(&events),
            [
                "[1] user: hi there",
                "[2] agent: done!",
                "[3] tool result: okFAKE"
            ]
        );
        let mut view = RunView::new();
        let mut out = view.delta(0, "\u{1b}[2J");
        out += &view.delta(4, "\u{1b}[Hdone");
        out += &view.event(&events[1]);
        out += &view.event(&events[2]);
        out += &view.event(&failed(
            4,
            "\u{1b}]8;;https://x\u{1b}\\no\u{1b}]8;;\u{1b}\\",
        ));
        out += &view.finished("failed", None);
        assert_eq!(
            out,
            "done!\n  tool result: okFAKE\n  (the turn failed: no)\n"
        );
        // A session's title, in `seed show`'s and `seed chat`'s first line and `seed sessions`.
        let session = crate::api::SessionInfo {
            id: uuid::Uuid::nil(),
            title: "\u{1b}]0;evil\u{7}Trip \u{1b}[5mplan".to_owned(),
            description: String::new(),
            title_source: "agent".to_owned(),
            model: None,
            reasoning_level: None,
            parent_session_id: None,
            created_at_ms: 0,
            updated_at_ms: 0,
            continued_from: None,
            continued_to: None,
            forked_from: None,
        };
        assert_eq!(crate::cli::describe(&session), "Trip plan");
    }

    #[test]
    fn seed_show_reads_in_order_with_turns_apart_and_failures_named() {
        let lines = transcript(&[
            event(1, "message", "user", json!({"text": "do it"})),
            said(2, ""),
            call(3),
            result(4),
            said(5, "Done."),
            event(6, "message", "user", json!({"text": "again"})),
            failed(7, "rate limited: gave up after 4 attempts"),
        ]);
        assert_eq!(
            lines,
            [
                "[1] user: do it",
                "[3] tool call: status({\"description\":\"step\"})",
                "[4] tool result: status set",
                "[5] agent: Done.",
                "",
                "[6] user: again",
                "[7] (the turn failed: rate limited: gave up after 4 attempts)",
            ]
        );
    }
}
