//! A runtime over a real SQLite file and the scripted model, for the actor tests.

#![allow(dead_code)]

pub mod continuing;

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

use futures::future::BoxFuture;
use seed_actors::{Runtime, RuntimeSettings, Verb, VerbContext, VerbOutput, parse_arguments};
use seed_durable::{FileName, StoreState};
use seed_events::{AccountId, SessionEvent, SessionId};
use seed_projections::store_to_log::log_store_disagreements;
use seed_providers::{
    Message, Provider, Request, ScriptedProvider, ScriptedStep, ToolCall, text_response,
    tool_response,
};
use seed_store::{Config, NewSession, Store};

pub fn account() -> AccountId {
    AccountId::from_u128(0xacc)
}

pub fn session(idx: u128) -> SessionId {
    SessionId::from_u128(0x5e55_0000 + idx)
}

/// A verb that echoes its `text` argument; safe to repeat.
pub struct Echo;

#[derive(serde::Deserialize)]
struct EchoArgs {
    text: String,
}

impl Verb for Echo {
    fn name(&self) -> &'static str {
        "echo"
    }
    fn description(&self) -> &'static str {
        "Says the text back."
    }
    fn parameters(&self) -> serde_json::Value {
        serde_json::json!({"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]})
    }
    fn safe_to_repeat(&self) -> bool {
        true
    }
    fn call(&self, _: VerbContext, arguments: serde_json::Value) -> BoxFuture<'static, VerbOutput> {
        Box::pin(async move {
            match parse_arguments::<EchoArgs>("echo", arguments) {
                Ok(args) => VerbOutput::ok(format!("echo: {}", args.text)),
                Err(error) => error,
            }
        })
    }
}

/// Each turn: one echo call with the input's text, then "answer: <input>".
pub fn echo_then_answer() -> ScriptedProvider {
    ScriptedProvider::from_fn(|request: &Request, _| {
        let last_user = request
            .messages
            .iter()
            .rposition(|m| matches!(m.as_ref(), Message::User(u) if !u.text.starts_with('<')))
            .unwrap_or(0);
        let Message::User(input) = request.messages[last_user].as_ref() else {
            unreachable!()
        };
        let answered = request.messages[last_user..]
            .iter()
            .any(|m| matches!(m.as_ref(), Message::Assistant(_)));
        if answered {
            ScriptedStep::Respond(text_response(&format!("answer: {}", input.text)))
        } else {
            ScriptedStep::Respond(tool_response(
                "",
                vec![ToolCall {
                    id: format!("echo-{}", request.messages.len()),
                    name: "echo".to_owned(),
                    arguments: serde_json::json!({ "text": input.text }),
                }],
            ))
        }
    })
}

pub struct Fixture {
    pub dir: tempfile::TempDir,
    pub store: Store,
}

impl Fixture {
    pub async fn new(n_sessions: u128) -> anyhow::Result<Fixture> {
        let dir = tempfile::tempdir()?;
        let store = Store::open(Config::new(dir.path().join("seed.db")))?;
        store.create_account(account(), vec![1], 0).await?;
        for idx in 0..n_sessions {
            store
                .create_session(NewSession::new(session(idx), account(), 0))
                .await?;
        }
        Ok(Fixture { dir, store })
    }

    pub async fn start(
        &self,
        provider: impl Provider + 'static,
        boot_id: &str,
    ) -> anyhow::Result<Runtime> {
        self.start_with(provider, RuntimeSettings::default(), boot_id)
            .await
    }

    /// [`Fixture::start`] with `settings`.
    pub async fn start_with(
        &self,
        provider: impl Provider + 'static,
        settings: RuntimeSettings,
        boot_id: &str,
    ) -> anyhow::Result<Runtime> {
        let (runtime, _) = start_runtime_with(
            self.store.clone(),
            Arc::new(provider),
            vec![Arc::new(Echo)],
            settings,
            boot_id,
        )
        .await?;
        Ok(runtime)
    }
}

/// The session's store, folded.
pub async fn store_state(store: &Store, session_id: SessionId) -> anyhow::Result<StoreState> {
    use seed_durable::DurableFs;
    let files = store.session_files(session_id);
    Ok(StoreState::fold(
        &files.read(FileName::Entries).await?,
        &files.read(FileName::Documents).await?,
        &files.read(FileName::Tasks).await?,
    )?)
}

pub async fn log(store: &Store, session_id: SessionId) -> anyhow::Result<Vec<SessionEvent>> {
    Ok(store
        .read_events(session_id, 1, i64::MAX, usize::MAX)
        .await?)
}

