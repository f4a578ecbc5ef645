//! Shared helpers for Seed's integration suites and the bench harness.

pub mod bench;
pub mod continuation_bench;
pub mod mcp_bench;
pub mod projections_bench;
pub mod providers_bench;
pub mod reopen_bench;
pub mod runtime_bench;
pub mod schedules_bench;
pub mod service_bench;
pub mod sse_server;
pub mod turn_loop;
pub mod wire_fixtures;
