//! seed-projections' integration tests: one binary (`it`), not one per file; a module per suite.

mod common;
mod continuation;
mod continuation_recall;
mod import;
mod import_reads;
mod log_and_store;
mod transcript_properties;
