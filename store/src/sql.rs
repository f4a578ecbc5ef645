//! One body of SQL, two engines. Every store function is a plain function over a
//! [`Connection`], which is SQLite's connection or a PostgreSQL one, and speaks the SQL both
//! engines read: `?N` placeholders (rewritten to PostgreSQL's `$N` once per statement text),
//! `ON CONFLICT` for SQLite's `OR IGNORE`/`OR REPLACE`, `RETURNING`, `CASE`. The few statements
//! that cannot be shared name both texts ([`Connection::engine`]).
//!
//! The API is the small part of rusqlite's the store uses (`prepare_cached`, `execute`,
//! `query_row`, `query_map`, `optional`), so a function reads the same as it did over rusqlite;
//! values cross as [`Value`] (the handful of types the schema holds, in `sql/value.rs`), bound
//! to SQLite through rusqlite and to PostgreSQL through tokio-postgres. On SQLite a call is one
//! `match` away from rusqlite's own.

mod value;

use std::marker::PhantomData;

use crate::postgres::connection::{PgConnection, Purpose};
use crate::schema::Engine;
use crate::{Config, Error, Result};

use value::sqlite_value;
pub(crate) use value::{FromSql, Params, ToSql, Value};

/// A connection to the store's database, on either engine. It lives on one thread at a time.
pub(crate) enum Connection {
    Sqlite(rusqlite::Connection),
    Postgres(Box<PgConnection>),
}

impl From<rusqlite::Connection> for Connection {
    fn from(connection: rusqlite::Connection) -> Self {
        Connection::Sqlite(connection)
    }
}

impl Connection {
    /// Opens the writer's connection to the database `config` names, bringing its schema up
    /// to date.
    pub(crate) fn open_writer(config: &Config) -> Result<Connection> {
        match &config.database {
            Some(url) => Ok(Connection::Postgres(Box::new(PgConnection::open(
                &url.0,
                Purpose::Writer,
            )?))),
            None => Ok(Connection::Sqlite(crate::schema::open_writer(config)?)),
        }
    }

    /// Opens another writing connection to a PostgreSQL database the first writer has set up:
    /// a lane of the writer's (see `writer`). `None` on SQLite, which has one writer.
    pub(crate) fn open_lane(config: &Config) -> Result<Option<Connection>> {
        match &config.database {
            Some(url) => Ok(Some(Connection::Postgres(Box::new(PgConnection::open(
                &url.0,
                Purpose::Lane,
            )?)))),
            None => Ok(None),
        }
    }

    /// Opens a read-only connection to a database the writer has set up.
    pub(crate) fn open_reader(config: &Config) -> Result<Connection> {
        match &config.database {
            Some(url) => Ok(Connection::Postgres(Box::new(PgConnection::open(
                &url.0,
                Purpose::Reader,
            )?))),
            None => Ok(Connection::Sqlite(crate::schema::open_reader(config)?)),
        }
    }

    pub(crate) fn engine(&self) -> Engine {
        match self {
            Connection::Sqlite(_) => Engine::Sqlite,
            Connection::Postgres(_) => Engine::Postgres,
        }
    }

    /// SQLite's own connection, for what only SQLite has (pragmas, the WAL, hooks).
    pub(crate) fn sqlite(&self) -> Option<&rusqlite::Connection> {
        match self {
            Connection::Sqlite(connection) => Some(connection),
            Connection::Postgres(_) => None,
        }
    }

    /// Whether no transaction is open. On PostgreSQL the store opens and ends every
    /// transaction itself, so this is only asked of SQLite, which may roll one back on its
    /// own (a full disk): there it is always `false`.
    pub(crate) fn is_autocommit(&self) -> bool {
        match self {
            Connection::Sqlite(connection) => connection.is_autocommit(),
            Connection::Postgres(_) => false,
        }
    }

