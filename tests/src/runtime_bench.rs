//! The agent-loop workload the `runtime` bench suite drives through the whole runtime (actors,
//! queue, store), so its figures compare with other agent runtimes.
//!
//! A turn is a user message (~100 bytes), a model response with two tool calls (~70 bytes of
//! JSON arguments each), two tool results (~200 bytes each) and a final answer (~500 bytes): five
//! records, each a step, each committed before the next is produced. The model
//! ([`provider`]) and the verb ([`Lookup`]) answer at once.
//!
//! What is measured (the rows are named in `src/bin/bench/main.rs`):
//! - [`steps_rate`]: sessions each looping `send_message_watched` → `RunWatch::ended`, all
//!   concurrently; steps/s = 5 × turns answered / the time from the first message to the last
//!   answer.
//! - [`idle_memory`]: resident memory (VmRSS) grown by storing idle sessions (the session and
//!   one user message each, no runs) and starting a runtime over them, per session.
//! - [`active_memory`]: resident memory grown while sessions each have a turn in flight (the
//!   model streams a few words and then hangs), per session.
//! - [`boot_sweep_time`]: the boot sweep over runs another boot left `running`, leases held.
//!
//! The memory figures are conservative: the growth includes what the process keeps after the
//! setup (SQLite's page caches warming up, the allocator's high-water mark), spread over the
//! sessions, so the cost of a session is at most the figure.

mod memory;
mod sweep;

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use futures::StreamExt;
use futures::future::BoxFuture;
use seed_actors::{Runtime, RuntimeSettings, Verb, VerbContext, VerbOutput};
use seed_durable::{DurableFs, FileName};
use seed_events::{AccountId, EventRole, NewEvent, RunStatus, SessionId};
use seed_providers::{
    Message, Provider, Request, ScriptedProvider, ScriptedStep, ToolCall, text_response,
    tool_response,
};
use seed_store::{Config, NewSession, Store};

pub use memory::{MemoryMeasurement, active_memory, idle_memory, rss_kib};
pub use sweep::{SweepMeasurement, boot_sweep_time};

/// Records of a turn: the input, the response with two calls, two results, the answer.
pub const STEPS_PER_TURN: usize = 5;

/// What a turn of [`steps_rate`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TurnShape {
    /// The agent loop of the module docs: [`STEPS_PER_TURN`] records.
    AgentLoop,
    /// A message and its answer, two records: the turn of the `service` suite (whose scripted
    /// model answers at once), so that the two suites compare step for step and the
    /// difference is what the API costs.
    Answer,
}

impl TurnShape {
    /// The records (steps) of one turn.
    pub fn steps(self) -> usize {
        match self {
            TurnShape::AgentLoop => STEPS_PER_TURN,
            TurnShape::Answer => 2,
        }
    }
}

/// Turns a session takes before its lane moves on to a fresh one, so that contexts stay
/// realistic and bounded (each run reads its session's whole log and store).
pub const TURNS_PER_SESSION: usize = 20;

/// Store writes in flight at once while a benchmark's data is written.
const SETUP_CONCURRENCY: usize = 512;

/// The longest a wait for the runtime may take before the bench calls it a hang.
const HANG_GUARD: Duration = Duration::from_secs(120);

/// What [`Lookup`] returns: about 200 bytes.
pub const TOOL_RESULT: &str = "# notes/project.md\n\n- Seed is a durable agent runtime over \
    SQLite.\n- Every step is committed before the next one starts.\n- Open question: how often \
    to compact long contexts; see the design notes.\n";

/// A verb that answers at once with [`TOOL_RESULT`]; safe to repeat.
#[derive(Debug)]
pub struct Lookup;

impl Verb for Lookup {
    fn name(&self) -> &'static str {
        "lookup"
    }

    fn description(&self) -> &'static str {
        "Looks a section of a note up and returns it."
    }

    fn parameters(&self) -> serde_json::Value {
        serde_json::json!({
            "type": "object",
            "properties": {"path": {"type": "string"}, "section": {"type": "string"}},
            "required": ["path"],
        })
    }

    fn safe_to_repeat(&self) -> bool {
        true
    }

    fn call(&self, _: VerbContext, _: serde_json::Value) -> BoxFuture<'static, VerbOutput> {
        Box::pin(futures::future::ready(VerbOutput::ok(TOOL_RESULT)))
    }
}

/// The arguments of a turn's `k`-th call: about 70 bytes of JSON.
pub fn call_arguments(k: usize) -> serde_json::Value {
    serde_json::json!({
        "path": format!("notes/project-seed/plan-{k}.md"),
        "section": "open questions",
    })
}

