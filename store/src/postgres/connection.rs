//! A PostgreSQL connection for the store's threads: the writer's and each reader's own, on a
//! thread of its own with a current-thread runtime, blocking on each statement, so that the
//! store's functions run on it as they run on SQLite's connection ([`crate::sql`]).
//!
//! A statement whose answer nobody reads (an insert of durable lines, the lock on a session's
//! row) may be sent without waiting for it ([`PgConnection::send`]): it goes to the server
//! with the next statement that is answered, in one write, and its answer is read before that
//! one's. A round trip costs the writer far more than the statement does (see
//! docs/design/several-nodes.md), so a step's commit waits on fewer of them.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::error::Error as StdError;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::Poll;

use bytes::BytesMut;
use tokio_postgres::types::{IsNull, ToSql, Type, to_sql_checked};

use crate::sql::{Params, Value};
use crate::{Error, Result};

/// What a connection is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Purpose {
    /// The writer's first connection: it brings the schema up to date when it opens.
    Writer,
    /// Another writer's connection (a lane: see `writer`), opened after the first.
    Lane,
    Reader,
}

/// One connection to the database, used from one thread at a time. A connection that the
/// server closed (it restarted, or was away) is opened again at the next statement that may
/// run on a new one: one outside any transaction, or one that begins a transaction. Within a
/// transaction it is not: the statements after the loss would commit on their own.
pub(crate) struct PgConnection {
    /// Taken only when the connection is dropped.
    runtime: Option<tokio::runtime::Runtime>,
    /// Shared with the statements sent and not yet answered, which hold it until they are.
    client: RefCell<Arc<tokio_postgres::Client>>,
    config: tokio_postgres::Config,
    purpose: Purpose,
    /// Whether a transaction is open (by the statements' texts: `BEGIN` … `COMMIT`/`ROLLBACK`).
    in_transaction: Cell<bool>,
    /// Statements prepared on this connection, by their text as the store writes it.
    statements: RefCell<HashMap<Box<str>, tokio_postgres::Statement>>,
    /// The settings given to this connection's session ([`PgConnection::set_for_session`]),
    /// as the statements that made them: made again on a connection opened anew.
    session_settings: RefCell<Vec<String>>,
    /// Statements sent and not yet answered ([`PgConnection::send`]), in the order sent.
    unanswered: RefCell<Vec<Unanswered>>,
    /// How many times this connection waited on the server's answers.
    n_round_trips: Cell<u64>,
    /// A statement met the connection closed by the server before the driver's task saw it
    /// end: the connection is opened anew as if `Client::is_closed` said so.
    lost: Cell<bool>,
}

/// The rows of a query sent without waiting ([`PgConnection::send_query`]), there once its
/// answer was read.
#[derive(Debug, Default)]
pub(crate) struct Later(Arc<std::sync::Mutex<Option<Vec<tokio_postgres::Row>>>>);

impl Later {
    /// The rows; an error if the answers were not read yet (a bug of the caller's).
    pub(crate) fn rows(&self) -> Result<Vec<tokio_postgres::Row>> {
        self.0
            .lock()
            .ok()
            .and_then(|mut rows| rows.take())
            .ok_or_else(|| {
                Error::corrupt("statement", "a query's rows were read before its answer")
            })
    }
}

/// A statement sent without waiting for its answer: awaiting it reads the answer.
type Unanswered =
    Pin<Box<dyn Future<Output = std::result::Result<u64, tokio_postgres::Error>> + Send>>;

/// What a statement's text does to the transaction.
fn transaction_effect(sql: &str) -> Option<bool> {
    let head = sql.trim_start();
    let starts = |word: &str| {
        head.get(..word.len())
            .is_some_and(|start| start.eq_ignore_ascii_case(word))
    };
    if starts("BEGIN") || starts("START TRANSACTION") {
        Some(true)
    } else if starts("COMMIT") || starts("END") || (starts("ROLLBACK") && !starts("ROLLBACK TO")) {
        Some(false)
    } else {
        None
    }
}

