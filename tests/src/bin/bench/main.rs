//! The bench harness: `cargo run --release -p seed-tests --bin bench -- SUITE [FILTER]`.
//! With FILTER, only the rows whose name contains it run (`=NAME`: only that row); the floors
//! always run.
//!
//! Every suite that touches SQLite measures the raw SQLite floor in the same run (the store's
//! pragmas, one `INSERT` + `COMMIT` per step with rusqlite directly) and reports each row as a
//! ratio against it, because absolute figures move by several times with the disk's mood
//! (`projections` touches no disk: see below). Each suite prints a table
//! and writes `target/bench/SUITE.json`: a list of `{name, value, unit, floor, ratio}`.
//!
//! Suites: `store` (commits through the store's writer, and the ceiling of group commit),
//! `harness` (steps of a scripted turn loop through the durable harness, in memory and over
//! the store), `projections` (assembling a request and importing pending events, pure and in
//! memory), `runtime` (the agent loop through the whole runtime) and `providers` (decoding
//! both wire protocols, and the latency of a delta from socket to event). `SEED_BENCH_VERBOSE=1`
//! prints what each measurement saw.
//!
//! Each suite is a module of this binary (`store` holds the `store` and `harness` suites; the
//! `continuation` suite is `seed_tests::continuation_bench`); this file keeps the suite list,
//! `main` and the helpers the suites share (floors, best-of rounds, scratch databases).
//!
//! The `service` suite starts the release `seed serve` (built beside the bench if missing) and
//! drives it over loopback HTTP from this process (`seed_tests::service_bench`): 1, 32 and 256
//! clients, each in its own session, send signed messages with `wait` one after another for
//! 5 seconds (`SEED_BENCH_SERVICE_SECONDS=N` for a longer soak). `service N clients` is
//! messages/s against the raw floor of the same run (a message is two steps, its input and its
//! answer, each committed); `… p50` and `… p99` are a message's latency in ms, figures with no ratio.
//! Two rows at 256 clients bound a message from below: `service 256 clients signed reads`
//! (each client `GET`s its session, signed: the signature checked, the session read, the nonce
//! committed; no turn) and `service 256 clients health` (unsigned `/healthz`: the HTTP of both
//! ends alone), in requests/s. `SEED_BENCH_VERBOSE=1` adds the CPU time each thread of the
//! service and of this client spent a request. `service delta latency 1 session` and `… 256
//! sessions` (p50 and p99, in ms) time a text delta from the model's socket (an
//! OpenAI-compatible server in this process, 50 deltas a second to each session) to a
//! WebSocket subscriber: a delta is sent once the store holds it, so the live interval (100 ms)
//! bounds it from above.
//!
//! The `projections` suite touches no disk, so it has no SQLite floor: for it the `floor`
//! column is the smallest case and the ratio is growth against it, not against SQLite. The
//! request rows time `request_messages(conversation(entries), input, blocks)` (µs per request,
//! blocks rendered beforehand) over sessions of 100, 10,000 and 100,000 entries shaped like
//! real ones (`seed_tests::projections_bench`): turns of input, a call, its result and an
//! answer, with a `pi.reset` at least every 200 entries, the newest one 100 entries from the
//! end, so every one of them sends the same 100-entry context as the whole 100-entry session.
//! Their floor is the 100-entry request, which always runs: a ratio near 1 says a turn's cost
//! follows the context since the newest reset, not the history. `projections request 10000 no
//! reset` (the whole history is the context) shows the contrast. `projections import 1000`
//! times `plan_import` of 1,000 pending events (user messages, notices, assistant text) on top
//! of a 10,000-event history (µs per import), a figure with no ratio.
//!
//! The `runtime` suite drives the agent-loop workload of `seed_tests::runtime_bench` (a turn is
//! a user message, a response with two tool calls, two tool results and an answer: five steps,
//! each committed before the next; the model and the verb answer at once) through
//! `Runtime::send_message` and `wait_for_run`, on a fresh database per round. `runtime 1
//! session`, `runtime 100 sessions` and `runtime 1000 sessions` are steps/s with that many
//! sessions looping concurrently, against the raw floor (`floor normal`) of the same run;
//! `runtime 100 sessions traced` (`traced.rs`) is the 100 sessions with every span exported
//! over OTLP/HTTP to a local receiver, against `runtime 100 sessions untraced`, the same
//! workload with the service's log subscriber alone: each round of the two runs in a fresh
//! process, in alternation.
//! `runtime 100 sessions full` is the 100 sessions with every commit synced (`seed serve
//! --synchronous full`), against the raw floor of synced commits (`floor full`). `runtime cpu
//! per step` is the process's CPU (all its threads, from `/proc/self/task`) per step of the 100
//! sessions' workload, in µs, the least of the rounds.
//! `runtime 256 sessions answer only` is the `service` suite's workload without the API: 256
//! sessions whose turns are a message and its answer (two steps); a `service 256 clients`
//! figure times two, over it, is the share of the runtime's rate the API keeps. The
//! memory rows are resident memory (VmRSS) per session, in KiB: `runtime idle 100000
//! sessions` grown by storing 100,000 sessions with a message each and starting a runtime over
//! them, `runtime active 1000 sessions` grown while 1,000 sessions each have a turn in flight.
//! They have no reference measured in the same run, so they print no ratio (a row's ratio is
//! only ever against one); the table rounds to whole KiB, and the precise figures go to stderr. `runtime boot sweep
//! 10000` times the boot sweep over 10,000 runs a dead boot left `running` with their leases
//! held, in ms, against a budget of 2,000 ms that the figure is read against, not divided by.
//!
//! `floor postgres 1 connection` and `floor postgres 8 connections` (`postgres.rs`) are raw
//! PostgreSQL floors: one autocommitted insert a transaction, on `SEED_BENCH_DATABASE_URL` or a
//! throwaway cluster with every commit synced; they run in the `runtime` suite when the filter
//! selects one of them or that URL is set. `runtime 100 sessions postgres` is the `runtime 100
//! sessions` workload with the store on that PostgreSQL (one node), against the one-connection
//! floor; CPU per step of Seed and of PostgreSQL go to stderr. `SEED_BENCH_WRITER_LANES=N` sets
//! the writer's lanes on PostgreSQL (the store's default otherwise).
//!
//! The `mcp` suite (`mcp.rs`, `seed_tests::mcp_bench`) calls server-everything's `echo` over
//! stdio through the whole runtime (installed by scripts/mcp-servers.sh when missing): `mcp call
//! p50`/`p99` (ms, one session), `mcp calls 64 sessions` (calls/s) and `runtime 64 sessions mcp
//! tool` (steps/s) against `runtime 64 sessions scripted tool`, the same turns with a verb of the
//! process, measured in the same run.
//!
//! The `continuation` suite (`seed_tests::continuation_bench`) times compiling a successor's
//! projection over transcripts of 1k, 100k and 1M events with the same cited ranges (µs; the
//! floor is the 1k case, so the ratio is growth with the transcript) and a whole continuation
//! from the verb call to the successor's run queued (µs; the floor is one raw commit in µs).
//!
//! The `providers` suite touches no disk either: its floors are the targets.
//! `providers parse openai` and `providers parse anthropic` decode a recorded-shape stream of
//! 8 MiB (text deltas of a few words each, reasoning, four tool calls with fragmented
//! arguments, usage) from memory, in pieces of 4 KiB as a socket hands them over, through the
//! path a response takes (eventsource-stream, then the wire's decoder), in MB/s (best of 5),
//! read against a target of 100 MB/s (a figure: no ratio). `providers delta latency openai` and
//! `providers delta latency anthropic` stream 500 text deltas, 2 ms apart, from a loopback
//! server that writes each delta's send time into it, through the whole provider (reqwest,
//! SSE, decoder) and report the median time from the write to the `StreamEvent` the harness
//! reads, in µs (loopback transit included; the p99 goes to stderr), read against a target of
//! 1,000 µs (a figure: no ratio). `anthropic cache: uncached bytes per request, 50 turns,
//! before` and `…, after` run a 50-turn session (four `read` calls per turn, the busy turn's
//! blocks) through the durable harness, build each request's Anthropic body, and bill it
//! against a prompt cache played as the wire does (`providers_bench::PromptCache`): the mean
//! bytes per request of the 50th turn not read from the cache, with the marks on the system
//! prompt and the last tool only (before) and with the conversation's marks too (after; it must
//! stay within the bytes from the previous turn's input on, or the suite fails).

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, bail};
use seed_store::{BatchMode, Config, Synchronous, floor};
use seed_tests::bench::write_report;

