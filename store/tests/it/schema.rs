//! The schema's keys and constraints, and deleting a session with everything it owns.

use crate::common;

use crate::common::{Fixture, account};
use futures::executor::block_on;
use seed_durable::{Append, DurableFs, FileName};
use seed_events::{ContinuationId, EventId, EventRole, NewEvent, Queue, RunId, SessionId};
use seed_store::{LeaseOutcome, NewContinuation, NewRun, Refusal};

fn edge(
    predecessor: SessionId,
    successor: SessionId,
    tool_call_id: &str,
    id_bits: u128,
) -> NewContinuation {
    NewContinuation {
        id: ContinuationId::from_u128(id_bits),
        predecessor_session_id: predecessor,
        successor_session_id: successor,
        origin_session_id: predecessor,
        tool_call_id: tool_call_id.to_owned(),
        initiating_event_id: EventId(1),
        reason: "topic change".to_owned(),
        manifest_cbor: vec![0xa0],
        created_at_ms: 0,
    }
}

fn user_message(text: &str) -> NewEvent {
    NewEvent::message(
        EventRole::User,
        "user",
        serde_json::json!({ "text": text }),
        0,
    )
}

#[test]
fn a_duplicate_session_seq_is_refused() -> anyhow::Result<()> {
    let fixture = Fixture::new()?;
    let [session] = fixture.create_sessions(1)?[..] else {
        unreachable!()
    };
    block_on(
        fixture
            .store
            .append_events(session, vec![user_message("hi")]),
    )?;
    let duplicate = fixture.raw_execute(
        "INSERT INTO session_events (session_key, seq, type, content, meta, created_at)
         VALUES ((SELECT key FROM sessions WHERE id = ?1), 1, 'message', '{}', '{}', 0)",
        &[&session.to_string()],
    )?;
    assert!(
        duplicate
            .as_ref()
            .is_err_and(|error| error.starts_with("unique")),
        "a second (session_id, seq = 1) was accepted: {duplicate:?}"
    );
    Ok(())
}

#[test]
fn a_second_edge_with_the_same_successor_or_tool_call_is_refused() -> anyhow::Result<()> {
    let fixture = Fixture::new()?;
    let sessions = fixture.create_sessions(4)?;
    let (a, b, c, d) = (sessions[0], sessions[1], sessions[2], sessions[3]);
    block_on(fixture.store.insert_continuation(edge(a, b, "call-1", 1)))?;

    // Same successor, from another predecessor: a session has one immediate predecessor.
    let same_successor = block_on(fixture.store.insert_continuation(edge(c, b, "call-9", 2)));
    assert!(
        matches!(
            same_successor.as_ref().map_err(|e| e.refusal()),
            Err(Some(Refusal::Duplicate { .. }))
        ),
        "{same_successor:?}"
    );

    // Same (predecessor, tool_call_id) to another successor: the call's idempotency key.
    let same_call = block_on(fixture.store.insert_continuation(edge(a, d, "call-1", 3)));
    let Err(error) = same_call else {
        panic!("a second edge for (a, call-1) was accepted")
    };
    assert!(matches!(error.refusal(), Some(Refusal::Duplicate { .. })));
    assert!(error.to_string().contains(&a.to_string()), "{error}");

    // A predecessor may branch into several successors with different calls.
    block_on(fixture.store.insert_continuation(edge(a, c, "call-2", 4)))?;
    let found = block_on(fixture.store.find_continuation(a, "call-1"))?;
    assert_eq!(found.map(|edge| edge.successor_session_id), Some(b));
    assert_eq!(
        block_on(fixture.store.find_continuation(a, "call-3"))?,
        None
    );
    Ok(())
}

fn count(fixture: &Fixture, sql: &str, session: SessionId) -> anyhow::Result<i64> {
    fixture.raw_i64(sql, &[&session.to_string()])
}

