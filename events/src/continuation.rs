//! Continuation: the records of one conversation carried into a successor session.
//!
//! The continue_session verb's arguments, once normalized and checked
//! ([`ContinueSessionInput`]); the handoff and its sections; the sources it cites; what happens
//! to the plan; the manifest stored on the edge (CBOR), which records what the successor's
//! projection was built from; and the links a session shows to its predecessor and successor.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::{ContinuationId, EventId, SessionId};

/// The key of a copied initiating message's meta that names where it was copied from.
pub const CONTINUED_FROM_META: &str = "continued_from";

/// The handoff: prose for a colleague who has read nothing. Every section is a list of
/// paragraphs (a string given for a section is a list of one).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Handoff {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub purpose: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub current_request: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub established_facts: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub decisions: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub open_questions: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub next_actions: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cautions: Vec<String>,
    /// Every other key the agent wrote, with its value as a list of strings; each is rendered as
    /// a section of its own.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub extra: BTreeMap<String, Vec<String>>,
}

impl Handoff {
    /// The named sections in the order they are rendered: (the argument's key, the heading,
    /// the paragraphs).
    pub fn sections(&self) -> [(&'static str, &'static str, &[String]); 7] {
        [
            ("purpose", "Purpose", &self.purpose),
            ("currentRequest", "Current request", &self.current_request),
            (
                "establishedFacts",
                "Established facts",
                &self.established_facts,
            ),
            ("decisions", "Decisions", &self.decisions),
            ("openQuestions", "Open questions", &self.open_questions),
            ("nextActions", "Next actions", &self.next_actions),
            ("cautions", "Cautions", &self.cautions),
        ]
    }

    /// Whether no section has any text.
    pub fn is_empty(&self) -> bool {
        self.sections()
            .iter()
            .all(|(_, _, paragraphs)| paragraphs.iter().all(|p| p.trim().is_empty()))
            && self
                .extra
                .values()
                .all(|paragraphs| paragraphs.iter().all(|p| p.trim().is_empty()))
    }

    /// The named section the argument key `key` fills, for normalization.
    pub fn section_mut(&mut self, key: &str) -> Option<&mut Vec<String>> {
        Some(match key {
            "purpose" => &mut self.purpose,
            "currentRequest" | "current_request" => &mut self.current_request,
            "establishedFacts" | "established_facts" => &mut self.established_facts,
            "decisions" => &mut self.decisions,
            "openQuestions" | "open_questions" => &mut self.open_questions,
            "nextActions" | "next_actions" => &mut self.next_actions,
            "cautions" => &mut self.cautions,
            _ => return None,
        })
    }
}

/// An exact pointer the handoff cites.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Source {
    /// An `hm://`, `ipfs://` or `http(s)://` address.
    Resource { uri: String },
    /// A memory file, `~/memory/…`; it existed when the continuation was made.
    Memory { path: String },
    /// Events `from_seq..=to_seq` of one of the agent's own threads.
    SessionEvents {
        thread: SessionId,
        from_seq: i64,
        to_seq: i64,
    },
    /// One event of one of the agent's own threads.
    SessionEvent { thread: SessionId, seq: i64 },
}

impl Source {
    /// The seq range a thread source cites.
    pub fn range(&self) -> Option<SeqRange> {
        match *self {
            Source::SessionEvents {
                thread,
                from_seq,
                to_seq,
            } => Some(SeqRange {
                thread,
                from_seq,
                to_seq,
            }),
            Source::SessionEvent { thread, seq } => Some(SeqRange {
                thread,
                from_seq: seq,
                to_seq: seq,
            }),
            Source::Resource { .. } | Source::Memory { .. } => None,
        }
    }
}

/// Events `from_seq..=to_seq` of a thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct SeqRange {
    pub thread: SessionId,
    pub from_seq: i64,
    pub to_seq: i64,
}

/// What happens to the predecessor's plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PlanTransfer {
    /// The successor gets a copy (the default while steps are unfinished), and its run adopts it.
    Carry,
    /// The predecessor's plan is closed (cleared) and the successor starts without one.
    Close,
    /// The successor starts without a plan; the predecessor keeps its own.
    Omit,
}

impl PlanTransfer {
    pub fn as_str(self) -> &'static str {
        match self {
            PlanTransfer::Carry => "carry",
            PlanTransfer::Close => "close",
            PlanTransfer::Omit => "omit",
        }
    }
}

/// The continue_session call's arguments, normalized and checked.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContinueSessionInput {
    pub reason: String,
    pub title: String,
    pub description: String,
    pub handoff: Handoff,
    pub sources: Vec<Source>,
    /// `None`: carry when the plan has unfinished steps, omit otherwise.
    pub plan: Option<PlanTransfer>,
}

/// Where a copied initiating message came from: its meta's `continued_from`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContinuedFrom {
    pub session_id: SessionId,
    pub event_id: EventId,
    pub seq: i64,
}

