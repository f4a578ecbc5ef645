//! The harness: runs a turn over a durable store, committing every step before anything else
//! sees it, and recovers exactly after a crash.
//!
//! The imperative shell around [`crate::turn::next_action`]: it asks what the store needs next,
//! does it (a model request, a tool call), commits the outcome, and asks again. One harness owns
//! a store at a time (the caller holds the store's lease).
//!
//! Streaming one response into `pi.live` is the `stream` submodule's; this file runs the turn
//! around it.

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use seed_providers::{
    AssistantMessage, Message, Provider, ProviderError, ProviderErrorKind, Request, ToolCall,
    ToolResultMessage, ToolSpec, UserMessage,
};

use crate::context::{MessageCache, block_messages, conversation_cached, request_messages};
use crate::fs::{DurableFs, FileName};
use crate::record::{
    AGENT_DOCUMENT, AgentDocument, EntryBody, EntryId, LIVE_DOCUMENT, LiveDocument, LiveState,
    ModelTaskState, TURN_DOCUMENT, Task, ToolTaskState, TurnDocument, TurnState,
    interrupted_result, restart_result,
};
use crate::spans;
use crate::state::{Batch, CorruptLine, StoreState};
use crate::stop::StopSignal;
use crate::tool::{Decision, ToolOutput, ToolSet};
use crate::turn::{Action, calls_without_result, next_action};
use tracing::Instrument as _;

mod stream;

use stream::Streamed;

pub type Result<T, E = Error> = std::result::Result<T, E>;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A commit was refused (a full disk, a session deleted under its turn): the harness is
    /// closed and the turn ends here, with nothing of the refused batch written. The text names
    /// the store's error, as a failed run's reason reads it; it stays the `source` too, for
    /// callers that look for a cause by its type (a full disk).
    #[error("the store refused a commit; the harness is closed: {0}")]
    StoreRefused(#[source] Box<dyn std::error::Error + Send + Sync>),
    #[error("the harness is closed after a refused commit")]
    Closed,
    /// The text names the store's error, as a failed run's reason reads it.
    #[error("cannot read the store: {0}")]
    StoreRead(Box<dyn std::error::Error + Send + Sync>),
    #[error(transparent)]
    Corrupt(#[from] CorruptLine),
    #[error("turn {request_id} was aborted by a later run")]
    TurnAborted { request_id: String },
}

/// Time as the harness sees it, so tests can drive the live-text throttle.
pub trait Clock: Send + Sync + std::fmt::Debug {
    /// Time since some fixed origin.
    fn now(&self) -> Duration;

    /// A future that resolves after `duration`, when this clock can wait (the shell's runtime
    /// clock can); `None` when it cannot, and then the partial text of a response is committed
    /// only as more of it arrives.
    fn sleep(&self, duration: Duration) -> Option<BoxFuture<'static, ()>> {
        let _ = duration;
        None
    }
}

/// The process's monotonic clock.
#[derive(Debug)]
pub struct SystemClock {
    origin: Instant,
}

impl Default for SystemClock {
    fn default() -> Self {
        SystemClock {
            origin: Instant::now(),
        }
    }
}

impl Clock for SystemClock {
    fn now(&self) -> Duration {
        self.origin.elapsed()
    }
}

#[derive(Debug, Clone)]
pub struct HarnessConfig {
    pub model: String,
    /// How hard the model reasons; `None`: as the provider is configured.
    pub reasoning: Option<seed_providers::ReasoningLevel>,
    /// Sent as one section, byte for byte the same from turn to turn.
    pub system_prompt: String,
    /// The conversation's own id, for providers that route by it.
    pub session_id: Option<String>,
    /// The partial text of the response in flight is committed at most this often.
    pub live_interval: Duration,
    /// The provider's name, as traces give it (`gen_ai.system`).
    pub system: String,
    /// Whether the model request spans carry the messages' text (traces exported with
    /// message content); off, they carry counts and names alone.
    pub trace_content: bool,
}

impl HarnessConfig {
    pub fn new(model: impl Into<String>, system_prompt: impl Into<String>) -> Self {
        HarnessConfig {
            model: model.into(),
            reasoning: None,
            system_prompt: system_prompt.into(),
            session_id: None,
            live_interval: Duration::from_millis(100),
            system: String::new(),
            trace_content: false,
        }
    }
}

