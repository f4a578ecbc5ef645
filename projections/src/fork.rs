//! Forks, the pure part: a person branches a session from an earlier message, and the fork's
//! log is the predecessor's up to that message.
//!
//! [`check_fork_point`] says whether a seq is a point a conversation can be cut at: the seq of a
//! message a person or the agent wrote (role user or assistant), with every tool call before it
//! answered at or before it. A cut inside a tool call (a call whose result comes later, as a
//! delegated child's does) would hand the model a call with no result; a cut at a tool result,
//! a notice or a verb run by hand leaves the message that answers it behind, so the seq of that
//! message is the point to give.
//!
//! [`fork_events`] copies the predecessor's events `1..=seq` as the fork's log: the same kinds,
//! roles, actors, content and meta, at the same seqs, with no `pi_entry_id` and no run (those
//! name the predecessor's store entries and runs). With an empty durable store and every event
//! pending, the fork's first turn rebuilds its context from the log (`import::plan_import`: a
//! reset, then the whole log replayed, each result behind its call), so the model is put exactly
//! that conversation and the person's new message after it. A copy drops `meta.continued_from`:
//! that key marks a successor's own copied message, which the boot sweep queues a run for. A
//! copied projection (a successor's first event) gains the successor it was made for in its
//! `meta.continuation`, where the page finds the handoff it shows.
//!
//! [`fork_manifest`] is the manifest stored on the fork's edge: a [`ForkPoint`], no projection.

use std::collections::BTreeSet;

use seed_events::continuation::{CONTINUED_FROM_META, MANIFEST_VERSION};
use seed_events::{
    ContinuedFrom, EventBody, EventRole, ForkPoint, Handoff, NewEvent, PlanTransfer,
    SessionContinuationManifest, SessionEvent, SessionId, message_attachments,
};
use serde_json::Value;

/// The meta key of a successor's projection (its first event) that names its edge.
pub const PROJECTION_META: &str = "continuation";

/// The key under [`PROJECTION_META`] that a projection's copy in a fork gains: the successor the
/// projection was made for, whose edge (`GET /v1/sessions/{id}/continuation`) holds its handoff.
pub const PROJECTION_SUCCESSOR_KEY: &str = "successor_session_id";

/// The most events a fork copies: a fork is one transaction, and this bounds it.
pub const FORK_EVENTS_MAX: usize = 10_000;

/// Why a seq is not a point to fork at. Each names the seq and says which seq would do.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ForkPointError {
    #[error("seq {seq} is not in the session, whose log has {last_seq} events")]
    OutOfRange { seq: i64, last_seq: i64 },
    #[error("seq {seq} is past the {FORK_EVENTS_MAX} events a fork copies at most")]
    TooLong { seq: i64 },
    #[error(
        "seq {seq} is a {what}, not a message a person or the agent wrote; give the seq of a \
         user or assistant message"
    )]
    NotAMessage { seq: i64, what: String },
    #[error(
        "seq {seq} cuts into a tool call: the call at seq {call_seq} has no result at or before \
         it; give the seq of a message after its result"
    )]
    InsideToolCall { seq: i64, call_seq: i64 },
}

/// Checks that `seq` is a whole conversation's end, given `events` (the predecessor's events
/// from seq 1 on, in order, at least up to `seq`; `last_seq` its newest). Returns the event at
/// `seq`.
pub fn check_fork_point(
    events: &[SessionEvent],
    seq: i64,
    last_seq: i64,
) -> Result<&SessionEvent, ForkPointError> {
    if seq < 1 || seq > last_seq {
        return Err(ForkPointError::OutOfRange { seq, last_seq });
    }
    if seq > FORK_EVENTS_MAX as i64 {
        return Err(ForkPointError::TooLong { seq });
    }
    let upto = &events[..events.partition_point(|event| event.seq <= seq)];
    // The caller reads the log from seq 1 on; a log is gapless, so the event at `seq` is the
    // `seq`th.
    assert!(
        upto.len() as i64 == seq && upto.iter().zip(1..).all(|(event, n)| event.seq == n),
        "a fork point is checked against the whole log from seq 1 (seq {seq}, {} events given)",
        upto.len()
    );
    let at = &upto[upto.len() - 1];
    let is_message = matches!(at.body(), EventBody::Message(_))
        && matches!(at.role, Some(EventRole::User | EventRole::Assistant));
    if !is_message {
        let role = at.role.map(|role| format!(" ({})", role.as_str()));
        return Err(ForkPointError::NotAMessage {
            seq,
            what: format!("{} event{}", at.kind, role.unwrap_or_default()),
        });
    }
    // Every call before the point is answered at or before it.
    let mut open: Vec<(String, i64)> = Vec::new();
    for event in upto {
        match event.body() {
            EventBody::ToolCall(call) => open.push((call.id, event.seq)),
            EventBody::ToolResult(result) => {
                open.retain(|(id, _)| *id != result.tool_call_id);
            }
            _ => {}
        }
    }
    if let Some((_, call_seq)) = open.first() {
        return Err(ForkPointError::InsideToolCall {
            seq,
            call_seq: *call_seq,
        });
    }
    Ok(at)
}

