//! The schema's tests: the pragmas each connection runs with, and that a new database and
//! an upgraded one end up the same, migration by migration.

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

/// A statement runs on the plan it was prepared with, whatever is bound to it: the store's
/// queries bind their limits (`LIMIT ?2`), and SQLite, left to itself, prepares such a statement
/// again at each execution that binds the limit anew.
#[test]
fn a_statement_is_not_prepared_again_for_the_values_bound_to_it() -> Result<()> {
    let dir = tempfile::tempdir().expect("a temporary dir");
    let config = Config::new(dir.path().join("seed.db"));
    let writer = open_writer(&config)?;
    let reader = open_reader(&config)?;
    for connection in [&writer, &reader] {
        let mut statement = connection.prepare_cached(
            "SELECT COUNT(*) FROM (SELECT 1 FROM runs WHERE status = 'queued' AND queue = ?1
             LIMIT ?2) AS queued",
        )?;
        for limit in 1..=20_i64 {
            let n_queued: i64 =
                statement.query_row(rusqlite::params!["interactive", limit], |row| row.get(0))?;
            assert_eq!(n_queued, 0);
        }
        let n_prepared_again = statement.get_status(rusqlite::StatementStatus::RePrepare);
        assert_eq!(n_prepared_again, 0);
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

/// A new database in `dir` with one account and session, made one of `version` by `change`,
/// then opened again, and so upgraded: its config and the upgraded connection.
fn older_database(dir: &tempfile::TempDir, version: u32, change: &str) -> (Config, Connection) {
    let config = Config::new(dir.path().join("agents.db"));
    let one_session = account_and_session("acc-a", "ses-a");
    let connection = upgraded(
        &config,
        &format!("{one_session}\n{change}\nPRAGMA user_version = {version};"),
    );
    (config, connection)
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
    // A database of version 2: runs without their account.
    let (config, connection) = older_database(
        &dir,
        2,
        "DROP INDEX runs_queued_by_account;
         DROP INDEX runs_running_by_account;
         ALTER TABLE runs DROP COLUMN account_id;
         INSERT INTO runs (id, session_id, queue, status, created_at, updated_at)
             VALUES ('run-a', 'ses-a', 'interactive', 'queued', 0, 0);",
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
    // A database of version 5: runs without their restarts.
    let (config, connection) = older_database(
        &dir,
        5,
        "ALTER TABLE runs DROP COLUMN restarts;
         INSERT INTO runs (id, session_id, queue, status, created_at, updated_at)
             VALUES ('run-a', 'ses-a', 'interactive', 'running', 0, 0);",
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

#[test]
fn an_older_database_gets_whether_each_runs_pass_started() {
    let dir = tempfile::tempdir().expect("a temporary dir");
    // A database of version 21: runs without `pass_started`; those left running or parked had
    // theirs started, a queued one may not have.
    let (config, connection) = older_database(
        &dir,
        21,
        "ALTER TABLE runs DROP COLUMN pass_started;
         INSERT INTO runs (id, session_id, queue, status, created_at, updated_at) VALUES
             ('run-a', 'ses-a', 'interactive', 'running', 0, 0),
             ('run-b', 'ses-a', 'interactive', 'parked', 0, 0),
             ('run-c', 'ses-a', 'interactive', 'queued', 0, 0);",
    );
    let mut statement = connection
        .prepare("SELECT id, pass_started FROM runs ORDER BY id")
        .expect("a query of the runs");
    let started: Vec<(String, i64)> = statement
        .query_map([], |row| Ok((row.get(0)?, row.get(1)?)))
        .and_then(Iterator::collect)
        .expect("the runs");
    assert_eq!(
        started,
        [
            ("run-a".to_owned(), 1),
            ("run-b".to_owned(), 1),
            ("run-c".to_owned(), 0)
        ]
    );
    drop(statement);
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
        [
            "session_events_pending",
            "sqlite_autoindex_session_events_1"
        ]
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

/// A turn reads the events pending import past its mark by the index of just those, not by
/// reading every event since the mark.
fn assert_pending_events_are_read_by_their_index(connection: &Connection) {
    let plan = query_plan(
        connection,
        &format!(
            "SELECT {} FROM session_events {}",
            crate::log::EVENT_COLUMNS,
            crate::turn_view::PENDING_EVENTS
        ),
    );
    assert!(
        plan.contains("USING INDEX session_events_pending (session_key=? AND seq>? AND seq<?)")
            && !plan.contains("TEMP B-TREE"),
        "{plan}"
    );
    // The turn's view reads them by the session's id, in its snapshot.
    let plan = query_plan(
        connection,
        &format!(
            "SELECT {} FROM session_events {}",
            crate::log::EVENT_COLUMNS,
            crate::turn_view::PENDING_EVENTS_OF_SESSION
        ),
    );
    assert!(
        plan.contains("USING INDEX session_events_pending (session_key=? AND seq>?)")
            && !plan.contains("TEMP B-TREE"),
        "{plan}"
    );
}

#[test]
fn pending_events_are_read_by_their_index_in_a_new_database_and_an_upgraded_one() {
    let dir = tempfile::tempdir().expect("a temporary dir");
    let config = Config::new(dir.path().join("agents.db"));
    let connection = open_writer(&config).expect("a new database");
    assert_pending_events_are_read_by_their_index(&connection);
    drop(connection);
    // A database of version 19, without the index.
    let connection = upgraded(
        &config,
        "DROP INDEX session_events_pending; PRAGMA user_version = 19;",
    );
    assert_pending_events_are_read_by_their_index(&connection);
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
        crate::runs::NEXT_CLAIMABLE_OF_NONE,
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
            crate::runs::NEXT_CLAIMABLE_OF_NONE,
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
        (
            crate::runs::ACCOUNT_RUNS_IN_FLIGHT_OF_NONE,
            "COVERING INDEX runs_running_by_account (account_id=?)",
        ),
    ] {
        let plan = query_plan(connection, sql);
        assert!(plan.contains(index), "{sql}\n{plan}");
    }
}

#[test]
fn a_sessions_open_runs_are_looked_up_in_their_own_index_in_a_new_database_and_an_upgraded_one() {
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

/// Whether the database has `attachment_contents`, whose rows go with their attachment's.
fn has_attachment_contents(connection: &Connection) -> bool {
    connection
        .query_row(
            "SELECT count(*) FROM pragma_foreign_key_list('attachment_contents')
             WHERE \"table\" = 'attachments' AND on_delete = 'CASCADE'",
            [],
            |row| row.get::<_, i64>(0),
        )
        .expect("the table's foreign key")
        == 2
}

#[test]
fn attachments_have_a_table_for_their_bytes_in_a_new_database_and_an_upgraded_one() {
    let dir = tempfile::tempdir().expect("a temporary dir");
    let config = Config::new(dir.path().join("agents.db"));
    let connection = open_writer(&config).expect("a new database");
    assert!(has_attachment_contents(&connection));
    drop(connection);
    // A database of version 16, without the table.
    let connection = upgraded(
        &config,
        "DROP TABLE attachment_contents; PRAGMA user_version = 16;",
    );
    assert!(has_attachment_contents(&connection));
    drop(connection);
    assert_reopened_at_the_latest_version(&config);
}