mod mcp;
mod postgres;
mod projections;
mod providers;
mod runtime;
mod service;
mod store;
mod traced;

const SUITES: [&str; 8] = [
    "store",
    "harness",
    "projections",
    "runtime",
    "continuation",
    "providers",
    "service",
    "mcp",
];

/// The allocator the `seed` binary runs with (server/src/main.rs), so the figures are the
/// service's.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> anyhow::Result<()> {
    let suite = std::env::args().nth(1).unwrap_or_default();
    let filter = std::env::args().nth(2).unwrap_or_default();
    if suite == runtime::MEMORY_CHILD {
        return runtime::memory_child(&filter);
    }
    if suite == traced::TRACED_CHILD {
        let mut config = config(&scratch_dir()?, Synchronous::Normal, BatchMode::Optimistic);
        // A database of its own, so a child never races the parent's files.
        config.path = scratch_dir()?.join("runtime-traced.db");
        let verbose = std::env::var_os("SEED_BENCH_VERBOSE").is_some();
        return traced::child(&config, &filter, verbose);
    }
    if suite == postgres::NODE_CHILD {
        return postgres::node_child();
    }
    let rows = match suite.as_str() {
        "store" => store::suite(&filter)?,
        "harness" => store::harness_suite(&filter)?,
        "projections" => projections::suite(&filter)?,
        "runtime" => runtime::suite(&filter)?,
        "continuation" => seed_tests::continuation_bench::suite(&scratch_dir()?, &filter)?,
        "providers" => providers::suite(&filter)?,
        "service" => service::suite(&filter)?,
        "mcp" => mcp::suite(&filter)?,
        _ => bail!("usage: bench SUITE, where SUITE is one of {SUITES:?}"),
    };
    let path = write_report(&suite, &rows)?;
    println!("{}", seed_tests::bench::table(&rows));
    println!("wrote {}", path.display());
    Ok(())
}

