//! The kill -9 test of the service: a real `seed serve` process takes traffic from several
//! signed clients at once (sessions created, messages sent with and without `wait`, titles,
//! continuations, stops, reads) and is killed with SIGKILL at random moments — now and then
//! while it is still starting — then started again on the same data dir, 50 times. At the end
//! the service runs until quiet, and every message it acknowledged must be in its session's log
//! exactly once, its run ended and answered (or the reason recorded); a message whose request
//! was cut off is in the log at most once; a refused one not at all. Then, through the
//! database, the quiet invariants of the simulation (`seed_sim::invariants`) and SQLite's
//! integrity check; then `seed fsck` on the data dir.
//!
//! `KILL9_SEED=S` replays the traffic decisions and kill moments of a failing run (the seed is
//! printed on stderr); `KILL9_KILLS=N` changes the number of kills; `SEED_SOAK=1` makes it
//! 1,000.

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, HashMap};
use std::process::{Command, Stdio};
use std::rc::Rc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::common::{SEED, Server};
use seed_server::api::{
    EventInfo, EventsResponse, ListSessionsResponse, MessageSessionResponse, RunInfo, SessionInfo,
};
use seed_server::client::Client;
use serde_json::json;
use uuid::Uuid;

/// Kills in a run unless `KILL9_KILLS` says otherwise.
const KILLS_DEFAULT: usize = 50;
/// Kills in a soak (`SEED_SOAK=1`).
const SOAK_KILLS: usize = 1_000;
/// Clients sending at once.
const N_CLIENTS: usize = 4;
/// A kill lands this long after the service listens, in milliseconds (uniform).
const KILL_AFTER_MS: (u64, u64) = (30, 1_200);
/// The chance that a kill lands while the service is still starting (before it listens).
const EARLY_KILL_CHANCE: f64 = 0.15;
/// How long an early kill waits after the spawn, in milliseconds (uniform; a start takes
/// some 10 to 50 ms).
const EARLY_KILL_AFTER_MS: (u64, u64) = (0, 40);
/// Delay between the scripted model's deltas, so that kills land mid-answer.
pub(crate) const SCRIPTED_DELAY_MS: &str = "10";
/// Restarts that may cut off one turn. Kills this close together can cut the same turn off
/// many times; this test is about what a kill loses or repeats, not about a turn that brings
/// the service down each time it runs (`runtime_recovery` tests that limit), so it is out of
/// the way here.
pub(crate) const RUN_RESTARTS_MAX: &str = "1000";
/// Sessions the one account may have. The clients create about ten sessions a kill and
/// delete none, so a soak's thousand kills pass the default quota (10,000) and its creations
/// would be refused with 429; the quota has tests of its own, so it is out of the way here.
pub(crate) const ACCOUNT_SESSIONS_MAX: &str = "1000000";
/// The limits every service a kill test starts runs with, killed or undisturbed.
pub(crate) const LIMITS_OUT_OF_THE_WAY: [&str; 4] = [
    "--run-restarts-max",
    RUN_RESTARTS_MAX,
    "--account-sessions-max",
    ACCOUNT_SESSIONS_MAX,
];
/// The longest the service may take to answer everything once it runs undisturbed.
pub(crate) const QUIET_WAIT: Duration = Duration::from_secs(120);
/// The longest the clients may take to notice that the service was killed.
pub(crate) const CLIENTS_END_WAIT: Duration = Duration::from_secs(30);

pub(crate) fn env_number(name: &str) -> Option<u64> {
    std::env::var(name).ok().map(|text| {
        text.trim()
            .parse()
            .unwrap_or_else(|_| panic!("{name} must be an unsigned integer, not {text:?}"))
    })
}

pub(crate) fn run_seed(var: &str) -> u64 {
    env_number(var).unwrap_or_else(|| {
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .expect("clock after 1970")
            .as_nanos();
        (nanos as u64) ^ ((nanos >> 64) as u64)
    })
}

/// A message the test sent, and what the service said.
#[derive(Debug, Clone)]
pub(crate) struct Acked {
    session_id: Uuid,
    text: String,
    event_id: i64,
    seq: i64,
    run_id: Uuid,
}

