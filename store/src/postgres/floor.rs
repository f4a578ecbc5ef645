//! The raw PostgreSQL floor: what one `INSERT` a transaction costs with tokio-postgres directly,
//! into the store's own table, with nothing of the store between: no writer, no grouping. From
//! one connection and from several at once, each connection its own session. The runtime's
//! rows over PostgreSQL are read against it, as SQLite's against `crate::floor`.

use std::time::{Duration, Instant};

use super::Postgres;
use crate::Result;
use crate::floor::floor_line;

const ACCOUNT_ID: &str = "00000000-0000-7000-8000-00000000f100";

/// Commits `n_commits` single-row transactions (an autocommitted `INSERT` each: one round
/// trip) of one durable-file line, spread over `n_connections` connections committing at once,
/// into the database `postgres` reaches (migrated first). Returns how long they took.
pub async fn measure_commits(
    postgres: &Postgres,
    n_connections: usize,
    n_commits: usize,
) -> Result<Duration> {
    postgres.migrate().await?;
    let client = postgres.pool.get().await?;
    client
        .execute(
            "INSERT INTO accounts (id, public_key, created_at) \
             VALUES ($1, decode('00', 'hex'), 0) ON CONFLICT DO NOTHING",
            &[&ACCOUNT_ID],
        )
        .await?;
    let mut session_keys = Vec::with_capacity(n_connections);
    for idx in 0..n_connections {
        let session_id = format!("00000000-0000-7000-8000-{:012x}", 0xf_1000 + idx);
        client
            .execute(
                "INSERT INTO sessions (id, account_id, created_at, updated_at) \
                 VALUES ($1, $2, 0, 0) ON CONFLICT DO NOTHING",
                &[&session_id, &ACCOUNT_ID],
            )
            .await?;
        let key: i64 = client
            .query_one("SELECT key FROM sessions WHERE id = $1", &[&session_id])
            .await?
            .get(0);
        session_keys.push(key);
    }
    drop(client);
    // Each connection's client before the clock starts, so that opening one is not measured.
    let mut clients = Vec::with_capacity(n_connections);
    for _ in 0..n_connections {
        clients.push(postgres.pool.get().await?);
    }
    let started = Instant::now();
    let work = clients.into_iter().zip(session_keys).enumerate().map(
        |(idx, (client, session_key))| async move {
            let statement = client
                .prepare_cached(
                    "INSERT INTO session_durable_files (session_key, file, line) \
                     VALUES ($1, $2, $3)",
                )
                .await?;
            let file = i64::from(seed_durable::FileName::Entries.code());
            let share = n_commits / n_connections + usize::from(idx < n_commits % n_connections);
            for _ in 0..share {
                client
                    .execute(&statement, &[&session_key, &file, &floor_line()])
                    .await?;
            }
            Ok::<(), crate::Error>(())
        },
    );
    for outcome in futures::future::join_all(work).await {
        outcome?;
    }
    Ok(started.elapsed())
}

/// How durable the database's commits are, as the bench reports it: its `fsync` and
/// `synchronous_commit` settings ("fsync=on synchronous_commit=on").
pub async fn durability(postgres: &Postgres) -> Result<String> {
    let client = postgres.pool.get().await?;
    let mut settings = Vec::new();
    for name in ["fsync", "synchronous_commit"] {
        let value: String = client
            .query_one("SELECT setting FROM pg_settings WHERE name = $1", &[&name])
            .await?
            .get(0);
        settings.push(format!("{name}={value}"));
    }
    Ok(settings.join(" "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::postgres::scratch::with_scratch_postgres;

    /// The floor writes into the store's own table as its schema stands, from one connection
    /// and from several: a change to the table that the floor's statement no longer fits (a
    /// column's type a Rust integer does not bind to, say) fails here, not in the bench.
    #[test]
    fn the_floor_commits_its_rows_into_the_stores_table() {
        with_scratch_postgres(async |postgres| {
            for n_connections in [1, 3] {
                measure_commits(postgres, n_connections, 7)
                    .await
                    .expect("the floor's commits");
            }
            let client = postgres.pool.get().await.expect("a client");
            let n_lines: i64 = client
                .query_one("SELECT COUNT(*) FROM session_durable_files", &[])
                .await
                .expect("counts")
                .get(0);
            assert_eq!(n_lines, 14);
        });
    }
}
