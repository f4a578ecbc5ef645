//! Attachments uploaded by a signed request: the account's limit, the session's owner and the
//! request's nonce are checked in the transaction that adds the row, and a refused upload leaves
//! no bytes behind. Their bytes are a file under the data dir on SQLite and rows of the database
//! on PostgreSQL, where a node reads what another stored.

use crate::common::{Fixture, account, on_postgres, session, user_message};
use futures::executor::block_on;
use seed_events::{AccountId, ContinuationId, EventId, SessionId};
use seed_store::{
    Config, DatabaseUrl, NewAttachment, NewContinuation, NewSession, NewSuccessor, NonceOutcome,
    RequestNonce, ScratchDatabase, Store, UploadOutcome,
};

fn upload(session_id: seed_events::SessionId, id: &str, bytes: &[u8]) -> NewAttachment {
    NewAttachment {
        session_id,
        id: id.to_owned(),
        name: format!("{id}.txt"),
        media_type: "text/plain".to_owned(),
        bytes: bytes.to_vec(),
        created_at_ms: 5,
    }
}

fn nonce(text: &str) -> Option<RequestNonce> {
    Some(RequestNonce {
        key_id: account(),
        nonce: text.to_owned(),
        expires_at_ms: i64::MAX,
    })
}

/// The files under the data dir's attachment folder.
fn files(fixture: &Fixture) -> Vec<String> {
    let root = fixture.dir.path().join("attachments");
    let mut found = Vec::new();
    for folder in std::fs::read_dir(&root).into_iter().flatten().flatten() {
        for file in std::fs::read_dir(folder.path())
            .into_iter()
            .flatten()
            .flatten()
        {
            found.push(file.file_name().to_string_lossy().into_owned());
        }
    }
    found.sort();
    found
}

/// Rows of `attachment_contents` with the id `id`.
fn contents_rows(fixture: &Fixture, id: &str) -> anyhow::Result<i64> {
    fixture.raw_i64(
        "SELECT COUNT(*) FROM attachment_contents WHERE id = ?1",
        &[id],
    )
}

/// Checks that the bytes stored are those of `ids` (an id once per session holding it), and
/// only where the engine keeps them: files under the data dir on SQLite (the table stays
/// empty), rows of `attachment_contents` on PostgreSQL (no file).
fn assert_bytes_stored(fixture: &Fixture, ids: &[&str]) -> anyhow::Result<()> {
    let n_rows = fixture.raw_i64("SELECT COUNT(*) FROM attachment_contents", &[])?;
    if on_postgres() {
        assert_eq!(files(fixture), Vec::<String>::new(), "a file on PostgreSQL");
        assert_eq!(n_rows, ids.len() as i64);
        for id in ids {
            let n_expected = ids.iter().filter(|other| *other == id).count() as i64;
            assert_eq!(contents_rows(fixture, id)?, n_expected, "{id}");
        }
    } else {
        assert_eq!(files(fixture), ids);
        assert_eq!(n_rows, 0, "attachment_contents stays empty on SQLite");
    }
    Ok(())
}