/// What the hook that runs before every provider request decides.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HookDecision {
    Continue,
    /// The turn is over: the request never leaves.
    EndTurn {
        reason: String,
    },
}

pub type BeforeRequest = Box<dyn FnMut(&Request) -> HookDecision + Send>;

/// One turn to run.
#[derive(Debug, Clone)]
pub struct TurnRequest {
    /// The run's id: a run that finds its own id on an unsettled input adopts it.
    pub request_id: String,
    pub input: UserMessage,
    /// This turn's state (`<space>`, `<plan_state>`, `<current_time>`, ...): placed right behind
    /// the input in every request of the turn, never stored.
    pub blocks: Vec<UserMessage>,
    /// Entries imported from outside (Seed's log), committed in the same batch as the input,
    /// before it.
    pub imports: Vec<EntryBody>,
    /// Documents committed with the input (Seed's `seed.sync`, with its import mark).
    pub documents: Vec<(String, serde_json::Value)>,
    pub stop: StopSignal,
    /// The span the turn's model requests and tool calls go under, for traces (the run's):
    /// given rather than entered, so that polling the turn costs no span enter and exit.
    /// [`TurnRequest::new`] takes the span current where it is made.
    pub span: tracing::Span,
}

impl TurnRequest {
    pub fn new(request_id: impl Into<String>, input: impl Into<String>) -> Self {
        TurnRequest {
            request_id: request_id.into(),
            input: UserMessage::new(input),
            blocks: Vec::new(),
            imports: Vec::new(),
            documents: Vec::new(),
            stop: StopSignal::new(),
            span: tracing::Span::current(),
        }
    }
}

/// How a turn ended.
#[derive(Debug, Clone, PartialEq)]
pub enum TurnOutcome {
    Answered {
        entry_id: EntryId,
        message: AssistantMessage,
    },
    /// A verb or the hook ended it.
    Ended { reason: String },
    /// A stop cut it off; what had streamed is in `pi.live`.
    Stopped { partial_text: String },
    /// The provider failed; what had streamed is in `pi.live`.
    Failed {
        error: ProviderError,
        partial_text: String,
    },
    /// `call` waits for a person's decision: its intent is committed and the turn stays open.
    /// The same request id picks the turn up again once the decision is made.
    Waiting { call: ToolCall },
}

/// How a call's result came to be.
#[derive(Debug, Clone, Copy)]
enum ResultKind {
    /// Answered as cut off, without running (again).
    Interrupted,
    Ran {
        ends_turn: bool,
        /// A stand-in until the real result arrives (a delegated child still running).
        placeholder: bool,
    },
}

pub struct Harness<F, P> {
    fs: F,
    provider: P,
    tools: ToolSet,
    /// The tools' specs, built once: every request offers the same.
    tool_specs: Arc<[ToolSpec]>,
    /// `tool_specs` as found equal to the newest system entry's (at this index), so that the
    /// next turn need not compare them again.
    system_checked: Option<(usize, Arc<[ToolSpec]>)>,
    /// The messages of the entries in the context, shared by every request.
    message_cache: MessageCache,
    config: HarnessConfig,
    clock: Arc<dyn Clock>,
    /// Exactly what the store holds: every batch is applied here only after it committed.
    state: StoreState,
    /// Set when a commit was refused; nothing more is written.
    closed: bool,
    /// The span of the turn in hand ([`TurnRequest::span`]).
    span: tracing::Span,
    before_request: Option<BeforeRequest>,
    /// Lines committed since the store last kept the state ([`DurableFs::keep`]).
    n_since_kept: usize,
}

/// Lines committed after the store last kept the state before it keeps it again (and at once
/// after a reset): an open reads at most about this many lines besides the context (the
/// entries since the newest reset).
pub const KEEP_AFTER_LINES: usize = 256;

impl<F, P> std::fmt::Debug for Harness<F, P> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Harness")
            .field("n_entries", &self.state.entries.len())
            .field("closed", &self.closed)
            .finish_non_exhaustive()
    }
}

