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
pub(crate) static VERSIONS: [Version; 14] = [
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
    open_migrated(config).map(|(_, applied)| applied)
}

/// Opens the writer's connection and brings the schema up to date; the versions it applied
/// with it.
fn open_migrated(config: &Config) -> Result<(Connection, RangeInclusive<u32>)> {
    if !crate::memory_disk::is_memory(config) {
        create_private(&config.path)?;
    }
    let mut connection = Connection::open(&config.path)?;
    connection.set_prepared_statement_cache_capacity(STATEMENT_CACHE_CAPACITY);
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

/// Migration 3: each run names its session's account, so an account's queued runs are counted
/// from an index of their own. The column is added (and filled in) only where it is missing.
fn add_runs_account(transaction: &rusqlite::Transaction) -> rusqlite_migration::HookResult {
    let has_column: bool = transaction.query_row(
        "SELECT EXISTS (SELECT 1 FROM pragma_table_info('runs') WHERE name = 'account_id')",
        [],
        |row| row.get(0),
    )?;
    if !has_column {
        transaction.execute_batch(
            "ALTER TABLE runs ADD COLUMN account_id TEXT;
             UPDATE runs SET account_id =
                 (SELECT account_id FROM sessions WHERE sessions.id = runs.session_id);",
        )?;
    }
    transaction.execute_batch(
        "CREATE INDEX IF NOT EXISTS runs_queued_by_account ON runs (account_id)
             WHERE status = 'queued';",
    )?;
    Ok(())
}

/// Migration 6: each run counts the boot sweeps that found it cut off mid-turn. The column is
/// added only where it is missing (a database made by `sqlite-schema.sql` has it).
fn add_runs_restarts(transaction: &rusqlite::Transaction) -> rusqlite_migration::HookResult {
    let has_column: bool = transaction.query_row(
        "SELECT EXISTS (SELECT 1 FROM pragma_table_info('runs') WHERE name = 'restarts')",
        [],
        |row| row.get(0),
    )?;
    if !has_column {
        transaction
            .execute_batch("ALTER TABLE runs ADD COLUMN restarts INTEGER NOT NULL DEFAULT 0;")?;
    }
    Ok(())
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

/// Opens the writer's connection: creates the file if needed, switches it to WAL, applies the
/// pragmas and brings the schema up to date.
pub(crate) fn open_writer(config: &Config) -> Result<Connection> {
    open_migrated(config).map(|(connection, _)| connection)
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
pub(crate) fn new_database() -> (tempfile::TempDir, Connection) {
    let dir = tempfile::tempdir().expect("a temporary dir");
    let connection =
        open_writer(&Config::new(dir.path().join("agents.db"))).expect("a new database");
    (dir, connection)
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
pub(crate) fn database_with_a_session(session_id: &str) -> (tempfile::TempDir, Connection) {
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
mod tests {
    use super::*;

    #[test]
    fn migrations_are_valid() {
        assert!(MIGRATIONS.validate().is_ok());
    }

    /// `Config::synchronous` is what the writing connections run with (SQLite numbers NORMAL
    /// 1 and FULL 2).
    #[test]
    fn the_writer_runs_with_the_configured_synchronous() -> Result<()> {
        let dir = tempfile::tempdir().expect("a temporary dir");
        for (synchronous, expected) in [
            (crate::Synchronous::Normal, 1),
            (crate::Synchronous::Full, 2),
        ] {
            let config = Config {
                synchronous,
                ..Config::new(dir.path().join("seed.db"))
            };
            let connection = open_writer(&config)?;
            let set: i64 = connection.pragma_query_value(None, "synchronous", |row| row.get(0))?;
            assert_eq!(set, expected, "{synchronous:?}");
        }
        Ok(())
    }

    /// The build leaves out SQLITE_ENABLE_MEMORY_MANAGEMENT (`.cargo/config.toml`), so that
    /// each connection has a page cache of its own rather than one shared behind a mutex.
    #[test]
    fn connections_do_not_share_one_page_cache() -> rusqlite::Result<()> {
        let connection = Connection::open_in_memory()?;
        let used: bool = connection.query_row(
            "SELECT sqlite_compileoption_used('ENABLE_MEMORY_MANAGEMENT')",
            [],
            |row| row.get(0),
        )?;
        assert!(
            !used,
            "SQLite was built with ENABLE_MEMORY_MANAGEMENT: is LIBSQLITE3_FLAGS set in .cargo/config.toml?"
        );
        // The query itself works: an option the build has is reported.
        let threadsafe: bool = connection.query_row(
            "SELECT sqlite_compileoption_used('THREADSAFE=1')",
            [],
            |row| row.get(0),
        )?;
        assert!(threadsafe);
        Ok(())
    }

    fn index_of_children_read(connection: &Connection) -> String {
        let plan: Vec<String> = connection
            .prepare("EXPLAIN QUERY PLAN SELECT id FROM runs WHERE parent_run_id = ?1")
            .and_then(|mut statement| {
                statement
                    .query_map(["a-run"], |row| row.get::<_, String>(3))?
                    .collect()
            })
            .unwrap_or_default();
        plan.join("; ")
    }

    #[test]
    fn a_new_database_and_its_wal_and_shared_memory_are_owner_only() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().expect("a temporary dir");
        let path = dir.path().join("seed.db");
        let _connection = open_writer(&Config::new(&path)).expect("a new database");
        for suffix in ["", "-wal", "-shm"] {
            let file = dir.path().join(format!("seed.db{suffix}"));
            let mode = std::fs::metadata(&file)
                .expect("the file exists while the database is open")
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600, "{}", file.display());
        }
    }

    #[test]
    fn a_runs_children_are_found_by_index_in_a_new_database_and_an_upgraded_one() {
        let dir = tempfile::tempdir().expect("a temporary dir");
        let config = Config::new(dir.path().join("agents.db"));
        let connection = open_writer(&config).expect("a new database");
        assert!(
            index_of_children_read(&connection).contains("runs_by_parent"),
            "{}",
            index_of_children_read(&connection)
        );
        // A database made before migration 2: version 1, without the index.
        connection
            .execute_batch("DROP INDEX runs_by_parent; PRAGMA user_version = 1;")
            .expect("an old database");
        assert!(!index_of_children_read(&connection).contains("runs_by_parent"));
        drop(connection);
        let connection = open_writer(&config).expect("the old database, upgraded");
        assert!(index_of_children_read(&connection).contains("runs_by_parent"));
        let version: u32 = connection
            .query_row("PRAGMA user_version", [], |row| row.get(0))
            .expect("the version");
        assert_eq!(version, LATEST_VERSION);
    }

    /// A new database at `config`, made an older one by `sql` (which sets its version), then
    /// opened again, and so upgraded.
    fn upgraded(config: &Config, sql: &str) -> Connection {
        let connection = open_writer(config).expect("a new database");
        connection.execute_batch(sql).expect("an old database");
        drop(connection);
        open_writer(config).expect("the old database, upgraded")
    }

    /// Opening `config`'s upgraded database again changes nothing: it stays at the latest
    /// version.
    fn assert_reopened_at_the_latest_version(config: &Config) {
        let connection = open_writer(config).expect("opened again");
        let version: u32 = connection
            .query_row("PRAGMA user_version", [], |row| row.get(0))
            .expect("the version");
        assert_eq!(version, LATEST_VERSION);
    }

    #[test]
    fn an_older_database_gets_each_runs_account_and_their_index() {
        let dir = tempfile::tempdir().expect("a temporary dir");
        let config = Config::new(dir.path().join("agents.db"));
        // A database of version 2: runs without their account.
        let one_session = account_and_session("acc-a", "ses-a");
        let connection = upgraded(
            &config,
            &format!(
                "{one_session}
                 DROP INDEX runs_queued_by_account;
                 DROP INDEX runs_running_by_account;
                 ALTER TABLE runs DROP COLUMN account_id;
                 INSERT INTO runs (id, session_id, queue, status, created_at, updated_at)
                     VALUES ('run-a', 'ses-a', 'interactive', 'queued', 0, 0);
                 PRAGMA user_version = 2;"
            ),
        );
        let account: Option<String> = connection
            .query_row(
                "SELECT account_id FROM runs WHERE id = 'run-a'",
                [],
                |row| row.get(0),
            )
            .expect("the run");
        assert_eq!(account.as_deref(), Some("acc-a"));
        let plan: String = connection
            .query_row(
                "EXPLAIN QUERY PLAN SELECT count(*) FROM runs
                 WHERE account_id = 'acc-a' AND status = 'queued'",
                [],
                |row| row.get(3),
            )
            .expect("a plan");
        assert!(plan.contains("runs_queued_by_account"), "{plan}");
        drop(connection);
        assert_reopened_at_the_latest_version(&config);
    }

    #[test]
    fn an_older_database_gets_the_restarts_of_each_run() {
        let dir = tempfile::tempdir().expect("a temporary dir");
        let config = Config::new(dir.path().join("agents.db"));
        // A database of version 5: runs without their restarts.
        let one_session = account_and_session("acc-a", "ses-a");
        let connection = upgraded(
            &config,
            &format!(
                "{one_session}
                 ALTER TABLE runs DROP COLUMN restarts;
                 INSERT INTO runs (id, session_id, queue, status, created_at, updated_at)
                     VALUES ('run-a', 'ses-a', 'interactive', 'running', 0, 0);
                 PRAGMA user_version = 5;"
            ),
        );
        let restarts: i64 = connection
            .query_row("SELECT restarts FROM runs WHERE id = 'run-a'", [], |row| {
                row.get(0)
            })
            .expect("the run's restarts");
        assert_eq!(restarts, 0);
        drop(connection);
        assert_reopened_at_the_latest_version(&config);
    }

    /// The indexes of the log: names, by name.
    fn log_indexes(connection: &Connection) -> Vec<String> {
        let mut statement = connection
            .prepare(
                "SELECT name FROM sqlite_schema
                 WHERE type = 'index' AND tbl_name = 'session_events' ORDER BY name",
            )
            .expect("a query of the schema");
        statement
            .query_map([], |row| row.get(0))
            .and_then(Iterator::collect)
            .expect("the indexes")
    }

    fn assert_the_newest_mark_is_read_back_from_the_newest_seq(connection: &Connection) {
        assert_eq!(
            log_indexes(connection),
            ["sqlite_autoindex_session_events_1"]
        );
        let plan = query_plan(connection, crate::log::NEWEST_PI_ENTRY_ID);
        assert!(
            plan.contains("USING INDEX sqlite_autoindex_session_events_1 (session_key=?)")
                && !plan.contains("TEMP B-TREE"),
            "{plan}"
        );
    }

    #[test]
    fn the_log_keeps_no_index_of_its_marks_in_a_new_database_and_an_upgraded_one() {
        let dir = tempfile::tempdir().expect("a temporary dir");
        let config = Config::new(dir.path().join("agents.db"));
        let connection = open_writer(&config).expect("a new database");
        assert_the_newest_mark_is_read_back_from_the_newest_seq(&connection);
        drop(connection);
        // A database of version 6, with the index.
        let connection = upgraded(
            &config,
            "CREATE INDEX session_events_by_entry ON session_events (session_key, pi_entry_id)
                 WHERE pi_entry_id IS NOT NULL;
             PRAGMA user_version = 6;",
        );
        assert_the_newest_mark_is_read_back_from_the_newest_seq(&connection);
        drop(connection);
        assert_reopened_at_the_latest_version(&config);
    }

    /// Whether the database has the `call_effects` table, keyed by session and call.
    fn has_call_effects(connection: &Connection) -> bool {
        connection
            .query_row(
                "SELECT count(*) FROM pragma_table_info('call_effects')
                 WHERE (name = 'session_key' AND pk = 1) OR (name = 'tool_call_id' AND pk = 2)",
                [],
                |row| row.get::<_, i64>(0),
            )
            .expect("the table's columns")
            == 2
    }

    #[test]
    fn calls_record_their_effects_in_a_new_database_and_an_upgraded_one() {
        let dir = tempfile::tempdir().expect("a temporary dir");
        let config = Config::new(dir.path().join("agents.db"));
        let connection = open_writer(&config).expect("a new database");
        assert!(has_call_effects(&connection));
        drop(connection);
        // A database of version 7, without the table.
        let connection = upgraded(&config, "DROP TABLE call_effects; PRAGMA user_version = 7;");
        assert!(has_call_effects(&connection));
        drop(connection);
        assert_reopened_at_the_latest_version(&config);
    }

    /// The schema's text of each table [`LIST_CHECKS`] changes.
    fn checked_tables(connection: &Connection) -> Vec<(String, String)> {
        let mut statement = connection
            .prepare(
                "SELECT name, sql FROM sqlite_schema WHERE type = 'table'
                 AND name IN ('sessions', 'session_events', 'session_durable_files', 'runs')
                 ORDER BY name",
            )
            .expect("a query of the schema");
        statement
            .query_map([], |row| Ok((row.get(0)?, row.get(1)?)))
            .and_then(Iterator::collect)
            .expect("the schema")
    }

    /// The opcodes SQLite runs for an insert of a store line.
    fn insert_program(connection: &Connection) -> Vec<String> {
        program(
            connection,
            "INSERT INTO session_durable_files (session_key, file, line) VALUES (1, 0, 'x')",
        )
    }

    /// The indexes of the runs table: (name, sql), by name.
    fn runs_indexes(connection: &Connection) -> Vec<(String, String)> {
        let mut statement = connection
            .prepare(
                "SELECT name, sql FROM sqlite_schema
                 WHERE type = 'index' AND tbl_name = 'runs' AND sql IS NOT NULL ORDER BY name",
            )
            .expect("a query of the schema");
        statement
            .query_map([], |row| Ok((row.get(0)?, row.get(1)?)))
            .and_then(Iterator::collect)
            .expect("the indexes")
    }

    /// What SQLite's plan for `sql` (its parameters NULL) says, its lines joined.
    fn query_plan(connection: &Connection, sql: &str) -> String {
        let mut statement = connection
            .prepare(&format!("EXPLAIN QUERY PLAN {sql}"))
            .expect("an explained query");
        let nulls = vec![rusqlite::types::Null; statement.parameter_count()];
        let lines: Vec<String> = statement
            .query_map(rusqlite::params_from_iter(nulls), |row| row.get(3))
            .and_then(Iterator::collect)
            .expect("the plan");
        lines.join("\n")
    }

    /// The claims' queries find a session's open runs in `runs_open_by_session`, the accounts
    /// that wait and their queued runs in `runs_queued_by_account`, and an account's runs in
    /// flight in `runs_running_by_account`.
    fn assert_runs_are_claimed_by_index(connection: &Connection) {
        for sql in [
            crate::runs::NEXT_CLAIMABLE_OF_ACCOUNT,
            crate::runs::SESSION_FREE_FOR_NEW_RUN,
            crate::runs::QUEUED_EVENT_IDS,
        ] {
            let plan = query_plan(connection, sql);
            assert!(plan.contains("runs_open_by_session"), "{sql}\n{plan}");
        }
        for (sql, index) in [
            (
                crate::runs::NEXT_CLAIMABLE_OF_ACCOUNT,
                "runs_queued_by_account (account_id=?)",
            ),
            (
                crate::runs::FIRST_WAITING_ACCOUNT,
                "COVERING INDEX runs_queued_by_account",
            ),
            (
                crate::runs::NEXT_WAITING_ACCOUNT,
                "COVERING INDEX runs_queued_by_account (account_id>?)",
            ),
            (
                crate::runs::ACCOUNT_RUNS_IN_FLIGHT,
                "COVERING INDEX runs_running_by_account (account_id=?)",
            ),
        ] {
            let plan = query_plan(connection, sql);
            assert!(plan.contains(index), "{sql}\n{plan}");
        }
    }

    #[test]
    fn a_sessions_open_runs_are_looked_up_in_their_own_index_in_a_new_database_and_an_upgraded_one()
    {
        let dir = tempfile::tempdir().expect("a temporary dir");
        let config = Config::new(dir.path().join("agents.db"));
        let connection = open_writer(&config).expect("a new database");
        assert_runs_are_claimed_by_index(&connection);
        let new_indexes = runs_indexes(&connection);

        // A database of version 4: indexes of every run by session and status, and by queue
        // and status, and none of the running runs by account.
        connection
            .execute_batch(
                "DROP INDEX runs_open_by_session; DROP INDEX runs_by_session;
                 DROP INDEX runs_running_by_account;
                 CREATE INDEX runs_by_session ON runs (session_id, status);
                 DROP INDEX runs_by_queue; CREATE INDEX runs_by_queue ON runs (queue, status);
                 PRAGMA user_version = 4;",
            )
            .expect("an old database");
        drop(connection);
        let connection = open_writer(&config).expect("the old database, upgraded");
        assert_eq!(runs_indexes(&connection), new_indexes);
        assert_runs_are_claimed_by_index(&connection);
    }

    #[test]
    fn checks_name_their_values_without_lists_in_a_new_database_and_an_upgraded_one() {
        let dir = tempfile::tempdir().expect("a temporary dir");
        let config = Config::new(dir.path().join("agents.db"));
        let connection = open_writer(&config).expect("a new database");
        let new_tables = checked_tables(&connection);
        for (table, sql) in &new_tables {
            assert!(!sql.contains(" IN ("), "{table}: {sql}");
        }
        assert!(!insert_program(&connection).contains(&"OpenEphemeral".to_owned()));

        // A database of version 3: the checks with their IN lists, and rows under them.
        let version: i64 = connection
            .query_row("PRAGMA schema_version", [], |row| row.get(0))
            .expect("the schema version");
        connection
            .execute_batch("PRAGMA writable_schema = ON")
            .expect("a writable schema");
        for (table, old, new) in LIST_CHECKS {
            connection
                .execute(
                    "UPDATE sqlite_schema SET sql = replace(sql, ?1, ?2)
                     WHERE type = 'table' AND name = ?3",
                    [new, old, table],
                )
                .expect("an old check");
        }
        connection
            .execute_batch(&format!(
                "PRAGMA schema_version = {}; PRAGMA writable_schema = OFF;
                 PRAGMA user_version = 3;",
                version + 1
            ))
            .expect("an old database");
        drop(connection);
        let connection = Connection::open(&config.path).expect("the old database");
        assert!(insert_program(&connection).contains(&"OpenEphemeral".to_owned()));
        connection
            .execute_batch(
                "INSERT INTO accounts (id, public_key, created_at) VALUES ('acc-a', x'00', 0);
                 INSERT INTO sessions (id, account_id, created_at, updated_at)
                     VALUES ('ses-a', 'acc-a', 0, 0);
                 INSERT INTO session_durable_files (session_key, file, line) VALUES (1, 2, 'kept');
                 INSERT INTO runs (id, session_id, queue, status, created_at, updated_at)
                     VALUES ('run-a', 'ses-a', 'background', 'parked', 0, 0);",
            )
            .expect("rows of the old database");
        drop(connection);

        let connection = open_writer(&config).expect("the old database, upgraded");
        assert_eq!(checked_tables(&connection), new_tables);
        assert!(!insert_program(&connection).contains(&"OpenEphemeral".to_owned()));
        let kept: String = connection
            .query_row(
                "SELECT line FROM session_durable_files WHERE file = 2",
                [],
                |row| row.get(0),
            )
            .expect("the row from before");
        assert_eq!(kept, "kept");
        // The checks still refuse what they refused.
        for refused in [
            "INSERT INTO session_durable_files (session_key, file, line) VALUES (1, 3, 'x')",
            "UPDATE runs SET status = 'lost' WHERE id = 'run-a'",
            "UPDATE runs SET queue = 'urgent' WHERE id = 'run-a'",
            "UPDATE runs SET typed = 2 WHERE id = 'run-a'",
            "UPDATE sessions SET title_source = 'model' WHERE id = 'ses-a'",
            "INSERT INTO session_events (session_key, seq, type, role, content, meta, created_at)
                 VALUES (1, 1, 'message', 'narrator', '{}', '{}', 0)",
        ] {
            let error = connection.execute(refused, []).expect_err(refused);
            assert!(error.to_string().contains("CHECK"), "{refused}: {error}");
        }
        let version: u32 = connection
            .query_row("PRAGMA user_version", [], |row| row.get(0))
            .expect("the version");
        assert_eq!(version, LATEST_VERSION);
    }
}
