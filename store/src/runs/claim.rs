//! Claiming runs for the queue, fairly between accounts: the next run claimed is the oldest
//! queued run whose session is free of the account with the fewest runs in flight, and an
//! account with its share of runs in flight ([`ClaimFor::account_runs_max`]) has none claimed
//! until one ends. A claimed run is marked running for its owner (one more attempt), with its
//! session's store lease when the runtime leases; a person's new run may be claimed in the
//! transaction that queues it, when nothing else queued could start ([`starts_at_once`]).
//!
//! The accounts with queued runs are found by skipping through `runs_queued_by_account` (one
//! seek per account, not a walk over every queued run), and an account's runs in flight are
//! counted in `runs_running_by_account`, an index of just the running runs, and only up to its
//! share: a claim costs a few seeks per waiting account, whatever the length of the queue.

use crate::params;
use crate::sql::{Connection, OptionalExtension};
use seed_events::{Queue, RunId, RunStatus, SessionId};

use super::{RUN_COLUMNS_COUNT, RunRow, run_columns, run_from_row};
use crate::{Error, Result, Store};

/// Who a run is claimed for, and the share of the runs in flight each account may hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimFor {
    /// The boot id of the process that runs it.
    pub owner: String,
    /// Runs of one account in flight (running) at once, on both queues together: past it, an
    /// account's queued runs wait, so one account's slow runs cannot hold every slot while
    /// another's wait. `usize::MAX`: no share.
    pub account_runs_max: usize,
    /// The runs the owner has room for besides the one being claimed (its free slots on the
    /// queue, with those a claim in flight holds for queued runs). A new run may start at once
    /// past queued runs that all fit in it, none of them its session's (`starts_at_once`).
    /// 0: a new run waits behind any queued run that could start.
    pub room: usize,
}

impl ClaimFor {
    /// Claims for `owner` with no share per account, and no room counted.
    pub fn unshared(owner: impl Into<String>) -> ClaimFor {
        ClaimFor {
            owner: owner.into(),
            account_runs_max: usize::MAX,
            room: 0,
        }
    }
}

/// Claims the next queued run on `queue` ([`next_claimable`], no share per account), marking
/// it running under `owner`. `None` when nothing can start.
pub(crate) fn claim_next_run(
    connection: &Connection,
    queue: Queue,
    owner: &str,
    now_ms: i64,
) -> Result<Option<RunRow>> {
    match next_claimable(connection, queue, None, usize::MAX)? {
        Some(run) => start_claimed(connection, run, owner, now_ms).map(Some),
        None => Ok(None),
    }
}

/// When the queued run `queued` may start: its session has no run in flight and, with an
/// owner `?2`, no lease anyone else holds (anyone but that owner for that very run). "No run
/// in flight" is looked up in `runs_open_by_session`: SQLite uses a partial index for a query
/// whose terms imply its condition, and one of the statuses it names does. A session with a
/// pending approval is not free either: its parked run goes first, once the person decides.
/// Nor is it free for a run whose pass has not started while a run of the session whose pass
/// has is queued (cut off by a restart, decided on an approval, after a panic): that run comes
/// back to a turn it may have left open, and adopts it (the spec's "same run") before any
/// other run of the session could find the turn unsettled and abort it.
macro_rules! session_free {
    () => {
        "NOT EXISTS (SELECT 1 FROM runs AS busy
                     WHERE busy.session_id = queued.session_id AND busy.status = 'running')
         AND NOT EXISTS (SELECT 1 FROM approvals AS waiting
                         WHERE waiting.session_id = queued.session_id
                           AND waiting.status = 'pending')
         AND (queued.pass_started = 1
              OR NOT EXISTS (SELECT 1 FROM runs AS resuming
                             WHERE resuming.session_id = queued.session_id
                               AND resuming.status = 'queued' AND resuming.pass_started = 1))
         AND (CAST(?2 AS TEXT) IS NULL
              OR NOT EXISTS (SELECT 1 FROM session_leases AS lease
                             WHERE lease.session_id = queued.session_id
                               AND NOT (lease.owner = ?2 AND lease.run_id IS NOT DISTINCT FROM queued.id)))"
    };
}

