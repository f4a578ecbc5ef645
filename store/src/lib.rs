//! Seed's SQLite store: one database holds every session's log and durable store, so one step's
//! writes share a transaction.
//!
//! Layout:
//! - [`Store`] opens the database (pragmas and migrations: `schema`), starts the one writer
//!   thread (`writer`, group commit) and a small pool of read connections (`readers`).
//! - [`SessionFiles`] is the durable file system over `session_durable_files`.
//! - The typed APIs live one table to a module: `sessions`, `log`, `runs`, `closing` (a run's
//!   end in one transaction), `children`, `leases`, `retries`, `continuations`, `memory`,
//!   `effects` (what a call that must not run twice did), `attachments` (files under the data
//!   dir on SQLite, their bytes in the database on PostgreSQL). Each has plain functions over a
//!   connection (so several can share one transaction) and its own `impl Store` block whose
//!   methods run them through the writer or a reader; `store` keeps opening, that plumbing, and
//!   what belongs to no table. The functions over a connection, run by the writer and the
//!   reader pool, are where a second engine plugs in.
//! - `nonces` and `accounts`: what the service needs — signed writes that take the request's
//!   nonce in their own transaction, accounts by key, counts for metrics.
//! - [`floor`] is the raw SQLite floor the bench harness measures against.
//! - [`fsck`] is `seed fsck`'s read-only reader (each session in one snapshot) and the checks
//!   the store alone can make.
//!
//! Invariant: this is the only crate that touches SQLite.

mod accounts;
mod approvals;
mod attachments;
mod checkpoint;
mod children;
mod closing;
mod config;
mod continuations;
mod effects;
mod elicitations;
mod error;
mod files;
pub mod floor;
mod forks;
pub mod fsck;
mod kept;
mod leases;
mod log;
mod memory;
mod memory_disk;
mod nodes;
mod nonces;
mod postgres;
mod projection;
mod readers;
mod recalls;
mod retries;
mod runs;
mod schedules;
mod schema;
mod sessions;
mod spin;
mod sql;
mod store;
mod tokens;
mod turn_view;
mod wal_writes;
mod writer;

pub use approvals::{ApprovalDecision, ApprovalRow, ApprovalStatus, DecideOutcome, NewApproval};
pub use attachments::{AttachmentRow, NewAttachment, UploadOutcome};
pub use children::{ChildDelivery, DELEGATED_BY, DeliveringChild, ParkOutcome, delegated_by};
pub use closing::{PlanCheck, PlanNotice, RunClosing, RunEndOutcome};
pub use config::{
    BatchMode, Config, DatabaseUrl, Fault, FaultInjector, Quotas, Synchronous, redact_password,
};
pub use continuations::{ContinuationRow, CreatedSuccessor, NewContinuation, NewSuccessor};
pub use effects::CallEffect;
pub use elicitations::{
    AnswerOutcome, AskOutcome, ElicitationAnswer, ElicitationRow, ElicitationStatus, NewElicitation,
};
pub use error::{Error, Refusal, Result};
pub use files::SessionFiles;
pub use forks::{FORK_KEY_PREFIX, ForkCreation, NewFork};
pub use leases::{LeaseOutcome, LeaseRow};
pub use memory::{MemoryChange, MemoryFileRow};
pub use memory_disk::MemoryDisk;
pub use nodes::NodeRow;
pub use nonces::{ModelChange, NonceOutcome, RequestNonce, SendOutcome, SignedMessage};
pub use postgres::Postgres;
pub use postgres::floor as postgres_floor;
pub use postgres::notices;
pub use postgres::scratch::{ScratchDatabase, TEST_CLUSTER_VAR};
pub use projection::Projection;
pub use recalls::{NewRecall, RECALL_LINEAGE_EDGES_MAX, ReaderRecall, RecallSummary};
pub use retries::{RetryOutcome, SignedRetry};
pub use runs::{ClaimFor, NewRun, RunRow, Swept};
pub use schedules::{FiredWakeup, NewSchedule, ScheduleRow};
pub use schema::{Engine, LATEST_VERSION, migrate_sqlite, schema_script};
pub use sessions::{AccountRow, NewSession, SessionRow, SessionsAfter, SessionsPage, TitleSource};
pub use store::Store;
pub use tokens::{LoginCodeOutcome, MintOutcome};
pub use turn_view::{PendingEvents, TurnView};
pub use writer::{LatencyHistogram, WriterHold, WriterStats};
