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

use std::collections::BTreeSet;
use std::sync::Arc;

use futures::FutureExt;
use futures::future::BoxFuture;
use seed_durable::{Harness, HarnessConfig, StopSignal, StoreState, TurnOutcome, TurnRequest};
use seed_events::{EventRole, NewEvent, RunStatus, SessionId};
use seed_projections::blocks::{ContextUsage, MemoryIndexEntry, TurnBlocks, render_turn_blocks};
use seed_projections::import::{
    ImportMode, RunView, SYNC_DOCUMENT, SyncDocument, answered_already, delegated_in_turn,
    plan_import,
};
use seed_projections::store_to_log::{events_above, stale_marks_above};
use seed_providers::{Provider, model_context_window};
use seed_store::{PlanCheck, Projection, RunRow, Store};

use seed_projections::continuation::SESSION_CONTINUATION_PROMPT;

use crate::bus::{Notification, Publisher, SeqRange};
use crate::crash::{CrashFs, CrashProvider};
use crate::logged_files::{LoggedFiles, RunCell, delivered_calls};
use crate::run_end::{
    EndRefused, REFUSED_WRITE, RunEnd, is_disk_full, record_end, refused_write_notice,
};
use crate::verb::{RunBinding, VerbContext};
use crate::verbs::VerbSet;
use crate::verbs::continue_session::CONTINUE_SESSION;

/// The runtime's clock for the harness's live-text throttle: tokio's, so that a simulation on
/// paused time throttles by virtual time, exactly as it did the last time the seed ran.
#[derive(Debug)]
struct RuntimeClock {
    origin: actix::clock::Instant,
}

impl Default for RuntimeClock {
    fn default() -> Self {
        RuntimeClock {
            origin: actix::clock::Instant::now(),
        }
    }
}

impl seed_durable::Clock for RuntimeClock {
    fn now(&self) -> std::time::Duration {
        self.origin.elapsed()
    }

    fn sleep(&self, duration: std::time::Duration) -> Option<BoxFuture<'static, ()>> {
        Some(actix::clock::sleep(duration).boxed())
    }
}

/// How long the partial text of a response waits, at most, for its commit to `pi.live`.
pub const LIVE_INTERVAL_DEFAULT: std::time::Duration = std::time::Duration::from_millis(100);

/// What every run of this process shares.
pub struct RunEnv {
    pub store: Store,
    pub provider: Arc<dyn Provider>,
    pub verbs: VerbSet,
    pub settings: RuntimeSettings,
    /// This process's id: leases and claimed runs carry it, so the next boot knows them.
    pub boot_id: String,
    pub clock: Arc<dyn Fn() -> i64 + Send + Sync>,
    pub publisher: Publisher,
    /// Creates sessions for running turns (continuations). Weak: the supervisor holds this env.
    pub supervisor: actix::WeakAddr<crate::supervisor::Supervisor>,
    /// The runs in flight on each queue, against its limit.
    pub slots: crate::queue::Slots,
}

impl std::fmt::Debug for RunEnv {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunEnv").finish_non_exhaustive()
    }
}

/// The agent's definition and the runtime's limits.
#[derive(Debug, Clone)]
pub struct RuntimeSettings {
    pub provider_name: String,
    pub model: String,
    /// Byte for byte the same from turn to turn: no clock, no counts.
    pub system_prompt: String,
    /// Runs of each queue in flight at once.
    pub interactive_runs_max: usize,
    pub background_runs_max: usize,
    /// Attempts before a run that keeps failing its session actor is failed for good.
    pub run_attempts_max: i64,
    /// Boot sweeps that may find a run cut off mid-turn and queue it again; the next one
    /// fails it instead, so that a run which kills its process each time it runs cannot
    /// crash the service at every boot.
    pub run_restarts_max: i64,
    /// Later passes an open plan may give a run, beyond its first turn.
    pub plan_passes_max: i64,
    /// How long a session actor stays in memory after its last run.
    pub session_idle: std::time::Duration,
    /// The partial text of a response in flight is committed to `pi.live` (and only then sent
    /// to subscribers) at most this long after it arrived.
    pub live_interval: std::time::Duration,
    pub utc_offset_minutes: i32,
    /// Where crash-injection tests stop the world; empty in a service.
    pub crash_points: crate::crash::CrashPoints,
    /// Context windows by model name, over the built-in table (a provider configuration's
    /// `context_windows`).
    pub context_windows: std::collections::BTreeMap<String, u64>,
    /// The window of a model neither the overrides nor the table know.
    pub context_window_default: Option<u64>,
}

