//! The `service` suite: messages, signed reads and health checks through a real `seed serve`
//! over loopback HTTP, and a text delta's latency from the model's socket to a WebSocket
//! subscriber.

use std::time::Duration;

use anyhow::bail;
use seed_store::{BatchMode, Synchronous};
use seed_tests::bench::Row;
use seed_tests::service_bench::Load;

use crate::{best_of_n, config, floor_rate, scratch_dir, selected};

/// The rows of the `service` suite: concurrent clients and what each sends. Messages at three
/// levels, then the two lighter loads at the highest, which bound a message from below.
const SERVICE_CASES: [(&str, usize, Load, &str); 5] = [
    ("service 1 clients", 1, Load::Messages, "messages/s"),
    ("service 32 clients", 32, Load::Messages, "messages/s"),
    ("service 256 clients", 256, Load::Messages, "messages/s"),
    (
        "service 256 clients signed reads",
        256,
        Load::SignedReads,
        "requests/s",
    ),
    (
        "service 256 clients health",
        256,
        Load::Health,
        "requests/s",
    ),
];
/// How long each row runs unless `SEED_BENCH_SERVICE_SECONDS` says.
const SERVICE_DURATION: Duration = Duration::from_secs(5);

fn service_duration() -> anyhow::Result<Duration> {
    match std::env::var("SEED_BENCH_SERVICE_SECONDS") {
        Ok(seconds) => match seconds.parse::<u64>() {
            Ok(seconds) if seconds > 0 => Ok(Duration::from_secs(seconds)),
            _ => bail!("SEED_BENCH_SERVICE_SECONDS must be a whole number of seconds above 0"),
        },
        Err(_) => Ok(SERVICE_DURATION),
    }
}

/// Messages through a real `seed serve` over loopback HTTP; see the crate docs in main.rs.
pub(crate) fn suite(filter: &str) -> anyhow::Result<Vec<Row>> {
    use seed_tests::service_bench;
    let duration = service_duration()?;
    let verbose = std::env::var_os("SEED_BENCH_VERBOSE").is_some();
    let scratch = scratch_dir()?;
    let normal = config(&scratch, Synchronous::Normal, BatchMode::Optimistic);
    let mut rows = Vec::new();
    let floor_normal = best_of_n(3, || floor_rate(&normal, 20_000))?;
    rows.push(Row::floor("floor normal", floor_normal));
    let seed = service_bench::seed_binary()?;
    for (name, n_clients, load, unit) in SERVICE_CASES {
        if !selected(name, filter) {
            continue;
        }
        let service = service_bench::start(&seed, &scratch)?;
        let measured = service_bench::measure(&service, n_clients, duration, load)?;
        drop(service);
        eprintln!(
            "{name}: {} requests in {:?}, p50 {:?}, p99 {:?}",
            measured.n_requests, measured.elapsed, measured.p50, measured.p99
        );
        if verbose {
            let (threads, total) = measured.cpu_per_request();
            let threads: Vec<String> = threads
                .iter()
                .map(|(thread, us)| format!("{thread} {us:.0}"))
                .collect();
            eprintln!(
                "{name}: CPU µs a request, by thread: {} (in all {total:.0})",
                threads.join(", ")
            );
        }
        rows.push(Row::ratio(name, measured.rate(), unit, floor_normal));
        for (suffix, latency) in [("p50", measured.p50), ("p99", measured.p99)] {
            let ms = latency.as_secs_f64() * 1000.0;
            rows.push(Row::figure(&format!("{name} {suffix}"), ms, "ms"));
        }
    }
    for (name, n_sessions) in SERVICE_DELTA_CASES {
        if !selected(name, filter) {
            continue;
        }
        let latencies = service_bench::delta_latencies(
            &seed,
            &scratch,
            n_sessions,
            SERVICE_DELTAS_PER_RESPONSE,
            SERVICE_DELTA_INTERVAL,
        )?;
        let percentile = |p: f64| {
            let idx = ((latencies.len() as f64 * p) as usize).min(latencies.len() - 1);
            latencies[idx] as f64 / 1000.0
        };
        eprintln!(
            "{name}: {} deltas, min {:.2} ms, p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
            latencies.len(),
            percentile(0.0),
            percentile(0.50),
            percentile(0.99),
            percentile(1.0),
        );
        for (suffix, p) in [("p50", 0.50), ("p99", 0.99)] {
            let ms = percentile(p);
            rows.push(Row::figure(&format!("{name} {suffix}"), ms, "ms"));
        }
    }
    Ok(rows)
}

/// The `service delta latency` rows: a text delta from the model's socket to a WebSocket
/// subscriber, with one session and with 256 streaming at once (p50 and p99, in ms).
const SERVICE_DELTA_CASES: [(&str, usize); 2] = [
    ("service delta latency 1 session", 1),
    ("service delta latency 256 sessions", 256),
];
/// Each response of the delta rows: this many deltas, this far apart (a model streaming 50
/// deltas a second).
const SERVICE_DELTAS_PER_RESPONSE: usize = 50;
const SERVICE_DELTA_INTERVAL: Duration = Duration::from_millis(20);
