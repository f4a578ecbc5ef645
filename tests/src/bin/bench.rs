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
//! sessions looping concurrently, against the raw floor (`floor normal`) of the same run.
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

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use futures::executor::LocalPool;
use futures::task::LocalSpawnExt;
use seed_durable::context::{MessageCache, block_messages, conversation_cached, request_messages};
use seed_durable::{Append, DurableFs, FileName, MemoryFs};
use seed_events::{AccountId, SessionId};
use seed_projections::import::{ImportMode, RunView, plan_import};
use seed_store::{BatchMode, Config, NewSession, Store, Synchronous, floor};
use seed_tests::bench::{Row, write_report};
use seed_tests::projections_bench;
use seed_tests::providers_bench;
use seed_tests::runtime_bench::{self, TurnShape};
use seed_tests::service_bench::Load;
use seed_tests::turn_loop::{self, CommitStats, TURNS_PER_SESSION, TimedFs};

const SUITES: [&str; 7] = [
    "store",
    "harness",
    "projections",
    "runtime",
    "continuation",
    "providers",
    "service",
];

/// The allocator the `seed` binary runs with (server/src/main.rs), so the figures are the
/// service's.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> anyhow::Result<()> {
    let suite = std::env::args().nth(1).unwrap_or_default();
    let filter = std::env::args().nth(2).unwrap_or_default();
    if suite == MEMORY_CHILD {
        return memory_child(&filter);
    }
    let rows = match suite.as_str() {
        "store" => store_suite(&filter)?,
        "harness" => harness_suite(&filter)?,
        "projections" => projections_suite(&filter)?,
        "runtime" => runtime_suite(&filter)?,
        "continuation" => seed_tests::continuation_bench::suite(&scratch_dir()?, &filter)?,
        "providers" => providers_suite(&filter)?,
        "service" => service_suite(&filter)?,
        _ => bail!("usage: bench SUITE, where SUITE is one of {SUITES:?}"),
    };
    let path = write_report(&suite, &rows)?;
    println!("{}", seed_tests::bench::table(&rows));
    println!("wrote {}", path.display());
    Ok(())
}

