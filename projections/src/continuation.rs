//! Continuation, the pure part: the continue_session arguments normalized and checked, and the
//! successor's projection compiled from rows the caller read.
//!
//! # Arguments
//!
//! [`normalize_input`] hoists `sources`, `transfer` and `description` that a model nested inside
//! `handoff` to the top level when the top level lacks them (the handoff schema is open, so such
//! calls are not refused). [`parse_input`] then checks every field and names the one that is
//! wrong: `reason`, `title` and `description` are required text; `handoff` is an object whose
//! known sections (purpose, currentRequest, establishedFacts, decisions, openQuestions,
//! nextActions, cautions) and any other key each hold a string or a list of strings (other keys
//! are kept under `handoff.extra`); `sources` are resources (`hm://`, `ipfs://`, `http(s)://`),
//! memory paths (`~/memory/…`) and `session_events` / `session_event` seq ranges; `transfer.plan`
//! is carry, close or omit. What needs the database (a memory file exists, a range lies inside
//! its thread, the thread is the agent's own) the caller checks.
//!
//! # The projection
//!
//! [`compile_projection`] builds the successor's first context: the lineage block, the handoff
//! (each section a `## Heading`), the source list; then, within the byte budget, the ranges
//! cited from this thread as `<excerpt>` blocks (another thread's stay in the source list) and
//! the most recent exchanges before the initiating message as `<recent_exchanges>`, less what
//! an excerpt shows; then what of this thread neither loaded, listed once in `<omitted>`
//! (linked, not loaded).
//! Every excerpt line is a transcript line ([`transcript_event_line`]), escaped with
//! [`escape_action_framing`]; so is every piece of model-written text. Its cost follows the rows
//! it is given, never the transcript's length: the caller reads the cited ranges and the recent
//! tail by index, at most [`EXCERPT_EVENTS_MAX`] and [`RECENT_EXCHANGES_EVENTS_MAX`] events.

use std::collections::BTreeSet;
use std::fmt::Write as _;

use seed_events::continuation::MANIFEST_VERSION;
use seed_events::{
    ContinueSessionInput, ContinuedFrom, Handoff, PlanTransfer, SeqRange,
    SessionContinuationManifest, SessionEvent, SessionId, Source,
};
use serde_json::Value;

use crate::transcript::{escape_action_framing, escape_attribute, transcript_event_line};

pub mod advisor;
mod arguments;
pub mod preview;
pub mod recall;
pub mod recommend;

pub use arguments::{check_range, normalize_input, parse_input, section_texts};
use recall::RecalledExcerpt;

/// The most bytes a projection takes.
pub const CONTINUATION_PROJECTION_BUDGET_BYTES: usize = 32 * 1024;
/// The most successors one session may have.
pub const MAX_SESSION_CONTINUATIONS_PER_SESSION: usize = 8;
/// The most events before the initiating message a caller reads for `<recent_exchanges>`.
pub const RECENT_EXCHANGES_EVENTS_MAX: usize = 40;
/// The most events a caller reads of one cited range: more lines than this never fit the budget
/// (a transcript line is at least 8 bytes).
pub const EXCERPT_EVENTS_MAX: usize = CONTINUATION_PROJECTION_BUDGET_BYTES / 8;
/// The most sources one call may cite.
pub const SOURCES_MAX: usize = 32;
/// The most characters of `reason`. (The successor's title and description keep the session
/// limits of [`seed_events::limits`].)
pub const REASON_CHARS_MAX: usize = 200;
/// The most bytes of handoff text (every section together).
pub const HANDOFF_BYTES_MAX: usize = 12 * 1024;
/// The most bytes one resource address or memory path may take.
pub const SOURCE_BYTES_MAX: usize = 500;

/// What the plan transfer comes to: the one asked for, or carry while the plan has unfinished
/// steps and omit otherwise.
pub fn plan_transfer(asked: Option<PlanTransfer>, plan: Option<&Value>) -> PlanTransfer {
    asked.unwrap_or_else(|| {
        if has_unfinished_steps(plan) {
            PlanTransfer::Carry
        } else {
            PlanTransfer::Omit
        }
    })
}

/// Whether a step of a plan (the `[{"step", "done"}]` checklist) is done: a missing `done`
/// reads as not done.
pub fn step_done(step: &Value) -> bool {
    step.get("done").and_then(Value::as_bool).unwrap_or(false)
}

/// The steps of a plan not done yet, in order; none when there is no plan or it is no list.
pub fn unfinished_steps(plan: Option<&Value>) -> impl Iterator<Item = &Value> {
    plan.and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|step| !step_done(step))
}

/// Whether a plan has a step not done.
pub fn has_unfinished_steps(plan: Option<&Value>) -> bool {
    unfinished_steps(plan).next().is_some()
}

