//! The invariants a quiet database must keep, whatever crashed on the way: integrity, gapless
//! seqs, one result per call, every person's message in exactly one run, log and store in
//! agreement, no lease left, every continuation edge whole and replayable, and no verb that is
//! not safe to repeat run twice. Used by the simulation and by the kill -9 test of `seed serve`.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use seed_durable::{DurableFs, FileName, StoreState};
use seed_events::continuation::CONTINUED_FROM_META;
use seed_events::{AccountId, EventRole, SessionContinuationManifest, SessionId};
use seed_projections::store_to_log::log_store_disagreements;
use seed_store::Store;
use serde_json::json;

/// Every invariant over the quiet database of one account's sessions; returns how many checks
/// ran. `launches` counts the executions of a verb that must never run twice, per call.
pub async fn check_quiet_database(
    store: &Store,
    account: AccountId,
    launches: &HashMap<(SessionId, String), usize>,
    violations: &mut Vec<String>,
) -> anyhow::Result<usize> {
    check_database(store, account, launches, true, violations).await
}

/// The invariants that hold at every moment, while turns run: gapless seqs, at most one result
/// per call, no person's message in two runs, whole continuation edges, and no verb
/// that is not safe to repeat run twice. Returns how many checks ran.
pub async fn check_running_database(
    store: &Store,
    account: AccountId,
    launches: &HashMap<(SessionId, String), usize>,
    violations: &mut Vec<String>,
) -> anyhow::Result<usize> {
    check_database(store, account, launches, false, violations).await
}