    /// A statement kept prepared on this connection for its text.
    pub(crate) fn prepare_cached(&self, sql: &str) -> Result<Statement<'_>> {
        Ok(Statement {
            inner: match self {
                Connection::Sqlite(connection) => {
                    StatementInner::SqliteCached(connection.prepare_cached(sql)?)
                }
                Connection::Postgres(connection) => StatementInner::Postgres {
                    statement: connection.prepare_cached(sql)?,
                    connection,
                },
            },
        })
    }

    /// A statement prepared for one use (a text made at run time).
    pub(crate) fn prepare(&self, sql: &str) -> Result<Statement<'_>> {
        Ok(Statement {
            inner: match self {
                Connection::Sqlite(connection) => StatementInner::Sqlite(connection.prepare(sql)?),
                Connection::Postgres(connection) => StatementInner::Postgres {
                    statement: connection.prepare(sql)?,
                    connection,
                },
            },
        })
    }

    #[cfg(test)]
    pub(crate) fn execute(&self, sql: &str, params: Params<'_>) -> Result<usize> {
        self.prepare(sql)?.execute(params)
    }

    pub(crate) fn query_row<T, F>(&self, sql: &str, params: Params<'_>, f: F) -> Result<T>
    where
        F: FnOnce(&Row<'_>) -> Result<T>,
    {
        self.prepare(sql)?.query_row(params, f)
    }

    /// Runs statements that take no parameters and return no rows, separated by `;`.
    pub(crate) fn execute_batch(&self, sql: &str) -> Result<()> {
        match self {
            Connection::Sqlite(connection) => Ok(connection.execute_batch(sql)?),
            Connection::Postgres(connection) => connection.batch_execute(sql),
        }
    }

    /// Reads the answers of the statements sent unanswered ([`Statement::send`]): the first
    /// error among them. SQLite ran them at once.
    pub(crate) fn read_answers(&self) -> Result<()> {
        match self {
            Connection::Sqlite(_) => Ok(()),
            Connection::Postgres(connection) => connection.read_answers(),
        }
    }

    /// How many times the connection waited on the database server's answers: 0 on SQLite,
    /// which has no server.
    pub(crate) fn n_round_trips(&self) -> u64 {
        match self {
            Connection::Sqlite(_) => 0,
            Connection::Postgres(connection) => connection.n_round_trips(),
        }
    }

    /// On PostgreSQL, sets `name` to `value` for the connection's session, and again on each
    /// connection it opens anew (see `PgConnection::set_for_session`); SQLite has no such
    /// settings, and nothing is done there.
    pub(crate) fn set_for_session(&self, name: &str, value: &str) -> Result<()> {
        match self {
            Connection::Sqlite(_) => Ok(()),
            Connection::Postgres(connection) => connection.set_for_session(name, value),
        }
    }

    /// A read-only view of the database as of now, for reads that must agree with each other:
    /// a transaction rolled back when the snapshot is dropped. On PostgreSQL its `BEGIN` is
    /// sent without waiting, with the first statement that is waited on.
    pub(crate) fn snapshot(&self) -> Result<Snapshot<'_>> {
        if self.engine() == Engine::Sqlite {
            // Kept prepared: a turn's reads open a snapshot or two, and parsing its `BEGIN`
            // and `COMMIT` each time cost a reader more than a point query.
            self.prepare_cached("BEGIN DEFERRED")?
                .execute(crate::params![])?;
        }
        // On PostgreSQL, open from before the `BEGIN`: if it cannot even be sent (the
        // connection was lost under it), dropping the snapshot rolls back, which ends the
        // transaction the connection counts as begun, so that the next statement may open a
        // connection anew. Otherwise every later read on the connection that begins no
        // transaction would meet the closed one.
        let snapshot = Snapshot {
            connection: self,
            open: true,
        };
        if self.engine() == Engine::Postgres {
            self.prepare_cached("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")?
                .send(crate::params![])?;
        }
        Ok(snapshot)
    }
}

/// A transaction of reads, rolled back when dropped ([`Connection::snapshot`]).
pub(crate) struct Snapshot<'c> {
    connection: &'c Connection,
    open: bool,
}

