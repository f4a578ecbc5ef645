//! Runs: the queue of turns, and the states a run passes through. Claiming runs for the queue
//! is `claim`; the boot sweep over the runs a previous process left running is `sweep`.

mod claim;
mod sweep;

use crate::params;
use crate::sql::{Connection, OptionalExtension, Row};
use seed_events::{EventId, NewEvent, Queue, RunId, RunResult, RunStatus, SessionEvent, SessionId};

use crate::error::collect_rows;
use crate::{Error, Result, Store, log, sessions};

pub use claim::ClaimFor;
#[cfg(test)]
pub(crate) use claim::{
    ACCOUNT_RUNS_IN_FLIGHT, ACCOUNT_RUNS_IN_FLIGHT_OF_NONE, FIRST_WAITING_ACCOUNT,
    NEXT_CLAIMABLE_OF_ACCOUNT, NEXT_CLAIMABLE_OF_NONE, NEXT_WAITING_ACCOUNT,
    SESSION_FREE_FOR_NEW_RUN,
};
use claim::{started, starts_at_once, take_lease};
pub use sweep::Swept;

/// A run to queue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewRun {
    pub id: RunId,
    pub session_id: SessionId,
    pub queue: Queue,
    /// The log events this run answers.
    pub user_event_ids: Vec<EventId>,
    pub parent_run_id: Option<RunId>,
    /// A typed child, which ends with return_result.
    pub typed: bool,
    pub created_at_ms: i64,
}

#[derive(Debug, Clone, PartialEq)]
pub struct RunRow {
    pub id: RunId,
    pub session_id: SessionId,
    pub queue: Queue,
    pub status: RunStatus,
    pub user_event_ids: Vec<EventId>,
    pub parent_run_id: Option<RunId>,
    pub typed: bool,
    /// The boot id of the process that claimed it last.
    pub owner: Option<String>,
    /// How many times it was claimed.
    pub attempts: i64,
    /// How many later passes it took: 0 for the first turn.
    pub pass: i64,
    pub result: Option<serde_json::Value>,
    pub created_at_ms: i64,
    pub updated_at_ms: i64,
    /// The W3C traceparent of the run's newest span, when traces are exported: the attempt
    /// that takes the run up after a crash links to it.
    pub trace_parent: Option<String>,
}

impl RunRow {
    /// Where the answer went, when the run ended by continuing into a successor
    /// (`result.continued_to_session_id`).
    pub fn continued_to_session_id(&self) -> Option<SessionId> {
        RunResult::parse(self.result.as_ref()?).continued_to_session_id
    }
}

impl NewRun {
    /// The row [`insert_run`] stores for it: queued, never claimed, with nothing yet to say.
    pub(crate) fn queued(&self) -> RunRow {
        RunRow {
            id: self.id,
            session_id: self.session_id,
            queue: self.queue,
            status: RunStatus::Queued,
            user_event_ids: self.user_event_ids.clone(),
            parent_run_id: self.parent_run_id,
            typed: self.typed,
            owner: None,
            attempts: 0,
            pass: 0,
            result: None,
            created_at_ms: self.created_at_ms,
            updated_at_ms: self.created_at_ms,
            trace_parent: None,
        }
    }
}

/// Queues a run; it is stored as [`NewRun::queued`] says.
pub(crate) fn insert_run(connection: &Connection, run: &NewRun) -> Result<()> {
    insert_run_as(connection, run, None)
}

