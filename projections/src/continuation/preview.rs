//! Preview and budget: what a continue_session call would create, measured before anything is.
//!
//! [`preview`] reads the very [`Projection`] that [`super::compile_projection_recalling`]
//! returns for the arguments (the caller compiles it from the rows continue_session reads), so
//! the preview and the successor cannot disagree: the projection's bytes are the text's length,
//! and its parts are the text cut at its top-level frames (escaped text holds no `<`, so a line
//! that starts with one is a frame), whose sizes add up to the whole.
//!
//! What it tells:
//! - the projection's size in bytes and in estimated tokens against the budget
//!   ([`super::CONTINUATION_PROJECTION_BUDGET_BYTES`], and its tokens);
//! - each source, in the order cited, with what loading it whole takes and what the projection
//!   holds of it: an excerpt of this thread `whole`, `cut` (its first lines), or `omitted`
//!   (none fit); a resource, a memory file or another thread's range is `listed` in
//!   `<sources>`, read on demand, and takes no room of its own;
//! - what would be omitted, each range with its transcript lines' bytes (counted over the
//!   events the caller read of it: `counted_whole` says whether that was all of them);
//! - the successor's first request: the projection and the copied message, estimated as
//!   messages ([`seed_providers::estimate`]), plus what the caller counts for the system
//!   prompt and the verbs, as a share of the model's context window when it is known;
//! - the recommended ranges ([`super::recommend`]), each saying whether the projection already
//!   loads it.

use std::collections::{BTreeMap, BTreeSet};

use seed_events::{SeqRange, SessionEvent, SessionId, Source};
use seed_providers::estimate::{BYTES_PER_TOKEN, message_tokens};
use seed_providers::{Message, UserMessage};
use serde::Serialize;

use super::Projection;
use super::recommend::Recommendation;
use crate::transcript::transcript_event_line;

/// The most events a caller reads of the omitted ranges to size them (the newest ranges of a
/// long transcript can be large; past this, a range's size counts what was read).
pub const PREVIEW_OMITTED_EVENTS_MAX: usize = 2_000;

/// What a preview is made from.
#[derive(Debug, Clone, Copy)]
pub struct PreviewInput<'a> {
    /// The projection continue_session would create from the same arguments and rows.
    pub projection: &'a Projection,
    /// The cited ranges with their events, as the projection was compiled from them.
    pub cited: &'a [(SeqRange, Vec<SessionEvent>)],
    /// Every other event the caller read (the recent tail, the recalled ranges, the omitted
    /// ranges): the omitted ranges are sized from these and `cited`'s.
    pub events: &'a [SessionEvent],
    /// The text of the message the successor gets copied word for word.
    pub message_text: &'a str,
    /// The rest of the successor's first request (its system prompt and verbs), in tokens.
    pub fixed_tokens: u64,
    /// The model's context window, when it is known.
    pub window_tokens: Option<u64>,
    /// The ranges [`super::recommend::recommend_ranges`] names for the predecessor.
    pub recommended: &'a [Recommendation],
}

/// What continue_session would create. See the module docs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Preview {
    pub projection_bytes: u64,
    pub projection_tokens: u64,
    pub budget_bytes: u64,
    pub budget_tokens: u64,
    /// The projection's top-level frames in order; their bytes add up to `projection_bytes`.
    pub parts: Vec<Part>,
    pub sources: Vec<SourceFit>,
    pub omitted: Vec<OmittedRange>,
    pub first_request: FirstRequest,
    pub recommended: Vec<RecommendedRange>,
}

/// One top-level frame of the projection (`continuation`, `handoff`, `sources`, `excerpt`,
/// `recalled_excerpt`, `recent_exchanges`, `omitted`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Part {
    pub kind: String,
    pub bytes: u64,
    /// The seqs an excerpt or the recent exchanges hold.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub from_seq: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub to_seq: Option<i64>,
}

/// What the projection holds of a source.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Loaded {
    /// An excerpt holds the whole range.
    Whole,
    /// An excerpt holds its first lines; the rest is omitted.
    Cut,
    /// Nothing of it fit; it is omitted.
    Omitted,
    /// Named in `<sources>` only, read on demand (a resource, a memory file, another thread).
    Listed,
}

/// A cited source and whether it fits.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SourceFit {
    /// Its place in the call's `sources`.
    pub index: usize,
    /// As `<sources>` names it: `thread:<id> seq 3–6`, an address, a memory path.
    pub source: String,
    /// The excerpt loading it whole would take (frame included); none for a listed source.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bytes: Option<u64>,
    /// What the projection's excerpt of it takes.
    pub loaded_bytes: u64,
    pub loaded: Loaded,
    /// Whether nothing of it is left out.
    pub fits: bool,
    /// The last seq loaded, for a cut excerpt.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub loaded_to_seq: Option<i64>,
}

