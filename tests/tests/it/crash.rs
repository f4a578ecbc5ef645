//! Crash test of the store: `crash_writer` is killed with SIGKILL at random moments, and every
//! batch it reported committed must survive, whole, in order and without gaps.
//!
//! Replay a failure with `SEED_CRASH_SEED=<seed printed on stderr>`.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use futures::executor::block_on;
use seed_durable::{DurableFs, FileName};
use seed_events::SessionId;
use seed_store::{Config, Store};

const ITERATIONS: usize = 30;
const N_SESSIONS: usize = 8;
const LINES_PER_BATCH: u64 = 5;
const EVENTS_PER_BATCH: u64 = 3;
const SLEEP_MIN_MS: u64 = 10;
const SLEEP_MAX_MS: u64 = 200;

/// xorshift64: enough randomness for kill times, and replayable from its seed.
struct XorShift(u64);

impl XorShift {
    fn new(seed: u64) -> Self {
        // Zero is xorshift's one fixed point.
        XorShift(if seed == 0 {
            0x9e37_79b9_7f4a_7c15
        } else {
            seed
        })
    }

    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    /// A number in `low..=high`.
    fn between(&mut self, low: u64, high: u64) -> u64 {
        low + self.next() % (high - low + 1)
    }
}

fn seed() -> u64 {
    match std::env::var("SEED_CRASH_SEED") {
        Ok(text) => text
            .trim()
            .parse()
            .expect("SEED_CRASH_SEED must be an unsigned integer"),
        Err(_) => {
            let nanos = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .expect("clock after 1970")
                .as_nanos();
            // Fold the high bits in: the low ones alone may be coarse.
            (nanos as u64) ^ ((nanos >> 64) as u64)
        }
    }
}

fn session_id(idx: usize) -> SessionId {
    SessionId::from_u128(idx as u128 + 1)
}

/// What the child printed: per session, the highest batch reported for files and for events.
#[derive(Debug, Default, Clone)]
struct Reported {
    files: BTreeMap<usize, u64>,
    events: BTreeMap<usize, u64>,
    lines: usize,
}

impl Reported {
    fn merge(&mut self, other: &Reported) {
        for (target, source) in [
            (&mut self.files, &other.files),
            (&mut self.events, &other.events),
        ] {
            for (&idx, &batch) in source {
                let highest = target.entry(idx).or_insert(batch);
                *highest = (*highest).max(batch);
            }
        }
        self.lines += other.lines;
    }
}

/// Reads the child's stdout to its end. A line cut off by the kill (no newline) is ignored.
fn read_reports(stdout: impl Read) -> Reported {
    let mut reader = BufReader::new(stdout);
    let mut reported = Reported::default();
    let mut line = String::new();
    loop {
        line.clear();
        let n = reader
            .read_line(&mut line)
            .expect("reading the child's stdout");
        if n == 0 || !line.ends_with('\n') {
            return reported;
        }
        let words: Vec<&str> = line.split_whitespace().collect();
        let [what, idx, batch] = words.as_slice() else {
            panic!("unexpected line from the child: {line:?}");
        };
        let idx: usize = idx.parse().expect("session index");
        let batch: u64 = batch.parse().expect("batch number");
        let target = match *what {
            "files" => &mut reported.files,
            "events" => &mut reported.events,
            _ => panic!("unexpected line from the child: {line:?}"),
        };
        let highest = target.entry(idx).or_insert(batch);
        *highest = (*highest).max(batch);
        reported.lines += 1;
    }
}

fn spawn_writer(db_path: &Path) -> (Child, JoinHandle<Reported>, JoinHandle<String>) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_crash_writer"))
        .arg(db_path)
        .arg(N_SESSIONS.to_string())
        .arg(LINES_PER_BATCH.to_string())
        .arg(EVENTS_PER_BATCH.to_string())
        .env_remove("RUST_BACKTRACE")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawning crash_writer");
    let stdout = child.stdout.take().expect("the child's stdout");
    let mut stderr = child.stderr.take().expect("the child's stderr");
    let stdout_reader = thread::spawn(move || read_reports(stdout));
    let stderr_reader = thread::spawn(move || {
        let mut text = String::new();
        // Whatever was written before the kill; a read error just ends it.
        let _ = stderr.read_to_string(&mut text);
        text
    });
    (child, stdout_reader, stderr_reader)
}