impl PgConnection {
    /// Connects to the database `url` names: the writer's connection brings the schema up to
    /// date first, a reader's reads only. The driver's connection runs on this connection's own runtime,
    /// driven while a statement waits. Connecting happens on a thread of its own, so that a
    /// store may be opened from within an async runtime.
    pub(crate) fn open(url: &str, purpose: Purpose) -> Result<PgConnection> {
        let config = super::config(url)?;
        std::thread::scope(|scope| {
            scope
                .spawn(|| {
                    let runtime = tokio::runtime::Builder::new_current_thread()
                        .enable_all()
                        .build()?;
                    let mut client = connect(&runtime, &config, purpose)?;
                    if purpose == Purpose::Writer {
                        runtime.block_on(super::schema::migrate(&mut client))?;
                    }
                    Ok(PgConnection {
                        runtime: Some(runtime),
                        client: RefCell::new(Arc::new(client)),
                        config: config.clone(),
                        purpose,
                        in_transaction: Cell::new(false),
                        statements: RefCell::new(HashMap::new()),
                        session_settings: RefCell::new(Vec::new()),
                        unanswered: RefCell::new(Vec::new()),
                        n_round_trips: Cell::new(0),
                        lost: Cell::new(false),
                    })
                })
                .join()
                .map_err(|_| Error::PostgresPool("connecting panicked".to_owned()))?
        })
    }

    /// How many times this connection waited on the server's answers (a statement, or the
    /// statements sent before it, answered together).
    pub(crate) fn n_round_trips(&self) -> u64 {
        self.n_round_trips.get()
    }

    /// Whether the connection is closed: the driver says so, or a statement met it closed.
    fn is_closed(&self) -> bool {
        self.lost.get() || self.client.borrow().is_closed()
    }

    /// Notes an outcome that met the connection closed.
    fn noting_closed<T>(
        &self,
        outcome: std::result::Result<T, tokio_postgres::Error>,
    ) -> std::result::Result<T, tokio_postgres::Error> {
        // Closed under it, or the server's last word before closing it (an administrator's
        // or a shutdown's termination, 57P01–57P03).
        if let Err(error) = &outcome
            && (error.is_closed()
                || error
                    .code()
                    .is_some_and(|code| code.code().starts_with("57P")))
        {
            self.lost.set(true);
        }
        outcome
    }

    /// Blocks on `future`, which waits on the server's answer.
    fn round_trip<F: std::future::Future>(&self, future: F) -> F::Output {
        self.n_round_trips.set(self.n_round_trips.get() + 1);
        self.block_on(future)
    }

    fn block_on<F: std::future::Future>(&self, future: F) -> F::Output {
        self.runtime
            .as_ref()
            .expect("the runtime lives as long as the connection")
            .block_on(future)
    }

