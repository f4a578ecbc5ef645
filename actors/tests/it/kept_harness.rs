//! A session's actor keeps its harness, tools and all, between runs: each run's verb calls
//! still act for that run, and the tools offered stay the same. A waiter hears of each run's
//! end with the run as recorded.

use crate::common;

use crate::common::{Fixture, log, session};
use futures::future::BoxFuture;
use seed_actors::{Verb, VerbContext, VerbOutput};
use seed_events::RunStatus;
use seed_providers::{
    Message, ScriptedProvider, ScriptedStep, ToolCall, text_response, tool_response,
};

/// Answers with the run its call was made in.
struct WhichRun;

impl Verb for WhichRun {
    fn name(&self) -> &'static str {
        "which_run"
    }
    fn description(&self) -> &'static str {
        "Says which run the call belongs to."
    }
    fn parameters(&self) -> serde_json::Value {
        serde_json::json!({"type": "object", "properties": {}})
    }
    fn safe_to_repeat(&self) -> bool {
        true
    }
    fn call(&self, context: VerbContext, _: serde_json::Value) -> BoxFuture<'static, VerbOutput> {
        let run_id = context.run_id.to_string();
        Box::pin(async move { VerbOutput::ok(run_id) })
    }
}

/// Each turn: one `which_run` call, then an answer.
fn provider() -> ScriptedProvider {
    ScriptedProvider::from_fn(|request, _| {
        if let Some(Message::ToolResult(_)) = request.messages.last().map(|m| m.as_ref()) {
            return ScriptedStep::Respond(text_response("done"));
        }
        let n = request
            .messages
            .iter()
            .filter(|message| matches!(message.as_ref(), Message::Assistant(_)))
            .count();
        ScriptedStep::Respond(tool_response(
            "",
            vec![ToolCall {
                id: format!("call-{n}"),
                name: "which_run".to_owned(),
                arguments: serde_json::json!({}),
            }],
        ))
    })
}

#[actix::test]
async fn each_run_of_a_kept_harness_calls_its_verbs_as_itself() -> anyhow::Result<()> {
    let fixture = Fixture::new(1).await?;
    let provider = provider();
    let (runtime, _) = common::start_runtime(
        fixture.store.clone(),
        std::sync::Arc::new(provider.clone()),
        vec![std::sync::Arc::new(WhichRun)],
        "boot",
    )
    .await?;
    let mut run_ids = Vec::new();
    for text in ["first", "second", "third"] {
        let (_, run_id) = runtime.send_message(session(0), text).await?;
        let ended = runtime.wait_for_run(run_id).await?;
        assert_eq!(ended.status, RunStatus::Succeeded);
        // The waiter has the run as its end recorded it, without reading it: the same row.
        assert_eq!(Some(ended), fixture.store.get_run(run_id).await?);
        run_ids.push(run_id.to_string());
    }
    let results: Vec<String> = log(&fixture.store, session(0))
        .await?
        .iter()
        .filter(|event| event.kind == "tool_result")
        .map(|event| {
            event.content["content"]
                .as_str()
                .unwrap_or_default()
                .to_owned()
        })
        .collect();
    assert_eq!(results, run_ids);
    // Every request offered the same tools, built once.
    let requests = provider.requests();
    assert_eq!(requests.len(), 6);
    assert!(
        requests
            .iter()
            .all(|request| request.tools == requests[0].tools)
    );
    assert!(
        requests[0]
            .tools
            .iter()
            .any(|tool| tool.name == "which_run")
    );
    Ok(())
}
