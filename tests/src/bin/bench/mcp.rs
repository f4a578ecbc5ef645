//! The `mcp` suite: a tool of an MCP server (server-everything's `echo`, over stdio) called
//! through the whole runtime (`seed_tests::mcp_bench`), against a verb of the process that
//! answers the same at once.
//!
//! `mcp call p50` and `mcp call p99` are a call's time in ms as the runtime's verb layer sees it,
//! one session calling in turn after turn (figures, no ratio). `mcp calls 64 sessions` is calls/s
//! with 64 sessions calling at once (a figure). `runtime 64 sessions mcp tool` is the runtime's
//! steps/s (a turn is four steps: the message, the call, its result, the answer) with the MCP
//! tool in the loop, against `runtime 64 sessions scripted tool`, the same turns with the
//! process's own verb, measured in the same run: the ratio is what the MCP round trip costs the
//! runtime.

use seed_store::{BatchMode, Synchronous};
use seed_tests::bench::Row;
use seed_tests::mcp_bench::{self, BenchTool};

use crate::{config, remove_database, scratch_dir, selected};

/// Turns of the one-session latency rows.
const LATENCY_TURNS: usize = 300;
/// Sessions and turns each of the many-sessions rows.
const LANES: usize = 64;
const LANE_TURNS: usize = 20;
/// Rounds of the rates (the best counts) and of the latencies (the lowest median counts).
const ROUNDS: usize = 3;

pub(crate) fn suite(filter: &str) -> anyhow::Result<Vec<Row>> {
    let scratch = scratch_dir()?;
    let normal = config(&scratch, Synchronous::Normal, BatchMode::Optimistic);
    let verbose = std::env::var_os("SEED_BENCH_VERBOSE").is_some();
    let mut rows = Vec::new();
    let measure = |lanes: usize, turns: usize, tool: BenchTool| {
        let mut best: Option<mcp_bench::ToolLoopMeasurement> = None;
        for _ in 0..ROUNDS {
            remove_database(&normal.path)?;
            let measured = mcp_bench::tool_loop(&normal, lanes, turns, tool)?;
            if verbose {
                eprintln!(
                    "{tool:?} {lanes} sessions: {} steps in {:?}, call p50 {:.2} ms p99 {:.2} ms",
                    measured.n_steps,
                    measured.elapsed,
                    measured.call_ms(0.5),
                    measured.call_ms(0.99)
                );
            }
            if best
                .as_ref()
                .is_none_or(|best| measured.steps_rate() > best.steps_rate())
            {
                best = Some(measured);
            }
        }
        best.ok_or_else(|| anyhow::anyhow!("no round ran"))
    };
    if selected("mcp call", filter) {
        let one = measure(1, LATENCY_TURNS, BenchTool::Mcp)?;
        rows.push(Row::figure("mcp call p50", one.call_ms(0.5), "ms"));
        rows.push(Row::figure("mcp call p99", one.call_ms(0.99), "ms"));
    }
    let many_name = "mcp calls 64 sessions";
    let with_mcp = "runtime 64 sessions mcp tool";
    let with_scripted = "runtime 64 sessions scripted tool";
    if selected(many_name, filter) || selected(with_mcp, filter) || selected(with_scripted, filter)
    {
        let scripted = measure(LANES, LANE_TURNS, BenchTool::Scripted)?;
        let mcp = measure(LANES, LANE_TURNS, BenchTool::Mcp)?;
        rows.push(Row::figure(many_name, mcp.calls_rate(), "calls/s"));
        // The reference of the MCP row, measured in the same run: its own floor.
        rows.push(Row::ratio(
            with_scripted,
            scripted.steps_rate(),
            "steps/s",
            scripted.steps_rate(),
        ));
        rows.push(Row::ratio(
            with_mcp,
            mcp.steps_rate(),
            "steps/s",
            scripted.steps_rate(),
        ));
    }
    Ok(rows)
}