/// Inserts `run` queued or, with an owner, already running for it (its first attempt): a run
/// claimed in the transaction that queues it is written once, so it never enters the indexes
/// of queued runs only to leave them in the same commit.
fn insert_run_as(connection: &Connection, run: &NewRun, owner: Option<&str>) -> Result<()> {
    let user_event_ids: Vec<i64> = run.user_event_ids.iter().map(|id| id.0).collect();
    connection
        .prepare_cached(
            "INSERT INTO runs (id, session_id, queue, status, user_event_ids, parent_run_id,
                 typed, owner, attempts, created_at, updated_at, account_id, pass_started)
             VALUES (?1, ?2, ?3, CASE WHEN CAST(?8 AS TEXT) IS NULL THEN 'queued' ELSE 'running' END, ?4, ?5, ?6, ?8,
                 CASE WHEN CAST(?8 AS TEXT) IS NULL THEN 0 ELSE 1 END, ?7, ?7, (SELECT account_id FROM sessions WHERE id = ?2),
                 CASE WHEN CAST(?8 AS TEXT) IS NULL THEN 0 ELSE 1 END)",
        )?
        // Nothing reads its answer; a refusal (its session gone, its id taken) is the error
        // of the job's next statement that is waited on, or of its commit.
        .send(params![
            run.id.to_string(),
            run.session_id.to_string(),
            run.queue.as_str(),
            serde_json::Value::from(user_event_ids).to_string(),
            run.parent_run_id.map(|id| id.to_string()),
            run.typed,
            run.created_at_ms,
            owner,
        ])
}

/// The columns [`run_from_row`] reads, as a literal for `concat!`.
macro_rules! run_columns {
    () => {
        "id, session_id, queue, status, user_event_ids, parent_run_id, typed,
         owner, attempts, result, created_at, updated_at, pass, trace_parent"
    };
}

pub(crate) use run_columns;

pub(crate) const RUN_COLUMNS: &str = run_columns!();
/// How many columns [`RUN_COLUMNS`] names: the index of a column selected after them.
const RUN_COLUMNS_COUNT: usize = {
    let bytes = RUN_COLUMNS.as_bytes();
    let mut n_columns = 1;
    let mut idx = 0;
    while idx < bytes.len() {
        if bytes[idx] == b',' {
            n_columns += 1;
        }
        idx += 1;
    }
    n_columns
};

/// That a run is still open (queued, running or parked), as a literal for `concat!`. Written as
/// equalities: SQLite builds an IN list of three values or more into a temporary b-tree each
/// time the statement runs, and a run's end is written at every turn.
macro_rules! run_is_open {
    () => {
        "(status = 'queued' OR status = 'running' OR status = 'parked')"
    };
}
pub(crate) use run_is_open;

pub(crate) fn run_from_row(row: &Row<'_>) -> Result<Result<RunRow>> {
    let id: String = row.get(0)?;
    let session_id: String = row.get(1)?;
    let queue: String = row.get(2)?;
    let status: String = row.get(3)?;
    let user_event_ids: String = row.get(4)?;
    let parent_run_id: Option<String> = row.get(5)?;
    let result: Option<String> = row.get(9)?;
    let parsed = (|| {
        let corrupt = |e: &dyn std::fmt::Display| Error::corrupt("runs", e);
        let user_event_ids: Vec<i64> =
            serde_json::from_str(&user_event_ids).map_err(|e| corrupt(&e))?;
        Ok(RunRow {
            id: id.parse().map_err(|e| corrupt(&e))?,
            session_id: session_id.parse().map_err(|e| corrupt(&e))?,
            queue: queue.parse().map_err(|e| corrupt(&e))?,
            status: status.parse().map_err(|e| corrupt(&e))?,
            user_event_ids: user_event_ids.into_iter().map(EventId).collect(),
            parent_run_id: parent_run_id
                .map(|id| id.parse())
                .transpose()
                .map_err(|e| corrupt(&e))?,
            typed: row.get(6)?,
            owner: row.get(7)?,
            attempts: row.get(8)?,
            pass: row.get(12)?,
            result: result
                .map(|result| serde_json::from_str(&result))
                .transpose()
                .map_err(|e| corrupt(&e))?,
            created_at_ms: row.get(10)?,
            updated_at_ms: row.get(11)?,
            trace_parent: row.get(13)?,
        })
    })();
    Ok(parsed)
}

