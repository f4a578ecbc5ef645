//! `seed serve --database`: the store on PostgreSQL. A database that cannot be reached, or a URL
//! that does not parse, stops the start naming the cause and never the password; `/healthz`
//! names the engine and the node on either engine; the database going away under a running
//! service is a 503 saying why (healthz and requests alike), and the service recovers, with no
//! restart, when it returns.

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

/// The name of the database `url` names (the last part of its path).
fn database_name(url: &str) -> String {
    let path = url.split('?').next().unwrap_or_default();
    path.rsplit('/').next().unwrap_or_default().to_owned()
}

/// Takes the database `url` names away from its clients, or gives it back: while away, it
/// accepts no connection and those it had are cut, as when the server stops.
fn set_database_away(url: &str, away: bool) {
    let admin = std::env::var(seed_store::TEST_CLUSTER_VAR).expect("the test cluster");
    let name = database_name(url);
    // The connections are cut only once the refusal of new ones has committed: in one batch
    // (one transaction) a connection cut could open anew before it, and outlast the cut.
    let statements = if away {
        vec![
            format!("ALTER DATABASE \"{name}\" ALLOW_CONNECTIONS false"),
            format!(
                "SELECT CAST(pg_terminate_backend(pid) AS TEXT) FROM pg_stat_activity
                 WHERE datname = '{name}'"
            ),
        ]
    } else {
        vec![format!("ALTER DATABASE \"{name}\" ALLOW_CONNECTIONS true")]
    };
    // From a thread of its own: the query blocks on a runtime of its own.
    std::thread::scope(|scope| {
        scope.spawn(|| {
            for sql in &statements {
                crate::migrate::query(&admin, sql);
            }
        });
    });
}

/// Polls `check` until it holds, failing with `what` past [`GONE_WAIT`].
async fn wait_for<F, Fut>(what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + GONE_WAIT;
    while !check().await {
        assert!(Instant::now() < deadline, "{what} within {GONE_WAIT:?}");
        actix_web::rt::time::sleep(Duration::from_millis(20)).await;
    }
}

#[actix_web::test]
async fn the_database_going_away_is_a_clear_503_and_the_service_recovers_when_it_returns() {
    let dir = tempfile::tempdir().expect("tempdir");
    // On PostgreSQL whichever engine the other tests use.
    let own = (!on_postgres()).then(ScratchDatabase::on_test_cluster);
    let server = match &own {
        Some(database) => Server::start(
            dir.path(),
            &["--database", database.url(), "--scripted-delay-ms", "30"],
        ),
        None => Server::start(dir.path(), &["--scripted-delay-ms", "30"]),
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
    let client = server.client();
    let session = crate::common::new_session(&client).await;
    let path = format!("/v1/sessions/{}/messages", session.id);
    // A turn in flight when the database goes: a long answer, streamed slowly.
    let long = (0..60)
        .map(|idx| format!("w{idx}"))
        .collect::<Vec<_>>()
        .join(" ");
    let in_flight: seed_server::api::MessageSessionResponse = client
        .post(&path, &serde_json::json!({ "text": long }))
        .await
        .expect("sent");

    set_database_away(&url, true);
    // `/healthz` says so.
    let deadline = Instant::now() + GONE_WAIT;
    let said = loop {
        let (status, body) = healthz(&server).await;
        if status == 503 {
            break body;
        }
        assert!(Instant::now() < deadline, "healthz still says ok: {body}");
        actix_web::rt::time::sleep(Duration::from_millis(20)).await;
    };
    let mut lines = said.lines();
    let first = lines.next().unwrap_or_default();
    assert!(first.starts_with("database unreachable: "), "{said}");
    assert!(
        first.len() > "database unreachable: ".len(),
        "it says why: {said}"
    );
    assert_eq!(
        lines.collect::<Vec<_>>(),
        ["engine: postgres", &format!("node: {}", server.node_id)]
    );
    // A message is refused with a 503 that says why, and nothing of it is written.
    let refused = client
        .request(
            "POST",
            &path,
            Some(&serde_json::json!({ "text": "while away" })),
        )
        .await
        .expect("an answer");
    assert_eq!(refused.status, 503, "{:?}", refused.value());
    let error = refused.value()["error"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(
        error.starts_with("the database cannot be reached now (") && error.contains("try again"),
        "{error}"
    );

    // Back: the service answers again with no restart, the turn cut off ends (answered, or
    // failed saying why), and a new message is answered.
    set_database_away(&url, false);
    wait_for("healthz to see the database back", || async {
        healthz(&server).await.0 == 200
    })
    .await;
    wait_for("the turn in flight to end", || async {
        let run: seed_server::api::RunInfo = client
            .get(&format!("/v1/runs/{}", in_flight.run_id))
            .await
            .expect("the run");
        run.status == "succeeded"
            || (run.status == "failed"
                && run.result.as_ref().is_some_and(|result| !result.is_null()))
    })
    .await;
    let answered: seed_server::api::MessageSessionResponse = client
        .post(&path, &serde_json::json!({ "text": "after", "wait": true }))
        .await
        .expect("sent after the database came back");
    assert_eq!(answered.status, "succeeded");
    let events: seed_server::api::EventsResponse = client
        .get(&format!("/v1/sessions/{}/events", session.id))
        .await
        .expect("the events");
    let texts: Vec<&str> = events
        .events
        .iter()
        .filter(|event| event.role.as_deref() == Some("user"))
        .filter_map(|event| event.content["text"].as_str())
        .collect();
    assert_eq!(
        texts,
        [long.as_str(), "after"],
        "the refused message is not there"
    );
}
