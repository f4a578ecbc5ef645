//! The `plan` verb, called directly over a real SQLite file: the checklist replaced, cleared,
//! and refused when invalid (with nothing changed).

use crate::common;

use crate::common::{Fixture, session};
use seed_actors::verbs::plan::Plan;
use seed_actors::{Verb, VerbContext, VerbOutput};
use seed_store::Store;
use serde_json::{Value, json};

const NOW_MS: i64 = common::VERB_NOW_MS;

fn context(store: &Store) -> VerbContext {
    common::verb_context(store, session(0))
}

async fn plan(store: &Store, arguments: Value) -> VerbOutput {
    Plan.call(context(store), arguments).await
}

async fn stored_plan(store: &Store) -> anyhow::Result<Option<Value>> {
    Ok(store
        .get_session(session(0))
        .await?
        .ok_or_else(|| anyhow::anyhow!("no session"))?
        .plan)
}

#[actix::test]
async fn a_plan_replaces_the_checklist_and_an_empty_one_clears_it() -> anyhow::Result<()> {
    let fixture = Fixture::new(1).await?;
    let store = &fixture.store;
    let steps = json!([
        {"step": "Book the flight", "done": true},
        {"step": "Book the hotel", "done": false},
        {"step": "Pack <light>", "done": false},
    ]);
    let output = plan(store, json!({ "steps": steps })).await;
    assert_eq!(
        output,
        VerbOutput::ok("[x] Book the flight\n[ ] Book the hotel\n[ ] Pack <light>")
    );
    assert_eq!(stored_plan(store).await?, Some(steps));
    let row = store.get_session(session(0)).await?;
    assert_eq!(row.map(|row| row.updated_at_ms), Some(NOW_MS));

    let steps = json!([{"step": "Book the hotel", "done": true}]);
    let output = plan(store, json!({ "steps": steps })).await;
    assert_eq!(output, VerbOutput::ok("[x] Book the hotel"));
    assert_eq!(stored_plan(store).await?, Some(steps));

    let output = plan(store, json!({ "steps": [] })).await;
    assert_eq!(output, VerbOutput::ok("plan cleared"));
    assert_eq!(stored_plan(store).await?, None);
    assert!(Plan.safe_to_repeat());
    Ok(())
}

#[actix::test]
async fn fifty_steps_of_500_characters_fit() -> anyhow::Result<()> {
    let fixture = Fixture::new(1).await?;
    let store = &fixture.store;
    // 500 characters, 1000 bytes: the limit counts characters.
    let long = "é".repeat(500);
    let steps: Vec<Value> = (0..50)
        .map(|_| json!({"step": long, "done": false}))
        .collect();
    let output = plan(store, json!({ "steps": steps })).await;
    assert!(!output.is_error, "{output:?}");
    assert_eq!(output.content.lines().count(), 50);
    assert_eq!(stored_plan(store).await?, Some(Value::Array(steps)));
    Ok(())
}

#[actix::test]
async fn invalid_plans_are_refused_naming_the_field_and_change_nothing() -> anyhow::Result<()> {
    let fixture = Fixture::new(1).await?;
    let store = &fixture.store;
    let kept = json!([{"step": "Keep me", "done": false}]);
    plan(store, json!({ "steps": kept })).await;
    let updated_at = store
        .get_session(session(0))
        .await?
        .map(|row| row.updated_at_ms);

    let too_many: Vec<Value> = (0..51)
        .map(|idx| json!({"step": format!("step {idx}"), "done": false}))
        .collect();
    let cases = [
        (json!({}), "invalid arguments for plan: steps: required"),
        (
            json!({"steps": "pack"}),
            "invalid arguments for plan: steps: expected an array, got a string",
        ),
        (
            json!({"steps": [{"step": "a", "done": true}, {"step": "b", "done": "yes"}]}),
            "invalid arguments for plan: steps[1].done: expected a boolean, got a string",
        ),
        (
            json!({"steps": [{"step": "a"}]}),
            "invalid arguments for plan: steps[0].done: required",
        ),
        (
            json!({"steps": [{"step": "a", "done": false, "status": "open"}]}),
            "invalid arguments for plan: steps[0].status: unknown field (expected done, step)",
        ),
        (
            json!({"steps": ["a"]}),
            "invalid arguments for plan: steps[0]: expected an object, got a string",
        ),
        (
            json!({"steps": [{"step": "", "done": false}]}),
            "invalid arguments for plan: steps[0].step: must not be empty",
        ),
        (
            json!({"steps": [{"step": "x".repeat(501), "done": false}]}),
            "invalid arguments for plan: steps[0].step: at most 500 characters, got 501",
        ),
        (
            json!({ "steps": too_many }),
            "invalid arguments for plan: steps: at most 50 items, got 51",
        ),
        (
            json!({"steps": [], "title": "x"}),
            "invalid arguments for plan: title: unknown field (expected steps)",
        ),
    ];
    for (arguments, message) in cases {
        let output = plan(store, arguments.clone()).await;
        assert_eq!(output, VerbOutput::error(message), "{arguments}");
    }
    assert_eq!(stored_plan(store).await?, Some(kept));
    let row = store.get_session(session(0)).await?;
    assert_eq!(row.map(|row| row.updated_at_ms), updated_at);
    Ok(())
}
