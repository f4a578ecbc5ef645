//! The actor simulation over many seeds, crashes enabled: every invariant must hold.
//!
//! `SIM_SEEDS=N` runs seeds 0..N (default 60); `SIM_SEED=S` replays one seed; `SIM_ITERS=N`
//! runs N seeds from a random start, for a soak.

use seed_sim::{self as sim, SimConfig};

#[test]
fn simulated_sessions_with_crashes_keep_every_invariant() -> anyhow::Result<()> {
    let env = |name: &str| {
        std::env::var(name)
            .ok()
            .and_then(|value| value.parse::<u64>().ok())
    };
    let seeds: Vec<u64> = match (env("SIM_SEED"), env("SIM_ITERS")) {
        (Some(seed), _) => vec![seed],
        (None, Some(iters)) => {
            let start = fastrand::u64(..u64::MAX / 2);
            (start..start + iters).collect()
        }
        (None, None) => (0..env("SIM_SEEDS").unwrap_or(60)).collect(),
    };
    let mut reports = Vec::new();
    for seed in seeds {
        let config = SimConfig {
            seed,
            crash_rate: 0.08,
            ..SimConfig::default()
        };
        let report = sim::run(&config)?;
        assert!(
            report.violations.is_empty(),
            "seed {seed} (replay with SIM_SEED={seed}): {:#?}",
            report.violations
        );
        reports.push(report);
    }
    eprintln!("{}", sim::summary(&reports));
    let crashes: usize = reports.iter().map(|report| report.crashes).sum();
    assert!(reports.len() < 8 || crashes > 0, "no crash was injected");
    Ok(())
}
