//! The `service` bench: messages through a real `seed serve` (the scripted model) over loopback
//! HTTP from this second process, each client a session of its own sending one message after
//! another with `wait` (the answer has been committed when the response comes back). Reports
//! messages/s and the p50 / p99 latency of a message at each level of concurrency, and the CPU
//! time each thread of both processes spent on it.
//!
//! Two lighter loads bound what any message can cost: [`Load::SignedReads`] (a signed `GET` of
//! the client's session: the signature checked, the session read, the nonce committed) and
//! [`Load::Health`] (`/healthz`, unsigned: HTTP alone, both ends). A message is a signed request
//! and a turn, so it can go no faster than the signed reads.

use std::collections::BTreeMap;
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

/// Starts `seed serve` on a fresh data dir under `scratch`, with the scripted model.
pub fn start(seed: &Path, scratch: &Path) -> anyhow::Result<Service> {
    start_with_model(seed, scratch, &[("SEED_PROVIDER", "scripted")])
}

/// Starts `seed serve` on a fresh data dir under `scratch`, with the model `model_env` (the
/// provider's environment variables) configures.
pub fn start_with_model(
    seed: &Path,
    scratch: &Path,
    model_env: &[(&str, &str)],
) -> anyhow::Result<Service> {
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
        .envs(model_env.iter().copied())
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

/// What each client sends, one request after another.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Load {
    /// A signed message to the client's session, with `wait`: a whole turn.
    Messages,
    /// A signed `GET` of the client's session: everything a signed request costs, no turn.
    SignedReads,
    /// `GET /healthz`, unsigned: the HTTP of both ends alone.
    Health,
}

/// What one level of concurrency measured.
#[derive(Debug, Clone)]
pub struct Measurement {
    /// Requests answered in the timed part (messages, for [`Load::Messages`]).
    pub n_requests: usize,
    pub elapsed: Duration,
    pub p50: Duration,
    pub p99: Duration,
    /// CPU time of each thread (by name) of the service and of this client process during the
    /// timed part.
    pub service_cpu: BTreeMap<String, Duration>,
    pub client_cpu: BTreeMap<String, Duration>,
}

impl Measurement {
    pub fn rate(&self) -> f64 {
        self.n_requests as f64 / self.elapsed.as_secs_f64()
    }

    /// The CPU time of both processes per request, in µs, thread by thread (the client's
    /// threads prefixed `client `), busiest first, then the total.
    pub fn cpu_per_request(&self) -> (Vec<(String, f64)>, f64) {
        let per_request = |cpu: &Duration| cpu.as_secs_f64() * 1e6 / self.n_requests.max(1) as f64;
        let mut threads: Vec<(String, f64)> = self
            .service_cpu
            .iter()
            .map(|(name, cpu)| (name.clone(), per_request(cpu)))
            .chain(
                self.client_cpu
                    .iter()
                    .map(|(name, cpu)| (format!("client {name}"), per_request(cpu))),
            )
            .filter(|(_, us)| *us > 0.0)
            .collect();
        threads.sort_by(|a, b| b.1.total_cmp(&a.1));
        let total = threads.iter().map(|(_, us)| us).sum();
        (threads, total)
    }
}

/// How much CPU time each thread gained from `before` to `after`.
fn cpu_spent(
    before: &BTreeMap<String, Duration>,
    after: BTreeMap<String, Duration>,
) -> BTreeMap<String, Duration> {
    after
        .into_iter()
        .map(|(name, cpu)| {
            let spent = cpu.saturating_sub(before.get(&name).copied().unwrap_or_default());
            (name, spent)
        })
        .collect()
}

/// `n_clients` clients, each in a session of its own, sending `load` for `duration` (after one
/// warm-up request each).
pub fn measure(
    service: &Service,
    n_clients: usize,
    duration: Duration,
    load: Load,
) -> anyhow::Result<Measurement> {
    let key = AccountKey::load(&service.data_dir.join(LOCAL_KEY_FILE))?;
    let url = service.url.clone();
    let service_pid = service.child.id().to_string();
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
            let answer = match load {
                Load::Messages => {
                    let message =
                        serde_json::json!({"text": format!("message {idx}"), "wait": true});
                    let path = format!("/v1/sessions/{session_id}/messages");
                    client.request("POST", &path, Some(&message)).await?
                }
                Load::SignedReads => {
                    let path = format!("/v1/sessions/{session_id}");
                    client.request("GET", &path, None).await?
                }
                Load::Health => client.send_raw("GET", "/healthz", Vec::new(), &[]).await?,
            };
            if answer.status != 200 {
                bail!(
                    "a request ({load:?}) was answered {}: {:?}",
                    answer.status,
                    answer.value()
                );
            }
            anyhow::Ok(started.elapsed())
        };
        // Warm-up: a request in every session.
        let warm_up = sessions.iter().map(|id| send(client.clone(), *id, 0));
        for result in futures::future::join_all(warm_up).await {
            result?;
        }
        let service_cpu_before = crate::runtime_bench::thread_cpu_of(&service_pid)?;
        let client_cpu_before = crate::runtime_bench::thread_cpu()?;
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
        let service_cpu = cpu_spent(
            &service_cpu_before,
            crate::runtime_bench::thread_cpu_of(&service_pid)?,
        );
        let client_cpu = cpu_spent(&client_cpu_before, crate::runtime_bench::thread_cpu()?);
        latencies.sort();
        let percentile = |p: f64| {
            latencies
                .get(((latencies.len() as f64 * p) as usize).min(latencies.len().saturating_sub(1)))
                .copied()
                .unwrap_or_default()
        };
        Ok(Measurement {
            n_requests: latencies.len(),
            elapsed,
            p50: percentile(0.50),
            p99: percentile(0.99),
            service_cpu,
            client_cpu,
        })
    })
}

