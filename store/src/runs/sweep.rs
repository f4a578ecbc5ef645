//! The boot sweep over runs: what a previous process left `running` goes back to the queue,
//! or, cut off by too many restarts, is left for the runtime to fail.

use crate::params;
use crate::sql::Connection;
use seed_events::RunStatus;

use super::{RUN_COLUMNS, RUN_COLUMNS_COUNT, RunRow, run_from_row};
use crate::error::collect_rows;
use crate::{Error, Result, Store};

/// What the boot sweep did with the runs a previous process left `running`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Swept {
    /// Queued again, their owner cleared and their attempts kept, oldest first.
    pub requeued: Vec<RunRow>,
    /// Found cut off by more sweeps than the limit: left `running`, so that nothing else of
    /// their sessions starts, for the runtime to fail (a run that kills its process each time
    /// it runs would otherwise crash the service at every boot). Oldest first.
    pub given_up: Vec<RunRow>,
}

/// The runs a sweep takes up: every run left `running` (the boot sweep of the one process on
/// a SQLite database), or only those of nodes whose row lapsed (PostgreSQL, where other nodes
/// run theirs); the sweeping node then takes the runs it gives up, to fail them.
#[derive(Debug, Clone, Copy)]
pub(crate) enum SweepOf<'a> {
    AllRunning,
    LapsedNodes { sweeper: &'a str },
}

/// The boot sweep's step: every run left `running` (of [`SweepOf`]) counts one more restart;
/// those with at most `restarts_max` go back to `queued`, their owner cleared and their
/// attempts kept, and the others stay `running` for the runtime to fail. Returns both as the
/// update leaves them.
pub(crate) fn requeue_running(
    connection: &Connection,
    now_ms: i64,
    restarts_max: i64,
    of: SweepOf<'_>,
) -> Result<Swept> {
    // A run is a lapsed node's when no live node owns it.
    const OF_LAPSED_NODES: &str = " AND (owner IS NULL
             OR owner NOT IN (SELECT id FROM nodes WHERE ended_at IS NULL))";
    let (which, sweeper) = match of {
        SweepOf::AllRunning => ("", None),
        SweepOf::LapsedNodes { sweeper } => (OF_LAPSED_NODES, Some(sweeper)),
    };
    let mut listed = connection.prepare_cached(&format!(
        "SELECT {RUN_COLUMNS}, restarts FROM runs WHERE status = 'running'{which} ORDER BY rowid"
    ))?;
    let running = collect_rows(listed.query_map(params![], |row| {
        let restarts: i64 = row.get(RUN_COLUMNS_COUNT)?;
        Ok(run_from_row(row)?.map(|run| (run, restarts + 1)))
    })?)?;
    let n_updated = connection
        .prepare_cached(&format!(
            "UPDATE runs SET restarts = restarts + 1, updated_at = ?1,
                 status = CASE WHEN restarts < ?2 THEN 'queued' ELSE status END,
                 owner = CASE WHEN restarts < ?2 THEN NULL ELSE COALESCE(?3, owner) END
             WHERE status = 'running'{which}"
        ))?
        .execute(params![now_ms, restarts_max, sweeper])?;
    if n_updated != running.len() {
        return Err(Error::corrupt(
            "runs",
            format_args!("{} runs listed running, {n_updated} counted", running.len()),
        ));
    }
    // Each row as the update left it, without reading it back.
    let mut swept = Swept::default();
    for (mut run, restarts) in running {
        run.updated_at_ms = now_ms;
        if restarts <= restarts_max {
            run.status = RunStatus::Queued;
            run.owner = None;
            swept.requeued.push(run);
        } else {
            if let Some(sweeper) = sweeper {
                run.owner = Some(sweeper.to_owned());
            }
            swept.given_up.push(run);
        }
    }
    Ok(swept)
}

impl Store {
    /// The boot sweep's step: every run left `running` counts a restart and goes back to
    /// `queued`, owner cleared and attempts kept, unless it has now been found cut off more
    /// than `restarts_max` times: then it stays `running` for the caller to fail.
    pub async fn requeue_running_runs(&self, now_ms: i64, restarts_max: i64) -> Result<Swept> {
        self.write(None, move |connection| {
            requeue_running(connection, now_ms, restarts_max, SweepOf::AllRunning)
        })
        .await
    }

    /// The sweep for lapsed peers (PostgreSQL, where several nodes share the database), at
    /// boot and then every few seconds: in one transaction, the nodes whose rows lapsed are
    /// ended, their leases let go, and their runs queued again as the boot sweep queues a
    /// crashed process's (the runs given up are `sweeper`'s to fail). Returns the leases let
    /// go and the runs.
    pub async fn sweep_lapsed_nodes(
        &self,
        sweeper: &str,
        now_ms: i64,
        restarts_max: i64,
    ) -> Result<(Vec<crate::LeaseRow>, Swept)> {
        let sweeper = sweeper.to_owned();
        self.write(None, move |connection| {
            crate::nodes::end_lapsed_nodes(connection, now_ms)?;
            let released = crate::leases::release_leases_of_lapsed_nodes(connection, &sweeper)?;
            let swept = requeue_running(
                connection,
                now_ms,
                restarts_max,
                SweepOf::LapsedNodes { sweeper: &sweeper },
            )?;
            Ok((released, swept))
        })
        .await
    }
}