impl RuntimeSettings {
    /// The model a session's runs ask: its override, or the runtime's model.
    pub fn session_model(&self, session: &seed_store::SessionRow) -> String {
        session
            .model_override
            .clone()
            .unwrap_or_else(|| self.model.clone())
    }
    /// The context window of `model`: the overrides, else the built-in table for this
    /// provider, else the default. One answer for `<context_usage>` and the API's meter.
    pub fn context_window(&self, model: &str) -> Option<u64> {
        self.context_windows
            .get(model)
            .copied()
            .or_else(|| model_context_window(&self.provider_name, model))
            .or(self.context_window_default)
    }
}

impl Default for RuntimeSettings {
    fn default() -> Self {
        RuntimeSettings {
            provider_name: "scripted".to_owned(),
            model: "scripted".to_owned(),
            system_prompt: "You are Seed's agent. Answer plainly; use verbs when they help."
                .to_owned(),
            interactive_runs_max: 64,
            background_runs_max: 16,
            run_attempts_max: 3,
            run_restarts_max: 5,
            plan_passes_max: 2,
            session_idle: std::time::Duration::from_secs(30),
            live_interval: LIVE_INTERVAL_DEFAULT,
            utc_offset_minutes: 0,
            crash_points: crate::crash::CrashPoints::default(),
            context_windows: std::collections::BTreeMap::new(),
            context_window_default: None,
        }
    }
}

/// A session's harness, kept open by its actor between runs so a run does not read and fold the
/// whole store again, with its tools: built once, and bound to each run in turn.
pub struct SessionHarness {
    harness: Harness<CrashFs<LoggedFiles>, CrashProvider>,
    binding: RunBinding,
    /// The run its commits belong to, set by each run.
    run: RunCell,
    /// Whom the tools were chosen for: (a delegated child's session, a typed run).
    tools_for: (bool, bool),
}

