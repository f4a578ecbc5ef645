//! Opening a connection: pragmas, and the versioned migrations that build the schema, listed
//! once for both engines (SQLite here; PostgreSQL's runner is `crate::postgres::schema`).

use std::ops::RangeInclusive;
use std::sync::LazyLock;

use rusqlite::{Connection, OpenFlags};
use rusqlite_migration::{M, Migrations, SchemaVersion};

use crate::{Config, Error, Result};

/// What one version of the schema does on each engine.
pub(crate) struct Version {
    /// The SQL SQLite runs.
    pub(crate) sqlite: &'static str,
    /// What SQLite runs after `sqlite`, in the same transaction: a change SQL alone cannot make
    /// only where it is missing.
    pub(crate) sqlite_hook: Option<fn(&rusqlite::Transaction) -> rusqlite_migration::HookResult>,
    /// The SQL PostgreSQL runs; empty where the version has nothing to do there.
    pub(crate) postgres: &'static str,
}

/// The schema's versions, in order, for both engines: version N is the Nth.
///
/// SQLite's version 1 is `sqlite-schema.sql`, the current schema; a later change is made there
/// and added here as a version of its own that does nothing where it is already in place, so a
/// new database and an upgraded one end up the same. PostgreSQL's version 1 is
/// `postgres-schema.sql`, the whole schema as of version 12 (no PostgreSQL database is older),
/// so versions 2 to 12 have nothing to do there; it stays as it is, and a later version adds to
/// it (`migrations/00NN-name.postgres.sql`). So a later change goes into `sqlite-schema.sql`
/// and here as one version with each engine's SQL; a test checks that the two engines' schemas
/// agree.
pub(crate) static VERSIONS: [Version; 22] = [
    Version {
        sqlite: include_str!("../sqlite-schema.sql"),
        sqlite_hook: None,
        postgres: include_str!("../postgres-schema.sql"),
    },
    sqlite_only(include_str!("../migrations/0002-runs-by-parent.sql"), None),
    sqlite_only(
        include_str!("../migrations/0003-runs-account.sql"),
        Some(add_runs_account),
    ),
    sqlite_only(
        include_str!("../migrations/0004-checks-without-lists.sql"),
        Some(rewrite_list_checks),
    ),
    sqlite_only(
        include_str!("../migrations/0005-runs-open-by-session.sql"),
        None,
    ),
    sqlite_only(
        include_str!("../migrations/0006-runs-restarts.sql"),
        Some(add_runs_restarts),
    ),
    sqlite_only(
        include_str!("../migrations/0007-no-index-of-entry-marks.sql"),
        None,
    ),
    sqlite_only(include_str!("../migrations/0008-call-effects.sql"), None),
    sqlite_only(
        include_str!("../migrations/0009-runs-running-by-account.sql"),
        None,
    ),
    sqlite_only(include_str!("../migrations/0010-schedules.sql"), None),
    sqlite_only(include_str!("../migrations/0011-approvals.sql"), None),
    sqlite_only(include_str!("../migrations/0012-durable-kept.sql"), None),
    Version {
        sqlite: include_str!("../migrations/0013-elicitations.sql"),
        sqlite_hook: None,
        postgres: include_str!("../migrations/0013-elicitations.postgres.sql"),
    },
    Version {
        sqlite: include_str!("../migrations/0014-tokens.sql"),
        sqlite_hook: None,
        postgres: include_str!("../migrations/0014-tokens.postgres.sql"),
    },
    Version {
        // SQLite numbers its rows itself.
        sqlite: "",
        sqlite_hook: None,
        postgres: include_str!("../migrations/0015-row-order.postgres.sql"),
    },
    Version {
        sqlite: include_str!("../migrations/0016-nodes.sql"),
        sqlite_hook: Some(add_lease_epoch),
        postgres: include_str!("../migrations/0016-nodes.postgres.sql"),
    },
    Version {
        sqlite: include_str!("../migrations/0017-attachment-contents.sql"),
        sqlite_hook: None,
        postgres: include_str!("../migrations/0017-attachment-contents.postgres.sql"),
    },
    Version {
        sqlite: include_str!("../migrations/0018-continuation-kinds-and-recalls.sql"),
        sqlite_hook: Some(add_continuation_kind),
        postgres: include_str!("../migrations/0018-continuation-kinds-and-recalls.postgres.sql"),
    },
    Version {
        sqlite: include_str!("../migrations/0019-run-trace-parent.sql"),
        sqlite_hook: Some(add_run_trace_parent),
        postgres: include_str!("../migrations/0019-run-trace-parent.postgres.sql"),
    },
    Version {
        sqlite: include_str!("../migrations/0020-pending-events.sql"),
        sqlite_hook: None,
        postgres: include_str!("../migrations/0020-pending-events.postgres.sql"),
    },
    Version {
        // SQLite's index of an account's queued runs ends in their rowid already.
        sqlite: "",
        sqlite_hook: None,
        postgres: include_str!("../migrations/0021-queued-runs-in-order.postgres.sql"),
    },
    Version {
        sqlite: include_str!("../migrations/0022-runs-pass-started.sql"),
        sqlite_hook: Some(add_runs_pass_started),
        postgres: include_str!("../migrations/0022-runs-pass-started.postgres.sql"),
    },
];

