//! Delegation: the parent parks, the child runs and returns, the parent resumes and its model
//! reads the real result where the placeholder was.

use crate::common;

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

use crate::common::{
    Fixture, assert_log_agrees_with_store, delegate_result, delegating_parent_step, log, session,
};
use seed_actors::verbs::delegate::{Delegate, ReturnResult};
use seed_actors::{Runtime, RuntimeSettings};
use seed_events::RunStatus;
use seed_providers::{
    Message, Request, ScriptedProvider, ScriptedStep, ToolCall, text_response, tool_response,
};

fn newest_input(request: &Request) -> String {
    request
        .messages
        .iter()
        .rev()
        .find_map(|m| match m.as_ref() {
            Message::User(u)
                if !u.text.starts_with("<space>")
                    && !u.text.starts_with("<session_status")
                    && !u.text.starts_with("<current_time")
                    && !u.text.starts_with("<context_usage") =>
            {
                Some(u.text.clone())
            }
            _ => None,
        })
        .unwrap_or_default()
}

/// The parent delegates, the child answers (typed children return), the parent reports.
fn provider(typed: bool) -> ScriptedProvider {
    ScriptedProvider::from_fn(move |request: &Request, _| {
        let input = newest_input(request);
        if input == "find the answer" {
            return if typed
                && !request
                    .messages
                    .iter()
                    .any(|m| matches!(m.as_ref(), Message::Assistant(_)))
            {
                ScriptedStep::Respond(tool_response(
                    "",
                    vec![ToolCall {
                        id: "ret".to_owned(),
                        name: "return_result".to_owned(),
                        arguments: serde_json::json!({ "result": { "answer": 42 } }),
                    }],
                ))
            } else {
                ScriptedStep::Respond(text_response("42"))
            };
        }
        delegating_parent_step(request, typed)
    })
}

async fn start(fixture: &Fixture, provider: ScriptedProvider) -> anyhow::Result<Runtime> {
    let clock = Arc::new(AtomicI64::new(1_800_000_000_000));
    let (runtime, _) = Runtime::start(
        fixture.store.clone(),
        Arc::new(provider),
        vec![Arc::new(Delegate), Arc::new(ReturnResult)],
        RuntimeSettings::default(),
        "boot-1".to_owned(),
        Arc::new(move || clock.fetch_add(1, Ordering::SeqCst)),
    )
    .await?;
    Ok(runtime)
}

#[actix::test]
async fn the_parent_parks_the_child_returns_and_the_parent_reads_the_real_result()
-> anyhow::Result<()> {
    for typed in [false, true] {
        let fixture = Fixture::new(1).await?;
        let provider = provider(typed);
        let runtime = start(&fixture, provider.clone()).await?;
        let (_, run_id) = runtime.send_message(session(0), "research it").await?;
        let run = runtime.wait_for_run(run_id).await?;
        assert_eq!(run.status, RunStatus::Succeeded, "{run:?}");
        let expected = if typed {
            r#"parent: got {"answer":42}"#
        } else {
            "parent: got 42"
        };
        assert_eq!(run.result, Some(serde_json::json!({ "answer": expected })));
        assert_eq!(run.pass, 1, "one later pass, for the child's result");

        // The later pass read the real result where the placeholder was, and the placeholder
        // never reached the log.
        let requests = provider.requests();
        let first_parent = requests
            .iter()
            .find(|r| newest_input(r) == "research it")
            .expect("the parent's first request");
        assert_eq!(delegate_result(first_parent), None);
        let last = requests.last().expect("requests");
        let seen = delegate_result(last).expect("the delegate call's result in the last request");
        assert!(!seen.contains("still running"), "{seen}");

        let parent_log = log(&fixture.store, session(0)).await?;
        let results: Vec<&serde_json::Value> = parent_log
            .iter()
            .filter(|e| e.kind == "tool_result")
            .map(|e| &e.content)
            .collect();
        assert_eq!(
            results.len(),
            1,
            "the log kept the call unanswered until the real result"
        );
        assert_eq!(results[0]["tool_call_id"], "d1");
        assert!(
            !results[0]["content"]
                .as_str()
                .unwrap_or_default()
                .contains("still running")
        );
        assert_log_agrees_with_store(&fixture.store, session(0)).await?;

        let children = fixture.store.list_child_sessions(session(0)).await?;
        assert_eq!(children.len(), 1);
        let child_runs = fixture.store.child_runs(run_id).await?;
        assert_eq!(child_runs.len(), 1);
        assert_eq!(child_runs[0].status, RunStatus::Succeeded);
        assert_eq!(child_runs[0].typed, typed);
    }
    Ok(())
}

