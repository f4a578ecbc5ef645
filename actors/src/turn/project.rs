//! The log made whole on open: `pi_entry_id` marks the store cannot back are cleared, and every
//! entry the log lacks is projected again. The store's own commits write their entries'
//! events; this is the net for a store written before that, or restored from elsewhere, so
//! nothing is lost and nothing repeated.

use seed_durable::StoreState;
use seed_events::SessionId;
use seed_projections::store_to_log::{events_above, stale_marks_above};
use seed_store::{Projection, RunRow, Store};

use super::TurnError;
use crate::bus::{Notification, SeqRange};
use crate::env::RunEnv;
use crate::logged_files::delivered_calls;
use crate::verb::TurnEffect;

/// Clears the marks above the store's last entry and projects what the log lacks, given the
/// highest entry the log named when the turn's view was read. Returns whether marks were
/// cleared (the events they named are pending again).
pub(super) async fn make_the_log_whole(
    env: &RunEnv,
    run: &RunRow,
    state: &StoreState,
    view_max_pi_entry_id: Option<i64>,
) -> Result<bool, TurnError> {
    let store = &env.store;
    let session_id = run.session_id;
    let store_last = state.entries.last().map(|entry| entry.id);
    let mut log_max = view_max_pi_entry_id.map(|id| id.max(0) as u64);
    let mut cleared = false;
    if let Some(above) = stale_marks_above(store_last, log_max) {
        store
            .clear_pi_entry_ids_above(session_id, above as i64)
            .await?;
        log_max = max_pi_entry_id(store, session_id).await?;
        cleared = true;
    }
    project_what_the_log_lacks(env, run, state, log_max).await?;
    Ok(cleared)
}

/// The highest store entry the session's log names.
async fn max_pi_entry_id(store: &Store, session_id: SessionId) -> Result<Option<u64>, TurnError> {
    Ok(store
        .max_pi_entry_id(session_id)
        .await?
        .map(|id| id.max(0) as u64))
}

/// Appends the events of every entry above `log_max` (the highest entry the log names) in one
/// transaction, and says so to subscribers. Each commit of a turn writes its own entries'
/// events; this is the net for what a store holds that the log lacks (a store written before,
/// or restored from elsewhere).
async fn project_what_the_log_lacks(
    env: &RunEnv,
    run: &RunRow,
    state: &StoreState,
    log_max: Option<u64>,
) -> Result<(), TurnError> {
    let events = events_above(&state.entries, log_max, Some(run.id), (env.clock)());
    if events.is_empty() {
        return Ok(());
    }
    let projection = Projection {
        session_id: run.session_id,
        delivered_calls: delivered_calls(&events, &env.verbs.names_with(TurnEffect::Delegates)),
        events,
    };
    let written = env.store.append_projection(projection).await?;
    env.publisher.publish(Notification::SessionChanged {
        session_id: run.session_id,
        reason: "events",
        seqs: SeqRange::of(&written),
    });
    Ok(())
}
