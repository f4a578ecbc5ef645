//! The spans a turn makes for traces: one per tool call and one per model request, named and
//! attributed after OpenTelemetry's GenAI semantic conventions where they name an attribute.
//! This crate knows nothing of OpenTelemetry: a turn is given its run's [`TurnSpans`], which
//! the service's exporter (`server/src/traces.rs`) makes for each pass of a run with the run's
//! trace context read once; with traces off there is none, and nothing is gathered.
//!
//! Neither is a `tracing` span: opening one, recording into it, entering it at each poll and
//! closing it were a dispatch to every layer each, and the bridge's bookkeeping cost more than
//! the span itself (docs/design/traces.md). A model request is handed over whole once it
//! ended. A tool call's span is started before its tool runs and handed to the tool
//! ([`crate::Tool::call_traced`]): a verb gives its `traceparent` to what it starts (a
//! delegated child's run, a continuation) and records on it (the MCP server that served it).

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use seed_providers::{AssistantMessage, StopReason, ToolCall};

/// The target of every `tracing` span meant for traces, in every crate: the exporter
/// subscribes to it, and the log's filter leaves it out.
pub const TRACE_TARGET: &str = "seed_trace";

/// Where a turn's spans go, when traces are on: children of the run's span, made by the
/// service's exporter.
pub trait TurnSpans: Send + Sync + std::fmt::Debug {
    /// Exports `request`, which ended, as a `chat {model}` client span from its start to its
    /// end.
    fn model_request(&self, request: &ModelRequest<'_>);
    /// Starts the span of a tool call (`execute_tool {name}`): its name, call id and whether
    /// it is safe to repeat. It ends with [`ToolSpan::end`].
    fn tool_call(&self, call: &ToolCall, safe_to_repeat: bool) -> Arc<dyn ToolSpan>;
}

/// The span of one tool call, started ([`TurnSpans::tool_call`]).
pub trait ToolSpan: Send + Sync + std::fmt::Debug {
    /// Its W3C `traceparent`: what the call starts continues its trace under it (`None` if
    /// its ids are not valid ones).
    fn traceparent(&self) -> Option<String>;
    /// Records an attribute of the call (the MCP server that serves it, `seed.mcp.server`).
    fn set_attribute(&self, key: &'static str, value: String);
    /// Ends it, as an error when the call's result is one (`error.type` `tool_error`).
    fn end(&self, is_error: bool);
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
