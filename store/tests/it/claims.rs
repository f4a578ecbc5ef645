//! Claims: a message's run claimed with it when it may start at once (the queue's next, or
//! past queued runs that all fit in the room), the accounts' shares, both queues' claims and
//! their leases, and the round trips a claim costs on PostgreSQL.

use futures::executor::block_on;
use seed_events::{Queue, RunId, RunStatus, SessionId};
use seed_store::{ClaimFor, NewRun, RunClosing};

use crate::common;
use crate::common::{Fixture, interactive_run as run, statuses, user_message};

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

/// A run queued again with its pass started (decided on an approval, cut off by a crash) comes
/// back to a turn it may have left open: it goes before its session's older queued runs, which
/// would otherwise find that turn unsettled and abort it, and the approved call with it (the
/// spec's "same run" adopts its own turn). A run whose next pass has not started waits behind
/// it, and so does a message's new run.
#[test]
fn a_run_whose_pass_started_goes_before_its_sessions_older_queued_runs() -> anyhow::Result<()> {
    use seed_store::{ApprovalDecision, NewApproval, NewSession, ParkOutcome};

    let fixture = Fixture::new()?;
    let session = fixture.create_sessions(1)?[0];
    let store = &fixture.store;
    let claim = |now_ms| -> anyhow::Result<Option<RunId>> {
        Ok(block_on(store.claim_next_run(Queue::Interactive, "boot-a", now_ms))?.map(|run| run.id))
    };
    let succeed = |run_id, now_ms| -> anyhow::Result<bool> {
        Ok(block_on(store.finish_run(
            run_id,
            RunStatus::Succeeded,
            None,
            now_ms,
        ))?)
    };
    let (run_1, run_2, child_run) = (
        RunId::from_u128(1),
        RunId::from_u128(2),
        RunId::from_u128(9),
    );
    // Run 1 delegates, and parks on its child.
    block_on(store.enqueue_run(run(1, session, &[])))?;
    assert_eq!(claim(10)?, Some(run_1));
    let child_id = SessionId::from_u128(0xc41d);
    let mut child = NewSession::new(child_id, common::account(), 11);
    child.parent_session_id = Some(session);
    let child_of_run_1 = NewRun {
        queue: Queue::Background,
        parent_run_id: Some(run_1),
        ..run(9, child_id, &[])
    };
    block_on(store.start_child(child, user_message("a task"), child_of_run_1))?;
    assert_eq!(block_on(store.park_run(run_1, 12))?, ParkOutcome::Parked);
    // Run 2, a later message's, starts and parks on its call's approval.
    block_on(store.enqueue_run(run(2, session, &[])))?;
    assert_eq!(claim(13)?, Some(run_2));
    let approval = NewApproval {
        session_id: session,
        run_id: run_2,
        tool_call_id: "call-2".to_owned(),
        verb: "delete".to_owned(),
        arguments: serde_json::json!({}),
        deadline_at_ms: None,
    };
    assert_eq!(
        block_on(store.park_on_approval(approval, 14))?,
        ParkOutcome::Parked
    );
    // The child ends: run 1 is queued for its next pass, older than run 2.
    assert!(succeed(child_run, 15)?);
    assert!(block_on(store.resume_if_children_done(run_1, 15))?);
    assert_eq!(
        claim(16)?,
        None,
        "nothing starts while the approval is pending"
    );
    let approve = ApprovalDecision::Approve {
        arguments: serde_json::json!({}),
    };
    block_on(store.decide_approval(session, "call-2", approve, 17))?;
    assert_eq!(
        claim(18)?,
        Some(run_2),
        "the approved call's run goes first"
    );
    // Cut off by a crash, it is queued again by the sweep, and goes first again; a message
    // that arrives meanwhile queues its run.
    assert_eq!(
        block_on(store.requeue_running_runs(19, 5))?.requeued.len(),
        1
    );
    let (_, run_3) = block_on(store.send_user_message(
        session,
        user_message("meanwhile"),
        RunId::from_u128(3),
        Queue::Interactive,
        20,
        Some(ClaimFor::unshared("boot-a")),
    ))?;
    assert_eq!(run_3.status, RunStatus::Queued);
    assert_eq!(claim(21)?, Some(run_2));
    // Once it ends, the others start in the order they were queued.
    assert!(succeed(run_2, 22)?);
    assert_eq!(claim(23)?, Some(run_1));
    assert!(succeed(run_1, 24)?);
    assert_eq!(claim(25)?, Some(RunId::from_u128(3)));
    Ok(())
}
