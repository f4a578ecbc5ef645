//! The durable loop ("Pi Durable"): it runs a turn — ask the model, run the tool calls of each
//! response, ask again until the model answers — and commits every step before anything else
//! sees it.
//!
//! This crate knows nothing of SQLite or of Seed's log. It works over [`DurableFs`]: a handful
//! of append-only line files per session, read in order and appended to atomically. The store
//! crate implements it over database rows; [`MemoryFs`] implements it in memory for tests.
//!
//! Layout:
//! - `fs`: the [`DurableFs`] trait and [`MemoryFs`].
//! - `record`: the store format — entries, documents, tasks.
//! - `state`: the store folded into memory, and the [`Batch`]es that change it.
//! - `context`: what the model sees (pure).
//! - `turn`: the turn's state machine — what to do next, given the store (pure).
//! - `harness`: the shell that does it: requests, tool calls, commits, recovery; `harness::stream`
//!   reads one response, committing what has streamed to `pi.live`.
//! - `tool`, `stop`: tools as the harness sees them; stopping a turn.
//! - `spans`: the trace spans of model requests and tool calls (plain `tracing`).

pub mod context;
pub mod fs;
pub mod harness;
pub mod record;
pub mod spans;
pub mod state;
pub mod stop;
pub mod tool;
pub mod turn;

pub use fs::{Append, DurableFs, FileName, MemoryFs, MemoryFsError, OpenLines};
pub use harness::{
    BeforeRequest, Clock, Error, Harness, HarnessConfig, HookDecision, SystemClock, TurnOutcome,
    TurnRequest,
};
pub use record::{Entry, EntryBody, EntryId};
pub use spans::TRACE_TARGET;
pub use state::{Batch, Kept, StoreState};
pub use stop::StopSignal;
pub use tool::{Decision, Tool, ToolOutput, ToolSet};
