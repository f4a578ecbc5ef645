//! Import: what is pending from the log goes into the store with the turn's input. Read only
//! what the plan needs (the events past the import mark that came from no store entry, those
//! left out before, the run's own messages; for a rebuild, the rest of the log besides those),
//! with the files its messages name, each event and file once, and plan it (pure,
//! `seed_projections::import`).

use std::collections::BTreeSet;

use seed_durable::StoreState;
use seed_events::EventId;
use seed_projections::import::{
    ImportMode, ImportPlan, RunView, SYNC_DOCUMENT, SyncDocument, merged, plan_import,
    rebuild_reads,
};
use seed_store::{PendingEvents, RunRow};

use super::TurnError;
use crate::env::RunEnv;

/// The session's import mark and what it left out, as the store holds them.
pub(super) fn sync_document(state: &StoreState) -> SyncDocument {
    state.document(SYNC_DOCUMENT).unwrap_or_default()
}

/// What the turn read of the log before it opened, for the import.
pub(super) struct LogSeen {
    /// The messages of the session's queued runs.
    pub(super) queued_event_ids: Vec<EventId>,
    /// The events pending past `read_past_mark`, read with the turn's view.
    pub(super) pending: Option<PendingEvents>,
    /// The mark the pending events were read past (the kept harness's).
    pub(super) read_past_mark: Option<i64>,
}

/// The import of `run`'s turn into the store `state` holds (after any unsettled turn was
/// given up: `rebuild`).
pub(super) async fn plan(
    env: &RunEnv,
    run: &RunRow,
    session: &seed_store::SessionRow,
    state: &StoreState,
    seen: LogSeen,
    rebuild: bool,
) -> Result<ImportPlan, TurnError> {
    let store = &env.store;
    let session_id = run.session_id;
    let sync = sync_document(state);
    let own: BTreeSet<_> = run.user_event_ids.iter().copied().collect();
    let waiting: BTreeSet<_> = seen
        .queued_event_ids
        .into_iter()
        .filter(|id| !own.contains(id))
        .collect();
    let view = RunView {
        own_event_ids: &run.user_event_ids,
        waiting_event_ids: &waiting,
        attached: &seed_projections::import::NO_FILES,
    };
    // An append or an edit needs only the events past the mark that came from no store entry,
    // those left out before, and the run's own messages: read just those. A rebuild needs the
    // rest of the log too.
    let pending = match seen.pending {
        Some(pending) if seen.read_past_mark == Some(sync.mark) => pending,
        _ => store.pending_events(session_id, sync.mark).await?,
    };
    let read_through = pending.through_seq;
    let mut pending = pending.events;
    // Most turns need no more: their own message is past the mark and nothing was left out.
    let own_missing: Vec<_> = run
        .user_event_ids
        .iter()
        .filter(|id| !pending.iter().any(|event| event.id == **id))
        .copied()
        .collect();
    let earlier = if sync.left_out.is_empty() && own_missing.is_empty() {
        Vec::new()
    } else {
        store
            .read_events_at(session_id, sync.left_out.clone(), own_missing)
            .await?
    };
    let first_pending = pending.first().map_or(i64::MAX, |event| event.seq);
    pending.splice(
        0..0,
        earlier
            .into_iter()
            .filter(|event| event.seq < first_pending),
    );
    // The files the imported messages name, as the session's model is shown them.
    let takes_images = env
        .provider
        .takes_images(&env.settings.session_model(session));
    let mut attached =
        crate::attachments::read_attached(store, session_id, &pending, takes_images).await?;
    let with_files = RunView {
        attached: &attached,
        ..view
    };
    let mut plan = plan_import(&pending, state, &sync, with_files, rebuild);
    if plan.mode == ImportMode::Rebuild {
        // A rebuild replays the whole log: read what the events in hand leave out, and the
        // files those name.
        let rest = store
            .read_event_ranges(session_id, rebuild_reads(&pending))
            .await?;
        attached.extend(
            crate::attachments::read_attached(store, session_id, &rest, takes_images).await?,
        );
        let log = merged(pending, rest);
        let with_files = RunView {
            attached: &attached,
            ..view
        };
        plan = plan_import(&log, state, &sync, with_files, rebuild);
    }
    // The log was read through this seq: what it held up to there and is not pending came from
    // the store, so the next turn need not look at it again.
    plan.sync.mark = plan.sync.mark.max(read_through);
    Ok(plan)
}
