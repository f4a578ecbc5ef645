//! A PostgreSQL connection for the store's threads: the writer's and each reader's own, on a
//! thread of its own with a current-thread runtime, blocking on each statement, so that the
//! store's functions run on it as they run on SQLite's connection ([`crate::sql`]).

use std::cell::RefCell;
use std::collections::HashMap;
use std::error::Error as StdError;

use bytes::BytesMut;
use tokio_postgres::types::{IsNull, ToSql, Type, to_sql_checked};

use crate::sql::{Params, Value};
use crate::{Error, Result};

/// What a connection is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Purpose {
    Writer,
    Reader,
}

/// One connection to the database, used from one thread at a time.
pub(crate) struct PgConnection {
    /// Taken only when the connection is dropped.
    runtime: Option<tokio::runtime::Runtime>,
    client: tokio_postgres::Client,
    /// Statements prepared on this connection, by their text as the store writes it.
    statements: RefCell<HashMap<Box<str>, tokio_postgres::Statement>>,
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
                    let (mut client, connection) =
                        runtime.block_on(config.connect(tokio_postgres::NoTls))?;
                    runtime.spawn(async move {
                        if let Err(error) = connection.await {
                            tracing::warn!(error = %super::describe(&error), "postgres connection ended");
                        }
                    });
                    match purpose {
                        Purpose::Writer => {
                            runtime.block_on(super::schema::migrate(&mut client))?;
                        }
                        Purpose::Reader => runtime.block_on(
                            client.batch_execute("SET default_transaction_read_only = on"),
                        )?,
                    }
                    Ok(PgConnection {
                        runtime: Some(runtime),
                        client,
                        statements: RefCell::new(HashMap::new()),
                    })
                })
                .join()
                .map_err(|_| Error::PostgresPool("connecting panicked".to_owned()))?
        })
    }

    fn block_on<F: std::future::Future>(&self, future: F) -> F::Output {
        self.runtime
            .as_ref()
            .expect("the runtime lives as long as the connection")
            .block_on(future)
    }

    pub(crate) fn prepare_cached(&self, sql: &str) -> Result<tokio_postgres::Statement> {
        if let Some(statement) = self.statements.borrow().get(sql) {
            return Ok(statement.clone());
        }
        let statement = self.prepare(sql)?;
        self.statements
            .borrow_mut()
            .insert(sql.into(), statement.clone());
        Ok(statement)
    }

    pub(crate) fn prepare(&self, sql: &str) -> Result<tokio_postgres::Statement> {
        let text = crate::sql::postgres_text(sql);
        Ok(self.block_on(self.client.prepare(&text))?)
    }

    pub(crate) fn execute(
        &self,
        statement: &tokio_postgres::Statement,
        params: Params<'_>,
    ) -> Result<usize> {
        let values = bound(params);
        let n_changed = self.block_on(self.client.execute(statement, &refs(&values)))?;
        Ok(usize::try_from(n_changed).unwrap_or(usize::MAX))
    }

    pub(crate) fn query(
        &self,
        statement: &tokio_postgres::Statement,
        params: Params<'_>,
    ) -> Result<Vec<tokio_postgres::Row>> {
        let values = bound(params);
        Ok(self.block_on(self.client.query(statement, &refs(&values)))?)
    }

    pub(crate) fn batch_execute(&self, sql: &str) -> Result<()> {
        Ok(self.block_on(self.client.batch_execute(sql))?)
    }
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

/// A value as PostgreSQL binds it.
#[derive(Debug)]
struct Bound<'a>(Value<'a>);

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
