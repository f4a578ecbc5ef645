//! The raw PostgreSQL floors of the `runtime` suite: one `INSERT` a transaction from one
//! connection and from eight (`seed_store::postgres_floor`), in a database of their own
//! (dropped after) on the server `SEED_BENCH_DATABASE_URL` names, or else on a throwaway cluster
//! `scripts/postgres.sh` starts for the run (`SEED_POSTGRES_DURABLE=1`: every commit synced, as
//! a host runs it) and removes after. They run when the filter selects one of them or the URL
//! is set.
//!
//! `runtime 100 sessions postgres` is the `runtime 100 sessions` workload with the store on
//! PostgreSQL (one node: the runtime registers, claims with its locks and fences each write of
//! a turn), a fresh database each round, against the one-connection floor; the CPU per step of
//! Seed's threads and of PostgreSQL's processes is printed beside it.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, bail};
use seed_store::{Postgres, ScratchDatabase, postgres_floor};
use seed_tests::bench::Row;

use crate::{per_second, selected};

/// The rows, with how many connections commit at once in each.
const FLOORS: [(&str, usize); 2] = [
    ("floor postgres 1 connection", 1),
    ("floor postgres 8 connections", 8),
];

const N_COMMITS: usize = 4_000;
const ROUNDS: usize = 3;

/// The runtime's row over PostgreSQL.
const RUNTIME_ROW: &str = "runtime 100 sessions postgres";

/// Whether the run measures PostgreSQL at all.
pub(crate) fn wanted(filter: &str) -> bool {
    std::env::var_os("SEED_BENCH_DATABASE_URL").is_some()
        || FLOORS
            .iter()
            .map(|(name, _)| *name)
            .chain([RUNTIME_ROW])
            .any(|name| selected(name, filter))
}

/// The floors and the runtime's row; `base` is the store's configuration for the runtime's
/// row, whose database is set to one of the cluster's.
pub(crate) fn rows(filter: &str, base: &seed_store::Config) -> anyhow::Result<Vec<Row>> {
    let cluster = match std::env::var("SEED_BENCH_DATABASE_URL") {
        Ok(url) => Cluster { url, dir: None },
        Err(_) => Cluster::start()?,
    };
    // A database of its own, dropped (before the cluster stops) when the rows are measured.
    let scratch = ScratchDatabase::create(&cluster.url)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let mut rows = Vec::new();
    runtime.block_on(async {
        let postgres = Postgres::connect(scratch.url()).await?;
        eprintln!(
            "PostgreSQL floors: {}",
            postgres_floor::durability(&postgres).await?
        );
        for (name, n_connections) in FLOORS {
            let needed = n_connections == 1 && selected(RUNTIME_ROW, filter);
            if !selected(name, filter) && !needed {
                continue;
            }
            // The best of the rounds, as every floor of the bench.
            let mut best = 0.0_f64;
            for _ in 0..ROUNDS {
                let elapsed: Duration =
                    postgres_floor::measure_commits(&postgres, n_connections, N_COMMITS).await?;
                best = best.max(per_second(N_COMMITS, elapsed));
            }
            rows.push(Row::floor(name, best));
        }
        anyhow::Ok(())
    })?;
    drop(runtime);
    if selected(RUNTIME_ROW, filter) {
        let floor_one = rows
            .iter()
            .find(|row| row.name == FLOORS[0].0)
            .map(|row| row.value)
            .context("the one-connection floor was measured")?;
        rows.push(runtime_row(&cluster.url, base, floor_one)?);
    }
    Ok(rows)
}

/// `runtime 100 sessions postgres`: the best of the rounds, each on a database of its own.
fn runtime_row(url: &str, base: &seed_store::Config, floor_one: f64) -> anyhow::Result<Row> {
    use seed_tests::runtime_bench::{self, TurnShape};
    let mut best: Option<(f64, f64, f64)> = None;
    for _ in 0..ROUNDS {
        let database = ScratchDatabase::create(url)?;
        let mut config = base.clone();
        config.database = Some(seed_store::DatabaseUrl(database.url().to_owned()));
        let postgres_before = postgres_cpu()?;
        let measured = runtime_bench::steps_rate(&config, 100, 40, TurnShape::AgentLoop)?;
        let postgres_spent = postgres_cpu()?.saturating_sub(postgres_before);
        let n_steps = measured.n_steps.max(1) as f64;
        let seed_cpu: Duration = measured.thread_cpu.iter().map(|(_, cpu)| *cpu).sum();
        let round = (
            measured.rate(),
            seed_cpu.as_secs_f64() * 1e6 / n_steps,
            postgres_spent.as_secs_f64() * 1e6 / n_steps,
        );
        eprintln!(
            "{RUNTIME_ROW}: {:.0} steps/s, {:.0} commits for {} jobs; CPU per step: Seed \
             {:.0} µs, PostgreSQL {:.0} µs",
            round.0, measured.n_commits as f64, measured.n_jobs, round.1, round.2
        );
        if best.is_none_or(|(rate, _, _)| round.0 > rate) {
            best = Some(round);
        }
    }
    let (rate, _, _) = best.context("at least one round")?;
    Ok(Row::ratio(RUNTIME_ROW, rate, "steps/s", floor_one))
}

/// CPU spent so far by the PostgreSQL processes of this machine (the cluster's postmaster and
/// its backends), as /proc counts it.
fn postgres_cpu() -> anyhow::Result<Duration> {
    let mut total = Duration::ZERO;
    for entry in std::fs::read_dir("/proc")? {
        let entry = entry?;
        let Some(pid) = entry.file_name().to_str().map(str::to_owned) else {
            continue;
        };
        if !pid.bytes().all(|byte| byte.is_ascii_digit()) {
            continue;
        }
        let Ok(comm) = std::fs::read_to_string(entry.path().join("comm")) else {
            continue;
        };
        if comm.trim() != "postgres" {
            continue;
        }
        // A backend that ends meanwhile is skipped.
        if let Ok(threads) = seed_tests::runtime_bench::thread_cpu_of(&pid) {
            total += threads.values().copied().sum::<Duration>();
        }
    }
    Ok(total)
}

/// A database to measure on; a throwaway one is stopped and removed when dropped.
struct Cluster {
    url: String,
    dir: Option<String>,
}

fn script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../scripts/postgres.sh")
}

impl Cluster {
    fn start() -> anyhow::Result<Cluster> {
        let output = std::process::Command::new(script())
            .arg("start")
            .env("SEED_POSTGRES_DURABLE", "1")
            .stderr(std::process::Stdio::inherit())
            .output()
            .context("runs scripts/postgres.sh start")?;
        if !output.status.success() {
            bail!("scripts/postgres.sh start failed: {}", output.status);
        }
        let text = String::from_utf8(output.stdout)?;
        let value = |name: &str| {
            text.lines()
                .find_map(|line| line.strip_prefix(&format!("export {name}=")))
                .map(str::to_owned)
                .with_context(|| format!("scripts/postgres.sh printed no {name}"))
        };
        Ok(Cluster {
            url: value("SEED_TEST_DATABASE_URL")?,
            dir: Some(value("SEED_TEST_POSTGRES_DIR")?),
        })
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        if let Some(dir) = &self.dir {
            let stopped = std::process::Command::new(script())
                .args(["stop", dir])
                .status();
            if !matches!(stopped, Ok(status) if status.success()) {
                eprintln!("scripts/postgres.sh stop {dir} failed: {stopped:?}");
            }
        }
    }
}
