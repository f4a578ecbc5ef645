//! The `service` bench: messages through a real `seed serve` (the scripted model) over loopback
//! HTTP from this second process, each client a session of its own sending one message after
//! another with `wait` (the answer has been committed when the response comes back). Reports
//! messages/s and the p50 / p99 latency of a message at each level of concurrency.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use seed_server::client::Client;
use seed_server::keys::{AccountKey, LOCAL_KEY_FILE};

/// A `seed serve` child process; killed when dropped.
#[derive(Debug)]
pub struct Service {
    child: Child,
    pub url: String,
    pub data_dir: PathBuf,
}

impl Drop for Service {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The `seed` binary beside this one (same profile), built first if it is missing.
pub fn seed_binary() -> anyhow::Result<PathBuf> {
    let exe = std::env::current_exe()?;
    let dir = exe.parent().context("the bench binary has a directory")?;
    let seed = dir.join("seed");
    if !seed.exists() {
        let release = dir.file_name().is_some_and(|name| name == "release");
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
        let mut build = Command::new(cargo);
        build.args(["build", "-p", "seed-server", "--bin", "seed"]);
        if release {
            build.arg("--release");
        }
        if !build.status()?.success() {
            bail!("building the seed binary failed");
        }
    }
    Ok(seed)
}

/// Starts `seed serve` on a fresh data dir under `scratch`.
pub fn start(seed: &Path, scratch: &Path) -> anyhow::Result<Service> {
    let data_dir = scratch.join("service");
    let _ = std::fs::remove_dir_all(&data_dir);
    let mut child = Command::new(seed)
        .arg("serve")
        .arg("--data-dir")
        .arg(&data_dir)
        .args(["--listen", "127.0.0.1:0", "--queued-runs-max", "1000000"])
        // As the runtime suite: no client waits for a free turn slot.
        .args(["--interactive-runs-max", "1024"])
        .env("RUST_LOG", "warn")
        .env("SEED_PROVIDER", "scripted")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .context("starting seed serve")?;
    let stdout = child.stdout.take().context("stdout")?;
    let mut lines = BufReader::new(stdout).lines();
    let url = loop {
        let line = lines
            .next()
            .context("seed serve exited before it listened")??;
        if let Some(url) = line.strip_prefix("seed: listening on ") {
            break url.to_owned();
        }
    };
    std::thread::spawn(move || for _ in lines {});
    Ok(Service {
        child,
        url,
        data_dir,
    })
}

/// What one level of concurrency measured.
#[derive(Debug, Clone)]
pub struct Measurement {
    pub n_messages: usize,
    pub elapsed: Duration,
    pub p50: Duration,
    pub p99: Duration,
}

impl Measurement {
    pub fn rate(&self) -> f64 {
        self.n_messages as f64 / self.elapsed.as_secs_f64()
    }
}

/// `n_clients` clients, each in a session of its own, sending messages with `wait` for
/// `duration` (after one warm-up message each).
pub fn measure(
    service: &Service,
    n_clients: usize,
    duration: Duration,
) -> anyhow::Result<Measurement> {
    let key = AccountKey::load(&service.data_dir.join(LOCAL_KEY_FILE))?;
    let url = service.url.clone();
    actix_web::rt::System::new().block_on(async move {
        let client = Client::new(&url, key)?;
        let mut sessions = Vec::with_capacity(n_clients);
        for _ in 0..n_clients {
            let session: seed_server::api::SessionInfo =
                client.post("/v1/sessions", &serde_json::json!({})).await?;
            sessions.push(session.id);
        }
        let send = |client: Client, session_id: uuid::Uuid, idx: usize| async move {
            let started = Instant::now();
            let answer = client
                .request(
                    "POST",
                    &format!("/v1/sessions/{session_id}/messages"),
                    Some(&serde_json::json!({"text": format!("message {idx}"), "wait": true})),
                )
                .await?;
            if answer.status != 200 {
                bail!(
                    "a message was answered {}: {:?}",
                    answer.status,
                    answer.value()
                );
            }
            anyhow::Ok(started.elapsed())
        };
        // Warm-up: a message in every session.
        let warm_up = sessions.iter().map(|id| send(client.clone(), *id, 0));
        for result in futures::future::join_all(warm_up).await {
            result?;
        }
        let started = Instant::now();
        let deadline = started + duration;
        let lanes = sessions.iter().map(|session_id| {
            let client = client.clone();
            let session_id = *session_id;
            async move {
                let mut latencies = Vec::new();
                let mut idx = 1;
                while Instant::now() < deadline {
                    latencies.push(send(client.clone(), session_id, idx).await?);
                    idx += 1;
                }
                anyhow::Ok(latencies)
            }
        });
        let mut latencies = Vec::new();
        for lane in futures::future::join_all(lanes).await {
            latencies.extend(lane?);
        }
        let elapsed = started.elapsed();
        latencies.sort();
        let percentile = |p: f64| {
            latencies
                .get(((latencies.len() as f64 * p) as usize).min(latencies.len().saturating_sub(1)))
                .copied()
                .unwrap_or_default()
        };
        Ok(Measurement {
            n_messages: latencies.len(),
            elapsed,
            p50: percentile(0.50),
            p99: percentile(0.99),
        })
    })
}
