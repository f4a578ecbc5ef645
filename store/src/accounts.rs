//! What the service reads and writes beyond the runtime's APIs: accounts by public key, whose a
//! session is, the service's own leases at shutdown, and counts for metrics and tests.

use crate::params;
use crate::sql::{Connection, OptionalExtension};
use seed_events::{AccountId, SessionId};

use crate::{Error, Result, Store};

/// Every table of the schema, for row counts.
const TABLES: [&str; 20] = [
    "accounts",
    "memory_files",
    "sessions",
    "session_events",
    "session_durable_files",
    "runs",
    "session_leases",
    "session_continuations",
    "continuation_recalls",
    "attachments",
    "attachment_contents",
    "request_nonces",
    "call_effects",
    "approvals",
    "elicitations",
    "schedules",
    "session_durable_kept",
    "bearer_tokens",
    "login_codes",
    "nodes",
];

fn account_by_public_key(connection: &Connection, public_key: &[u8]) -> Result<Option<AccountId>> {
    let id: Option<String> = connection
        .prepare_cached("SELECT id FROM accounts WHERE public_key = ?1")?
        .query_row(params![public_key], |row| row.get(0))
        .optional()?;
    id.map(|id| Error::parse_column("accounts", &id))
        .transpose()
}

fn runs_by_status(connection: &Connection) -> Result<Vec<(String, i64)>> {
    let mut statement =
        connection.prepare_cached("SELECT status, count(*) FROM runs GROUP BY status")?;
    let rows = statement.query_map(params![], |row| Ok((row.get(0)?, row.get(1)?)))?;
    rows.collect::<Result<_>>()
}

fn row_counts(connection: &Connection) -> Result<Vec<(&'static str, i64)>> {
    TABLES
        .into_iter()
        .map(|table| {
            let n_rows: i64 = connection.query_row(
                &format!("SELECT count(*) FROM {table}"),
                params![],
                |row| row.get(0),
            )?;
            Ok((table, n_rows))
        })
        .collect()
}

impl Store {
    /// The account whose key this is.
    pub async fn account_by_public_key(&self, public_key: Vec<u8>) -> Result<Option<AccountId>> {
        self.read(move |connection| account_by_public_key(connection, &public_key))
            .await
    }

    /// The account a session belongs to, `None` when there is no such session.
    pub async fn session_owner(&self, session_id: SessionId) -> Result<Option<AccountId>> {
        self.read(move |connection| crate::nonces::session_owner(connection, session_id))
            .await
    }

    /// A draining service's last write: releases the leases `owner` (this process) holds, so
    /// that the next boot takes its sessions at once, and stops every write after it (they are
    /// refused with [`crate::Error::Closed`], as after [`Store::fence`]). A turn still running
    /// in this process can then commit nothing once its lease is let go: what it did not
    /// commit, the next boot's sweep takes up. Writes in the same group commit with it. Returns
    /// how many leases it released.
    pub async fn release_leases_and_stop_writes(&self, owner: &str) -> Result<usize> {
        let owner = owner.to_owned();
        let stop = self.fence_flag();
        self.write(None, move |connection| {
            let n_released = connection
                .prepare_cached("DELETE FROM session_leases WHERE owner = ?1")?
                .execute(params![owner])?;
            // On a shared database, the node is gone from now on: its peers' next sweep takes
            // its runs in flight over, without waiting for its lease to lapse.
            let now_ms = crate::nodes::database_now(connection, 0)?;
            connection
                .prepare_cached(
                    "UPDATE nodes SET ended_at = ?2, expires_at = ?2 WHERE id = ?1 AND ended_at IS NULL",
                )?
                .execute(params![owner, now_ms])?;
            // Checked before each group: this one commits, and none after it.
            stop.store(true, std::sync::atomic::Ordering::SeqCst);
            Ok(n_released)
        })
        .await
    }

    /// Runs counted by status, e.g. `("queued", 3)`.
    pub async fn runs_by_status(&self) -> Result<Vec<(String, i64)>> {
        self.read(runs_by_status).await
    }

    /// Rows in every table, by table name: what a test compares before and after a request
    /// that must write nothing.
    pub async fn row_counts(&self) -> Result<Vec<(&'static str, i64)>> {
        self.read(row_counts).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The row counts (what the tests of a removal compare) miss no table of the schema.
    #[test]
    fn the_row_counts_name_every_table() {
        let (_dir, connection) = crate::schema::new_database();
        let mut statement = connection
            .prepare(
                "SELECT name FROM sqlite_schema WHERE type = 'table' \
                 AND name NOT LIKE 'sqlite_%' ORDER BY name",
            )
            .expect("prepares");
        let tables: Vec<String> = statement
            .query_map(params![], |row| row.get(0))
            .expect("reads")
            .collect::<Result<_>>()
            .expect("reads");
        let mut counted: Vec<&str> = TABLES.to_vec();
        counted.sort_unstable();
        assert_eq!(tables, counted);
    }
}
