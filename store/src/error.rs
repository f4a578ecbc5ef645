//! The store's errors. A write the database refuses is a [`Refusal`] that names the session.

use std::fmt;

use seed_events::SessionId;

pub type Result<T, E = Error> = std::result::Result<T, E>;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The database refused a write; nothing of it was committed. Other jobs go on.
    #[error("{}", RefusedDisplay { session_id: *session_id, reason })]
    Refused {
        /// The session the write was for, when it was for one.
        session_id: Option<SessionId>,
        reason: Refusal,
    },
    #[error("{what} {id} not found")]
    NotFound { what: &'static str, id: String },
    #[error("corrupt row in {table}: {detail}")]
    Corrupt { table: &'static str, detail: String },
    /// A memory path that is not a plain file under `~/memory/`; nothing was written.
    #[error("invalid memory path {path:?}: {reason}")]
    InvalidPath { path: String, reason: &'static str },
    /// A write that would take an account past one of its quotas ([`crate::Quotas`]);
    /// nothing of it was written.
    #[error("{what} would be {would_be}, past the {max} an account may have ({quota})")]
    OverQuota {
        /// What the write would grow ("the account's memory files").
        what: &'static str,
        would_be: u64,
        max: u64,
        /// The quota's name in [`crate::Quotas`].
        quota: &'static str,
    },
    #[error("store is closed")]
    Closed,
    /// A query for one row found none (`optional()` turns it into `None`).
    #[error("query returned no rows")]
    NoRows,
    // The foreign errors below are shown in this error's own text ("sqlite: database or disk
    // is full") rather than as its `source`, so every surface that prints the error, even with
    // `to_string`, names the cause, and a printed chain (`{:#}`) does not repeat it.
    #[error("migration failed: {0}")]
    Migration(rusqlite_migration::Error),
    #[error("cannot open {path}: journal_mode is {mode}, not wal")]
    NoWal { path: String, mode: String },
    #[error("sqlite: {0}")]
    Sqlite(rusqlite::Error),
    #[error("postgres: {}", crate::postgres::describe(.0))]
    Postgres(tokio_postgres::Error),
    /// The pool of PostgreSQL connections failed other than by a connection's error.
    #[error("postgres pool: {0}")]
    PostgresPool(String),
    #[error("io: {0}")]
    Io(std::io::Error),
}

impl From<rusqlite::Error> for Error {
    fn from(error: rusqlite::Error) -> Self {
        Error::Sqlite(error)
    }
}

impl From<std::io::Error> for Error {
    fn from(error: std::io::Error) -> Self {
        Error::Io(error)
    }
}

/// Why the database refused a write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// The disk (or the configured `max_page_count`) has no room for it.
    DiskFull,
    /// The session was deleted before the write reached the database.
    SessionDeleted,
    /// A unique key already holds this value: the write would duplicate a row.
    Duplicate { detail: String },
    /// Another constraint (a check, a foreign key other than the session's) refused it.
    Constraint { detail: String },
    /// This node no longer holds the session's lease: its row lapsed (the process was paused
    /// or cut off) and another node may have taken the session over.
    Fenced,
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refusal::DiskFull => f.write_str("the disk is full"),
            Refusal::SessionDeleted => f.write_str("the session was deleted"),
            Refusal::Duplicate { detail } => write!(f, "duplicate ({detail})"),
            Refusal::Constraint { detail } => write!(f, "constraint failed ({detail})"),
            Refusal::Fenced => f.write_str("this node no longer holds the session's lease"),
        }
    }
}

struct RefusedDisplay<'a> {
    session_id: Option<SessionId>,
    reason: &'a Refusal,
}

impl fmt::Display for RefusedDisplay<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.session_id {
            Some(session_id) => {
                write!(f, "write for session {session_id} refused: {}", self.reason)
            }
            None => write!(f, "write refused: {}", self.reason),
        }
    }
}

impl Error {
    pub(crate) fn corrupt(table: &'static str, detail: impl fmt::Display) -> Self {
        Error::Corrupt {
            table,
            detail: detail.to_string(),
        }
    }

