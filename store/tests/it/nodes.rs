//! Several nodes over one PostgreSQL database: claims take turns per session across nodes, a
//! lapsed node's leases and runs are swept by another, and a lapsed node's writes are fenced.
//! Each store here is a node of its own on a database of the test cluster.

use futures::executor::block_on;
use seed_durable::{Append, DurableFs, FileName};
use seed_events::{Queue, RunId, RunStatus, SessionId};
use seed_store::{
    ClaimFor, Config, DatabaseUrl, Error, NewSession, Refusal, ScratchDatabase, Store,
};

use crate::common::{account, session, user_message};

const MINUTE_MS: i64 = 60_000;

/// A store on `database`, as one node sees it.
fn node_store(database: &ScratchDatabase) -> anyhow::Result<(tempfile::TempDir, Store)> {
    let dir = tempfile::tempdir()?;
    let mut config = Config::new(dir.path().join("unused.db"));
    config.database = Some(DatabaseUrl(database.url().to_owned()));
    Ok((dir, Store::open(config)?))
}

/// The account and `n_sessions` sessions, made through `store`.
fn sessions(store: &Store, n_sessions: u128) -> anyhow::Result<Vec<SessionId>> {
    block_on(store.create_account(account(), vec![1, 2, 3], 0))?;
    let mut ids = Vec::new();
    for idx in 0..n_sessions {
        let id = session(idx);
        block_on(store.create_session(NewSession::new(id, account(), idx as i64)))?;
        ids.push(id);
    }
    Ok(ids)
}

/// Queues a person's message and its run in `session`.
fn send(store: &Store, session: SessionId, run: u128) -> anyhow::Result<()> {
    block_on(store.send_user_message(
        session,
        user_message("hello"),
        RunId::from_u128(run),
        Queue::Interactive,
        10,
        None,
    ))?;
    Ok(())
}

fn claim(store: &Store, node: &str) -> anyhow::Result<Vec<seed_store::RunRow>> {
    Ok(block_on(store.claim_runs_of_queues(
        vec![(Queue::Interactive, 16)],
        ClaimFor::unshared(node),
        20,
    ))?)
}

fn commit_line(store: &Store, session: SessionId, text: &str) -> seed_store::Result<()> {
    block_on(
        store
            .session_files(session)
            .commit(vec![Append::new(FileName::Entries, text)]),
    )
}

