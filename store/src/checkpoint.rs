//! Checkpoints, mostly off the writer's thread.
//!
//! SQLite checkpoints a WAL database by itself, on the connection that commits, once the WAL
//! holds `wal_autocheckpoint` pages (1,000 by default): the commit that crosses the mark copies
//! the WAL's pages into the database file and syncs both files before it returns. With one
//! writer for every session, that commit is every waiting session's commit; a profile of the
//! runtime at 100 sessions had checkpoints at half of the writer's commit time.
//!
//! So the writer's connection does not checkpoint by itself. A WAL hook notes the WAL's size
//! after each of its commits. Once it crosses [`crate::Synchronous::checkpoint_pages`], the
//! writer wakes this thread, which copies the WAL into the database file with passive
//! checkpoints on a connection of its own while the writer goes on committing. Those can never
//! finish the job: the WAL starts over only at a write transaction that begins with every
//! frame copied, and the writer appends frames all along. So when the thread is done, the
//! writer copies the few frames appended meanwhile itself, between two of its commits, and its
//! next transaction starts the WAL over (when no reader still reads from it; otherwise the
//! next round tries again, as SQLite's own checkpoints do).

use std::cell::Cell;
use std::os::raw::c_int;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};
use std::thread::JoinHandle;

use crossbeam_channel::Sender;
use rusqlite::Connection;
use rusqlite::hooks::Wal;

use crate::{Config, Result};

/// The thread stops its passes once a pass finds fewer new frames than this: the writer
/// copies as many itself.
const LEFT_FOR_THE_WRITER: i64 = 64;

/// Passes the thread makes at most per round: the writer appends while it copies, so each
/// pass finds the frames appended during the one before.
const PASSES_MAX: usize = 8;

/// Where a round of checkpointing is.
const IDLE: u8 = 0;
/// The thread is copying.
const COPYING: u8 = 1;
/// The thread has copied what it could; the writer copies the rest after its next commit.
const COPIED: u8 = 2;

thread_local! {
    /// Pages in the WAL after the last commit on this thread's writing connection, as the WAL
    /// hook reported it. The hook runs on the committing thread, inside its commit.
    static WAL_PAGES: Cell<c_int> = const { Cell::new(0) };
}

/// The WAL hook of the writer's connection: notes the WAL's size for [`wal_pages_after_commit`].
/// Installing it replaces SQLite's autocheckpoint hook, so the connection no longer
/// checkpoints by itself.
fn note_wal_pages(_: &Wal, pages: c_int) -> rusqlite::Result<()> {
    WAL_PAGES.with(|cell| cell.set(pages));
    Ok(())
}

/// The WAL's size after this thread's last commit, once: a second call without a commit in
/// between says 0.
fn wal_pages_after_commit() -> c_int {
    WAL_PAGES.with(|cell| cell.replace(0))
}

