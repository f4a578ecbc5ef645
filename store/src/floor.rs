//! The raw SQLite floor: what one `INSERT` + `COMMIT` per step costs with rusqlite directly,
//! under the same pragmas and schema as the store, with no writer thread, no channel, no
//! grouping and SQLite's own VFS (not the writer's, src/wal_writes.rs). The bench harness
//! measures every suite against it.

use std::time::{Duration, Instant};

use rusqlite::{Connection, params};
use seed_durable::FileName;

use crate::{Config, Result};

/// Commits `n_commits` single-row transactions, each one durable-file line of one session,
/// into the database at `config.path` (created with the store's schema if new), and returns how
/// long they took.
pub fn measure_commits(config: &Config, n_commits: usize) -> Result<Duration> {
    let connection = crate::schema::open_raw_writer(config)?;
    let account_id = "00000000-0000-7000-8000-00000000f100";
    let session_id = "00000000-0000-7000-8000-0000000f1001";
    connection.execute(
        "INSERT OR IGNORE INTO accounts (id, public_key, created_at) VALUES (?1, x'00', 0)",
        params![account_id],
    )?;
    let session_key = insert_session(&connection, session_id, account_id)?;
    let line = floor_line();
    let started = Instant::now();
    for _ in 0..n_commits {
        connection.prepare_cached("BEGIN IMMEDIATE")?.execute([])?;
        connection
            .prepare_cached(
                "INSERT INTO session_durable_files (session_key, file, line) VALUES (?1, ?2, ?3)",
            )?
            .execute(params![session_key, FileName::Entries.code(), line])?;
        connection.prepare_cached("COMMIT")?.execute([])?;
    }
    Ok(started.elapsed())
}

/// Creates the session if it is new, and returns its key.
fn insert_session(connection: &Connection, session_id: &str, account_id: &str) -> Result<i64> {
    connection.execute(
        "INSERT OR IGNORE INTO sessions (id, account_id, created_at, updated_at)
         VALUES (?1, ?2, 0, 0)",
        params![session_id, account_id],
    )?;
    Ok(connection.query_row(
        "SELECT key FROM sessions WHERE id = ?1",
        params![session_id],
        |row| row.get(0),
    )?)
}

/// The line every bench step appends: a small JSON entry.
pub fn floor_line() -> &'static str {
    r#"{"type":"pi.user","id":1,"content":"a line of about one hundred bytes, the size of a short entry in the store"}"#
}

/// The ceiling of group commit: `n_commits` rows from `n_sessions` sessions, committed directly
/// in perfect groups of `group_size` rows with no threads and no hand-offs. Returns the time.
pub fn measure_grouped_commits(
    config: &Config,
    n_sessions: usize,
    group_size: usize,
    n_commits: usize,
) -> Result<Duration> {
    let connection = crate::schema::open_raw_writer(config)?;
    let account_id = "00000000-0000-7000-8000-00000000f100";
    connection.execute(
        "INSERT OR IGNORE INTO accounts (id, public_key, created_at) VALUES (?1, x'00', 0)",
        params![account_id],
    )?;
    let sessions = (0..n_sessions)
        .map(|idx| {
            let session_id = format!("00000000-0000-7000-8000-{idx:012x}");
            insert_session(&connection, &session_id, account_id)
        })
        .collect::<Result<Vec<i64>>>()?;
    let line = floor_line();
    let started = Instant::now();
    let mut row_idx = 0;
    while row_idx < n_commits {
        connection.prepare_cached("BEGIN IMMEDIATE")?.execute([])?;
        for _ in 0..group_size.min(n_commits - row_idx) {
            connection
                .prepare_cached(
                    "INSERT INTO session_durable_files (session_key, file, line)
                     VALUES (?1, ?2, ?3)",
                )?
                .execute(params![
                    sessions[row_idx % n_sessions],
                    FileName::Entries.code(),
                    line
                ])?;
            row_idx += 1;
        }
        connection.prepare_cached("COMMIT")?.execute([])?;
    }
    Ok(started.elapsed())
}