#[test]
fn deleting_a_session_removes_everything_it_owns() -> anyhow::Result<()> {
    let fixture = Fixture::new()?;
    let sessions = fixture.create_sessions(4)?;
    let (doomed, before, after, other) = (sessions[0], sessions[1], sessions[2], sessions[3]);
    let store = &fixture.store;
    for session in [doomed, before] {
        block_on(store.append_events(session, vec![user_message("a"), user_message("b")]))?;
        block_on(
            store
                .session_files(session)
                .commit(vec![Append::new(FileName::Entries, "{}")]),
        )?;
        block_on(store.enqueue_run(NewRun {
            id: RunId::new_v7(),
            session_id: session,
            queue: Queue::Interactive,
            user_event_ids: vec![EventId(1)],
            parent_run_id: None,
            typed: false,
            created_at_ms: 0,
        }))?;
        let lease = block_on(store.acquire_lease(session, "boot-1", None, 0))?;
        assert!(matches!(lease, LeaseOutcome::Acquired(_)));
    }
    // Edges on both sides of the doomed session, and one that does not touch it.
    block_on(store.insert_continuation(edge(before, doomed, "into-doomed", 1)))?;
    block_on(store.insert_continuation(edge(doomed, after, "out-of-doomed", 2)))?;
    block_on(store.insert_continuation(edge(before, other, "unrelated", 3)))?;
    // Attachments with their bytes (files on SQLite, rows on PostgreSQL); the neighbour's stay.
    let mut files = Vec::new();
    for session in [doomed, before] {
        let row = block_on(store.add_attachment(seed_store::NewAttachment {
            session_id: session,
            id: "att-1".to_owned(),
            name: "a.png".to_owned(),
            media_type: "image/png".to_owned(),
            bytes: vec![1, 2, 3],
            created_at_ms: 0,
        }))?;
        files.push(store.attachment_file(&row));
    }
    if !common::on_postgres() {
        assert!(files.iter().all(|file| file.exists()));
    }
    // A delegated child of the doomed session goes with it.
    let child = common::session(99);
    let mut new_child = seed_store::NewSession::new(child, account(), 0);
    new_child.parent_session_id = Some(doomed);
    block_on(store.create_session(new_child))?;

    assert!(block_on(store.delete_session(doomed, 1))?);
    assert!(!block_on(store.delete_session(doomed, 1))?, "deleted twice");

    let owned_tables = [
        "SELECT COUNT(*) FROM session_events
         WHERE session_key = (SELECT key FROM sessions WHERE id = ?1)",
        "SELECT COUNT(*) FROM session_durable_files
         WHERE session_key = (SELECT key FROM sessions WHERE id = ?1)",
        "SELECT COUNT(*) FROM runs WHERE session_id = ?1",
        "SELECT COUNT(*) FROM session_leases WHERE session_id = ?1",
        "SELECT COUNT(*) FROM session_continuations
         WHERE predecessor_session_id = ?1 OR successor_session_id = ?1",
        "SELECT COUNT(*) FROM attachments WHERE session_id = ?1",
        "SELECT COUNT(*) FROM sessions WHERE id = ?1 OR parent_session_id = ?1",
    ];
    for sql in owned_tables {
        assert_eq!(count(&fixture, sql, doomed)?, 0, "left behind: {sql}");
        // The neighbour keeps its own rows.
        if !sql.contains("attachments") && !sql.contains("FROM sessions") {
            assert!(
                count(&fixture, sql, before)? > 0,
                "neighbour lost rows: {sql}"
            );
        }
    }
    assert!(block_on(store.get_session(child))?.is_none());
    assert!(block_on(store.get_session(before))?.is_some());
    let contents = "SELECT COUNT(*) FROM attachment_contents WHERE session_id = ?1";
    assert_eq!(count(&fixture, contents, doomed)?, 0);
    if common::on_postgres() {
        assert_eq!(
            count(&fixture, contents, before)?,
            1,
            "the neighbour keeps its bytes"
        );
    } else {
        let doomed_folder = files[0].parent().expect("the session's folder");
        assert!(
            !doomed_folder.exists(),
            "the doomed session's files are gone"
        );
        assert!(files[1].exists(), "the neighbour keeps its file");
    }
    Ok(())
}

/// A crash between a delete's commit and the removal of its files leaves a folder no session
/// owns; the boot sweep's pass removes it and keeps every live session's files.
#[test]
fn folders_of_deleted_sessions_are_swept() -> anyhow::Result<()> {
    if !common::sqlite_only("attachments' files") {
        return Ok(());
    }
    let fixture = Fixture::new()?;
    let sessions = fixture.create_sessions(1)?;
    let store = &fixture.store;
    let kept = block_on(store.add_attachment(seed_store::NewAttachment {
        session_id: sessions[0],
        id: "kept".to_owned(),
        name: "k.txt".to_owned(),
        media_type: "text/plain".to_owned(),
        bytes: b"k".to_vec(),
        created_at_ms: 0,
    }))?;
    let root = fixture
        .db_path()
        .parent()
        .expect("the data dir")
        .join("attachments");
    let orphan = root.join(SessionId::new_v7().to_string());
    std::fs::create_dir_all(&orphan)?;
    std::fs::write(orphan.join("left"), b"x")?;
    // Not a session's folder: left alone.
    std::fs::create_dir_all(root.join("not-a-session"))?;

    assert_eq!(block_on(store.remove_attachment_files(None)), 1);
    assert!(!orphan.exists());
    assert!(store.attachment_file(&kept).exists());
    assert!(root.join("not-a-session").exists());
    Ok(())
}
