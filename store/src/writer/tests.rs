//! The writer's tests that need its insides: the order of a group, the thread a write runs
//! on, the lanes.

use std::task::Context;

use super::*;
use crate::params;

/// A job that does nothing; its session id says which one it is.
struct Probe(Scope);

impl Job for Probe {
    fn scope(&self) -> Scope {
        self.0
    }
    fn apply(&mut self, _: &Connection) -> Result<()> {
        Ok(())
    }
    fn finish(self: Box<Self>, _: Result<()>) {}
}

#[test]
fn appends_sort_by_session_within_runs_and_keep_each_sessions_order() {
    // (probe number, append key): None is a job that may depend on what came before.
    let probes = [
        (0, Some(3)),
        (1, Some(1)),
        (2, Some(3)),
        (3, None),
        (4, Some(2)),
        (5, Some(1)),
        (6, Some(1)),
    ];
    let mut group: Vec<Box<dyn Job>> = probes
        .iter()
        .map(|&(number, append_key)| {
            Box::new(Probe(Scope {
                session_id: Some(SessionId::from_u128(number)),
                append_key,
            })) as Box<dyn Job>
        })
        .collect();
    sort_commuting_runs(&mut group);
    let order: Vec<SessionId> = group
        .iter()
        .filter_map(|job| job.scope().session_id)
        .collect();
    let expected: Vec<SessionId> = [1, 0, 2, 3, 5, 6, 4]
        .into_iter()
        .map(SessionId::from_u128)
        .collect();
    assert_eq!(order, expected);
}

/// Which thread ran a write, and the write's row landed.
fn thread_of_a_write(store: &crate::Store) -> impl Future<Output = Result<String>> + use<> {
    let store = store.clone();
    async move {
        let name = store
            .write(None, |connection| {
                connection.execute_batch(
                    "CREATE TABLE IF NOT EXISTS probe (x INTEGER); INSERT INTO probe VALUES (1)",
                )?;
                Ok(std::thread::current().name().unwrap_or("").to_owned())
            })
            .await?;
        let n_rows: i64 = store
            .read(|connection| {
                connection.query_row("SELECT count(*) FROM probe", params![], |row| row.get(0))
            })
            .await?;
        assert!(n_rows >= 1, "the write landed");
        Ok(name)
    }
}

fn open_store(dir: &tempfile::TempDir) -> crate::Store {
    crate::Store::open(Config::new(dir.path().join("store.db"))).expect("opens")
}

#[test]
fn a_lone_caller_off_any_async_runtime_commits_on_its_own_thread() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let store = open_store(&dir);
    let here = std::thread::current().name().unwrap_or("").to_owned();
    let ran_on = futures::executor::block_on(thread_of_a_write(&store)).expect("writes");
    assert_eq!(ran_on, here);
    assert_eq!(store.writer_stats().n_commits.load(Ordering::Relaxed), 1);
}

#[test]
fn a_caller_on_an_async_runtime_hands_its_write_to_the_thread() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let store = open_store(&dir);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("a runtime");
    let ran_on = runtime.block_on(thread_of_a_write(&store)).expect("writes");
    assert_eq!(ran_on, "seed-store-writer");
}

#[test]
fn a_caller_never_overtakes_what_was_sent_to_the_thread_before_it() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let store = open_store(&dir);
    // A hold counts as sent: while it lasts, a write waits in the queue.
    let hold = store.hold_writer().expect("holds");
    let mut write = Box::pin(thread_of_a_write(&store));
    let mut context = Context::from_waker(futures::task::noop_waker_ref());
    for _ in 0..3 {
        assert!(
            write.as_mut().poll(&mut context).is_pending(),
            "the write committed under the hold"
        );
    }
    assert_eq!(store.queued_writes(), 1);
    drop(hold);
    let ran_on = futures::executor::block_on(write).expect("writes");
    assert_eq!(ran_on, "seed-store-writer");
    // With nothing left in flight, the next lone write commits on this thread again.
    let here = std::thread::current().name().unwrap_or("").to_owned();
    let ran_on = futures::executor::block_on(thread_of_a_write(&store)).expect("writes");
    assert_eq!(ran_on, here);
}

