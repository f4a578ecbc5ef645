//! The `continuation` bench suite: compiling a successor's projection over transcripts of
//! 1,000, 100,000 and 1,000,000 events with the same cited ranges (the shell reads only the
//! cited ranges and the recent tail, by index, so the time must not grow with the transcript),
//! and a whole continuation, from the verb call to the successor's run queued.
//!
//! Rows: `floor normal` (the raw SQLite floor, commits/s, same run); `compile 1k`, `compile
//! 100k`, `compile 1M` (µs per projection, median of [`COMPILE_ROUNDS`]; their floor is
//! `compile 1k`, so the ratio is growth with the transcript); `continue whole` (µs per call,
//! median of [`MAX_SESSION_CONTINUATIONS_PER_SESSION`] calls; its floor is one raw commit in µs,
//! so the ratio says how many commits' worth a continuation costs).

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use seed_actors::continuation::project;
use seed_actors::verbs::continue_session::ContinueSession;
use seed_actors::{Runtime, RuntimeSettings, Verb};
use seed_events::{
    AccountId, EventRole, NewEvent, PlanTransfer, Queue, RunId, RunStatus, SessionId,
};
use seed_projections::continuation::{
    MAX_SESSION_CONTINUATIONS_PER_SESSION, normalize_input, parse_input,
};
use seed_providers::{ScriptedProvider, ScriptedStep, text_response};
use seed_store::{Config, NewRun, NewSession, Store, floor};
use serde_json::{Value, json};

use crate::bench::Row;

/// Projections compiled per transcript size; the median counts.
pub const COMPILE_ROUNDS: usize = 200;

/// Transcript sizes, in events, with their row names.
pub const SIZES: [(&str, i64); 3] = [
    ("compile 1k", 1_000),
    ("compile 100k", 100_000),
    ("compile 1M", 1_000_000),
];

/// Events appended per transaction while building a transcript.
const BUILD_BATCH: i64 = 20_000;

fn account() -> AccountId {
    AccountId::from_u128(0xbe4c)
}

fn thread(idx: u128) -> SessionId {
    SessionId::from_u128(0xbe4c_0000 + idx)
}

/// The arguments every compile uses: two cited ranges and one event, all in the first 1,000.
pub fn arguments() -> Value {
    json!({
        "reason": "context pressure",
        "title": "Lisbon, part 2",
        "description": "Choosing the hotel",
        "handoff": {
            "purpose": "Plan the trip to Lisbon in May",
            "currentRequest": "Compare the three shortlisted hotels",
            "establishedFacts": ["Flights are booked", "Budget is €150 a night"],
            "decisions": ["Stay near Baixa"],
            "nextActions": ["Compare prices", "Ask about late check-in"]
        },
        "sources": [
            { "type": "session_events", "fromSeq": 10, "toSeq": 40 },
            { "type": "session_events", "fromSeq": 500, "toSeq": 560 },
            { "type": "session_event", "seq": 900 }
        ]
    })
}

/// A transcript of `n` events: user and assistant messages of about 200 bytes, the last one a
/// user message.
async fn build_transcript(store: &Store, session_id: SessionId, n: i64) -> anyhow::Result<()> {
    let text = "The hotel near Baixa has late check-in and a roof terrace; the one in Alfama is \
                quieter but further from the tram. Prices for May are about the same for both, \
                a little under the budget we set.";
    let mut seq = 0;
    while seq < n {
        let batch: Vec<NewEvent> = (seq + 1..=(seq + BUILD_BATCH).min(n))
            .map(|seq| {
                let role = if seq % 2 == 1 || seq == n {
                    EventRole::User
                } else {
                    EventRole::Assistant
                };
                let actor = if role == EventRole::User {
                    "user"
                } else {
                    "agent"
                };
                NewEvent::message(
                    role,
                    actor,
                    json!({ "text": format!("{seq}: {text}") }),
                    seq,
                )
            })
            .collect();
        seq += batch.len() as i64;
        store.append_events(session_id, batch).await?;
    }
    Ok(())
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort_unstable();
    samples[samples.len() / 2]
}

fn micros(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1e6
}

