//! Crash recovery with a real kill: a child process runs turns over a SQLite file and is killed
//! with SIGKILL at random moments, again and again; then a last child drains what is left.
//! Afterwards every run is terminal and succeeded, the log agrees with the store, no verb that is
//! not safe to repeat ran twice, and no committed model response was requested again.
//!
//! The child is this test binary run again (`SEED_KILL_CHILD` set), in the manner of sled's crash
//! tests. The scripted model and the unsafe verb write a journal line (one `write` each, which a
//! SIGKILL cannot tear) so the parent can check what happened across processes. The seed of the
//! kill timings is printed; `SEED_KILL_SEED` replays it.

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::fs::OpenOptions;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use seed_actors::{Runtime, RuntimeSettings, Verb, VerbContext, VerbOutput};
use seed_durable::EntryBody;
use seed_events::{AccountId, EventRole, RunStatus, SessionId};
use seed_providers::{
    AssistantBlock, Message, Request, ScriptedProvider, ScriptedStep, ToolCall, text_response,
    tool_response,
};
use seed_store::{Config, NewSession, Store};

const N_SESSIONS: u128 = 6;
const N_KILLS: usize = 20;

fn session(idx: u128) -> SessionId {
    SessionId::from_u128(0x5e55_0000 + idx)
}

fn account() -> AccountId {
    AccountId::from_u128(0xacc)
}

/// An append-only journal shared by the model and the unsafe verb.
#[derive(Clone)]
struct Journal {
    file: Arc<Mutex<std::fs::File>>,
}

impl Journal {
    fn open(path: &Path) -> Journal {
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .expect("the journal opens");
        Journal {
            file: Arc::new(Mutex::new(file)),
        }
    }

    fn line(&self, line: &str) {
        let mut file = self.file.lock().unwrap_or_else(|p| p.into_inner());
        // One write per line: a kill leaves a line whole or absent.
        file.write_all(format!("{line}\n").as_bytes())
            .expect("the journal takes a line");
    }
}

/// Writes a note: a side effect that must never happen twice.
struct WriteNote {
    journal: Journal,
}

impl Verb for WriteNote {
    fn name(&self) -> &'static str {
        "write_note"
    }
    fn description(&self) -> &'static str {
        "Writes a note."
    }
    fn parameters(&self) -> serde_json::Value {
        serde_json::json!({"type": "object"})
    }
    fn safe_to_repeat(&self) -> bool {
        false
    }
    fn call(&self, context: VerbContext, _: serde_json::Value) -> BoxFuture<'static, VerbOutput> {
        let journal = self.journal.clone();
        Box::pin(async move {
            journal.line(&format!("exec {}", context.tool_call_id));
            VerbOutput::ok("noted")
        })
    }
}

/// Reads notes: safe to repeat.
struct ReadNotes;

impl Verb for ReadNotes {
    fn name(&self) -> &'static str {
        "read_notes"
    }
    fn description(&self) -> &'static str {
        "Reads the notes."
    }
    fn parameters(&self) -> serde_json::Value {
        serde_json::json!({"type": "object"})
    }
    fn safe_to_repeat(&self) -> bool {
        true
    }
    fn call(&self, _: VerbContext, _: serde_json::Value) -> BoxFuture<'static, VerbOutput> {
        Box::pin(async { VerbOutput::ok("no notes yet") })
    }
}

/// The input a request answers and how many responses followed it.
fn step_of(request: &Request) -> (String, usize) {
    let is_input = |m: &Message| matches!(m, Message::User(u) if u.text.starts_with("msg "));
    let input_idx = request
        .messages
        .iter()
        .rposition(|m| is_input(m))
        .unwrap_or(0);
    let input = match request.messages.get(input_idx).map(|m| m.as_ref()) {
        Some(Message::User(user)) => user.text.clone(),
        _ => String::new(),
    };
    let step = request.messages[input_idx..]
        .iter()
        .filter(|m| matches!(m.as_ref(), Message::Assistant(_)))
        .count();
    (input, step)
}

