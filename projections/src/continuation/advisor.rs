//! The continuation advisor: what `<context_usage>` adds from 70% of the window — a forecast of
//! the model turns left before the window fills, what the next turn costs in place against a
//! successor, in tokens, and the recommended ranges to cite ([`super::recommend`]).
//!
//! # The forecast
//!
//! From the prompt sizes of the newest model turns (each answer's `input + cache_read +
//! cache_write`, at most [`FORECAST_TURNS_MAX`] of them, oldest first): the growth a turn is
//! `ceil((last - first) / (n - 1))`, the mean step over them, so one large tool result counts
//! spread over the turns it came in; the turns left are `floor((window - last) / growth)`, how
//! many more such steps still fit. Fewer than two turns give no forecast; a prompt that did not
//! grow gives [`Forecast::NotGrowing`].
//!
//! # In place against a successor
//!
//! In place, the next request sends at least the last prompt again: of it, what the provider
//! cached (`cache_read + cache_write` of the last usage: read back from the cache next time) and
//! what it did not (`input`). The code knows no provider's prices, so the figures are tokens,
//! cached and uncached. A successor starts from the projection that continue_session would
//! compile with its default arguments (no handoff, no sources, the plan's default transfer) and
//! the user's message, none of it cached; both estimated from their bytes
//! ([`seed_providers::estimate`]). Both leave out the system prompt and the verbs, which either
//! request sends.

use seed_events::{ContinueSessionInput, SessionEvent, SessionId, body::kind};
use seed_providers::Usage;
use seed_providers::estimate::{BYTES_PER_TOKEN, MESSAGE_OVERHEAD_TOKENS};
use serde_json::Value;

use super::recommend::{RecommendInput, Recommendation, recommend_ranges};
use super::{
    CONTINUATION_PROJECTION_BUDGET_BYTES, ProjectionInput, RECENT_EXCHANGES_EVENTS_MAX, ThreadRef,
    compile_projection, plan_transfer,
};
use crate::transcript::line_text;

/// The most recent model turns the forecast measures the growth over.
pub const FORECAST_TURNS_MAX: usize = 6;
/// The reason the successor's projection is estimated with.
const DEFAULT_REASON: &str = "the context window is filling";

/// How many more model turns fit in the window, at the recent growth.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Forecast {
    /// The prompt grew by `growth_tokens` a turn on average over the last `over_turns` turns;
    /// `turns_left` more such turns fit.
    Growing {
        growth_tokens: u64,
        turns_left: u64,
        over_turns: usize,
    },
    /// The prompt did not grow over the last `over_turns` turns.
    NotGrowing { over_turns: usize },
}

/// The forecast from the prompt sizes of the recent model turns, oldest first (only the last
/// [`FORECAST_TURNS_MAX`] count); `None` with fewer than two. See the module docs.
pub fn forecast(prompts: &[u64], window: u64) -> Option<Forecast> {
    let recent = &prompts[prompts.len().saturating_sub(FORECAST_TURNS_MAX)..];
    let (&first, &last) = (recent.first()?, recent.last()?);
    let over_turns = recent.len();
    if over_turns < 2 {
        return None;
    }
    if last <= first {
        return Some(Forecast::NotGrowing { over_turns });
    }
    let steps = over_turns as u64 - 1;
    let growth_tokens = (last - first).div_ceil(steps);
    Some(Forecast::Growing {
        growth_tokens,
        turns_left: window.saturating_sub(last) / growth_tokens,
        over_turns,
    })
}

/// The next turn in place: the last prompt sent again, cached and not.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InPlace {
    pub tokens: u64,
    /// Read back from the provider's cache: what the last request read from it or wrote to it.
    pub cached: u64,
    pub uncached: u64,
}

/// [`InPlace`] of the newest answer's usage.
pub fn in_place(usage: &Usage) -> InPlace {
    InPlace {
        tokens: usage.prompt_tokens(),
        cached: usage.cache_read + usage.cache_write,
        uncached: usage.input,
    }
}

/// A successor's first request, besides the system prompt and the verbs: nothing cached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Successor {
    pub tokens: u64,
    /// The projection compiled with the default arguments.
    pub projection_tokens: u64,
    /// The user's message, copied.
    pub message_tokens: u64,
}

/// What the successor is estimated from: this session and its newest events.
#[derive(Debug, Clone, Copy)]
pub struct SuccessorInput<'a> {
    pub session_id: SessionId,
    pub title: &'a str,
    pub description: &'a str,
    pub plan: Option<&'a Value>,
    /// The session's newest events, oldest first.
    pub events: &'a [SessionEvent],
}

