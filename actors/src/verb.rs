//! The verb extension API: a verb is one trait implementation, registered once, run as an actor.
//!
//! A verb declares its name, the JSON schema of its arguments, the contract the model reads,
//! whether a call cut off by a crash may run again, whether it ends the turn and what it does to
//! the turn's run ([`TurnEffect`]), and where it is available. [`VerbActor`] runs it; [`VerbTool`] is how the durable harness sees it.

use std::sync::Arc;

use actix::prelude::*;
use futures::FutureExt;
use futures::future::BoxFuture;
use seed_durable::{Decision, Tool, ToolOutput};
use seed_events::{AccountId, RunId, SessionId};
use seed_providers::{ToolCall, ToolSpec};
use seed_store::ApprovalStatus;
use seed_store::Store;

/// Where a verb may be offered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Availability {
    /// In every run.
    Everywhere,
    /// Not in a delegated child's run.
    NotInChildren,
    /// Only in a typed child's run (one that ends with `return_result`).
    TypedChildrenOnly,
}

/// What a verb's call does to the run of its turn, beyond its result: the turn's code asks the
/// verb (through the registry) instead of knowing verbs by name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TurnEffect {
    /// Nothing beyond its result.
    #[default]
    None,
    /// The call continues the session into a successor, which answers: the run ends with the
    /// edge the call made (`continue_session`). A runtime offers continuing (its prompt and
    /// context usage) only when a verb of its set does this.
    Continues,
    /// The call hands a task to a child run, whose end writes the call's result to the log
    /// itself (`delegate`).
    Delegates,
    /// The call ends a typed child's run with what it returns, the run's result
    /// (`return_result`).
    Returns,
}

/// The run a verb is called in: enough to reach the session's own state and nothing else's.
#[derive(Debug, Clone)]
pub struct VerbContext {
    pub store: Store,
    pub account_id: AccountId,
    pub session_id: SessionId,
    pub run_id: RunId,
    /// The call's id, unique within the session.
    pub tool_call_id: String,
    /// Milliseconds since the epoch when the call started (the shell's clock).
    pub now_ms: i64,
    /// The turn's stop signal: a verb that may wait long (an MCP server's tool) gives up when
    /// a person stops the turn. Outside a turn, one that is never stopped.
    pub stop: seed_durable::StopSignal,
    /// Where verbs that create sessions (continue_session) ask for a successor: the runtime's
    /// succession actor; `None` when a verb is called outside a running runtime.
    pub successions: Option<Recipient<Continue>>,
    /// The runtime's traces (off by default): a verb that queues a run has it continue the
    /// trace of its call ([`VerbContext::continue_call_trace`]), as delegate does.
    pub traces: crate::traces::Traces,
    /// The span of the call, when traces are exported.
    pub call_span: Option<Arc<dyn seed_durable::spans::ToolSpan>>,
}

impl VerbContext {
    /// Notes that `run_id`, about to be queued by this call, continues the call's trace (when
    /// traces are exported). Made before the run is written, so that its span cannot start
    /// first; [`crate::traces::Traces::forget`] undoes it for a run that was not queued.
    pub fn continue_call_trace(&self, run_id: RunId) {
        if let Some(traceparent) = self.call_span.as_ref().and_then(|span| span.traceparent()) {
            self.traces.queued(run_id, traceparent);
        }
    }
}

/// A continue_session call: continue the calling session into a successor. The runtime's
/// succession actor answers it (see `crate::succession`).
#[derive(Message)]
#[rtype(result = "VerbOutput")]
pub struct Continue {
    pub context: VerbContext,
    pub arguments: serde_json::Value,
    /// Whether to create the successor or only measure it.
    pub ask: ContinueAsk,
}

/// What a [`Continue`] asks the succession actor for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ContinueAsk {
    /// Create the successor (continue_session).
    Create,
    /// Measure what continue_session would create from the same arguments, and create
    /// nothing (preview_continuation).
    Preview,
}

impl std::fmt::Debug for Continue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Continue")
            .field("session_id", &self.context.session_id)
            .field("tool_call_id", &self.context.tool_call_id)
            .finish_non_exhaustive()
    }
}

