//! The session actor: one per active session, holding the run in flight (its harness and store
//! lease live inside that run's task) and its stop signal. Activated on demand through the
//! registry; stops itself after it has been idle a while.

use actix::clock::Instant;
use std::sync::Arc;
use std::time::Duration;

use actix::prelude::*;
use dashmap::DashMap;
use futures::FutureExt;
use seed_durable::StopSignal;
use seed_events::{RunId, SessionId};
use seed_store::RunRow;

use crate::env::RunEnv;
use crate::messages::{RunDone, StartRun, StopSession};
use crate::run_end::RunEnd;
use crate::turn::{SessionHarness, execute_run};

/// Active sessions by id.
pub type Registry = Arc<DashMap<SessionId, Addr<SessionActor>>>;

pub struct SessionActor {
    session_id: SessionId,
    env: Arc<RunEnv>,
    /// The queue, told when a run is done.
    queue: Recipient<RunDone>,
    registry: Registry,
    /// The run in flight and how to stop it. At most one: one turn per session.
    current: Option<(RunId, StopSignal)>,
    /// A run claimed while the one in flight was finishing (its end recorded, so the store let
    /// the next one start): it starts when that one is done.
    next: Option<RunRow>,
    /// The session's harness between runs (its store folded in memory); taken by the run in
    /// flight and given back when it ended cleanly.
    harness: Option<SessionHarness>,
    last_active_at: Instant,
}

impl std::fmt::Debug for SessionActor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionActor").finish_non_exhaustive()
    }
}

impl SessionActor {
    pub fn new(
        session_id: SessionId,
        env: Arc<RunEnv>,
        queue: Recipient<RunDone>,
        registry: Registry,
    ) -> SessionActor {
        SessionActor {
            session_id,
            env,
            queue,
            registry,
            current: None,
            next: None,
            harness: None,
            last_active_at: Instant::now(),
        }
    }

    /// Checks, `after` from now, whether the actor has been idle for the settings' while, and
    /// stops it if so; otherwise checks again when that while would be up. One check is
    /// pending at any time: actix polls every timer of an actor's context each time it polls
    /// the context, so a timer per run (as there once was) made each poll of a session that
    /// took many turns within the while slower and slower: a fifth of the actors' thread in
    /// the `service` bench.
    fn schedule_idle_check(&self, ctx: &mut Context<Self>, after: Duration) {
        ctx.run_later(after, move |actor, ctx| {
            let idle = actor.env.settings.session_idle;
            let since = actor.last_active_at.elapsed();
            if actor.current.is_some() {
                // Busy: idle a while from now at the soonest (never a check on every poll).
                actor.schedule_idle_check(ctx, idle.max(Duration::from_millis(1)));
            } else if since >= idle {
                ctx.stop();
            } else {
                actor.schedule_idle_check(ctx, idle - since);
            }
        });
    }
}

impl Actor for SessionActor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        self.schedule_idle_check(ctx, self.env.settings.session_idle);
    }

    fn stopped(&mut self, ctx: &mut Context<Self>) {
        // Leave the registry only if it still names this actor.
        let me = ctx.address();
        self.registry
            .remove_if(&self.session_id, |_, addr| *addr == me);
    }
}

pub use crate::env::DISK_FULL_PAUSE;

impl Handler<StartRun> for SessionActor {
    type Result = ();

    fn handle(&mut self, StartRun { run }: StartRun, ctx: &mut Context<Self>) {
        debug_assert_eq!(run.session_id, self.session_id);
        if self.current.is_some() {
            // The store claims a session's run only once no other is running, so the run in
            // flight has ended and is finishing up: this one comes next. (A second such run
            // cannot be claimed while this one runs; should one come, it goes back.)
            if self.next.is_none() {
                self.next = Some(run);
                return;
            }
            self.queue.do_send(RunDone {
                queue: run.queue,
                run_id: run.id,
                requeue: true,
            });
            return;
        }
        let stop = StopSignal::new();
        self.current = Some((run.id, stop.clone()));
        let env = Arc::clone(&self.env);
        let queue = run.queue;
        let run_id = run.id;
        // On a database shared by several nodes, another node may have run the session since
        // this harness was folded: the run checks that first (`turn::drop_if_overtaken`).
        let mut harness = self.harness.take();
        // The run's span (nothing unless traces are exported): the turn's spans are made under
        // it, and its `traceparent` is kept by the turn's first commit, in its transaction, so
        // that the attempt after a crash links to it. It ends with the run's task.
        let trace = self.env.settings.traces.run_trace(&run, (self.env.clock)());
        let run_trace = trace.clone();
        let task = async move {
            // A panic in a run is a bug; it fails the run rather than the process (and the
            // harness it held is dropped).
            let outcome =
                std::panic::AssertUnwindSafe(execute_run(&env, &run, stop, &mut harness, trace))
                    .catch_unwind()
                    .await;
            let harness = if outcome.is_ok() { harness } else { None };
            (env, run, outcome, harness)
        };
        ctx.spawn(task.into_actor(self).map(move |(env, run, outcome, harness), actor, ctx| {
            let status = outcome.as_ref().ok().map(|end| end.status);
            run_trace.end(status);
            actor.current = None;
            actor.harness = harness;
            actor.last_active_at = Instant::now();
            // Whether the run goes back to the queue.
            let requeue = match outcome {
                Ok(_) => false,
                Err(_) => {
                    tracing::error!(run_id = %run.id, attempts = run.attempts, "a run panicked");
                    let give_up = run.attempts >= env.settings.run_attempts_max;
                    if give_up {
                        // It kept failing: it ends here, failed, and waiters hear of it.
                        // A child's parent hears of it as of any other end.
                        actix::spawn(async move {
                            let end = RunEnd::failed(
                                "the session failed while running this turn, every attempt",
                            );
                            crate::run_end::finish(&env, &run, end).await;
                        });
                    } else {
                        // Its lease goes too, so the next attempt can take it.
                        let store = env.store.clone();
                        let boot_id = env.boot_id.clone();
                        let session_id = run.session_id;
                        actix::spawn(async move {
                            let _ = store.release_lease(session_id, &boot_id).await;
                        });
                    }
                    !give_up
                }
            };
            let done = RunDone {
                queue,
                run_id,
                requeue,
            };
            actor.queue.do_send(done);
            if let Some(run) = actor.next.take() {
                ctx.notify(StartRun { run });
            }
        }));
    }
}

impl Handler<StopSession> for SessionActor {
    type Result = bool;

    fn handle(&mut self, _: StopSession, _: &mut Context<Self>) -> bool {
        match &self.current {
            Some((_, stop)) => {
                stop.stop();
                true
            }
            None => false,
        }
    }
}
