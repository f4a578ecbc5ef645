//! The wake-ups benchmark (`runtime schedules 100000`): that many sessions each have one
//! wake-up, due spread evenly over a minute, and the runtime's scheduler fires them on one
//! node. Measured: wake-ups fired per second while they come due, how late each fired (p50,
//! p99, from its notice), and the process CPU per wake-up. Each firing queues a background run;
//! the model hangs and one background run may be in flight, so what is measured is the
//! firing, not the turns it starts.

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::bail;
use futures::StreamExt;
use seed_actors::{Runtime, RuntimeSettings};
use seed_events::ScheduleId;
use seed_events::schedule::When;
use seed_providers::{ScriptedProvider, ScriptedStep};
use seed_store::{Config, NewSchedule};

use crate::runtime_bench::{session, store_with_sessions, thread_cpu};

/// Store writes in flight at once while the wake-ups are set.
const SETUP_CONCURRENCY: usize = 512;
/// The span the wake-ups come due over.
const SPAN_MS: i64 = 60_000;
/// The longest the scheduler may take past the span before the bench calls it a hang.
const HANG_GUARD: Duration = Duration::from_secs(180);

/// What one run of [`fire_rate`] saw.
#[derive(Debug, Clone)]
pub struct SchedulesMeasurement {
    pub n_wakeups: usize,
    /// Wake-ups fired per second, from the first one due to the last one fired.
    pub fired_per_second: f64,
    /// How late a wake-up fired, in milliseconds: the median and the 99th percentile.
    pub late_p50_ms: f64,
    pub late_p99_ms: f64,
    /// Process CPU (every thread) per wake-up, in microseconds, from the runtime's start to
    /// the last firing.
    pub cpu_per_wakeup_us: f64,
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |elapsed| {
            i64::try_from(elapsed.as_millis()).unwrap_or(i64::MAX)
        })
}

/// `n_wakeups` sessions, each with a one-shot wake-up due within a minute that starts
/// `lead` after the wake-ups are set, in a fresh store at `config.path` (the caller removed
/// any old one); the runtime starts then and its scheduler fires them all.
pub fn fire_rate(
    config: &Config,
    n_wakeups: usize,
    lead: Duration,
) -> anyhow::Result<SchedulesMeasurement> {
    actix::System::new().block_on(async {
        let store = store_with_sessions(config, n_wakeups, false).await?;
        let base_ms = now_ms() + i64::try_from(lead.as_millis()).unwrap_or(0);
        let step_ms = SPAN_MS as f64 / n_wakeups.max(1) as f64;
        let mut writes = futures::stream::iter(0..n_wakeups)
            .map(|idx| {
                let store = store.clone();
                let due_ms = base_ms + (idx as f64 * step_ms) as i64;
                async move {
                    let schedule = NewSchedule {
                        id: ScheduleId::from_u128(idx as u128 + 1),
                        session_id: session(idx),
                        when: When::At { ms: due_ms },
                        note: "the nightly report".to_owned(),
                        first_due_ms: due_ms,
                        created_by_call_id: None,
                        created_at_ms: 0,
                    };
                    store.add_schedule(schedule, None).await?;
                    anyhow::Ok(())
                }
            })
            .buffer_unordered(SETUP_CONCURRENCY);
        while let Some(written) = writes.next().await {
            written?;
        }
        drop(writes);
        if now_ms() > base_ms {
            bail!("setting the wake-ups took longer than the lead of {lead:?}");
        }

        let model = ScriptedProvider::from_fn(|_, _| ScriptedStep::Hang {
            text: String::new(),
        })
        .without_recording();
        let cpu_before = thread_cpu()?;
        let (runtime, _): (Runtime, _) = Runtime::start(
            store.clone(),
            Arc::new(model),
            Vec::new(),
            RuntimeSettings {
                background_runs_max: 1,
                ..RuntimeSettings::default()
            },
            "bench".to_owned(),
            Arc::new(now_ms),
        )
        .await?;
        let started = Instant::now();
        loop {
            if store.next_schedule_due().await?.is_none() {
                break;
            }
            if started.elapsed() > HANG_GUARD + Duration::from_millis(SPAN_MS as u64) {
                bail!("the wake-ups did not all fire within {HANG_GUARD:?} past their span");
            }
            actix::clock::sleep(Duration::from_millis(50)).await;
        }
        let cpu: Duration = thread_cpu()?
            .into_iter()
            .map(|(name, after)| {
                after.saturating_sub(cpu_before.get(&name).copied().unwrap_or_default())
            })
            .sum();
        drop(runtime);

        // Each notice says when it was due and holds when it fired.
        let mut late_ms = Vec::with_capacity(n_wakeups);
        let mut last_fired_ms = i64::MIN;
        let mut reads = futures::stream::iter(0..n_wakeups)
            .map(|idx| {
                let store = store.clone();
                async move { store.read_events(session(idx), 1, 1, 1).await }
            })
            .buffer_unordered(SETUP_CONCURRENCY);
        while let Some(events) = reads.next().await {
            let events = events?;
            let Some(notice) = events.first() else {
                bail!("a wake-up left no notice");
            };
            let Some(due_ms) = notice.meta["scheduled_wakeup"]["due_at"].as_i64() else {
                bail!("a notice without its due time: {notice:?}");
            };
            late_ms.push(notice.created_at_ms - due_ms);
            last_fired_ms = last_fired_ms.max(notice.created_at_ms);
        }
        late_ms.sort_unstable();
        let percentile = |p: f64| late_ms[((late_ms.len() - 1) as f64 * p) as usize] as f64;
        Ok(SchedulesMeasurement {
            n_wakeups,
            fired_per_second: n_wakeups as f64 * 1e3 / (last_fired_ms - base_ms).max(1) as f64,
            late_p50_ms: percentile(0.5),
            late_p99_ms: percentile(0.99),
            cpu_per_wakeup_us: cpu.as_secs_f64() * 1e6 / n_wakeups.max(1) as f64,
        })
    })
}
