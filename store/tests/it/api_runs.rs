//! The run APIs the actors drive: a user's message with its run in one transaction, the boot
//! sweep's requeue, ending a run once, what waits in a session's queue, sessions with open runs.

use crate::common;

use crate::common::{Fixture, user_message};
use futures::executor::block_on;
use seed_events::{EventId, Queue, RunId, RunStatus, SessionId};
use seed_store::{BatchMode, ClaimFor, NewRun, Refusal, RunClosing, RunRow, Store};

const MODES: [BatchMode; 2] = [BatchMode::Optimistic, BatchMode::Savepoint];

fn run(idx: u128, session_id: SessionId, user_event_ids: &[i64]) -> NewRun {
    NewRun {
        id: RunId::from_u128(idx),
        session_id,
        queue: Queue::Interactive,
        user_event_ids: user_event_ids.iter().copied().map(EventId).collect(),
        parent_run_id: None,
        typed: false,
        created_at_ms: idx as i64,
    }
}

/// Rows in the whole database, read behind the store's back: (log events, runs).
fn n_rows(fixture: &Fixture) -> anyhow::Result<(i64, i64)> {
    let n_events = fixture.raw_i64("SELECT COUNT(*) FROM session_events", &[])?;
    let n_runs = fixture.raw_i64("SELECT COUNT(*) FROM runs", &[])?;
    Ok((n_events, n_runs))
}

fn statuses(runs: &[RunRow]) -> Vec<(RunId, RunStatus)> {
    runs.iter().map(|run| (run.id, run.status)).collect()
}

#[test]
fn send_user_message_writes_the_event_and_its_run_in_one_transaction() -> anyhow::Result<()> {
    for mode in MODES {
        let fixture = Fixture::with(|config| config.batch_mode = mode)?;
        let sessions = fixture.create_sessions(2)?;
        let store = &fixture.store;
        block_on(store.append_events(sessions[0], vec![user_message("earlier")]))?;

        let (event, run) = block_on(store.send_user_message(
            sessions[0],
            user_message("hello"),
            RunId::from_u128(10),
            Queue::Interactive,
            500,
            None,
        ))?;
        assert_eq!(event.seq, 2, "the next seq, as append_events assigns it");
        assert_eq!(event.content, serde_json::json!({ "text": "hello" }));
        assert_eq!(run.id, RunId::from_u128(10));
        assert_eq!(run.session_id, sessions[0]);
        assert_eq!(run.queue, Queue::Interactive);
        assert_eq!(run.status, RunStatus::Queued);
        assert_eq!(run.user_event_ids, [event.id], "the run names the event");
        assert_eq!((run.created_at_ms, run.updated_at_ms), (500, 500));
        assert_eq!(block_on(store.read_events(sessions[0], 2, 2, 10))?, [event]);
        assert_eq!(block_on(store.list_session_runs(sessions[0]))?, [run]);
        let session = block_on(store.get_session(sessions[0]))?.expect("session 0");
        assert_eq!(session.updated_at_ms, 500);

        // The run is refused (its id is taken) after the event went in: the event goes too.
        let error = block_on(store.send_user_message(
            sessions[0],
            user_message("again"),
            RunId::from_u128(10),
            Queue::Interactive,
            600,
            None,
        ))
        .expect_err("a duplicate run id was accepted");
        assert!(
            matches!(error.refusal(), Some(Refusal::Duplicate { .. })),
            "{error:?}"
        );
        assert_eq!(block_on(store.last_seq(sessions[0]))?, 2);
        assert_eq!(block_on(store.list_session_runs(sessions[0]))?.len(), 1);
        let session = block_on(store.get_session(sessions[0]))?.expect("session 0");
        assert_eq!(
            session.updated_at_ms, 500,
            "a refused call does not touch the session"
        );
        assert_eq!(n_rows(&fixture)?, (2, 1));

        // A deleted session refuses both rows.
        assert!(block_on(store.delete_session(sessions[1], 1))?);
        let error = block_on(store.send_user_message(
            sessions[1],
            user_message("late"),
            RunId::from_u128(11),
            Queue::Interactive,
            700,
            None,
        ))
        .expect_err("a message for a deleted session was accepted");
        assert_eq!(error.refusal(), Some(&Refusal::SessionDeleted));
        assert!(error.to_string().contains(&sessions[1].to_string()));
        assert_eq!(block_on(store.get_run(RunId::from_u128(11)))?, None);
        assert!(block_on(store.list_session_runs(sessions[1]))?.is_empty());
        assert_eq!(n_rows(&fixture)?, (2, 1), "nothing half-written");
        // So does one with a claim (on PostgreSQL its insert goes with the claim's checks).
        let error = block_on(store.send_user_message(
            sessions[1],
            user_message("late, claimed"),
            RunId::from_u128(12),
            Queue::Interactive,
            800,
            Some(ClaimFor::unshared("node-a")),
        ))
        .expect_err("a claimed message for a deleted session was accepted");
        assert_eq!(error.refusal(), Some(&Refusal::SessionDeleted));
        assert_eq!(block_on(store.get_run(RunId::from_u128(12)))?, None);
        assert_eq!(n_rows(&fixture)?, (2, 1), "nothing half-written");
    }
    Ok(())
}