/// A version made before PostgreSQL's version 1: it upgrades older SQLite databases alone.
const fn sqlite_only(
    sqlite: &'static str,
    sqlite_hook: Option<fn(&rusqlite::Transaction) -> rusqlite_migration::HookResult>,
) -> Version {
    Version {
        sqlite,
        sqlite_hook,
        postgres: "",
    }
}

/// The schema's newest version.
pub const LATEST_VERSION: u32 = VERSIONS.len() as u32;

/// [`VERSIONS`] as SQLite's migrations.
static MIGRATIONS: LazyLock<Migrations<'static>> = LazyLock::new(|| {
    Migrations::new(
        VERSIONS
            .iter()
            .map(|version| match version.sqlite_hook {
                Some(hook) => M::up_with_hook(version.sqlite, hook),
                None => M::up(version.sqlite),
            })
            .collect(),
    )
});

/// An engine the schema is kept for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Engine {
    Sqlite,
    Postgres,
}

/// The SQL that makes a new database of `engine` at the newest version, with the record of its
/// version, for an operator who applies the schema by hand (`seed migrate --print`). On
/// PostgreSQL each version is a transaction of its own, as the runner applies it.
pub fn schema_script(engine: Engine) -> String {
    match engine {
        Engine::Sqlite => format!(
            "-- Seed's schema for SQLite, version {LATEST_VERSION}: what a new database gets.\n\n\
             {}\nPRAGMA user_version = {LATEST_VERSION};\n",
            VERSIONS[0].sqlite
        ),
        Engine::Postgres => crate::postgres::schema::script(),
    }
}

/// Brings the SQLite database `config` names up to the newest version, creating it if needed,
/// and returns the versions it applied (none when it was up to date).
pub fn migrate_sqlite(config: &Config) -> Result<RangeInclusive<u32>> {
    open_migrated(config, crate::wal_writes::vfs_name()).map(|(_, applied)| applied)
}

/// Opens the writer's connection and brings the schema up to date; the versions it applied
/// with it.
/// `vfs` names the VFS the connection opens its files through (`None`: SQLite's default).
fn open_migrated(
    config: &Config,
    vfs: Option<&std::ffi::CStr>,
) -> Result<(Connection, RangeInclusive<u32>)> {
    if !crate::memory_disk::is_memory(config) {
        create_private(&config.path)?;
    }
    let mut connection = match vfs {
        Some(vfs) => Connection::open_with_flags_and_vfs(&config.path, OpenFlags::default(), vfs)?,
        None => Connection::open(&config.path)?,
    };
    connection.set_prepared_statement_cache_capacity(STATEMENT_CACHE_CAPACITY);
    plan_apart_from_bound_values(&connection)?;
    apply_pragmas(&connection, config)?;
    let before = match MIGRATIONS
        .current_version(&connection)
        .map_err(Error::Migration)?
    {
        SchemaVersion::NoneSet => 0,
        SchemaVersion::Inside(version) | SchemaVersion::Outside(version) => {
            u32::try_from(version.get()).unwrap_or(u32::MAX)
        }
    };
    MIGRATIONS
        .to_latest(&mut connection)
        .map_err(Error::Migration)?;
    Ok((connection, before.saturating_add(1)..=LATEST_VERSION))
}

