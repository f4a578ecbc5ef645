//! Appending to the log: events serialized into rows on the caller's thread, inserted after
//! the session's newest seq in the writer's transaction. On SQLite a statement a row; on
//! PostgreSQL several rows to a statement, sent without waiting, their places read with the
//! transaction's answers.

use crate::params;
use crate::schema::Engine;
use crate::sql::Connection;
use seed_events::{EventId, NewEvent, SessionEvent, SessionId};

use super::last_seq_of_key;
#[cfg(debug_assertions)]
use super::newest_pi_entry_id;
use crate::sessions::key_for_write;
use crate::{Error, Result};

/// Appends `events` to the session's log, assigning the next seqs, and returns them as stored.
/// Runs inside the caller's transaction, so the seqs have no gaps.
pub(crate) fn append_events(
    connection: &Connection,
    session_id: SessionId,
    events: &[NewEvent],
) -> Result<Vec<SessionEvent>> {
    let rows: Vec<EventRow> = events.iter().map(EventRow::of).collect();
    let placed = insert_rows(connection, session_id, &rows)?;
    Ok(stored_events(session_id, events.to_vec(), &placed))
}

/// An event as its row holds it: its JSON serialized, so that a job can serialize before it
/// reaches the writer and insert (again, after a rollback) without serializing there.
#[derive(Debug, Clone)]
pub(crate) struct EventRow {
    pub(crate) kind: String,
    role: Option<&'static str>,
    actor: Option<String>,
    content: String,
    pub(crate) meta: String,
    run_id: Option<String>,
    pi_entry_id: Option<i64>,
    created_at_ms: i64,
}

impl EventRow {
    pub(crate) fn of(event: &NewEvent) -> EventRow {
        EventRow {
            kind: event.kind.clone(),
            role: event.role.map(|role| role.as_str()),
            actor: event.actor.clone(),
            content: json_text(&event.content),
            meta: json_text(&event.meta),
            run_id: event.run_id.map(|id| id.to_string()),
            pi_entry_id: event.pi_entry_id,
            created_at_ms: event.created_at_ms,
        }
    }
}

/// `value` as JSON text, written straight into a buffer sized for most events: `Value`'s
/// `to_string` goes through `Display`, a formatter call for every token, which cost about twice
/// as many instructions (docs/design/cpu-per-step.md).
fn json_text(value: &serde_json::Value) -> String {
    let mut bytes = Vec::with_capacity(256);
    // A `Value` always serializes: its map keys are strings.
    serde_json::to_writer(&mut bytes, value).expect("a JSON value serializes");
    String::from_utf8(bytes).expect("serde_json writes UTF-8")
}

/// Where an inserted event went: its id and seq.
pub(crate) type Placed = (EventId, i64);

/// Inserts `rows` after the session's last seq, in order. Runs inside the caller's
/// transaction, so the seqs have no gaps. On PostgreSQL, one round trip: see
/// [`send_rows_by_id`].
pub(crate) fn insert_rows(
    connection: &Connection,
    session_id: SessionId,
    rows: &[EventRow],
) -> Result<Vec<Placed>> {
    send_rows_by_id(connection, session_id, rows)?.placed(connection)
}

/// Rows sent to a session's log by its id ([`send_rows_by_id`]), placed once their answers
/// are read.
pub(crate) struct SentById {
    session_id: SessionId,
    /// The session's row, taken (PostgreSQL).
    locked: Option<crate::sql::LaterRows<i64>>,
    placed: LaterPlaced,
}

/// [`insert_rows`], sent without waiting on PostgreSQL: the session's row is taken by its id
/// (as [`insert_rows_of_key_later`] takes it by its key) and the inserts name the session by
/// its id too, so nothing waits on its key first; their answers come with the next statement
/// waited on (or [`SentById::placed`]'s), and a deleted session is refused then as
/// [`key_for_write`] refuses it. SQLite inserts at once.
pub(crate) fn send_rows_by_id(
    connection: &Connection,
    session_id: SessionId,
    rows: &[EventRow],
) -> Result<SentById> {
    if connection.engine() != Engine::Postgres {
        let session_key = key_for_write(connection, session_id)?;
        return Ok(SentById {
            session_id,
            locked: None,
            placed: LaterPlaced::Now(insert_rows_of_key(
                connection,
                session_key,
                session_id,
                rows,
            )?),
        });
    }
    #[cfg(debug_assertions)]
    if let Some(session_key) = crate::sessions::session_key(connection, session_id)? {
        assert_marks_ascend(connection, session_key, session_id, rows)?;
    }
    let locked = connection
        .prepare_cached("SELECT key FROM sessions WHERE id = ?1 FOR NO KEY UPDATE")?
        .send_query_map(params![session_id.to_string()], |row| row.get::<_, i64>(0))?;
    let placed = insert_rows_several_to_a_statement(
        connection,
        &session_id.to_string(),
        EventsOf::Id,
        rows,
    )?;
    Ok(SentById {
        session_id,
        locked: Some(locked),
        placed,
    })
}

