//! A database of its own on a PostgreSQL server, made for one test (or one bench run) and
//! dropped after it, so that neither ever writes into a database it did not make.

use crate::{Error, Result};

/// The variable naming the tests' cluster (`scripts/postgres.sh start` prints it).
pub const TEST_CLUSTER_VAR: &str = "SEED_TEST_DATABASE_URL";

/// A database made on a server and dropped (with whatever is connected to it) when this goes.
#[derive(Debug)]
pub struct ScratchDatabase {
    admin_url: String,
    name: String,
    url: String,
}

impl ScratchDatabase {
    /// Makes a new, empty database on the server `admin_url` reaches (as a role that may
    /// create databases), named for this process and a count.
    pub fn create(admin_url: &str) -> Result<ScratchDatabase> {
        static MADE: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let made = MADE.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |elapsed| elapsed.subsec_nanos());
        let name = format!("seed_test_{}_{made}_{nanos}", std::process::id());
        execute(admin_url, &format!("CREATE DATABASE {name}"))?;
        Ok(ScratchDatabase {
            url: with_database(admin_url, &name)?,
            admin_url: admin_url.to_owned(),
            name,
        })
    }

    /// A new database on the tests' cluster ([`TEST_CLUSTER_VAR`]). Panics, saying how to
    /// start a cluster, when the variable is unset: no PostgreSQL test is skipped for want of
    /// one.
    pub fn on_test_cluster() -> ScratchDatabase {
        let admin_url = std::env::var(TEST_CLUSTER_VAR).unwrap_or_else(|_| {
            panic!(
                "{TEST_CLUSTER_VAR} is unset: the PostgreSQL tests need a cluster. Start a \
                 throwaway one with `eval \"$(scripts/postgres.sh start)\"` (scripts/test does)"
            )
        });
        ScratchDatabase::create(&admin_url)
            .unwrap_or_else(|error| panic!("a database on the test cluster: {error}"))
    }

    /// The URL that reaches this database.
    pub fn url(&self) -> &str {
        &self.url
    }
}

impl Drop for ScratchDatabase {
    fn drop(&mut self) {
        let dropped = execute(
            &self.admin_url,
            &format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", self.name),
        );
        if let Err(error) = dropped {
            tracing::warn!(%error, database = %self.name, "dropping a scratch database failed");
        }
    }
}

/// Runs `f`, on a runtime of its own, with the pool of a new database on the tests' cluster
/// ([`ScratchDatabase::on_test_cluster`]), dropped after it.
#[cfg(test)]
pub(crate) fn with_scratch_postgres<F, T>(f: F) -> T
where
    F: AsyncFnOnce(&super::Postgres) -> T,
{
    let database = ScratchDatabase::on_test_cluster();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    runtime.block_on(async {
        let postgres = super::Postgres::connect(database.url())
            .await
            .expect("connects");
        f(&postgres).await
    })
}

/// Runs `sql` on a connection of its own to `url`, on a thread of its own (so that a caller
/// inside a tokio runtime may call it too).
fn execute(url: &str, sql: &str) -> Result<()> {
    let (url, sql) = (url.to_owned(), sql.to_owned());
    let run = move || -> Result<()> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|error| Error::PostgresPool(format!("a runtime for the driver: {error}")))?;
        runtime.block_on(async {
            let (client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls).await?;
            let connection = tokio::spawn(connection);
            let outcome = client.batch_execute(&sql).await;
            drop(client);
            let _ = connection.await;
            outcome.map_err(Error::Postgres)
        })
    };
    std::thread::spawn(run).join().unwrap_or_else(|_| {
        Err(Error::PostgresPool(
            "the driver's thread panicked".to_owned(),
        ))
    })
}

/// `url` (`postgres://user@host:port/database?options`) naming the database `name` instead.
fn with_database(url: &str, name: &str) -> Result<String> {
    let (base, options) = url
        .split_once('?')
        .map_or((url, None), |(base, options)| (base, Some(options)));
    let authority_start = base
        .find("://")
        .ok_or_else(|| Error::PostgresPool(format!("not a postgres:// URL: {url}")))?
        + 3;
    let authority_end = base[authority_start..]
        .find('/')
        .map_or(base.len(), |slash| authority_start + slash);
    let mut named = format!("{}/{name}", &base[..authority_end]);
    if let Some(options) = options {
        named.push('?');
        named.push_str(options);
    }
    Ok(named)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_url_names_another_database_keeping_its_server_and_options() {
        let named = |url: &str| with_database(url, "other").ok();
        assert_eq!(
            named("postgres://seed@127.0.0.1:5432/postgres").as_deref(),
            Some("postgres://seed@127.0.0.1:5432/other")
        );
        assert_eq!(
            named("postgres://seed@host/db?sslmode=disable").as_deref(),
            Some("postgres://seed@host/other?sslmode=disable")
        );
        assert_eq!(
            named("postgres://seed@host").as_deref(),
            Some("postgres://seed@host/other")
        );
        assert_eq!(named("host=localhost"), None);
    }
}
