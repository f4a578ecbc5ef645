//! A runtime as one node of a shared PostgreSQL database: it leaves a live peer's run alone,
//! and once the peer's lease lapses, its heartbeat's sweep takes the run over and runs it to
//! its end, as after a crash.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use futures::StreamExt as _;
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

/// `store`'s runtime as the node named "node", renewing its lease every `node_renew`.
async fn start_node(
    store: &Store,
    provider: &ScriptedProvider,
    node_renew: Duration,
) -> anyhow::Result<(seed_actors::Runtime, seed_actors::BootReport)> {
    let settings = RuntimeSettings {
        node_renew,
        ..RuntimeSettings::default()
    };
    start_runtime_with(
        store.clone(),
        Arc::new(provider.clone()),
        Vec::new(),
        settings,
        "node",
    )
    .await
}

/// A person's message to session 0 through `peer`, its run `run_id` claimed there at once.
async fn the_peer_takes(
    peer: &Store,
    run_id: RunId,
    text: &str,
) -> anyhow::Result<seed_store::RunRow> {
    let (_, run) = peer
        .send_user_message(
            session(0),
            seed_events::NewEvent::message(
                seed_events::EventRole::User,
                "user",
                serde_json::json!({ "text": text }),
                3,
            ),
            run_id,
            Queue::Interactive,
            10,
            Some(ClaimFor::unshared("peer")),
        )
        .await?;
    Ok(run)
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
    let run = the_peer_takes(&peer, run_id, "what is the answer").await?;
    assert_eq!(run.status, RunStatus::Running);

    let store = open(&database, &dir_node)?;
    let provider = ScriptedProvider::new(vec![ScriptedStep::Respond(text_response("42"))]);
    let (runtime, report) = start_node(&store, &provider, Duration::from_millis(20)).await?;
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

/// A node keeps a session's harness between its runs there while no other node runs the
/// session (one read of the session's newest line, not a fold of its files); once another
/// node has, it opens the session afresh, and its request holds the other node's turn.
#[actix::test]
async fn a_harness_kept_on_a_node_serves_until_another_node_runs_the_session() -> anyhow::Result<()>
{
    let database = ScratchDatabase::on_test_cluster();
    let (dir_a, dir_b) = (tempfile::tempdir()?, tempfile::tempdir()?);
    let (store_a, store_b) = (open(&database, &dir_a)?, open(&database, &dir_b)?);
    store_a.create_account(account(), vec![1], 0).await?;
    store_a
        .create_session(NewSession::new(session(0), account(), 0))
        .await?;
    let answers = |texts: &[&str]| {
        ScriptedProvider::new(
            texts
                .iter()
                .map(|text| ScriptedStep::Respond(text_response(text)))
                .collect(),
        )
    };
    let (provider_a, provider_b) = (answers(&["one", "two", "four"]), answers(&["three"]));
    // Renewals far apart: neither node's heartbeat claims what the other queued.
    let settings = RuntimeSettings {
        node_renew: Duration::from_secs(60),
        node_expire: Duration::from_secs(120),
        ..RuntimeSettings::default()
    };
    let start = async |store: &Store, provider: &ScriptedProvider, boot_id: &str| {
        start_runtime_with(
            store.clone(),
            Arc::new(provider.clone()),
            Vec::new(),
            settings.clone(),
            boot_id,
        )
        .await
        .map(|(runtime, _)| runtime)
    };
    let node_a = start(&store_a, &provider_a, "a").await?;
    let node_b = start(&store_b, &provider_b, "b").await?;
    let send = async |node: &seed_actors::Runtime, id: &str, text: &str| -> anyhow::Result<()> {
        let (_, run_id) = node.send_message(session(0), text).await?;
        let ended = within("the run's end", node.wait_for_run(run_id)).await?;
        assert_eq!(ended.status, RunStatus::Succeeded, "{ended:?}");
        assert_eq!(
            ended.owner.as_deref(),
            Some(id),
            "run on the node it was sent to"
        );
        Ok(())
    };
    let counts = |node: &seed_actors::Runtime| {
        let stats = node.peer_stats();
        (
            stats.n_harnesses_kept.load(Ordering::Relaxed),
            stats.n_harnesses_overtaken.load(Ordering::Relaxed),
        )
    };

    send(&node_a, "a", "first").await?;
    send(&node_a, "a", "second").await?;
    assert_eq!(
        counts(&node_a),
        (1, 0),
        "the second run went on with the first's harness"
    );
    send(&node_b, "b", "third").await?;
    send(&node_a, "a", "fourth").await?;
    assert_eq!(counts(&node_a), (1, 1), "node b ran the session in between");

    let requests = provider_a.requests();
    let last = requests.last().expect("node a's last request");
    assert_eq!(
        crate::common::summary(&crate::common::conversation(last)),
        [
            "user: first",
            "assistant: one",
            "user: second",
            "assistant: two",
            "user: third",
            "assistant: three",
            "user: fourth",
        ]
    );
    // The store holds one history: each turn's entries once, as the log shows them.
    crate::common::assert_log_agrees_with_store(&store_a, session(0)).await?;
    let messages: Vec<String> = crate::common::log(&store_a, session(0))
        .await?
        .iter()
        .filter(|event| event.kind == "message")
        .map(|event| {
            event.content["text"]
                .as_str()
                .unwrap_or_default()
                .to_owned()
        })
        .collect();
    assert_eq!(
        messages,
        [
            "first", "one", "second", "two", "third", "three", "fourth", "four"
        ]
    );
    Ok(())
}

/// On a shared database, a watched run that ends on this node is had as its end recorded it,
/// without a read of the run, and a turn with the harness kept reads its view alone; a run
/// that ends on another node (whose notice this node, without a bus bridge here, never hears)
/// is read once the while has passed.
#[actix::test]
async fn a_watched_run_that_ends_here_is_had_without_a_read() -> anyhow::Result<()> {
    const N_TURNS: usize = 5;
    let database = ScratchDatabase::on_test_cluster();
    let (dir_peer, dir_node) = (tempfile::tempdir()?, tempfile::tempdir()?);
    // One reader: its statements, once prepared, are not prepared again (each a round trip).
    let mut config = Config::new(dir_node.path().join("unused.db"));
    config.database = Some(DatabaseUrl(database.url().to_owned()));
    config.n_readers = 1;
    let store = Store::open(config)?;
    store.create_account(account(), vec![1], 0).await?;
    store
        .create_session(NewSession::new(session(0), account(), 0))
        .await?;
    let provider = ScriptedProvider::new(
        (0..N_TURNS)
            .map(|_| ScriptedStep::Respond(text_response("done")))
            .collect(),
    );
    let (runtime, _) = start_node(&store, &provider, Duration::from_millis(200)).await?;
    let mut bus = runtime.publisher().subscribe().await.expect("the bus runs");
    let mut n_reads = 0;
    let mut n_trips_of_kept_turns = 0;
    for turn in 0..N_TURNS {
        let at_send = store.reader_round_trips();
        let (_, watch) = runtime
            .send_message_watched(session(0), &format!("turn {turn}"))
            .await?;
        // The run's end, heard on the bus: its waiters were answered before it was published.
        within("the run's end", async {
            while let Some(notification) = bus.next().await {
                if matches!(notification,
                    seed_actors::bus::Notification::RunFinished { run_id, .. }
                        if run_id == watch.run_id())
                {
                    break;
                }
            }
        })
        .await;
        let before = store.reader_round_trips();
        let ended = within("the watch", watch.ended()).await?;
        n_reads += store.reader_round_trips() - before;
        // From the third turn on, the harness kept and the one reader's statements prepared.
        if turn >= 2 {
            n_trips_of_kept_turns += store.reader_round_trips() - at_send;
        }
        assert_eq!(ended.status, RunStatus::Succeeded, "{ended:?}");
        assert_eq!(ended.owner.as_deref(), Some("node"));
    }
    // A read each would be five (the scheduler's once-a-second look may add one).
    assert!(n_reads <= 1, "{n_reads} reads for {N_TURNS} watched runs");
    // A turn that goes on with the harness kept reads once, its view: the newest line it
    // leaves is the one it committed, not read again (the scheduler may add one read).
    assert!(
        n_trips_of_kept_turns <= (N_TURNS - 2) as u64 + 1,
        "{n_trips_of_kept_turns} reads for {} turns with the harness kept",
        N_TURNS - 2
    );

    // A run the peer takes and ends: this node's watch reads it after the while.
    let peer = open(&database, &dir_peer)?;
    peer.register_node("peer", 0, MINUTE_MS).await?;
    let run_id = RunId::from_u128(99);
    let watch = runtime.watch_run(run_id);
    the_peer_takes(&peer, run_id, "on the peer").await?;
    assert!(
        peer.finish_run(run_id, RunStatus::Succeeded, None, 20)
            .await?
    );
    let ended = within("the peer's run read", watch.ended()).await?;
    assert_eq!(ended.status, RunStatus::Succeeded, "{ended:?}");
    assert_eq!(ended.owner.as_deref(), Some("peer"));
    assert_eq!(runtime.n_runs_waited_for(), 0, "nothing left registered");
    Ok(())
}
