//! Schedules: a due wake-up fires once, its run and its advance in one transaction, and the
//! occurrences missed while nothing fired fire once together.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use futures::executor::block_on;
use seed_events::schedule::{Wakeup, When};
use seed_events::{Queue, RunId, RunStatus, ScheduleId, SessionId};
use seed_store::{CallEffect, Fault, FaultInjector, NewSchedule, Store};

use crate::common::Fixture;

const MINUTE: i64 = 60_000;
const T0: i64 = 1_796_256_000_000;

fn notice(wakeup: &Wakeup) -> String {
    format!(
        "wake-up {} of {} (missed {}): {}",
        wakeup.occurrence, wakeup.schedule_id, wakeup.missed, wakeup.note
    )
}

fn every_minute(session_id: SessionId, id_bits: u128, call_id: &str) -> NewSchedule {
    let when = When::Interval { every_ms: MINUTE };
    NewSchedule {
        id: ScheduleId::from_u128(id_bits),
        session_id,
        first_due_ms: when.first_due(T0, MINUTE).expect("a valid interval"),
        when,
        note: "check the build".to_owned(),
        created_by_call_id: Some(call_id.to_owned()),
        created_at_ms: T0,
    }
}

fn run_ids(n: usize) -> Vec<RunId> {
    (0..n).map(|_| RunId::new_v7()).collect()
}

fn fire(store: &Store, now_ms: i64) -> anyhow::Result<Vec<seed_store::FiredWakeup>> {
    Ok(block_on(store.fire_due_schedules(
        now_ms,
        run_ids(16),
        notice,
    ))?)
}

#[test]
fn a_due_wake_up_fires_once_and_queues_one_background_run() -> anyhow::Result<()> {
    let fixture = Fixture::new()?;
    let [session] = fixture.create_sessions(1)?[..] else {
        unreachable!()
    };
    let store = &fixture.store;
    let set = block_on(store.add_schedule(every_minute(session, 1, "call-1"), None))?;
    let due = T0 + MINUTE;
    assert_eq!(set.next_due_at_ms, Some(due));
    assert_eq!(block_on(store.next_schedule_due())?, Some(due));

    assert!(fire(store, due - 1)?.is_empty(), "not due yet");
    let fired = fire(store, due + 1_500)?;
    let [one] = &fired[..] else {
        panic!("one wake-up fires: {fired:?}");
    };
    assert_eq!(one.wakeup.occurrence, 1);
    assert_eq!(one.wakeup.late_ms(), 1_500);
    assert_eq!(one.wakeup.missed, 0);
    assert_eq!(one.wakeup.next_due_ms, Some(due + MINUTE));
    assert_eq!(
        one.event.content["text"],
        format!("wake-up 1 of {} (missed 0): check the build", set.id)
    );
    assert_eq!(one.event.actor.as_deref(), Some("trigger"));
    assert_eq!(
        one.event.meta["scheduled_wakeup"]["due_at"],
        serde_json::json!(due)
    );

    let runs = block_on(store.list_session_runs(session))?;
    let [run] = &runs[..] else {
        panic!("one run is queued: {runs:?}");
    };
    assert_eq!(run.id, one.run_id);
    assert_eq!(run.queue, Queue::Background);
    assert_eq!(run.status, RunStatus::Queued);
    assert_eq!(
        run.user_event_ids,
        [one.event.id],
        "the run answers the notice"
    );

    // Fired and advanced together: the same moment fires nothing again.
    assert!(
        fire(store, due + 1_500)?.is_empty(),
        "an occurrence fires once"
    );
    let [row] = &block_on(store.list_schedules(session))?[..] else {
        panic!("the schedule is still to fire");
    };
    assert_eq!((row.fired, row.next_due_at_ms), (1, Some(due + MINUTE)));
    let next = fire(store, due + MINUTE)?;
    assert_eq!(next.len(), 1);
    assert_eq!(next[0].wakeup.occurrence, 2);
    assert_eq!(block_on(store.list_session_runs(session))?.len(), 2);
    Ok(())
}

#[test]
fn occurrences_missed_while_down_fire_once_saying_how_many_and_how_late() -> anyhow::Result<()> {
    let fixture = Fixture::new()?;
    let [session] = fixture.create_sessions(1)?[..] else {
        unreachable!()
    };
    let store = &fixture.store;
    block_on(store.add_schedule(every_minute(session, 1, "call-1"), None))?;
    let due = T0 + MINUTE;
    // Down across three occurrences: due, due + 1 min, due + 2 min; back at due + 2.5 min.
    let back = due + 2 * MINUTE + MINUTE / 2;
    let fired = fire(store, back)?;
    let [one] = &fired[..] else {
        panic!("the missed occurrences fire once: {fired:?}");
    };
    assert_eq!(one.wakeup.due_at_ms, due);
    assert_eq!(one.wakeup.missed, 2);
    assert_eq!(one.wakeup.late_ms(), 2 * MINUTE + MINUTE / 2);
    assert_eq!(one.wakeup.next_due_ms, Some(due + 3 * MINUTE));
    assert!(fire(store, back)?.is_empty());
    assert_eq!(block_on(store.list_session_runs(session))?.len(), 1);
    Ok(())
}

