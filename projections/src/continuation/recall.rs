//! Recall telemetry, the pure part: which edge a `read thread:` call counts against and which
//! of the seqs it read that edge's projection left out; which ranges a predecessor recalled
//! repeatedly; and those ranges carried into the next projection as excerpts.
//!
//! # Which edge counts
//!
//! A reader's lineage is the chain of continuation edges behind it, newest first: the edge that
//! made the reader, the one that made its predecessor, and so on. A read of `thread:T` counts
//! against the edge in that chain whose predecessor is T (the edge out of T on the reader's
//! path): reading the immediate predecessor counts against the edge that made the reader;
//! reading an older ancestor counts against the edge out of that ancestor, whose projection is
//! where T's material was first left out. A thread that is not an ancestor of the reader (the
//! reader itself, a sibling, any other session) counts against nothing.
//!
//! # What counts
//!
//! Only the seqs the read returned that the edge's projection listed as omitted (a range over
//! the budget, the cut end of an excerpt, the transcript before the recent exchanges) and that
//! no later projection on the reader's path loaded again as a recalled excerpt. Everything a
//! projection carried in full (an excerpt, the recent exchanges, the copied message) never
//! counts.
//!
//! # What a later continuation carries on
//!
//! When the reader itself continues, the seqs it recalled in two or more distinct read calls
//! ([`repeated_recalls`]) are loaded into its successor's projection as
//! `<excerpt … recalled="N times after the last continuation">` blocks, whole, after the cited
//! excerpts and before the recent exchanges, while the budget allows; one that does not fit is
//! listed under `<omitted>` with that reason. Both are in the manifest's `recalled`.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use seed_events::continuation::RecalledRange;
use seed_events::{ContinuationId, SeqRange, SessionContinuationManifest, SessionEvent, SessionId};

use crate::transcript::transcript_event_line;

/// The most recalled ranges one projection carries on (loaded or listed as omitted); past it,
/// the most recalled are kept.
pub const RECALLED_RANGES_MAX: usize = 8;
/// The fewest distinct read calls that make a range worth carrying on.
pub const RECALLS_TO_CARRY_MIN: u32 = 2;
/// The most bytes one `<omitted>` line of a recalled range takes (two uuids' worth of text,
/// five numbers and the reason).
pub(crate) const RECALLED_OMITTED_LINE_BYTES_MAX: usize = 320;

/// An edge of the reader's lineage.
#[derive(Debug, Clone, Copy)]
pub struct LineageEdge<'a> {
    pub continuation_id: ContinuationId,
    pub manifest: &'a SessionContinuationManifest,
}

/// What a read recalled that a projection had left out: the edge it counts against, and the
/// runs of seqs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recall {
    pub continuation_id: ContinuationId,
    pub thread: SessionId,
    /// Inclusive `(from_seq, to_seq)` runs, in order, disjoint.
    pub ranges: Vec<(i64, i64)>,
}

/// What a read of `thread`'s seqs `from_seq..=to_seq` (the events it returned) recalled, given
/// the reader's lineage, newest edge first. `None` when the thread is no ancestor of the reader
/// or the read returned nothing any projection on the path left out.
pub fn recall_of_read(
    lineage: &[LineageEdge<'_>],
    thread: SessionId,
    from_seq: i64,
    to_seq: i64,
) -> Option<Recall> {
    let out_of_thread = lineage
        .iter()
        .position(|edge| edge.manifest.predecessor_session_id == thread)?;
    let edge = lineage[out_of_thread];
    let omitted = edge
        .manifest
        .omitted
        .iter()
        .filter(|range| range.thread == thread)
        .map(|range| (range.from_seq, range.to_seq));
    let mut ranges = intersect(normalized(omitted), (from_seq, to_seq));
    // A later projection on the path that loaded some of it again carried it in full.
    let reloaded = lineage[..out_of_thread]
        .iter()
        .flat_map(|later| later.manifest.recalled.iter())
        .filter(|recalled| recalled.loaded && recalled.range.thread == thread)
        .map(|recalled| (recalled.range.from_seq, recalled.range.to_seq));
    for run in normalized(reloaded) {
        ranges = subtract(&ranges, run);
    }
    (!ranges.is_empty()).then_some(Recall {
        continuation_id: edge.continuation_id,
        thread,
        ranges,
    })
}

/// One recorded recall of the predecessor that is continuing: one read call's run of seqs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecallRow {
    pub thread: SessionId,
    pub tool_call_id: String,
    pub from_seq: i64,
    pub to_seq: i64,
}

