//! Forks: a person branches a session from an earlier message. The fork is created in one
//! transaction, as a continuation's successor is — its session, its log (the predecessor's
//! events up to the point, copied), the attachments they name, and its edge in
//! `session_continuations` with the kind `fork` and its manifest — with the request's nonce.
//! And the lineage around a session: the sessions joined to it by continuation and fork edges
//! and by delegation, read in one snapshot.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use seed_events::limits::{FORKS_PER_SESSION_MAX, LINEAGE_SESSIONS_MAX};
use seed_events::{
    EdgeKind, Lineage, LineageEdge, LineageEdgeKind, LineageNode, NewEvent, SessionId,
};

use crate::continuations::NewContinuation;
use crate::nonces::{NonceOutcome, RequestNonce, take_nonce};
use crate::params;
use crate::sql::{Connection, OptionalExtension};
use crate::{Error, NewSession, Result, Store};

/// The prefix of a fork's key in `session_continuations.tool_call_id`: a fork has no call, and
/// the key, unique with the predecessor, is `fork:` and the edge's own id.
pub const FORK_KEY_PREFIX: &str = "fork:";

/// A fork to create, all in one transaction.
#[derive(Debug, Clone, PartialEq)]
pub struct NewFork {
    pub session: NewSession,
    /// The edge; its `tool_call_id` is [`FORK_KEY_PREFIX`] and its id, its kind `fork`.
    pub edge: NewContinuation,
    /// The fork's log: the predecessor's events up to the point, copied.
    pub events: Vec<NewEvent>,
    /// Attachments of the predecessor the copied events name, linked into the fork. One the
    /// predecessor no longer has is left out (the copy names it as the original did).
    pub attachment_ids: Vec<String>,
}

/// What creating a fork came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ForkCreation {
    Created,
    /// The predecessor is gone, or not the account's: nothing was written.
    NoSuchSession,
    /// The account has as many sessions as its quota allows: nothing was written.
    SessionsFull,
    /// The predecessor has [`FORKS_PER_SESSION_MAX`] forks: nothing was written.
    ForksFull,
}

fn insert_fork_edge(connection: &Connection, edge: &NewContinuation) -> Result<()> {
    connection
        .prepare_cached(
            "INSERT INTO session_continuations (id, predecessor_session_id, successor_session_id,
                 origin_session_id, tool_call_id, initiating_event_id, reason, manifest_cbor,
                 created_at, kind)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, 'fork')",
        )?
        .execute(params![
            edge.id.to_string(),
            edge.predecessor_session_id.to_string(),
            edge.successor_session_id.to_string(),
            edge.origin_session_id.to_string(),
            edge.tool_call_id,
            edge.initiating_event_id.0,
            edge.reason,
            edge.manifest_cbor,
            edge.created_at_ms,
        ])?;
    Ok(())
}

/// How many forks the session has.
pub(crate) fn count_forks(connection: &Connection, predecessor: SessionId) -> Result<usize> {
    let n: i64 = connection
        .prepare_cached(
            "SELECT COUNT(*) FROM session_continuations
             WHERE predecessor_session_id = ?1 AND kind = 'fork'",
        )?
        .query_row(params![predecessor.to_string()], |row| row.get(0))?;
    Ok(usize::try_from(n).unwrap_or(usize::MAX))
}