/// What a successor's projection was built from, stored on the edge as CBOR.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionContinuationManifest {
    /// The manifest's own format version.
    pub version: u32,
    pub predecessor_session_id: SessionId,
    pub origin_session_id: SessionId,
    /// The message the successor answers, as it is in the predecessor.
    pub initiating_event: ContinuedFrom,
    /// The predecessor's newest seq when the projection was built.
    pub predecessor_last_seq: i64,
    pub reason: String,
    pub title: String,
    pub description: String,
    pub handoff: Handoff,
    pub sources: Vec<Source>,
    pub plan: PlanTransfer,
    /// Cited ranges loaded as `<excerpt>` blocks (a range cut by the budget appears with the
    /// part that was loaded).
    pub excerpts: Vec<SeqRange>,
    /// The range loaded as `<recent_exchanges>`, if any.
    pub recent_exchanges: Option<SeqRange>,
    /// What was linked and not loaded: cited ranges (or their ends) over the budget, and the
    /// transcript before the recent exchanges.
    pub omitted: Vec<SeqRange>,
    /// Ranges of earlier threads of the lineage that the predecessor recalled with `read
    /// thread:` in two or more calls after the continuation that made it: each loaded as an
    /// `<excerpt … recalled="…">` block when the budget allowed, else also listed in `omitted`.
    /// Empty in manifests written before recalls were counted.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub recalled: Vec<RecalledRange>,
    pub budget_bytes: u64,
    /// The projection's size, in bytes.
    pub projection_bytes: u64,
    /// Set on a fork's edge: a person branched from the predecessor at this point, and the
    /// successor's log is the predecessor's up to it (it has no projection; the fields above
    /// say what a projection would: none loaded, nothing omitted). Absent on a continuation's,
    /// so every manifest written before forks decodes, and a continuation's encodes as it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fork: Option<ForkPoint>,
}

/// Where a fork branched from its predecessor: the predecessor's events up to and including
/// `seq` (the event `event_id`) are the fork's conversation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ForkPoint {
    pub seq: i64,
    pub event_id: EventId,
}

/// A range the predecessor recalled repeatedly, as a projection carried it on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecalledRange {
    pub range: SeqRange,
    /// How many distinct read calls recalled every seq of the range.
    pub times: u32,
    /// Whether the projection loaded it as an excerpt (false: over the budget, listed as
    /// omitted).
    pub loaded: bool,
}

/// The manifest format [`SessionContinuationManifest::version`] this build writes.
pub const MANIFEST_VERSION: u32 = 1;

/// A manifest that does not decode.
#[derive(Debug, thiserror::Error)]
#[error("the continuation manifest does not decode: {0}")]
pub struct ManifestError(String);

impl SessionContinuationManifest {
    /// The manifest as CBOR.
    pub fn to_cbor(&self) -> Vec<u8> {
        let mut bytes = Vec::new();
        // Writing into a Vec fails only on a serializer bug: every field serializes.
        if let Err(error) = ciborium::into_writer(self, &mut bytes) {
            unreachable!("a manifest always encodes: {error}");
        }
        bytes
    }

    pub fn from_cbor(bytes: &[u8]) -> Result<Self, ManifestError> {
        ciborium::from_reader(bytes).map_err(|error| ManifestError(error.to_string()))
    }
}

/// A session's link to the other side of a continuation edge: `continued_from` on a successor,
/// `continued_to` on a predecessor (the newest, when there are several).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContinuationLink {
    pub continuation_id: ContinuationId,
    /// The session at the other end.
    pub session_id: SessionId,
    /// Its title.
    pub title: String,
    pub reason: String,
    pub created_at_ms: i64,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(n: u128) -> SessionId {
        SessionId(uuid::Uuid::from_u128(n))
    }

    #[test]
    fn a_manifest_round_trips_through_cbor() {
        let mut handoff = Handoff {
            purpose: vec!["Plan the trip".to_owned()],
            ..Handoff::default()
        };
        handoff
            .extra
            .insert("budget".to_owned(), vec!["€900".to_owned()]);
        let manifest = SessionContinuationManifest {
            version: MANIFEST_VERSION,
            predecessor_session_id: id(1),
            origin_session_id: id(1),
            initiating_event: ContinuedFrom {
                session_id: id(1),
                event_id: EventId(7),
                seq: 12,
            },
            predecessor_last_seq: 14,
            reason: "topic change".to_owned(),
            title: "Trip".to_owned(),
            description: "Booking".to_owned(),
            handoff,
            sources: vec![
                Source::Resource {
                    uri: "https://example.org".to_owned(),
                },
                Source::SessionEvents {
                    thread: id(1),
                    from_seq: 2,
                    to_seq: 4,
                },
            ],
            plan: PlanTransfer::Carry,
            excerpts: vec![SeqRange {
                thread: id(1),
                from_seq: 2,
                to_seq: 4,
            }],
            recent_exchanges: None,
            omitted: Vec::new(),
            recalled: vec![RecalledRange {
                range: SeqRange {
                    thread: id(2),
                    from_seq: 5,
                    to_seq: 9,
                },
                times: 2,
                loaded: true,
            }],
            budget_bytes: 100,
            projection_bytes: 50,
            fork: None,
        };
        let bytes = manifest.to_cbor();
        assert_eq!(
            SessionContinuationManifest::from_cbor(&bytes).expect("decodes"),
            manifest
        );
        assert!(SessionContinuationManifest::from_cbor(&bytes[..bytes.len() / 2]).is_err());

        // A fork's point round-trips too; a continuation's manifest does not name the field,
        // so one written before forks existed decodes as it was.
        let fork = SessionContinuationManifest {
            fork: Some(ForkPoint {
                seq: 4,
                event_id: EventId(9),
            }),
            ..manifest.clone()
        };
        assert_eq!(
            SessionContinuationManifest::from_cbor(&fork.to_cbor()).expect("decodes"),
            fork
        );
        let value: ciborium::Value = ciborium::from_reader(&bytes[..]).expect("cbor");
        let named = |value: &ciborium::Value| {
            value
                .as_map()
                .is_some_and(|fields| fields.iter().any(|(key, _)| key.as_text() == Some("fork")))
        };
        assert!(!named(&value), "a continuation's manifest names no fork");
        let value: ciborium::Value = ciborium::from_reader(&fork.to_cbor()[..]).expect("cbor");
        assert!(named(&value));
    }
}
