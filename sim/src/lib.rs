//! The actor simulation: many sessions running turns, calling verbs, delegating, continuing,
//! being stopped, deleted and crashed, over the real runtime and a real SQLite file, with the
//! invariants checked once the system is quiet.
//!
//! A seed decides everything the simulation does: the users' actions and their moments, the
//! model's answers (text, 0–4 tool calls of the shipped verbs and of `launch`, a verb that must
//! never run twice; delegations; continue_session calls with random handoffs and sources;
//! malformed arguments; errors mid-stream), and the crashes. The model's answer is a function
//! of the seed and of what the request holds, so a recovered turn asks and is answered the
//! same way.
//!
//! A crash is a fence: a named crash point (`seed_actors::crash::points`) is armed; when a task
//! reaches it, the store is fenced (nothing more commits, and the WAL is left un-checkpointed),
//! the task stops there, and the whole actor system of that "process" is dropped. The next
//! process opens the same file: the boot sweep and recovery run. The seed also picks the crash
//! rate for the run (swarm testing). A process that ran all its steps drains before it ends —
//! faults off — and every run must end in it (the next boot sweep would otherwise hide a run it
//! lost track of). A run ends with a liveness phase — no faults — in which every run must reach
//! a terminal state and every wake-up the model scheduled (a few seconds on) must fire, on the
//! paused clock; then the invariants are checked.
//!
//! Deterministic: one thread runs everything. Each process is an actix system on a
//! current-thread tokio runtime with its clock paused (time moves only when every task waits,
//! and jumps to the next timer), the store runs inline on that thread (`Config::inline`), and
//! every id comes from the seed (`seed_events::ids::seed_ids`). So a seed replays the same
//! schedule, and the run's trace hash — every model request, every user action, every crash,
//! and the database at the end — is the same each time.
//!
//! Modes: random (the seed arms 0–3 crashes at random points and moments) and exhaustive
//! ([`exhaustive`]: a dry run counts every crash-point occurrence of a scenario, then one run
//! crashes at each). A failing seed can be [`shrink`]ed to the fewest steps that still fail.
//!
//! Layout: this file runs a seed (its processes, crashes, the liveness phase); `model` is the
//! seeded model and the verbs under test; `observer` what the processes share and the check of
//! every model request; `people` the approvals they decide; `invariants` the checks at the end;
//! `fsck` the checks of `seed fsck`, run on the database each seed leaves; `runs` the
//! exhaustive mode, shrinking and summaries.

use std::collections::BTreeMap;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::FutureExt;
use futures::future::BoxFuture;
use seed_actors::crash::points;
use seed_actors::{CrashPoints, Runtime, RuntimeSettings};
use seed_events::SessionId;
use seed_providers::{Request, ScriptedStep};
use seed_store::{Config, NewSession, Store};

pub mod fsck;
pub mod invariants;
mod model;
mod observer;
mod people;
mod runs;

pub use runs::{exhaustive, shrink, summary};

use model::{Counted, Launch, RunVerb, account, model};
pub use model::{SimVerb, VerbUnderTest};
use observer::{Shared, lock};
use people::{answer_an_approval, answer_every_approval};

/// What one simulation run does.
#[derive(Debug, Clone)]
pub struct SimConfig {
    pub seed: u64,
    /// Top-level sessions at the start.
    pub sessions: usize,
    /// User actions (messages, stops, deletes, pauses, crashes).
    pub steps: usize,
    /// The chance of a crash at each step; the seed scales it (swarm testing).
    pub crash_rate: f64,
    /// The chance that a commit fails as on a full disk; the seed scales it, and turns it off
    /// for half the seeds (swarm testing). Faults are off in the liveness phase.
    /// Defaults to 0.01, or `SIM_DISK_FULL_RATE`; `SEED_SIM_FAULT_TRACE=1` prints where each
    /// injected fault landed.
    pub disk_full_rate: f64,
    /// The store's second mode: an in-memory database (SQLite's memdb) that outlives each
    /// simulated process, instead of a temp file.
    pub memory: bool,
    /// Exhaustive mode: crash at exactly the n-th crash-point occurrence of the run (counted
    /// from 1 over every process) and nowhere else.
    pub crash_at: Option<usize>,
    /// Verbs of the user's own, which the simulated model calls beside the shipped ones.
    pub verbs: Vec<SimVerb>,
    /// Checks the invariants that hold while turns run after every step (they are always
    /// checked at the end).
    pub check_every_step: bool,
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig {
            seed: 1,
            sessions: 3,
            steps: 30,
            crash_rate: 0.05,
            disk_full_rate: std::env::var("SIM_DISK_FULL_RATE")
                .ok()
                .and_then(|rate| rate.parse().ok())
                .unwrap_or(0.01),
            memory: false,
            crash_at: None,
            verbs: Vec::new(),
            check_every_step: true,
        }
    }
}