/// The delay of each text delta from the model's socket to a WebSocket subscriber, in
/// microseconds, sorted: `seed serve` talks to an OpenAI-compatible server in this process
/// that streams `n_deltas` deltas `interval` apart to each of `n_sessions` sessions (one
/// message each, all at once), each delta the time it was written; the subscriber notes when
/// each arrives. A delta is sent to subscribers once the store holds it (`pi.live`, at most
/// the live interval after it arrived, or the committed response), so the live interval
/// bounds this from above.
pub fn delta_latencies(
    seed: &Path,
    scratch: &Path,
    n_sessions: usize,
    n_deltas: usize,
    interval: Duration,
) -> anyhow::Result<Vec<u64>> {
    use crate::sse_server::{SseServer, now_micros};
    use seed_providers::ProviderKind;
    use seed_server::client::next_update;
    use seed_server::ws::Update;
    let seed = seed.to_owned();
    let scratch = scratch.to_owned();
    actix_web::rt::System::new().block_on(async move {
        let reply = crate::providers_bench::stamped_reply(ProviderKind::Openai, n_deltas, interval);
        let model = SseServer::start(vec![reply; n_sessions]).await?;
        let base_url = format!("{}/v1", model.url);
        let service = start_with_model(
            &seed,
            &scratch,
            &[
                ("SEED_PROVIDER", "openai"),
                ("SEED_BASE_URL", base_url.as_str()),
                ("SEED_API_KEY", "bench"),
                ("SEED_MODEL", "bench"),
            ],
        )?;
        let key = AccountKey::load(&service.data_dir.join(LOCAL_KEY_FILE))?;
        let client = Client::new(&service.url, key)?;
        let mut subscription = client.subscribe().await?;
        let mut sessions = Vec::with_capacity(n_sessions);
        for _ in 0..n_sessions {
            let session: seed_server::api::SessionInfo =
                client.post("/v1/sessions", &serde_json::json!({})).await?;
            sessions.push(session.id);
        }
        let sends = sessions.iter().map(|session_id| {
            let client = client.clone();
            let path = format!("/v1/sessions/{session_id}/messages");
            async move {
                let sent: seed_server::api::MessageSessionResponse = client
                    .post(&path, &serde_json::json!({"text": "stream"}))
                    .await?;
                anyhow::Ok(sent.run_id)
            }
        });
        // The subscription is read while the messages go out: a subscriber that stops reading
        // is closed once its queue is full (`--ws-queue-max`).
        let listen = async {
            let mut latencies = Vec::with_capacity(n_sessions * n_deltas);
            let mut finished = std::collections::BTreeSet::new();
            while finished.len() < n_sessions {
                let update =
                    tokio::time::timeout(Duration::from_secs(60), next_update(&mut subscription))
                        .await
                        .context("no update for a minute")?
                        .context("the subscription closed")?;
                match update {
                    Update::TextDelta { text, .. } => {
                        let arrived = now_micros();
                        for stamp in text.split_whitespace() {
                            latencies.push(arrived.saturating_sub(stamp.parse()?));
                        }
                    }
                    Update::RunFinished { run_id, status, .. } => {
                        anyhow::ensure!(status == "succeeded", "a run ended {status}");
                        finished.insert(run_id.0);
                    }
                    _ => {}
                }
            }
            anyhow::Ok((latencies, finished))
        };
        let (sent, heard) = futures::join!(futures::future::join_all(sends), listen);
        let (mut latencies, finished) = heard?;
        let mut runs = std::collections::BTreeSet::new();
        for sent in sent {
            runs.insert(sent?);
        }
        anyhow::ensure!(
            runs == finished,
            "the runs heard finished are not the runs sent"
        );
        anyhow::ensure!(
            latencies.len() == n_sessions * n_deltas,
            "{} deltas heard of {}",
            latencies.len(),
            n_sessions * n_deltas
        );
        latencies.sort_unstable();
        drop(service);
        Ok(latencies)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn cpu_is_what_each_thread_gained_and_a_new_thread_counts_whole() {
        let before = BTreeMap::from([("writer".to_owned(), ms(100)), ("http".to_owned(), ms(50))]);
        let after = BTreeMap::from([
            ("writer".to_owned(), ms(300)),
            ("http".to_owned(), ms(50)),
            ("reader".to_owned(), ms(20)),
        ]);
        let spent = cpu_spent(&before, after);
        assert_eq!(spent["writer"], ms(200));
        assert_eq!(spent["http"], ms(0));
        assert_eq!(spent["reader"], ms(20));
    }

    #[test]
    fn cpu_per_request_names_the_clients_threads_sorts_busiest_first_and_sums() {
        let measurement = Measurement {
            n_requests: 1_000,
            elapsed: Duration::from_secs(1),
            p50: ms(1),
            p99: ms(2),
            service_cpu: BTreeMap::from([
                ("writer".to_owned(), ms(30)),
                ("idle".to_owned(), ms(0)),
                ("http".to_owned(), ms(50)),
            ]),
            client_cpu: BTreeMap::from([("bench".to_owned(), ms(40))]),
        };
        let (threads, total) = measurement.cpu_per_request();
        let names: Vec<&str> = threads.iter().map(|(name, _)| name.as_str()).collect();
        assert_eq!(names, ["http", "client bench", "writer"]);
        assert_eq!(threads[0].1, 50.0);
        assert_eq!(total, 120.0);
        assert_eq!(measurement.rate(), 1_000.0);
    }
}
