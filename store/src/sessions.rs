//! Accounts and sessions.

use std::fmt;
use std::str::FromStr;

use crate::params;
use crate::sql::{Connection, OptionalExtension, Row};
use seed_events::{AccountId, SessionId, UnknownName};

use crate::Store;
use crate::error::collect_rows;
use crate::{Error, Result};

/// Who gave a session its title.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TitleSource {
    #[default]
    None,
    /// The agent, through the status or continue_session verb.
    Agent,
    User,
    /// The fallback namer, when nobody else did.
    Fallback,
}

impl TitleSource {
    pub const ALL: [TitleSource; 4] = [
        TitleSource::None,
        TitleSource::Agent,
        TitleSource::User,
        TitleSource::Fallback,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            TitleSource::None => "none",
            TitleSource::Agent => "agent",
            TitleSource::User => "user",
            TitleSource::Fallback => "fallback",
        }
    }
}

impl fmt::Display for TitleSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for TitleSource {
    type Err = UnknownName;
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        TitleSource::ALL
            .into_iter()
            .find(|source| source.as_str() == text)
            .ok_or_else(|| UnknownName {
                kind: "title source",
                value: text.to_owned(),
            })
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AccountRow {
    pub id: AccountId,
    pub public_key: Vec<u8>,
    pub created_at_ms: i64,
}

/// A session to create.
#[derive(Debug, Clone, PartialEq)]
pub struct NewSession {
    pub id: SessionId,
    pub account_id: AccountId,
    pub title: String,
    pub description: String,
    pub title_source: TitleSource,
    pub model_override: Option<String>,
    pub reasoning_level: Option<String>,
    pub plan: Option<serde_json::Value>,
    /// Set for a delegated child.
    pub parent_session_id: Option<SessionId>,
    pub created_at_ms: i64,
}

impl NewSession {
    /// An untitled top-level session.
    pub fn new(id: SessionId, account_id: AccountId, created_at_ms: i64) -> Self {
        NewSession {
            id,
            account_id,
            title: String::new(),
            description: String::new(),
            title_source: TitleSource::None,
            model_override: None,
            reasoning_level: None,
            plan: None,
            parent_session_id: None,
            created_at_ms,
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct SessionRow {
    pub id: SessionId,
    pub account_id: AccountId,
    pub title: String,
    pub description: String,
    pub title_source: TitleSource,
    pub model_override: Option<String>,
    pub reasoning_level: Option<String>,
    pub plan: Option<serde_json::Value>,
    pub parent_session_id: Option<SessionId>,
    pub created_at_ms: i64,
    pub updated_at_ms: i64,
}

pub(crate) fn insert_account(
    connection: &Connection,
    id: AccountId,
    public_key: &[u8],
    created_at_ms: i64,
) -> Result<()> {
    connection
        .prepare_cached("INSERT INTO accounts (id, public_key, created_at) VALUES (?1, ?2, ?3)")?
        .execute(params![id.to_string(), public_key, created_at_ms])?;
    Ok(())
}

pub(crate) fn get_account(connection: &Connection, id: AccountId) -> Result<Option<AccountRow>> {
    connection
        .prepare_cached("SELECT public_key, created_at FROM accounts WHERE id = ?1")?
        .query_row(params![id.to_string()], |row| {
            Ok(AccountRow {
                id,
                public_key: row.get(0)?,
                created_at_ms: row.get(1)?,
            })
        })
        .optional()
}

pub(crate) fn insert_session(connection: &Connection, session: &NewSession) -> Result<()> {
    let plan = session.plan.as_ref().map(serde_json::Value::to_string);
    connection
        .prepare_cached(
            "INSERT INTO sessions (id, account_id, title, description, title_source,
                 model_override, reasoning_level, plan, parent_session_id, created_at, updated_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?10)",
        )?
        .execute(params![
            session.id.to_string(),
            session.account_id.to_string(),
            session.title,
            session.description,
            session.title_source.as_str(),
            session.model_override,
            session.reasoning_level,
            plan,
            session.parent_session_id.map(|id| id.to_string()),
            session.created_at_ms,
        ])?;
    Ok(())
}

pub(crate) const SESSION_COLUMNS: &str =
    "id, account_id, title, description, title_source, model_override,
     reasoning_level, plan, parent_session_id, created_at, updated_at";

pub(crate) fn session_from_row(row: &Row<'_>) -> Result<Result<SessionRow>> {
    let id: String = row.get(0)?;
    let account_id: String = row.get(1)?;
    let title_source: String = row.get(4)?;
    let plan: Option<String> = row.get(7)?;
    let parent_session_id: Option<String> = row.get(8)?;
    let parsed = (|| {
        Ok(SessionRow {
            id: id.parse().map_err(|e| Error::corrupt("sessions", e))?,
            account_id: account_id
                .parse()
                .map_err(|e| Error::corrupt("sessions", e))?,
            title: row.get(2)?,
            description: row.get(3)?,
            title_source: title_source
                .parse()
                .map_err(|e| Error::corrupt("sessions", e))?,
            model_override: row.get(5)?,
            reasoning_level: row.get(6)?,
            plan: parse_plan(plan)?,
            parent_session_id: parent_session_id
                .map(|id| id.parse())
                .transpose()
                .map_err(|e| Error::corrupt("sessions", e))?,
            created_at_ms: row.get(9)?,
            updated_at_ms: row.get(10)?,
        })
    })();
    Ok(parsed)
}

pub(crate) fn get_session(connection: &Connection, id: SessionId) -> Result<Option<SessionRow>> {
    connection
        .prepare_cached(&format!(
            "SELECT {SESSION_COLUMNS} FROM sessions WHERE id = ?1"
        ))?
        .query_row(params![id.to_string()], session_from_row)
        .optional()?
        .transpose()
}

pub(crate) fn list_sessions(
    connection: &Connection,
    account_id: AccountId,
) -> Result<Vec<SessionRow>> {
    let mut statement = connection.prepare_cached(&format!(
        "SELECT {SESSION_COLUMNS} FROM sessions WHERE account_id = ?1
         ORDER BY updated_at DESC, key DESC"
    ))?;
    collect_rows(statement.query_map(params![account_id.to_string()], session_from_row)?)
}

/// The account's sessions, counted up to `up_to` (from `sessions_by_account`).
pub(crate) fn count_account_sessions(
    connection: &Connection,
    account_id: AccountId,
    up_to: u64,
) -> Result<u64> {
    let up_to = i64::try_from(up_to).unwrap_or(i64::MAX);
    let n_sessions: i64 = connection
        .prepare_cached(
            "SELECT COUNT(*) FROM (SELECT 1 FROM sessions WHERE account_id = ?1 LIMIT ?2) AS counted",
        )?
        .query_row(params![account_id.to_string(), up_to], |row| row.get(0))?;
    u64::try_from(n_sessions).map_err(|e| Error::corrupt("sessions", e))
}

/// Where a page of an account's sessions starts: after the session `session_id`, last
/// updated at `updated_at_ms`, in the order [`Store::list_sessions_page`] reads them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SessionsAfter {
    pub updated_at_ms: i64,
    pub session_id: SessionId,
}

/// One page of an account's sessions ([`Store::list_sessions_page`]).
#[derive(Debug, Clone, PartialEq)]
pub struct SessionsPage {
    /// Most recently updated first; ties by id, the greater first.
    pub sessions: Vec<SessionRow>,
    /// Where the next page starts, when more follow.
    pub next: Option<SessionsAfter>,
}

/// The query of [`list_sessions_page`]: the account `?1`'s sessions after (`?2`, `?3`) in the
/// order (updated_at, id) descending, at most `?4`. The first page passes a position past
/// every session (the largest time, an id above every id). `updated_at <= ?2` is the range
/// `sessions_by_account` seeks to, so a page reads its own rows and the next one, not those
/// of the pages before it.
pub(crate) const SESSIONS_PAGE: &str = "SELECT id, account_id, title, description, title_source,
         model_override, reasoning_level, plan, parent_session_id, created_at, updated_at
     FROM sessions
     WHERE account_id = ?1 AND updated_at <= ?2 AND (updated_at < ?2 OR id < ?3)
     ORDER BY updated_at DESC, id DESC LIMIT ?4";

/// Up to `limit` of the account's sessions after `after` (from the first without it), most
/// recently updated first, and where the next page starts when more follow.
pub(crate) fn list_sessions_page(
    connection: &Connection,
    account_id: AccountId,
    after: Option<SessionsAfter>,
    limit: usize,
) -> Result<SessionsPage> {
    let (updated_at_ms, session_id) = match after {
        Some(after) => (after.updated_at_ms, after.session_id.to_string()),
        // Every id is lowercase hex and dashes, all below "~".
        None => (i64::MAX, "~".to_owned()),
    };
    // One row past the page says whether more follow.
    let n_rows = i64::try_from(limit.saturating_add(1)).unwrap_or(i64::MAX);
    let mut statement = connection.prepare_cached(SESSIONS_PAGE)?;
    let mut sessions = collect_rows(statement.query_map(
        params![account_id.to_string(), updated_at_ms, session_id, n_rows],
        session_from_row,
    )?)?;
    let more = sessions.len() > limit;
    sessions.truncate(limit);
    let next = sessions.last().filter(|_| more).map(|last| SessionsAfter {
        updated_at_ms: last.updated_at_ms,
        session_id: last.id,
    });
    Ok(SessionsPage { sessions, next })
}

pub(crate) fn session_exists(connection: &Connection, id: SessionId) -> Result<bool> {
    Ok(session_key(connection, id)?.is_some())
}

/// The session's integer key, by which the per-step tables refer to it.
pub(crate) fn session_key(connection: &Connection, id: SessionId) -> Result<Option<i64>> {
    connection
        .prepare_cached("SELECT key FROM sessions WHERE id = ?1")?
        .query_row(params![id.to_string()], |row| row.get(0))
        .optional()
}

/// The session's plan as stored (`None` when it has none, or the session is gone).
pub(crate) fn plan_of(connection: &Connection, id: SessionId) -> Result<Option<serde_json::Value>> {
    let plan: Option<String> = connection
        .prepare_cached("SELECT plan FROM sessions WHERE id = ?1")?
        .query_row(params![id.to_string()], |row| row.get(0))
        .optional()?
        .flatten();
    parse_plan(plan)
}

/// A plan as the `plan` column holds it: JSON text, or NULL for none.
fn parse_plan(plan: Option<String>) -> Result<Option<serde_json::Value>> {
    plan.map(|plan| serde_json::from_str(&plan))
        .transpose()
        .map_err(|e| Error::corrupt("sessions", e))
}

/// The key of a session a write is for; a missing session refuses the write.
pub(crate) fn key_for_write(connection: &Connection, id: SessionId) -> Result<i64> {
    session_key(connection, id)?.ok_or(Error::Refused {
        session_id: Some(id),
        reason: crate::Refusal::SessionDeleted,
    })
}

/// The key of a session a read is for; a missing session is not found.
pub(crate) fn key_for_read(connection: &Connection, id: SessionId) -> Result<i64> {
    session_key(connection, id)?.ok_or_else(|| Error::NotFound {
        what: "session",
        id: id.to_string(),
    })
}

/// Deletes a session and, by cascade, everything that belongs to it. Returns whether it existed.
pub(crate) fn delete_session(connection: &Connection, id: SessionId, now_ms: i64) -> Result<bool> {
    // A delegated child's open run owes its parent a result; the parent would otherwise stay
    // parked on a child that is gone.
    let owed = crate::children::deliveries_owed_by_deleting(connection, id, now_ms)?;
    let n_deleted = connection
        .prepare_cached("DELETE FROM sessions WHERE id = ?1")?
        .execute(params![id.to_string()])?;
    crate::children::deliver_owed(connection, &owed, now_ms)?;
    Ok(n_deleted == 1)
}

/// Sets the session's `updated_at`, in the writer's transaction. Nothing reads its answer: on
/// PostgreSQL it goes with the next statement that is waited on (`Statement::send`).
pub(crate) fn touch_session(connection: &Connection, id: SessionId, now_ms: i64) -> Result<()> {
    connection
        .prepare_cached("UPDATE sessions SET updated_at = ?2 WHERE id = ?1")?
        .send(params![id.to_string(), now_ms])
}

/// Sets the session's title, description and who named it. Returns whether the session exists.
pub(crate) fn set_session_status(
    connection: &Connection,
    id: SessionId,
    title: &str,
    description: &str,
    source: TitleSource,
    now_ms: i64,
) -> Result<bool> {
    let n_updated = connection
        .prepare_cached(
            "UPDATE sessions SET title = ?2, description = ?3, title_source = ?4, updated_at = ?5
             WHERE id = ?1",
        )?
        .execute(params![
            id.to_string(),
            title,
            description,
            source.as_str(),
            now_ms
        ])?;
    Ok(n_updated == 1)
}

/// The fallback namer: titles the session, as [`TitleSource::Fallback`], only while nobody has
/// named it (`title_source` is still `none`). Returns whether it named it.
pub(crate) fn name_session_if_untitled(
    connection: &Connection,
    id: SessionId,
    title: &str,
    now_ms: i64,
) -> Result<bool> {
    let n_updated = connection
        .prepare_cached(
            "UPDATE sessions SET title = ?2, title_source = ?3, updated_at = ?4
             WHERE id = ?1 AND title_source = ?5",
        )?
        .execute(params![
            id.to_string(),
            title,
            TitleSource::Fallback.as_str(),
            now_ms,
            TitleSource::None.as_str(),
        ])?;
    Ok(n_updated == 1)
}

/// Sets (or, with `None`, clears) the session's plan. Returns whether the session exists.
pub(crate) fn set_session_plan(
    connection: &Connection,
    id: SessionId,
    plan: Option<&serde_json::Value>,
    now_ms: i64,
) -> Result<bool> {
    let n_updated = connection
        .prepare_cached("UPDATE sessions SET plan = ?2, updated_at = ?3 WHERE id = ?1")?
        .execute(params![
            id.to_string(),
            plan.map(serde_json::Value::to_string),
            now_ms
        ])?;
    Ok(n_updated == 1)
}

/// The sessions delegated from `parent`, oldest first.
pub(crate) fn list_child_sessions(
    connection: &Connection,
    parent: SessionId,
) -> Result<Vec<SessionRow>> {
    let mut statement = connection.prepare_cached(&format!(
        "SELECT {SESSION_COLUMNS} FROM sessions WHERE parent_session_id = ?1
         ORDER BY created_at, key"
    ))?;
    collect_rows(statement.query_map(params![parent.to_string()], session_from_row)?)
}

impl Store {
    pub async fn create_account(
        &self,
        id: AccountId,
        public_key: Vec<u8>,
        created_at_ms: i64,
    ) -> Result<()> {
        self.write(None, move |connection| {
            insert_account(connection, id, &public_key, created_at_ms)
        })
        .await
    }

