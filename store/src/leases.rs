//! Store leases: which harness owns a session's store now. A second holder is refused.

use crate::params;
use crate::sql::{Connection, OptionalExtension};
use seed_events::{RunId, SessionId};

use crate::Store;
use crate::{Error, Result};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseRow {
    pub session_id: SessionId,
    /// The boot id of the holding process.
    pub owner: String,
    pub run_id: Option<RunId>,
    pub acquired_at_ms: i64,
}

/// What an attempt to take a lease found. Being refused is an expected outcome, not an error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LeaseOutcome {
    /// The caller holds the lease now (or already did, for the same owner and run).
    Acquired(LeaseRow),
    /// Someone else holds it.
    HeldBy(LeaseRow),
}

pub(crate) fn get_lease(
    connection: &Connection,
    session_id: SessionId,
) -> Result<Option<LeaseRow>> {
    connection
        .prepare_cached(
            "SELECT owner, run_id, acquired_at FROM session_leases WHERE session_id = ?1",
        )?
        .query_row(params![session_id.to_string()], |row| {
            let run_id: Option<String> = row.get(1)?;
            Ok((row.get(0)?, run_id, row.get(2)?))
        })
        .optional()?
        .map(|(owner, run_id, acquired_at_ms)| {
            Ok(LeaseRow {
                session_id,
                owner,
                run_id: run_id
                    .map(|id| id.parse())
                    .transpose()
                    .map_err(|e| Error::corrupt("session_leases", e))?,
                acquired_at_ms,
            })
        })
        .transpose()
}

pub(crate) fn acquire_lease(
    connection: &Connection,
    session_id: SessionId,
    owner: &str,
    run_id: Option<RunId>,
    now_ms: i64,
) -> Result<LeaseOutcome> {
    if let Some(held) = get_lease(connection, session_id)? {
        return Ok(if held.owner == owner && held.run_id == run_id {
            LeaseOutcome::Acquired(held)
        } else {
            LeaseOutcome::HeldBy(held)
        });
    }
    connection
        .prepare_cached(
            "INSERT INTO session_leases (session_id, owner, run_id, acquired_at)
             VALUES (?1, ?2, ?3, ?4)",
        )?
        .execute(params![
            session_id.to_string(),
            owner,
            run_id.map(|id| id.to_string()),
            now_ms
        ])?;
    Ok(LeaseOutcome::Acquired(LeaseRow {
        session_id,
        owner: owner.to_owned(),
        run_id,
        acquired_at_ms: now_ms,
    }))
}

/// Releases the lease if `owner` holds it. Returns whether it did.
pub(crate) fn release_lease(
    connection: &Connection,
    session_id: SessionId,
    owner: &str,
) -> Result<bool> {
    let n_deleted = connection
        .prepare_cached(RELEASE_LEASE)?
        .execute(params![session_id.to_string(), owner])?;
    Ok(n_deleted == 1)
}

const RELEASE_LEASE: &str = "DELETE FROM session_leases WHERE session_id = ?1 AND owner = ?2";

/// [`release_lease`] where nobody asks whether there was one to let go (a run's closing): on
/// PostgreSQL it goes with the next statement that is waited on (`Statement::send`).
pub(crate) fn let_go_lease(
    connection: &Connection,
    session_id: SessionId,
    owner: &str,
) -> Result<()> {
    connection
        .prepare_cached(RELEASE_LEASE)?
        .send(params![session_id.to_string(), owner])
}

/// Releases every lease held by an owner other than `owner`: the boot sweep's step for leases
/// a previous process left behind. Returns the leases it released.
pub(crate) fn release_leases_not_owned_by(
    connection: &Connection,
    owner: &str,
) -> Result<Vec<LeaseRow>> {
    release_where(
        connection,
        "DELETE FROM session_leases WHERE owner <> ?1
         RETURNING session_id, owner, run_id, acquired_at",
        owner,
    )
}

/// Releases every lease whose holder is not a live node (other than `sweeper`'s own): the
/// sweep for lapsed peers. Returns the leases it released.
pub(crate) fn release_leases_of_lapsed_nodes(
    connection: &Connection,
    sweeper: &str,
) -> Result<Vec<LeaseRow>> {
    release_where(
        connection,
        "DELETE FROM session_leases WHERE owner <> ?1
             AND owner NOT IN (SELECT id FROM nodes WHERE ended_at IS NULL)
         RETURNING session_id, owner, run_id, acquired_at",
        sweeper,
    )
}

fn release_where(connection: &Connection, sql: &str, owner: &str) -> Result<Vec<LeaseRow>> {
    let mut statement = connection.prepare_cached(sql)?;
    let rows = statement.query_map(params![owner], |row| {
        let session_id: String = row.get(0)?;
        let run_id: Option<String> = row.get(2)?;
        Ok((session_id, row.get::<_, String>(1)?, run_id, row.get(3)?))
    })?;
    let mut released = Vec::new();
    for row in rows {
        let (session_id, owner, run_id, acquired_at_ms) = row?;
        let corrupt = |e: &dyn std::fmt::Display| Error::corrupt("session_leases", e);
        released.push(LeaseRow {
            session_id: session_id.parse().map_err(|e| corrupt(&e))?,
            owner,
            run_id: run_id
                .map(|id| id.parse())
                .transpose()
                .map_err(|e| corrupt(&e))?,
            acquired_at_ms,
        });
    }
    Ok(released)
}

impl Store {
    /// Takes the session's store lease for `owner`, unless another holds it.
    pub async fn acquire_lease(
        &self,
        session_id: SessionId,
        owner: &str,
        run_id: Option<RunId>,
        now_ms: i64,
    ) -> Result<LeaseOutcome> {
        let owner = owner.to_owned();
        self.write(Some(session_id), move |connection| {
            acquire_lease(connection, session_id, &owner, run_id, now_ms)
        })
        .await
    }

    /// Releases the lease if `owner` holds it; returns whether it did.
    pub async fn release_lease(&self, session_id: SessionId, owner: &str) -> Result<bool> {
        let owner = owner.to_owned();
        let released = self
            .write(Some(session_id), move |connection| {
                release_lease(connection, session_id, &owner)
            })
            .await;
        self.fencing().let_go(session_id);
        released
    }

    pub async fn get_lease(&self, session_id: SessionId) -> Result<Option<LeaseRow>> {
        self.read(move |connection| get_lease(connection, session_id))
            .await
    }

    /// Releases every lease that `owner` (this process's boot id) does not hold.
    pub async fn release_leases_not_owned_by(&self, owner: &str) -> Result<Vec<LeaseRow>> {
        let owner = owner.to_owned();
        self.write(None, move |connection| {
            release_leases_not_owned_by(connection, &owner)
        })
        .await
    }
}
