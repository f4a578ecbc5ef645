//! The continuation advisor end to end, over a real SQLite file and the scripted model: from
//! 70% of the window the `<context_usage>` block a model receives keeps its guidance word for
//! word and adds the turns left, the next turn in place against a successor, and the
//! recommended ranges with their reasons; below 70% it is as it was.

use std::sync::Arc;

use crate::common::{account, log, session, start_runtime, within};
use seed_events::EventBody;
use seed_providers::{Message, ScriptedProvider, ScriptedStep, ToolCall, Usage};
use seed_providers::{text_response, tool_response};
use seed_store::{Config, NewSession, Store};
use serde_json::json;

/// `message` with a usage saying the prompt was `prompt` tokens, a tenth of it uncached.
fn with_prompt(
    mut message: seed_providers::AssistantMessage,
    prompt: u64,
) -> seed_providers::AssistantMessage {
    message.usage = Usage {
        input: prompt / 10,
        cache_read: prompt - prompt / 10,
        cache_write: 0,
        output: 5,
        estimated: false,
    };
    message
}

/// The `<context_usage>` block of each request, in order.
fn usage_blocks(model: &ScriptedProvider) -> Vec<String> {
    model
        .requests()
        .iter()
        .map(|request| {
            request
                .messages
                .iter()
                .find_map(|m| match m.as_ref() {
                    Message::User(user) if user.text.starts_with("<context_usage") => {
                        Some(user.text.clone())
                    }
                    _ => None,
                })
                .unwrap_or_default()
        })
        .collect()
}

#[actix::test]
async fn from_70_percent_the_block_names_ranges_and_the_advisor_figures() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let store = Store::open(Config::new(dir.path().join("seed.db")))?;
    store.create_account(account(), vec![1], 0).await?;
    store
        .create_session(NewSession::new(session(0), account(), 0))
        .await?;
    // The scripted model's window is 200,000 tokens. The first turn reads a file that is not
    // there (a failed call nobody retries), then answers; then 50%, 75%, 90%.
    let missing = ToolCall {
        id: "call-missing".to_owned(),
        name: "read".to_owned(),
        arguments: json!({"path": "~/memory/missing.md"}),
    };
    let model = ScriptedProvider::new(vec![
        ScriptedStep::Respond(with_prompt(tool_response("", vec![missing]), 80_000)),
        ScriptedStep::Respond(with_prompt(text_response("one"), 100_000)),
        ScriptedStep::Respond(with_prompt(text_response("two"), 150_000)),
        ScriptedStep::Respond(with_prompt(text_response("three"), 180_000)),
        ScriptedStep::Respond(with_prompt(text_response("four"), 180_000)),
    ]);
    let (runtime, _) = start_runtime(
        store.clone(),
        Arc::new(model.clone()),
        seed_actors::verbs::shipped(),
        "boot-1",
    )
    .await?;
    for text in ["a", "b", "c", "d"] {
        let (_, run_id) = runtime.send_message(session(0), text).await?;
        within("a run", runtime.wait_for_run(run_id)).await?;
    }
    let events = log(&store, session(0)).await?;
    // The failed read: its call and its error result.
    let failed: Vec<i64> = events
        .iter()
        .filter(|event| match event.body() {
            EventBody::ToolCall(call) => call.id == "call-missing",
            EventBody::ToolResult(result) => {
                result.tool_call_id == "call-missing" && result.is_error
            }
            _ => false,
        })
        .map(|event| event.seq)
        .collect();
    let [call_seq, result_seq] = failed[..] else {
        panic!("a failed call and its result: {failed:?}");
    };
    let blocks = usage_blocks(&model);
    assert_eq!(blocks.len(), 5, "{blocks:?}");

    // At 50% (the third request, the second turn) the block is as it always was.
    assert!(blocks[2].contains("percent=\"50\""), "{}", blocks[2]);
    assert!(blocks[2].ends_with(
        "The conversation fits comfortably in the model's context window; nothing to do about \
         it.</context_usage>"
    ));
    assert!(!blocks[2].contains("Turns left"), "{}", blocks[2]);

    // At 75%: the guidance word for word, then the advisor.
    let suggest = &blocks[3];
    assert!(
        suggest.starts_with(
            "<context_usage tokens=\"150000\" window=\"200000\" percent=\"75\">The context \
             window is filling up. At the next semantic boundary (a phase finished, the subject \
             changed), consider continue_session to carry the work into a fresh session.\n"
        ),
        "{suggest}"
    );
    // The prompts were 80k, 100k and 150k: 35k a turn, one more fits in the 50k left.
    assert!(
        suggest.contains(
            "Turns left: about 1 before the window fills (the prompt grew about 35000 tokens a \
             model turn over the last 3)."
        ),
        "{suggest}"
    );
    // In place: the last prompt, 135k of it read from the cache.
    assert!(
        suggest.contains("Next turn: in place about 150000 tokens (135000 cached, 15000 uncached); in a successor about "),
        "{suggest}"
    );
    let successor_tokens: u64 = suggest
        .split("in a successor about ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .and_then(|tokens| tokens.parse().ok())
        .expect("the successor's tokens");
    assert!(
        successor_tokens > 0 && successor_tokens < 2_000,
        "a short conversation's projection is small: {suggest}"
    );
    assert!(suggest.contains("none cached"), "{suggest}");
    // The recommended ranges, with their reasons: the failed read (merged into the newest
    // exchanges, which it lies within).
    assert!(
        suggest.contains("Recommended ranges of this thread to cite as session_events sources:\n"),
        "{suggest}"
    );
    assert!(
        suggest.contains("read failed and was not retried"),
        "{suggest}"
    );
    let ranges: Vec<(i64, i64)> = suggest
        .lines()
        .skip_while(|line| !line.starts_with("Recommended ranges"))
        .skip(1)
        .filter_map(|line| {
            let (range, _) = line.split_once(": ")?;
            let (from, to) = range.split_once('-')?;
            Some((from.parse().ok()?, to.parse().ok()?))
        })
        .collect();
    assert!(
        ranges
            .iter()
            .any(|&(from, to)| from <= call_seq && result_seq <= to),
        "a range covers the failed call {call_seq}-{result_seq}: {suggest}"
    );
    assert!(suggest.contains("the newest exchanges"), "{suggest}");
    assert!(suggest.ends_with("</context_usage>"), "{suggest}");
    assert_eq!(suggest.matches("<context_usage").count(), 1);

    // At 90%: the urging guidance word for word, and the advisor again.
    let urge = &blocks[4];
    assert!(
        urge.starts_with(
            "<context_usage tokens=\"180000\" window=\"200000\" percent=\"90\">The context \
             window is nearly full. Call continue_session now, unless the task is about to \
             finish in this turn.\n"
        ),
        "{urge}"
    );
    // 80k .. 180k over four turns: 33,334 a turn, none more fits in the 20k left.
    assert!(
        urge.contains(
            "Turns left: about 0 before the window fills (the prompt grew about 33334 tokens a \
             model turn over the last 4)."
        ),
        "{urge}"
    );
    assert!(
        urge.contains("in place about 180000 tokens (162000 cached, 18000 uncached)"),
        "{urge}"
    );
    assert!(urge.contains("read failed and was not retried"), "{urge}");
    Ok(())
}

