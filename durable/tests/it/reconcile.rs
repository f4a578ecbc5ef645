//! A cut-off call of a tool that is not safe to repeat is reconciled before it is answered as
//! interrupted: the same run, adopting the turn, asks the tool whether the call took effect; if
//! it did, the call is answered with that effect (and not run again), else as interrupted.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use futures::executor::block_on;
use futures::future::BoxFuture;
use seed_durable::record::ToolTaskState;
use seed_durable::{
    Harness, HarnessConfig, MemoryFs, Tool, ToolOutput, ToolSet, TurnOutcome, TurnRequest,
};
use seed_providers::{
    Message, Request, ScriptedProvider, ScriptedStep, ToolCall, ToolSpec, text_response,
    tool_response,
};

/// A tool that must not run twice: each run records its effect by call id, which reconcile
/// reads back.
#[derive(Default)]
struct Send {
    effects: Mutex<BTreeMap<String, String>>,
    n_runs: Mutex<usize>,
}

impl Tool for Send {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "send".to_owned(),
            description: "sends".to_owned(),
            parameters: serde_json::json!({"type": "object"}),
        }
    }

    fn safe_to_repeat(&self) -> bool {
        false
    }

    fn call<'a>(&'a self, call: &'a ToolCall) -> BoxFuture<'a, ToolOutput> {
        *self.n_runs.lock().expect("lock") += 1;
        let done = format!("sent as {}", call.id);
        self.effects
            .lock()
            .expect("lock")
            .insert(call.id.clone(), done.clone());
        Box::pin(async move { ToolOutput::ok(done) })
    }

    fn reconcile<'a>(&'a self, call: &'a ToolCall) -> BoxFuture<'a, Option<ToolOutput>> {
        let effect = self.effects.lock().expect("lock").get(&call.id).cloned();
        Box::pin(async move { effect.map(ToolOutput::ok) })
    }
}

/// One send, then an answer saying what the send's result was.
fn provider() -> ScriptedProvider {
    ScriptedProvider::from_fn(|request: &Request, _| {
        let result = request.messages.iter().find_map(|m| match m.as_ref() {
            Message::ToolResult(result) => Some(result.clone()),
            _ => None,
        });
        ScriptedStep::Respond(match result {
            Some(result) => text_response(&format!(
                "{}: {}",
                if result.is_error { "error" } else { "ok" },
                result.content
            )),
            None => tool_response(
                "",
                vec![ToolCall {
                    id: "s1".to_owned(),
                    name: "send".to_owned(),
                    arguments: serde_json::json!({}),
                }],
            ),
        })
    })
}

fn open(
    fs: MemoryFs,
    provider: &ScriptedProvider,
    send: &Arc<Send>,
) -> Harness<MemoryFs, ScriptedProvider> {
    let tools = ToolSet::new().with(Arc::clone(send) as Arc<dyn Tool>);
    block_on(Harness::open(
        fs,
        provider.clone(),
        tools,
        HarnessConfig::new("scripted", "You are tested."),
    ))
    .expect("opens")
}

/// Runs the turn until the send ran and its result's commit was refused (a crash between the
/// call's effect and its result), then recovers it as the same run after `forget` (which may
/// lose the tool's record of its effect). Returns the recovered answer, the tool's runs, and
/// the call's task state.
fn crash_after_the_send(forget: bool) -> (String, usize, Option<ToolTaskState>) {
    let send = Arc::new(Send::default());
    let provider = provider();
    let fs = MemoryFs::new();
    // The input, the response with the call, the call's intent; the result is refused.
    fs.crash_after(3);
    let mut harness = open(fs.clone(), &provider, &send);
    let crashed = block_on(harness.run_turn(TurnRequest::new("r1", "go")));
    assert!(crashed.is_err(), "{crashed:?}");
    assert_eq!(*send.n_runs.lock().expect("lock"), 1, "the send ran");
    if forget {
        send.effects.lock().expect("lock").clear();
    }

    let mut recovered = open(fs.revive(), &provider, &send);
    let outcome = block_on(recovered.run_turn(TurnRequest::new("r1", "go"))).expect("recovers");
    let TurnOutcome::Answered { message, .. } = outcome else {
        panic!("{outcome:?}")
    };
    let task = recovered
        .state()
        .tasks
        .values()
        .find_map(|task| match task {
            seed_durable::record::Task::Tool { call_id, state, .. } if call_id == "s1" => {
                Some(*state)
            }
            _ => None,
        });
    let n_runs = *send.n_runs.lock().expect("lock");
    (message.text(), n_runs, task)
}

#[test]
fn a_cut_off_call_that_took_effect_is_answered_with_its_effect() {
    let (answer, n_runs, task) = crash_after_the_send(false);
    assert_eq!(answer, "ok: sent as s1");
    assert_eq!(n_runs, 1, "not run again");
    assert!(
        matches!(task, Some(ToolTaskState::Completed { .. })),
        "{task:?}"
    );
}

#[test]
fn a_cut_off_call_its_tool_cannot_vouch_for_is_answered_as_interrupted() {
    let (answer, n_runs, task) = crash_after_the_send(true);
    assert!(answer.starts_with("error: interrupted:"), "{answer}");
    assert_eq!(n_runs, 1, "not run again");
    assert!(
        matches!(task, Some(ToolTaskState::Interrupted { .. })),
        "{task:?}"
    );
}