/// A range recalled repeatedly: every seq of it by `times` distinct read calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RepeatedRecall {
    pub range: SeqRange,
    pub times: u32,
}

/// The ranges recalled in at least [`RECALLS_TO_CARRY_MIN`] distinct read calls: each maximal
/// run of seqs of one thread recalled by the same number of calls, at most
/// [`RECALLED_RANGES_MAX`] (the most recalled kept), in thread and seq order.
pub fn repeated_recalls(rows: &[RecallRow]) -> Vec<RepeatedRecall> {
    let mut by_thread: BTreeMap<SessionId, Vec<&RecallRow>> = BTreeMap::new();
    for row in rows.iter().filter(|row| row.from_seq <= row.to_seq) {
        by_thread.entry(row.thread).or_default().push(row);
    }
    let mut repeated = Vec::new();
    for (thread, rows) in by_thread {
        // Every run starts at a row's start or right after a row's end.
        let bounds: BTreeSet<i64> = rows
            .iter()
            .flat_map(|row| [row.from_seq, row.to_seq + 1])
            .collect();
        let bounds: Vec<i64> = bounds.into_iter().collect();
        let mut current: Option<RepeatedRecall> = None;
        for pair in bounds.windows(2) {
            let (from, to) = (pair[0], pair[1] - 1);
            let calls: BTreeSet<&str> = rows
                .iter()
                .filter(|row| row.from_seq <= from && to <= row.to_seq)
                .map(|row| row.tool_call_id.as_str())
                .collect();
            let times = u32::try_from(calls.len()).unwrap_or(u32::MAX);
            match &mut current {
                Some(run) if run.times == times && run.range.to_seq + 1 == from => {
                    run.range.to_seq = to;
                }
                _ => {
                    repeated.extend(current.take());
                    current = Some(RepeatedRecall {
                        range: SeqRange {
                            thread,
                            from_seq: from,
                            to_seq: to,
                        },
                        times,
                    });
                }
            }
        }
        repeated.extend(current);
    }
    repeated.retain(|recall| recall.times >= RECALLS_TO_CARRY_MIN);
    repeated.sort_by_key(|recall| std::cmp::Reverse(recall.times));
    repeated.truncate(RECALLED_RANGES_MAX);
    repeated.sort_by_key(|recall| (recall.range.thread, recall.range.from_seq));
    repeated
}

/// A repeatedly recalled range with its events as read (at most
/// [`super::EXCERPT_EVENTS_MAX`], from its start).
#[derive(Debug, Clone, PartialEq)]
pub struct RecalledExcerpt {
    pub recall: RepeatedRecall,
    pub events: Vec<SessionEvent>,
}

/// What the recalled ranges came to in a projection.
#[derive(Debug, Default)]
pub(crate) struct Carried {
    pub recalled: Vec<RecalledRange>,
    /// The lines for `<omitted>` of those that did not fit.
    pub omitted_lines: Vec<String>,
    pub omitted: Vec<SeqRange>,
    /// The bytes written.
    pub used: usize,
}

/// The reason a recalled range is carried on, as its frame and its omitted line say it.
fn recalled_note(times: u32) -> String {
    format!("{times} times after the last continuation")
}

/// Writes each recalled range into `text` as a whole `<excerpt>` while it fits `room`; the
/// rest are listed as omitted.
pub(crate) fn write_recalled(
    text: &mut String,
    room: usize,
    recalled: &[RecalledExcerpt],
) -> Carried {
    let mut carried = Carried::default();
    for excerpt in recalled.iter().take(RECALLED_RANGES_MAX) {
        let RepeatedRecall { range, times } = excerpt.recall;
        let lines: Vec<String> = excerpt
            .events
            .iter()
            .filter(|event| event.seq >= range.from_seq && event.seq <= range.to_seq)
            .filter_map(transcript_event_line)
            .collect();
        let read_whole = excerpt
            .events
            .last()
            .is_some_and(|event| event.seq >= range.to_seq);
        let block = recalled_block(range, times, &lines);
        let loaded = read_whole && !lines.is_empty() && carried.used + block.len() <= room;
        if loaded {
            text.push_str(&block);
            carried.used += block.len();
        } else {
            let mut line = String::new();
            let _ = write!(
                line,
                "- thread:{} seq {}\u{2013}{} (recalled {}; over the budget, not loaded: read \
                 thread:{} with fromSeq {} and toSeq {})",
                range.thread,
                range.from_seq,
                range.to_seq,
                recalled_note(times),
                range.thread,
                range.from_seq,
                range.to_seq
            );
            carried.omitted_lines.push(line);
            carried.omitted.push(range);
        }
        carried.recalled.push(RecalledRange {
            range,
            times,
            loaded,
        });
    }
    carried
}

