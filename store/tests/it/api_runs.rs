//! The run APIs the actors drive: a user's message with its run in one transaction, the boot
//! sweep's requeue, what waits in a session's queue, sessions with open runs (claims are in
//! `claims.rs`, a run's end in `run_ends.rs`).

use crate::common;

use crate::common::{Fixture, interactive_run as run, statuses, user_message};
use futures::executor::block_on;
use seed_events::{EventId, Queue, RunId, RunStatus, SessionId};
use seed_store::{BatchMode, ClaimFor, NewRun, Refusal, Store};

const MODES: [BatchMode; 2] = [BatchMode::Optimistic, BatchMode::Savepoint];

/// Rows in the whole database, read behind the store's back: (log events, runs).
fn n_rows(fixture: &Fixture) -> anyhow::Result<(i64, i64)> {
    let n_events = fixture.raw_i64("SELECT COUNT(*) FROM session_events", &[])?;
    let n_runs = fixture.raw_i64("SELECT COUNT(*) FROM runs", &[])?;
    Ok((n_events, n_runs))
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