impl SentById {
    /// Where the rows went, their answers read now if they were not yet.
    pub(crate) fn placed(self, connection: &Connection) -> Result<Vec<Placed>> {
        let answered = connection.read_answers();
        // The session's row is there, or the inserts failed for want of it.
        if let Some(locked) = self.locked
            && locked.values()?.is_empty()
        {
            return Err(Error::Refused {
                session_id: Some(self.session_id),
                reason: crate::Refusal::SessionDeleted,
            });
        }
        answered?;
        self.placed.placed()
    }
}

/// [`insert_rows`] for a session whose key the caller knows (its durable files looked it up
/// once): a step's commit need not look it up again.
pub(crate) fn insert_rows_of_key(
    connection: &Connection,
    session_key: i64,
    session_id: SessionId,
    rows: &[EventRow],
) -> Result<Vec<Placed>> {
    let placed = insert_rows_of_key_later(connection, session_key, session_id, rows, false)?;
    connection.read_answers()?;
    placed.placed()
}

/// Where inserted events went: known at once on SQLite; on PostgreSQL, where the inserts are
/// sent without waiting, once the transaction's answers are read (its `COMMIT` at the latest).
pub(crate) enum LaterPlaced {
    Now(Vec<Placed>),
    /// Each insert's rows (seq, id), with how many it inserted.
    Sent(Vec<(usize, crate::sql::LaterRows<(i64, i64)>)>),
}

impl LaterPlaced {
    /// Where the rows went, in the order they were given.
    pub(crate) fn placed(self) -> Result<Vec<Placed>> {
        let sent = match self {
            LaterPlaced::Now(placed) => return Ok(placed),
            LaterPlaced::Sent(sent) => sent,
        };
        let mut placed = Vec::new();
        for (n_rows, inserted) in sent {
            let mut inserted = inserted.values()?;
            inserted.sort_unstable();
            if inserted.len() != n_rows {
                return Err(Error::corrupt(
                    "session_events",
                    format_args!("{} rows inserted for {n_rows}", inserted.len()),
                ));
            }
            placed.extend(inserted.into_iter().map(|(seq, id)| (EventId(id), seq)));
        }
        Ok(placed)
    }
}

/// [`insert_rows_of_key`], where the events' places are wanted once the transaction's answers
/// are read: on PostgreSQL no round trip waits on the inserts. With `row_held`, the
/// transaction took the session's row already (see [`crate::files::append_lines_locking`]).
pub(crate) fn insert_rows_of_key_later(
    connection: &Connection,
    session_key: i64,
    session_id: SessionId,
    rows: &[EventRow],
    row_held: bool,
) -> Result<LaterPlaced> {
    // Named only by the debug check below.
    #[cfg(not(debug_assertions))]
    let _ = session_id;
    if connection.engine() == Engine::Postgres && !row_held {
        // Nodes append to one session's log in turns (a person's message on one node, a turn's
        // events on another): the session's row is held until this transaction ends, and the
        // newest seq read after it sees every append committed before. The lock's answer is
        // read with the insert's, sent together (see `Statement::send`).
        connection
            .prepare_cached("SELECT 1 FROM sessions WHERE key = ?1 FOR NO KEY UPDATE")?
            .send(params![session_key])?;
    }
    #[cfg(debug_assertions)]
    assert_marks_ascend(connection, session_key, session_id, rows)?;
    if connection.engine() == Engine::Postgres {
        return insert_rows_several_to_a_statement(connection, &session_key, EventsOf::Key, rows);
    }
    let placed = insert_rows_one_by_one(connection, session_key, rows)?;
    Ok(LaterPlaced::Now(placed))
}