    /// The client, opened again first when the server closed it and the statement `sql` may
    /// run on a new connection; notes what `sql` does to the transaction.
    fn client_for(&self, sql: &str) -> Result<std::cell::Ref<'_, Arc<tokio_postgres::Client>>> {
        let effect = transaction_effect(sql);
        self.notice_a_closed_connection();
        if self.is_closed() && (!self.in_transaction.get() || effect == Some(true)) {
            let runtime = self
                .runtime
                .as_ref()
                .expect("the runtime lives as long as the connection");
            let client = connect(runtime, &self.config, self.purpose)?;
            for setting in self.session_settings.borrow().iter() {
                runtime.block_on(client.batch_execute(setting))?;
            }
            *self.client.borrow_mut() = Arc::new(client);
            self.lost.set(false);
            self.statements.borrow_mut().clear();
            tracing::info!("connected to the database again");
        }
        if let Some(begins) = effect {
            self.in_transaction.set(begins);
        }
        Ok(self.client.borrow())
    }

    /// Outside a transaction, lets the driver read what the server sent since the last
    /// statement, so that a connection the server closed meanwhile (it restarted, or cut this
    /// one off) is known closed before a statement is sent on it.
    fn notice_a_closed_connection(&self) {
        if !self.in_transaction.get() {
            self.block_on(tokio::task::yield_now());
        }
    }

    pub(crate) fn prepare_cached(&self, sql: &str) -> Result<tokio_postgres::Statement> {
        self.notice_a_closed_connection();
        if !self.is_closed()
            && let Some(statement) = self.statements.borrow().get(sql)
        {
            if let Some(begins) = transaction_effect(sql) {
                self.in_transaction.set(begins);
            }
            return Ok(statement.clone());
        }
        let statement = self.prepare(sql)?;
        self.statements
            .borrow_mut()
            .insert(sql.into(), statement.clone());
        Ok(statement)
    }

    pub(crate) fn prepare(&self, sql: &str) -> Result<tokio_postgres::Statement> {
        self.read_answers()?;
        let text = crate::sql::postgres_text(sql);
        let client = self.client_for(sql)?;
        let outcome = self.round_trip(client.prepare(&text));
        drop(client);
        Ok(self.noting_closed(outcome)?)
    }

    pub(crate) fn execute(
        &self,
        statement: &tokio_postgres::Statement,
        params: Params<'_>,
    ) -> Result<usize> {
        let values = bound(params);
        let client = Arc::clone(&self.client.borrow());
        let n_changed = self.answered(client.execute(statement, &refs(&values)))?;
        Ok(usize::try_from(n_changed).unwrap_or(usize::MAX))
    }

    pub(crate) fn query(
        &self,
        statement: &tokio_postgres::Statement,
        params: Params<'_>,
    ) -> Result<Vec<tokio_postgres::Row>> {
        let values = bound(params);
        let client = Arc::clone(&self.client.borrow());
        self.answered(client.query(statement, &refs(&values)))
    }

    /// Sends the statement without waiting for its answer, which is read before the next
    /// statement's that is answered (which also goes in the same write): an error it meets is
    /// that statement's error, or [`PgConnection::read_answers`]'s. For a statement whose
    /// answer nobody reads, within a transaction, whose error fails the transaction anyway.
    pub(crate) fn send(
        &self,
        statement: &tokio_postgres::Statement,
        params: Params<'_>,
    ) -> Result<()> {
        let values = owned(params);
        let client = Arc::clone(&self.client.borrow());
        let statement = statement.clone();
        self.sent(Box::pin(async move {
            let values: Vec<Bound<'_>> = values.iter().map(Owned::bound).collect();
            client.execute(&statement, &refs(&values)).await
        }))
    }

    /// [`PgConnection::send`] for a query whose rows are wanted, though not before the
    /// transaction's later statements: they are in the returned [`Later`] once the answers
    /// are read (the next statement waited on, the `COMMIT` at the latest).
    pub(crate) fn send_query(
        &self,
        statement: &tokio_postgres::Statement,
        params: Params<'_>,
    ) -> Result<Later> {
        let values = owned(params);
        let client = Arc::clone(&self.client.borrow());
        let statement = statement.clone();
        let later = Later::default();
        let slot = Arc::clone(&later.0);
        self.sent(Box::pin(async move {
            let values: Vec<Bound<'_>> = values.iter().map(Owned::bound).collect();
            let rows = client.query(&statement, &refs(&values)).await?;
            let n_rows = rows.len() as u64;
            if let Ok(mut slot) = slot.lock() {
                *slot = Some(rows);
            }
            Ok(n_rows)
        }))?;
        Ok(later)
    }

    /// Hands a statement's request to the driver and keeps it among those to be answered.
    fn sent(&self, mut sent: Unanswered) -> Result<()> {
        // The first poll hands the request to the driver's connection, which writes it when it
        // next runs: with the next statement that is waited on.
        match self.block_on(poll_once(sent.as_mut())) {
            Poll::Ready(outcome) => {
                self.noting_closed(outcome)?;
            }
            Poll::Pending => self.unanswered.borrow_mut().push(sent),
        }
        Ok(())
    }

    /// Reads the answers of the statements sent and not yet answered, in order: the first
    /// error among them, after every answer is read.
    pub(crate) fn read_answers(&self) -> Result<()> {
        let unanswered = std::mem::take(&mut *self.unanswered.borrow_mut());
        if unanswered.is_empty() {
            return Ok(());
        }
        let outcome = self.round_trip(async {
            let mut first_error = None;
            for sent in unanswered {
                if let Err(error) = sent.await {
                    first_error.get_or_insert(error);
                }
            }
            first_error.map_or(Ok(()), Err)
        });
        // A statement sent before that met the connection closed closes it for the next one
        // too, which then opens a connection anew where it may.
        Ok(self.noting_closed(outcome)?)
    }

    /// Runs `statement` (a future of the driver's), written together with the statements sent
    /// before it and not yet answered, whose answers are read first: their error before its own.
    fn answered<T>(
        &self,
        statement: impl Future<Output = std::result::Result<T, tokio_postgres::Error>>,
    ) -> Result<T> {
        if self.unanswered.borrow().is_empty() {
            return Ok(self.noting_closed(self.round_trip(statement))?);
        }
        let mut statement = std::pin::pin!(statement);
        let first = self.block_on(poll_once(statement.as_mut()));
        // One round trip: its answer comes right after theirs.
        let earlier = self.read_answers();
        let outcome = match first {
            Poll::Ready(outcome) => outcome,
            Poll::Pending => self.block_on(statement),
        };
        earlier?;
        Ok(self.noting_closed(outcome)?)
    }

    /// Sets `name` to `value` for this connection's session, and again on each connection it
    /// opens anew after the server closed this one. `name` is one of the store's own (a
    /// setting's name, never a person's input); `value` is quoted.
    pub(crate) fn set_for_session(&self, name: &str, value: &str) -> Result<()> {
        debug_assert!(
            name.bytes()
                .all(|byte| byte.is_ascii_lowercase() || byte == b'_' || byte == b'.'),
            "a setting's name: {name:?}"
        );
        let sql = format!("SET {name} = '{}'", value.replace('\'', "''"));
        self.batch_execute(&sql)?;
        let mut settings = self.session_settings.borrow_mut();
        let prefix = format!("SET {name} = ");
        settings.retain(|setting| !setting.starts_with(&prefix));
        settings.push(sql);
        Ok(())
    }

    pub(crate) fn batch_execute(&self, sql: &str) -> Result<()> {
        let earlier = self.read_answers();
        // A rollback ends the transaction whatever the statements sent in it met.
        if transaction_effect(sql) != Some(false) || !starts_with_rollback(sql) {
            earlier?;
        }
        let client = self.client_for(sql)?;
        let outcome = self.round_trip(client.batch_execute(sql));
        drop(client);
        let outcome = self.noting_closed(outcome);
        if outcome.is_err() && transaction_effect(sql) == Some(true) && self.lost.get() {
            // The transaction this began ended with the connection the server closed under it:
            // the next statement opens a connection anew rather than meeting the closed one.
            self.in_transaction.set(false);
        }
        Ok(outcome?)
    }
}

