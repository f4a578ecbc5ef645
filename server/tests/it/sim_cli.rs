//! `seed sim` as a user runs it: a small simulation exits 0 and prints its summary; a bad flag
//! exits 2 with a message that names it and says why.

use crate::common;

use std::time::Duration;

fn seed_sim(args: &[&str]) -> std::process::Output {
    assert_cmd::Command::new(common::SEED)
        .arg("sim")
        .args(args)
        .timeout(Duration::from_secs(300))
        .output()
        .expect("seed sim runs")
}

#[test]
fn a_small_simulation_passes_and_prints_its_summary() {
    let output = seed_sim(&[
        "--seeds",
        "3",
        "--first-seed",
        "5",
        "--sessions",
        "2",
        "--steps",
        "8",
        "--crash-rate",
        "0.3",
        "--jobs",
        "2",
    ]);
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.contains("seeds 3, steps 24, crashes "), "{stdout}");
    assert!(stdout.contains("violations 0;"), "{stdout}");
    assert!(stdout.contains("seeds/s"), "{stdout}");
    assert!(stdout.contains("steps/s"), "{stdout}");
    assert!(!stdout.contains("FAILED"), "{stdout}");
    // Not a terminal: no progress bar.
    assert!(!stderr.contains("seeds,"), "{stderr}");
}

#[test]
fn a_replayed_seed_runs_the_same_way_again() {
    let trace_hash = || {
        let output = seed_sim(&["--seed", "11", "--steps", "12", "--crash-rate", "0.3"]);
        let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
        assert!(output.status.success(), "{stdout}");
        assert!(stdout.contains("seeds 1, steps 12,"), "{stdout}");
        stdout
            .lines()
            .find_map(|line| line.strip_prefix("seed 11: trace hash "))
            .map(str::to_owned)
            .unwrap_or_else(|| panic!("no trace hash in {stdout}"))
    };
    assert_eq!(trace_hash(), trace_hash());
}

#[test]
fn bad_flags_exit_2_with_the_reason() {
    let cases: [(&[&str], &[&str]); 5] = [
        (&["--crash-rate", "1.5"], &["--crash-rate", "from 0 to 1"]),
        (
            &["--crash-rate", "often"],
            &["--crash-rate", "not a number"],
        ),
        (&["--seeds", "0"], &["--seeds", "0 is not in 1..="]),
        (&["--sessions", "0"], &["--sessions"]),
        (
            &["--seed", "4", "--seeds", "2"],
            &["--seed", "cannot be used with"],
        ),
    ];
    for (args, expected) in cases {
        let output = seed_sim(args);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {stderr}");
        for part in expected {
            assert!(stderr.contains(part), "{args:?}: {stderr}");
        }
        assert!(output.stdout.is_empty(), "{args:?}: nothing ran");
    }
    // A range that runs past the largest seed is refused before anything runs.
    let output = seed_sim(&["--first-seed", &u64::MAX.to_string(), "--seeds", "2"]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("past the largest seed"), "{stderr}");
}