/// The log's newest mark is its highest only while marks never go down (see
/// `newest_pi_entry_id`): checked at every append the tests make.
#[cfg(debug_assertions)]
fn assert_marks_ascend(
    connection: &Connection,
    session_key: i64,
    session_id: SessionId,
    rows: &[EventRow],
) -> Result<()> {
    let mut newest_mark = newest_pi_entry_id(connection, session_key)?;
    for row in rows {
        if let Some(entry_id) = row.pi_entry_id {
            assert!(
                newest_mark.is_none_or(|newest| entry_id >= newest),
                "session {session_id}: entry {entry_id} projected after entry {newest_mark:?}"
            );
            newest_mark = Some(entry_id);
        }
    }
    Ok(())
}

/// [`insert_rows_of_key`] on SQLite: a statement a row, each row's id read from the connection.
fn insert_rows_one_by_one(
    connection: &Connection,
    session_key: i64,
    rows: &[EventRow],
) -> Result<Vec<Placed>> {
    let last_seq = last_seq_of_key(connection, session_key)?;
    // SQLite names the new row's id without a RETURNING clause, which costs it more.
    let mut insert = connection.prepare_cached(
        "INSERT INTO session_events
             (session_key, seq, type, role, actor, content, meta, run_id, pi_entry_id, created_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
    )?;
    let mut placed = Vec::with_capacity(rows.len());
    for (row_idx, row) in rows.iter().enumerate() {
        let seq = last_seq + 1 + row_idx as i64;
        let values = params![
            session_key,
            seq,
            row.kind,
            row.role,
            row.actor,
            row.content,
            row.meta,
            row.run_id,
            row.pi_entry_id,
            row.created_at_ms,
        ];
        insert.execute(values)?;
        let id = connection
            .sqlite()
            .map_or(0, rusqlite::Connection::last_insert_rowid);
        placed.push((EventId(id), seq));
    }
    Ok(placed)
}

/// The most events one insert carries on PostgreSQL.
const EVENTS_PER_INSERT_MAX: usize = 8;

/// The columns of an event row that each row of a [`multi_row_event_inserts`] binds, in
/// order, with their types (a `VALUES` list in a `SELECT` does not take them from the table).
const BOUND_COLUMNS: [(&str, &str); 8] = [
    ("type", "TEXT"),
    ("role", "TEXT"),
    ("actor", "TEXT"),
    ("content", "TEXT"),
    ("meta", "TEXT"),
    ("run_id", "TEXT"),
    ("pi_entry_id", "BIGINT"),
    ("created_at", "BIGINT"),
];

/// How the statements of [`multi_row_event_inserts`] name the session whose log they append
/// to, as `?1`.
#[derive(Clone, Copy)]
enum EventsOf {
    /// By its key.
    Key,
    /// By its id, its key looked up in the statement.
    Id,
}

/// The statements that append 1 to [`EVENTS_PER_INSERT_MAX`] events at once to the log of the
/// session `?1` (by key or by id), by count - 1: their seqs follow the newest the statement
/// sees (the session's row is locked before it, so that is every append committed), in the
/// order given, and each new row's id and seq come back.
fn multi_row_event_inserts(of: EventsOf) -> &'static [String] {
    static INSERTS: std::sync::OnceLock<[Vec<String>; 2]> = std::sync::OnceLock::new();
    let [by_key, by_id] = INSERTS.get_or_init(|| {
        let names: Vec<&str> = BOUND_COLUMNS.iter().map(|(name, _)| *name).collect();
        let names = names.join(", ");
        let inserts = |key: &str| -> Vec<String> {
            (1..=EVENTS_PER_INSERT_MAX)
                .map(|n_rows| {
                    let rows: Vec<String> = (0..n_rows)
                        .map(|row| {
                            let first = 2 + BOUND_COLUMNS.len() * row;
                            let values: Vec<String> = BOUND_COLUMNS
                                .iter()
                                .enumerate()
                                .map(|(idx, (_, ty))| format!("CAST(?{} AS {ty})", first + idx))
                                .collect();
                            format!("({}, {})", row + 1, values.join(", "))
                        })
                        .collect();
                    format!(
                        "INSERT INTO session_events (session_key, seq, {names})
                         SELECT {key}, last.seq + v.n, {names}
                         FROM (SELECT COALESCE(MAX(seq), 0) AS seq FROM session_events
                               WHERE session_key = {key}) AS last,
                              (VALUES {}) AS v (n, {names})
                         ORDER BY v.n
                         RETURNING id, seq",
                        rows.join(", ")
                    )
                })
                .collect()
        };
        [
            inserts("CAST(?1 AS BIGINT)"),
            inserts("(SELECT key FROM sessions WHERE id = CAST(?1 AS TEXT))"),
        ]
    });
    match of {
        EventsOf::Key => by_key,
        EventsOf::Id => by_id,
    }
}