/// The thread that checkpoints for a writer; stops when the writer drops it.
pub(crate) struct Checkpointer {
    /// The WAL size, in pages, at which the writer starts a round.
    pages: c_int,
    phase: Arc<AtomicU8>,
    wake: Option<Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl Checkpointer {
    /// Takes over checkpointing from `writer` (the writer's connection, whose commits then
    /// call [`Checkpointer::after_commit`] on the thread that makes them).
    pub(crate) fn start(writer: &Connection, config: &Config) -> Result<Checkpointer> {
        let connection = open_checkpointer(config)?;
        let phase = Arc::new(AtomicU8::new(IDLE));
        let (wake, woken) = crossbeam_channel::bounded::<()>(1);
        let thread = {
            let phase = Arc::clone(&phase);
            std::thread::Builder::new()
                .name("seed-store-checkpoint".to_owned())
                .spawn(move || {
                    while woken.recv().is_ok() {
                        let mut seen = 0;
                        for _ in 0..PASSES_MAX {
                            match checkpoint(&connection) {
                                Some((log, _)) if another_pass(seen, log) => seen = log,
                                _ => break,
                            }
                        }
                        phase.store(COPIED, Ordering::Release);
                    }
                })?
        };
        writer.wal_hook(Some(note_wal_pages));
        Ok(Checkpointer {
            pages: config.synchronous.checkpoint_pages(),
            phase,
            wake: Some(wake),
            thread: Some(thread),
        })
    }

    /// After the writer's commits (a group's, once its callers have their replies), on its
    /// thread and outside a transaction: starts a round once the WAL has grown past
    /// [`Checkpointer::pages`], and finishes one the thread has done its part of. Checkpoints on
    /// `writer` itself if the thread is gone.
    pub(crate) fn after_commit(&self, writer: &Connection) {
        let pages = wal_pages_after_commit();
        if self.thread_gone() {
            // As SQLite's own autocheckpoint would, on this connection.
            if pages >= self.pages {
                checkpoint(writer);
            }
            return;
        }
        match self.phase.load(Ordering::Acquire) {
            COPIED => {
                checkpoint(writer);
                self.phase.store(IDLE, Ordering::Release);
            }
            IDLE if pages >= self.pages => {
                self.phase.store(COPYING, Ordering::Release);
                if let Some(wake) = &self.wake {
                    // Full: a wake-up is already waiting, which serves as well.
                    let _ = wake.try_send(());
                }
            }
            _ => {}
        }
    }

    /// Whether the thread has stopped (or was never there), mid-round or not.
    fn thread_gone(&self) -> bool {
        self.wake.is_none()
            || self
                .thread
                .as_ref()
                .is_none_or(std::thread::JoinHandle::is_finished)
    }
}

impl Drop for Checkpointer {
    /// Stops the thread and closes its connection, so that the writer's connection, closing
    /// after it, is the last one and checkpoints the WAL away.
    fn drop(&mut self) {
        self.wake = None;
        if let Some(thread) = self.thread.take()
            && thread.join().is_err()
        {
            tracing::error!("the store checkpoint thread panicked");
        }
    }
}

/// Whether the thread makes another pass after one that found `log` frames in the WAL, when
/// the pass before it found `seen`: while the writer appended more than it should be left to
/// copy. (A pass copies what the WAL held when it began; frames a reader still needs stay, and
/// are the writer's pass's to try again.)
fn another_pass(seen: i64, log: i64) -> bool {
    log - seen > LEFT_FOR_THE_WRITER
}

/// The checkpointer's own connection: the store's pragmas (its `synchronous` decides how the
/// checkpoint syncs), and no checkpoint when it closes, which is the writer's to do.
fn open_checkpointer(config: &Config) -> Result<Connection> {
    let connection = Connection::open(&config.path)?;
    crate::schema::apply_pragmas(&connection, config)?;
    connection.set_db_config(
        rusqlite::config::DbConfig::SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE,
        true,
    )?;
    Ok(connection)
}

/// A passive checkpoint: copies the WAL's frames that no reader still needs into the database
/// file, without waiting for readers or blocking the writer. Returns the frames in the WAL
/// and those copied. A failure is logged: the WAL keeps everything, and the next round tries
/// again.
fn checkpoint(connection: &Connection) -> Option<(i64, i64)> {
    let outcome = connection.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |row| {
        Ok((row.get::<_, i64>(1)?, row.get::<_, i64>(2)?))
    });
    match outcome {
        Ok(frames) => Some(frames),
        Err(error) => {
            tracing::warn!(%error, "store checkpoint failed");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use super::*;

    /// A database with one table, its writer's connection and a checkpointer for it.
    struct Fixture {
        _dir: tempfile::TempDir,
        path: std::path::PathBuf,
        writer: Connection,
        checkpointer: Checkpointer,
    }

    impl Fixture {
        fn new() -> anyhow::Result<Fixture> {
            Fixture::with(crate::Synchronous::Normal)
        }

        fn with(synchronous: crate::Synchronous) -> anyhow::Result<Fixture> {
            let dir = tempfile::tempdir()?;
            let config = Config {
                synchronous,
                ..Config::new(dir.path().join("db.sqlite"))
            };
            let writer = crate::schema::open_writer(&config)?;
            writer.execute_batch("CREATE TABLE t (x BLOB)")?;
            let checkpointer = Checkpointer::start(&writer, &config)?;
            Ok(Fixture {
                path: config.path,
                _dir: dir,
                writer,
                checkpointer,
            })
        }

        /// Commits a row of about a page, unseen by the checkpointer.
        fn insert(&self) -> rusqlite::Result<()> {
            self.writer
                .execute("INSERT INTO t (x) VALUES (zeroblob(3000))", [])
                .map(drop)
        }

        /// Commits a row, then lets the checkpointer look, as the writer does.
        fn commit(&self) -> rusqlite::Result<()> {
            self.insert()?;
            self.checkpointer.after_commit(&self.writer);
            Ok(())
        }

        fn phase(&self) -> u8 {
            self.checkpointer.phase.load(Ordering::Acquire)
        }

        /// The pages of the database file.
        fn database_pages(&self) -> u64 {
            std::fs::metadata(&self.path).map_or(0, |meta| meta.len()) / 4096
        }

        /// The frames the WAL file has room for (a 32-byte header, then frames of a 24-byte
        /// header and a page each); 0 if there is no WAL.
        fn wal_frames(&self) -> u64 {
            let mut wal = self.path.as_os_str().to_owned();
            wal.push("-wal");
            std::fs::metadata(wal).map_or(0, |meta| meta.len().saturating_sub(32) / (24 + 4096))
        }
    }

    #[test]
    fn the_thread_passes_again_while_the_writer_appended_more_than_it_should_copy() {
        // The first pass of a round always has a second: the writer appended during it.
        assert!(another_pass(
            0,
            crate::Synchronous::Normal.checkpoint_pages().into()
        ));
        assert!(another_pass(1000, 1000 + LEFT_FOR_THE_WRITER + 1));
        assert!(!another_pass(1000, 1000 + LEFT_FOR_THE_WRITER));
        assert!(!another_pass(1000, 1000));
    }

    #[test]
    fn a_round_starts_at_the_mark_of_the_synchronous_setting() -> anyhow::Result<()> {
        for synchronous in [crate::Synchronous::Normal, crate::Synchronous::Full] {
            let fixture = Fixture::with(synchronous)?;
            let mark = synchronous.checkpoint_pages();
            // As the WAL hook reports after a commit: one page short of the mark, then at it.
            WAL_PAGES.with(|cell| cell.set(mark - 1));
            fixture.checkpointer.after_commit(&fixture.writer);
            assert_eq!(
                fixture.phase(),
                IDLE,
                "{synchronous:?}: a round at {}",
                mark - 1
            );
            WAL_PAGES.with(|cell| cell.set(mark));
            fixture.checkpointer.after_commit(&fixture.writer);
            assert_ne!(fixture.phase(), IDLE, "{synchronous:?}: no round at {mark}");
        }
        // A WAL of the larger mark still fits the first hash table of SQLite's WAL index
        // (4,096 slots less the index's 136-byte header), so a page is found in one lookup.
        assert!(crate::Synchronous::Normal.checkpoint_pages() <= 4096 - 136 / 4);
        assert!(
            crate::Synchronous::Full.checkpoint_pages()
                < crate::Synchronous::Normal.checkpoint_pages()
        );
        Ok(())
    }

    #[test]
    fn the_thread_copies_the_wal_and_the_writer_finishes_the_round() -> anyhow::Result<()> {
        let fixture = Fixture::new()?;
        // Past SQLite's autocheckpoint mark, with no round started: the WAL only grows, so the
        // writer's connection did not checkpoint by itself.
        let n_rows = fixture.checkpointer.pages as u64 + 200;
        for _ in 0..n_rows {
            fixture.insert()?;
        }
        let database = fixture.database_pages();
        // The next commit starts a round: the thread copies the WAL into the database file.
        fixture.commit()?;
        let grown = fixture.wal_frames();
        assert!(grown > n_rows, "the WAL holds {grown} frames");
        let deadline = Instant::now() + Duration::from_secs(10);
        while fixture.phase() != COPIED {
            anyhow::ensure!(Instant::now() < deadline, "no checkpoint within 10 s");
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(
            fixture.database_pages() >= database + n_rows,
            "the thread copied the WAL"
        );
        // The writer's next commit finishes the round, and its commits after that start the
        // WAL over instead of growing it.
        for _ in 0..100 {
            fixture.commit()?;
        }
        assert_eq!(fixture.phase(), IDLE);
        assert_eq!(fixture.wal_frames(), grown, "the WAL grew on");

        // Stopped, the thread leaves the writer's connection the last one: closing it
        // checkpoints and removes the WAL.
        let Fixture {
            _dir,
            path,
            writer,
            checkpointer,
        } = fixture;
        drop(checkpointer);
        drop(writer);
        let mut wal = path.clone().into_os_string();
        wal.push("-wal");
        assert!(!std::path::Path::new(&wal).exists(), "the WAL is left");
        let reopened = Connection::open(&path)?;
        let n: i64 = reopened.query_row("SELECT count(*) FROM t", [], |row| row.get(0))?;
        assert_eq!(n as u64, n_rows + 101);
        Ok(())
    }

    #[test]
    fn the_writer_copies_what_the_thread_left_and_the_wal_starts_over() -> anyhow::Result<()> {
        let fixture = Fixture::new()?;
        for _ in 0..200 {
            fixture.insert()?;
        }
        // As when the writer appended while the thread copied: the thread says it is done,
        // and nothing of the WAL is in the database file yet.
        fixture.checkpointer.phase.store(COPIED, Ordering::Release);
        fixture.commit()?;
        assert_eq!(fixture.phase(), IDLE);
        let copied = fixture.wal_frames();
        for _ in 0..50 {
            fixture.commit()?;
        }
        assert_eq!(fixture.wal_frames(), copied, "the WAL started over");
        Ok(())
    }

    #[test]
    fn without_its_thread_the_writer_checkpoints_itself() -> anyhow::Result<()> {
        let mut fixture = Fixture::new()?;
        // The thread is gone.
        fixture.checkpointer.wake = None;
        if let Some(thread) = fixture.checkpointer.thread.take() {
            thread
                .join()
                .map_err(|_| anyhow::anyhow!("the thread panicked"))?;
        }
        for _ in 0..3 * fixture.checkpointer.pages {
            fixture.commit()?;
        }
        assert_eq!(fixture.phase(), IDLE);
        let frames = fixture.wal_frames();
        assert!(
            frames < 2 * fixture.checkpointer.pages as u64,
            "the WAL grew to {frames} frames"
        );
        Ok(())
    }

    #[test]
    fn a_thread_gone_mid_round_leaves_checkpoints_to_the_writer() -> anyhow::Result<()> {
        let mut fixture = Fixture::new()?;
        // The thread stopped after the round began, before it said it was done.
        fixture.checkpointer.phase.store(COPYING, Ordering::Release);
        fixture.checkpointer.wake = None;
        if let Some(thread) = fixture.checkpointer.thread.as_ref() {
            let deadline = Instant::now() + Duration::from_secs(10);
            while !thread.is_finished() {
                anyhow::ensure!(Instant::now() < deadline, "the thread did not stop");
                std::thread::sleep(Duration::from_millis(1));
            }
        }
        for _ in 0..3 * fixture.checkpointer.pages {
            fixture.commit()?;
        }
        let frames = fixture.wal_frames();
        assert!(
            frames < 2 * fixture.checkpointer.pages as u64,
            "the WAL grew to {frames} frames"
        );
        Ok(())
    }
}
