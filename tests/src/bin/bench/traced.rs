//! `runtime 100 sessions traced`: the `runtime 100 sessions` workload with every span exported
//! (sampled at 1) over OTLP/HTTP to a local receiver, against `runtime 100 sessions` of the same
//! run (measured here when the filter left that row out). The receiver, an actix server on a
//! thread of its own, answers every export with 200 and counts its bytes; the spans it got go to
//! stderr. The exporter is the service's (`seed_server::traces`), installed for the rest of the
//! process, so this row runs last.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use anyhow::Context as _;
use seed_store::Config;
use seed_tests::bench::Row;
use seed_tests::runtime_bench::{self, TurnShape};

use crate::remove_database;
use crate::runtime::{RUNTIME_ROUND_BUDGET, RUNTIME_ROUNDS, best_within, print_measured};

pub(crate) const ROW: &str = "runtime 100 sessions traced";

/// How long the exporter gathers spans before it sends them: the service's default.
const BATCH_DELAY: std::time::Duration = seed_server::traces::BATCH_DELAY_DEFAULT;

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
                    actix_web::App::new().route(
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

/// The row, and `runtime 100 sessions` when `untraced` is not given.
pub(crate) fn rows(
    config: &Config,
    untraced: Option<f64>,
    verbose: bool,
) -> anyhow::Result<Vec<Row>> {
    let measure = |name: &str| {
        best_within(RUNTIME_ROUNDS, RUNTIME_ROUND_BUDGET, || {
            remove_database(&config.path)?;
            let measured = runtime_bench::steps_rate(config, 100, 40, TurnShape::AgentLoop)?;
            if verbose {
                print_measured(name, &measured);
            }
            Ok(measured.rate())
        })
    };
    let mut rows = Vec::new();
    let untraced = match untraced {
        Some(rate) => rate,
        None => {
            let rate = measure("runtime 100 sessions")?;
            rows.push(Row::figure("runtime 100 sessions", rate, "steps/s"));
            rate
        }
    };
    let received = Arc::new(Received::default());
    let endpoint = receiver(Arc::clone(&received))?;
    let exporter = seed_server::traces::init(
        false,
        &seed_server::traces::TraceOptions {
            endpoint: Some(endpoint),
            sample_ratio: 1.0,
            content: false,
            batch_delay: BATCH_DELAY,
        },
    )?
    .context("an exporter for the endpoint")?;
    runtime_bench::trace_runs(exporter.traces());
    let traced = measure(ROW)?;
    exporter.shutdown();
    eprintln!(
        "{ROW}: {} exports, {} KiB of spans received",
        received.n_exports.load(Ordering::Relaxed),
        received.n_bytes.load(Ordering::Relaxed) / 1024
    );
    rows.push(Row::ratio(ROW, traced, "steps/s", untraced));
    Ok(rows)
}