#[test]
fn a_lapsed_nodes_session_is_swept_by_another_and_its_writes_are_refused() -> anyhow::Result<()> {
    let database = ScratchDatabase::on_test_cluster();
    let (_dir_a, a) = node_store(&database)?;
    let (_dir_b, b) = node_store(&database)?;
    let node_a = block_on(a.register_node("node-a", 0, MINUTE_MS))?;
    let node_b = block_on(b.register_node("node-b", 0, MINUTE_MS))?;
    assert!(node_b.epoch > node_a.epoch, "epochs grow as nodes join");
    let [session] = sessions(&a, 1)?[..] else {
        unreachable!()
    };
    send(&a, session, 1)?;
    let [run] = &claim(&a, "node-a")?[..] else {
        panic!("node a claims the run");
    };
    assert_eq!(run.owner.as_deref(), Some("node-a"));
    let lease = block_on(a.get_lease(session))?.expect("the session is leased");
    assert_eq!(lease.owner, "node-a");
    commit_line(&a, session, "step 1")?;

    // While node a's row holds, node b's sweep leaves its lease and run alone, and node b
    // claims nothing in its session.
    let (released, swept) = block_on(b.sweep_lapsed_nodes("node-b", 0, 3))?;
    assert!(
        released.is_empty() && swept.requeued.is_empty(),
        "{released:?} {swept:?}"
    );
    send(&b, session, 2)?;
    assert!(
        claim(&b, "node-b")?.is_empty(),
        "one turn per session across nodes"
    );

    // Node a lapses (as a paused process would): its renewal is refused from then on.
    assert!(block_on(a.renew_node(0, -MINUTE_MS))?.is_some());
    assert_eq!(
        block_on(a.renew_node(0, MINUTE_MS))?,
        None,
        "a lapsed row is not renewed"
    );

    // Before any sweep, node a's writes in its session are refused already.
    let refused = commit_line(&a, session, "step 2 from the paused node");
    assert!(
        matches!(
            &refused,
            Err(Error::Refused {
                reason: Refusal::Fenced,
                ..
            })
        ),
        "{refused:?}"
    );
    assert_eq!(a.fencing_refusals(), 1);
    // Nor does it claim anything more.
    assert!(claim(&a, "node-a")?.is_empty());

    // Node b's sweep lets node a's lease go and queues its run again, as after a crash.
    let (released, swept) = block_on(b.sweep_lapsed_nodes("node-b", 30, 3))?;
    assert_eq!(released.len(), 1);
    assert_eq!(released[0].owner, "node-a");
    assert_eq!(swept.requeued.len(), 1);
    assert_eq!(swept.requeued[0].id, run.id);
    let claimed = claim(&b, "node-b")?;
    assert_eq!(claimed.len(), 1, "{claimed:?}");
    assert_eq!(claimed[0].id, run.id, "the oldest run of the session first");
    assert_eq!(claimed[0].attempts, 2);
    commit_line(&b, session, "step 2")?;

    // Node a wakes and writes again: refused, and counted; node b's line is the only one.
    let refused = commit_line(&a, session, "step 2 again from the paused node");
    assert!(
        matches!(
            &refused,
            Err(Error::Refused {
                reason: Refusal::Fenced,
                ..
            })
        ),
        "{refused:?}"
    );
    let lines = block_on(b.session_files(session).read(FileName::Entries))?;
    assert_eq!(lines, vec!["step 1".to_owned(), "step 2".to_owned()]);
    // Every later write of the session from node a is refused as well.
    assert!(send(&a, session, 3).is_err());
    assert_eq!(a.fencing_refusals(), 3);
    Ok(())
}

#[test]
fn claims_from_two_nodes_at_once_start_one_turn_per_session() -> anyhow::Result<()> {
    let database = ScratchDatabase::on_test_cluster();
    let (_dir_a, a) = node_store(&database)?;
    let (_dir_b, b) = node_store(&database)?;
    block_on(a.register_node("node-a", 0, MINUTE_MS))?;
    block_on(b.register_node("node-b", 0, MINUTE_MS))?;
    let sessions = sessions(&a, 4)?;
    let mut next_run = 0;
    for _ in 0..3 {
        for &session in &sessions {
            next_run += 1;
            send(&a, session, next_run)?;
        }
    }
    // Three rounds: both nodes claim at once, then every run claimed ends.
    for round in 0..3 {
        let (from_a, from_b) = std::thread::scope(|scope| {
            let from_a = scope.spawn(|| claim(&a, "node-a"));
            let from_b = scope.spawn(|| claim(&b, "node-b"));
            (from_a.join(), from_b.join())
        });
        let claimed: Vec<_> = [from_a, from_b]
            .into_iter()
            .map(|joined| joined.expect("a claim thread"))
            .collect::<anyhow::Result<Vec<_>>>()?
            .concat();
        let mut claimed_sessions: Vec<SessionId> =
            claimed.iter().map(|run| run.session_id).collect();
        claimed_sessions.sort_unstable();
        let n_claimed = claimed_sessions.len();
        claimed_sessions.dedup();
        assert_eq!(
            claimed_sessions.len(),
            n_claimed,
            "round {round}: {claimed:?}"
        );
        // A claim skipped over a session another node was claiming in leaves its run queued
        // for the next claim, never started twice: now every session has its turn.
        let leftover = claim(&a, "node-a")?;
        assert_eq!(
            n_claimed + leftover.len(),
            sessions.len(),
            "round {round}: {leftover:?}"
        );
        for run in claimed.iter().chain(&leftover) {
            let lease = block_on(a.get_lease(run.session_id))?.expect("leased");
            assert_eq!(lease.owner, run.owner.clone().expect("an owner"));
            let store = if lease.owner == "node-a" { &a } else { &b };
            assert!(block_on(store.finish_run(
                run.id,
                RunStatus::Succeeded,
                None,
                30
            ))?);
            assert!(block_on(store.release_lease(run.session_id, &lease.owner))?);
        }
    }
    Ok(())
}