pub(crate) fn get_run(connection: &Connection, id: RunId) -> Result<Option<RunRow>> {
    connection
        .prepare_cached(&format!("SELECT {RUN_COLUMNS} FROM runs WHERE id = ?1"))?
        .query_row(params![id.to_string()], run_from_row)
        .optional()?
        .transpose()
}

/// Keeps a traceparent as a run's newest span.
const SET_TRACE_PARENT: &str = "UPDATE runs SET trace_parent = ?2 WHERE id = ?1";

/// Keeps `traceparent` as the run's newest span, within a commit that reads no answer of it
/// (on PostgreSQL it goes with the commit's next waited statement).
pub(crate) fn send_run_trace_parent(
    connection: &Connection,
    id: RunId,
    traceparent: &str,
) -> Result<()> {
    connection
        .prepare_cached(SET_TRACE_PARENT)?
        .send(params![id.to_string(), traceparent])
}

/// Keeps `traceparent` as the run's newest span. Returns whether the run exists.
pub(crate) fn set_run_trace_parent(
    connection: &Connection,
    id: RunId,
    traceparent: &str,
) -> Result<bool> {
    let n_changed = connection
        .prepare_cached(SET_TRACE_PARENT)?
        .execute(params![id.to_string(), traceparent])?;
    Ok(n_changed == 1)
}

/// Moves a run to `status`, with its result when it has one. Returns whether the run exists.
pub(crate) fn set_run_status(
    connection: &Connection,
    id: RunId,
    status: RunStatus,
    result: Option<&str>,
    now_ms: i64,
) -> Result<bool> {
    update_status(connection, SET_STATUS, id, status, result, now_ms)
}

/// The statement of [`set_run_status`]; [`FINISH_RUN`] is it with a condition.
macro_rules! set_status {
    () => {
        "UPDATE runs SET status = ?2, result = COALESCE(?3, result), updated_at = ?4 WHERE id = ?1"
    };
}

const SET_STATUS: &str = set_status!();

/// [`finish_run`]'s statement: [`SET_STATUS`] where the run is still open.
const FINISH_RUN: &str = concat!(set_status!(), " AND ", run_is_open!());

/// [`FINISH_RUN`], its answer a row for the run it ended.
const FINISH_RUN_RETURNING: &str = concat!(set_status!(), " AND ", run_is_open!(), " RETURNING id");

/// Runs `sql` (one of [`SET_STATUS`] and [`FINISH_RUN`]) for the run: its status and its result,
/// when it has one. Returns whether a row was updated.
fn update_status(
    connection: &Connection,
    sql: &'static str,
    id: RunId,
    status: RunStatus,
    result: Option<&str>,
    now_ms: i64,
) -> Result<bool> {
    let n_updated = connection.prepare_cached(sql)?.execute(params![
        id.to_string(),
        status.as_str(),
        result,
        now_ms
    ])?;
    Ok(n_updated == 1)
}

/// Every run left `running`, oldest first: what the boot sweep requeues.
pub(crate) fn list_running(connection: &Connection) -> Result<Vec<RunRow>> {
    let mut statement = connection.prepare_cached(&format!(
        "SELECT {RUN_COLUMNS} FROM runs WHERE status = 'running' ORDER BY rowid"
    ))?;
    collect_rows(statement.query_map(params![], run_from_row)?)
}

/// Every run not in a terminal state (queued, running or parked), oldest first.
pub(crate) fn list_open(connection: &Connection) -> Result<Vec<RunRow>> {
    let mut statement = connection.prepare_cached(concat!(
        "SELECT ",
        run_columns!(),
        " FROM runs WHERE ",
        run_is_open!(),
        " ORDER BY rowid"
    ))?;
    collect_rows(statement.query_map(params![], run_from_row)?)
}

