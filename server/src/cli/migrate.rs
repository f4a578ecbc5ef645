//! `seed migrate`: brings a database's schema up to date, or prints the schema's SQL for an
//! operator who applies it by hand — on the PostgreSQL database `--database` names, else on the
//! data dir's SQLite database.

use std::path::Path;

use anyhow::Context as _;
use seed_store::{Config, Engine, LATEST_VERSION, Postgres};

use crate::serve::DATABASE_FILE;

/// Runs `seed migrate`: with `print`, prints the schema of a new database and touches nothing;
/// else applies the versions the database lacks and says which.
pub(crate) fn migrate(data_dir: &Path, database: Option<&str>, print: bool) -> anyhow::Result<()> {
    if print {
        let engine = if database.is_some() {
            Engine::Postgres
        } else {
            Engine::Sqlite
        };
        print!("{}", seed_store::schema_script(engine));
        return Ok(());
    }
    let applied = match database {
        Some(url) => actix_web::rt::System::new()
            .block_on(async { Postgres::connect(url).await?.migrate().await })
            // The URL may hold a password: it is left out of the message.
            .context("cannot migrate the PostgreSQL database")?,
        None => {
            crate::data_dir::create(data_dir)?;
            let path = data_dir.join(DATABASE_FILE);
            seed_store::migrate_sqlite(&Config::new(&path))
                .with_context(|| format!("cannot migrate {}", path.display()))?
                .collect()
        }
    };
    println!("{}", report(&applied));
    Ok(())
}

/// What a migration that applied `applied` (in order) says.
fn report(applied: &[u32]) -> String {
    match applied {
        [] => format!("nothing to apply: the schema is at version {LATEST_VERSION}"),
        [version] => {
            format!("applied version {version}; the schema is at version {LATEST_VERSION}")
        }
        [first, .., last] => {
            format!("applied versions {first} to {last}; the schema is at version {LATEST_VERSION}")
        }
    }
}