/// Everything the clients did, across all kills.
#[derive(Debug, Default)]
pub(crate) struct Ledger {
    /// Sessions whose creation was acknowledged.
    pub(crate) sessions: Vec<Uuid>,
    /// Messages answered 2xx with a run id.
    pub(crate) acked: Vec<Acked>,
    /// Messages whose request got no answer (the kill cut it off): in the log at most once.
    pub(crate) cut_off: Vec<String>,
    /// Messages refused with a 4xx: in the log never.
    pub(crate) refused: Vec<(String, u16)>,
    /// Any 5xx answer: the service must not have one.
    pub(crate) server_errors: Vec<String>,
    pub(crate) n_stops: usize,
    pub(crate) n_reads: usize,
}

/// What one client sends besides the kill test's mix: delegations too (a message whose turn
/// delegates a task to a child session), and when to stop.
#[derive(Debug, Clone, Default)]
pub(crate) struct Traffic {
    pub(crate) delegations: bool,
    /// Set to end the client's traffic (its service was not killed).
    pub(crate) stop: Rc<Cell<bool>>,
}

/// One client's traffic until a request fails (the service was killed) or it is told to stop.
pub(crate) async fn drive(
    client: Client,
    ledger: Rc<RefCell<Ledger>>,
    mut rng: fastrand::Rng,
    tag: String,
    traffic: Traffic,
) {
    for n_request in 0.. {
        if traffic.stop.get() {
            return;
        }
        let sessions = ledger.borrow().sessions.clone();
        let roll = rng.f64();
        if sessions.len() < 2 || roll < 0.08 {
            let Ok(answer) = client
                .request("POST", "/v1/sessions", Some(&json!({})))
                .await
            else {
                return;
            };
            match answer.status {
                200..=299 => {
                    let session: SessionInfo = answer.json().expect("a session");
                    ledger.borrow_mut().sessions.push(session.id);
                }
                500.. => ledger.borrow_mut().server_errors.push(format!(
                    "create session: {} {:?}",
                    answer.status,
                    answer.value()
                )),
                _ => panic!("creating a session: {} {:?}", answer.status, answer.value()),
            }
        } else if roll < 0.80 {
            let mut session_id = sessions[rng.usize(..sessions.len())];
            let prefix = match rng.u32(..100) {
                0..8 => "continue: ",
                8..16 => "title: ",
                _ => "",
            };
            let mut text = format!("{prefix}{tag} message {n_request}");
            if traffic.delegations && prefix.is_empty() && rng.u32(..100) < 10 {
                // In a session of its own, which no other message shares: the scripted model
                // answers a session's newest message, so a message sent while the delegating
                // turn waits for its child would be answered twice, by design of the script.
                let Ok(answer) = client
                    .request("POST", "/v1/sessions", Some(&json!({})))
                    .await
                else {
                    return;
                };
                if !(200..300).contains(&answer.status) {
                    ledger.borrow_mut().server_errors.push(format!(
                        "create a session to delegate from: {} {:?}",
                        answer.status,
                        answer.value()
                    ));
                    return;
                }
                let session: SessionInfo = answer.json().expect("a session");
                session_id = session.id;
                text.push_str(&format!(
                    "\ncall: delegate {{\"task\": \"{tag} task {n_request}\"}}"
                ));
            }
            let wait = rng.bool();
            let path = format!("/v1/sessions/{session_id}/messages");
            let body = json!({ "text": text, "wait": wait });
            let Ok(answer) = client.request("POST", &path, Some(&body)).await else {
                ledger.borrow_mut().cut_off.push(text);
                return;
            };
            match answer.status {
                200..=299 => {
                    let sent: MessageSessionResponse = answer.json().expect("a message answer");
                    ledger.borrow_mut().acked.push(Acked {
                        session_id,
                        text,
                        event_id: sent.event_id,
                        seq: sent.seq,
                        run_id: sent.run_id,
                    });
                }
                500.. => {
                    let mut ledger = ledger.borrow_mut();
                    ledger.server_errors.push(format!(
                        "message {text:?}: {} {:?}",
                        answer.status,
                        answer.value()
                    ));
                    // Whether it was written is unknown: at most once, like a cut-off one.
                    ledger.cut_off.push(text);
                }
                status => ledger.borrow_mut().refused.push((text, status)),
            }
        } else if roll < 0.90 {
            let session_id = sessions[rng.usize(..sessions.len())];
            let path = format!("/v1/sessions/{session_id}/stop");
            let Ok(answer) = client.request("POST", &path, Some(&json!({}))).await else {
                return;
            };
            assert_eq!(answer.status, 200, "stop: {:?}", answer.value());
            ledger.borrow_mut().n_stops += 1;
        } else {
            let session_id = sessions[rng.usize(..sessions.len())];
            let path = format!("/v1/sessions/{session_id}/events");
            let Ok(answer) = client.request("GET", &path, None).await else {
                return;
            };
            assert_eq!(answer.status, 200, "events: {:?}", answer.value());
            ledger.borrow_mut().n_reads += 1;
        }
        if rng.bool() {
            actix_web::rt::time::sleep(Duration::from_millis(rng.u64(0..20))).await;
        }
    }
}

