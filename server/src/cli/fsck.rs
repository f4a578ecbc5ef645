//! `seed fsck`: checks every session of the PostgreSQL database `--database` names, else of the
//! data dir's SQLite database, read-only (safe beside a running service). The checks are
//! `seed_sim::fsck`'s; this prints each finding, naming its session, and the summary, and fails
//! (exit 1) when there is any.

use std::path::Path;

use anyhow::Context as _;
use seed_store::{Config, DatabaseUrl};

use crate::serve::{DATABASE_FILE, describe_database};

/// Runs `seed fsck`: `Ok` when the database is clean, an error naming how many findings
/// (printed first) there were.
pub(crate) fn fsck(data_dir: &Path, database: Option<&str>) -> anyhow::Result<()> {
    let database = database.map(|url| DatabaseUrl(url.to_owned()));
    let what = match &database {
        Some(url) => format!("the PostgreSQL database {}", describe_database(url)),
        None => data_dir.join(DATABASE_FILE).display().to_string(),
    };
    let config = Config {
        database,
        ..Config::new(data_dir.join(DATABASE_FILE))
    };
    let report = seed_sim::fsck::fsck(&config).with_context(|| format!("cannot check {what}"))?;
    for finding in &report.findings {
        println!("{finding}");
    }
    println!("{} ({what})", report.summary());
    match report.findings.len() {
        0 => Ok(()),
        n => anyhow::bail!("fsck found {n} problems in {what}"),
    }
}
