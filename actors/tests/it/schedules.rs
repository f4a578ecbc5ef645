//! Wake-ups: the `schedule` and `unschedule` verbs (refusals, reconciliation by call id), a
//! wake-up starting a turn of its session with its note, `<session_status>` listing it, and
//! the occurrences missed while the service was down firing once at boot.

use std::sync::Arc;
use std::time::Instant;

use seed_actors::verbs::schedule::{Schedule, Unschedule};
use seed_actors::{Runtime, RuntimeSettings, Verb, VerbOutput};
use seed_events::schedule::When;
use seed_events::{RunStatus, ScheduleId};
use seed_providers::{
    Message, Request, ScriptedProvider, ScriptedStep, ToolCall, text_response, tool_response,
};
use seed_store::{NewSchedule, Store};
use serde_json::json;

use crate::common::{self, Fixture, session, within};

const NOW_MS: i64 = common::VERB_NOW_MS;

/// A clock that runs with real time from `start_ms`, so the scheduler's sleeps come due.
fn real_clock(start_ms: i64) -> Arc<dyn Fn() -> i64 + Send + Sync> {
    let started = Instant::now();
    Arc::new(move || start_ms + i64::try_from(started.elapsed().as_millis()).unwrap_or(0))
}

/// `schedule` allowing one-second intervals, as a test needs.
fn quick_schedule() -> Schedule {
    Schedule {
        interval_ms_min: 1_000,
        ..Schedule::default()
    }
}

async fn start(
    store: &Store,
    provider: ScriptedProvider,
    clock_ms: i64,
) -> anyhow::Result<Runtime> {
    let mut verbs = seed_actors::verbs::shipped_with(quick_schedule());
    verbs.retain(|verb| verb.name() != "continue_session");
    let (runtime, _) = Runtime::start(
        store.clone(),
        Arc::new(provider),
        verbs,
        RuntimeSettings::default(),
        "boot-1".to_owned(),
        real_clock(clock_ms),
    )
    .await?;
    Ok(runtime)
}

async fn schedule(store: &Store, arguments: serde_json::Value) -> VerbOutput {
    quick_schedule()
        .call(common::verb_context(store, session(0)), arguments)
        .await
}

/// The text of a request's user message that starts with `prefix`, if it has one.
fn user_text(request: &Request, prefix: &str) -> Option<String> {
    request
        .messages
        .iter()
        .rev()
        .find_map(|message| match message.as_ref() {
            Message::User(user) if user.text.starts_with(prefix) => Some(user.text.clone()),
            _ => None,
        })
}

/// The turn's input (the newest user message that is not a state block) and whether the model
/// has answered since.
fn turn_input(request: &Request) -> (String, bool) {
    const BLOCKS: [&str; 6] = [
        "<space>",
        "<delegation_budget",
        "<plan_state>",
        "<context_usage",
        "<session_status",
        "<current_time>",
    ];
    let at = request
        .messages
        .iter()
        .rposition(|message| {
            matches!(message.as_ref(), Message::User(user)
                if !BLOCKS.iter().any(|block| user.text.starts_with(block)))
        })
        .unwrap_or(0);
    let input = match request.messages[at].as_ref() {
        Message::User(user) => user.text.clone(),
        _ => String::new(),
    };
    let answered = request.messages[at..]
        .iter()
        .any(|message| matches!(message.as_ref(), Message::Assistant(_)));
    (input, answered)
}

#[actix::test]
async fn bad_arguments_are_clear_refusals_and_nothing_is_set() -> anyhow::Result<()> {
    let fixture = Fixture::new(1).await?;
    let store = &fixture.store;
    let cases = [
        (
            json!({"note": "n", "cron": "every monday"}),
            "invalid arguments for schedule: cron: the cron expression \"every monday\" is not \
             valid: it has 2 fields, not 5.",
        ),
        (
            json!({"note": "n", "cron": "61 * * * *"}),
            "invalid arguments for schedule: cron: the cron expression \"61 * * * *\" is not \
             valid:",
        ),
        (
            json!({"note": "n", "at": "2020-01-01T00:00:00Z"}),
            "invalid arguments for schedule: the time 2020-01-01T00:00:00Z is not in the future",
        ),
        (
            json!({"note": "n", "at": "next friday"}),
            "invalid arguments for schedule: at: the time \"next friday\" is not an RFC 3339 time",
        ),
        (
            json!({"note": "n", "every_seconds": 0}),
            "invalid arguments for schedule: the interval must be at least 1 seconds; 0 was given",
        ),
        (
            json!({"note": "n", "delay_seconds": 5, "every_seconds": 60}),
            "invalid arguments for schedule: give exactly one of delay_seconds, at, cron and \
             every_seconds (2 given)",
        ),
        (
            json!({"note": "n"}),
            "invalid arguments for schedule: give exactly one of delay_seconds, at, cron and \
             every_seconds (0 given)",
        ),
        (
            json!({"delay_seconds": 5}),
            "invalid arguments for schedule: note: required",
        ),
    ];
    for (arguments, says) in cases {
        let output = schedule(store, arguments.clone()).await;
        assert!(output.is_error, "{arguments}: {output:?}");
        assert!(
            output.content.starts_with(says),
            "{arguments}: {}",
            output.content
        );
    }
    // The default minimum interval is a minute.
    let output = Schedule::default()
        .call(
            common::verb_context(store, session(0)),
            json!({"note": "n", "every_seconds": 5}),
        )
        .await;
    assert_eq!(
        output.content,
        "invalid arguments for schedule: the interval must be at least 60 seconds; 5 was given"
    );
    assert!(store.list_schedules(session(0)).await?.is_empty());
    Ok(())
}

