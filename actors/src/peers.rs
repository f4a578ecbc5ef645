//! A node among peers: on a PostgreSQL database shared by several `seed serve` processes, this
//! process is a node (named by its boot id) whose row it renews every
//! [`RuntimeSettings::node_renew`](crate::env::RuntimeSettings::node_renew), and whose leases
//! hold until [`node_expire`](crate::env::RuntimeSettings::node_expire) past the last renewal.
//! At each renewal it also sweeps for lapsed peers (their leases let go, their runs queued
//! again, as the boot sweep does after a crash) and wakes the runs queue, which claims what the
//! sweep queued and what other nodes queued meanwhile. A node whose own row lapsed (it was
//! paused, or cut off from the database, past its expiry) may have had its sessions taken over:
//! its writes for them are refused (fencing, in the store), it claims nothing more, and it says
//! so through [`Runtime::node_lapsed`](crate::runtime::Runtime::node_lapsed), for the service
//! to stop; restarted, it is a new node.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use actix::prelude::*;
use futures::channel::oneshot;

use crate::env::RunEnv;
use crate::messages::Wake;
use crate::queue::RunQueue;

pub use crate::env::PeerStats;

/// The node's lease time in milliseconds.
fn expire_ms(env: &RunEnv) -> i64 {
    i64::try_from(env.settings.node_expire.as_millis()).unwrap_or(i64::MAX)
}

/// Registers this process as a node; on PostgreSQL only (SQLite has one process).
pub(crate) async fn register(
    store: &seed_store::Store,
    boot_id: &str,
    now_ms: i64,
    expire: std::time::Duration,
) -> Result<(), seed_store::Error> {
    if store.config().database.is_none() {
        return Ok(());
    }
    let ttl_ms = i64::try_from(expire.as_millis()).unwrap_or(i64::MAX);
    let node = store.register_node(boot_id, now_ms, ttl_ms).await?;
    tracing::info!(node = %node.id, epoch = node.epoch, "joined the database as a node");
    Ok(())
}

/// Starts the heartbeat on the current actix system, when this process is a node. It stops
/// once the runs queue has, or once the node's row lapsed (then `lapsed` is told).
pub(crate) fn start(
    env: Arc<RunEnv>,
    queue: Addr<RunQueue>,
    stats: Arc<PeerStats>,
    lapsed: oneshot::Sender<()>,
) {
    if env.store.node().is_none() {
        return;
    }
    actix::spawn(async move {
        while queue.connected() {
            actix::clock::sleep(env.settings.node_renew).await;
            match env.store.renew_node((env.clock)(), expire_ms(&env)).await {
                Ok(Some(_)) => {
                    stats.n_renewals.fetch_add(1, Ordering::Relaxed);
                }
                Ok(None) => {
                    tracing::error!(
                        "this node's lease lapsed: other nodes may have taken its sessions \
                         over, so it stops; started again, it joins as a new node"
                    );
                    let _ = lapsed.send(());
                    return;
                }
                Err(error) => {
                    // The database may be away for a while; the lease lapses if it stays away.
                    tracing::warn!(%error, "the node's lease could not be renewed; trying again");
                    continue;
                }
            }
            sweep(&env, &stats).await;
            queue.do_send(Wake);
        }
    });
}

/// Takes over the runs of lapsed peers; fails those cut off too often, as the boot does.
async fn sweep(env: &Arc<RunEnv>, stats: &PeerStats) {
    let swept = env
        .store
        .sweep_lapsed_nodes(&env.boot_id, (env.clock)(), env.settings.run_restarts_max)
        .await;
    let (released, swept) = match swept {
        Ok(swept) => swept,
        Err(error) => {
            tracing::warn!(%error, "the sweep for lapsed nodes failed; trying again");
            return;
        }
    };
    if !released.is_empty() || !swept.requeued.is_empty() || !swept.given_up.is_empty() {
        tracing::info!(
            n_leases_released = released.len(),
            n_runs_requeued = swept.requeued.len(),
            n_runs_given_up = swept.given_up.len(),
            "took over the sessions of lapsed nodes"
        );
    }
    stats
        .n_leases_swept
        .fetch_add(released.len() as u64, Ordering::Relaxed);
    stats
        .n_takeovers
        .fetch_add(swept.requeued.len() as u64, Ordering::Relaxed);
    for run in swept.given_up {
        crate::run_end::fail_given_up(env, &run).await;
    }
}
