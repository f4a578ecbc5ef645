//! What `seed fsck` reads, and the checks the store alone can make of it. [`Reader`] opens
//! the database read-only (SQLite's file with a read-only connection, PostgreSQL in read-only
//! transactions), so it is safe beside a running service, and reads each session in one
//! snapshot: its log, its durable files, what the store kept of their fold, its continuation
//! edges, the predecessor's events its projection cites, and whether each of its attachments'
//! bytes exist. [`session_findings`] is
//! pure: gapless seqs, every edge's successor there, the manifest decoding, every attachment
//! resolving. What needs the projections (the log and the store in agreement, the excerpts) is
//! `seed_projections::fsck`.

use std::path::PathBuf;

use seed_events::{SessionContinuationManifest, SessionEvent, SessionId};

use crate::params;
use crate::schema::Engine;
use crate::sql::Connection;
use crate::{Config, Error, Result};

/// One session as a snapshot read it.
#[derive(Debug, Clone)]
pub struct SessionRecord {
    pub id: SessionId,
    /// Its whole log, in seq order.
    pub events: Vec<SessionEvent>,
    /// Its durable files' lines, each in order.
    pub entries: Vec<String>,
    pub documents: Vec<String>,
    pub tasks: Vec<String>,
    /// The edges it was continued by: each successor, and whether that session exists.
    pub successors: Vec<(SessionId, bool)>,
    /// The edge that made it, when it is a successor.
    pub edge_to: Option<crate::ContinuationRow>,
    /// The predecessor's events in the ranges the edge's manifest says its projection loaded
    /// (its excerpts and recent exchanges), or for a fork those it copied (seq 1 to the fork's
    /// point), in seq order; empty when the manifest does not decode.
    pub cited: Vec<SessionEvent>,
    /// The earlier threads' events in the ranges the edge's manifest says its projection
    /// loaded as recalled excerpts, each range's in seq order.
    pub recalled: Vec<SessionEvent>,
    /// Its attachments whose bytes are missing: (attachment id, what is wrong).
    pub unresolved_attachments: Vec<(String, String)>,
    /// What a harness opens it from when the store kept its fold (`session_durable_kept`):
    /// the kept state and the lines after it. `None` when nothing was kept.
    pub kept: Option<seed_durable::OpenLines>,
}

/// A read-only connection to a database, for `seed fsck`.
pub struct Reader {
    connection: Connection,
    data_dir: PathBuf,
}

impl std::fmt::Debug for Reader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reader")
            .field("data_dir", &self.data_dir)
            .finish_non_exhaustive()
    }
}

impl Reader {
    /// Opens `config`'s database read-only: it must exist (nothing is created or migrated).
    pub fn open(config: &Config) -> Result<Reader> {
        if config.database.is_none()
            && !crate::memory_disk::is_memory(config)
            && !config.path.exists()
        {
            return Err(Error::NotFound {
                what: "database",
                id: config.path.display().to_string(),
            });
        }
        Ok(Reader {
            connection: Connection::open_reader(config)?,
            data_dir: crate::attachments::data_dir(&config.path),
        })
    }

    /// Every session of every account, oldest first.
    pub fn session_ids(&self) -> Result<Vec<SessionId>> {
        let ids = self
            .connection
            .prepare("SELECT id FROM sessions ORDER BY key")?
            .query_map(params![], |row| row.get::<_, String>(0))?
            .collect::<Result<Vec<String>>>()?;
        ids.iter()
            .map(|id| Error::parse_column("sessions", id))
            .collect()
    }

    /// One session, read in one snapshot; `None` when it was deleted since it was listed.
    pub fn session(&self, id: SessionId) -> Result<Option<SessionRecord>> {
        let snapshot = self.connection.snapshot()?;
        if crate::sessions::session_key(&snapshot, id)?.is_none() {
            return Ok(None);
        }
        let events = crate::log::read_events(&snapshot, id, 1, i64::MAX, usize::MAX)?;
        let lines = |file| crate::files::read_lines(&snapshot, id, file);
        let (entries, documents, tasks) = (
            lines(seed_durable::FileName::Entries)?,
            lines(seed_durable::FileName::Documents)?,
            lines(seed_durable::FileName::Tasks)?,
        );
        let successors = snapshot
            .prepare(
                "SELECT e.successor_session_id, s.id FROM session_continuations e
                 LEFT JOIN sessions s ON s.id = e.successor_session_id
                 WHERE e.predecessor_session_id = ?1 ORDER BY e.created_at, e.id",
            )?
            .query_map(params![id.to_string()], |row| {
                Ok((row.get::<_, String>(0)?, row.get::<_, Option<String>>(1)?))
            })?
            .collect::<Result<Vec<_>>>()?
            .into_iter()
            .map(|(successor, found)| {
                Ok((
                    Error::parse_column("session_continuations", &successor)?,
                    found.is_some(),
                ))
            })
            .collect::<Result<Vec<_>>>()?;
        let edge_to = crate::continuations::edge_to(&snapshot, id)?;
        let mut cited = Vec::new();
        let mut recalled = Vec::new();
        if let Some(edge) = &edge_to
            && let Ok(manifest) = SessionContinuationManifest::from_cbor(&edge.manifest_cbor)
        {
            for loaded in manifest.recalled.iter().filter(|recalled| recalled.loaded) {
                let range = loaded.range;
                if crate::sessions::session_key(&snapshot, range.thread)?.is_some() {
                    recalled.extend(crate::log::read_events(
                        &snapshot,
                        range.thread,
                        range.from_seq,
                        range.to_seq,
                        usize::MAX,
                    )?);
                }
            }
        }
        if let Some(edge) = &edge_to
            && let Ok(manifest) = SessionContinuationManifest::from_cbor(&edge.manifest_cbor)
            && crate::sessions::session_key(&snapshot, edge.predecessor_session_id)?.is_some()
        {
            let mut ranges: Vec<(i64, i64)> = manifest
                .excerpts
                .iter()
                .chain(manifest.recent_exchanges.iter())
                .filter(|range| range.thread == edge.predecessor_session_id)
                .map(|range| (range.from_seq, range.to_seq))
                .chain(manifest.fork.map(|point| (1, point.seq)))
                .collect();
            ranges.sort_unstable();
            for (from_seq, to_seq) in ranges {
                let from_seq = cited
                    .last()
                    .map_or(from_seq, |last: &SessionEvent| from_seq.max(last.seq + 1));
                if from_seq <= to_seq {
                    cited.extend(crate::log::read_events(
                        &snapshot,
                        edge.predecessor_session_id,
                        from_seq,
                        to_seq,
                        usize::MAX,
                    )?);
                }
            }
        }
        let unresolved_attachments = self.unresolved_attachments(&snapshot, id)?;
        let kept =
            Some(crate::kept::open_lines(&snapshot, id)?).filter(|lines| lines.kept.is_some());
        snapshot.finish()?;
        Ok(Some(SessionRecord {
            id,
            events,
            entries,
            documents,
            tasks,
            successors,
            edge_to,
            cited,
            recalled,
            unresolved_attachments,
            kept,
        }))
    }

