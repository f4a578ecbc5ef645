//! The runtime: starts the actors, runs the boot sweep, and is the handle the service and tests
//! talk to.

use std::sync::Arc;

use actix::prelude::*;
use dashmap::DashMap;
use seed_events::{AccountId, EventId, EventRole, MessageBody, NewEvent, Queue, RunId, SessionId};
use seed_providers::Provider;
use seed_store::{RetryOutcome, RunRow, Store};

use crate::bus::{Notification, Publisher, SeqRange};
use crate::env::{RunEnv, RuntimeSettings};
use crate::messages::{StartClaimed, StopSession, Wake};
use crate::queue::RunQueue;
use crate::session::Registry;
use crate::succession::SuccessionActor;
use crate::verb::{Verb, VerbContext, VerbOutput};
use crate::verbs::VerbSet;

/// What the boot sweep found and did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BootReport {
    /// Leases a previous process held, now released.
    pub n_leases_released: usize,
    /// Runs left `running` by a previous process, now queued again.
    pub n_runs_requeued: usize,
    /// Runs left `running` that more boot sweeps than `RuntimeSettings::run_restarts_max` had
    /// found cut off: failed, not queued again.
    pub n_runs_given_up: usize,
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Store(#[from] seed_store::Error),
    #[error("session {0} not found")]
    SessionNotFound(SessionId),
    #[error("the runtime is shutting down")]
    Closed,
    /// The run no longer exists: its session was deleted.
    #[error("run {0} is gone: its session was deleted")]
    RunGone(RunId),
}

impl Error {
    /// Whether the store refused the work because the disk is full (a refusal that may pass).
    pub fn is_disk_full(&self) -> bool {
        matches!(self, Error::Store(error) if error.is_disk_full())
    }
}

/// A session as the API shows it: its row, where it was continued from and to (the newest
/// successor), and the context window of the model it uses, for a client's context meter.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionInfo {
    pub session: seed_store::SessionRow,
    pub continued_from: Option<seed_events::ContinuationLink>,
    pub continued_to: Option<seed_events::ContinuationLink>,
    /// The model the session's runs use: its override, or the runtime's model.
    pub model: String,
    /// `model_context_window(provider, model)`; `None` for a model the table does not know.
    pub context_window: Option<u64>,
}

/// A running Seed: cheap to clone.
#[derive(Clone)]
pub struct Runtime {
    pub(crate) env: Arc<RunEnv>,
    queue: Addr<RunQueue>,
    registry: Registry,
    /// Keeps the succession actor running while the runtime is held (the env names it weakly).
    _successions: Addr<SuccessionActor>,
    peer_stats: Arc<crate::peers::PeerStats>,
    /// Told once this node's lease lapsed ([`Runtime::node_lapsed`]).
    node_lapsed: Arc<std::sync::Mutex<Option<futures::channel::oneshot::Receiver<()>>>>,
}

impl std::fmt::Debug for Runtime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runtime").finish_non_exhaustive()
    }
}

impl Runtime {
    /// Starts the actors on the current actix system, after the boot sweep: leases a previous
    /// process held are released and the runs it left running are queued again (the durable
    /// layer's recovery then decides what is repeated).
    pub async fn start(
        store: Store,
        provider: Arc<dyn Provider>,
        verbs: Vec<Arc<dyn Verb>>,
        settings: RuntimeSettings,
        boot_id: String,
        clock: Arc<dyn Fn() -> i64 + Send + Sync>,
    ) -> Result<(Runtime, BootReport), Error> {
        let verbs = VerbSet::start(verbs);
        Runtime::start_with(store, provider, verbs, settings, boot_id, clock).await
    }

