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
//! Seed's threads and of PostgreSQL's processes is printed beside it. `runtime 100 sessions
//! postgres 2 nodes` runs half the lanes in a second process of this binary on the same
//! database.

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

/// The runtime's rows over PostgreSQL: one node, and two processes sharing the database.
const RUNTIME_ROW: &str = "runtime 100 sessions postgres";
const TWO_NODES_ROW: &str = "runtime 100 sessions postgres 2 nodes";

/// The hidden suite the second node of [`TWO_NODES_ROW`] runs in: `bench NODE_CHILD URL
/// FIRST_LANE N_LANES` prints `ready`, starts on a line from its stdin, and prints its
/// measurement as JSON.
pub(crate) const NODE_CHILD: &str = "runtime-node-child";

/// Lanes and turns of the runtime's rows (the `runtime 100 sessions` workload).
const N_LANES: usize = 100;
const TURNS: usize = 40;

/// Whether the run measures PostgreSQL at all.
pub(crate) fn wanted(filter: &str) -> bool {
    std::env::var_os("SEED_BENCH_DATABASE_URL").is_some()
        || FLOORS
            .iter()
            .map(|(name, _)| *name)
            .chain([RUNTIME_ROW, TWO_NODES_ROW])
            .any(|name| selected(name, filter))
}

/// The floors and the runtime's row; `base` is the store's configuration for the runtime's
/// row, whose database is set to one of the cluster's.
pub(crate) fn rows(filter: &str, base: &seed_store::Config) -> anyhow::Result<Vec<Row>> {
    let mut base = base.clone();
    set_writer_lanes(&mut base)?;
    let base = &base;
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
            let needed = n_connections == 1
                && (selected(RUNTIME_ROW, filter) || selected(TWO_NODES_ROW, filter));
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
    let floor_one = rows
        .iter()
        .find(|row| row.name == FLOORS[0].0)
        .map(|row| row.value);
    if selected(RUNTIME_ROW, filter) {
        let floor_one = floor_one.context("the one-connection floor was measured")?;
        rows.push(runtime_row(&cluster.url, base, floor_one)?);
    }
    if selected(TWO_NODES_ROW, filter) {
        let floor_one = floor_one.context("the one-connection floor was measured")?;
        rows.push(two_nodes_row(&cluster.url, base, floor_one)?);
    }
    Ok(rows)
}

/// The writer's lanes as `SEED_BENCH_WRITER_LANES` says, when it does (the store's default
/// otherwise), to compare them.
fn set_writer_lanes(config: &mut seed_store::Config) -> anyhow::Result<()> {
    if let Ok(lanes) = std::env::var("SEED_BENCH_WRITER_LANES") {
        config.writer_lanes = lanes
            .parse()
            .context("SEED_BENCH_WRITER_LANES must be a whole number")?;
    }
    Ok(())
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
        let measured = runtime_bench::steps_rate(&config, N_LANES, TURNS, TurnShape::AgentLoop)?;
        let postgres_spent = postgres_cpu()?.saturating_sub(postgres_before);
        let n_steps = measured.n_steps.max(1) as f64;
        let seed_cpu: Duration = measured.thread_cpu.iter().map(|(_, cpu)| *cpu).sum();
        let round = (
            measured.rate(),
            seed_cpu.as_secs_f64() * 1e6 / n_steps,
            postgres_spent.as_secs_f64() * 1e6 / n_steps,
        );
        eprintln!(
            "{RUNTIME_ROW}: {:.0} steps/s, {:.0} commits for {} jobs, round trips per step: \
             writer {:.1}, readers {:.1}; CPU per step: Seed {:.0} µs, PostgreSQL {:.0} µs",
            round.0,
            measured.n_commits as f64,
            measured.n_jobs,
            measured.n_round_trips as f64 / n_steps,
            measured.n_reader_round_trips as f64 / n_steps,
            round.1,
            round.2
        );
        if std::env::var_os("SEED_BENCH_VERBOSE").is_some() {
            crate::runtime::print_measured(RUNTIME_ROW, &measured);
        }
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
        // A backend that ends meanwhile is skipped here, and counted in the time of the
        // children its parent (the postmaster) reaped.
        if let Ok(threads) = seed_tests::runtime_bench::thread_cpu_of(&pid) {
            total += threads.values().copied().sum::<Duration>();
        }
        total += reaped_children_cpu(&entry.path()).unwrap_or_default();
    }
    Ok(total)
}