/// A claim passes over a queued run whose session's row another transaction holds (another
/// node claiming in it), and over one whose own row another holds, and leaves it queued; once
/// both are let go, the next claim starts it.
#[test]
fn a_claim_passes_over_a_session_or_run_another_holds() -> anyhow::Result<()> {
    let database = ScratchDatabase::on_test_cluster();
    let (_dir, store) = node_store(&database)?;
    block_on(store.register_node("node-a", 0, MINUTE_MS))?;
    let session = sessions(&store, 1)?[0];
    send(&store, session, 1)?;
    let run_id = RunId::from_u128(1).to_string();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let other = runtime.block_on(async {
        let (client, connection) =
            tokio_postgres::connect(database.url(), tokio_postgres::NoTls).await?;
        tokio::spawn(connection);
        anyhow::Ok(client)
    })?;
    for held in [
        format!("SELECT 1 FROM sessions WHERE id = '{session}' FOR NO KEY UPDATE"),
        format!("SELECT 1 FROM runs WHERE id = '{run_id}' FOR UPDATE"),
    ] {
        runtime.block_on(other.batch_execute(&format!("BEGIN; {held}")))?;
        assert!(claim(&store, "node-a")?.is_empty(), "claimed past: {held}");
        runtime.block_on(other.batch_execute("ROLLBACK"))?;
    }
    let claimed = claim(&store, "node-a")?;
    assert_eq!(
        claimed.iter().map(|run| run.id).collect::<Vec<_>>(),
        [RunId::from_u128(1)]
    );
    Ok(())
}

#[test]
fn nodes_joining_at_once_take_their_turns_and_none_is_refused() -> anyhow::Result<()> {
    const N_NODES: usize = 8;
    const N_ROUNDS: usize = 3;
    let database = ScratchDatabase::on_test_cluster();
    let mut epochs = Vec::new();
    let mut n_refused = 0;
    for round in 0..N_ROUNDS {
        let stores = (0..N_NODES)
            .map(|_| node_store(&database))
            .collect::<anyhow::Result<Vec<_>>>()?;
        let barrier = std::sync::Barrier::new(N_NODES);
        std::thread::scope(|scope| -> anyhow::Result<()> {
            let joined = stores
                .iter()
                .enumerate()
                .map(|(idx, (_dir, store))| {
                    let barrier = &barrier;
                    scope.spawn(move || {
                        barrier.wait();
                        block_on(store.register_node(&format!("node-{round}-{idx}"), 0, MINUTE_MS))
                    })
                })
                .collect::<Vec<_>>();
            for handle in joined {
                let node = handle.join().expect("joins")?;
                epochs.push(node.epoch);
            }
            Ok(())
        })?;
        n_refused += stores
            .iter()
            .map(|(_dir, store)| {
                store
                    .writer_stats()
                    .n_jobs_refused
                    .load(std::sync::atomic::Ordering::Relaxed)
            })
            .sum::<u64>();
    }
    // Each node has an epoch of its own, and none had its registration refused (a duplicate
    // epoch, tried again): the writer would have logged each refusal as a warning.
    epochs.sort_unstable();
    let expected: Vec<i64> = (1..=(N_NODES * N_ROUNDS) as i64).collect();
    assert_eq!(epochs, expected);
    assert_eq!(n_refused, 0);
    Ok(())
}