/// Whether `sql` begins with `ROLLBACK`.
fn starts_with_rollback(sql: &str) -> bool {
    sql.trim_start()
        .get(..8)
        .is_some_and(|head| head.eq_ignore_ascii_case("ROLLBACK"))
}

/// Polls `future` once: its output, or `Pending` when it waits.
fn poll_once<F: Future + Unpin>(mut future: F) -> impl Future<Output = Poll<F::Output>> {
    std::future::poll_fn(move |cx| Poll::Ready(Pin::new(&mut future).poll(cx)))
}

impl Drop for PgConnection {
    /// Closes the connection without blocking: a store may be dropped within an async
    /// runtime, where blocking on another runtime is not allowed.
    fn drop(&mut self) {
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

/// Opens a connection for `purpose` on `runtime`, which drives it while a statement waits.
fn connect(
    runtime: &tokio::runtime::Runtime,
    config: &tokio_postgres::Config,
    purpose: Purpose,
) -> Result<tokio_postgres::Client> {
    let (client, connection) = runtime.block_on(config.connect(tokio_postgres::NoTls))?;
    runtime.spawn(async move {
        if let Err(error) = connection.await {
            tracing::warn!(error = %super::describe(&error), "postgres connection ended");
        }
    });
    if purpose == Purpose::Reader {
        runtime.block_on(client.batch_execute("SET default_transaction_read_only = on"))?;
    }
    Ok(client)
}

/// The values of a statement sent without waiting, held until it is answered.
fn owned(params: Params<'_>) -> Vec<Owned> {
    params
        .iter()
        .map(|param| Owned::of(param.to_sql()))
        .collect()
}

/// A value as PostgreSQL binds it.
#[derive(Debug)]
struct Bound<'a>(Value<'a>);

/// A value held by a statement sent and not yet answered.
#[derive(Debug)]
enum Owned {
    Null,
    Integer(i64),
    Real(f64),
    Text(String),
    Blob(Vec<u8>),
}

impl Owned {
    fn of(value: Value<'_>) -> Owned {
        match value {
            Value::Null => Owned::Null,
            Value::Integer(n) => Owned::Integer(n),
            Value::Real(x) => Owned::Real(x),
            Value::Text(text) => Owned::Text(text.to_owned()),
            Value::Blob(bytes) => Owned::Blob(bytes.to_vec()),
        }
    }

    fn bound(&self) -> Bound<'_> {
        Bound(match self {
            Owned::Null => Value::Null,
            Owned::Integer(n) => Value::Integer(*n),
            Owned::Real(x) => Value::Real(*x),
            Owned::Text(text) => Value::Text(text),
            Owned::Blob(bytes) => Value::Blob(bytes),
        })
    }
}

fn bound<'p>(params: Params<'p>) -> Vec<Bound<'p>> {
    params.iter().map(|param| Bound(param.to_sql())).collect()
}