#[actix::test]
async fn a_schedule_call_cut_off_after_its_commit_is_answered_with_what_it_set()
-> anyhow::Result<()> {
    let fixture = Fixture::new(1).await?;
    let store = &fixture.store;
    let verb = quick_schedule();
    assert!(!verb.safe_to_repeat());
    let context = common::verb_context(store, session(0));
    // Nothing committed yet: the call is answered as interrupted.
    assert_eq!(verb.reconcile(context.clone(), json!({})).await, None);
    let arguments = json!({"note": "water the plants", "cron": "0 9 * * MON"});
    let set = verb.call(context.clone(), arguments.clone()).await;
    assert!(!set.is_error, "{set:?}");
    assert!(
        set.content.contains("cron \"0 9 * * MON\" (UTC)"),
        "{}",
        set.content
    );
    let reconciled = verb.reconcile(context.clone(), arguments).await;
    assert_eq!(
        reconciled.as_ref(),
        Some(&set),
        "the cut-off call answers with what it set"
    );
    let listed = store.list_schedules(session(0)).await?;
    assert_eq!(listed.len(), 1, "one wake-up: {listed:?}");
    assert_eq!(listed[0].created_by_call_id.as_deref(), Some("call-1"));

    // unschedule cancels it; a second time it says there is none.
    let cancel = json!({"schedule_id": listed[0].id.to_string()});
    let done = Unschedule
        .call(common::verb_context(store, session(0)), cancel.clone())
        .await;
    assert_eq!(
        done,
        VerbOutput::ok(format!("cancelled wake-up {}", listed[0].id))
    );
    assert!(store.list_schedules(session(0)).await?.is_empty());
    let mut other_call = common::verb_context(store, session(0));
    other_call.tool_call_id = "call-2".to_owned();
    let again = Unschedule.call(other_call, cancel).await;
    assert!(again.is_error, "{again:?}");
    Ok(())
}

/// The model schedules a wake-up every second; the first one starts a turn whose input is the
/// notice with the note and whose `<session_status>` lists the wake-up; that turn cancels it.
#[actix::test]
async fn a_wake_up_starts_a_turn_with_its_note_and_the_status_lists_it() -> anyhow::Result<()> {
    let fixture = Fixture::new(1).await?;
    let store = &fixture.store;
    let model = ScriptedProvider::from_fn(|request: &Request, _| {
        let (input, answered) = turn_input(request);
        if answered {
            return ScriptedStep::Respond(text_response("done"));
        }
        let call = if input.starts_with("<scheduled_wakeup") {
            let id = input
                .split("schedule_id=\"")
                .nth(1)
                .and_then(|rest| rest.split('"').next())
                .unwrap_or_default()
                .to_owned();
            ToolCall {
                id: "unschedule-1".to_owned(),
                name: "unschedule".to_owned(),
                arguments: json!({ "schedule_id": id }),
            }
        } else {
            ToolCall {
                id: "schedule-1".to_owned(),
                name: "schedule".to_owned(),
                arguments: json!({"note": "look at the oven", "every_seconds": 1}),
            }
        };
        ScriptedStep::Respond(tool_response("", vec![call]))
    });
    let runtime = start(store, model.clone(), NOW_MS).await?;
    let (_, first) = runtime.send_message(session(0), "remind me").await?;
    within("the first turn", runtime.wait_for_run(first)).await?;
    assert_eq!(store.list_schedules(session(0)).await?.len(), 1);

    // The wake-up's run: queued by the scheduler, answered by the model.
    let woken = within("the wake-up's turn", async {
        loop {
            let runs = store.list_session_runs(session(0)).await?;
            if let Some(run) = runs
                .iter()
                .find(|run| run.id != first && run.status == RunStatus::Succeeded)
            {
                return anyhow::Ok(run.clone());
            }
            actix::clock::sleep(std::time::Duration::from_millis(20)).await;
        }
    })
    .await?;
    assert_eq!(woken.queue, seed_events::Queue::Background);
    assert!(
        store.list_schedules(session(0)).await?.is_empty(),
        "the wake-up's turn cancelled it"
    );

    let requests = model.requests();
    let woken_request = requests
        .iter()
        .find(|request| user_text(request, "<scheduled_wakeup").is_some())
        .expect("a request with the notice");
    let notice = user_text(woken_request, "<scheduled_wakeup").unwrap_or_default();
    assert!(notice.contains("occurrence=\"1\""), "{notice}");
    assert!(
        notice.contains("note: look at the oven</scheduled_wakeup>"),
        "{notice}"
    );
    let status = user_text(woken_request, "<session_status").unwrap_or_default();
    assert!(
        status.contains("Wake-ups you scheduled") && status.contains("look at the oven"),
        "{status}"
    );
    Ok(())
}

