//! The OpenAI wire's tests: streams decoded (split at every boundary), finish reasons, broken
//! streams, and request bodies.
use std::sync::Arc;

use super::*;
use crate::http::decode_all;
use crate::message::{ToolResultMessage, ToolSpec, UserMessage};

/// SSE for `chunks`, one `data:` event each, then `[DONE]`.
fn sse(chunks: &[Value]) -> String {
    let mut out = String::new();
    for chunk in chunks {
        out.push_str(&format!("data: {chunk}\n\n"));
    }
    out.push_str("data: [DONE]\n\n");
    out
}

/// Decodes `text` whole and cut into pieces of several sizes: the events must not depend
/// on where the socket split the bytes.
fn decode(text: &str) -> Vec<StreamEvent> {
    let whole = decode_all(text, usize::MAX, OpenAiDecoder::new("requested-model"));
    for piece_bytes in [1, 3, 17, 64] {
        let pieces = decode_all(text, piece_bytes, OpenAiDecoder::new("requested-model"));
        assert_eq!(pieces, whole, "pieces of {piece_bytes}");
    }
    whole
}

fn done(events: &[StreamEvent]) -> &AssistantMessage {
    match events.last() {
        Some(StreamEvent::Done(message)) => message,
        other => panic!("the stream did not end with Done: {other:?}"),
    }
}

fn delta(content: Value) -> Value {
    json!({"id": "c1", "model": "gpt-4o-2024", "choices": [{"index": 0, "delta": content, "finish_reason": null}]})
}

#[test]
fn text_deltas_finish_and_usage_with_cached_tokens() {
    let text = sse(&[
        delta(json!({"role": "assistant", "content": ""})),
        delta(json!({"content": "Hel"})),
        delta(json!({"content": "lo, ünï"})),
        json!({"model": "gpt-4o-2024", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}),
        json!({"model": "gpt-4o-2024", "choices": [], "usage": {"prompt_tokens": 1200, "completion_tokens": 9, "total_tokens": 1209, "prompt_tokens_details": {"cached_tokens": 1024}}}),
    ]);
    let events = decode(&text);
    let usage = Usage {
        input: 176,
        output: 9,
        cache_read: 1024,
        cache_write: 0,
        ..Default::default()
    };
    assert_eq!(
        events[..3],
        [
            StreamEvent::TextDelta("Hel".to_owned()),
            StreamEvent::TextDelta("lo, ünï".to_owned()),
            StreamEvent::Usage(usage),
        ]
    );
    assert_eq!(
        *done(&events),
        AssistantMessage {
            content: vec![AssistantBlock::Text {
                text: "Hello, ünï".to_owned()
            }],
            usage,
            stop_reason: StopReason::Stop,
            model: "gpt-4o-2024".to_owned(),
            error_message: None,
        }
    );
}