fn refs<'v>(values: &'v [Bound<'_>]) -> Vec<&'v (dyn ToSql + Sync)> {
    values
        .iter()
        .map(|value| value as &(dyn ToSql + Sync))
        .collect()
}

impl ToSql for Bound<'_> {
    /// Binds the value as the type PostgreSQL inferred for the parameter: an integer binds to
    /// any integer type that holds it and to a boolean, as SQLite's integers stand for both.
    fn to_sql(
        &self,
        ty: &Type,
        out: &mut BytesMut,
    ) -> std::result::Result<IsNull, Box<dyn StdError + Sync + Send>> {
        match (self.0, ty) {
            (Value::Null, _) => Ok(IsNull::Yes),
            (Value::Integer(n), &Type::INT8) => n.to_sql(ty, out),
            (Value::Integer(n), &Type::INT4) => i32::try_from(n)?.to_sql(ty, out),
            (Value::Integer(n), &Type::INT2) => i16::try_from(n)?.to_sql(ty, out),
            (Value::Integer(n), &Type::BOOL) => (n != 0).to_sql(ty, out),
            #[expect(
                clippy::cast_precision_loss,
                reason = "as SQLite binds an integer as real"
            )]
            (Value::Integer(n), &Type::FLOAT8) => (n as f64).to_sql(ty, out),
            (Value::Real(x), &Type::FLOAT8) => x.to_sql(ty, out),
            (Value::Text(text), _) if <&str as ToSql>::accepts(ty) => text.to_sql(ty, out),
            (Value::Blob(bytes), &Type::BYTEA) => bytes.to_sql(ty, out),
            (value, ty) => Err(format!("cannot bind {value:?} as {ty}").into()),
        }
    }

    fn accepts(_: &Type) -> bool {
        true
    }

    to_sql_checked!();
}

