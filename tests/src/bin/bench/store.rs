//! The `store` and `harness` suites: commits through the store's writer (and the ceiling of
//! group commit), and steps of the scripted turn loop through the durable harness, each against
//! the raw SQLite floor of the same run.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::bail;
use futures::executor::LocalPool;
use futures::task::LocalSpawnExt;
use seed_durable::{Append, DurableFs, FileName, MemoryFs};
use seed_events::{AccountId, SessionId};
use seed_store::{BatchMode, Config, NewSession, Store, Synchronous, floor};
use seed_tests::bench::Row;
use seed_tests::turn_loop::{self, CommitStats, TURNS_PER_SESSION, TimedFs};

use crate::{best_of, config, floor_rate, per_second, remove_database, scratch_dir, selected};

pub(crate) fn suite(filter: &str) -> anyhow::Result<Vec<Row>> {
    let scratch = scratch_dir()?;
    let n_normal = 20_000;
    let n_full = 2_000;
    let normal = |mode| config(&scratch, Synchronous::Normal, mode);
    let full = |mode| config(&scratch, Synchronous::Full, mode);

    let mut rows = Vec::new();
    let floor_normal = best_of(|| floor_rate(&normal(BatchMode::Optimistic), n_normal))?;
    let floor_full = best_of(|| floor_rate(&full(BatchMode::Optimistic), n_full))?;
    rows.push(Row::floor("floor normal", floor_normal));
    rows.push(Row::floor("floor full", floor_full));
    for (name, config) in [
        ("ceiling grouped 64", normal(BatchMode::Optimistic)),
        ("ceiling grouped 64 full", full(BatchMode::Optimistic)),
    ] {
        if !selected(name, filter) {
            continue;
        }
        let floor = if name.ends_with("full") {
            floor_full
        } else {
            floor_normal
        };
        let rate = best_of(|| {
            remove_database(&config.path)?;
            let elapsed = floor::measure_grouped_commits(&config, 64, 32, n_normal)?;
            Ok(per_second(n_normal, elapsed))
        })?;
        rows.push(Row::ratio(name, rate, "commits/s", floor));
    }

    let cases: [(&str, Config, usize, usize, f64); 5] = [
        (
            "store sequential",
            normal(BatchMode::Optimistic),
            1,
            n_normal,
            floor_normal,
        ),
        (
            "store concurrent 64",
            normal(BatchMode::Optimistic),
            64,
            n_normal,
            floor_normal,
        ),
        (
            "store concurrent 64 full",
            full(BatchMode::Optimistic),
            64,
            n_full * 4,
            floor_full,
        ),
        // The two ways of letting a refused job fail alone, side by side (see
        // docs/design/group-commit.md).
        (
            "store concurrent 64 savepoint",
            normal(BatchMode::Savepoint),
            64,
            n_normal,
            floor_normal,
        ),
        (
            "store concurrent 64 full savepoint",
            full(BatchMode::Savepoint),
            64,
            n_full * 4,
            floor_full,
        ),
    ];
    for (name, config, n_sessions, n_commits, floor) in cases {
        if !selected(name, filter) {
            continue;
        }
        let rate = best_of(|| store_rate(&config, n_sessions, n_commits))?;
        rows.push(Row::ratio(name, rate, "commits/s", floor));
    }
    Ok(rows)
}

/// Steps/s of the scripted turn loop (`seed_tests::turn_loop`) through the durable harness,
/// over the in-memory fs and over the store, against the raw floor. A step is one committed
/// entry, with the task and documents committed alongside it.
pub(crate) fn harness_suite(filter: &str) -> anyhow::Result<Vec<Row>> {
    let scratch = scratch_dir()?;
    let n_normal = 20_000;
    let normal = config(&scratch, Synchronous::Normal, BatchMode::Optimistic);

    let mut rows = Vec::new();
    let floor_normal = best_of(|| floor_rate(&normal, n_normal))?;
    rows.push(Row::floor("floor normal", floor_normal));
    // Sessions of TURNS_PER_SESSION turns, about 200 steps each.
    if selected("harness memory", filter) {
        let rate = best_of(|| harness_memory_rate(64))?;
        rows.push(Row::ratio("harness memory", rate, "steps/s", floor_normal));
    }
    if selected("harness sqlite", filter) {
        let rate = best_of(|| harness_sqlite_rate(&normal, 24))?;
        rows.push(Row::ratio("harness sqlite", rate, "steps/s", floor_normal));
    }
    Ok(rows)
}

fn harness_memory_rate(n_sessions: usize) -> anyhow::Result<f64> {
    let stats = Arc::new(CommitStats::default());
    let started = Instant::now();
    let mut n_steps = 0;
    for idx in 0..n_sessions {
        let fs = TimedFs::new(MemoryFs::new(), Arc::clone(&stats));
        let session = turn_loop::run_session(fs, idx * TURNS_PER_SESSION);
        n_steps += futures::executor::block_on(session)?;
    }
    let elapsed = started.elapsed();
    report_steps("harness memory", n_steps, &stats, elapsed);
    Ok(per_second(n_steps, elapsed))
}

