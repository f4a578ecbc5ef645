//! The writer `tests/it/crash.rs` kills with SIGKILL: per session, durable batches then their
//! events.
//!
//! Usage: `crash_writer DB_PATH N_SESSIONS LINES_PER_BATCH EVENTS_PER_BATCH`.
//!
//! One thread per session loops: commit durable batch `n` (`LINES_PER_BATCH` lines of
//! `{"batch":n,"line":k,"of":LINES_PER_BATCH}` in `entries.jsonl`), print `files <idx> <n>`;
//! append `EVENTS_PER_BATCH` events `{"batch":n,"idx":k,"of":EVENTS_PER_BATCH}` in one call,
//! print `events <idx> <n>`; `n += 1`. A line is printed (and flushed) only once its write has
//! returned, so the test may hold the store to everything printed.
//!
//! On start it resumes from what is committed: the last durable batch `F` and the last event
//! batch `E` (from the newest event). Because the events of a batch are written only after its
//! durable batch, `E` is `F` or `F - 1`; in the second case the events of `F` are written first.
//! Anything else (a partial batch, a gap, events ahead of files) is an error: the store lost or
//! tore a write.

use std::io::Write;
use std::path::PathBuf;
use std::thread;
use std::time::Duration;

use anyhow::{Context, bail, ensure};
use futures::executor::block_on;
use seed_durable::{Append, DurableFs, FileName};
use seed_events::{AccountId, EventRole, NewEvent, SessionId};
use seed_store::{Config, NewSession, Store};
use serde_json::json;

/// The account every session belongs to.
const ACCOUNT_ID: u128 = 1;

/// The id of the session with index `idx` (0-based).
fn session_id(idx: usize) -> SessionId {
    SessionId::from_u128(idx as u128 + 1)
}

struct Args {
    db_path: PathBuf,
    n_sessions: usize,
    lines_per_batch: u64,
    events_per_batch: u64,
}

fn parse_args() -> anyhow::Result<Args> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [db_path, n_sessions, lines_per_batch, events_per_batch] = args.as_slice() else {
        bail!(
            "usage: crash_writer DB_PATH N_SESSIONS LINES_PER_BATCH EVENTS_PER_BATCH (got {args:?})"
        );
    };
    let parsed = Args {
        db_path: PathBuf::from(db_path),
        n_sessions: n_sessions.parse().context("N_SESSIONS")?,
        lines_per_batch: lines_per_batch.parse().context("LINES_PER_BATCH")?,
        events_per_batch: events_per_batch.parse().context("EVENTS_PER_BATCH")?,
    };
    ensure!(parsed.n_sessions > 0, "N_SESSIONS must be positive");
    ensure!(
        parsed.lines_per_batch > 0,
        "LINES_PER_BATCH must be positive"
    );
    ensure!(
        parsed.events_per_batch > 0,
        "EVENTS_PER_BATCH must be positive"
    );
    Ok(parsed)
}

fn main() -> anyhow::Result<()> {
    let args = parse_args()?;
    let store = Store::open(Config::new(&args.db_path))
        .with_context(|| format!("opening {}", args.db_path.display()))?;

    // An earlier run may have been killed part way through creating these: create what is missing.
    let account_id = AccountId::from_u128(ACCOUNT_ID);
    if block_on(store.get_account(account_id))?.is_none() {
        block_on(store.create_account(account_id, Vec::new(), 0))
            .context("creating the account")?;
    }
    for idx in 0..args.n_sessions {
        let id = session_id(idx);
        if block_on(store.get_session(id))?.is_none() {
            block_on(store.create_session(NewSession::new(id, account_id, 0)))
                .with_context(|| format!("creating session {idx}"))?;
        }
    }

    let handles = (0..args.n_sessions)
        .map(|idx| {
            let store = store.clone();
            let (lines, events) = (args.lines_per_batch, args.events_per_batch);
            thread::Builder::new()
                .name(format!("session-{idx}"))
                .spawn(move || run_session(&store, idx, lines, events))
                .context("spawning a session thread")
        })
        .collect::<anyhow::Result<Vec<_>>>()?;

    // The threads never return on their own; the first that does has failed (or panicked).
    loop {
        if let Some(idx) = handles.iter().position(thread::JoinHandle::is_finished) {
            let handle = handles
                .into_iter()
                .nth(idx)
                .context("finished thread vanished")?;
            return match handle.join() {
                Ok(Ok(())) => bail!("session {idx} stopped writing"),
                Ok(Err(error)) => Err(error.context(format!("session {idx}"))),
                Err(_) => bail!("session {idx}'s thread panicked"),
            };
        }
        thread::sleep(Duration::from_millis(20));
    }
}