impl std::fmt::Debug for SessionHarness {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionHarness")
            .field("harness", &self.harness)
            .finish_non_exhaustive()
    }
}

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
pub async fn execute_run(
    env: &RunEnv,
    run: &RunRow,
    stop: StopSignal,
    harness: &mut Option<SessionHarness>,
) -> RunEnd {
    let session_id = run.session_id;
    let outcome = turn(env, run, stop, harness).await;
    let now = (env.clock)();
    let (end, plan_check, notice) = match outcome {
        Ok((end, plan_check)) => {
            let notice = end.notice(run.id, now);
            (end, plan_check, notice)
        }
        Err(error) if is_disk_full(&error) => {
            let end = RunEnd::failed(REFUSED_WRITE);
            let notice = refused_write_notice(run.id, now);
            (end, None, Some(notice))
        }
        // A deleted session keeps no log to write a notice to.
        Err(error @ TurnError::SessionGone) => (RunEnd::failed(error), None, None),
        Err(error) => {
            let end = RunEnd::failed(error);
            let notice = end.notice(run.id, now);
            (end, None, notice)
        }
    };
    // A delete stops the turn under it; the spec has that turn end with an error, not as a
    // person's stop.
    let end = if end.status == RunStatus::Canceled
        && matches!(env.store.get_session(session_id).await, Ok(None))
    {
        RunEnd::failed(TurnError::SessionGone)
    } else {
        end
    };
    if let Some(reason) = end.failure_reason() {
        tracing::warn!(session_id = %session_id, run_id = %run.id, reason, "a run failed");
    }
    env.settings
        .crash_points
        .reach(crate::crash::points::RUN_BEFORE_FINISH)
        .await;
    loop {
        match record_end(env, run, end.clone(), plan_check.clone(), notice.clone()).await {
            Ok(end) => return end,
            Err(EndRefused::DiskFull) => {
                *harness = None;
                tracing::warn!(
                    run_id = %run.id,
                    "the disk is full: the run's end is written again shortly"
                );
                actix::clock::sleep(crate::session::DISK_FULL_PAUSE).await;
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

async fn turn(
    env: &RunEnv,
    run: &RunRow,
    stop: StopSignal,
    kept: &mut Option<SessionHarness>,
) -> Result<(RunEnd, Option<PlanCheck>), TurnError> {
    let store = &env.store;
    let session_id = run.session_id;
    // Everything the turn reads before it starts, in one read; with a kept harness, the log's
    // pending events past its mark too.
    let kept_mark = kept
        .as_ref()
        .filter(|kept| !kept.harness.is_closed())
        .map(|kept| sync_document(kept.harness.state()).mark);
    let seed_store::TurnView {
        session,
        n_children: n_children_before,
        max_pi_entry_id: view_max_pi_entry_id,
        queued_event_ids,
        memory,
        pending: view_pending,
    } = store
        .turn_view(session_id, run.id, kept_mark)
        .await?
        .ok_or(TurnError::SessionGone)?;
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
        supervisor: env.supervisor.upgrade(),
    };
    // Continuing is possible in a top-level session's run, never in a delegated child.
    let can_continue = env.verbs.names().contains(&CONTINUE_SESSION)
        && session.parent_session_id.is_none()
        && run.parent_run_id.is_none()
        && !run.typed;
    let tools_for = (session.parent_session_id.is_some(), run.typed);
    let tools = |binding: &RunBinding| {
        env.verbs.tools(
            binding,
            tools_for.0,
            tools_for.1,
            &env.settings.crash_points,
        )
    };
    let (mut harness, binding, run_cell) = match kept.take() {
        // A harness kept from an earlier run serves only while the session's model and
        // reasoning level are the ones it was opened with (a person may have changed them).
        Some(SessionHarness {
            mut harness,
            binding,
            run: run_cell,
            tools_for: kept_for,
        }) if !harness.is_closed()
            && harness.config().model == env.settings.session_model(&session)
            && harness.config().reasoning == session_reasoning(&session) =>
        {
            binding.set(context);
            run_cell.set(run.id);
            if kept_for != tools_for {
                harness.set_tools(tools(&binding));
            }
            (harness, binding, run_cell)
        }
        _ => {
            let binding = RunBinding::new(context);
            let run_cell = RunCell::new(run.id);
            let provider =
                CrashProvider::new(Arc::clone(&env.provider), env.settings.crash_points.clone());
            let system_prompt = if can_continue {
                format!(
                    "{}\n\n{SESSION_CONTINUATION_PROMPT}",
                    env.settings.system_prompt
                )
            } else {
                env.settings.system_prompt.clone()
            };
            let config = HarnessConfig {
                session_id: Some(session_id.to_string()),
                live_interval: env.settings.live_interval,
                reasoning: session_reasoning(&session),
                ..HarnessConfig::new(env.settings.session_model(&session), system_prompt)
            };
            let files = CrashFs::new(
                LoggedFiles::new(
                    store.session_files(session_id),
                    env.publisher.clone(),
                    Arc::clone(&env.clock),
                    run_cell.clone(),
                ),
                env.settings.crash_points.clone(),
            );
            let harness = Harness::open(files, provider, tools(&binding), config)
                .await?
                .with_clock(Arc::new(RuntimeClock::default()));
            (harness, binding, run_cell)
        }
    };

    // On open: marks the store cannot back are cleared, and every entry the log lacks is
    // projected again (the store's own commits write their entries' events; this is the net
    // for a store written before that, or restored from elsewhere), so nothing is lost and
    // nothing repeated.
    let store_last = harness.state().entries.last().map(|entry| entry.id);
    let mut log_max = view_max_pi_entry_id.map(|id| id.max(0) as u64);
    let mut view_pending = view_pending;
    if let Some(above) = stale_marks_above(store_last, log_max) {
        store
            .clear_pi_entry_ids_above(session_id, above as i64)
            .await?;
        log_max = max_pi_entry_id(store, session_id).await?;
        // The events whose marks were cleared are pending now.
        view_pending = None;
    }
    project_what_the_log_lacks(env, run, harness.state(), log_max).await?;

    // A turn another run left unsettled is given up (its calls' restart results go to the log
    // with the commit that writes them), and the context rebuilt.
    let rebuild = harness.abort_unsettled(&request_id).await?;

    let sync = sync_document(harness.state());
    let own: BTreeSet<_> = run.user_event_ids.iter().copied().collect();
    let waiting: BTreeSet<_> = queued_event_ids
        .into_iter()
        .filter(|id| !own.contains(id))
        .collect();
    let view = RunView {
        own_event_ids: &run.user_event_ids,
        waiting_event_ids: &waiting,
        attached: &seed_projections::import::NO_FILES,
    };
    // An append or an edit needs only the events past the mark that came from no store entry,
    // those left out before, and the run's own messages: read just those. A rebuild needs the
    // whole log.
    let pending = match view_pending {
        Some(pending) if kept_mark == Some(sync.mark) => pending,
        _ => store.pending_events(session_id, sync.mark).await?,
    };
    let read_through = pending.through_seq;
    let mut pending = pending.events;
    // Most turns need no more: their own message is past the mark and nothing was left out.
    let own_missing: Vec<_> = run
        .user_event_ids
        .iter()
        .filter(|id| !pending.iter().any(|event| event.id == **id))
        .copied()
        .collect();
    let earlier = if sync.left_out.is_empty() && own_missing.is_empty() {
        Vec::new()
    } else {
        store
            .read_events_at(session_id, sync.left_out.clone(), own_missing)
            .await?
    };
    let first_pending = pending.first().map_or(i64::MAX, |event| event.seq);
    pending.splice(
        0..0,
        earlier
            .into_iter()
            .filter(|event| event.seq < first_pending),
    );
    // The files the imported messages name, as the session's model is shown them.
    let takes_images = env
        .provider
        .takes_images(&env.settings.session_model(&session));
    let attached =
        crate::attachments::read_attached(store, session_id, &pending, takes_images).await?;
    let with_files = RunView {
        attached: &attached,
        ..view
    };
    let mut plan = plan_import(&pending, harness.state(), &sync, with_files, rebuild);
    if plan.mode == ImportMode::Rebuild {
        let log = store
            .read_events(session_id, 1, i64::MAX, usize::MAX)
            .await?;
        let attached =
            crate::attachments::read_attached(store, session_id, &log, takes_images).await?;
        let with_files = RunView {
            attached: &attached,
            ..view
        };
        plan = plan_import(&log, harness.state(), &sync, with_files, rebuild);
    }
    // The log was read through this seq: what it held up to there and is not pending came from
    // the store, so the next turn need not look at it again.
    plan.sync.mark = plan.sync.mark.max(read_through);

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
    let blocks = turn_blocks(
        env,
        &session,
        memory,
        harness.state(),
        n_children_before,
        can_continue,
        first_estimate,
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
    };
    // Each commit of the turn writes its entries' events to the log in its own transaction.
    let outcome = match answered.clone() {
        Some((entry_id, message)) => Ok(TurnOutcome::Answered { entry_id, message }),
        None => harness.run_turn(turn).await,
    };
    let continued = continued_by(env, session_id, harness.state(), &request_id).await?;
    let delegated = delegated_in_turn(harness.state(), &request_id);
    if outcome.is_ok() && !harness.is_closed() {
        *kept = Some(SessionHarness {
            harness,
            binding,
            run: run_cell,
            tools_for,
        });
    }
    if session.title_source == seed_store::TitleSource::None {
        name_if_untitled(env, session_id).await;
    }

    let mut plan_check = None;
    let end = match outcome? {
        TurnOutcome::Answered { message, .. } => {
            // An open plan may owe the run a later pass; its end decides, from the plan as it
            // stands then. (A run another turn answered for owes none: that turn's run does.)
            if run.pass < env.settings.plan_passes_max && answered.is_none() {
                let (run_id, now) = (run.id, (env.clock)());
                plan_check = Some(PlanCheck {
                    session_id,
                    notice: std::sync::Arc::new(move |plan| plan_notice(plan, run_id, now)),
                });
            }
            let mut result = serde_json::json!({ "answer": message.text() });
            if let Some(request_id) = answered_by {
                // The request (`run#pass`) whose turn took it in and answered.
                result["answered_by"] = serde_json::json!(request_id);
            }
            RunEnd {
                status: RunStatus::Succeeded,
                result,
            }
        }
        TurnOutcome::Ended { reason } => {
            if let Some(edge) = continued {
                // The successor answers; nothing is owed here any more, so no obligations.
                RunEnd {
                    status: RunStatus::Succeeded,
                    result: serde_json::json!({
                        "continued_to_session_id": edge.successor_session_id,
                        "continuation_id": edge.id,
                    }),
                }
            } else if run.typed
                && let Some(returned) = returned_result(
                    &store
                        .read_events(session_id, 1, i64::MAX, usize::MAX)
                        .await?,
                    run,
                )
            {
                RunEnd {
                    status: RunStatus::Succeeded,
                    result: serde_json::json!({ "returned": returned }),
                }
            } else if delegated {
                // This pass delegated: park on the children, or take the next pass at once
                // when they have already ended (read from the store's entries, so that a pass
                // adopted after a crash that came after its child started parks too).
                let parked = store.park_run(run.id, (env.clock)()).await?;
                RunEnd {
                    status: match parked {
                        seed_store::ParkOutcome::Parked => RunStatus::Parked,
                        seed_store::ParkOutcome::Resumed => RunStatus::Queued,
                    },
                    result: serde_json::json!({ "ended": reason }),
                }
            } else {
                RunEnd {
                    status: RunStatus::Succeeded,
                    result: serde_json::json!({ "ended": reason }),
                }
            }
        }
        TurnOutcome::Stopped { partial_text } => {
            // What streamed stays in the log as an assistant message, after what the turn
            // committed; the next turn imports it, so the model knows what it had said.
            if !partial_text.is_empty() {
                let mut event = NewEvent::message(
                    EventRole::Assistant,
                    "agent",
                    serde_json::json!({ "text": partial_text }),
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
            RunEnd {
                status: RunStatus::Canceled,
                result: serde_json::json!({ "stopped": true }),
            }
        }
        // The reason in plain words: people, the log and the next turn's model read it.
        TurnOutcome::Failed { error, .. } => RunEnd::failed(error.reason()),
    };
    Ok((end, plan_check))
}

/// The session's reasoning level, as a person set it (`None`: the provider's configuration).
fn session_reasoning(session: &seed_store::SessionRow) -> Option<seed_providers::ReasoningLevel> {
    session
        .reasoning_level
        .as_deref()
        .and_then(seed_providers::ReasoningLevel::parse)
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

/// The notice an open plan with unfinished steps gives a run's end, which then takes a later
/// pass (at most `plan_passes_max`, counted by the caller) instead of ending; `None` when the
/// plan (`None`: the session has none) has no unfinished step.
fn plan_notice(
    plan: Option<&serde_json::Value>,
    run_id: seed_events::RunId,
    now_ms: i64,
) -> Option<NewEvent> {
    let open_steps: Vec<&str> = seed_projections::continuation::unfinished_steps(plan)
        .filter_map(|step| step.get("step").and_then(|s| s.as_str()))
        .collect();
    if open_steps.is_empty() {
        return None;
    }
    Some(NewEvent {
        kind: "notice".to_owned(),
        role: Some(EventRole::System),
        actor: Some("system".to_owned()),
        content: serde_json::json!({
            "text": format!(
                "The plan has {} unfinished step(s): {}. Continue with them, or update the plan.",
                open_steps.len(),
                open_steps.join("; ")
            )
        }),
        meta: serde_json::json!({ "obligation": "plan" }),
        run_id: Some(run_id),
        pi_entry_id: None,
        created_at_ms: now_ms,
    })
}

/// What a typed child returned: the newest `return_result` result of this run in the log.
fn returned_result(log: &[seed_events::SessionEvent], run: &RunRow) -> Option<serde_json::Value> {
    log.iter().rev().find_map(|event| {
        let content = &event.content;
        (event.kind == "tool_result"
            && event.run_id == Some(run.id)
            && content.get("tool_name").and_then(|n| n.as_str()) == Some("return_result"))
        .then(|| {
            let text = content
                .get("content")
                .and_then(|c| c.as_str())
                .unwrap_or_default();
            serde_json::from_str(text)
                .unwrap_or_else(|_| serde_json::Value::String(text.to_owned()))
        })
    })
}

/// The edge this turn's continue_session call made, if the turn ended by continuing: a
/// continue_session result of this turn and the edge of its call (an interrupted result too:
/// the call may have created its successor before a crash cut it off).
async fn continued_by(
    env: &RunEnv,
    session_id: SessionId,
    state: &StoreState,
    request_id: &str,
) -> Result<Option<seed_store::ContinuationRow>, TurnError> {
    // The kind of entry first: it rules out nearly every entry of a long session at once.
    let call_ids: Vec<&str> = state
        .entries
        .iter()
        .rev()
        .filter_map(|entry| match &entry.body {
            seed_durable::EntryBody::ToolResult { message, .. }
                if message.tool_name == CONTINUE_SESSION
                    && entry.body.request_id() == Some(request_id) =>
            {
                Some(message.tool_call_id.as_str())
            }
            _ => None,
        })
        .collect();
    for call_id in call_ids {
        if let Some(edge) = env.store.find_continuation(session_id, call_id).await? {
            return Ok(Some(edge));
        }
    }
    Ok(None)
}

/// The session's import mark and what it left out, as the store holds them.
fn sync_document(state: &StoreState) -> SyncDocument {
    state.document(SYNC_DOCUMENT).unwrap_or_default()
}

/// The highest store entry the session's log names.
async fn max_pi_entry_id(store: &Store, session_id: SessionId) -> Result<Option<u64>, TurnError> {
    Ok(store
        .max_pi_entry_id(session_id)
        .await?
        .map(|id| id.max(0) as u64))
}

/// Appends the events of every entry above `log_max` (the highest entry the log names) in one
/// transaction, and says so to subscribers. Each commit of a turn writes its own entries'
/// events; this is the net for what a store holds that the log lacks (a store written before,
/// or restored from elsewhere).
async fn project_what_the_log_lacks(
    env: &RunEnv,
    run: &RunRow,
    state: &StoreState,
    log_max: Option<u64>,
) -> Result<(), TurnError> {
    let events = events_above(&state.entries, log_max, Some(run.id), (env.clock)());
    if events.is_empty() {
        return Ok(());
    }
    let projection = Projection {
        session_id: run.session_id,
        delivered_calls: delivered_calls(&events),
        events,
    };
    let written = env.store.append_projection(projection).await?;
    env.publisher.publish(Notification::SessionChanged {
        session_id: run.session_id,
        reason: "events",
        seqs: SeqRange::of(&written),
    });
    Ok(())
}

/// This turn's state blocks: rendered once, sent with every request of the turn, never stored.
fn turn_blocks(
    env: &RunEnv,
    session: &seed_store::SessionRow,
    memory: Vec<seed_store::MemoryFileRow>,
    state: &StoreState,
    n_children: usize,
    can_continue: bool,
    first_estimate: impl FnOnce() -> u64,
) -> Vec<seed_providers::UserMessage> {
    let memory_index = memory
        .into_iter()
        .map(|file| MemoryIndexEntry {
            path: file.path,
            size_bytes: file.size_bytes,
            updated_at_ms: file.updated_at_ms,
        })
        .collect();
    let window = env
        .settings
        .context_window(&env.settings.session_model(session));
    let last_usage = state
        .entries
        .iter()
        .rev()
        .find_map(|entry| match &entry.body {
            seed_durable::EntryBody::Assistant { message, .. } => Some(message.usage),
            _ => None,
        });
    // `<context_usage>` only where continuing is possible: it is advice about continuing.
    // The newest answer's usage, as its server counted it or as the harness estimated it
    // for a server that did not; before any answer, an estimate of this turn's request.
    let context = window
        .filter(|_| can_continue)
        .map(|window| match last_usage {
            Some(usage) => ContextUsage {
                tokens: usage.prompt_tokens(),
                window,
                estimated: usage.estimated,
            },
            None => ContextUsage {
                tokens: first_estimate(),
                window,
                estimated: true,
            },
        });
    let blocks = TurnBlocks {
        memory_index,
        // Shown once the run has started a child.
        delegation: (n_children > 0).then(|| {
            let used = u32::try_from(n_children).unwrap_or(u32::MAX);
            (used, crate::verbs::delegate::DELEGATION_BUDGET_PER_RUN)
        }),
        plan: session.plan.clone(),
        context,
        status: (session.title.clone(), session.description.clone()),
        now_ms: (env.clock)(),
        utc_offset_minutes: env.settings.utc_offset_minutes,
    };
    render_turn_blocks(&blocks)
}

/// The fallback namer: an untitled session is named from its first message. It never
/// overrides a title the agent or the user gave.
async fn name_if_untitled(env: &RunEnv, session_id: SessionId) {
    let log = match env.store.read_events(session_id, 1, 64, 64).await {
        Ok(log) => log,
        Err(error) => {
            tracing::debug!(%session_id, %error, "fallback namer");
            return;
        }
    };
    let Some(first) = log
        .iter()
        .find(|event| event.kind == "message" && event.role == Some(EventRole::User))
    else {
        return;
    };
    let text = first
        .content
        .get("text")
        .and_then(|t| t.as_str())
        .unwrap_or_default();
    let title: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    let title: String = title.chars().take(60).collect();
    if title.is_empty() {
        return;
    }
    if let Err(error) = env
        .store
        .name_session_if_untitled(session_id, title, (env.clock)())
        .await
    {
        tracing::debug!(%session_id, %error, "fallback namer");
    }
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
