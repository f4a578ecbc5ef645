//! The raw PostgreSQL floors of the `runtime` suite: one `INSERT` a transaction from one
//! connection and from eight (`seed_store::postgres_floor`), in a database of their own
//! (dropped after) on the server `SEED_BENCH_DATABASE_URL` names, or else on a throwaway cluster
//! `scripts/postgres.sh` starts for the run (`SEED_POSTGRES_DURABLE=1`: every commit synced, as
//! a host runs it) and removes after. They run when the filter names `postgres` or the URL is
//! set.

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

/// Whether the run measures PostgreSQL at all.
pub(crate) fn wanted(filter: &str) -> bool {
    std::env::var_os("SEED_BENCH_DATABASE_URL").is_some() || filter.contains("postgres")
}

pub(crate) fn floor_rows(filter: &str) -> anyhow::Result<Vec<Row>> {
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
            if !selected(name, filter) {
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
    Ok(rows)
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