#[test]
fn a_refused_send_user_message_in_a_group_fails_alone() -> anyhow::Result<()> {
    for mode in MODES {
        let fixture = Fixture::with(|config| config.batch_mode = mode)?;
        let sessions = fixture.create_sessions(2)?;
        let store = &fixture.store;
        block_on(store.send_user_message(
            sessions[0],
            user_message("first"),
            RunId::from_u128(1),
            Queue::Interactive,
            10,
            None,
        ))?;

        let hold = store.hold_writer()?;
        let outcomes = std::thread::scope(|scope| {
            let send = |session_id: SessionId, run_idx: u128| {
                scope.spawn(move || {
                    block_on(store.send_user_message(
                        session_id,
                        user_message("grouped"),
                        RunId::from_u128(run_idx),
                        Queue::Interactive,
                        20,
                        None,
                    ))
                })
            };
            let handles = [
                send(sessions[1], 2),
                send(sessions[0], 1),
                send(sessions[0], 3),
            ];
            while store.queued_writes() < 3 {
                std::thread::yield_now();
            }
            drop(hold);
            handles.map(|handle| handle.join().expect("sender panicked"))
        });
        let [first, duplicate, third] = outcomes;
        assert_eq!(first?.0.seq, 1);
        assert!(
            duplicate.is_err(),
            "a duplicate run id committed in a group"
        );
        let (event, run) = third?;
        assert_eq!(event.seq, 2, "the refused job's event took no seq");
        assert_eq!(run.user_event_ids, [event.id]);
        assert_eq!(block_on(store.last_seq(sessions[0]))?, 2);
        assert_eq!(n_rows(&fixture)?, (3, 3));
    }
    Ok(())
}

#[test]
fn requeue_returns_running_runs_to_the_queue_and_leaves_the_others() -> anyhow::Result<()> {
    let fixture = Fixture::new()?;
    let sessions = fixture.create_sessions(3)?;
    let store = &fixture.store;
    for (idx, session_id) in sessions.iter().enumerate() {
        block_on(store.enqueue_run(run(idx as u128 + 1, *session_id, &[])))?;
    }
    block_on(store.enqueue_run(run(4, sessions[0], &[])))?;
    // Runs 1, 2 and 3 start; 4 waits behind 1. Then 2 succeeds and 3 parks.
    for now_ms in 100..103 {
        block_on(store.claim_next_run(Queue::Interactive, "boot-a", now_ms))?
            .expect("a run to claim");
    }
    block_on(store.set_run_status(RunId::from_u128(2), RunStatus::Succeeded, None, 110))?;
    block_on(store.set_run_status(RunId::from_u128(3), RunStatus::Parked, None, 111))?;

    let swept = block_on(store.requeue_running_runs(200, 5))?;
    assert!(swept.given_up.is_empty());
    let requeued = swept.requeued;
    assert_eq!(
        statuses(&requeued),
        [(RunId::from_u128(1), RunStatus::Queued)]
    );
    let requeued = &requeued[0];
    assert_eq!(requeued.owner, None, "owner cleared");
    assert_eq!(requeued.attempts, 1, "attempts kept");
    assert_eq!(requeued.updated_at_ms, 200);
    assert_eq!(
        block_on(store.get_run(requeued.id))?.as_ref(),
        Some(requeued)
    );
    assert!(block_on(store.list_running_runs())?.is_empty());
    let after = |idx| block_on(store.get_run(RunId::from_u128(idx)));
    assert_eq!(after(2)?.map(|run| run.status), Some(RunStatus::Succeeded));
    assert_eq!(after(3)?.map(|run| run.status), Some(RunStatus::Parked));
    assert_eq!(after(4)?.map(|run| run.updated_at_ms), Some(4), "untouched");

    // Nothing left running: a second sweep finds nothing. The requeued run is claimed again.
    assert_eq!(
        block_on(store.requeue_running_runs(300, 5))?,
        seed_store::Swept::default()
    );
    let claimed = block_on(store.claim_next_run(Queue::Interactive, "boot-b", 301))?
        .expect("the requeued run");
    assert_eq!((claimed.id, claimed.attempts), (RunId::from_u128(1), 2));
    Ok(())
}