/// The final answer: 500 bytes of plain sentences.
pub fn answer_text() -> String {
    let sentence = "The plan holds: every step is committed before the next, the runtime \
        groups the commits of many sessions, and nothing is lost in a crash. ";
    let mut answer = sentence.repeat(500_usize.div_ceil(sentence.len()));
    answer.truncate(499);
    answer.push('.');
    answer
}

/// The user message of turn `n`: about 100 bytes.
pub fn user_message(n: usize) -> String {
    format!(
        "Turn {n:05}: please look up the open questions in both plan notes and sum them up in a few lines."
    )
}

/// The model's answer to `request`: a turn's first request (its newest message is not a tool
/// result) gets two calls of `lookup`, the second one the answer. Call ids are unique within
/// the session: two per answered turn, numbered by the responses before them.
pub fn respond(request: &Request) -> ScriptedStep {
    let after_results = matches!(
        request.messages.last().map(|message| message.as_ref()),
        Some(Message::ToolResult(_))
    );
    if after_results {
        return ScriptedStep::Respond(text_response(&answer_text()));
    }
    let n_responses = request
        .messages
        .iter()
        .filter(|message| matches!(message.as_ref(), Message::Assistant(_)))
        .count();
    let calls = (0..2)
        .map(|k| ToolCall {
            id: format!("call-{n_responses}-{k}"),
            name: "lookup".to_owned(),
            arguments: call_arguments(k),
        })
        .collect();
    ScriptedStep::Respond(tool_response("", calls))
}

/// The model of the workload, keeping no copy of the requests.
pub fn provider() -> ScriptedProvider {
    ScriptedProvider::from_fn(|request, _| respond(request)).without_recording()
}

/// The model of a turn of `shape`: [`provider`] for the agent loop; for a bare answer, one
/// that answers every request with [`answer_text`] at once.
pub fn provider_for(shape: TurnShape) -> ScriptedProvider {
    match shape {
        TurnShape::AgentLoop => provider(),
        TurnShape::Answer => {
            ScriptedProvider::from_fn(|_, _| ScriptedStep::Respond(text_response(&answer_text())))
                .without_recording()
        }
    }
}

/// The account every benchmark session belongs to.
fn account() -> AccountId {
    AccountId::from_u128(1)
}

pub(crate) fn session(idx: usize) -> SessionId {
    SessionId::from_u128(idx as u128 + 1)
}

/// Milliseconds, one more at every reading, as the actor tests' clock.
pub(crate) fn clock() -> Arc<dyn Fn() -> i64 + Send + Sync> {
    let now = Arc::new(AtomicI64::new(1_800_000_000_000));
    Arc::new(move || now.fetch_add(1, Ordering::Relaxed))
}

/// Every session's turn in flight at once; one account, with no share of the slots: what is
/// measured is the runtime's rate, not how slots are shared between accounts.
pub(crate) fn settings(n_sessions: usize) -> RuntimeSettings {
    RuntimeSettings {
        interactive_runs_max: n_sessions.max(1024),
        account_runs_max: usize::MAX,
        traces: TRACES.get().cloned().unwrap_or_default(),
        ..RuntimeSettings::default()
    }
}

/// The traces every runtime this process starts from now on exports (`runtime 100 sessions
/// traced`): set once, by the last row that runs, since the exporter's subscriber is the
/// process's for good.
static TRACES: std::sync::OnceLock<seed_actors::traces::Traces> = std::sync::OnceLock::new();

/// Makes every runtime started from now on export its spans through `traces`.
pub fn trace_runs(traces: seed_actors::traces::Traces) {
    let _ = TRACES.set(traces);
}

async fn start_runtime(
    store: &Store,
    provider: Arc<dyn Provider>,
    n_sessions: usize,
    boot_id: &str,
) -> anyhow::Result<Runtime> {
    let (runtime, _) = Runtime::start(
        store.clone(),
        provider,
        vec![Arc::new(Lookup)],
        settings(n_sessions),
        boot_id.to_owned(),
        clock(),
    )
    .await?;
    Ok(runtime)
}

/// Opens a fresh store at `config.path` (the caller removed any old one) with the account and
/// `n_sessions` sessions; with `message`, each session's log gets one user message.
pub(crate) async fn store_with_sessions(
    config: &Config,
    n_sessions: usize,
    message: bool,
) -> anyhow::Result<Store> {
    let store = Store::open(config.clone())?;
    store.create_account(account(), vec![0], 0).await?;
    let mut writes = futures::stream::iter(0..n_sessions)
        .map(|idx| {
            let store = store.clone();
            async move {
                store
                    .create_session(NewSession::new(session(idx), account(), 0))
                    .await?;
                if message {
                    let event = NewEvent::message(
                        EventRole::User,
                        "user",
                        serde_json::json!({ "text": user_message(idx) }),
                        0,
                    );
                    store.append_events(session(idx), vec![event]).await?;
                }
                anyhow::Ok(())
            }
        })
        .buffer_unordered(SETUP_CONCURRENCY);
    while let Some(written) = writes.next().await {
        written?;
    }
    drop(writes);
    Ok(store)
}

