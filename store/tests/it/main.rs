//! seed-store's integration tests: one binary (`it`), not one per file; a module per suite.

mod api;
mod api_attachments;
mod api_memory;
mod api_runs;
mod claims;
mod common;
mod elicitations;
mod engines;
mod forks;
mod fsck;
mod nodes;
mod notices;
mod recalls;
mod run_ends;
mod schedules;
mod schema;
mod turn_view;
mod writer;