/// Every entry the log shows is in it exactly once, and the log names no entry the store
/// lacks; seqs are 1..=N.
pub async fn assert_log_agrees_with_store(
    store: &Store,
    session_id: SessionId,
) -> anyhow::Result<()> {
    let state = store_state(store, session_id).await?;
    let log = log(store, session_id).await?;
    for (idx, event) in log.iter().enumerate() {
        assert_eq!(event.seq, idx as i64 + 1, "seqs have a gap");
    }
    assert_eq!(
        log_store_disagreements(&state.entries, &log),
        Vec::<String>::new(),
        "the log and the store disagree"
    );
    Ok(())
}

/// How long a test waits on an event before it calls the wait a hang and fails (a guard
/// against a bug hanging the suite, never the way a result is awaited).
pub const HANG_GUARD: std::time::Duration = std::time::Duration::from_secs(60);

/// `future`, or a failure naming `what` if it has not finished within [`HANG_GUARD`].
pub async fn within<T>(what: &str, future: impl std::future::Future<Output = T>) -> T {
    within_for(what, HANG_GUARD, future).await
}

/// `future`, or a failure naming `what` if it has not finished within `guard`.
pub async fn within_for<T>(
    what: &str,
    guard: std::time::Duration,
    future: impl std::future::Future<Output = T>,
) -> T {
    match actix::clock::timeout(guard, future).await {
        Ok(value) => value,
        Err(_) => panic!("{what} did not finish within {guard:?}"),
    }
}

/// The clock the fixture's runtimes use: milliseconds, one more at every reading.
pub fn test_clock() -> Arc<dyn Fn() -> i64 + Send + Sync> {
    let clock = Arc::new(AtomicI64::new(1_800_000_000_000));
    Arc::new(move || clock.fetch_add(1, Ordering::SeqCst))
}

/// Starts a runtime on `store` with any provider and verbs, returning the boot sweep's report.
pub async fn start_runtime(
    store: Store,
    provider: Arc<dyn Provider>,
    verbs: Vec<Arc<dyn Verb>>,
    boot_id: &str,
) -> anyhow::Result<(Runtime, seed_actors::BootReport)> {
    start_runtime_with(store, provider, verbs, RuntimeSettings::default(), boot_id).await
}

/// [`start_runtime`] with `settings`.
pub async fn start_runtime_with(
    store: Store,
    provider: Arc<dyn Provider>,
    verbs: Vec<Arc<dyn Verb>>,
    settings: RuntimeSettings,
    boot_id: &str,
) -> anyhow::Result<(Runtime, seed_actors::BootReport)> {
    Ok(Runtime::start(
        store,
        provider,
        verbs,
        settings,
        boot_id.to_owned(),
        test_clock(),
    )
    .await?)
}

/// Starts a runtime on `store` whose named crash points call `crash_points` (a crash-injection
/// test's "process").
pub async fn start_with_crash_points(
    store: Store,
    provider: Arc<dyn Provider>,
    verbs: Vec<Arc<dyn Verb>>,
    crash_points: seed_actors::CrashPoints,
    boot_id: &str,
) -> anyhow::Result<Runtime> {
    let settings = RuntimeSettings {
        crash_points,
        ..RuntimeSettings::default()
    };
    let (runtime, _) = start_runtime_with(store, provider, verbs, settings, boot_id).await?;
    Ok(runtime)
}

/// Crash points that stop the world the first time `point` is reached, and at every point
/// after that (nothing more is written); the receiver hears when it happened.
pub fn crash_once_at(
    point: &'static str,
) -> (
    seed_actors::CrashPoints,
    futures::channel::oneshot::Receiver<()>,
) {
    use std::sync::atomic::{AtomicBool, Ordering};
    let (fired, has_fired) = futures::channel::oneshot::channel();
    let fired = std::sync::Mutex::new(Some(fired));
    let crashed = AtomicBool::new(false);
    let crash_points = seed_actors::CrashPoints::new(move |reached| {
        if reached != point {
            return crashed.load(Ordering::SeqCst);
        }
        crashed.store(true, Ordering::SeqCst);
        if let Some(fired) = fired.lock().ok().and_then(|mut fired| fired.take()) {
            let _ = fired.send(());
        }
        true
    });
    (crash_points, has_fired)
}

/// Opens a store at `path` with the fixture's account and `n_sessions` sessions.
pub async fn open_store_with_sessions(
    path: &std::path::Path,
    n_sessions: u128,
) -> anyhow::Result<Store> {
    let store = Store::open(Config::new(path))?;
    store.create_account(account(), vec![1], 0).await?;
    for idx in 0..n_sessions {
        store
            .create_session(NewSession::new(session(idx), account(), 0))
            .await?;
    }
    Ok(store)
}