#[test]
fn interleaved_tool_calls_with_fragmented_arguments() {
    let call = |index: u32, id: Option<&str>, name: Option<&str>, arguments: &str| {
        let mut function = json!({"arguments": arguments});
        if let Some(name) = name {
            function["name"] = json!(name);
        }
        let mut call = json!({"index": index, "function": function});
        if let Some(id) = id {
            call["id"] = json!(id);
            call["type"] = json!("function");
        }
        delta(json!({"tool_calls": [call]}))
    };
    let text = sse(&[
        delta(json!({"content": "Looking."})),
        call(0, Some("call_a"), Some("read"), ""),
        call(1, Some("call_b"), Some("ls"), "{\"di"),
        call(0, None, None, "{\"path\": "),
        call(1, None, None, "r\": \"/tmp\"}"),
        call(0, None, None, "\"notes.md\"}"),
        // Both fragments in one chunk.
        delta(json!({"tool_calls": [
            {"index": 2, "id": "call_c", "type": "function", "function": {"name": "noop", "arguments": ""}},
        ]})),
        json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}),
        // Some compatible servers send `choices: null` with the usage.
        json!({"choices": null, "usage": {"prompt_tokens": 50, "completion_tokens": 20}}),
    ]);
    let events = decode(&text);
    let calls = [
        ToolCall {
            id: "call_a".to_owned(),
            name: "read".to_owned(),
            arguments: json!({"path": "notes.md"}),
        },
        ToolCall {
            id: "call_b".to_owned(),
            name: "ls".to_owned(),
            arguments: json!({"dir": "/tmp"}),
        },
        ToolCall {
            id: "call_c".to_owned(),
            name: "noop".to_owned(),
            arguments: json!({}),
        },
    ];
    let emitted: Vec<_> = events
        .iter()
        .filter_map(|event| match event {
            StreamEvent::ToolCall(call) => Some(call.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(emitted, calls);
    let message = done(&events);
    assert_eq!(message.stop_reason, StopReason::ToolUse);
    assert_eq!(message.text(), "Looking.");
    assert_eq!(message.tool_calls(), calls.iter().collect::<Vec<_>>());
    assert_eq!(message.usage.input, 50);
    assert_eq!(message.usage.output, 20);
    assert_eq!(message.model, "gpt-4o-2024");
}

#[test]
fn reasoning_text_where_the_server_sends_it() {
    let text = sse(&[
        delta(json!({"reasoning_content": "The user "})),
        delta(json!({"reasoning_content": "greets."})),
        delta(json!({"reasoning": " Answer."})),
        delta(json!({"content": "Hi!"})),
        json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "length"}]}),
    ]);
    let events = decode(&text);
    assert_eq!(
        events[0],
        StreamEvent::ThinkingDelta("The user ".to_owned())
    );
    let message = done(&events);
    assert_eq!(
        message.content,
        [
            AssistantBlock::Thinking {
                thinking: "The user greets. Answer.".to_owned(),
                signature: None,
            },
            AssistantBlock::Text {
                text: "Hi!".to_owned()
            },
        ]
    );
    assert_eq!(message.stop_reason, StopReason::Length);
    assert_eq!(message.model, "gpt-4o-2024");
}

#[test]
fn finish_reasons() {
    for (reason, expected) in [
        ("stop", StopReason::Stop),
        ("length", StopReason::Length),
        ("tool_calls", StopReason::ToolUse),
        ("function_call", StopReason::ToolUse),
        ("content_filter", StopReason::Error),
    ] {
        let text = sse(&[
            json!({"choices": [{"index": 0, "delta": {"content": "x"}, "finish_reason": reason}]}),
        ]);
        let message = done(&decode(&text)).clone();
        assert_eq!(message.stop_reason, expected, "{reason}");
        assert_eq!(
            message.error_message.is_some(),
            expected == StopReason::Error
        );
        // No chunk named a model: the request's stays.
        assert_eq!(message.model, "requested-model");
    }
}

#[test]
fn broken_streams_end_with_an_error_after_what_arrived() {
    // A malformed chunk.
    let text = format!(
        "data: {}\n\ndata: {{\"choices\": [{{\"delta\": \n\n{}",
        delta(json!({"content": "partial"})),
        sse(&[delta(json!({"content": "never seen"}))]),
    );
    let events = decode(&text);
    assert_eq!(events.len(), 2, "{events:?}");
    assert_eq!(events[0], StreamEvent::TextDelta("partial".to_owned()));
    let StreamEvent::Error(error) = &events[1] else {
        panic!("{events:?}");
    };
    assert_eq!(error.kind, ProviderErrorKind::Malformed);

    // A body that stops before the answer finished.
    let text = format!("data: {}\n\n", delta(json!({"content": "cut"})));
    let events = decode(&text);
    assert_eq!(events[0], StreamEvent::TextDelta("cut".to_owned()));
    assert!(
        matches!(&events[1], StreamEvent::Error(error) if error.kind == ProviderErrorKind::Transport),
        "{events:?}"
    );

    // An error the server reports in the stream.
    let text = format!(
        "data: {}\n\ndata: {}\n\n",
        delta(json!({"content": "so far"})),
        json!({"error": {"message": "the model crashed", "code": 500}})
    );
    let events = decode(&text);
    assert_eq!(
        events[1],
        StreamEvent::Error(ProviderError::new(
            ProviderErrorKind::Transport,
            "the model crashed"
        ))
    );

    // A server that finished but closed without `[DONE]` still answered.
    let text = format!(
        "data: {}\n\n",
        json!({"choices": [{"index": 0, "delta": {"content": "ok"}, "finish_reason": "stop"}]})
    );
    assert_eq!(done(&decode(&text)).text(), "ok");
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
