//! Memory files under `~/memory/`: write, append, read, list, delete, per account, and paths
//! refused before anything is written.

use crate::common::{Fixture, account};
use futures::executor::block_on;
use seed_events::AccountId;
use seed_store::{CallEffect, Error, MemoryChange, MemoryFileRow};

fn listed(fixture: &Fixture, account_id: AccountId) -> anyhow::Result<Vec<(String, u64, i64)>> {
    Ok(block_on(fixture.store.list_memory(account_id))?
        .into_iter()
        .map(
            |MemoryFileRow {
                 path,
                 size_bytes,
                 updated_at_ms,
             }| (path, size_bytes, updated_at_ms),
        )
        .collect())
}

#[test]
fn memory_files_are_written_appended_read_listed_and_deleted() -> anyhow::Result<()> {
    let fixture = Fixture::new()?;
    let store = &fixture.store;
    let other_account = AccountId::from_u128(0xb0b);
    block_on(store.create_account(other_account, vec![9], 0))?;

    block_on(store.write_memory(account(), "~/memory/notes.md", "first".to_owned(), 10))?;
    block_on(store.write_memory(account(), "~/memory/notes.md", "second".to_owned(), 20))?;
    assert_eq!(
        block_on(store.read_memory(account(), "~/memory/notes.md"))?.as_deref(),
        Some("second"),
        "a write replaces"
    );
    block_on(store.append_memory(account(), "~/memory/notes.md", "\nmore".to_owned(), 30))?;
    block_on(store.append_memory(account(), "~/memory/people/ada.md", "é".to_owned(), 40))?;
    block_on(store.write_memory(account(), "~/memory/a.md", String::new(), 50))?;
    block_on(store.write_memory(other_account, "~/memory/notes.md", "theirs".to_owned(), 60))?;
    assert_eq!(
        block_on(store.read_memory(account(), "~/memory/notes.md"))?.as_deref(),
        Some("second\nmore")
    );
    assert_eq!(
        block_on(store.read_memory(account(), "~/memory/people/ada.md"))?.as_deref(),
        Some("é"),
        "an append creates a missing file"
    );
    assert_eq!(
        block_on(store.read_memory(account(), "~/memory/missing.md"))?,
        None
    );

    // Sorted by path; sizes in bytes, not characters; each account sees its own.
    assert_eq!(
        listed(&fixture, account())?,
        [
            ("~/memory/a.md".to_owned(), 0, 50),
            ("~/memory/notes.md".to_owned(), 11, 30),
            ("~/memory/people/ada.md".to_owned(), 2, 40),
        ]
    );
    assert_eq!(
        listed(&fixture, other_account)?,
        [("~/memory/notes.md".to_owned(), 6, 60)]
    );

    assert!(block_on(
        store.delete_memory(account(), "~/memory/notes.md")
    )?);
    assert!(!block_on(
        store.delete_memory(account(), "~/memory/notes.md")
    )?);
    assert_eq!(
        block_on(store.read_memory(account(), "~/memory/notes.md"))?,
        None
    );
    assert_eq!(
        block_on(store.read_memory(other_account, "~/memory/notes.md"))?.as_deref(),
        Some("theirs"),
        "a delete is scoped to its account"
    );
    assert_eq!(listed(&fixture, account())?.len(), 2);
    Ok(())
}

#[test]
fn invalid_memory_paths_are_refused_and_write_nothing() -> anyhow::Result<()> {
    let fixture = Fixture::new()?;
    let store = &fixture.store;
    block_on(store.write_memory(account(), "~/memory/kept.md", "kept".to_owned(), 1))?;
    let too_long = format!("~/memory/{}", "x".repeat(512));
    let invalid = [
        "~/memory/../x",
        "/etc/passwd",
        "~/memory/",
        "~/memory/a//b",
        "~/memory/a/",
        "~/memory/./a",
        "~/memoryx/a",
        "~/Memory/a",
        too_long.as_str(),
        "~/memory/a\nb.md",
        "~/memory/\u{1b}[2Jnotes.md",
        "~/memory/report\u{202E}dm.exe",
        "~/memory/no\u{200B}tes.md",
    ];
    for path in invalid {
        let is_invalid_path = |result: Result<(), Error>| match result {
            Err(Error::InvalidPath {
                path: refused,
                reason,
            }) => refused == path && !reason.is_empty(),
            _ => false,
        };
        let write = block_on(store.write_memory(account(), path, "x".to_owned(), 2));
        assert!(is_invalid_path(write), "write {path:?}");
        let append = block_on(store.append_memory(account(), path, "x".to_owned(), 2));
        assert!(is_invalid_path(append), "append {path:?}");
        let delete = block_on(store.delete_memory(account(), path)).map(drop);
        assert!(is_invalid_path(delete), "delete {path:?}");
        let read = block_on(store.read_memory(account(), path)).map(drop);
        assert!(is_invalid_path(read), "read {path:?}");
    }
    let message = block_on(store.write_memory(account(), "~/memory/../x", String::new(), 2))
        .expect_err("a .. path was accepted")
        .to_string();
    assert_eq!(
        message,
        "invalid memory path \"~/memory/../x\": has a .. component"
    );

    // Nothing reached the table, and the writer never saw the refused calls.
    assert_eq!(
        listed(&fixture, account())?,
        [("~/memory/kept.md".to_owned(), 4, 1)]
    );
    let n_rows: i64 = fixture.raw_i64("SELECT COUNT(*) FROM memory_files", &[])?;
    assert_eq!(n_rows, 1);
    assert_eq!(
        fixture
            .store
            .writer_stats()
            .n_jobs_refused
            .load(std::sync::atomic::Ordering::Relaxed),
        0
    );

    // The longest path allowed is 512 bytes.
    let longest = format!("~/memory/{}", "x".repeat(512 - "~/memory/".len()));
    block_on(store.write_memory(account(), &longest, "fits".to_owned(), 3))?;
    assert_eq!(
        block_on(store.read_memory(account(), &longest))?.as_deref(),
        Some("fits")
    );
    Ok(())
}

