//! What a turn reads before it starts: one read, one snapshot, and pending events that never
//! let the import mark pass over an event it did not see.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::common::{Fixture, session, user_message};
use futures::executor::block_on;
use seed_events::RunId;

#[test]
fn pending_events_hold_every_event_up_to_where_they_were_read_while_messages_keep_arriving()
-> anyhow::Result<()> {
    let fixture = Fixture::new()?;
    fixture.create_sessions(1)?;
    let store = fixture.store.clone();
    let done = Arc::new(AtomicBool::new(false));
    let writer = {
        let (store, done) = (store.clone(), Arc::clone(&done));
        std::thread::spawn(move || {
            for idx in 0..2_000 {
                block_on(store.append_events(session(0), vec![user_message(&format!("{idx}"))]))?;
            }
            done.store(true, Ordering::SeqCst);
            anyhow::Ok(())
        })
    };
    let mut n_reads = 0;
    while !done.load(Ordering::SeqCst) {
        // Every event is a person's message (no store entry made it), so each seq up to
        // `through_seq` must be listed: one past it skipped would never be imported.
        let pending = block_on(store.pending_events(session(0), 0))?;
        let seqs: Vec<i64> = pending.events.iter().map(|event| event.seq).collect();
        assert_eq!(seqs, (1..=pending.through_seq).collect::<Vec<_>>());
        n_reads += 1;
    }
    writer.join().expect("the writer thread")?;
    assert!(n_reads > 10, "{n_reads} reads");

    let view = block_on(store.turn_view(session(0), RunId::from_u128(1), Some(1_990), false))?
        .expect("the session");
    let pending = view.pending.expect("asked for with a mark");
    assert_eq!(pending.through_seq, 2_000);
    assert_eq!(pending.events.len(), 10);
    assert_eq!(view.max_pi_entry_id, None);
    assert_eq!(view.n_children, 0);
    assert_eq!(view.newest_line, None, "not asked for");
    assert!(block_on(store.turn_view(session(7), RunId::from_u128(1), None, true))?.is_none());
    Ok(())
}

/// The session's newest durable line, of any file, as the turn's view and the store's own read
/// name it: what a node that kept a session's harness compares.
#[test]
fn the_newest_durable_line_is_the_last_committed_of_any_file() -> anyhow::Result<()> {
    use seed_durable::{Append, DurableFs as _, FileName};
    let fixture = Fixture::new()?;
    fixture.create_sessions(2)?;
    let store = fixture.store.clone();
    let newest = |idx| -> anyhow::Result<(Option<i64>, Option<i64>)> {
        let view = block_on(store.turn_view(session(idx), RunId::from_u128(1), None, true))?
            .expect("the session");
        Ok((
            view.newest_line,
            block_on(store.newest_durable_line(session(idx)))?,
        ))
    };
    assert_eq!(newest(0)?, (None, None));
    let mut seen = Vec::new();
    let files = [
        FileName::Entries,
        FileName::Tasks,
        FileName::Documents,
        FileName::Tasks,
    ];
    for (idx, file) in (0_u128..).zip(files) {
        block_on(
            store
                .session_files(session(idx % 2))
                .commit(vec![Append::new(file, format!("{{\"n\":{idx}}}"))]),
        )?;
        let (in_view, read) = newest(idx % 2)?;
        assert_eq!(in_view, read);
        let line = read.expect("a line");
        assert!(seen.iter().all(|earlier| *earlier < line), "ids only grow");
        seen.push(line);
    }
    // Session 1's lines are not session 0's.
    assert_eq!(newest(0)?.1, Some(seen[2]));
    assert_eq!(newest(1)?.1, Some(seen[3]));
    assert_eq!(
        block_on(store.newest_durable_line(session(9)))?,
        None,
        "no such session"
    );
    Ok(())
}

/// Everything a turn reads before it starts, in one trip to the database on PostgreSQL: the
/// session, its queued messages, the account's memory, the session's wake-ups and the events
/// pending import, each as its own read gives it.
#[test]
fn a_turns_view_waits_on_the_database_once_and_holds_what_each_read_gives() -> anyhow::Result<()> {
    use seed_events::schedule::When;
    use seed_events::{Queue, ScheduleId};
    // One reader, whose statements the first view prepares.
    let fixture = Fixture::with(|config| config.n_readers = 1)?;
    let session = fixture.create_sessions(1)?[0];
    let store = &fixture.store;
    block_on(store.append_events(session, vec![user_message("before the mark")]))?;
    let (_, queued) = block_on(store.send_user_message(
        session,
        user_message("queued"),
        RunId::from_u128(10),
        Queue::Interactive,
        500,
        None,
    ))?;
    block_on(store.write_memory(
        crate::common::account(),
        "~/memory/notes.md",
        "remember".to_owned(),
        600,
    ))?;
    let when = When::Interval { every_ms: 60_000 };
    block_on(store.add_schedule(
        seed_store::NewSchedule {
            id: ScheduleId::from_u128(1),
            session_id: session,
            first_due_ms: when.first_due(700, 60_000).expect("a valid interval"),
            when,
            note: "check the build".to_owned(),
            created_by_call_id: None,
            created_at_ms: 700,
        },
        None,
    ))?;

    let mut waited = Vec::new();
    let mut views = Vec::new();
    for _ in 0..3 {
        let before = store.reader_round_trips();
        views.push(
            block_on(store.turn_view(session, RunId::from_u128(11), Some(1), true))?
                .expect("the session"),
        );
        waited.push(store.reader_round_trips() - before);
    }
    // The first view prepares its statements.
    let expected = u64::from(crate::common::on_postgres());
    assert_eq!(waited[1..], [expected, expected], "{waited:?}");

    let view = views.pop().expect("a view");
    assert_eq!(Some(view.session), block_on(store.get_session(session))?);
    assert_eq!(view.queued_event_ids, queued.user_event_ids);
    assert_eq!(
        view.memory,
        block_on(store.list_memory(crate::common::account()))?
    );
    assert_eq!(view.memory.len(), 1);
    assert_eq!(view.schedules, block_on(store.list_schedules(session))?);
    assert_eq!(view.schedules.len(), 1);
    let pending = view.pending.expect("asked for with a mark");
    assert_eq!(pending, block_on(store.pending_events(session, 1))?);
    assert_eq!(
        pending
            .events
            .iter()
            .map(|event| event.seq)
            .collect::<Vec<_>>(),
        [2]
    );
    assert_eq!(pending.through_seq, 2);
    Ok(())
}
