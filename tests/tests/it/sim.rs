//! The actor simulation (seed-sim) over many seeds, crashes enabled: every invariant must hold,
//! the same seed must give the same trace, the exhaustive mode crashes at every crash-point
//! occurrence of three scenarios, and a shrinking pass finds a short failing prefix.
//!
//! `SIM_SEEDS=N` runs seeds 0..N (default 1,000, split over four tests so they run side by
//! side; with `SEED_SOAK=1`, twenty times as many, here and for the in-memory store);
//! `SIM_SEED=S` replays one seed; `SIM_ITERS=N` runs N seeds from a random start, for a soak.
//! `SIM_STEPS`, `SIM_SESSIONS` and `SIM_CRASH_RATE` change the shape of each seed's run (30
//! steps, 3 sessions, 0.08 by default): a soak of longer or busier histories. A seed replays
//! only under the same shape, which a failure prints whole.

#[path = "../../../actors/examples/word_count.rs"]
#[allow(dead_code)]
mod word_count;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;
use seed_actors::{Verb, VerbContext, VerbOutput};
use seed_events::SessionId;
use seed_sim::{self as sim, SimConfig, SimReport, SimVerb, VerbUnderTest};
use serde_json::{Value, json};

/// Seeds run by default, over the four `seeds_*` tests.
const SEEDS_DEFAULT: u64 = 1_000;
const SHARDS: u64 = 4;

/// How many times the default seeds a soak (`SEED_SOAK=1`) runs.
const SOAK_FACTOR: u64 = 20;

/// `default`, or `SOAK_FACTOR` times it under `SEED_SOAK=1`.
fn soaked(default: u64) -> u64 {
    if std::env::var("SEED_SOAK").is_ok_and(|soak| soak == "1") {
        default * SOAK_FACTOR
    } else {
        default
    }
}

fn env(name: &str) -> Option<u64> {
    std::env::var(name)
        .ok()
        .and_then(|value| value.parse::<u64>().ok())
}

/// The crash rate of the default runs.
const CRASH_RATE: f64 = 0.08;

fn config(seed: u64) -> SimConfig {
    let defaults = SimConfig::default();
    SimConfig {
        seed,
        steps: env("SIM_STEPS").map_or(defaults.steps, |steps| steps as usize),
        sessions: env("SIM_SESSIONS").map_or(defaults.sessions, |sessions| sessions as usize),
        crash_rate: std::env::var("SIM_CRASH_RATE")
            .ok()
            .and_then(|rate| rate.parse().ok())
            .unwrap_or(CRASH_RATE),
        ..defaults
    }
}

/// How to replay the run of `config`: its seed and its whole shape, read from the config the
/// run had, so the line replays it whatever the environment said.
fn replay_hint(config: &SimConfig) -> String {
    format!(
        "SIM_SEED={} SIM_STEPS={} SIM_SESSIONS={} SIM_CRASH_RATE={} SIM_DISK_FULL_RATE={}",
        config.seed, config.steps, config.sessions, config.crash_rate, config.disk_full_rate
    )
}

fn assert_clean(report: &SimReport) {
    assert!(
        report.violations.is_empty(),
        "seed {} (replay with {}), first violation after step {:?}: {:#?}",
        report.seed,
        replay_hint(&config(report.seed)),
        report.violation_step,
        report.violations
    );
}