/// A change made for a call records the call's effect in its own transaction, when it took
/// effect: the effect is found by (session, call id), and a delete of a missing file records
/// nothing. A change of a deleted session's call is refused whole.
#[test]
fn a_change_for_a_call_records_its_effect_with_it() -> anyhow::Result<()> {
    let fixture = Fixture::new()?;
    let store = &fixture.store;
    let sessions = fixture.create_sessions(2)?;
    let effect = |session_id, call: &str, result: &str| CallEffect {
        session_id,
        tool_call_id: call.to_owned(),
        verb: "memory".to_owned(),
        result: result.to_owned(),
    };
    let path = "~/memory/notes.md";
    let append = |text: &str| MemoryChange::Append {
        text: text.to_owned(),
    };
    assert!(block_on(store.change_memory(
        account(),
        path,
        append("a"),
        10,
        Some(effect(sessions[0], "c1", "appended 1 bytes"))
    ))?);
    assert_eq!(
        block_on(store.call_effect(sessions[0], "c1"))?,
        Some(effect(sessions[0], "c1", "appended 1 bytes"))
    );
    // Another session's call with the same id is another call.
    assert_eq!(block_on(store.call_effect(sessions[1], "c1"))?, None);

    // A delete of a missing file takes no effect and records none.
    let missing = "~/memory/missing.md";
    assert!(!block_on(store.change_memory(
        account(),
        missing,
        MemoryChange::Delete,
        11,
        Some(effect(sessions[0], "c2", "deleted"))
    ))?);
    assert_eq!(block_on(store.call_effect(sessions[0], "c2"))?, None);

    // A call of a session that is gone: neither the change nor its effect is written.
    block_on(store.delete_session(sessions[1], 12))?;
    let refused = block_on(store.change_memory(
        account(),
        path,
        append("b"),
        13,
        Some(effect(sessions[1], "c3", "appended 1 bytes")),
    ));
    assert!(refused.is_err(), "{refused:?}");
    assert_eq!(
        block_on(store.read_memory(account(), path))?.as_deref(),
        Some("a")
    );
    Ok(())
}

/// An account keeps at most `memory_files_max` memory files holding `memory_bytes_max` bytes
/// together: a change past either is refused with a clear error and writes nothing (nor its
/// call's effect), while one that adds no file and no bytes passes; another account has its
/// own quota.
#[test]
fn memory_changes_past_the_accounts_quotas_are_refused_and_write_nothing() -> anyhow::Result<()> {
    let fixture = Fixture::with(|config| {
        config.quotas = seed_store::Quotas {
            memory_files_max: 2,
            memory_bytes_max: 10,
            ..seed_store::Quotas::default()
        };
    })?;
    let store = &fixture.store;
    let session_id = fixture.create_sessions(1)?[0];
    let change = |path: &str, change: MemoryChange, call: &str| {
        block_on(store.change_memory(
            account(),
            path,
            change,
            10,
            Some(CallEffect {
                session_id,
                tool_call_id: call.to_owned(),
                verb: "memory".to_owned(),
                result: "done".to_owned(),
            }),
        ))
    };
    let write = |content: &str| MemoryChange::Write {
        content: content.to_owned(),
    };
    let append = |text: &str| MemoryChange::Append {
        text: text.to_owned(),
    };
    assert!(change("~/memory/a.md", write("aaaa"), "c1")?);
    assert!(change("~/memory/b.md", write("bbbb"), "c2")?);
    let before = listed(&fixture, account())?;

    let refusals = [
        (
            change("~/memory/c.md", write(""), "c3"),
            "the account's memory files would be 3, past the 2 an account may have \
             (memory_files_max)",
        ),
        (
            change("~/memory/a.md", append("aaa"), "c4"),
            "the bytes of the account's memory files would be 11, past the 10 an account may \
             have (memory_bytes_max)",
        ),
        (
            change("~/memory/b.md", write("bbbbbbb"), "c5"),
            "the bytes of the account's memory files would be 11, past the 10 an account may \
             have (memory_bytes_max)",
        ),
    ];
    for (idx, (refused, message)) in refusals.into_iter().enumerate() {
        match refused {
            Err(error @ Error::OverQuota { .. }) => assert_eq!(error.to_string(), message),
            other => panic!("refusal {idx}: {other:?}"),
        }
    }
    assert_eq!(listed(&fixture, account())?, before, "nothing was written");
    for call in ["c3", "c4", "c5"] {
        assert_eq!(block_on(store.call_effect(session_id, call))?, None);
    }

    // Up to the quota, a shorter write, and a delete then a new file, all pass.
    assert!(change("~/memory/a.md", append("aa"), "c6")?);
    assert!(change("~/memory/a.md", write("a"), "c7")?);
    assert!(change("~/memory/b.md", MemoryChange::Delete, "c8")?);
    assert!(change("~/memory/c.md", write("ccccccccc"), "c9")?);
    // Another account's files count against its own quotas alone.
    let other_account = AccountId::from_u128(0xb0b);
    block_on(store.create_account(other_account, vec![9], 0))?;
    assert!(block_on(store.change_memory(
        other_account,
        "~/memory/a.md",
        write("0123456789"),
        11,
        None
    ))?);
    Ok(())
}
