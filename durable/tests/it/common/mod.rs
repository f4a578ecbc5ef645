//! A scripted turn, tools that count their runs, and the invariants every recovery must keep:
//! shared by the exhaustive crash test and the property test.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;
use seed_durable::context::has_orphans;
use seed_durable::record::{ToolTaskState, TurnState};
use seed_durable::{
    EntryBody, Harness, HarnessConfig, MemoryFs, StoreState, Tool, ToolOutput, ToolSet,
    TurnOutcome, TurnRequest,
};
use seed_providers::{
    Message, Request, ScriptedProvider, ScriptedStep, ToolCall, ToolSpec, text_response,
    tool_response,
};

/// The tools a script may call, and whether each is safe to repeat.
pub const TOOLS: [(&str, bool); 4] = [
    ("read", true),
    ("plan", true),
    ("memory", false),
    ("send", false),
];

pub fn is_safe(name: &str) -> bool {
    TOOLS.iter().any(|(tool, safe)| *tool == name && *safe)
}

/// A turn's script: per response, the tools it calls; the last response answers.
#[derive(Debug, Clone)]
pub struct Script {
    pub responses: Vec<Vec<&'static str>>,
}

impl Script {
    /// Two tool calls, one safe and one not, then the answer.
    pub fn two_calls() -> Script {
        Script {
            responses: vec![vec!["read", "memory"], vec![]],
        }
    }
}

/// A tool that records every run.
struct CountingTool {
    name: &'static str,
    safe: bool,
    runs: Arc<Mutex<Vec<String>>>,
}

impl Tool for CountingTool {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: self.name.to_owned(),
            description: format!("the {} tool", self.name),
            parameters: serde_json::json!({"type": "object"}),
        }
    }

    fn safe_to_repeat(&self) -> bool {
        self.safe
    }

    fn call<'a>(&'a self, call: &'a ToolCall) -> BoxFuture<'a, ToolOutput> {
        self.runs
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .push(call.id.clone());
        Box::pin(async move { ToolOutput::ok(format!("{} done for {}", self.name, call.id)) })
    }
}

/// The input of the latest user message, and how many responses followed it: which step of
/// which turn a request asks for.
pub fn step_of(request: &Request) -> (String, usize) {
    let last_user = request
        .messages
        .iter()
        .rposition(|message| matches!(message.as_ref(), Message::User(_)))
        .expect("a request carries its input");
    let Message::User(input) = request.messages[last_user].as_ref() else {
        unreachable!()
    };
    let n_responses = request.messages[last_user..]
        .iter()
        .filter(|message| matches!(message.as_ref(), Message::Assistant(_)))
        .count();
    (input.text.clone(), n_responses)
}

pub fn call_id(input: &str, step: usize, call_idx: usize) -> String {
    format!("{input}/{step}/{call_idx}")
}

/// Everything one scenario shares across the crashed run and its recovery.
pub struct World {
    pub script: Script,
    pub provider: ScriptedProvider,
    pub runs: Arc<Mutex<Vec<String>>>,
    pub tools: ToolSet,
}

impl World {
    pub fn new(script: Script) -> World {
        let responses = script.responses.clone();
        let provider = ScriptedProvider::from_fn(move |request, _| {
            let (input, step) = step_of(request);
            match responses.get(step) {
                Some(tools) if !tools.is_empty() => {
                    let calls = tools
                        .iter()
                        .enumerate()
                        .map(|(call_idx, name)| ToolCall {
                            id: call_id(&input, step, call_idx),
                            name: (*name).to_owned(),
                            arguments: serde_json::json!({"n": call_idx}),
                        })
                        .collect();
                    ScriptedStep::Respond(tool_response("", calls))
                }
                _ => ScriptedStep::Respond(text_response(&format!("answer to {input}"))),
            }
        });
        let runs = Arc::new(Mutex::new(Vec::new()));
        let mut tools = ToolSet::new();
        for (name, safe) in TOOLS {
            tools = tools.with(Arc::new(CountingTool {
                name,
                safe,
                runs: Arc::clone(&runs),
            }));
        }
        World {
            script,
            provider,
            runs,
            tools,
        }
    }