/// Each turn: a safe and an unsafe call, then the answer. Every response carries a fresh nonce,
/// journaled with the request, so the parent can tell which response was committed.
fn model(journal: Journal) -> ScriptedProvider {
    ScriptedProvider::from_fn(move |request, _| {
        let (input, step) = step_of(request);
        let session = request.session_id.clone().unwrap_or_default();
        let nonce = format!(
            "{}-{}",
            std::process::id(),
            seed_events::RunId::new_v7().0.simple()
        );
        journal.line(&format!(
            "req {session} {} {step} {nonce}",
            input.replace(' ', "_")
        ));
        if step == 0 {
            ScriptedStep::Respond(tool_response(
                "",
                vec![
                    ToolCall {
                        id: format!("read-{nonce}"),
                        name: "read_notes".to_owned(),
                        arguments: serde_json::json!({}),
                    },
                    ToolCall {
                        id: format!("write-{nonce}"),
                        name: "write_note".to_owned(),
                        arguments: serde_json::json!({}),
                    },
                ],
            ))
        } else {
            ScriptedStep::Respond(text_response(&format!("answer {input} {nonce}")))
        }
    })
}

/// The child: drives turns (or, with `drain`, finishes what is open) until killed or done.
async fn child(db: PathBuf, journal_path: PathBuf, drain: bool) -> anyhow::Result<()> {
    let store = Store::open(Config::new(&db))?;
    if store.get_account(account()).await?.is_none() {
        store.create_account(account(), vec![1], 0).await?;
    }
    for idx in 0..N_SESSIONS {
        if store.get_session(session(idx)).await?.is_none() {
            store
                .create_session(NewSession::new(session(idx), account(), 0))
                .await?;
        }
    }
    let journal = Journal::open(&journal_path);
    let started = Instant::now();
    let (runtime, _) = Runtime::start(
        store.clone(),
        Arc::new(model(journal.clone())),
        vec![Arc::new(WriteNote { journal }), Arc::new(ReadNotes)],
        RuntimeSettings::default(),
        format!("boot-{}", std::process::id()),
        Arc::new(move || started.elapsed().as_millis() as i64 + 1_800_000_000_000),
    )
    .await?;
    let drive = |idx: u128| {
        let runtime: Runtime = runtime.clone();
        async move {
            loop {
                let runs = runtime.store().list_session_runs(session(idx)).await?;
                let open: Vec<_> = runs.iter().filter(|r| !r.status.is_terminal()).collect();
                if open.is_empty() {
                    if drain {
                        return anyhow::Ok(());
                    }
                    let n_messages = runtime
                        .store()
                        .read_events(session(idx), 1, i64::MAX, usize::MAX)
                        .await?
                        .iter()
                        .filter(|e| e.kind == "message" && e.role == Some(EventRole::User))
                        .count();
                    let (_, run_id) = runtime
                        .send_message(session(idx), &format!("msg {}", n_messages + 1))
                        .await?;
                    runtime.wait_for_run(run_id).await?;
                } else {
                    for run in open {
                        runtime.wait_for_run(run.id).await?;
                    }
                }
            }
        }
    };
    let results = futures::future::join_all((0..N_SESSIONS).map(drive)).await;
    for result in results {
        result?;
    }
    Ok(())
}

/// When this binary runs as the child, this test is the child's whole life.
#[test]
fn kill_child_entry() {
    let (Some(db), Some(journal)) = (
        std::env::var_os("SEED_KILL_CHILD_DB"),
        std::env::var_os("SEED_KILL_CHILD_JOURNAL"),
    ) else {
        return;
    };
    let drain = std::env::var_os("SEED_KILL_CHILD_DRAIN").is_some();
    let outcome = actix::System::new().block_on(child(db.into(), journal.into(), drain));
    if let Err(error) = outcome {
        panic!("child failed: {error:#}");
    }
}

fn spawn_child(db: &Path, journal: &Path, drain: bool) -> std::process::Child {
    let mut command = Command::new(std::env::current_exe().expect("the test binary"));
    command
        .args([
            "--exact",
            "runtime_kill::kill_child_entry",
            "--nocapture",
            "--test-threads",
            "1",
        ])
        .env("SEED_KILL_CHILD_DB", db)
        .env("SEED_KILL_CHILD_JOURNAL", journal)
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    if drain {
        command.env("SEED_KILL_CHILD_DRAIN", "1");
    }
    command.spawn().expect("the child starts")
}

/// A tiny seeded generator for the kill timings.
fn next(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state
}