/// [`insert_rows_of_key_later`] on PostgreSQL: the rows go several to a statement, which
/// reads the newest seq itself and whose answer names each new row's id and seq. The
/// statements are sent without waiting: their answers come with the next one waited on.
fn insert_rows_several_to_a_statement(
    connection: &Connection,
    session: &dyn crate::sql::ToSql,
    of: EventsOf,
    rows: &[EventRow],
) -> Result<LaterPlaced> {
    let mut sent = Vec::with_capacity(rows.len().div_ceil(EVENTS_PER_INSERT_MAX));
    for chunk in rows.chunks(EVENTS_PER_INSERT_MAX) {
        let mut values: Vec<&dyn crate::sql::ToSql> =
            Vec::with_capacity(1 + BOUND_COLUMNS.len() * chunk.len());
        values.push(session);
        for row in chunk {
            values.extend_from_slice(&[
                &row.kind as &dyn crate::sql::ToSql,
                &row.role,
                &row.actor,
                &row.content,
                &row.meta,
                &row.run_id,
                &row.pi_entry_id,
                &row.created_at_ms,
            ]);
        }
        let inserted = connection
            .prepare_cached(&multi_row_event_inserts(of)[chunk.len() - 1])?
            .send_query_map(&values, |row| Ok((row.get(1)?, row.get(0)?)))?;
        sent.push((chunk.len(), inserted));
    }
    Ok(LaterPlaced::Sent(sent))
}

/// One event ready for the writer: serialized on the caller's thread, so that the writer's job
/// (which every session's commits wait on) only inserts it, again after a rollback.
#[derive(Debug, Clone)]
pub(crate) struct PreparedEvent {
    event: NewEvent,
    row: EventRow,
}

impl PreparedEvent {
    pub(crate) fn of(event: NewEvent) -> PreparedEvent {
        let row = EventRow::of(&event);
        PreparedEvent { event, row }
    }

    /// Appends the event to the session's log, as [`append_events`] would.
    pub(crate) fn append(
        &self,
        connection: &Connection,
        session_id: SessionId,
    ) -> Result<SessionEvent> {
        let placed = insert_rows(connection, session_id, std::slice::from_ref(&self.row))?;
        self.stored(session_id, &placed)
    }

    /// [`PreparedEvent::append`], sent without waiting on PostgreSQL ([`send_rows_by_id`]):
    /// the event as stored once [`SentById::placed`] reads the answers.
    pub(crate) fn send_append(
        &self,
        connection: &Connection,
        session_id: SessionId,
    ) -> Result<SentById> {
        send_rows_by_id(connection, session_id, std::slice::from_ref(&self.row))
    }

    /// The event as stored where `placed` says it went.
    pub(crate) fn stored(&self, session_id: SessionId, placed: &[Placed]) -> Result<SessionEvent> {
        stored_events(session_id, vec![self.event.clone()], placed)
            .pop()
            .ok_or_else(|| crate::Error::corrupt("session_events", "an append stored no event"))
    }
}

/// `events` as stored, once [`insert_rows`] placed them.
pub(crate) fn stored_events(
    session_id: SessionId,
    events: Vec<NewEvent>,
    placed: &[Placed],
) -> Vec<SessionEvent> {
    events
        .into_iter()
        .zip(placed)
        .map(|(event, &(id, seq))| SessionEvent {
            id,
            session_id,
            seq,
            kind: event.kind,
            role: event.role,
            actor: event.actor,
            content: event.content,
            meta: event.meta,
            run_id: event.run_id,
            pi_entry_id: event.pi_entry_id,
            created_at_ms: event.created_at_ms,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An event's content and meta are stored as the JSON text `Value` writes: compact, with
    /// escapes, non-ASCII text as is, larger than the buffer it starts with.
    #[test]
    fn json_text_is_the_values_own_text() {
        let values = [
            serde_json::json!(null),
            serde_json::json!({"text": "a \"quote\", a tab\t, é, 日本", "n": -1.5}),
            serde_json::json!({"long": "x".repeat(1_000), "list": [1, 2, {"k": true}]}),
        ];
        for value in values {
            assert_eq!(json_text(&value), value.to_string());
        }
    }
}
