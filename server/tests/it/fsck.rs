//! `seed fsck` as an operator runs it: clean (exit 0) on the database of a running service
//! after turns and a continuation, on either engine; and, on SQLite, each kind of damage a test
//! plants in a copy of that database — a changed byte of an excerpt, a deleted store row, a
//! missing successor, a gap in the seqs, a kept fold that is not the files' — found (exit 1)
//! and named with its session. The kill tests run it on what they leave (`assert_clean`).

use std::path::Path;
use std::process::Output;
use std::time::Duration;

use crate::common::{self, SEED, Server};
use seed_server::api::MessageSessionResponse;
use serde_json::json;
use uuid::Uuid;

/// Runs `seed fsck` on `data_dir`'s database (PostgreSQL's when the tests run there).
pub(crate) fn fsck(data_dir: &Path) -> Output {
    assert_cmd::Command::new(SEED)
        .env_remove("SEED_DATABASE_URL")
        .arg("--data-dir")
        .arg(data_dir)
        .arg("fsck")
        .args(common::database_args(data_dir))
        .timeout(Duration::from_secs(120))
        .output()
        .expect("seed fsck runs")
}

/// `seed fsck` on `data_dir` finds nothing: exit 0 and a summary of no findings.
pub(crate) fn assert_clean(data_dir: &Path) {
    let output = fsck(data_dir);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success() && stdout.contains(", 0 findings"),
        "seed fsck on {}: {output:?}\n{stdout}",
        data_dir.display()
    );
}

/// A predecessor of two exchanges continued into a successor, which answers once more:
/// (predecessor, successor).
async fn turns_with_a_continuation(server: &Server) -> (Uuid, Uuid) {
    let client = server.client();
    let session = common::new_session(&client).await;
    let send = |session_id: Uuid, text: &'static str| {
        let client = client.clone();
        async move {
            let sent: MessageSessionResponse = client
                .post(
                    &format!("/v1/sessions/{session_id}/messages"),
                    &json!({ "text": text, "wait": true }),
                )
                .await
                .expect("sent");
            assert_eq!(sent.status, "succeeded", "{text}");
            sent
        }
    };
    send(session.id, "lighthouses one").await;
    send(session.id, "lighthouses two").await;
    let successor = send(session.id, "continue: Lisbon hotels")
        .await
        .continued_to_session_id
        .expect("continued");
    send(successor, "and a ferry").await;
    (session.id, successor)
}

#[actix_web::test]
async fn fsck_on_a_running_service_after_a_continuation_is_clean() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start(dir.path(), &[]);
    turns_with_a_continuation(&server).await;
    let output = fsck(dir.path());
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{output:?}\n{stdout}");
    assert!(stdout.contains("fsck: 2 sessions checked"), "{stdout}");
    assert!(stdout.contains(", 0 findings"), "{stdout}");
    assert_eq!(
        stdout.contains("SQLite's integrity check"),
        !common::on_postgres(),
        "{stdout}"
    );
    // It only read: the service goes on.
    let client = server.client();
    common::new_session(&client).await;
    assert!(server.terminate().success());
}

/// Runs `sql` on the SQLite database of `data_dir` with the `sqlite3` shell: the test opens
/// the file directly, past the store (whose crate alone links SQLite).
pub(crate) fn plant(data_dir: &Path, sql: &str) {
    let output = std::process::Command::new("sqlite3")
        .arg(data_dir.join("seed.db"))
        .arg(sql)
        .output()
        .expect("the sqlite3 shell runs (planting damage needs it)");
    assert!(output.status.success(), "{sql}: {output:?}");
}

/// A copy of `data_dir`'s database in a new data dir.
pub(crate) fn copy_of(data_dir: &Path) -> tempfile::TempDir {
    let copy = tempfile::tempdir().expect("tempdir");
    for name in ["seed.db", "seed.db-wal", "seed.db-shm"] {
        let from = data_dir.join(name);
        if from.exists() {
            std::fs::copy(&from, copy.path().join(name)).expect("copied");
        }
    }
    copy
}

#[actix_web::test]
async fn fsck_finds_each_kind_of_planted_damage_and_names_its_session() {
    if !common::sqlite_only("planting damage in the database file") {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start(dir.path(), &[]);
    let (predecessor, successor) = turns_with_a_continuation(&server).await;
    assert!(server.terminate().success());
    assert_clean(dir.path());

    let key = |session: Uuid| format!("(SELECT key FROM sessions WHERE id = '{session}')");
    let cases: [(&str, String, Uuid, String); 5] = [
        (
            "a changed byte of an excerpt",
            format!(
                "UPDATE session_events SET content = replace(content, 'lighthouses two', \
                 'lighthouses twO') WHERE session_key = {} AND seq = 1",
                key(successor)
            ),
            successor,
            "is not byte for byte the events it cites".to_owned(),
        ),
        (
            "a deleted store row",
            format!(
                "DELETE FROM session_durable_files WHERE file = 0 AND session_key = {k} AND \
                 json_extract(line, '$.id') = (SELECT max(pi_entry_id) FROM session_events \
                 WHERE session_key = {k})",
                k = key(predecessor)
            ),
            predecessor,
            "which the store lacks".to_owned(),
        ),
        (
            "a missing successor",
            format!("PRAGMA foreign_keys = OFF; DELETE FROM sessions WHERE id = '{successor}'"),
            predecessor,
            format!("names successor {successor}, which does not exist"),
        ),
        (
            "a gap in the seqs",
            format!(
                "UPDATE session_events SET seq = seq + 1 WHERE session_key = {k} AND seq = \
                 (SELECT max(seq) FROM session_events WHERE session_key = {k})",
                k = key(successor)
            ),
            successor,
            "with no gap".to_owned(),
        ),
        (
            "a kept state that is not what the files fold to",
            format!(
                "INSERT OR REPLACE INTO session_durable_kept \
                 (session_key, upto_id, first_entry_id, entries_from_id, kept) VALUES \
                 ({k}, (SELECT max(id) FROM session_durable_files WHERE session_key = {k}), \
                 1, 0, '{{\"first_entry_id\":1,\"system\":null,\"documents\":{{}},\"tasks\":[]}}')",
                k = key(predecessor)
            ),
            predecessor,
            "other documents than its files hold".to_owned(),
        ),
    ];
    for (what, sql, session, expected) in &cases {
        let copy = copy_of(dir.path());
        assert_clean(copy.path());
        plant(copy.path(), sql);
        let output = fsck(copy.path());
        let stdout = String::from_utf8_lossy(&output.stdout);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(1), "{what}: {stdout}\n{stderr}");
        assert!(
            stdout
                .lines()
                .any(|line| line.starts_with(&format!("session {session}: "))
                    && line.contains(expected.as_str())),
            "{what}: no finding names session {session} with {expected:?}:\n{stdout}"
        );
        assert!(stdout.contains("findings"), "{what}: the summary: {stdout}");
        assert!(stderr.contains("fsck found"), "{what}: {stderr}");
    }
}