pub(crate) fn create_fork(
    connection: &Connection,
    data_dir: &std::path::Path,
    nonce: Option<&RequestNonce>,
    sessions_max: u64,
    fork: &NewFork,
) -> Result<NonceOutcome<ForkCreation>> {
    let predecessor = fork.edge.predecessor_session_id;
    let account_id = fork.session.account_id;
    assert!(
        fork.edge.tool_call_id.starts_with(FORK_KEY_PREFIX),
        "a fork's edge is keyed {FORK_KEY_PREFIX}…, not {:?}",
        fork.edge.tool_call_id
    );
    if !crate::nonces::owned_by(connection, predecessor, account_id)? {
        return Ok(NonceOutcome::Fresh(ForkCreation::NoSuchSession));
    }
    if crate::sessions::count_account_sessions(connection, account_id, sessions_max)?
        >= sessions_max
    {
        return Ok(NonceOutcome::Fresh(ForkCreation::SessionsFull));
    }
    if count_forks(connection, predecessor)? >= FORKS_PER_SESSION_MAX {
        return Ok(NonceOutcome::Fresh(ForkCreation::ForksFull));
    }
    if !take_nonce(connection, nonce)? {
        return Ok(NonceOutcome::Replayed);
    }
    let now = fork.edge.created_at_ms;
    crate::sessions::insert_session(connection, &fork.session)?;
    insert_fork_edge(connection, &fork.edge)?;
    let stored = crate::log::append_events(connection, fork.session.id, &fork.events)?;
    assert_eq!(
        stored.len(),
        fork.events.len(),
        "a fork's log holds every copied event"
    );
    for id in &fork.attachment_ids {
        if crate::attachments::get_attachment(connection, predecessor, id)?.is_some() {
            crate::attachments::link_attachment(
                connection,
                data_dir,
                predecessor,
                fork.session.id,
                id,
                now,
            )?;
        }
    }
    crate::sessions::touch_session(connection, predecessor, now)?;
    Ok(NonceOutcome::Fresh(ForkCreation::Created))
}

/// The lineage around `session_id`: breadth first from it along continuation and fork edges
/// (both ways) and delegation (parent and children), up to `sessions_max` sessions, in one
/// snapshot. Sessions of another account are never reached (edges join one account's).
pub(crate) fn lineage(
    connection: &Connection,
    session_id: SessionId,
    sessions_max: usize,
) -> Result<Lineage> {
    let mut nodes: BTreeMap<SessionId, LineageNode> = BTreeMap::new();
    let mut edges: BTreeSet<(SessionId, SessionId, LineageEdgeKind, i64)> = BTreeSet::new();
    let mut queue = VecDeque::from([session_id]);
    let mut queued = BTreeSet::from([session_id]);
    let mut truncated = false;
    let Some(account) =
        crate::sessions::get_session(connection, session_id)?.map(|session| session.account_id)
    else {
        return Ok(Lineage::default());
    };
    while let Some(current) = queue.pop_front() {
        let Some(session) = crate::sessions::get_session(connection, current)? else {
            continue;
        };
        if session.account_id != account {
            continue;
        }
        nodes.insert(
            current,
            LineageNode {
                session_id: current,
                title: session.title.clone(),
                created_at_ms: session.created_at_ms,
            },
        );
        let mut neighbours: Vec<(SessionId, SessionId, LineageEdgeKind, i64)> = Vec::new();
        if let Some(parent) = session.parent_session_id {
            neighbours.push((
                parent,
                current,
                LineageEdgeKind::Delegation,
                session.created_at_ms,
            ));
        }
        neighbours.extend(children(connection, current)?);
        neighbours.extend(continuation_edges(connection, current)?);
        for edge in neighbours {
            let other = if edge.0 == current { edge.1 } else { edge.0 };
            edges.insert(edge);
            if queued.contains(&other) {
                continue;
            }
            if queued.len() >= sessions_max {
                truncated = true;
                continue;
            }
            queued.insert(other);
            queue.push_back(other);
        }
    }
    let mut nodes: Vec<LineageNode> = nodes.into_values().collect();
    nodes.sort_by_key(|node| (node.created_at_ms, node.session_id));
    let held: BTreeSet<SessionId> = nodes.iter().map(|node| node.session_id).collect();
    let mut edges: Vec<LineageEdge> = edges
        .into_iter()
        .filter(|(from, to, _, _)| held.contains(from) && held.contains(to))
        .map(|(from, to, kind, created_at_ms)| LineageEdge {
            from,
            to,
            kind,
            created_at_ms,
        })
        .collect();
    edges.sort_by_key(|edge| (edge.created_at_ms, edge.from, edge.to));
    Ok(Lineage {
        nodes,
        edges,
        truncated,
    })
}