fn providers_suite(filter: &str) -> anyhow::Result<Vec<Row>> {
    use seed_providers::ProviderKind;
    const STREAM_BYTES: usize = 8 << 20;
    let verbose = std::env::var_os("SEED_BENCH_VERBOSE").is_some();
    let mut rows = Vec::new();
    for (kind, name) in [
        (ProviderKind::Openai, "openai"),
        (ProviderKind::Anthropic, "anthropic"),
    ] {
        let row = format!("providers parse {name}");
        if selected(&row, filter) {
            let sse = providers_bench::recorded_stream(kind, STREAM_BYTES);
            let rate = best_of(|| {
                let (elapsed, n_deltas) = providers_bench::decode_once(kind, &sse)?;
                let rate = sse.len() as f64 / 1e6 / elapsed.as_secs_f64();
                if verbose {
                    eprintln!("{row}: {} bytes, {n_deltas} deltas, {elapsed:?}", sse.len());
                }
                Ok(rate)
            })?;
            rows.push(Row::figure(&row, rate, "MB/s"));
        }
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    for (kind, name) in [
        (ProviderKind::Openai, "openai"),
        (ProviderKind::Anthropic, "anthropic"),
    ] {
        let row = format!("providers delta latency {name}");
        if selected(&row, filter) {
            let latencies = runtime.block_on(providers_bench::delta_latencies(
                kind,
                500,
                Duration::from_millis(2),
            ))?;
            let at = |quantile: f64| {
                latencies[((latencies.len() - 1) as f64 * quantile).round() as usize] as f64
            };
            eprintln!(
                "{row}: median {:.0} us, p99 {:.0} us, max {:.0} us over {} deltas",
                at(0.5),
                at(0.99),
                at(1.0),
                latencies.len()
            );
            rows.push(Row::figure(&row, at(0.5), "us"));
        }
    }
    const CACHE_TURNS: usize = 50;
    let row = format!("anthropic cache: uncached bytes per request, {CACHE_TURNS} turns");
    if selected(&row, filter) {
        let figures = providers_bench::cache_figures(CACHE_TURNS)?;
        eprintln!(
            "{row}: over the {} requests of turn {CACHE_TURNS}: prompt {:.0} bytes, {:.0} of \
             them from the previous turn's input on; uncached before {:.0}, after {:.0}",
            figures.n_requests,
            figures.prompt,
            figures.new_turn_and_blocks,
            figures.before,
            figures.after,
        );
        rows.push(Row::figure(
            &format!("{row}, before"),
            figures.before,
            "bytes",
        ));
        rows.push(Row::figure(
            &format!("{row}, after"),
            figures.after,
            "bytes",
        ));
    }
    Ok(rows)
}

/// How many times each measurement is repeated; the best of them counts, for the floor and
/// the store alike, taken in alternation so both see the same moments of the disk.
const ROUNDS: usize = 5;

fn store_suite(filter: &str) -> anyhow::Result<Vec<Row>> {
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
fn harness_suite(filter: &str) -> anyhow::Result<Vec<Row>> {
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

/// The rows of the `service` suite: concurrent clients and what each sends. Messages at three
/// levels, then the two lighter loads at the highest, which bound a message from below.
const SERVICE_CASES: [(&str, usize, Load, &str); 5] = [
    ("service 1 clients", 1, Load::Messages, "messages/s"),
    ("service 32 clients", 32, Load::Messages, "messages/s"),
    ("service 256 clients", 256, Load::Messages, "messages/s"),
    (
        "service 256 clients signed reads",
        256,
        Load::SignedReads,
        "requests/s",
    ),
    (
        "service 256 clients health",
        256,
        Load::Health,
        "requests/s",
    ),
];
/// How long each row runs unless `SEED_BENCH_SERVICE_SECONDS` says.
const SERVICE_DURATION: Duration = Duration::from_secs(5);

fn service_duration() -> anyhow::Result<Duration> {
    match std::env::var("SEED_BENCH_SERVICE_SECONDS") {
        Ok(seconds) => match seconds.parse::<u64>() {
            Ok(seconds) if seconds > 0 => Ok(Duration::from_secs(seconds)),
            _ => bail!("SEED_BENCH_SERVICE_SECONDS must be a whole number of seconds above 0"),
        },
        Err(_) => Ok(SERVICE_DURATION),
    }
}

/// Messages through a real `seed serve` over loopback HTTP; see the module docs.
fn service_suite(filter: &str) -> anyhow::Result<Vec<Row>> {
    use seed_tests::service_bench;
    let duration = service_duration()?;
    let verbose = std::env::var_os("SEED_BENCH_VERBOSE").is_some();
    let scratch = scratch_dir()?;
    let normal = config(&scratch, Synchronous::Normal, BatchMode::Optimistic);
    let mut rows = Vec::new();
    let floor_normal = best_of_n(3, || floor_rate(&normal, 20_000))?;
    rows.push(Row::floor("floor normal", floor_normal));
    let seed = service_bench::seed_binary()?;
    for (name, n_clients, load, unit) in SERVICE_CASES {
        if !selected(name, filter) {
            continue;
        }
        let service = service_bench::start(&seed, &scratch)?;
        let measured = service_bench::measure(&service, n_clients, duration, load)?;
        drop(service);
        eprintln!(
            "{name}: {} requests in {:?}, p50 {:?}, p99 {:?}",
            measured.n_requests, measured.elapsed, measured.p50, measured.p99
        );
        if verbose {
            let (threads, total) = measured.cpu_per_request();
            let threads: Vec<String> = threads
                .iter()
                .map(|(thread, us)| format!("{thread} {us:.0}"))
                .collect();
            eprintln!(
                "{name}: CPU µs a request, by thread: {} (in all {total:.0})",
                threads.join(", ")
            );
        }
        rows.push(Row::ratio(name, measured.rate(), unit, floor_normal));
        for (suffix, latency) in [("p50", measured.p50), ("p99", measured.p99)] {
            let ms = latency.as_secs_f64() * 1000.0;
            rows.push(Row::figure(&format!("{name} {suffix}"), ms, "ms"));
        }
    }
    for (name, n_sessions) in SERVICE_DELTA_CASES {
        if !selected(name, filter) {
            continue;
        }
        let latencies = service_bench::delta_latencies(
            &seed,
            &scratch,
            n_sessions,
            SERVICE_DELTAS_PER_RESPONSE,
            SERVICE_DELTA_INTERVAL,
        )?;
        let percentile = |p: f64| {
            let idx = ((latencies.len() as f64 * p) as usize).min(latencies.len() - 1);
            latencies[idx] as f64 / 1000.0
        };
        eprintln!(
            "{name}: {} deltas, min {:.2} ms, p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
            latencies.len(),
            percentile(0.0),
            percentile(0.50),
            percentile(0.99),
            percentile(1.0),
        );
        for (suffix, p) in [("p50", 0.50), ("p99", 0.99)] {
            let ms = percentile(p);
            rows.push(Row::figure(&format!("{name} {suffix}"), ms, "ms"));
        }
    }
    Ok(rows)
}

/// The `service delta latency` rows: a text delta from the model's socket to a WebSocket
/// subscriber, with one session and with 256 streaming at once (p50 and p99, in ms).
const SERVICE_DELTA_CASES: [(&str, usize); 2] = [
    ("service delta latency 1 session", 1),
    ("service delta latency 256 sessions", 256),
];
/// Each response of the delta rows: this many deltas, this far apart (a model streaming 50
/// deltas a second).
const SERVICE_DELTAS_PER_RESPONSE: usize = 50;
const SERVICE_DELTA_INTERVAL: Duration = Duration::from_millis(20);

/// Rounds of each `runtime` measurement (each on a fresh database): this many, or as many as
/// have started within [`RUNTIME_ROUND_BUDGET`], at least one.
const RUNTIME_ROUNDS: usize = 3;
const RUNTIME_ROUND_BUDGET: Duration = Duration::from_secs(15);

/// The agent-loop workload through the whole runtime (`seed_tests::runtime_bench`); see the
/// module docs.
fn runtime_suite(filter: &str) -> anyhow::Result<Vec<Row>> {
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
            Ok(measured.rate())
        })?;
        rows.push(Row::ratio(name, rate, "steps/s", floor_normal));
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
    Ok(rows)
}

const IDLE_MEMORY_ROW: &str = "runtime idle 100000 sessions";
const ACTIVE_MEMORY_ROW: &str = "runtime active 1000 sessions";

/// The hidden suite a memory row runs in: `bench MEMORY_CHILD ROW` measures ROW and prints
/// the measurement as JSON.
const MEMORY_CHILD: &str = "runtime-memory-child";

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
fn memory_child(name: &str) -> anyhow::Result<()> {
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

/// How long each timed loop of the `projections` suite runs; the fastest of [`ROUNDS`] loops
/// counts.
const PROJECTION_LOOP: Duration = Duration::from_millis(200);

/// The context of every request row but `no reset`: the whole of the smallest session, and the
/// entries since the newest reset of the others.
const CONTEXT_ENTRIES: usize = 100;

/// Request assembly over sessions of growing history, and an import; see the module docs.
fn projections_suite(filter: &str) -> anyhow::Result<Vec<Row>> {
    let blocks = block_messages(&projections_bench::turn_blocks());
    let request_micros = |name: &str, n_entries: usize, context_entries: usize| {
        let session = projections_bench::session(n_entries, context_entries);
        // As the harness does: the messages of the context are built once and shared by every
        // request (a warm cache), so a request costs the derivation and a reference each.
        let cache = std::cell::RefCell::new(MessageCache::default());
        let assemble = || {
            let context = conversation_cached(&session.state.entries, &mut cache.borrow_mut());
            request_messages(context, session.input_entry_id, &blocks)
        };
        let n_messages = assemble().len();
        let micros = fastest_of(|| micros_per_call(assemble));
        if std::env::var_os("SEED_BENCH_VERBOSE").is_some() {
            eprintln!(
                "{name}: {n_entries} entries, {} in the context, {n_messages} messages \
                 per request, {micros:.2} us",
                session.context_entries(),
            );
        }
        micros
    };

    let mut rows = Vec::new();
    // The smallest case is this suite's floor: it always runs.
    let smallest = request_micros("projections request 100", 100, CONTEXT_ENTRIES);
    rows.push(Row::ratio(
        "projections request 100",
        smallest,
        "us/request",
        smallest,
    ));
    for (name, n_entries, context_entries) in [
        ("projections request 10000", 10_000, CONTEXT_ENTRIES),
        ("projections request 100000", 100_000, CONTEXT_ENTRIES),
        ("projections request 10000 no reset", 10_000, 10_000),
    ] {
        if selected(name, filter) {
            let micros = request_micros(name, n_entries, context_entries);
            rows.push(Row::ratio(name, micros, "us/request", smallest));
        }
    }

    let name = "projections import 1000";
    if selected(name, filter) {
        let pending = projections_bench::pending_log(10_000, 1_000);
        let waiting = BTreeSet::new();
        let import = || {
            plan_import(
                &pending.log,
                &pending.store,
                &pending.sync,
                RunView {
                    own_event_ids: &pending.own_event_ids,
                    waiting_event_ids: &waiting,
                    attached: &seed_projections::import::NO_FILES,
                },
                false,
            )
        };
        let plan = import();
        if plan.mode != ImportMode::Append || plan.entries.len() != 999 {
            bail!(
                "{name}: expected 999 entries appended, planned {:?} with {}",
                plan.mode,
                plan.entries.len()
            );
        }
        let micros = fastest_of(|| micros_per_call(import));
        if std::env::var_os("SEED_BENCH_VERBOSE").is_some() {
            eprintln!(
                "{name}: {} events in the log, {} entries planned, {micros:.2} us",
                pending.log.len(),
                plan.entries.len()
            );
        }
        rows.push(Row::figure(name, micros, "us/import"));
    }
    Ok(rows)
}

/// The mean time of one `call`, in microseconds, over a loop of [`PROJECTION_LOOP`] (after one
/// call to warm up). What `call` returns is dropped inside the loop: its cost counts.
fn micros_per_call<T>(mut call: impl FnMut() -> T) -> f64 {
    std::hint::black_box(call());
    let started = Instant::now();
    let mut n_calls: u32 = 0;
    while n_calls < 3 || started.elapsed() < PROJECTION_LOOP {
        std::hint::black_box(call());
        n_calls += 1;
    }
    started.elapsed().as_secs_f64() * 1e6 / f64::from(n_calls)
}

/// The smallest of [`ROUNDS`] measurements of a time.
fn fastest_of(mut measure: impl FnMut() -> f64) -> f64 {
    (0..ROUNDS).map(|_| measure()).fold(f64::INFINITY, f64::min)
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

fn selected(name: &str, filter: &str) -> bool {
    match filter.strip_prefix('=') {
        Some(exact) => name == exact,
        None => name.contains(filter),
    }
}

fn best_of(measure: impl FnMut() -> anyhow::Result<f64>) -> anyhow::Result<f64> {
    best_of_n(ROUNDS, measure)
}

/// The best of `rounds` measurements, or of those that started within `budget`.
fn best_within(
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

fn best_of_n(
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
fn scratch_dir() -> anyhow::Result<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/bench/scratch");
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    Ok(dir)
}

fn config(scratch: &Path, synchronous: Synchronous, batch_mode: BatchMode) -> Config {
    let mut config = Config::new(scratch.join("bench.db"));
    config.synchronous = synchronous;
    config.batch_mode = batch_mode;
    config
}

fn remove_database(path: &Path) -> anyhow::Result<()> {
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

fn per_second(n_commits: usize, elapsed: Duration) -> f64 {
    n_commits as f64 / elapsed.as_secs_f64()
}

fn floor_rate(config: &Config, n_commits: usize) -> anyhow::Result<f64> {
    remove_database(&config.path)?;
    let elapsed = floor::measure_commits(config, n_commits)?;
    Ok(per_second(n_commits, elapsed))
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
