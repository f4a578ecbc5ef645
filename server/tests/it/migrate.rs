//! `seed migrate` as an operator runs it: on a PostgreSQL database of the test cluster
//! (SEED_TEST_DATABASE_URL, which scripts/test starts) and on a data dir's SQLite database, it
//! prints the schema without touching the database, applies the versions and says which, and
//! applies nothing the second time; a database it cannot reach or a bad URL exits 1 and says why.

use crate::common;

use std::time::Duration;

use seed_store::{LATEST_VERSION, ScratchDatabase};

/// Runs `sql` (several statements) on the database `url` names; the first column of the last
/// statement's rows, as text.
pub(crate) fn query(url: &str, sql: &str) -> Vec<String> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime");
    runtime.block_on(async {
        let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
            .await
            .unwrap_or_else(|e| panic!("connecting to {url}: {e:?}"));
        let connection = tokio::spawn(connection);
        let messages = client
            .simple_query(sql)
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e:?}"));
        drop(client);
        let _ = connection.await;
        messages
            .into_iter()
            .filter_map(|message| match message {
                tokio_postgres::SimpleQueryMessage::Row(row) => {
                    Some(row.get(0).unwrap_or_default().to_owned())
                }
                _ => None,
            })
            .collect()
    })
}

/// The tables of the database `url` reaches, by name.
fn tables(url: &str) -> Vec<String> {
    query(
        url,
        "SELECT table_name FROM information_schema.tables
         WHERE table_schema = 'public' ORDER BY table_name",
    )
}

/// `seed --data-dir DIR migrate ARGS`: (exit code, stdout, stderr). SEED_DATABASE_URL is
/// cleared, so that only `--database` names a PostgreSQL database.
fn seed_migrate(data_dir: &std::path::Path, args: &[&str]) -> (i32, String, String) {
    let output = assert_cmd::Command::new(common::SEED)
        .env_remove("SEED_DATABASE_URL")
        .arg("--data-dir")
        .arg(data_dir)
        .arg("migrate")
        .args(args)
        .timeout(Duration::from_secs(60))
        .output()
        .expect("seed migrate runs");
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

fn applied_every_version() -> String {
    format!("applied versions 1 to {LATEST_VERSION}; the schema is at version {LATEST_VERSION}\n")
}

fn nothing_to_apply() -> String {
    format!("nothing to apply: the schema is at version {LATEST_VERSION}\n")
}

#[test]
fn seed_migrate_prints_then_applies_the_postgres_schema_and_reports_its_versions() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let database = ScratchDatabase::on_test_cluster();

    let (code, printed, stderr) =
        seed_migrate(dir.path(), &["--database", database.url(), "--print"]);
    assert_eq!(code, 0, "{stderr}");
    assert!(printed.contains("CREATE TABLE sessions ("), "{printed}");
    assert!(printed.contains("seed_schema_versions"), "{printed}");
    assert_eq!(
        tables(database.url()),
        Vec::<String>::new(),
        "--print applied something"
    );

    let (code, stdout, stderr) = seed_migrate(dir.path(), &["--database", database.url()]);
    assert_eq!((code, stdout), (0, applied_every_version()), "{stderr}");
    assert!(tables(database.url()).contains(&"sessions".to_owned()));
    let versions = query(database.url(), "SELECT count(*) FROM seed_schema_versions");
    assert_eq!(versions, [LATEST_VERSION.to_string()]);

    let (code, stdout, stderr) = seed_migrate(dir.path(), &["--database", database.url()]);
    assert_eq!((code, stdout), (0, nothing_to_apply()), "{stderr}");
    assert!(
        !dir.path().join(seed_server::serve::DATABASE_FILE).exists(),
        "migrating PostgreSQL made a SQLite database"
    );

    // What --print prints, applied by hand to a new database, is what `seed migrate` makes.
    let by_hand = ScratchDatabase::on_test_cluster();
    query(by_hand.url(), &printed);
    assert_eq!(tables(by_hand.url()), tables(database.url()));
    let (code, stdout, stderr) = seed_migrate(dir.path(), &["--database", by_hand.url()]);
    assert_eq!((code, stdout), (0, nothing_to_apply()), "{stderr}");
}

#[test]
fn seed_migrate_prints_then_applies_the_sqlite_schema_of_the_data_dir() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let data_dir = dir.path().join("data");
    let database_file = data_dir.join(seed_server::serve::DATABASE_FILE);

    let (code, printed, stderr) = seed_migrate(&data_dir, &["--print"]);
    assert_eq!(code, 0, "{stderr}");
    assert!(printed.contains("CREATE TABLE sessions ("), "{printed}");
    assert!(
        printed.contains(&format!("PRAGMA user_version = {LATEST_VERSION};")),
        "{printed}"
    );
    assert!(!database_file.exists(), "--print made a database");

    let (code, stdout, stderr) = seed_migrate(&data_dir, &[]);
    assert_eq!((code, stdout), (0, applied_every_version()), "{stderr}");
    assert!(database_file.exists());
    let (code, stdout, stderr) = seed_migrate(&data_dir, &[]);
    assert_eq!((code, stdout), (0, nothing_to_apply()), "{stderr}");
}

#[test]
fn seed_migrate_says_why_it_cannot_reach_a_database_and_exits_1() {
    let dir = tempfile::tempdir().expect("a temp dir");
    // A port nothing listens on: one just let go.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("a free port")
        .port();
    let url = format!("postgres://seed:secret@127.0.0.1:{port}/seed");
    let (code, stdout, stderr) = seed_migrate(dir.path(), &["--database", &url]);
    assert_eq!(code, 1, "{stdout}{stderr}");
    assert!(
        stderr.contains("cannot migrate the PostgreSQL database")
            && stderr.contains("error connecting to server"),
        "{stderr}"
    );
    assert!(
        !stderr.contains("secret"),
        "the password was shown: {stderr}"
    );

    let (code, stdout, stderr) = seed_migrate(
        dir.path(),
        &["--database", "postgres://seed@127.0.0.1:notaport/seed"],
    );
    assert_eq!(code, 1, "{stdout}{stderr}");
    assert!(stderr.contains("invalid connection string"), "{stderr}");
}
