//! seed-durable's integration tests: one binary (`it`), not one per file; a module per suite.

mod common;
mod properties;
mod reconcile;
mod recovery;
mod turns;
