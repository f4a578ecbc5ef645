//! A model and arguments for continuation tests: asked to continue, the model calls
//! continue_session; in a successor (whose context holds a projection) it answers. And the
//! runtime the continuation tests share (`Setup`).

use std::sync::{Arc, Mutex};

use seed_actors::{Runtime, RuntimeSettings};
use seed_events::{EventRole, NewEvent, Queue, RunId, RunStatus, SessionId};
use seed_providers::{Message, Request, ScriptedProvider, ScriptedStep, ToolCall};
use seed_store::{Config, NewRun, NewSession, Store};

use super::{account, session, test_clock, within};
use seed_providers::{text_response, tool_response};
use serde_json::{Value, json};

pub const CONTINUE: &str = "please continue";
pub const CALL_ID: &str = "cont-1";

/// Valid arguments, citing seqs 1–2 of session 0.
pub fn good_arguments() -> Value {
    json!({
        "reason": "topic change",
        "title": "Lisbon hotels",
        "description": "Comparing three hotels",
        "handoff": {
            "purpose": "Book a hotel in Lisbon for May",
            "currentRequest": "The user wants to continue with the hotels",
            "decisions": ["Stay near Baixa", "Budget €150/night"],
            "riskRegister": "Prices rise in June"
        },
        "sources": [{ "type": "session_events", "fromSeq": 1, "toSeq": 2 }],
    })
}

pub fn is_projection(message: &Message) -> bool {
    matches!(message, Message::User(user) if user.text.starts_with("<continuation"))
}

/// The newest user message that is neither a per-turn block nor the projection.
pub fn input_of(request: &Request) -> String {
    request
        .messages
        .iter()
        .rev()
        .find_map(|message| match message.as_ref() {
            Message::User(user) if !user.text.starts_with('<') => Some(user.text.clone()),
            _ => None,
        })
        .unwrap_or_default()
}

/// The model: in a successor (its context holds a projection) it answers; asked to continue,
/// it calls continue_session with `arguments` (once: a refusal is then answered in text);
/// given "memory: <note>", it writes the note to ~/memory/notes.md (a verb not safe to
/// repeat) and says "noted"; anything else it answers.
pub fn model(arguments: Arc<Mutex<Value>>) -> ScriptedProvider {
    ScriptedProvider::from_fn(move |request: &Request, _| {
        let input = input_of(request);
        if request.messages.iter().any(|m| is_projection(m)) {
            return ScriptedStep::Respond(text_response(&format!("successor answers: {input}")));
        }
        if let Some(note) = input.strip_prefix("memory: ") {
            let wrote = request.messages.iter().any(|m| {
                matches!(m.as_ref(), Message::ToolResult(result) if result.tool_name == "memory")
            });
            return ScriptedStep::Respond(if wrote {
                text_response("noted")
            } else {
                tool_response(
                    "",
                    vec![ToolCall {
                        id: "memory-1".to_owned(),
                        name: "memory".to_owned(),
                        arguments: json!({
                            "action": "write",
                            "path": "~/memory/notes.md",
                            "content": note,
                        }),
                    }],
                )
            });
        }
        if input != CONTINUE {
            return ScriptedStep::Respond(text_response(&format!("answer: {input}")));
        }
        let called = request.messages.iter().any(|m| {
            matches!(m.as_ref(), Message::ToolResult(result) if result.tool_name == "continue_session")
        });
        if called {
            ScriptedStep::Respond(text_response(
                "the continuation was refused; answering here",
            ))
        } else {
            let arguments = arguments.lock().expect("arguments").clone();
            ScriptedStep::Respond(tool_response(
                "",
                vec![ToolCall {
                    id: CALL_ID.to_owned(),
                    name: "continue_session".to_owned(),
                    arguments,
                }],
            ))
        }
    })
}

/// A runtime over a fresh database whose session 0, "Trip to Lisbon", is where continuations
/// start; the model is [`model`] with [`good_arguments`].
pub struct Setup {
    pub _dir: tempfile::TempDir,
    pub store: Store,
    pub runtime: Runtime,
    pub model: ScriptedProvider,
}

pub async fn setup() -> anyhow::Result<Setup> {
    let dir = tempfile::tempdir()?;
    let store = Store::open(Config::new(dir.path().join("seed.db")))?;
    store.create_account(account(), vec![1], 0).await?;
    let mut first = NewSession::new(session(0), account(), 0);
    first.title = "Trip to Lisbon".to_owned();
    first.title_source = seed_store::TitleSource::User;
    first.model_override = Some("big-model".to_owned());
    store.create_session(first).await?;
    let arguments = Arc::new(Mutex::new(good_arguments()));
    let model = model(Arc::clone(&arguments));
    // No background runs start: the tests' own call sites are background runs the runtime
    // must leave alone.
    let settings = RuntimeSettings {
        background_runs_max: 0,
        ..RuntimeSettings::default()
    };
    let (runtime, _) = Runtime::start(
        store.clone(),
        Arc::new(model.clone()),
        seed_actors::verbs::shipped(),
        settings,
        "boot-1".to_owned(),
        test_clock(),
    )
    .await?;
    Ok(Setup {
        _dir: dir,
        store,
        runtime,
        model,
    })
}

/// Sends `text` to `session_id` and waits for its run.
pub async fn say(
    setup: &Setup,
    session_id: SessionId,
    text: &str,
) -> anyhow::Result<seed_store::RunRow> {
    let (_, run_id) = setup.runtime.send_message(session_id, text).await?;
    Ok(within("a run", setup.runtime.wait_for_run(run_id)).await?)
}

/// The successor's run, waited for.
pub async fn successor_run(
    setup: &Setup,
    successor: SessionId,
) -> anyhow::Result<seed_store::RunRow> {
    let runs = setup.store.list_session_runs(successor).await?;
    assert_eq!(runs.len(), 1, "one run queued for the successor");
    Ok(within(
        "the successor's run",
        setup.runtime.wait_for_run(runs[0].id),
    )
    .await?)
}

/// The account's sessions.
pub async fn n_sessions(store: &Store) -> anyhow::Result<usize> {
    Ok(store.list_sessions(account()).await?.len())
}

/// A run of session 0 to call the verb in, with "please continue" as its newest message; the
/// runtime never starts it (it is a background run, and the setup starts none).
pub async fn parked_call_site(setup: &Setup) -> anyhow::Result<RunId> {
    say(setup, session(0), "hello").await?;
    let event = NewEvent::message(EventRole::User, "user", json!({"text": CONTINUE}), 5);
    setup.store.append_events(session(0), vec![event]).await?;
    let run_id = RunId::new_v7();
    setup
        .store
        .enqueue_run(NewRun {
            id: run_id,
            session_id: session(0),
            queue: Queue::Background,
            user_event_ids: Vec::new(),
            parent_run_id: None,
            typed: false,
            created_at_ms: 5,
        })
        .await?;
    // Claimed as if running, so no wake-up starts it.
    setup
        .store
        .set_run_status(run_id, RunStatus::Running, None, 6)
        .await?;
    Ok(run_id)
}

/// Appends a user message to session 0's log (no run for it).
pub async fn new_message(setup: &Setup, text: &str) -> anyhow::Result<()> {
    let event = NewEvent::message(EventRole::User, "user", json!({ "text": text }), 9);
    setup.store.append_events(session(0), vec![event]).await?;
    Ok(())
}
