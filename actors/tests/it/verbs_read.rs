//! The `read` verb, called directly over a real SQLite file: thread reads (ranges, limits, the
//! account boundary) and memory reads.

use crate::common;

use crate::common::{Fixture, account, session};
use seed_actors::verbs::read::Read;
use seed_actors::{Verb, VerbContext, VerbOutput};
use seed_events::{AccountId, EventRole, NewEvent, SessionId};
use seed_store::{NewSession, Store, TitleSource};
use serde_json::{Value, json};

fn context(store: &Store, session_id: SessionId) -> VerbContext {
    common::verb_context(store, session_id)
}

async fn read(store: &Store, arguments: Value) -> VerbOutput {
    Read.call(context(store, session(1)), arguments).await
}

fn ok(text: &str) -> VerbOutput {
    VerbOutput::ok(text)
}

fn error(text: &str) -> VerbOutput {
    VerbOutput::error(text)
}

/// Session 0 titled "Trip to <Lisbon>" with five events; session 1 is the reader.
async fn thread_fixture() -> anyhow::Result<Fixture> {
    let fixture = Fixture::new(2).await?;
    fixture
        .store
        .set_session_status(
            session(0),
            "Trip to \"Lisbon\"".to_owned(),
            "Booking".to_owned(),
            TitleSource::Agent,
            1,
        )
        .await?;
    let tool_call = NewEvent {
        kind: "tool_call".to_owned(),
        ..NewEvent::message(
            EventRole::Assistant,
            "agent",
            json!({"id": "c1", "name": "plan", "arguments": {"steps": []}}),
            3,
        )
    };
    let tool_result = NewEvent {
        kind: "tool_result".to_owned(),
        ..NewEvent::message(
            EventRole::Tool,
            "agent",
            json!({"tool_call_id": "c1", "tool_name": "plan", "content": "plan cleared", "is_error": false}),
            4,
        )
    };
    fixture
        .store
        .append_events(
            session(0),
            vec![
                NewEvent::message(
                    EventRole::User,
                    "user",
                    json!({"text": "Plan a trip\nto Lisbon"}),
                    1,
                ),
                NewEvent::message(
                    EventRole::Assistant,
                    "agent",
                    json!({"text": "Sure, <b>gladly</b>"}),
                    2,
                ),
                tool_call,
                tool_result,
                NewEvent::message(EventRole::Assistant, "agent", json!({"text": "Done."}), 5),
            ],
        )
        .await?;
    Ok(fixture)
}

fn thread(id: SessionId) -> String {
    format!("thread:{id}")
}

fn header(id: SessionId) -> String {
    format!("thread {id} \"Trip to &quot;Lisbon&quot;\", last seq 5")
}

const LINES: [&str; 5] = [
    "[1] user: Plan a trip\u{23ce}to Lisbon",
    "[2] assistant: Sure, &lt;b&gt;gladly&lt;/b&gt;",
    "[3] assistant \u{2192} plan({\"steps\":[]})",
    "[4] tool plan: plan cleared",
    "[5] assistant: Done.",
];

fn expected(id: SessionId, lines: &[&str], tail: Option<&str>) -> VerbOutput {
    let mut text = vec![header(id)];
    text.extend(lines.iter().map(|line| (*line).to_owned()));
    text.extend(tail.map(str::to_owned));
    VerbOutput::ok(text.join("\n"))
}

#[actix::test]
async fn a_thread_reads_as_a_header_and_transcript_lines() -> anyhow::Result<()> {
    let fixture = thread_fixture().await?;
    let output = read(&fixture.store, json!({ "target": thread(session(0)) })).await;
    assert_eq!(output, expected(session(0), &LINES, None));
    assert!(Read.safe_to_repeat());
    Ok(())
}

