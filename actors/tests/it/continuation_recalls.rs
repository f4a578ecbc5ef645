//! Recall telemetry end to end, over a real SQLite file and the scripted model: a successor
//! recalls a range its projection left out, twice, in two read calls; each counts against the
//! edge it came through, a replayed read counts once, and when the successor continues, the
//! next projection carries the range as an excerpt that says it was recalled.

use crate::common;

use std::sync::Arc;

use crate::common::continuing::{CONTINUE, input_of};
use crate::common::{account, log, session, start_runtime_with, within};
use seed_actors::verbs::read::Read;
use seed_actors::{Runtime, RuntimeSettings, Verb, VerbContext};
use seed_events::continuation::RecalledRange;
use seed_events::{EventRole, NewEvent, RunStatus, SeqRange, SessionContinuationManifest};
use seed_providers::{
    Message, Request, ScriptedProvider, ScriptedStep, ToolCall, text_response, tool_response,
};
use seed_store::{Config, NewSession, RecallSummary, Store};
use serde_json::json;

const RECALL: &str = "what were the first hotels?";
const CONTINUE_AGAIN: &str = "let us move on to flights";
/// The seqs of the predecessor the successor recalls: left out of its projection.
const RECALLED: (i64, i64) = (3, 6);

fn projection_text(request: &Request) -> Option<&str> {
    request
        .messages
        .iter()
        .find_map(|message| match message.as_ref() {
            Message::User(user) if user.text.starts_with("<continuation") => {
                Some(user.text.as_str())
            }
            _ => None,
        })
}

fn n_results(request: &Request, tool_name: &str) -> usize {
    request
        .messages
        .iter()
        .filter(
            |m| matches!(m.as_ref(), Message::ToolResult(result) if result.tool_name == tool_name),
        )
        .count()
}

fn call(id: &str, name: &str, arguments: serde_json::Value) -> ScriptedStep {
    ScriptedStep::Respond(tool_response(
        "",
        vec![ToolCall {
            id: id.to_owned(),
            name: name.to_owned(),
            arguments,
        }],
    ))
}

/// The model: session 0, asked to continue, continues (citing seqs 1–2); its successor, asked
/// [`RECALL`], reads seqs 3–6 of session 0 in two calls, and asked [`CONTINUE_AGAIN`],
/// continues; anything else is answered.
fn model() -> ScriptedProvider {
    ScriptedProvider::from_fn(|request: &Request, _| {
        let input = input_of(request);
        let first_successor = format!("continues thread:{}", session(0));
        let in_first_successor =
            projection_text(request).is_some_and(|text| text.contains(&first_successor));
        let predecessor_thread = format!("thread:{}", session(0));
        match (projection_text(request).is_some(), input.as_str()) {
            (false, CONTINUE) if n_results(request, "continue_session") == 0 => call(
                "cont-1",
                "continue_session",
                json!({
                    "reason": "topic change",
                    "title": "Lisbon hotels",
                    "description": "Comparing hotels",
                    "handoff": {"purpose": "Book a hotel", "currentRequest": "Carry on"},
                    "sources": [{"type": "session_events", "fromSeq": 1, "toSeq": 2}],
                }),
            ),
            (true, RECALL) if in_first_successor && n_results(request, "read") < 2 => {
                let id = format!("read-{}", n_results(request, "read") + 1);
                call(
                    &id,
                    "read",
                    json!({
                        "target": predecessor_thread,
                        "fromSeq": RECALLED.0,
                        "toSeq": RECALLED.1,
                    }),
                )
            }
            (true, CONTINUE_AGAIN)
                if in_first_successor && n_results(request, "continue_session") == 0 =>
            {
                call(
                    "cont-2",
                    "continue_session",
                    json!({
                        "reason": "phase change",
                        "title": "Lisbon flights",
                        "description": "Booking flights",
                        "handoff": {"purpose": "Book flights", "currentRequest": "Flights"},
                    }),
                )
            }
            _ => ScriptedStep::Respond(text_response(&format!("answer: {input}"))),
        }
    })
}

struct Setup {
    _dir: tempfile::TempDir,
    store: Store,
    runtime: Runtime,
}

/// A runtime whose session 0 holds 60 short exchanges before anyone asks to continue: its
/// successor's projection loads seqs 1–2 (cited) and the 40 newest, and leaves 3–20 out.
async fn setup() -> anyhow::Result<Setup> {
    let dir = tempfile::tempdir()?;
    let store = Store::open(Config::new(dir.path().join("seed.db")))?;
    store.create_account(account(), vec![1], 0).await?;
    let mut first = NewSession::new(session(0), account(), 0);
    first.title = "Trip to Lisbon".to_owned();
    store.create_session(first).await?;
    let events = (1..=60)
        .map(|seq| {
            let (role, actor) = if seq % 2 == 1 {
                (EventRole::User, "user")
            } else {
                (EventRole::Assistant, "agent")
            };
            NewEvent::message(
                role,
                actor,
                json!({"text": format!("hotel note {seq}")}),
                seq,
            )
        })
        .collect();
    store.append_events(session(0), events).await?;
    let (runtime, _) = start_runtime_with(
        store.clone(),
        Arc::new(model()),
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
    })
}

