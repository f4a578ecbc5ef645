//! Tools as the harness sees them: a spec for the model, whether a cut-off call may run again,
//! and the call itself.

use std::collections::BTreeMap;
use std::sync::Arc;

use futures::future::BoxFuture;
use seed_providers::{ResultImage, ToolCall, ToolSpec};

/// What a tool call returns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolOutput {
    pub content: String,
    pub is_error: bool,
    /// The verb ends the turn after the current batch of calls (delegate parking the run,
    /// return_result, continue_session).
    pub ends_turn: bool,
    /// The content stands in for a result still to come (a delegated child still running):
    /// the log keeps the call unanswered until the real result replaces it.
    pub placeholder: bool,
    /// Images after the text (an MCP tool's screenshot), kept with the result; the text names
    /// each one.
    pub images: Vec<ResultImage>,
}

impl ToolOutput {
    pub fn ok(content: impl Into<String>) -> ToolOutput {
        ToolOutput {
            content: content.into(),
            is_error: false,
            ends_turn: false,
            placeholder: false,
            images: Vec::new(),
        }
    }

    pub fn error(content: impl Into<String>) -> ToolOutput {
        ToolOutput {
            content: content.into(),
            is_error: true,
            ends_turn: false,
            placeholder: false,
            images: Vec::new(),
        }
    }
}

/// A person's decision on a call that needs approval.
#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    /// No decision yet: the turn waits.
    Pending,
    /// The call runs once, with these arguments (the model's, or as the person edited them).
    Approved { arguments: serde_json::Value },
    /// The call never runs; its result is an error that says why.
    Denied { reason: String },
}

pub trait Tool: Send + Sync {
    fn spec(&self) -> ToolSpec;

    /// Whether a call cut off by a crash may simply run again (reads, plans, status). Any other
    /// cut-off call is answered with an interrupted result, and the model decides what to
    /// verify.
    fn safe_to_repeat(&self) -> bool;

    fn call<'a>(&'a self, call: &'a ToolCall) -> BoxFuture<'a, ToolOutput>;

    /// [`Tool::call`] in the call's trace span, when traces are on: a tool that starts work
    /// of its own under the call (a verb: a delegated child's run, a continuation) or records
    /// on it takes `span` on; by default it is not needed.
    fn call_traced<'a>(
        &'a self,
        call: &'a ToolCall,
        span: Option<std::sync::Arc<dyn crate::spans::ToolSpan>>,
    ) -> BoxFuture<'a, ToolOutput> {
        let _ = span;
        self.call(call)
    }

    /// Whether a call of a tool that is not safe to repeat, cut off by a crash after its intent
    /// was committed, took effect: `Some` with the result it had (the harness answers the call
    /// with it, and it is not run again), `None` when it did not or the tool cannot tell (the
    /// call is answered as interrupted). Keyed by the call's id; it must not run the call.
    fn reconcile<'a>(&'a self, call: &'a ToolCall) -> BoxFuture<'a, Option<ToolOutput>> {
        let _ = call;
        Box::pin(async { None })
    }

    /// Whether a call waits for a person's decision before it runs. Such a call has its intent
    /// committed before the decision is asked, so it is never safe to repeat: approved, it
    /// runs at most once; denied, never.
    fn needs_approval(&self) -> bool {
        false
    }

    /// The decision on `call`, keyed by its id; it must not run the call. A tool that needs no
    /// approval is never asked.
    fn decision<'a>(&'a self, call: &'a ToolCall) -> BoxFuture<'a, Decision> {
        let _ = call;
        Box::pin(async { Decision::Pending })
    }
}

/// The tools on offer, by name.
#[derive(Clone, Default)]
pub struct ToolSet {
    tools: BTreeMap<String, Arc<dyn Tool>>,
}

impl std::fmt::Debug for ToolSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_set().entries(self.tools.keys()).finish()
    }
}

impl ToolSet {
    pub fn new() -> ToolSet {
        ToolSet::default()
    }

    /// Adds a tool under its spec's name, replacing one of the same name.
    pub fn with(mut self, tool: Arc<dyn Tool>) -> ToolSet {
        self.tools.insert(tool.spec().name, tool);
        self
    }

    pub fn get(&self, name: &str) -> Option<&Arc<dyn Tool>> {
        self.tools.get(name)
    }

    pub fn specs(&self) -> Vec<ToolSpec> {
        self.tools.values().map(|tool| tool.spec()).collect()
    }

    /// Whether a cut-off call of `name` may run again. A name no tool has is safe: calling it
    /// only says so. A tool that needs approval never is: the call ran, if at all, with the
    /// arguments approved.
    pub fn safe_to_repeat(&self, name: &str) -> bool {
        self.tools
            .get(name)
            .is_none_or(|tool| tool.safe_to_repeat() && !tool.needs_approval())
    }

    /// Whether a call of `name` waits for a person's decision before it runs.
    pub fn needs_approval(&self, name: &str) -> bool {
        self.tools
            .get(name)
            .is_some_and(|tool| tool.needs_approval())
    }
}
