//! The `runtime` suite: the agent loop through the whole runtime, resident memory per session
//! (each row measured in a child process of this binary), and the boot sweep.

use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use seed_store::{BatchMode, Synchronous};
use seed_tests::bench::Row;
use seed_tests::runtime_bench::{self, TurnShape};

use crate::{best_of_n, config, floor_rate, remove_database, scratch_dir, selected};

/// The steps rows of the `runtime` suite: concurrent sessions, the turns each one takes (a
/// lane moves to a fresh session every `runtime_bench::TURNS_PER_SESSION` turns) and their
/// shape. The many sessions' rows commit about 20,000 steps and run a second or so: long
/// enough for the store's checkpoints and the sessions' later turns, not only their first, to
/// be in the figure. `answer only` is the `service` suite's turn (a message, its answer) at its
/// 256 clients, without the API: the service's steps/s (2 a message) compare with it.
const RUNTIME_STEPS_CASES: [(&str, usize, usize, TurnShape); 4] = [
    ("runtime 1 session", 1, 300, TurnShape::AgentLoop),
    ("runtime 100 sessions", 100, 40, TurnShape::AgentLoop),
    ("runtime 1000 sessions", 1000, 4, TurnShape::AgentLoop),
    (
        "runtime 256 sessions answer only",
        256,
        40,
        TurnShape::Answer,
    ),
];

/// Rounds of each `runtime` measurement (each on a fresh database): this many, or as many as
/// have started within [`RUNTIME_ROUND_BUDGET`], at least one.
pub(crate) const RUNTIME_ROUNDS: usize = 3;
pub(crate) const RUNTIME_ROUND_BUDGET: Duration = Duration::from_secs(15);