#[actix::test]
async fn the_preview_names_the_recommended_ranges_with_their_reasons() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let store = Store::open(Config::new(dir.path().join("seed.db")))?;
    store.create_account(account(), vec![1], 0).await?;
    store
        .create_session(NewSession::new(session(0), account(), 0))
        .await?;
    // The first turn reads a file that is not there and answers; the second previews a
    // continuation and answers.
    let read_missing = ToolCall {
        id: "call-missing".to_owned(),
        name: "read".to_owned(),
        arguments: json!({"path": "~/memory/missing.md"}),
    };
    let preview = ToolCall {
        id: "call-preview".to_owned(),
        name: "preview_continuation".to_owned(),
        arguments: crate::common::continuing::good_arguments(),
    };
    let model = ScriptedProvider::new(vec![
        ScriptedStep::Respond(tool_response("", vec![read_missing])),
        ScriptedStep::Respond(text_response("one")),
        ScriptedStep::Respond(tool_response("", vec![preview])),
        ScriptedStep::Respond(text_response("previewed")),
    ]);
    let (runtime, _) = start_runtime(
        store.clone(),
        Arc::new(model.clone()),
        seed_actors::verbs::shipped(),
        "boot-1",
    )
    .await?;
    for text in ["a", "what would a successor get?"] {
        let (_, run_id) = runtime.send_message(session(0), text).await?;
        within("a run", runtime.wait_for_run(run_id)).await?;
    }
    let events = log(&store, session(0)).await?;
    let seq_of = |id: &str, result: bool| {
        events.iter().find_map(|event| match event.body() {
            EventBody::ToolCall(call) if !result && call.id == id => Some(event.seq),
            EventBody::ToolResult(found) if result && found.tool_call_id == id => Some(event.seq),
            _ => None,
        })
    };
    let (call_seq, result_seq) = (
        seq_of("call-missing", false).expect("the read's call"),
        seq_of("call-missing", true).expect("the read's result"),
    );
    let previewed: serde_json::Value = events
        .iter()
        .find_map(|event| match event.body() {
            EventBody::ToolResult(result) if result.tool_call_id == "call-preview" => {
                assert!(!result.is_error, "{}", result.content);
                serde_json::from_str(&result.content).ok()
            }
            _ => None,
        })
        .expect("the preview's JSON");
    let recommended = previewed["recommended"]
        .as_array()
        .expect("recommended ranges");
    // The failed read, not retried, with its reason; each range says whether the projection
    // loads it.
    let covering = recommended
        .iter()
        .find(|range| {
            range["from_seq"]
                .as_i64()
                .is_some_and(|from| from <= call_seq)
                && range["to_seq"].as_i64().is_some_and(|to| result_seq <= to)
        })
        .unwrap_or_else(|| panic!("a range covers {call_seq}-{result_seq}: {previewed}"));
    let reasons: Vec<&str> = covering["reasons"]
        .as_array()
        .expect("reasons")
        .iter()
        .filter_map(serde_json::Value::as_str)
        .collect();
    assert!(
        reasons.contains(&"read failed and was not retried"),
        "{reasons:?}"
    );
    assert!(
        recommended.iter().all(|range| range["loaded"].is_boolean()),
        "{previewed}"
    );
    Ok(())
}