/// A thread of the chain, for the lineage block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ThreadRef {
    pub session_id: SessionId,
    pub title: String,
}

/// The rows a projection is compiled from.
#[derive(Debug, Clone)]
pub struct ProjectionInput<'a> {
    pub input: &'a ContinueSessionInput,
    /// The transfer decided by [`plan_transfer`].
    pub plan: PlanTransfer,
    /// The chain, oldest first, ending with the predecessor (the caller may cut its oldest
    /// part; `origin_session_id` still names the first).
    pub lineage: &'a [ThreadRef],
    pub origin_session_id: SessionId,
    /// The predecessor's newest message written by a user or a trigger.
    pub initiating: &'a SessionEvent,
    pub predecessor_last_seq: i64,
    /// Each cited range with its events as read (at most [`EXCERPT_EVENTS_MAX`], from its
    /// start), in the order of the sources.
    pub cited: &'a [(SeqRange, Vec<SessionEvent>)],
    /// The predecessor's events right before the initiating message, oldest first (at most
    /// [`RECENT_EXCHANGES_EVENTS_MAX`]).
    pub recent: &'a [SessionEvent],
    pub budget_bytes: usize,
}

/// The successor's first context and the record of what it was built from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Projection {
    pub text: String,
    pub manifest: SessionContinuationManifest,
}

/// The most bytes one `<omitted>` line takes (two uuids' worth of text and four numbers).
const OMITTED_LINE_BYTES_MAX: usize = 200;
const OMITTED_FRAME_BYTES: usize = "<omitted>\n</omitted>\n".len();

/// The runs of seqs from 1 to `last` that no range of `loaded` covers, in order.
fn unloaded_runs<'a>(loaded: impl Iterator<Item = &'a SeqRange>, last: i64) -> Vec<(i64, i64)> {
    let mut covered: Vec<(i64, i64)> = loaded.map(|range| (range.from_seq, range.to_seq)).collect();
    covered.sort_unstable();
    let mut runs = Vec::new();
    let mut next = 1;
    for (from, to) in covered {
        if from > next && next <= last {
            runs.push((next, (from - 1).min(last)));
        }
        next = next.max(to + 1);
    }
    if next <= last {
        runs.push((next, last));
    }
    runs
}

/// Compiles the projection. See the module docs for its parts.
pub fn compile_projection(input: &ProjectionInput<'_>) -> Projection {
    compile_projection_recalling(input, &[])
}