/// What a run did and found.
#[derive(Debug, Clone, Default)]
pub struct SimReport {
    pub seed: u64,
    pub steps: usize,
    pub crashes: usize,
    /// The crash points that fired, with how often.
    pub points_fired: BTreeMap<&'static str, usize>,
    /// Crash-point occurrences passed in the faulty processes (what the exhaustive mode
    /// crashes at, one by one).
    pub crash_point_hits: usize,
    /// Model requests answered.
    pub requests: usize,
    /// Commits failed on purpose (a full disk).
    pub faults_injected: usize,
    /// How often the model's calls of each of the user's verbs ran (runs again after a crash
    /// included).
    pub verb_calls: BTreeMap<String, usize>,
    /// Calls that waited for approval and were decided (approved, edited or denied).
    pub approvals_decided: usize,
    pub invariants_checked: usize,
    pub violations: Vec<String>,
    /// The step after which the first violation was seen (the end of the run counts as
    /// `steps`).
    pub violation_step: Option<usize>,
    /// A hash of everything the run did and left: equal for equal seeds.
    pub trace_hash: u64,
}

/// Runs `body` as its own "process": an actix system on a current-thread runtime with a
/// paused clock, on this thread, dropped with everything it runs when `body` returns.
fn in_process<T>(
    body: impl FnOnce() -> BoxFuture<'static, anyhow::Result<T>>,
) -> anyhow::Result<T> {
    let run = std::panic::AssertUnwindSafe(move || {
        let system = actix::System::with_tokio_rt(|| {
            tokio::runtime::Builder::new_current_thread()
                .enable_time()
                .start_paused(true)
                .build()
                .expect("a current-thread runtime builds")
        });
        let result = system.block_on(body());
        drop(system);
        result
    });
    std::panic::catch_unwind(run).map_err(|panic| {
        let what = panic
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| panic.downcast_ref::<&str>().map(|text| (*text).to_owned()))
            .unwrap_or_default();
        anyhow::anyhow!("a simulated process panicked: {what}")
    })?
}

/// The random mode's most crashes in one seed.
const CRASHES_PER_SEED_MAX: usize = 3;

/// How long a process waits for its runs to end, at its drain and in the liveness phase: rounds
/// of simulated time, each of which wakes the queue first.
const QUIET_ROUNDS: usize = 400;
const QUIET_ROUND: Duration = Duration::from_millis(25);

/// Where a process ends when its boot was refused by a full disk.
const BOOT_REFUSED: &str = "boot.refused_by_full_disk";

fn is_disk_full(error: &anyhow::Error) -> bool {
    error.chain().any(|cause| {
        seed_store::Error::is_disk_full_cause(cause)
            || cause
                .downcast_ref::<seed_actors::runtime::Error>()
                .is_some_and(seed_actors::runtime::Error::is_disk_full)
    })
}