/// The CPU time of the children a process waited for (`cutime` and `cstime` of its
/// `/proc/PID/stat`, in clock ticks of 10 ms).
fn reaped_children_cpu(proc_dir: &std::path::Path) -> Option<Duration> {
    const TICK: Duration = Duration::from_millis(10);
    let stat = std::fs::read_to_string(proc_dir.join("stat")).ok()?;
    // The fields after the command name, which is in parentheses: the state is the first.
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let cutime: u32 = fields.get(13)?.parse().ok()?;
    let cstime: u32 = fields.get(14)?.parse().ok()?;
    Some(TICK * (cutime + cstime))
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

/// `runtime 100 sessions postgres 2 nodes`: the same workload, half of the lanes in this
/// process and half in a second process of this binary, both nodes of one database; steps/s of
/// both over the longer of the two timed parts. The best of the rounds.
fn two_nodes_row(url: &str, base: &seed_store::Config, floor_one: f64) -> anyhow::Result<Row> {
    use std::io::{BufRead as _, Write as _};

    use seed_tests::runtime_bench::{self, NodeShare, TurnShape};
    let half = N_LANES / 2;
    let mut best = 0.0_f64;
    for _ in 0..ROUNDS {
        let database = ScratchDatabase::create(url)?;
        let mut config = base.clone();
        config.database = Some(seed_store::DatabaseUrl(database.url().to_owned()));
        runtime_bench::set_up_lanes(&config, N_LANES, TURNS)?;
        let mut child = std::process::Command::new(std::env::current_exe()?)
            .args([
                NODE_CHILD,
                database.url(),
                &half.to_string(),
                &half.to_string(),
            ])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::inherit())
            .spawn()
            .context("starts the second node")?;
        let child_out = std::io::BufReader::new(child.stdout.take().context("stdout")?);
        let child_in = child.stdin.take().context("stdin")?;
        let pipes = std::sync::Arc::new(std::sync::Mutex::new((child_out, child_in)));
        let their_json = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
        let postgres_before = postgres_cpu()?;
        let share = NodeShare {
            boot_id: "bench-a".to_owned(),
            first_lane: 0,
            set_up: false,
            bridged: true,
        };
        let here = runtime_bench::steps_rate_on(
            &config,
            half,
            TURNS,
            TurnShape::AgentLoop,
            &share,
            || {
                // Both nodes start their timed parts together.
                let (child_out, child_in) = &mut *pipes.lock().expect("the pipes");
                let mut line = String::new();
                child_out.read_line(&mut line)?;
                if line.trim() != "ready" {
                    bail!("the second node said {line:?}, not ready");
                }
                writeln!(child_in, "go")?;
                Ok(())
            },
            |_| {
                // This node runs on until the other's lanes are done (it says so with its
                // measurement), then tells it to stop.
                let (pipes, their_json) = (pipes.clone(), their_json.clone());
                Box::pin(async move {
                    let (done, heard) = futures::channel::oneshot::channel();
                    std::thread::spawn(move || {
                        let (child_out, child_in) = &mut *pipes.lock().expect("the pipes");
                        let mut json = String::new();
                        let read = child_out.read_line(&mut json);
                        let told = writeln!(child_in, "stop");
                        let _ = done.send(read.and(told).map(|()| json));
                    });
                    *their_json.lock().expect("the measurement") = heard.await??;
                    Ok(())
                })
            },
        )?;
        drop(pipes);
        let json = std::mem::take(&mut *their_json.lock().expect("the measurement"));
        let status = child.wait()?;
        if !status.success() {
            bail!("the second node exited {status}");
        }
        let there: runtime_bench::StepsMeasurement =
            serde_json::from_str(json.trim()).context("the second node's measurement")?;
        let postgres_spent = postgres_cpu()?.saturating_sub(postgres_before);
        let n_steps = here.n_steps + there.n_steps;
        let elapsed = here.elapsed.max(there.elapsed);
        let rate = n_steps as f64 / elapsed.as_secs_f64();
        let seed_cpu: Duration = here
            .thread_cpu
            .iter()
            .chain(&there.thread_cpu)
            .map(|(_, cpu)| *cpu)
            .sum();
        let n_notices = here.n_notices + there.n_notices;
        let n_batches = here.n_notice_batches + there.n_notice_batches;
        eprintln!(
            "{TWO_NODES_ROW}: {rate:.0} steps/s ({} + {} steps); CPU per step: Seed {:.0} µs, \
             PostgreSQL {:.0} µs; notices per step {:.2}, per batch {:.1}",
            here.n_steps,
            there.n_steps,
            seed_cpu.as_secs_f64() * 1e6 / n_steps.max(1) as f64,
            postgres_spent.as_secs_f64() * 1e6 / n_steps.max(1) as f64,
            n_notices as f64 / n_steps.max(1) as f64,
            n_notices as f64 / n_batches.max(1) as f64,
        );
        best = best.max(rate);
    }
    Ok(Row::ratio(TWO_NODES_ROW, best, "steps/s", floor_one))
}

/// The second node of [`two_nodes_row`], in a process of its own (see [`NODE_CHILD`]).
pub(crate) fn node_child() -> anyhow::Result<()> {
    use std::io::{BufRead as _, Write as _};

    use seed_tests::runtime_bench::{self, NodeShare, TurnShape};
    let args: Vec<String> = std::env::args().skip(2).collect();
    let [url, first_lane, n_lanes] = &args[..] else {
        bail!("usage: bench {NODE_CHILD} URL FIRST_LANE N_LANES");
    };
    let scratch = crate::scratch_dir()?;
    let mut config = crate::config(
        &scratch,
        seed_store::Synchronous::Normal,
        seed_store::BatchMode::Optimistic,
    );
    config.database = Some(seed_store::DatabaseUrl(url.clone()));
    set_writer_lanes(&mut config)?;
    let share = NodeShare {
        boot_id: "bench-b".to_owned(),
        first_lane: first_lane.parse()?,
        set_up: false,
        bridged: true,
    };
    runtime_bench::steps_rate_on(
        &config,
        n_lanes.parse()?,
        TURNS,
        TurnShape::AgentLoop,
        &share,
        || {
            println!("ready");
            std::io::stdout().flush()?;
            let mut line = String::new();
            std::io::stdin().lock().read_line(&mut line)?;
            Ok(())
        },
        |measured| {
            // The measurement on one line; then this node runs on until told to stop, since
            // it may hold runs of the other node's sessions.
            let printed = serde_json::to_string(measured)
                .map_err(anyhow::Error::from)
                .and_then(|json| {
                    println!("{json}");
                    std::io::stdout().flush()?;
                    Ok(())
                });
            Box::pin(async move {
                printed?;
                let (stop, told) = futures::channel::oneshot::channel();
                std::thread::spawn(move || {
                    let mut line = String::new();
                    let _ = std::io::stdin().lock().read_line(&mut line);
                    let _ = stop.send(());
                });
                let _ = told.await;
                Ok(())
            })
        },
    )?;
    Ok(())
}
