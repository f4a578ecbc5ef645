//! The kill test over PostgreSQL with three nodes: three `seed serve` processes share one
//! database, signed clients (one account) send sessions, messages, continuations, delegations,
//! stops and reads to all of them at once, and a node picked at random is killed with SIGKILL
//! at a random moment (50 times in all), then started again as a new node; the nodes that go on
//! take the killed node's runs over once its lease lapses. At the end every acknowledged
//! message is in its session's log exactly once, every run ended and answered (or the reason
//! recorded), no answer was written twice, and the database's quiet invariants hold (the checks
//! of the single node's kill test, `kill9`), `seed fsck` included.
//!
//! `KILL_NODES_SEED=S` replays a failing run's decisions; `KILL_NODES_KILLS=N` changes the
//! number of kills; `SEED_SOAK=1` makes it 500.

use std::cell::RefCell;
use std::rc::Rc;
use std::time::{Duration, Instant};

use crate::common::{Server, open_store, shared_database};
use crate::kill9::{
    CLIENTS_END_WAIT, Checked, LIMITS_OUT_OF_THE_WAY, Ledger, QUIET_WAIT, SCRIPTED_DELAY_MS,
    Traffic, check_answers, check_database, drive, env_number, run_seed, runs_by_state,
};
use seed_events::RunStatus;
use seed_server::client::Client;

const N_NODES: usize = 3;
const CLIENTS_PER_NODE: usize = 2;
const KILLS_DEFAULT: usize = 50;
const SOAK_KILLS: usize = 500;
/// A kill lands this long after the clients start, in milliseconds (uniform).
const KILL_AFTER_MS: (u64, u64) = (50, 800);
/// Leases renewed every 100 ms and lapsed after 1 s, so a killed node's runs are taken over
/// within the test's time.
const NODE_RENEW_MS: &str = "100";
const NODE_EXPIRE_MS: &str = "1000";

fn start_node(data_dir: &std::path::Path) -> Server {
    Server::start(
        data_dir,
        &[
            &[
                "--scripted-delay-ms",
                SCRIPTED_DELAY_MS,
                "--node-renew-ms",
                NODE_RENEW_MS,
                "--node-expire-ms",
                NODE_EXPIRE_MS,
            ][..],
            &LIMITS_OUT_OF_THE_WAY,
        ]
        .concat(),
    )
}

