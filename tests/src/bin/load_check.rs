//! The load check `scripts/load-check.sh` runs: a real `seed serve` holds 200 idle WebSockets
//! and 50 signed requests whose bodies dribble in, is sent 50 unsigned ones that must be refused
//! at once, and answers a client's messages meanwhile. It fails unless every message is
//! answered, every socket stays open and answers its pings, every slow body is still being
//! waited for, every unsigned request gets 401 before a byte of its body, and the service's
//! resident memory stays under the bound (`--rss-max-mib`, the figure the README states).
//!
//! Usage: `load-check SEED_BINARY [--rss-max-mib N] [--hold-secs N]`.

use std::cell::Cell;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::rc::Rc;
use std::time::{Duration, Instant};

use anyhow::{Context, bail, ensure};
use awc::ws::{Frame, Message};
use futures::{SinkExt, StreamExt};
use seed_server::client::Client;
use seed_server::keys::{AccountKey, LOCAL_KEY_FILE};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const SOCKETS: usize = 200;
const SLOW_BODIES: usize = 50;
const UNSIGNED: usize = 50;
/// How often the service pings each socket during the check.
const PING_INTERVAL_MS: u64 = 500;
/// Bytes each slow body announces; one is sent every [`DRIBBLE_EVERY`].
const SLOW_BODY_BYTES: usize = 4096;
const DRIBBLE_EVERY: Duration = Duration::from_millis(250);
/// How long any single wait may take before the check fails: a hang guard, not a measure.
const HANG_GUARD: Duration = Duration::from_secs(60);

struct Args {
    seed: PathBuf,
    rss_max_mib: u64,
    hold: Duration,
}

fn args() -> anyhow::Result<Args> {
    let mut args = std::env::args().skip(1);
    let seed = PathBuf::from(args.next().context("usage: load-check SEED_BINARY")?);
    let mut rss_max_mib = 128;
    let mut hold_secs = 5;
    while let Some(flag) = args.next() {
        let value = args
            .next()
            .with_context(|| format!("{flag} takes a value"))?;
        match flag.as_str() {
            "--rss-max-mib" => rss_max_mib = value.parse().context("--rss-max-mib")?,
            "--hold-secs" => hold_secs = value.parse().context("--hold-secs")?,
            other => bail!("unknown flag {other}"),
        }
    }
    Ok(Args {
        seed,
        rss_max_mib,
        hold: Duration::from_secs(hold_secs),
    })
}

/// `seed serve` on a free loopback port; killed when dropped.
struct Service {
    child: Child,
    url: String,
}

impl Drop for Service {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start(seed: &Path, data_dir: &Path) -> anyhow::Result<Service> {
    let mut child = Command::new(seed)
        .arg("serve")
        .arg("--data-dir")
        .arg(data_dir)
        .args(["--listen", "127.0.0.1:0"])
        .args(["--ws-ping-interval-ms", &PING_INTERVAL_MS.to_string()])
        .env("RUST_LOG", "warn")
        .env("SEED_PROVIDER", "scripted")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .context("seed serve starts")?;
    let stdout = child.stdout.take().context("stdout")?;
    let mut lines = BufReader::new(stdout).lines();
    let url = loop {
        let line = lines
            .next()
            .context("seed serve ended before it listened")??;
        if let Some(url) = line.strip_prefix("seed: listening on ") {
            break url.to_owned();
        }
    };
    std::thread::spawn(move || for _ in lines {});
    Ok(Service { child, url })
}

/// The process's resident memory in KiB, from `/proc/PID/status`.
fn rss_kib(pid: u32) -> anyhow::Result<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|value| value.trim().trim_end_matches("kB").trim().parse().ok())
        .context("no VmRSS in /proc/PID/status")
}

async fn guarded<T>(what: &str, future: impl std::future::Future<Output = T>) -> anyhow::Result<T> {
    tokio::time::timeout(HANG_GUARD, future)
        .await
        .map_err(|_| anyhow::anyhow!("{what}: nothing within {HANG_GUARD:?}"))
}

/// What the idle sockets saw, shared by their tasks (one thread).
#[derive(Default)]
struct Sockets {
    open: Cell<usize>,
    pongs: Cell<usize>,
    /// Sockets that ended (or failed) before the check let them go.
    ended: Cell<usize>,
    /// Sockets that answered at least two pings.
    ponged_twice: Cell<usize>,
}