    pub async fn get_account(&self, id: AccountId) -> Result<Option<AccountRow>> {
        self.read(move |connection| get_account(connection, id))
            .await
    }

    pub async fn create_session(&self, session: NewSession) -> Result<()> {
        self.write(Some(session.id), move |connection| {
            insert_session(connection, &session)
        })
        .await
    }

    pub async fn get_session(&self, id: SessionId) -> Result<Option<SessionRow>> {
        self.read(move |connection| get_session(connection, id))
            .await
    }

    /// The account's sessions, most recently updated first.
    pub async fn list_sessions(&self, account_id: AccountId) -> Result<Vec<SessionRow>> {
        self.read(move |connection| list_sessions(connection, account_id))
            .await
    }

    /// A page of the account's sessions: up to `limit` after `after` (from the first without
    /// it), most recently updated first, read as one page from the database.
    pub async fn list_sessions_page(
        &self,
        account_id: AccountId,
        after: Option<SessionsAfter>,
        limit: usize,
    ) -> Result<SessionsPage> {
        self.read(move |connection| list_sessions_page(connection, account_id, after, limit))
            .await
    }

    /// Deletes the session with its log, store, runs, lease, edges, attachments and delegated
    /// children. Returns whether it existed. A delegated child's open run answers its parent's
    /// call with an error in the same transaction, and the parent is resumed once its other
    /// children have ended.
    pub async fn delete_session(&self, id: SessionId, now_ms: i64) -> Result<bool> {
        let deleted = self
            .write(Some(id), move |connection| {
                delete_session(connection, id, now_ms)
            })
            .await?;
        if deleted {
            self.remove_attachment_files(Some(id)).await;
        }
        Ok(deleted)
    }

