//! The nodes serving one database, and fencing. Several `seed serve` processes share one
//! PostgreSQL database; each is a node, named by its boot id, with a row in `nodes` that it
//! renews by heartbeat. A session's lease names its holder and the holder's epoch; the lease
//! holds while the holder's row is renewed. Once a row lapses, any node's sweep takes its
//! leases and queues its runs again, as a boot sweep does after a crash.
//!
//! Fencing: every write for a session whose lease this process took checks, in the write's own
//! transaction, that this node's row, at its epoch, has not lapsed (in the database's clock), and
//! takes the row `FOR SHARE`, so that no sweep can take the node's sessions over until the write
//! has committed. A node's leases are taken by another only once its row lapsed. A node that wakes after its row lapsed
//! (paused, cut off) is refused every such write ([`Refusal::Fenced`]) and writes nothing.
//! SQLite has one process per database (the data dir's lock), so there is nothing to fence.

use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};

use seed_events::SessionId;

use crate::params;
use crate::schema::Engine;
use crate::sql::Connection;
use crate::{Error, Refusal, Result, Store};

/// A node as registered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeRow {
    pub id: String,
    /// Numbers the nodes in the order they joined the database.
    pub epoch: i64,
    /// Until when its leases hold, unless renewed (the database's clock, unix ms).
    pub expires_at_ms: i64,
}

/// The database's clock (unix ms) on PostgreSQL, where nodes compare times; `now_ms` (the
/// caller's clock) on SQLite, where there is one node.
pub(crate) fn database_now(connection: &Connection, now_ms: i64) -> Result<i64> {
    match connection.engine() {
        Engine::Sqlite => Ok(now_ms),
        Engine::Postgres => connection.query_row(
            "SELECT CAST(extract(epoch FROM clock_timestamp()) * 1000 AS BIGINT)",
            params![],
            |row| row.get(0),
        ),
    }
}

/// The key of the advisory lock a registering transaction holds on PostgreSQL, so that nodes
/// joining at once take their turns: each reads the newest epoch after the one before it has
/// committed, instead of two reading the same one and one of them being refused.
const REGISTER_LOCK: i64 = 0x5eed_5c4e_3a00_0002;

/// Registers the node `id` with the next epoch, its leases holding for `ttl_ms`.
fn register_node(connection: &Connection, id: &str, now_ms: i64, ttl_ms: i64) -> Result<NodeRow> {
    if connection.engine() == Engine::Postgres {
        // Held until the transaction ends; the insert below reads the epochs after it is
        // granted (each statement reads what committed before it began).
        connection
            .prepare_cached("SELECT pg_advisory_xact_lock(?1)")?
            .send(params![REGISTER_LOCK])?;
    }
    let now_ms = database_now(connection, now_ms)?;
    let expires_at_ms = now_ms.saturating_add(ttl_ms);
    let epoch = connection
        .prepare_cached(
            "INSERT INTO nodes (id, epoch, started_at, renewed_at, expires_at)
             VALUES (?1, (SELECT COALESCE(MAX(epoch), 0) + 1 FROM nodes), ?2, ?2, ?3)
             RETURNING epoch",
        )?
        .query_row(params![id, now_ms, expires_at_ms], |row| row.get(0))?;
    Ok(NodeRow {
        id: id.to_owned(),
        epoch,
        expires_at_ms,
    })
}

/// Renews the node's row for `ttl_ms` more; `None` when it had lapsed (or was swept) already:
/// the node's leases are gone, and it must not go on.
fn renew_node(connection: &Connection, id: &str, now_ms: i64, ttl_ms: i64) -> Result<Option<i64>> {
    let now_ms = database_now(connection, now_ms)?;
    let expires_at_ms = now_ms.saturating_add(ttl_ms);
    let n_renewed = connection
        .prepare_cached(
            "UPDATE nodes SET renewed_at = ?2, expires_at = ?3
             WHERE id = ?1 AND ended_at IS NULL AND expires_at >= ?2",
        )?
        .execute(params![id, now_ms, expires_at_ms])?;
    Ok((n_renewed == 1).then_some(expires_at_ms))
}

/// Marks every node whose row lapsed as ended; returns their ids.
pub(crate) fn end_lapsed_nodes(connection: &Connection, now_ms: i64) -> Result<Vec<String>> {
    let now_ms = database_now(connection, now_ms)?;
    connection
        .prepare_cached(
            "UPDATE nodes SET ended_at = ?1 WHERE ended_at IS NULL AND expires_at < ?1
             RETURNING id",
        )?
        .query_map(params![now_ms], |row| row.get(0))?
        .collect()
}

/// What this process knows of its own node and the leases it holds, for fencing its writes.
#[derive(Debug, Default)]
pub(crate) struct Fencing {
    node: OnceLock<NodeRow>,
    /// The sessions whose lease this process took and has not let go.
    held: Mutex<HashSet<SessionId>>,
    /// Writes refused because the lease was no longer this node's.
    pub(crate) n_refused: AtomicU64,
    /// Runs this node claimed.
    pub(crate) n_claims: AtomicU64,
}

impl Fencing {
    pub(crate) fn node(&self) -> Option<&NodeRow> {
        self.node.get()
    }

