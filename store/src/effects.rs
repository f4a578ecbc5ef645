//! Call effects: a verb that is not safe to repeat records, in the transaction of its effect,
//! that a call took effect and what it answered (`call_effects`). When a crash cuts the call off
//! before its result reached the store, the verb's reconcile finds the row by the call's id and
//! the call is answered with that result instead of as interrupted; it never runs again.

use crate::params;
use crate::sql::{Connection, OptionalExtension};
use seed_events::SessionId;

use crate::sessions::{key_for_read, key_for_write};
use crate::{Result, Store};

/// What a call did, for the transaction of its effect to record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallEffect {
    /// The session whose turn made the call.
    pub session_id: SessionId,
    /// The call's id, unique within the session.
    pub tool_call_id: String,
    pub verb: String,
    /// The result the call answers with.
    pub result: String,
}

/// Records `effect`. Call ids are unique within a session; one used again (by a provider that
/// reuses ids, or a test) keeps the newest effect, and never fails the change it comes with.
pub(crate) fn record(connection: &Connection, effect: &CallEffect, now_ms: i64) -> Result<()> {
    let session_key = key_for_write(connection, effect.session_id)?;
    connection
        .prepare_cached(
            "INSERT INTO call_effects (session_key, tool_call_id, verb, result, created_at)
             VALUES (?1, ?2, ?3, ?4, ?5)
             ON CONFLICT (session_key, tool_call_id) DO UPDATE SET verb = excluded.verb,
                 result = excluded.result, created_at = excluded.created_at",
        )?
        .execute(params![
            session_key,
            effect.tool_call_id,
            effect.verb,
            effect.result,
            now_ms
        ])?;
    Ok(())
}

/// The effect call `tool_call_id` of the session recorded, if it took effect.
pub(crate) fn find(
    connection: &Connection,
    session_id: SessionId,
    tool_call_id: &str,
) -> Result<Option<CallEffect>> {
    let session_key = key_for_read(connection, session_id)?;
    connection
        .prepare_cached(
            "SELECT verb, result FROM call_effects WHERE session_key = ?1 AND tool_call_id = ?2",
        )?
        .query_row(params![session_key, tool_call_id], |row| {
            Ok(CallEffect {
                session_id,
                tool_call_id: tool_call_id.to_owned(),
                verb: row.get(0)?,
                result: row.get(1)?,
            })
        })
        .optional()
}

impl Store {
    /// The effect a call recorded with its effect ([`CallEffect`]), `None` when it recorded
    /// none: it did not take effect, or its verb records nothing.
    pub async fn call_effect(
        &self,
        session_id: SessionId,
        tool_call_id: &str,
    ) -> Result<Option<CallEffect>> {
        let tool_call_id = tool_call_id.to_owned();
        self.read(move |connection| find(connection, session_id, &tool_call_id))
            .await
    }
}
