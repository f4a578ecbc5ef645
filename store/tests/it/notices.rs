//! Notices between nodes over PostgreSQL's LISTEN/NOTIFY: what one connection sends in a
//! transaction reaches another connection's listener at commit, in order, and never when the
//! transaction rolls back; a long text delta arrives as chunks that reassemble; a listener
//! whose connection is cut yields a gap, then hears what comes after. Against the cluster
//! SEED_TEST_DATABASE_URL names, each test in a database of its own.

use std::time::Duration;

use futures::StreamExt as _;
use seed_events::{RunId, RunStatus, SessionId};
use seed_store::ScratchDatabase;
use seed_store::notices::{
    CHANNEL, Gap, Heard, Listener, NOTICES_BUFFERED_MAX_DEFAULT, NOTIFY_PAYLOAD_BYTES_MAX, Notice,
    Notifier, Notify, notify_sql,
};
use tokio_postgres::GenericClient;

/// How long a test waits for a notice before it fails rather than hangs.
const HANG_GUARD: Duration = Duration::from_secs(60);

/// The node the tests' notices come from.
const ORIGIN: &str = "node-a";

/// What a listener yields for `notice` from [`ORIGIN`].
fn heard(notice: Notice) -> Heard {
    Heard::Notice {
        origin: ORIGIN.to_owned(),
        notice,
    }
}

/// A connection of the test's own, driven by a task of its own.
async fn connect(database: &ScratchDatabase) -> tokio_postgres::Client {
    let (client, connection) = tokio_postgres::connect(database.url(), tokio_postgres::NoTls)
        .await
        .expect("a connection to the test database");
    tokio::spawn(connection);
    client
}

async fn listen(database: &ScratchDatabase) -> Listener {
    Listener::connect(database.url(), CHANNEL, NOTICES_BUFFERED_MAX_DEFAULT)
        .await
        .expect("a listener")
}

/// Sends `notice` over `client` (a connection or a transaction), as the writer would.
async fn send(client: &impl GenericClient, notice: &Notice) {
    for notify in notify_sql(CHANNEL, ORIGIN, notice).expect("a notice that fits") {
        let [channel, payload] = notify.params();
        client
            .execute(Notify::SQL, &[&channel, &payload])
            .await
            .expect("pg_notify");
    }
}

/// What the listener yields next.
async fn next(listener: &mut Listener) -> Heard {
    tokio::time::timeout(HANG_GUARD, listener.next())
        .await
        .expect("the listener yields something within the hang guard")
        .expect("a listener goes on until it is dropped")
}

fn events(session_key: i64, from_seq: i64) -> Notice {
    Notice::EventsCommitted {
        session_key,
        from_seq,
        to_seq: from_seq + 1,
    }
}

#[tokio::test]
async fn notices_of_a_transaction_arrive_at_its_commit_in_order() {
    let database = ScratchDatabase::on_test_cluster();
    let mut listener = listen(&database).await;
    let mut writer = connect(&database).await;
    let other = connect(&database).await;
    let (session_id, run_id) = (SessionId::new_v7(), RunId::new_v7());
    let in_transaction = [
        events(1, 1),
        Notice::TextDelta {
            session_id,
            run_id,
            offset_bytes: 0,
            chunk: "hello, world".to_owned(),
        },
        Notice::RunFinished {
            session_id,
            run_id,
            status: RunStatus::Succeeded,
        },
        Notice::SessionChanged {
            session_id,
            reason: "title".to_owned(),
            seqs: Some((4, 6)),
        },
    ];

    let transaction = writer.transaction().await.expect("a transaction");
    for notice in &in_transaction {
        send(&transaction, notice).await;
    }
    // Committed while the transaction is still open: heard first.
    let meanwhile = events(2, 1);
    send(&other, &meanwhile).await;
    transaction.commit().await.expect("the commit");
    let after = events(1, 3);
    send(&other, &after).await;

    assert_eq!(next(&mut listener).await, heard(meanwhile));
    for notice in in_transaction {
        assert_eq!(next(&mut listener).await, heard(notice));
    }
    assert_eq!(next(&mut listener).await, heard(after));
}