    /// Notes that this process holds `session_id`'s lease (a claim committed for this node).
    pub(crate) fn hold(&self, session_id: SessionId) {
        if self.node.get().is_some()
            && let Ok(mut held) = self.held.lock()
        {
            held.insert(session_id);
            self.n_claims.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Notes that this process let `session_id`'s lease go (or lost it).
    pub(crate) fn let_go(&self, session_id: SessionId) {
        if let Ok(mut held) = self.held.lock() {
            held.remove(&session_id);
        }
    }

    fn holds(&self, session_id: SessionId) -> bool {
        self.held
            .lock()
            .is_ok_and(|held| held.contains(&session_id))
    }

    /// In the open transaction of a write for `session_id`, a session whose lease this process
    /// took: refuses it unless this node's row, at its epoch, has not lapsed, and takes the row
    /// `FOR SHARE` until the transaction ends, so that no sweep can end the node (and take its
    /// leases) before the write commits. While the row holds, no other node takes this node's
    /// leases: a lease it no longer holds it let go itself (a run's end committed a moment
    /// before its write), and the write is one any node may make (a person's message to the
    /// session). Writes for sessions this process never leased pass unchecked.
    ///
    /// `node_row_held`: whether the open transaction already holds the row from a check that
    /// passed; then no sweep can end the node before the transaction ends, and the write
    /// passes without asking again. Set here when a check passes.
    pub(crate) fn check(
        &self,
        connection: &Connection,
        session_id: Option<SessionId>,
        node_row_held: &std::cell::Cell<bool>,
    ) -> Result<()> {
        let (Some(session_id), Some(node)) = (session_id, self.node.get()) else {
            return Ok(());
        };
        if connection.engine() != Engine::Postgres || !self.holds(session_id) || node_row_held.get()
        {
            return Ok(());
        }
        let still_held = connection
            .prepare_cached(
                "SELECT 1 FROM nodes WHERE id = ?1 AND epoch = ?2 AND ended_at IS NULL
                   AND expires_at > CAST(extract(epoch FROM clock_timestamp()) * 1000 AS BIGINT)
                 FOR SHARE",
            )?
            .query_row(params![node.id, node.epoch], |row| row.get::<_, i64>(0));
        match still_held {
            Ok(_) => {
                node_row_held.set(true);
                Ok(())
            }
            Err(Error::NoRows) => {
                // The session stays noted as held, so that each later write of the turn is
                // refused too; a node that lapsed stops (see `Store::renew_node`).
                self.n_refused.fetch_add(1, Ordering::Relaxed);
                Err(Error::Refused {
                    session_id: Some(session_id),
                    reason: Refusal::Fenced,
                })
            }
            Err(error) => Err(error),
        }
    }
}

impl Store {
    /// Registers this process as a node of the database, named `id` (its boot id), its leases
    /// holding for `ttl_ms` unless renewed ([`Store::renew_node`]). From then on, on
    /// PostgreSQL, the leases it takes carry its epoch and its writes are fenced.
    pub async fn register_node(&self, id: &str, now_ms: i64, ttl_ms: i64) -> Result<NodeRow> {
        // A process paused in the middle of a transaction holds its locks (a session's row, its
        // node's row) from everyone: PostgreSQL ends such a transaction once it has been idle
        // as long as a lease holds, and the node's row lapses meanwhile anyway. On every
        // connection the writer writes over (each lane's), and made again on each it opens
        // anew after losing one.
        if self.config().database.is_some() {
            let timeout = format!("{ttl_ms}ms");
            self.write_on_every_connection(move |connection| {
                connection.set_for_session("idle_in_transaction_session_timeout", &timeout)
            })
            .await?;
        }
        // Nodes joining at once take their turns (`REGISTER_LOCK`); should one still pick an
        // epoch another took, it tries again.
        let mut attempts = 0;
        let node = loop {
            let id = id.to_owned();
            let registered = self
                .write(None, move |connection| {
                    register_node(connection, &id, now_ms, ttl_ms)
                })
                .await;
            match registered {
                Err(Error::Refused {
                    reason: Refusal::Duplicate { .. },
                    ..
                }) if attempts < 8 => attempts += 1,
                other => break other?,
            }
        };
        self.fencing()
            .node
            .set(node.clone())
            .map_err(|_| Error::corrupt("nodes", "a store registers one node"))?;
        Ok(node)
    }

    /// Renews this node's row for `ttl_ms` more; `None` when it had lapsed, so that other
    /// nodes may have taken its sessions over: the process must stop.
    pub async fn renew_node(&self, now_ms: i64, ttl_ms: i64) -> Result<Option<i64>> {
        let Some(node) = self.fencing().node() else {
            return Err(Error::corrupt("nodes", "no node registered"));
        };
        let id = node.id.clone();
        self.write(None, move |connection| {
            renew_node(connection, &id, now_ms, ttl_ms)
        })
        .await
    }

    /// This process's node, once registered.
    pub fn node(&self) -> Option<NodeRow> {
        self.fencing().node().cloned()
    }

    /// Writes refused since the store opened because this node no longer held the lease.
    pub fn fencing_refusals(&self) -> u64 {
        self.fencing().n_refused.load(Ordering::Relaxed)
    }

    /// Runs this node claimed since it registered.
    pub fn node_claims(&self) -> u64 {
        self.fencing().n_claims.load(Ordering::Relaxed)
    }
}