/// `seed serve` on `data_dir`, killed with SIGKILL `after` its spawn, before or while it starts.
fn kill_while_starting(data_dir: &std::path::Path, after: Duration) {
    let mut child = Command::new(SEED)
        .arg("serve")
        .arg("--data-dir")
        .arg(data_dir)
        .args(["--listen", "127.0.0.1:0"])
        .args(crate::common::database_args(data_dir))
        .env("RUST_LOG", "warn")
        .env("SEED_PROVIDER", "scripted")
        .env("SEED_RUN_RESTARTS_MAX", RUN_RESTARTS_MAX)
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("seed serve starts");
    std::thread::sleep(after);
    // SIGKILL (it may have failed on its own already: then `wait` tells).
    let _ = child.kill();
    let status = child.wait().expect("waits");
    assert!(
        !status.success(),
        "seed serve exited on its own while starting: {status:?}"
    );
}

/// Every page of every session of the account.
pub(crate) async fn all_sessions(client: &Client) -> Vec<SessionInfo> {
    let mut sessions = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let path = match &cursor {
            Some(cursor) => format!("/v1/sessions?limit=100&cursor={cursor}"),
            None => "/v1/sessions?limit=100".to_owned(),
        };
        let page: ListSessionsResponse = client.get(&path).await.expect("sessions");
        sessions.extend(page.sessions);
        match page.next_cursor {
            Some(next) => cursor = Some(next),
            None => return sessions,
        }
    }
}

pub(crate) async fn all_events(client: &Client, session_id: Uuid) -> Vec<EventInfo> {
    let mut events = Vec::new();
    let mut from_seq = 1;
    loop {
        let page: EventsResponse = client
            .get(&format!(
                "/v1/sessions/{session_id}/events?from_seq={from_seq}&limit=500"
            ))
            .await
            .expect("events");
        events.extend(page.events);
        match page.next_seq {
            Some(next) => from_seq = next,
            None => return events,
        }
    }
}

/// Runs by state, from `/metrics`.
pub(crate) async fn runs_by_state(client: &Client) -> BTreeMap<String, f64> {
    let answer = client
        .send_raw("GET", "/metrics", Vec::new(), &[])
        .await
        .expect("metrics");
    assert_eq!(answer.status, 200);
    String::from_utf8_lossy(&answer.body)
        .lines()
        .filter_map(|line| {
            let rest = line.strip_prefix("seed_runs{state=\"")?;
            let (state, value) = rest.split_once("\"} ")?;
            Some((state.to_owned(), value.parse().ok()?))
        })
        .collect()
}

/// A message a person wrote, not a continuation's copy of one.
pub(crate) fn is_own_user_message(event: &EventInfo) -> bool {
    event.kind == "message"
        && event.role.as_deref() == Some("user")
        && event.actor.as_deref() == Some("user")
        && event.meta.get("continued_from").is_none()
}

pub(crate) fn text_of(event: &EventInfo) -> &str {
    event.content["text"].as_str().unwrap_or_default()
}