/// Runs `add` (SQL that adds `column` to `table`, and what goes with it) only where the column
/// is missing: a database made by `sqlite-schema.sql` has it already.
fn add_column_where_missing(
    transaction: &rusqlite::Transaction,
    table: &str,
    column: &str,
    add: &str,
) -> rusqlite_migration::HookResult {
    let has_column: bool = transaction.query_row(
        "SELECT EXISTS (SELECT 1 FROM pragma_table_info(?1) WHERE name = ?2)",
        [table, column],
        |row| row.get(0),
    )?;
    if !has_column {
        transaction.execute_batch(add)?;
    }
    Ok(())
}

/// Migration 3: each run names its session's account, so an account's queued runs are counted
/// from an index of their own. The column is added (and filled in) only where it is missing.
fn add_runs_account(transaction: &rusqlite::Transaction) -> rusqlite_migration::HookResult {
    add_column_where_missing(
        transaction,
        "runs",
        "account_id",
        "ALTER TABLE runs ADD COLUMN account_id TEXT;
         UPDATE runs SET account_id =
             (SELECT account_id FROM sessions WHERE sessions.id = runs.session_id);",
    )?;
    transaction.execute_batch(
        "CREATE INDEX IF NOT EXISTS runs_queued_by_account ON runs (account_id)
             WHERE status = 'queued';",
    )?;
    Ok(())
}

/// Migration 6: each run counts the boot sweeps that found it cut off mid-turn.
fn add_runs_restarts(transaction: &rusqlite::Transaction) -> rusqlite_migration::HookResult {
    add_column_where_missing(
        transaction,
        "runs",
        "restarts",
        "ALTER TABLE runs ADD COLUMN restarts INTEGER NOT NULL DEFAULT 0;",
    )
}

/// Migration 16: each session lease names the epoch of the node holding it.
fn add_lease_epoch(transaction: &rusqlite::Transaction) -> rusqlite_migration::HookResult {
    add_column_where_missing(
        transaction,
        "session_leases",
        "epoch",
        "ALTER TABLE session_leases ADD COLUMN epoch INTEGER NOT NULL DEFAULT 0;",
    )
}

/// Migration 18: each continuation edge has a kind.
fn add_continuation_kind(transaction: &rusqlite::Transaction) -> rusqlite_migration::HookResult {
    add_column_where_missing(
        transaction,
        "session_continuations",
        "kind",
        "ALTER TABLE session_continuations ADD COLUMN kind TEXT NOT NULL \
         DEFAULT 'continuation' CHECK (kind = 'continuation' OR kind = 'fork');",
    )
}

/// Migration 19: each run keeps the traceparent of its newest span.
fn add_run_trace_parent(transaction: &rusqlite::Transaction) -> rusqlite_migration::HookResult {
    add_column_where_missing(
        transaction,
        "runs",
        "trace_parent",
        "ALTER TABLE runs ADD COLUMN trace_parent TEXT;",
    )
}

/// Migration 22: each run says whether its pass has started; the runs left running or parked
/// have theirs started.
fn add_runs_pass_started(transaction: &rusqlite::Transaction) -> rusqlite_migration::HookResult {
    add_column_where_missing(
        transaction,
        "runs",
        "pass_started",
        "ALTER TABLE runs ADD COLUMN pass_started INTEGER NOT NULL DEFAULT 0
             CHECK (pass_started BETWEEN 0 AND 1);
         UPDATE runs SET pass_started = 1 WHERE status = 'running' OR status = 'parked';",
    )
}

