//! Seed's vocabulary: the ids, log events and run records that every other crate speaks.
//!
//! This crate holds data and its validation only: no IO, no clock, no randomness. Ids are made
//! by the caller (a uuid v7 in the service, the simulator's seeded source in tests) and passed in.

pub mod attachments;
pub mod body;
pub mod continuation;
pub mod ids;
pub mod limits;
pub mod lineage;
pub mod log;
pub mod run;
pub mod schedule;

pub use attachments::{AttachmentRef, message_attachments};
pub use body::{
    ActionBody, EventBody, MessageBody, NoticeBody, RunResult, ToolCallBody, ToolResultBody,
};
pub use continuation::{
    ContinuationLink, ContinueSessionInput, ContinuedFrom, ForkPoint, Handoff, PlanTransfer,
    SeqRange, SessionContinuationManifest, Source,
};
pub use ids::{AccountId, ContinuationId, EventId, RunId, ScheduleId, SessionId};
pub use lineage::{EdgeKind, Lineage, LineageEdge, LineageEdgeKind, LineageNode};
pub use log::{EventRole, NewEvent, SessionEvent};
pub use run::{Queue, RunStatus};

/// A name that does not parse as one of an enum's values.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown {kind} {value:?}")]
pub struct UnknownName {
    /// What was being parsed, e.g. "queue".
    pub kind: &'static str,
    /// The text that was refused.
    pub value: String,
}