/// The fork's log: the predecessor's events `1..=seq` copied, stamped `now_ms`.
pub fn fork_events(events: &[SessionEvent], seq: i64, now_ms: i64) -> Vec<NewEvent> {
    events
        .iter()
        .take_while(|event| event.seq <= seq)
        .map(|event| {
            let mut meta = event.meta.clone();
            if let Value::Object(fields) = &mut meta {
                fields.remove(CONTINUED_FROM_META);
                // A successor's projection names its edge by the continuation's id; its copy
                // also names the successor it was made for (kept through a fork of a fork), since
                // the fork's own edge is not the one whose handoff it shows.
                if let Some(Value::Object(continuation)) = fields.get_mut(PROJECTION_META) {
                    continuation
                        .entry(PROJECTION_SUCCESSOR_KEY)
                        .or_insert_with(|| Value::String(event.session_id.to_string()));
                }
            }
            NewEvent {
                kind: event.kind.clone(),
                role: event.role,
                actor: event.actor.clone(),
                content: event.content.clone(),
                meta,
                run_id: None,
                pi_entry_id: None,
                created_at_ms: now_ms,
            }
        })
        .collect()
}

/// The attachments the copied events name (a person's files, a tool's images), each once, in
/// the order first named: the fork links them, so `attachment:<id>` resolves in it too.
pub fn fork_attachment_ids(events: &[NewEvent]) -> Vec<String> {
    let mut seen = BTreeSet::new();
    events
        .iter()
        .flat_map(|event| message_attachments(&event.content))
        .map(|named| named.id)
        .filter(|id| seen.insert(id.clone()))
        .collect()
}

/// What a fork's manifest records.
#[derive(Debug, Clone, Copy)]
pub struct ForkManifestInput<'a> {
    pub predecessor_session_id: SessionId,
    /// The first session of the predecessor's chain (itself when it continues none).
    pub origin_session_id: SessionId,
    /// The predecessor's event at the fork point.
    pub at: &'a SessionEvent,
    pub predecessor_last_seq: i64,
    pub title: &'a str,
    pub description: &'a str,
}

/// The manifest of a fork's edge: where it branched, and no projection (nothing loaded,
/// nothing omitted: the fork's log holds the conversation itself).
pub fn fork_manifest(input: ForkManifestInput<'_>) -> SessionContinuationManifest {
    SessionContinuationManifest {
        version: MANIFEST_VERSION,
        predecessor_session_id: input.predecessor_session_id,
        origin_session_id: input.origin_session_id,
        initiating_event: ContinuedFrom {
            session_id: input.predecessor_session_id,
            event_id: input.at.id,
            seq: input.at.seq,
        },
        predecessor_last_seq: input.predecessor_last_seq,
        reason: fork_reason(input.at.seq),
        title: input.title.to_owned(),
        description: input.description.to_owned(),
        handoff: Handoff::default(),
        sources: Vec::new(),
        plan: PlanTransfer::Omit,
        excerpts: Vec::new(),
        recent_exchanges: None,
        omitted: Vec::new(),
        recalled: Vec::new(),
        budget_bytes: 0,
        projection_bytes: 0,
        fork: Some(ForkPoint {
            seq: input.at.seq,
            event_id: input.at.id,
        }),
    }
}

/// Where a fork's log (`events`, from seq 1) is not the copy of its predecessor's events up to
/// its `point` (`predecessor`, the predecessor's events from seq 1 on): each copy of the same
/// kind, role, actor and content at the same seq, and the event at the point the one the
/// manifest names. `seed fsck`'s check of a fork; empty when the copy is exact.
pub fn fork_findings(
    events: &[SessionEvent],
    point: ForkPoint,
    predecessor: &[SessionEvent],
) -> Vec<String> {
    let at = |log: &[SessionEvent], seq: i64| log.iter().find(|event| event.seq == seq).cloned();
    let mut findings = Vec::new();
    for seq in 1..=point.seq {
        match (at(events, seq), at(predecessor, seq)) {
            (None, _) => findings.push(format!(
                "it lacks seq {seq}, which it copied from its predecessor"
            )),
            (Some(_), None) => findings.push(format!(
                "its predecessor lacks seq {seq}, which the fork copied (forked at seq {})",
                point.seq
            )),
            (Some(copy), Some(original)) => {
                let same = copy.kind == original.kind
                    && copy.role == original.role
                    && copy.actor == original.actor
                    && copy.content == original.content;
                if !same {
                    findings.push(format!(
                        "its seq {seq} is not a copy of its predecessor's seq {seq}"
                    ));
                }
                if seq == point.seq && original.id != point.event_id {
                    findings.push(format!(
                        "its manifest forks at event {} but its predecessor's seq {seq} is \
                         event {}",
                        point.event_id.0, original.id.0
                    ));
                }
            }
        }
    }
    findings
}

/// The reason a fork's edge records.
pub fn fork_reason(seq: i64) -> String {
    format!("branched from seq {seq}")
}

#[cfg(test)]
mod tests;
