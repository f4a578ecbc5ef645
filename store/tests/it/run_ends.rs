//! A run's end: written once, with its notice, and a later pass while its plan has steps
//! left.

use futures::executor::block_on;
use seed_events::{Queue, RunId, RunStatus};
use seed_store::{ClaimFor, LeaseOutcome, PlanCheck, RunClosing, RunEndOutcome};

use crate::common;
use crate::common::{Fixture, assistant_message as message, interactive_run, run_on as run};

/// An answered run's end with a plan check: the session's plan as it stands in the end's
/// transaction decides. Unfinished steps give the run a later pass (the turn's entries, then the
/// plan's notice, in the log; the run queued again with its pass counted up; the lease let go);
/// a finished plan ends the run; a run stopped meanwhile stays as it is, with no notice.
#[test]
fn a_runs_end_gives_it_a_later_pass_while_its_plan_has_unfinished_steps() -> anyhow::Result<()> {
    let fixture = Fixture::new()?;
    let sessions = fixture.create_sessions(3)?;
    let store = &fixture.store;
    for (idx, session) in sessions.iter().enumerate() {
        block_on(store.enqueue_run(run(idx as u128 + 1, *session, Queue::Interactive)))?;
    }
    let claimed = block_on(store.claim_runs_of_queues(
        vec![(Queue::Interactive, 3)],
        ClaimFor::unshared("boot-a"),
        10,
    ))?;
    assert_eq!(claimed.len(), 3);
    let open_plan = serde_json::json!([
        {"step": "read", "done": true},
        {"step": "write", "done": false}
    ]);
    let done_plan = serde_json::json!([{"step": "read", "done": true}]);
    block_on(store.set_session_plan(sessions[0], Some(open_plan.clone()), 11))?;
    block_on(store.set_session_plan(sessions[1], Some(done_plan), 11))?;
    block_on(store.set_session_plan(sessions[2], Some(open_plan), 11))?;
    // The check is given the plan the store holds; its notice names the open steps.
    let check = |session_id| PlanCheck {
        session_id,
        notice: std::sync::Arc::new(|plan: Option<&serde_json::Value>| {
            let open: Vec<String> = plan?
                .as_array()?
                .iter()
                .filter(|step| step["done"] != true)
                .filter_map(|step| step["step"].as_str().map(str::to_owned))
                .collect();
            (!open.is_empty()).then(|| {
                let mut notice = message(&open.join(", "), None);
                notice.kind = "notice".to_owned();
                notice
            })
        }),
    };
    // The turn's answer is in the log (its commit wrote it); then the run's end.
    let end = |idx: u128, session_id, delivery| -> anyhow::Result<RunEndOutcome> {
        block_on(store.append_events(session_id, vec![message("the answer", Some(4))]))?;
        Ok(block_on(store.finish_run_releasing(RunClosing {
            run_id: RunId::from_u128(idx),
            status: RunStatus::Succeeded,
            result: Some(serde_json::json!({"answer": "done"})),
            now_ms: 12,
            delivery,
            lease: Some((session_id, "boot-a".to_owned())),
            plan_check: Some(check(session_id)),
            notice: None,
        }))?)
    };
    let log_of = |session_id| -> anyhow::Result<Vec<(String, String)>> {
        Ok(
            block_on(store.read_events(session_id, 1, i64::MAX, usize::MAX))?
                .into_iter()
                .map(|event| (event.kind, event.content["text"].to_string()))
                .collect(),
        )
    };
    let message_row = ("message".to_owned(), "\"the answer\"".to_owned());

    // Unfinished steps: a later pass, and the end's delivery (as a child's would be, here to
    // the second session's run) is not made: that session's log below holds no result.
    let delivery = seed_store::ChildDelivery {
        parent_session_id: sessions[1],
        parent_run_id: RunId::from_u128(2),
        tool_call_id: "call-1".to_owned(),
        result: message("the child's result", None),
        notice: message("the child's result, late", None),
    };
    assert_eq!(
        end(1, sessions[0], Some(delivery))?,
        RunEndOutcome::LaterPass { notice_seq: 2 }
    );
    assert_eq!(
        log_of(sessions[0])?,
        [
            message_row.clone(),
            ("notice".to_owned(), "\"write\"".to_owned())
        ]
    );
    let resumed = block_on(store.get_run(RunId::from_u128(1)))?.expect("the run");
    assert_eq!(
        (resumed.status, resumed.pass, resumed.owner),
        (RunStatus::Queued, 1, None)
    );
    assert!(matches!(
        block_on(store.acquire_lease(sessions[0], "boot-b", None, 13))?,
        LeaseOutcome::Acquired(_)
    ));

    // Every step done: the run ends, and a child's delivery with it says where its result went
    // in the parent's log (here the first session's, after its answer and notice).
    let delivery = seed_store::ChildDelivery {
        parent_session_id: sessions[0],
        parent_run_id: RunId::from_u128(1),
        tool_call_id: "call-2".to_owned(),
        result: message("the child's result", None),
        notice: message("the child's result, late", None),
    };
    assert_eq!(
        end(2, sessions[1], Some(delivery))?,
        RunEndOutcome::Ended {
            delivered_seq: Some(3),
            notice_seq: None
        }
    );
    assert_eq!(log_of(sessions[1])?, std::slice::from_ref(&message_row));
    let ended = block_on(store.get_run(RunId::from_u128(2)))?.expect("the run");
    assert_eq!((ended.status, ended.pass), (RunStatus::Succeeded, 0));

    // Stopped before its end was recorded: nothing is owed, and the run stays canceled.
    assert!(block_on(store.finish_run(
        RunId::from_u128(3),
        RunStatus::Canceled,
        None,
        12
    ))?);
    assert_eq!(end(3, sessions[2], None)?, RunEndOutcome::Unchanged);
    assert_eq!(log_of(sessions[2])?, [message_row]);
    let stopped = block_on(store.get_run(RunId::from_u128(3)))?.expect("the run");
    assert_eq!((stopped.status, stopped.pass), (RunStatus::Canceled, 0));
    Ok(())
}