#[tokio::test]
async fn notices_of_a_rolled_back_transaction_never_arrive() {
    let database = ScratchDatabase::on_test_cluster();
    let mut listener = listen(&database).await;
    let mut writer = connect(&database).await;

    let transaction = writer.transaction().await.expect("a transaction");
    send(&transaction, &events(1, 1)).await;
    send(&transaction, &events(1, 3)).await;
    transaction.rollback().await.expect("the rollback");
    // Notifications arrive in commit order, so what comes after the rolled-back ones shows
    // they were not sent.
    let committed = events(1, 5);
    send(&writer, &committed).await;

    assert_eq!(next(&mut listener).await, heard(committed));
}

#[tokio::test]
async fn a_long_text_delta_arrives_as_chunks_that_reassemble() {
    let database = ScratchDatabase::on_test_cluster();
    let mut listener = listen(&database).await;
    let mut writer = connect(&database).await;

    // PostgreSQL takes a payload of the limit and refuses one byte more.
    let at_limit = "a".repeat(NOTIFY_PAYLOAD_BYTES_MAX);
    writer
        .execute(Notify::SQL, &[&"elsewhere", &at_limit])
        .await
        .expect("a payload of the limit is taken");
    let past = writer
        .execute(Notify::SQL, &[&"elsewhere", &format!("{at_limit}a")])
        .await
        .expect_err("one byte past the limit is refused");
    assert!(
        past.as_db_error()
            .is_some_and(|error| error.message().contains("too long")),
        "{past:?}"
    );

    // 20 000 bytes of one-, two-, three- and four-byte chars and the chars the payload
    // escapes, so that chunks end inside what would be a char and inside an escape.
    let pattern = ['a', ' ', 'é', '✓', '🦀', '\\', '\0', '\n'];
    let mut text = String::new();
    for c in pattern.iter().cycle() {
        if text.len() + c.len_utf8() > 20_000 {
            break;
        }
        text.push(*c);
    }
    while text.len() < 20_000 {
        text.push('a');
    }
    let (session_id, run_id) = (SessionId::new_v7(), RunId::new_v7());
    let offset_bytes = 1_234;
    let delta = Notice::TextDelta {
        session_id,
        run_id,
        offset_bytes,
        chunk: text.clone(),
    };
    let n_payloads = delta.payloads(ORIGIN).expect("a delta is split").len();
    assert!(n_payloads >= 3, "{n_payloads} payloads for 20 000 bytes");
    let transaction = writer.transaction().await.expect("a transaction");
    send(&transaction, &delta).await;
    transaction.commit().await.expect("the commit");

    let mut reassembled = String::new();
    for _ in 0..n_payloads {
        let Heard::Notice {
            notice:
                Notice::TextDelta {
                    session_id: chunk_session,
                    run_id: chunk_run,
                    offset_bytes: chunk_offset,
                    chunk,
                },
            ..
        } = next(&mut listener).await
        else {
            panic!("a chunk of the delta");
        };
        assert_eq!((chunk_session, chunk_run), (session_id, run_id));
        assert_eq!(
            chunk_offset,
            offset_bytes + reassembled.len() as u64,
            "each chunk continues the one before"
        );
        reassembled.push_str(&chunk);
    }
    assert_eq!(reassembled.len(), text.len());
    assert!(reassembled == text, "the chunks reassemble to the text");
}