/// The sessions are created before the clock starts; opening each one's harness (reading its
/// files) is timed with its turns.
fn harness_sqlite_rate(config: &Config, n_sessions: usize) -> anyhow::Result<f64> {
    let (store, sessions) = fresh_store(config, n_sessions)?;
    let stats = Arc::new(CommitStats::default());
    let started = Instant::now();
    let mut n_steps = 0;
    for (idx, &session) in sessions.iter().enumerate() {
        let fs = TimedFs::new(store.session_files(session), Arc::clone(&stats));
        let session = turn_loop::run_session(fs, idx * TURNS_PER_SESSION);
        n_steps += futures::executor::block_on(session)?;
    }
    let elapsed = started.elapsed();
    // Every step landed: the store holds as many entries as the harnesses committed.
    let n_stored = futures::executor::block_on(async {
        let mut n_stored = 0;
        for &session in &sessions {
            n_stored += store
                .session_files(session)
                .read(FileName::Entries)
                .await?
                .len();
        }
        anyhow::Ok(n_stored)
    })?;
    if n_stored != n_steps {
        bail!("the harnesses committed {n_steps} entries and the store holds {n_stored}");
    }
    report_steps("harness sqlite", n_steps, &stats, elapsed);
    Ok(per_second(n_steps, elapsed))
}

/// Under `SEED_BENCH_VERBOSE`: commits per step, and how a step's time splits between waiting
/// for commits and the rest (the harness and the scripted model).
fn report_steps(name: &str, n_steps: usize, stats: &CommitStats, elapsed: Duration) {
    if std::env::var_os("SEED_BENCH_VERBOSE").is_none() {
        return;
    }
    let n_commits = stats.n_commits();
    let per_step = |time: Duration| time.as_secs_f64() * 1e6 / n_steps.max(1) as f64;
    eprintln!(
        "{name}: {n_steps} steps in {n_commits} commits ({:.2} per step), {elapsed:?}; \
         per step {:.1} us waiting for commits, {:.1} us else",
        n_commits as f64 / n_steps.max(1) as f64,
        per_step(stats.waited()),
        per_step(elapsed.saturating_sub(stats.waited())),
    );
}

/// A fresh database at `config.path` with one account and `n_sessions` sessions.
fn fresh_store(config: &Config, n_sessions: usize) -> anyhow::Result<(Store, Vec<SessionId>)> {
    remove_database(&config.path)?;
    let store = Store::open(config.clone())?;
    let account = AccountId::from_u128(1);
    let sessions: Vec<SessionId> = (0..n_sessions)
        .map(|idx| SessionId::from_u128(idx as u128 + 1))
        .collect();
    futures::executor::block_on(async {
        store.create_account(account, vec![0], 0).await?;
        for &session in &sessions {
            store
                .create_session(NewSession::new(session, account, 0))
                .await?;
        }
        anyhow::Ok(())
    })?;
    Ok((store, sessions))
}

/// `n_sessions` sessions, each an async task on one executor thread (as session actors share
/// an arbiter), commit one line per step through the store until `n_commits` are done.
fn store_rate(config: &Config, n_sessions: usize, n_commits: usize) -> anyhow::Result<f64> {
    let (store, sessions) = fresh_store(config, n_sessions)?;
    let per_session = n_commits / n_sessions;
    let mut pool = LocalPool::new();
    let spawner = pool.spawner();
    let started = Instant::now();
    let mut tasks = Vec::new();
    for &session in &sessions {
        let files = store.session_files(session);
        let task = spawner.spawn_local_with_handle(async move {
            for _ in 0..per_session {
                files
                    .commit(vec![Append::new(FileName::Entries, floor::floor_line())])
                    .await?;
            }
            anyhow::Ok(())
        })?;
        tasks.push(task);
    }
    for result in pool.run_until(futures::future::join_all(tasks)) {
        result?;
    }
    let elapsed = started.elapsed();
    let stats = store.writer_stats();
    let n_commits = stats.n_commits.load(std::sync::atomic::Ordering::Relaxed);
    let n_jobs = stats
        .n_jobs_committed
        .load(std::sync::atomic::Ordering::Relaxed);
    if std::env::var_os("SEED_BENCH_VERBOSE").is_some() {
        eprintln!(
            "{n_sessions} sessions: {n_jobs} jobs in {n_commits} commits ({:.1} per commit), {:?}",
            n_jobs as f64 / n_commits.max(1) as f64,
            elapsed
        );
    }
    Ok(per_second(per_session * n_sessions, elapsed))
}
