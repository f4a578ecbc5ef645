//! The typed store APIs: sessions, the log, runs' queue and leases (a run's end is in
//! `run_ends.rs`, claims in `claims.rs`).

use crate::common;

use crate::common::{Fixture, account, assistant_message as message, run_on as run};
use futures::executor::block_on;
use seed_events::{EventRole, NewEvent, Queue, RunId, RunStatus};
use seed_store::{LeaseOutcome, NewSession, TitleSource};

#[test]
fn sessions_are_created_read_and_listed_by_account() -> anyhow::Result<()> {
    let fixture = Fixture::new()?;
    let store = &fixture.store;
    let mut titled = NewSession::new(common::session(1), account(), 10);
    titled.title = "Trip planning".to_owned();
    titled.description = "comparing trains".to_owned();
    titled.title_source = TitleSource::Agent;
    titled.plan = Some(serde_json::json!([{ "step": "book", "done": false }]));
    block_on(store.create_session(titled.clone()))?;
    block_on(store.create_session(NewSession::new(common::session(2), account(), 20)))?;

    let row = block_on(store.get_session(titled.id))?.expect("created session");
    assert_eq!(row.title, "Trip planning");
    assert_eq!(row.title_source, TitleSource::Agent);
    assert_eq!(row.plan, titled.plan);
    assert_eq!((row.created_at_ms, row.updated_at_ms), (10, 10));

    let listed: Vec<_> = block_on(store.list_sessions(account()))?
        .into_iter()
        .map(|session| session.id)
        .collect();
    assert_eq!(listed, [common::session(2), common::session(1)]);
    assert!(block_on(store.list_sessions(seed_events::AccountId::from_u128(5)))?.is_empty());

    // A session for an account that does not exist is refused, not half-created.
    let orphan = NewSession::new(common::session(3), seed_events::AccountId::from_u128(5), 0);
    assert!(block_on(store.create_session(orphan)).is_err());
    assert!(block_on(store.get_session(common::session(3)))?.is_none());
    Ok(())
}

#[test]
fn a_commit_of_many_lines_keeps_each_file_in_the_order_written() -> anyhow::Result<()> {
    use seed_durable::{Append, DurableFs as _, FileName};
    let fixture = Fixture::new()?;
    let session = fixture.create_sessions(1)?[0];
    let files = fixture.store.session_files(session);
    // More lines than one statement carries on PostgreSQL, the files interleaved; then a
    // second commit that continues each.
    let files_in_turn = [FileName::Entries, FileName::Documents, FileName::Entries];
    let batch = |from: usize, n: usize| -> Vec<Append> {
        (from..from + n)
            .map(|idx| Append::new(files_in_turn[idx % 3], format!("line {idx}")))
            .collect()
    };
    block_on(files.commit_projecting(batch(0, 19), None))?;
    block_on(files.commit_projecting(batch(19, 1), None))?;
    block_on(files.commit_projecting(batch(20, 9), None))?;
    for file in [FileName::Entries, FileName::Documents] {
        let expected: Vec<String> = (0..29)
            .filter(|idx| files_in_turn[idx % 3] == file)
            .map(|idx| format!("line {idx}"))
            .collect();
        assert_eq!(block_on(files.read(file))?, expected, "{file:?}");
    }
    Ok(())
}

