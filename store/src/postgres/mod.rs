//! The PostgreSQL engine: a pool of connections to one database, the runner of the schema's
//! migrations there (`schema`), the raw floor the bench measures against (`floor`), and a
//! database of its own for a test or a bench run (`scratch`). The
//! store's tables are the same on both engines (one list of versions,
//! `crate::schema::VERSIONS`); the statements over them run on SQLite.

pub(crate) mod connection;
pub mod floor;
pub mod notices;
#[cfg(test)]
mod plans;
pub(crate) mod schema;
pub mod scratch;

use std::fmt;
use std::str::FromStr as _;
use std::time::Duration;

use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod};

use crate::{Error, Result};

/// How long opening a connection may take when the URL does not say (`connect_timeout`): a
/// database that does not answer is told as an error rather than waited for.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Connections the pool keeps at most.
const POOL_SIZE: usize = 16;

/// A pool of connections to one PostgreSQL database. Its calls run in a tokio runtime.
#[derive(Clone)]
pub struct Postgres {
    pool: Pool,
}

impl fmt::Debug for Postgres {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Postgres")
            .field("status", &self.pool.status())
            .finish_non_exhaustive()
    }
}

impl Postgres {
    /// Connects to the database `url` names (`postgres://user@host:port/database`, or
    /// PostgreSQL's `key=value` form) and checks one connection, so that a URL that does not
    /// parse, a database that cannot be reached and a refused login are each an error here.
    /// Connections are in plain text (no TLS).
    pub async fn connect(url: &str) -> Result<Postgres> {
        let config = config(url)?;
        let manager = Manager::from_config(
            config,
            tokio_postgres::NoTls,
            ManagerConfig {
                recycling_method: RecyclingMethod::Fast,
            },
        );
        let pool = Pool::builder(manager)
            .max_size(POOL_SIZE)
            .build()
            .map_err(|error| Error::PostgresPool(error.to_string()))?;
        drop(pool.get().await?);
        Ok(Postgres { pool })
    }

    /// Brings the schema up to the newest version, creating it in an empty database, and
    /// returns the versions it applied (none when it was up to date). Several processes may
    /// run it at once: one applies each version, the others find it applied.
    pub async fn migrate(&self) -> Result<Vec<u32>> {
        let mut client = self.pool.get().await?;
        schema::migrate(&mut client).await
    }

    /// The versions of the schema the database records as applied, in order.
    pub async fn applied_versions(&self) -> Result<Vec<u32>> {
        let client = self.pool.get().await?;
        schema::applied_versions(&client).await
    }
}

impl From<deadpool_postgres::PoolError> for Error {
    fn from(error: deadpool_postgres::PoolError) -> Self {
        match error {
            deadpool_postgres::PoolError::Backend(error) => Error::Postgres(error),
            other => Error::PostgresPool(other.to_string()),
        }
    }
}

impl From<tokio_postgres::Error> for Error {
    fn from(error: tokio_postgres::Error) -> Self {
        Error::Postgres(error)
    }
}

/// The driver's settings for the database `url` names, with a timeout to connect when the URL
/// has none.
pub(crate) fn config(url: &str) -> Result<tokio_postgres::Config> {
    let mut config = tokio_postgres::Config::from_str(url).map_err(Error::Postgres)?;
    if config.get_connect_timeout().is_none() {
        config.connect_timeout(CONNECT_TIMEOUT);
    }
    Ok(config)
}

/// A PostgreSQL error with its causes ("error connecting to server: Connection refused"): the
/// driver's own text names only the kind of error and leaves the cause to its source.
pub(crate) fn describe(error: &tokio_postgres::Error) -> String {
    let mut text = error.to_string();
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}
