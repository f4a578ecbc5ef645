//! The one writer and the durable file system over rows: commit order, all-or-nothing batches,
//! refusals that fail alone (a poisoned batch, a full disk, a deleted session) and group commit
//! under 64 concurrent committers. Every test runs under both batch modes.

use crate::common;

use std::sync::atomic::Ordering;

use crate::common::Fixture;
use futures::executor::block_on;
use seed_durable::{Append, DurableFs, FileName};
use seed_events::SessionId;
use seed_store::{BatchMode, Error, Refusal, Store};

const MODES: [BatchMode; 2] = [BatchMode::Optimistic, BatchMode::Savepoint];

fn fixture(mode: BatchMode) -> anyhow::Result<Fixture> {
    Fixture::with(|config| config.batch_mode = mode)
}

fn lines(store: &Store, session: SessionId, file: FileName) -> anyhow::Result<Vec<String>> {
    Ok(block_on(store.session_files(session).read(file))?)
}

fn batch(file: FileName, texts: &[&str]) -> Vec<Append> {
    texts.iter().map(|text| Append::new(file, *text)).collect()
}

/// A trigger that refuses the line "poison", added behind the store's back: the writer's
/// connection sees the schema change and obeys it, so a batch fails in its middle.
fn install_poison(fixture: &Fixture) -> anyhow::Result<()> {
    fixture.raw_batch(
        "CREATE TRIGGER poison BEFORE INSERT ON session_durable_files
         WHEN NEW.line = 'poison' BEGIN SELECT RAISE(ABORT, 'injected failure'); END;",
        "CREATE FUNCTION poison() RETURNS trigger LANGUAGE plpgsql AS $$
         BEGIN
             IF NEW.line = 'poison' THEN
                 RAISE EXCEPTION 'injected failure' USING ERRCODE = 'check_violation';
             END IF;
             RETURN NEW;
         END $$;
         CREATE TRIGGER poison BEFORE INSERT ON session_durable_files
             FOR EACH ROW EXECUTE FUNCTION poison();",
    )
}

#[test]
fn lines_come_back_in_commit_order_per_file() -> anyhow::Result<()> {
    for mode in MODES {
        let fixture = fixture(mode)?;
        let [session] = fixture.create_sessions(1)?[..] else {
            unreachable!()
        };
        let files = fixture.store.session_files(session);
        block_on(files.commit(vec![
            Append::new(FileName::Entries, "e1"),
            Append::new(FileName::Documents, "d1"),
            Append::new(FileName::Entries, "e2"),
        ]))?;
        block_on(files.commit(batch(FileName::Entries, &["e3", "e4"])))?;
        block_on(files.commit(batch(FileName::Tasks, &["t1"])))?;
        assert_eq!(
            lines(&fixture.store, session, FileName::Entries)?,
            ["e1", "e2", "e3", "e4"]
        );
        assert_eq!(lines(&fixture.store, session, FileName::Documents)?, ["d1"]);
        assert_eq!(lines(&fixture.store, session, FileName::Tasks)?, ["t1"]);
    }
    Ok(())
}

#[test]
fn a_batch_that_fails_in_its_middle_leaves_nothing_and_fails_alone() -> anyhow::Result<()> {
    for mode in MODES {
        let fixture = fixture(mode)?;
        let sessions = fixture.create_sessions(3)?;
        install_poison(&fixture)?;
        let store = &fixture.store;
        block_on(
            store
                .session_files(sessions[0])
                .commit(batch(FileName::Entries, &["kept"])),
        )?;

        // Alone in its group.
        let refused = block_on(
            store
                .session_files(sessions[0])
                .commit(batch(FileName::Entries, &["a", "b", "poison", "c"])),
        );
        let error = refused.expect_err("the poisoned batch committed");
        assert!(
            matches!(error.refusal(), Some(Refusal::Constraint { .. })),
            "{error:?}"
        );
        assert!(
            error.to_string().contains(&sessions[0].to_string()),
            "{error}"
        );
        assert_eq!(lines(store, sessions[0], FileName::Entries)?, ["kept"]);

        // In one group with two good batches: they commit, it does not.
        let hold = store.hold_writer()?;
        let commits_before = store.writer_stats().n_commits.load(Ordering::Relaxed);
        let outcomes = std::thread::scope(|scope| {
            let commit = |session: SessionId, texts: &'static [&'static str]| {
                scope.spawn(move || {
                    block_on(
                        store
                            .session_files(session)
                            .commit(batch(FileName::Entries, texts)),
                    )
                })
            };
            let handles = [
                commit(sessions[1], &["1a", "1b"]),
                commit(sessions[0], &["x", "poison"]),
                commit(sessions[2], &["2a"]),
            ];
            // Let all three reach the writer's queue before it starts again.
            while store.queued_writes() < 3 {
                std::thread::yield_now();
            }
            drop(hold);
            handles.map(|handle| handle.join().expect("committer panicked"))
        });
        let [first, second, third] = outcomes;
        first?;
        assert!(second.is_err(), "poisoned batch in a group committed");
        third?;
        assert_eq!(lines(store, sessions[1], FileName::Entries)?, ["1a", "1b"]);
        assert_eq!(lines(store, sessions[0], FileName::Entries)?, ["kept"]);
        assert_eq!(lines(store, sessions[2], FileName::Entries)?, ["2a"]);
        let commits = store.writer_stats().n_commits.load(Ordering::Relaxed) - commits_before;
        match mode {
            // One group that failed, then each job alone: two commits for the good ones.
            BatchMode::Optimistic => {
                assert_eq!(commits, 2);
                assert!(store.writer_stats().n_groups_redone.load(Ordering::Relaxed) >= 1);
            }
            // One transaction, the poisoned job rolled back to its savepoint.
            BatchMode::Savepoint => assert_eq!(commits, 1),
        }
    }
    Ok(())
}