/// A run's end can carry a notice for its session's log (why it ended): written with the end,
/// in its transaction, at the seq the end reports; an end that does not end the run (it had
/// ended already) writes none.
#[test]
fn a_runs_end_writes_its_notice_with_it() -> anyhow::Result<()> {
    let fixture = Fixture::new()?;
    let sessions = fixture.create_sessions(1)?;
    let store = &fixture.store;
    block_on(store.enqueue_run(run(1, sessions[0], Queue::Interactive)))?;
    block_on(store.claim_runs_of_queues(
        vec![(Queue::Interactive, 1)],
        ClaimFor::unshared("boot-a"),
        10,
    ))?;
    block_on(store.append_events(sessions[0], vec![message("before", None)]))?;
    let close = || RunClosing {
        run_id: RunId::from_u128(1),
        status: RunStatus::Failed,
        result: Some(serde_json::json!({"error": "the database refused a write: disk full"})),
        now_ms: 12,
        delivery: None,
        lease: Some((sessions[0], "boot-a".to_owned())),
        plan_check: None,
        notice: Some(message("the turn stopped", None)),
    };
    assert_eq!(
        block_on(store.finish_run_releasing(close()))?,
        RunEndOutcome::Ended {
            delivered_seq: None,
            notice_seq: Some(2)
        }
    );
    let log = block_on(store.read_events(sessions[0], 1, i64::MAX, usize::MAX))?;
    assert_eq!(log.len(), 2);
    assert_eq!(log[1].content["text"], "the turn stopped");
    // Ended already: nothing more is written.
    assert_eq!(
        block_on(store.finish_run_releasing(close()))?,
        RunEndOutcome::Unchanged
    );
    assert_eq!(
        block_on(store.read_events(sessions[0], 1, i64::MAX, usize::MAX))?.len(),
        2
    );
    Ok(())
}