impl<F: DurableFs, P: Provider> Harness<F, P> {
    /// Opens the store, folding its files into memory.
    pub async fn open(fs: F, provider: P, tools: ToolSet, config: HarnessConfig) -> Result<Self> {
        let read = |error: F::Error| Error::StoreRead(Box::new(error));
        let lines = fs.open_lines().await.map_err(read)?;
        let state = match lines.kept {
            Some(kept) => {
                StoreState::open_kept(kept, &lines.entries, &lines.documents, &lines.tasks)?
            }
            None => StoreState::fold(&lines.entries, &lines.documents, &lines.tasks)?,
        };
        let mut harness = Harness {
            fs,
            provider,
            tool_specs: Arc::from(tools.specs()),
            system_checked: None,
            message_cache: MessageCache::default(),
            tools,
            config,
            clock: Arc::new(SystemClock::default()),
            state,
            closed: false,
            span: tracing::Span::none(),
            before_request: None,
            n_since_kept: lines.n_after_kept,
        };
        harness.keep_when_due().await;
        Ok(harness)
    }

    /// Has the store keep the state once enough lines came after what it kept. A refusal
    /// costs nothing but a longer open later.
    async fn keep_when_due(&mut self) {
        if self.n_since_kept < KEEP_AFTER_LINES {
            return;
        }
        match self.fs.keep(&self.state.kept()).await {
            Ok(()) => self.n_since_kept = 0,
            Err(error) => tracing::warn!(%error, "the store could not keep the session's state"),
        }
    }

    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// Offers `tools` from the next request on (a harness kept open across runs gets each run's
    /// own tools).
    pub fn set_tools(&mut self, tools: ToolSet) {
        self.tool_specs = Arc::from(tools.specs());
        self.tools = tools;
    }

    /// Sets the hook that runs before every provider request.
    pub fn set_before_request(&mut self, hook: BeforeRequest) {
        self.before_request = Some(hook);
    }

    pub fn state(&self) -> &StoreState {
        &self.state
    }

    pub fn provider(&self) -> &P {
        &self.provider
    }

    pub fn is_closed(&self) -> bool {
        self.closed
    }

    /// What the harness was opened with (its model, system prompt, session id).
    pub fn config(&self) -> &HarnessConfig {
        &self.config
    }

    /// The prompt of a request made now with `more` behind the conversation, estimated from
    /// its size: what a session's first turn reports before any server has counted.
    pub fn estimated_prompt_tokens(&self, more: &[Message]) -> u64 {
        let context = crate::context::conversation(&self.state.entries);
        seed_providers::estimate::prompt_tokens(
            &self.config.system_prompt,
            &self.tool_specs,
            context
                .iter()
                .map(|message| message.message.as_ref())
                .chain(more),
        )
    }

    pub fn into_fs(self) -> F {
        self.fs
    }

    /// Runs a turn to its end, or picks up the unsettled turn this request id left.
    pub async fn run_turn(&mut self, turn: TurnRequest) -> Result<TurnOutcome> {
        if self.closed {
            return Err(Error::Closed);
        }
        // Held for the turn alone: the span ends when its run lets it go.
        self.span = turn.span.clone();
        let outcome = self.open_and_drive(&turn).await;
        self.span = tracing::Span::none();
        outcome
    }

    async fn open_and_drive(&mut self, turn: &TurnRequest) -> Result<TurnOutcome> {
        let open = match self.state.turn() {
            Some(doc) if doc.request_id == turn.request_id => match doc.state {
                TurnState::Open => doc,
                TurnState::Failed => {
                    let reopened = TurnDocument {
                        state: TurnState::Open,
                        reason: None,
                        ..doc
                    };
                    let mut batch = Batch::new(&self.state);
                    batch.document(TURN_DOCUMENT, Some(&reopened));
                    self.commit(batch).await?;
                    reopened
                }
                settled => return self.settled_outcome(&doc, settled),
            },
            Some(doc) if doc.state == TurnState::Open => {
                self.abort_leftover(&doc).await?;
                self.start(turn).await?
            }
            _ => self.start(turn).await?,
        };
        self.drive(open, turn).await
    }

