//! Seed as a service: the HTTP and WebSocket API with signed requests, and the `seed` binary.
//!
//! Layout:
//! - `signing` (pure): RFC 9421 signature bases, `Signature-Input` / `Signature` /
//!   `Content-Digest`, the parameter checks, ed25519 `verify_strict`.
//! - `input` (pure): JSON bodies parsed with the failing field named, field limits, paging.
//! - `keys`: account keys on disk (mode 0600); an account id is derived from its public key.
//! - `data_dir`: the data dir's permissions — created private, refused when others may write.
//! - `auth`: who is asking — a signed request or a bearer token; one-time login codes.
//! - `api`: the REST routes under `/v1` and the OpenAPI document; `ws`: `/v1/subscribe`, and
//!   `subscribers`: its sockets by account, each with a bounded queue.
//! - `error`: the API's errors as statuses and JSON bodies.
//! - `guard` (decisions pure): the Host check, the headers every response carries, and the
//!   warning for plain HTTP off loopback.
//! - `traces`: `--otlp-endpoint` — the OTLP/HTTP exporter, the HTTP request span (continuing
//!   a caller's `traceparent`) and the span ids the runtime keeps with its runs.
//! - `metrics`, `model`: `/metrics`; the scripted model and the provider meter.
//! - `ui`: the web UI's files (`server/ui/`), embedded and served at `/` with a strict CSP.
//! - `serve`: `seed serve` — data dir, store, runtime, HTTP, drain on SIGTERM.
//! - `bus_bridge`: on a shared PostgreSQL database, the bus between nodes — each node's
//!   notifications sent to the others as notices, and theirs published on its own bus.
//! - `client`, `cli`, `chat`: the signing client, the `seed` command line, and `seed chat`.
//! - `sim`: `seed sim`, the actor simulation of `seed_sim` over many seeds.
//!
//! Invariant: a signed request's nonce is taken in the same transaction as its writes, and a
//! refused request writes nothing.

pub mod api;
pub mod auth;
pub mod bus_bridge;
pub mod chat;
pub mod cli;
pub mod client;
pub mod data_dir;
pub mod error;
pub mod guard;
pub mod head_timeout;
pub mod input;
pub mod keys;
pub mod limits;
pub mod metrics;
pub mod model;
pub mod resume;
pub mod serve;
pub mod signing;
pub mod sim;
pub mod subscribers;
pub mod traces;
pub mod ui;
pub mod ws;
