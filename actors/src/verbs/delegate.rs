//! `delegate` and `return_result`: a run hands a task to a child run in a child session and
//! parks until the child's result arrives; a typed child ends with `return_result`.
//!
//! The parent's call is answered in the store with a placeholder saying the child is still
//! running; the log keeps the call unanswered until the child's real result arrives, which the
//! parent's next pass imports as an edit of the placeholder.

use std::sync::LazyLock;

use futures::future::BoxFuture;
use seed_events::{EventRole, MessageBody, NewEvent, Queue, RunId, SessionId};
use seed_store::{NewRun, NewSession, TitleSource};
use serde::Deserialize;

use crate::schema::parse_checked;
use crate::verb::{Availability, TurnEffect, Verb, VerbContext, VerbOutput};

/// Children one run may start.
pub const DELEGATION_BUDGET_PER_RUN: u32 = 4;

/// What the model reads of `delegate`, its budget stated from the constant.
static DESCRIPTION: LazyLock<String> = LazyLock::new(|| {
    format!(
        "Hands a self-contained task to a child agent that works in its own session, and parks \
         this run until the child is done. Write the task for a colleague who has read nothing \
         of this conversation. The call is answered at once with a note that the child is \
         still running; your turn then ends, and a later turn reads the child's real result \
         in that call's place. Set typed to true when you need a structured result: the child \
         then ends with return_result. A run may start at most {DELEGATION_BUDGET_PER_RUN} \
         children."
    )
});

/// Where a child's first message says its result goes.
pub const DELEGATED_BY: &str = seed_store::DELEGATED_BY;
/// The verb's name.
pub const DELEGATE: &str = "delegate";

#[derive(Debug)]
pub struct Delegate;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct DelegateArgs {
    /// The task, for a colleague who has read nothing.
    task: String,
    /// A typed child ends with `return_result` instead of an answer.
    #[serde(default)]
    typed: bool,
}

impl Verb for Delegate {
    fn name(&self) -> &'static str {
        DELEGATE
    }

    fn description(&self) -> &'static str {
        &DESCRIPTION
    }

    fn parameters(&self) -> serde_json::Value {
        serde_json::json!({
            "type": "object",
            "properties": {
                "task": { "type": "string", "description": "The task, self-contained." },
                "typed": { "type": "boolean", "description": "The child ends with return_result." }
            },
            "required": ["task"],
            "additionalProperties": false
        })
    }

    /// Not safe to repeat, as the spec has it for every verb but read, plan and status: a call
    /// cut off by a crash is not run again. When its child had started it is answered as the
    /// call would have been (the placeholder: the turn ends and parks on the child), else as
    /// interrupted.
    fn safe_to_repeat(&self) -> bool {
        false
    }

    /// The child this call started, found by the call id its task names.
    fn reconcile(
        &self,
        context: VerbContext,
        _: serde_json::Value,
    ) -> BoxFuture<'static, Option<VerbOutput>> {
        Box::pin(async move {
            let store = &context.store;
            let started = async {
                let children = store.child_runs(context.run_id).await?;
                child_of_call(store, &children, &context.tool_call_id).await
            };
            match started.await {
                Ok(child) => child.map(delegated),
                Err(error) => {
                    tracing::warn!(%error, "cannot look up a cut-off delegate call");
                    None
                }
            }
        })
    }

    fn ends_turn(&self) -> bool {
        true
    }

    /// The child's end writes this call's result to the log.
    fn turn_effect(&self) -> TurnEffect {
        TurnEffect::Delegates
    }

    fn availability(&self) -> Availability {
        Availability::NotInChildren
    }

    fn call(
        &self,
        context: VerbContext,
        arguments: serde_json::Value,
    ) -> BoxFuture<'static, VerbOutput> {
        let schema = self.parameters();
        Box::pin(async move {
            let args: DelegateArgs = match parse_checked("delegate", &schema, arguments) {
                Ok(args) => args,
                Err(error) => return error,
            };
            if args.task.trim().is_empty() {
                return VerbOutput::error(
                    "invalid arguments for delegate: task: must not be empty",
                );
            }
            match start_child(&context, &args).await {
                Ok(child_session_id) => delegated(child_session_id),
                Err(error) => VerbOutput::error(error),
            }
        })
    }
}

/// A delegate call's answer once its child started: a placeholder until the child's result.
fn delegated(child_session_id: SessionId) -> VerbOutput {
    VerbOutput {
        content: format!("delegated to session {child_session_id}; the child is still running"),
        is_error: false,
        ends_turn: true,
        placeholder: true,
        images: Vec::new(),
    }
}