/// Runs this shard's seeds and checks every invariant of each.
fn run_shard(shard: u64) -> anyhow::Result<()> {
    let seeds: Vec<u64> = match (env("SIM_SEED"), env("SIM_ITERS")) {
        (Some(seed), _) if shard == 0 => vec![seed],
        (Some(_), _) => Vec::new(),
        (None, Some(iters)) => {
            let start = fastrand::u64(..u64::MAX / 2) + shard * iters;
            (start..start + iters / SHARDS).collect()
        }
        (None, None) => (0..env("SIM_SEEDS").unwrap_or(soaked(SEEDS_DEFAULT)))
            .filter(|seed| seed % SHARDS == shard)
            .collect(),
    };
    let started = std::time::Instant::now();
    let mut reports = Vec::new();
    for seed in seeds {
        let report = sim::run(&config(seed))?;
        if !report.violations.is_empty() {
            // The shortest failing prefix, for the report.
            if let Ok(Some((shrunk, _))) = sim::shrink(&config(seed)) {
                eprintln!(
                    "seed {seed} fails within its first {} steps (seed_sim::shrink; replay with \
                     {})",
                    shrunk.steps,
                    replay_hint(&shrunk)
                );
            }
        }
        assert_clean(&report);
        reports.push(report);
    }
    let elapsed = started.elapsed().as_secs_f64();
    let steps: usize = reports.iter().map(|report| report.steps).sum();
    eprintln!(
        "{} ({:.1} seeds/s, {:.0} steps/s)",
        sim::summary(&reports),
        reports.len() as f64 / elapsed,
        steps as f64 / elapsed
    );
    // Unless a soak asked for none (`SIM_CRASH_RATE=0`), crashes were injected, and over
    // many seeds every crash point fires somewhere.
    let crashing = config(0).crash_rate > 0.0;
    let crashes: usize = reports.iter().map(|report| report.crashes).sum();
    assert!(
        !crashing || reports.len() < 8 || crashes > 0,
        "no crash was injected"
    );
    if crashing && env("SIM_SEED").is_none() && reports.len() >= 200 {
        let fired: std::collections::BTreeSet<&str> = reports
            .iter()
            .flat_map(|report| report.points_fired.keys().copied())
            .collect();
        let missing: Vec<&str> = seed_actors::crash::points::ALL
            .iter()
            .copied()
            .filter(|point| !fired.contains(point))
            .collect();
        assert!(missing.is_empty(), "crash points never fired: {missing:?}");
    }
    Ok(())
}

#[test]
fn seeds_0_keep_every_invariant() -> anyhow::Result<()> {
    run_shard(0)
}

#[test]
fn seeds_1_keep_every_invariant() -> anyhow::Result<()> {
    run_shard(1)
}

#[test]
fn seeds_2_keep_every_invariant() -> anyhow::Result<()> {
    run_shard(2)
}

#[test]
fn seeds_3_keep_every_invariant() -> anyhow::Result<()> {
    run_shard(3)
}

/// Seeds a soak (`SEED_SOAK=1`) found failing, kept in the default run once fixed: 2182 (the
/// model's depth stuck at 0 in a successor whose input was a wake-up block), 14042 (an older
/// run of the session claimed before the run whose approved call waited, which aborted that
/// turn: the call never ran, and the run started a new turn under the same request id, whose
/// ended tasks the kept state held) and 2351 (an approved call whose run a full disk failed
/// first: the approvals invariant allows it).
const FOUND_BY_SOAKS: [u64; 3] = [2182, 14042, 2351];

#[test]
fn seeds_soaks_found_keep_every_invariant() -> anyhow::Result<()> {
    for seed in FOUND_BY_SOAKS {
        assert_clean(&sim::run(&config(seed))?);
    }
    Ok(())
}

/// The store's second mode: an in-memory database that outlives each simulated process, with
/// crashes and disk-full faults as in the first.
#[test]
fn seeds_over_the_in_memory_store_keep_every_invariant() -> anyhow::Result<()> {
    let mut reports = Vec::new();
    for seed in 0..env("SIM_MEMORY_SEEDS").unwrap_or(soaked(100)) {
        let report = sim::run(&SimConfig {
            memory: true,
            ..config(seed)
        })?;
        assert_clean(&report);
        reports.push(report);
    }
    eprintln!("in memory: {}", sim::summary(&reports));
    assert!(reports.iter().map(|report| report.crashes).sum::<usize>() > 0);
    Ok(())
}

/// The same seed gives the same trace hash: 50 seeds, each run twice.
#[test]
fn the_same_seed_gives_the_same_trace() -> anyhow::Result<()> {
    let mut hashes = std::collections::BTreeSet::new();
    for seed in 0..env("SIM_DETERMINISM_SEEDS").unwrap_or(50) {
        let first = sim::run(&config(seed))?;
        let second = sim::run(&config(seed))?;
        assert_eq!(
            (first.trace_hash, first.crashes, first.requests),
            (second.trace_hash, second.crashes, second.requests),
            "seed {seed} ran differently twice"
        );
        hashes.insert(first.trace_hash);
    }
    assert!(
        hashes.len() > 1,
        "every seed gave the same trace: the hash sees nothing"
    );
    Ok(())
}

