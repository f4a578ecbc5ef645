//! The durable loop ("Pi Durable"): it commits every step of a turn before anything else sees it.
//!
//! This crate knows nothing of SQLite or of Seed's log. It works over [`DurableFs`]: a handful
//! of append-only line files per session, read in order and appended to atomically. The store
//! crate implements it over database rows; [`MemoryFs`] implements it in memory for tests.

pub mod fs;

pub use fs::{Append, DurableFs, FileName, MemoryFs, MemoryFsError};