#[actix::test]
async fn from_seq_to_seq_and_limit_pick_the_events() -> anyhow::Result<()> {
    let fixture = thread_fixture().await?;
    let store = &fixture.store;
    let target = thread(session(0));

    let output = read(store, json!({"target": target, "fromSeq": 2, "toSeq": 4})).await;
    assert_eq!(output, expected(session(0), &LINES[1..4], None));

    let output = read(store, json!({"target": target, "limit": 2})).await;
    assert_eq!(
        output,
        expected(
            session(0),
            &LINES[..2],
            Some("(limit 2 reached: read on with fromSeq 3)")
        )
    );

    // The limit reached exactly at the end of the range or of the thread: nothing to read on.
    let output = read(store, json!({"target": target, "fromSeq": 4, "limit": 2})).await;
    assert_eq!(output, expected(session(0), &LINES[3..], None));
    let output = read(store, json!({"target": target, "toSeq": 2, "limit": 2})).await;
    assert_eq!(output, expected(session(0), &LINES[..2], None));
    let output = read(store, json!({"target": target, "fromSeq": 3, "toSeq": 3})).await;
    assert_eq!(output, expected(session(0), &LINES[2..3], None));

    let output = read(store, json!({"target": target, "fromSeq": 9})).await;
    assert_eq!(
        output,
        ok(&format!("{}\nno events from seq 9", header(session(0))))
    );
    let output = read(store, json!({"target": target, "fromSeq": 9, "toSeq": 12})).await;
    assert_eq!(
        output,
        ok(&format!("{}\nno events in seq 9 to 12", header(session(0))))
    );

    let output = read(store, json!({"target": target, "limit": 1000})).await;
    assert_eq!(output, expected(session(0), &LINES, None));
    // A number with no fractional part is an integer, as JSON Schema has it.
    let output = read(store, json!({"target": target, "limit": 2.0})).await;
    assert_eq!(
        output,
        expected(
            session(0),
            &LINES[..2],
            Some("(limit 2 reached: read on with fromSeq 3)")
        )
    );
    Ok(())
}

/// A person's arguments are checked as JSON Schema reads the verb's schema: `2.0` is an
/// integer, `2.5` is not, and a `null` is a value of the wrong type (a model's call is let off
/// that: its `null` counts as an absent field).
#[test]
fn a_persons_arguments_are_checked_as_json_schema_reads_them() {
    use seed_actors::schema::check_arguments;
    let schema = Read.parameters();
    let field = |arguments: Value| check_arguments(&schema, &arguments).map_err(|e| e.field);
    assert_eq!(field(json!({"target": "thread:x", "limit": 2.0})), Ok(()));
    assert_eq!(
        field(json!({"target": "thread:x", "limit": 2.5})),
        Err("limit".to_owned())
    );
    assert_eq!(
        field(json!({"target": "thread:x", "limit": null})),
        Err("limit".to_owned())
    );
    assert_eq!(field(json!({"target": null})), Err("target".to_owned()));
}

#[actix::test]
async fn out_of_range_seqs_and_limits_are_refused_naming_the_field() -> anyhow::Result<()> {
    let fixture = thread_fixture().await?;
    let store = &fixture.store;
    let target = thread(session(0));
    let cases = [
        (
            json!({"target": target, "limit": 1001}),
            "invalid arguments for read: limit: at most 1000, got 1001",
        ),
        (
            json!({"target": target, "limit": 0}),
            "invalid arguments for read: limit: at least 1, got 0",
        ),
        (
            json!({"target": target, "fromSeq": 0}),
            "invalid arguments for read: fromSeq: at least 1, got 0",
        ),
        (
            json!({"target": target, "toSeq": -3}),
            "invalid arguments for read: toSeq: at least 1, got -3",
        ),
        (
            json!({"target": target, "fromSeq": 4, "toSeq": 2}),
            "invalid arguments for read: toSeq: 2 is before fromSeq 4",
        ),
    ];
    for (arguments, message) in cases {
        assert_eq!(
            read(store, arguments.clone()).await,
            error(message),
            "{arguments}"
        );
    }
    Ok(())
}

