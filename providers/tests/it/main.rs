//! seed-providers' integration tests: one binary (`it`), not one per file; a module per suite.

mod scripted;
mod wire_requests;
