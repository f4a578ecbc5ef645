//! Runs over many simulations: the exhaustive mode (a crash at every crash-point occurrence of
//! a scenario), shrinking a failing run to its fewest steps, and the summary of many reports.

use std::collections::BTreeMap;

use crate::{SimConfig, SimReport, run};

/// The exhaustive mode: a dry run of `scenario` (no crashes) counts every crash-point
/// occurrence; then one run crashes at each occurrence in turn. Returns the dry run's report
/// and one report per crash.
pub fn exhaustive(scenario: &SimConfig) -> anyhow::Result<(SimReport, Vec<SimReport>)> {
    let dry = run(&SimConfig {
        crash_rate: 0.0,
        disk_full_rate: 0.0,
        crash_at: None,
        ..scenario.clone()
    })?;
    let mut reports = Vec::with_capacity(dry.crash_point_hits);
    for crash_at in 1..=dry.crash_point_hits {
        reports.push(run(&SimConfig {
            disk_full_rate: 0.0,
            crash_at: Some(crash_at),
            ..scenario.clone()
        })?);
    }
    Ok((dry, reports))
}

/// The shortest failing prefix of a failing run: the fewest steps with which the same seed
/// still breaks an invariant (a seed's first steps do not depend on how many follow). Returns
/// the shortened configuration and its report, or `None` when the run does not fail.
pub fn shrink(failing: &SimConfig) -> anyhow::Result<Option<(SimConfig, SimReport)>> {
    let report = run(failing)?;
    if report.violations.is_empty() {
        return Ok(None);
    }
    // The first violation was seen after `violation_step` steps: no shorter prefix than what
    // led there can be needed, but a shorter one may fail too (at the end of the run).
    let mut best = (failing.clone(), report);
    let upper = best
        .1
        .violation_step
        .unwrap_or(failing.steps)
        .min(failing.steps);
    for steps in 0..upper {
        let candidate = SimConfig {
            steps,
            ..failing.clone()
        };
        let report = run(&candidate)?;
        if !report.violations.is_empty() {
            best = (candidate, report);
            break;
        }
    }
    Ok(Some(best))
}

/// A one-line summary of many runs.
pub fn summary(reports: &[SimReport]) -> String {
    let steps: usize = reports.iter().map(|report| report.steps).sum();
    let crashes: usize = reports.iter().map(|report| report.crashes).sum();
    let faults: usize = reports.iter().map(|report| report.faults_injected).sum();
    let checked: usize = reports.iter().map(|report| report.invariants_checked).sum();
    let violations: usize = reports.iter().map(|report| report.violations.len()).sum();
    let mut fired: BTreeMap<&str, usize> = BTreeMap::new();
    for report in reports {
        for (point, n) in &report.points_fired {
            *fired.entry(point).or_default() += n;
        }
    }
    let mut verb_calls: BTreeMap<&str, usize> = BTreeMap::new();
    for report in reports {
        for (verb, n) in &report.verb_calls {
            *verb_calls.entry(verb.as_str()).or_default() += n;
        }
    }
    let verbs = if verb_calls.is_empty() {
        String::new()
    } else {
        format!("; your verbs called: {verb_calls:?}")
    };
    format!(
        "seeds {}, steps {steps}, crashes {crashes}, disk-full faults {faults}, invariants \
         checked {checked}, violations {violations}; crash points fired: {fired:?}{verbs}",
        reports.len()
    )
}