/// Per session, the number of whole durable batches and of whole event batches in the store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Counts {
    file_batches: u64,
    event_batches: u64,
}

/// Checks one session's durable entries and log, returning how many batches each holds.
fn check_session(store: &Store, idx: usize) -> Counts {
    let id = session_id(idx);
    if block_on(store.get_session(id))
        .expect("get_session")
        .is_none()
    {
        // Killed before the writer created it: there is no log to read, and nothing may have
        // been reported for it (checked by the caller against these zero counts).
        let read = block_on(store.last_seq(id));
        assert!(
            matches!(read, Err(seed_store::Error::NotFound { .. })),
            "session {idx} is missing but its log reads as {read:?}"
        );
        return Counts {
            file_batches: 0,
            event_batches: 0,
        };
    }

    // Durable entries: batches 0..F, each whole, lines in order.
    let lines = block_on(store.session_files(id).read(FileName::Entries)).expect("reading entries");
    assert_eq!(
        lines.len() as u64 % LINES_PER_BATCH,
        0,
        "session {idx}: {} entry lines is not whole batches",
        lines.len()
    );
    for (position, line) in lines.iter().enumerate() {
        let position = position as u64;
        let value: serde_json::Value = serde_json::from_str(line).expect("entry is JSON");
        let expected = serde_json::json!({
            "batch": position / LINES_PER_BATCH,
            "line": position % LINES_PER_BATCH,
            "of": LINES_PER_BATCH,
        });
        assert_eq!(value, expected, "session {idx}: entry line {position}");
    }
    for file in [FileName::Documents, FileName::Tasks] {
        let other = block_on(store.session_files(id).read(file)).expect("reading a file");
        assert!(other.is_empty(), "session {idx}: {file} has lines");
    }
    let file_batches = lines.len() as u64 / LINES_PER_BATCH;

    // The log: seqs 1..=N with no gap, events in whole batches 0..E in order.
    let last_seq = block_on(store.last_seq(id)).expect("last_seq");
    let events = block_on(store.read_events(id, 1, last_seq, usize::MAX)).expect("read_events");
    assert_eq!(
        events.len() as i64,
        last_seq,
        "session {idx}: last_seq is {last_seq} but {} events read",
        events.len()
    );
    for (position, event) in events.iter().enumerate() {
        assert_eq!(event.seq, position as i64 + 1, "session {idx}: seq gap");
        let position = position as u64;
        let expected = serde_json::json!({
            "batch": position / EVENTS_PER_BATCH,
            "idx": position % EVENTS_PER_BATCH,
            "of": EVENTS_PER_BATCH,
        });
        assert_eq!(
            event.content, expected,
            "session {idx}: event seq {}",
            event.seq
        );
        assert_eq!(event.kind, "message");
    }
    assert_eq!(
        events.len() as u64 % EVENTS_PER_BATCH,
        0,
        "session {idx}: {} events is not whole batches",
        events.len()
    );
    let event_batches = events.len() as u64 / EVENTS_PER_BATCH;

    // Events follow files: at most the newest durable batch lacks its events.
    assert!(
        event_batches == file_batches || event_batches + 1 == file_batches,
        "session {idx}: {file_batches} durable batches but {event_batches} event batches"
    );
    Counts {
        file_batches,
        event_batches,
    }
}