/// The first account, in byte order, with a queued run (on either queue); NULL first, for a
/// run that names no account.
pub(crate) const FIRST_WAITING_ACCOUNT: &str = "SELECT account_id
     FROM runs INDEXED BY runs_queued_by_account WHERE status = 'queued' ORDER BY account_id LIMIT 1";

/// The next account after `?1`, in byte order, with a queued run (on either queue).
pub(crate) const NEXT_WAITING_ACCOUNT: &str = "SELECT account_id
     FROM runs INDEXED BY runs_queued_by_account WHERE status = 'queued' AND account_id > ?1 ORDER BY account_id LIMIT 1";

/// The count of [`ACCOUNT_RUNS_IN_FLIGHT`], its account matched by `$account`.
macro_rules! runs_in_flight_where {
    ($account:literal) => {
        concat!(
            "SELECT COUNT(*) FROM (SELECT 1 FROM runs WHERE ",
            $account,
            " AND status = 'running' LIMIT ?2) AS in_flight"
        )
    };
}

/// The query of [`NEXT_CLAIMABLE_OF_ACCOUNT`], its account matched by `$account`.
macro_rules! claimable_where {
    ($account:literal) => {
        concat!(
            "SELECT ",
            run_columns!(),
            ", queued.rowid FROM runs AS queued INDEXED BY runs_queued_by_account WHERE ",
            $account,
            " AND queued.status = 'queued' AND queued.queue = ?1 AND ",
            session_free!(),
            " ORDER BY queued.rowid LIMIT 1"
        )
    };
}

/// The runs of account `?1` in flight, counted up to `?2`. An account is matched with `=`,
/// and runs that name none by [`ACCOUNT_RUNS_IN_FLIGHT_OF_NONE`]: PostgreSQL finds no index
/// for `IS NOT DISTINCT FROM`, and would read every run of the table for it.
pub(crate) const ACCOUNT_RUNS_IN_FLIGHT: &str = runs_in_flight_where!("account_id = ?1");

/// [`ACCOUNT_RUNS_IN_FLIGHT`] for the runs that name no account (`?1` is NULL).
pub(crate) const ACCOUNT_RUNS_IN_FLIGHT_OF_NONE: &str =
    runs_in_flight_where!("account_id IS NULL AND CAST(?1 AS TEXT) IS NULL");

/// The oldest queued run on queue `?1` of account `?3` that may start (for owner `?2`, see
/// [`session_free!`]), with its row id. The account is matched as in
/// [`ACCOUNT_RUNS_IN_FLIGHT`], with `=`.
pub(crate) const NEXT_CLAIMABLE_OF_ACCOUNT: &str = claimable_where!("queued.account_id = ?3");

/// [`NEXT_CLAIMABLE_OF_ACCOUNT`] for the runs that name no account (`?3` is NULL).
pub(crate) const NEXT_CLAIMABLE_OF_NONE: &str =
    claimable_where!("queued.account_id IS NULL AND CAST(?3 AS TEXT) IS NULL");

/// Whether the session `?3` of the new run `?4` is free for owner `?2`, by the same
/// [`session_free!`] as a queued run's, over a row that stands for the run not yet inserted
/// (its queue `?1` too, which the check does not read: PostgreSQL wants every parameter typed;
/// its pass not started, or as the row says for a queued run claimed on PostgreSQL).
pub(crate) const SESSION_FREE_FOR_NEW_RUN: &str = concat!(
    "SELECT EXISTS (SELECT 1 FROM (SELECT CAST(?3 AS TEXT) AS session_id, CAST(?4 AS TEXT) AS id,
                              CAST(?1 AS TEXT) AS queue,
                              COALESCE((SELECT pass_started FROM runs WHERE id = ?4), 0)
                                  AS pass_started) AS queued WHERE ",
    session_free!(),
    ")"
);