#[test]
fn an_upload_is_within_the_accounts_limit_and_a_refused_one_leaves_nothing() -> anyhow::Result<()> {
    let fixture = Fixture::new()?;
    let sessions = fixture.create_sessions(2)?;
    let store = &fixture.store;

    let added = block_on(store.add_attachment_signed(
        nonce("n1"),
        account(),
        upload(sessions[0], "a1", b"0123456789"),
        16,
    ))?;
    let NonceOutcome::Fresh(UploadOutcome::Added(row)) = added else {
        panic!("not added: {added:?}");
    };
    assert_eq!(row.size_bytes, 10);
    assert_eq!(
        block_on(store.read_attachment_bytes(&row, 0, 100))?,
        b"0123456789"
    );
    assert_bytes_stored(&fixture, &["a1"])?;
    assert_eq!(block_on(store.account_attachment_bytes(account()))?, 10);

    // Over the account's limit, in another of its sessions: refused, no bytes, no row.
    let over = block_on(store.add_attachment_signed(
        nonce("n2"),
        account(),
        upload(sessions[1], "a2", b"0123456"),
        16,
    ))?;
    assert_eq!(
        over,
        NonceOutcome::Fresh(UploadOutcome::OverAccountLimit {
            used_bytes: 10,
            limit_bytes: 16
        })
    );
    // Another account's session is not found.
    let stranger = AccountId::from_u128(0xbad);
    block_on(store.create_account(stranger, vec![9], 0))?;
    let theirs = block_on(store.add_attachment_signed(
        nonce("n3"),
        stranger,
        upload(sessions[0], "a3", b"x"),
        16,
    ))?;
    assert_eq!(theirs, NonceOutcome::Fresh(UploadOutcome::NotFound));
    // A replayed nonce: refused in the writer's transaction (on SQLite after the file was
    // written, and the file is removed).
    let replayed = block_on(store.add_attachment_signed(
        nonce("n1"),
        account(),
        upload(sessions[1], "a4", b"x"),
        16,
    ))?;
    assert_eq!(replayed, NonceOutcome::Replayed);
    assert_bytes_stored(&fixture, &["a1"])?;
    assert_eq!(block_on(store.list_attachments(sessions[1]))?, []);

    // The same attachment in two sessions (as a successor's link is) counts once.
    block_on(store.add_attachment(upload(sessions[1], "a1", b"0123456789")))?;
    assert_bytes_stored(&fixture, &["a1", "a1"])?;
    assert_eq!(block_on(store.account_attachment_bytes(account()))?, 10);
    Ok(())
}

#[test]
fn an_attachment_is_read_from_an_offset() -> anyhow::Result<()> {
    let fixture = Fixture::new()?;
    let sessions = fixture.create_sessions(1)?;
    let store = &fixture.store;
    let row = block_on(store.add_attachment(upload(sessions[0], "a1", b"hello world")))?;
    assert_eq!(block_on(store.read_attachment_bytes(&row, 0, 5))?, b"hello");
    assert_eq!(
        block_on(store.read_attachment_bytes(&row, 6, 100))?,
        b"world"
    );
    assert_eq!(
        block_on(store.read_attachment_bytes(&row, 10, usize::MAX))?,
        b"d"
    );
    for (offset, bytes_max) in [(11, 5), (50, 5), (u64::MAX, usize::MAX), (0, 0)] {
        assert!(
            block_on(store.read_attachment_bytes(&row, offset, bytes_max))?.is_empty(),
            "{offset} {bytes_max}"
        );
    }
    // Bytes that are gone (behind the store's back) are an error that says so.
    if on_postgres() {
        fixture
            .raw_execute("DELETE FROM attachment_contents", &[])?
            .map_err(anyhow::Error::msg)?;
        let error = block_on(store.read_attachment_bytes(&row, 0, 5)).expect_err("gone");
        assert_eq!(
            error.to_string(),
            format!("the bytes of attachment {}/a1 not found", sessions[0])
        );
    } else {
        std::fs::remove_file(store.attachment_file(&row))?;
        let error = block_on(store.read_attachment_bytes(&row, 0, 5)).expect_err("gone");
        assert!(
            matches!(&error, seed_store::Error::Io(io) if io.kind() == std::io::ErrorKind::NotFound),
            "{error}"
        );
    }
    Ok(())
}

/// A store on `database` with a data dir of its own, as one node of several sees it.
fn node_store(database: &ScratchDatabase) -> anyhow::Result<(tempfile::TempDir, Store)> {
    let dir = tempfile::tempdir()?;
    let mut config = Config::new(dir.path().join("seed.db"));
    config.database = Some(DatabaseUrl(database.url().to_owned()));
    Ok((dir, Store::open(config)?))
}