#[test]
fn kill_nine_at_random_moments_loses_no_committed_batch() {
    let seed = seed();
    eprintln!("crash test seed: SEED_CRASH_SEED={seed}");
    let mut rng = XorShift::new(seed);

    let dir = tempfile::tempdir().expect("tempdir");
    let db_path = dir.path().join("agents.db");
    let started = Instant::now();

    let mut reported = Reported::default();
    let mut previous: Vec<Counts> = vec![
        Counts {
            file_batches: 0,
            event_batches: 0
        };
        N_SESSIONS
    ];
    let mut killed = 0;
    let mut iterations_with_progress = 0;
    // Sessions found with a durable batch whose events the kill cut off: the resume path.
    let mut cut_between_files_and_events = 0;
    for iteration in 0..ITERATIONS {
        let (mut child, stdout_reader, stderr_reader) = spawn_writer(&db_path);
        let sleep_ms = rng.between(SLEEP_MIN_MS, SLEEP_MAX_MS);
        thread::sleep(Duration::from_millis(sleep_ms));

        // The writer never stops by itself: if it has, it failed.
        let early = child.try_wait().expect("try_wait");
        if early.is_none() {
            child.kill().expect("killing the child");
        }
        let status = child.wait().expect("waiting for the child");
        let this_run = stdout_reader.join().expect("stdout reader");
        let stderr = stderr_reader.join().expect("stderr reader");
        assert!(
            early.is_none(),
            "iteration {iteration}: crash_writer exited by itself ({status}): {stderr}"
        );
        #[cfg(unix)]
        {
            use std::os::unix::process::ExitStatusExt;
            assert_eq!(
                status.signal(),
                Some(9),
                "iteration {iteration}: crash_writer was not killed ({status}): {stderr}"
            );
        }
        killed += 1;
        reported.merge(&this_run);

        let store = Store::open(Config::new(&db_path)).expect("reopening the store");
        let mut progressed = false;
        for (idx, previous) in previous.iter_mut().enumerate() {
            let counts = check_session(&store, idx);
            let before = *previous;
            assert!(
                counts.file_batches >= before.file_batches
                    && counts.event_batches >= before.event_batches,
                "iteration {iteration}, session {idx}: went back from {before:?} to {counts:?}"
            );
            progressed |= counts != before;
            if counts.event_batches < counts.file_batches {
                cut_between_files_and_events += 1;
            }
            *previous = counts;
            if let Some(&batch) = reported.files.get(&idx) {
                assert!(
                    batch < counts.file_batches,
                    "iteration {iteration}, session {idx}: durable batch {batch} was reported \
                     committed but the store has {} batches",
                    counts.file_batches
                );
            }
            if let Some(&batch) = reported.events.get(&idx) {
                assert!(
                    batch < counts.event_batches,
                    "iteration {iteration}, session {idx}: events of batch {batch} were \
                     reported committed but the store has {} event batches",
                    counts.event_batches
                );
            }
        }
        drop(store);
        if progressed {
            iterations_with_progress += 1;
        }
        eprintln!(
            "iteration {iteration}: killed after {sleep_ms} ms, {} lines reported, {} durable \
             batches in all",
            this_run.lines,
            previous.iter().map(|c| c.file_batches).sum::<u64>()
        );
    }

    let total_batches: u64 = previous.iter().map(|c| c.file_batches).sum();
    eprintln!(
        "{killed} kills, {iterations_with_progress} runs made progress, {total_batches} durable \
         batches, {cut_between_files_and_events} sessions cut between files and events, {} \
         lines reported, in {:.1?}",
        reported.lines,
        started.elapsed()
    );
    assert_eq!(killed, ITERATIONS);
    assert!(
        total_batches > ITERATIONS as u64,
        "only {total_batches} durable batches in {ITERATIONS} runs"
    );
    // A kill may land before the writer has reopened the store and read back its history (tens
    // of ms in a debug build, growing with the history), so only a share of runs must write.
    assert!(
        iterations_with_progress * 3 >= ITERATIONS,
        "only {iterations_with_progress} of {ITERATIONS} runs wrote anything"
    );
    assert_eq!(
        reported.files.len(),
        N_SESSIONS,
        "some session never reported a batch"
    );
}
