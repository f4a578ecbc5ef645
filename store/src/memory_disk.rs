//! An in-memory database that outlives the stores opened on it, through SQLite's `memdb` VFS:
//! the simulation's second mode. A simulated crash drops a store with all its connections,
//! while the "disk" — this handle's connection — lives on for the next store to open.

use std::sync::atomic::{AtomicU64, Ordering};

use rusqlite::{Connection, OpenFlags};

use crate::{Config, Result};

/// Names the databases of one process apart.
static N_DISKS: AtomicU64 = AtomicU64::new(0);

/// A named in-memory database, kept alive while this handle lives.
pub struct MemoryDisk {
    path: String,
    _keep: Connection,
}

impl std::fmt::Debug for MemoryDisk {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryDisk")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

impl MemoryDisk {
    /// A new, empty in-memory database; `label` goes into its name, for messages.
    pub fn new(label: &str) -> Result<MemoryDisk> {
        let idx = N_DISKS.fetch_add(1, Ordering::SeqCst);
        let path = format!("file:/seed-{label}-{}-{idx}?vfs=memdb", std::process::id());
        let keep = Connection::open_with_flags(
            &path,
            OpenFlags::SQLITE_OPEN_READ_WRITE
                | OpenFlags::SQLITE_OPEN_CREATE
                | OpenFlags::SQLITE_OPEN_URI
                | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )?;
        Ok(MemoryDisk { path, _keep: keep })
    }

    /// The settings to open a store on this database (then `inline`, `faults`, … as wanted).
    pub fn config(&self) -> Config {
        Config::new(&self.path)
    }
}

/// Whether a store's path names an in-memory database, which keeps its journal in memory
/// instead of a WAL.
pub(crate) fn is_memory(config: &Config) -> bool {
    config
        .path
        .to_str()
        .is_some_and(|path| path.starts_with("file:") && path.contains("vfs=memdb"))
}
