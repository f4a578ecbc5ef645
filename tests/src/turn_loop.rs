//! The scripted turn loop the `harness` bench suite drives: a model that reads a note a few
//! times per turn and then answers, a `read` tool that answers at once, and a session of turns
//! run through the durable harness over any `DurableFs`.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::bail;
use futures::future::BoxFuture;
use seed_durable::{
    Append, DurableFs, FileName, Harness, HarnessConfig, Tool, ToolOutput, ToolSet, TurnOutcome,
    TurnRequest,
};
use seed_providers::{
    Message, Request, ScriptedProvider, ScriptedStep, ToolCall, ToolSpec, text_response,
    tool_response,
};

/// Tool rounds per turn: the model calls `read` this many times, one call per response, then
/// answers.
pub const TOOL_ROUNDS: usize = 4;

/// Turns per session before the loop starts a fresh one, so contexts stay realistic and
/// bounded.
pub const TURNS_PER_SESSION: usize = 20;

/// What `read` returns: about 200 bytes.
const NOTES: &str = "# Notes\n\n- The user prefers short answers, in English, with code in fenced \
     blocks.\n- The project is Seed, a durable agent runtime over SQLite.\n- Open question: how \
     often to compact the context.\n";

/// The scripted model's answer to `request`: a call of `read` while the turn has had fewer
/// than [`TOOL_ROUNDS`] responses, then the text "done". The call's id is unique within the
/// session: the turn's input text and the request's message count.
pub fn respond(request: &Request) -> ScriptedStep {
    let last_user = request
        .messages
        .iter()
        .rposition(|message| matches!(message.as_ref(), Message::User(_)));
    let (turn, n_responses) = match last_user {
        Some(idx) => {
            let turn = match request.messages[idx].as_ref() {
                Message::User(input) => input.text.replace(' ', "-"),
                _ => String::new(),
            };
            let n_responses = request.messages[idx + 1..]
                .iter()
                .filter(|message| matches!(message.as_ref(), Message::Assistant(_)))
                .count();
            (turn, n_responses)
        }
        None => (String::new(), 0),
    };
    if n_responses >= TOOL_ROUNDS {
        return ScriptedStep::Respond(text_response("done"));
    }
    let call = ToolCall {
        id: format!("call-{turn}-{}", request.messages.len()),
        name: "read".to_owned(),
        arguments: serde_json::json!({"path": "~/memory/notes.md"}),
    };
    ScriptedStep::Respond(tool_response("", vec![call]))
}

/// The scripted model of the loop.
pub fn provider() -> ScriptedProvider {
    ScriptedProvider::from_fn(|request, _| respond(request)).without_recording()
}

/// A `read` that answers at once with a short note; safe to repeat.
#[derive(Debug)]
struct Read;

impl Tool for Read {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "read".to_owned(),
            description: "Reads a file of the agent's memory.".to_owned(),
            parameters: serde_json::json!({
                "type": "object",
                "properties": {"path": {"type": "string"}},
                "required": ["path"],
            }),
        }
    }

    fn safe_to_repeat(&self) -> bool {
        true
    }

    fn call<'a>(&'a self, _call: &'a ToolCall) -> BoxFuture<'a, ToolOutput> {
        Box::pin(futures::future::ready(ToolOutput::ok(NOTES)))
    }
}

/// The loop's tools: `read`.
pub fn tools() -> ToolSet {
    ToolSet::new().with(Arc::new(Read))
}

/// Opens a harness over `fs` and runs [`TURNS_PER_SESSION`] turns, numbered from
/// `first_turn`, each of which must be answered. Returns the entries committed.
pub async fn run_session<F: DurableFs>(fs: F, first_turn: usize) -> anyhow::Result<usize> {
    let mut harness = Harness::open(
        fs,
        provider(),
        tools(),
        HarnessConfig::new("scripted", "You are a bench."),
    )
    .await?;
    let n_entries_before = harness.state().entries.len();
    for n in first_turn..first_turn + TURNS_PER_SESSION {
        let outcome = harness
            .run_turn(TurnRequest::new(format!("req-{n}"), format!("turn {n}")))
            .await?;
        if !matches!(outcome, TurnOutcome::Answered { .. }) {
            bail!("turn {n} was not answered: {outcome:?}");
        }
    }
    Ok(harness.state().entries.len() - n_entries_before)
}