/// How a process ended.
enum Epoch {
    /// Crashed at this point, after this many steps in all.
    Crashed(&'static str, usize),
    /// Every step done.
    Done,
}

/// Runs one seed and checks the invariants.
pub fn run(config: &SimConfig) -> anyhow::Result<SimReport> {
    // Every id of the run comes from the seed.
    let _ids = seed_events::ids::seed_ids(config.seed);
    let dir = tempfile::tempdir()?;
    // The "disk": a temp file, or an in-memory database this handle keeps alive.
    let memory_disk = if config.memory {
        Some(seed_store::MemoryDisk::new(&format!(
            "sim-{}",
            config.seed
        ))?)
    } else {
        None
    };
    let path = match &memory_disk {
        Some(disk) => disk.config().path,
        None => dir.path().join("sim.db"),
    };
    let mut rng = fastrand::Rng::with_seed(config.seed);
    // Swarm testing: the seed scales the crash rate of this run.
    // The same draws in every mode, so that an exhaustive run follows its dry run's schedule.
    let (crash_draw, faults_off, fault_draw) = (rng.f64(), rng.bool(), rng.f64());
    let crash_rate = if config.crash_at.is_some() {
        0.0
    } else {
        config.crash_rate * crash_draw * 2.0
    };
    let disk_full_rate = if config.crash_at.is_some() || faults_off {
        0.0
    } else {
        config.disk_full_rate * fault_draw * 2.0
    };
    // Slow streams for some seeds: the model's deltas come this far apart (virtual time), so
    // users write, stop and crash while an answer streams.
    let delta_delay = Duration::from_millis(rng.u64(0..4));
    let shared = Arc::new(Shared {
        crash_at: config.crash_at,
        delta_delay,
        verbs: config.verbs.iter().map(RunVerb::make).collect(),
        ..Shared::default()
    });
    let mut report = SimReport {
        seed: config.seed,
        steps: config.steps,
        ..SimReport::default()
    };

    let setup_path = path.clone();
    let n_sessions = config.sessions;
    in_process(move || {
        Box::pin(async move {
            let store = Store::open(store_config(&setup_path))?;
            store.create_account(account(), vec![9], 0).await?;
            for idx in 0..n_sessions {
                let id = SessionId::from_u128(0x51_7000_0000 + idx as u128);
                store
                    .create_session(NewSession::new(id, account(), 0))
                    .await?;
            }
            Ok(())
        })
    })?;

    let mut step = 0;
    let mut epoch_idx = 0;
    // Virtual milliseconds at the start of each process: time goes on across crashes.
    let clock_ms = Arc::new(std::sync::atomic::AtomicI64::new(1_700_000_000_000));
    while step < config.steps {
        epoch_idx += 1;
        let plan_seed = rng.u64(..);
        let plan = Plan {
            path: &path,
            config,
            plan_seed,
            epoch_idx,
            first_step: step,
            // Random mode: at most this many crashes a seed.
            crash_rate: if report.crashes >= CRASHES_PER_SEED_MAX {
                0.0
            } else {
                crash_rate
            },
            disk_full_rate,
            clock_ms: Arc::clone(&clock_ms),
        };
        let outcome = epoch(&plan, &shared, &mut report)?;
        if std::env::var_os("SEED_SIM_VERBOSE").is_some() {
            let what = match &outcome {
                Epoch::Crashed(point, at) => format!("crashed at {point} after step {at}"),
                Epoch::Done => "done".to_owned(),
            };
            eprintln!("seed {} process {epoch_idx}: {what}", config.seed);
        }
        match outcome {
            Epoch::Crashed(point, at) => {
                shared.note(("crash", point, at));
                report.crashes += 1;
                *report.points_fired.entry(point).or_default() += 1;
                step = at;
            }
            Epoch::Done => step = config.steps,
        }
    }
    report.crash_point_hits = *lock(&shared.hits);
    // Liveness: no faults; every run must end.
    epoch_idx += 1;
    liveness_and_invariants(&path, config, epoch_idx, clock_ms, &shared, &mut report)?;
    report.requests = *lock(&shared.n_requests);
    report.faults_injected = *lock(&shared.n_faults);
    report.verb_calls = lock(&shared.verb_calls).clone();
    report.approvals_decided = *lock(&shared.n_decisions);
    report
        .violations
        .extend(std::mem::take(&mut *lock(&shared.violations)));
    if !report.violations.is_empty() && report.violation_step.is_none() {
        report.violation_step = Some(config.steps);
    }
    report.trace_hash = lock(&shared.trace).finish();
    drop(memory_disk);
    if std::env::var_os("SEED_SIM_KEEP").is_some() {
        eprintln!(
            "seed {}: the database is kept at {}",
            config.seed,
            path.display()
        );
        let _ = dir.keep();
    }
    Ok(report)
}

/// The store of a simulated process: inline, on the simulation's one thread.
fn store_config(path: &Path) -> Config {
    Config {
        inline: true,
        ..Config::new(path)
    }
}

/// What one process does.
struct Plan<'a> {
    path: &'a Path,
    config: &'a SimConfig,
    plan_seed: u64,
    epoch_idx: usize,
    first_step: usize,
    crash_rate: f64,
    disk_full_rate: f64,
    /// Virtual wall-clock milliseconds, read by the runtime for its timestamps.
    clock_ms: Arc<std::sync::atomic::AtomicI64>,
}