#[actix_web::test]
async fn sigkill_at_random_moments_loses_and_repeats_nothing() {
    let seed = run_seed("KILL9_SEED");
    let soak = std::env::var("SEED_SOAK").is_ok_and(|soak| soak == "1");
    let kills = env_number("KILL9_KILLS")
        .map_or(if soak { SOAK_KILLS } else { KILLS_DEFAULT }, |kills| {
            kills as usize
        });
    eprintln!("kill9 seed {seed}, {kills} kills (replay with KILL9_SEED={seed})");
    let started = Instant::now();
    let mut rng = fastrand::Rng::with_seed(seed);
    let dir = tempfile::tempdir().expect("tempdir");
    let ledger = Rc::new(RefCell::new(Ledger::default()));
    let mut n_early_kills = 0;

    for kill_idx in 0..kills {
        // The first kill lands while the service starts on an empty data dir (creating the
        // database, the local key and its account).
        if kill_idx == 0 || rng.f64() < EARLY_KILL_CHANCE {
            let after = rng.u64(EARLY_KILL_AFTER_MS.0..=EARLY_KILL_AFTER_MS.1);
            kill_while_starting(dir.path(), Duration::from_millis(after));
            n_early_kills += 1;
            continue;
        }
        // A restart must cope with what the kill left: the lock file, server.json, the WAL.
        let mut server = Server::start(
            dir.path(),
            &[
                &["--scripted-delay-ms", SCRIPTED_DELAY_MS][..],
                &LIMITS_OUT_OF_THE_WAY,
            ]
            .concat(),
        );
        let client = server.client();
        let clients: Vec<_> = (0..N_CLIENTS)
            .map(|client_idx| {
                actix_web::rt::spawn(drive(
                    client.clone(),
                    Rc::clone(&ledger),
                    fastrand::Rng::with_seed(rng.u64(..)),
                    format!("k{kill_idx}c{client_idx}"),
                    Traffic::default(),
                ))
            })
            .collect();
        let after = rng.u64(KILL_AFTER_MS.0..=KILL_AFTER_MS.1);
        actix_web::rt::time::sleep(Duration::from_millis(after)).await;
        server.child.kill().expect("SIGKILL");
        server.child.wait().expect("waits");
        for handle in clients {
            tokio::time::timeout(CLIENTS_END_WAIT, handle)
                .await
                .unwrap_or_else(|_| panic!("seed {seed}: a client hung after kill {kill_idx}"))
                .unwrap_or_else(|error| panic!("seed {seed}: a client failed: {error}"));
        }
    }
    let traffic_elapsed = started.elapsed();

    // The last service was killed: its server.json is left, but the command line sees that
    // nothing serves the data dir.
    let output = Command::new(SEED)
        .arg("--data-dir")
        .arg(dir.path())
        .arg("sessions")
        .output()
        .expect("seed sessions runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        !output.status.success() && stderr.contains("no service is running"),
        "seed {seed}: {output:?}"
    );

    // Undisturbed: every run ends.
    let server = Server::start(dir.path(), &LIMITS_OUT_OF_THE_WAY);
    let client = server.client();
    let ledger = ledger.take();
    let quiet_deadline = Instant::now() + QUIET_WAIT;
    loop {
        let states = runs_by_state(&client).await;
        let open: f64 = ["queued", "running", "parked"]
            .iter()
            .map(|state| states.get(*state).copied().unwrap_or(0.0))
            .sum();
        if open == 0.0 {
            break;
        }
        assert!(
            Instant::now() < quiet_deadline,
            "seed {seed}: not quiet after {QUIET_WAIT:?}: {states:?}"
        );
        actix_web::rt::time::sleep(Duration::from_millis(50)).await;
    }

    let Checked {
        mut problems,
        n_sessions,
        runs_by_status,
        n_retried,
    } = check_answers(&ledger, &client).await;

    // Through the database, once the service is stopped.
    let account_id = server.local_key().account_id;
    let data_dir = server.data_dir.clone();
    let status = server.terminate();
    assert!(status.success(), "seed {seed}: the drain exited {status:?}");
    let store = crate::common::open_store(&data_dir);
    if crate::common::sqlite_only("the integrity check of the database file") {
        for problem in store.check_integrity().await.expect("integrity check") {
            problems.push(format!("integrity: {problem}"));
        }
    }
    let n_checked = check_database(&store, account_id, &mut problems).await;
    // `seed fsck` on what the kills left.
    crate::fsck::assert_clean(&data_dir);

    eprintln!(
        "kill9 seed {seed}: {kills} kills ({n_early_kills} while starting) in {:.1} s of \
         traffic, {:.1} s in all; {} sessions, {} messages acknowledged (runs {runs_by_status:?}, \
         {n_retried} taken up again after a kill), {} cut off, {} refused, {} stops, {} reads; \
         {n_checked} database checks",
        traffic_elapsed.as_secs_f64(),
        started.elapsed().as_secs_f64(),
        n_sessions,
        ledger.acked.len(),
        ledger.cut_off.len(),
        ledger.refused.len(),
        ledger.n_stops,
        ledger.n_reads,
    );
    assert!(
        problems.is_empty(),
        "seed {seed} (replay with KILL9_SEED={seed}): {problems:#?}"
    );
    // The test did what it says: traffic flowed, and kills cut turns off mid-way.
    assert!(
        ledger.acked.len() >= kills - n_early_kills,
        "seed {seed}: only {} messages acknowledged",
        ledger.acked.len()
    );
    if kills >= 20 {
        assert!(
            n_retried > 0 && !ledger.cut_off.is_empty(),
            "seed {seed}: no kill landed mid-turn ({n_retried} runs taken up again, {} \
             requests cut off)",
            ledger.cut_off.len()
        );
    }
}