    /// [`Runtime::start`] with a verb set already started, which may hold groups of verbs
    /// (an MCP server's tools, [`VerbSet::set_group`]) that runs the boot sweep takes up find.
    pub async fn start_with(
        store: Store,
        provider: Arc<dyn Provider>,
        verbs: VerbSet,
        settings: RuntimeSettings,
        boot_id: String,
        clock: Arc<dyn Fn() -> i64 + Send + Sync>,
    ) -> Result<(Runtime, BootReport), Error> {
        // A node of a shared database joins first: its sweep then leaves live peers alone.
        crate::peers::register(&store, &boot_id, clock(), settings.node_expire).await?;
        let (report, given_up) = boot_sweep_with(
            &store,
            &boot_id,
            clock(),
            settings.run_restarts_max,
            &settings.crash_points,
        )
        .await?;
        // The succession actor's mailbox exists first, so the env can name it; it starts once
        // the queue it talks to does. (In a block of its own: the context is not `Send`, and the
        // future of `start` is.)
        let (env, registry, queue, successions) = {
            let successions_context = Context::<SuccessionActor>::new();
            let env = Arc::new(RunEnv {
                store,
                provider,
                verbs,
                boot_id,
                clock,
                publisher: Publisher::start(),
                successions: successions_context.address().recipient().downgrade(),
                slots: crate::slots::Slots::new(
                    settings.interactive_runs_max,
                    settings.background_runs_max,
                ),
                settings,
                peer_stats: Arc::default(),
            });
            let registry: Registry = Arc::new(DashMap::new());
            let queue = RunQueue::new(Arc::clone(&env), Arc::clone(&registry)).start();
            let successions = successions_context.run(SuccessionActor::new(
                Arc::clone(&env),
                queue.clone().recipient(),
            ));
            (env, registry, queue, successions)
        };
        // A run that every boot found cut off may be what stops the process: it ends failed
        // (its parent hearing of it like of any other end) before the queue starts anything.
        for run in given_up {
            crate::run_end::fail_given_up(&env, &run).await;
        }
        queue.do_send(Wake);
        // On a shared database: the node's heartbeat and the sweep for lapsed peers.
        let peer_stats = Arc::clone(&env.peer_stats);
        let (lapsed_tx, lapsed_rx) = futures::channel::oneshot::channel();
        crate::peers::start(
            Arc::clone(&env),
            queue.clone(),
            Arc::clone(&peer_stats),
            lapsed_tx,
        );
        // Wake-ups missed while the service was down fire at its first pass, once each.
        crate::scheduler::start(Arc::clone(&env), queue.clone());
        // Approvals no one answered in time are denied; those that came due while the service
        // was down, at its first pass.
        crate::approval_timer::start(Arc::clone(&env), queue.clone());
        Ok((
            Runtime {
                env,
                queue,
                registry,
                _successions: successions,
                peer_stats,
                node_lapsed: Arc::new(std::sync::Mutex::new(Some(lapsed_rx))),
            },
            report,
        ))
    }

    /// The verbs on offer; groups of them (an MCP server's tools) come and go through
    /// [`VerbSet::set_group`](crate::verbs::VerbSet::set_group).
    pub fn verbs(&self) -> &VerbSet {
        &self.env.verbs
    }

    pub fn store(&self) -> &Store {
        &self.env.store
    }

    /// What this node's heartbeat counted (renewals, runs of lapsed peers taken over).
    pub fn peer_stats(&self) -> &crate::peers::PeerStats {
        &self.peer_stats
    }

    /// Resolves once this node's lease lapsed on a shared database (see `peers`): the service
    /// should stop. Never resolves on SQLite. The first caller gets it; later ones, a future
    /// that never resolves.
    pub fn node_lapsed(&self) -> impl std::future::Future<Output = ()> + use<> {
        let receiver = self
            .node_lapsed
            .lock()
            .ok()
            .and_then(|mut lapsed| lapsed.take());
        async move {
            let told = match receiver {
                Some(receiver) => receiver.await.is_ok(),
                None => false,
            };
            if !told {
                futures::future::pending::<()>().await;
            }
        }
    }

    pub fn publisher(&self) -> &Publisher {
        &self.env.publisher
    }

    /// Sessions with an actor in memory now.
    pub fn n_active_sessions(&self) -> usize {
        self.registry.len()
    }

    /// A person's message: appended to the log and a run queued for it, in one transaction.
    pub async fn send_message(
        &self,
        session_id: SessionId,
        text: &str,
    ) -> Result<(EventId, RunId), Error> {
        let run_id = RunId::new_v7();
        let event_id = self.send_message_as(session_id, text, run_id).await?;
        Ok((event_id, run_id))
    }