/// [`waiting_accounts`] on PostgreSQL, in one statement: the same seeks of
/// `runs_queued_by_account`, one per account, each from the account before (runs that name
/// no account sort last there, and are found only when no other account has runs queued).
pub(crate) const WAITING_ACCOUNTS_POSTGRES: &str = "WITH RECURSIVE waiting (account_id, n) AS (
         (SELECT account_id, 0 FROM runs WHERE status = 'queued' ORDER BY account_id LIMIT 1)
         UNION ALL
         SELECT next.account_id, waiting.n + 1
         FROM waiting,
              LATERAL (SELECT account_id FROM runs
                       WHERE status = 'queued' AND account_id > COALESCE(waiting.account_id, '')
                       ORDER BY account_id LIMIT 1) AS next
     )
     SELECT account_id FROM waiting ORDER BY n";

/// The accounts with a queued run, as they are about to be read: on PostgreSQL all of them,
/// by a query sent without waiting; on SQLite the first of them, read at once.
struct SentWaitingAccounts(crate::sql::LaterRows<Option<String>>);

/// Sends the query of the accounts with a queued run ([`waiting_accounts`]), whose answer is
/// read with the next statement waited on.
fn send_waiting_accounts(connection: &Connection) -> Result<SentWaitingAccounts> {
    let sql = match connection.engine() {
        crate::Engine::Postgres => WAITING_ACCOUNTS_POSTGRES,
        crate::Engine::Sqlite => FIRST_WAITING_ACCOUNT,
    };
    connection
        .prepare_cached(sql)?
        .send_query_map(params![], |row| row.get(0))
        .map(SentWaitingAccounts)
}

/// The accounts with a queued run (on either queue), each once, in byte order; `None` stands
/// for runs that name no account.
fn waiting_accounts(connection: &Connection) -> Result<Vec<Option<String>>> {
    let sent = send_waiting_accounts(connection)?;
    waiting_accounts_sent(connection, sent)
}

/// [`waiting_accounts`], its query sent already ([`send_waiting_accounts`]).
fn waiting_accounts_sent(
    connection: &Connection,
    sent: SentWaitingAccounts,
) -> Result<Vec<Option<String>>> {
    connection.read_answers()?;
    let mut accounts = sent.0.values()?;
    if connection.engine() == crate::Engine::Postgres {
        return Ok(accounts);
    }
    let Some(first) = accounts.pop() else {
        return Ok(Vec::new());
    };
    let mut next = connection.prepare_cached(NEXT_WAITING_ACCOUNT)?;
    // Any account id is above the empty text, which none is.
    let mut after = first.clone().unwrap_or_default();
    let mut accounts = vec![first];
    while let Some(account_id) = next
        .query_row(params![after], |row| row.get::<_, String>(0))
        .optional()?
    {
        after.clone_from(&account_id);
        accounts.push(Some(account_id));
    }
    Ok(accounts)
}

/// The runs of `account_id` in flight, counted up to `up_to`.
fn account_runs_in_flight(
    connection: &Connection,
    account_id: Option<&str>,
    up_to: usize,
) -> Result<usize> {
    let up_to = i64::try_from(up_to).unwrap_or(i64::MAX);
    let sql = match account_id {
        Some(_) => ACCOUNT_RUNS_IN_FLIGHT,
        None => ACCOUNT_RUNS_IN_FLIGHT_OF_NONE,
    };
    let n_runs: i64 = connection
        .prepare_cached(sql)?
        .query_row(params![account_id, up_to], |row| row.get(0))?;
    Ok(usize::try_from(n_runs).unwrap_or(usize::MAX))
}

