//! Opening a long session from what its store kept (`session_durable_kept`): the state opened
//! from the kept fold and the lines after it reads as the state folded from every line, and
//! the lines read are the context (the entries since the newest reset) and the few hundred
//! committed since the store last kept, not the history.

use futures::executor::block_on;
use seed_durable::record::{ModelTaskState, TURN_DOCUMENT, Task, TurnDocument, TurnState};
use seed_durable::{Batch, DurableFs, EntryBody, StoreState};
use seed_events::{AccountId, SessionId};
use seed_providers::{UserMessage, text_response};
use seed_store::{Config, NewSession, Store};

/// A fresh store in a temp dir with one session, and that session.
fn store_with_a_session() -> anyhow::Result<(tempfile::TempDir, Store, SessionId)> {
    let dir = tempfile::tempdir()?;
    let store = Store::open(Config::new(dir.path().join("seed.db")))?;
    let account = AccountId::from_u128(1);
    let session = SessionId::from_u128(1);
    block_on(store.create_account(account, vec![1], 0))?;
    block_on(store.create_session(NewSession::new(session, account, 0)))?;
    Ok((dir, store, session))
}

const TURNS: usize = 600;
/// The turn whose input comes after a reset: the context is the turns from it on.
const RESET_AT: usize = 580;

/// Writes `TURNS` turns (two commits each: the input, then the answer) the way a harness does,
/// keeping the state whenever `keep_every` lines came after the last kept one and after the
/// reset (never: `None`).
/// Returns the state every commit was applied to.
fn write_turns(files: &seed_store::SessionFiles, keep_every: Option<usize>) -> StoreState {
    let mut state = StoreState::default();
    let mut since_kept = 0;
    for turn in 0..TURNS {
        let request_id = format!("r{turn}");
        let mut input = Batch::new(&state);
        if turn == RESET_AT {
            input.entry(EntryBody::Reset {});
        }
        if turn == 0 {
            input.entry(EntryBody::System {
                system_prompt: "you are kept".to_owned(),
                tools: Vec::new(),
            });
        }
        let input_entry_id = input.entry(EntryBody::User {
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
        input.document(TURN_DOCUMENT, Some(&doc));
        input.task(Task::Model {
            request_id: request_id.clone(),
            step: 0,
            state: ModelTaskState::Streaming,
        });
        since_kept += input.to_appends().len();
        block_on(files.commit_batch(&input)).expect("commits");
        state.apply(input);
        let mut answer = Batch::new(&state);
        let entry_id = answer.entry(EntryBody::Assistant {
            request_id: request_id.clone(),
            message: text_response(&format!("answer {turn}")),
        });
        answer.task(Task::Model {
            request_id,
            step: 0,
            state: ModelTaskState::Completed { entry_id },
        });
        doc.state = TurnState::Answered;
        doc.answer_entry_id = Some(entry_id);
        answer.document(TURN_DOCUMENT, Some(&doc));
        since_kept += answer.to_appends().len();
        block_on(files.commit_batch(&answer)).expect("commits");
        state.apply(answer);
        // As a harness does: after enough lines, and at once after a reset.
        if keep_every.is_some_and(|every| since_kept >= every || turn == RESET_AT) {
            block_on(files.keep(&state.kept())).expect("keeps");
            since_kept = 0;
        }
    }
    state
}

fn open(files: &seed_store::SessionFiles) -> (StoreState, seed_durable::OpenLines) {
    let lines = block_on(files.open_lines()).expect("reads");
    let state = match lines.kept.clone() {
        Some(kept) => StoreState::open_kept(kept, &lines.entries, &lines.documents, &lines.tasks),
        None => StoreState::fold(&lines.entries, &lines.documents, &lines.tasks),
    }
    .expect("folds");
    (state, lines)
}

#[test]
fn a_session_opens_from_what_was_kept_and_reads_as_every_line_folded() -> anyhow::Result<()> {
    let (_dir, store, session) = store_with_a_session()?;
    let files = store.session_files(session);
    let written = write_turns(&files, Some(256));

    let (opened, lines) = open(&files);
    assert!(lines.kept.is_some(), "the store kept the state");
    assert_eq!(
        seed_durable::context::conversation(&opened.entries),
        seed_durable::context::conversation(&written.entries)
    );
    assert_eq!(opened.system(), written.system());
    assert_eq!(
        opened.system().map(|(prompt, _)| prompt),
        Some("you are kept")
    );
    assert_eq!(opened.documents, written.documents);
    assert_eq!(opened.turn(), written.turn());
    assert_eq!(opened.next_entry_id(), written.next_entry_id());
    assert_eq!(opened.kept(), written.kept());

    // The entries read are the context's: the reset and the turns after it.
    let context_entries = (TURNS - RESET_AT) * 2 + 1;
    assert_eq!(lines.entries.len(), context_entries);
    // And of the other lines, only those after what was kept last.
    assert!(
        lines.n_after_kept < 256,
        "{} lines after the kept state",
        lines.n_after_kept
    );
    assert!(
        lines.documents.len() + lines.tasks.len() < 256,
        "{} document and {} task lines",
        lines.documents.len(),
        lines.tasks.len()
    );
    Ok(())
}

#[test]
fn a_session_never_kept_opens_from_every_line() -> anyhow::Result<()> {
    let (_dir, store, session) = store_with_a_session()?;
    let files = store.session_files(session);
    let written = write_turns(&files, None);
    let (opened, lines) = open(&files);
    assert_eq!(lines.kept, None);
    assert_eq!(opened, written);
    assert_eq!(
        lines.n_after_kept,
        lines.entries.len() + lines.documents.len() + lines.tasks.len()
    );
    Ok(())
}

#[test]
fn an_older_state_never_replaces_a_newer_one_and_the_kept_state_goes_with_its_session()
-> anyhow::Result<()> {
    let (_dir, store, session) = store_with_a_session()?;
    let files = store.session_files(session);
    let written = write_turns(&files, Some(256));
    // Kept at the newest line; then, with nothing committed since, a stale state (here an
    // empty one) changes nothing.
    block_on(files.keep(&written.kept()))?;
    block_on(files.keep(&StoreState::default().kept()))?;
    let (opened, lines) = open(&files);
    assert_eq!(lines.kept, Some(written.kept()));
    assert_eq!(opened.kept(), written.kept());
    block_on(store.delete_session(session, 0))?;
    assert!(block_on(files.open_lines()).is_err(), "the session is gone");
    Ok(())
}