/// Runs the suite in `scratch` (rows whose name contains `filter`, or is `=NAME`).
pub fn suite(scratch: &Path, filter: &str) -> anyhow::Result<Vec<Row>> {
    let selected = |name: &str| match filter.strip_prefix('=') {
        Some(exact) => name == exact,
        None => name.contains(filter),
    };
    let floor_config = Config::new(scratch.join("continuation-floor.db"));
    remove(&floor_config.path)?;
    let n_floor = 5_000;
    let floor_rate = n_floor as f64 / floor::measure_commits(&floor_config, n_floor)?.as_secs_f64();
    let mut rows = vec![Row::floor("floor normal", floor_rate)];

    let path = scratch.join("continuation.db");
    remove(&path)?;
    let system = actix::System::new();
    let measured: anyhow::Result<Vec<Row>> = system.block_on(async {
        let store = Store::open(Config::new(&path))?;
        store.create_account(account(), vec![7], 0).await?;
        let mut rows = Vec::new();
        let mut first_median = None;
        for (idx, (name, n_events)) in SIZES.into_iter().enumerate() {
            // The 1k case always runs: it is the floor of the others.
            if idx > 0 && !selected(name) {
                continue;
            }
            let session_id = thread(idx as u128);
            store
                .create_session(NewSession::new(session_id, account(), 0))
                .await?;
            build_transcript(&store, session_id, n_events).await?;
            let predecessor = store
                .get_session(session_id)
                .await?
                .ok_or_else(|| anyhow::anyhow!("the session"))?;
            let initiating = store
                .newest_person_message(session_id, None)
                .await?
                .ok_or_else(|| anyhow::anyhow!("a user message"))?;
            let input = parse_input(&normalize_input(arguments()), session_id)
                .map_err(|problem| anyhow::anyhow!(problem))?;
            // Warm the page cache and the statement caches first.
            for _ in 0..COMPILE_ROUNDS / 10 {
                project(
                    &store,
                    &predecessor,
                    &initiating,
                    &input,
                    PlanTransfer::Omit,
                )
                .await?;
            }
            let mut samples = Vec::with_capacity(COMPILE_ROUNDS);
            let mut bytes = 0;
            for _ in 0..COMPILE_ROUNDS {
                let started = Instant::now();
                let projection = project(
                    &store,
                    &predecessor,
                    &initiating,
                    &input,
                    PlanTransfer::Omit,
                )
                .await?;
                samples.push(started.elapsed());
                bytes = projection.text.len();
            }
            let value = micros(median(samples));
            if std::env::var_os("SEED_BENCH_VERBOSE").is_some() {
                eprintln!("{name}: {n_events} events, projection {bytes} bytes, {value:.0} µs");
            }
            let floor = *first_median.get_or_insert(value);
            if selected(name) {
                rows.push(Row::ratio(name, value, "µs", floor));
            }
        }
        if selected("continue whole") {
            rows.push(whole_continuation(&store, floor_rate).await?);
        }
        Ok(rows)
    });
    rows.extend(measured?);
    remove(&path)?;
    Ok(rows)
}

/// A whole continuation through the runtime: the verb call until it answers, which is after the
/// successor's run is queued. Successor runs are left queued (no interactive slots).
async fn whole_continuation(store: &Store, floor_rate: f64) -> anyhow::Result<Row> {
    let session_id = thread(99);
    store
        .create_session(NewSession::new(session_id, account(), 0))
        .await?;
    build_transcript(store, session_id, 1_000).await?;
    let settings = RuntimeSettings {
        interactive_runs_max: 0,
        background_runs_max: 0,
        ..RuntimeSettings::default()
    };
    let provider = ScriptedProvider::new(vec![ScriptedStep::Respond(text_response("unused"))]);
    let (runtime, _) = Runtime::start(
        store.clone(),
        Arc::new(provider),
        seed_actors::verbs::shipped(),
        settings,
        "bench".to_owned(),
        Arc::new(|| 1_800_000_000_000),
    )
    .await?;
    let run_id = RunId::new_v7();
    store
        .enqueue_run(NewRun {
            id: run_id,
            session_id,
            queue: Queue::Background,
            user_event_ids: Vec::new(),
            parent_run_id: None,
            typed: false,
            created_at_ms: 1,
        })
        .await?;
    store
        .set_run_status(run_id, RunStatus::Running, None, 2)
        .await?;
    let mut samples = Vec::new();
    for call in 0..MAX_SESSION_CONTINUATIONS_PER_SESSION {
        // Each continuation carries a new message (one message is carried once).
        let message = NewEvent::message(
            EventRole::User,
            "user",
            json!({ "text": format!("and now part {call}") }),
            10 + call as i64,
        );
        store.append_events(session_id, vec![message]).await?;
        let context = runtime
            .verb_context(session_id, run_id, &format!("bench-{call}"))
            .await?;
        let started = Instant::now();
        let output = ContinueSession.call(context, arguments()).await;
        samples.push(started.elapsed());
        anyhow::ensure!(!output.is_error, "{}", output.content);
    }
    let value = micros(median(samples));
    Ok(Row::ratio("continue whole", value, "µs", 1e6 / floor_rate))
}

fn remove(path: &Path) -> anyhow::Result<()> {
    for suffix in ["", "-wal", "-shm"] {
        let mut file = path.as_os_str().to_owned();
        file.push(suffix);
        match std::fs::remove_file(&file) {
            Err(error) if error.kind() != std::io::ErrorKind::NotFound => return Err(error.into()),
            _ => {}
        }
    }
    Ok(())
}
