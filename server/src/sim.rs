//! `seed sim`: the actor simulation of `seed_sim` over many seeds, with a progress bar, a
//! summary, and for every seed that broke an invariant its violations and how to replay it.

use std::io::IsTerminal as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, mpsc};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use seed_sim::{SimConfig, SimReport};

/// The most seeds one `seed sim` runs.
pub const SEEDS_MAX: u64 = 1_000_000;
/// The most top-level sessions a simulation starts with.
pub const SESSIONS_MAX: u64 = 1_000;
/// The most user actions of one simulation.
pub const STEPS_MAX: u64 = 1_000_000;
/// The most simulations run at once.
pub const JOBS_MAX: u64 = 64;

/// The flags of `seed sim`.
#[derive(Debug, Clone, clap::Args)]
pub struct SimArgs {
    /// How many seeds to run, one simulation each, from --first-seed upwards.
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u64).range(1..=SEEDS_MAX))]
    pub seeds: u64,
    /// The first seed.
    #[arg(long, default_value_t = 0)]
    pub first_seed: u64,
    /// Replays one seed (with the same --sessions, --steps and --crash-rate it ran with).
    #[arg(long, conflicts_with_all = ["seeds", "first_seed"])]
    pub seed: Option<u64>,
    /// Top-level sessions each simulation starts with.
    #[arg(long, default_value_t = SimConfig::default().sessions as u64,
          value_parser = clap::value_parser!(u64).range(1..=SESSIONS_MAX))]
    pub sessions: u64,
    /// User actions (messages, stops, deletes, pauses, crashes) of each simulation.
    #[arg(long, default_value_t = SimConfig::default().steps as u64,
          value_parser = clap::value_parser!(u64).range(0..=STEPS_MAX))]
    pub steps: u64,
    /// The chance of a crash at each step, from 0 to 1 (each seed scales it by 0 to 2).
    #[arg(long, default_value_t = SimConfig::default().crash_rate, value_parser = parse_chance)]
    pub crash_rate: f64,
    /// The chance that a commit fails as on a full disk, from 0 to 1 (each seed scales it, and
    /// turns it off for half the seeds).
    #[arg(long, default_value_t = SimConfig::default().disk_full_rate, value_parser = parse_chance)]
    pub disk_full_rate: f64,
    /// Runs the store on an in-memory database that outlives each simulated process, instead of
    /// a file.
    #[arg(long)]
    pub memory: bool,
    /// Simulations run at once, each on a thread of its own with its own SQLite file (default:
    /// the number of cores).
    #[arg(long, default_value_t = default_jobs(),
          value_parser = clap::value_parser!(u64).range(1..=JOBS_MAX))]
    pub jobs: u64,
    /// On a violation, shrinks the first failing seed to the fewest steps that still fail.
    #[arg(long)]
    pub shrink: bool,
}

/// One simulation per core: a simulation is one thread, and waits on its SQLite file often.
fn default_jobs() -> u64 {
    std::thread::available_parallelism().map_or(1, |n| (n.get() as u64).min(JOBS_MAX))
}

fn parse_chance(text: &str) -> Result<f64, String> {
    let rate: f64 = text
        .trim()
        .parse()
        .map_err(|_| format!("`{text}` is not a number"))?;
    if !(0.0..=1.0).contains(&rate) {
        return Err(format!("{rate} is not a chance: it must be from 0 to 1"));
    }
    Ok(rate)
}

impl SimArgs {
    /// The seeds to run, in order.
    fn seed_range(&self) -> anyhow::Result<(u64, u64)> {
        let (first, n) = match self.seed {
            Some(seed) => (seed, 1),
            None => (self.first_seed, self.seeds),
        };
        first.checked_add(n - 1).with_context(|| {
            format!("--first-seed {first} with --seeds {n} runs past the largest seed")
        })?;
        Ok((first, n))
    }

