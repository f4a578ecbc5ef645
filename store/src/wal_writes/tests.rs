//! The WAL VFS against the files SQLite leaves: how many writes a commit takes, and that what
//! a commit wrote is in the file, for another connection and for recovery, when it returns.

use std::path::Path;

use rusqlite::{Connection, OpenFlags, params};

use super::{n_wal_writes, vfs_name};

/// The size of a frame of the 4 KiB pages these databases use.
const FRAME_SIZE: u64 = 4096 + 24;

/// A database in WAL mode opened through the VFS as the store opens its writer (no sync at a
/// commit), never checkpointed, with a page cache of
/// `cache_pages` (a small one makes SQLite spill frames mid-transaction).
fn open_buffered(path: &Path, cache_pages: i64) -> Connection {
    let connection = Connection::open_with_flags_and_vfs(
        path,
        OpenFlags::default(),
        vfs_name().expect("the VFS is registered over `unix`"),
    )
    .expect("opens");
    let mode: String = connection
        .query_row("PRAGMA journal_mode = WAL", [], |row| row.get(0))
        .expect("WAL mode");
    assert_eq!(mode, "wal");
    connection
        .execute_batch(&format!(
            "PRAGMA synchronous = NORMAL; PRAGMA wal_autocheckpoint = 0;
             PRAGMA cache_size = {cache_pages};
             CREATE TABLE IF NOT EXISTS t (id INTEGER PRIMARY KEY, k TEXT UNIQUE, v BLOB);"
        ))
        .expect("set up");
    connection
}

fn wal_size(path: &Path) -> u64 {
    std::fs::metadata(path.with_extension("db-wal")).map_or(0, |metadata| metadata.len())
}

/// Inserts rows `from..to` on `connection` (a transaction's), each with a blob of `size` bytes of `byte(id)`.
fn insert_in(connection: &Connection, from: i64, to: i64, size: usize, byte: fn(i64) -> u8) {
    for id in from..to {
        connection
            .execute(
                "INSERT INTO t (id, k, v) VALUES (?1, ?2, ?3)",
                params![id, format!("key-{id:08}"), vec![byte(id); size]],
            )
            .expect("inserts");
    }
}

/// Inserts rows `from..to`, each with a blob of `size` bytes, in one transaction.
fn insert(connection: &mut Connection, from: i64, to: i64, size: usize) {
    let transaction = connection.transaction().expect("begins");
    insert_in(&transaction, from, to, size, |id| (id % 251) as u8);
    transaction.commit().expect("commits");
}

/// What a database holds, read through the default VFS: each row's id, key and blob's sum.
fn contents(path: &Path) -> Vec<(i64, String, i64)> {
    let connection = Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_WRITE)
        .expect("opens with the default VFS");
    let check: String = connection
        .query_row("PRAGMA integrity_check", [], |row| row.get(0))
        .expect("checks");
    assert_eq!(check, "ok");
    let mut statement = connection
        .prepare("SELECT id, k, v FROM t ORDER BY id")
        .expect("prepares");
    statement
        .query_map([], |row| {
            let blob: Vec<u8> = row.get(2)?;
            Ok((
                row.get(0)?,
                row.get(1)?,
                blob.iter().map(|&byte| i64::from(byte)).sum(),
            ))
        })
        .expect("reads")
        .collect::<Result<_, _>>()
        .expect("rows")
}

/// The rows `insert` writes for `from..to`.
fn expected(from: i64, to: i64, size: usize) -> Vec<(i64, String, i64)> {
    (from..to)
        .map(|id| {
            (
                id,
                format!("key-{id:08}"),
                (id % 251) * i64::try_from(size).expect("small"),
            )
        })
        .collect()
}

/// Copies the database and its WAL as a crash at this moment would leave them on disk (the
/// writer's connection still open, nothing checkpointed), for a new connection to recover.
fn crash_copy(path: &Path, into: &Path) -> std::path::PathBuf {
    let copy = into.join("copy.db");
    std::fs::copy(path, &copy).expect("copies the database");
    std::fs::copy(path.with_extension("db-wal"), copy.with_extension("db-wal"))
        .expect("copies the WAL");
    copy
}

