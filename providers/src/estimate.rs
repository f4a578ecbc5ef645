//! Token counts estimated from a request's size, for a server that reports no usage (many
//! local servers) and for a session's first turn, before any server has counted.
//!
//! About four bytes of text a token: the ratio of the common tokenizers on English and code,
//! close enough for a meter and for the advice to continue (which acts at 70% and 85% of the
//! window, not at the last token). JSON (tool schemas, call arguments) counts by its compact
//! text. Each message adds a few tokens of framing; an image counts as a flat
//! [`IMAGE_TOKENS`], about what the providers bill a picture of a screen.

use crate::message::{
    AssistantBlock, AssistantMessage, Message, Request, ToolSpec, Usage, UserPart,
};

/// Bytes of text a token, about.
pub const BYTES_PER_TOKEN: u64 = 4;
/// The framing each message costs (its role and separators), in tokens.
pub const MESSAGE_OVERHEAD_TOKENS: u64 = 4;
/// What an image costs, in tokens.
pub const IMAGE_TOKENS: u64 = 1_500;

/// The prompt `request` makes, in tokens, estimated from its size.
pub fn request_tokens(request: &Request) -> u64 {
    prompt_tokens(
        &request.system_prompt,
        &request.tools,
        request.messages.iter().map(|message| message.as_ref()),
    )
}

/// The prompt of a system prompt, tools and messages, in tokens, estimated from their size.
pub fn prompt_tokens<'a>(
    system_prompt: &str,
    tools: &[ToolSpec],
    messages: impl IntoIterator<Item = &'a Message>,
) -> u64 {
    let bytes = system_prompt.len() as u64 + tools_bytes(tools);
    let messages: u64 = messages.into_iter().map(message_tokens).sum();
    bytes.div_ceil(BYTES_PER_TOKEN) + messages
}

/// The usage of `response` to `request` when the server counted none: the prompt estimated
/// from the request, the output (unless the server counted it) from the response, marked as
/// an estimate.
pub fn usage(request: &Request, response: &AssistantMessage) -> Usage {
    let counted = response.usage;
    Usage {
        input: request_tokens(request),
        output: if counted.output > 0 {
            counted.output
        } else {
            output_tokens(response)
        },
        cache_read: 0,
        cache_write: 0,
        estimated: true,
    }
}

/// One message, in tokens, framing included.
pub fn message_tokens(message: &Message) -> u64 {
    let (bytes, images) = match message {
        Message::User(user) => {
            let mut bytes = user.text.len() as u64;
            let mut images = 0;
            for part in &user.parts {
                match part {
                    UserPart::Text { text } => bytes += text.len() as u64,
                    UserPart::Image { .. } => images += 1,
                }
            }
            (bytes, images)
        }
        Message::Assistant(assistant) => (assistant_bytes(assistant), 0),
        Message::ToolResult(result) => (result.content.len() as u64, result.images.len() as u64),
    };
    bytes.div_ceil(BYTES_PER_TOKEN) + images * IMAGE_TOKENS + MESSAGE_OVERHEAD_TOKENS
}

/// What a response says, in tokens: its text, reasoning and calls.
pub fn output_tokens(message: &AssistantMessage) -> u64 {
    assistant_bytes(message).div_ceil(BYTES_PER_TOKEN)
}

fn assistant_bytes(message: &AssistantMessage) -> u64 {
    message
        .content
        .iter()
        .map(|block| match block {
            AssistantBlock::Text { text } => text.len(),
            AssistantBlock::Thinking { thinking, .. } => thinking.len(),
            AssistantBlock::RedactedThinking { data } => data.len(),
            AssistantBlock::ToolCall(call) => call.name.len() + json_len(&call.arguments),
        } as u64)
        .sum()
}

fn tools_bytes(tools: &[ToolSpec]) -> u64 {
    tools
        .iter()
        .map(|tool| (tool.name.len() + tool.description.len() + json_len(&tool.parameters)) as u64)
        .sum()
}

