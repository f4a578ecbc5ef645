//! The Anthropic wire's tests: streams decoded, from a table (split at every boundary: blocks
//! of every kind, usage, stop reasons, errors and broken streams), request bodies and the
//! thinking budget (the prompt cache's marks are in `cache_tests.rs`).
use std::sync::Arc;

use super::*;
use crate::http::decode_all;
use crate::message::{
    Message, ReasoningLevel, ResultImage, ToolResultMessage, ToolSpec, UserMessage, UserPart,
};

use crate::decoder_table;

/// Decodes `payloads`, one `data:` event each, named by its `type` as the server names them
/// (a payload that does not parse goes unnamed), whole and cut into pieces of several sizes:
/// the events must not depend on where the socket split the bytes.
fn decode(payloads: &[&str]) -> Vec<StreamEvent> {
    let mut text = String::new();
    for payload in payloads {
        let parsed: Option<Value> = serde_json::from_str(payload).ok();
        if let Some(name) = parsed.as_ref().and_then(|event| event["type"].as_str()) {
            text.push_str(&format!("event: {name}\n"));
        }
        text.push_str(&format!("data: {payload}\n\n"));
    }
    let whole = decode_all(&text, usize::MAX, AnthropicDecoder::new("requested"));
    for piece_bytes in [1, 5, 33] {
        let pieces = decode_all(&text, piece_bytes, AnthropicDecoder::new("requested"));
        assert_eq!(pieces, whole, "pieces of {piece_bytes}");
    }
    whole
}

/// The signature of [`THINKING_AND_TOOLS`]'s thinking: escapes and non-ASCII, kept exactly.
pub(super) const SIGNATURE: &str = "EqQBCkYIARgCKkD+/sig==\n\t ünï \"q\" \\";