/// The exhaustive mode over three small scenarios: every crash-point occurrence is crashed at
/// once, and every invariant holds after each.
#[test]
fn exhaustive_crashes_at_every_point_of_three_scenarios() -> anyhow::Result<()> {
    for (seed, sessions, steps) in [(11, 2, 8), (12, 2, 10), (15, 3, 10)] {
        let scenario = SimConfig {
            seed,
            sessions,
            steps,
            ..SimConfig::default()
        };
        let (dry, reports) = sim::exhaustive(&scenario)?;
        assert_clean(&dry);
        assert!(
            dry.crash_point_hits >= 5,
            "scenario {seed}: only {} crash-point occurrences",
            dry.crash_point_hits
        );
        assert_eq!(reports.len(), dry.crash_point_hits);
        for report in &reports {
            assert_clean(report);
            assert_eq!(report.crashes, 1, "seed {seed}: exactly the one crash");
        }
        eprintln!(
            "scenario {seed}: {} crash points, {}",
            dry.crash_point_hits,
            sim::summary(&reports)
        );
    }
    Ok(())
}

/// The example verb crate's verb (`actors/examples/word_count.rs`) runs under the simulation,
/// with crashes and faults, and every invariant holds.
#[test]
fn the_example_verb_runs_under_the_simulation() -> anyhow::Result<()> {
    let example = SimVerb::new(
        || VerbUnderTest {
            verb: Arc::new(word_count::WordCount),
            invariant: None,
        },
        |n| match n % 5 {
            0 => json!({"txet": "a typo"}),
            1 => json!({"text": 7}),
            _ => json!({"text": "one two three ".repeat((n % 4) as usize + 1)}),
        },
    );
    let mut reports = Vec::new();
    for seed in 0..20 {
        let report = sim::run(&SimConfig {
            verbs: vec![example.clone()],
            ..config(seed)
        })?;
        assert_clean(&report);
        reports.push(report);
    }
    let calls: usize = reports
        .iter()
        .filter_map(|report| report.verb_calls.get("word_count"))
        .sum();
    eprintln!("word_count: {calls} calls; {}", sim::summary(&reports));
    assert!(
        calls > 0,
        "the simulated model never called the example verb"
    );
    Ok(())
}

/// The OS threads of this process now.
fn n_threads() -> usize {
    std::fs::read_dir("/proc/self/task").map_or(0, |tasks| tasks.count())
}

/// A verb that notes the most OS threads the process had while the simulation called it.
struct CountsThreads {
    most: Arc<std::sync::atomic::AtomicUsize>,
}

impl Verb for CountsThreads {
    fn name(&self) -> &'static str {
        "threads"
    }
    fn description(&self) -> &'static str {
        "Notes how many threads the process runs. (For the simulation's tests.)"
    }
    fn parameters(&self) -> Value {
        json!({"type": "object"})
    }
    fn safe_to_repeat(&self) -> bool {
        true
    }
    fn call(&self, _: VerbContext, _: Value) -> BoxFuture<'static, VerbOutput> {
        self.most
            .fetch_max(n_threads(), std::sync::atomic::Ordering::SeqCst);
        Box::pin(async { VerbOutput::ok("counted") })
    }
}

/// Set in the child process that runs the thread count alone.
const THREADS_CHILD: &str = "SEED_SIM_THREADS_CHILD";

/// A simulated process runs on the caller's thread alone: no store writer or readers, no
/// runtime workers, no timer threads, while turns run and verbs are called.
///
/// The count is the whole process's, so the check runs in a child process (this test binary,
/// running only this test): under `cargo test` the other suites of the binary run beside it
/// and start threads of their own.
#[test]
fn a_simulated_process_runs_on_the_callers_thread_alone() -> anyhow::Result<()> {
    if std::env::var_os(THREADS_CHILD).is_none() {
        let status = std::process::Command::new(std::env::current_exe()?)
            .args([
                "--exact",
                "sim::a_simulated_process_runs_on_the_callers_thread_alone",
                "--nocapture",
                "--test-threads",
                "1",
            ])
            .env(THREADS_CHILD, "1")
            .status()?;
        anyhow::ensure!(
            status.success(),
            "the child's thread count failed: {status}"
        );
        return Ok(());
    }
    let before = n_threads();
    assert!(before > 0, "/proc/self/task is readable");
    let most = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = Arc::clone(&most);
    let verb = SimVerb::new(
        move || VerbUnderTest {
            verb: Arc::new(CountsThreads {
                most: Arc::clone(&counted),
            }),
            invariant: None,
        },
        |_| json!({}),
    );
    for seed in 0..10 {
        let report = sim::run(&SimConfig {
            verbs: vec![verb.clone()],
            ..config(seed)
        })?;
        assert_clean(&report);
    }
    let most = most.load(std::sync::atomic::Ordering::SeqCst);
    assert!(most > 0, "the model never called the verb");
    assert_eq!(most, before, "threads while simulating, against before");
    Ok(())
}