/// The session's newest `limit` runs (all of them for `None`), oldest first.
pub(crate) fn list_session_runs(
    connection: &Connection,
    session_id: SessionId,
    limit: Option<usize>,
) -> Result<Vec<RunRow>> {
    let mut statement = connection.prepare_cached(&format!(
        "SELECT * FROM (SELECT {RUN_COLUMNS}, rowid AS n FROM runs WHERE session_id = ?1
             ORDER BY rowid DESC LIMIT ?2) AS newest ORDER BY n"
    ))?;
    let limit = limit.map_or(i64::MAX, |limit| i64::try_from(limit).unwrap_or(i64::MAX));
    collect_rows(statement.query_map(params![session_id.to_string(), limit], run_from_row)?)
}

/// Moves a run to `status` like [`set_run_status`], unless it has already ended: a terminal run
/// is left as it is. Returns whether the run was updated (`false` also for a missing run).
pub(crate) fn finish_run(
    connection: &Connection,
    id: RunId,
    status: RunStatus,
    result: Option<&str>,
    now_ms: i64,
) -> Result<bool> {
    update_status(connection, FINISH_RUN, id, status, result, now_ms)
}

/// [`finish_run`], whose answer is wanted only once the transaction's answers are read (its
/// `COMMIT` at the latest): on PostgreSQL it is sent without waiting. One row in the answer
/// when the run was ended, none when it had ended already or is gone.
pub(crate) fn send_finish_run(
    connection: &Connection,
    id: RunId,
    status: RunStatus,
    result: Option<&str>,
    now_ms: i64,
) -> Result<crate::sql::LaterRows<()>> {
    if connection.engine() == crate::Engine::Sqlite {
        let finished = finish_run(connection, id, status, result, now_ms)?;
        return Ok(crate::sql::LaterRows::Now(match finished {
            true => vec![()],
            false => Vec::new(),
        }));
    }
    connection
        .prepare_cached(FINISH_RUN_RETURNING)?
        .send_query_map(
            params![id.to_string(), status.as_str(), result, now_ms],
            |_| Ok(()),
        )
}

/// The query of [`queued_event_ids`], in `runs_open_by_session` (see [`claim::NEXT_CLAIMABLE`]).
pub(crate) const QUEUED_EVENT_IDS: &str = "SELECT user_event_ids FROM runs
     WHERE session_id = ?1 AND status = 'queued'
     ORDER BY rowid";

/// The `user_event_ids` of the session's queued runs (those waiting their turn), flattened, in
/// run order.
pub(crate) fn queued_event_ids(
    connection: &Connection,
    session_id: SessionId,
) -> Result<Vec<EventId>> {
    let mut statement = connection.prepare_cached(QUEUED_EVENT_IDS)?;
    let rows = statement.query_map(params![session_id.to_string()], |row| {
        row.get::<_, String>(0)
    })?;
    let mut event_ids = Vec::new();
    for row in rows {
        let ids: Vec<i64> = serde_json::from_str(&row?).map_err(|e| Error::corrupt("runs", e))?;
        event_ids.extend(ids.into_iter().map(EventId));
    }
    Ok(event_ids)
}

/// The sessions that have a run still open (`queued`, `running` or `parked`), each once, in the
/// order of their oldest open run.
pub(crate) fn sessions_with_open_runs(connection: &Connection) -> Result<Vec<SessionId>> {
    let mut statement = connection.prepare_cached(concat!(
        "SELECT session_id FROM runs WHERE ",
        run_is_open!(),
        " GROUP BY session_id ORDER BY MIN(rowid)"
    ))?;
    let rows = statement.query_map(params![], |row| row.get::<_, String>(0))?;
    let mut session_ids = Vec::new();
    for row in rows {
        session_ids.push(Error::parse_column("runs", &row?)?);
    }
    Ok(session_ids)
}

