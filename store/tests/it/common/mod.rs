//! Set-up shared by the store's integration tests.

#![allow(dead_code)]

use seed_events::{AccountId, EventId, EventRole, NewEvent, Queue, RunId, RunStatus, SessionId};
use seed_store::{Config, DatabaseUrl, NewRun, NewSession, RunRow, ScratchDatabase, Store};

/// Set to `postgres` to run the store's tests on PostgreSQL (a database of their own on the
/// cluster `SEED_TEST_DATABASE_URL` names) rather than SQLite; scripts/test runs them on both.
pub const ENGINE_VAR: &str = "SEED_TEST_STORE_ENGINE";

/// Whether these tests run on PostgreSQL ([`ENGINE_VAR`]).
/// How many times the store's writer has waited on the database server's answers (0 on
/// SQLite).
pub fn writer_round_trips(store: &seed_store::Store) -> u64 {
    store
        .writer_stats()
        .n_round_trips
        .load(std::sync::atomic::Ordering::Relaxed)
}

pub fn on_postgres() -> bool {
    std::env::var(ENGINE_VAR).is_ok_and(|engine| engine == "postgres")
}

pub fn account() -> AccountId {
    AccountId::from_u128(0xacc)
}

pub fn session(idx: u128) -> SessionId {
    SessionId::from_u128(0x5e55_0000 + idx)
}

/// A fresh database in a temp dir, with one account.
pub struct Fixture {
    pub store: Store,
    /// The PostgreSQL database, when the tests run there; dropped after the store.
    pub database: Option<ScratchDatabase>,
    pub dir: tempfile::TempDir,
}

impl Fixture {
    pub fn new() -> anyhow::Result<Fixture> {
        Self::with(|_| {})
    }

    pub fn with(configure: impl FnOnce(&mut Config)) -> anyhow::Result<Fixture> {
        let dir = tempfile::tempdir()?;
        let mut config = Config::new(dir.path().join("seed.db"));
        let database = on_postgres().then(ScratchDatabase::on_test_cluster);
        config.database = database
            .as_ref()
            .map(|database| DatabaseUrl(database.url().to_owned()));
        configure(&mut config);
        let store = Store::open(config)?;
        futures::executor::block_on(store.create_account(account(), vec![1, 2, 3], 0))?;
        Ok(Fixture {
            store,
            database,
            dir,
        })
    }

    pub fn db_path(&self) -> std::path::PathBuf {
        self.store.config().path.clone()
    }

    /// Creates sessions `0..n_sessions` for the fixture's account.
    pub fn create_sessions(&self, n_sessions: u128) -> anyhow::Result<Vec<SessionId>> {
        let mut ids = Vec::new();
        for idx in 0..n_sessions {
            let id = session(idx);
            futures::executor::block_on(self.store.create_session(NewSession::new(
                id,
                account(),
                idx as i64,
            )))?;
            ids.push(id);
        }
        Ok(ids)
    }

    /// The first column of the first row of `sql` (`?1`… placeholders, text parameters), run
    /// behind the store's back on whichever engine the tests use: for counts the typed API
    /// does not offer.
    pub fn raw_i64(&self, sql: &str, params: &[&str]) -> anyhow::Result<i64> {
        match &self.database {
            None => {
                let raw = self.raw()?;
                Ok(raw.query_row(sql, rusqlite::params_from_iter(params), |row| row.get(0))?)
            }
            Some(database) => on_postgres_client(database.url(), |client, runtime| {
                let params: Vec<&(dyn tokio_postgres::types::ToSql + Sync)> = params
                    .iter()
                    .map(|param| param as &(dyn tokio_postgres::types::ToSql + Sync))
                    .collect();
                let row = runtime.block_on(client.query_one(&dollars(sql), &params))?;
                Ok(row.try_get(0)?)
            }),
        }
    }

    /// Runs `sql` behind the store's back; `Err` names a refusal by its kind first
    /// ("unique: …") on either engine.
    pub fn raw_execute(&self, sql: &str, params: &[&str]) -> anyhow::Result<Result<u64, String>> {
        match &self.database {
            None => {
                let raw = self.raw()?;
                Ok(match raw.execute(sql, rusqlite::params_from_iter(params)) {
                    Ok(n) => Ok(n as u64),
                    Err(rusqlite::Error::SqliteFailure(failure, message))
                        if failure.extended_code == rusqlite::ffi::SQLITE_CONSTRAINT_UNIQUE =>
                    {
                        Err(format!("unique: {message:?}"))
                    }
                    Err(error) => Err(error.to_string()),
                })
            }
            Some(database) => on_postgres_client(database.url(), |client, runtime| {
                let params: Vec<&(dyn tokio_postgres::types::ToSql + Sync)> = params
                    .iter()
                    .map(|param| param as &(dyn tokio_postgres::types::ToSql + Sync))
                    .collect();
                Ok(
                    match runtime.block_on(client.execute(&dollars(sql), &params)) {
                        Ok(n) => Ok(n),
                        Err(error)
                            if error.code()
                                == Some(&tokio_postgres::error::SqlState::UNIQUE_VIOLATION) =>
                        {
                            Err(format!("unique: {error}"))
                        }
                        Err(error) => Err(error.to_string()),
                    },
                )
            }),
        }
    }

