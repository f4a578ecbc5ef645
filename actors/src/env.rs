//! What every run of this process shares: the environment a run works in ([`RunEnv`]: the
//! store, the provider, the verbs, the publisher, the clock) and the agent's definition and
//! the runtime's limits ([`RuntimeSettings`]).

use std::sync::Arc;
use std::sync::atomic::AtomicU64;

use seed_providers::{Provider, model_context_window};
use seed_store::Store;

use crate::bus::Publisher;
use crate::verb::Continue;
use crate::verbs::VerbSet;

/// What a node counted on a shared database, for `/metrics`: its heartbeat (`peers`) and its
/// runs' kept harnesses (`turn`).
#[derive(Debug, Default)]
pub struct PeerStats {
    pub n_renewals: AtomicU64,
    /// Runs of lapsed peers this node queued again (taken over).
    pub n_takeovers: AtomicU64,
    /// Leases of lapsed peers this node let go.
    pub n_leases_swept: AtomicU64,
    /// Runs that went on with the harness this node kept from the session's last run here,
    /// no other node having written the session since.
    pub n_harnesses_kept: AtomicU64,
    /// Runs whose session another node had written since this node's last run of it: the
    /// harness kept here was dropped, and the session opened afresh from the store.
    pub n_harnesses_overtaken: AtomicU64,
}

/// How long the partial text of a response waits, at most, for its commit to `pi.live`.
pub const LIVE_INTERVAL_DEFAULT: std::time::Duration = std::time::Duration::from_millis(100);

/// What every run of this process shares.
pub struct RunEnv {
    pub store: Store,
    pub provider: Arc<dyn Provider>,
    pub verbs: VerbSet,
    pub settings: RuntimeSettings,
    /// This process's id: leases and claimed runs carry it, so the next boot knows them.
    pub boot_id: String,
    pub clock: Arc<dyn Fn() -> i64 + Send + Sync>,
    pub publisher: Publisher,
    /// Creates sessions for running turns (continuations): the succession actor. Weak: that
    /// actor holds this env.
    pub successions: actix::WeakRecipient<Continue>,
    /// The runs in flight on each queue, against its limit.
    pub slots: crate::slots::Slots,
    /// What this node counted of its peers and of its kept harnesses on a shared database.
    pub peer_stats: Arc<PeerStats>,
}

impl std::fmt::Debug for RunEnv {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunEnv").finish_non_exhaustive()
    }
}

/// The agent's definition and the runtime's limits.
#[derive(Debug, Clone)]
pub struct RuntimeSettings {
    pub provider_name: String,
    pub model: String,
    /// Byte for byte the same from turn to turn: no clock, no counts.
    pub system_prompt: String,
    /// Runs of each queue in flight at once.
    pub interactive_runs_max: usize,
    pub background_runs_max: usize,
    /// Runs of one account in flight at once, on both queues together: its share of the
    /// slots, so that one account's slow runs cannot hold them all while another's wait. Past
    /// it, the account's runs wait in the queue; when slots free up, the queue claims next for
    /// the account with the fewest runs in flight. `usize::MAX`: no share.
    pub account_runs_max: usize,
    /// Attempts before a run that keeps failing its session actor is failed for good.
    pub run_attempts_max: i64,
    /// Boot sweeps that may find a run cut off mid-turn and queue it again; the next one
    /// fails it instead, so that a run which kills its process each time it runs cannot
    /// crash the service at every boot.
    pub run_restarts_max: i64,
    /// Later passes an open plan may give a run, beyond its first turn.
    pub plan_passes_max: i64,
    /// How long a session actor stays in memory after its last run.
    pub session_idle: std::time::Duration,
    /// The partial text of a response in flight is committed to `pi.live` (and only then sent
    /// to subscribers) at most this long after it arrived.
    pub live_interval: std::time::Duration,
    pub utc_offset_minutes: i32,
    /// Where crash-injection tests stop the world; empty in a service.
    pub crash_points: crate::crash::CrashPoints,
    /// Context windows by model name, over the built-in table (a provider configuration's
    /// `context_windows`).
    pub context_windows: std::collections::BTreeMap<String, u64>,
    /// The window of a model neither the overrides nor the table know.
    pub context_window_default: Option<u64>,
    /// How long a call waits for a person's approval before it is denied ("no answer in N");
    /// `None`: as long as it takes.
    pub approval_timeout: Option<std::time::Duration>,
    /// On a database shared by several nodes (PostgreSQL): how often this node renews its
    /// lease and sweeps for lapsed peers.
    pub node_renew: std::time::Duration,
    /// How long past its last renewal a node's leases hold: a node silent for longer (killed,
    /// paused, cut off) has its sessions taken over by another.
    pub node_expire: std::time::Duration,
    /// Traces of runs, model requests and tool calls: off unless the service exports them.
    pub traces: crate::traces::Traces,
}

impl RuntimeSettings {
    /// The model a session's runs ask: its override, or the runtime's model.
    pub fn session_model(&self, session: &seed_store::SessionRow) -> String {
        session
            .model_override
            .clone()
            .unwrap_or_else(|| self.model.clone())
    }
    /// The context window of `model`: the overrides, else the built-in table for this
    /// provider, else the default. One answer for `<context_usage>` and the API's meter.
    pub fn context_window(&self, model: &str) -> Option<u64> {
        self.context_windows
            .get(model)
            .copied()
            .or_else(|| model_context_window(&self.provider_name, model))
            .or(self.context_window_default)
    }
}

/// How often a node renews its lease when none is set.
pub const NODE_RENEW_DEFAULT: std::time::Duration = std::time::Duration::from_secs(5);

/// How long a node's leases hold past its last renewal when none is set.
pub const NODE_EXPIRE_DEFAULT: std::time::Duration = std::time::Duration::from_secs(30);

/// An account's share of the runs in flight when none is set: a quarter of the interactive
/// slots, at least one.
pub fn account_runs_max_default(interactive_runs_max: usize) -> usize {
    (interactive_runs_max / 4).max(1)
}

impl RuntimeSettings {
    /// Who this process claims runs for ([`RunEnv::boot_id`]), with each account's share.
    pub(crate) fn claim_for(&self, boot_id: &str) -> seed_store::ClaimFor {
        seed_store::ClaimFor {
            owner: boot_id.to_owned(),
            account_runs_max: self.account_runs_max,
            room: 0,
        }
    }
}

impl Default for RuntimeSettings {
    fn default() -> Self {
        RuntimeSettings {
            provider_name: "scripted".to_owned(),
            model: "scripted".to_owned(),
            system_prompt: "You are Seed's agent. Answer plainly; use verbs when they help."
                .to_owned(),
            interactive_runs_max: 64,
            background_runs_max: 16,
            account_runs_max: account_runs_max_default(64),
            run_attempts_max: 3,
            run_restarts_max: 5,
            plan_passes_max: 2,
            session_idle: std::time::Duration::from_secs(30),
            live_interval: LIVE_INTERVAL_DEFAULT,
            utc_offset_minutes: 0,
            crash_points: crate::crash::CrashPoints::default(),
            context_windows: std::collections::BTreeMap::new(),
            context_window_default: None,
            approval_timeout: None,
            node_renew: NODE_RENEW_DEFAULT,
            node_expire: NODE_EXPIRE_DEFAULT,
            traces: crate::traces::Traces::default(),
        }
    }
}

/// How long a write the disk refused (a run's end, a requeue) waits before it is tried again.
pub const DISK_FULL_PAUSE: std::time::Duration = std::time::Duration::from_secs(1);
