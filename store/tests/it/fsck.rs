//! `seed fsck`'s reader and the store's own checks (`seed_store::fsck`), on either engine:
//! a sound database has no finding; a gap in the seqs, an edge whose successor is gone, a
//! manifest that does not decode and an attachment whose bytes are gone are each found, with
//! the session they belong to. The checks that need the projections are tested in
//! `seed_projections::fsck`, and the whole command in the server's tests.

use crate::common::{Fixture, account, on_postgres};
use futures::executor::block_on;
use seed_events::{ContinuationId, EventId, EventRole, NewEvent, SessionId};
use seed_store::fsck::{Reader, SessionRecord, session_findings};
use seed_store::{NewAttachment, NewContinuation, NewSession};

fn message(text: &str) -> NewEvent {
    NewEvent::message(
        EventRole::User,
        "user",
        serde_json::json!({ "text": text }),
        1,
    )
}

/// Two sessions with a few events each, the second continued from the first (its manifest
/// `manifest_cbor`), and an attachment of the first.
fn fixture(manifest_cbor: Vec<u8>) -> anyhow::Result<(Fixture, [SessionId; 2])> {
    let fixture = Fixture::new()?;
    let sessions = fixture.create_sessions(2)?;
    let store = &fixture.store;
    for session in &sessions {
        block_on(store.append_events(*session, vec![message("a"), message("b"), message("c")]))?;
    }
    block_on(store.add_attachment(NewAttachment {
        session_id: sessions[0],
        id: "a1".to_owned(),
        name: "a1.txt".to_owned(),
        media_type: "text/plain".to_owned(),
        bytes: b"hello".to_vec(),
        created_at_ms: 1,
    }))?;
    block_on(store.insert_continuation(NewContinuation {
        id: ContinuationId::from_u128(1),
        predecessor_session_id: sessions[0],
        successor_session_id: sessions[1],
        origin_session_id: sessions[0],
        tool_call_id: "call-1".to_owned(),
        initiating_event_id: EventId(1),
        reason: "topic".to_owned(),
        manifest_cbor,
        created_at_ms: 2,
    }))?;
    Ok((fixture, [sessions[0], sessions[1]]))
}

/// Every session's findings, as `seed fsck` reads them: (session, finding).
fn findings(fixture: &Fixture) -> anyhow::Result<Vec<(SessionId, String)>> {
    let reader = Reader::open(fixture.store.config())?;
    let mut found = Vec::new();
    for id in reader.session_ids()? {
        let record: SessionRecord = reader.session(id)?.expect("listed, not deleted");
        found.extend(session_findings(&record).into_iter().map(|line| (id, line)));
    }
    Ok(found)
}

/// A manifest that decodes, as continue_session writes one.
fn manifest(predecessor: SessionId) -> Vec<u8> {
    seed_events::SessionContinuationManifest {
        version: seed_events::continuation::MANIFEST_VERSION,
        predecessor_session_id: predecessor,
        origin_session_id: predecessor,
        initiating_event: seed_events::continuation::ContinuedFrom {
            session_id: predecessor,
            event_id: EventId(1),
            seq: 1,
        },
        predecessor_last_seq: 3,
        reason: "topic".to_owned(),
        title: "next".to_owned(),
        description: String::new(),
        handoff: Default::default(),
        sources: Vec::new(),
        plan: seed_events::continuation::PlanTransfer::Omit,
        excerpts: Vec::new(),
        recent_exchanges: None,
        omitted: Vec::new(),
        recalled: Vec::new(),
        budget_bytes: 1_000,
        projection_bytes: 10,
        fork: None,
    }
    .to_cbor()
}

#[test]
fn a_sound_database_has_no_finding_and_its_sessions_read_whole() -> anyhow::Result<()> {
    let predecessor = crate::common::session(0);
    let (fixture, sessions) = fixture(manifest(predecessor))?;
    assert_eq!(findings(&fixture)?, Vec::new());
    let reader = Reader::open(fixture.store.config())?;
    assert_eq!(reader.session_ids()?, sessions.to_vec());
    let first = reader.session(sessions[0])?.expect("there");
    assert_eq!(first.events.len(), 3);
    assert_eq!(first.successors, [(sessions[1], true)]);
    let second = reader.session(sessions[1])?.expect("there");
    assert_eq!(
        second.edge_to.map(|edge| edge.predecessor_session_id),
        Some(sessions[0])
    );
    assert!(reader.session(SessionId::from_u128(99))?.is_none());
    // SQLite's integrity check, on SQLite alone.
    assert_eq!(reader.integrity()?, (!on_postgres()).then(Vec::new));
    // A new session is seen by the next read: each read is a snapshot of now.
    block_on(
        fixture
            .store
            .create_session(NewSession::new(SessionId::from_u128(7), account(), 9)),
    )?;
    assert_eq!(reader.session_ids()?.len(), 3);
    Ok(())
}

#[test]
fn a_gap_a_missing_successor_a_bad_manifest_and_a_missing_attachment_are_found()
-> anyhow::Result<()> {
    let (fixture, [predecessor, successor]) = fixture(b"not cbor".to_vec())?;
    // A gap: the newest event of the predecessor moved up one.
    fixture
        .raw_execute(
            "UPDATE session_events SET seq = 5 WHERE seq = 3 AND session_key = \
         (SELECT key FROM sessions WHERE id = ?1)",
            &[&predecessor.to_string()],
        )?
        .map_err(anyhow::Error::msg)?;
    // The attachment's bytes gone.
    if on_postgres() {
        fixture
            .raw_execute("DELETE FROM attachment_contents", &[])?
            .map_err(anyhow::Error::msg)?;
    } else {
        let folder = fixture.dir.path().join("attachments");
        std::fs::remove_dir_all(&folder)?;
    }
    let found = findings(&fixture)?;
    let has = |session: SessionId, part: &str| {
        found
            .iter()
            .any(|(id, finding)| *id == session && finding.contains(part))
    };
    assert!(has(predecessor, "seq 5 at position 3"), "{found:#?}");
    assert!(has(successor, "the manifest of continuation"), "{found:#?}");
    assert!(
        has(predecessor, "attachment a1 does not resolve"),
        "{found:#?}"
    );
    assert_eq!(found.len(), 3, "{found:#?}");

    // The successor deleted behind the foreign keys' back: the edge names a session that is
    // not there.
    let id = successor.to_string();
    fixture.raw_batch(
        &format!("PRAGMA foreign_keys = OFF; DELETE FROM sessions WHERE id = '{id}';"),
        &format!("SET session_replication_role = replica; DELETE FROM sessions WHERE id = '{id}';"),
    )?;
    let found = findings(&fixture)?;
    assert!(
        found
            .iter()
            .any(|(session, finding)| *session == predecessor
                && finding.contains(&format!("names successor {id}, which does not exist"))),
        "{found:#?}"
    );
    let reader = Reader::open(fixture.store.config())?;
    if let Some(problems) = reader.integrity()? {
        assert!(
            problems
                .iter()
                .any(|problem| problem.contains("foreign key")),
            "{problems:?}"
        );
    }
    Ok(())
}
