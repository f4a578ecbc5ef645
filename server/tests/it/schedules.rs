//! Wake-ups through the service: an agent's schedule listed and cancelled by its person (API
//! and `seed schedules`), every occurrence of a one-second wake-up fired exactly once across 50
//! kill -9s of `seed serve` (none twice, none lost), and a service down across three
//! occurrences firing once at boot.
//!
//! `SCHEDULE_KILLS=N` changes the number of kills; `KILL9_SEED=S` replays a run's kill moments.

use std::collections::BTreeMap;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::common::{Server, new_session, seed_cli};
use seed_events::{RunStatus, SessionEvent, SessionId};
use seed_server::api::{MessageSessionResponse, SchedulesResponse};
use seed_server::client::Client;
use seed_store::Store;
use serde_json::json;

/// Lets the agent schedule one-second intervals (the default minimum is a minute).
const QUICK: [&str; 2] = ["--schedule-interval-min-secs", "1"];
/// Restarts that may cut off one turn: kills this close together may cut the same one often.
const RESTARTS: [&str; 2] = ["--run-restarts-max", "1000"];
/// Kills unless `SCHEDULE_KILLS` says otherwise.
const KILLS_DEFAULT: u64 = 50;
/// The longest a wait on the service may take.
const HANG_GUARD: Duration = Duration::from_secs(120);

fn env_number(name: &str) -> Option<u64> {
    std::env::var(name).ok().map(|text| {
        text.trim()
            .parse()
            .unwrap_or_else(|_| panic!("{name} must be an unsigned integer, not {text:?}"))
    })
}

/// Sends `text` to the session and waits for its run.
async fn say(client: &Client, session_id: uuid::Uuid, text: &str) -> MessageSessionResponse {
    client
        .post(
            &format!("/v1/sessions/{session_id}/messages"),
            &json!({ "text": text, "wait": true }),
        )
        .await
        .expect("the message is answered")
}

async fn schedules(client: &Client, session_id: uuid::Uuid) -> SchedulesResponse {
    client
        .get(&format!("/v1/sessions/{session_id}/schedules"))
        .await
        .expect("the schedules")
}

/// The session's wake-up notices in the log, by seq.
async fn notices(store: &Store, session_id: SessionId) -> Vec<SessionEvent> {
    store
        .read_events(session_id, 1, i64::MAX, 1_000_000)
        .await
        .expect("the log")
        .into_iter()
        .filter(|event| event.meta.get("scheduled_wakeup").is_some())
        .collect()
}

/// Waits until every run of the session has ended.
async fn quiet(store: &Store, session_id: SessionId) {
    let started = Instant::now();
    loop {
        let runs = store.list_session_runs(session_id).await.expect("runs");
        let open = runs.iter().filter(|run| {
            matches!(
                run.status,
                RunStatus::Queued | RunStatus::Running | RunStatus::Parked
            )
        });
        if open.count() == 0 {
            return;
        }
        assert!(
            started.elapsed() < HANG_GUARD,
            "the runs never ended: {runs:?}"
        );
        actix_web::rt::time::sleep(Duration::from_millis(50)).await;
    }
}

#[actix_web::test]
async fn a_person_lists_and_cancels_the_agents_wake_ups() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start(dir.path(), &[]);
    let client = server.client();
    let session = new_session(&client).await;
    say(
        &client,
        session.id,
        "call: schedule {\"note\": \"stand-up notes\", \"cron\": \"0 9 * * MON\"}",
    )
    .await;
    let listed = schedules(&client, session.id).await.schedules;
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(listed[0].kind, "cron");
    assert_eq!(listed[0].when, "cron \"0 9 * * MON\" (UTC)");
    assert_eq!(listed[0].note, "stand-up notes");

    // A refused schedule sets nothing: the model reads a clear error.
    say(
        &client,
        session.id,
        "call: schedule {\"note\": \"x\", \"cron\": \"every monday\"}",
    )
    .await;
    assert_eq!(schedules(&client, session.id).await.schedules.len(), 1);

    // Another account sees neither the list nor the wake-up.
    let other = server.client_with(server.add_account());
    let path = format!("/v1/sessions/{}/schedules", session.id);
    let answer = other.request("GET", &path, None).await.expect("answered");
    assert_eq!(answer.status, 404);
    let one = format!("{path}/{}", listed[0].id);
    let answer = other.request("DELETE", &one, None).await.expect("answered");
    assert_eq!(answer.status, 404);
    assert_eq!(schedules(&client, session.id).await.schedules.len(), 1);

    // The command line lists it and cancels it.
    let session_arg = session.id.to_string();
    let printed = seed_cli(dir.path(), &["schedules", &session_arg], "");
    assert!(printed.contains(&listed[0].id.to_string()), "{printed}");
    assert!(printed.contains("stand-up notes"), "{printed}");
    let schedule_arg = listed[0].id.to_string();
    let printed = seed_cli(
        dir.path(),
        &["schedules", &session_arg, "--cancel", &schedule_arg],
        "",
    );
    assert!(printed.contains("cancelled"), "{printed}");
    assert!(schedules(&client, session.id).await.schedules.is_empty());
    let answer = client
        .request("DELETE", &one, None)
        .await
        .expect("answered");
    assert_eq!(answer.status, 404, "cancelled once");
}