/// CPU time (user and system) of each thread of this process, by thread name, summed over
/// threads of the same name; from `/proc/self/task/*/stat`, in clock ticks of 10 ms.
pub fn thread_cpu() -> anyhow::Result<std::collections::BTreeMap<String, Duration>> {
    thread_cpu_of("self")
}

/// [`thread_cpu`] of the process `pid` (`"self"`: this one).
pub fn thread_cpu_of(pid: &str) -> anyhow::Result<std::collections::BTreeMap<String, Duration>> {
    let mut cpu = std::collections::BTreeMap::new();
    let tasks = format!("/proc/{pid}/task");
    for task in std::fs::read_dir(&tasks).with_context(|| format!("listing {tasks}"))? {
        let stat = match std::fs::read_to_string(task?.path().join("stat")) {
            Ok(stat) => stat,
            // The thread ended meanwhile.
            Err(_) => continue,
        };
        // `pid (comm) state ppid ...`: utime and stime are the 14th and 15th fields.
        let (Some(open), Some(close)) = (stat.find('('), stat.rfind(')')) else {
            continue;
        };
        let name = stat[open + 1..close].to_owned();
        let fields: Vec<&str> = stat[close + 1..].split_whitespace().collect();
        let ticks: u64 = fields
            .get(11..13)
            .into_iter()
            .flatten()
            .filter_map(|field| field.parse::<u64>().ok())
            .sum();
        *cpu.entry(name).or_insert(Duration::ZERO) += Duration::from_millis(ticks * 10);
    }
    Ok(cpu)
}

/// What one run of [`steps_rate`] saw.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct StepsMeasurement {
    pub n_steps: usize,
    pub elapsed: Duration,
    /// Commits and jobs of the store's writer during the timed part.
    pub n_commits: u64,
    pub n_jobs: u64,
    /// The writer's waits on the database server's answers (PostgreSQL; 0 on SQLite).
    #[serde(default)]
    pub n_round_trips: u64,
    /// The readers' waits on the database server's answers (PostgreSQL; 0 on SQLite).
    #[serde(default)]
    pub n_reader_round_trips: u64,
    /// Notices the node's bus bridge sent the other nodes, and the batches (statements) that
    /// carried them (0 without a bridge).
    #[serde(default)]
    pub n_notices: u64,
    #[serde(default)]
    pub n_notice_batches: u64,
    /// CPU time of each thread (by name) during the timed part.
    pub thread_cpu: Vec<(String, Duration)>,
}

impl StepsMeasurement {
    pub fn rate(&self) -> f64 {
        self.n_steps as f64 / self.elapsed.as_secs_f64()
    }
}

/// `n_lanes` lanes run `turns_per_lane` turns of `shape` each, all concurrently, in a fresh
/// store at `config.path` (the caller removed any old one). A lane takes [`TURNS_PER_SESSION`]
/// turns in a session, then goes on in a fresh one (created beforehand). Every run must
/// succeed.
pub fn steps_rate(
    config: &Config,
    n_lanes: usize,
    turns_per_lane: usize,
    shape: TurnShape,
) -> anyhow::Result<StepsMeasurement> {
    let share = NodeShare {
        boot_id: "bench".to_owned(),
        first_lane: 0,
        set_up: true,
        bridged: false,
    };
    steps_rate_on(
        config,
        n_lanes,
        turns_per_lane,
        shape,
        &share,
        || Ok(()),
        |_| Box::pin(async { Ok(()) }),
    )
}

/// One node's share of a workload that several processes run on one database: its boot id,
/// its lanes (from `first_lane` on), whether it sets the database up (the account and every
/// lane's sessions) or finds it set up, and whether it joins the other nodes' bus over the
/// database as `seed serve` does (`seed_server::bus_bridge`): then a run of this node's lanes
/// that another node claimed tells its end here at once, and another node's queued run wakes
/// this node's queue, where without it the lane hears of the end only at its next look, a
/// renewal's interval (5 s) later.
#[derive(Debug, Clone)]
pub struct NodeShare {
    pub boot_id: String,
    pub first_lane: usize,
    pub set_up: bool,
    pub bridged: bool,
}

