//! The scripted model's `call:` lines: a message whose lines start with `call: VERB {json}`
//! makes the turn call each verb in order, one response a call, with the JSON as its
//! arguments, then answer with what the tools said as the requests held it. For tests and
//! demos of any verb, an MCP server's tools among them.

use base64::Engine as _;
use seed_providers::{Message, Request, ResultImage, ToolCall};

/// One `call:` line: the verb and its arguments (`{}` when none or not JSON).
#[derive(Debug, Clone, PartialEq)]
pub struct CallLine {
    pub verb: String,
    pub arguments: serde_json::Value,
}

/// The `call:` lines of a message, in order.
pub fn call_lines(text: &str) -> Vec<CallLine> {
    text.lines()
        .filter_map(|line| line.trim().strip_prefix("call:"))
        .filter_map(|rest| {
            let rest = rest.trim();
            let (verb, arguments) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
            (!verb.is_empty()).then(|| CallLine {
                verb: verb.to_owned(),
                arguments: serde_json::from_str(arguments.trim())
                    .unwrap_or_else(|_| serde_json::json!({})),
            })
        })
        .collect()
}

/// The call a turn makes at `step` (1 for its first response), or `None` once every line
/// was called.
pub fn call_at(lines: &[CallLine], step: u32, call_id: String) -> Option<ToolCall> {
    let line = lines.get(usize::try_from(step).ok()?.checked_sub(1)?)?;
    Some(ToolCall {
        id: call_id,
        name: line.verb.clone(),
        arguments: line.arguments.clone(),
    })
}

/// The answer after the calls: each tool's result since the message at `position`, as the
/// request holds it (`error: ` before a failed one, ` [shown: image/png 1234 bytes]` after one
/// whose images the model was sent), so a test reads what reached the model.
pub fn answer(request: &Request, position: usize) -> String {
    let results: Vec<String> = request.messages[position.min(request.messages.len())..]
        .iter()
        .filter_map(|message| match message.as_ref() {
            Message::ToolResult(result) => Some(format!(
                "{}: {}{}{}",
                result.tool_name,
                if result.is_error { "error: " } else { "" },
                result.content,
                shown_images(&result.images),
            )),
            _ => None,
        })
        .collect();
    format!("The tools said: {}", results.join(" | "))
}

/// ` [shown: image/png 1234 bytes; …]` for the images a result sent, or nothing.
fn shown_images(images: &[ResultImage]) -> String {
    if images.is_empty() {
        return String::new();
    }
    let shown: Vec<String> = images
        .iter()
        .map(|image| {
            let n_bytes = base64::engine::general_purpose::STANDARD
                .decode(&image.data)
                .map_or(0, |bytes| bytes.len());
            format!("{} {n_bytes} bytes", image.media_type)
        })
        .collect();
    format!(" [shown: {}]", shown.join("; "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn call_lines_name_a_verb_and_its_arguments() {
        let text = "please\ncall: files__read_text_file {\"path\": \"/tmp/a\"}\n  call: echo\ncall: bad {not json\ncall:";
        assert_eq!(
            call_lines(text),
            [
                CallLine {
                    verb: "files__read_text_file".to_owned(),
                    arguments: json!({"path": "/tmp/a"}),
                },
                CallLine {
                    verb: "echo".to_owned(),
                    arguments: json!({}),
                },
                CallLine {
                    verb: "bad".to_owned(),
                    arguments: json!({}),
                },
            ]
        );
        let lines = call_lines(text);
        assert_eq!(
            call_at(&lines, 2, "c".to_owned()).map(|call| call.name),
            Some("echo".to_owned())
        );
        assert_eq!(call_at(&lines, 4, "c".to_owned()), None);
        assert_eq!(call_at(&lines, 0, "c".to_owned()), None);
    }
}