/// The notices' occurrences: each `due_at` once (no occurrence fired twice), the firings
/// counted 1, 2, 3, … and each one's next due where the following firing was due (none lost:
/// a firing that stands for missed occurrences says how many). Each notice has exactly one run.
fn assert_each_occurrence_fired_once(
    notices: &[SessionEvent],
    runs: &[seed_store::RunRow],
    every_ms: i64,
    first_due_ms: i64,
) {
    let mut by_due: BTreeMap<i64, (u64, u64)> = BTreeMap::new();
    for notice in notices {
        let wakeup = &notice.meta["scheduled_wakeup"];
        let due = wakeup["due_at"].as_i64().expect("due_at");
        let occurrence = wakeup["occurrence"].as_u64().expect("occurrence");
        let missed = wakeup["missed"].as_u64().expect("missed");
        let earlier = by_due.insert(due, (occurrence, missed));
        assert!(earlier.is_none(), "the occurrence due at {due} fired twice");
    }
    let mut expected_due = first_due_ms;
    for (idx, (due, (occurrence, missed))) in by_due.iter().enumerate() {
        assert_eq!(
            *occurrence,
            idx as u64 + 1,
            "firing {idx} is occurrence {occurrence}"
        );
        assert_eq!(
            *due, expected_due,
            "firing {occurrence}: an occurrence was lost or fired out of turn"
        );
        expected_due = due + every_ms * (*missed as i64 + 1);
    }
    let mut runs_per_notice: BTreeMap<i64, usize> = BTreeMap::new();
    for run in runs {
        for event_id in &run.user_event_ids {
            *runs_per_notice.entry(event_id.0).or_default() += 1;
        }
    }
    for notice in notices {
        assert_eq!(
            runs_per_notice.get(&notice.id.0),
            Some(&1),
            "the notice {} has exactly one run",
            notice.seq
        );
    }
}