#[test]
fn writing_to_a_deleted_session_is_refused_with_a_typed_error() -> anyhow::Result<()> {
    for mode in MODES {
        let fixture = fixture(mode)?;
        let sessions = fixture.create_sessions(2)?;
        let files = fixture.store.session_files(sessions[0]);
        block_on(files.commit(batch(FileName::Entries, &["before"])))?;
        assert!(block_on(fixture.store.delete_session(sessions[0], 1))?);
        let error = block_on(files.commit(batch(FileName::Entries, &["after"])))
            .expect_err("append to a deleted session");
        assert_eq!(error.refusal(), Some(&Refusal::SessionDeleted));
        assert!(error.to_string().contains(&sessions[0].to_string()));
        let read = block_on(files.read(FileName::Entries));
        assert!(matches!(read, Err(Error::NotFound { .. })), "{read:?}");
        // The log refuses it the same way.
        let event = seed_events::NewEvent::message(
            seed_events::EventRole::User,
            "user",
            serde_json::json!("late"),
            0,
        );
        let error = block_on(
            fixture
                .store
                .append_events(sessions[0], vec![event.clone()]),
        )
        .expect_err("event for a deleted session");
        assert_eq!(error.refusal(), Some(&Refusal::SessionDeleted));
        // So does a step's commit, its lines and their events together (on PostgreSQL the
        // lines' insert takes the session's row, and finds none).
        let error = block_on(files.commit_projecting(
            batch(FileName::Entries, &["a step"]),
            Some(seed_store::Projection {
                session_id: sessions[0],
                events: vec![event],
                delivered_calls: Vec::new(),
            }),
        ))
        .expect_err("a step of a deleted session");
        assert_eq!(error.refusal(), Some(&Refusal::SessionDeleted));
        // The other session is untouched.
        block_on(
            fixture
                .store
                .session_files(sessions[1])
                .commit(batch(FileName::Entries, &["fine"])),
        )?;
    }
    Ok(())
}

fn page_count(fixture: &Fixture) -> anyhow::Result<u32> {
    Ok(fixture
        .raw()?
        .query_row("PRAGMA page_count", [], |row| row.get(0))?)
}