/// The run the queue claims next on `queue`: of the accounts with fewer than
/// `account_runs_max` runs in flight, the one with the fewest (the one whose run has waited
/// longest on a tie), its oldest queued run whose session is free; with `lease_owner`, also
/// not one whose session's lease another holds (anyone but that owner for that very run).
/// Within an account, and so within a session, runs start in the order they were queued.
fn next_claimable(
    connection: &Connection,
    queue: Queue,
    lease_owner: Option<&str>,
    account_runs_max: usize,
) -> Result<Option<RunRow>> {
    let accounts = waiting_accounts(connection)?;
    next_claimable_of(connection, queue, lease_owner, account_runs_max, &accounts)
}

/// [`next_claimable`] among `accounts`, the accounts with queued runs as [`waiting_accounts`]
/// found them.
fn next_claimable_of(
    connection: &Connection,
    queue: Queue,
    lease_owner: Option<&str>,
    account_runs_max: usize,
    accounts: &[Option<String>],
) -> Result<Option<RunRow>> {
    // One account alone with no share needs no count: it is first whatever its count.
    let counted = accounts.len() > 1 || account_runs_max != usize::MAX;
    let mut best: Option<(usize, i64, RunRow)> = None;
    for account_id in accounts {
        let n_in_flight = match counted {
            true => account_runs_in_flight(connection, account_id.as_deref(), account_runs_max)?,
            false => 0,
        };
        if n_in_flight >= account_runs_max {
            continue;
        }
        let sql = match account_id {
            Some(_) => NEXT_CLAIMABLE_OF_ACCOUNT,
            None => NEXT_CLAIMABLE_OF_NONE,
        };
        let found = connection
            .prepare_cached(sql)?
            .query_row(params![queue.as_str(), lease_owner, account_id], |row| {
                Ok((run_from_row(row)?, row.get::<_, i64>(RUN_COLUMNS_COUNT)?))
            })
            .optional()?;
        let Some((run, rowid)) = found else {
            continue;
        };
        let before_best = best
            .as_ref()
            .is_none_or(|(best_n, best_rowid, _)| (n_in_flight, rowid) < (*best_n, *best_rowid));
        if before_best {
            best = Some((n_in_flight, rowid, run?));
        }
    }
    Ok(best.map(|(_, _, run)| run))
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
                 updated_at = ?3, pass_started = 1
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

/// Claims the next run as [`next_claimable`] picks it for `claim` (its owner, its share per
/// account), and takes its session's store lease for it in the same transaction. A run whose
/// session's lease someone else holds (another process, or another run) is passed over: it
/// stays queued until the lease is free.
pub(crate) fn claim_next_run_leased(
    connection: &Connection,
    queue: Queue,
    claim: &ClaimFor,
    now_ms: i64,
) -> Result<Option<RunRow>> {
    let owner = claim.owner.as_str();
    let Some(run) = next_claimable(connection, queue, Some(owner), claim.account_runs_max)? else {
        return Ok(None);
    };
    if !may_claim(connection, run.session_id, run.id, owner)? {
        // Another node is claiming in the session now: the next claim looks again.
        return Ok(None);
    }
    start_leased(connection, run, owner, now_ms).map(Some)
}

/// Whether `owner` may go on to claim in `session_id` (its queued run `run_id`), in this
/// transaction: see [`send_claim_checks`].
fn may_claim(
    connection: &Connection,
    session_id: SessionId,
    run_id: RunId,
    owner: &str,
) -> Result<bool> {
    let checks = send_claim_checks(connection, "", session_id, run_id, true, owner)?;
    connection.read_answers()?;
    checks.pass()
}

/// The checks of a claim in a session, sent without waiting; [`SentClaimChecks::pass`] once
/// their answers are read.
struct SentClaimChecks {
    /// Whether the node's row has lapsed, the session's row was taken, and the queued run's row
    /// (when there is one) was taken still queued: PostgreSQL's alone.
    locks: Option<crate::sql::LaterRows<(bool, bool, bool)>>,
    /// Whether the session is free ([`SESSION_FREE_FOR_NEW_RUN`]); not asked of a queued run
    /// on SQLite, whose claim found it free in the same statement that chose it.
    session_free: Option<crate::sql::LaterRows<bool>>,
}

/// Sends the checks of a claim by `owner` in `session_id`, for run `run_id` (`queued`, or a
/// new run on `queue` not inserted yet). On PostgreSQL, where several nodes claim at once, the
/// first takes the session's row `FOR NO KEY UPDATE SKIP LOCKED`, so claims in one session take
/// turns across nodes (one that finds it taken passes, for the next claim to look again); the
/// queued run's row likewise, which must still be queued; and it refuses a node whose row has
/// lapsed (its leases are being swept). The check that the session is free is a statement of
/// its own after it: a statement reads from a snapshot taken before its locks, and this one
/// must see every claim committed before the session's row was taken. On SQLite, with one
/// writer, claims already take turns.
fn send_claim_checks(
    connection: &Connection,
    queue: &str,
    session_id: SessionId,
    run_id: RunId,
    queued: bool,
    owner: &str,
) -> Result<SentClaimChecks> {
    let on_postgres = connection.engine() == crate::Engine::Postgres;
    // One statement: whether the node's row has lapsed; the session's row taken; then, only
    // once that is this claim's, the queued run's row (when there is one) taken and checked
    // still queued. Each `SKIP LOCKED`: a row another transaction holds is passed over, never
    // waited for. A lock reads the row's newest version, committed before it is taken.
    let locks = match on_postgres {
        true => Some(
            connection
                .prepare_cached(
                    "WITH checks AS MATERIALIZED (
                         SELECT EXISTS (SELECT 1 FROM nodes WHERE id = ?1
                                    AND (ended_at IS NOT NULL
                                         OR expires_at <= CAST(extract(epoch FROM clock_timestamp()) * 1000 AS BIGINT)))
                                    AS lapsed,
                                EXISTS (SELECT 1 FROM sessions WHERE id = ?2 FOR NO KEY UPDATE SKIP LOCKED)
                                    AS locked)
                     SELECT lapsed, locked,
                            CASE WHEN lapsed OR NOT locked THEN FALSE
                                 WHEN CAST(?3 AS TEXT) IS NULL THEN TRUE
                                 ELSE EXISTS (SELECT 1 FROM runs WHERE id = ?3 AND status = 'queued'
                                              FOR UPDATE SKIP LOCKED)
                            END
                     FROM checks",
                )?
                .send_query_map(
                    params![
                        owner,
                        session_id.to_string(),
                        queued.then(|| run_id.to_string())
                    ],
                    |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)),
                )?,
        ),
        false => None,
    };
    let session_free = match on_postgres || !queued {
        true => Some(
            connection
                .prepare_cached(SESSION_FREE_FOR_NEW_RUN)?
                .send_query_map(
                    params![queue, owner, session_id.to_string(), run_id.to_string()],
                    |row| row.get(0),
                )?,
        ),
        false => None,
    };
    Ok(SentClaimChecks {
        locks,
        session_free,
    })
}