#[actix_web::test]
async fn sigkill_of_any_of_three_nodes_loses_and_repeats_nothing() {
    let seed = run_seed("KILL_NODES_SEED");
    let soak = std::env::var("SEED_SOAK").is_ok_and(|soak| soak == "1");
    let kills = env_number("KILL_NODES_KILLS")
        .map_or(if soak { SOAK_KILLS } else { KILLS_DEFAULT }, |kills| {
            kills as usize
        });
    eprintln!("kill_nodes seed {seed}, {kills} kills (replay with KILL_NODES_SEED={seed})");
    let started = Instant::now();
    let mut rng = fastrand::Rng::with_seed(seed);
    let dirs: Vec<tempfile::TempDir> = (0..N_NODES)
        .map(|_| tempfile::tempdir().expect("tempdir"))
        .collect();
    let dir_paths: Vec<&std::path::Path> = dirs.iter().map(|dir| dir.path()).collect();
    let _database = shared_database(&dir_paths);
    let store = open_store(dirs[0].path());
    let mut nodes: Vec<Option<Server>> = (0..N_NODES).map(|_| None).collect();
    // Every client signs with the first node's local key: one account, reached on any node.
    nodes[0] = Some(start_node(dirs[0].path()));
    let key = nodes[0].as_ref().expect("node 0").local_key();
    let ledger = Rc::new(RefCell::new(Ledger::default()));
    let mut n_kills_mid_turn = 0;

    for kill_idx in 0..kills {
        for (idx, node) in nodes.iter_mut().enumerate() {
            if node.is_none() {
                *node = Some(start_node(dirs[idx].path()));
            }
        }
        let traffic = Traffic {
            delegations: true,
            ..Traffic::default()
        };
        let mut clients = Vec::new();
        for (node_idx, node) in nodes.iter().enumerate() {
            let url = &node.as_ref().expect("every node runs").url;
            for client_idx in 0..CLIENTS_PER_NODE {
                let client = Client::new(url, key.clone()).expect("client");
                clients.push(actix_web::rt::spawn(drive(
                    client,
                    Rc::clone(&ledger),
                    fastrand::Rng::with_seed(rng.u64(..)),
                    format!("k{kill_idx}n{node_idx}c{client_idx}"),
                    traffic.clone(),
                )));
            }
        }
        let after = rng.u64(KILL_AFTER_MS.0..=KILL_AFTER_MS.1);
        actix_web::rt::time::sleep(Duration::from_millis(after)).await;
        let victim = rng.usize(..N_NODES);
        let mut server = nodes[victim].take().expect("the victim runs");
        let running_here = store
            .list_running_runs()
            .await
            .expect("runs")
            .iter()
            .any(|run| run.owner.as_deref() == Some(server.node_id.as_str()));
        server.child.kill().expect("SIGKILL");
        server.child.wait().expect("waits");
        if running_here {
            n_kills_mid_turn += 1;
        }
        traffic.stop.set(true);
        for handle in clients {
            tokio::time::timeout(CLIENTS_END_WAIT, handle)
                .await
                .unwrap_or_else(|_| panic!("seed {seed}: a client hung after kill {kill_idx}"))
                .unwrap_or_else(|error| panic!("seed {seed}: a client failed: {error}"));
        }
    }
    let traffic_elapsed = started.elapsed();

    // Undisturbed, every node up: every run ends, the killed nodes' taken over.
    for (idx, node) in nodes.iter_mut().enumerate() {
        if node.is_none() {
            *node = Some(start_node(dirs[idx].path()));
        }
    }
    let client = Client::new(&nodes[0].as_ref().expect("node 0").url, key.clone()).expect("client");
    let quiet_deadline = Instant::now() + QUIET_WAIT;
    loop {
        let states = runs_by_state(&client).await;
        let open: f64 = ["queued", "running", "parked"]
            .iter()
            .map(|state| states.get(*state).copied().unwrap_or(0.0))
            .sum();
        if open == 0.0 {
            break;
        }
        assert!(
            Instant::now() < quiet_deadline,
            "seed {seed}: not quiet after {QUIET_WAIT:?}: {states:?}"
        );
        actix_web::rt::time::sleep(Duration::from_millis(50)).await;
    }
    let ledger = ledger.take();
    let Checked {
        mut problems,
        n_sessions,
        runs_by_status,
        n_retried,
    } = check_answers(&ledger, &client).await;

    // Through the database, once every node is stopped.
    for node in nodes.iter_mut() {
        let status = node.take().expect("every node runs").terminate();
        assert!(status.success(), "seed {seed}: a drain exited {status:?}");
    }
    let n_checked = check_database(&store, key.account_id, &mut problems).await;
    // `seed fsck` on the database the nodes shared.
    crate::fsck::assert_clean(dirs[0].path());

    eprintln!(
        "kill_nodes seed {seed}: {kills} kills ({n_kills_mid_turn} of a node running a turn) in \
         {:.1} s of traffic, {:.1} s in all; {n_sessions} sessions, {} messages acknowledged \
         (runs {runs_by_status:?}, {n_retried} taken up again after a kill), {} cut off, {} \
         refused, {} stops, {} reads; {n_checked} database checks",
        traffic_elapsed.as_secs_f64(),
        started.elapsed().as_secs_f64(),
        ledger.acked.len(),
        ledger.cut_off.len(),
        ledger.refused.len(),
        ledger.n_stops,
        ledger.n_reads,
    );
    assert!(
        problems.is_empty(),
        "seed {seed} (replay with KILL_NODES_SEED={seed}): {problems:#?}"
    );
    // The test did what it says: traffic flowed, and kills cut turns off mid-way.
    assert!(
        ledger.acked.len() >= kills,
        "seed {seed}: only {} messages acknowledged",
        ledger.acked.len()
    );
    assert!(
        runs_by_status.contains_key(RunStatus::Succeeded.as_str()),
        "seed {seed}: no run succeeded"
    );
    if kills >= 20 {
        assert!(
            n_kills_mid_turn > 0 && n_retried > 0,
            "seed {seed}: no kill landed mid-turn ({n_kills_mid_turn} kills of a node running \
             a turn, {n_retried} runs taken up again)"
        );
    }
}