/// What a verb call returns.
pub type VerbOutput = ToolOutput;

/// One verb. Implement it in one file and register it with the runtime.
pub trait Verb: Send + Sync + 'static {
    /// Its name, as the model calls it: `^[a-zA-Z0-9_-]{1,64}$` (what the providers take).
    fn name(&self) -> &str;

    /// The contract the model reads: what the verb does, when to use it, what it returns.
    fn description(&self) -> &str;

    /// The JSON schema of the arguments.
    fn parameters(&self) -> serde_json::Value;

    /// Whether a call cut off by a crash may simply run again (reads, plans, status).
    fn safe_to_repeat(&self) -> bool;

    /// Whether the turn ends after the batch of calls this verb is in.
    fn ends_turn(&self) -> bool {
        false
    }

    /// What a call does to the run of its turn (see [`TurnEffect`]); none by default.
    fn turn_effect(&self) -> TurnEffect {
        TurnEffect::None
    }

    fn availability(&self) -> Availability {
        Availability::Everywhere
    }

    /// Whether a call waits for a person's approval before it runs (the runtime's
    /// configuration may name more verbs that do). Approved, the call runs once with the
    /// arguments approved; denied, it never runs and the model reads why.
    fn needs_approval(&self) -> bool {
        false
    }

    /// Where the verb comes from, for people's lists: `None` for a verb compiled in, else its
    /// source (the MCP server whose tool it calls).
    fn source(&self) -> Option<&str> {
        None
    }

    /// Runs the call. Invalid arguments are answered with an error naming the field, and
    /// nothing else happens (see [`parse_arguments`]).
    fn call(
        &self,
        context: VerbContext,
        arguments: serde_json::Value,
    ) -> BoxFuture<'static, VerbOutput>;

    /// For a verb that is not safe to repeat: whether the call `context.tool_call_id` (with
    /// `arguments`), cut off by a crash after its intent was committed, took effect. `Some`
    /// with the result it had: the call is answered with it and not run again. `None` (the
    /// default, for a verb that cannot tell): it is answered as interrupted, and the model
    /// decides what to verify. It must not run the call; a verb that can tell records its
    /// effect by call id in the transaction that makes it.
    fn reconcile(
        &self,
        context: VerbContext,
        arguments: serde_json::Value,
    ) -> BoxFuture<'static, Option<VerbOutput>> {
        let _ = (context, arguments);
        Box::pin(async { None })
    }
}

/// Parses a call's arguments into `T`, or the error result the model reads, naming the field:
/// `invalid arguments for <verb>: <field>: <problem>` (a missing field is named by the problem
/// itself, `missing field `…``).
pub fn parse_arguments<T: serde::de::DeserializeOwned>(
    verb: &str,
    arguments: serde_json::Value,
) -> Result<T, VerbOutput> {
    serde_path_to_error::deserialize(arguments).map_err(|error| {
        let field = error.path().to_string();
        let problem = error.into_inner();
        VerbOutput::error(if field == "." {
            format!("invalid arguments for {verb}: {problem}")
        } else {
            format!("invalid arguments for {verb}: {field}: {problem}")
        })
    })
}

/// Runs one verb's calls, one at a time, each as its own task.
pub struct VerbActor {
    verb: Arc<dyn Verb>,
}

impl std::fmt::Debug for VerbActor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VerbActor").finish_non_exhaustive()
    }
}

impl VerbActor {
    pub fn new(verb: Arc<dyn Verb>) -> VerbActor {
        VerbActor { verb }
    }
}

impl Actor for VerbActor {
    type Context = Context<Self>;
}

/// A call for the verb actor.
#[derive(Message)]
#[rtype(result = "VerbOutput")]
pub struct Invoke {
    pub context: VerbContext,
    pub arguments: serde_json::Value,
}

impl Invoke {
    pub fn new(context: VerbContext, arguments: serde_json::Value) -> Invoke {
        Invoke { context, arguments }
    }
}

impl std::fmt::Debug for Invoke {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Invoke").finish_non_exhaustive()
    }
}

impl Handler<Invoke> for VerbActor {
    type Result = ResponseFuture<VerbOutput>;