/// An idle subscriber: answers every ping, reads whatever else comes, until `stop`.
async fn idle_socket(client: Client, sockets: Rc<Sockets>, stop: Rc<Cell<bool>>) {
    let Ok(mut socket) = client.subscribe().await else {
        sockets.ended.set(sockets.ended.get() + 1);
        return;
    };
    sockets.open.set(sockets.open.get() + 1);
    let mut pongs = 0;
    while !stop.get() {
        let frame = tokio::time::timeout(Duration::from_millis(100), socket.next()).await;
        match frame {
            Err(_) => continue,
            Ok(Some(Ok(Frame::Ping(bytes)))) => {
                if socket.send(Message::Pong(bytes)).await.is_err() {
                    break;
                }
                pongs += 1;
                sockets.pongs.set(sockets.pongs.get() + 1);
                if pongs == 2 {
                    sockets.ponged_twice.set(sockets.ponged_twice.get() + 1);
                }
            }
            Ok(Some(Ok(Frame::Close(_)) | Err(_)) | None) => break,
            Ok(Some(Ok(_))) => {}
        }
    }
    if !stop.get() {
        sockets.ended.set(sockets.ended.get() + 1);
    }
}

async fn connect(url: &str) -> anyhow::Result<TcpStream> {
    let address = url.strip_prefix("http://").context("an http URL")?;
    Ok(TcpStream::connect(address).await?)
}