/// A recalled range's `<excerpt>` block, as a projection holds it: its frame, its transcript
/// lines, its close.
fn recalled_block(range: SeqRange, times: u32, lines: &[String]) -> String {
    let mut block = format!(
        "<excerpt thread=\"{}\" from=\"{}\" to=\"{}\" recalled=\"{}\">\n",
        range.thread,
        range.from_seq,
        range.to_seq,
        recalled_note(times)
    );
    for line in lines {
        block.push_str(line);
        block.push('\n');
    }
    block.push_str("</excerpt>\n");
    block
}

/// Where a projection (`projection_text`) does not hold the recalled ranges its manifest says
/// it loaded (`recalled`) byte for byte as the events they cite (`events`, of the earlier
/// threads, read for those ranges), for `seed fsck`. Empty when every one is exact.
pub fn recalled_findings(
    projection_text: &str,
    recalled: &[RecalledRange],
    events: &[SessionEvent],
) -> Vec<String> {
    let mut findings = Vec::new();
    for recalled in recalled.iter().filter(|recalled| recalled.loaded) {
        let range = recalled.range;
        let what = format!(
            "the recalled <excerpt> of thread {} seq {}\u{2013}{}",
            range.thread, range.from_seq, range.to_seq
        );
        let cited: BTreeMap<i64, &SessionEvent> = events
            .iter()
            .filter(|event| event.session_id == range.thread)
            .filter(|event| event.seq >= range.from_seq && event.seq <= range.to_seq)
            .map(|event| (event.seq, event))
            .collect();
        if let Some(seq) = (range.from_seq..=range.to_seq).find(|seq| !cited.contains_key(seq)) {
            findings.push(format!("{what} cites seq {seq}, which its thread lacks"));
            continue;
        }
        let lines: Vec<String> = cited
            .values()
            .filter_map(|event| transcript_event_line(event))
            .collect();
        if !projection_text.contains(&recalled_block(range, recalled.times, &lines)) {
            findings.push(format!(
                "{what} is not in its projection byte for byte as the events it cites"
            ));
        }
    }
    findings
}

/// The runs sorted and merged where they touch or overlap.
fn normalized(runs: impl Iterator<Item = (i64, i64)>) -> Vec<(i64, i64)> {
    let mut runs: Vec<(i64, i64)> = runs.filter(|(from, to)| from <= to).collect();
    runs.sort_unstable();
    let mut merged: Vec<(i64, i64)> = Vec::with_capacity(runs.len());
    for (from, to) in runs {
        match merged.last_mut() {
            Some(last) if from <= last.1.saturating_add(1) => last.1 = last.1.max(to),
            _ => merged.push((from, to)),
        }
    }
    merged
}

/// The parts of `runs` inside `window`.
fn intersect(runs: Vec<(i64, i64)>, window: (i64, i64)) -> Vec<(i64, i64)> {
    runs.into_iter()
        .map(|(from, to)| (from.max(window.0), to.min(window.1)))
        .filter(|(from, to)| from <= to)
        .collect()
}

/// `runs` less `cut`.
fn subtract(runs: &[(i64, i64)], cut: (i64, i64)) -> Vec<(i64, i64)> {
    let mut left = Vec::with_capacity(runs.len() + 1);
    for &(from, to) in runs {
        if to < cut.0 || from > cut.1 {
            left.push((from, to));
            continue;
        }
        if from < cut.0 {
            left.push((from, cut.0 - 1));
        }
        if to > cut.1 {
            left.push((cut.1 + 1, to));
        }
    }
    left
}