fn epoch(plan: &Plan<'_>, outer: &Arc<Shared>, report: &mut SimReport) -> anyhow::Result<Epoch> {
    let path = plan.path.to_owned();
    let shared = Arc::clone(outer);
    let config = plan.config.clone();
    let (plan_seed, epoch_idx, first_step, crash_rate, disk_full_rate) = (
        plan.plan_seed,
        plan.epoch_idx,
        plan.first_step,
        plan.crash_rate,
        plan.disk_full_rate,
    );
    let clock_ms = Arc::clone(&plan.clock_ms);
    let n_steps = config.steps;
    let (outcome, violations, n_checked, violation_step) = in_process(move || {
        Box::pin(async move {
            let mut rng = fastrand::Rng::with_seed(plan_seed);
            // On while the steps run; off while the process drains at its end.
            let faults_on = Arc::new(AtomicBool::new(true));
            let faults = (disk_full_rate > 0.0).then(|| {
                let rng = Mutex::new(fastrand::Rng::with_seed(plan_seed ^ 0xd15c_f011));
                let shared = Arc::clone(&shared);
                let faults_on = Arc::clone(&faults_on);
                seed_store::FaultInjector(Arc::new(move || {
                    if !faults_on.load(Ordering::SeqCst) {
                        return None;
                    }
                    let fail = lock(&rng).f64() < disk_full_rate;
                    if fail {
                        if std::env::var_os("SEED_SIM_FAULT_TRACE").is_some() {
                            eprintln!("FAULT {}", std::backtrace::Backtrace::force_capture());
                        }
                        *lock(&shared.n_faults) += 1;
                    }
                    fail.then_some(seed_store::Fault::DiskFull)
                }))
            });
            let store = Store::open(Config {
                faults,
                ..store_config(&path)
            })?;
            *lock(&shared.store) = Some(store.clone());
            *lock(&shared.epoch_idx) = epoch_idx;
            let armed: Arc<Mutex<Option<&'static str>>> = Arc::default();
            let fired = Arc::new(AtomicBool::new(false));
            let (fired_sender, mut fired_receiver) = futures::channel::mpsc::unbounded();
            let crash_points = CrashPoints::new({
                let (armed, fired, store, shared) = (
                    Arc::clone(&armed),
                    Arc::clone(&fired),
                    store.clone(),
                    Arc::clone(&shared),
                );
                move |point| {
                    let hit = {
                        let mut hits = lock(&shared.hits);
                        *hits += 1;
                        shared.crash_at == Some(*hits) || *lock(&armed) == Some(point)
                    };
                    if hit && !fired.swap(true, Ordering::SeqCst) {
                        store.fence();
                        let _ = fired_sender.unbounded_send(point);
                    }
                    // Once fired, every task that reaches any point stops there too.
                    fired.load(Ordering::SeqCst)
                }
            });
            // A crash inside the boot sweep itself, now and then.
            if rng.f64() < crash_rate {
                *lock(&armed) = Some(points::BOOT_SWEEP_BETWEEN);
            }
            let starting =
                start(&store, &config, crash_points, epoch_idx, &clock_ms, &shared).fuse();
            futures::pin_mut!(starting);
            let runtime = futures::select_biased! {
                point = futures::StreamExt::next(&mut fired_receiver) => {
                    let point = point.unwrap_or(points::BOOT_SWEEP_BETWEEN);
                    return Ok((Epoch::Crashed(point, first_step), Vec::new(), 0, None));
                }
                started = starting => match started {
                    Ok(runtime) => runtime,
                    // A boot that a full disk refused: the process exits, as a service
                    // would, and the next one boots.
                    Err(error) if is_disk_full(&error) => {
                        return Ok((Epoch::Crashed(BOOT_REFUSED, first_step), Vec::new(), 0, None));
                    }
                    Err(error) => return Err(error),
                },
            };
            *lock(&armed) = None;
            let mut violations = leases_of_the_dead(&store, epoch_idx).await?;
            let mut n_checked = 1;
            let mut violation_step = None;

            for step in first_step..n_steps {
                let sessions = live_sessions(&store).await?;
                let roll = rng.f64();
                if roll < crash_rate {
                    let point = points::ALL[rng.usize(..points::ALL.len())];
                    *lock(&armed) = Some(point);
                } else if roll < 0.65 && !sessions.is_empty() {
                    let session = sessions[rng.usize(..sessions.len())];
                    let text = format!("message {step} to {}", &session.to_string()[..8]);
                    shared.note(("send", step, session));
                    // A refused send (the session was deleted meanwhile) is fine.
                    let _ = runtime.send_message(session, &text).await;
                } else if roll < 0.72 && !sessions.is_empty() {
                    let session = sessions[rng.usize(..sessions.len())];
                    shared.note(("stop", step, session));
                    runtime.stop_session(session).await;
                } else if roll < 0.74 && sessions.len() > 1 {
                    let session = sessions[rng.usize(..sessions.len())];
                    shared.note(("delete", step, session));
                    let _ = runtime.delete_session(session).await;
                } else if roll < 0.84 {
                    // A person answers a call that waits for approval: approves it, approves
                    // it with edited arguments, or denies it.
                    let choice = rng.u64(..);
                    if let Some(decided) = answer_an_approval(&store, &sessions, choice).await? {
                        shared.note(("decide", step, decided));
                        *lock(&shared.n_decisions) += 1;
                        runtime.wake();
                    }
                }
                let pause = Duration::from_millis(rng.u64(0..8));
                let fired_now = futures::select_biased! {
                    point = futures::StreamExt::next(&mut fired_receiver) => point,
                    () = actix::clock::sleep(pause).fuse() => None,
                };
                if let Some(point) = fired_now {
                    return Ok((
                        Epoch::Crashed(point, step + 1),
                        violations,
                        n_checked,
                        violation_step,
                    ));
                }
                if config.check_every_step {
                    let before = violations.len();
                    let launches = lock(&shared.launches).clone();
                    n_checked += invariants::check_running_database(
                        &store,
                        account(),
                        &launches,
                        &mut violations,
                    )
                    .await?;
                    n_checked += users_invariants(&shared, &mut violations);
                    if violations.len() > before || !lock(&shared.violations).is_empty() {
                        violation_step.get_or_insert(step + 1);
                    }
                }
            }
            // Give an armed point a last moment to fire, then end the process.
            let mut fired_now = futures::select_biased! {
                point = futures::StreamExt::next(&mut fired_receiver) => point,
                () = actix::clock::sleep(Duration::from_millis(20)).fuse() => None,
            };
            // The process drains before it ends, faults off: every run must end here. The next
            // process's boot sweep would requeue a run this one lost track of (one whose actor
            // stopped before sending it back to the queue, say), and hide the loss.
            if fired_now.is_none() {
                faults_on.store(false, Ordering::SeqCst);
                let mut drained = false;
                for _ in 0..QUIET_ROUNDS {
                    // The person answers what waits for approval: nothing else ends those runs.
                    answer_every_approval(&store, &shared).await?;
                    drained = store.list_open_runs().await?.is_empty();
                    if drained {
                        break;
                    }
                    runtime.wake();
                    fired_now = futures::select_biased! {
                        point = futures::StreamExt::next(&mut fired_receiver) => point,
                        () = actix::clock::sleep(QUIET_ROUND).fuse() => None,
                    };
                    if fired_now.is_some() {
                        break;
                    }
                }
                if !drained && fired_now.is_none() {
                    for run in store.list_open_runs().await? {
                        violations.push(format!(
                            "drain: run {} of session {} is still {} (pass {}, attempts {}) at \
                             the end of process {epoch_idx}, faults off",
                            run.id, run.session_id, run.status, run.pass, run.attempts
                        ));
                    }
                    violation_step.get_or_insert(n_steps);
                }
            }
            let outcome = match fired_now {
                Some(point) => Epoch::Crashed(point, n_steps),
                None => Epoch::Done,
            };
            Ok((outcome, violations, n_checked, violation_step))
        })
    })?;
    *lock(&outer.store) = None;
    report.invariants_checked += n_checked;
    if report.violation_step.is_none() {
        report.violation_step = violation_step.or(if violations.is_empty() {
            None
        } else {
            Some(first_step)
        });
    }
    report.violations.extend(violations);
    Ok(outcome)
}