    /// [`Runtime::send_message`], with a watch on its run registered before the run is queued:
    /// the run's end then comes without a read of the run.
    pub async fn send_message_watched(
        &self,
        session_id: SessionId,
        text: &str,
    ) -> Result<(EventId, RunWatch), Error> {
        let watch = self.watch_run(RunId::new_v7());
        let event_id = self
            .send_message_as(session_id, text, watch.run_id())
            .await?;
        Ok((event_id, watch))
    }

    async fn send_message_as(
        &self,
        session_id: SessionId,
        text: &str,
        run_id: RunId,
    ) -> Result<EventId, Error> {
        let now = (self.env.clock)();
        let event = NewEvent::new(MessageBody::text(text), EventRole::User, "user", now);
        let store = self.env.store.clone();
        let event = self
            .queue_run_with(move |claim_for| async move {
                let (event, run) = store
                    .send_user_message(
                        session_id,
                        event,
                        run_id,
                        Queue::Interactive,
                        now,
                        claim_for,
                    )
                    .await?;
                Ok((event, Some(run)))
            })
            .await?;
        self.env.publisher.publish(Notification::SessionChanged {
            session_id,
            reason: "message",
            seqs: Some(SeqRange {
                from: event.seq,
                to: event.seq,
            }),
        });
        Ok(event.id)
    }

    /// Runs `write`, a write that queues an interactive run and returns it (`None`: it queued
    /// nothing), with a slot of the queue taken for the run when one is free. `write` is then
    /// given this process's boot id and each account's share, to claim the run in the same
    /// transaction when it may start at once ([`Store::send_user_message`]), and a run so
    /// claimed starts without a claim of the queue's; the slot goes back when the run was not
    /// claimed. This runs to its end on a task of its own, so a caller that stops waiting (a
    /// dropped request) leaves no slot taken and no claimed run unstarted.
    pub async fn queue_run_with<T, F, Fut>(&self, write: F) -> Result<T, Error>
    where
        F: FnOnce(Option<seed_store::ClaimFor>) -> Fut,
        Fut: std::future::Future<Output = Result<(T, Option<RunRow>), Error>> + 'static,
        T: 'static,
    {
        let env = Arc::clone(&self.env);
        let queue = self.queue.clone();
        let slot = env.slots.take(Queue::Interactive, 1) == 1;
        // The run's span continues the caller's trace (a request's), when traces are on.
        let traceparent = env.settings.traces.current_traceparent();
        // With the room left beside it: the queued runs that fit there do not keep the run
        // from starting at once ([`seed_store::ClaimFor::room`]).
        let claim_for = slot.then(|| seed_store::ClaimFor {
            room: env.slots.room(Queue::Interactive),
            ..env.settings.claim_for(&env.boot_id)
        });
        let mut written = Box::pin(write(claim_for));
        // Polled once here, so the write reaches the store now, in this caller's turn, as a
        // write made in place would; the rest is the task's.
        let first = futures::poll!(written.as_mut());
        let task = async move {
            let outcome = match first {
                std::task::Poll::Ready(outcome) => outcome,
                std::task::Poll::Pending => written.await,
            };
            let run = outcome.as_ref().ok().and_then(|(_, run)| run.clone());
            if let (Some(run), Some(traceparent)) = (&run, traceparent) {
                env.settings.traces.queued(run.id, traceparent);
            }
            match run {
                Some(run) if slot && run.status == seed_events::RunStatus::Running => {
                    queue.do_send(StartClaimed { run });
                }
                run => {
                    if slot {
                        env.slots.give_back(Queue::Interactive, 1);
                    }
                    if slot || run.is_some() {
                        queue.do_send(Wake);
                    }
                }
            }
            outcome.map(|(value, _)| value)
        };
        actix::spawn(task).await.map_err(|_| Error::Closed)?
    }

    /// Queues a new run for a person's message already in the log (`event_id`): a retry, for
    /// example of a successor's copied message whose run failed or was lost to a crash. Refused
    /// (writing nothing) while a run for it is still open, as [`RetryOutcome`] says; a retried
    /// message another turn already answered gets that answer without asking the model.
    pub async fn retry_message(
        &self,
        session_id: SessionId,
        event_id: EventId,
    ) -> Result<RetryOutcome, Error> {
        let store = self.env.store.clone();
        let now = (self.env.clock)();
        let run_id = RunId::new_v7();
        let outcome = store
            .retry_message(session_id, event_id, run_id, now)
            .await?;
        if matches!(outcome, RetryOutcome::Queued { .. }) {
            self.queue.do_send(Wake);
        }
        Ok(outcome)
    }