/// The agent-loop workload through the whole runtime (`seed_tests::runtime_bench`); see the
/// crate docs in main.rs.
pub(crate) fn suite(filter: &str) -> anyhow::Result<Vec<Row>> {
    let scratch = scratch_dir()?;
    let n_normal = 20_000;
    let normal = config(&scratch, Synchronous::Normal, BatchMode::Optimistic);
    let verbose = std::env::var_os("SEED_BENCH_VERBOSE").is_some();

    let mut rows = Vec::new();
    let floor_normal = best_of_n(RUNTIME_ROUNDS, || floor_rate(&normal, n_normal))?;
    rows.push(Row::floor("floor normal", floor_normal));
    for (name, n_sessions, turns, shape) in RUNTIME_STEPS_CASES {
        if !selected(name, filter) {
            continue;
        }
        let rate = best_within(RUNTIME_ROUNDS, RUNTIME_ROUND_BUDGET, || {
            remove_database(&normal.path)?;
            let measured = runtime_bench::steps_rate(&normal, n_sessions, turns, shape)?;
            if verbose {
                print_measured(name, &measured);
            }
            Ok(measured.rate())
        })?;
        rows.push(Row::ratio(name, rate, "steps/s", floor_normal));
    }

    // PostgreSQL's raw floors, when the run measures PostgreSQL (see `postgres`).
    if crate::postgres::wanted(filter) {
        rows.extend(crate::postgres::rows(filter, &normal)?);
    }

    // Opening a session cold: one of 100 entries, and one of 100,000 with a reset near the end
    // (the same context), against it. Verbose: the second never kept too (every line read).
    let small = "runtime reopen 100 entries";
    let large = "runtime reopen 100000 entries";
    if selected(small, filter) || selected(large, filter) {
        let open = |n_entries, kept, n_opens| -> anyhow::Result<f64> {
            remove_database(&normal.path)?;
            let time = seed_tests::reopen_bench::reopen_time(&normal, n_entries, kept, n_opens)?;
            Ok(time.as_secs_f64() * 1e6)
        };
        let small_us = open(100, true, 20)?;
        rows.push(Row::ratio(small, small_us, "µs", small_us));
        if selected(large, filter) {
            let large_us = open(100_000, true, 20)?;
            if verbose {
                // The first open of a session never kept reads every line (and keeps).
                let never_kept = open(100_000, false, 1)?;
                eprintln!(
                    "{large}: {large_us:.0} µs; the first open of it never kept (every line \
                     read): {never_kept:.0} µs"
                );
            }
            rows.push(Row::ratio(large, large_us, "µs", small_us));
        }
    }

    // Process CPU (every thread: the actors', the writer, the readers, the checkpointer) per
    // step of the 100 sessions' workload; the least of the rounds.
    let name = "runtime cpu per step";
    if selected(name, filter) {
        let mut least = f64::INFINITY;
        for _ in 0..RUNTIME_ROUNDS {
            remove_database(&normal.path)?;
            let measured = runtime_bench::steps_rate(&normal, 100, 40, TurnShape::AgentLoop)?;
            let cpu: Duration = measured.thread_cpu.iter().map(|(_, cpu)| *cpu).sum();
            least = least.min(cpu.as_secs_f64() * 1e6 / measured.n_steps.max(1) as f64);
        }
        rows.push(Row::figure(name, least, "µs/step"));
    }

    // The same workload with every commit synced (`seed serve --synchronous full`), against
    // the raw floor of fsynced commits in the same run.
    let name = "runtime 100 sessions full";
    if selected(name, filter) {
        let full = config(&scratch, Synchronous::Full, BatchMode::Optimistic);
        let floor_full = best_of_n(RUNTIME_ROUNDS, || floor_rate(&full, 2_000))?;
        rows.push(Row::floor("floor full", floor_full));
        let rate = best_within(RUNTIME_ROUNDS, RUNTIME_ROUND_BUDGET, || {
            remove_database(&full.path)?;
            let measured = runtime_bench::steps_rate(&full, 100, 40, TurnShape::AgentLoop)?;
            if verbose {
                print_measured(name, &measured);
            }
            Ok(measured.rate())
        })?;
        rows.push(Row::ratio(name, rate, "steps/s", floor_full));
    }

    // Memory: one measurement each, in a process of its own (see `memory_child`); the
    // figure's own value is its floor.
    for name in [IDLE_MEMORY_ROW, ACTIVE_MEMORY_ROW] {
        if !selected(name, filter) {
            continue;
        }
        let measured = memory_in_child(name)?;
        eprintln!(
            "{name}: VmRSS {} KiB -> {} KiB over {} sessions ({} with an actor, after {:?}): \
             {:.3} KiB/session",
            measured.before_kib,
            measured.after_kib,
            measured.n_sessions,
            measured.n_active,
            measured.ramp,
            measured.kib_per_session(),
        );
        let kib = measured.kib_per_session();
        rows.push(Row::figure(name, kib, "KiB/session"));
    }

    // The boot sweep, read against its budget of 2 s.
    let name = "runtime boot sweep 10000";
    if selected(name, filter) {
        let mut fastest = f64::INFINITY;
        for _ in 0..RUNTIME_ROUNDS {
            remove_database(&normal.path)?;
            let measured = runtime_bench::boot_sweep_time(&normal, 10_000)?;
            let millis = measured.elapsed.as_secs_f64() * 1e3;
            if verbose {
                eprintln!("{name}: {:?} in {millis:.1} ms", measured.report);
            }
            fastest = fastest.min(millis);
        }
        rows.push(Row::figure(name, fastest, "ms"));
    }

    // Wake-ups: 100,000 due over a minute, fired by the runtime's scheduler (one round: it
    // takes the minute). The lead leaves time to set them before the first is due.
    let name = "runtime schedules 100000";
    if selected(name, filter) {
        remove_database(&normal.path)?;
        let measured =
            seed_tests::schedules_bench::fire_rate(&normal, 100_000, Duration::from_secs(30))?;
        eprintln!("{name}: {measured:?}");
        rows.push(Row::figure(
            "runtime schedules 100000 fired",
            measured.fired_per_second,
            "wake-ups/s",
        ));
        rows.push(Row::figure(
            "runtime schedules 100000 late p50",
            measured.late_p50_ms,
            "ms",
        ));
        rows.push(Row::figure(
            "runtime schedules 100000 late p99",
            measured.late_p99_ms,
            "ms",
        ));
        rows.push(Row::figure(
            "runtime schedules 100000 cpu",
            measured.cpu_per_wakeup_us,
            "µs/wake-up",
        ));
    }

    if selected(crate::traced::ROW, filter) {
        rows.extend(crate::traced::rows(verbose)?);
    }
    Ok(rows)
}

