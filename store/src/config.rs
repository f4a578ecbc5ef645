//! How the store opens its database.

use std::path::PathBuf;
use std::time::Duration;

/// SQLite's `synchronous` setting for the WAL.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Synchronous {
    /// Survives a process crash; a power loss may roll back the newest commits.
    #[default]
    Normal,
    /// Syncs the WAL on every commit: survives power loss too, at a cost per commit.
    Full,
}

impl Synchronous {
    /// What the setting promises, for people.
    pub fn describe(self) -> &'static str {
        match self {
            Synchronous::Normal => {
                "synchronous=normal: a commit survives a crash of the process; a power loss may \
                 roll back the newest commits"
            }
            Synchronous::Full => {
                "synchronous=full: a commit survives a power loss too (the WAL is synced at \
                 every commit)"
            }
        }
    }

    pub fn as_pragma(self) -> &'static str {
        match self {
            Synchronous::Normal => "NORMAL",
            Synchronous::Full => "FULL",
        }
    }

    /// The WAL size, in pages, at which the writer starts a checkpoint (`checkpoint.rs`).
    ///
    /// - `Normal`: 4,000. The checkpoint copies each page once however many frames of it the
    ///   WAL holds, and a turn writes the same few pages (a run's, the tables' last leaves, a
    ///   session's index leaves) commit after commit: a round of 4,000 frames copies about a
    ///   fifth of them, one of 1,000 about a third. Its `fsync` is the only one of this
    ///   setting. 4,000 frames still fit in the first hash table of the WAL's index (4,062),
    ///   so a reader finds a page with one lookup.
    /// - `Full`: 1,000, SQLite's own `wal_autocheckpoint`. Every commit syncs the WAL here,
    ///   and a round four times as long made grouped commits slower (its sync of the database
    ///   file is four times as large, and the commits' syncs wait on it).
    ///
    /// docs/design/group-commit.md has the figures.
    pub fn checkpoint_pages(self) -> i32 {
        match self {
            Synchronous::Normal => 4000,
            Synchronous::Full => 1000,
        }
    }
}

/// How the writer commits a group of jobs in one transaction while letting a refused job fail
/// alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum BatchMode {
    /// Run every job of the group in one transaction with no savepoints; if any job or the
    /// commit fails, roll back and redo each job in a transaction of its own. Fastest when
    /// refusals are rare (see docs/design/group-commit.md for the figures).
    #[default]
    Optimistic,
    /// Wrap each job in a savepoint, rolling back to it when the job fails.
    Savepoint,
}

/// Settings for [`crate::Store::open`].
#[derive(Debug, Clone)]
pub struct Config {
    /// The database file. Its `-wal` and `-shm` files sit beside it.
    pub path: PathBuf,
    /// A PostgreSQL database (`postgres://user@host:port/name`) to use instead of the SQLite
    /// file at `path`; the settings of SQLite's file (`synchronous`, `busy_timeout`,
    /// `max_page_count`) then do not apply.
    pub database: Option<DatabaseUrl>,
    pub synchronous: Synchronous,
    /// How long a connection waits for a lock before giving up.
    pub busy_timeout: Duration,
    /// Read connections in the pool.
    pub n_readers: usize,
    pub batch_mode: BatchMode,
    /// Writing connections on PostgreSQL, each with a thread that commits its own groups (a
    /// lane): a session's writes always go to the same lane, in the order they were sent, and
    /// the lanes commit side by side, as several nodes would. SQLite has one writer: there this
    /// is always 1. Two by default (docs/design/several-nodes.md has the figures).
    pub writer_lanes: usize,
    /// At most this many jobs share one transaction.
    pub commit_batch_jobs_max: usize,
    /// Once a job has arrived, the writer keeps gathering while the next one follows within
    /// this gap, so that committers woken by the previous group join this one.
    pub gather_gap: Duration,
    /// The longest the writer gathers a group before it commits it.
    pub gather_max: Duration,
    /// How long the writer keeps polling for the next job before it parks its thread, and how
    /// long a caller's future polls for its outcome (yielding to its executor between polls)
    /// before it parks its task. Waking a parked thread costs tens of microseconds on a virtual
    /// machine, more than a commit: see docs/design/group-commit.md. A caller polls only while
    /// no other caller of the store is waiting (with others waiting, its executor is not about
    /// to park, and the polls would take its time from their replies).
    pub spin: Duration,
    /// Caps the database size in pages (`PRAGMA max_page_count`); for tests of a full disk.
    pub max_page_count: Option<u32>,
    /// No threads: every write commits alone and every read runs on the caller's thread, when
    /// it is asked for. For deterministic simulation, where one thread runs everything and
    /// the order of its tasks alone decides what happens; a service keeps this off, since it
    /// blocks the caller's executor on SQLite.
    pub inline: bool,
    /// Injects faults (simulation, tests): asked before each commit, and when it names a
    /// fault, the commit fails with it and the transaction is rolled back.
    pub faults: Option<FaultInjector>,
    /// What one account may hold; a write past a quota is refused, and nothing of it is
    /// written.
    pub quotas: Quotas,
}