    /// The context a verb sees when it is called for `session_id`'s run `run_id` as call
    /// `tool_call_id`: for running a verb as the user (an action from a command palette), and
    /// for tests that call a verb directly.
    pub async fn verb_context(
        &self,
        session_id: SessionId,
        run_id: RunId,
        tool_call_id: &str,
    ) -> Result<VerbContext, Error> {
        let session = self
            .env
            .store
            .get_session(session_id)
            .await?
            .ok_or(Error::SessionNotFound(session_id))?;
        Ok(VerbContext {
            store: self.env.store.clone(),
            account_id: session.account_id,
            session_id,
            run_id,
            tool_call_id: tool_call_id.to_owned(),
            now_ms: (self.env.clock)(),
            stop: seed_durable::StopSignal::new(),
            successions: self.env.successions.upgrade(),
            traces: self.env.settings.traces.clone(),
            call_span: None,
        })
    }

    /// The session as the API shows it, or `None` when it does not exist.
    pub async fn session_info(&self, session_id: SessionId) -> Result<Option<SessionInfo>, Error> {
        let store = &self.env.store;
        let Some(session) = store.get_session(session_id).await? else {
            return Ok(None);
        };
        let (continued_from, continued_to) = store.continuation_links(session_id).await?;
        let settings = &self.env.settings;
        let model = settings.session_model(&session);
        let context_window = settings.context_window(&model);
        Ok(Some(SessionInfo {
            session,
            continued_from,
            continued_to,
            model,
            context_window,
        }))
    }

    /// Asks the queue to look for runs (after runs were queued behind its back).
    pub fn wake(&self) {
        self.queue.do_send(Wake);
    }

    /// Cuts off the session's turn in flight. Returns whether there was one.
    pub async fn stop_session(&self, session_id: SessionId) -> bool {
        let Some(addr) = self.registry.get(&session_id).map(|entry| entry.clone()) else {
            return false;
        };
        addr.send(StopSession).await.unwrap_or(false)
    }

    /// Deletes the session and everything it owns. A turn running under it is stopped; its
    /// next commit is refused, which ends it with an error.
    pub async fn delete_session(&self, session_id: SessionId) -> Result<bool, Error> {
        let account_id = self
            .env
            .store
            .get_session(session_id)
            .await?
            .map(|session| session.account_id);
        let deleted = self
            .env
            .store
            .delete_session(session_id, (self.env.clock)())
            .await?;
        match account_id.filter(|_| deleted) {
            Some(account_id) => self.session_deleted(session_id, account_id).await,
            None => {
                self.stop_session(session_id).await;
            }
        }
        Ok(deleted)
    }

    /// What follows a session's deletion, by whichever path deleted its rows: the account hears
    /// of it, a turn running under it is stopped, and the session's subscribers hear of it (the
    /// notification names the account, since the row is gone).
    pub async fn session_deleted(&self, session_id: SessionId, account_id: AccountId) {
        self.env.publisher.publish(Notification::AccountChanged {
            account_id,
            reasons: vec!["session-deleted"],
        });
        self.stop_session(session_id).await;
        self.env.publisher.publish(Notification::SessionDeleted {
            session_id,
            account_id,
        });
    }

    /// Registers a wait for the run `run_id` before it exists: queue the run under this id, then
    /// await [`RunWatch::ended`].
    pub fn watch_run(&self, run_id: RunId) -> RunWatch {
        RunWatch {
            run_id,
            ended: Some(self.env.publisher.run_finished(run_id)),
            runtime: self.clone(),
        }
    }

    /// How many runs have someone registered to wait for them (for tests: a wait dropped
    /// unused leaves nothing behind).
    pub fn n_runs_waited_for(&self) -> usize {
        self.env.publisher.n_runs_waited_for()
    }

