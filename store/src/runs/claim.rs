//! Claiming runs for the queue: the oldest queued run whose session is free is marked running
//! for its owner (one more attempt), with its session's store lease when the runtime leases;
//! a person's new run may be claimed in the transaction that queues it, when it would be the
//! queue's next claim anyway ([`starts_at_once`]).

use rusqlite::{Connection, OptionalExtension, params};
use seed_events::{Queue, RunId, RunStatus, SessionId};

use super::{RunRow, run_columns, run_from_row};
use crate::{Error, Result, Store};

/// Claims the oldest queued run on `queue` whose session has no run in flight, marking it
/// running under `owner`. `None` when nothing can start.
pub(crate) fn claim_next_run(
    connection: &Connection,
    queue: Queue,
    owner: &str,
    now_ms: i64,
) -> Result<Option<RunRow>> {
    match next_claimable(connection, queue, None)? {
        Some(run) => start_claimed(connection, run, owner, now_ms).map(Some),
        None => Ok(None),
    }
}

/// When the queued run `queued` may start: its session has no run in flight and, with an
/// owner `?2`, no lease anyone else holds (anyone but that owner for that very run). "No run
/// in flight" is looked up in `runs_open_by_session`: SQLite uses a partial index for a query
/// whose terms imply its condition, and one of the statuses it names does.
macro_rules! session_free {
    () => {
        "NOT EXISTS (SELECT 1 FROM runs AS busy
                     WHERE busy.session_id = queued.session_id AND busy.status = 'running')
         AND (?2 IS NULL
              OR NOT EXISTS (SELECT 1 FROM session_leases AS lease
                             WHERE lease.session_id = queued.session_id
                               AND NOT (lease.owner = ?2 AND lease.run_id IS queued.id)))"
    };
}

/// The queued runs on queue `?1` that may start (for owner `?2`, see [`session_free!`]), as
/// a literal for `concat!`: what [`NEXT_CLAIMABLE`] takes the oldest of, and what a new run
/// must not overtake ([`STARTS_AT_ONCE`]).
macro_rules! claimable {
    () => {
        concat!(
            "runs AS queued WHERE queue = ?1 AND status = 'queued' AND ",
            session_free!()
        )
    };
}

/// The query of [`next_claimable`]: the oldest queued run on queue `?1` that may start.
pub(crate) const NEXT_CLAIMABLE: &str = concat!(
    "SELECT ",
    run_columns!(),
    " FROM ",
    claimable!(),
    " ORDER BY rowid LIMIT 1"
);

/// The oldest queued run on `queue` whose session has no run in flight; with `lease_owner`,
/// also none whose session's lease another holds (anyone but that owner for that very run).
fn next_claimable(
    connection: &Connection,
    queue: Queue,
    lease_owner: Option<&str>,
) -> Result<Option<RunRow>> {
    connection
        .prepare_cached(NEXT_CLAIMABLE)?
        .query_row(params![queue.as_str(), lease_owner], run_from_row)
        .optional()?
        .transpose()
}

/// Marks the queued `run` running for `owner` (one more attempt) and returns it as it now is.
fn start_claimed(
    connection: &Connection,
    mut run: RunRow,
    owner: &str,
    now_ms: i64,
) -> Result<RunRow> {
    let n_updated = connection
        .prepare_cached(
            "UPDATE runs SET status = 'running', owner = ?2, attempts = attempts + 1,
                 updated_at = ?3
             WHERE id = ?1",
        )?
        .execute(params![run.id.to_string(), owner, now_ms])?;
    if n_updated != 1 {
        return Err(Error::corrupt(
            "runs",
            format_args!("run {} vanished while claimed", run.id),
        ));
    }
    started(&mut run, owner, now_ms);
    Ok(run)
}

/// `run` as starting it for `owner` leaves its row: running, one more attempt.
pub(super) fn started(run: &mut RunRow, owner: &str, now_ms: i64) {
    run.status = RunStatus::Running;
    run.owner = Some(owner.to_owned());
    run.attempts += 1;
    run.updated_at_ms = now_ms;
}

/// Claims the next run as [`claim_next_run`] does, and takes its session's store lease for it in
/// the same transaction. A run whose session's lease someone else holds (another process, or
/// another run) is passed over: it stays queued until the lease is free.
pub(crate) fn claim_next_run_leased(
    connection: &Connection,
    queue: Queue,
    owner: &str,
    now_ms: i64,
) -> Result<Option<RunRow>> {
    let Some(run) = next_claimable(connection, queue, Some(owner))? else {
        return Ok(None);
    };
    start_leased(connection, run, owner, now_ms).map(Some)
}