#[test]
fn tasks_of_one_executor_asking_together_commit_on_the_thread() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let store = open_store(&dir);
    let mut pool = futures::executor::LocalPool::new();
    let spawner = pool.spawner();
    let firsts = (0..8)
        .map(|_| {
            let store = store.clone();
            futures::task::LocalSpawnExt::spawn_local_with_handle(&spawner, async move {
                thread_of_a_write(&store).await
            })
            .expect("spawns")
        })
        .collect::<Vec<_>>();
    for ran_on in pool.run_until(futures::future::join_all(firsts)) {
        assert_eq!(ran_on.expect("writes"), "seed-store-writer");
    }
}

/// A store on a scratch PostgreSQL database whose writer has two lanes, two sessions it
/// commits on different lanes, and a runtime to drive the store's futures on.
struct TwoLanes {
    // Field order is drop order: the store's connections close before its database goes.
    store: crate::Store,
    one: SessionId,
    other: SessionId,
    runtime: tokio::runtime::Runtime,
    _dir: tempfile::TempDir,
    database: crate::ScratchDatabase,
}

impl TwoLanes {
    fn new() -> TwoLanes {
        let database = crate::ScratchDatabase::on_test_cluster();
        let dir = tempfile::tempdir().expect("a temp dir");
        let store = crate::Store::open(Config {
            database: Some(crate::DatabaseUrl(database.url().to_owned())),
            writer_lanes: 2,
            ..Config::new(dir.path().join("store.db"))
        })
        .expect("opens");
        let one = SessionId::from_u128(1);
        let other = (2..1_000)
            .map(SessionId::from_u128)
            .find(|session_id| lane_index(2, Some(*session_id)) != lane_index(2, Some(one)))
            .expect("a session on the other lane");
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime");
        runtime
            .block_on(store.write(None, |connection| {
                connection.execute_batch("CREATE TABLE probe (x INTEGER)")
            }))
            .expect("makes the probe table");
        TwoLanes {
            store,
            one,
            other,
            runtime,
            _dir: dir,
            database,
        }
    }

    /// Another connection to the database, to hold what the writer's jobs then wait for.
    fn blocker(&self) -> crate::postgres::connection::PgConnection {
        crate::postgres::connection::PgConnection::open(
            self.database.url(),
            crate::postgres::connection::Purpose::Lane,
        )
        .expect("connects")
    }

    /// The rows [`insert_probe`] wrote.
    fn n_probes(&self) -> i64 {
        self.runtime
            .block_on(self.store.read(|connection| {
                connection.query_row("SELECT count(*) FROM probe", params![], |row| row.get(0))
            }))
            .expect("reads")
    }
}

/// A job's write: one row of `probe`.
fn insert_probe(connection: &Connection) -> Result<()> {
    connection
        .execute_batch("CREATE TABLE IF NOT EXISTS probe (x INTEGER); INSERT INTO probe VALUES (1)")
}

#[test]
fn a_sessions_lane_lays_its_jobs_out_evenly_and_the_same_every_time() {
    assert_eq!(lane_index(1, Some(SessionId::from_u128(9))), 0);
    assert_eq!(lane_index(4, None), 0);
    let mut per_lane = [0; 4];
    for number in 0..4_000 {
        let session_id = SessionId::from_u128(number * 7_919);
        let lane = lane_index(4, Some(session_id));
        assert_eq!(lane, lane_index(4, Some(session_id)), "the same lane again");
        per_lane[lane] += 1;
    }
    assert!(
        per_lane.iter().all(|n| (800..1_200).contains(n)),
        "lanes evenly used: {per_lane:?}"
    );
}

