//! One run, start to end: the steps Seed takes around the durable harness.
//!
//! The run arrives holding its session's store lease (the queue's claim took it). Read what the
//! turn needs in one read; open the harness (or take the one kept from the session's last
//! run); clear `pi_entry_id` marks the store cannot back and project every entry the log lacks;
//! give up on a turn another run left unsettled; import what is pending from the log; run the
//! turn with this turn's blocks (each of its commits writes its entries' events to the log in
//! its own transaction, `LoggedFiles`); close the run and release the lease in one commit.
//! Everything here awaits the store's async API, so no SQLite work runs on an actix arbiter
//! thread.
//!
//! Layout: `open` (the harness, kept or opened), `project` (the log made whole on open),
//! `import`, `blocks` (the turn's state blocks), `end` (how the run ends), `namer` (the
//! fallback namer); `crate::run_end` records an end.

mod blocks;
mod end;
mod import;
mod namer;
mod open;
mod project;

use std::sync::atomic::Ordering;

use end::{Continued, EndPlan, EndStep, TurnBroke, TurnEnd, TurnSaw};

use seed_durable::{StopSignal, TurnOutcome, TurnRequest};
use seed_events::{EventRole, MessageBody, NewEvent, RunStatus};
use seed_projections::import::{SYNC_DOCUMENT, answered_already, delegated_in_turn};
use seed_store::{PlanCheck, RunRow};

use crate::bus::{Notification, SeqRange};
use crate::env::RunEnv;
use crate::run_end::{EndRefused, RunEnd, record_end};
use crate::traces::RunTrace;
use crate::verb::{TurnEffect, VerbContext};

pub use crate::env::LIVE_INTERVAL_DEFAULT;
pub use open::SessionHarness;

