//! The `projections` suite: assembling a request over sessions of growing history and importing
//! pending events, pure and in memory (no disk, so no SQLite floor).

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use anyhow::bail;
use seed_durable::context::{MessageCache, block_messages, conversation_cached, request_messages};
use seed_projections::import::{ImportMode, RunView, plan_import};
use seed_tests::bench::Row;
use seed_tests::projections_bench;

use crate::{ROUNDS, selected};

/// How long each timed loop of the `projections` suite runs; the fastest of [`ROUNDS`] loops
/// counts.
const PROJECTION_LOOP: Duration = Duration::from_millis(200);

/// The context of every request row but `no reset`: the whole of the smallest session, and the
/// entries since the newest reset of the others.
const CONTEXT_ENTRIES: usize = 100;

/// Request assembly over sessions of growing history, and an import; see the crate docs in
/// main.rs.
pub(crate) fn suite(filter: &str) -> anyhow::Result<Vec<Row>> {
    let blocks = block_messages(&projections_bench::turn_blocks());
    let request_micros = |name: &str, n_entries: usize, context_entries: usize| {
        let session = projections_bench::session(n_entries, context_entries);
        // As the harness does: the messages of the context are built once and shared by every
        // request (a warm cache), so a request costs the derivation and a reference each.
        let cache = std::cell::RefCell::new(MessageCache::default());
        let assemble = || {
            let context = conversation_cached(&session.state.entries, &mut cache.borrow_mut());
            request_messages(context, session.input_entry_id, &blocks)
        };
        let n_messages = assemble().len();
        let micros = fastest_of(|| micros_per_call(assemble));
        if std::env::var_os("SEED_BENCH_VERBOSE").is_some() {
            eprintln!(
                "{name}: {n_entries} entries, {} in the context, {n_messages} messages \
                 per request, {micros:.2} us",
                session.context_entries(),
            );
        }
        micros
    };

    let mut rows = Vec::new();
    // The smallest case is this suite's floor: it always runs.
    let smallest = request_micros("projections request 100", 100, CONTEXT_ENTRIES);
    rows.push(Row::ratio(
        "projections request 100",
        smallest,
        "us/request",
        smallest,
    ));
    for (name, n_entries, context_entries) in [
        ("projections request 10000", 10_000, CONTEXT_ENTRIES),
        ("projections request 100000", 100_000, CONTEXT_ENTRIES),
        ("projections request 10000 no reset", 10_000, 10_000),
    ] {
        if selected(name, filter) {
            let micros = request_micros(name, n_entries, context_entries);
            rows.push(Row::ratio(name, micros, "us/request", smallest));
        }
    }

    let name = "projections import 1000";
    if selected(name, filter) {
        let pending = projections_bench::pending_log(10_000, 1_000);
        let waiting = BTreeSet::new();
        let import = || {
            plan_import(
                &pending.log,
                &pending.store,
                &pending.sync,
                RunView {
                    own_event_ids: &pending.own_event_ids,
                    waiting_event_ids: &waiting,
                    attached: &seed_projections::import::NO_FILES,
                },
                false,
            )
        };
        let plan = import();
        if plan.mode != ImportMode::Append || plan.entries.len() != 999 {
            bail!(
                "{name}: expected 999 entries appended, planned {:?} with {}",
                plan.mode,
                plan.entries.len()
            );
        }
        let micros = fastest_of(|| micros_per_call(import));
        if std::env::var_os("SEED_BENCH_VERBOSE").is_some() {
            eprintln!(
                "{name}: {} events in the log, {} entries planned, {micros:.2} us",
                pending.log.len(),
                plan.entries.len()
            );
        }
        rows.push(Row::figure(name, micros, "us/import"));
    }
    Ok(rows)
}

/// The mean time of one `call`, in microseconds, over a loop of [`PROJECTION_LOOP`] (after one
/// call to warm up). What `call` returns is dropped inside the loop: its cost counts.
fn micros_per_call<T>(mut call: impl FnMut() -> T) -> f64 {
    std::hint::black_box(call());
    let started = Instant::now();
    let mut n_calls: u32 = 0;
    while n_calls < 3 || started.elapsed() < PROJECTION_LOOP {
        std::hint::black_box(call());
        n_calls += 1;
    }
    started.elapsed().as_secs_f64() * 1e6 / f64::from(n_calls)
}

/// The smallest of [`ROUNDS`] measurements of a time.
fn fastest_of(mut measure: impl FnMut() -> f64) -> f64 {
    (0..ROUNDS).map(|_| measure()).fold(f64::INFINITY, f64::min)
}