fn json_len(value: &serde_json::Value) -> usize {
    serde_json::to_string(value).map_or(0, |text| text.len())
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::message::{ToolCall, ToolResultMessage, UserMessage};
    use crate::scripted::tool_response;

    fn request(messages: Vec<Message>, tools: Vec<ToolSpec>) -> Request {
        Request {
            reasoning: None,
            model: "m".to_owned(),
            system_prompt: "s".repeat(400),
            messages: messages.into_iter().map(Arc::new).collect(),
            tools: Arc::from(tools),
            session_id: None,
        }
    }

    #[test]
    fn a_request_is_about_a_token_per_four_bytes_plus_framing() {
        let empty = request(Vec::new(), Vec::new());
        assert_eq!(request_tokens(&empty), 100);
        let one = request(
            vec![Message::User(UserMessage::new("u".repeat(4_000)))],
            Vec::new(),
        );
        assert_eq!(request_tokens(&one), 100 + 1_000 + MESSAGE_OVERHEAD_TOKENS);
    }

    #[test]
    fn tools_calls_results_and_images_count() {
        let tool = ToolSpec {
            name: "echo".to_owned(),
            description: "d".repeat(96),
            parameters: serde_json::json!({}),
        };
        let with_tool = request(Vec::new(), vec![tool]);
        // 400 + 4 + 96 + 2 bytes.
        assert_eq!(request_tokens(&with_tool), 126);

        let call = tool_response(
            "",
            vec![ToolCall {
                id: "c".to_owned(),
                name: "echo".to_owned(),
                arguments: serde_json::json!({"text": "hi"}),
            }],
        );
        // "echo" and {"text":"hi"}: 17 bytes, 5 tokens.
        assert_eq!(output_tokens(&call), 5);
        assert_eq!(
            message_tokens(&Message::Assistant(call)),
            5 + MESSAGE_OVERHEAD_TOKENS
        );
        let result = Message::ToolResult(ToolResultMessage {
            tool_call_id: "c".to_owned(),
            tool_name: "echo".to_owned(),
            content: "r".repeat(40),
            is_error: false,
            images: Vec::new(),
        });
        assert_eq!(message_tokens(&result), 10 + MESSAGE_OVERHEAD_TOKENS);
        let Message::ToolResult(mut pictured_result) = result else {
            unreachable!("built as a tool result")
        };
        pictured_result.images = vec![crate::ResultImage {
            media_type: "image/png".to_owned(),
            data: "A".repeat(1_000_000),
            attachment_id: None,
        }];
        assert_eq!(
            message_tokens(&Message::ToolResult(pictured_result)),
            10 + IMAGE_TOKENS + MESSAGE_OVERHEAD_TOKENS
        );
        let mut pictured = UserMessage::new("look");
        pictured.parts = vec![UserPart::Image {
            media_type: "image/png".to_owned(),
            data: "A".repeat(1_000_000),
        }];
        assert_eq!(
            message_tokens(&Message::User(pictured)),
            1 + IMAGE_TOKENS + MESSAGE_OVERHEAD_TOKENS
        );
    }

    #[test]
    fn a_usage_estimate_keeps_an_output_the_server_counted_and_says_it_is_one() {
        let asked = request(
            vec![Message::User(UserMessage::new("u".repeat(400)))],
            Vec::new(),
        );
        let mut answer = crate::scripted::text_response("an answer of 20 byte");
        answer.usage = Usage::default();
        let estimated = usage(&asked, &answer);
        assert_eq!(
            estimated,
            Usage {
                input: 100 + 100 + MESSAGE_OVERHEAD_TOKENS,
                output: 5,
                cache_read: 0,
                cache_write: 0,
                estimated: true,
            }
        );
        answer.usage.output = 7;
        assert_eq!(usage(&asked, &answer).output, 7);
    }
}