/// Deleting a child under its parked parent answers the parent's call (it would otherwise stay
/// parked on a child that is gone) and gives the parent its later pass.
#[actix::test]
async fn deleting_a_child_answers_its_parents_call_and_resumes_the_parent() -> anyhow::Result<()> {
    let fixture = Fixture::new(1).await?;
    // The child's model never answers: the child is running when it is deleted.
    let provider = ScriptedProvider::from_fn(move |request: &Request, _| {
        if newest_input(request) == "find the answer" {
            ScriptedStep::Hang {
                text: String::new(),
            }
        } else {
            delegating_parent_step(request, false)
        }
    });
    let runtime = start(&fixture, provider).await?;
    let (_, run_id) = runtime.send_message(session(0), "research it").await?;
    let child = common::within("the parent parks", async {
        loop {
            let parent = fixture.store.get_run(run_id).await?.expect("the run");
            let children = fixture.store.list_child_sessions(session(0)).await?;
            if parent.status == RunStatus::Parked && !children.is_empty() {
                return anyhow::Ok(children[0].id);
            }
            actix::clock::sleep(std::time::Duration::from_millis(5)).await;
        }
    })
    .await?;

    assert!(runtime.delete_session(child).await?);
    let run = common::within("the parent's later pass", runtime.wait_for_run(run_id)).await?;
    assert_eq!(run.status, RunStatus::Succeeded, "{run:?}");
    assert_eq!(
        run.result,
        Some(serde_json::json!({
            "answer": "parent: got the child session was deleted before its task finished"
        }))
    );
    assert_eq!(run.pass, 1);
    let parent_log = log(&fixture.store, session(0)).await?;
    let results: Vec<&serde_json::Value> = parent_log
        .iter()
        .filter(|e| e.kind == "tool_result")
        .map(|e| &e.content)
        .collect();
    assert_eq!(results.len(), 1, "{results:?}");
    assert_eq!(results[0]["is_error"], true);
    assert_log_agrees_with_store(&fixture.store, session(0)).await?;
    assert!(fixture.store.get_session(child).await?.is_none());
    assert!(fixture.store.child_runs(run_id).await?.is_empty());
    Ok(())
}

#[actix::test]
async fn invalid_arguments_name_the_field_and_start_nothing() -> anyhow::Result<()> {
    use seed_actors::{Verb, VerbOutput};
    use serde_json::json;

    let fixture = Fixture::new(1).await?;
    let store = &fixture.store;
    let context = || common::verb_context(store, session(0));
    let delegate_cases = [
        (
            json!({ "task": 5 }),
            "invalid arguments for delegate: task: expected a string, got an integer",
        ),
        (
            json!({ "task": "look", "typed": "yes" }),
            "invalid arguments for delegate: typed: expected a boolean, got a string",
        ),
        (
            json!({ "typed": true }),
            "invalid arguments for delegate: task: required",
        ),
        (
            json!({ "task": "look", "deadline": 3 }),
            "invalid arguments for delegate: deadline: unknown field (expected task, typed)",
        ),
        (
            json!({ "task": "  " }),
            "invalid arguments for delegate: task: must not be empty",
        ),
    ];
    for (arguments, message) in delegate_cases {
        let output = Delegate.call(context(), arguments.clone()).await;
        assert_eq!(output, VerbOutput::error(message), "{arguments}");
    }
    let output = ReturnResult.call(context(), json!({ "answer": 42 })).await;
    assert_eq!(
        output,
        VerbOutput::error(
            "invalid arguments for return_result: answer: unknown field (expected result)"
        )
    );
    let output = ReturnResult.call(context(), json!({})).await;
    assert_eq!(
        output,
        VerbOutput::error("invalid arguments for return_result: result: required")
    );
    // Nothing started.
    assert_eq!(store.list_child_sessions(session(0)).await?, Vec::new());
    assert_eq!(
        store
            .child_runs(seed_events::RunId::from_u128(0x7u128))
            .await?,
        Vec::new()
    );
    Ok(())
}

/// A verb's own parse (the one a verb added in one file uses) names the field too.
#[test]
fn parse_arguments_names_the_field() {
    #[derive(Debug, serde::Deserialize)]
    #[allow(dead_code)]
    struct Args {
        text: String,
        limit: Option<u32>,
    }
    let parse = |arguments| seed_actors::parse_arguments::<Args>("count", arguments).map(|_| ());
    assert_eq!(
        parse(serde_json::json!({ "text": 5 })),
        Err(seed_actors::VerbOutput::error(
            "invalid arguments for count: text: invalid type: integer `5`, expected a string"
        ))
    );
    assert_eq!(
        parse(serde_json::json!({ "text": "a", "limit": -1 })),
        Err(seed_actors::VerbOutput::error(
            "invalid arguments for count: limit: invalid value: integer `-1`, expected u32"
        ))
    );
    assert_eq!(
        parse(serde_json::json!({})),
        Err(seed_actors::VerbOutput::error(
            "invalid arguments for count: missing field `text`"
        ))
    );
}
