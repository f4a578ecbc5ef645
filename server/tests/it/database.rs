//! `seed serve --database`: the store on PostgreSQL. A database that cannot be reached, or a URL
//! that does not parse, stops the start naming the cause and never the password; `/healthz`
//! names the engine and the node on either engine, and answers 503 saying why when the
//! database does not answer.

use std::time::{Duration, Instant};

use seed_store::ScratchDatabase;

use crate::common::{SEED, Server, on_postgres};

/// How long a test waits for the service to see its database gone.
const GONE_WAIT: Duration = Duration::from_secs(30);

/// `seed serve --database URL` on a new data dir: (exit code, stdout, stderr). It must end by
/// itself: the hang guard kills it after a minute.
fn serve_on(url: &str) -> (i32, String, String) {
    let dir = tempfile::tempdir().expect("tempdir");
    let output = assert_cmd::Command::new(SEED)
        .arg("serve")
        .arg("--data-dir")
        .arg(dir.path().join("data"))
        .args(["--listen", "127.0.0.1:0", "--database", url])
        .env("SEED_PROVIDER", "scripted")
        .timeout(Duration::from_secs(60))
        .output()
        .expect("seed serve runs");
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[test]
fn a_database_that_cannot_be_reached_stops_the_start_naming_the_cause() {
    // Nothing listens on port 1.
    let (code, stdout, stderr) = serve_on("postgres://seed:hunter2@127.0.0.1:1/seed");
    assert_eq!(code, 1, "{stdout}\n{stderr}");
    assert!(
        stderr.contains("cannot open the PostgreSQL database postgres://seed:***@127.0.0.1:1/seed"),
        "{stderr}"
    );
    assert!(stderr.contains("error connecting to server"), "{stderr}");
    assert!(!stderr.contains("hunter2") && !stdout.contains("hunter2"));
    assert!(!stdout.contains("listening"), "{stdout}");

    let (code, stdout, stderr) = serve_on("postgres://seed:hunter2@127.0.0.1:port/seed");
    assert_eq!(code, 1, "{stdout}\n{stderr}");
    assert!(
        stderr.contains("cannot open the PostgreSQL database")
            && stderr.contains("invalid connection string"),
        "{stderr}"
    );
    assert!(!stderr.contains("hunter2") && !stdout.contains("hunter2"));
    assert!(!stdout.contains("listening"), "{stdout}");
}

/// `/healthz`: (status, body).
async fn healthz(server: &Server) -> (u16, String) {
    let answer = server
        .client()
        .send_raw("GET", "/healthz", Vec::new(), &[])
        .await
        .expect("an answer");
    (
        answer.status,
        String::from_utf8(answer.body.to_vec()).expect("utf-8"),
    )
}

#[actix_web::test]
async fn healthz_names_the_engine_and_the_node() {
    let dir = tempfile::tempdir().expect("tempdir");
    let engine = if on_postgres() { "postgres" } else { "sqlite" };
    let server = Server::start(dir.path(), &[]);
    let first_node = server.node_id.clone();
    assert!(uuid::Uuid::parse_str(&first_node).is_ok(), "{first_node}");
    assert_eq!(
        healthz(&server).await,
        (200, format!("ok\nengine: {engine}\nnode: {first_node}\n"))
    );
    // A restart on the same database is another node.
    let status = server.terminate();
    assert!(status.success(), "{status:?}");
    let server = Server::start(dir.path(), &[]);
    assert_ne!(server.node_id, first_node);
    assert_eq!(
        healthz(&server).await,
        (
            200,
            format!("ok\nengine: {engine}\nnode: {}\n", server.node_id)
        )
    );
}

#[actix_web::test]
async fn healthz_on_postgres_is_503_saying_why_when_the_database_does_not_answer() {
    let dir = tempfile::tempdir().expect("tempdir");
    // On PostgreSQL whichever engine the other tests use.
    let own = (!on_postgres()).then(ScratchDatabase::on_test_cluster);
    let server = match &own {
        Some(database) => Server::start(dir.path(), &["--database", database.url()]),
        None => Server::start(dir.path(), &[]),
    };
    let url = own
        .as_ref()
        .or(server.database.as_deref())
        .expect("a server on PostgreSQL has a database")
        .url()
        .to_owned();
    assert_eq!(
        healthz(&server).await,
        (
            200,
            format!("ok\nengine: postgres\nnode: {}\n", server.node_id)
        )
    );
    // Every connection the service holds to its database is cut (from a thread of its own: the
    // query blocks on a runtime of its own).
    std::thread::scope(|scope| {
        scope.spawn(|| {
            crate::migrate::query(
                &url,
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity
                 WHERE datname = current_database() AND pid <> pg_backend_pid()",
            )
        });
    });
    let deadline = Instant::now() + GONE_WAIT;
    let (status, body) = loop {
        let (status, body) = healthz(&server).await;
        if status != 200 {
            break (status, body);
        }
        assert!(
            Instant::now() < deadline,
            "healthz still says ok {GONE_WAIT:?} after the database went: {body}"
        );
        actix_web::rt::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(status, 503, "{body}");
    let mut lines = body.lines();
    let first = lines.next().unwrap_or_default();
    assert!(first.starts_with("database unreachable: "), "{body}");
    assert!(
        first.len() > "database unreachable: ".len(),
        "it says why: {body}"
    );
    assert_eq!(
        lines.collect::<Vec<_>>(),
        ["engine: postgres", &format!("node: {}", server.node_id)]
    );
}