/// Migration 4: each CHECK that databases before it name their values in with an IN list (table,
/// old text, new text). The new text is sqlite-schema.sql's, so an upgraded table reads as a new
/// one does.
const LIST_CHECKS: [(&str, &str, &str); 6] = [
    (
        "sessions",
        "CHECK (title_source IN ('none', 'agent', 'user', 'fallback'))",
        "CHECK (title_source = 'none' OR title_source = 'agent' OR title_source = 'user'
                              OR title_source = 'fallback')",
    ),
    (
        "session_events",
        "CHECK (role IN ('user', 'assistant', 'system', 'tool'))",
        "CHECK (role = 'user' OR role = 'assistant' OR role = 'system' OR role = 'tool')",
    ),
    (
        "session_durable_files",
        "CHECK (file IN (0, 1, 2))",
        "CHECK (file BETWEEN 0 AND 2)",
    ),
    (
        "runs",
        "CHECK (queue IN ('interactive', 'background'))",
        "CHECK (queue = 'interactive' OR queue = 'background')",
    ),
    (
        "runs",
        "CHECK (status IN ('queued', 'running', 'parked', 'succeeded', 'failed', 'canceled'))",
        "CHECK (status = 'queued' OR status = 'running' OR status = 'parked'
                           OR status = 'succeeded' OR status = 'failed' OR status = 'canceled')",
    ),
    (
        "runs",
        "CHECK (typed IN (0, 1))",
        "CHECK (typed BETWEEN 0 AND 1)",
    ),
];

/// Migration 4: rewrites the IN-list checks of [`LIST_CHECKS`] where a table still has them.
/// The checks allow the same values as before, so no row breaks them and only the schema's text
/// changes: SQLite's documented procedure for such a change (edit `sqlite_schema` under
/// `writable_schema`, then bump `schema_version`), inside the migration's transaction.
fn rewrite_list_checks(transaction: &rusqlite::Transaction) -> rusqlite_migration::HookResult {
    let mut changed: Vec<(&str, String)> = Vec::new();
    let mut tables: Vec<&str> = LIST_CHECKS.iter().map(|(table, _, _)| *table).collect();
    tables.dedup();
    for table in tables {
        let sql: String = transaction.query_row(
            "SELECT sql FROM sqlite_schema WHERE type = 'table' AND name = ?1",
            [table],
            |row| row.get(0),
        )?;
        let new_sql = LIST_CHECKS
            .iter()
            .filter(|(name, _, _)| *name == table)
            .fold(sql.clone(), |sql, (_, old, new)| sql.replace(old, new));
        if new_sql != sql {
            changed.push((table, new_sql));
        }
    }
    if changed.is_empty() {
        return Ok(());
    }
    let version: i64 = transaction.query_row("PRAGMA schema_version", [], |row| row.get(0))?;
    transaction.execute_batch("PRAGMA writable_schema = ON")?;
    for (table, sql) in &changed {
        transaction.execute(
            "UPDATE sqlite_schema SET sql = ?1 WHERE type = 'table' AND name = ?2",
            [sql.as_str(), table],
        )?;
    }
    transaction.execute_batch(&format!(
        "PRAGMA schema_version = {}; PRAGMA writable_schema = OFF;",
        version + 1
    ))?;
    let check: String = transaction.query_row("PRAGMA quick_check", [], |row| row.get(0))?;
    if check != "ok" {
        return Err(rusqlite_migration::HookError::Hook(format!(
            "the database failed its check after its constraints were rewritten: {check}"
        )));
    }
    Ok(())
}

/// Prepared statements a connection keeps. The store has some eighty statements, and
/// a turn passes through many of them: with rusqlite's default of 16, the least recently used
/// were evicted and prepared again all the time (2 % of the writer's time in a profile).
const STATEMENT_CACHE_CAPACITY: usize = 128;

/// Turns on SQLite's query planner stability guarantee for `connection`: a statement's plan
/// never depends on the values bound to it. Without it, a statement whose plan looked at a bound
/// value (`LIMIT ?2`, which SQLite reads for its row estimate) is marked expired whenever that
/// parameter is bound again, and each execution parses and plans it anew: the store's claims
/// count queued runs up to a limit at every message, and that re-preparing was 15 % of the
/// writer's instructions at 100 sessions. No statement of the store needs a bound value to find
/// its index: the partial indexes' conditions are met by literals in the queries.
fn plan_apart_from_bound_values(connection: &Connection) -> Result<()> {
    connection.set_db_config(
        rusqlite::config::DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG,
        true,
    )?;
    Ok(())
}

/// Opens the writer's connection: creates the file if needed, switches it to WAL, applies the
/// pragmas and brings the schema up to date.
pub(crate) fn open_writer(config: &Config) -> Result<Connection> {
    // The one connection that writes the WAL: through the VFS that writes a commit's frames
    // at once (src/wal_writes.rs).
    open_migrated(config, crate::wal_writes::vfs_name()).map(|(connection, _)| connection)
}