/// Runs `run` to its end and records it. The run comes from the queue's claim, which took its
/// session's store lease for it in the same transaction; the run's end releases it. `harness`
/// is the session's open harness, if its actor kept one; it is left there after a run that
/// ended cleanly, and dropped after anything else (the next run opens the store afresh).
///
/// A store operation the database refuses (a full disk) closes the harness, and the turn ends
/// with an error, as the spec has it: what it had committed stays (each commit wrote the log
/// too), and the run's end says why, in its result and in a notice in the log. While the disk
/// refuses even that, the end is written again after a pause until it is (the session's next
/// runs wait behind it); the turn itself is not run again.
///
/// `trace` is the run's span (nothing unless traces are exported): the turn's model requests
/// and tool calls go under it, and its `traceparent` is kept with the run by the
/// turn's first commit, so that an attempt after a crash links to this one.
pub async fn execute_run(
    env: &RunEnv,
    run: &RunRow,
    stop: StopSignal,
    harness: &mut Option<SessionHarness>,
    trace: RunTrace,
) -> RunEnd {
    let session_id = run.session_id;
    let turn = turn(env, run, stop, harness, trace)
        .await
        .map_err(|error| TurnBroke::of(&error));
    let now = (env.clock)();
    // A delete stops the turn under it: asked only of a stopped turn.
    let session_deleted = matches!(&turn, Ok(turn) if turn.end.status == RunStatus::Canceled)
        && matches!(env.store.get_session(session_id).await, Ok(None));
    let EndPlan {
        end,
        check_plan,
        notice,
        warn,
    } = end::run_end_plan(turn, session_deleted, run.id, now);
    if let Some(reason) = warn {
        tracing::warn!(session_id = %session_id, run_id = %run.id, reason = reason.as_str(), "a run failed");
    }
    // An open plan may owe the run a later pass: the end's transaction reads the plan as it
    // stands then.
    let plan_check = check_plan.then(|| {
        let run_id = run.id;
        PlanCheck {
            session_id,
            notice: std::sync::Arc::new(move |plan| end::plan_notice(plan, run_id, now)),
        }
    });
    env.settings
        .crash_points
        .reach(crate::crash::points::RUN_BEFORE_FINISH)
        .await;
    loop {
        match record_end(env, run, end.clone(), plan_check.clone(), notice.clone()).await {
            Ok(end) => return end,
            Err(refused) => {
                *harness = None;
                let why = match refused {
                    EndRefused::DiskFull => "the disk is full",
                    EndRefused::DatabaseAway => "the database cannot be reached",
                };
                tracing::warn!(run_id = %run.id, "{why}: the run's end is written again shortly");
                actix::clock::sleep(crate::env::DISK_FULL_PAUSE).await;
            }
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub(crate) enum TurnError {
    #[error("the session was deleted")]
    SessionGone,
    #[error(transparent)]
    Store(#[from] seed_store::Error),
    #[error(transparent)]
    Harness(#[from] seed_durable::Error),
}

impl TurnError {
    /// Whether the turn stopped because the store found the disk full (a refusal that may
    /// pass).
    pub(crate) fn is_disk_full(&self) -> bool {
        // The variants are transparent: their `source` skips the wrapped error itself.
        match self {
            TurnError::SessionGone => false,
            TurnError::Store(error) => error.is_disk_full(),
            TurnError::Harness(error) => seed_store::Error::is_disk_full_cause(error),
        }
    }
}

/// On a database several nodes share, drops the harness this node `kept` from the session's
/// last run here when another node has written the session since: `newest_line`, the
/// session's newest durable line as the turn's view read it, is not the one the harness saw at
/// the end of that run. The run then opens the session afresh from the store. The view is read
/// after the run's claim took the session's lease, so no node writes the session after it.
/// On SQLite the process is the only writer, and a kept harness always serves. Whether it
/// dropped the harness.
fn drop_if_overtaken(
    env: &RunEnv,
    kept: &mut Option<SessionHarness>,
    newest_line: Option<i64>,
) -> bool {
    let Some(SessionHarness {
        newest_line: seen, ..
    }) = kept.as_ref()
    else {
        return false;
    };
    let stats = &env.peer_stats;
    match *seen {
        Some(seen) if newest_line == Some(seen) => {
            stats.n_harnesses_kept.fetch_add(1, Ordering::Relaxed);
            false
        }
        // Not known: the read at the end of its run failed.
        None => {
            *kept = None;
            true
        }
        Some(_) => {
            stats.n_harnesses_overtaken.fetch_add(1, Ordering::Relaxed);
            *kept = None;
            true
        }
    }
}

async fn turn(
    env: &RunEnv,
    run: &RunRow,
    stop: StopSignal,
    kept: &mut Option<SessionHarness>,
    trace: RunTrace,
) -> Result<TurnEnd, TurnError> {
    let store = &env.store;
    let session_id = run.session_id;
    // Everything the turn reads before it starts, in one read; with a kept harness, the log's
    // pending events past its mark too, and on a shared database the session's newest line.
    let mut kept_mark = kept
        .as_ref()
        .filter(|kept| !kept.harness.is_closed())
        .map(|kept| import::sync_document(kept.harness.state()).mark);
    let check_overtaken = kept.is_some() && store.node().is_some();
    let seed_store::TurnView {
        session,
        n_children: n_children_before,
        max_pi_entry_id: view_max_pi_entry_id,
        queued_event_ids,
        memory,
        pending: mut view_pending,
        schedules,
        newest_line,
    } = store
        .turn_view(session_id, run.id, kept_mark, check_overtaken)
        .await?
        .ok_or(TurnError::SessionGone)?;
    if check_overtaken && drop_if_overtaken(env, kept, newest_line) {
        // As if no harness had been kept: the fresh one reads what is pending itself.
        kept_mark = None;
        view_pending = None;
    }
    // Each pass of a run (a later pass for a child's result) is a turn of its own; a pass cut
    // off by a crash comes back with the same id and is adopted.
    let request_id = request_id_of(run);
    let context = VerbContext {
        store: store.clone(),
        account_id: session.account_id,
        session_id,
        run_id: run.id,
        tool_call_id: String::new(),
        now_ms: (env.clock)(),
        stop: stop.clone(),
        successions: env.successions.upgrade(),
        traces: env.settings.traces.clone(),
        call_span: None,
    };
    // Continuing is possible in a top-level session's run, never in a delegated child.
    let can_continue = !env.verbs.names_with(TurnEffect::Continues).is_empty()
        && session.parent_session_id.is_none()
        && run.parent_run_id.is_none()
        && !run.typed;
    let SessionHarness {
        mut harness,
        binding,
        run: run_cell,
        tools_for,
        newest_line: _,
    } = open::open_harness(env, run, &session, kept, context, can_continue).await?;
    // The run span's `traceparent` goes with the turn's first commit.
    run_cell.keep_trace_parent(trace.traceparent());

    // On open: marks the store cannot back are cleared, and every entry the log lacks is
    // projected again, so nothing is lost and nothing repeated.
    let cleared =
        project::make_the_log_whole(env, run, harness.state(), view_max_pi_entry_id).await?;

    // A turn another run left unsettled is given up (its calls' restart results go to the log
    // with the commit that writes them), and the context rebuilt.
    let rebuild = harness.abort_unsettled(&request_id).await?;

    let log_seen = import::LogSeen {
        queued_event_ids,
        // The events whose marks were cleared are pending now.
        pending: if cleared { None } else { view_pending },
        read_past_mark: kept_mark,
    };
    let plan = import::plan(env, run, &session, harness.state(), log_seen, rebuild).await?;

    // Before any server has counted (a session's first turn), the prompt is estimated from
    // what the request will hold: the conversation, what is imported, and the input.
    let first_estimate = || {
        let more: Vec<seed_providers::Message> = plan
            .entries
            .iter()
            .filter_map(|entry| match entry {
                seed_durable::EntryBody::Replay { message } => Some(message.clone()),
                _ => None,
            })
            .chain([seed_providers::Message::User(plan.input.clone())])
            .collect();
        harness.estimated_prompt_tokens(&more)
    };
    let context_usage =
        blocks::context_usage(env, &session, harness.state(), can_continue, first_estimate);
    let advice = blocks::advice(env, &session, harness.state(), context_usage.as_ref()).await?;
    let blocks = blocks::turn_blocks(
        env,
        &session,
        memory,
        &schedules,
        n_children_before,
        context_usage,
        advice,
    );
    // Another turn may already have taken in and answered what this run came for: then the
    // run returns that answer, and the model is not asked again.
    let answered = answered_already(&plan, harness.state(), &request_id);
    let answered_by = answered
        .as_ref()
        .and(harness.state().turn())
        .map(|turn| turn.request_id);
    let sync_value = serde_json::to_value(&plan.sync).unwrap_or(serde_json::Value::Null);
    let turn = TurnRequest {
        request_id: request_id.clone(),
        input: plan.input,
        blocks,
        imports: plan.entries,
        documents: vec![(SYNC_DOCUMENT.to_owned(), sync_value)],
        stop,
        spans: trace.turn_spans(),
    };
    // Each commit of the turn writes its entries' events to the log in its own transaction.
    let outcome = match answered.clone() {
        Some((entry_id, message)) => Ok(TurnOutcome::Answered { entry_id, message }),
        None => harness.run_turn(turn).await,
    };
    // A turn that committed nothing (answered already) keeps its run's span by itself.
    if let Some(traceparent) = run_cell.take_trace_parent()
        && let Err(error) = store.set_run_trace_parent(run.id, traceparent).await
    {
        tracing::warn!(run_id = %run.id, %error, "could not keep the run's traceparent");
    }
    let continued = end::continued_by(env, session_id, harness.state(), &request_id).await?;
    let delegated = delegated_in_turn(harness.state(), &request_id);
    if outcome.is_ok() && !harness.is_closed() {
        // As it stands while the run still holds the session's lease, after the harness's
        // last commit: no other node can have written the session in between. The newest
        // line the harness committed in this run is it; a run that committed none reads it.
        let newest_line = match store.node() {
            Some(_) => match harness.fs().inner().take_newest_line_written() {
                Some(written) => Some(written),
                None => store.newest_durable_line(session_id).await.ok().flatten(),
            },
            None => None,
        };
        *kept = Some(SessionHarness {
            harness,
            binding,
            run: run_cell,
            tools_for,
            newest_line,
        });
    }
    if session.title_source == seed_store::TitleSource::None {
        namer::name_if_untitled(env, session_id).await;
    }

    // What the turn saw at its end; how the run ends is decided from it (`end::turn_end`).
    let saw = match outcome? {
        TurnOutcome::Answered { message, .. } => TurnSaw::Answered {
            text: message.text(),
            answered_already: answered.is_some(),
            answered_by,
        },
        TurnOutcome::Ended { reason } => {
            // What a typed child returned, read when no continuation answers for the run.
            let returned = if run.typed && continued.is_none() {
                end::returned_result(
                    &store
                        .read_events(session_id, 1, i64::MAX, usize::MAX)
                        .await?,
                    run.id,
                    &env.verbs.names_with(TurnEffect::Returns),
                )
            } else {
                None
            };
            TurnSaw::Ended {
                reason,
                continued: continued.map(|edge| Continued {
                    successor_session_id: edge.successor_session_id,
                    continuation_id: edge.id,
                }),
                returned,
                delegated,
            }
        }
        TurnOutcome::Waiting { call } => TurnSaw::Waiting { call },
        TurnOutcome::Stopped { partial_text } => TurnSaw::Stopped { partial_text },
        TurnOutcome::Failed { error, .. } => TurnSaw::Failed {
            reason: error.reason(),
        },
    };
    let mut turn_end = end::turn_end(saw, run.pass < env.settings.plan_passes_max);
    match std::mem::replace(&mut turn_end.then, EndStep::Nothing) {
        EndStep::Nothing => {}
        EndStep::WriteStoppedText(partial_text) => {
            let mut event = NewEvent::new(
                MessageBody::text(partial_text),
                EventRole::Assistant,
                "agent",
                (env.clock)(),
            );
            event.run_id = Some(run.id);
            event.meta = serde_json::json!({ "stopped": true });
            let written = store.append_events(session_id, vec![event]).await?;
            env.publisher.publish(Notification::SessionChanged {
                session_id,
                reason: "events",
                seqs: SeqRange::of(&written),
            });
        }
        EndStep::Park => {
            let now = (env.clock)();
            let parked = store.park_run(run.id, now).await?;
            turn_end.end.status = end::parked_status(parked);
            if parked == seed_store::ParkOutcome::Parked {
                let kind = crate::traces::WaitKind::Children;
                env.settings.traces.parked(run.id, kind, now);
            }
        }
        EndStep::ParkOnApproval(call) => {
            let now = (env.clock)();
            let approval = seed_store::NewApproval {
                session_id,
                run_id: run.id,
                tool_call_id: call.id.clone(),
                verb: call.name.clone(),
                arguments: call.arguments.clone(),
                deadline_at_ms: env.settings.approval_timeout.map(|timeout| {
                    now.saturating_add(i64::try_from(timeout.as_millis()).unwrap_or(i64::MAX))
                }),
            };
            let parked = store.park_on_approval(approval, now).await?;
            turn_end.end.status = end::parked_status(parked);
            if parked == seed_store::ParkOutcome::Parked {
                let kind = crate::traces::WaitKind::Approval;
                env.settings.traces.parked(run.id, kind, now);
                env.publisher.publish(Notification::ApprovalPending {
                    session_id,
                    run_id: run.id,
                    call_id: call.id,
                    name: call.name,
                    arguments: call.arguments,
                });
            }
        }
    }
    Ok(turn_end)
}

/// The request id of a run's pass, as the harness's turn carries it: `run#pass`.
pub fn request_id_of(run: &RunRow) -> String {
    format!("{}#{}", run.id, run.pass)
}

/// The run a turn's request id names (see [`request_id_of`]).
pub fn run_of_request(request_id: &str) -> Option<seed_events::RunId> {
    let (run_id, _) = request_id.split_once('#')?;
    run_id.parse().ok().map(seed_events::RunId)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_id_names_its_run_and_pass() {
        let run_id = seed_events::RunId::from_u128(7);
        let request_id = format!("{run_id}#2");
        assert_eq!(run_of_request(&request_id), Some(run_id));
        assert_eq!(run_of_request("not a run#1"), None);
        assert_eq!(run_of_request(&run_id.to_string()), None);
    }
}
