//! Recommended ranges: the seq ranges of a session's log worth citing in a continuation, each
//! with why, from what the log shows.
//!
//! [`recommend_ranges`] reads the session's newest events (the caller reads at most
//! [`RECOMMEND_EVENTS_MAX`], oldest first) and the plan, and applies four rules:
//!
//! 1. **The user's message refers back** ([`Why::Quoted`], [`Why::NamedFile`]): text the
//!    newest user message quotes (a `"…"` or `“…”` phrase of at least [`QUOTE_CHARS_MIN`]
//!    characters, or its `>` lines) found in an earlier message, and files it names (a word
//!    with a `/`, or a `name.ext`) found in an earlier event: the newest such event, with its
//!    call or result.
//! 2. **Failed calls** ([`Why::FailedCall`]): a tool call whose result is an error and that no
//!    later call of the same verb with the same arguments retried successfully; from the call
//!    to its result.
//! 3. **Unfinished plan steps** ([`Why::UnfinishedStep`]): for each step of the plan not done,
//!    from the plan call that last created or changed it (its done flag) to the newest event
//!    before the user's message: where it was set, and the work since. A step no plan call in
//!    the events sets (a carried plan, or one set before the events read) has none.
//! 4. **The newest exchanges** ([`Why::NewestExchanges`]): from the [`NEWEST_EXCHANGES`]-th
//!    person message before the newest one (the first event read when there are fewer) to the
//!    event before the newest one, at most [`NEWEST_EXCHANGES_EVENTS_MAX`] events.
//!
//! Ranges that overlap are merged, with every reason. At most
//! [`RECOMMENDED_RANGES_MAX`] are kept, by the rules' order above (the user's references
//! first) and then the newest first; they are listed by seq.

use std::collections::BTreeMap;

use seed_events::{EventBody, EventRole, SessionEvent, body::kind};
use serde_json::Value;

use crate::continuation::step_done;

/// The most events, newest first, a caller reads for the rules.
pub const RECOMMEND_EVENTS_MAX: usize = 400;
/// The most ranges recommended.
pub const RECOMMENDED_RANGES_MAX: usize = 5;
/// How many exchanges before the newest user message rule 4 names.
pub const NEWEST_EXCHANGES: usize = 2;
/// The most events rule 4 names: in a long agentic exchange the newest events matter most.
pub const NEWEST_EXCHANGES_EVENTS_MAX: usize = 12;
/// The fewest characters a quoted phrase has to be looked for.
pub const QUOTE_CHARS_MIN: usize = 4;
/// The most characters of a quote or a step a reason repeats.
const WHY_CHARS_MAX: usize = 60;
/// The plan verb's name, whose calls set the plan.
pub const PLAN_VERB: &str = "plan";

/// Why a range is worth citing. The variants are in the rules' order, which is also the order
/// of priority when there are more ranges than [`RECOMMENDED_RANGES_MAX`].
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Why {
    /// The newest user message quotes text this message holds.
    Quoted { quote: String },
    /// The newest user message names a file this event names.
    NamedFile { path: String },
    /// A call of `verb` failed and was not retried.
    FailedCall { verb: String },
    /// Where the plan set an unfinished step, and the work since.
    UnfinishedStep { step: String },
    /// The exchanges right before the newest user message.
    NewestExchanges,
}

impl Why {
    /// The rule's rank: lower is kept first.
    fn rank(&self) -> u8 {
        match self {
            Why::Quoted { .. } | Why::NamedFile { .. } => 0,
            Why::FailedCall { .. } => 1,
            Why::UnfinishedStep { .. } => 2,
            Why::NewestExchanges => 3,
        }
    }
}

impl std::fmt::Display for Why {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Why::Quoted { quote } => {
                write!(
                    f,
                    "the user's message quotes \u{201c}{}\u{201d}",
                    short(quote)
                )
            }
            Why::NamedFile { path } => write!(f, "the user's message names {}", short(path)),
            Why::FailedCall { verb } => write!(f, "{} failed and was not retried", short(verb)),
            Why::UnfinishedStep { step } => {
                write!(f, "unfinished plan step \u{201c}{}\u{201d}", short(step))
            }
            Why::NewestExchanges => f.write_str("the newest exchanges"),
        }
    }
}

/// At most [`WHY_CHARS_MAX`] characters of `text`, with `…` when cut.
fn short(text: &str) -> String {
    if text.chars().count() <= WHY_CHARS_MAX {
        return text.to_owned();
    }
    let mut cut: String = text.chars().take(WHY_CHARS_MAX - 1).collect();
    cut.push('\u{2026}');
    cut
}