/// A writing connection as SQLite makes it, through its default VFS: the bench's floors, which
/// are raw SQLite's figures, whatever the store's writer does better.
pub(crate) fn open_raw_writer(config: &Config) -> Result<Connection> {
    open_migrated(config, None).map(|(connection, _)| connection)
}

/// Creates a missing database file readable by its owner only (0600) before SQLite opens it:
/// the file holds every account's sessions, and SQLite gives the WAL and shared-memory files
/// it makes beside it the database file's mode. An existing file is left as it is.
fn create_private(path: &std::path::Path) -> Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    match std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
    {
        Ok(_) => Ok(()),
        Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(error) => Err(error.into()),
    }
}

/// Opens a read-only connection to a database the writer has already set up.
pub(crate) fn open_reader(config: &Config) -> Result<Connection> {
    let connection = Connection::open_with_flags(
        &config.path,
        OpenFlags::SQLITE_OPEN_READ_ONLY
            | OpenFlags::SQLITE_OPEN_NO_MUTEX
            | OpenFlags::SQLITE_OPEN_URI,
    )?;
    connection.set_prepared_statement_cache_capacity(STATEMENT_CACHE_CAPACITY);
    plan_apart_from_bound_values(&connection)?;
    connection.busy_timeout(config.busy_timeout)?;
    connection.pragma_update(None, "query_only", true)?;
    Ok(connection)
}

/// The pragmas every writing connection runs with, the bench's raw floor included.
/// `journal_mode` is set here, outside any migration, because a transaction ignores it.
pub fn apply_pragmas(connection: &Connection, config: &Config) -> Result<()> {
    connection.busy_timeout(config.busy_timeout)?;
    let mode: String =
        connection.pragma_update_and_check(None, "journal_mode", "WAL", |row| row.get(0))?;
    if !mode.eq_ignore_ascii_case("wal") && !crate::memory_disk::is_memory(config) {
        return Err(Error::NoWal {
            path: config.path.display().to_string(),
            mode,
        });
    }
    connection.pragma_update(None, "synchronous", config.synchronous.as_pragma())?;
    connection.pragma_update(None, "foreign_keys", true)?;
    if let Some(max_page_count) = config.max_page_count {
        connection.pragma_update(None, "max_page_count", max_page_count)?;
    }
    Ok(())
}

/// A new database in a temporary dir: what a test of the store's statements starts from.
#[cfg(test)]
pub(crate) fn new_database() -> (tempfile::TempDir, crate::sql::Connection) {
    let dir = tempfile::tempdir().expect("a temporary dir");
    let connection =
        open_writer(&Config::new(dir.path().join("agents.db"))).expect("a new database");
    (dir, connection.into())
}

/// The SQL that stores the account `account_id` and its session `session_id`.
#[cfg(test)]
pub(crate) fn account_and_session(account_id: &str, session_id: &str) -> String {
    format!(
        "INSERT INTO accounts (id, public_key, created_at) VALUES ('{account_id}', x'00', 0);
         INSERT INTO sessions (id, account_id, created_at, updated_at)
             VALUES ('{session_id}', '{account_id}', 0, 0);"
    )
}

/// [`new_database`] holding the account `acc` and its session `session_id`.
#[cfg(test)]
pub(crate) fn database_with_a_session(
    session_id: &str,
) -> (tempfile::TempDir, crate::sql::Connection) {
    let (dir, connection) = new_database();
    connection
        .execute_batch(&account_and_session("acc", session_id))
        .expect("an account and its session");
    (dir, connection)
}

/// The opcodes of `sql`'s program (`EXPLAIN`, its parameters bound to NULL): what a test reads
/// to see how SQLite runs a statement.
#[cfg(test)]
pub(crate) fn program(connection: &Connection, sql: &str) -> Vec<String> {
    let mut statement = connection
        .prepare(&format!("EXPLAIN {sql}"))
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
    let nulls = vec![rusqlite::types::Null; statement.parameter_count()];
    statement
        .query_map(rusqlite::params_from_iter(nulls), |row| row.get(1))
        .and_then(Iterator::collect)
        .expect("the program")
}

#[cfg(test)]
mod tests;