/// Writes batch after batch to session `idx`, resuming after what is committed. Returns only on
/// error.
fn run_session(
    store: &Store,
    idx: usize,
    lines_per_batch: u64,
    events_per_batch: u64,
) -> anyhow::Result<()> {
    let id = session_id(idx);
    let files = store.session_files(id);

    let files_done = block_on(last_durable_batch(&files, lines_per_batch))?;
    let events_done = block_on(last_event_batch(store, id, events_per_batch))?;
    let mut next = match (files_done, events_done) {
        (None, None) => 0,
        (Some(f), Some(e)) if e == f => f + 1,
        (Some(f), previous) if previous.map_or(0, |e| e + 1) == f => {
            // Killed between a durable batch and its events: write them now, once.
            append_batch_events(store, id, f, events_per_batch)?;
            print_line(&format!("events {idx} {f}"))?;
            f + 1
        }
        (f, e) => bail!("durable batches end at {f:?} but event batches at {e:?}"),
    };

    loop {
        let batch = (0..lines_per_batch)
            .map(|line| {
                let text = json!({"batch": next, "line": line, "of": lines_per_batch});
                Append::new(FileName::Entries, text.to_string())
            })
            .collect();
        block_on(files.commit(batch)).with_context(|| format!("committing batch {next}"))?;
        print_line(&format!("files {idx} {next}"))?;

        append_batch_events(store, id, next, events_per_batch)?;
        print_line(&format!("events {idx} {next}"))?;
        next += 1;
    }
}

fn append_batch_events(
    store: &Store,
    id: SessionId,
    batch: u64,
    events_per_batch: u64,
) -> anyhow::Result<()> {
    let events = (0..events_per_batch)
        .map(|k| {
            let content = json!({"batch": batch, "idx": k, "of": events_per_batch});
            NewEvent::message(EventRole::User, "user", content, 0)
        })
        .collect();
    let stored = block_on(store.append_events(id, events))
        .with_context(|| format!("appending the events of batch {batch}"))?;
    ensure!(
        stored.len() as u64 == events_per_batch,
        "appended {} events, not {events_per_batch}",
        stored.len()
    );
    Ok(())
}

/// The number of the last durable batch, checking that it is whole. `None` when there is none.
async fn last_durable_batch(
    files: &seed_store::SessionFiles,
    lines_per_batch: u64,
) -> anyhow::Result<Option<u64>> {
    let lines = files
        .read(FileName::Entries)
        .await
        .context("reading entries")?;
    let Some(last) = lines.last() else {
        return Ok(None);
    };
    let value: serde_json::Value =
        serde_json::from_str(last).with_context(|| format!("parsing entry {last:?}"))?;
    let field = |name: &str| {
        value[name]
            .as_u64()
            .with_context(|| format!("entry {last:?} has no {name}"))
    };
    let (batch, line, of) = (field("batch")?, field("line")?, field("of")?);
    ensure!(
        of == lines_per_batch && line + 1 == of,
        "the last durable batch is partial: its last line is {last:?}"
    );
    Ok(Some(batch))
}

/// The batch of the newest log event, checking that it ends its batch. `None` for an empty log.
async fn last_event_batch(
    store: &Store,
    id: SessionId,
    events_per_batch: u64,
) -> anyhow::Result<Option<u64>> {
    let last_seq = store.last_seq(id).await.context("reading last_seq")?;
    if last_seq == 0 {
        return Ok(None);
    }
    let events = store
        .read_events(id, last_seq, last_seq, 1)
        .await
        .context("reading the last event")?;
    let [event] = events.as_slice() else {
        bail!("last_seq is {last_seq} but reading it gave {events:?}");
    };
    let field = |name: &str| {
        event.content[name]
            .as_u64()
            .with_context(|| format!("event {} has no {name}", event.seq))
    };
    let (batch, k, of) = (field("batch")?, field("idx")?, field("of")?);
    ensure!(
        of == events_per_batch && k + 1 == of,
        "the last event batch is partial: its last event is {}",
        event.content
    );
    Ok(Some(batch))
}

fn print_line(line: &str) -> anyhow::Result<()> {
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "{line}").context("writing to stdout")?;
    stdout.flush().context("flushing stdout")?;
    Ok(())
}
