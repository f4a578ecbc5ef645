//! A runtime over a real SQLite file and the scripted model, for the actor tests.

#![allow(dead_code)]

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

use futures::future::BoxFuture;
use seed_actors::{Runtime, RuntimeSettings, Verb, VerbContext, VerbOutput, parse_arguments};
use seed_durable::{FileName, StoreState};
use seed_events::{AccountId, SessionEvent, SessionId};
use seed_projections::store_to_log::unprojected;
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
        let clock = Arc::new(AtomicI64::new(1_800_000_000_000));
        let (runtime, _) = Runtime::start(
            self.store.clone(),
            Arc::new(provider),
            vec![Arc::new(Echo)],
            RuntimeSettings::default(),
            boot_id.to_owned(),
            Arc::new(move || clock.fetch_add(1, Ordering::SeqCst)),
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
    let mut groups: std::collections::BTreeMap<i64, usize> = std::collections::BTreeMap::new();
    let mut previous: Option<(i64, i64)> = None;
    for event in &log {
        if let Some(entry_id) = event.pi_entry_id {
            if previous.is_none_or(|(id, seq)| id != entry_id || seq + 1 != event.seq) {
                *groups.entry(entry_id).or_default() += 1;
            }
            previous = Some((entry_id, event.seq));
        }
    }
    for entry in unprojected(&state.entries, None) {
        assert_eq!(
            groups.get(&(entry.id as i64)),
            Some(&1),
            "entry {} is in the log {:?} times",
            entry.id,
            groups.get(&(entry.id as i64))
        );
    }
    for entry_id in groups.keys() {
        assert!(
            state.entry(*entry_id as u64).is_some(),
            "the log names entry {entry_id}, which the store lacks"
        );
    }
    Ok(())
}