/// Compiles the projection carrying on `recalled`, the ranges of earlier threads the
/// predecessor recalled repeatedly ([`recall::repeated_recalls`], with their events read by
/// index): each is loaded whole as an `<excerpt … recalled="…">` after the cited excerpts while
/// the budget allows, else listed as omitted with that reason (see [`recall`]).
pub fn compile_projection_recalling(
    input: &ProjectionInput<'_>,
    recalled: &[RecalledExcerpt],
) -> Projection {
    let predecessor = input
        .lineage
        .last()
        .map(|thread| thread.session_id)
        .unwrap_or(input.initiating.session_id);
    let mut text = String::new();
    write_lineage(&mut text, input, predecessor);
    write_handoff(&mut text, &input.input.handoff);
    write_sources(&mut text, &input.input.sources);

    // Room kept for the omitted list: at most one line per cited range and one for the
    // transcript before the recent exchanges.
    let reserve = OMITTED_FRAME_BYTES
        + OMITTED_LINE_BYTES_MAX * (input.cited.len() + 1)
        + recall::RECALLED_OMITTED_LINE_BYTES_MAX * recalled.len().min(recall::RECALLED_RANGES_MAX);
    let mut room = input
        .budget_bytes
        .saturating_sub(text.len())
        .saturating_sub(reserve);
    let mut shown: BTreeSet<(SessionId, i64)> = BTreeSet::new();
    let mut excerpts = Vec::new();
    let mut omitted = Vec::new();

    // Excerpts come from this thread alone (the spec: "the cited ranges of this thread");
    // a range of another thread stays in the sources list, to read with `read thread:`.
    for (range, events) in input
        .cited
        .iter()
        .filter(|(range, _)| range.thread == predecessor)
    {
        let lines: Vec<(i64, String)> = events
            .iter()
            .filter(|event| event.seq >= range.from_seq && event.seq <= range.to_seq)
            .filter(|event| !shown.contains(&(range.thread, event.seq)))
            .filter_map(|event| transcript_event_line(event).map(|line| (event.seq, line)))
            .collect();
        let frame = |from: i64, to: i64| {
            format!(
                "<excerpt thread=\"{}\" from=\"{from}\" to=\"{to}\">\n",
                range.thread
            )
        };
        let frame_bytes = frame(range.from_seq, range.to_seq).len() + "</excerpt>\n".len();
        let mut taken = 0;
        let mut used = frame_bytes;
        for (_, line) in &lines {
            if used + line.len() + 1 > room {
                break;
            }
            used += line.len() + 1;
            taken += 1;
        }
        // Whether the read reached the range's end (a caller reads at most EXCERPT_EVENTS_MAX).
        let read_whole = events.len() < EXCERPT_EVENTS_MAX
            || events.last().is_some_and(|event| event.seq >= range.to_seq);
        let shown_whole = taken == lines.len() && read_whole;
        if !shown_whole && taken == 0 {
            continue;
        }
        let shown_to = if shown_whole {
            range.to_seq
        } else {
            lines[taken - 1].0
        };
        if taken > 0 {
            text.push_str(&frame(range.from_seq, shown_to));
            for (seq, line) in &lines[..taken] {
                text.push_str(line);
                text.push('\n');
                shown.insert((range.thread, *seq));
            }
            text.push_str("</excerpt>\n");
            room = room.saturating_sub(used);
        }
        excerpts.push(SeqRange {
            thread: range.thread,
            from_seq: range.from_seq,
            to_seq: shown_to,
        });
    }

    // The ranges of earlier threads the predecessor recalled repeatedly, each whole or not at
    // all (they are of other threads, so nothing above showed them).
    let carried = recall::write_recalled(&mut text, room, recalled);
    room = room.saturating_sub(carried.used);

    // The recent exchanges: newest first while they fit, shown oldest first; what an excerpt
    // already shows is left out. Each line is made only when the ones after it fitted, so the
    // cost follows the budget, not the events given (the advisor compiles one every turn).
    let initiating_seq = input.initiating.seq;
    let recent_frame = |from: i64, to: i64| {
        format!("<recent_exchanges thread=\"{predecessor}\" from=\"{from}\" to=\"{to}\">\n")
    };
    let frame_bytes =
        recent_frame(initiating_seq, initiating_seq).len() + "</recent_exchanges>\n".len();
    let mut used = frame_bytes;
    let mut recent: Vec<(i64, String)> = Vec::new();
    for event in input
        .recent
        .iter()
        .rev()
        .filter(|event| event.seq < initiating_seq)
        .filter(|event| !shown.contains(&(predecessor, event.seq)))
    {
        let Some(line) = transcript_event_line(event) else {
            continue;
        };
        if used + line.len() + 1 > room {
            break;
        }
        used += line.len() + 1;
        recent.push((event.seq, line));
    }
    recent.reverse();
    let mut recent_exchanges = None;
    if let Some((from, _)) = recent.first() {
        let from = *from;
        let to = initiating_seq - 1;
        text.push_str(&recent_frame(from, to));
        for (_, line) in &recent {
            text.push_str(line);
            text.push('\n');
        }
        text.push_str("</recent_exchanges>\n");
        recent_exchanges = Some(SeqRange {
            thread: predecessor,
            from_seq: from,
            to_seq: to,
        });
    }
    // Listed as omitted: what of this thread before the initiating message, and of the ranges
    // cited from it, neither an excerpt nor the recent exchanges loaded.
    let cited_to = input
        .cited
        .iter()
        .filter(|(range, _)| range.thread == predecessor)
        .map(|(range, _)| range.to_seq);
    let omitted_to = cited_to.fold(initiating_seq - 1, i64::max);
    let loaded = excerpts.iter().chain(recent_exchanges.iter());
    omitted.extend(
        unloaded_runs(loaded, omitted_to)
            .into_iter()
            .map(|(from_seq, to_seq)| SeqRange {
                thread: predecessor,
                from_seq,
                to_seq,
            }),
    );

    if !omitted.is_empty() || !carried.omitted_lines.is_empty() {
        text.push_str("<omitted>\n");
        for range in &omitted {
            let _ = writeln!(
                text,
                "- thread:{} seq {}\u{2013}{} (not loaded: read thread:{} with fromSeq {} and toSeq {})",
                range.thread,
                range.from_seq,
                range.to_seq,
                range.thread,
                range.from_seq,
                range.to_seq
            );
        }
        for line in &carried.omitted_lines {
            text.push_str(line);
            text.push('\n');
        }
        text.push_str("</omitted>\n");
    }
    omitted.extend(carried.omitted);
    let text = text.trim_end().to_owned();

    let manifest = SessionContinuationManifest {
        version: MANIFEST_VERSION,
        predecessor_session_id: predecessor,
        origin_session_id: input.origin_session_id,
        initiating_event: ContinuedFrom {
            session_id: predecessor,
            event_id: input.initiating.id,
            seq: input.initiating.seq,
        },
        predecessor_last_seq: input.predecessor_last_seq,
        reason: input.input.reason.clone(),
        title: input.input.title.clone(),
        description: input.input.description.clone(),
        handoff: input.input.handoff.clone(),
        sources: input.input.sources.clone(),
        plan: input.plan,
        excerpts,
        recent_exchanges,
        omitted,
        recalled: carried.recalled,
        budget_bytes: input.budget_bytes as u64,
        projection_bytes: text.len() as u64,
        fork: None,
    };
    Projection { text, manifest }
}

