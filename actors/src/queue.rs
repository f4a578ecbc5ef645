//! The runs queue: interactive and background runs, a concurrency limit for each, at most one
//! turn in flight per session, first queued first served across sessions.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use actix::prelude::*;
use seed_events::{Queue, RunId, RunStatus};
use seed_store::RunRow;

use crate::env::RunEnv;
use crate::session::{Registry, SessionActor, StartRun};

/// The runs in flight on each queue, against its limit. The queue takes slots before it
/// claims runs, and the runtime takes one before a message's write, which then claims the
/// message's run at once when the session is free ([`crate::Runtime`]); a slot goes back when
/// its run is done, or when nothing was claimed with it.
#[derive(Debug)]
pub struct Slots {
    interactive: AtomicUsize,
    background: AtomicUsize,
    interactive_max: usize,
    background_max: usize,
}

impl Slots {
    pub fn new(interactive_max: usize, background_max: usize) -> Slots {
        Slots {
            interactive: AtomicUsize::new(0),
            background: AtomicUsize::new(0),
            interactive_max,
            background_max,
        }
    }

    fn of(&self, queue: Queue) -> (&AtomicUsize, usize) {
        match queue {
            Queue::Interactive => (&self.interactive, self.interactive_max),
            Queue::Background => (&self.background, self.background_max),
        }
    }

    /// Takes up to `n` of `queue`'s free slots; returns how many it took.
    pub fn take(&self, queue: Queue, n: usize) -> usize {
        let (in_flight, max) = self.of(queue);
        let mut taken = 0;
        let _ = in_flight.fetch_update(Ordering::AcqRel, Ordering::Acquire, |now| {
            taken = n.min(max.saturating_sub(now));
            (taken > 0).then_some(now + taken)
        });
        taken
    }

    /// Gives `n` slots of `queue` back.
    pub fn give_back(&self, queue: Queue, n: usize) {
        let (in_flight, _) = self.of(queue);
        let _ = in_flight.fetch_update(Ordering::AcqRel, Ordering::Acquire, |now| {
            Some(now.saturating_sub(n))
        });
    }

    /// Counts a run in flight whatever the limit (one put back while it waits to be requeued).
    fn hold(&self, queue: Queue) {
        self.of(queue).0.fetch_add(1, Ordering::AcqRel);
    }

    /// The runs in flight on `queue` now.
    pub fn in_flight(&self, queue: Queue) -> usize {
        self.of(queue).0.load(Ordering::Acquire)
    }
}

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
        // The free slots are taken for the claim, and those it does not fill go back.
        let slots: Vec<(Queue, usize)> = Queue::ALL
            .into_iter()
            .map(|queue| (queue, self.env.slots.take(queue, usize::MAX)))
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
            env.store
                .claim_runs_of_queues(slots, &env.boot_id, now)
                .await
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
                        queue
                            .env
                            .slots
                            .give_back(of, n_taken.saturating_sub(n_used));
                    }
                    for run in claimed {
                        queue.start(run, ctx);
                    }
                }
                // The runs stay queued; the queue looks again after a pause (a full disk
                // passes).
                Err(error) => {
                    for (of, n_taken) in taken {
                        queue.env.slots.give_back(of, n_taken);
                    }
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
                    Err(error) if error.is_disk_full() => {
                        tracing::warn!(%run_id, "the disk is full: requeueing the run shortly");
                        queue.env.slots.hold(done.queue);
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

/// Starts a run its message's write claimed at once, with a slot taken for it
/// ([`Slots::take`]).
#[derive(Message)]
#[rtype(result = "()")]
#[derive(Debug)]
pub struct StartClaimed {
    pub run: RunRow,
}

impl Handler<StartClaimed> for RunQueue {
    type Result = ();

    fn handle(&mut self, StartClaimed { run }: StartClaimed, ctx: &mut Context<Self>) {
        self.start(run, ctx);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_taken_up_to_the_limit_and_given_back() {
        let slots = Slots::new(3, 1);
        assert_eq!(slots.take(Queue::Interactive, 2), 2);
        assert_eq!(
            slots.take(Queue::Interactive, usize::MAX),
            1,
            "only one left"
        );
        assert_eq!(slots.take(Queue::Interactive, 1), 0, "none left");
        assert_eq!(slots.take(Queue::Background, 5), 1, "each queue its own");
        slots.give_back(Queue::Interactive, 2);
        assert_eq!(slots.in_flight(Queue::Interactive), 1);
        assert_eq!(slots.take(Queue::Interactive, 1), 1);
        // A run put back while it waits to be requeued counts whatever the limit.
        slots.hold(Queue::Background);
        assert_eq!(slots.in_flight(Queue::Background), 2);
        slots.give_back(Queue::Background, 5);
        assert_eq!(slots.in_flight(Queue::Background), 0, "never below none");
    }
}