impl SentClaimChecks {
    /// Whether the claim may go on, once the answers were read.
    fn pass(self) -> Result<bool> {
        if let Some(locks) = self.locks {
            let (node_lapsed, session_locked, still_queued) =
                locks.values()?.pop().ok_or(Error::NoRows)?;
            if node_lapsed || !session_locked || !still_queued {
                return Ok(false);
            }
        }
        match self.session_free {
            Some(free) => Ok(free.values()?.pop().ok_or(Error::NoRows)?),
            None => Ok(true),
        }
    }
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
    // Held already by this owner for this run (a claim redone), or taken now. Nothing reads
    // its answer (see `Statement::send`).
    connection
        .prepare_cached(
            "INSERT INTO session_leases (session_id, owner, run_id, acquired_at, epoch)
             VALUES (?1, ?2, ?3, ?4, COALESCE((SELECT epoch FROM nodes WHERE id = ?2), 0))
             ON CONFLICT DO NOTHING",
        )?
        .send(params![
            run.session_id.to_string(),
            owner,
            run.id.to_string(),
            now_ms
        ])
}

/// Whether the new run `run_id` of `session_id` on `queue` may start for `claim` at once, in
/// the transaction that queues it: its session is free, its account has fewer runs in flight
/// than its share, and no queued run waits for it. A queued run does not wait for it when no
/// queued run could start instead ([`next_claimable`] finds none), so it overtakes no older run
/// that could start, of its own session or another's, of its own account or another's; nor
/// when its session has no run queued, the owner has room for every run queued on the queue
/// besides it (`claim.room`), and, with a share per account, its account's share has room for
/// each of its queued runs besides it: they all start as they would have, at the queue's next
/// claim. Without the room, a run queued while an older one waits for that claim would queue
/// too, and so would each message after it, every run waiting out a claim of its own (and on
/// several nodes, started by whichever node claims first, away from the node that holds its
/// session's harness). Asked before the run is inserted: it is the newest of all, and no other
/// run's turn to start depends on it. A run that may not start at once is queued, and the
/// queue's next claim picks fairly among all that wait.
pub(super) fn starts_at_once(
    connection: &Connection,
    queue: Queue,
    session_id: SessionId,
    run_id: RunId,
    claim: &ClaimFor,
) -> Result<bool> {
    let owner = claim.owner.as_str();
    // The checks, the accounts with queued runs and the runs queued (up to one past the room)
    // in one trip.
    let checks = send_claim_checks(connection, queue.as_str(), session_id, run_id, false, owner)?;
    let waiting = send_waiting_accounts(connection)?;
    let queued = match claim.room {
        0 => None,
        room => Some(send_queued_count(
            connection,
            queue,
            room.saturating_add(1),
            session_id,
        )?),
    };
    connection.read_answers()?;
    if !checks.pass()? {
        return Ok(false);
    }
    let mut account_id = None;
    let mut n_in_flight = 0;
    if claim.account_runs_max != usize::MAX {
        account_id = connection
            .prepare_cached("SELECT account_id FROM sessions WHERE id = ?1")?
            .query_row(params![session_id.to_string()], |row| {
                row.get::<_, Option<String>>(0)
            })
            .optional()?
            .flatten();
        n_in_flight =
            account_runs_in_flight(connection, account_id.as_deref(), claim.account_runs_max)?;
        if n_in_flight >= claim.account_runs_max {
            return Ok(false);
        }
    }
    let accounts = waiting_accounts_sent(connection, waiting)?;
    if let Some(queued) = queued {
        // A run of its own session queued before it starts first, whatever the room: within
        // a session, runs start in the order they were queued.
        let (n_queued, its_own_queued) = queued
            .values()?
            .first()
            .copied()
            .unwrap_or((i64::MAX, true));
        let all_fit = usize::try_from(n_queued).is_ok_and(|n_queued| n_queued <= claim.room);
        if all_fit
            && !its_own_queued
            && share_left_for_its_queued(connection, claim, &accounts, &account_id, n_in_flight)?
        {
            return Ok(true);
        }
    }
    Ok(next_claimable_of(
        connection,
        queue,
        Some(owner),
        claim.account_runs_max,
        &accounts,
    )?
    .is_none())
}

