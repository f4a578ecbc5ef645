//! The example verb (`actors/examples/word_count.rs`, a new verb in one file) is called by the
//! scripted model and its result reaches the log.

#[path = "../../examples/word_count.rs"]
mod word_count;

use crate::common::{Fixture, log, session};
use seed_events::RunStatus;

#[actix::test]
async fn a_verb_from_the_example_runs_and_its_result_reaches_the_log() -> anyhow::Result<()> {
    let fixture = Fixture::new(1).await?;
    let runtime = word_count::start_runtime(fixture.store.clone()).await?;
    let (_, run_id) = runtime
        .send_message(session(0), "one two three four")
        .await?;
    let run = runtime.wait_for_run(run_id).await?;
    assert_eq!(run.status, RunStatus::Succeeded);
    assert_eq!(run.result, Some(serde_json::json!({ "answer": "4 words" })));
    let log = log(&fixture.store, session(0)).await?;
    let result = log
        .iter()
        .find(|event| event.kind == "tool_result")
        .expect("the verb's result is in the log");
    assert_eq!(result.content["tool_name"], "word_count");
    assert_eq!(result.content["content"], "4");
    Ok(())
}
