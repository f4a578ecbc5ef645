//! seed-server's integration tests: one binary (`it`), not one per file; a module per suite.

mod accounts;
mod approvals;
mod attachments;
mod commit_by_commit;
mod common;
mod database;
mod durability;
mod elicitations;
mod failures_shown;
mod hardening_bodies;
mod hardening_files;
mod hardening_requests;
mod hardening_ws;
mod kill9;
mod kill_nodes;
mod mcp;
mod migrate;
mod nodes;
mod nodes_bus;
mod quotas;
mod refusals;
mod resume;
mod retry;
mod schedules;
mod service;
mod sim_cli;
