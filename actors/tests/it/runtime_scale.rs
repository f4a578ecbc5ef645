//! Many sessions at once: every session talks for five turns (message, wait for its run, next
//! message), all sessions concurrently, with the `echo_then_answer` model (each turn: an echo
//! call, then an answer). Afterwards no event was lost or duplicated, every answer matches its
//! message, and every session's seqs are 1..=N without a gap, its log agreeing with its store.
//!
//! 1,000 sessions × 5 turns (5,000 runs, 10,000 model requests, 25,000 log events). Measured
//! with `cargo nextest run -p seed-actors runtime_scale::` in a debug build on a 2-core
//! machine: about 30 s (the turns ~27 s, the checks ~2 s), inside the ~60 s budget, so it runs
//! by default. `SEED_SCALE_SESSIONS=N` runs N sessions instead (e.g. 200 for a quick look,
//! ~3 s).

use std::time::Instant;

use crate::common::{
    Fixture, assert_log_agrees_with_store, echo_then_answer, log, session, within_for,
};
use seed_actors::Runtime;
use seed_events::{EventRole, RunStatus};

const N_TURNS: usize = 5;

fn n_sessions() -> u128 {
    std::env::var("SEED_SCALE_SESSIONS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(1_000)
}

fn message(session_idx: u128, turn: usize) -> String {
    format!("session {session_idx} turn {turn}")
}

async fn talk(runtime: Runtime, session_idx: u128) -> anyhow::Result<()> {
    for turn in 0..N_TURNS {
        let text = message(session_idx, turn);
        let (_, run_id) = runtime.send_message(session(session_idx), &text).await?;
        let run = runtime.wait_for_run(run_id).await?;
        assert_eq!(run.status, RunStatus::Succeeded, "{run:?}");
        assert_eq!(
            run.result,
            Some(serde_json::json!({ "answer": format!("answer: {text}") }))
        );
    }
    Ok(())
}

#[actix::test]
async fn many_sessions_talk_at_once_and_no_event_is_lost_or_duplicated() -> anyhow::Result<()> {
    let n_sessions = n_sessions();
    let started_at = Instant::now();
    let fixture = Fixture::new(n_sessions).await?;
    let model = echo_then_answer().without_recording();
    let runtime = fixture.start(model.clone(), "boot-1").await?;
    let set_up = started_at.elapsed();

    let talking = (0..n_sessions).map(|idx| talk(runtime.clone(), idx));
    // A hang guard only, far above the ~30 s this takes.
    let results = within_for(
        "every session's turns",
        std::time::Duration::from_secs(600),
        futures::future::join_all(talking),
    )
    .await;
    for result in results {
        result?;
    }
    let talked = started_at.elapsed() - set_up;
    // Two model requests per turn: the echo call, then the answer.
    assert_eq!(model.n_requests(), n_sessions as usize * N_TURNS * 2);

    for idx in 0..n_sessions {
        let events = log(&fixture.store, session(idx)).await?;
        let messages: Vec<(Option<EventRole>, &str)> = events
            .iter()
            .filter(|event| event.kind == "message")
            .filter_map(|event| {
                let text = event.content["text"].as_str()?;
                (!text.is_empty()).then_some((event.role, text))
            })
            .collect();
        let expected: Vec<(Option<EventRole>, String)> = (0..N_TURNS)
            .flat_map(|turn| {
                let text = message(idx, turn);
                [
                    (Some(EventRole::User), text.clone()),
                    (Some(EventRole::Assistant), format!("answer: {text}")),
                ]
            })
            .collect();
        let expected: Vec<(Option<EventRole>, &str)> = expected
            .iter()
            .map(|(role, text)| (*role, text.as_str()))
            .collect();
        assert_eq!(messages, expected, "session {idx}");
        let n_calls = events.iter().filter(|e| e.kind == "tool_call").count();
        let n_results = events.iter().filter(|e| e.kind == "tool_result").count();
        assert_eq!((n_calls, n_results), (N_TURNS, N_TURNS), "session {idx}");
        // Per turn: message, tool_call (its response says nothing else), tool_result, answer.
        assert_eq!(events.len(), N_TURNS * 4, "session {idx}: {events:#?}");
        assert_log_agrees_with_store(&fixture.store, session(idx)).await?;
        let runs = fixture.store.list_session_runs(session(idx)).await?;
        assert_eq!(runs.len(), N_TURNS);
        assert!(runs.iter().all(|run| run.status == RunStatus::Succeeded));
    }
    eprintln!(
        "{n_sessions} sessions x {N_TURNS} turns: set up in {set_up:?}, talked in {talked:?}, \
         checked in {:?}",
        started_at.elapsed() - set_up - talked
    );
    Ok(())
}
