//! preview_continuation in a scripted turn: it creates nothing, and the projection it measures
//! is byte for byte the one continue_session then creates from the same arguments; a refusal
//! is continue_session's, word for word.

use std::sync::{Arc, Mutex};

use crate::common::continuing::{good_arguments, input_of, is_projection, n_sessions};
use crate::common::{account, session, start_runtime_with, within};
use seed_actors::{Runtime, RuntimeSettings};
use seed_providers::{Message, Request, ScriptedProvider, ScriptedStep, ToolCall};
use seed_providers::{text_response, tool_response};
use seed_store::{Config, NewSession, Store};
use serde_json::{Value, json};

/// The result of the named verb in this turn of the request (after its newest input), when it
/// has one.
fn result_of(request: &Request, verb: &str) -> Option<(String, bool)> {
    let input_at = request
        .messages
        .iter()
        .rposition(|m| matches!(m.as_ref(), Message::User(user) if !user.text.starts_with('<')))
        .unwrap_or(0);
    request.messages[input_at..]
        .iter()
        .find_map(|m| match m.as_ref() {
            Message::ToolResult(result) if result.tool_name == verb => {
                Some((result.content.clone(), result.is_error))
            }
            _ => None,
        })
}

fn call(id: &str, verb: &str, arguments: Value) -> ScriptedStep {
    ScriptedStep::Respond(tool_response(
        "",
        vec![ToolCall {
            id: id.to_owned(),
            name: verb.to_owned(),
            arguments,
        }],
    ))
}

/// The model: "preview" previews with `arguments` and answers; "continue" previews, then
/// continues with the same arguments; in a successor it answers. Each preview's result is kept
/// in `previews`.
fn model(arguments: Value, previews: Arc<Mutex<Vec<(String, bool)>>>) -> ScriptedProvider {
    ScriptedProvider::from_fn(move |request: &Request, _| {
        if request.messages.iter().any(|m| is_projection(m)) {
            return ScriptedStep::Respond(text_response("successor answers"));
        }
        let input = input_of(request);
        let previewed = result_of(request, "preview_continuation");
        let Some(preview) = previewed else {
            return call("preview-1", "preview_continuation", arguments.clone());
        };
        if !previews.lock().expect("previews").contains(&preview) {
            previews.lock().expect("previews").push(preview);
        }
        if input == "continue" && result_of(request, "continue_session").is_none() {
            return call("continue-1", "continue_session", arguments.clone());
        }
        ScriptedStep::Respond(text_response("previewed"))
    })
}

struct Setup {
    _dir: tempfile::TempDir,
    store: Store,
    runtime: Runtime,
    previews: Arc<Mutex<Vec<(String, bool)>>>,
}

async fn setup(arguments: Value) -> anyhow::Result<Setup> {
    let dir = tempfile::tempdir()?;
    let store = Store::open(Config::new(dir.path().join("seed.db")))?;
    store.create_account(account(), vec![1], 0).await?;
    let mut first = NewSession::new(session(0), account(), 0);
    first.title = "Trip to Lisbon".to_owned();
    store.create_session(first).await?;
    let previews = Arc::new(Mutex::new(Vec::new()));
    let (runtime, _) = start_runtime_with(
        store.clone(),
        Arc::new(model(arguments, Arc::clone(&previews))),
        seed_actors::verbs::shipped(),
        RuntimeSettings {
            background_runs_max: 0,
            ..RuntimeSettings::default()
        },
        "boot-1",
    )
    .await?;
    Ok(Setup {
        _dir: dir,
        store,
        runtime,
        previews,
    })
}

async fn say(setup: &Setup, text: &str) -> anyhow::Result<seed_store::RunRow> {
    let (_, run_id) = setup.runtime.send_message(session(0), text).await?;
    Ok(within("a run", setup.runtime.wait_for_run(run_id)).await?)
}

#[actix::test]
async fn a_preview_creates_nothing_and_measures_what_continue_session_creates() -> anyhow::Result<()>
{
    let setup = setup(good_arguments()).await?;
    // "preview" at seq 1: its turn previews (citing seqs 1–2, which exist once the call is
    // logged) and answers.
    say(&setup, "preview").await?;
    let counts = setup.store.row_counts().await?;
    let n_edges = |counts: &[(&str, i64)]| {
        counts
            .iter()
            .find(|(table, _)| *table == "session_continuations")
            .map(|(_, n)| *n)
    };
    assert_eq!(
        n_sessions(&setup.store).await?,
        1,
        "a preview creates no session"
    );
    assert_eq!(n_edges(&counts), Some(0), "nor an edge");

    say(&setup, "continue").await?;
    let previews = setup.previews.lock().expect("previews").clone();
    assert_eq!(previews.len(), 2, "{previews:?}");
    let (text, is_error) = &previews[1];
    assert!(!is_error, "{text}");
    let preview: Value = serde_json::from_str(text)?;

    // continue_session then made the successor from the same arguments: its projection and
    // manifest are the size the preview said.
    assert_eq!(n_sessions(&setup.store).await?, 2);
    let successor = setup
        .store
        .list_sessions(account())
        .await?
        .into_iter()
        .find(|row| row.id != session(0))
        .expect("a successor");
    let edge = setup
        .store
        .edge_to(successor.id)
        .await?
        .expect("the successor's edge");
    let manifest = seed_events::SessionContinuationManifest::from_cbor(&edge.manifest_cbor)?;
    let projection = setup.store.read_events(successor.id, 1, 1, 1).await?;
    let projection_text = projection[0].body().text().unwrap_or_default().to_owned();
    assert_eq!(
        preview["projection_bytes"],
        json!(manifest.projection_bytes)
    );
    assert_eq!(preview["projection_bytes"], json!(projection_text.len()));
    assert_eq!(preview["budget_bytes"], json!(manifest.budget_bytes));
    let omitted: Vec<(i64, i64)> = manifest
        .omitted
        .iter()
        .map(|range| (range.from_seq, range.to_seq))
        .collect();
    let previewed_omitted: Vec<(i64, i64)> = preview["omitted"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .map(|range| {
            (
                range["from_seq"].as_i64().unwrap_or_default(),
                range["to_seq"].as_i64().unwrap_or_default(),
            )
        })
        .collect();
    assert_eq!(previewed_omitted, omitted);
    assert_eq!(preview["sources"][0]["loaded"], "whole");
    assert_eq!(preview["sources"][0]["fits"], true);
    assert!(
        preview["first_request"]["tokens"]
            .as_u64()
            .unwrap_or_default()
            > preview["projection_tokens"].as_u64().unwrap_or_default(),
        "the first request holds the projection and more: {preview}"
    );
    assert!(
        preview["first_request"]["window_percent"]
            .as_f64()
            .is_some(),
        "the scripted model's window is known: {preview}"
    );
    Ok(())
}

#[actix::test]
async fn a_preview_refuses_what_continue_session_refuses_in_its_words() -> anyhow::Result<()> {
    let mut arguments = good_arguments();
    arguments["sources"] = json!([{ "type": "session_events", "fromSeq": 1, "toSeq": 99 }]);
    arguments
        .as_object_mut()
        .expect("an object")
        .remove("title");
    let setup = setup(arguments).await?;
    say(&setup, "preview").await?;
    let previews = setup.previews.lock().expect("previews").clone();
    assert_eq!(
        previews,
        [(
            "preview_continuation: continue_session would be refused: invalid arguments: \
             title: required. Nothing was created."
                .to_owned(),
            true
        )]
    );
    assert_eq!(n_sessions(&setup.store).await?, 1);
    Ok(())
}