    /// Waits until the run is terminal and returns it; a run whose session was deleted is
    /// [`Error::RunGone`].
    pub async fn wait_for_run(&self, run_id: RunId) -> Result<RunRow, Error> {
        loop {
            // Register first, then look: a run that ends in between is seen either way.
            let finished = self.env.publisher.run_finished(run_id);
            let found = match self.env.store.get_run(run_id).await {
                Ok(Some(run)) if run.status.is_terminal() => Some(Ok(run)),
                Ok(Some(_)) => None,
                Ok(None) => Some(Err(Error::RunGone(run_id))),
                Err(error) => Some(Err(error.into())),
            };
            if let Some(found) = found {
                // Not waited for after all: the registration goes, or it would stay for good
                // (the run's end, which would take it, has come and gone).
                drop(finished);
                self.env.publisher.forget_run_waiters(run_id);
                return found;
            }
            // The run as its end recorded it; without it (a run another way ended), read.
            if let Some(run) = self
                .run_finished_here_or_after_a_while(run_id, finished)
                .await?
            {
                return Ok(run);
            }
        }
    }
}

/// A wait for a run's end registered before the run was queued ([`Runtime::watch_run`]), so
/// the run is had as its end recorded it, with no read of the run to see whether it ended
/// already: it cannot have. Dropped, it leaves nothing registered.
#[derive(Debug)]
pub struct RunWatch {
    run_id: RunId,
    ended: Option<futures::channel::oneshot::Receiver<Option<RunRow>>>,
    runtime: Runtime,
}

impl Runtime {
    /// `finished`, the run's end as this process's bus tells it. On a shared database the run
    /// may end on another node, whose end this bus may not hear: then `None` after a renewal's
    /// interval too, for the caller to read the run again.
    async fn run_finished_here_or_after_a_while(
        &self,
        run_id: RunId,
        mut finished: futures::channel::oneshot::Receiver<Option<RunRow>>,
    ) -> Result<Option<RunRow>, Error> {
        match self.within_a_while(&mut finished).await {
            Some(finished) => finished.map_err(|_| Error::Closed),
            None => {
                drop(finished);
                self.env.publisher.forget_run_waiters(run_id);
                Ok(None)
            }
        }
    }

    /// `wait` to its end on SQLite, where every run ends in this process; on a shared
    /// database, where a run may end on another node unheard, `None` once a renewal's interval
    /// has passed without it.
    async fn within_a_while<F: std::future::Future + Unpin>(&self, wait: F) -> Option<F::Output> {
        if self.env.store.node().is_none() {
            return Some(wait.await);
        }
        let a_while = actix::clock::sleep(self.env.settings.node_renew);
        futures::pin_mut!(a_while);
        match futures::future::select(wait, a_while).await {
            futures::future::Either::Left((output, _)) => Some(output),
            futures::future::Either::Right(_) => None,
        }
    }
}

impl RunWatch {
    pub fn run_id(&self) -> RunId {
        self.run_id
    }

    /// Waits until the run is terminal and returns it, as [`Runtime::wait_for_run`] does. Call it
    /// once the run is queued.
    pub async fn ended(mut self) -> Result<RunRow, Error> {
        if let Some(ended) = self.ended.as_mut() {
            // On a shared database the run may end on another node: its notice answers without
            // the row, and a notice lost leaves it to the while (as `Runtime::wait_for_run`
            // waits). A run that ends here is had as its end recorded it, without a read. The
            // receiver stays in the watch while it waits, so that a wait dropped midway takes
            // its registration with it (`Drop`).
            match self.runtime.within_a_while(ended).await {
                // Answered, or its sender went with the runtime: nothing of it is registered
                // now.
                Some(outcome) => {
                    self.ended = None;
                    if let Ok(Some(run)) = outcome {
                        return Ok(run);
                    }
                }
                // Not within the while: given up.
                None => {
                    drop(self.ended.take());
                    self.runtime.env.publisher.forget_run_waiters(self.run_id);
                }
            }
        }
        // Ended without its row (on another node, or another way), not heard of within the
        // while, or the runtime went away: read.
        self.runtime.wait_for_run(self.run_id).await
    }
}

impl Drop for RunWatch {
    /// A watch never answered (dropped unused, or while it waited) takes its registration
    /// with it; dropping the receiver first marks it as given up.
    fn drop(&mut self) {
        if let Some(ended) = self.ended.take() {
            drop(ended);
            self.runtime.env.publisher.forget_run_waiters(self.run_id);
        }
    }
}