#[test]
fn a_session_on_one_lane_commits_while_another_lanes_job_waits() {
    let lanes = TwoLanes::new();
    let blocker = lanes.blocker();
    blocker
        .batch_execute("SELECT pg_advisory_lock(7)")
        .expect("locks");
    // This job waits on the lock the other connection holds, and its lane with it.
    let mut blocked = Box::pin(lanes.store.write(Some(lanes.one), |connection| {
        connection.execute_batch("SELECT pg_advisory_xact_lock(7)")
    }));
    lanes.runtime.block_on(async {
        assert!(
            futures::poll!(blocked.as_mut()).is_pending(),
            "the blocked write is under way"
        );
        // The other lane commits meanwhile: one lane would keep it behind the blocked job.
        let free_write = lanes.store.write(Some(lanes.other), insert_probe);
        tokio::time::timeout(Duration::from_secs(60), free_write)
            .await
            .expect("the other lane's write commits while the first waits")
            .expect("commits");
        assert!(
            futures::poll!(blocked.as_mut()).is_pending(),
            "the blocked write still waits"
        );
    });
    blocker
        .batch_execute("SELECT pg_advisory_unlock(7)")
        .expect("unlocks");
    lanes
        .runtime
        .block_on(blocked)
        .expect("the blocked write commits once free");
}

#[test]
fn a_deadlock_between_two_lanes_is_broken_and_both_writes_commit() {
    let lanes = TwoLanes::new();
    // Each job takes one lock, waits until the other job holds its own, then takes the other's:
    // the first time round only, so that the job PostgreSQL ends goes through when run again.
    let both_hold_one = Arc::new(std::sync::Barrier::new(2));
    let job = |first_lock: i64, second_lock: i64| {
        let both_hold_one = Arc::clone(&both_hold_one);
        let mut first_time = true;
        move |connection: &Connection| {
            connection.execute_batch(&format!("SELECT pg_advisory_xact_lock({first_lock})"))?;
            if std::mem::take(&mut first_time) {
                both_hold_one.wait();
            }
            connection.execute_batch(&format!("SELECT pg_advisory_xact_lock({second_lock})"))?;
            insert_probe(connection)
        }
    };
    let (first, second) = lanes.runtime.block_on(async {
        futures::join!(
            lanes.store.write(Some(lanes.one), job(1, 2)),
            lanes.store.write(Some(lanes.other), job(2, 1))
        )
    });
    first.expect("the first write commits");
    second.expect("the second write commits");
    let stats = lanes.store.writer_stats();
    assert!(stats.n_conflicts_retried.load(Ordering::Relaxed) >= 1);
    assert_eq!(lanes.n_probes(), 2, "each write committed once");
}

#[test]
fn a_hold_stops_every_lane() {
    let lanes = TwoLanes::new();
    lanes.runtime.block_on(async {
        let hold = lanes.store.hold_writer().expect("holds");
        let write = |session_id| lanes.store.write(Some(session_id), insert_probe);
        let mut writes = Box::pin(futures::future::join(write(lanes.one), write(lanes.other)));
        assert!(futures::poll!(writes.as_mut()).is_pending());
        assert_eq!(
            lanes.store.queued_writes(),
            2,
            "both lanes keep their job waiting"
        );
        drop(hold);
        let (first, second) = writes.await;
        first.expect("commits");
        second.expect("commits");
    });
}

#[test]
fn a_registered_node_has_every_lane_end_a_transaction_left_idle_past_its_lease() {
    let lanes = TwoLanes::new();
    lanes
        .runtime
        .block_on(lanes.store.register_node("node-a", 1_000, 30_000))
        .expect("registers");
    let shown: Vec<String> = lanes
        .runtime
        .block_on(lanes.store.write_on_every_connection(|connection| {
            connection.query_row(
                "SHOW idle_in_transaction_session_timeout",
                params![],
                |row| row.get(0),
            )
        }))
        .expect("shows");
    assert_eq!(shown, ["30s", "30s"], "each lane's connection");
}

#[test]
fn a_write_whose_connection_the_server_cut_while_idle_commits_on_a_new_one() {
    let lanes = TwoLanes::new();
    let write_both = || {
        for session_id in [lanes.one, lanes.other] {
            lanes
                .runtime
                .block_on(lanes.store.write(Some(session_id), insert_probe))
                .expect("the write on each lane commits");
        }
    };
    write_both();
    // The server cuts every connection of the database off (a restart, an operator), while
    // the writer's lanes sit idle.
    lanes
        .blocker()
        .batch_execute(
            "SELECT CAST(pg_terminate_backend(pid) AS TEXT) FROM pg_stat_activity
             WHERE datname = current_database() AND pid <> pg_backend_pid()",
        )
        .expect("cuts the connections");
    write_both();
    assert_eq!(lanes.n_probes(), 4);
}
