//! The decoders' tests as data, shared by the OpenAI and the Anthropic wire's tests: a row
//! names a case, gives a stream's `data:` payloads one a line, and says what the decoder makes
//! of them, rendered one event a line by [`render`].

use std::collections::BTreeSet;
use std::fmt::Write as _;

use crate::message::{AssistantBlock, AssistantMessage, ToolCall, Usage};
use crate::provider::{ProviderError, StreamEvent};

/// One case: its name; the payloads, one a line (indentation and blank lines do not count);
/// the events expected, as [`render`] writes them (the indentation the lines share does not
/// count).
pub(super) type Row = (&'static str, &'static str, &'static str);

/// Checks every row of `table`: `decode` turns a row's payload lines into events, which must
/// render as the row says. Every row runs; a failure shows each row that differs with what it
/// rendered, ready to paste.
pub(super) fn check(table: &[Row], decode: impl Fn(&[&str]) -> Vec<StreamEvent>) {
    let mut names = BTreeSet::new();
    let mut failures = String::new();
    for (name, payloads, expected) in table {
        assert!(names.insert(name), "two rows are named {name:?}");
        let lines = payload_lines(payloads);
        assert!(!lines.is_empty(), "row {name:?} has no payloads");
        let rendered = render(&decode(&lines));
        let expected = dedent(expected);
        if rendered != expected {
            let _ = write!(
                failures,
                "\nrow {name:?}\n--- expected\n{expected}\n--- rendered\n{rendered}\n"
            );
        }
    }
    assert!(failures.is_empty(), "rows that differ:\n{failures}");
}

/// The lines of `payloads`, trimmed, without the blank ones.
pub(super) fn payload_lines(payloads: &str) -> Vec<&str> {
    payloads
        .lines()
        .map(str::trim)
        .filter(|line| !line.is_empty())
        .collect()
}

/// `events`, one a line:
///
/// ```text
/// text "Hel"                      a text delta (as a Rust string literal: escapes show)
/// thinking "The user "            a reasoning delta
/// call call_a read {"path":"a"}   a whole tool call: id, name, arguments as JSON
/// usage input=1 output=2 cache_read=3 cache_write=4
/// error malformed: …              an error, as it displays (kind: message)
/// done tool_use model=gpt-4o      the final message: stop reason, model, then indented:
///   error_message "…"               its error message, when it has one
///   usage …                         its usage, when not all zero
///   text "Hello"                    its blocks in order (also `thinking "…" signature "…"`,
///   call call_a read {"path":"a"}   `redacted_thinking "…"`)
/// ```
pub(super) fn render(events: &[StreamEvent]) -> String {
    let mut lines = Vec::new();
    for event in events {
        match event {
            StreamEvent::TextDelta(text) => lines.push(format!("text {text:?}")),
            StreamEvent::ThinkingDelta(thinking) => lines.push(format!("thinking {thinking:?}")),
            StreamEvent::ToolCall(call) => lines.push(render_call(call)),
            StreamEvent::Usage(usage) => lines.push(render_usage(usage)),
            StreamEvent::Error(error) => lines.push(render_error(error)),
            StreamEvent::Done(message) => render_message(message, &mut lines),
        }
    }
    lines.join("\n")
}

fn render_call(call: &ToolCall) -> String {
    format!("call {} {} {}", call.id, call.name, call.arguments)
}

fn render_usage(usage: &Usage) -> String {
    let Usage {
        input,
        output,
        cache_read,
        cache_write,
        estimated,
    } = usage;
    let estimated = if *estimated { " estimated" } else { "" };
    format!(
        "usage input={input} output={output} cache_read={cache_read} \
         cache_write={cache_write}{estimated}"
    )
}

fn render_error(error: &ProviderError) -> String {
    let mut line = format!("error {error}");
    if let Some(attempts) = error.attempts {
        let _ = write!(line, " attempts={attempts}");
    }
    if let Some(elapsed_ms) = error.elapsed_ms {
        let _ = write!(line, " elapsed_ms={elapsed_ms}");
    }
    line
}

fn render_message(message: &AssistantMessage, lines: &mut Vec<String>) {
    let stop_reason = serde_json::to_value(message.stop_reason).expect("a stop reason serializes");
    let stop_reason = stop_reason.as_str().expect("a stop reason is a name");
    lines.push(format!("done {stop_reason} model={}", message.model));
    if let Some(error_message) = &message.error_message {
        lines.push(format!("  error_message {error_message:?}"));
    }
    if message.usage != Usage::default() {
        lines.push(format!("  {}", render_usage(&message.usage)));
    }
    for block in &message.content {
        lines.push(match block {
            AssistantBlock::Text { text } => format!("  text {text:?}"),
            AssistantBlock::Thinking {
                thinking,
                signature: None,
            } => format!("  thinking {thinking:?}"),
            AssistantBlock::Thinking {
                thinking,
                signature: Some(signature),
            } => format!("  thinking {thinking:?} signature {signature:?}"),
            AssistantBlock::RedactedThinking { data } => format!("  redacted_thinking {data:?}"),
            AssistantBlock::ToolCall(call) => format!("  {}", render_call(call)),
        });
    }
}

/// `text` without its first and last blank lines, its lines without the indentation they share
/// or trailing spaces.
fn dedent(text: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    let first = lines.iter().position(|line| !line.trim().is_empty());
    let last = lines.iter().rposition(|line| !line.trim().is_empty());
    let (Some(first), Some(last)) = (first, last) else {
        return String::new();
    };
    let lines = &lines[first..=last];
    let indent = lines
        .iter()
        .filter(|line| !line.trim().is_empty())
        .map(|line| line.len() - line.trim_start().len())
        .min()
        .unwrap_or(0);
    lines
        .iter()
        .map(|line| line.get(indent..).unwrap_or("").trim_end())
        .collect::<Vec<_>>()
        .join("\n")
}