/// The successor `successor` of `predecessor`, holding its attachment `id`, as a
/// `continue_session` call makes it.
fn successor_with(predecessor: SessionId, successor: SessionId, id: &str) -> NewSuccessor {
    NewSuccessor {
        session: NewSession::new(successor, account(), 20),
        edge: NewContinuation {
            id: ContinuationId::from_u128(1),
            predecessor_session_id: predecessor,
            successor_session_id: successor,
            origin_session_id: predecessor,
            tool_call_id: "call-1".to_owned(),
            initiating_event_id: EventId(1),
            reason: "topic change".to_owned(),
            manifest_cbor: vec![0xa0],
            created_at_ms: 20,
        },
        projection: user_message("the projection"),
        message: user_message("look at attachment:a1"),
        attachment_ids: vec![id.to_owned()],
        close_predecessor_plan: false,
    }
}

/// Several nodes over one PostgreSQL database, each with its own data dir and no disk in
/// common: an attachment uploaded through one is read whole and by range through the other,
/// and so is a successor's copy of it, whichever node made the successor; deleting the
/// sessions deletes the bytes. On PostgreSQL whatever engine the other tests run on.
#[test]
fn a_node_reads_the_attachments_another_node_stored() -> anyhow::Result<()> {
    let database = ScratchDatabase::on_test_cluster();
    let (dir_a, a) = node_store(&database)?;
    let (dir_b, b) = node_store(&database)?;
    block_on(a.create_account(account(), vec![1, 2, 3], 0))?;
    let (predecessor, successor) = (session(0), session(1));
    block_on(a.create_session(NewSession::new(predecessor, account(), 0)))?;
    let bytes: Vec<u8> = (0..=255u8).cycle().take(70_000).collect();

    let added = block_on(a.add_attachment_signed(
        nonce("n1"),
        account(),
        upload(predecessor, "a1", &bytes),
        1 << 20,
    ))?;
    let NonceOutcome::Fresh(UploadOutcome::Added(_)) = added else {
        panic!("not added: {added:?}");
    };
    let row = block_on(b.get_attachment(predecessor, "a1"))?.expect("node b sees the row");
    assert_eq!(
        block_on(b.read_attachment_bytes(&row, 0, usize::MAX))?,
        bytes
    );
    assert_eq!(
        block_on(b.read_attachment_bytes(&row, 65_536, 10))?,
        bytes[65_536..65_546]
    );
    assert_eq!(
        block_on(b.read_attachment_bytes(&row, 69_990, 100))?,
        bytes[69_990..]
    );
    assert!(block_on(b.read_attachment_bytes(&row, 70_000, 100))?.is_empty());

    // Node b runs the turn that continues the session: the successor's copy is read on both.
    block_on(b.create_successor(successor_with(predecessor, successor, "a1")))?;
    for node in [&a, &b] {
        let linked = block_on(node.get_attachment(successor, "a1"))?.expect("the copy");
        assert_eq!(
            block_on(node.read_attachment_bytes(&linked, 0, usize::MAX))?,
            bytes
        );
        assert_eq!(
            block_on(node.read_attachment_bytes(&linked, 3, 4))?,
            bytes[3..7]
        );
    }
    // Counted once against the account, as a hard link is on SQLite.
    assert_eq!(block_on(a.account_attachment_bytes(account()))?, 70_000);
    for dir in [&dir_a, &dir_b] {
        assert!(!dir.path().join("attachments").exists(), "a file on disk");
    }

    // Deleting a session deletes its bytes (the successor keeps its copy); then the other's.
    let contents = |store: &Store| -> anyhow::Result<i64> {
        let counts = block_on(store.row_counts())?;
        Ok(counts
            .into_iter()
            .find(|(table, _)| *table == "attachment_contents")
            .expect("counted")
            .1)
    };
    assert_eq!(contents(&a)?, 2);
    assert!(block_on(a.delete_session(predecessor, 30))?);
    assert_eq!(contents(&b)?, 1);
    let linked = block_on(b.get_attachment(successor, "a1"))?.expect("the copy stays");
    assert_eq!(
        block_on(b.read_attachment_bytes(&linked, 0, 5))?,
        bytes[..5]
    );
    assert!(block_on(b.delete_session(successor, 31))?);
    assert_eq!(contents(&a)?, 0);
    Ok(())
}