async fn check_database(
    store: &Store,
    account: AccountId,
    launches: &HashMap<(SessionId, String), usize>,
    quiet: bool,
    violations: &mut Vec<String>,
) -> anyhow::Result<usize> {
    let mut n_checked = 0;
    if quiet {
        for problem in store.check_integrity().await? {
            violations.push(format!("integrity: {problem}"));
        }
        n_checked += 1;
    }

    let sessions = store.list_sessions(account).await?;
    let all_runs: Vec<_> = {
        let mut runs = Vec::new();
        for session in &sessions {
            runs.extend(store.list_session_runs(session.id).await?);
        }
        runs
    };
    for session in &sessions {
        let id = session.id;
        let log = store.read_events(id, 1, i64::MAX, usize::MAX).await?;

        // Seqs without gaps.
        n_checked += 1;
        if let Some((idx, event)) = log
            .iter()
            .enumerate()
            .find(|(idx, event)| event.seq != *idx as i64 + 1)
        {
            violations.push(format!("{id}: seq {} at position {}", event.seq, idx + 1));
        }

        // At most one result per call; every call answered once its session is quiet.
        n_checked += 1;
        let mut results: BTreeMap<String, usize> = BTreeMap::new();
        let mut calls: BTreeSet<String> = BTreeSet::new();
        for event in &log {
            match event.kind.as_str() {
                "tool_call" => {
                    calls.insert(event.content["id"].as_str().unwrap_or_default().to_owned());
                }
                "tool_result" => {
                    let call = event.content["tool_call_id"].as_str().unwrap_or_default();
                    *results.entry(call.to_owned()).or_default() += 1;
                }
                _ => {}
            }
        }
        for (call, n) in &results {
            if *n > 1 {
                let seen: Vec<String> = log
                    .iter()
                    .filter(|event| {
                        event.content["tool_call_id"].as_str() == Some(call.as_str())
                            || event.content["id"].as_str() == Some(call.as_str())
                    })
                    .map(|event| {
                        format!(
                            "[{}] {} by {:?} entry {:?}: {}",
                            event.seq,
                            event.kind,
                            event.actor,
                            event.pi_entry_id,
                            event
                                .content
                                .to_string()
                                .chars()
                                .take(120)
                                .collect::<String>()
                        )
                    })
                    .collect();
                violations.push(format!("{id}: call {call} has {n} results: {seen:#?}"));
            }
        }
        let last_run_succeeded = all_runs
            .iter()
            .rfind(|run| run.session_id == id)
            .is_some_and(|run| run.status == seed_events::RunStatus::Succeeded);
        if quiet && last_run_succeeded {
            for call in &calls {
                if !results.contains_key(call) {
                    violations.push(format!("{id}: call {call} has no result"));
                }
            }
        }

        // Every person's message belongs to exactly one run.
        n_checked += 1;
        for event in log.iter().filter(|event| {
            event.kind == "message"
                && event.role == Some(EventRole::User)
                && event.actor.as_deref() == Some("user")
        }) {
            let n = all_runs
                .iter()
                .filter(|run| run.user_event_ids.contains(&event.id))
                .count();
            // While turns run, a successor's copied message may wait for the boot sweep to
            // queue its run (when queueing it failed); once quiet, it has one.
            if n > 1 || (quiet && n != 1) {
                let runs: Vec<String> = all_runs
                    .iter()
                    .filter(|run| run.session_id == id)
                    .map(|run| format!("{} {:?} {}", run.status, run.user_event_ids, run.attempts))
                    .collect();
                violations.push(format!(
                    "{id}: message seq {} (event {}) is in {n} runs (the session's runs: {runs:?}; meta {})",
                    event.seq, event.id.0, event.meta
                ));
            }
        }

        // Once quiet, the log and the store agree: every entry projected exactly once, no mark
        // the store cannot back. (Mid-step the store may be a commit ahead of the log.)
        if quiet {
            n_checked += 1;
            let files = store.session_files(id);
            let state = StoreState::fold(
                &files.read(FileName::Entries).await?,
                &files.read(FileName::Documents).await?,
                &files.read(FileName::Tasks).await?,
            )?;
            let problems = log_store_disagreements(&state.entries, &log);
            if !problems.is_empty() {
                // Its runs, to tell why nothing projected what the store holds.
                let runs: Vec<String> = all_runs
                    .iter()
                    .filter(|run| run.session_id == id)
                    .map(|run| {
                        format!(
                            "{} attempts {} pass {}: {}",
                            run.status,
                            run.attempts,
                            run.pass,
                            run.result
                                .as_ref()
                                .map(ToString::to_string)
                                .unwrap_or_default()
                        )
                    })
                    .collect();
                for problem in problems {
                    violations.push(format!("{id}: {problem} (runs: {runs:?})"));
                }
            }

            // No lease held once quiet.
            n_checked += 1;
            if let Some(lease) = store.get_lease(id).await? {
                violations.push(format!("{id}: lease still held by {}", lease.owner));
            }
        }

        // A successor has its edge, its manifest and its two first events; its call replays.
        if let Some(edge) = store.edge_to(id).await? {
            n_checked += 1;
            if let Err(error) = SessionContinuationManifest::from_cbor(&edge.manifest_cbor) {
                violations.push(format!("{id}: {error}"));
            }
            let projection_ok = log.first().is_some_and(|event| {
                event.role == Some(EventRole::User) && event.actor.as_deref() == Some("system")
            });
            let copy_ok = log.get(1).is_some_and(|event| {
                event
                    .meta
                    .get(CONTINUED_FROM_META)
                    .and_then(|from| from.get("event_id"))
                    == Some(&json!(edge.initiating_event_id))
            });
            if !projection_ok || !copy_ok {
                violations.push(format!("{id}: a successor without its projection and copy"));
            }
            let replayed = store
                .find_continuation(edge.predecessor_session_id, &edge.tool_call_id)
                .await?;
            if replayed.map(|edge| edge.successor_session_id) != Some(id) {
                violations.push(format!(
                    "{id}: its continue_session call does not replay to it"
                ));
            }
        }
    }

    // A verb that is not safe to repeat ran at most once per call.
    n_checked += 1;
    for ((session, call), n) in launches {
        if *n > 1 {
            violations.push(format!("{session}: launch call {call} ran {n} times"));
        }
    }
    Ok(n_checked)
}