/// A request head, written by hand.
fn head(authority: &str, path: &str, fields: &[(&str, String)]) -> String {
    let mut head = format!("POST {path} HTTP/1.1\r\nHost: {authority}\r\n");
    for (name, value) in fields {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head + "\r\n"
}

/// A signed request whose body comes a byte at a time, the head sent: the stream, the body and
/// how much of it is still to send.
async fn slow_body(client: &Client) -> anyhow::Result<(TcpStream, Vec<u8>)> {
    let authority = client.base_url().trim_start_matches("http://");
    let title = "s".repeat(SLOW_BODY_BYTES - r#"{"title":""}"#.len());
    let body = json!({ "title": title }).to_string().into_bytes();
    let mut fields = client.signature_fields("POST", "/v1/sessions", &body);
    fields.push(("Content-Type", "application/json".to_owned()));
    fields.push(("Content-Length", body.len().to_string()));
    let mut stream = connect(client.base_url()).await?;
    stream
        .write_all(head(authority, "/v1/sessions", &fields).as_bytes())
        .await?;
    Ok((stream, body))
}

/// An unsigned request announcing a large body, none of it sent: the status it is answered with.
async fn unsigned(url: &str) -> anyhow::Result<u16> {
    let authority = url.trim_start_matches("http://");
    let mut stream = connect(url).await?;
    let fields = [
        ("Content-Type", "application/json".to_owned()),
        ("Content-Length", "1000000".to_owned()),
    ];
    stream
        .write_all(head(authority, "/v1/sessions", &fields).as_bytes())
        .await?;
    let mut answer = Vec::new();
    let mut byte = [0u8; 1];
    while !answer.ends_with(b"\r\n") {
        ensure!(
            stream.read(&mut byte).await? == 1,
            "the connection closed unanswered"
        );
        answer.push(byte[0]);
    }
    let line = String::from_utf8_lossy(&answer);
    line.split(' ')
        .nth(1)
        .and_then(|status| status.parse().ok())
        .with_context(|| format!("no status in {line:?}"))
}

async fn check(args: &Args, service: &Service, key: AccountKey) -> anyhow::Result<()> {
    let client = Client::new(&service.url, key)?;
    let pid = service.child.id();
    let rss_start = rss_kib(pid)?;
    let peak = Rc::new(Cell::new(rss_start));
    let stop = Rc::new(Cell::new(false));
    let sampler = {
        let (peak, stop) = (peak.clone(), stop.clone());
        actix_web::rt::spawn(async move {
            while !stop.get() {
                if let Ok(kib) = rss_kib(pid) {
                    peak.set(peak.get().max(kib));
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
    };

    // 200 idle subscribers.
    let sockets = Rc::new(Sockets::default());
    let socket_tasks: Vec<_> = (0..SOCKETS)
        .map(|_| actix_web::rt::spawn(idle_socket(client.clone(), sockets.clone(), stop.clone())))
        .collect();
    guarded("the sockets opening", async {
        while sockets.open.get() + sockets.ended.get() < SOCKETS {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await?;
    ensure!(
        sockets.ended.get() == 0,
        "{} of {SOCKETS} sockets did not open",
        sockets.ended.get()
    );

    // 50 signed requests whose bodies dribble in, a byte every quarter second.
    let mut slow = Vec::new();
    for _ in 0..SLOW_BODIES {
        slow.push(slow_body(&client).await?);
    }
    let dribbling = Rc::new(Cell::new(0usize));
    let dribblers: Vec<_> = slow
        .into_iter()
        .map(|(mut stream, body)| {
            let (stop, dribbling) = (stop.clone(), dribbling.clone());
            actix_web::rt::spawn(async move {
                let mut sent = 0;
                while !stop.get() && sent < body.len() {
                    if stream.write_all(&body[sent..=sent]).await.is_err() {
                        return Err(anyhow::anyhow!(
                            "the service closed a slow body after {sent} bytes"
                        ));
                    }
                    sent += 1;
                    tokio::time::sleep(DRIBBLE_EVERY).await;
                }
                // Still being waited for: nothing has come back yet.
                let mut byte = [0u8; 1];
                match tokio::time::timeout(Duration::from_millis(1), stream.read(&mut byte)).await {
                    Err(_) => {
                        dribbling.set(dribbling.get() + 1);
                        Ok(())
                    }
                    Ok(read) => Err(anyhow::anyhow!(
                        "a slow body was answered or closed early ({read:?}) after {sent} bytes"
                    )),
                }
            })
        })
        .collect();

    // 50 unsigned requests: each refused before its body.
    let started = Instant::now();
    let mut refused = Vec::new();
    for _ in 0..UNSIGNED {
        let asked = Instant::now();
        let status = guarded("an unsigned request's answer", unsigned(&service.url)).await??;
        ensure!(status == 401, "an unsigned request was answered {status}");
        refused.push(asked.elapsed());
    }
    refused.sort();
    println!(
        "load-check: {UNSIGNED} unsigned requests refused 401 before their bodies; slowest in {:?}",
        refused.last().copied().unwrap_or_default()
    );

    // Meanwhile a client's messages, each answered, until the hold is over.
    let session: seed_server::api::SessionInfo = client.post("/v1/sessions", &json!({})).await?;
    let mut answered = 0;
    while started.elapsed() < args.hold || answered < 10 {
        let text = format!("message {answered} under load");
        let sent: seed_server::api::MessageSessionResponse = guarded(
            "a message's answer",
            client.post(
                &format!("/v1/sessions/{}/messages", session.id),
                &json!({ "text": text, "wait": true }),
            ),
        )
        .await??;
        ensure!(
            sent.status == "succeeded",
            "message {answered} ended {}: {:?}",
            sent.status,
            sent.result
        );
        answered += 1;
    }
    let mut replies = 0;
    let mut from_seq = Some(1);
    while let Some(seq) = from_seq {
        let page: seed_server::api::EventsResponse = client
            .get(&format!(
                "/v1/sessions/{}/events?from_seq={seq}",
                session.id
            ))
            .await?;
        replies += page
            .events
            .iter()
            .filter(|event| event.role.as_deref() == Some("assistant"))
            .filter_map(|event| event.content["text"].as_str())
            .filter(|text| text.starts_with("You said: message ") && text.ends_with(" under load"))
            .count();
        from_seq = page.next_seq;
    }
    ensure!(
        replies == answered,
        "{answered} messages answered but {replies} replies in the log"
    );

    stop.set(true);
    for dribbler in dribblers {
        dribbler.await??;
    }
    for task in socket_tasks {
        task.await?;
    }
    sampler.await?;
    let peak_mib = peak.get() / 1024;
    println!(
        "load-check: {answered} messages answered in {:?} while {} sockets answered {} pings and \
         {} slow bodies dribbled in; resident memory {} MiB at start, peak {peak_mib} MiB \
         (bound {} MiB)",
        started.elapsed(),
        sockets.open.get(),
        sockets.pongs.get(),
        dribbling.get(),
        rss_start / 1024,
        args.rss_max_mib
    );
    ensure!(
        sockets.ended.get() == 0,
        "{} sockets ended while idle",
        sockets.ended.get()
    );
    ensure!(
        sockets.ponged_twice.get() == SOCKETS,
        "only {} of {SOCKETS} sockets were pinged twice and answered",
        sockets.ponged_twice.get()
    );
    ensure!(
        dribbling.get() == SLOW_BODIES,
        "only {} of {SLOW_BODIES} slow bodies were still waited for",
        dribbling.get()
    );
    ensure!(
        peak_mib <= args.rss_max_mib,
        "seed serve's resident memory peaked at {peak_mib} MiB, over the bound of {} MiB",
        args.rss_max_mib
    );
    Ok(())
}

fn main() -> anyhow::Result<()> {
    let args = args()?;
    let dir = tempfile::tempdir()?;
    let data_dir = dir.path().join("data");
    let service = start(&args.seed, &data_dir)?;
    let key = AccountKey::load(&data_dir.join(LOCAL_KEY_FILE))?;
    actix_web::rt::System::new().block_on(check(&args, &service, key))?;
    println!("load-check: passed");
    Ok(())
}
