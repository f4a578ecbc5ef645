//! `seed fsck`: every session of a database checked through a read-only connection, each read
//! in one snapshot, so it is safe beside a running service. The store's checks
//! (`seed_store::fsck`: gapless seqs, every edge's successor there, manifests that decode,
//! attachments that resolve, SQLite's integrity check) and the projections' (`seed_projections::
//! fsck`: the log and the store in agreement, a projection's excerpts byte for byte the events
//! they cite), joined here, where both crates are in reach; the simulation runs it on the
//! database each seed leaves, `seed fsck` on a data dir's.

use seed_events::SessionContinuationManifest;
use seed_store::Config;
use seed_store::fsck::{Reader, SessionRecord, session_findings};

/// What a check of a database found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FsckReport {
    pub n_sessions: usize,
    /// Whether SQLite's integrity check ran (not on PostgreSQL).
    pub integrity_checked: bool,
    /// One line each, naming the session ("session ID: …") or the database ("database: …").
    pub findings: Vec<String>,
}

/// Checks every session of `config`'s database, reading it read-only. Blocks on the database:
/// call it from a thread that drives no async tasks (a PostgreSQL connection blocks on each
/// statement).
pub fn fsck(config: &Config) -> anyhow::Result<FsckReport> {
    let reader = Reader::open(config)?;
    let mut report = FsckReport::default();
    if let Some(problems) = reader.integrity()? {
        report.integrity_checked = true;
        report.findings.extend(
            problems
                .into_iter()
                .map(|problem| format!("database: integrity: {problem}")),
        );
    }
    for id in reader.session_ids()? {
        match reader.session(id) {
            // Deleted since it was listed.
            Ok(None) => {}
            Ok(Some(record)) => {
                report.n_sessions += 1;
                report.findings.extend(
                    check_session(&record)
                        .into_iter()
                        .map(|finding| format!("session {id}: {finding}")),
                );
            }
            Err(error) => {
                report.n_sessions += 1;
                report
                    .findings
                    .push(format!("session {id}: cannot be read: {error}"));
            }
        }
    }
    Ok(report)
}

/// Everything wrong with one session as a snapshot read it, one line each.
pub fn check_session(record: &SessionRecord) -> Vec<String> {
    let mut findings = session_findings(record);
    findings.extend(seed_projections::fsck::log_and_store_findings(
        &record.events,
        &record.entries,
        &record.documents,
        &record.tasks,
    ));
    if let Some(opened) = &record.kept {
        findings.extend(seed_projections::fsck::kept_findings(
            &record.entries,
            &record.documents,
            &record.tasks,
            opened,
        ));
    }
    // A fork's log is its predecessor's up to its point, copied (whose first event may be a
    // projection of another edge, not the fork's own).
    if let Some(edge) = &record.edge_to
        && let Ok(manifest) = SessionContinuationManifest::from_cbor(&edge.manifest_cbor)
        && let Some(point) = manifest.fork
    {
        findings.extend(seed_projections::fork::fork_findings(
            &record.events,
            point,
            &record.cited,
        ));
    }
    // A successor's first event is its projection (its excerpts are checked against the
    // ranges its manifest names, once that decodes).
    if let Some(edge) = &record.edge_to
        && SessionContinuationManifest::from_cbor(&edge.manifest_cbor)
            .is_ok_and(|manifest| manifest.fork.is_none())
    {
        match record.events.first() {
            Some(projection) => {
                findings.extend(seed_projections::fsck::projection_findings(
                    projection,
                    edge.predecessor_session_id,
                    &record.cited,
                ));
                // The ranges of earlier threads it loaded because they were recalled.
                if let Ok(manifest) = SessionContinuationManifest::from_cbor(&edge.manifest_cbor)
                    && let Some(text) = projection
                        .content
                        .get("text")
                        .and_then(|text| text.as_str())
                {
                    findings.extend(seed_projections::continuation::recall::recalled_findings(
                        text,
                        &manifest.recalled,
                        &record.recalled,
                    ));
                }
            }
            None => findings.push(format!(
                "a successor (continuation {}) without its projection",
                edge.id
            )),
        }
    }
    findings
}

impl FsckReport {
    /// The summary line: sessions checked and findings.
    pub fn summary(&self) -> String {
        format!(
            "fsck: {} sessions checked{}, {} findings",
            self.n_sessions,
            if self.integrity_checked {
                " and SQLite's integrity check"
            } else {
                ""
            },
            self.findings.len()
        )
    }
}
