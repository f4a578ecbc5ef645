//! Schedules: wake-ups a session set for itself (`schedules`). Firing is one writer job: every
//! wake-up due (a bounded batch) gets its notice appended to its session's log and one
//! background run queued for it, and its row advanced (or ended), in one transaction. A crash
//! leaves either all of a firing or none of it, so no occurrence fires twice and none is lost.
//! The rules of when a wake-up is due are pure (`seed_events::schedule`).

use crate::params;
use crate::sql::{Connection, OptionalExtension, Row};
use seed_events::schedule::{ScheduleKind, Wakeup, When, describe};
use seed_events::{
    AccountId, EventRole, MessageBody, NewEvent, Queue, RunId, ScheduleId, SessionEvent, SessionId,
};

use crate::effects::{self, CallEffect};
use crate::error::collect_rows;
use crate::nonces::{NonceOutcome, RequestNonce, owned_by, take_nonce};
use crate::runs::{NewRun, queue_run};
use crate::{Error, Result, Store, log};

/// The meta key a wake-up's notice event carries: which schedule fired, and which occurrence.
pub const SCHEDULED_WAKEUP: &str = "scheduled_wakeup";

/// A wake-up to set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewSchedule {
    pub id: ScheduleId,
    pub session_id: SessionId,
    pub when: When,
    pub note: String,
    /// When it is first due (`When::first_due`, checked by the caller).
    pub first_due_ms: i64,
    /// The schedule call that sets it, for reconciliation; `None` when set otherwise.
    pub created_by_call_id: Option<String>,
    pub created_at_ms: i64,
}

/// A schedule as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScheduleRow {
    pub id: ScheduleId,
    pub session_id: SessionId,
    pub kind: ScheduleKind,
    pub spec: String,
    pub note: String,
    /// When it is next due; `None` once it ended.
    pub next_due_at_ms: Option<i64>,
    pub created_by_call_id: Option<String>,
    /// How many times it fired.
    pub fired: u64,
    pub last_fired_at_ms: Option<i64>,
    /// `done`, `cancelled` or `invalid` once it ended; `None` while it is to fire.
    pub ended: Option<String>,
    pub created_at_ms: i64,
}

impl ScheduleRow {
    /// When, as a person reads it.
    pub fn describe(&self) -> String {
        describe(self.kind, &self.spec)
    }
}

/// One wake-up fired: its notice, the event that holds it and the run queued for it.
#[derive(Debug, Clone, PartialEq)]
pub struct FiredWakeup {
    pub wakeup: Wakeup,
    pub event: SessionEvent,
    pub run_id: RunId,
}

const SCHEDULE_COLUMNS: &str = "id, session_id, kind, spec, note, next_due_at, created_by_call_id, \
     fired, last_fired_at, ended, created_at";

pub(crate) fn schedule_from_row(row: &Row<'_>) -> Result<Result<ScheduleRow>> {
    let id: String = row.get(0)?;
    let session_id: String = row.get(1)?;
    let kind: String = row.get(2)?;
    let fired: i64 = row.get(7)?;
    let corrupt = |e: &dyn std::fmt::Display| Error::corrupt("schedules", e);
    let parsed = (|| {
        Ok(ScheduleRow {
            id: id.parse().map_err(|e| corrupt(&e))?,
            session_id: session_id.parse().map_err(|e| corrupt(&e))?,
            kind: kind.parse().map_err(|e| corrupt(&e))?,
            spec: row.get(3)?,
            note: row.get(4)?,
            next_due_at_ms: row.get(5)?,
            created_by_call_id: row.get(6)?,
            fired: u64::try_from(fired).map_err(|e| corrupt(&e))?,
            last_fired_at_ms: row.get(8)?,
            ended: row.get(9)?,
            created_at_ms: row.get(10)?,
        })
    })();
    Ok(parsed)
}

fn by_call(
    connection: &Connection,
    session_id: SessionId,
    call_id: &str,
) -> Result<Option<ScheduleRow>> {
    connection
        .prepare_cached(&format!(
            "SELECT {SCHEDULE_COLUMNS} FROM schedules
             WHERE session_id = ?1 AND created_by_call_id = ?2"
        ))?
        .query_row(params![session_id.to_string(), call_id], schedule_from_row)
        .optional()?
        .transpose()
}

