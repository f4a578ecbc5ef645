//! seed-tests' suites (integration, crash, simulation, tidy): one test binary (`it`), not one per
//! file; a module per suite.

mod anthropic_cache;
mod crash;
mod kept;
mod provider_faults;
mod providers_turn;
mod providers_wire;
mod sim;
mod sim_approvals;
mod tidy;