#[test]
fn a_full_disk_refuses_the_commit_keeps_earlier_data_and_serves_others() -> anyhow::Result<()> {
    if !crate::common::sqlite_only("a database capped in pages (max_page_count)") {
        return Ok(());
    }
    for mode in MODES {
        let roomy = fixture(mode)?;
        let sessions = roomy.create_sessions(3)?;
        block_on(
            roomy
                .store
                .session_files(sessions[0])
                .commit(batch(FileName::Entries, &["early"])),
        )?;
        let n_pages = page_count(&roomy)?;
        let path = roomy.db_path();
        let Fixture { dir, store, .. } = roomy;
        drop(store);

        // Reopen with about 40 pages (160 KiB) of room left.
        let mut config = seed_store::Config::new(&path);
        config.batch_mode = mode;
        config.max_page_count = Some(n_pages + 40);
        let store = Store::open(config)?;
        let big_line = "x".repeat(4096);
        let big: Vec<Append> = (0..200)
            .map(|_| Append::new(FileName::Entries, big_line.as_str()))
            .collect();

        // Alone.
        let error = block_on(store.session_files(sessions[0]).commit(big.clone()))
            .expect_err("an 800 KiB batch fit in 160 KiB");
        assert!(error.is_disk_full(), "{error:?}");
        assert!(
            error.to_string().contains(&sessions[0].to_string()),
            "{error}"
        );

        // In a group with small commits from other sessions.
        let hold = store.hold_writer()?;
        let outcomes = std::thread::scope(|scope| {
            let handles = [
                scope.spawn(|| {
                    block_on(
                        store
                            .session_files(sessions[1])
                            .commit(batch(FileName::Entries, &["b"])),
                    )
                }),
                scope.spawn(|| block_on(store.session_files(sessions[0]).commit(big.clone()))),
                scope.spawn(|| {
                    block_on(
                        store
                            .session_files(sessions[2])
                            .commit(batch(FileName::Entries, &["c"])),
                    )
                }),
            ];
            while store.queued_writes() < 3 {
                std::thread::yield_now();
            }
            drop(hold);
            handles.map(|handle| handle.join().expect("committer panicked"))
        });
        let [small_before, full, small_after] = outcomes;
        small_before?;
        assert!(full.is_err_and(|error| error.is_disk_full()));
        small_after?;

        // Earlier data is intact, and the full session can still commit what fits.
        assert_eq!(lines(&store, sessions[0], FileName::Entries)?, ["early"]);
        block_on(
            store
                .session_files(sessions[0])
                .commit(batch(FileName::Entries, &["small"])),
        )?;
        assert_eq!(
            lines(&store, sessions[0], FileName::Entries)?,
            ["early", "small"]
        );
        assert_eq!(lines(&store, sessions[1], FileName::Entries)?, ["b"]);
        assert_eq!(lines(&store, sessions[2], FileName::Entries)?, ["c"]);
        drop(store);
        drop(dir);
    }
    Ok(())
}

#[test]
fn sixty_four_concurrent_committers_all_land_in_order() -> anyhow::Result<()> {
    const N_SESSIONS: u128 = 64;
    const N_BATCHES: usize = 200;
    for mode in MODES {
        let fixture = fixture(mode)?;
        let sessions = fixture.create_sessions(N_SESSIONS)?;
        let store = &fixture.store;
        let commits_before = store.writer_stats().n_commits.load(Ordering::Relaxed);
        std::thread::scope(|scope| {
            for &session in &sessions {
                scope.spawn(move || {
                    let files = store.session_files(session);
                    for batch_idx in 0..N_BATCHES {
                        let batch = vec![
                            Append::new(FileName::Entries, format!("{batch_idx}.0")),
                            Append::new(FileName::Entries, format!("{batch_idx}.1")),
                        ];
                        block_on(files.commit(batch)).expect("commit");
                    }
                });
            }
        });
        for &session in &sessions {
            let expected: Vec<String> = (0..N_BATCHES)
                .flat_map(|batch_idx| [format!("{batch_idx}.0"), format!("{batch_idx}.1")])
                .collect();
            assert_eq!(lines(store, session, FileName::Entries)?, expected);
        }
        let n_jobs = N_SESSIONS as u64 * N_BATCHES as u64;
        let n_commits = store.writer_stats().n_commits.load(Ordering::Relaxed) - commits_before;
        assert!(
            n_commits < n_jobs,
            "{mode:?}: {n_commits} transactions for {n_jobs} batches: nothing was grouped"
        );
    }
    Ok(())
}

/// A fenced store behaves as a killed process: nothing more commits, and closing it leaves the
/// WAL as it was (no close-time checkpoint). Reopened, it holds exactly what committed before.
#[test]
fn a_fence_stops_every_commit_and_skips_the_close_time_checkpoint() -> anyhow::Result<()> {
    if !crate::common::sqlite_only("the WAL a fenced store leaves") {
        return Ok(());
    }
    for inline in [false, true] {
        fence_and_reopen(inline)?;
    }
    Ok(())
}

fn fence_and_reopen(inline: bool) -> anyhow::Result<()> {
    let wal_after_close = |fence: bool| -> anyhow::Result<(u64, Vec<String>)> {
        let fixture = Fixture::with(|config| config.inline = inline)?;
        let sessions = fixture.create_sessions(1)?;
        let files = fixture.store.session_files(sessions[0]);
        block_on(files.commit(batch(FileName::Entries, &["before"])))?;
        if fence {
            fixture.store.fence();
            let refused = block_on(files.commit(batch(FileName::Entries, &["after"])));
            assert!(matches!(refused, Err(Error::Closed)), "{refused:?}");
        }
        let path = fixture.db_path();
        let Fixture { dir, store, .. } = fixture;
        drop(files);
        drop(store);
        let mut wal = path.as_os_str().to_owned();
        wal.push("-wal");
        let wal_len = std::fs::metadata(&wal).map_or(0, |metadata| metadata.len());
        let store = Store::open(seed_store::Config::new(&path))?;
        let lines = lines(&store, sessions[0], FileName::Entries)?;
        drop(store);
        drop(dir);
        Ok((wal_len, lines))
    };
    let (clean_wal, clean_lines) = wal_after_close(false)?;
    assert_eq!(clean_wal, 0, "a clean close checkpoints the WAL away");
    assert_eq!(clean_lines, ["before"]);
    let (fenced_wal, fenced_lines) = wal_after_close(true)?;
    assert!(
        fenced_wal > 0,
        "inline {inline}: a fenced close leaves the WAL for recovery"
    );
    assert_eq!(
        fenced_lines,
        ["before"],
        "nothing after the fence committed"
    );
    Ok(())
}

