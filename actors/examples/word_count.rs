//! A new verb in one file: `word_count` counts the words of a text. Run it with
//! `cargo run -p seed-actors --example word_count`: a runtime on a temporary database, whose
//! scripted model calls the verb, prints the answer and the log.
//!
//! Adding a verb is this: implement `Verb` (name, the contract the model reads, the JSON schema
//! of the arguments, whether a cut-off call may run again), and pass it to `Runtime::start`.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

use futures::future::BoxFuture;
use seed_actors::{Runtime, RuntimeSettings, Verb, VerbContext, VerbOutput, parse_arguments};

/// Counts the words of a text.
#[derive(Debug)]
pub struct WordCount;

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct WordCountArgs {
    text: String,
}

impl Verb for WordCount {
    fn name(&self) -> &'static str {
        "word_count"
    }

    fn description(&self) -> &'static str {
        "Counts the words of a text (runs of non-whitespace). Returns the count as a number."
    }

    fn parameters(&self) -> serde_json::Value {
        serde_json::json!({
            "type": "object",
            "properties": { "text": { "type": "string" } },
            "required": ["text"]
        })
    }

    /// Counting has no side effects: a call cut off by a crash simply runs again.
    fn safe_to_repeat(&self) -> bool {
        true
    }

    fn call(&self, _: VerbContext, arguments: serde_json::Value) -> BoxFuture<'static, VerbOutput> {
        Box::pin(async move {
            match parse_arguments::<WordCountArgs>("word_count", arguments) {
                Ok(args) => VerbOutput::ok(args.text.split_whitespace().count().to_string()),
                Err(error) => error,
            }
        })
    }
}

/// A scripted model that asks `word_count` about the user's message, then reports the count.
pub fn scripted_model() -> seed_providers::ScriptedProvider {
    use seed_providers::{Message, ScriptedStep, ToolCall, text_response, tool_response};
    seed_providers::ScriptedProvider::from_fn(|request, _| {
        let counted = request.messages.iter().find_map(|m| match m.as_ref() {
            Message::ToolResult(result) if result.tool_name == "word_count" => {
                Some(result.content.clone())
            }
            _ => None,
        });
        match counted {
            Some(count) => ScriptedStep::Respond(text_response(&format!("{count} words"))),
            None => {
                let text = request
                    .messages
                    .iter()
                    .find_map(|m| match m.as_ref() {
                        Message::User(user) => Some(user.text.clone()),
                        _ => None,
                    })
                    .unwrap_or_default();
                ScriptedStep::Respond(tool_response(
                    "",
                    vec![ToolCall {
                        id: "count-1".to_owned(),
                        name: "word_count".to_owned(),
                        arguments: serde_json::json!({ "text": text }),
                    }],
                ))
            }
        }
    })
}

/// Starts a runtime with the verb on `store`.
pub async fn start_runtime(store: seed_store::Store) -> anyhow::Result<Runtime> {
    let clock = Arc::new(AtomicI64::new(1_800_000_000_000));
    let (runtime, _) = Runtime::start(
        store,
        Arc::new(scripted_model()),
        vec![Arc::new(WordCount)],
        RuntimeSettings::default(),
        "example".to_owned(),
        Arc::new(move || clock.fetch_add(1, Ordering::SeqCst)),
    )
    .await?;
    Ok(runtime)
}

#[allow(dead_code)]
fn main() -> anyhow::Result<()> {
    actix::System::new().block_on(async {
        let dir = tempfile::tempdir()?;
        let store = seed_store::Store::open(seed_store::Config::new(dir.path().join("seed.db")))?;
        let account = seed_events::AccountId::new_v7();
        let session = seed_events::SessionId::new_v7();
        store.create_account(account, vec![0], 0).await?;
        store
            .create_session(seed_store::NewSession::new(session, account, 0))
            .await?;
        let runtime = start_runtime(store.clone()).await?;
        let (_, run_id) = runtime
            .send_message(session, "how many words are in this sentence")
            .await?;
        let run = runtime.wait_for_run(run_id).await?;
        println!("run {}: {:?}", run.status, run.result);
        for event in store.read_events(session, 1, i64::MAX, usize::MAX).await? {
            if let Some(line) = seed_projections::transcript::transcript_event_line(&event) {
                println!("{line}");
            }
        }
        Ok(())
    })
}