/// What [`check_answers`] found.
pub(crate) struct Checked {
    pub(crate) problems: Vec<String>,
    pub(crate) n_sessions: usize,
    pub(crate) runs_by_status: BTreeMap<String, usize>,
    pub(crate) n_retried: usize,
}

/// Once the service is quiet, through the API: every acknowledged session is there; every
/// acknowledged message is in the log exactly once, where it was acknowledged, its run ended
/// and answered (or the reason recorded); no answer is written twice; a cut-off message is in
/// the log at most once, a refused one never, and nothing is there that was never sent.
pub(crate) async fn check_answers(ledger: &Ledger, client: &Client) -> Checked {
    let mut problems: Vec<String> = ledger.server_errors.clone();
    let sessions = all_sessions(client).await;
    let mut logs: HashMap<Uuid, Vec<EventInfo>> = HashMap::new();
    for session in &sessions {
        logs.insert(session.id, all_events(client, session.id).await);
    }
    for id in &ledger.sessions {
        if !logs.contains_key(id) {
            problems.push(format!("acknowledged session {id} is missing"));
        }
    }
    // Where each text a person wrote appears.
    let mut written: HashMap<&str, Vec<(Uuid, &EventInfo)>> = HashMap::new();
    for (session_id, log) in &logs {
        for event in log.iter().filter(|event| is_own_user_message(event)) {
            written
                .entry(text_of(event))
                .or_default()
                .push((*session_id, event));
        }
        // One answer per message: no complete answer is written twice.
        let mut answers: HashMap<&str, Vec<&EventInfo>> = HashMap::new();
        for event in log.iter().filter(|event| {
            event.kind == "message"
                && event.role.as_deref() == Some("assistant")
                && event.meta.get("stopped").is_none()
        }) {
            answers.entry(text_of(event)).or_default().push(event);
        }
        for (text, events) in answers {
            if events.len() > 1 && !text.is_empty() {
                // The whole log, to tell a second answer from a second copy of one.
                let shown: Vec<String> = log
                    .iter()
                    .map(|event| {
                        format!(
                            "[{}] {} {:?} run {:?}: {:?}",
                            event.seq,
                            event.kind,
                            event.role,
                            event.run_id,
                            text_of(event)
                        )
                    })
                    .collect();
                problems.push(format!(
                    "{session_id}: the answer {text:?} is written {} times (seqs {:?}); the log:\n{}",
                    events.len(),
                    events.iter().map(|event| event.seq).collect::<Vec<_>>(),
                    shown.join("\n")
                ));
            }
        }
    }
    let mut runs_by_status: BTreeMap<String, usize> = BTreeMap::new();
    let mut n_retried = 0;
    for acked in &ledger.acked {
        let places = written
            .get(acked.text.as_str())
            .cloned()
            .unwrap_or_default();
        match places.as_slice() {
            [(session_id, event)] => {
                if *session_id != acked.session_id
                    || event.id != acked.event_id
                    || event.seq != acked.seq
                {
                    problems.push(format!(
                        "{:?}: acknowledged as {}#{} (event {}), found in {session_id}#{} \
                         (event {})",
                        acked.text,
                        acked.session_id,
                        acked.seq,
                        acked.event_id,
                        event.seq,
                        event.id
                    ));
                }
            }
            _ => problems.push(format!(
                "{:?}: acknowledged, in the log {} times",
                acked.text,
                places.len()
            )),
        }
        let run: RunInfo = client
            .get(&format!("/v1/runs/{}", acked.run_id))
            .await
            .expect("the run of an acknowledged message");
        *runs_by_status.entry(run.status.clone()).or_default() += 1;
        if run.attempts > 1 {
            n_retried += 1;
        }
        let log = logs.get(&acked.session_id).map_or(&[][..], Vec::as_slice);
        let result = run.result.clone().unwrap_or_default();
        let answered = match run.status.as_str() {
            "succeeded" => {
                if let Some(answer) = result.get("answer").and_then(|answer| answer.as_str()) {
                    // The answer is in the log, after the message.
                    log.iter().any(|event| {
                        event.kind == "message"
                            && event.role.as_deref() == Some("assistant")
                            && event.seq > acked.seq
                            && text_of(event) == answer
                    })
                } else if let Some(successor) = result
                    .get("continued_to_session_id")
                    .and_then(|id| id.as_str())
                    .and_then(|id| id.parse::<Uuid>().ok())
                {
                    // The successor holds the message, copied word for word.
                    logs.get(&successor).is_some_and(|log| {
                        log.iter().any(|event| {
                            event.role.as_deref() == Some("user")
                                && text_of(event) == acked.text
                                && event.meta["continued_from"]["event_id"] == json!(acked.event_id)
                        })
                    })
                } else {
                    // Ended by a verb: the reason is recorded.
                    result.get("ended").is_some()
                }
            }
            "canceled" | "failed" => result.as_object().is_some_and(|fields| !fields.is_empty()),
            _ => false,
        };
        if !answered {
            let successor_head: Vec<String> = result
                .get("continued_to_session_id")
                .and_then(|id| id.as_str())
                .and_then(|id| id.parse::<Uuid>().ok())
                .and_then(|successor| logs.get(&successor))
                .map(|log| {
                    log.iter()
                        .take(3)
                        .map(|event| format!("{} {:?} {}", text_of(event), event.actor, event.meta))
                        .collect()
                })
                .unwrap_or_default();
            let own: Vec<String> = log
                .iter()
                .filter(|event| event.kind == "message")
                .map(|event| format!("[{}] {:?}: {}", event.seq, event.actor, text_of(event)))
                .collect();
            problems.push(format!(
                "{:?} (run {}, seq {}): {} with {result}, unanswered; successor starts \
                 {successor_head:#?}; log {own:#?}",
                acked.text, acked.run_id, acked.seq, run.status
            ));
        }
    }
    for text in &ledger.cut_off {
        let n = written.get(text.as_str()).map_or(0, Vec::len);
        if n > 1 {
            problems.push(format!("{text:?}: cut off, in the log {n} times"));
        }
    }
    for (text, status) in &ledger.refused {
        let n = written.get(text.as_str()).map_or(0, Vec::len);
        if n > 0 {
            problems.push(format!(
                "{text:?}: refused with {status}, in the log {n} times"
            ));
        }
    }
    let sent: std::collections::HashSet<&str> = ledger
        .acked
        .iter()
        .map(|acked| acked.text.as_str())
        .chain(ledger.cut_off.iter().map(String::as_str))
        .collect();
    for text in written.keys() {
        if !sent.contains(text) {
            problems.push(format!("{text:?}: in the log, never sent"));
        }
    }

    Checked {
        problems,
        n_sessions: sessions.len(),
        runs_by_status,
        n_retried,
    }
}

/// Through the database, once the service is stopped: no run open, and the quiet invariants of
/// the simulation. Returns how many checks ran.
pub(crate) async fn check_database(
    store: &seed_store::Store,
    account_id: seed_events::AccountId,
    problems: &mut Vec<String>,
) -> usize {
    let open_runs = store.list_open_runs().await.expect("runs");
    if !open_runs.is_empty() {
        problems.push(format!("runs still open: {open_runs:?}"));
    }
    seed_sim::invariants::check_quiet_database(store, account_id, &HashMap::new(), problems)
        .await
        .expect("the invariants run")
}