fn write_lineage(text: &mut String, input: &ProjectionInput<'_>, predecessor: SessionId) {
    let title_of = |thread: &ThreadRef| {
        if thread.title.is_empty() {
            "untitled".to_owned()
        } else {
            format!("\u{201c}{}\u{201d}", escape_action_framing(&thread.title))
        }
    };
    let _ = writeln!(
        text,
        "<continuation from=\"{predecessor}\" reason=\"{}\">",
        escape_attribute(&input.input.reason)
    );
    let predecessor_title = input
        .lineage
        .last()
        .map(title_of)
        .unwrap_or_else(|| "untitled".to_owned());
    let _ = writeln!(
        text,
        "This session continues thread:{predecessor} ({predecessor_title}), carried here because: {}.",
        escape_action_framing(&input.input.reason)
    );
    let mut chain: Vec<String> = Vec::new();
    if input
        .lineage
        .first()
        .is_some_and(|first| first.session_id != input.origin_session_id)
    {
        chain.push(format!(
            "thread:{} \u{2192} \u{2026}",
            input.origin_session_id
        ));
    }
    chain.extend(
        input
            .lineage
            .iter()
            .map(|thread| format!("thread:{} ({})", thread.session_id, title_of(thread))),
    );
    chain.push("this session".to_owned());
    let _ = writeln!(text, "Lineage: {}.", chain.join(" \u{2192} "));
    text.push_str(
        "Nothing was compacted: every earlier transcript is kept whole. Below are the \
         handoff the previous agent wrote, the sources it cited, exact excerpts, and what was \
         left out; use read thread:<id> with fromSeq and toSeq to recall exact material. The \
         message after this one is the user's, copied word for word: answer it.\n",
    );
    text.push_str("</continuation>\n");
}

fn write_handoff(text: &mut String, handoff: &Handoff) {
    text.push_str("<handoff>\n");
    let extra = handoff
        .extra
        .iter()
        .map(|(key, texts)| (key.as_str(), texts.as_slice()));
    let named = handoff
        .sections()
        .into_iter()
        .map(|(_, heading, texts)| (heading, texts));
    for (heading, texts) in named.chain(extra) {
        if texts.is_empty() {
            continue;
        }
        let _ = writeln!(
            text,
            "## {}",
            escape_action_framing(&heading.replace('\n', " "))
        );
        if let [only] = texts {
            let _ = writeln!(text, "{}", escape_action_framing(only));
        } else {
            for paragraph in texts {
                let _ = writeln!(text, "- {}", escape_action_framing(paragraph));
            }
        }
    }
    text.push_str("</handoff>\n");
}

fn write_sources(text: &mut String, sources: &[Source]) {
    if sources.is_empty() {
        return;
    }
    text.push_str("<sources>\n");
    for source in sources {
        let line = match source {
            Source::Resource { uri } => format!("- {} (resource)", escape_action_framing(uri)),
            Source::Memory { path } => format!("- {} (memory file)", escape_action_framing(path)),
            Source::SessionEvents {
                thread,
                from_seq,
                to_seq,
            } => format!("- thread:{thread} seq {from_seq}\u{2013}{to_seq}"),
            Source::SessionEvent { thread, seq } => format!("- thread:{thread} seq {seq}"),
        };
        text.push_str(&line);
        text.push('\n');
    }
    text.push_str("</sources>\n");
}

/// The system prompt's section on continuation, for sessions that may continue (not delegated
/// children). Byte for byte the same every turn.
pub const SESSION_CONTINUATION_PROMPT: &str = "\
# Continuing into a new session

Transcripts here are never compacted or summarized away: every session keeps its whole \
transcript. When this transcript stops being the right working context, you carry the \
conversation into a successor session with the continue_session verb. That happens at a \
semantic boundary: the user changed the subject, a phase of the work ended, the user wants to \
focus on one thread, the user asks for it, or the context window is filling (the \
<context_usage> block tells you how full it is; act from 70%, and at 85% do it now unless the \
task is about to finish). Do not continue while side effects are unresolved, while delegated \
children are still running, or for a plain follow-up this context serves well.

Calling continue_session ends your turn: you do not answer the user's message yourself, the \
successor does. It starts from your handoff, the sources you cite with exact excerpts, and the \
user's message copied word for word. Write the handoff for a colleague who has read nothing, \
and cite exact material rather than paraphrasing it. Anything left out is still there: \
read thread:<id> (with fromSeq and toSeq) recalls exact material from any of your threads, \
including the one you were continued from.";