    fn config(&self, seed: u64) -> SimConfig {
        SimConfig {
            seed,
            sessions: self.sessions as usize,
            steps: self.steps as usize,
            crash_rate: self.crash_rate,
            disk_full_rate: self.disk_full_rate,
            memory: self.memory,
            ..SimConfig::default()
        }
    }

    /// The command that replays `seed` as it ran here.
    fn replay_command(&self, seed: u64) -> String {
        let defaults = SimConfig::default();
        let mut command = format!("seed sim --seed {seed}");
        if self.sessions != defaults.sessions as u64 {
            command.push_str(&format!(" --sessions {}", self.sessions));
        }
        if self.steps != defaults.steps as u64 {
            command.push_str(&format!(" --steps {}", self.steps));
        }
        if self.crash_rate != defaults.crash_rate {
            command.push_str(&format!(" --crash-rate {}", self.crash_rate));
        }
        if self.disk_full_rate != defaults.disk_full_rate {
            command.push_str(&format!(" --disk-full-rate {}", self.disk_full_rate));
        }
        if self.memory {
            command.push_str(" --memory");
        }
        command
    }
}

/// One seed's outcome: its report, or why the simulation itself could not run.
type SeedOutcome = (u64, Result<SimReport, String>);

/// Runs `seed sim`. Fails when any seed broke an invariant or could not run.
pub fn run(args: &SimArgs) -> anyhow::Result<()> {
    let (first, n) = args.seed_range()?;
    let progress = progress_bar(n);
    let started = Instant::now();
    let outcomes = run_seeds(args, first, n, &progress);
    progress.finish_and_clear();
    let (text, n_failed) = describe(args, &outcomes, started.elapsed());
    print!("{text}");
    let first_failing = outcomes.iter().find_map(|(seed, outcome)| {
        outcome
            .as_ref()
            .is_ok_and(|report| !report.violations.is_empty())
            .then_some(*seed)
    });
    if args.shrink
        && let Some(seed) = first_failing
    {
        println!("shrinking seed {seed} …");
        match seed_sim::shrink(&args.config(seed))? {
            Some((smallest, report)) => {
                let shrunk = SimArgs {
                    steps: smallest.steps as u64,
                    ..args.clone()
                };
                println!(
                    "seed {seed} fails within {} steps ({} violations): {}",
                    smallest.steps,
                    report.violations.len(),
                    shrunk.replay_command(seed)
                );
            }
            None => println!("seed {seed} passed when run again: no schedule to shrink"),
        }
    }
    if n_failed > 0 {
        anyhow::bail!("{n_failed} of {n} seeds failed");
    }
    Ok(())
}

/// A bar on stderr when it is a terminal; hidden otherwise.
fn progress_bar(n: u64) -> ProgressBar {
    let target = if std::io::stderr().is_terminal() {
        ProgressDrawTarget::stderr()
    } else {
        ProgressDrawTarget::hidden()
    };
    let progress = ProgressBar::with_draw_target(Some(n), target);
    let style = ProgressStyle::with_template(
        "{pos}/{len} seeds, {msg} [{elapsed_precise}, eta {eta}] {wide_bar}",
    )
    .unwrap_or_else(|_| ProgressStyle::default_bar());
    progress.set_style(style);
    progress.set_message("violations 0");
    progress.enable_steady_tick(Duration::from_millis(200));
    progress
}