#[actix_web::test]
async fn due_wake_ups_fire_once_each_across_50_kill9s() {
    let seed = env_number("KILL9_SEED").unwrap_or_else(|| {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .expect("clock after 1970")
            .as_nanos() as u64
    });
    let kills = env_number("SCHEDULE_KILLS").unwrap_or(KILLS_DEFAULT);
    eprintln!("schedules kill -9: KILL9_SEED={seed} SCHEDULE_KILLS={kills}");
    let mut rng = fastrand::Rng::with_seed(seed);
    let dir = tempfile::tempdir().expect("tempdir");
    let args: Vec<&str> = QUICK.iter().chain(&RESTARTS).copied().collect();

    let server = Server::start(dir.path(), &args);
    let client = server.client();
    let session = new_session(&client).await;
    say(
        &client,
        session.id,
        "call: schedule {\"note\": \"tick\", \"every_seconds\": 1}",
    )
    .await;
    let [schedule] = &schedules(&client, session.id).await.schedules[..] else {
        panic!("one wake-up is set");
    };
    let first_due_ms = schedule.created_at_ms + 1_000;
    let schedule_id = schedule.id;
    let mut server = server;
    for kill_idx in 0..kills {
        // Up for a while (some firings, some kills mid-firing), then down for a while (some
        // occurrences missed, fired once at the next boot).
        actix_web::rt::time::sleep(Duration::from_millis(rng.u64(100..1_200))).await;
        server.child.kill().expect("SIGKILL");
        server.child.wait().expect("reaped");
        actix_web::rt::time::sleep(Duration::from_millis(rng.u64(0..1_500))).await;
        server = Server::start(dir.path(), &args);
        if kill_idx % 10 == 9 {
            eprintln!("schedules kill -9: {} kills", kill_idx + 1);
        }
    }
    // The person cancels it; what was queued runs to its end.
    let client = server.client();
    let answer = client
        .request(
            "DELETE",
            &format!("/v1/sessions/{}/schedules/{schedule_id}", session.id),
            None,
        )
        .await
        .expect("answered");
    assert_eq!(answer.status, 204, "{:?}", answer.value());
    let session_id = SessionId(session.id);
    let store = server.store();
    quiet(&store, session_id).await;
    let notices = notices(&store, session_id).await;
    let runs = store.list_session_runs(session_id).await.expect("runs");
    drop(store);
    server.terminate();

    let n_occurrences: u64 = notices
        .iter()
        .map(|notice| {
            1 + notice.meta["scheduled_wakeup"]["missed"]
                .as_u64()
                .unwrap_or(0)
        })
        .sum();
    eprintln!(
        "schedules kill -9: {} firings for {n_occurrences} occurrences over {kills} kills",
        notices.len()
    );
    assert!(
        notices.len() > 10,
        "too few firings to tell: {}",
        notices.len()
    );
    assert_each_occurrence_fired_once(&notices, &runs, 1_000, first_due_ms);
    if crate::common::sqlite_only("the integrity check of the database file") {
        let store = crate::common::open_store(dir.path());
        assert!(store.check_integrity().await.expect("checked").is_empty());
    }
}

#[actix_web::test]
async fn a_service_down_across_three_occurrences_fires_once_at_boot() {
    let dir = tempfile::tempdir().expect("tempdir");
    let args: Vec<&str> = QUICK.iter().chain(&RESTARTS).copied().collect();
    let mut server = Server::start(dir.path(), &args);
    let client = server.client();
    let session = new_session(&client).await;
    say(
        &client,
        session.id,
        "call: schedule {\"note\": \"tick\", \"every_seconds\": 1}",
    )
    .await;
    let [schedule] = &schedules(&client, session.id).await.schedules[..] else {
        panic!("one wake-up is set");
    };
    let first_due_ms = schedule.created_at_ms + 1_000;
    server.child.kill().expect("SIGKILL");
    server.child.wait().expect("reaped");
    let killed_at_ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock after 1970")
        .as_millis() as i64;
    // Down until three more occurrences have passed.
    actix_web::rt::time::sleep(Duration::from_millis(3_500)).await;
    let server = Server::start(dir.path(), &args);
    let session_id = SessionId(session.id);
    let store = server.store();
    let started = Instant::now();
    let after_boot = loop {
        let after_boot: Vec<SessionEvent> = notices(&store, session_id)
            .await
            .into_iter()
            .filter(|notice| notice.created_at_ms > killed_at_ms)
            .collect();
        if !after_boot.is_empty() {
            break after_boot;
        }
        assert!(started.elapsed() < HANG_GUARD, "nothing fired at boot");
        actix_web::rt::time::sleep(Duration::from_millis(50)).await;
    };
    let client = server.client();
    let answer = client
        .request(
            "DELETE",
            &format!("/v1/sessions/{}/schedules/{}", session.id, schedule.id),
            None,
        )
        .await
        .expect("answered");
    assert_eq!(answer.status, 204);
    quiet(&store, session_id).await;
    let all = notices(&store, session_id).await;
    let runs = store.list_session_runs(session_id).await.expect("runs");
    assert_each_occurrence_fired_once(&all, &runs, 1_000, first_due_ms);
    // The boot's firing stands for the three (or more) occurrences missed, and says so.
    let boot = &after_boot[0];
    let wakeup = &boot.meta["scheduled_wakeup"];
    assert!(
        wakeup["missed"].as_u64().unwrap_or(0) >= 2,
        "one firing for three occurrences: {wakeup}"
    );
    let text = boot.content["text"].as_str().unwrap_or_default();
    assert!(text.contains("once for "), "{text}");
    assert!(text.contains("late"), "{text}");
}
