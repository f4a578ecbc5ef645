//! The spans a turn opens for traces: one per model request and one per tool call, named and
//! attributed after OpenTelemetry's GenAI semantic conventions where they name an attribute.
//!
//! They are plain `tracing` spans: this crate knows nothing of OpenTelemetry. The service's
//! exporter (`server/src/traces.rs`) takes the spans of [`TRACE_TARGET`] alone and turns their
//! fields into attributes (`otel.name` names the span, `otel.kind` gives its kind). With no
//! exporter, nothing subscribes to that target, so each span is a disabled one: creating it,
//! recording into it and entering it cost a branch on a cached callsite interest, and no field
//! value is computed.
//!
//! The functions that record results take a span and do nothing on a disabled one, so a caller
//! never builds a value for no one.

use seed_providers::{AssistantMessage, Request, StopReason, ToolCall};
use tracing::Span;
use tracing::field::Empty;

/// The target of every span meant for traces, in every crate: the exporter subscribes to it,
/// and the log's filter leaves it out.
pub const TRACE_TARGET: &str = "seed_trace";

/// The span of one model request (`chat {model}`, a client span). Its usage, finish reason and
/// time to first token are recorded when the response is in ([`record_response`],
/// [`record_first_chunk`]). Under `parent`, the turn's span.
pub fn model_request(
    parent: &Span,
    system: &str,
    model: &str,
    request_id: &str,
    step: u32,
) -> Span {
    tracing::info_span!(
        target: TRACE_TARGET,
        parent: parent,
        "gen_ai.chat",
        otel.name = %format_args!("chat {model}"),
        otel.kind = "client",
        otel.status_code = Empty,
        gen_ai.operation.name = "chat",
        gen_ai.system = system,
        gen_ai.request.model = model,
        gen_ai.response.model = Empty,
        gen_ai.usage.input_tokens = Empty,
        gen_ai.usage.output_tokens = Empty,
        gen_ai.usage.cache_read.input_tokens = Empty,
        gen_ai.usage.cache_creation.input_tokens = Empty,
        gen_ai.response.finish_reasons = Empty,
        gen_ai.server.time_to_first_token = Empty,
        gen_ai.input.messages = Empty,
        gen_ai.output.messages = Empty,
        error.type = Empty,
        seed.request_id = request_id,
        seed.step = i64::from(step),
    )
}

/// Records the messages a request sends, when message text is to be exported at all.
pub fn record_request_content(span: &Span, request: &Request, content: bool) {
    if content && !span.is_disabled() {
        let messages = serde_json::to_string(&request.messages).unwrap_or_default();
        span.record("gen_ai.input.messages", messages.as_str());
    }
}

/// Records how long the first chunk of a response took, in seconds.
pub fn record_first_chunk(span: &Span, after: std::time::Duration) {
    span.record("gen_ai.server.time_to_first_token", after.as_secs_f64());
}

/// Records a response's model, usage and finish reason (and its text, with `content`).
pub fn record_response(span: &Span, message: &AssistantMessage, content: bool) {
    if span.is_disabled() {
        return;
    }
    span.record("gen_ai.response.model", message.model.as_str());
    let usage = &message.usage;
    span.record("gen_ai.usage.input_tokens", count(usage.input));
    span.record("gen_ai.usage.output_tokens", count(usage.output));
    span.record(
        "gen_ai.usage.cache_read.input_tokens",
        count(usage.cache_read),
    );
    span.record(
        "gen_ai.usage.cache_creation.input_tokens",
        count(usage.cache_write),
    );
    span.record(
        "gen_ai.response.finish_reasons",
        finish_reason(message.stop_reason),
    );
    if message.stop_reason == StopReason::Error {
        span.record("otel.status_code", "ERROR");
        span.record("error.type", "provider_error");
    }
    if content {
        span.record("gen_ai.output.messages", message.text().as_str());
    }
}

/// A count as a span records it: signed, since the OpenTelemetry bridge exports an unsigned
/// value as text.
pub fn count(value: impl TryInto<i64>) -> i64 {
    value.try_into().unwrap_or(i64::MAX)
}

/// Records that a request failed or was cut off, and why in a word.
pub fn record_request_failed(span: &Span, error_type: &str) {
    span.record("otel.status_code", "ERROR");
    span.record("error.type", error_type);
}

/// The finish reason as the conventions spell it.
pub fn finish_reason(reason: StopReason) -> &'static str {
    match reason {
        StopReason::Stop => "stop",
        StopReason::ToolUse => "tool_calls",
        StopReason::Length => "length",
        StopReason::Aborted => "cancelled",
        StopReason::Error => "error",
    }
}

/// The span of one tool call (`execute_tool {name}`): its name, call id and whether it is safe
/// to repeat; the MCP server that serves it is recorded by its verb (`seed.mcp.server`), an
/// error result by [`record_tool_output`]. Under `parent`, the turn's span.
pub fn tool_call(parent: &Span, call: &ToolCall, safe_to_repeat: bool) -> Span {
    tracing::info_span!(
        target: TRACE_TARGET,
        parent: parent,
        "gen_ai.execute_tool",
        otel.name = %format_args!("execute_tool {}", call.name),
        otel.kind = "internal",
        otel.status_code = Empty,
        gen_ai.operation.name = "execute_tool",
        gen_ai.tool.name = call.name.as_str(),
        gen_ai.tool.call.id = call.id.as_str(),
        seed.tool.safe_to_repeat = safe_to_repeat,
        seed.mcp.server = Empty,
        error.type = Empty,
    )
}

/// Records a tool call's error result.
pub fn record_tool_output(span: &Span, is_error: bool) {
    if is_error {
        span.record("otel.status_code", "ERROR");
        span.record("error.type", "tool_error");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finish_reasons_are_spelled_as_the_conventions_spell_them() {
        let table = [
            (StopReason::Stop, "stop"),
            (StopReason::ToolUse, "tool_calls"),
            (StopReason::Length, "length"),
            (StopReason::Aborted, "cancelled"),
            (StopReason::Error, "error"),
        ];
        for (reason, spelled) in table {
            assert_eq!(finish_reason(reason), spelled);
        }
    }
}
