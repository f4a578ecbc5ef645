//! The invariants a quiet database must keep, whatever crashed on the way: integrity, gapless
//! seqs, one result per call, every person's message in exactly one run, log and store in
//! agreement (at every moment, since each commit writes both), no lease left, every
//! continuation edge whole and replayable, a cut-off call whose effect exists answered with it,
//! no verb that is not safe to repeat run twice, a denied call never run and an approved one run
//! at most once, each occurrence of a wake-up fired once with one run. Used by the simulation
//! and by the kill -9 test of `seed serve`.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use seed_durable::{DurableFs, FileName, StoreState};
use seed_events::continuation::CONTINUED_FROM_META;
use seed_events::{
    AccountId, EventBody, EventRole, RunResult, SessionContinuationManifest, SessionId,
};
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
    // SQLite's checks of its file; a PostgreSQL database has no such file to check.
    if quiet && store.config().database.is_none() {
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
    // Every run's result reads typed and writes back as it was stored.
    n_checked += 1;
    for run in &all_runs {
        if let Some(result) = &run.result
            && RunResult::parse(result).to_value() != *result
        {
            violations.push(format!(
                "run {}: its result does not round-trip as a RunResult: {result}",
                run.id
            ));
        }
    }
    for session in &sessions {
        let id = session.id;
        let log = store.read_events(id, 1, i64::MAX, usize::MAX).await?;

        // Seqs without gaps (`seed fsck`'s check).
        n_checked += 1;
        for finding in seed_store::fsck::seq_findings(&log) {
            violations.push(format!("{id}: {finding}"));
        }

        // Every event reads as its kind's typed body and writes back as it was stored.
        n_checked += 1;
        for event in &log {
            let body = event.body();
            if matches!(body, EventBody::Other { .. }) || body.content() != event.content {
                violations.push(format!(
                    "{id}: [{}] {} does not round-trip as a typed body: {}",
                    event.seq, event.kind, event.content
                ));
            }
        }

        // At most one result per call; every call answered once its session is quiet.
        n_checked += 1;
        let mut results: BTreeMap<String, usize> = BTreeMap::new();
        // Each call's id, with its verb and seq for the report.
        let mut calls: BTreeMap<String, (String, i64)> = BTreeMap::new();
        for event in &log {
            match event.body() {
                EventBody::ToolCall(call) => {
                    calls.insert(call.id, (call.name, event.seq));
                }
                EventBody::ToolResult(result) => {
                    *results.entry(result.tool_call_id).or_default() += 1;
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
        // The session's store, folded: its newest turn here, its entries below.
        let files = store.session_files(id);
        let state = StoreState::fold(
            &files.read(FileName::Entries).await?,
            &files.read(FileName::Documents).await?,
            &files.read(FileName::Tasks).await?,
        )?;
        // The last run is the one that took the session's newest turn, not the newest run: a
        // parked run's later pass (a child's result) can come after a newer run's turn. Any
        // turn first gives up on one left unsettled, answering its calls, so only the newest
        // turn may leave calls without a result, when its run did not succeed (a refused
        // commit). A session without a turn falls back on its newest run.
        let newest_turn_run = state
            .turn()
            .and_then(|turn| seed_actors::turn::run_of_request(&turn.request_id));
        let session_runs = || all_runs.iter().filter(|run| run.session_id == id);
        let last_run_succeeded = session_runs()
            .find(|run| Some(run.id) == newest_turn_run)
            .or_else(|| session_runs().next_back())
            .is_some_and(|run| run.status == seed_events::RunStatus::Succeeded);
        if quiet && last_run_succeeded {
            for (call, (verb, seq)) in &calls {
                if !results.contains_key(call) {
                    violations.push(format!(
                        "{id}: call {call} ({verb}, seq {seq}) has no result"
                    ));
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

        // Each occurrence of a wake-up fired once, its notice in exactly one run (queued in
        // the notice's transaction, so at every moment).
        n_checked += 1;
        let mut fired: BTreeSet<(String, u64)> = BTreeSet::new();
        for event in log
            .iter()
            .filter(|event| event.meta.get("scheduled_wakeup").is_some())
        {
            let wakeup = &event.meta["scheduled_wakeup"];
            let schedule = wakeup["schedule_id"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            let occurrence = wakeup["occurrence"].as_u64().unwrap_or(0);
            if !fired.insert((schedule.clone(), occurrence)) {
                violations.push(format!(
                    "{id}: wake-up {schedule} fired its occurrence {occurrence} twice"
                ));
            }
            let n = all_runs
                .iter()
                .filter(|run| run.user_event_ids.contains(&event.id))
                .count();
            if n != 1 {
                violations.push(format!(
                    "{id}: the wake-up notice seq {} is in {n} runs",
                    event.seq
                ));
            }
        }

        // The log and the store agree: every entry projected exactly once, no mark the store
        // cannot back. At every moment, since each commit of the store writes its entries'
        // events in the same transaction.
        {
            n_checked += 1;
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
        }

        // No lease held once quiet.
        if quiet {
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

    n_checked += check_cut_off_calls(store, &sessions, violations).await?;

    n_checked += check_approvals(store, &sessions, launches, quiet, violations).await?;

    // A verb that is not safe to repeat ran at most once per call.
    n_checked += 1;
    for ((session, call), n) in launches {
        if *n > 1 {
            violations.push(format!("{session}: launch call {call} ran {n} times"));
        }
    }
    Ok(n_checked)
}

/// A denied call never ran; an approved call ran at most once, and once quiet it ran unless a
/// crash cut it off after its intent was committed (answered as cut off, never run again), or
/// its run ended before it could: canceled, given up after too many restarts, or failed on a
/// write the database refused (a full disk ends the turn); once quiet, no approval is left
/// pending. `launches` counts the executions of the verbs that are not safe to repeat
/// (every verb that needs approval is one). Returns how many checks ran.
async fn check_approvals(
    store: &Store,
    sessions: &[seed_store::SessionRow],
    launches: &HashMap<(SessionId, String), usize>,
    quiet: bool,
    violations: &mut Vec<String>,
) -> anyhow::Result<usize> {
    let mut n_checked = 0;
    for session in sessions {
        for approval in store.approvals(session.id).await? {
            n_checked += 1;
            let call = &approval.tool_call_id;
            let ran = launches
                .get(&(session.id, call.clone()))
                .copied()
                .unwrap_or(0);
            match approval.status {
                seed_store::ApprovalStatus::Denied | seed_store::ApprovalStatus::TimedOut
                    if ran > 0 =>
                {
                    violations.push(format!(
                        "{}: call {call} was denied, yet it ran {ran} times",
                        session.id
                    ));
                }
                seed_store::ApprovalStatus::Approved if ran > 1 => {
                    violations.push(format!(
                        "{}: call {call} was approved once, yet it ran {ran} times",
                        session.id
                    ));
                }
                seed_store::ApprovalStatus::Approved if quiet && ran == 0 => {
                    if let Some(why) = approved_yet_never_ran(store, session.id, &approval).await? {
                        violations.push(format!(
                            "{}: call {call} was approved, yet it never ran: {why}",
                            session.id
                        ));
                    }
                }
                seed_store::ApprovalStatus::Pending if ran > 0 => {
                    violations.push(format!(
                        "{}: call {call} ran before it was approved",
                        session.id
                    ));
                }
                seed_store::ApprovalStatus::Pending if quiet => {
                    violations.push(format!(
                        "{}: call {call} still waits for approval once quiet",
                        session.id
                    ));
                }
                _ => {}
            }
        }
    }
    Ok(n_checked)
}

/// Why an approved call that never ran should have (`None` when it need not have): its run did
/// not end before it could (canceled, given up after too many restarts, failed on a refused
/// write), and its result is not the answer of a call a crash cut off after its intent was
/// committed. A run that failed otherwise (its model request failed) went past the call.
async fn approved_yet_never_ran(
    store: &Store,
    session_id: SessionId,
    approval: &seed_store::ApprovalRow,
) -> anyhow::Result<Option<String>> {
    let run = store.get_run(approval.run_id).await?;
    let ended_without_it = run.as_ref().is_some_and(|run| {
        let error = run
            .result
            .as_ref()
            .and_then(|result| result["error"].as_str());
        run.status == seed_events::RunStatus::Canceled
            || error.is_some_and(|error| {
                seed_actors::run_end::is_given_up_reason(error)
                    || error == seed_actors::run_end::REFUSED_WRITE
            })
    });
    if ended_without_it {
        return Ok(None);
    }
    let results: Vec<String> = store
        .read_events(session_id, 1, i64::MAX, usize::MAX)
        .await?
        .into_iter()
        .filter(|event| {
            event.kind == seed_events::body::kind::TOOL_RESULT
                && event.content["tool_call_id"] == approval.tool_call_id.as_str()
        })
        .filter_map(|event| event.content["content"].as_str().map(str::to_owned))
        .collect();
    let cut_off = seed_durable::record::interrupted_result(&approval.tool_call_id, &approval.verb);
    if results.contains(&cut_off.content) {
        return Ok(None);
    }
    Ok(Some(format!(
        "its run {:?}, its results {results:?}",
        run.map(|run| run.status)
    )))
}

/// A call a crash cut off is answered as interrupted only when it did not take effect: a
/// continue_session call whose successor exists, a delegate call whose child started, or a
/// memory call whose change recorded its effect is answered with that effect (the verbs'
/// reconcile). Returns how many checks ran.
async fn check_cut_off_calls(
    store: &Store,
    sessions: &[seed_store::SessionRow],
    violations: &mut Vec<String>,
) -> anyhow::Result<usize> {
    // The calls that started a child: (parent session, call id), from each child's task.
    let mut delegations = BTreeSet::new();
    for child in sessions.iter().filter(|s| s.parent_session_id.is_some()) {
        if let Some(task) = store.read_events(child.id, 1, 1, 1).await?.first()
            && let Some(by) = seed_store::delegated_by(&task.meta)
        {
            delegations.insert(by);
        }
    }
    let mut n_checked = 0;
    for session in sessions {
        let log = store
            .read_events(session.id, 1, i64::MAX, usize::MAX)
            .await?;
        for result in log.iter().filter(|event| {
            event.kind == "tool_result"
                && event.content["is_error"] == json!(true)
                && event.content["content"]
                    .as_str()
                    .is_some_and(|text| text.starts_with("interrupted:"))
        }) {
            n_checked += 1;
            let call_id = result.content["tool_call_id"].as_str().unwrap_or_default();
            let took_effect = match result.content["tool_name"].as_str().unwrap_or_default() {
                "continue_session" => store
                    .find_continuation(session.id, call_id)
                    .await?
                    .is_some(),
                "delegate" => delegations.contains(&(session.id, call_id.to_owned())),
                "memory" => store.call_effect(session.id, call_id).await?.is_some(),
                _ => false,
            };
            if took_effect {
                violations.push(format!(
                    "{}: call {call_id} took effect but was answered as interrupted (seq {})",
                    session.id, result.seq
                ));
            }
        }
    }
    Ok(n_checked)
}