/// Column `index` of `row` as a [`Value`].
pub(crate) fn column_value(row: &tokio_postgres::Row, index: usize) -> Result<Value<'_>> {
    let column = row
        .columns()
        .get(index)
        .ok_or_else(|| Error::corrupt("row", format_args!("no column {index}")))?;
    let ty = column.type_();
    let value = match *ty {
        Type::INT8 => row.try_get::<_, Option<i64>>(index)?.map(Value::Integer),
        Type::INT4 => row
            .try_get::<_, Option<i32>>(index)?
            .map(|n| Value::Integer(n.into())),
        Type::INT2 => row
            .try_get::<_, Option<i16>>(index)?
            .map(|n| Value::Integer(n.into())),
        Type::BOOL => row
            .try_get::<_, Option<bool>>(index)?
            .map(|b| Value::Integer(b.into())),
        Type::FLOAT8 => row.try_get::<_, Option<f64>>(index)?.map(Value::Real),
        Type::FLOAT4 => row
            .try_get::<_, Option<f32>>(index)?
            .map(|x| Value::Real(x.into())),
        Type::BYTEA => row.try_get::<_, Option<&[u8]>>(index)?.map(Value::Blob),
        _ if <&str as tokio_postgres::types::FromSql>::accepts(ty) => {
            row.try_get::<_, Option<&str>>(index)?.map(Value::Text)
        }
        _ => {
            return Err(Error::corrupt(
                "row",
                format_args!(
                    "column {} is of type {ty}, which the store does not read",
                    column.name()
                ),
            ));
        }
    };
    Ok(value.unwrap_or(Value::Null))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ScratchDatabase;

    fn show(connection: &PgConnection, name: &str) -> Result<String> {
        let statement = connection.prepare(&format!("SELECT current_setting('{name}')"))?;
        Ok(connection.query(&statement, &[])?[0].get(0))
    }

    #[test]
    fn a_session_setting_is_made_again_on_a_connection_opened_anew() {
        const NAME: &str = "idle_in_transaction_session_timeout";
        let database = ScratchDatabase::on_test_cluster();
        let connection = PgConnection::open(database.url(), Purpose::Reader).expect("connects");
        connection.set_for_session(NAME, "1500ms").expect("sets");
        connection
            .set_for_session(NAME, "2500ms")
            .expect("sets again");
        assert_eq!(show(&connection, NAME).expect("shows"), "2500ms");
        // The server closes the connection (as a restart, or an operator, would): a statement
        // may meet the closed connection before it is noticed, and fail; the next opens anew.
        let _ = connection.batch_execute("SELECT pg_terminate_backend(pg_backend_pid())");
        let shown = (0..50).find_map(|_| {
            show(&connection, NAME).ok().or_else(|| {
                std::thread::sleep(std::time::Duration::from_millis(20));
                None
            })
        });
        assert_eq!(
            shown.as_deref(),
            Some("2500ms"),
            "made again, the newest value"
        );
        assert_eq!(connection.session_settings.borrow().len(), 1);
    }

    #[test]
    fn a_transaction_the_server_cut_off_leaves_the_next_statement_a_connection_opened_anew() {
        let database = ScratchDatabase::on_test_cluster();
        let connection = PgConnection::open(database.url(), Purpose::Reader).expect("connects");
        // A read's snapshot whose connection the server closes under it (a restart, an
        // operator): the transaction is gone with the connection.
        let cut = connection
            .batch_execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY; SELECT pg_terminate_backend(pg_backend_pid())");
        assert!(cut.is_err(), "the connection was cut: {cut:?}");
        // The next read, which begins no transaction, connects anew.
        let answered = (0..50).find_map(|_| {
            show(&connection, "application_name").ok().or_else(|| {
                std::thread::sleep(std::time::Duration::from_millis(20));
                None
            })
        });
        assert!(answered.is_some(), "a plain read after the cut is answered");
    }

    fn count(connection: &PgConnection) -> Result<i64> {
        let statement = connection.prepare("SELECT count(*) FROM sent")?;
        Ok(connection.query(&statement, &[])?[0].get(0))
    }

    #[test]
    fn statements_sent_unanswered_run_in_order_before_the_next_answered_one() -> Result<()> {
        let database = ScratchDatabase::on_test_cluster();
        let connection = PgConnection::open(database.url(), Purpose::Writer)?;
        connection.batch_execute("CREATE TABLE sent (n BIGINT NOT NULL PRIMARY KEY)")?;
        connection.batch_execute("BEGIN")?;
        let insert = connection.prepare_cached("INSERT INTO sent (n) VALUES (?1)")?;
        for n in 1..=3_i64 {
            connection.send(&insert, crate::params![n])?;
        }
        assert_eq!(connection.unanswered.borrow().len(), 3, "none answered yet");
        // Sent before it, so the count sees them; their answers were read with its own.
        assert_eq!(count(&connection)?, 3);
        assert!(connection.unanswered.borrow().is_empty());
        let doubled = connection.prepare("UPDATE sent SET n = n * 10 WHERE n > ?1")?;
        connection.send(&insert, crate::params![4_i64])?;
        assert_eq!(
            connection.execute(&doubled, crate::params![2_i64])?,
            2,
            "3 and 4"
        );
        connection.batch_execute("COMMIT")?;
        let all = connection.prepare("SELECT n FROM sent ORDER BY n")?;
        let all: Vec<i64> = connection
            .query(&all, &[])?
            .iter()
            .map(|row| row.get(0))
            .collect();
        assert_eq!(all, [1, 2, 30, 40]);
        Ok(())
    }

    #[test]
    fn the_error_of_a_statement_sent_unanswered_is_the_next_answered_ones() -> Result<()> {
        let database = ScratchDatabase::on_test_cluster();
        let connection = PgConnection::open(database.url(), Purpose::Writer)?;
        connection.batch_execute("CREATE TABLE sent (n BIGINT NOT NULL PRIMARY KEY)")?;
        connection.batch_execute("BEGIN")?;
        let insert = connection.prepare_cached("INSERT INTO sent (n) VALUES (?1)")?;
        connection.send(&insert, crate::params![1_i64])?;
        connection.send(&insert, crate::params![1_i64])?;
        connection.send(&insert, crate::params![2_i64])?;
        // The duplicate's own error, not the aborted transaction's that the statements after
        // it met.
        let error = count(&connection).expect_err("the duplicate fails the transaction");
        assert!(error.to_string().contains("duplicate key"), "{error}");
        // A rollback ends the transaction whatever was sent in it; the connection goes on.
        connection.send(&insert, crate::params![1_i64])?;
        connection.batch_execute("ROLLBACK")?;
        assert!(connection.unanswered.borrow().is_empty());
        assert_eq!(count(&connection)?, 0);
        // Read on their own, the answers name the error too.
        connection.batch_execute("BEGIN")?;
        connection.send(&insert, crate::params![5_i64])?;
        connection.send(&insert, crate::params![5_i64])?;
        let error = connection.read_answers().expect_err("the duplicate");
        assert!(error.to_string().contains("duplicate key"), "{error}");
        connection.batch_execute("ROLLBACK")?;
        Ok(())
    }
}