/// A range the projection lists as omitted (linked, not loaded).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct OmittedRange {
    pub thread: SessionId,
    pub from_seq: i64,
    pub to_seq: i64,
    /// The bytes its transcript lines take, over the events counted.
    pub bytes: u64,
    pub n_events_counted: u64,
    /// Whether every event of the range was counted (false: `bytes` is what was read of it).
    pub counted_whole: bool,
}

/// The successor's first request, estimated.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FirstRequest {
    pub tokens: u64,
    pub projection_tokens: u64,
    pub message_tokens: u64,
    /// The system prompt and the verbs.
    pub fixed_tokens: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub window_tokens: Option<u64>,
    /// `tokens` as a percentage of the window, to a tenth.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub window_percent: Option<f64>,
}

/// A range worth citing, and whether the projection already loads it whole.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RecommendedRange {
    pub from_seq: i64,
    pub to_seq: i64,
    pub reasons: Vec<String>,
    pub loaded: bool,
}

/// The preview of `input.projection`. See the module docs.
pub fn preview(input: &PreviewInput<'_>) -> Preview {
    let projection = input.projection;
    let manifest = &projection.manifest;
    let predecessor = manifest.predecessor_session_id;
    let parts = parts(&projection.text);
    debug_assert_eq!(
        parts.iter().map(|part| part.bytes).sum::<u64>(),
        projection.text.len() as u64,
        "the parts of a projection add up to it"
    );

    let sources = source_fits(input, &parts);

    // Every event read, once, by thread and seq.
    let mut lines: BTreeMap<(SessionId, i64), u64> = BTreeMap::new();
    for event in input
        .cited
        .iter()
        .flat_map(|(_, events)| events)
        .chain(input.events)
    {
        let bytes = transcript_event_line(event).map_or(0, |line| line.len() as u64 + 1);
        lines.insert((event.session_id, event.seq), bytes);
    }
    let omitted = manifest
        .omitted
        .iter()
        .map(|range| {
            let counted =
                lines.range((range.thread, range.from_seq)..=(range.thread, range.to_seq));
            let (n_events, bytes) =
                counted.fold((0, 0), |(n, sum), (_, bytes)| (n + 1, sum + bytes));
            OmittedRange {
                thread: range.thread,
                from_seq: range.from_seq,
                to_seq: range.to_seq,
                bytes,
                n_events_counted: n_events,
                counted_whole: n_events == (range.to_seq - range.from_seq + 1).max(0) as u64,
            }
        })
        .collect();

    let projection_tokens = text_tokens(&projection.text);
    let message_tokens = text_tokens(input.message_text);
    let tokens = input.fixed_tokens + projection_tokens + message_tokens;
    let first_request = FirstRequest {
        tokens,
        projection_tokens,
        message_tokens,
        fixed_tokens: input.fixed_tokens,
        window_tokens: input.window_tokens,
        window_percent: input
            .window_tokens
            .filter(|window| *window > 0)
            .map(|window| (u128::from(tokens) * 1000 / u128::from(window)) as f64 / 10.0),
    };

    // What the projection loads of this thread, seq by seq.
    let loaded: BTreeSet<i64> = manifest
        .excerpts
        .iter()
        .chain(manifest.recent_exchanges.iter())
        .filter(|range| range.thread == predecessor)
        .flat_map(|range| range.from_seq..=range.to_seq)
        .collect();
    let recommended = input
        .recommended
        .iter()
        .map(|recommendation| RecommendedRange {
            from_seq: recommendation.from_seq,
            to_seq: recommendation.to_seq,
            reasons: recommendation.why.iter().map(ToString::to_string).collect(),
            loaded: (recommendation.from_seq..=recommendation.to_seq)
                .all(|seq| loaded.contains(&seq)),
        })
        .collect();

    Preview {
        projection_bytes: projection.text.len() as u64,
        projection_tokens,
        budget_bytes: manifest.budget_bytes,
        budget_tokens: manifest.budget_bytes.div_ceil(BYTES_PER_TOKEN),
        parts,
        sources,
        omitted,
        first_request,
        recommended,
    }
}

/// A user message of `text`, in tokens, as the estimator counts it.
fn text_tokens(text: &str) -> u64 {
    message_tokens(&Message::User(UserMessage::new(text)))
}

/// The projection cut at its top-level frames: a line starting `<name` opens one, the line
/// `</name>` closes it. Escaped text never starts a line with `<`, so nothing inside a frame
/// is taken for one.
fn parts(text: &str) -> Vec<Part> {
    let mut parts: Vec<Part> = Vec::new();
    let mut open = false;
    for line in text.split_inclusive('\n') {
        if !open && line.starts_with('<') && !line.starts_with("</") {
            parts.push(frame_part(line));
            open = true;
        } else if parts.is_empty() {
            // Text before any frame (a projection always starts with one).
            parts.push(Part {
                kind: "text".to_owned(),
                bytes: 0,
                from_seq: None,
                to_seq: None,
            });
        }
        if line.starts_with("</") {
            open = false;
        }
        if let Some(part) = parts.last_mut() {
            part.bytes += line.len() as u64;
        }
    }
    parts
}

