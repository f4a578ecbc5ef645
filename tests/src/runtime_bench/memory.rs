//! What sessions cost in resident memory: idle ([`idle_memory`]) and with a turn in flight
//! ([`active_memory`]).

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use seed_events::{RunId, RunStatus};
use seed_providers::{ScriptedProvider, ScriptedStep};
use seed_store::Config;

use super::{HANG_GUARD, provider, session, start_runtime, store_with_sessions, user_message};

/// What the model of [`active_memory`] streams before it hangs.
const HANGING_TEXT: &str = "Let me think about that for a moment";

/// Resident memory of this process, in KiB (`VmRSS` of `/proc/self/status`).
pub fn rss_kib() -> anyhow::Result<u64> {
    let status =
        std::fs::read_to_string("/proc/self/status").context("reading /proc/self/status")?;
    let line = status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .context("no VmRSS in /proc/self/status")?;
    let kib = line.trim().trim_end_matches("kB").trim();
    kib.parse()
        .with_context(|| format!("VmRSS of {line:?} is no number"))
}

/// Resident memory before and after, in KiB, over `n_sessions` sessions.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct MemoryMeasurement {
    pub n_sessions: usize,
    pub before_kib: u64,
    pub after_kib: u64,
    /// The sessions with an actor in memory when `after_kib` was read.
    pub n_active: usize,
    /// From the first message sent to the last turn reaching the model (active sessions), or
    /// the runtime's start (idle ones).
    pub ramp: Duration,
}

impl MemoryMeasurement {
    pub fn kib_per_session(&self) -> f64 {
        self.after_kib.saturating_sub(self.before_kib) as f64 / self.n_sessions.max(1) as f64
    }
}

/// Resident memory grown by storing `n_sessions` idle sessions (a session row and one user
/// message each; no runs) in a fresh store at `config.path` and starting a runtime over them.
/// `before` is read with the store open and empty.
pub fn idle_memory(config: &Config, n_sessions: usize) -> anyhow::Result<MemoryMeasurement> {
    actix::System::new().block_on(async {
        let before_kib = rss_kib()?;
        let store = store_with_sessions(config, n_sessions, true).await?;
        let started = Instant::now();
        let runtime = start_runtime(&store, Arc::new(provider()), n_sessions, "bench").await?;
        let ramp = started.elapsed();
        // Let the queue's first look for runs (there are none) finish.
        actix::clock::sleep(Duration::from_millis(200)).await;
        let after_kib = rss_kib()?;
        Ok(MemoryMeasurement {
            n_sessions,
            before_kib,
            after_kib,
            n_active: runtime.n_active_sessions(),
            ramp,
        })
    })
}

/// Resident memory grown while `n_sessions` sessions each have a turn in flight: the model
/// streams a few words and hangs. `before` is read with the sessions stored and the runtime
/// started; `after` once every session has an actor and every turn has reached the model.
/// The turns are then stopped, and must end `canceled`.
pub fn active_memory(config: &Config, n_sessions: usize) -> anyhow::Result<MemoryMeasurement> {
    actix::System::new().block_on(async {
        let store = store_with_sessions(config, n_sessions, false).await?;
        let model = ScriptedProvider::from_fn(|_, _| ScriptedStep::Hang {
            text: HANGING_TEXT.to_owned(),
        })
        .without_recording();
        let runtime = start_runtime(&store, Arc::new(model.clone()), n_sessions, "bench").await?;
        actix::clock::sleep(Duration::from_millis(100)).await;
        let before_kib = rss_kib()?;

        let started = Instant::now();
        let sends = (0..n_sessions).map(|idx| {
            let runtime = runtime.clone();
            async move {
                let (_, run_id) = runtime
                    .send_message(session(idx), &user_message(idx))
                    .await?;
                anyhow::Ok(run_id)
            }
        });
        let run_ids = futures::future::join_all(sends)
            .await
            .into_iter()
            .collect::<anyhow::Result<Vec<RunId>>>()?;
        while runtime.n_active_sessions() < n_sessions || model.n_requests() < n_sessions {
            if started.elapsed() > HANG_GUARD {
                bail!(
                    "after {HANG_GUARD:?}, {} of {n_sessions} sessions are active and {} turns \
                     reached the model",
                    runtime.n_active_sessions(),
                    model.n_requests()
                );
            }
            actix::clock::sleep(Duration::from_millis(1)).await;
        }
        let ramp = started.elapsed();
        // Let the streamed text settle (its `pi.live` writes and notifications).
        actix::clock::sleep(Duration::from_millis(200)).await;
        let after_kib = rss_kib()?;
        let n_active = runtime.n_active_sessions();

        for idx in 0..n_sessions {
            if !runtime.stop_session(session(idx)).await {
                bail!("session {} had no turn in flight to stop", session(idx));
            }
        }
        let waits = run_ids.iter().map(|&run_id| runtime.wait_for_run(run_id));
        let runs = actix::clock::timeout(HANG_GUARD, futures::future::join_all(waits))
            .await
            .map_err(|_| anyhow::anyhow!("the stopped runs did not end within {HANG_GUARD:?}"))?;
        for run in runs {
            let run = run?;
            if run.status != RunStatus::Canceled {
                bail!("a stopped run ended {run:?}");
            }
        }
        Ok(MemoryMeasurement {
            n_sessions,
            before_kib,
            after_kib,
            n_active,
            ramp,
        })
    })
}