/// A range of this session's log worth citing, with every reason it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recommendation {
    pub from_seq: i64,
    pub to_seq: i64,
    /// In the rules' order, each once.
    pub why: Vec<Why>,
}

impl Recommendation {
    /// The reasons as one line: `the newest exchanges; read failed and was not retried`.
    pub fn reasons(&self) -> String {
        self.why
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join("; ")
    }
}

/// What the rules read.
#[derive(Debug, Clone, Copy)]
pub struct RecommendInput<'a> {
    /// The session's newest events, oldest first.
    pub events: &'a [SessionEvent],
    /// The session's plan, a JSON array of `{"step", "done"}`.
    pub plan: Option<&'a Value>,
}

/// The ranges worth citing, by seq. See the module docs for the rules.
pub fn recommend_ranges(input: &RecommendInput<'_>) -> Vec<Recommendation> {
    merge_and_cap(found_ranges(input), RECOMMENDED_RANGES_MAX)
}

/// Every range each rule finds, with its reason, before merging and the cap.
fn found_ranges(input: &RecommendInput<'_>) -> Vec<(i64, i64, Why)> {
    let log = Log::of(input.events);
    let mut found: Vec<(i64, i64, Why)> = Vec::new();
    let newest_user = log.newest_person_message();
    if let Some(user_idx) = newest_user {
        found.extend(log.referred_to(user_idx));
    }
    found.extend(log.failed_not_retried());
    found.extend(log.unfinished_steps(input.plan, newest_user));
    if let Some(user_idx) = newest_user {
        found.extend(log.newest_exchanges(user_idx));
    }
    found
}

/// Merges ranges that overlap, keeps the `cap` best (by their best reason's rule,
/// then the newest), and lists them by seq.
fn merge_and_cap(mut found: Vec<(i64, i64, Why)>, cap: usize) -> Vec<Recommendation> {
    found.sort_by_key(|a| (a.0, a.1));
    let mut merged: Vec<Recommendation> = Vec::new();
    for (from_seq, to_seq, why) in found {
        match merged.last_mut() {
            Some(last) if from_seq <= last.to_seq => {
                last.to_seq = last.to_seq.max(to_seq);
                last.why.push(why);
            }
            _ => merged.push(Recommendation {
                from_seq,
                to_seq,
                why: vec![why],
            }),
        }
    }
    for recommendation in &mut merged {
        recommendation.why.sort();
        recommendation.why.dedup();
    }
    let best = |recommendation: &Recommendation| {
        recommendation
            .why
            .iter()
            .map(Why::rank)
            .min()
            .unwrap_or(u8::MAX)
    };
    merged.sort_by(|a, b| best(a).cmp(&best(b)).then(b.from_seq.cmp(&a.from_seq)));
    merged.truncate(cap);
    merged.sort_by_key(|recommendation| recommendation.from_seq);
    merged
}

/// The events with their bodies, and where each call's result is.
struct Log<'a> {
    events: &'a [SessionEvent],
    bodies: Vec<EventBody>,
    /// A call's index to its result's index.
    result_of: BTreeMap<usize, usize>,
    /// A result's index to its call's index.
    call_of: BTreeMap<usize, usize>,
}

