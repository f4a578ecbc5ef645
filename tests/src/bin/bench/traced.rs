//! `runtime 100 sessions traced`: the `runtime 100 sessions` workload with every span exported
//! (sampled at 1) over OTLP/HTTP to a local receiver, against the same workload untraced.
//!
//! Each round runs in a fresh process of this binary (`bench TRACED_CHILD MODE`), untraced and
//! traced in alternation, and the best of each counts: the exporter's subscriber is a
//! process's for good, and measuring the two in one process, one after the other, favoured
//! whichever came second (a process's second measurement ran up to 6% faster with nothing
//! changed). The untraced child is the `runtime 100 sessions` row's measurement, with the
//! service's log subscriber installed as `seed serve` has it; the traced child adds the
//! service's exporter (`seed_server::traces`). The receiver, on threads of the traced child
//! ([`receiver`]), answers every export with 200 and counts its bytes, which go to stderr.

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

/// The largest export the receiver takes, its head included (a collector's default is 4 MiB;
/// the exporter's batches are far smaller).
const RECEIVED_BODY_MAX: usize = 64 << 20;

/// What the receiver got.
#[derive(Debug, Default)]
struct Received {
    n_exports: AtomicU64,
    n_bytes: AtomicU64,
}

/// Starts the receiver: a thread that takes connections, and a thread for each connection
/// that reads every request on it whole and answers 200; returns its base URL.
///
/// It stands in for a collector, doing the least any receiver does: the request's head parsed
/// (httparse), its body read to the end by its length, counted and dropped. An actix server
/// here cost 10 to 60 ms of CPU a round (its dispatcher reads a body in small pieces, each a
/// wake-up of the handler's task), more than the exporter itself, on the two cores the
/// runtime being measured has (docs/design/traces.md).
fn receiver(received: Arc<Received>) -> anyhow::Result<String> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    let address = listener.local_addr()?;
    std::thread::Builder::new()
        .name("otlp-receiver".to_owned())
        .spawn(move || {
            for stream in listener.incoming().flatten() {
                let received = Arc::clone(&received);
                let served = std::thread::Builder::new()
                    .name("otlp-receiver".to_owned())
                    .spawn(move || {
                        if let Err(error) = serve(stream, &received) {
                            eprintln!("the OTLP receiver dropped a connection: {error}");
                        }
                    });
                if let Err(error) = served {
                    eprintln!("the OTLP receiver cannot serve a connection: {error}");
                }
            }
        })?;
    Ok(format!("http://{address}"))
}

/// Serves one connection's requests until the exporter closes it.
fn serve(mut stream: std::net::TcpStream, received: &Received) -> std::io::Result<()> {
    use std::io::{Read as _, Write as _};
    let mut buffer = Vec::with_capacity(256 << 10);
    let mut chunk = vec![0_u8; 64 << 10];
    loop {
        let (head_len, body_len) = loop {
            match request_head(&buffer) {
                Ok(Some((head_len, Some(body_len)))) => break (head_len, body_len),
                Ok(Some((_, None))) => {
                    stream.write_all(
                        b"HTTP/1.1 411 Length Required\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
                    )?;
                    return Ok(());
                }
                Ok(None) => {}
                Err(error) => {
                    stream.write_all(
                        b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
                    )?;
                    return Err(std::io::Error::other(error));
                }
            }
            let n = stream.read(&mut chunk)?;
            if n == 0 {
                return Ok(());
            }
            buffer.extend_from_slice(&chunk[..n]);
        };
        let end = head_len + body_len;
        if end > RECEIVED_BODY_MAX {
            stream.write_all(
                b"HTTP/1.1 413 Content Too Large\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
            )?;
            return Ok(());
        }
        while buffer.len() < end {
            let n = stream.read(&mut chunk)?;
            if n == 0 {
                return Err(std::io::ErrorKind::UnexpectedEof.into());
            }
            buffer.extend_from_slice(&chunk[..n]);
        }
        received.n_exports.fetch_add(1, Ordering::Relaxed);
        received
            .n_bytes
            .fetch_add(body_len as u64, Ordering::Relaxed);
        buffer.drain(..end);
        stream.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n")?;
    }
}

/// The length of the request head at the start of `buffer` and its body's length (`None`
/// without a `Content-Length`), once the head is complete.
fn request_head(buffer: &[u8]) -> Result<Option<(usize, Option<usize>)>, httparse::Error> {
    let mut headers = [httparse::EMPTY_HEADER; 32];
    let mut request = httparse::Request::new(&mut headers);
    let httparse::Status::Complete(head_len) = request.parse(buffer)? else {
        return Ok(None);
    };
    let body_len = request
        .headers
        .iter()
        .find(|header| header.name.eq_ignore_ascii_case("content-length"))
        .and_then(|header| std::str::from_utf8(header.value).ok()?.trim().parse().ok());
    Ok(Some((head_len, body_len)))
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
        let n_bytes = received.n_bytes.load(Ordering::Relaxed);
        eprintln!(
            "{name}: {} exports, {} KiB of spans received",
            received.n_exports.load(Ordering::Relaxed),
            n_bytes / 1024
        );
        if n_bytes == 0 {
            bail!("the receiver got no spans: the traced round exported nothing");
        }
    }
    println!("{}", measured.rate());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_receiver_reads_a_request_head_and_its_bodys_length() {
        let head = b"POST /v1/traces HTTP/1.1\r\nhost: 127.0.0.1\r\nContent-Length: 12\r\n\r\n";
        let mut request = head.to_vec();
        request.extend_from_slice(b"twelve bytes");
        assert_eq!(request_head(&request), Ok(Some((head.len(), Some(12)))));
        // Not yet whole: more is read.
        assert_eq!(request_head(&head[..20]), Ok(None));
        // No length: refused (411), not guessed.
        let chunked = b"POST /v1/traces HTTP/1.1\r\ntransfer-encoding: chunked\r\n\r\n";
        assert_eq!(request_head(chunked), Ok(Some((chunked.len(), None))));
        assert!(request_head(b"\x00\x01 not http\r\n\r\n").is_err());
    }
}
