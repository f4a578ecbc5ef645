//! The spans a turn makes for traces: one per tool call and one per model request, named and
//! attributed after OpenTelemetry's GenAI semantic conventions where they name an attribute.
//! This crate knows nothing of OpenTelemetry.
//!
//! A tool call's span is a plain `tracing` span, current while its tool makes the call's
//! future (a verb carries it to its actor, which enters it while the verb runs). The service's exporter (`server/src/traces.rs`) takes the spans of [`TRACE_TARGET`]
//! alone and turns their fields into attributes (`otel.name` names the span, `otel.kind` gives
//! its kind). With no exporter, nothing subscribes to that target, so each span is a disabled
//! one: creating it, recording into it and entering it cost a branch on a cached callsite
//! interest, and no field value is computed.
//!
//! A model request is handed whole, once it ended, to the turn's [`ModelSpans`], which the
//! exporter makes for each run with the run's span as the parent; with traces off there is
//! none, and nothing is gathered.

use std::time::{Duration, SystemTime};

use seed_providers::{AssistantMessage, StopReason, ToolCall};
use tracing::Span;
use tracing::field::Empty;

/// The target of every span meant for traces, in every crate: the exporter subscribes to it,
/// and the log's filter leaves it out.
pub const TRACE_TARGET: &str = "seed_trace";

/// Where a turn's model requests go as spans, when traces are on: the service's exporter
/// (`server/src/traces.rs`) makes each one whole once the request ended, a `chat {model}`
/// client span under the run's span, from its start to its end. One is made for each pass of
/// a run ([`crate::TurnRequest::model_spans`]), with the run's trace context read once.
///
/// A model request is not a `tracing` span: opening one, recording its response and closing it
/// were a dispatch to every layer each, and the bridge's bookkeeping cost more than the span
/// itself (docs/design/traces.md). Nothing runs under a model request, so nothing needs it as a
/// current span.
pub trait ModelSpans: Send + Sync + std::fmt::Debug {
    /// Exports `request` as a child of the run's span.
    fn export(&self, request: &ModelRequest<'_>);
}

/// One model request, as its span gives it.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelRequest<'a> {
    /// The provider's name (`gen_ai.system`).
    pub system: &'a str,
    /// The model asked (`gen_ai.request.model`).
    pub model: &'a str,
    /// The turn's request id, and the request's step in the turn.
    pub request_id: &'a str,
    pub step: u32,
    pub started_at: SystemTime,
    pub ended_at: SystemTime,
    /// How long the first chunk of the response took, when one came.
    pub first_chunk_after: Option<Duration>,
    /// The messages sent, as JSON, and the response's text, when message text is exported.
    pub input_messages: Option<String>,
    pub output_messages: Option<String>,
    pub outcome: ModelOutcome<'a>,
}

/// How a model request ended.
#[derive(Debug, Clone, PartialEq)]
pub enum ModelOutcome<'a> {
    /// With its response (which may itself be an error the provider sent).
    Response(&'a AssistantMessage),
    /// Cut off or failed, and why in a word (`error.type`).
    Failed(&'a str),
}

/// A count as a span records it: signed, since the OpenTelemetry bridge exports an unsigned
/// value as text.
pub fn count(value: impl TryInto<i64>) -> i64 {
    value.try_into().unwrap_or(i64::MAX)
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