    /// Sets the session's title, description and who named it (the status verb, a rename by
    /// the user). Returns whether the session exists.
    pub async fn set_session_status(
        &self,
        session_id: SessionId,
        title: String,
        description: String,
        source: TitleSource,
        now_ms: i64,
    ) -> Result<bool> {
        self.write(Some(session_id), move |connection| {
            set_session_status(connection, session_id, &title, &description, source, now_ms)
        })
        .await
    }

    /// The fallback namer: titles the session (as [`TitleSource::Fallback`]) only while nobody
    /// has named it, never over an agent's or a user's title. Returns whether it named it.
    pub async fn name_session_if_untitled(
        &self,
        session_id: SessionId,
        title: String,
        now_ms: i64,
    ) -> Result<bool> {
        self.write(Some(session_id), move |connection| {
            name_session_if_untitled(connection, session_id, &title, now_ms)
        })
        .await
    }

    /// Sets the session's plan (a JSON checklist), or clears it with `None`. Returns whether
    /// the session exists.
    pub async fn set_session_plan(
        &self,
        session_id: SessionId,
        plan: Option<serde_json::Value>,
        now_ms: i64,
    ) -> Result<bool> {
        self.write(Some(session_id), move |connection| {
            set_session_plan(connection, session_id, plan.as_ref(), now_ms)
        })
        .await
    }

    /// The sessions delegated from `parent`, oldest first.
    pub async fn list_child_sessions(&self, parent: SessionId) -> Result<Vec<SessionRow>> {
        self.read(move |connection| list_child_sessions(connection, parent))
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A page is read from `sessions_by_account` from its start on: a seek to the account and
    /// the cursor's time, not a walk over the pages before it.
    #[test]
    fn a_page_of_sessions_seeks_to_its_cursor_in_the_accounts_index() {
        let (_dir, connection) = crate::schema::new_database();
        let plan: Vec<String> = connection
            .prepare(&format!("EXPLAIN QUERY PLAN {SESSIONS_PAGE}"))
            .expect("the query")
            .query_map(params!["acc", 5, "ses", 3], |row| row.get(3))
            .and_then(Iterator::collect)
            .expect("the plan");
        let plan = plan.join("\n");
        assert!(
            plan.contains("sessions_by_account (account_id=? AND updated_at<?)"),
            "{plan}"
        );
    }
}