const IDLE_MEMORY_ROW: &str = "runtime idle 100000 sessions";
const ACTIVE_MEMORY_ROW: &str = "runtime active 1000 sessions";

/// The hidden suite a memory row runs in: `bench MEMORY_CHILD ROW` measures ROW and prints
/// the measurement as JSON.
pub(crate) const MEMORY_CHILD: &str = "runtime-memory-child";

/// Runs the memory row `name` in a fresh process of this binary: resident memory is only
/// meaningful in a process that has measured nothing before (the allocator keeps what earlier
/// measurements freed, and would hand it out again unseen).
fn memory_in_child(name: &str) -> anyhow::Result<runtime_bench::MemoryMeasurement> {
    let exe = std::env::current_exe().context("finding the bench binary")?;
    let output = std::process::Command::new(&exe)
        .args([MEMORY_CHILD, name])
        .stderr(std::process::Stdio::inherit())
        .output()
        .with_context(|| format!("running {} {MEMORY_CHILD}", exe.display()))?;
    if !output.status.success() {
        bail!("measuring {name} failed: {}", output.status);
    }
    serde_json::from_slice(&output.stdout)
        .with_context(|| format!("reading the measurement of {name}"))
}

/// The child's side of [`memory_in_child`].
pub(crate) fn memory_child(name: &str) -> anyhow::Result<()> {
    let scratch = scratch_dir()?;
    let mut config = config(&scratch, Synchronous::Normal, BatchMode::Optimistic);
    // A database of its own, so a child never races the parent's files.
    config.path = scratch.join("runtime-memory.db");
    remove_database(&config.path)?;
    let measured = match name {
        IDLE_MEMORY_ROW => runtime_bench::idle_memory(&config, 100_000)?,
        ACTIVE_MEMORY_ROW => runtime_bench::active_memory(&config, 1000)?,
        _ => bail!("no memory row {name:?}"),
    };
    remove_database(&config.path)?;
    println!("{}", serde_json::to_string(&measured)?);
    Ok(())
}

/// The best of `rounds` measurements, or of those that started within `budget`.
pub(crate) fn best_within(
    rounds: usize,
    budget: Duration,
    mut measure: impl FnMut() -> anyhow::Result<f64>,
) -> anyhow::Result<f64> {
    let started = Instant::now();
    let mut best = measure()?;
    for _ in 1..rounds {
        if started.elapsed() >= budget {
            break;
        }
        best = best.max(measure()?);
    }
    Ok(best)
}

/// What the verbose bench prints of a steps row's round: the writer's groups and each thread's
/// CPU.
pub(crate) fn print_measured(name: &str, measured: &runtime_bench::StepsMeasurement) {
    eprintln!(
        "{name}: {} steps in {:?}, {} jobs in {} commits ({:.1} per commit, \
         {:.2} commits per step)",
        measured.n_steps,
        measured.elapsed,
        measured.n_jobs,
        measured.n_commits,
        measured.n_jobs as f64 / measured.n_commits.max(1) as f64,
        measured.n_commits as f64 / measured.n_steps.max(1) as f64,
    );
    let cpu: Vec<String> = measured
        .thread_cpu
        .iter()
        .filter(|(_, cpu)| !cpu.is_zero())
        .map(|(name, cpu)| format!("{name} {:.2} s", cpu.as_secs_f64()))
        .collect();
    eprintln!("{name}: CPU by thread: {}", cpu.join(", "));
}