/// On PostgreSQL events go several to an insert, which reads the newest seq itself: an append
/// of more than one insert carries, after one of a few, each lands in order with ids that grow
/// with the seqs, and reads back as given.
#[test]
fn appends_of_many_events_land_in_order_on_either_engine() -> anyhow::Result<()> {
    let fixture = Fixture::new()?;
    let sessions = fixture.create_sessions(1)?;
    let store = &fixture.store;
    let mut texts = Vec::new();
    for n_events in [3, 19, 1, 8, 9] {
        let batch: Vec<String> = (0..n_events)
            .map(|idx| format!("event {} of {n_events}", texts.len() + idx))
            .collect();
        let placed = block_on(store.append_events(
            sessions[0],
            batch.iter().map(|text| message(text, None)).collect(),
        ))?;
        let seqs: Vec<i64> = placed.iter().map(|event| event.seq).collect();
        let first = texts.len() as i64 + 1;
        assert_eq!(seqs, (first..first + n_events as i64).collect::<Vec<_>>());
        texts.extend(batch);
    }
    let all = block_on(store.read_events(sessions[0], 1, i64::MAX, 1000))?;
    let read: Vec<&str> = all
        .iter()
        .map(|event| event.content["text"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(read, texts.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(
        all.windows(2).all(|pair| pair[0].id < pair[1].id),
        "ids grow with the seqs"
    );
    Ok(())
}

#[test]
fn the_log_assigns_gapless_seqs_and_reads_ranges() -> anyhow::Result<()> {
    let fixture = Fixture::new()?;
    let sessions = fixture.create_sessions(2)?;
    let store = &fixture.store;
    assert_eq!(block_on(store.last_seq(sessions[0]))?, 0);
    assert_eq!(block_on(store.max_pi_entry_id(sessions[0]))?, None);

    let first = block_on(store.append_events(
        sessions[0],
        vec![
            message("a", Some(3)),
            message("b", Some(4)),
            message("c", None),
        ],
    ))?;
    assert_eq!(first.iter().map(|e| e.seq).collect::<Vec<_>>(), [1, 2, 3]);
    let other = block_on(store.append_events(sessions[1], vec![message("x", Some(9))]))?;
    assert_eq!(other[0].seq, 1, "seqs are per session");
    let second = block_on(store.append_events(sessions[0], vec![message("d", None)]))?;
    assert_eq!(second[0].seq, 4);
    assert!(second[0].id > first[2].id);

    let all = block_on(store.read_events(sessions[0], 1, i64::MAX, 100))?;
    assert_eq!(all.len(), 4);
    assert_eq!(all[..3], first[..]);
    let middle = block_on(store.read_events(sessions[0], 2, 3, 100))?;
    assert_eq!(middle.iter().map(|e| e.seq).collect::<Vec<_>>(), [2, 3]);
    let limited = block_on(store.read_events(sessions[0], 1, i64::MAX, 2))?;
    assert_eq!(limited.iter().map(|e| e.seq).collect::<Vec<_>>(), [1, 2]);
    // Several ranges in one read, in seq order whatever their order, each event once.
    let ranges = vec![(4, i64::MAX), (1, 1), (1, 2), (3, 2)];
    let gathered = block_on(store.read_event_ranges(sessions[0], ranges))?;
    assert_eq!(
        gathered.iter().map(|e| e.seq).collect::<Vec<_>>(),
        [1, 2, 4]
    );
    assert_eq!(gathered[..2], first[..2]);

    assert_eq!(block_on(store.max_pi_entry_id(sessions[0]))?, Some(4));
    assert_eq!(block_on(store.last_seq(sessions[0]))?, 4);

    // A store restored from an older copy holds entries up to 3: the mark of entry 4 is cleared,
    // and only this session's.
    assert_eq!(block_on(store.clear_pi_entry_ids_above(sessions[0], 3))?, 1);
    assert_eq!(block_on(store.max_pi_entry_id(sessions[0]))?, Some(3));
    assert_eq!(block_on(store.max_pi_entry_id(sessions[1]))?, Some(9));
    Ok(())
}

#[test]
fn runs_queue_claim_one_turn_per_session_and_list_left_running() -> anyhow::Result<()> {
    let fixture = Fixture::new()?;
    let sessions = fixture.create_sessions(2)?;
    let store = &fixture.store;
    block_on(store.enqueue_run(run(1, sessions[0], Queue::Interactive)))?;
    block_on(store.enqueue_run(run(2, sessions[0], Queue::Interactive)))?;
    block_on(store.enqueue_run(run(3, sessions[1], Queue::Interactive)))?;
    block_on(store.enqueue_run(run(4, sessions[1], Queue::Background)))?;

    let first =
        block_on(store.claim_next_run(Queue::Interactive, "boot-a", 100))?.expect("a run to claim");
    assert_eq!(first.id, RunId::from_u128(1));
    assert_eq!(first.status, RunStatus::Running);
    assert_eq!(
        (first.owner.as_deref(), first.attempts),
        (Some("boot-a"), 1)
    );
    // What the claim returns is the run as stored.
    assert_eq!(block_on(store.get_run(first.id))?, Some(first.clone()));
    // Session 0 has a turn in flight: its second run waits, session 1's goes first.
    let second =
        block_on(store.claim_next_run(Queue::Interactive, "boot-a", 101))?.expect("a run to claim");
    assert_eq!(second.id, RunId::from_u128(3));
    assert_eq!(
        block_on(store.claim_next_run(Queue::Interactive, "boot-a", 102))?,
        None
    );
    // Session 1 is busy on the other queue too.
    assert_eq!(
        block_on(store.claim_next_run(Queue::Background, "boot-a", 102))?,
        None
    );

    let running: Vec<_> = block_on(store.list_running_runs())?
        .into_iter()
        .map(|run| run.id)
        .collect();
    assert_eq!(running, [RunId::from_u128(1), RunId::from_u128(3)]);

    let result = serde_json::json!({ "answer": "done" });
    assert!(block_on(store.set_run_status(
        first.id,
        RunStatus::Succeeded,
        Some(result.clone()),
        200
    ))?);
    assert!(!block_on(store.set_run_status(
        RunId::from_u128(77),
        RunStatus::Failed,
        None,
        200
    ))?);
    let finished = block_on(store.get_run(first.id))?.expect("run 1");
    assert_eq!(finished.status, RunStatus::Succeeded);
    assert_eq!(finished.result, Some(result));
    assert_eq!(finished.updated_at_ms, 200);

    let next = block_on(store.claim_next_run(Queue::Interactive, "boot-b", 201))?
        .expect("session 0's second run");
    assert_eq!(next.id, RunId::from_u128(2));
    assert_eq!(
        block_on(store.list_session_runs(sessions[0]))?
            .iter()
            .map(|run| run.status)
            .collect::<Vec<_>>(),
        [RunStatus::Succeeded, RunStatus::Running]
    );
    Ok(())
}

#[test]
fn a_second_lease_holder_is_refused_until_release() -> anyhow::Result<()> {
    let fixture = Fixture::new()?;
    let sessions = fixture.create_sessions(2)?;
    let store = &fixture.store;
    let run_a = Some(RunId::from_u128(1));
    let LeaseOutcome::Acquired(lease) =
        block_on(store.acquire_lease(sessions[0], "boot-a", run_a, 5))?
    else {
        panic!("a free lease was refused")
    };
    assert_eq!(lease.owner, "boot-a");
    // Taking it again for the same run is idempotent.
    assert!(matches!(
        block_on(store.acquire_lease(sessions[0], "boot-a", run_a, 6))?,
        LeaseOutcome::Acquired(_)
    ));
    let refused = block_on(store.acquire_lease(sessions[0], "boot-b", None, 7))?;
    assert_eq!(refused, LeaseOutcome::HeldBy(lease.clone()));
    // A different run of the same process is a second holder too.
    assert!(matches!(
        block_on(store.acquire_lease(sessions[0], "boot-a", Some(RunId::from_u128(2)), 7))?,
        LeaseOutcome::HeldBy(_)
    ));

    assert!(
        !block_on(store.release_lease(sessions[0], "boot-b"))?,
        "not its lease"
    );
    assert!(block_on(store.release_lease(sessions[0], "boot-a"))?);
    assert_eq!(block_on(store.get_lease(sessions[0]))?, None);
    assert!(matches!(
        block_on(store.acquire_lease(sessions[0], "boot-b", None, 8))?,
        LeaseOutcome::Acquired(_)
    ));

    // The boot sweep releases what an earlier process left, and only that.
    block_on(store.acquire_lease(sessions[1], "boot-c", None, 9))?;
    let released = block_on(store.release_leases_not_owned_by("boot-c"))?;
    assert_eq!(
        released
            .iter()
            .map(|lease| lease.session_id)
            .collect::<Vec<_>>(),
        [sessions[0]]
    );
    assert!(block_on(store.get_lease(sessions[1]))?.is_some());
    Ok(())
}

#[test]
fn the_fallback_namer_never_overrides_an_agents_or_users_title() -> anyhow::Result<()> {
    let fixture = Fixture::new()?;
    let sessions = fixture.create_sessions(3)?;
    let store = &fixture.store;
    let title_of = |session_id| -> anyhow::Result<(String, String, TitleSource, i64)> {
        let row = block_on(store.get_session(session_id))?.expect("a session");
        Ok((
            row.title,
            row.description,
            row.title_source,
            row.updated_at_ms,
        ))
    };

    // Untitled: the namer names it, once.
    assert!(block_on(store.name_session_if_untitled(
        sessions[0],
        "Fallback".to_owned(),
        10
    ))?);
    assert_eq!(
        title_of(sessions[0])?,
        (
            "Fallback".to_owned(),
            String::new(),
            TitleSource::Fallback,
            10
        )
    );
    assert!(!block_on(store.name_session_if_untitled(
        sessions[0],
        "Again".to_owned(),
        11
    ))?);
    assert_eq!(title_of(sessions[0])?.0, "Fallback");

    // The agent's title stands; so does the user's; the agent may rename over the fallback.
    assert!(block_on(store.set_session_status(
        sessions[1],
        "Trip planning".to_owned(),
        "comparing trains".to_owned(),
        TitleSource::Agent,
        20
    ))?);
    assert!(!block_on(store.name_session_if_untitled(
        sessions[1],
        "Fallback".to_owned(),
        21
    ))?);
    assert_eq!(
        title_of(sessions[1])?,
        (
            "Trip planning".to_owned(),
            "comparing trains".to_owned(),
            TitleSource::Agent,
            20
        )
    );
    assert!(block_on(store.set_session_status(
        sessions[2],
        "Mine".to_owned(),
        String::new(),
        TitleSource::User,
        30
    ))?);
    assert!(!block_on(store.name_session_if_untitled(
        sessions[2],
        "Fallback".to_owned(),
        31
    ))?);
    assert_eq!(title_of(sessions[2])?.2, TitleSource::User);
    assert!(block_on(store.set_session_status(
        sessions[0],
        "Better".to_owned(),
        "named by the agent".to_owned(),
        TitleSource::Agent,
        40
    ))?);
    assert_eq!(title_of(sessions[0])?.2, TitleSource::Agent);

    // A missing session is reported, not created.
    let missing = common::session(99);
    assert!(!block_on(store.name_session_if_untitled(
        missing,
        "x".to_owned(),
        50
    ))?);
    assert!(!block_on(store.set_session_status(
        missing,
        "x".to_owned(),
        String::new(),
        TitleSource::User,
        50
    ))?);
    assert!(block_on(store.get_session(missing))?.is_none());
    Ok(())
}

#[test]
fn plans_are_set_and_cleared_and_children_listed_by_parent() -> anyhow::Result<()> {
    let fixture = Fixture::new()?;
    let sessions = fixture.create_sessions(2)?;
    let store = &fixture.store;
    let plan = serde_json::json!([{ "step": "book", "done": true }]);
    assert!(block_on(store.set_session_plan(
        sessions[0],
        Some(plan.clone()),
        10
    ))?);
    let row = block_on(store.get_session(sessions[0]))?.expect("session 0");
    assert_eq!((row.plan, row.updated_at_ms), (Some(plan), 10));
    assert!(block_on(store.set_session_plan(sessions[0], None, 11))?);
    assert_eq!(
        block_on(store.get_session(sessions[0]))?.and_then(|row| row.plan),
        None
    );
    assert!(!block_on(store.set_session_plan(
        common::session(99),
        None,
        12
    ))?);

    for (idx, created_at_ms) in [(10, 300), (11, 100), (12, 200)] {
        let mut child = NewSession::new(common::session(idx), account(), created_at_ms);
        child.parent_session_id = Some(sessions[0]);
        block_on(store.create_session(child))?;
    }
    let mut grandchild = NewSession::new(common::session(13), account(), 400);
    grandchild.parent_session_id = Some(common::session(10));
    block_on(store.create_session(grandchild))?;

    let children: Vec<_> = block_on(store.list_child_sessions(sessions[0]))?
        .into_iter()
        .map(|session| session.id)
        .collect();
    assert_eq!(
        children,
        [
            common::session(11),
            common::session(12),
            common::session(10)
        ],
        "direct children only, oldest first"
    );
    assert!(block_on(store.list_child_sessions(sessions[1]))?.is_empty());
    Ok(())
}

/// A result the runtime already wrote for a call (a child's delivery) is not written twice:
/// the projection's own result for that call lands as a notice, keeping its entry id; a call
/// not yet answered, or not named as delivered, gets its `tool_result`.
#[test]
fn a_projected_result_for_a_delivered_call_becomes_a_notice() -> anyhow::Result<()> {
    let fixture = Fixture::new()?;
    let [session] = fixture.create_sessions(1)?[..] else {
        unreachable!()
    };
    let result = |call: &str, pi_entry_id: Option<i64>| NewEvent {
        kind: "tool_result".to_owned(),
        role: Some(EventRole::Tool),
        actor: Some("runtime".to_owned()),
        content: serde_json::json!({ "tool_call_id": call, "tool_name": "delegate", "content": "x" }),
        meta: serde_json::json!({}),
        run_id: None,
        pi_entry_id,
        created_at_ms: 0,
    };
    block_on(
        fixture
            .store
            .append_events(session, vec![result("c1", None)]),
    )?;
    let written = block_on(fixture.store.append_projection(seed_store::Projection {
        session_id: session,
        events: vec![
            result("c1", Some(7)),
            result("c2", Some(8)),
            result("c3", Some(9)),
        ],
        delivered_calls: vec!["c1".to_owned(), "c2".to_owned()],
    }))?;
    let kinds: Vec<(&str, Option<i64>)> = written
        .iter()
        .map(|event| (event.kind.as_str(), event.pi_entry_id))
        .collect();
    assert_eq!(
        kinds,
        [
            ("notice", Some(7)),
            ("tool_result", Some(8)),
            ("tool_result", Some(9))
        ]
    );
    assert_eq!(written[0].meta["answered_earlier"], "c1");
    Ok(())
}

/// A commit of a session's durable files writes its entries' log events in the same
/// transaction: both are there once it returns, the events as the log holds them. When the
/// database refuses any of it (here the log's rows do not fit a full disk, after the lines were
/// inserted), neither is.
#[test]
fn a_store_commit_writes_its_log_events_in_the_same_transaction() -> anyhow::Result<()> {
    if !crate::common::sqlite_only("a database capped in pages (max_page_count)") {
        return Ok(());
    }
    let roomy = Fixture::new()?;
    let sessions = roomy.create_sessions(1)?;
    let session = sessions[0];
    let path = roomy.db_path();
    let n_pages: u32 = roomy
        .raw()?
        .query_row("PRAGMA page_count", [], |row| row.get(0))?;
    let Fixture { dir, store, .. } = roomy;
    drop(store);
    // About 40 pages (160 KiB) of room left.
    let mut config = seed_store::Config::new(&path);
    config.max_page_count = Some(n_pages + 40);
    let store = seed_store::Store::open(config)?;
    let files = store.session_files(session);
    let line = |text: &str| seed_durable::Append::new(seed_durable::FileName::Entries, text);
    let projection = |events| seed_store::Projection {
        session_id: session,
        events,
        delivered_calls: Vec::new(),
    };

    let written = block_on(files.commit_projecting(
        vec![line("entry 1")],
        Some(projection(vec![message("the answer", Some(1))])),
    ))?;
    assert_eq!(
        written
            .iter()
            .map(|event| (event.seq, event.pi_entry_id))
            .collect::<Vec<_>>(),
        [(1, Some(1))]
    );
    let log = block_on(store.read_events(session, 1, i64::MAX, usize::MAX))?;
    assert_eq!(log, written);
    let entries = || {
        block_on(seed_durable::DurableFs::read(
            &files,
            seed_durable::FileName::Entries,
        ))
    };
    assert_eq!(entries()?, ["entry 1"]);
    // Without a projection, a commit is the lines alone.
    assert!(block_on(files.commit_projecting(vec![line("entry 2")], None))?.is_empty());
    assert_eq!(entries()?.len(), 2);

    // The lines fit; the log's rows (800 KiB) do not: the whole commit is refused.
    let big = message(&"x".repeat(800 * 1024), Some(3));
    let refused =
        block_on(files.commit_projecting(vec![line("entry 3")], Some(projection(vec![big]))));
    let error = refused.expect_err("800 KiB fit in 160 KiB");
    assert!(error.is_disk_full(), "{error:?}");
    assert_eq!(entries()?.len(), 2, "no line of the refused commit");
    assert_eq!(
        block_on(store.read_events(session, 1, i64::MAX, usize::MAX))?,
        log,
        "no event of the refused commit"
    );
    drop(dir);
    Ok(())
}

/// A step's commit (its durable lines and its log events, several events to an insert) waits
/// on the database once, at its `COMMIT`: on PostgreSQL the inserts are sent without waiting,
/// and the events' ids and seqs are read from the answers that come with the `COMMIT`'s. The
/// events come back placed as the log holds them. (SQLite has no round trips to count.)
#[test]
fn a_steps_commit_waits_on_the_database_once() -> anyhow::Result<()> {
    let fixture = Fixture::new()?;
    let session = fixture.create_sessions(1)?[0];
    let store = &fixture.store;
    let files = store.session_files(session);
    let round_trips = || common::writer_round_trips(store);
    let mut written = Vec::new();
    let mut waited = Vec::new();
    for step in 1..=3_i64 {
        let before = round_trips();
        let lines = vec![
            seed_durable::Append::new(seed_durable::FileName::Entries, format!("entry {step}")),
            seed_durable::Append::new(seed_durable::FileName::Tasks, format!("task {step}")),
        ];
        let events = vec![
            message(&format!("step {step}"), Some(step)),
            message(&format!("step {step}, again"), Some(step)),
        ];
        written.extend(block_on(files.commit_projecting(
            lines,
            Some(seed_store::Projection {
                session_id: session,
                events,
                delivered_calls: Vec::new(),
            }),
        ))?);
        waited.push(round_trips() - before);
    }
    // The first commit prepares its statements; a debug build checks the log's marks with a
    // query of its own at each insert.
    let expected = if common::on_postgres() {
        1 + u64::from(cfg!(debug_assertions))
    } else {
        0
    };
    assert_eq!(waited[1..], [expected, expected], "{waited:?}");
    assert_eq!(
        written.iter().map(|event| event.seq).collect::<Vec<_>>(),
        [1, 2, 3, 4, 5, 6]
    );
    assert_eq!(
        block_on(store.read_events(session, 1, i64::MAX, usize::MAX))?,
        written
    );
    Ok(())
}

/// An account's sessions come a page at a time from the database: a page of 2 holds the 2
/// most recently updated and where the next starts, and the pages together hold each of the
/// account's sessions once, newest first, none of another account's.
#[test]
fn sessions_are_listed_a_page_at_a_time() -> anyhow::Result<()> {
    let fixture = Fixture::new()?;
    let store = &fixture.store;
    // Seven sessions; the two newest updated at the same time, so a page ends at a tie.
    let mut sessions = Vec::new();
    for (idx, updated_at_ms) in (0..).zip([0, 1, 2, 3, 4, 9, 9]) {
        let session_id = common::session(idx);
        block_on(store.create_session(NewSession::new(session_id, account(), updated_at_ms)))?;
        sessions.push(session_id);
    }
    let other = seed_events::AccountId::from_u128(0x07);
    block_on(store.create_account(other, vec![7], 0))?;
    block_on(store.create_session(NewSession::new(
        seed_events::SessionId::from_u128(0x07),
        other,
        50,
    )))?;

    let first = block_on(store.list_sessions_page(account(), None, 2))?;
    assert_eq!(first.sessions.len(), 2);
    let next = first.next.expect("a cursor to the rest");
    assert_eq!(
        (next.updated_at_ms, next.session_id),
        (first.sessions[1].updated_at_ms, first.sessions[1].id)
    );
    let mut listed: Vec<_> = first.sessions.iter().map(|session| session.id).collect();
    let mut after = Some(next);
    while let Some(cursor) = after {
        let page = block_on(store.list_sessions_page(account(), Some(cursor), 2))?;
        assert!(page.sessions.len() <= 2);
        listed.extend(page.sessions.iter().map(|session| session.id));
        after = page.next;
    }
    let mut expected: Vec<_> = block_on(store.list_sessions(account()))?
        .iter()
        .map(|session| (session.updated_at_ms, session.id))
        .collect();
    expected.sort_by(|a, b| b.cmp(a));
    let expected: Vec<_> = expected.into_iter().map(|(_, id)| id).collect();
    assert_eq!(listed, expected);
    assert_eq!(listed.len(), sessions.len());
    assert_eq!(
        &listed[..2],
        [sessions[6], sessions[5]],
        "updated last; the greater id first"
    );
    // A page that takes the rest whole has no cursor.
    let all = block_on(store.list_sessions_page(account(), None, 7))?;
    assert_eq!((all.sessions.len(), all.next), (7, None));
    Ok(())
}