/// The successor's first request, estimated: the projection continue_session would compile now
/// with its default arguments, and the newest person message. `None` when the events hold no
/// person message (there would be nothing to carry).
pub fn successor(input: &SuccessorInput<'_>) -> Option<Successor> {
    let initiating_idx = input.events.iter().rposition(|event| {
        event.kind == kind::MESSAGE
            && event.role == Some(seed_events::EventRole::User)
            && matches!(event.actor.as_deref(), Some("user" | "trigger"))
    })?;
    let initiating = &input.events[initiating_idx];
    let recent =
        &input.events[initiating_idx.saturating_sub(RECENT_EXCHANGES_EVENTS_MAX)..initiating_idx];
    let arguments = ContinueSessionInput {
        reason: DEFAULT_REASON.to_owned(),
        title: input.title.to_owned(),
        description: input.description.to_owned(),
        handoff: Default::default(),
        sources: Vec::new(),
        plan: None,
    };
    let projection = compile_projection(&ProjectionInput {
        input: &arguments,
        plan: plan_transfer(None, input.plan),
        lineage: &[ThreadRef {
            session_id: input.session_id,
            title: input.title.to_owned(),
        }],
        origin_session_id: input.session_id,
        initiating,
        predecessor_last_seq: input.events.last().map_or(0, |event| event.seq),
        cited: &[],
        recent,
        budget_bytes: CONTINUATION_PROJECTION_BUDGET_BYTES,
    });
    let tokens_of =
        |bytes: usize| (bytes as u64).div_ceil(BYTES_PER_TOKEN) + MESSAGE_OVERHEAD_TOKENS;
    let projection_tokens = tokens_of(projection.text.len());
    let message_tokens = tokens_of(initiating.body().text().unwrap_or_default().len());
    Some(Successor {
        tokens: projection_tokens + message_tokens,
        projection_tokens,
        message_tokens,
    })
}

/// What the advisor adds to `<context_usage>`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ContextAdvice {
    pub forecast: Option<Forecast>,
    /// `None` before any answer has a usage.
    pub in_place: Option<InPlace>,
    /// `None` when there is no person message to carry.
    pub successor: Option<Successor>,
    pub ranges: Vec<Recommendation>,
}

/// Everything the advice is computed from.
#[derive(Debug, Clone, Copy)]
pub struct AdviceInput<'a> {
    pub session_id: SessionId,
    pub title: &'a str,
    pub description: &'a str,
    pub plan: Option<&'a Value>,
    /// The session's newest events, oldest first (at most
    /// [`super::recommend::RECOMMEND_EVENTS_MAX`]).
    pub events: &'a [SessionEvent],
    /// The prompt sizes of the recent model turns, oldest first.
    pub prompts: &'a [u64],
    /// The newest answer's usage.
    pub last_usage: Option<Usage>,
    pub window: u64,
}

/// The advice: the forecast, the two costs and the recommended ranges.
pub fn advise(input: &AdviceInput<'_>) -> ContextAdvice {
    ContextAdvice {
        forecast: forecast(input.prompts, input.window),
        in_place: input.last_usage.as_ref().map(in_place),
        successor: successor(&SuccessorInput {
            session_id: input.session_id,
            title: input.title,
            description: input.description,
            plan: input.plan,
            events: input.events,
        }),
        ranges: recommend_ranges(&RecommendInput {
            events: input.events,
            plan: input.plan,
        }),
    }
}

/// The advice as the lines `<context_usage>` shows after its guidance: the turns left, the
/// next turn in place against a successor, and the ranges to cite (`fromSeq-toSeq: why`).
/// Every reason passes through `line_text`, so no text of the log can close the block or
/// forge a line.
pub fn advice_text(advice: &ContextAdvice) -> String {
    let mut lines = Vec::new();
    lines.push(match advice.forecast {
        Some(Forecast::Growing {
            growth_tokens,
            turns_left,
            over_turns,
        }) => format!(
            "Turns left: about {turns_left} before the window fills (the prompt grew about \
             {growth_tokens} tokens a model turn over the last {over_turns})."
        ),
        Some(Forecast::NotGrowing { over_turns }) => format!(
            "Turns left: no forecast, the prompt did not grow over the last {over_turns} model \
             turns."
        ),
        None => "Turns left: no forecast yet, too few model turns.".to_owned(),
    });
    let in_place_text = match advice.in_place {
        Some(InPlace {
            tokens,
            cached,
            uncached,
        }) => format!("in place about {tokens} tokens ({cached} cached, {uncached} uncached)"),
        None => "in place unknown (no answer counted yet)".to_owned(),
    };
    let successor_text = match advice.successor {
        Some(Successor {
            tokens,
            projection_tokens,
            message_tokens,
        }) => format!(
            "in a successor about {tokens} tokens, none cached (the projection with default \
             arguments {projection_tokens}, the user's message {message_tokens})"
        ),
        None => "no successor (no user message to carry)".to_owned(),
    };
    lines.push(format!(
        "Next turn: {in_place_text}; {successor_text}; the system prompt and verbs aside."
    ));
    if !advice.ranges.is_empty() {
        lines.push(
            "Recommended ranges of this thread to cite as session_events sources:".to_owned(),
        );
        lines.extend(advice.ranges.iter().map(|range| {
            format!(
                "{}-{}: {}",
                range.from_seq,
                range.to_seq,
                line_text(&range.reasons())
            )
        }));
    }
    lines.join("\n")
}

#[cfg(test)]
mod tests;