/// A service down across three occurrences of a wake-up fires it once when it starts again,
/// saying how many occurrences it stands for and how late it is.
#[actix::test]
async fn occurrences_missed_while_down_fire_once_at_boot() -> anyhow::Result<()> {
    let fixture = Fixture::new(1).await?;
    let store = &fixture.store;
    let minute = 60_000;
    let when = When::Interval { every_ms: minute };
    // Set 3.5 minutes before the boot: due 2.5, 1.5 and 0.5 minutes before it.
    let set_at = NOW_MS - 3 * minute - minute / 2;
    store
        .add_schedule(
            NewSchedule {
                id: ScheduleId::from_u128(1),
                session_id: session(0),
                first_due_ms: when.first_due(set_at, minute)?,
                when,
                note: "send the report".to_owned(),
                created_by_call_id: None,
                created_at_ms: set_at,
            },
            None,
        )
        .await?;
    let model =
        ScriptedProvider::from_fn(|_: &Request, _| ScriptedStep::Respond(text_response("on it")));
    let runtime = start(store, model.clone(), NOW_MS).await?;
    let run = within("the wake-up fired at boot", async {
        loop {
            let runs = store.list_session_runs(session(0)).await?;
            if let Some(run) = runs.iter().find(|run| run.status == RunStatus::Succeeded) {
                return anyhow::Ok(run.clone());
            }
            actix::clock::sleep(std::time::Duration::from_millis(20)).await;
        }
    })
    .await?;
    drop(runtime);
    let runs = store.list_session_runs(session(0)).await?;
    assert_eq!(runs.len(), 1, "one firing for the three missed: {runs:?}");
    let notice = user_text(&model.requests()[0], "<scheduled_wakeup").unwrap_or_default();
    assert!(notice.contains("missed=\"2\""), "{notice}");
    assert!(notice.contains("once for 3 occurrences"), "{notice}");
    // 2.5 minutes late, and the little the boot took.
    assert!(notice.contains("late_by_seconds=\"15"), "{notice}");
    let [row] = &store.list_schedules(session(0)).await?[..] else {
        panic!("the wake-up goes on");
    };
    assert_eq!(row.fired, 1);
    assert_eq!(row.next_due_at_ms, Some(set_at + 4 * minute));
    assert_eq!(run.queue, seed_events::Queue::Background);
    Ok(())
}

/// A session has at most `per_session_max` wake-ups still to fire; one more is refused, and
/// nothing is set.
#[actix::test]
async fn a_wake_up_past_the_sessions_most_is_refused() -> anyhow::Result<()> {
    let fixture = Fixture::new(1).await?;
    let store = &fixture.store;
    let verb = Schedule {
        per_session_max: 2,
        ..quick_schedule()
    };
    for idx in 0..3 {
        let mut context = common::verb_context(store, session(0));
        context.tool_call_id = format!("call-{idx}");
        let output = verb
            .call(context, json!({"note": "n", "delay_seconds": 60}))
            .await;
        assert_eq!(output.is_error, idx == 2, "{idx}: {output:?}");
        if idx == 2 {
            assert_eq!(
                output.content,
                "this session has 2 wake-ups still to fire, the most it may have; cancel one \
                 with unschedule first"
            );
        }
    }
    assert_eq!(store.list_schedules(session(0)).await?.len(), 2);
    Ok(())
}