    /// Parses a column's text as `T`, or reports the row as corrupt.
    pub(crate) fn parse_column<T>(table: &'static str, text: &str) -> Result<T>
    where
        T: std::str::FromStr,
        T::Err: fmt::Display,
    {
        text.parse()
            .map_err(|error| Error::corrupt(table, format_args!("{text:?}: {error}")))
    }

    /// The refusal, when the database refused a write.
    pub fn refusal(&self) -> Option<&Refusal> {
        match self {
            Error::Refused { reason, .. } => Some(reason),
            _ => None,
        }
    }

    /// Whether this error means the disk is full.
    pub fn is_disk_full(&self) -> bool {
        matches!(self.refusal(), Some(Refusal::DiskFull))
    }

    /// Whether the database could not be reached (PostgreSQL away, restarting, or not
    /// accepting connections): a failure that passes once it is back, and nothing of the write
    /// was committed. SQLite's file is always there.
    pub fn is_unavailable(&self) -> bool {
        match self {
            Error::PostgresPool(_) => true,
            Error::Postgres(error) => match error.code() {
                // Not the server's answer to a statement: the connection closed or could not
                // be made.
                None => {
                    error.is_closed()
                        || std::error::Error::source(error)
                            .is_some_and(|source| source.is::<std::io::Error>())
                }
                Some(code) => {
                    let code = code.code();
                    // Connection exceptions, an administrator's or a crash's shutdown, too
                    // many connections, a database not accepting connections.
                    code.starts_with("08")
                        || code.starts_with("57P")
                        || code == "53300"
                        || code == "55000"
                }
            },
            _ => false,
        }
    }

    /// Whether PostgreSQL ended the transaction to break a conflict with another one running at
    /// the same time (a deadlock, or a serialization failure): nothing of it was committed,
    /// and the same transaction run again may pass.
    pub(crate) fn is_conflict(&self) -> bool {
        match self {
            Error::Postgres(error) => error
                .code()
                .is_some_and(|code| matches!(code.code(), "40P01" | "40001")),
            _ => false,
        }
    }

    /// Whether a statement failed because the server had closed its connection (it restarted,
    /// or an administrator cut the connection off), which the connection had not noticed yet:
    /// a connection opened anew may serve at once.
    pub(crate) fn is_connection_closed(&self) -> bool {
        match self {
            Error::Postgres(error) => {
                error.is_closed()
                    || error
                        .code()
                        .is_some_and(|code| code.code().starts_with("57P"))
            }
            _ => false,
        }
    }

    /// Whether `error`, or any error it was caused by, is the store finding the database away
    /// ([`Error::is_unavailable`]), for callers that hold the store's error wrapped in theirs.
    pub fn is_unavailable_cause(error: &(dyn std::error::Error + 'static)) -> bool {
        let mut cause = Some(error);
        while let Some(error) = cause {
            if error
                .downcast_ref::<Error>()
                .is_some_and(Error::is_unavailable)
            {
                return true;
            }
            cause = error.source();
        }
        false
    }

    /// Whether `error`, or any error it was caused by, is the store finding the disk full:
    /// for callers that hold the store's error wrapped in their own (a refused commit of the
    /// durable harness, say).
    pub fn is_disk_full_cause(error: &(dyn std::error::Error + 'static)) -> bool {
        let mut cause = Some(error);
        while let Some(error) = cause {
            if error
                .downcast_ref::<Error>()
                .is_some_and(Error::is_disk_full)
            {
                return true;
            }
            cause = error.source();
        }
        false
    }
}

/// Collects rows that each parse on their own: the first SQLite or parse error wins.
pub(crate) fn collect_rows<T>(rows: impl Iterator<Item = Result<Result<T>>>) -> Result<Vec<T>> {
    let mut parsed = Vec::new();
    for row in rows {
        parsed.push(row??);
    }
    Ok(parsed)
}

/// What a failed SQLite call means for a write scoped to `session_id`. A foreign-key failure
/// is reported as a deleted session only when the caller has checked that the session is gone
/// (`session_exists`); otherwise it is a plain constraint failure.
pub(crate) fn classify(
    error: Error,
    session_id: Option<SessionId>,
    session_exists: impl FnOnce(SessionId) -> bool,
) -> Error {
    if let Error::Postgres(postgres) = &error {
        return classify_postgres(postgres, session_id, session_exists).unwrap_or(error);
    }
    let Error::Sqlite(rusqlite::Error::SqliteFailure(failure, message)) = &error else {
        return error;
    };
    let detail = message.clone().unwrap_or_else(|| failure.to_string());
    let reason = match failure.code {
        rusqlite::ErrorCode::DiskFull => Refusal::DiskFull,
        rusqlite::ErrorCode::ConstraintViolation => match failure.extended_code {
            rusqlite::ffi::SQLITE_CONSTRAINT_UNIQUE
            | rusqlite::ffi::SQLITE_CONSTRAINT_PRIMARYKEY => Refusal::Duplicate { detail },
            rusqlite::ffi::SQLITE_CONSTRAINT_FOREIGNKEY
                if session_id.is_some_and(|id| !session_exists(id)) =>
            {
                Refusal::SessionDeleted
            }
            _ => Refusal::Constraint { detail },
        },
        _ => return error,
    };
    Error::Refused { session_id, reason }
}

/// [`classify`] for PostgreSQL's errors, by their SQLSTATE; `None` for one that is not a
/// refusal of the write.
fn classify_postgres(
    error: &tokio_postgres::Error,
    session_id: Option<SessionId>,
    session_exists: impl FnOnce(SessionId) -> bool,
) -> Option<Error> {
    use tokio_postgres::error::SqlState;
    let db_error = error.as_db_error()?;
    let detail = match db_error.detail() {
        Some(detail) => format!("{}: {detail}", db_error.message()),
        None => db_error.message().to_owned(),
    };
    let code = db_error.code();
    let reason = if *code == SqlState::DISK_FULL {
        Refusal::DiskFull
    } else if *code == SqlState::UNIQUE_VIOLATION {
        Refusal::Duplicate { detail }
    } else if (*code == SqlState::FOREIGN_KEY_VIOLATION
        // A session's key found NULL in the insert itself (`append_lines_locking`).
        || *code == SqlState::NOT_NULL_VIOLATION)
        && session_id.is_some_and(|id| !session_exists(id))
    {
        Refusal::SessionDeleted
    } else if code.code().starts_with("23") {
        // Class 23: integrity constraint violations (checks, not-null, foreign keys).
        Refusal::Constraint { detail }
    } else {
        return None;
    };
    Some(Error::Refused { session_id, reason })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_foreign_error_is_shown_with_its_cause_once() -> anyhow::Result<()> {
        let connection = rusqlite::Connection::open_in_memory()?;
        let error = Error::from(
            connection
                .execute("DELETE FROM missing", [])
                .expect_err("the table does not exist"),
        );
        assert_eq!(error.to_string(), "sqlite: no such table: missing");
        // A printed chain names the cause once.
        assert_eq!(
            format!("{:#}", anyhow::Error::from(error)),
            "sqlite: no such table: missing"
        );

        let error = Error::from(std::io::Error::new(
            std::io::ErrorKind::PermissionDenied,
            "permission denied: /data/agents.db",
        ));
        assert_eq!(error.to_string(), "io: permission denied: /data/agents.db");
        Ok(())
    }
}
