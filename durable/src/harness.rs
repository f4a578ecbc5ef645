//! The harness: runs a turn over a durable store, committing every step before anything else
//! sees it, and recovers exactly after a crash.
//!
//! The imperative shell around [`crate::turn::next_action`]: it asks what the store needs next,
//! does it (a model request, a tool call), commits the outcome, and asks again. One harness owns
//! a store at a time (the caller holds the store's lease).
//!
//! This file runs the turn: open, start, drive, settle, commit. Asking the model (the request
//! and the committed response) is the `model` submodule's, streaming one response into
//! `pi.live` the `stream` submodule's, and tool calls (intent, run, result, a person's decision)
//! the `tools` submodule's.

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use seed_providers::{
    AssistantMessage, Message, Provider, ProviderError, Request, ToolCall, ToolSpec, UserMessage,
};

use crate::context::{MessageCache, block_messages};
use crate::fs::{DurableFs, FileName};
use crate::record::{
    AGENT_DOCUMENT, AgentDocument, EntryBody, EntryId, TURN_DOCUMENT, Task, ToolTaskState,
    TurnDocument, TurnState, interrupted_result, restart_result,
};
use crate::state::{Batch, CorruptLine, StoreState};
use crate::stop::StopSignal;
use crate::tool::ToolSet;
use crate::turn::{Action, calls_without_result, next_action};

mod model;
mod stream;
mod tools;

use tools::{ResultKind, result_of};

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
    /// Where the turn's spans go (children of its run's), for traces; `None` with traces
    /// off.
    pub spans: Option<Arc<dyn crate::spans::TurnSpans>>,
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
            spans: None,
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
    /// Where the spans of the turn in hand go ([`TurnRequest::spans`]).
    spans: Option<Arc<dyn crate::spans::TurnSpans>>,
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
            spans: None,
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

    /// The files the harness commits to.
    pub fn fs(&self) -> &F {
        &self.fs
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
        // Held for the turn alone: the run's span ends when its run lets it go.
        self.spans = turn.spans.clone();
        let outcome = self.open_and_drive(&turn).await;
        self.spans = None;
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
}