#[test]
fn sigkill_at_random_moments_loses_nothing_and_repeats_nothing() {
    if std::env::var_os("SEED_KILL_CHILD_DB").is_some() {
        return;
    }
    let seed = std::env::var("SEED_KILL_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(1, |d| d.as_nanos() as u64 | 1)
        });
    eprintln!("SEED_KILL_SEED={seed}");
    let mut rng = seed;
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("seed.db");
    let journal = dir.path().join("journal.txt");

    for _ in 0..N_KILLS {
        let mut child = spawn_child(&db, &journal, false);
        std::thread::sleep(Duration::from_millis(80 + next(&mut rng) % 400));
        if let Ok(Some(status)) = child.try_wait() {
            let mut stderr = String::new();
            if let Some(mut pipe) = child.stderr.take() {
                let _ = std::io::Read::read_to_string(&mut pipe, &mut stderr);
            }
            panic!("the child ended by itself ({status}): {stderr}");
        }
        child.kill().expect("SIGKILL");
        child.wait().expect("reaped");
    }
    let mut drain = spawn_child(&db, &journal, true);
    let status = drain.wait().expect("the drain ends");
    let mut stderr = String::new();
    if let Some(mut pipe) = drain.stderr.take() {
        let _ = std::io::Read::read_to_string(&mut pipe, &mut stderr);
    }
    assert!(status.success(), "the drain failed: {stderr}");

    actix::System::new().block_on(check(db, journal));
}

async fn check(db: PathBuf, journal: PathBuf) {
    let store = Store::open(Config::new(&db)).expect("the store opens");
    let lines = std::fs::read_to_string(&journal).expect("the journal");
    let mut execs: BTreeMap<String, usize> = BTreeMap::new();
    let mut requests: BTreeMap<(String, String, String), Vec<String>> = BTreeMap::new();
    for line in lines.lines() {
        let words: Vec<&str> = line.split(' ').collect();
        match words.as_slice() {
            ["exec", call] => *execs.entry((*call).to_owned()).or_default() += 1,
            ["req", session, input, step, nonce] => requests
                .entry((
                    (*session).to_owned(),
                    (*input).to_owned(),
                    (*step).to_owned(),
                ))
                .or_default()
                .push((*nonce).to_owned()),
            _ => panic!("a torn journal line: {line:?}"),
        }
    }
    for (call, count) in &execs {
        assert_eq!(*count, 1, "the unsafe verb ran {count} times for {call}");
    }

    let mut committed: BTreeSet<String> = BTreeSet::new();
    let mut n_runs = 0;
    for idx in 0..N_SESSIONS {
        let runs = store.list_session_runs(session(idx)).await.expect("runs");
        for run in &runs {
            assert_eq!(run.status, RunStatus::Succeeded, "{run:?}");
        }
        n_runs += runs.len();
        common::assert_log_agrees_with_store(&store, session(idx))
            .await
            .expect("the log agrees with the store");
        let state = common::store_state(&store, session(idx))
            .await
            .expect("store");
        for entry in &state.entries {
            if let EntryBody::Assistant { message, .. } = &entry.body {
                for block in &message.content {
                    let nonce = match block {
                        AssistantBlock::Text { text } => text.rsplit(' ').next().map(str::to_owned),
                        AssistantBlock::ToolCall(call) => {
                            call.id.split_once('-').map(|(_, n)| n.to_owned())
                        }
                        AssistantBlock::Thinking { .. }
                        | AssistantBlock::RedactedThinking { .. } => None,
                    };
                    committed.extend(nonce);
                }
            }
        }
    }
    assert!(
        n_runs >= N_SESSIONS as usize,
        "only {n_runs} runs: the children made no progress"
    );
    for (key, nonces) in &requests {
        let committed_here: Vec<usize> = nonces
            .iter()
            .enumerate()
            .filter(|(_, nonce)| committed.contains(*nonce))
            .map(|(idx, _)| idx)
            .collect();
        assert!(
            committed_here.len() <= 1,
            "{key:?}: two responses committed"
        );
        if let Some(&idx) = committed_here.first() {
            assert_eq!(
                idx,
                nonces.len() - 1,
                "{key:?}: a committed response was requested again ({nonces:?})"
            );
        }
    }
}
