//! Opening a run's harness: the one its session's actor kept from the last run, rebound to this
//! run, while it still fits the session; otherwise a new one over the session's durable files
//! (each commit writing its entries' events to the log), the tapped provider (crash points)
//! and the verbs as tools.

use std::sync::Arc;

use futures::FutureExt;
use futures::future::BoxFuture;
use seed_durable::{Harness, HarnessConfig};
use seed_projections::continuation::SESSION_CONTINUATION_PROMPT;
use seed_store::RunRow;

use super::TurnError;
use crate::crash::{CrashFs, CrashProvider};
use crate::env::RunEnv;
use crate::logged_files::{LoggedFiles, RunCell};
use crate::verb::{RunBinding, TurnEffect, VerbContext};

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

/// The harness a run works with: durable files that write the log, the tapped provider.
pub(super) type RunHarness = Harness<CrashFs<LoggedFiles>, CrashProvider>;

/// A session's harness, kept open by its actor between runs so a run does not read and fold the
/// whole store again, with its tools: built once, and bound to each run in turn.
pub struct SessionHarness {
    pub(super) harness: RunHarness,
    pub(super) binding: RunBinding,
    /// The run its commits belong to, set by each run.
    pub(super) run: RunCell,
    /// Whom the tools were chosen for: (a delegated child's session, a typed run).
    pub(super) tools_for: (bool, bool, u64),
    /// On a database several nodes share: the session's newest durable line when the harness
    /// was kept, at the end of its run (`None`: not known, and the next run opens the session
    /// afresh).
    pub(super) newest_line: Option<i64>,
}

impl std::fmt::Debug for SessionHarness {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionHarness")
            .field("harness", &self.harness)
            .finish_non_exhaustive()
    }
}

/// The session's reasoning level, as a person set it (`None`: the provider's configuration).
fn session_reasoning(session: &seed_store::SessionRow) -> Option<seed_providers::ReasoningLevel> {
    session
        .reasoning_level
        .as_deref()
        .and_then(seed_providers::ReasoningLevel::parse)
}

/// The harness for `run`: `kept` (taken) when it is open and was opened with the session's
/// model and reasoning level, its tools rebound to `context`'s run (and chosen again when the
/// run needs other tools); otherwise a new one opened over the session's store.
pub(super) async fn open_harness(
    env: &RunEnv,
    run: &RunRow,
    session: &seed_store::SessionRow,
    kept: &mut Option<SessionHarness>,
    context: VerbContext,
    can_continue: bool,
) -> Result<SessionHarness, TurnError> {
    // A delegated child's session, a typed run, and the verb set's generation (an MCP server's
    // tools change while the runtime runs).
    let tools_for = (
        session.parent_session_id.is_some(),
        run.typed,
        env.verbs.generation(),
    );
    let tools = |binding: &RunBinding| {
        env.verbs.tools(
            binding,
            tools_for.0,
            tools_for.1,
            &env.settings.crash_points,
        )
    };
    match kept.take() {
        // A harness kept from an earlier run serves only while the session's model and
        // reasoning level are the ones it was opened with (a person may have changed them).
        Some(SessionHarness {
            mut harness,
            binding,
            run: run_cell,
            tools_for: kept_for,
            newest_line: _,
        }) if !harness.is_closed()
            && harness.config().model == env.settings.session_model(session)
            && harness.config().reasoning == session_reasoning(session) =>
        {
            binding.set(context);
            run_cell.set(run.id);
            if kept_for != tools_for {
                harness.set_tools(tools(&binding));
            }
            Ok(SessionHarness {
                harness,
                binding,
                run: run_cell,
                tools_for,
                newest_line: None,
            })
        }
        _ => {
            let session_id = run.session_id;
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
                reasoning: session_reasoning(session),
                system: env.settings.provider_name.clone(),
                trace_content: env.settings.traces.content,
                ..HarnessConfig::new(env.settings.session_model(session), system_prompt)
            };
            let files = CrashFs::new(
                LoggedFiles::new(
                    env.store.session_files(session_id),
                    env.publisher.clone(),
                    Arc::clone(&env.clock),
                    run_cell.clone(),
                    env.verbs.names_with(TurnEffect::Delegates),
                ),
                env.settings.crash_points.clone(),
            );
            let harness = Harness::open(files, provider, tools(&binding), config)
                .await?
                .with_clock(Arc::new(RuntimeClock::default()));
            Ok(SessionHarness {
                harness,
                binding,
                run: run_cell,
                tools_for,
                newest_line: None,
            })
        }
    }
}
