//! The reopen rows of the `runtime` suite: how long a harness takes to open a session of many
//! entries with a reset near the end, cold (a new harness over the store), against one of few.
//! The session is written as a harness writes it — a turn is an input and an answer, with the
//! turn document and the model task beside them — and kept as a harness keeps it (every
//! `KEEP_AFTER_LINES` lines and at the reset), or never (`kept: false`: what every open cost
//! before the store kept anything).

use std::time::{Duration, Instant};

use anyhow::Context as _;
use seed_durable::record::{ModelTaskState, TURN_DOCUMENT, Task, TurnDocument, TurnState};
use seed_durable::{Batch, DurableFs, EntryBody, Harness, HarnessConfig, StoreState, ToolSet};
use seed_events::{AccountId, SessionId};
use seed_providers::{ScriptedProvider, UserMessage, text_response};
use seed_store::{Config, NewSession, Store};

/// Entries after the reset: the context every open reads.
pub const CONTEXT_ENTRIES: usize = 40;
/// Turns written per commit while building (a harness commits each step; the build need not).
const TURNS_PER_BATCH: usize = 50;

/// Writes a session of about `n_entries` entries (two a turn) with a reset `CONTEXT_ENTRIES`
/// entries before the end, then opens it `n_opens` times, each with a new harness: the fastest.
pub fn reopen_time(
    config: &Config,
    n_entries: usize,
    kept: bool,
    n_opens: usize,
) -> anyhow::Result<Duration> {
    let store = Store::open(config.clone())?;
    let account = AccountId::from_u128(1);
    let session = SessionId::from_u128(1);
    futures::executor::block_on(async {
        store.create_account(account, vec![1], 0).await?;
        store
            .create_session(NewSession::new(session, account, 0))
            .await?;
        let files = store.session_files(session);
        let n_turns = n_entries / 2;
        let reset_turn = n_turns.saturating_sub(CONTEXT_ENTRIES / 2);
        let mut state = StoreState::default();
        let mut since_kept = 0;
        let mut turn = 0;
        while turn < n_turns {
            let mut batch = Batch::new(&state);
            let mut reset = false;
            for _ in 0..TURNS_PER_BATCH.min(n_turns - turn) {
                if turn == reset_turn {
                    batch.entry(EntryBody::Reset {});
                    reset = true;
                }
                write_turn(&mut batch, turn);
                turn += 1;
            }
            since_kept += batch.to_appends().len();
            files.commit_batch(&batch).await?;
            state.apply(batch);
            if kept && (since_kept >= seed_durable::harness::KEEP_AFTER_LINES || reset) {
                files.keep(&state.kept()).await?;
                since_kept = 0;
            }
        }
        let mut fastest = Duration::MAX;
        for _ in 0..n_opens {
            let started = Instant::now();
            let harness = Harness::open(
                store.session_files(session),
                ScriptedProvider::new(Vec::new()),
                ToolSet::new(),
                HarnessConfig::new("scripted", "system"),
            )
            .await
            .context("opens")?;
            fastest = fastest.min(started.elapsed());
            anyhow::ensure!(
                harness.state().next_entry_id() == state.next_entry_id(),
                "the harness opened at entry {} where the store holds {}",
                harness.state().next_entry_id(),
                state.next_entry_id()
            );
        }
        Ok(fastest)
    })
}

/// A turn as a harness writes it, in one batch: the input (turn open, model task streaming)
/// and the answer (model task completed, turn answered).
fn write_turn(batch: &mut Batch, turn: usize) {
    let request_id = format!("r{turn}");
    let input_entry_id = batch.entry(EntryBody::User {
        request_id: request_id.clone(),
        message: UserMessage::new(format!("message {turn}")),
    });
    let mut doc = TurnDocument {
        request_id: request_id.clone(),
        input_entry_id,
        state: TurnState::Open,
        answer_entry_id: None,
        reason: None,
    };
    batch.document(TURN_DOCUMENT, Some(&doc));
    batch.task(Task::Model {
        request_id: request_id.clone(),
        step: 0,
        state: ModelTaskState::Streaming,
    });
    let entry_id = batch.entry(EntryBody::Assistant {
        request_id: request_id.clone(),
        message: text_response(&format!("answer {turn}")),
    });
    batch.task(Task::Model {
        request_id,
        step: 0,
        state: ModelTaskState::Completed { entry_id },
    });
    doc.state = TurnState::Answered;
    doc.answer_entry_id = Some(entry_id);
    batch.document(TURN_DOCUMENT, Some(&doc));
}
