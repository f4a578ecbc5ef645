//! Attachments uploaded by a signed request: the account's limit, the session's owner and the
//! request's nonce are checked in the transaction that adds the row, and a refused upload leaves
//! no file behind.

use crate::common::{Fixture, account};
use futures::executor::block_on;
use seed_events::AccountId;
use seed_store::{NewAttachment, NonceOutcome, RequestNonce, UploadOutcome};

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
    assert_eq!(std::fs::read(store.attachment_file(&row))?, b"0123456789");
    assert_eq!(block_on(store.account_attachment_bytes(account()))?, 10);

    // Over the account's limit, in another of its sessions: refused, no file, no row.
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
    // A replayed nonce: refused after the file was written, and the file is removed.
    let replayed = block_on(store.add_attachment_signed(
        nonce("n1"),
        account(),
        upload(sessions[1], "a4", b"x"),
        16,
    ))?;
    assert_eq!(replayed, NonceOutcome::Replayed);
    assert_eq!(files(&fixture), ["a1"]);
    assert_eq!(block_on(store.list_attachments(sessions[1]))?, []);

    // The same attachment in two sessions (as a successor's hard link is) counts once.
    block_on(store.add_attachment(upload(sessions[1], "a1", b"0123456789")))?;
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
    assert!(block_on(store.read_attachment_bytes(&row, 50, 5))?.is_empty());
    std::fs::remove_file(store.attachment_file(&row))?;
    assert!(block_on(store.read_attachment_bytes(&row, 0, 5)).is_err());
    Ok(())
}