/// The part a frame's opening line starts, with its `from` and `to` seqs.
fn frame_part(line: &str) -> Part {
    let name: String = line[1..]
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
        .collect();
    let attribute = |key: &str| {
        let start = line.find(&format!(" {key}=\""))? + key.len() + 3;
        let end = start + line[start..].find('"')?;
        line[start..end].parse::<i64>().ok()
    };
    let kind = if name == "excerpt" && line.contains(" recalled=\"") {
        "recalled_excerpt".to_owned()
    } else {
        name
    };
    let seqs = matches!(
        kind.as_str(),
        "excerpt" | "recalled_excerpt" | "recent_exchanges"
    );
    Part {
        kind,
        bytes: 0,
        from_seq: seqs.then(|| attribute("from")).flatten(),
        to_seq: seqs.then(|| attribute("to")).flatten(),
    }
}

/// Each source with what loading it whole takes and what the projection holds of it. The
/// excerpts of this thread are in the manifest in the order of their sources, a source that
/// got no excerpt (nothing fit) skipped; so each is matched in turn by its first seq.
fn source_fits(input: &PreviewInput<'_>, parts: &[Part]) -> Vec<SourceFit> {
    let manifest = &input.projection.manifest;
    let predecessor = manifest.predecessor_session_id;
    let mut excerpts = manifest.excerpts.iter().peekable();
    let mut cited = input.cited.iter();
    let mut excerpt_parts = parts
        .iter()
        .filter(|part| part.kind == "excerpt")
        .peekable();
    manifest
        .sources
        .iter()
        .enumerate()
        .map(|(index, source)| {
            let listed = SourceFit {
                index,
                source: source_name(source),
                bytes: None,
                loaded_bytes: 0,
                loaded: Loaded::Listed,
                fits: true,
                loaded_to_seq: None,
            };
            let Some(range) = source.range().filter(|range| range.thread == predecessor) else {
                return listed;
            };
            // The caller read this thread's cited ranges in the order of the sources.
            let events = cited
                .find(|(read, _)| *read == range)
                .map(|(_, events)| events.as_slice())
                .unwrap_or_default();
            let frame = format!(
                "<excerpt thread=\"{}\" from=\"{}\" to=\"{}\">\n</excerpt>\n",
                range.thread, range.from_seq, range.to_seq
            );
            let whole = frame.len() as u64
                + events
                    .iter()
                    .filter(|event| event.seq >= range.from_seq && event.seq <= range.to_seq)
                    .filter_map(transcript_event_line)
                    .map(|line| line.len() as u64 + 1)
                    .sum::<u64>();
            let excerpt = excerpts
                .next_if(|excerpt| {
                    excerpt.thread == range.thread && excerpt.from_seq == range.from_seq
                })
                .copied();
            let Some(excerpt) = excerpt else {
                return SourceFit {
                    bytes: Some(whole),
                    loaded: Loaded::Omitted,
                    fits: false,
                    ..listed
                };
            };
            // An excerpt of a range with nothing to show has no frame in the text.
            let loaded_bytes = excerpt_parts
                .next_if(|part| {
                    part.from_seq == Some(excerpt.from_seq) && part.to_seq == Some(excerpt.to_seq)
                })
                .map_or(0, |part| part.bytes);
            let whole_loaded = excerpt.to_seq >= range.to_seq;
            SourceFit {
                // Loaded whole, it takes what its excerpt takes (the projection's last part has
                // no newline after it).
                bytes: Some(if whole_loaded && loaded_bytes > 0 {
                    loaded_bytes
                } else {
                    whole
                }),
                loaded_bytes,
                loaded: if whole_loaded {
                    Loaded::Whole
                } else {
                    Loaded::Cut
                },
                fits: whole_loaded,
                loaded_to_seq: (!whole_loaded).then_some(excerpt.to_seq),
                ..listed
            }
        })
        .collect()
}

/// A source as `<sources>` names it.
fn source_name(source: &Source) -> String {
    match source {
        Source::Resource { uri } => uri.clone(),
        Source::Memory { path } => path.clone(),
        Source::SessionEvents {
            thread,
            from_seq,
            to_seq,
        } => format!("thread:{thread} seq {from_seq}\u{2013}{to_seq}"),
        Source::SessionEvent { thread, seq } => format!("thread:{thread} seq {seq}"),
    }
}

#[cfg(test)]
mod tests;
