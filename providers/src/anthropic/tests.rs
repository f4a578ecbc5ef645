//! The Anthropic wire's tests: request bodies, the thinking budget, and streams decoded (the
//! prompt cache's marks are in `cache_tests.rs`).
use std::sync::Arc;

use super::*;
use crate::http::decode_all;
use crate::message::{Message, ReasoningLevel, ToolResultMessage, ToolSpec, UserMessage, UserPart};

/// SSE for `events`, each named by its `type` as the server names them.
fn sse(events: &[Value]) -> String {
    let mut out = String::new();
    for event in events {
        let name = event["type"].as_str().expect("typed");
        out.push_str(&format!("event: {name}\ndata: {event}\n\n"));
    }
    out
}

fn decode(text: &str) -> Vec<StreamEvent> {
    let whole = decode_all(text, usize::MAX, AnthropicDecoder::new("requested"));
    for piece_bytes in [1, 5, 33] {
        let pieces = decode_all(text, piece_bytes, AnthropicDecoder::new("requested"));
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

pub(super) const SIGNATURE: &str = "EqQBCkYIARgCKkD+/sig==\n\t ünï \"q\" \\";

fn thinking_and_tools() -> Vec<Value> {
    vec![
        json!({"type": "message_start", "message": {"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5-20250929", "content": [], "stop_reason": null, "usage": {"input_tokens": 12, "cache_creation_input_tokens": 3000, "cache_read_input_tokens": 0, "output_tokens": 1}}}),
        json!({"type": "content_block_start", "index": 0, "content_block": {"type": "thinking", "thinking": "", "signature": ""}}),
        json!({"type": "ping"}),
        json!({"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "Two files "}}),
        json!({"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "to read."}}),
        json!({"type": "content_block_delta", "index": 0, "delta": {"type": "signature_delta", "signature": SIGNATURE}}),
        json!({"type": "content_block_stop", "index": 0}),
        json!({"type": "content_block_start", "index": 1, "content_block": {"type": "redacted_thinking", "data": "opaque=="}}),
        json!({"type": "content_block_stop", "index": 1}),
        json!({"type": "content_block_start", "index": 2, "content_block": {"type": "text", "text": ""}}),
        json!({"type": "content_block_delta", "index": 2, "delta": {"type": "text_delta", "text": "Reading "}}),
        json!({"type": "content_block_delta", "index": 2, "delta": {"type": "text_delta", "text": "both."}}),
        json!({"type": "content_block_stop", "index": 2}),
        json!({"type": "content_block_start", "index": 3, "content_block": {"type": "tool_use", "id": "toolu_a", "name": "read", "input": {}}}),
        json!({"type": "content_block_delta", "index": 3, "delta": {"type": "input_json_delta", "partial_json": ""}}),
        json!({"type": "content_block_delta", "index": 3, "delta": {"type": "input_json_delta", "partial_json": "{\"path\": \"a"}}),
        json!({"type": "content_block_delta", "index": 3, "delta": {"type": "input_json_delta", "partial_json": ".md\"}"}}),
        json!({"type": "content_block_stop", "index": 3}),
        json!({"type": "content_block_start", "index": 4, "content_block": {"type": "tool_use", "id": "toolu_b", "name": "list", "input": {}}}),
        json!({"type": "content_block_stop", "index": 4}),
        json!({"type": "message_delta", "delta": {"stop_reason": "tool_use", "stop_sequence": null}, "usage": {"output_tokens": 87}}),
        json!({"type": "message_stop"}),
    ]
}

#[test]
fn thinking_with_its_signature_text_and_tool_use() {
    let events = decode(&sse(&thinking_and_tools()));
    let read = ToolCall {
        id: "toolu_a".to_owned(),
        name: "read".to_owned(),
        arguments: json!({"path": "a.md"}),
    };
    let list = ToolCall {
        id: "toolu_b".to_owned(),
        name: "list".to_owned(),
        arguments: json!({}),
    };
    let start_usage = Usage {
        input: 12,
        output: 1,
        cache_read: 0,
        cache_write: 3000,
        ..Default::default()
    };
    let final_usage = Usage {
        output: 87,
        ..start_usage
    };
    assert_eq!(
        events[..events.len() - 1],
        [
            StreamEvent::Usage(start_usage),
            StreamEvent::ThinkingDelta("Two files ".to_owned()),
            StreamEvent::ThinkingDelta("to read.".to_owned()),
            StreamEvent::TextDelta("Reading ".to_owned()),
            StreamEvent::TextDelta("both.".to_owned()),
            StreamEvent::ToolCall(read.clone()),
            StreamEvent::ToolCall(list.clone()),
            // Cumulative: overwrites the 1 output token of message_start, never adds.
            StreamEvent::Usage(final_usage),
        ]
    );
    assert_eq!(
        *done(&events),
        AssistantMessage {
            content: vec![
                AssistantBlock::Thinking {
                    thinking: "Two files to read.".to_owned(),
                    signature: Some(SIGNATURE.to_owned()),
                },
                AssistantBlock::RedactedThinking {
                    data: "opaque==".to_owned()
                },
                AssistantBlock::Text {
                    text: "Reading both.".to_owned()
                },
                AssistantBlock::ToolCall(read),
                AssistantBlock::ToolCall(list),
            ],
            usage: final_usage,
            stop_reason: StopReason::ToolUse,
            model: "claude-sonnet-4-5-20250929".to_owned(),
            error_message: None,
        }
    );
}

#[test]
fn usage_from_message_delta_overwrites_every_field_it_names() {
    let events = decode(&sse(&[
        json!({"type": "message_start", "message": {"model": "claude-x", "usage": {"input_tokens": 5, "output_tokens": 1}}}),
        json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": "Hi"}}),
        json!({"type": "content_block_stop", "index": 0}),
        json!({"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"input_tokens": 7, "cache_read_input_tokens": 4000, "cache_creation_input_tokens": 20, "output_tokens": 2}}),
        json!({"type": "message_stop"}),
    ]));
    assert_eq!(events[1], StreamEvent::TextDelta("Hi".to_owned()));
    let message = done(&events);
    assert_eq!(
        message.usage,
        Usage {
            input: 7,
            output: 2,
            cache_read: 4000,
            cache_write: 20,
            ..Default::default()
        }
    );
    assert_eq!(message.usage.prompt_tokens(), 4027);
    assert_eq!(message.stop_reason, StopReason::Stop);
}

#[test]
fn stop_reasons() {
    for (reason, expected) in [
        ("end_turn", StopReason::Stop),
        ("stop_sequence", StopReason::Stop),
        ("tool_use", StopReason::ToolUse),
        ("max_tokens", StopReason::Length),
        ("refusal", StopReason::Error),
    ] {
        let events = decode(&sse(&[
            json!({"type": "message_start", "message": {}}),
            json!({"type": "message_delta", "delta": {"stop_reason": reason}}),
            json!({"type": "message_stop"}),
        ]));
        let message = done(&events);
        assert_eq!(message.stop_reason, expected, "{reason}");
        assert_eq!(message.model, "requested");
    }
}

#[test]
fn errors_mid_stream_keep_what_arrived() {
    let mut events = thinking_and_tools()[..11].to_vec();
    events.push(
        json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
    );
    events.extend(thinking_and_tools()[11..].iter().cloned());
    let decoded = decode(&sse(&events));
    assert_eq!(
        decoded.last(),
        Some(&StreamEvent::Error(ProviderError::new(
            ProviderErrorKind::Http { status: 529 },
            "Overloaded"
        )))
    );
    assert!(decoded.contains(&StreamEvent::TextDelta("Reading ".to_owned())));
    assert!(!decoded.contains(&StreamEvent::TextDelta("both.".to_owned())));

    // A malformed event.
    let mut text = sse(&thinking_and_tools()[..4]);
    text.push_str(
        "event: content_block_delta\ndata: {\"type\": \"content_block_delta\", \"ind\n\n",
    );
    let decoded = decode(&text);
    assert!(
        matches!(decoded.last(), Some(StreamEvent::Error(error)) if error.kind == ProviderErrorKind::Malformed),
        "{decoded:?}"
    );
    assert_eq!(decoded.len(), 3, "{decoded:?}");

    // A delta for a block that never started.
    let decoded = decode(&sse(&[
        json!({"type": "content_block_delta", "index": 9, "delta": {"type": "text_delta", "text": "x"}}),
    ]));
    assert!(
        matches!(&decoded[0], StreamEvent::Error(error) if error.kind == ProviderErrorKind::Malformed)
    );

    // Cut before message_stop.
    let decoded = decode(&sse(&thinking_and_tools()[..12]));
    assert!(
        matches!(decoded.last(), Some(StreamEvent::Error(error)) if error.kind == ProviderErrorKind::Transport),
        "{decoded:?}"
    );

    // An event type the decoder does not know is skipped.
    let mut events = thinking_and_tools();
    events.insert(3, json!({"type": "future_event", "data": 1}));
    assert_eq!(decode(&sse(&events)), decode(&sse(&thinking_and_tools())));
}

/// A request of one turn: an input, an answer with two calls, their results, a block.
pub(super) fn request() -> Request {
    let Some(StreamEvent::Done(first)) = decode(&sse(&thinking_and_tools())).pop() else {
        panic!("no message");
    };
    Request {
        reasoning: None,
        model: "claude-opus-4-1".to_owned(),
        system_prompt: "You are terse.".to_owned(),
        messages: vec![
            Arc::new(Message::User(UserMessage::new("read both".to_owned()))),
            Arc::new(Message::Assistant(first)),
            Arc::new(Message::ToolResult(ToolResultMessage {
                tool_call_id: "toolu_a".to_owned(),
                tool_name: "read".to_owned(),
                content: "A".to_owned(),
                is_error: false,
            })),
            Arc::new(Message::ToolResult(ToolResultMessage {
                tool_call_id: "toolu_b".to_owned(),
                tool_name: "list".to_owned(),
                content: "no such dir".to_owned(),
                is_error: true,
            })),
            Arc::new(Message::User(UserMessage::new(
                "<current_time>now</current_time>".to_owned(),
            ))),
        ],
        tools: Arc::from(vec![
            ToolSpec {
                name: "read".to_owned(),
                description: "reads".to_owned(),
                parameters: json!({"type": "object"}),
            },
            ToolSpec {
                name: "list".to_owned(),
                description: "lists".to_owned(),
                parameters: json!({"type": "object"}),
            },
        ]),
        session_id: Some("session-9".to_owned()),
    }
}

/// A session's reasoning level is the thinking budget, over the configured one, and always
/// below `max_tokens`; without one, the configured budget (or none).
#[test]
fn a_reasoning_level_is_a_thinking_budget_below_max_tokens() {
    let options = |max_output_tokens, thinking_budget_tokens| BodyOptions {
        model_default: "claude-sonnet-4-5".to_owned(),
        max_output_tokens,
        thinking_budget_tokens,
    };
    let budget = |reasoning, options: &BodyOptions| {
        let request = Request {
            reasoning,
            ..request()
        };
        request_body(&request, options)["thinking"]["budget_tokens"].clone()
    };
    let roomy = options(Some(32_000), Some(2048));
    assert_eq!(budget(Some(ReasoningLevel::Low), &roomy), json!(1024));
    assert_eq!(budget(Some(ReasoningLevel::Medium), &roomy), json!(4096));
    assert_eq!(budget(Some(ReasoningLevel::High), &roomy), json!(16_384));
    assert_eq!(budget(None, &roomy), json!(2048));
    let tight = options(None, None);
    assert_eq!(
        budget(Some(ReasoningLevel::High), &tight),
        json!(MAX_OUTPUT_TOKENS_DEFAULT - 1)
    );
    assert_eq!(budget(None, &tight), serde_json::Value::Null);
    assert_eq!(
        thinking_budget(ReasoningLevel::High, 500),
        THINKING_BUDGET_TOKENS_MIN
    );
}

#[test]
fn the_request_body_sends_the_answer_back_exactly() {
    let options = BodyOptions {
        model_default: "claude-sonnet-4-5".to_owned(),
        max_output_tokens: None,
        thinking_budget_tokens: Some(2048),
    };
    let body = request_body(&request(), &options);
    assert_eq!(
        body,
        json!({
            "model": "claude-opus-4-1",
            "max_tokens": MAX_OUTPUT_TOKENS_DEFAULT,
            "stream": true,
            "system": [{"type": "text", "text": "You are terse.",
                        "cache_control": {"type": "ephemeral"}}],
            "messages": [
                // Marked: the previous run of user messages (a turn's input).
                {"role": "user", "content": [{"type": "text", "text": "read both",
                                              "cache_control": {"type": "ephemeral"}}]},
                {"role": "assistant", "content": [
                    {"type": "thinking", "thinking": "Two files to read.", "signature": SIGNATURE},
                    {"type": "redacted_thinking", "data": "opaque=="},
                    {"type": "text", "text": "Reading both."},
                    {"type": "tool_use", "id": "toolu_a", "name": "read", "input": {"path": "a.md"}},
                    {"type": "tool_use", "id": "toolu_b", "name": "list", "input": {}},
                ]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_a", "content": "A", "is_error": false},
                    {"type": "tool_result", "tool_use_id": "toolu_b", "content": "no such dir", "is_error": true},
                    // Marked: it begins the last run of user messages (this turn's input).
                    {"type": "text", "text": "<current_time>now</current_time>",
                     "cache_control": {"type": "ephemeral"}},
                ]},
            ],
            "tools": [
                {"name": "read", "description": "reads", "input_schema": {"type": "object"}},
                {"name": "list", "description": "lists", "input_schema": {"type": "object"},
                 "cache_control": {"type": "ephemeral"}},
            ],
            "thinking": {"type": "enabled", "budget_tokens": 2048},
            "metadata": {"user_id": "session-9"},
        })
    );
    // The default model when the session names none.
    let request = Request {
        model: String::new(),
        ..request()
    };
    assert_eq!(
        request_body(&request, &options)["model"],
        "claude-sonnet-4-5"
    );
}

#[test]
fn a_message_with_an_image_sends_an_image_block() {
    let attached = Message::User(UserMessage {
        text: String::new(),
        parts: vec![
            UserPart::Text {
                text: "attachment:a1 (dot.png, image/png, 68 bytes): the image follows.".to_owned(),
            },
            UserPart::Image {
                media_type: "image/png".to_owned(),
                data: "iVBORw0KGgo=".to_owned(),
            },
        ],
    });
    let request = Request {
        messages: vec![Arc::new(attached)],
        ..request()
    };
    let body = request_body(&request, &BodyOptions::default());
    // No empty text block: the wire refuses them. The input's last block carries its mark.
    assert_eq!(
        body["messages"],
        json!([{"role": "user", "content": [
            {"type": "text",
             "text": "attachment:a1 (dot.png, image/png, 68 bytes): the image follows."},
            {"type": "image",
             "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="},
             "cache_control": {"type": "ephemeral"}},
        ]}])
    );
}

/// A call whose arguments did not parse (a token limit cut it mid-way) is kept as the text that
/// came; the wire types `input` as an object and refuses every later request of a conversation
/// that carries a string there, so such a call goes back with `{}`. The call's error result (the
/// verb's argument check) tells the model what went wrong.
#[test]
fn arguments_that_are_not_an_object_go_back_as_an_empty_object() {
    let Some(StreamEvent::Done(cut)) = decode(&sse(&[
        json!({"type": "message_start", "message": {"model": "claude-x"}}),
        json!({"type": "content_block_start", "index": 0, "content_block": {"type": "tool_use", "id": "toolu_cut", "name": "read", "input": {}}}),
        json!({"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": "{\"path\": \"no"}}),
        json!({"type": "content_block_stop", "index": 0}),
        json!({"type": "message_delta", "delta": {"stop_reason": "max_tokens"}}),
        json!({"type": "message_stop"}),
    ]))
    .pop() else {
        panic!("no message");
    };
    // The store keeps what came.
    assert_eq!(
        cut.tool_calls()[0].arguments,
        json!("{\"path\": \"no"),
        "{cut:?}"
    );
    let call = |id: &str, arguments: Value| {
        AssistantBlock::ToolCall(ToolCall {
            id: id.to_owned(),
            name: "read".to_owned(),
            arguments,
        })
    };
    let mut answer = cut.clone();
    answer.content.extend([
        call("toolu_list", json!(["a.md"])),
        call("toolu_n", json!(7)),
        call("toolu_null", Value::Null),
        call("toolu_ok", json!({"path": "a.md"})),
    ]);
    let result = |id: &str| {
        Arc::new(Message::ToolResult(ToolResultMessage {
            tool_call_id: id.to_owned(),
            tool_name: "read".to_owned(),
            content: "invalid arguments for read: arguments: expected an object, got a string"
                .to_owned(),
            is_error: true,
        }))
    };
    let request = Request {
        messages: vec![
            Arc::new(Message::User(UserMessage::new("read it"))),
            Arc::new(Message::Assistant(answer)),
            result("toolu_cut"),
            result("toolu_list"),
            result("toolu_n"),
            result("toolu_null"),
            result("toolu_ok"),
        ],
        ..request()
    };
    let body = request_body(&request, &BodyOptions::default());
    let inputs: Vec<(&str, &Value)> = body["messages"][1]["content"]
        .as_array()
        .expect("the answer's blocks")
        .iter()
        .map(|block| (block["id"].as_str().expect("an id"), &block["input"]))
        .collect();
    assert_eq!(
        inputs,
        [
            ("toolu_cut", &json!({})),
            ("toolu_list", &json!({})),
            ("toolu_n", &json!({})),
            ("toolu_null", &json!({})),
            ("toolu_ok", &json!({"path": "a.md"})),
        ]
    );
}
