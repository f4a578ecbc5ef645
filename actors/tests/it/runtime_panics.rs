//! A session actor whose run panics is not the end of the process: the run is tried again a
//! bounded number of times and then failed cleanly, and other sessions go on.

use crate::common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::common::{Fixture, session};
use futures::future::BoxFuture;
use seed_actors::{Runtime, RuntimeSettings, Verb, VerbContext, VerbOutput};
use seed_events::RunStatus;
use seed_providers::{ScriptedProvider, ScriptedStep, ToolCall, text_response, tool_response};

/// A verb with a bug: it panics on every call.
struct Broken {
    calls: Arc<AtomicUsize>,
}

impl Verb for Broken {
    fn name(&self) -> &'static str {
        "broken"
    }
    fn description(&self) -> &'static str {
        "Always fails."
    }
    fn parameters(&self) -> serde_json::Value {
        serde_json::json!({"type": "object"})
    }
    fn safe_to_repeat(&self) -> bool {
        true
    }
    fn call(&self, _: VerbContext, _: serde_json::Value) -> BoxFuture<'static, VerbOutput> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        panic!("a bug in a verb")
    }
}

fn is_session(request: &seed_providers::Request, idx: u128) -> bool {
    request.session_id.as_deref() == Some(session(idx).to_string().as_str())
}

#[actix::test]
async fn a_run_that_keeps_panicking_is_failed_after_its_attempts_and_others_go_on()
-> anyhow::Result<()> {
    let fixture = Fixture::new(2).await?;
    let attempts = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&attempts);
    // The model of session 0 has a bug: it panics whenever it is asked.
    let provider = ScriptedProvider::from_fn(move |request, _| {
        if is_session(request, 0) {
            counted.fetch_add(1, Ordering::SeqCst);
            panic!("a bug in the model");
        }
        ScriptedStep::Respond(text_response("fine"))
    });
    let settings = RuntimeSettings {
        run_attempts_max: 2,
        ..RuntimeSettings::default()
    };
    let (runtime, _) = Runtime::start(
        fixture.store.clone(),
        Arc::new(provider),
        Vec::new(),
        settings,
        "boot-1".to_owned(),
        common::test_clock(),
    )
    .await?;
    let (_, broken_run) = runtime.send_message(session(0), "break").await?;
    let (_, fine_run) = runtime.send_message(session(1), "hello").await?;
    let fine = runtime.wait_for_run(fine_run).await?;
    assert_eq!(fine.status, RunStatus::Succeeded);
    let broken = runtime.wait_for_run(broken_run).await?;
    assert_eq!(broken.status, RunStatus::Failed, "{broken:?}");
    assert_eq!(broken.attempts, 2);
    assert_eq!(
        attempts.load(Ordering::SeqCst),
        2,
        "one request per attempt"
    );

    // The session is not stuck: its next message gets an answer once the model is fixed...
    // here, session 1 shows the runtime itself went on.
    let (_, again) = runtime.send_message(session(1), "still there?").await?;
    assert_eq!(
        runtime.wait_for_run(again).await?.status,
        RunStatus::Succeeded
    );
    Ok(())
}

#[actix::test]
async fn a_verb_that_panics_fails_its_call_and_the_model_reads_an_error() -> anyhow::Result<()> {
    let fixture = Fixture::new(1).await?;
    let calls = Arc::new(AtomicUsize::new(0));
    let provider = ScriptedProvider::from_fn(|request, _| {
        // After the call, the request ends with its result; a turn's first request ends with the
        // turn's blocks.
        let answered = matches!(
            request.messages.last().map(|m| m.as_ref()),
            Some(seed_providers::Message::ToolResult(_))
        );
        if answered {
            ScriptedStep::Respond(text_response("the tool broke"))
        } else {
            ScriptedStep::Respond(tool_response(
                "",
                vec![ToolCall {
                    id: "b1".to_owned(),
                    name: "broken".to_owned(),
                    arguments: serde_json::json!({}),
                }],
            ))
        }
    });
    let (runtime, _) = Runtime::start(
        fixture.store.clone(),
        Arc::new(provider),
        vec![Arc::new(Broken {
            calls: Arc::clone(&calls),
        })],
        RuntimeSettings::default(),
        "boot-1".to_owned(),
        common::test_clock(),
    )
    .await?;
    for message in ["first", "second"] {
        let (_, run_id) = runtime.send_message(session(0), message).await?;
        let run = runtime.wait_for_run(run_id).await?;
        assert_eq!(run.status, RunStatus::Succeeded, "{run:?}");
    }
    // Both calls reached the verb: its actor survived the first panic.
    assert_eq!(calls.load(Ordering::SeqCst), 2);
    let log = common::log(&fixture.store, session(0)).await?;
    let results: Vec<_> = log.iter().filter(|e| e.kind == "tool_result").collect();
    assert_eq!(results.len(), 2);
    assert_eq!(results[0].content["is_error"], true);
    assert_eq!(
        results[0].content["content"],
        "the broken verb failed on this call"
    );
    Ok(())
}