async fn start(
    store: &Store,
    config: &SimConfig,
    crash_points: CrashPoints,
    epoch_idx: usize,
    clock_ms: &Arc<std::sync::atomic::AtomicI64>,
    shared: &Arc<Shared>,
) -> anyhow::Result<Runtime> {
    let settings = RuntimeSettings {
        crash_points,
        session_idle: Duration::from_millis(50),
        ..RuntimeSettings::default()
    };
    let mut verbs = seed_actors::verbs::shipped();
    verbs.push(Arc::new(Launch {
        runs: Arc::clone(&shared.launches),
    }));
    for classed in model::McpClassed::all(&shared.launches) {
        verbs.push(Arc::new(classed));
    }
    verbs.extend(shared.verbs.iter().map(|run_verb| {
        Arc::new(Counted {
            inner: Arc::clone(&run_verb.verb),
            runs: Arc::clone(&shared.launches),
            calls: Arc::clone(&shared.verb_calls),
        }) as Arc<dyn seed_actors::Verb>
    }));
    let observer = Arc::clone(shared);
    let model = model(
        config.seed,
        Arc::clone(&shared.verbs),
        Arc::new(move |request: &Request, answer: &ScriptedStep| observer.observe(request, answer)),
    )
    .with_delta_delay(shared.delta_delay);
    // Virtual time: the paused clock's progress since this process began, after the time of
    // every earlier process.
    let origin = actix::clock::Instant::now();
    let base_ms = clock_ms.load(Ordering::SeqCst);
    let clock = Arc::clone(clock_ms);
    let (runtime, _) = Runtime::start(
        store.clone(),
        Arc::new(model),
        verbs,
        settings,
        format!("boot-{epoch_idx}"),
        Arc::new(move || {
            let now = base_ms + origin.elapsed().as_millis() as i64;
            clock.fetch_max(now, Ordering::SeqCst);
            now
        }),
    )
    .await?;
    Ok(runtime)
}

