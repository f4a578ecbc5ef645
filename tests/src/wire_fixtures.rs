//! Recorded-shape streams of both wire protocols, as SSE pieces a test server writes: Chat
//! Completions chunks and Anthropic Messages events, built from the parts a test names (text,
//! thinking with a signature, tool calls with fragmented arguments, usage with cache fields).

use serde_json::{Value, json};

/// One SSE `data:` event.
pub fn data(value: &Value) -> String {
    format!("data: {value}\n\n")
}

/// One named SSE event, named by the value's `type` as Anthropic names them.
pub fn named(value: &Value) -> String {
    let name = value["type"].as_str().unwrap_or("message");
    format!("event: {name}\ndata: {value}\n\n")
}

/// Chat Completions pieces.
pub mod openai {
    use super::*;

    pub const MODEL: &str = "gpt-4o-2024-08-06";

    fn chunk(delta: Value, finish_reason: Option<&str>) -> Value {
        json!({
            "id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1764460000,
            "model": MODEL, "system_fingerprint": "fp_1",
            "choices": [{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish_reason}],
            "usage": null,
        })
    }

    /// The first chunk: the role, no content.
    pub fn role() -> String {
        data(&chunk(json!({"role": "assistant", "content": ""}), None))
    }

    pub fn text(text: &str) -> String {
        data(&chunk(json!({"content": text}), None))
    }

    pub fn reasoning(text: &str) -> String {
        data(&chunk(json!({"reasoning_content": text}), None))
    }

    /// The start of tool call `index`: its id, name and first fragment of arguments.
    pub fn call_start(index: u32, id: &str, name: &str, arguments: &str) -> String {
        data(&chunk(
            json!({"tool_calls": [{"index": index, "id": id, "type": "function",
                                   "function": {"name": name, "arguments": arguments}}]}),
            None,
        ))
    }

    /// More arguments of tool call `index`.
    pub fn call_arguments(index: u32, arguments: &str) -> String {
        data(&chunk(
            json!({"tool_calls": [{"index": index, "function": {"arguments": arguments}}]}),
            None,
        ))
    }

    pub fn finish(reason: &str) -> String {
        data(&chunk(json!({}), Some(reason)))
    }

    /// The usage chunk of `stream_options.include_usage`: `choices: []`.
    pub fn usage(prompt_tokens: u64, cached_tokens: u64, completion_tokens: u64) -> String {
        data(&json!({
            "id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1764460000,
            "model": MODEL, "choices": [],
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                      "total_tokens": prompt_tokens + completion_tokens,
                      "prompt_tokens_details": {"cached_tokens": cached_tokens, "audio_tokens": 0},
                      "completion_tokens_details": {"reasoning_tokens": 0}},
        }))
    }

    pub fn done() -> String {
        "data: [DONE]\n\n".to_owned()
    }

    /// A whole text answer in `pieces`.
    pub fn text_answer(pieces: &[&str]) -> Vec<String> {
        let mut out = vec![role()];
        out.extend(pieces.iter().map(|piece| text(piece)));
        out.extend([finish("stop"), usage(900, 768, 12), done()]);
        out
    }
}

/// Anthropic Messages events.
pub mod anthropic {
    use super::*;

    pub const MODEL: &str = "claude-sonnet-4-5-20250929";

    pub fn message_start(input: u64, cache_read: u64, cache_write: u64) -> String {
        named(&json!({
            "type": "message_start",
            "message": {"id": "msg_01", "type": "message", "role": "assistant", "model": MODEL,
                        "content": [], "stop_reason": null, "stop_sequence": null,
                        "usage": {"input_tokens": input, "cache_read_input_tokens": cache_read,
                                  "cache_creation_input_tokens": cache_write, "output_tokens": 1}},
        }))
    }

    pub fn ping() -> String {
        named(&json!({"type": "ping"}))
    }

    pub fn text_start(index: usize) -> String {
        named(&json!({"type": "content_block_start", "index": index,
                      "content_block": {"type": "text", "text": ""}}))
    }

    pub fn text(index: usize, text: &str) -> String {
        named(&json!({"type": "content_block_delta", "index": index,
                      "delta": {"type": "text_delta", "text": text}}))
    }

    pub fn thinking_start(index: usize) -> String {
        named(&json!({"type": "content_block_start", "index": index,
                      "content_block": {"type": "thinking", "thinking": "", "signature": ""}}))
    }

    pub fn thinking(index: usize, text: &str) -> String {
        named(&json!({"type": "content_block_delta", "index": index,
                      "delta": {"type": "thinking_delta", "thinking": text}}))
    }

    pub fn signature(index: usize, signature: &str) -> String {
        named(&json!({"type": "content_block_delta", "index": index,
                      "delta": {"type": "signature_delta", "signature": signature}}))
    }

    pub fn tool_start(index: usize, id: &str, name: &str) -> String {
        named(&json!({"type": "content_block_start", "index": index,
                      "content_block": {"type": "tool_use", "id": id, "name": name, "input": {}}}))
    }

    pub fn tool_input(index: usize, partial_json: &str) -> String {
        named(&json!({"type": "content_block_delta", "index": index,
                      "delta": {"type": "input_json_delta", "partial_json": partial_json}}))
    }

    pub fn block_stop(index: usize) -> String {
        named(&json!({"type": "content_block_stop", "index": index}))
    }

    /// The stop reason and the cumulative usage.
    pub fn message_delta(stop_reason: &str, output: u64) -> String {
        named(&json!({"type": "message_delta",
                      "delta": {"stop_reason": stop_reason, "stop_sequence": null},
                      "usage": {"output_tokens": output}}))
    }

    pub fn message_stop() -> String {
        named(&json!({"type": "message_stop"}))
    }

    pub fn error(kind: &str, message: &str) -> String {
        named(&json!({"type": "error", "error": {"type": kind, "message": message}}))
    }

    /// A whole text answer in `pieces`.
    pub fn text_answer(pieces: &[&str]) -> Vec<String> {
        let mut out = vec![message_start(10, 2000, 0), text_start(0), ping()];
        out.extend(pieces.iter().map(|piece| text(0, piece)));
        out.extend([block_stop(0), message_delta("end_turn", 15), message_stop()]);
        out
    }
}
