//! A runtime as one node of a shared PostgreSQL database: it leaves a live peer's run alone,
//! and once the peer's lease lapses, its heartbeat's sweep takes the run over and runs it to
//! its end, as after a crash.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use crate::common::{account, session, start_runtime_with, within};
use seed_actors::RuntimeSettings;
use seed_events::{Queue, RunId, RunStatus};
use seed_providers::{ScriptedProvider, ScriptedStep, text_response};
use seed_store::{ClaimFor, Config, DatabaseUrl, NewSession, ScratchDatabase, Store};

const MINUTE_MS: i64 = 60_000;

fn open(database: &ScratchDatabase, dir: &tempfile::TempDir) -> anyhow::Result<Store> {
    let mut config = Config::new(dir.path().join("unused.db"));
    config.database = Some(DatabaseUrl(database.url().to_owned()));
    Ok(Store::open(config)?)
}

#[actix::test]
async fn a_lapsed_peers_run_is_taken_over_by_the_heartbeats_sweep() -> anyhow::Result<()> {
    let database = ScratchDatabase::on_test_cluster();
    let (dir_peer, dir_node) = (tempfile::tempdir()?, tempfile::tempdir()?);
    let peer = open(&database, &dir_peer)?;
    peer.register_node("peer", 0, MINUTE_MS).await?;
    peer.create_account(account(), vec![1], 0).await?;
    peer.create_session(NewSession::new(session(0), account(), 0))
        .await?;
    // The peer takes a person's message and starts its run at once.
    let run_id = RunId::from_u128(7);
    let (_, run) = peer
        .send_user_message(
            session(0),
            seed_events::NewEvent::message(
                seed_events::EventRole::User,
                "user",
                serde_json::json!({ "text": "what is the answer" }),
                3,
            ),
            run_id,
            Queue::Interactive,
            10,
            Some(ClaimFor::unshared("peer")),
        )
        .await?;
    assert_eq!(run.status, RunStatus::Running);

    let store = open(&database, &dir_node)?;
    let provider = ScriptedProvider::new(vec![ScriptedStep::Respond(text_response("42"))]);
    let settings = RuntimeSettings {
        node_renew: Duration::from_millis(20),
        ..RuntimeSettings::default()
    };
    let (runtime, report) = start_runtime_with(
        store.clone(),
        Arc::new(provider.clone()),
        Vec::new(),
        settings,
        "node",
    )
    .await?;
    assert_eq!(report.n_runs_requeued, 0, "a live peer's run is left alone");
    // Heartbeats go by; the peer's run stays its own.
    within("three renewals", async {
        while runtime.peer_stats().n_renewals.load(Ordering::Relaxed) < 3 {
            actix::clock::sleep(Duration::from_millis(5)).await;
        }
    })
    .await;
    let still = store.get_run(run_id).await?.expect("the run");
    assert_eq!(still.status, RunStatus::Running);
    assert_eq!(still.owner.as_deref(), Some("peer"));
    assert_eq!(provider.n_requests(), 0);

    // The peer lapses (a pause past its lease): the next sweep takes the run over.
    assert!(peer.renew_node(0, -MINUTE_MS).await?.is_some());
    let ended = within("the run taken over", runtime.wait_for_run(run_id)).await?;
    assert_eq!(ended.status, RunStatus::Succeeded, "{ended:?}");
    assert_eq!(ended.owner.as_deref(), Some("node"));
    assert_eq!(ended.attempts, 2);
    assert_eq!(runtime.peer_stats().n_takeovers.load(Ordering::Relaxed), 1);
    assert_eq!(provider.n_requests(), 1);
    Ok(())
}