/// The sessions a person can write to: every session that is not a delegated child.
async fn live_sessions(store: &Store) -> anyhow::Result<Vec<SessionId>> {
    Ok(store
        .list_sessions(account())
        .await?
        .into_iter()
        .filter(|session| session.parent_session_id.is_none())
        .map(|session| session.id)
        .collect())
}

/// After the boot sweep, no lease may be held by an earlier process.
async fn leases_of_the_dead(store: &Store, epoch_idx: usize) -> anyhow::Result<Vec<String>> {
    let mut violations = Vec::new();
    let own = format!("boot-{epoch_idx}");
    for session in store.list_sessions(account()).await? {
        if let Some(lease) = store.get_lease(session.id).await?
            && lease.owner != own
        {
            violations.push(format!(
                "session {}: lease of dead owner {} after the boot sweep",
                session.id, lease.owner
            ));
        }
    }
    Ok(violations)
}

/// The last process: no faults. Every run must end; then every invariant is checked.
fn liveness_and_invariants(
    path: &Path,
    config: &SimConfig,
    epoch_idx: usize,
    clock_ms: Arc<std::sync::atomic::AtomicI64>,
    shared: &Arc<Shared>,
    report: &mut SimReport,
) -> anyhow::Result<()> {
    let path = path.to_owned();
    let shared = Arc::clone(shared);
    let config = config.clone();
    let (violations, n_checked) = in_process(move || {
        Box::pin(async move {
            let store = Store::open(store_config(&path))?;
            *lock(&shared.store) = Some(store.clone());
            *lock(&shared.epoch_idx) = epoch_idx;
            let runtime = start(
                &store,
                &config,
                CrashPoints::default(),
                epoch_idx,
                &clock_ms,
                &shared,
            )
            .await?;
            let mut violations = leases_of_the_dead(&store, epoch_idx).await?;
            let mut quiet = false;
            for _ in 0..QUIET_ROUNDS {
                answer_every_approval(&store, &shared).await?;
                // Quiet once every run ended and every wake-up fired (on virtual time).
                if store.list_open_runs().await?.is_empty()
                    && store.next_schedule_due().await?.is_none()
                {
                    quiet = true;
                    break;
                }
                runtime.wake();
                actix::clock::sleep(QUIET_ROUND).await;
            }
            if !quiet {
                for run in store.list_open_runs().await? {
                    let children: Vec<String> = store
                        .child_runs(run.id)
                        .await?
                        .into_iter()
                        .map(|child| {
                            format!("{} {} {:?}", child.session_id, child.status, child.result)
                        })
                        .collect();
                    let log: Vec<String> = store
                        .read_events(run.session_id, 1, i64::MAX, usize::MAX)
                        .await?
                        .iter()
                        .filter_map(seed_projections::transcript::transcript_event_line)
                        .collect();
                    violations.push(format!(
                        "liveness: run {} of session {} is still {} (pass {}, children {children:#?}, log {log:#?})",
                        run.id, run.session_id, run.status, run.pass
                    ));
                }
            }
            // A wake-up already due that never fired was lost.
            if let Some(due_ms) = store.next_schedule_due().await?
                && due_ms <= clock_ms.load(Ordering::SeqCst)
            {
                violations.push(format!(
                    "liveness: a wake-up due at {due_ms} never fired (it is {} now)",
                    clock_ms.load(Ordering::SeqCst)
                ));
            }
            // Let session actors finish closing their runs.
            actix::clock::sleep(Duration::from_millis(20)).await;
            let launches = shared
                .launches
                .lock()
                .map(|launches| launches.clone())
                .unwrap_or_default();
            let n_checked =
                invariants::check_quiet_database(&store, account(), &launches, &mut violations)
                    .await?;
            let n_checked = n_checked + users_invariants(&shared, &mut violations);
            // `seed fsck` on the database as the run leaves it, through its own read-only
            // connection.
            let report = fsck::fsck(&store_config(&path))?;
            violations.extend(
                report
                    .findings
                    .into_iter()
                    .map(|finding| format!("fsck: {finding}")),
            );
            let n_checked = n_checked + 1;
            shared.note(database_digest(&store).await?);
            *lock(&shared.store) = None;
            Ok((violations, n_checked))
        })
    })?;
    report.invariants_checked += n_checked;
    report.violations.extend(violations);
    Ok(())
}

/// Checks the invariants of the user's verbs; returns how many ran.
fn users_invariants(shared: &Shared, violations: &mut Vec<String>) -> usize {
    let mut n_checked = 0;
    for run_verb in shared.verbs.iter() {
        if let Some(invariant) = &run_verb.invariant {
            n_checked += 1;
            violations.extend(
                invariant()
                    .into_iter()
                    .map(|violation| format!("{}: {violation}", run_verb.verb.name())),
            );
        }
    }
    n_checked
}

/// What the database holds at the end, for the trace hash: every session's log and runs.
async fn database_digest(store: &Store) -> anyhow::Result<u64> {
    let mut hasher = DefaultHasher::new();
    for session in store.list_sessions(account()).await? {
        session.id.hash(&mut hasher);
        for event in store
            .read_events(session.id, 1, i64::MAX, usize::MAX)
            .await?
        {
            (
                event.seq,
                &event.kind,
                format!("{:?}", event.role),
                &event.actor,
                event.content.to_string(),
                event.meta.to_string(),
            )
                .hash(&mut hasher);
        }
        for run in store.list_session_runs(session.id).await? {
            (run.id, run.status.to_string(), run.pass).hash(&mut hasher);
        }
    }
    Ok(hasher.finish())
}
