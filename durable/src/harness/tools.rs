//! Tool calls: running a call in its span, committing its intent and its result (with its
//! task), and carrying out a person's decision on a call that waits for one.

use seed_providers::{Provider, ToolCall, ToolResultMessage};

use super::{Harness, Result, TurnOutcome};
use crate::fs::DurableFs;
use crate::record::{EntryBody, Task, ToolTaskState, TurnDocument};
use crate::state::Batch;
use crate::tool::{Decision, ToolOutput};

/// How a call's result came to be.
#[derive(Debug, Clone, Copy)]
pub(super) enum ResultKind {
    /// Answered as cut off, without running (again).
    Interrupted,
    Ran {
        ends_turn: bool,
        /// A stand-in until the real result arrives (a delegated child still running).
        placeholder: bool,
    },
}

impl<F: DurableFs, P: Provider> Harness<F, P> {
    /// Runs `call` with its tool (an error result for a tool this harness does not have), in
    /// the call's trace span when traces are on (handed to the tool, which may carry it on).
    pub(super) async fn call_tool(&self, call: &ToolCall) -> ToolOutput {
        let span = self
            .spans
            .as_ref()
            .map(|spans| spans.tool_call(call, self.tools.safe_to_repeat(&call.name)));
        let output = match self.tools.get(&call.name) {
            Some(tool) => tool.call_traced(call, span.clone()).await,
            None => ToolOutput::error(format!("unknown tool {:?}", call.name)),
        };
        if let Some(span) = span {
            span.end(output.is_error);
        }
        output
    }

    /// Commits the task of `call` in `state` (its intent: started, or awaiting a decision).
    pub(super) async fn commit_task(
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
    pub(super) async fn decide(
        &mut self,
        doc: &TurnDocument,
        call: ToolCall,
    ) -> Result<Option<TurnOutcome>> {
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

    pub(super) async fn commit_result(
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
}

/// A call's output as the result to commit, and how it ran.
pub(super) fn result_of(call: &ToolCall, output: ToolOutput) -> (ToolResultMessage, ResultKind) {
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