async fn start_child(context: &VerbContext, args: &DelegateArgs) -> Result<SessionId, String> {
    let store = &context.store;
    let children = store
        .child_runs(context.run_id)
        .await
        .map_err(|error| error.to_string())?;
    // The same call made twice (by a verb's own caller) finds the child it started.
    if let Some(child) = child_of_call(store, &children, &context.tool_call_id)
        .await
        .map_err(|error| error.to_string())?
    {
        return Ok(child);
    }
    if children.len() >= DELEGATION_BUDGET_PER_RUN as usize {
        return Err(format!(
            "the delegation budget is spent: this run has started {} children",
            children.len()
        ));
    }
    let child_session_id = SessionId::new_v7();
    let mut child = NewSession::new(child_session_id, context.account_id, context.now_ms);
    child.parent_session_id = Some(context.session_id);
    child.title = args
        .task
        .chars()
        .take(seed_events::limits::SESSION_TITLE_FROM_TEXT_CHARS)
        .collect();
    child.title_source = TitleSource::Agent;
    let mut task = NewEvent::new(
        MessageBody::text(args.task.as_str()),
        EventRole::User,
        "trigger",
        context.now_ms,
    );
    task.meta = serde_json::json!({
        DELEGATED_BY: {
            "session_id": context.session_id,
            "run_id": context.run_id,
            "tool_call_id": context.tool_call_id,
        }
    });
    let run = NewRun {
        id: RunId::new_v7(),
        session_id: child_session_id,
        queue: Queue::Background,
        user_event_ids: Vec::new(),
        parent_run_id: Some(context.run_id),
        typed: args.typed,
        created_at_ms: context.now_ms,
    };
    // The child's run continues this call's trace.
    let run_id = run.id;
    context.continue_call_trace(run_id);
    if let Err(error) = store.start_child(child, task, run).await {
        context.traces.forget(run_id);
        return Err(error.to_string());
    }
    Ok(child_session_id)
}

/// The child session that call `tool_call_id` started among `children` (a run's children), if
/// it started one: its task's meta names the call.
pub(crate) async fn child_of_call(
    store: &seed_store::Store,
    children: &[seed_store::RunRow],
    tool_call_id: &str,
) -> Result<Option<SessionId>, seed_store::Error> {
    for child in children {
        let task = store.read_events(child.session_id, 1, 1, 1).await?;
        let started_by_this_call = task.first().is_some_and(|task| {
            task.meta
                .get(DELEGATED_BY)
                .and_then(|by| by.get("tool_call_id"))
                .and_then(|id| id.as_str())
                == Some(tool_call_id)
        });
        if started_by_this_call {
            return Ok(Some(child.session_id));
        }
    }
    Ok(None)
}

#[derive(Debug)]
pub struct ReturnResult;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ReturnArgs {
    result: serde_json::Value,
}

impl Verb for ReturnResult {
    fn name(&self) -> &'static str {
        "return_result"
    }

    fn description(&self) -> &'static str {
        "Ends this delegated task with its result, which the parent agent reads in place of its \
         delegate call. Call it once, when the task is done, with the result as the parent \
         asked for it."
    }

    fn parameters(&self) -> serde_json::Value {
        serde_json::json!({
            "type": "object",
            "properties": { "result": { "description": "The task's result." } },
            "required": ["result"],
            "additionalProperties": false
        })
    }

    /// Cut off by a crash, it is answered as interrupted, and the model calls it again.
    fn safe_to_repeat(&self) -> bool {
        false
    }

    fn ends_turn(&self) -> bool {
        true
    }

    /// What it returns is the run's result.
    fn turn_effect(&self) -> TurnEffect {
        TurnEffect::Returns
    }

    fn availability(&self) -> Availability {
        Availability::TypedChildrenOnly
    }

    fn call(&self, _: VerbContext, arguments: serde_json::Value) -> BoxFuture<'static, VerbOutput> {
        let schema = self.parameters();
        Box::pin(async move {
            match parse_checked::<ReturnArgs>("return_result", &schema, arguments) {
                Ok(args) => VerbOutput {
                    content: args.result.to_string(),
                    is_error: false,
                    ends_turn: true,
                    placeholder: false,
                    images: Vec::new(),
                },
                Err(error) => error,
            }
        })
    }
}