    /// Gives up on a turn a different run left unsettled (a restart cut it off): its calls
    /// without a result are answered as interrupted by a service restart, the turn is marked
    /// aborted and a new context starts. Returns whether there was such a turn. `run_turn` does
    /// this itself; calling it first lets the caller project those results to its log and
    /// rebuild the context before the new turn starts.
    pub async fn abort_unsettled(&mut self, request_id: &str) -> Result<bool> {
        if self.closed {
            return Err(Error::Closed);
        }
        match self.state.turn() {
            Some(doc) if doc.state == TurnState::Open && doc.request_id != request_id => {
                self.abort_leftover(&doc).await?;
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    /// The outcome a settled turn recorded, for the same run coming back.
    fn settled_outcome(&self, doc: &TurnDocument, state: TurnState) -> Result<TurnOutcome> {
        let partial_text = || self.state.live().map(|live| live.text).unwrap_or_default();
        Ok(match state {
            TurnState::Answered => {
                let answer = doc
                    .answer_entry_id
                    .and_then(|id| self.state.entry(id))
                    .and_then(|entry| match &entry.body {
                        EntryBody::Assistant { message, .. } => Some((entry.id, message.clone())),
                        _ => None,
                    });
                let Some((entry_id, message)) = answer else {
                    return Err(Error::Corrupt(CorruptLine {
                        file: FileName::Documents,
                        line_idx: 0,
                        detail: format!("{TURN_DOCUMENT} names no answer entry"),
                    }));
                };
                TurnOutcome::Answered { entry_id, message }
            }
            TurnState::Ended => TurnOutcome::Ended {
                reason: doc.reason.clone().unwrap_or_default(),
            },
            TurnState::Stopped => TurnOutcome::Stopped {
                partial_text: partial_text(),
            },
            TurnState::Aborted | TurnState::Open | TurnState::Failed => {
                return Err(Error::TurnAborted {
                    request_id: doc.request_id.clone(),
                });
            }
        })
    }

    /// A different run found `doc` unsettled: its calls without a result are answered as
    /// interrupted by a restart, the turn is marked aborted, and a new context starts.
    async fn abort_leftover(&mut self, doc: &TurnDocument) -> Result<()> {
        let mut batch = Batch::new(&self.state);
        for call in calls_without_result(&self.state, doc) {
            let entry_id = batch.entry(EntryBody::ToolResult {
                request_id: doc.request_id.clone(),
                message: restart_result(&call.id, &call.name),
                ends_turn: false,
                placeholder: false,
            });
            batch.task(Task::Tool {
                request_id: doc.request_id.clone(),
                call_id: call.id,
                name: call.name,
                state: ToolTaskState::Interrupted { entry_id },
            });
        }
        let aborted = TurnDocument {
            state: TurnState::Aborted,
            reason: Some("a later run found it unsettled after a restart".to_owned()),
            ..doc.clone()
        };
        batch.document(TURN_DOCUMENT, Some(&aborted));
        batch.entry(EntryBody::Reset {});
        self.commit(batch).await
    }

    /// Commits the input (with the system prompt and agent settings when they changed) and
    /// opens the turn.
    async fn start(&mut self, turn: &TurnRequest) -> Result<TurnDocument> {
        let mut batch = Batch::new(&self.state);
        for body in &turn.imports {
            batch.entry(body.clone());
        }
        for (name, value) in &turn.documents {
            batch.document(name, Some(value));
        }
        let tools = &self.tool_specs;
        let newest_system = self.state.newest_system_index();
        let checked = self
            .system_checked
            .as_ref()
            .is_some_and(|(idx, specs)| Some(*idx) == newest_system && Arc::ptr_eq(specs, tools));
        let system_changed = !checked
            && self.state.system().is_none_or(|(prompt, known)| {
                prompt != self.config.system_prompt || known != &tools[..]
            });
        if !system_changed {
            self.system_checked = newest_system.map(|idx| (idx, Arc::clone(tools)));
        }
        if system_changed {
            batch.entry(EntryBody::System {
                system_prompt: self.config.system_prompt.clone(),
                tools: tools.to_vec(),
            });
        }
        let agent = AgentDocument {
            model: self.config.model.clone(),
            reasoning: self.config.reasoning,
        };
        if self.state.agent().as_ref() != Some(&agent) {
            batch.document(AGENT_DOCUMENT, Some(&agent));
        }
        let input_entry_id = batch.entry(EntryBody::User {
            request_id: turn.request_id.clone(),
            message: turn.input.clone(),
        });
        let doc = TurnDocument {
            request_id: turn.request_id.clone(),
            input_entry_id,
            state: TurnState::Open,
            answer_entry_id: None,
            reason: None,
        };
        batch.document(TURN_DOCUMENT, Some(&doc));
        self.commit(batch).await?;
        Ok(doc)
    }

    async fn drive(&mut self, doc: TurnDocument, turn: &TurnRequest) -> Result<TurnOutcome> {
        let blocks = block_messages(&turn.blocks);
        loop {
            let tools = &self.tools;
            let action = next_action(&self.state, &doc, |name| tools.safe_to_repeat(name));
            match action {
                Action::Answered { entry_id } => {
                    if self
                        .state
                        .turn()
                        .is_some_and(|t| t.state == TurnState::Open)
                    {
                        self.settle(&doc, TurnState::Answered, Some(entry_id), None)
                            .await?;
                    }
                    return self.settled_outcome(&doc, TurnState::Answered);
                }
                Action::EndTurn => {
                    let reason = "a verb ended the turn".to_owned();
                    self.settle(&doc, TurnState::Ended, None, Some(reason.clone()))
                        .await?;
                    return Ok(TurnOutcome::Ended { reason });
                }
                Action::InterruptTool { call } => {
                    // Before it is answered as interrupted, its tool says whether the call
                    // took effect; if it did, the call is answered with that effect.
                    let tool = self.tools.get(&call.name).cloned();
                    let reconciled = match &tool {
                        Some(tool) => tool.reconcile(&call).await,
                        None => None,
                    };
                    let (result, kind) = match reconciled {
                        Some(output) => result_of(&call, output),
                        None => (
                            interrupted_result(&call.id, &call.name),
                            ResultKind::Interrupted,
                        ),
                    };
                    self.commit_result(&doc, &call.id, &call.name, result, kind)
                        .await?;
                }
                Action::RunTool { call, .. } if self.tools.needs_approval(&call.name) => {
                    // The intent, as waiting for a decision, is committed before anyone is
                    // asked: from here the call runs at most once, and only once approved.
                    self.commit_task(&doc, &call, ToolTaskState::Awaiting)
                        .await?;
                    if let Some(outcome) = self.decide(&doc, call).await? {
                        return Ok(outcome);
                    }
                }
                Action::AwaitDecision { call } => {
                    if let Some(outcome) = self.decide(&doc, call).await? {
                        return Ok(outcome);
                    }
                }
                Action::RunTool { call, rerun } => {
                    // The intent matters only for a tool that must not run twice: a safe one
                    // runs again whether or not it had begun.
                    let needs_intent = !self.tools.safe_to_repeat(&call.name);
                    if !rerun && needs_intent {
                        self.commit_task(&doc, &call, ToolTaskState::Started)
                            .await?;
                    }
                    let output = self.call_tool(&call).await;
                    let (result, kind) = result_of(&call, output);
                    self.commit_result(&doc, &call.id, &call.name, result, kind)
                        .await?;
                }
                Action::RequestModel { step } => {
                    if turn.stop.is_stopped() {
                        self.settle(&doc, TurnState::Stopped, None, None).await?;
                        return Ok(TurnOutcome::Stopped {
                            partial_text: String::new(),
                        });
                    }
                    let request = self.request(&doc, &blocks);
                    if let Some(hook) = self.before_request.as_mut()
                        && let HookDecision::EndTurn { reason } = hook(&request)
                    {
                        self.settle(&doc, TurnState::Ended, None, Some(reason.clone()))
                            .await?;
                        return Ok(TurnOutcome::Ended { reason });
                    }
                    if let Some(outcome) = self
                        .ask_model(&doc, step, request, &blocks, &turn.stop)
                        .await?
                    {
                        return Ok(outcome);
                    }
                }
            }
        }
    }

    /// Streams one response and commits it. `Some` when the turn ended with it.
    async fn ask_model(
        &mut self,
        doc: &TurnDocument,
        step: u32,
        request: Request,
        blocks: &[Arc<Message>],
        stop: &StopSignal,
    ) -> Result<Option<TurnOutcome>> {
        let model_task = |state| Task::Model {
            request_id: doc.request_id.clone(),
            step,
            state,
        };
        let span = spans::model_request(
            &self.span,
            &self.config.system,
            &request.model,
            &doc.request_id,
            step,
        );
        spans::record_request_content(&span, &request, self.config.trace_content);
        // Not entered while streaming: nothing under it is traced, and each chunk's poll
        // would enter and exit it.
        let streamed = self.stream(doc, step, request, stop, &span).await?;
        match &streamed {
            Streamed::Done(message) => {
                spans::record_response(&span, message, self.config.trace_content)
            }
            Streamed::Stopped(_) => spans::record_request_failed(&span, "cancelled"),
            Streamed::Failed { error, .. } => {
                spans::record_request_failed(&span, &error.kind.to_string())
            }
        }
        drop(span);
        match streamed {
            Streamed::Done(mut message) => {
                if message.usage.prompt_tokens() == 0 {
                    // The server counted nothing (many local servers send no usage): the
                    // request, built again as it was sent, is measured instead.
                    let sent = self.request(doc, blocks);
                    message.usage = seed_providers::estimate::usage(&sent, &message);
                }
                let mut batch = Batch::new(&self.state);
                let entry_id = batch.entry(EntryBody::Assistant {
                    request_id: doc.request_id.clone(),
                    message: message.clone(),
                });
                // Every model request has its task (the spec: one per model request), closed
                // here with the entry that records the response; `pi.live` is cleared when
                // streaming opened it.
                batch.task(model_task(ModelTaskState::Completed { entry_id }));
                if self.state.live().is_some() {
                    batch.document::<LiveDocument>(LIVE_DOCUMENT, None);
                }
                let outcome = if !message.is_complete() {
                    let error = ProviderError::new(
                        ProviderErrorKind::Refused,
                        message
                            .error_message
                            .clone()
                            .unwrap_or_else(|| format!("response {:?}", message.stop_reason)),
                    );
                    let settled = TurnDocument {
                        state: TurnState::Failed,
                        reason: Some(error.to_string()),
                        ..doc.clone()
                    };
                    batch.document(TURN_DOCUMENT, Some(&settled));
                    Some(TurnOutcome::Failed {
                        error,
                        partial_text: message.text(),
                    })
                } else if message.tool_calls().is_empty() {
                    let settled = TurnDocument {
                        state: TurnState::Answered,
                        answer_entry_id: Some(entry_id),
                        ..doc.clone()
                    };
                    batch.document(TURN_DOCUMENT, Some(&settled));
                    Some(TurnOutcome::Answered { entry_id, message })
                } else {
                    None
                };
                self.commit(batch).await?;
                Ok(outcome)
            }
            Streamed::Stopped(partial) => {
                let mut batch = Batch::new(&self.state);
                batch.document(
                    LIVE_DOCUMENT,
                    Some(&partial.live(doc, LiveState::Stopped, None)),
                );
                batch.task(model_task(ModelTaskState::Aborted));
                let settled = TurnDocument {
                    state: TurnState::Stopped,
                    ..doc.clone()
                };
                batch.document(TURN_DOCUMENT, Some(&settled));
                self.commit(batch).await?;
                Ok(Some(TurnOutcome::Stopped {
                    partial_text: partial.text,
                }))
            }
            Streamed::Failed { error, partial } => {
                let mut batch = Batch::new(&self.state);
                let failed = partial.live(doc, LiveState::Failed, Some(error.to_string()));
                batch.document(LIVE_DOCUMENT, Some(&failed));
                batch.task(model_task(ModelTaskState::Aborted));
                let settled = TurnDocument {
                    state: TurnState::Failed,
                    reason: Some(error.to_string()),
                    ..doc.clone()
                };
                batch.document(TURN_DOCUMENT, Some(&settled));
                self.commit(batch).await?;
                Ok(Some(TurnOutcome::Failed {
                    error,
                    partial_text: partial.text,
                }))
            }
        }
    }

    fn request(&mut self, doc: &TurnDocument, blocks: &[Arc<Message>]) -> Request {
        let context = conversation_cached(&self.state.entries, &mut self.message_cache);
        Request {
            model: self.config.model.clone(),
            reasoning: self.config.reasoning,
            system_prompt: self.config.system_prompt.clone(),
            messages: without_images_unless(
                || self.provider.takes_images(&self.config.model),
                request_messages(context, doc.input_entry_id, blocks),
            ),
            tools: Arc::clone(&self.tool_specs),
            session_id: self.config.session_id.clone(),
        }
    }

    /// Runs `call` with its tool (an error result for a tool this harness does not have), in
    /// the call's trace span.
    async fn call_tool(&self, call: &ToolCall) -> ToolOutput {
        let span = spans::tool_call(&self.span, call, self.tools.safe_to_repeat(&call.name));
        let output = match self.tools.get(&call.name) {
            // Made inside the span too: a tool may read the current span as it makes its
            // future (a verb carries it to its actor).
            Some(tool) => {
                span.in_scope(|| tool.call(call))
                    .instrument(span.clone())
                    .await
            }
            None => ToolOutput::error(format!("unknown tool {:?}", call.name)),
        };
        spans::record_tool_output(&span, output.is_error);
        output
    }

    /// Commits the task of `call` in `state` (its intent: started, or awaiting a decision).
    async fn commit_task(
        &mut self,
        doc: &TurnDocument,
        call: &ToolCall,
        state: ToolTaskState,
    ) -> Result<()> {
        let mut batch = Batch::new(&self.state);
        batch.task(Task::Tool {
            request_id: doc.request_id.clone(),
            call_id: call.id.clone(),
            name: call.name.clone(),
            state,
        });
        self.commit(batch).await
    }

    /// Carries out the decision on `call`, whose intent is committed as awaiting one: approved,
    /// the call moves to started (so a crash from here never runs it again) and runs once with
    /// the arguments approved; denied, it is answered with the reason and never runs. `Some`
    /// when there is no decision yet: the turn waits, open.
    async fn decide(&mut self, doc: &TurnDocument, call: ToolCall) -> Result<Option<TurnOutcome>> {
        let decision = match self.tools.get(&call.name) {
            Some(tool) => tool.decision(&call).await,
            None => Decision::Denied {
                reason: format!("unknown tool {:?}", call.name),
            },
        };
        let output = match decision {
            Decision::Pending => return Ok(Some(TurnOutcome::Waiting { call })),
            Decision::Denied { reason } => ToolOutput::error(format!(
                "denied: a person did not approve this {} call, and it did not run. Reason: \
                 {reason}",
                call.name
            )),
            Decision::Approved { arguments } => {
                self.commit_task(doc, &call, ToolTaskState::Started).await?;
                let edited = arguments != call.arguments;
                let approved = ToolCall {
                    arguments,
                    ..call.clone()
                };
                let mut output = self.call_tool(&approved).await;
                if edited {
                    // The model reads the arguments the call ran with, not its own.
                    output.content = format!(
                        "A person edited the arguments before approving; the call ran with {}.\n{}",
                        approved.arguments, output.content
                    );
                }
                output
            }
        };
        let (result, kind) = result_of(&call, output);
        self.commit_result(doc, &call.id, &call.name, result, kind)
            .await?;
        Ok(None)
    }

    async fn commit_result(
        &mut self,
        doc: &TurnDocument,
        call_id: &str,
        name: &str,
        result: ToolResultMessage,
        kind: ResultKind,
    ) -> Result<()> {
        let (ends_turn, placeholder) = match kind {
            ResultKind::Ran {
                ends_turn,
                placeholder,
                ..
            } => (ends_turn, placeholder),
            ResultKind::Interrupted => (false, false),
        };
        let mut batch = Batch::new(&self.state);
        let entry_id = batch.entry(EntryBody::ToolResult {
            request_id: doc.request_id.clone(),
            message: result,
            ends_turn,
            placeholder,
        });
        // Every tool call has its task (the spec: one per tool call), closed here with the
        // entry that records its result; an unsafe tool's was opened by its intent.
        let state = match kind {
            ResultKind::Interrupted => ToolTaskState::Interrupted { entry_id },
            ResultKind::Ran { .. } => ToolTaskState::Completed { entry_id },
        };
        batch.task(Task::Tool {
            request_id: doc.request_id.clone(),
            call_id: call_id.to_owned(),
            name: name.to_owned(),
            state,
        });
        self.commit(batch).await
    }

    async fn settle(
        &mut self,
        doc: &TurnDocument,
        state: TurnState,
        answer_entry_id: Option<EntryId>,
        reason: Option<String>,
    ) -> Result<()> {
        let settled = TurnDocument {
            state,
            answer_entry_id,
            reason,
            ..doc.clone()
        };
        let mut batch = Batch::new(&self.state);
        batch.document(TURN_DOCUMENT, Some(&settled));
        self.commit(batch).await
    }

    /// Commits a batch; a refusal closes the harness.
    async fn commit(&mut self, batch: Batch) -> Result<()> {
        if self.closed {
            return Err(Error::Closed);
        }
        match self.fs.commit_batch(&batch).await {
            Ok(()) => {
                self.n_since_kept +=
                    batch.entries().len() + batch.documents().len() + batch.tasks().len();
                // A reset starts a new context: kept at once, an open reads from it on.
                if batch
                    .entries()
                    .iter()
                    .any(|entry| matches!(entry.body, EntryBody::Reset {}))
                {
                    self.n_since_kept = self.n_since_kept.max(KEEP_AFTER_LINES);
                }
                self.state.apply(batch);
                self.keep_when_due().await;
                Ok(())
            }
            Err(error) => {
                self.closed = true;
                tracing::warn!(%error, "store refused a commit; closing the harness");
                Err(Error::StoreRefused(Box::new(error)))
            }
        }
    }
}

/// The result message of `call`.
/// `messages` with the images of tool results left out when the model takes none (their text
/// names each one). The model is asked only when a message holds images, so a request without
/// any costs a look at each message; a message with images is copied, the others stay shared.
fn without_images_unless(
    takes_images: impl FnOnce() -> bool,
    mut messages: Vec<Arc<Message>>,
) -> Vec<Arc<Message>> {
    let has_images = |message: &Arc<Message>| matches!(message.as_ref(), Message::ToolResult(result) if !result.images.is_empty());
    if !messages.iter().any(has_images) || takes_images() {
        return messages;
    }
    for message in messages.iter_mut().filter(|message| has_images(message)) {
        if let Message::ToolResult(result) = message.as_ref() {
            *message = Arc::new(Message::ToolResult(ToolResultMessage {
                images: Vec::new(),
                ..result.clone()
            }));
        }
    }
    messages
}

/// A call's output as the result to commit, and how it ran.
fn result_of(call: &ToolCall, output: ToolOutput) -> (ToolResultMessage, ResultKind) {
    let kind = ResultKind::Ran {
        ends_turn: output.ends_turn,
        placeholder: output.placeholder,
    };
    let result = ToolResultMessage {
        tool_call_id: call.id.clone(),
        tool_name: call.name.clone(),
        content: output.content,
        is_error: output.is_error,
        images: output.images,
    };
    (result, kind)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The store's errors reach a failed run's reason through these texts, so they name them.
    #[test]
    fn a_store_error_is_named_in_the_text() {
        let cause = || Box::new(std::io::Error::other("io: permission denied"));
        assert_eq!(
            Error::StoreRead(cause()).to_string(),
            "cannot read the store: io: permission denied"
        );
        assert_eq!(
            Error::StoreRefused(cause()).to_string(),
            "the store refused a commit; the harness is closed: io: permission denied"
        );
    }

    /// A model that takes no images is sent a tool's text alone; one that does gets the images,
    /// and messages without images are shared, not copied.
    #[test]
    fn a_results_images_go_to_a_model_that_takes_images() {
        let pictured = Arc::new(Message::ToolResult(ToolResultMessage {
            tool_call_id: "c1".to_owned(),
            tool_name: "shot".to_owned(),
            content: "[image/png, 8 bytes: attachment:c1-1]".to_owned(),
            is_error: false,
            images: vec![seed_providers::ResultImage {
                media_type: "image/png".to_owned(),
                data: "iVBORw0KGgo=".to_owned(),
                attachment_id: Some("c1-1".to_owned()),
            }],
        }));
        let said = Arc::new(Message::User(seed_providers::UserMessage::new("look")));
        let messages = || vec![Arc::clone(&said), Arc::clone(&pictured)];

        let shown = without_images_unless(|| true, messages());
        assert!(Arc::ptr_eq(&shown[1], &pictured));

        let told = without_images_unless(|| false, messages());
        assert!(Arc::ptr_eq(&told[0], &said));
        let Message::ToolResult(result) = told[1].as_ref() else {
            panic!("a tool result: {:?}", told[1]);
        };
        assert!(result.images.is_empty());
        assert_eq!(result.content, "[image/png, 8 bytes: attachment:c1-1]");
    }
}