    fn handle(&mut self, invoke: Invoke, _: &mut Context<Self>) -> Self::Result {
        // A verb with a bug fails its call, not its actor: the model reads an error result and
        // the verb keeps serving other calls.
        let name = self.verb.name().to_owned();
        let failed = move || VerbOutput::error(format!("the {name} verb failed on this call"));
        let verb = Arc::clone(&self.verb);
        let call = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            verb.call(invoke.context, invoke.arguments)
        }));
        match call {
            Ok(future) => Box::pin(async move {
                std::panic::AssertUnwindSafe(future)
                    .catch_unwind()
                    .await
                    .unwrap_or_else(|_| failed())
            }),
            Err(_) => Box::pin(async move { failed() }),
        }
    }
}

/// Asks the verb actor whether a cut-off call took effect ([`Verb::reconcile`]).
#[derive(Message)]
#[rtype(result = "Option<VerbOutput>")]
pub struct Reconcile {
    pub context: VerbContext,
    pub arguments: serde_json::Value,
}

impl std::fmt::Debug for Reconcile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reconcile")
            .field("tool_call_id", &self.context.tool_call_id)
            .finish_non_exhaustive()
    }
}

impl Handler<Reconcile> for VerbActor {
    type Result = ResponseFuture<Option<VerbOutput>>;

    fn handle(&mut self, reconcile: Reconcile, _: &mut Context<Self>) -> Self::Result {
        // A verb with a bug cannot tell: the call is answered as interrupted.
        let verb = Arc::clone(&self.verb);
        let look = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || {
            verb.reconcile(reconcile.context, reconcile.arguments)
        }));
        match look {
            Ok(future) => Box::pin(async move {
                std::panic::AssertUnwindSafe(future)
                    .catch_unwind()
                    .await
                    .unwrap_or(None)
            }),
            Err(_) => Box::pin(async { None }),
        }
    }
}

/// A verb as the durable harness sees it: a tool whose calls go to the verb's actor.
#[derive(Clone)]
pub struct VerbTool {
    spec: ToolSpec,
    safe_to_repeat: bool,
    ends_turn: bool,
    needs_approval: bool,
    actor: Addr<VerbActor>,
    /// The run the calls belong to; the call id is filled in per call.
    binding: RunBinding,
    crash_points: crate::crash::CrashPoints,
}

/// The run a session's tools serve now. A harness kept open across runs keeps its tools (their
/// specs built once), and each run rebinds them to itself here.
#[derive(Clone)]
pub struct RunBinding(Arc<std::sync::Mutex<VerbContext>>);

impl RunBinding {
    pub fn new(context: VerbContext) -> RunBinding {
        RunBinding(Arc::new(std::sync::Mutex::new(context)))
    }

    /// Binds the tools to `context`'s run from their next call on.
    pub fn set(&self, context: VerbContext) {
        *self.0.lock().unwrap_or_else(|p| p.into_inner()) = context;
    }

    fn get(&self) -> VerbContext {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

impl std::fmt::Debug for RunBinding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunBinding").finish_non_exhaustive()
    }
}

impl std::fmt::Debug for VerbTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VerbTool").finish_non_exhaustive()
    }
}

impl VerbTool {
    pub fn new(verb: &dyn Verb, actor: Addr<VerbActor>, binding: RunBinding) -> VerbTool {
        VerbTool {
            spec: spec_of(verb),
            safe_to_repeat: verb.safe_to_repeat(),
            ends_turn: verb.ends_turn(),
            needs_approval: verb.needs_approval(),
            actor,
            binding,
            crash_points: crate::crash::CrashPoints::default(),
        }
    }

    /// Its calls wait for a person's approval (the configuration names the verb), whatever the
    /// verb declares.
    pub fn requiring_approval(mut self) -> VerbTool {
        self.needs_approval = true;
        self
    }

    /// Calls reach [`crate::crash::points::TOOL_MID_RUN`] once the verb has run.
    pub fn with_crash_points(mut self, crash_points: crate::crash::CrashPoints) -> VerbTool {
        self.crash_points = crash_points;
        self
    }
}

/// How much of arguments that did not parse an error result quotes.
const UNPARSED_QUOTED_CHARS: usize = 120;

