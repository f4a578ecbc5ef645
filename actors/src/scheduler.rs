//! The scheduler: fires the wake-ups sessions scheduled for themselves. It sleeps until the
//! soonest is due (a second at most, so a wake-up set meanwhile is seen in time), has the
//! store fire every due one (`Store::fire_due_schedules`: the notice, the background run and
//! the advance in one transaction), publishes the sessions' new events and wakes the runs
//! queue, which claims the runs like any other queued run. Its first pass, at start, fires the
//! wake-ups missed while the service was down, once each.

use std::sync::Arc;
use std::time::Duration;

use actix::prelude::*;
use seed_events::RunId;

use crate::bus::{Notification, SeqRange};
use crate::env::RunEnv;
use crate::messages::Wake;
use crate::queue::RunQueue;

/// Wake-ups fired in one transaction at most; more due are fired by the next pass at once.
pub const FIRE_BATCH: usize = 256;

/// The longest the scheduler sleeps between two looks at the soonest wake-up.
pub const SLEEP_MAX: Duration = Duration::from_secs(1);

/// Starts the scheduler on the current actix system. It stops once the runs queue has.
pub(crate) fn start(env: Arc<RunEnv>, queue: Addr<RunQueue>) {
    actix::spawn(async move {
        while queue.connected() {
            let sleep = pass(&env, &queue).await;
            actix::clock::sleep(sleep).await;
        }
    });
}

/// Fires what is due now, and says how long to sleep before the next pass. Nothing is written
/// while nothing is due: a pass then reads the soonest wake-up alone.
async fn pass(env: &RunEnv, queue: &Addr<RunQueue>) -> Duration {
    let next_due = match env.store.next_schedule_due().await {
        Ok(next_due) => next_due,
        Err(error) => {
            tracing::error!(%error, "the next wake-up could not be read");
            return SLEEP_MAX;
        }
    };
    let Some(next_ms) = next_due else {
        return SLEEP_MAX;
    };
    let wait_ms = next_ms - (env.clock)();
    if wait_ms > 0 {
        return Duration::from_millis(u64::try_from(wait_ms).unwrap_or(0)).min(SLEEP_MAX);
    }
    if let Err(error) = fire_due(env, queue).await {
        tracing::error!(%error, "wake-ups could not fire; trying again");
        return SLEEP_MAX;
    }
    Duration::ZERO
}

/// Fires every wake-up due now, a batch per transaction, and wakes the runs queue.
async fn fire_due(env: &RunEnv, queue: &Addr<RunQueue>) -> Result<(), seed_store::Error> {
    loop {
        let now_ms = (env.clock)();
        let run_ids: Vec<RunId> = (0..FIRE_BATCH).map(|_| RunId::new_v7()).collect();
        let fired = env
            .store
            .fire_due_schedules(
                now_ms,
                run_ids,
                seed_projections::schedules::scheduled_wakeup_notice,
            )
            .await?;
        for wakeup in &fired {
            tracing::info!(
                schedule_id = %wakeup.wakeup.schedule_id,
                session_id = %wakeup.wakeup.session_id,
                occurrence = wakeup.wakeup.occurrence,
                late_ms = wakeup.wakeup.late_ms(),
                missed = wakeup.wakeup.missed,
                run_id = %wakeup.run_id,
                "wake-up fired"
            );
            env.publisher.publish(Notification::SessionChanged {
                session_id: wakeup.wakeup.session_id,
                reason: "scheduled-wakeup",
                seqs: Some(SeqRange {
                    from: wakeup.event.seq,
                    to: wakeup.event.seq,
                }),
            });
        }
        if !fired.is_empty() {
            queue.do_send(Wake);
        }
        if fired.len() < FIRE_BATCH {
            return Ok(());
        }
    }
}