/// A drain's last write releases this process's leases and lets nothing commit after it: a
/// turn still running cannot write once its lease is gone. Another owner's lease stays.
#[test]
fn the_drains_release_of_leases_is_the_last_write() -> anyhow::Result<()> {
    for inline in [false, true] {
        let fixture = Fixture::with(|config| config.inline = inline)?;
        let sessions = fixture.create_sessions(3)?;
        let store = &fixture.store;
        block_on(store.acquire_lease(sessions[0], "boot-a", None, 1))?;
        block_on(store.acquire_lease(sessions[1], "boot-a", None, 1))?;
        block_on(store.acquire_lease(sessions[2], "boot-z", None, 1))?;
        let files = store.session_files(sessions[0]);
        block_on(files.commit(batch(FileName::Entries, &["before"])))?;

        assert_eq!(block_on(store.release_leases_and_stop_writes("boot-a"))?, 2);
        let refused = block_on(files.commit(batch(FileName::Entries, &["after"])));
        assert!(matches!(refused, Err(Error::Closed)), "{refused:?}");
        assert_eq!(block_on(store.get_lease(sessions[0]))?, None);
        assert!(block_on(store.get_lease(sessions[2]))?.is_some());
        assert_eq!(lines(store, sessions[0], FileName::Entries)?, ["before"]);
    }
    Ok(())
}

/// Inline, the store runs every write and read on the caller's thread when asked: each future
/// is ready at its first poll, and the results are those of the threaded store.
#[test]
fn an_inline_store_answers_at_the_first_poll() -> anyhow::Result<()> {
    use futures::FutureExt;
    let fixture = Fixture::with(|config| config.inline = true)?;
    let [session] = fixture.create_sessions(1)?[..] else {
        unreachable!()
    };
    let files = fixture.store.session_files(session);
    for texts in [&["a", "b"][..], &["c"]] {
        files
            .commit(batch(FileName::Entries, texts))
            .now_or_never()
            .expect("an inline commit is ready at once")?;
    }
    let read = files
        .read(FileName::Entries)
        .now_or_never()
        .expect("an inline read is ready at once")?;
    assert_eq!(read, ["a", "b", "c"]);
    // A refused write fails alone, typed, as in the threaded store.
    block_on(fixture.store.delete_session(session, 1))?;
    let refused = files
        .commit(batch(FileName::Entries, &["late"]))
        .now_or_never()
        .expect("ready at once");
    let error = refused.expect_err("an append to a deleted session is refused");
    assert_eq!(error.refusal(), Some(&Refusal::SessionDeleted));
    Ok(())
}

/// The in-memory "disk" outlives the stores opened on it: what one store committed, the next
/// reads, even after a fence; a second disk is another database.
#[test]
fn a_memory_disk_keeps_what_committed_across_stores() -> anyhow::Result<()> {
    use seed_store::{Config, MemoryDisk, NewSession};
    let disk = MemoryDisk::new("test")?;
    let session = common::session(0);
    {
        let store = Store::open(Config {
            inline: true,
            ..disk.config()
        })?;
        block_on(store.create_account(common::account(), vec![1], 0))?;
        block_on(store.create_session(NewSession::new(session, common::account(), 0)))?;
        block_on(
            store
                .session_files(session)
                .commit(batch(FileName::Entries, &["kept"])),
        )?;
        store.fence();
        let refused = block_on(
            store
                .session_files(session)
                .commit(batch(FileName::Entries, &["lost"])),
        );
        assert!(matches!(refused, Err(Error::Closed)), "{refused:?}");
    }
    let store = Store::open(disk.config())?;
    assert_eq!(lines(&store, session, FileName::Entries)?, ["kept"]);
    assert!(block_on(store.check_integrity())?.is_empty());
    let other = Store::open(MemoryDisk::new("test")?.config())?;
    assert!(block_on(other.get_session(session))?.is_none());
    Ok(())
}