#[test]
fn a_firing_that_fails_to_commit_leaves_neither_its_run_nor_its_advance() -> anyhow::Result<()> {
    let failing = Arc::new(AtomicBool::new(false));
    let fixture = Fixture::with(|config| {
        let failing = Arc::clone(&failing);
        config.faults = Some(FaultInjector(Arc::new(move || {
            failing.load(Ordering::SeqCst).then_some(Fault::Io)
        })));
    })?;
    let [session] = fixture.create_sessions(1)?[..] else {
        unreachable!()
    };
    let store = &fixture.store;
    block_on(store.add_schedule(every_minute(session, 1, "call-1"), None))?;
    let due = T0 + MINUTE;

    failing.store(true, Ordering::SeqCst);
    let refused = block_on(store.fire_due_schedules(due, run_ids(4), notice));
    assert!(refused.is_err(), "the commit failed: {refused:?}");
    failing.store(false, Ordering::SeqCst);
    // Neither half: no run, no notice, the schedule where it was.
    assert!(block_on(store.list_session_runs(session))?.is_empty());
    let [row] = &block_on(store.list_schedules(session))?[..] else {
        panic!("the schedule is still to fire");
    };
    assert_eq!((row.fired, row.next_due_at_ms), (0, Some(due)));
    let n_events: i64 = fixture.raw_i64(
        "SELECT COUNT(*) FROM session_events WHERE session_key =
             (SELECT key FROM sessions WHERE id = ?1)",
        &[&session.to_string()],
    )?;
    assert_eq!(n_events, 0, "no notice without its run");

    // Both halves, the next time.
    let fired = fire(store, due)?;
    assert_eq!(fired.len(), 1);
    assert_eq!(block_on(store.list_session_runs(session))?.len(), 1);
    let [row] = &block_on(store.list_schedules(session))?[..] else {
        panic!("the schedule is still to fire");
    };
    assert_eq!((row.fired, row.next_due_at_ms), (1, Some(due + MINUTE)));
    Ok(())
}

#[test]
fn the_same_call_sets_one_schedule() -> anyhow::Result<()> {
    let fixture = Fixture::new()?;
    let [session] = fixture.create_sessions(1)?[..] else {
        unreachable!()
    };
    let store = &fixture.store;
    let effect = CallEffect {
        session_id: session,
        tool_call_id: "call-1".to_owned(),
        verb: "schedule".to_owned(),
        result: "set".to_owned(),
    };
    let first = block_on(store.add_schedule(every_minute(session, 1, "call-1"), Some(effect)))?;
    let again = block_on(store.add_schedule(every_minute(session, 2, "call-1"), None))?;
    assert_eq!(
        again.id, first.id,
        "the second call found the first one's schedule"
    );
    assert_eq!(block_on(store.list_schedules(session))?.len(), 1);
    assert_eq!(
        block_on(store.schedule_by_call(session, "call-1"))?.map(|row| row.id),
        Some(first.id)
    );
    assert_eq!(
        block_on(store.call_effect(session, "call-1"))?.map(|effect| effect.result),
        Some("set".to_owned())
    );
    Ok(())
}

#[test]
fn a_one_shot_ends_once_fired_and_a_cancelled_one_never_fires() -> anyhow::Result<()> {
    let fixture = Fixture::new()?;
    let [session] = fixture.create_sessions(1)?[..] else {
        unreachable!()
    };
    let store = &fixture.store;
    let when = When::Delay { ms: 5_000 };
    let once = NewSchedule {
        id: ScheduleId::from_u128(1),
        session_id: session,
        first_due_ms: when.first_due(T0, MINUTE)?,
        when,
        note: "once".to_owned(),
        created_by_call_id: None,
        created_at_ms: T0,
    };
    block_on(store.add_schedule(once, None))?;
    let cancelled = block_on(store.add_schedule(every_minute(session, 2, "call-2"), None))?;
    assert!(block_on(store.cancel_schedule(
        session,
        cancelled.id,
        T0,
        None
    ))?);
    assert!(
        !block_on(store.cancel_schedule(session, cancelled.id, T0, None))?,
        "cancelled once"
    );

    let fired = fire(store, T0 + 10 * MINUTE)?;
    assert_eq!(fired.len(), 1, "only the one-shot fires: {fired:?}");
    assert_eq!(fired[0].wakeup.next_due_ms, None);
    assert!(block_on(store.list_schedules(session))?.is_empty());
    assert_eq!(block_on(store.next_schedule_due())?, None);
    assert!(fire(store, T0 + 20 * MINUTE)?.is_empty());
    Ok(())
}

#[test]
fn a_firing_takes_a_bounded_batch_soonest_first() -> anyhow::Result<()> {
    let fixture = Fixture::new()?;
    let sessions = fixture.create_sessions(3)?;
    let store = &fixture.store;
    for (idx, session) in sessions.iter().enumerate() {
        block_on(store.add_schedule(every_minute(*session, idx as u128 + 1, "call"), None))?;
    }
    let due = T0 + MINUTE;
    let first = block_on(store.fire_due_schedules(due, run_ids(2), notice))?;
    assert_eq!(first.len(), 2);
    let rest = block_on(store.fire_due_schedules(due, run_ids(2), notice))?;
    assert_eq!(rest.len(), 1);
    let mut fired: Vec<SessionId> = first
        .iter()
        .chain(&rest)
        .map(|fired| fired.wakeup.session_id)
        .collect();
    fired.sort();
    assert_eq!(fired, sessions, "each session's wake-up fired once");
    Ok(())
}

#[test]
fn deleting_a_session_deletes_its_schedules() -> anyhow::Result<()> {
    let fixture = Fixture::new()?;
    let [session] = fixture.create_sessions(1)?[..] else {
        unreachable!()
    };
    let store = &fixture.store;
    block_on(store.add_schedule(every_minute(session, 1, "call-1"), None))?;
    block_on(store.delete_session(session, T0))?;
    assert_eq!(block_on(store.next_schedule_due())?, None);
    assert!(fire(store, T0 + 10 * MINUTE)?.is_empty());
    Ok(())
}