#[test]
fn a_run_found_cut_off_by_more_sweeps_than_the_limit_is_given_up_and_left_running()
-> anyhow::Result<()> {
    let fixture = Fixture::new()?;
    let sessions = fixture.create_sessions(2)?;
    let store = &fixture.store;
    // Run 1 is cut off at every boot; run 2 is cut off once, by the last one. A sweep may
    // queue a run again `restarts_max` times.
    block_on(store.enqueue_run(run(1, sessions[0], &[])))?;
    block_on(store.enqueue_run(run(2, sessions[1], &[])))?;
    let restarts_max = 2;
    for boot_idx in 0..restarts_max {
        let boot = format!("boot-{boot_idx}");
        let claimed = block_on(store.claim_next_run(Queue::Interactive, &boot, 100))?
            .expect("run 1 is claimed");
        assert_eq!(claimed.id, RunId::from_u128(1));
        let swept = block_on(store.requeue_running_runs(200, restarts_max))?;
        assert_eq!(statuses(&swept.requeued), [(claimed.id, RunStatus::Queued)]);
        assert!(swept.given_up.is_empty(), "cut off {} times", boot_idx + 1);
        assert_eq!(
            block_on(store.get_run(claimed.id))?.as_ref(),
            swept.requeued.first(),
            "the sweep returns the run as it stored it"
        );
    }
    for now_ms in 300..302 {
        block_on(store.claim_next_run(Queue::Interactive, "boot-last", now_ms))?
            .expect("a run to claim");
    }
    let swept = block_on(store.requeue_running_runs(400, restarts_max))?;
    assert_eq!(
        statuses(&swept.requeued),
        [(RunId::from_u128(2), RunStatus::Queued)]
    );
    assert_eq!(
        statuses(&swept.given_up),
        [(RunId::from_u128(1), RunStatus::Running)]
    );
    // It stays running, so its session starts nothing else, until the runtime fails it.
    let given_up = &swept.given_up[0];
    assert_eq!(given_up.attempts, restarts_max + 1, "claimed at each boot");
    assert_eq!(
        block_on(store.get_run(given_up.id))?.as_ref(),
        Some(given_up)
    );
    assert_eq!(
        block_on(store.list_running_runs())?
            .iter()
            .map(|run| run.id)
            .collect::<Vec<_>>(),
        [given_up.id]
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
    block_on(store.enqueue_run(run(1, session_id, &[])))?;
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

#[test]
fn queued_event_ids_and_open_sessions_follow_run_states() -> anyhow::Result<()> {
    let fixture = Fixture::new()?;
    let sessions = fixture.create_sessions(4)?;
    let store: &Store = &fixture.store;
    block_on(store.enqueue_run(run(1, sessions[0], &[11])))?;
    block_on(store.enqueue_run(run(2, sessions[0], &[21, 22])))?;
    block_on(store.enqueue_run(run(3, sessions[0], &[31])))?;
    block_on(store.enqueue_run(run(4, sessions[1], &[41])))?;
    block_on(store.enqueue_run(run(5, sessions[2], &[51])))?;
    block_on(store.enqueue_run(run(6, sessions[3], &[61])))?;
    assert_eq!(
        block_on(store.list_sessions_with_open_runs())?,
        &sessions[..],
        "every session waits, in the order of its oldest open run"
    );

    // Session 0: run 1 runs, run 3 is canceled; only run 2 still waits its turn.
    let claimed = block_on(store.claim_next_run(Queue::Interactive, "boot-a", 100))?;
    assert_eq!(claimed.map(|run| run.id), Some(RunId::from_u128(1)));
    block_on(store.finish_run(RunId::from_u128(3), RunStatus::Canceled, None, 101))?;
    assert_eq!(
        block_on(store.queued_event_ids(sessions[0]))?,
        [EventId(21), EventId(22)]
    );
    // Session 1: its run parks, so nothing is queued, but the session is still open.
    block_on(store.finish_run(RunId::from_u128(4), RunStatus::Parked, None, 102))?;
    assert!(block_on(store.queued_event_ids(sessions[1]))?.is_empty());
    // Session 2: its run ends. Session 3: its run fails.
    block_on(store.finish_run(RunId::from_u128(5), RunStatus::Succeeded, None, 103))?;
    block_on(store.finish_run(RunId::from_u128(6), RunStatus::Failed, None, 104))?;
    assert!(block_on(store.queued_event_ids(sessions[2]))?.is_empty());
    assert!(block_on(store.queued_event_ids(SessionId::from_u128(77)))?.is_empty());

    assert_eq!(
        block_on(store.list_sessions_with_open_runs())?,
        [sessions[0], sessions[1]]
    );
    // Running and parked both keep a session open; when everything ends, none is.
    block_on(store.finish_run(RunId::from_u128(1), RunStatus::Succeeded, None, 110))?;
    block_on(store.finish_run(RunId::from_u128(2), RunStatus::Succeeded, None, 111))?;
    assert_eq!(
        block_on(store.list_sessions_with_open_runs())?,
        [sessions[1]]
    );
    block_on(store.finish_run(RunId::from_u128(4), RunStatus::Succeeded, None, 112))?;
    assert!(block_on(store.list_sessions_with_open_runs())?.is_empty());
    Ok(())
}

#[test]
fn a_claim_of_both_queues_takes_each_runs_lease_and_passes_over_a_session_leased_elsewhere()
-> anyhow::Result<()> {
    let fixture = Fixture::new()?;
    let sessions = fixture.create_sessions(3)?;
    let store = &fixture.store;
    block_on(store.enqueue_run(run(1, sessions[0], &[])))?;
    block_on(store.enqueue_run(run(2, sessions[1], &[])))?;
    block_on(store.enqueue_run(NewRun {
        queue: Queue::Background,
        ..run(3, sessions[2], &[])
    }))?;
    // Another process holds session 1's lease.
    let held = block_on(store.acquire_lease(sessions[1], "boot-other", None, 5))?;
    assert!(matches!(held, seed_store::LeaseOutcome::Acquired(_)));

    let claimed = block_on(store.claim_runs_of_queues(
        vec![(Queue::Interactive, 8), (Queue::Background, 8)],
        ClaimFor::unshared("boot-a"),
        10,
    ))?;
    assert_eq!(
        statuses(&claimed),
        [
            (RunId::from_u128(1), RunStatus::Running),
            (RunId::from_u128(3), RunStatus::Running)
        ]
    );
    for (session_id, run_idx) in [(sessions[0], 1), (sessions[2], 3)] {
        let lease = block_on(store.get_lease(session_id))?.expect("a lease");
        assert_eq!(lease.owner, "boot-a");
        assert_eq!(lease.run_id, Some(RunId::from_u128(run_idx)));
    }
    let waiting = block_on(store.get_run(RunId::from_u128(2)))?.expect("run 2");
    assert_eq!(waiting.status, RunStatus::Queued);

    // Once that lease is let go, the run is claimed with it.
    assert!(block_on(store.release_lease(sessions[1], "boot-other"))?);
    let claimed = block_on(store.claim_runs_of_queues(
        vec![(Queue::Interactive, 8)],
        ClaimFor::unshared("boot-a"),
        20,
    ))?;
    assert_eq!(
        statuses(&claimed),
        [(RunId::from_u128(2), RunStatus::Running)]
    );
    let lease = block_on(store.get_lease(sessions[1]))?.expect("a lease");
    assert_eq!(
        (lease.owner.as_str(), lease.run_id),
        ("boot-a", Some(RunId::from_u128(2)))
    );
    Ok(())
}

#[test]
fn a_child_starts_with_its_session_its_task_and_its_run_as_stored() -> anyhow::Result<()> {
    let fixture = Fixture::new()?;
    let parent = fixture.create_sessions(1)?[0];
    let store = &fixture.store;
    let (_, parent_run) = block_on(store.send_user_message(
        parent,
        user_message("delegate"),
        RunId::from_u128(1),
        Queue::Interactive,
        100,
        None,
    ))?;
    let child_id = SessionId::from_u128(0xc41d);
    let mut child = seed_store::NewSession::new(child_id, common::account(), 200);
    child.parent_session_id = Some(parent);
    let child_run = NewRun {
        queue: Queue::Background,
        parent_run_id: Some(parent_run.id),
        typed: true,
        ..run(2, child_id, &[])
    };
    let (task, started) = block_on(store.start_child(child, user_message("a task"), child_run))?;
    assert_eq!(
        started.user_event_ids,
        [task.id],
        "the run answers its task"
    );
    // What the call returns is the stored run, defaults and all.
    assert_eq!(block_on(store.get_run(started.id))?, Some(started.clone()));
    assert_eq!(block_on(store.list_session_runs(child_id))?, [started]);
    assert_eq!(block_on(store.read_events(child_id, 1, 1, 1))?, [task]);
    Ok(())
}

#[test]
fn a_message_claims_its_run_at_once_only_when_it_is_the_queues_next_and_the_session_is_free()
-> anyhow::Result<()> {
    let fixture = Fixture::new()?;
    let sessions = fixture.create_sessions(4)?;
    let store = &fixture.store;
    let send = |session_id, idx: u128| {
        block_on(store.send_user_message(
            session_id,
            user_message("hello"),
            RunId::from_u128(idx),
            Queue::Interactive,
            100 + idx as i64,
            Some(ClaimFor::unshared("boot-a")),
        ))
    };

    // A free session: the run starts claimed, with the session's lease, as stored.
    let (_, first) = send(sessions[0], 1)?;
    assert_eq!(first.status, RunStatus::Running);
    assert_eq!(
        (first.owner.as_deref(), first.attempts),
        (Some("boot-a"), 1)
    );
    assert_eq!(block_on(store.get_run(first.id))?, Some(first.clone()));
    let lease = block_on(store.get_lease(sessions[0]))?.expect("the session's lease");
    assert_eq!(
        (lease.owner.as_str(), lease.run_id),
        ("boot-a", Some(first.id))
    );

    // A run in flight: the next message's run waits in the queue.
    let (_, second) = send(sessions[0], 2)?;
    assert_eq!(second.status, RunStatus::Queued);
    assert_eq!(second.owner, None);
    // Its turn over, the session is free, but the queued run comes first: a third message
    // does not overtake it.
    block_on(store.finish_run_releasing(RunClosing {
        run_id: first.id,
        status: RunStatus::Succeeded,
        result: None,
        now_ms: 150,
        delivery: None,
        lease: Some((sessions[0], "boot-a".to_owned())),
        plan_check: None,
        notice: None,
    }))?;
    let (_, third) = send(sessions[0], 3)?;
    assert_eq!(third.status, RunStatus::Queued);
    let claimed = block_on(store.claim_next_run(Queue::Interactive, "boot-a", 160))?;
    assert_eq!(claimed.map(|run| run.id), Some(second.id));

    // A lease someone else holds (another process) keeps the run queued too.
    block_on(store.acquire_lease(sessions[1], "boot-z", None, 90))?;
    let (_, held) = send(sessions[1], 4)?;
    assert_eq!(held.status, RunStatus::Queued);

    // Without a claim, a message only queues its run, as before.
    let (_, plain) = block_on(store.send_user_message(
        sessions[2],
        user_message("hello"),
        RunId::from_u128(5),
        Queue::Interactive,
        200,
        None,
    ))?;
    assert_eq!(plain.status, RunStatus::Queued);
    assert_eq!(block_on(store.get_lease(sessions[2]))?, None);

    // Fair between sessions: that older run could start, so a message to another free session
    // does not overtake it; the queue's claim takes the older one first.
    let (_, later) = send(sessions[3], 6)?;
    assert_eq!(later.status, RunStatus::Queued, "it waits behind run 5");
    // (The queue's claims, as the runtime makes them: a run whose session's lease another
    // holds stays queued.)
    let claim = |now_ms| {
        block_on(store.claim_runs_of_queues(
            vec![(Queue::Interactive, 1)],
            ClaimFor::unshared("boot-a"),
            now_ms,
        ))
    };
    let claimed = claim(210)?;
    assert_eq!(statuses(&claimed), [(plain.id, RunStatus::Running)]);
    // Older runs that cannot start (their sessions busy or leased elsewhere) do not hold a
    // message back.
    let claimed = claim(220)?;
    assert_eq!(statuses(&claimed), [(later.id, RunStatus::Running)]);
    block_on(store.finish_run_releasing(RunClosing {
        run_id: later.id,
        status: RunStatus::Succeeded,
        result: None,
        now_ms: 230,
        delivery: None,
        lease: Some((sessions[3], "boot-a".to_owned())),
        plan_check: None,
        notice: None,
    }))?;
    let (_, free) = send(sessions[3], 7)?;
    assert_eq!(free.status, RunStatus::Running);
    Ok(())
}

/// A second account, B (the fixture's is A), with one session: the session.
fn account_b_session(store: &seed_store::Store) -> anyhow::Result<SessionId> {
    let account_b = seed_events::AccountId::from_u128(0xb);
    block_on(store.create_account(account_b, vec![4, 5, 6], 0))?;
    let b_session = SessionId::from_u128(0xb0);
    block_on(store.create_session(seed_store::NewSession::new(b_session, account_b, 0)))?;
    Ok(b_session)
}

/// Claims share the runs in flight between accounts: each claim goes to the account with the
/// fewest runs in flight (the older run on a tie), so an account whose runs were queued later
/// is not served after all of another's; an account with its share in flight has none
/// claimed, by the queue or with its message, until one of its runs ends.
#[test]
fn claims_go_to_the_account_with_the_fewest_runs_in_flight_up_to_its_share() -> anyhow::Result<()> {
    let fixture = Fixture::new()?;
    let store = &fixture.store;
    // Account A (the fixture's) with five sessions, each a queued run; then account B's one.
    let a_sessions = fixture.create_sessions(5)?;
    for (idx, session_id) in (1..).zip(&a_sessions) {
        block_on(store.enqueue_run(run(idx, *session_id, &[])))?;
    }
    let b_session = account_b_session(store)?;
    block_on(store.enqueue_run(run(10, b_session, &[])))?;
    let shared = ClaimFor {
        owner: "boot-a".to_owned(),
        account_runs_max: 2,
        room: 0,
    };
    let claim = |max: usize, now_ms: i64| {
        block_on(store.claim_runs_of_queues(
            vec![(Queue::Interactive, max)],
            shared.clone(),
            now_ms,
        ))
        .map(|claimed| claimed.iter().map(|run| run.id).collect::<Vec<_>>())
    };
    let ids = |idxs: &[u128]| {
        idxs.iter()
            .map(|idx| RunId::from_u128(*idx))
            .collect::<Vec<_>>()
    };

    // A's first run (a tie at none in flight, and older), B's (fewer in flight), A's second;
    // then A holds its share, and nothing else waits.
    assert_eq!(claim(8, 10)?, ids(&[1, 10, 2]));
    assert_eq!(claim(8, 11)?, ids(&[]));
    // A person's message of A's waits too, though a slot is held for it.
    let (_, waiting) = block_on(store.send_user_message(
        a_sessions[4],
        user_message("one more"),
        RunId::from_u128(20),
        Queue::Interactive,
        12,
        Some(shared.clone()),
    ))?;
    assert_eq!(waiting.status, RunStatus::Queued);

    // One of A's runs ends: its next run, in the order they were queued, takes the share.
    assert!(block_on(store.finish_run(
        RunId::from_u128(1),
        RunStatus::Succeeded,
        None,
        13
    ))?);
    assert_eq!(claim(8, 14)?, ids(&[3]));
    // Without a share, A's other runs (the message's after those queued before it) start.
    assert_eq!(
        block_on(store.claim_runs_of_queues(
            vec![(Queue::Interactive, 8)],
            ClaimFor::unshared("boot-a"),
            15,
        ))?
        .iter()
        .map(|run| run.id)
        .collect::<Vec<_>>(),
        ids(&[4, 5])
    );
    Ok(())
}

/// A person's message starts its run at once, past runs queued before it that could start,
/// when the claim has room for every queued run besides it: none of them waits for it. With
/// less room, or none counted, it queues behind them; behind a queued run of its own session it
/// queues whatever the room; with a share per account, it queues behind queued runs of its own
/// account when starting would leave them no share.
#[test]
fn a_message_starts_at_once_past_queued_runs_when_they_all_fit_in_the_room() -> anyhow::Result<()> {
    let fixture = Fixture::new()?;
    let store = &fixture.store;
    let sessions = fixture.create_sessions(5)?;
    // Two runs queued, each of a free session: either could start.
    for idx in [1, 2] {
        block_on(store.enqueue_run(run(idx, sessions[idx as usize - 1], &[])))?;
    }
    let send = |session: SessionId, idx: u128, claim: ClaimFor| {
        block_on(store.send_user_message(
            session,
            user_message("hello"),
            RunId::from_u128(idx),
            Queue::Interactive,
            10,
            Some(claim),
        ))
        .map(|(_, run)| run.status)
    };
    let with_room = |room: usize| ClaimFor {
        room,
        ..ClaimFor::unshared("boot-a")
    };
    assert_eq!(
        send(sessions[2], 3, with_room(1))?,
        RunStatus::Queued,
        "room for one of the two queued: it waits behind them"
    );
    assert_eq!(
        send(sessions[3], 4, with_room(3))?,
        RunStatus::Running,
        "room for the three queued: it starts at once"
    );
    assert_eq!(
        send(sessions[4], 5, with_room(0))?,
        RunStatus::Queued,
        "no room counted: it waits behind them"
    );
    assert_eq!(
        send(sessions[0], 6, with_room(100))?,
        RunStatus::Queued,
        "its own session's queued run starts first, whatever the room"
    );
    let claimed = block_on(store.claim_runs_of_queues(
        vec![(Queue::Interactive, 8)],
        ClaimFor::unshared("boot-a"),
        20,
    ))?;
    assert_eq!(
        claimed.iter().map(|run| run.id).collect::<Vec<_>>(),
        [1, 2, 3, 5].map(RunId::from_u128),
        "the queued runs start in the order they were queued"
    );

    // A share per account (2 runs): a run of the account A queued, one that could start, and
    // room for it. A's message starts while A's share still holds the queued run besides it;
    // A's next waits behind it, since starting would leave it no share; B's starts.
    let fixture = Fixture::new()?;
    let store = &fixture.store;
    let a_sessions = fixture.create_sessions(3)?;
    block_on(store.enqueue_run(run(1, a_sessions[0], &[])))?;
    let b_session = account_b_session(store)?;
    let shared = ClaimFor {
        owner: "boot-a".to_owned(),
        account_runs_max: 2,
        room: 8,
    };
    let send = |session: SessionId, idx: u128| {
        block_on(store.send_user_message(
            session,
            user_message("hello"),
            RunId::from_u128(idx),
            Queue::Interactive,
            10,
            Some(shared.clone()),
        ))
        .map(|(_, run)| run.status)
    };
    assert_eq!(send(a_sessions[1], 2)?, RunStatus::Running);
    assert_eq!(send(a_sessions[2], 3)?, RunStatus::Queued);
    assert_eq!(send(b_session, 4)?, RunStatus::Running);
    Ok(())
}

/// A traced turn's first commit keeps its run's `traceparent` (in its own transaction, by
/// construction: one closure of the writer), with or without log events.
#[test]
fn a_commit_keeps_its_runs_traceparent_with_or_without_log_events() -> anyhow::Result<()> {
    const TRACEPARENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    let fixture = Fixture::new()?;
    let store = &fixture.store;
    let sessions = fixture.create_sessions(1)?;
    let session = sessions[0];
    for idx in [1, 2] {
        block_on(store.enqueue_run(run(idx, session, &[])))?;
    }
    let files = store.session_files(session);
    let line = |text: &str| seed_durable::Append::new(seed_durable::FileName::Entries, text);
    let kept = |idx: u128| -> anyhow::Result<Option<String>> {
        Ok(block_on(store.get_run(RunId::from_u128(idx)))?
            .expect("the run")
            .trace_parent)
    };
    let projection = seed_store::Projection {
        session_id: session,
        events: vec![seed_events::NewEvent::message(
            seed_events::EventRole::Assistant,
            "agent",
            serde_json::json!({ "text": "the answer" }),
            7,
        )],
        delivered_calls: Vec::new(),
    };
    let written = block_on(files.commit_projecting_traced(
        vec![line("entry 1")],
        Some(projection),
        Some((RunId::from_u128(1), TRACEPARENT.to_owned())),
    ))?;
    assert_eq!(
        written.len(),
        1,
        "the events are written as without a trace"
    );
    assert_eq!(kept(1)?.as_deref(), Some(TRACEPARENT));

    // Lines alone carry the traceparent too.
    let written = block_on(files.commit_projecting_traced(
        vec![line("entry 2")],
        None,
        Some((RunId::from_u128(2), TRACEPARENT.to_owned())),
    ))?;
    assert!(written.is_empty());
    assert_eq!(kept(2)?.as_deref(), Some(TRACEPARENT));
    let entries = block_on(seed_durable::DurableFs::read(
        &files,
        seed_durable::FileName::Entries,
    ))?;
    assert_eq!(entries, ["entry 1", "entry 2"]);

    Ok(())
}

/// On PostgreSQL, a read whose pooled connection the server cut off since its last statement
/// is answered all the same: it runs again on a connection opened anew. (Each connection the
/// database closed while it was away failed one caller after it came back.)
#[test]
fn a_read_whose_connection_the_server_cut_off_is_answered() -> anyhow::Result<()> {
    let fixture = Fixture::new()?;
    if fixture.database.is_none() {
        eprintln!("PostgreSQL's: SQLite's connections are files");
        return Ok(());
    }
    let store = &fixture.store;
    let sessions = fixture.create_sessions(1)?;
    block_on(store.enqueue_run(run(1, sessions[0], &[])))?;
    for round in 0..20 {
        // Every reader has read (each has the statement prepared), then is cut off.
        for _ in 0..8 {
            assert!(block_on(store.get_run(RunId::from_u128(1)))?.is_some());
        }
        fixture.raw_batch(
            "",
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity
             WHERE datname = current_database() AND pid <> pg_backend_pid()
                 AND backend_type = 'client backend'",
        )?;
        for _ in 0..8 {
            let read = block_on(store.get_run(RunId::from_u128(1)));
            assert!(
                matches!(read, Ok(Some(_))),
                "round {round}: a read after the cut: {read:?}"
            );
        }
    }
    Ok(())
}

/// A person's message with a claim for a node: its event and the checks of whether its run
/// starts at once take one trip to the database together on PostgreSQL (the session's row
/// taken by its id, the event's insert, the claim's locks, whether the session is free and the
/// accounts with queued runs), whether the run starts or queues behind one that waits; then
/// the group's commit.
#[test]
fn a_message_and_its_claim_wait_on_the_database_a_trip_each() -> anyhow::Result<()> {
    let fixture = Fixture::new()?;
    let sessions = fixture.create_sessions(4)?;
    let store = &fixture.store;
    let claim = ClaimFor::unshared("node-a");
    let round_trips = || common::writer_round_trips(store);
    let send = |idx: u128, session: SessionId| -> anyhow::Result<(RunStatus, u64)> {
        let before = round_trips();
        let (_, run) = block_on(store.send_user_message(
            session,
            user_message(&format!("message {idx}")),
            RunId::from_u128(idx),
            Queue::Interactive,
            idx as i64,
            Some(claim.clone()),
        ))?;
        Ok((run.status, round_trips() - before))
    };
    // The first of each kind prepares the statements: a run that starts, one that queues, one
    // that starts past another waiting.
    send(1, sessions[0])?;
    send(2, sessions[0])?;
    send(3, sessions[1])?;
    // Session 2 is free, and session 0's queued run could not start: this one starts.
    let starts_past_one_waiting = send(4, sessions[2])?;
    // Session 1's run is running: this one queues.
    let queues = send(5, sessions[1])?;
    // Nothing waits once the queued runs are canceled; session 3 is free: its run starts.
    for run_id in [2, 5] {
        block_on(store.finish_run(RunId::from_u128(run_id), RunStatus::Canceled, None, 10))?;
    }
    let starts = send(6, sessions[3])?;
    // On PostgreSQL: the event with the claim's checks (1), the commit (1); past a waiting run,
    // whether it could start instead (1). A debug build checks the log's marks with two
    // queries of its own. SQLite waits on no server.
    let (trip, debug) = match common::on_postgres() {
        true => (1, 2 * u64::from(cfg!(debug_assertions))),
        false => (0, 0),
    };
    assert_eq!(
        [starts_past_one_waiting, queues, starts],
        [
            (RunStatus::Running, 3 * trip + debug),
            (RunStatus::Queued, 2 * trip + debug),
            (RunStatus::Running, 2 * trip + debug),
        ]
    );
    Ok(())
}
