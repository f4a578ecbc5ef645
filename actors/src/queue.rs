//! The runs queue: interactive and background runs, a concurrency limit for each, at most one
//! turn in flight per session, first queued first served across sessions.

use std::sync::Arc;

use actix::prelude::*;
use seed_events::{Queue, RunId, RunStatus};
use seed_store::RunRow;

use crate::session::{Registry, SessionActor, StartRun};
use crate::turn::RunEnv;

pub struct RunQueue {
    env: Arc<RunEnv>,
    registry: Registry,
    interactive_in_flight: usize,
    background_in_flight: usize,
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
            interactive_in_flight: 0,
            background_in_flight: 0,
            claiming: false,
            wake_again: false,
        }
    }

    fn free_slots(&self, queue: Queue) -> usize {
        let settings = &self.env.settings;
        match queue {
            Queue::Interactive => settings
                .interactive_runs_max
                .saturating_sub(self.interactive_in_flight),
            Queue::Background => settings
                .background_runs_max
                .saturating_sub(self.background_in_flight),
        }
    }

    fn in_flight(&mut self, queue: Queue) -> &mut usize {
        match queue {
            Queue::Interactive => &mut self.interactive_in_flight,
            Queue::Background => &mut self.background_in_flight,
        }
    }

    fn start(&mut self, run: RunRow, ctx: &mut Context<Self>) {
        *self.in_flight(run.queue) += 1;
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
        let queue = ctx.address();
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

/// Looks for runs to start.
#[derive(Message)]
#[rtype(result = "()")]
#[derive(Debug)]
pub struct Wake;

/// A run's session actor is done with it.
#[derive(Message)]
#[rtype(result = "()")]
#[derive(Debug)]
pub struct RunDone {
    pub queue: Queue,
    pub run_id: RunId,
    /// It could not run now: put it back in the queue.
    pub requeue: bool,
}

impl Handler<Wake> for RunQueue {
    type Result = ();

    fn handle(&mut self, _: Wake, ctx: &mut Context<Self>) {
        if self.claiming {
            self.wake_again = true;
            return;
        }
        let slots: Vec<(Queue, usize)> = Queue::ALL
            .into_iter()
            .map(|queue| (queue, self.free_slots(queue)))
            .filter(|(_, free)| *free > 0)
            .collect();
        if slots.is_empty() {
            return;
        }
        self.claiming = true;
        let env = Arc::clone(&self.env);
        let claim = async move {
            let now = (env.clock)();
            env.store
                .claim_runs_of_queues(slots, &env.boot_id, now)
                .await
        };
        ctx.spawn(claim.into_actor(self).map(|claimed, queue, ctx| {
            queue.claiming = false;
            match claimed {
                Ok(claimed) => {
                    for run in claimed {
                        queue.start(run, ctx);
                    }
                }
                // The runs stay queued; the queue looks again after a pause (a full disk
                // passes).
                Err(error) => {
                    tracing::error!(%error, "claiming runs failed; trying again shortly");
                    ctx.notify_later(Wake, crate::session::DISK_FULL_PAUSE);
                }
            }
            if std::mem::take(&mut queue.wake_again) {
                ctx.notify(Wake);
            }
        }));
    }
}

/// Spawns a session's actor (a continuation's successor) and looks for runs to start.
#[derive(Message)]
#[rtype(result = "()")]
#[derive(Debug)]
pub struct Activate {
    pub session_id: seed_events::SessionId,
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
        let in_flight = self.in_flight(done.queue);
        *in_flight = in_flight.saturating_sub(1);
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
                    Err(error) if error.is_disk_full() => {
                        tracing::warn!(%run_id, "the disk is full: requeueing the run shortly");
                        *queue.in_flight(done.queue) += 1;
                        ctx.notify_later(done, crate::session::DISK_FULL_PAUSE);
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