    pub fn open(&self, fs: MemoryFs) -> Harness<MemoryFs, ScriptedProvider> {
        futures::executor::block_on(Harness::open(
            fs,
            self.provider.clone(),
            self.tools.clone(),
            HarnessConfig::new("scripted", "You are tested."),
        ))
        .expect("opening a store that is whole")
    }

    pub fn run(
        &self,
        harness: &mut Harness<MemoryFs, ScriptedProvider>,
        request_id: &str,
        input: &str,
    ) -> Result<TurnOutcome, seed_durable::Error> {
        futures::executor::block_on(harness.run_turn(TurnRequest::new(request_id, input)))
    }

    pub fn runs_of(&self, call: &str) -> usize {
        self.runs
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .iter()
            .filter(|id| *id == call)
            .count()
    }

    /// How many requests asked for `step` of the turn whose input is `input`.
    pub fn requests_for(&self, input: &str, step: usize) -> usize {
        self.provider
            .requests()
            .iter()
            .filter(|request| step_of(request) == (input.to_owned(), step))
            .count()
    }
}

/// Folds a memory store's files.
pub fn fold(fs: &MemoryFs) -> StoreState {
    let files = fs.snapshot();
    let lines = |file| files.get(&file).cloned().unwrap_or_default();
    StoreState::fold(
        &lines(seed_durable::FileName::Entries),
        &lines(seed_durable::FileName::Documents),
        &lines(seed_durable::FileName::Tasks),
    )
    .expect("a crashed store folds: no torn line")
}

/// The steps of `request_id`'s turn whose responses the store holds.
pub fn committed_steps(state: &StoreState, request_id: &str) -> usize {
    state
        .entries
        .iter()
        .filter(|entry| {
            matches!(&entry.body, EntryBody::Assistant { request_id: r, .. } if r == request_id)
        })
        .count()
}

pub fn has_result(state: &StoreState, call: &str) -> bool {
    state.entries.iter().any(|entry| {
        matches!(&entry.body, EntryBody::ToolResult { message, .. } if message.tool_call_id == call)
    })
}