/// A person's message and the run that answers it, in the caller's transaction: appends `event`
/// to the session's log, queues run `run_id` on `queue` naming that event, and sets the
/// session's `updated_at`. A deleted session refuses it before anything is written. With
/// `claim_for` (a slot of the queue is held for it), the run is claimed for that owner at once,
/// with the session's lease, when it may start at once ([`starts_at_once`]); it stays queued
/// otherwise.
pub(crate) fn send_user_message(
    connection: &Connection,
    session_id: SessionId,
    event: &log::PreparedEvent,
    run_id: RunId,
    queue: Queue,
    now_ms: i64,
    claim_for: Option<&ClaimFor>,
) -> Result<(SessionEvent, RunRow)> {
    // On PostgreSQL the event's insert goes with the claim's checks: one trip for both. They
    // read nothing it writes.
    let sent = event.send_append(connection, session_id)?;
    let starts = match claim_for {
        Some(claim) => starts_at_once(connection, queue, session_id, run_id, claim)?,
        None => false,
    };
    let stored = event.stored(session_id, &sent.placed(connection)?)?;
    let run = NewRun {
        id: run_id,
        session_id,
        queue,
        user_event_ids: vec![stored.id],
        parent_run_id: None,
        typed: false,
        created_at_ms: now_ms,
    };
    let owner = claim_for
        .filter(|_| starts)
        .map(|claim| claim.owner.as_str());
    Ok((stored, queue_run_for(connection, &run, now_ms, owner)?))
}

/// Queues a person's run (touching its session); with `claim_for`, claimed for that owner in
/// the same transaction when it may start at once ([`starts_at_once`]).
pub(crate) fn queue_run(
    connection: &Connection,
    run: &NewRun,
    now_ms: i64,
    claim_for: Option<&ClaimFor>,
) -> Result<RunRow> {
    let owner = match claim_for {
        Some(claim) if starts_at_once(connection, run.queue, run.session_id, run.id, claim)? => {
            Some(claim.owner.as_str())
        }
        _ => None,
    };
    queue_run_for(connection, run, now_ms, owner)
}

/// [`queue_run`], claimed for `owner` at once when one is given (it may start at once).
fn queue_run_for(
    connection: &Connection,
    run: &NewRun,
    now_ms: i64,
    owner: Option<&str>,
) -> Result<RunRow> {
    insert_run_as(connection, run, owner)?;
    sessions::touch_session(connection, run.session_id, now_ms)?;
    let mut run = run.queued();
    if let Some(owner) = owner {
        started(&mut run, owner, now_ms);
        take_lease(connection, &run, owner, now_ms)?;
    }
    Ok(run)
}

impl Store {
    pub async fn enqueue_run(&self, run: NewRun) -> Result<()> {
        self.write(Some(run.session_id), move |connection| {
            insert_run(connection, &run)
        })
        .await
    }

    /// Moves a run to `status` (keeping its result unless a new one is given). Returns whether
    /// the run exists.
    pub async fn set_run_status(
        &self,
        id: RunId,
        status: RunStatus,
        result: Option<serde_json::Value>,
        now_ms: i64,
    ) -> Result<bool> {
        let result = result.map(|result| result.to_string());
        self.write(None, move |connection| {
            set_run_status(connection, id, status, result.as_deref(), now_ms)
        })
        .await
    }

    /// Keeps `traceparent` as the run's newest span (traces are exported): the attempt that
    /// takes the run up after a crash links to it. Returns whether the run exists.
    pub async fn set_run_trace_parent(&self, id: RunId, traceparent: String) -> Result<bool> {
        self.write(None, move |connection| {
            set_run_trace_parent(connection, id, &traceparent)
        })
        .await
    }

    pub async fn get_run(&self, id: RunId) -> Result<Option<RunRow>> {
        self.read(move |connection| get_run(connection, id)).await
    }

    /// Every run left `running`, oldest first.
    pub async fn list_running_runs(&self) -> Result<Vec<RunRow>> {
        self.read(list_running).await
    }

    /// Every run not yet ended (queued, running or parked), oldest first.
    pub async fn list_open_runs(&self) -> Result<Vec<RunRow>> {
        self.read(list_open).await
    }

    pub async fn list_session_runs(&self, session_id: SessionId) -> Result<Vec<RunRow>> {
        self.read(move |connection| list_session_runs(connection, session_id, None))
            .await
    }