/// Runs seeds `first..first + n` on `args.jobs` threads; the outcomes come back in seed order.
fn run_seeds(args: &SimArgs, first: u64, n: u64, progress: &ProgressBar) -> Vec<SeedOutcome> {
    let next_idx = Arc::new(AtomicU64::new(0));
    let (sender, receiver) = mpsc::channel::<SeedOutcome>();
    let workers: Vec<_> = (0..args.jobs.min(n))
        .map(|_| {
            let (args, next_idx, sender) = (args.clone(), Arc::clone(&next_idx), sender.clone());
            std::thread::spawn(move || {
                loop {
                    let idx = next_idx.fetch_add(1, Ordering::SeqCst);
                    if idx >= n {
                        return;
                    }
                    let seed = first + idx;
                    let report =
                        seed_sim::run(&args.config(seed)).map_err(|error| format!("{error:#}"));
                    if sender.send((seed, report)).is_err() {
                        return;
                    }
                }
            })
        })
        .collect();
    drop(sender);
    let mut outcomes = Vec::new();
    let mut n_violations = 0;
    for (seed, report) in receiver {
        match &report {
            Ok(report) => n_violations += report.violations.len(),
            Err(error) => progress.println(format!("seed {seed}: the simulation failed: {error}")),
        }
        if let Ok(report) = &report
            && !report.violations.is_empty()
        {
            progress.println(format!(
                "seed {seed}: {} violations",
                report.violations.len()
            ));
        }
        outcomes.push((seed, report));
        progress.set_message(format!("violations {n_violations}"));
        progress.inc(1);
    }
    for worker in workers {
        // A worker that panicked left its seeds' outcomes missing; they are reported below.
        let _ = worker.join();
    }
    outcomes.sort_by_key(|(seed, _)| *seed);
    let mut idx = 0;
    let mut complete = Vec::with_capacity(n as usize);
    for seed in first..first + n {
        match outcomes.get(idx) {
            Some(outcome) if outcome.0 == seed => {
                complete.push(outcome.clone());
                idx += 1;
            }
            _ => complete.push((seed, Err("the simulation panicked".to_owned()))),
        }
    }
    complete
}

/// What `seed sim` prints, and how many seeds failed.
fn describe(args: &SimArgs, outcomes: &[SeedOutcome], elapsed: Duration) -> (String, usize) {
    let mut text = String::new();
    let mut n_failed = 0;
    for (seed, outcome) in outcomes {
        match outcome {
            Ok(report) if report.violations.is_empty() => {}
            Ok(report) => {
                n_failed += 1;
                text.push_str(&format!(
                    "seed {seed} broke {} invariant(s):\n",
                    report.violations.len()
                ));
                for violation in &report.violations {
                    text.push_str(&format!("  - {violation}\n"));
                }
                text.push_str(&replay_lines(args, *seed));
            }
            Err(error) => {
                n_failed += 1;
                text.push_str(&format!("seed {seed}: the simulation failed: {error}\n"));
                text.push_str(&replay_lines(args, *seed));
            }
        }
    }
    let reports: Vec<SimReport> = outcomes
        .iter()
        .filter_map(|(_, outcome)| outcome.as_ref().ok().cloned())
        .collect();
    let steps: usize = reports.iter().map(|report| report.steps).sum();
    let seconds = elapsed.as_secs_f64().max(1e-9);
    text.push_str(&seed_sim::summary(&reports));
    text.push('\n');
    text.push_str(&format!(
        "time {seconds:.1} s: {:.2} seeds/s, {:.0} steps/s\n",
        outcomes.len() as f64 / seconds,
        steps as f64 / seconds
    ));
    if let [(seed, Ok(report))] = outcomes {
        // A replay's fingerprint: the same on every run of the seed.
        text.push_str(&format!(
            "seed {seed}: trace hash {:016x}\n",
            report.trace_hash
        ));
    }
    if n_failed > 0 {
        text.push_str(&format!("FAILED: {n_failed} of {} seeds\n", outcomes.len()));
    }
    (text, n_failed)
}

