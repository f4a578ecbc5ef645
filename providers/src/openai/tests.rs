//! The OpenAI wire's tests: streams decoded, from a table (split at every boundary: finish
//! reasons, reasoning, interleaved calls, broken streams), and request bodies.
use std::sync::Arc;

use super::*;
use crate::http::decode_all;
use crate::message::{ResultImage, ToolResultMessage, ToolSpec, UserMessage};

use crate::decoder_table;

/// Decodes `payloads`, one `data:` event each, whole and cut into pieces of several sizes:
/// the events must not depend on where the socket split the bytes.
fn decode(payloads: &[&str]) -> Vec<StreamEvent> {
    let text: String = payloads
        .iter()
        .map(|payload| format!("data: {payload}\n\n"))
        .collect();
    let whole = decode_all(&text, usize::MAX, OpenAiDecoder::new("requested-model"));
    for piece_bytes in [1, 3, 17, 64] {
        let pieces = decode_all(&text, piece_bytes, OpenAiDecoder::new("requested-model"));
        assert_eq!(pieces, whole, "pieces of {piece_bytes}");
    }
    whole
}

/// What the decoder makes of a stream, for a request to `requested-model`.
#[test]
fn streams_decoded_from_a_table() {
    let table: &[decoder_table::Row] = &[
        (
            "text deltas, then usage with the cached tokens apart from the fresh",
            r#"
            {"id": "c1", "model": "gpt-4o-2024", "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": null}]}
            {"id": "c1", "model": "gpt-4o-2024", "choices": [{"index": 0, "delta": {"content": "Hel"}, "finish_reason": null}]}
            {"id": "c1", "model": "gpt-4o-2024", "choices": [{"index": 0, "delta": {"content": "lo, ünï"}, "finish_reason": null}]}
            {"model": "gpt-4o-2024", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
            {"model": "gpt-4o-2024", "choices": [], "usage": {"prompt_tokens": 1200, "completion_tokens": 9, "total_tokens": 1209, "prompt_tokens_details": {"cached_tokens": 1024}}}
            [DONE]
            "#,
            r#"
            text "Hel"
            text "lo, ünï"
            usage input=176 output=9 cache_read=1024 cache_write=0
            done stop model=gpt-4o-2024
              usage input=176 output=9 cache_read=1024 cache_write=0
              text "Hello, ünï"
            "#,
        ),
        (
            "interleaved calls whose arguments come in fragments, handed out at the finish \
             reason; usage under choices: null",
            r#"
            {"model": "gpt-4o-2024", "choices": [{"index": 0, "delta": {"content": "Looking."}}]}
            {"model": "gpt-4o-2024", "choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "id": "call_a", "type": "function", "function": {"name": "read", "arguments": ""}}]}}]}
            {"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 1, "id": "call_b", "type": "function", "function": {"name": "ls", "arguments": "{\"di"}}]}}]}
            {"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": "{\"path\": "}}]}}]}
            {"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 1, "function": {"arguments": "r\": \"/tmp\"}"}}]}}]}
            {"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": "\"notes.md\"}"}}]}}]}
            {"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 2, "id": "call_c", "type": "function", "function": {"name": "noop", "arguments": ""}}]}}]}
            {"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}
            {"choices": null, "usage": {"prompt_tokens": 50, "completion_tokens": 20}}
            [DONE]
            "#,
            r#"
            text "Looking."
            call call_a read {"path":"notes.md"}
            call call_b ls {"dir":"/tmp"}
            call call_c noop {}
            usage input=50 output=20 cache_read=0 cache_write=0
            done tool_use model=gpt-4o-2024
              usage input=50 output=20 cache_read=0 cache_write=0
              text "Looking."
              call call_a read {"path":"notes.md"}
              call call_b ls {"dir":"/tmp"}
              call call_c noop {}
            "#,
        ),
        (
            "calls in one chunk without an index take their position",
            r#"
            {"choices": [{"delta": {"tool_calls": [{"id": "call_a", "function": {"name": "read", "arguments": "{\"path\": \"a\"}"}}, {"id": "call_b", "function": {"name": "ls", "arguments": "[1"}}]}}]}
            {"choices": [{"delta": {}, "finish_reason": "tool_calls"}]}
            [DONE]
            "#,
            r#"
            call call_a read {"path":"a"}
            call call_b ls "[1"
            done tool_use model=requested-model
              call call_a read {"path":"a"}
              call call_b ls "[1"
            "#,
        ),
        (
            "reasoning as reasoning_content or reasoning, one block before the text",
            r#"
            {"model": "gpt-4o-2024", "choices": [{"index": 0, "delta": {"reasoning_content": "The user "}}]}
            {"choices": [{"index": 0, "delta": {"reasoning_content": "greets."}}]}
            {"choices": [{"index": 0, "delta": {"reasoning": " Answer."}}]}
            {"choices": [{"index": 0, "delta": {"content": "Hi!"}}]}
            {"choices": [{"index": 0, "delta": {}, "finish_reason": "length"}]}
            [DONE]
            "#,
            r#"
            thinking "The user "
            thinking "greets."
            thinking " Answer."
            text "Hi!"
            done length model=gpt-4o-2024
              thinking "The user greets. Answer."
              text "Hi!"
            "#,
        ),
        (
            "finish reason stop; no chunk named a model: the request's stays",
            r#"
            {"choices": [{"index": 0, "delta": {"content": "x"}, "finish_reason": "stop"}]}
            [DONE]
            "#,
            r#"
            text "x"
            done stop model=requested-model
              text "x"
            "#,
        ),
        (
            "finish reason length",
            r#"
            {"choices": [{"index": 0, "delta": {"content": "x"}, "finish_reason": "length"}]}
            [DONE]
            "#,
            r#"
            text "x"
            done length model=requested-model
              text "x"
            "#,
        ),
        (
            "finish reason tool_calls",
            r#"
            {"choices": [{"index": 0, "delta": {"content": "x"}, "finish_reason": "tool_calls"}]}
            [DONE]
            "#,
            r#"
            text "x"
            done tool_use model=requested-model
              text "x"
            "#,
        ),
        (
            "finish reason function_call, the older name",
            r#"
            {"choices": [{"index": 0, "delta": {"content": "x"}, "finish_reason": "function_call"}]}
            [DONE]
            "#,
            r#"
            text "x"
            done tool_use model=requested-model
              text "x"
            "#,
        ),
        (
            "finish reason content_filter is an error that says so",
            r#"
            {"choices": [{"index": 0, "delta": {"content": "x"}, "finish_reason": "content_filter"}]}
            [DONE]
            "#,
            r#"
            text "x"
            done error model=requested-model
              error_message "the provider's content filter stopped the response"
              text "x"
            "#,
        ),
        (
            "[DONE] without a finish reason: tool_use when calls came",
            r#"
            {"choices": [{"delta": {"tool_calls": [{"index": 0, "id": "call_a", "function": {"name": "noop"}}]}}]}
            [DONE]
            "#,
            r#"
            call call_a noop {}
            done tool_use model=requested-model
              call call_a noop {}
            "#,
        ),
        (
            "a malformed chunk ends the stream after what arrived",
            r#"
            {"choices": [{"index": 0, "delta": {"content": "partial"}}]}
            {"choices": [{"delta":
            {"choices": [{"index": 0, "delta": {"content": "never seen"}}]}
            [DONE]
            "#,
            r#"
            text "partial"
            error malformed: a chunk does not parse: EOF while parsing a value at line 1 column 22
            "#,
        ),
        (
            "a body that stops before the answer finished",
            r#"
            {"choices": [{"index": 0, "delta": {"content": "cut"}}]}
            "#,
            r#"
            text "cut"
            error transport: the stream ended before the response finished
            "#,
        ),
        (
            "an error the server reports in the stream",
            r#"
            {"choices": [{"index": 0, "delta": {"content": "so far"}}]}
            {"error": {"message": "the model crashed", "code": 500}}
            [DONE]
            "#,
            r#"
            text "so far"
            error transport: the model crashed
            "#,
        ),
        (
            "an error the server reports without a message",
            r#"
            {"error": {"code": 500}}
            "#,
            r#"
            error transport: the provider reported an error
            "#,
        ),
        (
            "a server that finished but closed without [DONE] still answered",
            r#"
            {"choices": [{"index": 0, "delta": {"content": "ok"}, "finish_reason": "stop"}]}
            "#,
            r#"
            text "ok"
            done stop model=requested-model
              text "ok"
            "#,
        ),
    ];
    decoder_table::check(table, decode);
}

fn request() -> Request {
    Request {
        reasoning: None,
        model: String::new(),
        system_prompt: "You are terse.".to_owned(),
        messages: vec![
            Arc::new(Message::User(UserMessage::new("list /tmp".to_owned()))),
            Arc::new(Message::Assistant(AssistantMessage {
                content: vec![
                    AssistantBlock::Thinking {
                        thinking: "ls it".to_owned(),
                        signature: None,
                    },
                    AssistantBlock::ToolCall(ToolCall {
                        id: "call_1".to_owned(),
                        name: "ls".to_owned(),
                        arguments: json!({"dir": "/tmp"}),
                    }),
                    AssistantBlock::ToolCall(ToolCall {
                        id: "call_2".to_owned(),
                        name: "raw".to_owned(),
                        arguments: json!("{not json"),
                    }),
                ],
                usage: Usage::default(),
                stop_reason: StopReason::ToolUse,
                model: "m".to_owned(),
                error_message: None,
            })),
            Arc::new(Message::ToolResult(ToolResultMessage {
                tool_call_id: "call_1".to_owned(),
                tool_name: "ls".to_owned(),
                content: "a b".to_owned(),
                is_error: false,
                images: Vec::new(),
            })),
        ],
        tools: Arc::from(vec![ToolSpec {
            name: "ls".to_owned(),
            description: "lists".to_owned(),
            parameters: json!({"type": "object"}),
        }]),
        session_id: Some("session-7".to_owned()),
    }
}

#[test]
fn the_request_body() {
    let options = BodyOptions {
        model_default: "gpt-4.1-mini".to_owned(),
        max_output_tokens: Some(1000),
    };
    let body = request_body(&request(), &options);
    assert_eq!(
        body,
        json!({
            "model": "gpt-4.1-mini",
            "messages": [
                {"role": "system", "content": "You are terse."},
                {"role": "user", "content": "list /tmp"},
                {"role": "assistant", "content": null, "tool_calls": [
                    {"id": "call_1", "type": "function",
                     "function": {"name": "ls", "arguments": "{\"dir\":\"/tmp\"}"}},
                    {"id": "call_2", "type": "function",
                     "function": {"name": "raw", "arguments": "{not json"}},
                ]},
                {"role": "tool", "tool_call_id": "call_1", "content": "a b"},
            ],
            "tools": [{"type": "function", "function": {
                "name": "ls", "description": "lists", "parameters": {"type": "object"}}}],
            "stream": true,
            "stream_options": {"include_usage": true},
            "max_completion_tokens": 1000,
            "prompt_cache_key": "session-7",
        })
    );
    // A session's own model goes on the wire instead of the default.
    let request = Request {
        model: "gpt-5".to_owned(),
        session_id: None,
        ..request()
    };
    let body = request_body(&request, &options);
    assert_eq!(body["model"], "gpt-5");
    assert!(body.get("prompt_cache_key").is_none());
    // A session's reasoning level goes as the wire's reasoning effort; none without one.
    assert!(body.get("reasoning_effort").is_none());
    for level in crate::ReasoningLevel::ALL {
        let request = Request {
            reasoning: Some(level),
            ..request.clone()
        };
        assert_eq!(
            request_body(&request, &options)["reasoning_effort"],
            level.name()
        );
    }
}

/// A message with attached files: an array of parts, the image as a `data:` URL.
fn attached() -> Message {
    Message::User(UserMessage {
        text: "what is this?".to_owned(),
        parts: vec![
            UserPart::Text {
                text: "attachment:a1 (dot.png, image/png, 68 bytes): the image follows.".to_owned(),
            },
            UserPart::Image {
                media_type: "image/png".to_owned(),
                data: "iVBORw0KGgo=".to_owned(),
            },
        ],
    })
}

#[test]
fn a_message_with_an_image_sends_parts() {
    let request = Request {
        messages: vec![Arc::new(attached())],
        ..request()
    };
    let body = request_body(&request, &BodyOptions::default());
    assert_eq!(
        body["messages"][1],
        json!({"role": "user", "content": [
            {"type": "text", "text": "what is this?"},
            {"type": "text",
             "text": "attachment:a1 (dot.png, image/png, 68 bytes): the image follows."},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
        ]})
    );
}

/// Chat Completions takes text alone in a tool message: a result's images are left out, and
/// its text (which names them) is sent.
#[test]
fn a_tool_result_sends_its_text_alone() {
    let result = Message::ToolResult(ToolResultMessage {
        tool_call_id: "call_1".to_owned(),
        tool_name: "shot__take".to_owned(),
        content: "[image/png, 8 bytes: attachment:c1-1]".to_owned(),
        is_error: false,
        images: vec![ResultImage {
            media_type: "image/png".to_owned(),
            data: "iVBORw0KGgo=".to_owned(),
            attachment_id: None,
        }],
    });
    let request = Request {
        messages: vec![Arc::new(result)],
        ..request()
    };
    let body = request_body(&request, &BodyOptions::default());
    assert_eq!(
        body["messages"][1],
        json!({"role": "tool", "tool_call_id": "call_1",
               "content": "[image/png, 8 bytes: attachment:c1-1]"})
    );
}