/// Marks the queued `run` running for `owner` and takes its session's lease for it.
fn start_leased(connection: &Connection, run: RunRow, owner: &str, now_ms: i64) -> Result<RunRow> {
    let run = start_claimed(connection, run, owner, now_ms)?;
    take_lease(connection, &run, owner, now_ms)?;
    Ok(run)
}

/// Takes the session's lease for the run `run` starts.
pub(super) fn take_lease(
    connection: &Connection,
    run: &RunRow,
    owner: &str,
    now_ms: i64,
) -> Result<()> {
    // Held already by this owner for this run (a claim redone), or taken now.
    connection
        .prepare_cached(
            "INSERT OR IGNORE INTO session_leases (session_id, owner, run_id, acquired_at)
             VALUES (?1, ?2, ?3, ?4)",
        )?
        .execute(params![
            run.session_id.to_string(),
            owner,
            run.id.to_string(),
            now_ms
        ])?;
    Ok(())
}

/// The query of [`starts_at_once`]: no queued run on queue `?1` may start (so the queue's next
/// claim would take the new run), and the session `?3` of the new run `?4` is free for owner
/// `?2`, by the same [`session_free!`] as a queued run's, over a row that stands for the run
/// not yet inserted.
pub(crate) const STARTS_AT_ONCE: &str = concat!(
    "SELECT NOT EXISTS (SELECT 1 FROM ",
    claimable!(),
    ") AND EXISTS (SELECT 1 FROM (SELECT ?3 AS session_id, ?4 AS id) AS queued WHERE ",
    session_free!(),
    ")"
);

/// Whether the new run `run_id` of `session_id` on `queue` may start for `owner` at once, in
/// the transaction that queues it: it would be the run the queue's next claim takes
/// ([`NEXT_CLAIMABLE`]), so it overtakes no older run that could start, of its own session or
/// another (fair between sessions), and its session is free. Asked before the run is
/// inserted: it is the newest of all, and no other run's turn to start depends on it.
pub(super) fn starts_at_once(
    connection: &Connection,
    queue: Queue,
    session_id: SessionId,
    run_id: RunId,
    owner: &str,
) -> Result<bool> {
    Ok(connection.prepare_cached(STARTS_AT_ONCE)?.query_row(
        params![
            queue.as_str(),
            owner,
            session_id.to_string(),
            run_id.to_string()
        ],
        |row| row.get(0),
    )?)
}

/// Claims up to `max` runs on `queue` in one transaction, each with its session's lease, as
/// [`claim_next_run_leased`] would one by one.
pub(crate) fn claim_runs_leased(
    connection: &Connection,
    queue: Queue,
    owner: &str,
    max: usize,
    now_ms: i64,
) -> Result<Vec<RunRow>> {
    let mut claimed = Vec::new();
    while claimed.len() < max {
        match claim_next_run_leased(connection, queue, owner, now_ms)? {
            Some(run) => claimed.push(run),
            None => break,
        }
    }
    Ok(claimed)
}

impl Store {
    /// Claims the oldest queued run on `queue` whose session has no run in flight.
    pub async fn claim_next_run(
        &self,
        queue: Queue,
        owner: &str,
        now_ms: i64,
    ) -> Result<Option<RunRow>> {
        let owner = owner.to_owned();
        self.write(None, move |connection| {
            claim_next_run(connection, queue, &owner, now_ms)
        })
        .await
    }

    /// Claims runs of several queues in one transaction: up to `max` runs of each `(queue,
    /// max)`, in that order (oldest first, one per session), each with its session's store lease
    /// taken for it (a run whose session's lease is held by someone else stays queued).
    pub async fn claim_runs_of_queues(
        &self,
        queues: Vec<(Queue, usize)>,
        owner: &str,
        now_ms: i64,
    ) -> Result<Vec<RunRow>> {
        let owner = owner.to_owned();
        self.write(None, move |connection| {
            let mut claimed = Vec::new();
            for &(queue, max) in &queues {
                claimed.extend(claim_runs_leased(connection, queue, &owner, max, now_ms)?);
            }
            Ok(claimed)
        })
        .await
    }
}
