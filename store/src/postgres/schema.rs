//! The schema's migrations on PostgreSQL: each version of `crate::schema::VERSIONS` applied in
//! a transaction of its own, which records it in [`VERSIONS_TABLE`].

use std::fmt::Write as _;

use tokio_postgres::Client;

use crate::Result;
use crate::schema::{LATEST_VERSION, VERSIONS};

/// The table that records which versions of the schema a PostgreSQL database has (SQLite keeps
/// its version in `PRAGMA user_version`).
pub(crate) const VERSIONS_TABLE: &str = "seed_schema_versions";

/// Makes [`VERSIONS_TABLE`] where it is missing.
const CREATE_VERSIONS_TABLE: &str = "CREATE TABLE IF NOT EXISTS seed_schema_versions (
    version     BIGINT PRIMARY KEY,
    applied_at  BIGINT NOT NULL    -- unix milliseconds
)";

/// Keeps the server's notices (a table that exists already, skipped) from the migrating
/// transaction's client, which would log each of them: warnings and errors still come.
const QUIET_NOTICES: &str = "SET LOCAL client_min_messages = warning";

/// Records a version as applied, now.
const RECORD_VERSION: &str = "INSERT INTO seed_schema_versions (version, applied_at)
    VALUES ($1, (extract(epoch FROM clock_timestamp()) * 1000)::bigint)";

/// The key of the advisory lock a migrating transaction holds: processes that migrate one
/// database at once take their turns, so each version is applied once.
const MIGRATION_LOCK: i64 = 0x5eed_5c4e_3a00_0001;

/// Applies each version the database lacks, in order, one transaction each; the versions
/// applied.
pub(crate) async fn migrate(client: &mut Client) -> Result<Vec<u32>> {
    let mut applied = Vec::new();
    for (number, version) in (1..=LATEST_VERSION).zip(VERSIONS.iter()) {
        let transaction = client.transaction().await?;
        transaction
            .execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])
            .await?;
        // "already exists, skipping" and the like, at every start: not worth a log line.
        transaction.batch_execute(QUIET_NOTICES).await?;
        transaction.batch_execute(CREATE_VERSIONS_TABLE).await?;
        let recorded = transaction
            .query_opt(
                "SELECT 1 FROM seed_schema_versions WHERE version = $1",
                &[&i64::from(number)],
            )
            .await?
            .is_some();
        if recorded {
            transaction.rollback().await?;
            continue;
        }
        if !version.postgres.is_empty() {
            transaction.batch_execute(version.postgres).await?;
        }
        transaction
            .execute(RECORD_VERSION, &[&i64::from(number)])
            .await?;
        transaction.commit().await?;
        tracing::info!(version = number, "applied a version of the schema");
        applied.push(number);
    }
    Ok(applied)
}

/// The versions the database records, in order; none where it has no schema yet.
pub(crate) async fn applied_versions(client: &Client) -> Result<Vec<u32>> {
    let has_table = client
        .query_one(
            "SELECT to_regclass('seed_schema_versions') IS NOT NULL",
            &[],
        )
        .await?
        .try_get::<_, bool>(0)?;
    if !has_table {
        return Ok(Vec::new());
    }
    let rows = client
        .query(
            "SELECT version FROM seed_schema_versions ORDER BY version",
            &[],
        )
        .await?;
    rows.iter()
        .map(|row| {
            let version: i64 = row.try_get(0)?;
            u32::try_from(version).map_err(|_| crate::Error::Corrupt {
                table: VERSIONS_TABLE,
                detail: format!("version {version}"),
            })
        })
        .collect()
}

/// The SQL that makes a new database at the newest version as [`migrate`] does, for an
/// operator who applies it by hand (`psql -v ON_ERROR_STOP=1 -f`).
pub(crate) fn script() -> String {
    let mut script = format!(
        "-- Seed's schema for PostgreSQL, version {LATEST_VERSION}: what `seed migrate` applies to \
         a new database,\n-- each version in a transaction of its own, recorded in \
         {VERSIONS_TABLE}.\n\n{CREATE_VERSIONS_TABLE};\n"
    );
    for (number, version) in (1..=LATEST_VERSION).zip(VERSIONS.iter()) {
        let _ = write!(script, "\n-- version {number}\nBEGIN;\n");
        if version.postgres.is_empty() {
            script.push_str("-- (nothing to do on PostgreSQL: it is in version 1)\n");
        } else {
            script.push_str(version.postgres.trim_end());
            script.push('\n');
        }
        let _ = write!(
            script,
            "{};\nCOMMIT;\n",
            RECORD_VERSION.replace("$1", &number.to_string())
        );
    }
    script
}

#[cfg(test)]
mod tests {
    use futures::StreamExt as _;

    use super::*;
    use crate::ScratchDatabase;

    #[test]
    fn migrating_again_says_nothing() {
        let database = ScratchDatabase::on_test_cluster();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime");
        let notices = runtime.block_on(async {
            let (mut client, mut connection) =
                tokio_postgres::connect(database.url(), tokio_postgres::NoTls)
                    .await
                    .expect("connects");
            let (sender, receiver) = futures::channel::mpsc::unbounded();
            let messages = futures::stream::poll_fn(move |cx| connection.poll_message(cx));
            tokio::spawn(messages.for_each(move |message| {
                if let Ok(tokio_postgres::AsyncMessage::Notice(notice)) = message {
                    let _ = sender.unbounded_send(notice.message().to_owned());
                }
                async {}
            }));
            assert_eq!(
                migrate(&mut client).await.expect("migrates").len(),
                LATEST_VERSION as usize
            );
            assert!(
                migrate(&mut client)
                    .await
                    .expect("migrates again")
                    .is_empty()
            );
            drop(client);
            receiver.collect::<Vec<String>>().await
        });
        assert_eq!(notices, Vec::<String>::new());
    }
}
