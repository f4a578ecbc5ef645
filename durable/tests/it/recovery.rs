//! Crash recovery, exhaustively: a scripted turn with two tool calls (one safe to repeat, one
//! not) is cut off after every possible number of commits, then recovered as the same run and
//! as a different run, and every invariant of the spec is checked.

use crate::common::{Recovery, Script, World, crash_and_recover};
use seed_durable::MemoryFs;

#[test]
fn every_crash_point_recovers_as_the_same_run_and_as_a_different_run() {
    let script = Script::two_calls();
    // How many commits the whole turn makes when nothing crashes.
    let world = World::new(script.clone());
    let fs = MemoryFs::new();
    let mut harness = world.open(fs.clone());
    world
        .run(&mut harness, "r1", "go")
        .expect("an uncrashed turn");
    let n_commits = fs.n_commits();
    assert!(n_commits >= 4, "only {n_commits} commits");

    for crash_after in 0..=n_commits {
        for recovery in [Recovery::SameRun, Recovery::DifferentRun] {
            crash_and_recover(&script, crash_after, recovery);
        }
    }
}