/// A user's verb with a bug: it charges an order, and says it is safe to repeat, which it is
/// not. A call cut off by a crash runs again after recovery and charges twice; the verb's own
/// invariant ("no order charged twice") catches it.
struct Charge {
    charges: Arc<Mutex<HashMap<(SessionId, String), usize>>>,
    claims_safe_to_repeat: bool,
}

impl Verb for Charge {
    fn name(&self) -> &'static str {
        "charge"
    }
    fn description(&self) -> &'static str {
        "Charges an order. (A verb of a user's own, for the simulation's tests.)"
    }
    fn parameters(&self) -> Value {
        json!({"type": "object", "properties": {"cents": {"type": "integer"}}, "required": ["cents"]})
    }
    fn safe_to_repeat(&self) -> bool {
        self.claims_safe_to_repeat
    }
    fn call(&self, context: VerbContext, arguments: Value) -> BoxFuture<'static, VerbOutput> {
        let Some(cents) = arguments["cents"].as_u64() else {
            return Box::pin(async { VerbOutput::error("charge: `cents` must be an integer") });
        };
        let charges = Arc::clone(&self.charges);
        Box::pin(async move {
            if let Ok(mut charges) = charges.lock() {
                *charges
                    .entry((context.session_id, context.tool_call_id.clone()))
                    .or_default() += 1;
            }
            // The payment service takes a moment (virtual time).
            actix::clock::sleep(std::time::Duration::from_millis(3)).await;
            VerbOutput::ok(format!("charged {cents} cents"))
        })
    }
}

fn charge_verb(claims_safe_to_repeat: bool) -> SimVerb {
    let make = move || {
        let charges: Arc<Mutex<HashMap<(SessionId, String), usize>>> = Arc::default();
        let verb = Arc::new(Charge {
            charges: Arc::clone(&charges),
            claims_safe_to_repeat,
        });
        let invariant = move || {
            let charges = charges
                .lock()
                .map(|charges| charges.clone())
                .unwrap_or_default();
            charges
                .into_iter()
                .filter(|(_, n)| *n > 1)
                .map(|((session, call), n)| format!("{session}: call {call} charged {n} times"))
                .collect()
        };
        VerbUnderTest {
            verb,
            invariant: Some(Box::new(invariant)),
        }
    };
    SimVerb::new(make, |n| {
        if n % 7 == 0 {
            json!({"cents": "twelve"})
        } else {
            json!({"cents": n % 1000})
        }
    })
}

/// A user's own verb runs under the simulation with every invariant (its own too) checked; a
/// verb that wrongly claims to be safe to repeat is caught, named with its seed and step, and
/// the failure shrinks to a shorter prefix.
#[test]
fn a_users_verb_runs_under_the_simulation_and_a_failure_shrinks() -> anyhow::Result<()> {
    for seed in 0..20 {
        let report = sim::run(&SimConfig {
            verbs: vec![charge_verb(false)],
            crash_rate: 0.2,
            ..config(seed)
        })?;
        assert_clean(&report);
    }

    let failing = (0..200)
        .map(|seed| SimConfig {
            verbs: vec![charge_verb(true)],
            crash_rate: 0.2,
            ..config(seed)
        })
        .find(|config| sim::run(config).is_ok_and(|report| !report.violations.is_empty()))
        .expect("some seed charges twice");
    let (shrunk, report) = sim::shrink(&failing)?.expect("the failing run fails again");
    assert!(
        report
            .violations
            .iter()
            .any(|violation| violation.contains("charged")),
        "{:#?}",
        report.violations
    );
    assert!(
        shrunk.steps <= report.violation_step.unwrap_or(failing.steps),
        "the shrunk run ({} steps) fails no later than it was seen to",
        shrunk.steps
    );
    assert!(shrunk.steps > 0, "no charge happens without a message");
    eprintln!(
        "seed {} fails within {} steps (first seen after step {:?}); shrunk to {} steps",
        failing.seed, failing.steps, report.violation_step, shrunk.steps
    );
    Ok(())
}