/// Sets `schedule`, recording `effect` with it. A schedule the same call already set is
/// returned as it is, and nothing is written.
fn add(
    connection: &Connection,
    schedule: &NewSchedule,
    effect: Option<&CallEffect>,
) -> Result<ScheduleRow> {
    if let Some(call_id) = &schedule.created_by_call_id
        && let Some(existing) = by_call(connection, schedule.session_id, call_id)?
    {
        return Ok(existing);
    }
    let inserted = connection
        .prepare_cached(
            "INSERT INTO schedules (id, session_id, account_id, kind, spec, note, next_due_at,
                 created_by_call_id, created_at, updated_at)
             SELECT ?1, id, account_id, ?3, ?4, ?5, ?6, ?7, ?8, ?8 FROM sessions WHERE id = ?2",
        )?
        .execute(params![
            schedule.id.to_string(),
            schedule.session_id.to_string(),
            schedule.when.kind().as_str(),
            schedule.when.spec(),
            schedule.note,
            schedule.first_due_ms,
            schedule.created_by_call_id,
            schedule.created_at_ms,
        ])?;
    if inserted == 0 {
        return Err(Error::NotFound {
            what: "session",
            id: schedule.session_id.to_string(),
        });
    }
    if let Some(effect) = effect {
        effects::record(connection, effect, schedule.created_at_ms)?;
    }
    Ok(ScheduleRow {
        id: schedule.id,
        session_id: schedule.session_id,
        kind: schedule.when.kind(),
        spec: schedule.when.spec(),
        note: schedule.note.clone(),
        next_due_at_ms: Some(schedule.first_due_ms),
        created_by_call_id: schedule.created_by_call_id.clone(),
        fired: 0,
        last_fired_at_ms: None,
        ended: None,
        created_at_ms: schedule.created_at_ms,
    })
}

/// The session's schedules still to fire, soonest first.
pub(crate) fn list_active(
    connection: &Connection,
    session_id: SessionId,
) -> Result<Vec<ScheduleRow>> {
    let mut statement = connection.prepare_cached(active_schedules())?;
    let rows = statement.query_map(params![session_id.to_string()], schedule_from_row)?;
    collect_rows(rows)
}

/// The query of the session `?1`'s schedules still to fire, soonest first; its rows are read
/// with [`schedule_from_row`].
pub(crate) fn active_schedules() -> &'static str {
    static QUERY: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    QUERY.get_or_init(|| {
        format!(
            "SELECT {SCHEDULE_COLUMNS} FROM schedules
             WHERE session_id = ?1 AND ended IS NULL ORDER BY next_due_at, id"
        )
    })
}

/// Cancels the session's schedule `id`; `false` when it has none such still to fire.
fn cancel(
    connection: &Connection,
    session_id: SessionId,
    id: ScheduleId,
    now_ms: i64,
    effect: Option<&CallEffect>,
) -> Result<bool> {
    let cancelled = connection
        .prepare_cached(
            "UPDATE schedules SET ended = 'cancelled', next_due_at = NULL, updated_at = ?3
             WHERE id = ?1 AND session_id = ?2 AND ended IS NULL",
        )?
        .execute(params![id.to_string(), session_id.to_string(), now_ms])?;
    if cancelled > 0
        && let Some(effect) = effect
    {
        effects::record(connection, effect, now_ms)?;
    }
    Ok(cancelled > 0)
}

/// The soonest a schedule is due, if any is still to fire.
fn next_due(connection: &Connection) -> Result<Option<i64>> {
    connection
        .prepare_cached("SELECT MIN(next_due_at) FROM schedules WHERE ended IS NULL")?
        .query_row(params![], |row| row.get(0))
}

/// Fires the schedules due at `now_ms`, soonest first, one per id in `run_ids` at most: for
/// each, its notice (`notice` renders it) is appended to its session's log as a trigger
/// message, a background run is queued for that message, and the row is advanced past
/// `now_ms` (or ended), all in the caller's transaction. Occurrences missed while nothing fired
/// (the service was down) fire once, counted in [`Wakeup::missed`].
fn fire_due(
    connection: &Connection,
    now_ms: i64,
    run_ids: &[RunId],
    notice: fn(&Wakeup) -> String,
) -> Result<Vec<FiredWakeup>> {
    let due: Vec<ScheduleRow> = {
        let mut statement = connection.prepare_cached(&format!(
            "SELECT {SCHEDULE_COLUMNS} FROM schedules
             WHERE ended IS NULL AND next_due_at <= ?1 ORDER BY next_due_at, id LIMIT ?2"
        ))?;
        let limit = i64::try_from(run_ids.len()).unwrap_or(i64::MAX);
        let rows = statement.query_map(params![now_ms, limit], schedule_from_row)?;
        collect_rows(rows)?
    };
    let mut fired = Vec::with_capacity(due.len());
    for (schedule, run_id) in due.into_iter().zip(run_ids) {
        let Some(due_at_ms) = schedule.next_due_at_ms else {
            continue;
        };
        let advance = match When::from_stored(schedule.kind, &schedule.spec)
            .and_then(|when| when.advance(due_at_ms, now_ms))
        {
            Ok(advance) => advance,
            Err(error) => {
                tracing::error!(schedule_id = %schedule.id, %error, "a stored schedule is ended");
                connection
                    .prepare_cached(
                        "UPDATE schedules SET ended = 'invalid', next_due_at = NULL,
                             updated_at = ?2 WHERE id = ?1",
                    )?
                    .execute(params![schedule.id.to_string(), now_ms])?;
                continue;
            }
        };
        let wakeup = Wakeup {
            schedule_id: schedule.id,
            session_id: schedule.session_id,
            kind: schedule.kind,
            spec_text: schedule.describe(),
            note: schedule.note.clone(),
            occurrence: schedule.fired + 1,
            due_at_ms,
            fired_at_ms: now_ms,
            missed: advance.missed,
            next_due_ms: advance.next_due_ms,
        };
        let mut event = NewEvent::new(
            MessageBody::text(notice(&wakeup)),
            EventRole::User,
            "trigger",
            now_ms,
        );
        event.meta = serde_json::json!({
            SCHEDULED_WAKEUP: {
                "schedule_id": schedule.id,
                "occurrence": wakeup.occurrence,
                "due_at": due_at_ms,
                "missed": advance.missed,
            }
        });
        let stored = log::PreparedEvent::of(event).append(connection, schedule.session_id)?;
        let run = NewRun {
            id: *run_id,
            session_id: schedule.session_id,
            queue: Queue::Background,
            user_event_ids: vec![stored.id],
            parent_run_id: None,
            typed: false,
            created_at_ms: now_ms,
        };
        queue_run(connection, &run, now_ms, None)?;
        connection
            .prepare_cached(
                "UPDATE schedules SET next_due_at = ?2, fired = fired + 1, last_fired_at = ?3,
                     ended = CASE WHEN CAST(?2 AS BIGINT) IS NULL THEN 'done' ELSE NULL END, updated_at = ?3
                 WHERE id = ?1",
            )?
            .execute(params![
                schedule.id.to_string(),
                advance.next_due_ms,
                now_ms
            ])?;
        fired.push(FiredWakeup {
            wakeup,
            event: stored,
            run_id: *run_id,
        });
    }
    Ok(fired)
}

