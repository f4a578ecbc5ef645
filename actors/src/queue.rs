//! The runs queue: interactive and background runs, a concurrency limit for each, at most one
//! turn in flight per session, each account's share of the runs in flight, and fair claiming:
//! the account with the fewest runs in flight first, first queued first served within it.

use std::sync::Arc;

use actix::prelude::*;
use seed_events::{Queue, RunStatus};
use seed_store::RunRow;

use crate::env::{DISK_FULL_PAUSE, RunEnv};
use crate::messages::{Activate, RunDone, StartClaimed, StartRun, Wake};
use crate::session::{Registry, SessionActor};

pub struct RunQueue {
    env: Arc<RunEnv>,
    registry: Registry,
    /// A claim is under way; another wake-up waits for it.
    claiming: bool,
    wake_again: bool,
}

impl std::fmt::Debug for RunQueue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunQueue").finish_non_exhaustive()
    }
}

impl RunQueue {
    pub fn new(env: Arc<RunEnv>, registry: Registry) -> RunQueue {
        RunQueue {
            env,
            registry,
            claiming: false,
            wake_again: false,
        }
    }

    /// Starts a claimed run, whose slot is taken, on its session's actor.
    fn start(&mut self, run: RunRow, ctx: &mut Context<Self>) {
        let session_id = run.session_id;
        let message = StartRun { run };
        let addr = self.session(session_id, ctx);
        if let Err(error) = addr.try_send(message) {
            // The actor was stopping: a fresh one takes the run.
            let message = match error {
                SendError::Full(message) | SendError::Closed(message) => message,
            };
            self.registry.remove(&session_id);
            self.session(session_id, ctx).do_send(message);
        }
    }

    fn session(
        &self,
        session_id: seed_events::SessionId,
        ctx: &mut Context<Self>,
    ) -> Addr<SessionActor> {
        let queue = ctx.address().recipient();
        self.registry
            .entry(session_id)
            .or_insert_with(|| {
                SessionActor::new(
                    session_id,
                    Arc::clone(&self.env),
                    queue,
                    Arc::clone(&self.registry),
                )
                .start()
            })
            .clone()
    }
}

impl Actor for RunQueue {
    type Context = Context<Self>;
}

impl Handler<Wake> for RunQueue {
    type Result = ();

    fn handle(&mut self, _: Wake, ctx: &mut Context<Self>) {
        if self.claiming {
            self.wake_again = true;
            return;
        }
        // The free slots are taken for the claim, and those it does not fill go back.
        let slots: Vec<(Queue, usize)> = Queue::ALL
            .into_iter()
            .map(|queue| (queue, self.env.slots.take_for_claim(queue)))
            .filter(|(_, taken)| *taken > 0)
            .collect();
        if slots.is_empty() {
            return;
        }
        self.claiming = true;
        let env = Arc::clone(&self.env);
        let taken = slots.clone();
        let claim = async move {
            let now = (env.clock)();
            let claim = env.settings.claim_for(&env.boot_id);
            env.store.claim_runs_of_queues(slots, claim, now).await
        };
        ctx.spawn(claim.into_actor(self).map(move |claimed, queue, ctx| {
            queue.claiming = false;
            let n_claimed = |claimed: &[RunRow], of: Queue| {
                claimed.iter().filter(|run| run.queue == of).count()
            };
            match claimed {
                Ok(claimed) => {
                    for (of, n_taken) in taken {
                        let n_used = n_claimed(&claimed, of);
                        queue.env.slots.end_claim(of, n_taken, n_used);
                    }
                    for run in claimed {
                        queue.start(run, ctx);
                    }
                }
                // The runs stay queued; the queue looks again after a pause (a full disk
                // passes).
                Err(error) => {
                    for (of, n_taken) in taken {
                        queue.env.slots.end_claim(of, n_taken, 0);
                    }
                    tracing::error!(%error, "claiming runs failed; trying again shortly");
                    ctx.notify_later(Wake, DISK_FULL_PAUSE);
                }
            }
            if std::mem::take(&mut queue.wake_again) {
                ctx.notify(Wake);
            }
        }));
    }
}

impl Handler<Activate> for RunQueue {
    type Result = ();

    fn handle(&mut self, activate: Activate, ctx: &mut Context<Self>) {
        self.session(activate.session_id, ctx);
        ctx.notify(Wake);
    }
}

impl Handler<RunDone> for RunQueue {
    type Result = ();

    fn handle(&mut self, done: RunDone, ctx: &mut Context<Self>) {
        self.env.slots.give_back(done.queue, 1);
        if done.requeue {
            let store = self.env.store.clone();
            let now = (self.env.clock)();
            let run_id = done.run_id;
            let requeue = async move {
                store
                    .set_run_status(run_id, RunStatus::Queued, None, now)
                    .await
            };
            ctx.spawn(requeue.into_actor(self).map(move |requeued, queue, ctx| {
                match requeued {
                    // The run would be left `running` with no one running it: try again
                    // after a pause (a full disk passes), counting it in flight meanwhile.
                    Err(error) if error.is_disk_full() || error.is_unavailable() => {
                        tracing::warn!(%run_id, %error, "requeueing the run shortly");
                        queue.env.slots.hold(done.queue);
                        ctx.notify_later(done, DISK_FULL_PAUSE);
                    }
                    Err(error) => {
                        tracing::error!(%run_id, %error, "could not requeue a run");
                        ctx.notify(Wake);
                    }
                    Ok(_) => ctx.notify(Wake),
                }
            }));
        } else {
            ctx.notify(Wake);
        }
    }
}

impl Handler<StartClaimed> for RunQueue {
    type Result = ();

    fn handle(&mut self, StartClaimed { run }: StartClaimed, ctx: &mut Context<Self>) {
        self.start(run, ctx);
    }
}