/// The error result for a call whose arguments did not parse as JSON (a wire keeps such
/// arguments as the text that came, a JSON string; a reply cut off by the output token limit
/// leaves one): the verb is not run, and the model reads what went wrong.
fn unparsed_arguments(verb: &str, arguments: &serde_json::Value) -> Option<ToolOutput> {
    let text = arguments.as_str()?;
    let quoted: String = text.chars().take(UNPARSED_QUOTED_CHARS).collect();
    let more = if quoted.len() < text.len() { "…" } else { "" };
    Some(ToolOutput::error(format!(
        "the arguments of this {verb} call are not JSON ({} bytes that do not parse; a reply \
         cut off by the output token limit leaves them unfinished), so it was not run: \
         {quoted}{more}",
        text.len()
    )))
}

/// The spec the model is offered for a verb.
pub fn spec_of(verb: &dyn Verb) -> ToolSpec {
    ToolSpec {
        name: verb.name().to_owned(),
        description: verb.description().to_owned(),
        parameters: verb.parameters(),
    }
}

impl Tool for VerbTool {
    fn spec(&self) -> ToolSpec {
        self.spec.clone()
    }

    fn safe_to_repeat(&self) -> bool {
        self.safe_to_repeat
    }

    fn call<'a>(&'a self, call: &'a ToolCall) -> BoxFuture<'a, ToolOutput> {
        self.call_traced(call, None)
    }

    fn call_traced<'a>(
        &'a self,
        call: &'a ToolCall,
        span: Option<Arc<dyn seed_durable::spans::ToolSpan>>,
    ) -> BoxFuture<'a, ToolOutput> {
        if let Some(refusal) = unparsed_arguments(&self.spec.name, &call.arguments) {
            return Box::pin(std::future::ready(refusal));
        }
        let mut context = self.binding.get();
        context.tool_call_id = call.id.clone();
        // The verb runs on its own actor: the call's span goes with it.
        context.call_span = span;
        let invoke = Invoke::new(context, call.arguments.clone());
        let ends_turn = self.ends_turn;
        let name = self.spec.name.clone();
        Box::pin(async move {
            let answer = self.actor.send(invoke).await;
            self.crash_points
                .reach(crate::crash::points::TOOL_MID_RUN)
                .await;
            match answer {
                Ok(mut output) => {
                    // A refused call does not end the turn: the model reads why and goes on.
                    output.ends_turn |= ends_turn && !output.is_error;
                    output
                }
                Err(error) => ToolOutput::error(format!("the {name} verb is not running: {error}")),
            }
        })
    }

    fn needs_approval(&self) -> bool {
        self.needs_approval
    }

    /// The decision recorded on the call's approval; none yet (or none readable) is pending.
    fn decision<'a>(&'a self, call: &'a ToolCall) -> BoxFuture<'a, Decision> {
        let context = self.binding.get();
        Box::pin(async move {
            let row = match context.store.approval(context.session_id, &call.id).await {
                Ok(row) => row,
                Err(error) => {
                    tracing::warn!(%error, call_id = call.id.as_str(), "cannot read an approval");
                    None
                }
            };
            let Some(row) = row else {
                return Decision::Pending;
            };
            match row.status {
                ApprovalStatus::Pending => Decision::Pending,
                ApprovalStatus::Approved => Decision::Approved {
                    arguments: row
                        .decided_arguments
                        .unwrap_or_else(|| call.arguments.clone()),
                },
                ApprovalStatus::Denied | ApprovalStatus::TimedOut => Decision::Denied {
                    reason: row.reason.unwrap_or_else(|| "none given".to_owned()),
                },
            }
        })
    }

    fn reconcile<'a>(&'a self, call: &'a ToolCall) -> BoxFuture<'a, Option<ToolOutput>> {
        let mut context = self.binding.get();
        context.tool_call_id = call.id.clone();
        let reconcile = Reconcile {
            context,
            arguments: call.arguments.clone(),
        };
        let ends_turn = self.ends_turn;
        Box::pin(async move {
            let mut output = self.actor.send(reconcile).await.ok().flatten()?;
            // The call took effect: it ends the turn as it would have.
            output.ends_turn |= ends_turn && !output.is_error;
            Some(output)
        })
    }
}