/// How many times each measurement is repeated; the best of them counts, for the floor and
/// the store alike, taken in alternation so both see the same moments of the disk.
pub(crate) const ROUNDS: usize = 5;

pub(crate) fn selected(name: &str, filter: &str) -> bool {
    match filter.strip_prefix('=') {
        Some(exact) => name == exact,
        None => name.contains(filter),
    }
}

pub(crate) fn best_of(measure: impl FnMut() -> anyhow::Result<f64>) -> anyhow::Result<f64> {
    best_of_n(ROUNDS, measure)
}

pub(crate) fn best_of_n(
    rounds: usize,
    mut measure: impl FnMut() -> anyhow::Result<f64>,
) -> anyhow::Result<f64> {
    let mut best = 0.0_f64;
    for _ in 0..rounds {
        best = best.max(measure()?);
    }
    Ok(best)
}

/// The database files live under target/, on the disk the store would use, not in a tmpfs.
pub(crate) fn scratch_dir() -> anyhow::Result<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/bench/scratch");
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    Ok(dir)
}

pub(crate) fn config(scratch: &Path, synchronous: Synchronous, batch_mode: BatchMode) -> Config {
    let mut config = Config::new(scratch.join("bench.db"));
    config.synchronous = synchronous;
    config.batch_mode = batch_mode;
    config
}

pub(crate) fn remove_database(path: &Path) -> anyhow::Result<()> {
    for suffix in ["", "-wal", "-shm"] {
        let mut file = path.as_os_str().to_owned();
        file.push(suffix);
        match std::fs::remove_file(&file) {
            Err(error) if error.kind() != std::io::ErrorKind::NotFound => {
                return Err(error).with_context(|| format!("removing {file:?}"));
            }
            _ => {}
        }
    }
    Ok(())
}

pub(crate) fn per_second(n_commits: usize, elapsed: Duration) -> f64 {
    n_commits as f64 / elapsed.as_secs_f64()
}

pub(crate) fn floor_rate(config: &Config, n_commits: usize) -> anyhow::Result<f64> {
    remove_database(&config.path)?;
    let elapsed = floor::measure_commits(config, n_commits)?;
    Ok(per_second(n_commits, elapsed))
}