/// A run's end with its lease and a plan check, and nothing else to write: one trip to the
/// database on PostgreSQL (the plan, read with the lease's release), then the group's commit,
/// which brings the answer of the run's update. The outcome says whether the run ended.
#[test]
fn a_runs_end_waits_on_the_database_for_its_plan_alone() -> anyhow::Result<()> {
    let fixture = Fixture::new()?;
    let sessions = fixture.create_sessions(2)?;
    let store = &fixture.store;
    for (idx, session) in sessions.iter().enumerate() {
        block_on(store.enqueue_run(run(idx as u128 + 1, *session, Queue::Interactive)))?;
    }
    let claimed = block_on(store.claim_runs_of_queues(
        vec![(Queue::Interactive, 2)],
        ClaimFor::unshared("boot-a"),
        10,
    ))?;
    assert_eq!(claimed.len(), 2);
    let round_trips = || common::writer_round_trips(store);
    let end = |idx: usize| -> anyhow::Result<(RunEndOutcome, u64)> {
        let before = round_trips();
        let outcome = block_on(store.finish_run_releasing(RunClosing {
            run_id: RunId::from_u128(idx as u128 + 1),
            status: RunStatus::Succeeded,
            result: Some(serde_json::json!({"answer": "done"})),
            now_ms: 12,
            delivery: None,
            lease: Some((sessions[idx], "boot-a".to_owned())),
            plan_check: Some(PlanCheck {
                session_id: sessions[idx],
                notice: std::sync::Arc::new(|_| None),
            }),
            notice: None,
        }))?;
        Ok((outcome, round_trips() - before))
    };
    let ended = RunEndOutcome::Ended {
        delivered_seq: None,
        notice_seq: None,
    };
    // The first prepares the statements.
    assert_eq!(end(0)?.0, ended);
    let trips = u64::from(common::on_postgres());
    assert_eq!(end(1)?, (ended, 2 * trips));
    // Ended already: left as it was.
    assert_eq!(end(1)?, (RunEndOutcome::Unchanged, 2 * trips));
    assert_eq!(
        block_on(store.get_run(RunId::from_u128(2)))?.map(|run| run.status),
        Some(RunStatus::Succeeded)
    );
    Ok(())
}

#[test]
fn finish_run_refuses_to_change_a_terminal_run() -> anyhow::Result<()> {
    let fixture = Fixture::new()?;
    let [session_id] = fixture.create_sessions(1)?[..] else {
        unreachable!()
    };
    let store = &fixture.store;
    let run_id = RunId::from_u128(1);
    block_on(store.enqueue_run(interactive_run(1, session_id, &[])))?;
    block_on(store.claim_next_run(Queue::Interactive, "boot-a", 10))?.expect("run 1");

    // An open run may move to another open state, and then end.
    assert!(block_on(store.finish_run(
        run_id,
        RunStatus::Parked,
        None,
        20
    ))?);
    let result = serde_json::json!({ "answer": 42 });
    assert!(block_on(store.finish_run(
        run_id,
        RunStatus::Succeeded,
        Some(result.clone()),
        30
    ))?);
    let ended = block_on(store.get_run(run_id))?.expect("run 1");
    assert_eq!(
        (ended.status, ended.result.as_ref(), ended.updated_at_ms),
        (RunStatus::Succeeded, Some(&result), 30)
    );

    // A run that ended stays ended, whatever is asked, and nothing is written.
    for status in RunStatus::ALL {
        let other = Some(serde_json::json!("other"));
        assert!(!block_on(store.finish_run(run_id, status, other, 40))?);
    }
    assert_eq!(block_on(store.get_run(run_id))?, Some(ended));
    assert!(!block_on(store.finish_run(
        RunId::from_u128(9),
        RunStatus::Failed,
        None,
        50
    ))?);

    // set_run_status is unchanged: it still moves a terminal run.
    assert!(block_on(store.set_run_status(
        run_id,
        RunStatus::Queued,
        None,
        60
    ))?);
    Ok(())
}