/// Releases the leases other boots hold, queues again the runs they left running, and queues
/// the run of any successor a crash left without one.
/// A run more sweeps than `restarts_max` found cut off stays `running`, for the runtime to fail
/// once it has started ([`Runtime::start`] does); this sweep alone leaves it so.
pub async fn boot_sweep(
    store: &Store,
    boot_id: &str,
    now_ms: i64,
    restarts_max: i64,
) -> Result<BootReport, Error> {
    let (report, _) = boot_sweep_with(
        store,
        boot_id,
        now_ms,
        restarts_max,
        &crate::crash::CrashPoints::default(),
    )
    .await?;
    Ok(report)
}

/// [`boot_sweep`], reaching the crash point between its two steps; also returns the runs given
/// up.
async fn boot_sweep_with(
    store: &Store,
    boot_id: &str,
    now_ms: i64,
    restarts_max: i64,
    crash_points: &crate::crash::CrashPoints,
) -> Result<(BootReport, Vec<RunRow>), Error> {
    let (released, seed_store::Swept { requeued, given_up }) = if store.node().is_some() {
        // A node of a shared database: only lapsed nodes' leases and runs, in one transaction.
        store
            .sweep_lapsed_nodes(boot_id, now_ms, restarts_max)
            .await?
    } else {
        let released = store.release_leases_not_owned_by(boot_id).await?;
        crash_points
            .reach(crate::crash::points::BOOT_SWEEP_BETWEEN)
            .await;
        let swept = store.requeue_running_runs(now_ms, restarts_max).await?;
        (released, swept)
    };
    // The files of sessions deleted just before a crash.
    store.remove_attachment_files(None).await;
    // A successor whose run a crash (or a full disk) kept from being queued gets it now.
    for successor in store.successors_without_their_run().await? {
        if let Some(copied) = crate::continuation::copied_message(store, successor).await? {
            // No span is current at boot: its run starts a trace of its own.
            crate::continuation::queue_successor_run(store, None, successor, copied.id, now_ms)
                .await?;
        }
    }
    if !released.is_empty() || !requeued.is_empty() || !given_up.is_empty() {
        tracing::info!(
            n_leases_released = released.len(),
            n_runs_requeued = requeued.len(),
            n_runs_given_up = given_up.len(),
            "boot sweep"
        );
    }
    let report = BootReport {
        n_leases_released: released.len(),
        n_runs_requeued: requeued.len(),
        n_runs_given_up: given_up.len(),
    };
    Ok((report, given_up))
}

// Verbs a person runs by hand (see `crate::verbs::by_hand`).
impl Runtime {
    /// The verbs a person may run by hand.
    pub fn verbs_by_hand(&self) -> Vec<String> {
        self.env.verbs.by_hand_names()
    }

    /// What `verb` does, when a person may run it by hand.
    pub fn verb_description_by_hand(&self, verb: &str) -> Option<String> {
        self.env.verbs.description_by_hand(verb)
    }

    /// The schema of the arguments of `verb`, when a person may run it by hand.
    pub fn verb_parameters_by_hand(&self, verb: &str) -> Option<serde_json::Value> {
        self.env.verbs.parameters_by_hand(verb)
    }

    /// Checks a person's arguments for `verb` against its schema: an action that does not fit
    /// is refused with the field named before anything is written.
    pub fn check_verb_arguments(
        &self,
        verb: &str,
        arguments: &serde_json::Value,
    ) -> Result<(), crate::schema::ArgumentProblem> {
        self.env.verbs.check_by_hand(verb, arguments)
    }

    /// Runs `verb` by hand in the account's session and returns its output; the caller writes
    /// [`action_event`](crate::verbs::by_hand::action_event) to the log. `None`: no such verb may be run by hand.
    pub async fn run_verb_by_hand(
        &self,
        account_id: AccountId,
        session_id: SessionId,
        verb: &str,
        arguments: serde_json::Value,
    ) -> Result<Option<VerbOutput>, Error> {
        // Outside any turn: a run id of its own, never queued.
        let run_id = RunId::new_v7();
        let context = self
            .verb_context(session_id, run_id, &format!("by-hand-{run_id}"))
            .await?;
        if context.account_id != account_id {
            return Err(Error::SessionNotFound(session_id));
        }
        Ok(self.env.verbs.run_by_hand(verb, context, arguments).await)
    }
}