/// An answer of every kind of block: thinking with its signature, redacted thinking, text, a
/// call whose input comes in fragments and one with none; a ping between.
const THINKING_AND_TOOLS: &str = r#"
    {"type": "message_start", "message": {"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5-20250929", "content": [], "stop_reason": null, "usage": {"input_tokens": 12, "cache_creation_input_tokens": 3000, "cache_read_input_tokens": 0, "output_tokens": 1}}}
    {"type": "content_block_start", "index": 0, "content_block": {"type": "thinking", "thinking": "", "signature": ""}}
    {"type": "ping"}
    {"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "Two files "}}
    {"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "to read."}}
    {"type": "content_block_delta", "index": 0, "delta": {"type": "signature_delta", "signature": "EqQBCkYIARgCKkD+/sig==\n\t ünï \"q\" \\"}}
    {"type": "content_block_stop", "index": 0}
    {"type": "content_block_start", "index": 1, "content_block": {"type": "redacted_thinking", "data": "opaque=="}}
    {"type": "content_block_stop", "index": 1}
    {"type": "content_block_start", "index": 2, "content_block": {"type": "text", "text": ""}}
    {"type": "content_block_delta", "index": 2, "delta": {"type": "text_delta", "text": "Reading "}}
    {"type": "content_block_delta", "index": 2, "delta": {"type": "text_delta", "text": "both."}}
    {"type": "content_block_stop", "index": 2}
    {"type": "content_block_start", "index": 3, "content_block": {"type": "tool_use", "id": "toolu_a", "name": "read", "input": {}}}
    {"type": "content_block_delta", "index": 3, "delta": {"type": "input_json_delta", "partial_json": ""}}
    {"type": "content_block_delta", "index": 3, "delta": {"type": "input_json_delta", "partial_json": "{\"path\": \"a"}}
    {"type": "content_block_delta", "index": 3, "delta": {"type": "input_json_delta", "partial_json": ".md\"}"}}
    {"type": "content_block_stop", "index": 3}
    {"type": "content_block_start", "index": 4, "content_block": {"type": "tool_use", "id": "toolu_b", "name": "list", "input": {}}}
    {"type": "content_block_stop", "index": 4}
    {"type": "message_delta", "delta": {"stop_reason": "tool_use", "stop_sequence": null}, "usage": {"output_tokens": 87}}
    {"type": "message_stop"}
"#;

/// What the decoder makes of a stream, for a request to `requested`.
#[test]
fn streams_decoded_from_a_table() {
    let table: &[decoder_table::Row] = &[
        (
            "every kind of block; the signature kept exactly; message_delta's usage overwrites \
             the output of message_start, never adds",
            THINKING_AND_TOOLS,
            r#"
            usage input=12 output=1 cache_read=0 cache_write=3000
            thinking "Two files "
            thinking "to read."
            text "Reading "
            text "both."
            call toolu_a read {"path":"a.md"}
            call toolu_b list {}
            usage input=12 output=87 cache_read=0 cache_write=3000
            done tool_use model=claude-sonnet-4-5-20250929
              usage input=12 output=87 cache_read=0 cache_write=3000
              thinking "Two files to read." signature "EqQBCkYIARgCKkD+/sig==\n\t ünï \"q\" \\"
              redacted_thinking "opaque=="
              text "Reading both."
              call toolu_a read {"path":"a.md"}
              call toolu_b list {}
            "#,
        ),
        (
            "usage from message_delta overwrites every field it names; text in a block's start",
            r#"
            {"type": "message_start", "message": {"model": "claude-x", "usage": {"input_tokens": 5, "output_tokens": 1}}}
            {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": "Hi"}}
            {"type": "content_block_stop", "index": 0}
            {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"input_tokens": 7, "cache_read_input_tokens": 4000, "cache_creation_input_tokens": 20, "output_tokens": 2}}
            {"type": "message_stop"}
            "#,
            r#"
            usage input=5 output=1 cache_read=0 cache_write=0
            text "Hi"
            usage input=7 output=2 cache_read=4000 cache_write=20
            done stop model=claude-x
              usage input=7 output=2 cache_read=4000 cache_write=20
              text "Hi"
            "#,
        ),
        (
            "a tool_use whose start carries its input and no fragments follow",
            r#"
            {"type": "message_start", "message": {"model": "claude-x"}}
            {"type": "content_block_start", "index": 0, "content_block": {"type": "tool_use", "id": "toolu_a", "name": "read", "input": {"path": "a.md"}}}
            {"type": "content_block_stop", "index": 0}
            {"type": "message_delta", "delta": {"stop_reason": "tool_use"}}
            {"type": "message_stop"}
            "#,
            r#"
            call toolu_a read {"path":"a.md"}
            done tool_use model=claude-x
              call toolu_a read {"path":"a.md"}
            "#,
        ),
        (
            "arguments cut mid-way are kept as the text that came",
            r#"
            {"type": "message_start", "message": {"model": "claude-x"}}
            {"type": "content_block_start", "index": 0, "content_block": {"type": "tool_use", "id": "toolu_cut", "name": "read", "input": {}}}
            {"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": "{\"path\": \"no"}}
            {"type": "content_block_stop", "index": 0}
            {"type": "message_delta", "delta": {"stop_reason": "max_tokens"}}
            {"type": "message_stop"}
            "#,
            r#"
            call toolu_cut read "{\"path\": \"no"
            done length model=claude-x
              call toolu_cut read "{\"path\": \"no"
            "#,
        ),
        (
            "stop reason end_turn; no message_start named a model: the request's stays",
            r#"
            {"type": "message_start", "message": {}}
            {"type": "message_delta", "delta": {"stop_reason": "end_turn"}}
            {"type": "message_stop"}
            "#,
            "done stop model=requested",
        ),
        (
            "stop reason stop_sequence",
            r#"
            {"type": "message_start", "message": {}}
            {"type": "message_delta", "delta": {"stop_reason": "stop_sequence"}}
            {"type": "message_stop"}
            "#,
            "done stop model=requested",
        ),
        (
            "stop reason tool_use",
            r#"
            {"type": "message_start", "message": {}}
            {"type": "message_delta", "delta": {"stop_reason": "tool_use"}}
            {"type": "message_stop"}
            "#,
            "done tool_use model=requested",
        ),
        (
            "stop reason max_tokens",
            r#"
            {"type": "message_start", "message": {}}
            {"type": "message_delta", "delta": {"stop_reason": "max_tokens"}}
            {"type": "message_stop"}
            "#,
            "done length model=requested",
        ),
        (
            "stop reason model_context_window_exceeded",
            r#"
            {"type": "message_start", "message": {}}
            {"type": "message_delta", "delta": {"stop_reason": "model_context_window_exceeded"}}
            {"type": "message_stop"}
            "#,
            "done length model=requested",
        ),
        (
            "stop reason refusal is an error that says so",
            r#"
            {"type": "message_start", "message": {}}
            {"type": "message_delta", "delta": {"stop_reason": "refusal"}}
            {"type": "message_stop"}
            "#,
            r#"
            done error model=requested
              error_message "the model refused to answer"
            "#,
        ),
        (
            "an error mid-stream keeps what arrived, with the status its type documents",
            r#"
            {"type": "message_start", "message": {"model": "claude-x"}}
            {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}
            {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Reading "}}
            {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
            {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "both."}}
            {"type": "content_block_stop", "index": 0}
            {"type": "message_delta", "delta": {"stop_reason": "end_turn"}}
            {"type": "message_stop"}
            "#,
            r#"
            text "Reading "
            error http 529: Overloaded
            "#,
        ),
        (
            "an error of a type with no documented status, and no message, reads as its type",
            r#"
            {"type": "error", "error": {"type": "mystery_error"}}
            "#,
            "error transport: mystery_error",
        ),
        (
            "a malformed event ends the stream after what arrived",
            r#"
            {"type": "message_start", "message": {"model": "claude-x", "usage": {"input_tokens": 12, "output_tokens": 1}}}
            {"type": "content_block_start", "index": 0, "content_block": {"type": "thinking", "thinking": "", "signature": ""}}
            {"type": "ping"}
            {"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "Two files "}}
            {"type": "content_block_delta", "ind
            {"type": "content_block_stop", "index": 0}
            "#,
            r#"
            usage input=12 output=1 cache_read=0 cache_write=0
            thinking "Two files "
            error malformed: an event does not parse: EOF while parsing a string at line 1 column 36
            "#,
        ),
        (
            "a delta for a block that never started",
            r#"
            {"type": "content_block_delta", "index": 9, "delta": {"type": "text_delta", "text": "x"}}
            "#,
            "error malformed: a delta for block 9, never started",
        ),
        (
            "a delta of the wrong kind for its block",
            r#"
            {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}
            {"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": "{}"}}
            "#,
            "error malformed: a delta of the wrong kind for block 0",
        ),
        (
            "a body cut before message_stop",
            r#"
            {"type": "message_start", "message": {"model": "claude-x"}}
            {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}
            {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Reading "}}
            {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "both."}}
            "#,
            r#"
            text "Reading "
            text "both."
            error transport: the stream ended before the response finished
            "#,
        ),
        (
            "an event type the decoder does not know is skipped",
            r#"
            {"type": "message_start", "message": {"model": "claude-x"}}
            {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}
            {"type": "future_event", "data": 1}
            {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hi"}}
            {"type": "content_block_stop", "index": 0}
            {"type": "message_delta", "delta": {"stop_reason": "end_turn"}}
            {"type": "message_stop"}
            "#,
            r#"
            text "Hi"
            done stop model=claude-x
              text "Hi"
            "#,
        ),
    ];
    decoder_table::check(table, decode);
}

/// A request of one turn: an input, an answer with two calls, their results, a block.
pub(super) fn request() -> Request {
    let Some(StreamEvent::Done(first)) =
        decode(&decoder_table::payload_lines(THINKING_AND_TOOLS)).pop()
    else {
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
                images: Vec::new(),
            })),
            Arc::new(Message::ToolResult(ToolResultMessage {
                tool_call_id: "toolu_b".to_owned(),
                tool_name: "list".to_owned(),
                content: "no such dir".to_owned(),
                is_error: true,
                images: Vec::new(),
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

/// A tool's images go in its result, after its text; a result without images keeps its
/// content a string.
#[test]
fn a_tool_result_with_an_image_sends_its_text_then_an_image_block() {
    let result = |images: Vec<ResultImage>| {
        Arc::new(Message::ToolResult(ToolResultMessage {
            tool_call_id: "toolu_1".to_owned(),
            tool_name: "shot__take".to_owned(),
            content: "[image/png, 8 bytes: attachment:c1-1]".to_owned(),
            is_error: false,
            images,
        }))
    };
    let image = ResultImage {
        media_type: "image/png".to_owned(),
        data: "iVBORw0KGgo=".to_owned(),
        attachment_id: Some("c1-1".to_owned()),
    };
    let request = Request {
        messages: vec![result(vec![image]), result(Vec::new())],
        ..request()
    };
    let body = request_body(&request, &BodyOptions::default());
    let content = &body["messages"][0]["content"];
    assert_eq!(
        content[0]["content"],
        json!([
            {"type": "text", "text": "[image/png, 8 bytes: attachment:c1-1]"},
            {"type": "image",
             "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}},
        ])
    );
    assert_eq!(
        content[1]["content"],
        json!("[image/png, 8 bytes: attachment:c1-1]")
    );
}

/// A call whose arguments did not parse (a token limit cut it mid-way) is kept as the text that
/// came; the wire types `input` as an object and refuses every later request of a conversation
/// that carries a string there, so such a call goes back with `{}`. The call's error result (the
/// verb's argument check) tells the model what went wrong.
#[test]
fn arguments_that_are_not_an_object_go_back_as_an_empty_object() {
    let call = |id: &str, arguments: Value| {
        AssistantBlock::ToolCall(ToolCall {
            id: id.to_owned(),
            name: "read".to_owned(),
            arguments,
        })
    };
    // As the decoder keeps a call cut mid-way (a row of `streams_decoded_from_a_table`).
    let answer = AssistantMessage {
        content: vec![
            call("toolu_cut", json!("{\"path\": \"no")),
            call("toolu_list", json!(["a.md"])),
            call("toolu_n", json!(7)),
            call("toolu_null", Value::Null),
            call("toolu_ok", json!({"path": "a.md"})),
        ],
        usage: Usage::default(),
        stop_reason: StopReason::Length,
        model: "claude-x".to_owned(),
        error_message: None,
    };
    let result = |id: &str| {
        Arc::new(Message::ToolResult(ToolResultMessage {
            tool_call_id: id.to_owned(),
            tool_name: "read".to_owned(),
            content: "invalid arguments for read: arguments: expected an object, got a string"
                .to_owned(),
            is_error: true,
            images: Vec::new(),
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