impl Snapshot<'_> {
    /// Ends the snapshot, saying whether its transaction ended cleanly: on PostgreSQL the
    /// answers of the queries sent in it ([`Statement::send_query_map`]) are read with the
    /// `COMMIT`'s, and the first error among them is returned.
    pub(crate) fn finish(mut self) -> Result<()> {
        // The `COMMIT` ends the transaction whether or not a statement in it failed.
        match self.connection.engine() {
            Engine::Sqlite => {
                self.open = false;
                self.connection
                    .prepare_cached("COMMIT")?
                    .execute(crate::params![])
                    .map(drop)
            }
            // Waited on: the answers of the statements sent before it come in the same trip.
            Engine::Postgres => {
                let mut commit = self.connection.prepare_cached("COMMIT")?;
                self.open = false;
                commit.execute(crate::params![]).map(drop)
            }
        }
    }
}

impl std::ops::Deref for Snapshot<'_> {
    type Target = Connection;

    fn deref(&self) -> &Connection {
        self.connection
    }
}

impl Drop for Snapshot<'_> {
    fn drop(&mut self) {
        if !self.open {
            return;
        }
        // Nothing was written; a connection that cannot roll back is broken for its next use,
        // which will say so.
        let _ = self.connection.execute_batch("ROLLBACK");
    }
}

/// A prepared statement.
pub(crate) struct Statement<'c> {
    inner: StatementInner<'c>,
}

enum StatementInner<'c> {
    SqliteCached(rusqlite::CachedStatement<'c>),
    Sqlite(rusqlite::Statement<'c>),
    Postgres {
        connection: &'c PgConnection,
        statement: tokio_postgres::Statement,
    },
}

fn sqlite_params<'p>(
    params: Params<'p>,
) -> rusqlite::ParamsFromIter<impl Iterator<Item = Value<'p>>> {
    rusqlite::params_from_iter(params.iter().map(|param| param.to_sql()))
}

impl<'c> Statement<'c> {
    /// Runs the statement; returns how many rows it changed.
    pub(crate) fn execute(&mut self, params: Params<'_>) -> Result<usize> {
        match &mut self.inner {
            StatementInner::SqliteCached(statement) => {
                Ok(statement.execute(sqlite_params(params))?)
            }
            StatementInner::Sqlite(statement) => Ok(statement.execute(sqlite_params(params))?),
            StatementInner::Postgres {
                connection,
                statement,
            } => connection.execute(statement, params),
        }
    }

    /// Runs the statement where nobody reads its answer: on PostgreSQL it is sent without
    /// waiting, and its answer read with the next statement's that is waited on (an error it
    /// meets is then that statement's); on SQLite it runs at once. Only within a transaction
    /// that its error fails anyway (the writer's).
    pub(crate) fn send(&mut self, params: Params<'_>) -> Result<()> {
        match &mut self.inner {
            StatementInner::Postgres {
                connection,
                statement,
            } => connection.send(statement, params),
            _ => self.execute(params).map(drop),
        }
    }

