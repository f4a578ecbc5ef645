//! Opening a connection: pragmas, and the versioned migrations that build the schema.

use std::sync::LazyLock;

use rusqlite::{Connection, OpenFlags};
use rusqlite_migration::{M, Migrations};

use crate::{Config, Error, Result};

/// The migrations, in order. Version 1 is `sqlite-schema.sql`; a later schema change is a new
/// entry here (and the same change made to that file's description of the current schema).
static MIGRATIONS: LazyLock<Migrations<'static>> =
    LazyLock::new(|| Migrations::new(vec![M::up(include_str!("../sqlite-schema.sql"))]));

/// Opens the writer's connection: creates the file if needed, switches it to WAL, applies the
/// pragmas and brings the schema up to date.
pub(crate) fn open_writer(config: &Config) -> Result<Connection> {
    let mut connection = Connection::open(&config.path)?;
    apply_pragmas(&connection, config)?;
    MIGRATIONS
        .to_latest(&mut connection)
        .map_err(Error::Migration)?;
    Ok(connection)
}

/// Opens a read-only connection to a database the writer has already set up.
pub(crate) fn open_reader(config: &Config) -> Result<Connection> {
    let connection = Connection::open_with_flags(
        &config.path,
        OpenFlags::SQLITE_OPEN_READ_ONLY
            | OpenFlags::SQLITE_OPEN_NO_MUTEX
            | OpenFlags::SQLITE_OPEN_URI,
    )?;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn migrations_are_valid() {
        assert!(MIGRATIONS.validate().is_ok());
    }
}