impl Store {
    /// Sets a wake-up, recording `effect` (the schedule call's result) in its transaction. The
    /// same call setting it again finds the one it set: nothing is written twice.
    pub async fn add_schedule(
        &self,
        schedule: NewSchedule,
        effect: Option<CallEffect>,
    ) -> Result<ScheduleRow> {
        self.write(Some(schedule.session_id), move |connection| {
            add(connection, &schedule, effect.as_ref())
        })
        .await
    }

    /// The schedule call `call_id` of the session set, if it set one.
    pub async fn schedule_by_call(
        &self,
        session_id: SessionId,
        call_id: &str,
    ) -> Result<Option<ScheduleRow>> {
        let call_id = call_id.to_owned();
        self.read(move |connection| by_call(connection, session_id, &call_id))
            .await
    }

    /// The session's schedules still to fire, soonest first.
    pub async fn list_schedules(&self, session_id: SessionId) -> Result<Vec<ScheduleRow>> {
        self.read(move |connection| list_active(connection, session_id))
            .await
    }

    /// Cancels the session's schedule `id` (recording `effect` with it); `false` when the
    /// session has no such schedule still to fire.
    pub async fn cancel_schedule(
        &self,
        session_id: SessionId,
        id: ScheduleId,
        now_ms: i64,
        effect: Option<CallEffect>,
    ) -> Result<bool> {
        self.write(Some(session_id), move |connection| {
            cancel(connection, session_id, id, now_ms, effect.as_ref())
        })
        .await
    }

    /// A person cancels the session's schedule `id` with a signed request: the nonce is taken
    /// in the transaction of the cancellation. `Fresh(false)` when the account has no such
    /// session, or the session no such schedule still to fire (nothing is written then).
    pub async fn cancel_schedule_signed(
        &self,
        nonce: Option<RequestNonce>,
        account_id: AccountId,
        session_id: SessionId,
        id: ScheduleId,
        now_ms: i64,
    ) -> Result<NonceOutcome<bool>> {
        self.write(Some(session_id), move |connection| {
            if !owned_by(connection, session_id, account_id)? {
                return Ok(NonceOutcome::Fresh(false));
            }
            let still_to_fire: bool = connection
                .prepare_cached(
                    "SELECT EXISTS (SELECT 1 FROM schedules
                         WHERE id = ?1 AND session_id = ?2 AND ended IS NULL)",
                )?
                .query_row(params![id.to_string(), session_id.to_string()], |row| {
                    row.get(0)
                })?;
            if !still_to_fire {
                return Ok(NonceOutcome::Fresh(false));
            }
            if !take_nonce(connection, nonce.as_ref())? {
                return Ok(NonceOutcome::Replayed);
            }
            cancel(connection, session_id, id, now_ms, None).map(NonceOutcome::Fresh)
        })
        .await
    }

    /// The soonest any schedule is due, if one is still to fire.
    pub async fn next_schedule_due(&self) -> Result<Option<i64>> {
        self.read(next_due).await
    }

    /// Fires the schedules due at `now_ms`, at most one per id of `run_ids` (the runs it
    /// queues), in one transaction: each fired wake-up's notice (rendered by `notice`) is in
    /// its session's log, its background run queued, and its row advanced, or none of it is.
    pub async fn fire_due_schedules(
        &self,
        now_ms: i64,
        run_ids: Vec<RunId>,
        notice: fn(&Wakeup) -> String,
    ) -> Result<Vec<FiredWakeup>> {
        self.write(None, move |connection| {
            fire_due(connection, now_ms, &run_ids, notice)
        })
        .await
    }
}
