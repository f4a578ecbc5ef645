//! The boot sweep over runs a dead boot left `running` ([`boot_sweep_time`]).

use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use futures::StreamExt;
use seed_events::{EventRole, NewEvent, Queue, RunId};
use seed_store::{Config, LeaseOutcome};

use super::{SETUP_CONCURRENCY, session, store_with_sessions, user_message};

/// What one boot sweep did and how long it took.
#[derive(Debug, Clone)]
pub struct SweepMeasurement {
    pub elapsed: Duration,
    pub report: seed_actors::BootReport,
}

/// Leaves `n_runs` runs `running`, each in a session of its own whose lease is held by
/// "dead-boot", in a fresh store at `config.path` (the caller removed any old one), then times
/// the boot sweep of "new-boot" over them. Every run must be requeued and every lease released.
pub fn boot_sweep_time(config: &Config, n_runs: usize) -> anyhow::Result<SweepMeasurement> {
    futures::executor::block_on(async {
        let store = store_with_sessions(config, n_runs, false).await?;
        let now = 1_800_000_000_000;
        let mut sends = futures::stream::iter(0..n_runs)
            .map(|idx| {
                let store = store.clone();
                async move {
                    let event = NewEvent::message(
                        EventRole::User,
                        "user",
                        serde_json::json!({ "text": user_message(idx) }),
                        now,
                    );
                    store
                        .send_user_message(
                            session(idx),
                            event,
                            RunId::new_v7(),
                            Queue::Interactive,
                            now,
                            None,
                        )
                        .await
                }
            })
            .buffer_unordered(SETUP_CONCURRENCY);
        while let Some(sent) = sends.next().await {
            sent?;
        }
        let mut claims = futures::stream::iter(0..n_runs)
            .map(|_| {
                let store = store.clone();
                async move {
                    let run = store
                        .claim_next_run(Queue::Interactive, "dead-boot", now)
                        .await?
                        .context("fewer runs queued than sent")?;
                    match store
                        .acquire_lease(run.session_id, "dead-boot", Some(run.id), now)
                        .await?
                    {
                        LeaseOutcome::Acquired(_) => anyhow::Ok(()),
                        LeaseOutcome::HeldBy(lease) => bail!("the lease is held: {lease:?}"),
                    }
                }
            })
            .buffer_unordered(SETUP_CONCURRENCY);
        while let Some(claimed) = claims.next().await {
            claimed?;
        }
        let started = Instant::now();
        let restarts_max = seed_actors::RuntimeSettings::default().run_restarts_max;
        let report =
            seed_actors::runtime::boot_sweep(&store, "new-boot", now + 1, restarts_max).await?;
        let elapsed = started.elapsed();
        if report.n_runs_requeued != n_runs || report.n_leases_released != n_runs {
            bail!("the boot sweep over {n_runs} runs did {report:?}");
        }
        Ok(SweepMeasurement { elapsed, report })
    })
}
