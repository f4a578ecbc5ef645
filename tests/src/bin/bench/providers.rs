//! The `providers` suite: decoding both wire protocols from memory, the latency of a delta from
//! socket to event, and the Anthropic prompt cache's uncached bytes per request.

use std::time::Duration;

use seed_tests::bench::Row;
use seed_tests::providers_bench;

use crate::{best_of, selected};

pub(crate) fn suite(filter: &str) -> anyhow::Result<Vec<Row>> {
    use seed_providers::ProviderKind;
    const STREAM_BYTES: usize = 8 << 20;
    let verbose = std::env::var_os("SEED_BENCH_VERBOSE").is_some();
    let mut rows = Vec::new();
    for (kind, name) in [
        (ProviderKind::Openai, "openai"),
        (ProviderKind::Anthropic, "anthropic"),
    ] {
        let row = format!("providers parse {name}");
        if selected(&row, filter) {
            let sse = providers_bench::recorded_stream(kind, STREAM_BYTES);
            let rate = best_of(|| {
                let (elapsed, n_deltas) = providers_bench::decode_once(kind, &sse)?;
                let rate = sse.len() as f64 / 1e6 / elapsed.as_secs_f64();
                if verbose {
                    eprintln!("{row}: {} bytes, {n_deltas} deltas, {elapsed:?}", sse.len());
                }
                Ok(rate)
            })?;
            rows.push(Row::figure(&row, rate, "MB/s"));
        }
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    for (kind, name) in [
        (ProviderKind::Openai, "openai"),
        (ProviderKind::Anthropic, "anthropic"),
    ] {
        let row = format!("providers delta latency {name}");
        if selected(&row, filter) {
            let latencies = runtime.block_on(providers_bench::delta_latencies(
                kind,
                500,
                Duration::from_millis(2),
            ))?;
            let at = |quantile: f64| {
                latencies[((latencies.len() - 1) as f64 * quantile).round() as usize] as f64
            };
            eprintln!(
                "{row}: median {:.0} us, p99 {:.0} us, max {:.0} us over {} deltas",
                at(0.5),
                at(0.99),
                at(1.0),
                latencies.len()
            );
            rows.push(Row::figure(&row, at(0.5), "us"));
        }
    }
    const CACHE_TURNS: usize = 50;
    let row = format!("anthropic cache: uncached bytes per request, {CACHE_TURNS} turns");
    if selected(&row, filter) {
        let figures = providers_bench::cache_figures(CACHE_TURNS)?;
        eprintln!(
            "{row}: over the {} requests of turn {CACHE_TURNS}: prompt {:.0} bytes, {:.0} of \
             them from the previous turn's input on; uncached before {:.0}, after {:.0}",
            figures.n_requests,
            figures.prompt,
            figures.new_turn_and_blocks,
            figures.before,
            figures.after,
        );
        rows.push(Row::figure(
            &format!("{row}, before"),
            figures.before,
            "bytes",
        ));
        rows.push(Row::figure(
            &format!("{row}, after"),
            figures.after,
            "bytes",
        ));
    }
    Ok(rows)
}
