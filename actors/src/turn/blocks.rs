//! The turn's state blocks (memory index, delegation budget, plan, context usage with the
//! continuation advisor from 70%, status with the session's wake-ups, the time): rendered once
//! per turn (`seed_projections::blocks`), sent with every request of the turn, never stored.

use seed_durable::StoreState;
use seed_projections::blocks::{
    CONTEXT_USAGE_SUGGEST_PERCENT, ContextUsage, MemoryIndexEntry, TurnBlocks, render_turn_blocks,
};
use seed_projections::continuation::RECENT_EXCHANGES_EVENTS_MAX;
use seed_projections::continuation::advisor::{
    AdviceInput, ContextAdvice, FORECAST_TURNS_MAX, advise,
};
use seed_projections::continuation::recommend::RECOMMEND_EVENTS_MAX;
use seed_providers::Usage;

use crate::env::RunEnv;

/// How full the window is, for `<context_usage>`: only where continuing is possible (it is
/// advice about continuing). The newest answer's usage, as its server counted it or as the
/// harness estimated it for a server that did not; before any answer, an estimate of this
/// turn's request.
pub(super) fn context_usage(
    env: &RunEnv,
    session: &seed_store::SessionRow,
    state: &StoreState,
    can_continue: bool,
    first_estimate: impl FnOnce() -> u64,
) -> Option<ContextUsage> {
    let window = env
        .settings
        .context_window(&env.settings.session_model(session))?;
    if !can_continue {
        return None;
    }
    Some(match usages(state).last() {
        Some(usage) => ContextUsage {
            tokens: usage.prompt_tokens(),
            window,
            estimated: usage.estimated,
        },
        None => ContextUsage {
            tokens: first_estimate(),
            window,
            estimated: true,
        },
    })
}

/// The usage of the newest answers the harness holds, oldest first: at most
/// [`FORECAST_TURNS_MAX`].
fn usages(state: &StoreState) -> Vec<Usage> {
    let mut newest: Vec<Usage> = state
        .entries
        .iter()
        .rev()
        .filter_map(|entry| match &entry.body {
            seed_durable::EntryBody::Assistant { message, .. } => Some(message.usage),
            _ => None,
        })
        .take(FORECAST_TURNS_MAX)
        .collect();
    newest.reverse();
    newest
}

/// The continuation advisor's figures and recommended ranges, from
/// [`CONTEXT_USAGE_SUGGEST_PERCENT`] of the window on (`None` below it, and before any answer
/// has a usage). It reads the session's newest [`RECOMMEND_EVENTS_MAX`] events (only the newest
/// exchanges when those are very large), once a turn and only then (the log's newest seq, then
/// the events up to it); the plan and the title come
/// from the turn's view, the prompt sizes and the cached split from the answers the harness
/// holds.
pub(super) async fn advice(
    env: &RunEnv,
    session: &seed_store::SessionRow,
    state: &StoreState,
    usage: Option<&ContextUsage>,
) -> Result<Option<ContextAdvice>, seed_store::Error> {
    let Some(usage) = usage else {
        return Ok(None);
    };
    // The block's own share (`tokens * 100 / window`, none of a window of 0).
    let percent = (u128::from(usage.tokens) * 100)
        .checked_div(u128::from(usage.window))
        .unwrap_or(0);
    let usages = usages(state);
    let Some(last_usage) = usages.last().copied() else {
        return Ok(None);
    };
    if percent < u128::from(CONTEXT_USAGE_SUGGEST_PERCENT) {
        return Ok(None);
    }
    let last_seq = env.store.last_seq(session.id).await?;
    // The newest exchanges first; the rest of the newest RECOMMEND_EVENTS_MAX only when those
    // are of an ordinary size, so that a session of very large messages does not read
    // megabytes every turn (what the rules then miss is older than its newest exchanges).
    let read = |n_events: usize| {
        let from_seq = (last_seq - n_events as i64 + 1).max(1);
        env.store
            .read_events(session.id, from_seq, last_seq, n_events)
    };
    let mut events = read(RECENT_EXCHANGES_EVENTS_MAX).await?;
    let newest_bytes: usize = events.iter().map(|event| value_bytes(&event.content)).sum();
    let first_read = events.first().map_or(1, |event| event.seq);
    if first_read > 1 && newest_bytes <= ADVICE_NEWEST_BYTES_MAX {
        events = read(RECOMMEND_EVENTS_MAX).await?;
    }
    let prompts: Vec<u64> = usages.iter().map(Usage::prompt_tokens).collect();
    Ok(Some(advise(&AdviceInput {
        session_id: session.id,
        title: &session.title,
        description: &session.description,
        plan: session.plan.as_ref(),
        events: &events,
        prompts: &prompts,
        last_usage: Some(last_usage),
        window: usage.window,
    })))
}

/// The most bytes of text the newest exchanges may hold for the advisor to read further back
/// (up to [`RECOMMEND_EVENTS_MAX`] events) each turn.
const ADVICE_NEWEST_BYTES_MAX: usize = 64 * 1024;

/// About how many bytes of text a value holds (its strings and keys).
fn value_bytes(value: &serde_json::Value) -> usize {
    match value {
        serde_json::Value::String(text) => text.len(),
        serde_json::Value::Array(items) => items.iter().map(value_bytes).sum(),
        serde_json::Value::Object(map) => map
            .iter()
            .map(|(key, value)| key.len() + value_bytes(value))
            .sum(),
        _ => 8,
    }
}

/// This turn's state blocks: rendered once, sent with every request of the turn, never stored.
pub(super) fn turn_blocks(
    env: &RunEnv,
    session: &seed_store::SessionRow,
    memory: Vec<seed_store::MemoryFileRow>,
    schedules: &[seed_store::ScheduleRow],
    n_children: usize,
    context: Option<ContextUsage>,
    advice: Option<ContextAdvice>,
) -> Vec<seed_providers::UserMessage> {
    let memory_index = memory
        .into_iter()
        .map(|file| MemoryIndexEntry {
            path: file.path,
            size_bytes: file.size_bytes,
            updated_at_ms: file.updated_at_ms,
        })
        .collect();
    let blocks = TurnBlocks {
        memory_index,
        // Shown once the run has started a child.
        delegation: (n_children > 0).then(|| {
            let used = u32::try_from(n_children).unwrap_or(u32::MAX);
            (used, crate::verbs::delegate::DELEGATION_BUDGET_PER_RUN)
        }),
        plan: session.plan.clone(),
        context,
        advice,
        status: (
            session.title.clone(),
            status_description(&session.description, schedules),
        ),
        now_ms: (env.clock)(),
        utc_offset_minutes: env.settings.utc_offset_minutes,
    };
    render_turn_blocks(&blocks)
}

/// The session's description for `<session_status>`, followed by its wake-ups still to fire.
fn status_description(description: &str, schedules: &[seed_store::ScheduleRow]) -> String {
    let lines: Vec<seed_projections::schedules::ScheduledLine> = schedules
        .iter()
        .filter_map(|row| {
            Some(seed_projections::schedules::ScheduledLine {
                schedule_id: row.id.to_string(),
                when: row.describe(),
                next_due_ms: row.next_due_at_ms?,
                fired: row.fired,
                note: row.note.clone(),
            })
        })
        .collect();
    let listed = seed_projections::schedules::status_lines(&lines);
    match (description.is_empty(), listed.is_empty()) {
        (_, true) => description.to_owned(),
        (true, false) => listed,
        (false, false) => format!("{description}\n{listed}"),
    }
}
