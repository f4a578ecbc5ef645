//! A session's lineage: the sessions joined to it by continuation edges (a continuation, or a
//! fork a person made from an earlier point) and by delegation (a parent and its delegated
//! children), as a typed graph.
//!
//! `session_continuations.kind` holds an edge's [`EdgeKind`]; the lineage API answers with a
//! [`Lineage`], whose edges add [`LineageEdgeKind::Delegation`].

use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::{SessionId, UnknownName};

/// What a `session_continuations` row records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EdgeKind {
    /// An agent's continue_session: the successor becomes the foreground conversation.
    Continuation,
    /// A person branched from an earlier message: the successor's log is the predecessor's up
    /// to that point.
    Fork,
}

impl EdgeKind {
    /// The column's text.
    pub fn as_str(self) -> &'static str {
        match self {
            EdgeKind::Continuation => "continuation",
            EdgeKind::Fork => "fork",
        }
    }
}

impl FromStr for EdgeKind {
    type Err = UnknownName;

    fn from_str(value: &str) -> Result<EdgeKind, UnknownName> {
        match value {
            "continuation" => Ok(EdgeKind::Continuation),
            "fork" => Ok(EdgeKind::Fork),
            _ => Err(UnknownName {
                kind: "continuation kind",
                value: value.to_owned(),
            }),
        }
    }
}

/// How two sessions of a lineage are joined.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LineageEdgeKind {
    Continuation,
    Fork,
    /// A parent session and the child session a delegated run of it works in.
    Delegation,
}

impl From<EdgeKind> for LineageEdgeKind {
    fn from(kind: EdgeKind) -> LineageEdgeKind {
        match kind {
            EdgeKind::Continuation => LineageEdgeKind::Continuation,
            EdgeKind::Fork => LineageEdgeKind::Fork,
        }
    }
}

/// A session of a lineage.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LineageNode {
    pub session_id: SessionId,
    pub title: String,
    pub created_at_ms: i64,
}

/// An edge of a lineage, from the earlier session (predecessor or parent) to the later one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LineageEdge {
    pub from: SessionId,
    pub to: SessionId,
    pub kind: LineageEdgeKind,
    pub created_at_ms: i64,
}

/// The connected lineage around a session, oldest node first; `truncated` when it reaches
/// further than [`crate::limits::LINEAGE_SESSIONS_MAX`] sessions (the nodes nearest the
/// session are kept, and only edges between kept nodes).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lineage {
    pub nodes: Vec<LineageNode>,
    pub edges: Vec<LineageEdge>,
    pub truncated: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_edge_kind_reads_back_its_column_text() {
        for kind in [EdgeKind::Continuation, EdgeKind::Fork] {
            assert_eq!(kind.as_str().parse::<EdgeKind>(), Ok(kind));
        }
        assert!("delegation".parse::<EdgeKind>().is_err());
    }
}
