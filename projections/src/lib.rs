//! Pure projections between Seed's log and the durable store, and what the model sees each turn.
//!
//! No IO: rows in, rows, entries and text out. Layout:
//! - `store_to_log`: the log events each store entry becomes; what to project again on open.
//! - `attachments`: what a person's attached files become in the model's input (images, text
//!   within a budget, named references), and the limits on them.
//! - `import`: which pending log events a turn imports into the store, and how (append, edit,
//!   rebuild), with the import mark.
//! - `blocks`: the per-turn state blocks (`<space>`, `<plan_state>`, `<context_usage>`, …) sent
//!   right behind a turn's input, rendered once per turn and never stored.
//! - `continuation`: continue_session's arguments checked, and the successor's projection.
//! - `fsck`: `seed fsck`'s pure checks — the log and the store in agreement, and a
//!   projection's excerpts byte for byte the events they cite.
//! - `schedules`: a wake-up's `<scheduled_wakeup>` notice, and the wake-ups `<session_status>`
//!   lists.
//! - `transcript`: `[seq] who: text` lines and the escaping of text handed back inside a frame.

pub mod attachments;
pub mod blocks;
pub mod continuation;
pub mod fork;
pub mod fsck;
pub mod import;
pub mod schedules;
pub mod store_to_log;
pub mod transcript;