    /// The session's attachments whose bytes are not there: on SQLite the file under the data
    /// dir (of the recorded size), on PostgreSQL the row of `attachment_contents`.
    fn unresolved_attachments(
        &self,
        connection: &Connection,
        id: SessionId,
    ) -> Result<Vec<(String, String)>> {
        // On SQLite the bytes are a file (attachment_contents stays empty there).
        let sql = match connection.engine() {
            Engine::Sqlite => {
                "SELECT id, path, size_bytes, id FROM attachments WHERE session_id = ?1 ORDER BY id"
            }
            Engine::Postgres => {
                "SELECT a.id, a.path, a.size_bytes, c.id FROM attachments a
                 LEFT JOIN attachment_contents c ON c.session_id = a.session_id AND c.id = a.id
                 WHERE a.session_id = ?1 ORDER BY a.id"
            }
        };
        let rows = connection
            .prepare(sql)?
            .query_map(params![id.to_string()], |row| {
                Ok((
                    row.get::<_, String>(0)?,
                    row.get::<_, String>(1)?,
                    row.get::<_, i64>(2)?,
                    row.get::<_, Option<String>>(3)?,
                ))
            })?
            .collect::<Result<Vec<_>>>()?;
        let mut unresolved = Vec::new();
        for (attachment, path, size_bytes, content) in rows {
            let problem = match connection.engine() {
                Engine::Postgres => content
                    .is_none()
                    .then(|| "no row of attachment_contents holds its bytes".to_owned()),
                Engine::Sqlite => match std::fs::metadata(self.data_dir.join(&path)) {
                    Ok(metadata) if metadata.len() as i64 == size_bytes => None,
                    Ok(metadata) => Some(format!(
                        "its file {path} has {} bytes, not {size_bytes}",
                        metadata.len()
                    )),
                    Err(error) => Some(format!("its file {path}: {error}")),
                },
            };
            if let Some(problem) = problem {
                unresolved.push((attachment, problem));
            }
        }
        Ok(unresolved)
    }

    /// SQLite's own checks of the file (`PRAGMA integrity_check` and `foreign_key_check`):
    /// the problems found, or `None` on PostgreSQL, which has no such file.
    pub fn integrity(&self) -> Result<Option<Vec<String>>> {
        if self.connection.engine() == Engine::Postgres {
            return Ok(None);
        }
        crate::store::integrity_problems(&self.connection).map(Some)
    }
}

/// Where a log's seqs are not 1, 2, 3, …: the first seq out of place.
pub fn seq_findings(events: &[SessionEvent]) -> Vec<String> {
    events
        .iter()
        .enumerate()
        .find(|(idx, event)| event.seq != *idx as i64 + 1)
        .map(|(idx, event)| {
            vec![format!(
                "seq {} at position {} (seqs must be 1, 2, 3, … with no gap)",
                event.seq,
                idx + 1
            )]
        })
        .unwrap_or_default()
}

/// What the store alone finds wrong with a session: a gap in its seqs, an edge whose
/// successor is missing, a manifest that does not decode, an attachment whose bytes are
/// missing. One line per finding, without the session's id.
pub fn session_findings(record: &SessionRecord) -> Vec<String> {
    let mut findings = seq_findings(&record.events);
    for (successor, found) in &record.successors {
        if !found {
            findings.push(format!(
                "its continuation edge names successor {successor}, which does not exist"
            ));
        }
    }
    if let Some(edge) = &record.edge_to
        && let Err(error) = SessionContinuationManifest::from_cbor(&edge.manifest_cbor)
    {
        findings.push(format!("the manifest of continuation {}: {error}", edge.id));
    }
    for (attachment, problem) in &record.unresolved_attachments {
        findings.push(format!(
            "attachment {attachment} does not resolve: {problem}"
        ));
    }
    findings
}