/// A `DurableFs` that counts the commits made through it and the time spent waiting for them:
/// what the bench reports under `SEED_BENCH_VERBOSE` to split a step's cost between the
/// harness and the store.
#[derive(Debug)]
pub struct TimedFs<F> {
    inner: F,
    stats: Arc<CommitStats>,
}

/// Commits made through a [`TimedFs`], shared by the ones that report to it.
#[derive(Debug, Default)]
pub struct CommitStats {
    n_commits: AtomicU64,
    nanos: AtomicU64,
}

impl CommitStats {
    pub fn n_commits(&self) -> u64 {
        self.n_commits.load(Ordering::Relaxed)
    }

    /// The time spent waiting for commits, in total.
    pub fn waited(&self) -> Duration {
        Duration::from_nanos(self.nanos.load(Ordering::Relaxed))
    }
}

impl<F> TimedFs<F> {
    pub fn new(inner: F, stats: Arc<CommitStats>) -> Self {
        TimedFs { inner, stats }
    }
}

impl<F: DurableFs> DurableFs for TimedFs<F> {
    type Error = F::Error;

    async fn read(&self, file: FileName) -> Result<Vec<String>, F::Error> {
        self.inner.read(file).await
    }

    async fn open_lines(&self) -> Result<seed_durable::OpenLines, F::Error> {
        self.inner.open_lines().await
    }

    async fn keep(&self, kept: &seed_durable::Kept) -> Result<(), F::Error> {
        self.inner.keep(kept).await
    }

    async fn commit(&self, batch: Vec<Append>) -> Result<(), F::Error> {
        let started = Instant::now();
        let outcome = self.inner.commit(batch).await;
        let nanos = u64::try_from(started.elapsed().as_nanos()).unwrap_or(u64::MAX);
        self.stats.nanos.fetch_add(nanos, Ordering::Relaxed);
        self.stats.n_commits.fetch_add(1, Ordering::Relaxed);
        outcome
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use seed_durable::MemoryFs;
    use seed_providers::{AssistantMessage, ToolResultMessage, UserMessage};

    fn request(messages: Vec<Message>) -> Request {
        Request {
            reasoning: None,
            model: "scripted".to_owned(),
            system_prompt: String::new(),
            messages: messages.into_iter().map(std::sync::Arc::new).collect(),
            tools: std::sync::Arc::from(Vec::new()),
            session_id: None,
        }
    }

    fn answer(step: ScriptedStep) -> AssistantMessage {
        match step {
            ScriptedStep::Respond(message) => message,
            other => panic!("not a response: {other:?}"),
        }
    }

    #[test]
    fn the_model_reads_for_some_rounds_then_answers_with_unique_call_ids() {
        let mut messages = vec![
            Message::User(UserMessage::new("turn 0".to_owned())),
            Message::Assistant(text_response("done")),
            Message::User(UserMessage::new("turn 1".to_owned())),
        ];
        let mut ids = Vec::new();
        for _ in 0..TOOL_ROUNDS {
            let message = answer(respond(&request(messages.clone())));
            let call = message.tool_calls()[0].clone();
            assert_eq!(call.name, "read");
            ids.push(call.id.clone());
            messages.push(Message::Assistant(message));
            messages.push(Message::ToolResult(ToolResultMessage {
                tool_call_id: call.id,
                tool_name: call.name,
                content: NOTES.to_owned(),
                is_error: false,
                images: Vec::new(),
            }));
        }
        assert_eq!(answer(respond(&request(messages))).text(), "done");
        ids.sort();
        ids.dedup();
        assert_eq!(ids.len(), TOOL_ROUNDS);
        assert!(ids[0].starts_with("call-turn-1-"), "{ids:?}");
    }

    #[test]
    fn a_session_commits_every_step() {
        let stats = Arc::new(CommitStats::default());
        let memory = MemoryFs::new();
        let fs = TimedFs::new(memory.clone(), Arc::clone(&stats));
        let n_entries = futures::executor::block_on(run_session(fs, 0)).expect("the session runs");
        // Per turn: the input, TOOL_ROUNDS calls and their results, the answer; plus the system
        // entry once.
        assert_eq!(n_entries, 1 + TURNS_PER_SESSION * (2 + 2 * TOOL_ROUNDS));
        let stored = futures::executor::block_on(memory.read(FileName::Entries)).expect("reads");
        assert_eq!(stored.len(), n_entries);
        // At least one commit per turn, and every commit was counted.
        assert!(stats.n_commits() >= TURNS_PER_SESSION as u64, "{stats:?}");
    }
}
