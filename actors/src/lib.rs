//! Seed's imperative shell on actix: it makes the durable loop a running system.
//!
//! Layout:
//! - `runtime`: [`Runtime`] starts everything (after the boot sweep) and is the handle callers
//!   use: send a message, stop or delete a session, wait for a run.
//! - `queue`: the [`RunQueue`](queue::RunQueue) actor — interactive and background runs, a limit
//!   for each, one turn per session.
//! - `session`: the [`SessionActor`](session::SessionActor) — one per active session, holding
//!   its run in flight; stopped after it has been idle.
//! - `env`: what every run shares ([`RunEnv`](env::RunEnv)) and the runtime's settings.
//! - `turn`: one run, start to end — the steps around the durable harness (lease, projection of
//!   what the log lacks, import, blocks, the turn, closing the run).
//! - `verb`: the verb extension API ([`Verb`]); `verbs`: the verbs Seed ships.
//! - `succession`: the succession actor creates sessions for running turns — a continuation
//!   is a message to it; `continuation` is the shell of a continue_session call.
//! - `messages`: what the queue, the session actors and the runtime send each other; `slots`:
//!   the runs in flight per queue; `schema`: the argument check verbs and actions share.
//! - `logged_files`: a session's durable files with the log following them commit by commit,
//!   and subscribers told what each commit made visible.
//! - `scheduler`: fires the wake-ups sessions scheduled (`verbs::schedule`), each as one
//!   background run queued with its notice.
//! - `crash`: named crash points, for crash-injection tests and the simulator.
//! - `fork`: a person's fork of a session at an earlier message, created whole or not at all.
//! - `attachments`: reads what the model is shown of the files a turn's messages name.
//! - `bus`: notifications and streaming deltas for subscribers.
//! - `by_person`: a person's continuation and its preview, as `Runtime` methods.
//! - `traces`: the spans of runs and their waits, for the service's trace exporter.
//! - `recalls`: a thread read's recall of what a continuation left out, recorded against its
//!   edge, and the ranges recalled repeatedly read back for the next projection.
//!
//! Invariant: no SQLite work on an arbiter thread — every store call is the store's async API.

pub mod approval_timer;
pub mod attachments;
pub mod bus;
mod by_person;
pub mod continuation;
pub mod crash;
pub mod env;
pub mod fork;
pub mod logged_files;
pub mod messages;
pub mod peers;
pub mod queue;
pub mod recalls;
pub mod run_end;
pub mod runtime;
pub mod scheduler;
pub mod schema;
pub mod session;
pub mod slots;
pub mod succession;
pub mod traces;
pub mod turn;
pub mod verb;
pub mod verbs;

pub use bus::Notification;
pub use crash::CrashPoints;
pub use env::{RuntimeSettings, account_runs_max_default};
pub use runtime::{BootReport, RunWatch, Runtime, SessionInfo};
pub use verb::{Availability, TurnEffect, Verb, VerbContext, VerbOutput, parse_arguments};