/// Waits for the first text delta of `run_id` on a bus subscription.
pub async fn first_text_delta(
    bus: &mut futures::channel::mpsc::UnboundedReceiver<seed_actors::Notification>,
    run_id: seed_events::RunId,
) -> String {
    use futures::StreamExt;
    within("the first text delta", async {
        loop {
            match bus.next().await {
                Some(seed_actors::Notification::TextDelta {
                    run_id: of, text, ..
                }) if of == run_id => return text,
                Some(_) => {}
                None => panic!("the bus closed before run {run_id} streamed any text"),
            }
        }
    })
    .await
}

/// Waits for `run_id`'s `RunFinished` on a bus subscription and returns its status.
pub async fn run_finished(
    bus: &mut futures::channel::mpsc::UnboundedReceiver<seed_actors::Notification>,
    run_id: seed_events::RunId,
) -> seed_events::RunStatus {
    use futures::StreamExt;
    within("the run's RunFinished notification", async {
        loop {
            match bus.next().await {
                Some(seed_actors::Notification::RunFinished {
                    run_id: of, status, ..
                }) if of == run_id => return status,
                Some(_) => {}
                None => panic!("the bus closed before run {run_id} finished"),
            }
        }
    })
    .await
}

/// Whether a request message is one of the per-turn state blocks (`<space>`, `<current_time>`,
/// ...), which are rendered into every request and never stored.
pub fn is_block(message: &Message) -> bool {
    matches!(message, Message::User(user) if user.text.starts_with('<'))
}

/// A request's conversation without the per-turn blocks.
pub fn conversation(request: &Request) -> Vec<&Message> {
    request
        .messages
        .iter()
        .map(|message| message.as_ref())
        .filter(|message| !is_block(message))
        .collect()
}

/// The request's input: its newest user message that is not a block.
pub fn input_of(request: &Request) -> Option<&str> {
    conversation(request)
        .into_iter()
        .rev()
        .find_map(|message| match message {
            Message::User(user) => Some(user.text.as_str()),
            _ => None,
        })
}

/// A compact view of a conversation, one string per message: `user: ..`, `assistant: ..`
/// (with `[call name]` per tool call), `result: ..`.
pub fn summary(messages: &[&Message]) -> Vec<String> {
    messages
        .iter()
        .map(|message| match message {
            Message::User(user) => format!("user: {}", user.text),
            Message::Assistant(assistant) => {
                let calls: String = assistant
                    .tool_calls()
                    .iter()
                    .map(|call| format!(" [call {}]", call.name))
                    .collect();
                format!("assistant: {}{calls}", assistant.text())
            }
            Message::ToolResult(result) => format!("result: {}", result.content),
        })
        .collect()
}

/// The time verb tests call at.
pub const VERB_NOW_MS: i64 = 1_800_000_000_000;

/// A verb call's context: run 7's call "call-1" in `session_id` of the test account.
pub fn verb_context(store: &Store, session_id: SessionId) -> seed_actors::VerbContext {
    seed_actors::VerbContext {
        store: store.clone(),
        account_id: account(),
        session_id,
        run_id: seed_events::RunId::from_u128(0x7u128),
        tool_call_id: "call-1".to_owned(),
        now_ms: VERB_NOW_MS,
        stop: Default::default(),
        successions: None,
        traces: Default::default(),
        call_span: None,
    }
}

/// Runs `body` as its own "process": a new actix system on a thread of its own, dropped (with
/// everything it runs) when `body` returns.
pub fn in_process<T: Send + 'static>(
    body: impl FnOnce() -> BoxFuture<'static, anyhow::Result<T>> + Send + 'static,
) -> anyhow::Result<T> {
    std::thread::spawn(move || {
        let system = actix::System::new();
        let result = system.block_on(body());
        // The process dies here: nothing of it runs again.
        actix::System::current().stop();
        drop(system);
        result
    })
    .join()
    .map_err(|_| anyhow::anyhow!("the process panicked"))?
}

/// The result of a parent's `delegate` call in `request`, once it holds one.
pub fn delegate_result(request: &Request) -> Option<String> {
    request.messages.iter().find_map(|m| match m.as_ref() {
        Message::ToolResult(result) if result.tool_name == "delegate" => {
            Some(result.content.clone())
        }
        _ => None,
    })
}

/// A parent's model: delegates "find the answer", then reports the result it reads.
pub fn delegating_parent_step(request: &Request, typed: bool) -> ScriptedStep {
    match delegate_result(request) {
        Some(result) => ScriptedStep::Respond(text_response(&format!("parent: got {result}"))),
        None => ScriptedStep::Respond(tool_response(
            "",
            vec![ToolCall {
                id: "d1".to_owned(),
                name: "delegate".to_owned(),
                arguments: serde_json::json!({ "task": "find the answer", "typed": typed }),
            }],
        )),
    }
}
