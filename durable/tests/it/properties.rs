//! Property test of crash recovery: random scripts (1–5 responses, 1–4 tool calls in each but
//! the answer, tools safe to repeat or not) crashed at a random commit and recovered as the same
//! run or a different one keep every invariant: no committed response asked for again, no
//! unsafe call run twice, interrupted results reach the model, an answered turn asks nothing,
//! and the final context has no orphan call and no duplicated entry.

use crate::common::{Recovery, Script, TOOLS, World, crash_and_recover};
use proptest::prelude::*;
use seed_durable::MemoryFs;

fn script() -> impl Strategy<Value = Script> {
    let tool = proptest::sample::select(TOOLS.map(|(name, _)| name).to_vec());
    let response = proptest::collection::vec(tool, 1..=4);
    proptest::collection::vec(response, 0..=4).prop_map(|mut responses| {
        responses.push(Vec::new());
        Script { responses }
    })
}

fn recovery() -> impl Strategy<Value = Recovery> {
    prop_oneof![Just(Recovery::SameRun), Just(Recovery::DifferentRun)]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn recovery_keeps_its_invariants(
        script in script(),
        crash_fraction in 0.0..=1.0f64,
        recovery in recovery(),
    ) {
        let world = World::new(script.clone());
        let fs = MemoryFs::new();
        let mut harness = world.open(fs.clone());
        world.run(&mut harness, "r1", "go").expect("an uncrashed turn");
        let n_commits = fs.n_commits();
        let crash_after = (crash_fraction * n_commits as f64).round() as usize;
        crash_and_recover(&script, crash_after, recovery);
    }
}