#[tokio::test]
async fn a_listener_whose_connection_is_cut_yields_a_gap_then_what_comes_after() {
    let database = ScratchDatabase::on_test_cluster();
    let mut listener = listen(&database).await;
    let writer = connect(&database).await;

    send(&writer, &events(1, 1)).await;
    assert_eq!(next(&mut listener).await, heard(events(1, 1)));

    let terminated = writer
        .query(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity
             WHERE datname = current_database() AND pid <> pg_backend_pid()
                 AND query LIKE 'LISTEN %'",
            &[],
        )
        .await
        .expect("the listener's connection ended");
    assert_eq!(terminated.len(), 1, "one listener's connection to end");
    assert!(
        terminated[0].get::<_, bool>(0),
        "the listener's connection ended"
    );

    assert_eq!(next(&mut listener).await, Heard::Gap(Gap::Reconnected));
    send(&writer, &events(1, 3)).await;
    assert_eq!(next(&mut listener).await, heard(events(1, 3)));
}

/// A reader that does not keep up loses notices, but never without a gap where they were: the
/// notices it gets come in the order they were sent, and a gap comes before any that does not
/// follow the one before. The reader reads on until a marker (another session's notice) arrives:
/// one sent after the notices, and another after each gap, since a marker that comes while the
/// buffer is full is dropped too.
#[tokio::test]
async fn a_reader_that_falls_behind_gets_a_gap_where_notices_were_dropped() {
    const N_SENT: i64 = 2_000;
    const MARKER_KEY: i64 = 2;
    let database = ScratchDatabase::on_test_cluster();
    // Room for a notice or two: the connection hears hundreds at a time, and the reader
    // reads none of them until all are committed.
    let mut listener = Listener::connect(database.url(), CHANNEL, 1)
        .await
        .expect("a listener");
    let mut writer = connect(&database).await;
    let transaction = writer.transaction().await.expect("a transaction");
    for seq in 1..=N_SENT {
        send(&transaction, &events(1, seq)).await;
    }
    transaction.commit().await.expect("the commit");
    send(&writer, &events(MARKER_KEY, 0)).await;

    let mut last_seq = 0;
    let mut gap_before = false;
    let mut n_gaps = 0;
    loop {
        match next(&mut listener).await {
            Heard::Gap(gap) => {
                assert_eq!(gap, Gap::FellBehind);
                gap_before = true;
                n_gaps += 1;
                send(&writer, &events(MARKER_KEY, n_gaps)).await;
            }
            Heard::Notice {
                notice:
                    Notice::EventsCommitted {
                        session_key: MARKER_KEY,
                        ..
                    },
                ..
            } => break,
            Heard::Notice {
                notice:
                    Notice::EventsCommitted {
                        session_key: 1,
                        from_seq,
                        ..
                    },
                ..
            } => {
                assert!(from_seq > last_seq, "{from_seq} after {last_seq}");
                assert!(
                    from_seq == last_seq + 1 || gap_before,
                    "{from_seq} after {last_seq} without a gap between"
                );
                last_seq = from_seq;
                gap_before = false;
            }
            other => panic!("not a notice that was sent: {other:?}"),
        }
    }
    assert!(
        n_gaps >= 1,
        "{N_SENT} notices fit in a buffer of one or two"
    );
}

/// The listener's backends in the test's database.
async fn n_listening(client: &tokio_postgres::Client) -> i64 {
    client
        .query_one(
            "SELECT count(*) FROM pg_stat_activity
             WHERE datname = current_database() AND query LIKE 'LISTEN %'",
            &[],
        )
        .await
        .expect("the database's backends")
        .get(0)
}

