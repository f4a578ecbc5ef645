//! `runtime 100 sessions traced`: the `runtime 100 sessions` workload with every span exported
//! (sampled at 1) over OTLP/HTTP to a local receiver, against the same workload untraced.
//!
//! Each round runs in a fresh process of this binary (`bench TRACED_CHILD MODE`), untraced and
//! traced in alternation, and the best of each counts: the exporter's subscriber is a
//! process's for good, and measuring the two in one process, one after the other, favoured
//! whichever came second (a process's second measurement ran up to 6% faster with nothing
//! changed). The untraced child is the `runtime 100 sessions` row's measurement, with the
//! service's log subscriber installed as `seed serve` has it; the traced child adds the
//! service's exporter (`seed_server::traces`). The receiver, an actix server on a thread of
//! the traced child, answers every export with 200 and counts its bytes, which go to stderr.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use anyhow::{Context as _, bail};
use seed_store::Config;
use seed_tests::bench::Row;
use seed_tests::runtime_bench;

use crate::remove_database;
use crate::runtime::{RUNTIME_ROUND_BUDGET, print_measured};

pub(crate) const ROW: &str = "runtime 100 sessions traced";

/// The untraced measurement the row is a ratio to.
const UNTRACED_ROW: &str = "runtime 100 sessions untraced";

/// The hidden suite a round runs in: `bench TRACED_CHILD traced|untraced` measures one round
/// and prints its rate (steps/s).
pub(crate) const TRACED_CHILD: &str = "runtime-traced-child";

/// Rounds of each of the two, at most: more than the other runtime rows' (a round is a process
/// of its own, and the ratio of two noisy figures needs the best of more).
const TRACED_ROUNDS: usize = 5;

/// How long the exporter gathers spans before it sends them: the service's default.
const BATCH_DELAY: std::time::Duration = seed_server::traces::BATCH_DELAY_DEFAULT;

/// The largest export the receiver takes (a collector's default is 4 MiB; the exporter's
/// batches are far smaller).
const RECEIVED_BODY_MAX: usize = 64 << 20;

/// What the receiver got.
#[derive(Debug, Default)]
struct Received {
    n_exports: AtomicU64,
    n_bytes: AtomicU64,
}

/// Starts the receiver on a thread of its own; returns its base URL.
fn receiver(received: Arc<Received>) -> anyhow::Result<String> {
    let (sender, address) = std::sync::mpsc::channel();
    std::thread::Builder::new()
        .name("otlp-receiver".to_owned())
        .spawn(move || {
            actix_web::rt::System::new().block_on(async move {
                let server = actix_web::HttpServer::new(move || {
                    let received = Arc::clone(&received);
                    actix_web::App::new()
                        .app_data(actix_web::web::PayloadConfig::new(RECEIVED_BODY_MAX))
                        .route(
                            "/v1/traces",
                            actix_web::web::post().to(move |body: actix_web::web::Bytes| {
                                let received = Arc::clone(&received);
                                async move {
                                    received.n_exports.fetch_add(1, Ordering::Relaxed);
                                    received
                                        .n_bytes
                                        .fetch_add(body.len() as u64, Ordering::Relaxed);
                                    actix_web::HttpResponse::Ok().finish()
                                }
                            }),
                        )
                })
                .workers(1)
                .bind("127.0.0.1:0");
                match server {
                    Ok(server) => {
                        let _ = sender.send(Ok(server.addrs()[0]));
                        let _ = server.run().await;
                    }
                    Err(error) => {
                        let _ = sender.send(Err(error));
                    }
                }
            })
        })?;
    let address = address.recv().context("the receiver started")??;
    Ok(format!("http://{address}"))
}

/// The row, and the untraced measurement it is a ratio to: rounds in fresh processes,
/// alternating, within the runtime rows' budget for each of the two.
pub(crate) fn rows(verbose: bool) -> anyhow::Result<Vec<Row>> {
    let started = std::time::Instant::now();
    let (mut untraced, mut traced) = (0.0_f64, 0.0_f64);
    for round in 0..TRACED_ROUNDS {
        if round > 0 && started.elapsed() >= 2 * RUNTIME_ROUND_BUDGET {
            break;
        }
        untraced = untraced.max(in_child("untraced", verbose)?);
        traced = traced.max(in_child("traced", verbose)?);
    }
    Ok(vec![
        Row::figure(UNTRACED_ROW, untraced, "steps/s"),
        Row::ratio(ROW, traced, "steps/s", untraced),
    ])
}

/// One round of `mode` in a fresh process of this binary.
fn in_child(mode: &str, verbose: bool) -> anyhow::Result<f64> {
    let exe = std::env::current_exe().context("finding the bench binary")?;
    let mut command = std::process::Command::new(&exe);
    command.args([TRACED_CHILD, mode]);
    if !verbose {
        command.env_remove("SEED_BENCH_VERBOSE");
    }
    let output = command
        .stderr(std::process::Stdio::inherit())
        .output()
        .with_context(|| format!("running {} {TRACED_CHILD}", exe.display()))?;
    if !output.status.success() {
        bail!("measuring {mode} failed: {}", output.status);
    }
    let rate = String::from_utf8_lossy(&output.stdout);
    rate.trim()
        .parse()
        .with_context(|| format!("reading the rate of {mode}: {rate:?}"))
}

/// The child's side of [`in_child`]: one round, its rate printed on stdout.
pub(crate) fn child(config: &Config, mode: &str, verbose: bool) -> anyhow::Result<()> {
    let traced = match mode {
        "traced" => true,
        "untraced" => false,
        _ => bail!("no traced mode {mode:?}"),
    };
    let received = Arc::new(Received::default());
    let options = seed_server::traces::TraceOptions {
        endpoint: traced
            .then(|| receiver(Arc::clone(&received)))
            .transpose()?,
        sample_ratio: 1.0,
        content: false,
        batch_delay: BATCH_DELAY,
    };
    // The log as `seed serve` has it, with the exporter when traced.
    let exporter = seed_server::traces::init(false, &options)?;
    if let Some(exporter) = &exporter {
        runtime_bench::trace_runs(exporter.traces());
    }
    remove_database(&config.path)?;
    let measured = runtime_bench::steps_rate(config, 100, 40, runtime_bench::TurnShape::AgentLoop)?;
    remove_database(&config.path)?;
    let name = if traced { ROW } else { UNTRACED_ROW };
    if verbose {
        print_measured(name, &measured);
    }
    if let Some(exporter) = exporter {
        exporter.shutdown();
        eprintln!(
            "{name}: {} exports, {} KiB of spans received",
            received.n_exports.load(Ordering::Relaxed),
            received.n_bytes.load(Ordering::Relaxed) / 1024
        );
    }
    println!("{}", measured.rate());
    Ok(())
}