/// Whether, with a share per account, the new run's account (`account_id`, with `n_in_flight`
/// runs in flight) keeps a share for each of its queued runs besides the new run; true
/// without shares, or when it has none queued (`accounts`: those with queued runs).
fn share_left_for_its_queued(
    connection: &Connection,
    claim: &ClaimFor,
    accounts: &[Option<String>],
    account_id: &Option<String>,
    n_in_flight: usize,
) -> Result<bool> {
    if claim.account_runs_max == usize::MAX || !accounts.contains(account_id) {
        return Ok(true);
    }
    let Some(account_id) = account_id else {
        return Ok(false);
    };
    let share_left = claim.account_runs_max.saturating_sub(n_in_flight + 1);
    let limit = i64::try_from(share_left)
        .unwrap_or(i64::MAX)
        .saturating_add(1);
    let n_queued: i64 = connection
        .prepare_cached(
            "SELECT COUNT(*) FROM (SELECT 1 FROM runs WHERE status = 'queued' AND account_id = ?1
             LIMIT ?2) AS queued",
        )?
        .query_row(params![account_id, limit], |row| row.get(0))?;
    Ok(usize::try_from(n_queued).is_ok_and(|n_queued| n_queued <= share_left))
}

/// Sends the count of the runs queued on `queue`, up to `limit` (a count of `limit` is that
/// many or more), and whether `session_id` has a run queued (on either queue), whose answer
/// is read with the next statement waited on.
fn send_queued_count(
    connection: &Connection,
    queue: Queue,
    limit: usize,
    session_id: SessionId,
) -> Result<crate::sql::LaterRows<(i64, bool)>> {
    connection
        .prepare_cached(
            "SELECT (SELECT COUNT(*) FROM (SELECT 1 FROM runs WHERE status = 'queued' AND queue = ?1
                     LIMIT ?2) AS queued),
                    (SELECT COUNT(*) FROM (SELECT 1 FROM runs WHERE session_id = ?3
                     AND status = 'queued' LIMIT 1) AS its_own)",
        )?
        .send_query_map(
            params![
                queue.as_str(),
                i64::try_from(limit).unwrap_or(i64::MAX),
                session_id.to_string()
            ],
            |row| Ok((row.get::<_, i64>(0)?, row.get::<_, i64>(1)? > 0)),
        )
}