fn replay_lines(args: &SimArgs, seed: u64) -> String {
    format!(
        "  replay: {}\n  or in the test suite (its own crash rate): SIM_SEED={seed} cargo test -p \
         seed-tests --test it sim::\n  (SEED_SIM_VERBOSE=1 shows where each simulated process \
         crashed)\n",
        args.replay_command(seed)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Debug, Parser)]
    struct Wrapper {
        #[command(flatten)]
        args: SimArgs,
    }

    fn parse(flags: &[&str]) -> Result<SimArgs, clap::Error> {
        Wrapper::try_parse_from(std::iter::once("sim").chain(flags.iter().copied()))
            .map(|wrapper| wrapper.args)
    }

    #[test]
    fn defaults_come_from_the_simulation() {
        let args = parse(&[]).expect("parses");
        let defaults = SimConfig::default();
        assert_eq!(args.seeds, 100);
        assert_eq!(args.first_seed, 0);
        assert_eq!(args.sessions, defaults.sessions as u64);
        assert_eq!(args.steps, defaults.steps as u64);
        assert_eq!(args.crash_rate, defaults.crash_rate);
        assert_eq!(args.seed_range().expect("a range"), (0, 100));
    }

    #[test]
    fn a_replayed_seed_runs_alone() {
        let args = parse(&["--seed", "42", "--steps", "7"]).expect("parses");
        assert_eq!(args.seed_range().expect("a range"), (42, 1));
        assert_eq!(args.replay_command(42), "seed sim --seed 42 --steps 7");
        let args = parse(&["--seed", "42", "--disk-full-rate", "0.5", "--memory"]).expect("parses");
        assert_eq!(
            args.replay_command(42),
            "seed sim --seed 42 --disk-full-rate 0.5 --memory"
        );
        let config = args.config(42);
        assert!(config.memory && config.disk_full_rate == 0.5);
        assert!(parse(&["--seed", "42", "--seeds", "3"]).is_err());
    }

    #[test]
    fn bad_flags_are_refused_with_the_reason() {
        let error = parse(&["--crash-rate", "1.5"]).expect_err("refused");
        assert!(error.to_string().contains("from 0 to 1"), "{error}");
        assert!(parse(&["--disk-full-rate", "-0.1"]).is_err());
        let error = parse(&["--crash-rate", "often"]).expect_err("refused");
        assert!(error.to_string().contains("not a number"), "{error}");
        assert!(parse(&["--seeds", "0"]).is_err());
        assert!(parse(&["--sessions", "0"]).is_err());
        let args = parse(&["--first-seed", &u64::MAX.to_string(), "--seeds", "2"]).expect("parses");
        let error = args.seed_range().expect_err("refused");
        assert!(
            error.to_string().contains("past the largest seed"),
            "{error}"
        );
    }

    #[test]
    fn a_violation_fails_with_its_seed_and_how_to_replay_it() {
        let args = parse(&["--crash-rate", "0.2"]).expect("parses");
        let clean = SimReport {
            seed: 3,
            steps: 30,
            invariants_checked: 9,
            ..SimReport::default()
        };
        let broken = SimReport {
            seed: 4,
            steps: 30,
            violations: vec!["s1: seq 3 at position 2".to_owned()],
            ..SimReport::default()
        };
        let outcomes = vec![
            (3, Ok(clean.clone())),
            (4, Ok(broken)),
            (5, Err("disk full".to_owned())),
        ];
        let (text, n_failed) = describe(&args, &outcomes, Duration::from_secs(2));
        assert_eq!(n_failed, 2);
        assert!(text.contains("seed 4 broke 1 invariant(s):\n  - s1: seq 3 at position 2\n"));
        assert!(text.contains("replay: seed sim --seed 4 --crash-rate 0.2\n"));
        assert!(text.contains("SIM_SEED=4 cargo test -p seed-tests --test it sim::"));
        assert!(text.contains("seed 5: the simulation failed: disk full"));
        assert!(text.contains("seeds 2, steps 60,"), "{text}");
        assert!(text.contains("1.50 seeds/s, 30 steps/s"), "{text}");
        assert!(text.contains("FAILED: 2 of 3 seeds"));

        let clean = SimReport {
            trace_hash: 0xabc,
            ..clean
        };
        let (text, n_failed) = describe(&args, &[(3, Ok(clean))], Duration::from_secs(1));
        assert_eq!(n_failed, 0);
        assert!(!text.contains("replay"), "{text}");
        assert!(
            text.contains("seed 3: trace hash 0000000000000abc"),
            "{text}"
        );
    }
}