async fn say(
    setup: &Setup,
    session_id: seed_events::SessionId,
    text: &str,
) -> anyhow::Result<seed_store::RunRow> {
    let (_, run_id) = setup.runtime.send_message(session_id, text).await?;
    Ok(within("a run", setup.runtime.wait_for_run(run_id)).await?)
}

#[actix::test]
async fn a_range_recalled_twice_is_counted_and_carried_into_the_next_continuation()
-> anyhow::Result<()> {
    let setup = setup().await?;
    let store = &setup.store;
    let run = say(&setup, session(0), CONTINUE).await?;
    let first = run.continued_to_session_id().expect("continued");
    assert_eq!(
        successor_run_of(&setup, first).await?.status,
        RunStatus::Succeeded
    );
    let first_edge = store.edge_to(first).await?.expect("the first edge");
    let first_manifest = SessionContinuationManifest::from_cbor(&first_edge.manifest_cbor)?;
    let left_out = SeqRange {
        thread: session(0),
        from_seq: 3,
        to_seq: 20,
    };
    assert!(
        first_manifest.omitted.contains(&left_out),
        "{:?}",
        first_manifest.omitted
    );

    // The successor recalls seqs 3–6 of its predecessor in two read calls.
    let run = say(&setup, first, RECALL).await?;
    assert_eq!(run.status, RunStatus::Succeeded);
    let recalls = store.recalls_of_edges(first).await?;
    assert_eq!(
        recalls
            .iter()
            .map(|recall| (
                recall.continuation_id,
                recall.reader_session_id,
                recall.from_seq,
                recall.to_seq,
                recall.times
            ))
            .collect::<Vec<_>>(),
        [(first_edge.id, first, RECALLED.0, RECALLED.1, 2)]
    );
    assert_eq!(store.recalls_recorded(), 2);

    // The same call read again (a replay) counts once; a read of what the projection loaded
    // (the cited seqs 1–2) counts nothing.
    let replayed = VerbContext {
        tool_call_id: "read-1".to_owned(),
        ..common::verb_context(store, first)
    };
    let target = format!("thread:{}", session(0));
    let output = Read
        .call(
            replayed,
            json!({"target": target, "fromSeq": RECALLED.0, "toSeq": RECALLED.1}),
        )
        .await;
    assert!(!output.is_error, "{}", output.content);
    let loaded = VerbContext {
        tool_call_id: "read-loaded".to_owned(),
        ..common::verb_context(store, first)
    };
    let output = Read
        .call(loaded, json!({"target": target, "fromSeq": 1, "toSeq": 2}))
        .await;
    assert!(!output.is_error, "{}", output.content);
    assert_eq!(store.recalls_of_edges(first).await?.len(), 1);
    assert_eq!(store.recalls_of_edges(first).await?[0].times, 2);
    assert_eq!(store.recalls_recorded(), 2);

    // The successor continues: the next projection carries the range, saying it was recalled.
    let run = say(&setup, first, CONTINUE_AGAIN).await?;
    let second = run.continued_to_session_id().expect("continued again");
    assert_eq!(
        successor_run_of(&setup, second).await?.status,
        RunStatus::Succeeded
    );
    let projection = log(store, second).await?[0].content["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let excerpt = format!(
        "<excerpt thread=\"{}\" from=\"3\" to=\"6\" recalled=\"2 times after the last \
         continuation\">\n[3] user: hotel note 3\n[4] assistant: hotel note 4\n\
         [5] user: hotel note 5\n[6] assistant: hotel note 6\n</excerpt>\n",
        session(0)
    );
    assert!(projection.contains(&excerpt), "{projection}");
    let second_edge = store.edge_to(second).await?.expect("the second edge");
    let second_manifest = SessionContinuationManifest::from_cbor(&second_edge.manifest_cbor)?;
    assert_eq!(
        second_manifest.recalled,
        [RecalledRange {
            range: SeqRange {
                thread: session(0),
                from_seq: 3,
                to_seq: 6,
            },
            times: 2,
            loaded: true,
        }]
    );

    // The recalls are on the first edge, where the first successor is the successor; the
    // second edge has none of its own.
    let on_first: Vec<RecallSummary> = store.recalls_of_edges(first).await?;
    assert_eq!(on_first.len(), 1);
    assert_eq!(on_first[0].successor_session_id, first);
    assert!(store.recalls_of_edges(second).await?.is_empty());
    Ok(())
}

/// A successor's one run, waited for.
async fn successor_run_of(
    setup: &Setup,
    successor: seed_events::SessionId,
) -> anyhow::Result<seed_store::RunRow> {
    let runs = setup.store.list_session_runs(successor).await?;
    let first = runs.first().expect("a run for the successor");
    Ok(within("the successor's run", setup.runtime.wait_for_run(first.id)).await?)
}