#[actix::test]
async fn invalid_arguments_name_the_field() -> anyhow::Result<()> {
    let fixture = thread_fixture().await?;
    let store = &fixture.store;
    let target = thread(session(0));
    let cases = [
        (json!({}), "invalid arguments for read: target: required"),
        (
            json!({"target": null}),
            "invalid arguments for read: target: required",
        ),
        (
            json!({"target": 7}),
            "invalid arguments for read: target: expected a string, got an integer",
        ),
        (
            json!({"target": target, "fromSeq": "2"}),
            "invalid arguments for read: fromSeq: expected an integer, got a string",
        ),
        (
            json!({"target": target, "limit": 2.5}),
            "invalid arguments for read: limit: expected an integer, got a number",
        ),
        (
            json!({"target": target, "from": 2}),
            "invalid arguments for read: from: unknown field (expected fromByte, fromSeq, limit, target, toSeq)",
        ),
        (
            json!("thread"),
            "invalid arguments for read: arguments: expected an object, got a string",
        ),
        (
            json!({"target": "notes.md"}),
            "invalid arguments for read: target: expected thread:<session id>, a ~/memory/ path or attachment:<id>, got \"notes.md\"",
        ),
        (
            json!({"target": "thread:42"}),
            "invalid arguments for read: target: \"thread:42\" is not a thread id; expected thread:<session id>",
        ),
    ];
    for (arguments, message) in cases {
        assert_eq!(
            read(store, arguments.clone()).await,
            error(message),
            "{arguments}"
        );
    }
    // An optional field given as null counts as absent.
    let output = read(store, json!({"target": target, "limit": null})).await;
    assert_eq!(output, expected(session(0), &LINES, None));
    Ok(())
}

#[actix::test]
async fn threads_of_another_account_and_unknown_ids_are_not_found() -> anyhow::Result<()> {
    let fixture = thread_fixture().await?;
    let store = &fixture.store;
    let other_account = AccountId::from_u128(0x0be5);
    let other_session = SessionId::from_u128(0x0be5_0001);
    store.create_account(other_account, vec![2], 0).await?;
    store
        .create_session(NewSession::new(other_session, other_account, 0))
        .await?;
    store
        .append_events(
            other_session,
            vec![NewEvent::message(
                EventRole::User,
                "user",
                json!({"text": "a secret"}),
                1,
            )],
        )
        .await?;

    let not_found = error("thread not found");
    let output = read(store, json!({"target": thread(other_session)})).await;
    assert_eq!(output, not_found);
    let unknown = SessionId::from_u128(0xdead_beef);
    let output = read(store, json!({"target": thread(unknown)})).await;
    assert_eq!(output, not_found);

    // The other account's agent cannot read ours either, even naming a range.
    let theirs = VerbContext {
        account_id: other_account,
        ..context(store, other_session)
    };
    let output = Read
        .call(
            theirs.clone(),
            json!({"target": thread(session(0)), "fromSeq": 1}),
        )
        .await;
    assert_eq!(output, not_found);
    // It reads its own thread, untitled.
    let output = Read
        .call(theirs, json!({"target": thread(other_session)}))
        .await;
    assert_eq!(
        output,
        ok(&format!(
            "thread {other_session} (untitled), last seq 1\n[1] user: a secret"
        ))
    );
    Ok(())
}

#[actix::test]
async fn an_agent_reads_its_own_current_thread_even_when_empty() -> anyhow::Result<()> {
    let fixture = thread_fixture().await?;
    let output = read(&fixture.store, json!({"target": thread(session(1))})).await;
    assert_eq!(
        output,
        ok(&format!(
            "thread {} (untitled), last seq 0\nno events from seq 1",
            session(1)
        ))
    );
    Ok(())
}

#[actix::test]
async fn a_memory_read_returns_the_content_or_no_such_file() -> anyhow::Result<()> {
    let fixture = Fixture::new(2).await?;
    let store = &fixture.store;
    store
        .write_memory(
            account(),
            "~/memory/people/ana.md",
            "# Ana\nlikes <tea>\n".to_owned(),
            1,
        )
        .await?;

    let output = read(store, json!({"target": "~/memory/people/ana.md"})).await;
    assert_eq!(output, ok("# Ana\nlikes <tea>\n"));
    let output = read(store, json!({"target": "~/memory/people/bo.md"})).await;
    assert_eq!(output, error("no such file: ~/memory/people/bo.md"));
    let output = read(store, json!({"target": "~/memory/people/../ana.md"})).await;
    assert_eq!(
        output,
        error("invalid memory path \"~/memory/people/../ana.md\": has a .. component")
    );
    let output = read(
        store,
        json!({"target": "~/memory/people/ana.md", "limit": 5}),
    )
    .await;
    assert_eq!(
        output,
        error("invalid arguments for read: limit: only for thread reads")
    );

    // Another account's agent has its own memory.
    let other_account = AccountId::from_u128(0x0be5);
    let theirs = VerbContext {
        account_id: other_account,
        ..context(store, session(1))
    };
    let output = Read
        .call(theirs, json!({"target": "~/memory/people/ana.md"}))
        .await;
    assert_eq!(output, error("no such file: ~/memory/people/ana.md"));
    Ok(())
}