/// What one account may hold. Each is checked in the transaction of the write that would pass
/// it, so two writes at once cannot both slip under it; a write that shrinks what the account
/// holds is never refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Quotas {
    /// Sessions an account may have when it creates one through the API. Every session counts
    /// (delegated children and successors too), but only a person's new session is refused:
    /// those a turn makes belong to work already under way.
    pub sessions_max: u64,
    /// Memory files (`~/memory/…`) an account may keep.
    pub memory_files_max: u64,
    /// Bytes (UTF-8) all of an account's memory files may hold together.
    pub memory_bytes_max: u64,
}

impl Default for Quotas {
    fn default() -> Self {
        Quotas {
            sessions_max: 10_000,
            memory_files_max: 1_000,
            memory_bytes_max: 16 * 1024 * 1024,
        }
    }
}

/// The URL of a PostgreSQL database. Shown without its password.
#[derive(Clone, PartialEq, Eq)]
pub struct DatabaseUrl(pub String);

impl std::fmt::Debug for DatabaseUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&redact_password(&self.0))
    }
}

/// `url` with the password of its user part (`user:password@`) replaced by `***`.
pub fn redact_password(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        // PostgreSQL's `key=value` form: the password is a key of its own.
        return url
            .split_whitespace()
            .map(|pair| {
                if pair.starts_with("password=") {
                    "password=***"
                } else {
                    pair
                }
            })
            .collect::<Vec<_>>()
            .join(" ");
    };
    let authority_end = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(authority_end);
    match authority.rsplit_once('@') {
        Some((user, host)) if user.contains(':') => {
            let name = user.split(':').next().unwrap_or_default();
            format!("{scheme}://{name}:***@{host}{tail}")
        }
        _ => url.to_owned(),
    }
}

/// Decides, commit by commit, whether the commit fails now, and how. See [`Config::faults`].
#[derive(Clone)]
pub struct FaultInjector(pub std::sync::Arc<dyn Fn() -> Option<Fault> + Send + Sync>);

/// How an injected fault fails a commit: as SQLite fails it on a full disk (`SQLITE_FULL`), or
/// on an I/O error (`SQLITE_IOERR`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    DiskFull,
    Io,
}

impl std::fmt::Debug for FaultInjector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("FaultInjector(..)")
    }
}

impl Config {
    /// The defaults for a database at `path`.
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Config {
            path: path.into(),
            database: None,
            synchronous: Synchronous::Normal,
            busy_timeout: Duration::from_secs(5),
            n_readers: 4,
            batch_mode: BatchMode::default(),
            writer_lanes: 2,
            commit_batch_jobs_max: 256,
            gather_gap: Duration::from_micros(3),
            gather_max: Duration::from_micros(200),
            spin: Duration::from_micros(100),
            max_page_count: None,
            inline: false,
            faults: None,
            quotas: Quotas::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::redact_password;

    #[test]
    fn a_database_url_is_shown_without_its_password() {
        assert_eq!(
            redact_password("postgres://seed:hunter2@db:5432/seed?sslmode=disable"),
            "postgres://seed:***@db:5432/seed?sslmode=disable"
        );
        assert_eq!(
            redact_password("postgres://seed@db/seed"),
            "postgres://seed@db/seed"
        );
        assert_eq!(
            redact_password("host=db user=seed password=hunter2"),
            "host=db user=seed password=***"
        );
    }
}