#[test]
fn a_commit_reaches_the_wal_in_a_write_for_every_31_frames_not_two_a_frame() {
    let dir = tempfile::tempdir().expect("a dir");
    let path = dir.path().join("buffered.db");
    let mut connection = open_buffered(&path, 2000);
    insert(&mut connection, 0, 1, 10);
    for round in 0..3 {
        let size_before = wal_size(&path);
        let writes_before = n_wal_writes();
        insert(
            &mut connection,
            1 + round * 100,
            1 + (round + 1) * 100,
            1500,
        );
        let frames = (wal_size(&path) - size_before) / FRAME_SIZE;
        let writes = n_wal_writes() - writes_before;
        assert!(
            frames >= 40,
            "a commit of 100 rows of 1.5 KB writes {frames} frames"
        );
        // At most 31 whole frames fit a write; the first may start mid-frame.
        let most = frames.div_ceil(31) + 1;
        assert!(
            writes <= most,
            "{frames} frames took {writes} writes (at most {most}; SQLite alone makes {})",
            2 * frames
        );
    }
}

#[test]
fn what_a_commit_wrote_is_in_the_file_when_it_returns() {
    let dir = tempfile::tempdir().expect("a dir");
    let path = dir.path().join("buffered.db");
    let mut connection = open_buffered(&path, 2000);
    for round in 0..5 {
        insert(&mut connection, round * 20, (round + 1) * 20, 700);
        // Another connection sees every commit at once, and so would recovery after a crash.
        assert_eq!(contents(&path), expected(0, (round + 1) * 20, 700));
        let copies = tempfile::tempdir().expect("a dir");
        assert_eq!(
            contents(&crash_copy(&path, copies.path())),
            expected(0, (round + 1) * 20, 700),
            "the files as a crash after commit {round} leaves them"
        );
    }
}

#[test]
fn spilled_frames_rolled_back_or_rewritten_leave_exactly_the_commits() {
    let dir = tempfile::tempdir().expect("a dir");
    let path = dir.path().join("buffered.db");
    // A cache of 8 pages: a transaction of hundreds of pages spills frames before its commit,
    // and rewrites some of them in place when their pages change again.
    let mut connection = open_buffered(&path, 8);
    insert(&mut connection, 0, 300, 900);
    {
        let transaction = connection.transaction().expect("begins");
        insert_in(&transaction, 300, 600, 900, |_| 1);
        transaction.rollback().expect("rolls back");
    }
    assert_eq!(contents(&path), expected(0, 300, 900));
    // Each row changed twice in one transaction: pages spilled, changed again, written again.
    {
        let transaction = connection.transaction().expect("begins");
        for pass in 0..2 {
            for id in 0..300 {
                transaction
                    .execute(
                        "UPDATE t SET v = ?2 WHERE id = ?1",
                        params![id, vec![((id + pass) % 251) as u8; 900]],
                    )
                    .expect("updates");
            }
        }
        transaction.commit().expect("commits");
    }
    let updated: Vec<_> = expected(0, 300, 900)
        .into_iter()
        .map(|(id, key, _)| (id, key, ((id + 1) % 251) * 900))
        .collect();
    assert_eq!(contents(&path), updated);
    let copies = tempfile::tempdir().expect("a dir");
    assert_eq!(contents(&crash_copy(&path, copies.path())), updated);
}

#[test]
fn the_stores_writer_writes_its_wal_through_it() {
    let dir = tempfile::tempdir().expect("a dir");
    let connection = crate::schema::open_writer(&crate::Config::new(dir.path().join("agents.db")))
        .expect("a new database");
    let before = n_wal_writes();
    connection
        .execute_batch(&crate::schema::account_and_session("acc-a", "ses-a"))
        .expect("writes");
    assert!(n_wal_writes() > before, "the writer's WAL is the VFS's");
}

#[test]
fn the_floors_write_through_sqlites_own_vfs() {
    let dir = tempfile::tempdir().expect("a dir");
    let config = crate::Config::new(dir.path().join("floor.db"));
    let before = n_wal_writes();
    crate::floor::measure_commits(&config, 20).expect("the floor's commits");
    crate::floor::measure_grouped_commits(&config, 4, 2, 20).expect("the grouped commits");
    assert_eq!(n_wal_writes(), before, "the floors are raw SQLite's");
}