    /// Runs statements behind the store's back: `sqlite`'s on SQLite, `postgres`'s on
    /// PostgreSQL (for what the two say differently, a trigger say).
    pub fn raw_batch(&self, sqlite: &str, postgres: &str) -> anyhow::Result<()> {
        match &self.database {
            None => Ok(self.raw()?.execute_batch(sqlite)?),
            Some(database) => on_postgres_client(database.url(), |client, runtime| {
                Ok(runtime.block_on(client.batch_execute(postgres))?)
            }),
        }
    }

    /// A raw connection to the same SQLite database, for what only SQLite has (its pages, its
    /// WAL).
    pub fn raw(&self) -> anyhow::Result<rusqlite::Connection> {
        anyhow::ensure!(
            !on_postgres(),
            "a raw SQLite connection to a PostgreSQL store"
        );
        let connection = rusqlite::Connection::open(self.db_path())?;
        connection.pragma_update(None, "foreign_keys", true)?;
        connection.busy_timeout(std::time::Duration::from_secs(5))?;
        Ok(connection)
    }
}

/// Whether a test of what only SQLite has (its pages, its WAL) runs: not on PostgreSQL, where
/// it says so and passes.
pub fn sqlite_only(what: &str) -> bool {
    if on_postgres() {
        eprintln!("not on PostgreSQL: {what} is SQLite's");
        return false;
    }
    true
}

/// `sql` with PostgreSQL's `$N` for SQLite's `?N`.
fn dollars(sql: &str) -> String {
    sql.replace('?', "$")
}

/// Runs `f` with a client of the database `url`, on a thread of its own (a test may run inside
/// an async runtime).
fn on_postgres_client<T: Send>(
    url: &str,
    f: impl FnOnce(&tokio_postgres::Client, &tokio::runtime::Runtime) -> anyhow::Result<T> + Send,
) -> anyhow::Result<T> {
    std::thread::scope(|scope| {
        scope
            .spawn(|| {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()?;
                let (client, connection) =
                    runtime.block_on(tokio_postgres::connect(url, tokio_postgres::NoTls))?;
                runtime.spawn(connection);
                f(&client, &runtime)
            })
            .join()
            .map_err(|_| anyhow::anyhow!("the PostgreSQL client panicked"))?
    })
}

/// A person's message, as the log takes it.
pub fn user_message(text: &str) -> seed_events::NewEvent {
    seed_events::NewEvent::message(
        seed_events::EventRole::User,
        "user",
        serde_json::json!({ "text": text }),
        3,
    )
}

/// Run `idx` of `session_id`, on the interactive queue, for the log events `user_event_ids`.
pub fn interactive_run(idx: u128, session_id: SessionId, user_event_ids: &[i64]) -> NewRun {
    NewRun {
        id: RunId::from_u128(idx),
        session_id,
        queue: Queue::Interactive,
        user_event_ids: user_event_ids.iter().copied().map(EventId).collect(),
        parent_run_id: None,
        typed: false,
        created_at_ms: idx as i64,
    }
}

/// Each run's id and status, in order.
pub fn statuses(runs: &[RunRow]) -> Vec<(RunId, RunStatus)> {
    runs.iter().map(|run| (run.id, run.status)).collect()
}

/// An assistant's message saying `text`, projected from store entry `pi_entry_id` (if any).
pub fn assistant_message(text: &str, pi_entry_id: Option<i64>) -> NewEvent {
    let mut event = NewEvent::message(
        EventRole::Assistant,
        "agent",
        serde_json::json!({ "text": text }),
        7,
    );
    event.pi_entry_id = pi_entry_id;
    event
}

/// Run `idx` of `session_id` on `queue`, for log event `idx`.
pub fn run_on(idx: u128, session_id: SessionId, queue: Queue) -> NewRun {
    NewRun {
        queue,
        ..interactive_run(idx, session_id, &[idx as i64])
    }
}