/// The delegation edges to `parent`'s children.
fn children(
    connection: &Connection,
    parent: SessionId,
) -> Result<Vec<(SessionId, SessionId, LineageEdgeKind, i64)>> {
    let mut statement = connection.prepare_cached(
        "SELECT id, created_at FROM sessions WHERE parent_session_id = ?1 ORDER BY key",
    )?;
    let rows = statement.query_map(params![parent.to_string()], |row| {
        Ok((row.get::<_, String>(0)?, row.get::<_, i64>(1)?))
    })?;
    let mut edges = Vec::new();
    for row in rows {
        let (child, created_at_ms) = row?;
        edges.push((
            parent,
            Error::parse_column("sessions", &child)?,
            LineageEdgeKind::Delegation,
            created_at_ms,
        ));
    }
    Ok(edges)
}

/// The continuation and fork edges into and out of `session_id`.
fn continuation_edges(
    connection: &Connection,
    session_id: SessionId,
) -> Result<Vec<(SessionId, SessionId, LineageEdgeKind, i64)>> {
    let mut edges = Vec::new();
    for sql in [
        "SELECT predecessor_session_id, successor_session_id, kind, created_at
         FROM session_continuations WHERE predecessor_session_id = ?1",
        "SELECT predecessor_session_id, successor_session_id, kind, created_at
         FROM session_continuations WHERE successor_session_id = ?1",
    ] {
        let mut statement = connection.prepare_cached(sql)?;
        let rows = statement.query_map(params![session_id.to_string()], |row| {
            Ok((
                row.get::<_, String>(0)?,
                row.get::<_, String>(1)?,
                row.get::<_, String>(2)?,
                row.get::<_, i64>(3)?,
            ))
        })?;
        for row in rows {
            let (from, to, kind, created_at_ms) = row?;
            const TABLE: &str = "session_continuations";
            let kind: EdgeKind = Error::parse_column(TABLE, &kind)?;
            edges.push((
                Error::parse_column(TABLE, &from)?,
                Error::parse_column(TABLE, &to)?,
                kind.into(),
                created_at_ms,
            ));
        }
    }
    Ok(edges)
}

/// The kind of the edge that made `successor`, if one did.
pub(crate) fn edge_kind(connection: &Connection, successor: SessionId) -> Result<Option<EdgeKind>> {
    let kind: Option<String> = connection
        .prepare_cached("SELECT kind FROM session_continuations WHERE successor_session_id = ?1")?
        .query_row(params![successor.to_string()], |row| row.get(0))
        .optional()?;
    kind.map(|kind| Error::parse_column("session_continuations", &kind))
        .transpose()
}

impl Store {
    /// Creates a fork in one transaction, taking the request's nonce in it: the session, its
    /// copied log, the attachments it names, and the edge (kind `fork`) with its manifest.
    /// Refused (nothing written) when the predecessor is not the account's, the account has its
    /// quota of sessions, or the predecessor its most forks.
    pub async fn create_fork_signed(
        &self,
        nonce: Option<RequestNonce>,
        fork: NewFork,
    ) -> Result<NonceOutcome<ForkCreation>> {
        let data_dir = crate::attachments::data_dir(&self.config().path);
        let sessions_max = self.config().quotas.sessions_max;
        self.write(Some(fork.session.id), move |connection| {
            create_fork(connection, &data_dir, nonce.as_ref(), sessions_max, &fork)
        })
        .await
    }

    /// The lineage around the session ([`LINEAGE_SESSIONS_MAX`] sessions at most), in one
    /// snapshot; empty when there is no such session.
    pub async fn lineage(&self, session_id: SessionId) -> Result<Lineage> {
        self.read(move |connection| lineage(connection, session_id, LINEAGE_SESSIONS_MAX))
            .await
    }

    /// The kind of the edge that made `successor`, if one did.
    pub async fn edge_kind(&self, successor: SessionId) -> Result<Option<EdgeKind>> {
        self.read(move |connection| edge_kind(connection, successor))
            .await
    }
}
