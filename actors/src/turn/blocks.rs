//! The turn's state blocks (memory index, delegation budget, plan, context usage, status with
//! the session's wake-ups, the time): rendered once per turn (`seed_projections::blocks`), sent
//! with every request of the turn, never stored.

use seed_durable::StoreState;
use seed_projections::blocks::{ContextUsage, MemoryIndexEntry, TurnBlocks, render_turn_blocks};

use crate::env::RunEnv;

/// This turn's state blocks: rendered once, sent with every request of the turn, never stored.
#[expect(
    clippy::too_many_arguments,
    reason = "each argument is a part of the turn's view that one block shows"
)]
pub(super) fn turn_blocks(
    env: &RunEnv,
    session: &seed_store::SessionRow,
    memory: Vec<seed_store::MemoryFileRow>,
    schedules: &[seed_store::ScheduleRow],
    state: &StoreState,
    n_children: usize,
    can_continue: bool,
    first_estimate: impl FnOnce() -> u64,
) -> Vec<seed_providers::UserMessage> {
    let memory_index = memory
        .into_iter()
        .map(|file| MemoryIndexEntry {
            path: file.path,
            size_bytes: file.size_bytes,
            updated_at_ms: file.updated_at_ms,
        })
        .collect();
    let window = env
        .settings
        .context_window(&env.settings.session_model(session));
    let last_usage = state
        .entries
        .iter()
        .rev()
        .find_map(|entry| match &entry.body {
            seed_durable::EntryBody::Assistant { message, .. } => Some(message.usage),
            _ => None,
        });
    // `<context_usage>` only where continuing is possible: it is advice about continuing.
    // The newest answer's usage, as its server counted it or as the harness estimated it
    // for a server that did not; before any answer, an estimate of this turn's request.
    let context = window
        .filter(|_| can_continue)
        .map(|window| match last_usage {
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
        });
    let blocks = TurnBlocks {
        memory_index,
        // Shown once the run has started a child.
        delegation: (n_children > 0).then(|| {
            let used = u32::try_from(n_children).unwrap_or(u32::MAX);
            (used, crate::verbs::delegate::DELEGATION_BUDGET_PER_RUN)
        }),
        plan: session.plan.clone(),
        context,
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