/// The sessions every lane of `n_lanes` lanes of `turns_per_lane` turns uses, made on the
/// database `config` names, for processes that then share it ([`steps_rate_on`]).
pub fn set_up_lanes(config: &Config, n_lanes: usize, turns_per_lane: usize) -> anyhow::Result<()> {
    let sessions_per_lane = turns_per_lane.div_ceil(TURNS_PER_SESSION).max(1);
    actix::System::new().block_on(async {
        store_with_sessions(config, n_lanes * sessions_per_lane, false).await?;
        anyhow::Ok(())
    })
}

/// [`steps_rate`] of one node's share: `ready` is called once the runtime runs, and the timed
/// part starts when it returns (a node waits there for the others); `measured` is given the
/// measurement, and the runtime stops once it resolves. A node waits there until every other
/// node's lanes are done: until then it may hold runs of their sessions (another node's queued
/// run is anyone's to claim), and a node that stopped with them would leave them to the sweep
/// after its lease lapsed (30 s).
pub fn steps_rate_on(
    config: &Config,
    n_lanes: usize,
    turns_per_lane: usize,
    shape: TurnShape,
    share: &NodeShare,
    ready: impl FnOnce() -> anyhow::Result<()>,
    measured: impl FnOnce(
        &StepsMeasurement,
    ) -> futures::future::LocalBoxFuture<'static, anyhow::Result<()>>,
) -> anyhow::Result<StepsMeasurement> {
    let sessions_per_lane = turns_per_lane.div_ceil(TURNS_PER_SESSION).max(1);
    actix::System::new().block_on(async {
        let store = if share.set_up {
            store_with_sessions(config, n_lanes * sessions_per_lane, false).await?
        } else {
            Store::open(config.clone())?
        };
        let provider = Arc::new(provider_for(shape));
        let runtime = start_runtime(&store, provider, n_lanes, &share.boot_id).await?;
        // Held until the measurement ends.
        let _bridge = match (&config.database, share.bridged) {
            (Some(database), true) => Some(
                seed_server::bus_bridge::start(
                    runtime.publisher().clone(),
                    &share.boot_id,
                    &database.0,
                    {
                        let runtime = runtime.clone();
                        move || runtime.wake()
                    },
                )
                .await?,
            ),
            _ => None,
        };
        ready()?;
        let stats = store.writer_stats();
        let commits_before = stats.n_commits.load(Ordering::Relaxed);
        let jobs_before = stats.n_jobs_committed.load(Ordering::Relaxed);
        let round_trips_before = stats.n_round_trips.load(Ordering::Relaxed);
        let reader_round_trips_before = store.reader_round_trips();
        let notices_sent = || _bridge.as_ref().map_or((0, 0), |bridge| bridge.sent());
        let notices_before = notices_sent();
        let cpu_before = thread_cpu()?;
        let started = Instant::now();
        let first_lane = share.first_lane;
        let lanes = (first_lane..first_lane + n_lanes).map(|lane| {
            let runtime = runtime.clone();
            async move {
                for turn in 0..turns_per_lane {
                    let session_id = session(lane * sessions_per_lane + turn / TURNS_PER_SESSION);
                    let (_, watch) = runtime
                        .send_message_watched(session_id, &user_message(turn))
                        .await?;
                    let run = watch.ended().await?;
                    if run.status != RunStatus::Succeeded {
                        bail!("run {} of session {session_id} ended {run:?}", run.id);
                    }
                }
                anyhow::Ok(turns_per_lane)
            }
        });
        let lanes = futures::future::join_all(lanes);
        let outcomes = actix::clock::timeout(HANG_GUARD, lanes)
            .await
            .map_err(|_| anyhow::anyhow!("{n_lanes} lanes did not finish within {HANG_GUARD:?}"))?;
        let elapsed = started.elapsed();
        let thread_cpu = thread_cpu()?
            .into_iter()
            .map(|(name, after)| {
                let before = cpu_before.get(&name).copied().unwrap_or_default();
                (name, after.saturating_sub(before))
            })
            .collect();
        let n_commits = stats.n_commits.load(Ordering::Relaxed) - commits_before;
        let n_jobs = stats.n_jobs_committed.load(Ordering::Relaxed) - jobs_before;
        let n_round_trips = stats.n_round_trips.load(Ordering::Relaxed) - round_trips_before;
        let n_reader_round_trips = store.reader_round_trips() - reader_round_trips_before;
        let notices_after = notices_sent();
        let mut n_turns = 0;
        for outcome in outcomes {
            n_turns += outcome?;
        }
        // Every step landed: the sessions' stores hold the records of each turn (besides the
        // reset and the system entry each session starts with).
        let mut n_records = 0;
        for idx in first_lane * sessions_per_lane..(first_lane + n_lanes) * sessions_per_lane {
            let entries = store
                .session_files(session(idx))
                .read(FileName::Entries)
                .await?;
            for line in entries {
                let entry: serde_json::Value = serde_json::from_str(&line)?;
                if let Some("pi.user" | "pi.assistant" | "pi.tool-result") =
                    entry.get("type").and_then(|kind| kind.as_str())
                {
                    n_records += 1;
                }
            }
        }
        if n_records != shape.steps() * n_turns {
            bail!("{n_turns} turns answered and {n_records} records stored");
        }
        let measurement = StepsMeasurement {
            n_steps: shape.steps() * n_turns,
            elapsed,
            n_commits,
            n_jobs,
            n_round_trips,
            n_reader_round_trips,
            n_notices: notices_after.0 - notices_before.0,
            n_notice_batches: notices_after.1 - notices_before.1,
            thread_cpu,
        };
        // The runtime goes on until `measured` returns: it may be running another node's
        // runs, which that node's lanes wait for.
        measured(&measurement).await?;
        Ok(measurement)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use seed_providers::{ToolResultMessage, UserMessage};

    fn request(messages: Vec<Message>) -> Request {
        Request {
            reasoning: None,
            model: "scripted".to_owned(),
            system_prompt: String::new(),
            messages: messages.into_iter().map(Arc::new).collect(),
            tools: Arc::from(Vec::new()),
            session_id: None,
        }
    }

    fn response(step: ScriptedStep) -> seed_providers::AssistantMessage {
        match step {
            ScriptedStep::Respond(message) => message,
            other => panic!("not a response: {other:?}"),
        }
    }

    #[test]
    fn the_records_have_the_sizes_of_the_workload() {
        assert!(
            (90..=110).contains(&user_message(12).len()),
            "{}",
            user_message(12).len()
        );
        for k in 0..2 {
            let arguments = call_arguments(k).to_string().len();
            assert!((60..=80).contains(&arguments), "{arguments}");
        }
        assert!(
            (190..=210).contains(&TOOL_RESULT.len()),
            "{}",
            TOOL_RESULT.len()
        );
        assert!(
            (450..=500).contains(&answer_text().len()),
            "{}",
            answer_text().len()
        );
    }

    #[test]
    fn a_turn_is_two_calls_then_the_answer_with_call_ids_unique_in_the_session() {
        let mut messages = vec![
            Message::User(UserMessage::new(user_message(0))),
            Message::User(UserMessage::new(
                "<current_time>now</current_time>".to_owned(),
            )),
        ];
        let mut ids = Vec::new();
        for turn in 0..3 {
            if turn > 0 {
                messages.push(Message::User(UserMessage::new(user_message(turn))));
            }
            let calls = response(respond(&request(messages.clone())));
            assert_eq!(calls.tool_calls().len(), 2);
            messages.push(Message::Assistant(calls.clone()));
            for call in calls.tool_calls() {
                ids.push(call.id.clone());
                messages.push(Message::ToolResult(ToolResultMessage {
                    tool_call_id: call.id.clone(),
                    tool_name: call.name.clone(),
                    content: TOOL_RESULT.to_owned(),
                    is_error: false,
                    images: Vec::new(),
                }));
            }
            let answer = response(respond(&request(messages.clone())));
            assert_eq!(answer.text(), answer_text());
            messages.push(Message::Assistant(answer));
        }
        let n_ids = ids.len();
        ids.sort();
        ids.dedup();
        assert_eq!(ids.len(), n_ids, "{ids:?}");
    }

    #[test]
    fn the_workload_runs_through_the_runtime_and_the_sweep_requeues_what_a_dead_boot_left()
    -> anyhow::Result<()> {
        let dir = tempfile::tempdir()?;
        let measured = steps_rate(
            &Config::new(dir.path().join("steps.db")),
            3,
            22,
            TurnShape::AgentLoop,
        )?;
        assert_eq!(measured.n_steps, 3 * 22 * STEPS_PER_TURN);
        let measured = steps_rate(
            &Config::new(dir.path().join("answers.db")),
            3,
            22,
            TurnShape::Answer,
        )?;
        assert_eq!(measured.n_steps, 3 * 22 * 2);
        let swept = boot_sweep_time(&Config::new(dir.path().join("sweep.db")), 20)?;
        assert_eq!(swept.report.n_runs_requeued, 20);
        let active = active_memory(&Config::new(dir.path().join("active.db")), 4)?;
        assert_eq!(active.n_active, 4);
        Ok(())
    }
}
