//! The approval timer: when the runtime gives approvals a timeout, a call no one decided by its
//! deadline is denied with "no answer in N" (N the time it waited), and its run resumes like
//! any other decided one. It looks at the soonest deadlines at most every second; its first
//! pass, at start, denies what came due while the service was down.

use std::sync::Arc;
use std::time::Duration;

use actix::prelude::*;
use seed_store::{ApprovalDecision, DecideOutcome};

use crate::bus::Notification;
use crate::env::RunEnv;
use crate::messages::Wake;
use crate::queue::RunQueue;

/// The longest the timer sleeps between two looks.
pub const SLEEP_MAX: Duration = Duration::from_secs(1);

/// Starts the timer on the current actix system when `env.settings.approval_timeout` is set.
/// It stops once the runs queue has.
pub(crate) fn start(env: Arc<RunEnv>, queue: Addr<RunQueue>) {
    let Some(timeout) = env.settings.approval_timeout else {
        return;
    };
    let sleep = (timeout / 4).clamp(Duration::from_millis(10), SLEEP_MAX);
    actix::spawn(async move {
        while queue.connected() {
            if let Err(error) = pass(&env, &queue).await {
                tracing::error!(%error, "overdue approvals could not be denied; trying again");
            }
            actix::clock::sleep(sleep).await;
        }
    });
}

/// Denies every approval whose deadline has come, and wakes the runs queue when it did.
async fn pass(env: &RunEnv, queue: &Addr<RunQueue>) -> Result<(), seed_store::Error> {
    let now_ms = (env.clock)();
    let overdue = env.store.overdue_approvals(now_ms).await?;
    let mut n_denied = 0;
    for approval in overdue {
        let waited_ms = approval
            .deadline_at_ms
            .map_or(0, |deadline| deadline - approval.created_at_ms);
        let decision = ApprovalDecision::TimeOut {
            reason: format!("no answer in {}", duration_text(waited_ms)),
        };
        let decided = env
            .store
            .decide_approval(
                approval.session_id,
                &approval.tool_call_id,
                decision,
                now_ms,
            )
            .await?;
        if let DecideOutcome::Decided(_) = decided {
            n_denied += 1;
            env.publisher.publish(Notification::SessionChanged {
                session_id: approval.session_id,
                reason: "approval",
                seqs: None,
            });
        }
    }
    if n_denied > 0 {
        queue.do_send(Wake);
    }
    Ok(())
}

/// `ms` as people say it: in hours, minutes or seconds when it is a whole number of them.
pub fn duration_text(ms: i64) -> String {
    match ms {
        ms if ms > 0 && ms % 3_600_000 == 0 => format!("{} h", ms / 3_600_000),
        ms if ms > 0 && ms % 60_000 == 0 => format!("{} min", ms / 60_000),
        ms if ms > 0 && ms % 1_000 == 0 => format!("{} s", ms / 1_000),
        ms => format!("{ms} ms"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wait_is_said_in_its_largest_whole_unit() {
        let cases = [
            (7_200_000, "2 h"),
            (300_000, "5 min"),
            (90_000, "90 s"),
            (45_000, "45 s"),
            (1_500, "1500 ms"),
            (0, "0 ms"),
        ];
        for (ms, text) in cases {
            assert_eq!(duration_text(ms), text, "{ms}");
        }
    }
}