pub fn was_started(state: &StoreState, call: &str) -> bool {
    matches!(
        state.task(&format!("tool:{call}")),
        Some(seed_durable::record::Task::Tool {
            state: ToolTaskState::Started,
            ..
        })
    )
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Recovery {
    SameRun,
    DifferentRun,
}

/// Runs `script` as request "r1", crashing the store after `crash_after` commits, then recovers
/// as `recovery` and checks every invariant. Returns how many commits the crashed run made.
pub fn crash_and_recover(script: &Script, crash_after: usize, recovery: Recovery) -> usize {
    let world = World::new(script.clone());
    let fs = MemoryFs::new();
    fs.crash_after(crash_after);
    let mut crashed = world.open(fs.clone());
    let first = world.run(&mut crashed, "r1", "go");
    let crash_commits = fs.n_commits();
    assert!(
        first.is_ok() || (fs.is_crashed() && crash_commits == crash_after),
        "crash after {crash_after}: {first:?}"
    );
    let at_crash = fold(&fs);
    let runs_at_crash = world
        .runs
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
        .clone();
    let requests_at_crash = world.provider.n_requests();

    let revived = fs.revive();
    let mut recovered = world.open(revived.clone());
    let turn_at_crash = at_crash.turn();
    let answered_at_crash = turn_at_crash
        .as_ref()
        .is_some_and(|turn| turn.request_id == "r1" && turn.state == TurnState::Answered);
    let outcome = match recovery {
        Recovery::SameRun => world.run(&mut recovered, "r1", "go"),
        Recovery::DifferentRun => world.run(&mut recovered, "r2", "again"),
    }
    .expect("recovery runs on a working store");
    let TurnOutcome::Answered { message, .. } = &outcome else {
        panic!("crash after {crash_after}, {recovery:?}: {outcome:?}")
    };
    let final_state = recovered.state().clone();
    assert_eq!(final_state, fold(&revived), "memory and store agree");

    // The responses committed before the crash were never asked for again.
    for step in 0..committed_steps(&at_crash, "r1") {
        assert_eq!(
            world.requests_for("go", step),
            1,
            "crash after {crash_after}, {recovery:?}: step {step} was committed but asked again"
        );
    }
    // No request carried an orphan tool call.
    for request in world.provider.requests() {
        assert!(
            !has_orphans(&request.messages),
            "crash after {crash_after}, {recovery:?}: orphan in {:?}",
            request.messages
        );
    }
    // Every call of the crashed turn ran at most once, or twice only when it is safe to repeat,
    // was cut off (ran, no result committed), and the same run came back.
    let calls: Vec<(String, &str)> = script
        .responses
        .iter()
        .enumerate()
        .flat_map(|(step, tools)| {
            tools
                .iter()
                .enumerate()
                .map(move |(call_idx, name)| (call_id("go", step, call_idx), *name))
        })
        .collect();
    for (call, name) in &calls {
        let ran_before = runs_at_crash.contains(call);
        let cut_off = ran_before && !has_result(&at_crash, call);
        let runs = world.runs_of(call);
        let may_rerun = recovery == Recovery::SameRun && is_safe(name) && cut_off;
        assert!(
            runs <= 1 || (runs == 2 && may_rerun),
            "crash after {crash_after}, {recovery:?}: {call} ({name}) ran {runs} times \
             (cut off: {cut_off})"
        );
        if recovery == Recovery::SameRun && cut_off && !is_safe(name) {
            // Its interrupted result reached the model.
            let reached = world.provider.requests()[requests_at_crash..].iter().any(|request| {
                request.messages.iter().any(|message| {
                    matches!(message.as_ref(), Message::ToolResult(result)
                        if &result.tool_call_id == call && result.content.starts_with("interrupted:"))
                })
            });
            assert!(
                reached,
                "crash after {crash_after}: {call}'s interrupted result never reached the model"
            );
        }
        if recovery == Recovery::DifferentRun
            && turn_at_crash
                .as_ref()
                .is_some_and(|turn| turn.state == TurnState::Open)
        {
            // The earlier run's calls without a result were answered as cut off by a restart,
            // once, and the context started anew.
            let offered = calls_offered(&at_crash, call);
            if offered && !has_result(&at_crash, call) {
                let restart_results = final_state
                    .entries
                    .iter()
                    .filter(|entry| {
                        matches!(&entry.body,
                    EntryBody::ToolResult { message, .. } if &message.tool_call_id == call
                        && message.content == "interrupted by a service restart")
                    })
                    .count();
                assert_eq!(restart_results, 1, "crash after {crash_after}: {call}");
            }
        }
    }
    // No call has two results: nothing was written twice.
    for (call, _) in &calls {
        let n_results = final_state
            .entries
            .iter()
            .filter(|entry| {
                matches!(&entry.body,
            EntryBody::ToolResult { message, .. } if &message.tool_call_id == call)
            })
            .count();
        assert!(
            n_results <= 1,
            "crash after {crash_after}, {recovery:?}: {call} has {n_results} results"
        );
    }
    let mut seen_ids = BTreeMap::new();
    for entry in &final_state.entries {
        assert!(
            seen_ids.insert(entry.id, ()).is_none(),
            "entry {} twice",
            entry.id
        );
    }
    // The final context is well formed.
    let context: Vec<Message> = seed_durable::context::conversation(&final_state.entries)
        .into_iter()
        .map(|item| Message::clone(&item.message))
        .collect();
    assert!(
        !has_orphans(&context),
        "crash after {crash_after}, {recovery:?}: orphan in the final context"
    );

    match recovery {
        Recovery::SameRun => {
            assert_eq!(message.text(), "answer to go");
            if answered_at_crash {
                assert_eq!(
                    world.provider.n_requests(),
                    requests_at_crash,
                    "crash after {crash_after}: the answer was committed, yet the model was asked"
                );
            }
        }
        Recovery::DifferentRun => assert_eq!(message.text(), "answer to again"),
    }
    crash_commits
}

/// Whether the crashed store holds a response that made `call`.
fn calls_offered(state: &StoreState, call: &str) -> bool {
    state.entries.iter().any(|entry| match &entry.body {
        EntryBody::Assistant { message, .. } => message.tool_calls().iter().any(|c| c.id == call),
        _ => false,
    })
}