#[tokio::test]
async fn dropping_a_listener_closes_its_connection() {
    let database = ScratchDatabase::on_test_cluster();
    let listener = listen(&database).await;
    let client = connect(&database).await;
    assert_eq!(n_listening(&client).await, 1);

    drop(listener);
    // The backend goes once the connection closes, which the server sees a moment later.
    tokio::time::timeout(HANG_GUARD, async {
        while n_listening(&client).await > 0 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .expect("the listener's backend ends within the hang guard");
}

#[tokio::test]
async fn a_listener_on_a_database_that_cannot_be_reached_is_an_error() {
    // A port nothing listens on: one just let go.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("a free port")
        .port();
    let url = format!("postgres://seed@127.0.0.1:{port}/seed");
    let error = Listener::connect(&url, CHANNEL, NOTICES_BUFFERED_MAX_DEFAULT)
        .await
        .expect_err("nothing listens there");
    assert!(error.to_string().contains("connect"), "{error}");
}

/// A notifier sends in order; when its connection is cut, what it could not send is lost, and
/// the first notice it sends on a new connection is a [`Notice::Missed`], so receivers resync.
#[tokio::test]
async fn a_notifier_whose_connection_is_cut_says_it_missed_notices() {
    let database = ScratchDatabase::on_test_cluster();
    let mut listener = listen(&database).await;
    let admin = connect(&database).await;
    let mut notifier = Notifier::connect(database.url(), CHANNEL, ORIGIN)
        .await
        .expect("a notifier");
    for seq in 1..=2 {
        notifier.send(&events(1, seq)).await.expect("sent");
    }
    for seq in 1..=2 {
        assert_eq!(next(&mut listener).await, heard(events(1, seq)));
    }

    let terminated = admin
        .query(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity
             WHERE datname = current_database() AND pid <> pg_backend_pid()
                 AND query LIKE 'SELECT pg_notify%'",
            &[],
        )
        .await
        .expect("the notifier's connection ended");
    assert_eq!(terminated.len(), 1, "one notifier's connection to end");
    // Either lost with its connection, or sent on a new one after the missed notice.
    let _ = notifier.send(&events(1, 3)).await;
    notifier
        .send(&events(1, 4))
        .await
        .expect("sent on a new connection");

    assert_eq!(next(&mut listener).await, heard(Notice::Missed));
    let mut after = next(&mut listener).await;
    if after == heard(events(1, 3)) {
        after = next(&mut listener).await;
    }
    assert_eq!(after, heard(events(1, 4)));
}

/// A batch goes in one statement, and its notices are heard in the order they were added,
/// a long delta's chunks in place among them; what is sent after it is heard after it.
#[tokio::test]
async fn a_notifiers_batch_is_one_statement_heard_in_order() {
    let database = ScratchDatabase::on_test_cluster();
    let mut listener = listen(&database).await;
    let mut notifier = Notifier::connect(database.url(), CHANNEL, ORIGIN)
        .await
        .expect("a notifier");
    let (session_id, run_id) = (SessionId::new_v7(), RunId::new_v7());
    let long_text = "é".repeat(10_000);
    let mut in_batch: Vec<Notice> = (1..=300).map(|seq| events(1, seq)).collect();
    in_batch.insert(
        150,
        Notice::TextDelta {
            session_id,
            run_id,
            offset_bytes: 0,
            chunk: long_text.clone(),
        },
    );
    let mut batch = notifier.batch();
    for notice in &in_batch {
        batch.add(notice).expect("a notice that fits");
    }
    assert_eq!(batch.len(), 301);
    notifier.send_batch(batch).await.expect("sent");
    let after = events(2, 1);
    notifier.send(&after).await.expect("sent");
    let sent = notifier.sent();
    assert_eq!((sent.notices(), sent.statements()), (302, 2));

    for notice in in_batch {
        let Notice::TextDelta { .. } = notice else {
            assert_eq!(next(&mut listener).await, heard(notice));
            continue;
        };
        let mut reassembled = String::new();
        while reassembled.len() < long_text.len() {
            let Heard::Notice {
                notice:
                    Notice::TextDelta {
                        offset_bytes,
                        chunk,
                        ..
                    },
                ..
            } = next(&mut listener).await
            else {
                panic!("a chunk of the delta, in its place");
            };
            assert_eq!(offset_bytes, reassembled.len() as u64);
            reassembled.push_str(&chunk);
        }
        assert!(
            reassembled == long_text,
            "the chunks reassemble to the text"
        );
    }
    assert_eq!(next(&mut listener).await, heard(after));
}
