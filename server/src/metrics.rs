//! `/metrics` in the Prometheus text format: runs by state, the queue's depth, active session
//! actors, store commits and their latency (every step of a turn is committed through the
//! writer), and the recalls of what continuations left out are read when scraped; a message's
//! commit latency and provider latency and errors are recorded as they happen (see `api` and
//! `model`).

use seed_events::RunStatus;

use crate::api::AppState;
use crate::error::ApiError;

/// Installs the global recorder; `None` if one is installed already (a second service in one
/// process, as in tests), and then `/metrics` shows the scraped gauges only.
pub fn install() -> Option<metrics_exporter_prometheus::PrometheusHandle> {
    metrics_exporter_prometheus::PrometheusBuilder::new()
        .install_recorder()
        .ok()
}

/// Reads the gauges and renders everything.
pub async fn render(state: &AppState) -> Result<String, ApiError> {
    let by_status = state.store.runs_by_status().await?;
    let count = |status: RunStatus| {
        by_status
            .iter()
            .find(|(name, _)| name == status.as_str())
            .map_or(0, |(_, n)| *n)
    };
    let mut gauges = Vec::new();
    for status in RunStatus::ALL {
        gauges.push((
            format!("seed_runs{{state=\"{status}\"}}"),
            count(status) as f64,
        ));
    }
    gauges.push((
        "seed_queue_depth".to_owned(),
        count(RunStatus::Queued) as f64,
    ));
    gauges.push((
        "seed_active_session_actors".to_owned(),
        state.runtime.n_active_sessions() as f64,
    ));
    let stats = state.store.writer_stats();
    gauges.push((
        "seed_store_commits_total".to_owned(),
        stats.n_commits.load(std::sync::atomic::Ordering::Relaxed) as f64,
    ));
    gauges.push((
        "seed_store_queued_writes".to_owned(),
        state.store.queued_writes() as f64,
    ));
    // Ranges a read brought back that a continuation's projection left out, recorded by this
    // process (a replayed read not counted again).
    gauges.push((
        "seed_continuation_recalls_total".to_owned(),
        state.store.recalls_recorded() as f64,
    ));
    let mut text = String::new();
    text.push_str("# TYPE seed_runs gauge\n# TYPE seed_queue_depth gauge\n");
    text.push_str(
        "# TYPE seed_active_session_actors gauge\n# TYPE seed_store_commits_total counter\n",
    );
    text.push_str("# TYPE seed_store_queued_writes gauge\n");
    text.push_str("# TYPE seed_continuation_recalls_total counter\n");
    for (name, value) in gauges {
        text.push_str(&format!("{name} {value}\n"));
    }
    // Every step of a turn is committed through the writer: its COMMIT latency.
    let (buckets, sum, count) = stats.commit_latency.snapshot();
    text.push_str("# TYPE seed_store_commit_seconds histogram\n");
    for (bound, cumulative) in buckets {
        let le = if bound.is_infinite() {
            "+Inf".to_owned()
        } else {
            bound.to_string()
        };
        text.push_str(&format!(
            "seed_store_commit_seconds_bucket{{le=\"{le}\"}} {cumulative}\n"
        ));
    }
    text.push_str(&format!("seed_store_commit_seconds_sum {sum}\n"));
    text.push_str(&format!("seed_store_commit_seconds_count {count}\n"));
    if let Some(node) = state.store.node() {
        text.push_str(&node_metrics(&node.id, state));
    }
    if let Some(handle) = &state.metrics {
        text.push_str(&handle.render());
    }
    Ok(text)
}

/// A node's counters on a shared database (PostgreSQL): runs claimed, lease renewals, runs of
/// lapsed peers taken over, writes refused because this node no longer held the lease, writes
/// run again after PostgreSQL broke a deadlock between them and another's (its lanes', or
/// other nodes'), and
/// runs that went on with the session's harness kept here or found another node had run the
/// session since; and the notices it sent the other nodes, and the batches (statements) that
/// carried them.
fn node_metrics(node: &str, state: &AppState) -> String {
    use std::sync::atomic::Ordering::Relaxed;
    let peers = state.runtime.peer_stats();
    let sent = state.notices_sent.get();
    let node = node.replace(['\\', '"'], "_");
    [
        ("seed_node_claims_total", state.store.node_claims()),
        (
            "seed_node_lease_renewals_total",
            peers.n_renewals.load(Relaxed),
        ),
        ("seed_node_takeovers_total", peers.n_takeovers.load(Relaxed)),
        (
            "seed_node_fencing_refusals_total",
            state.store.fencing_refusals(),
        ),
        (
            "seed_node_write_conflicts_retried_total",
            state.store.writer_stats().n_conflicts_retried.load(Relaxed),
        ),
        (
            "seed_node_harnesses_kept_total",
            peers.n_harnesses_kept.load(Relaxed),
        ),
        (
            "seed_node_harnesses_overtaken_total",
            peers.n_harnesses_overtaken.load(Relaxed),
        ),
        (
            "seed_node_notices_sent_total",
            sent.as_ref().map_or(0, |sent| sent.notices()),
        ),
        (
            "seed_node_notice_batches_total",
            sent.as_ref().map_or(0, |sent| sent.statements()),
        ),
    ]
    .into_iter()
    .map(|(name, value)| format!("# TYPE {name} counter\n{name}{{node=\"{node}\"}} {value}\n"))
    .collect()
}