impl<'a> Log<'a> {
    fn of(events: &'a [SessionEvent]) -> Log<'a> {
        let bodies: Vec<EventBody> = events.iter().map(SessionEvent::body).collect();
        let mut call_by_id: BTreeMap<&str, usize> = BTreeMap::new();
        let mut result_of = BTreeMap::new();
        let mut call_of = BTreeMap::new();
        for (idx, body) in bodies.iter().enumerate() {
            match body {
                EventBody::ToolCall(call) => {
                    call_by_id.insert(call.id.as_str(), idx);
                }
                EventBody::ToolResult(result) => {
                    if let Some(&call_idx) = call_by_id.get(result.tool_call_id.as_str()) {
                        result_of.entry(call_idx).or_insert(idx);
                        call_of.insert(idx, call_idx);
                    }
                }
                _ => {}
            }
        }
        Log {
            events,
            bodies,
            result_of,
            call_of,
        }
    }

    fn seq(&self, idx: usize) -> i64 {
        self.events[idx].seq
    }

    /// A message a person (a user or a trigger) wrote.
    fn is_person_message(&self, idx: usize) -> bool {
        let event = &self.events[idx];
        event.kind == kind::MESSAGE
            && event.role == Some(EventRole::User)
            && matches!(event.actor.as_deref(), Some("user" | "trigger"))
    }

    fn newest_person_message(&self) -> Option<usize> {
        (0..self.events.len())
            .rev()
            .find(|&idx| self.is_person_message(idx))
    }

    /// Whether call `idx` has a result, and whether that result is an error.
    fn call_failed(&self, idx: usize) -> Option<bool> {
        let result_idx = *self.result_of.get(&idx)?;
        match &self.bodies[result_idx] {
            EventBody::ToolResult(result) => Some(result.is_error),
            _ => None,
        }
    }

    /// The seqs of event `idx` with its call or its result: a call and its result go together.
    fn span(&self, idx: usize) -> (i64, i64) {
        if let Some(&result_idx) = self.result_of.get(&idx) {
            return (self.seq(idx), self.seq(result_idx));
        }
        if let Some(&call_idx) = self.call_of.get(&idx) {
            return (self.seq(call_idx), self.seq(idx));
        }
        (self.seq(idx), self.seq(idx))
    }

    /// The text event `idx` holds that a file name may appear in: a message's or a result's
    /// text, a call's verb and arguments, a verb run by hand with its arguments and result.
    fn searchable_text(&self, idx: usize) -> String {
        match &self.bodies[idx] {
            EventBody::ToolCall(call) => {
                format!("{} {}", call.name, arguments_text(&call.arguments))
            }
            EventBody::Action(action) => format!(
                "{} {} {}",
                action.text,
                arguments_text(&action.arguments),
                action.result
            ),
            body => body.text().unwrap_or_default().to_owned(),
        }
    }

    /// Rule 1: what the newest user message quotes or names, in the events before it.
    fn referred_to(&self, user_idx: usize) -> Vec<(i64, i64, Why)> {
        let Some(text) = self.bodies[user_idx].text() else {
            return Vec::new();
        };
        let mut found = Vec::new();
        for quote in quotes(text) {
            let wanted = normalized(&quote);
            let earlier = (0..user_idx).rev().find(|&idx| {
                self.events[idx].kind == kind::MESSAGE
                    && self.bodies[idx]
                        .text()
                        .is_some_and(|said| normalized(said).contains(&wanted))
            });
            if let Some(idx) = earlier {
                found.push((self.seq(idx), self.seq(idx), Why::Quoted { quote }));
            }
        }
        for path in file_names(text) {
            let earlier = (0..user_idx)
                .rev()
                .find(|&idx| self.searchable_text(idx).contains(&path));
            if let Some(idx) = earlier {
                let (from, to) = self.span(idx);
                found.push((from, to, Why::NamedFile { path }));
            }
        }
        found
    }

    /// Rule 2: calls whose result is an error and that no later successful call of the same
    /// verb with the same arguments retried.
    fn failed_not_retried(&self) -> Vec<(i64, i64, Why)> {
        let calls: Vec<(usize, &seed_events::body::ToolCallBody)> = self
            .bodies
            .iter()
            .enumerate()
            .filter_map(|(idx, body)| match body {
                EventBody::ToolCall(call) => Some((idx, call)),
                _ => None,
            })
            .collect();
        let mut found = Vec::new();
        for (position, &(idx, call)) in calls.iter().enumerate() {
            if self.call_failed(idx) != Some(true) {
                continue;
            }
            let retried = calls[position + 1..].iter().any(|&(later_idx, later)| {
                later.name == call.name
                    && later.arguments == call.arguments
                    && self.call_failed(later_idx) == Some(false)
            });
            if !retried {
                let (from, to) = self.span(idx);
                found.push((
                    from,
                    to,
                    Why::FailedCall {
                        verb: call.name.clone(),
                    },
                ));
            }
        }
        found
    }

    /// Rule 3: each unfinished step, from the plan call that last created or changed it to the
    /// newest event before the user's message.
    fn unfinished_steps(
        &self,
        plan: Option<&Value>,
        newest_user: Option<usize>,
    ) -> Vec<(i64, i64, Why)> {
        let unfinished: Vec<&str> = crate::continuation::unfinished_steps(plan)
            .filter_map(|step| step.get("step")?.as_str())
            .collect();
        if unfinished.is_empty() {
            return Vec::new();
        }
        // The successful plan calls, each with its steps' (text, done).
        let plan_calls: Vec<(usize, Vec<(&str, bool)>)> = self
            .bodies
            .iter()
            .enumerate()
            .filter_map(|(idx, body)| match body {
                EventBody::ToolCall(call) if call.name == PLAN_VERB => Some((idx, call)),
                _ => None,
            })
            .filter(|&(idx, _)| self.call_failed(idx) == Some(false))
            .map(|(idx, call)| {
                let steps = call
                    .arguments
                    .get("steps")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .filter_map(|item| Some((item.get("step")?.as_str()?, step_done(item))))
                    .collect();
                (idx, steps)
            })
            .collect();
        // The work since runs to the newest event that is not the user's newest message.
        let Some(work_end_idx) = (0..self.events.len())
            .rev()
            .find(|&idx| Some(idx) != newest_user)
        else {
            return Vec::new();
        };
        let mut found = Vec::new();
        for step in unfinished {
            let mut state: Option<bool> = None;
            let mut set_at: Option<usize> = None;
            for (idx, steps) in &plan_calls {
                let now = steps
                    .iter()
                    .find(|(text, _)| *text == step)
                    .map(|&(_, done)| done);
                if now.is_some() && now != state {
                    set_at = Some(*idx);
                }
                state = now;
            }
            if let Some(idx) = set_at {
                let from = self.seq(idx);
                let to = self.seq(work_end_idx).max(from);
                found.push((
                    from,
                    to,
                    Why::UnfinishedStep {
                        step: step.to_owned(),
                    },
                ));
            }
        }
        found
    }

    /// Rule 4: the exchanges right before the newest user message.
    fn newest_exchanges(&self, user_idx: usize) -> Option<(i64, i64, Why)> {
        if user_idx == 0 {
            return None;
        }
        let earlier: Vec<usize> = (0..user_idx)
            .rev()
            .filter(|&idx| self.is_person_message(idx))
            .take(NEWEST_EXCHANGES)
            .collect();
        let from_idx = match earlier.as_slice() {
            [.., oldest] if earlier.len() == NEWEST_EXCHANGES => *oldest,
            _ => 0,
        };
        let from_idx = from_idx.max(user_idx.saturating_sub(NEWEST_EXCHANGES_EVENTS_MAX));
        let to_idx = user_idx - 1;
        Some((self.seq(from_idx), self.seq(to_idx), Why::NewestExchanges))
    }
}

/// A call's arguments as text: a string as it is, anything else as compact JSON.
fn arguments_text(arguments: &Value) -> String {
    match arguments {
        Value::String(text) => text.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// Lowercase, with every run of whitespace one space, trimmed.
fn normalized(text: &str) -> String {
    text.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .to_lowercase()
}

/// What `text` quotes: each `"…"` and `“…”` phrase, and each block of `>` lines, of at least
/// [`QUOTE_CHARS_MIN`] characters, in order, each once.
fn quotes(text: &str) -> Vec<String> {
    let mut found: Vec<String> = Vec::new();
    let mut push = |quote: &str| {
        let quote = quote.trim();
        if quote.chars().count() >= QUOTE_CHARS_MIN && !found.iter().any(|q| q == quote) {
            found.push(quote.to_owned());
        }
    };
    // Block quotes: consecutive lines starting with `>`, joined.
    let mut block: Vec<&str> = Vec::new();
    for line in text.lines().chain([""]) {
        match line.trim_start().strip_prefix('>') {
            Some(rest) => block.push(rest.trim_start_matches('>').trim()),
            None if !block.is_empty() => {
                push(&block.join(" "));
                block.clear();
            }
            None => {}
        }
    }
    // Phrases in straight or curly double quotes, on a line that is not a block quote.
    for line in text
        .lines()
        .filter(|line| !line.trim_start().starts_with('>'))
    {
        let mut rest = line;
        while let Some((open_idx, open)) = rest
            .char_indices()
            .find(|&(_, c)| c == '"' || c == '\u{201c}')
        {
            let close = if open == '"' { '"' } else { '\u{201d}' };
            let after = &rest[open_idx + open.len_utf8()..];
            let Some(close_idx) = after.find(close) else {
                break;
            };
            push(&after[..close_idx]);
            rest = &after[close_idx + close.len_utf8()..];
        }
    }
    found
}

/// The file names `text` names: words with a `/` (not an address with `://`) or of the form
/// `name.ext` (an extension of one to eight letters and digits, at least one a letter), with
/// the punctuation around them taken off, in order, each once.
fn file_names(text: &str) -> Vec<String> {
    let mut found: Vec<String> = Vec::new();
    for word in text.split_whitespace() {
        let word = word
            .trim_matches(|c: char| "\"'`()[]{}<>,;:!?*\u{201c}\u{201d}".contains(c))
            .trim_end_matches('.');
        if word.is_empty() || word.contains("://") || found.iter().any(|f| f == word) {
            continue;
        }
        let has_slash = word.contains('/') && word.chars().any(char::is_alphanumeric);
        let has_extension = word.rsplit_once('.').is_some_and(|(stem, ext)| {
            !stem.is_empty()
                && (1..=8).contains(&ext.len())
                && ext.chars().all(|c| c.is_ascii_alphanumeric())
                && ext.chars().any(|c| c.is_ascii_alphabetic())
        });
        if has_slash || has_extension {
            found.push(word.to_owned());
        }
    }
    found
}

#[cfg(test)]
mod tests;