    /// The session's newest `limit` runs, oldest first.
    pub async fn recent_session_runs(
        &self,
        session_id: SessionId,
        limit: usize,
    ) -> Result<Vec<RunRow>> {
        self.read(move |connection| list_session_runs(connection, session_id, Some(limit)))
            .await
    }

    /// A person's message and the run that answers it, in one transaction: appends `event` to
    /// the session's log (at the next seq, as [`Store::append_events`] does), queues run
    /// `run_id` on `queue` with `user_event_ids = [event.id]`, and sets the session's
    /// `updated_at` to `now_ms`. Returns both rows as stored. A deleted session refuses the
    /// whole write; nothing of it is committed. With `claim_for` (the caller holds a slot of
    /// the queue for the run), the run is claimed for that owner in the same transaction
    /// (running, with the session's lease) when it may start at once: its session is free,
    /// its account is within its share of runs in flight, and no queued run could start
    /// instead; otherwise it is queued.
    pub async fn send_user_message(
        &self,
        session_id: SessionId,
        event: NewEvent,
        run_id: RunId,
        queue: Queue,
        now_ms: i64,
        claim_for: Option<ClaimFor>,
    ) -> Result<(SessionEvent, RunRow)> {
        let event = log::PreparedEvent::of(event);
        let (event, run) = self
            .write(Some(session_id), move |connection| {
                send_user_message(
                    connection,
                    session_id,
                    &event,
                    run_id,
                    queue,
                    now_ms,
                    claim_for.as_ref(),
                )
            })
            .await?;
        self.note_claimed(&run);
        Ok((event, run))
    }

    /// Ends a run: [`Store::set_run_status`], except that a run already terminal (succeeded,
    /// failed, canceled) is left as it is. Returns whether the run was updated: `false` for a
    /// terminal or missing run, and then nothing was written.
    pub async fn finish_run(
        &self,
        run_id: RunId,
        status: RunStatus,
        result: Option<serde_json::Value>,
        now_ms: i64,
    ) -> Result<bool> {
        let result = result.map(|result| result.to_string());
        self.write(None, move |connection| {
            finish_run(connection, run_id, status, result.as_deref(), now_ms)
        })
        .await
    }

    /// The log events the session's queued runs (those waiting their turn) answer, flattened,
    /// in run order.
    pub async fn queued_event_ids(&self, session_id: SessionId) -> Result<Vec<EventId>> {
        self.read(move |connection| queued_event_ids(connection, session_id))
            .await
    }