    /// `f` of each row, as [`Statement::query_map`], for a query whose rows nobody needs
    /// before the transaction's later statements: on PostgreSQL it is sent without waiting
    /// (as [`Statement::send`]) and its rows are there once the answers are read (the next
    /// statement waited on, the `COMMIT` at the latest); on SQLite it runs at once.
    pub(crate) fn send_query_map<T, F>(&mut self, params: Params<'_>, f: F) -> Result<LaterRows<T>>
    where
        F: Fn(&Row<'_>) -> Result<T> + Send + 'static,
    {
        match &mut self.inner {
            StatementInner::Postgres {
                connection,
                statement,
            } => Ok(LaterRows::Postgres {
                rows: connection.send_query(statement, params)?,
                f: Box::new(f),
            }),
            _ => Ok(LaterRows::Now(
                self.query_map(params, f)?.collect::<Result<_>>()?,
            )),
        }
    }

    /// The first row's `f`; [`Error::NoRows`] when there is none.
    pub(crate) fn query_row<T, F>(&mut self, params: Params<'_>, f: F) -> Result<T>
    where
        F: FnOnce(&Row<'_>) -> Result<T>,
    {
        let mut rows = self.query(params)?;
        match rows.next()? {
            Some(row) => f(&row),
            None => Err(Error::NoRows),
        }
    }

    /// `f` of each row, in order.
    pub(crate) fn query_map<T, F>(&mut self, params: Params<'_>, f: F) -> Result<MappedRows<'_, F>>
    where
        F: FnMut(&Row<'_>) -> Result<T>,
    {
        Ok(MappedRows {
            rows: self.query(params)?,
            f,
        })
    }

    /// The rows, read one at a time with [`Rows::next`].
    pub(crate) fn query(&mut self, params: Params<'_>) -> Result<Rows<'_>> {
        let inner = match &mut self.inner {
            StatementInner::SqliteCached(statement) => {
                RowsInner::Sqlite(statement.query(sqlite_params(params))?)
            }
            StatementInner::Sqlite(statement) => {
                RowsInner::Sqlite(statement.query(sqlite_params(params))?)
            }
            StatementInner::Postgres {
                connection,
                statement,
            } => RowsInner::Postgres(connection.query(statement, params)?.into_iter()),
        };
        Ok(Rows { inner })
    }
}

/// The rows of a query.
pub(crate) struct Rows<'s> {
    inner: RowsInner<'s>,
}

/// What [`Statement::send_query_map`] gives: the rows' values, or (PostgreSQL) the rows to
/// come and what makes a value of each.
pub(crate) enum LaterRows<T> {
    Now(Vec<T>),
    Postgres {
        rows: crate::postgres::connection::Later,
        #[allow(clippy::type_complexity)]
        f: Box<dyn Fn(&Row<'_>) -> Result<T> + Send>,
    },
}

impl<T> LaterRows<T> {
    /// The values, once the statement's answer was read.
    pub(crate) fn values(self) -> Result<Vec<T>> {
        match self {
            LaterRows::Now(values) => Ok(values),
            LaterRows::Postgres { rows, f } => rows
                .rows()?
                .into_iter()
                .map(|row| {
                    f(&Row {
                        inner: RowInner::Postgres(row, PhantomData),
                    })
                })
                .collect(),
        }
    }
}

enum RowsInner<'s> {
    Sqlite(rusqlite::Rows<'s>),
    Postgres(std::vec::IntoIter<tokio_postgres::Row>),
}

/// One row of a query, read with [`Row::get`].
pub(crate) struct Row<'r> {
    inner: RowInner<'r>,
}

enum RowInner<'r> {
    Sqlite(&'r rusqlite::Row<'r>),
    Postgres(tokio_postgres::Row, PhantomData<&'r ()>),
}

impl Rows<'_> {
    /// The next row, `None` after the last.
    pub(crate) fn next(&mut self) -> Result<Option<Row<'_>>> {
        Ok(match &mut self.inner {
            RowsInner::Sqlite(rows) => rows.next()?.map(|row| Row {
                inner: RowInner::Sqlite(row),
            }),
            RowsInner::Postgres(rows) => rows.next().map(|row| Row {
                inner: RowInner::Postgres(row, PhantomData),
            }),
        })
    }
}

impl Row<'_> {
    /// The value of column `index` (from 0) as `T`; a value of another type is a corrupt row.
    pub(crate) fn get<I: RowIndex, T: FromSql>(&self, index: I) -> Result<T> {
        let index = index.index();
        let converted = match &self.inner {
            RowInner::Sqlite(row) => T::from_sql(sqlite_value(row.get_ref(index)?)),
            RowInner::Postgres(row, _) => {
                T::from_sql(crate::postgres::connection::column_value(row, index)?)
            }
        };
        converted.map_err(|detail| Error::corrupt("row", format_args!("column {index}: {detail}")))
    }
}

/// A column's place in a row (from 0), as rusqlite's `get` takes it.
pub(crate) trait RowIndex {
    fn index(self) -> usize;
}

impl RowIndex for usize {
    fn index(self) -> usize {
        self
    }
}

/// `f` of each row of a query, an iterator of results.
pub(crate) struct MappedRows<'s, F> {
    rows: Rows<'s>,
    f: F,
}

impl<T, F> Iterator for MappedRows<'_, F>
where
    F: FnMut(&Row<'_>) -> Result<T>,
{
    type Item = Result<T>;

    fn next(&mut self) -> Option<Result<T>> {
        match self.rows.next() {
            Ok(Some(row)) => Some((self.f)(&row)),
            Ok(None) => None,
            Err(error) => Some(Err(error)),
        }
    }
}

/// `optional()` on a query's result: no row is `None`.
pub(crate) trait OptionalExtension<T> {
    fn optional(self) -> Result<Option<T>>;
}

impl<T> OptionalExtension<T> for Result<T> {
    fn optional(self) -> Result<Option<T>> {
        match self {
            Ok(value) => Ok(Some(value)),
            Err(Error::NoRows) => Ok(None),
            Err(error) => Err(error),
        }
    }
}

/// PostgreSQL's text of a statement written with SQLite's `?N` placeholders: each `?N` outside
/// a quoted string or identifier becomes `$N`, and SQLite's index hints (`INDEXED BY name`)
/// are dropped.
pub(crate) fn postgres_text(sql: &str) -> String {
    let text = placeholders(sql);
    let mut out = String::with_capacity(text.len());
    let mut rest = text.as_str();
    while let Some(at) = rest.find(" INDEXED BY ") {
        out.push_str(&rest[..at]);
        let after = &rest[at + " INDEXED BY ".len()..];
        let name_len = after
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(after.len());
        rest = &after[name_len..];
    }
    out.push_str(rest);
    out
}

fn placeholders(sql: &str) -> String {
    let mut text = String::with_capacity(sql.len() + 8);
    let mut quote: Option<char> = None;
    for c in sql.chars() {
        match quote {
            Some(open) if c == open => quote = None,
            Some(_) => {}
            None if c == '\'' || c == '"' => quote = Some(c),
            None if c == '?' => {
                text.push('$');
                continue;
            }
            None => {}
        }
        text.push(c);
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_become_postgres_ones_outside_quotes() {
        assert_eq!(
            postgres_text("SELECT a FROM t WHERE b = ?1 AND c = '?2' AND \"?3\" = ?12"),
            "SELECT a FROM t WHERE b = $1 AND c = '?2' AND \"?3\" = $12"
        );
        assert_eq!(
            postgres_text("x = 'it''s ?1' OR y = ?2"),
            "x = 'it''s ?1' OR y = $2"
        );
    }

    #[test]
    fn a_sqlite_connection_runs_the_shared_api() -> Result<()> {
        let connection = Connection::from(rusqlite::Connection::open_in_memory()?);
        connection.execute_batch("CREATE TABLE t (k INTEGER PRIMARY KEY, v TEXT, b BLOB)")?;
        let inserted = connection
            .prepare_cached("INSERT INTO t (v, b) VALUES (?1, ?2) ON CONFLICT DO NOTHING")?
            .execute(crate::params!["one", vec![1_u8, 2]])?;
        assert_eq!(inserted, 1);
        connection.execute(
            "INSERT INTO t (v) VALUES (?1)",
            crate::params![None::<String>],
        )?;
        let values: Vec<(i64, Option<String>)> = connection
            .prepare_cached("SELECT k, v FROM t ORDER BY k")?
            .query_map(crate::params![], |row| Ok((row.get(0)?, row.get(1)?)))?
            .collect::<Result<_>>()?;
        assert_eq!(values, vec![(1, Some("one".to_owned())), (2, None)]);
        let missing = connection
            .prepare_cached("SELECT v FROM t WHERE k = ?1")?
            .query_row(crate::params![9], |row| row.get::<_, String>(0))
            .optional()?;
        assert_eq!(missing, None);
        let blob: Vec<u8> =
            connection.query_row("SELECT b FROM t WHERE k = 1", crate::params![], |row| {
                row.get(0)
            })?;
        assert_eq!(blob, vec![1, 2]);
        Ok(())
    }
}