/// A text file and an image attached in session 0 of the test account.
async fn attachment_fixture() -> anyhow::Result<Fixture> {
    let fixture = Fixture::new(2).await?;
    for (id, name, media_type, bytes) in [
        ("a1", "notes.txt", "text/plain", "héllo, world".as_bytes()),
        (
            "a2",
            "dot.png",
            "image/png",
            b"\x89PNG\r\n\x1a\n".as_slice(),
        ),
    ] {
        fixture
            .store
            .add_attachment(seed_store::NewAttachment {
                session_id: session(0),
                id: id.to_owned(),
                name: name.to_owned(),
                media_type: media_type.to_owned(),
                bytes: bytes.to_vec(),
                created_at_ms: 1,
            })
            .await?;
    }
    Ok(fixture)
}

#[actix::test]
async fn an_attachment_of_the_account_is_read_from_a_byte() -> anyhow::Result<()> {
    let fixture = attachment_fixture().await?;
    let store = &fixture.store;
    // Session 1 reads session 0's attachment: the same account.
    assert_eq!(
        read(store, json!({"target": "attachment:a1"})).await,
        ok("attachment:a1 (notes.txt, text/plain, 13 bytes), bytes 0 to 13:\nhéllo, world")
    );
    assert_eq!(
        read(store, json!({"target": "attachment:a1", "fromByte": 8})).await,
        ok("attachment:a1 (notes.txt, text/plain, 13 bytes), bytes 8 to 13:\nworld")
    );
    assert_eq!(
        read(store, json!({"target": "attachment:a2"})).await,
        error(
            "attachment:a2 (dot.png, image/png, 8 bytes): not text; it can be read only as the \
             message that carries it shows it"
        )
    );
    assert_eq!(
        read(store, json!({"target": "attachment:nope"})).await,
        error("attachment not found: nope")
    );
    assert_eq!(
        read(store, json!({"target": "attachment:a1", "limit": 3})).await,
        error("invalid arguments for read: limit: only for thread reads")
    );
    assert_eq!(
        read(store, json!({"target": "~/memory/x.md", "fromByte": 3})).await,
        error("invalid arguments for read: fromByte: only for attachment reads")
    );
    Ok(())
}

/// A store failure under the read verb reaches the model with its cause, not one word.
#[actix::test]
async fn an_attachment_whose_file_is_gone_fails_with_the_cause() -> anyhow::Result<()> {
    let fixture = attachment_fixture().await?;
    let store = &fixture.store;
    let row = store
        .get_attachment(session(0), "a1")
        .await?
        .expect("the fixture's attachment");
    let path = store.attachment_file(&row);
    std::fs::remove_file(&path)?;
    let not_found = std::fs::File::open(&path).expect_err("the file was removed");
    assert_eq!(
        read(store, json!({"target": "attachment:a1"})).await,
        error(&format!("read failed: io: {not_found}"))
    );
    Ok(())
}

#[actix::test]
async fn another_accounts_attachment_is_not_found() -> anyhow::Result<()> {
    let fixture = attachment_fixture().await?;
    let store = &fixture.store;
    let stranger = AccountId::from_u128(0x0bad);
    store.create_account(stranger, vec![7], 0).await?;
    let theirs = SessionId::from_u128(0x0bad_5e55);
    store
        .create_session(NewSession::new(theirs, stranger, 0))
        .await?;
    let context = VerbContext {
        account_id: stranger,
        ..context(store, theirs)
    };
    assert_eq!(
        Read.call(context, json!({"target": "attachment:a1"})).await,
        error("attachment not found: a1")
    );
    Ok(())
}