    /// The sessions with a run `queued`, `running` or `parked`, each once, in the order of
    /// their oldest open run.
    pub async fn list_sessions_with_open_runs(&self) -> Result<Vec<SessionId>> {
        self.read(sessions_with_open_runs).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::{database_with_a_session, new_database};

    fn builds_a_temporary_btree(connection: &Connection, sql: &str) -> bool {
        crate::schema::program(connection.sqlite().expect("a SQLite connection"), sql)
            .iter()
            .any(|op| op == "OpenEphemeral")
    }

    /// A message whose run starts at once writes that run once, running: it never enters the
    /// indexes of queued runs only to leave them in the same transaction. Counted in rows
    /// written (SQLite's `changes`): the event, the run, the session's time and the lease.
    #[test]
    fn a_run_started_with_its_message_is_written_once() {
        let session_id = SessionId::from_u128(1);
        let (_dir, connection) = database_with_a_session(&session_id.to_string());
        let send = |run_id: u128, now_ms: i64| {
            let event = seed_events::NewEvent::message(
                seed_events::EventRole::User,
                "user",
                serde_json::json!({"text": "hello"}),
                now_ms,
            );
            let sqlite = connection.sqlite().expect("a SQLite connection");
            let before = sqlite.total_changes();
            let (_, run) = send_user_message(
                &connection,
                session_id,
                &log::PreparedEvent::of(event),
                RunId::from_u128(run_id),
                Queue::Interactive,
                now_ms,
                Some(&ClaimFor::unshared("boot-a")),
            )
            .expect("sent");
            (run, sqlite.total_changes() - before)
        };
        let (started, n_rows) = send(1, 10);
        assert_eq!(
            (started.status, started.owner.as_deref(), started.attempts),
            (RunStatus::Running, Some("boot-a"), 1)
        );
        assert_eq!(
            get_run(&connection, started.id).expect("read").as_ref(),
            Some(&started)
        );
        assert_eq!(n_rows, 4, "the event, the run, the session, the lease");
        // The session is busy now: the next message's run waits in the queue.
        let (waiting, n_rows) = send(2, 11);
        assert_eq!((waiting.status, waiting.attempts), (RunStatus::Queued, 0));
        assert_eq!(n_rows, 3, "the event, the run, the session");
    }

    #[test]
    fn a_continued_runs_successor_is_read_from_its_result() {
        let successor = SessionId::from_u128(7);
        let run = |result: Option<serde_json::Value>| RunRow {
            result,
            ..NewRun {
                id: RunId::from_u128(1),
                session_id: SessionId::from_u128(1),
                queue: Queue::Interactive,
                user_event_ids: Vec::new(),
                parent_run_id: None,
                typed: false,
                created_at_ms: 0,
            }
            .queued()
        };
        let continued = serde_json::json!({
            "continued_to_session_id": successor.to_string(),
            "continuation_id": "00000000-0000-0000-0000-000000000008",
        });
        assert_eq!(
            run(Some(continued)).continued_to_session_id(),
            Some(successor)
        );
        for result in [
            None,
            Some(serde_json::json!({"answer": "hi"})),
            Some(serde_json::json!({"continued_to_session_id": "not an id"})),
            Some(serde_json::json!("not an object")),
        ] {
            assert_eq!(
                run(result.clone()).continued_to_session_id(),
                None,
                "{result:?}"
            );
        }
    }

    #[test]
    fn a_runs_end_and_the_delegation_checks_build_no_temporary_btree() {
        let (_dir, connection) = new_database();
        // What the statements avoid: an IN list of the open statuses is built into a b-tree.
        assert!(builds_a_temporary_btree(
            &connection,
            "UPDATE runs SET status = ?2 WHERE id = ?1
             AND status IN ('queued', 'running', 'parked')"
        ));
        for sql in [
            SET_STATUS,
            FINISH_RUN,
            crate::children::HAS_OPEN_CHILDREN,
            crate::children::RESUME_IF_CHILDREN_DONE,
            FIRST_WAITING_ACCOUNT,
            NEXT_WAITING_ACCOUNT,
            ACCOUNT_RUNS_IN_FLIGHT,
            ACCOUNT_RUNS_IN_FLIGHT_OF_NONE,
            NEXT_CLAIMABLE_OF_ACCOUNT,
            NEXT_CLAIMABLE_OF_NONE,
            SESSION_FREE_FOR_NEW_RUN,
        ] {
            assert!(!builds_a_temporary_btree(&connection, sql), "{sql}");
        }
    }

    #[test]
    fn an_open_run_is_one_whose_status_is_not_terminal() {
        let (_dir, connection) = database_with_a_session("ses");
        for status in RunStatus::ALL {
            connection
                .execute(
                    "INSERT INTO runs (id, session_id, queue, status, created_at, updated_at)
                     VALUES (?1, 'ses', 'interactive', ?1, 0, 0)",
                    params![status.as_str()],
                )
                .expect("a run");
        }
        let mut statement = connection
            .prepare(concat!(
                "SELECT status FROM runs WHERE ",
                run_is_open!(),
                " ORDER BY rowid"
            ))
            .expect("the query");
        let open: Vec<String> = statement
            .query_map(params![], |row| row.get(0))
            .and_then(Iterator::collect)
            .expect("the open runs");
        let expected: Vec<String> = RunStatus::ALL
            .into_iter()
            .filter(|status| !status.is_terminal())
            .map(|status| status.as_str().to_owned())
            .collect();
        assert_eq!(open, expected);
    }
}
