//! The raw SQLite floor: what one `INSERT` + `COMMIT` per step costs with rusqlite directly,
//! under the same pragmas as the store. The bench harness measures every suite against it.

use std::time::{Duration, Instant};

use rusqlite::{Connection, params};

use crate::{Config, Result};

/// Commits `n_commits` single-row transactions into a fresh table of the database at
/// `config.path`, and returns how long they took.
pub fn measure_commits(config: &Config, n_commits: usize) -> Result<Duration> {
    let connection = Connection::open(&config.path)?;
    crate::schema::apply_pragmas(&connection, config)?;
    connection.execute_batch(
        "CREATE TABLE IF NOT EXISTS floor_rows (
             id INTEGER PRIMARY KEY,
             session_id TEXT NOT NULL,
             file TEXT NOT NULL,
             line TEXT NOT NULL
         ) STRICT",
    )?;
    let session_id = "00000000-0000-7000-8000-000000000000";
    let line = floor_line();
    let started = Instant::now();
    for _ in 0..n_commits {
        connection.execute_batch("BEGIN IMMEDIATE")?;
        connection
            .prepare_cached("INSERT INTO floor_rows (session_id, file, line) VALUES (?1, ?2, ?3)")?
            .execute(params![session_id, "entries.jsonl", line])?;
        connection.execute_batch("COMMIT")?;
    }
    Ok(started.elapsed())
}

/// The line every bench step appends: a small JSON entry.
pub fn floor_line() -> &'static str {
    r#"{"type":"pi.user","id":1,"content":"a line of about one hundred bytes, the size of a short entry in the store"}"#
}