/// Claims up to `max` runs on `queue` in one transaction, each with its session's lease, as
/// [`claim_next_run_leased`] would one by one: each claim counts the runs the ones before it
/// started, so a batch goes round the waiting accounts.
pub(crate) fn claim_runs_leased(
    connection: &Connection,
    queue: Queue,
    claim: &ClaimFor,
    max: usize,
    now_ms: i64,
) -> Result<Vec<RunRow>> {
    let mut claimed = Vec::new();
    while claimed.len() < max {
        match claim_next_run_leased(connection, queue, claim, now_ms)? {
            Some(run) => claimed.push(run),
            None => break,
        }
    }
    Ok(claimed)
}

impl Store {
    /// Claims the next queued run on `queue` whose session has no run in flight, with no
    /// share per account (the oldest of the account with the fewest runs in flight).
    pub async fn claim_next_run(
        &self,
        queue: Queue,
        owner: &str,
        now_ms: i64,
    ) -> Result<Option<RunRow>> {
        let owner = owner.to_owned();
        let claimed = self
            .write(None, move |connection| {
                claim_next_run(connection, queue, &owner, now_ms)
            })
            .await?;
        if let Some(run) = &claimed {
            self.note_claimed(run);
        }
        Ok(claimed)
    }

    /// Claims runs of several queues in one transaction: up to `max` runs of each `(queue,
    /// max)`, in that order, for `claim`'s owner, each with its session's store lease taken for
    /// it (a run whose session's lease is held by someone else stays queued). Fair between
    /// accounts: each claim takes the oldest run whose session is free of the account with the
    /// fewest runs in flight, and none of an account with `claim.account_runs_max` in flight.
    pub async fn claim_runs_of_queues(
        &self,
        queues: Vec<(Queue, usize)>,
        claim: ClaimFor,
        now_ms: i64,
    ) -> Result<Vec<RunRow>> {
        let claimed = self
            .write(None, move |connection| {
                let mut claimed = Vec::new();
                for &(queue, max) in &queues {
                    claimed.extend(claim_runs_leased(connection, queue, &claim, max, now_ms)?);
                }
                Ok(claimed)
            })
            .await?;
        for run in &claimed {
            self.note_claimed(run);
        }
        Ok(claimed)
    }
}
