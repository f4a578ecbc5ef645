//! Notices between nodes over PostgreSQL's LISTEN/NOTIFY: what one node tells the others about
//! a session (events committed, text of a run in flight, a run finished, a session changed),
//! so that a subscriber on any node follows a turn that runs on another.
//!
//! Three parts:
//! - [`Notice`] and its wire form, pure and without IO: [`Notice::payloads`] encodes one,
//!   [`Notice::decode`] reads one back.
//! - [`notify_sql`]: the statements that send a notice, as plain data, for the writer to run
//!   inside the transaction whose commit the notice tells of. PostgreSQL delivers a
//!   notification at commit, and only if the transaction commits.
//! - [`Listener`]: a connection of its own that `LISTEN`s on a channel and yields what it hears,
//!   in the order PostgreSQL delivers it (the order of the commits), with a [`Gap`] wherever
//!   something may have been missed.
//!
//! The wire form is one line of fields separated by a space. It starts with the node that sent
//! it (its origin, so a node can tell its own notices from its peers'), then the notice's kind
//! and fields; the last field of a `delta`, a `changed`, an `account` and of the calls takes
//! the rest of the payload, spaces and newlines included:
//!
//! ```text
//! <origin> events <session key> <from seq> <to seq>
//! <origin> delta <session id> <run id> <offset bytes> <chunk>
//! <origin> finished <session id> <run id> <status>
//! <origin> changed <session id> <from seq>:<to seq> or - <reason>
//! <origin> deleted <session id> <account id>
//! <origin> account <account id> <reasons, one a line>
//! <origin> tool <session id> <run id> <seq> <JSON [call id, name, arguments]>
//! <origin> approval <session id> <run id> <JSON [call id, name, arguments]>
//! <origin> elicitation <session id> <run id> <JSON [call id, name, arguments, message, schema]>
//! <origin> missed
//! ```
//!
//! In the last field a backslash is written `\\` and a NUL `\0` (PostgreSQL's text cannot
//! hold a NUL). PostgreSQL refuses a payload of 8000 bytes or more, so a text delta whose
//! payload would be longer is split into several chunks, each cut on a char boundary and
//! carrying the byte offset it starts at in the run's streamed text: a receiver that finds an
//! offset that does not continue the chunk before has missed one, and repairs from the log.

use std::time::Duration;

mod listener;
mod notify;
#[cfg(test)]
mod tests;
mod wire;

pub use listener::{Gap, Heard, Listener};
pub use notify::{Batch, Notifier, Notify, Sent, Unsent, notify_sql};
pub use wire::{Malformed, Notice, TooLong};

/// The channel the nodes share. Every kind of notice goes on this one channel, so a receiver
/// hears them all in commit order (a run's last chunk of text before its end).
pub const CHANNEL: &str = "seed";

/// The longest payload PostgreSQL takes, in bytes: it refuses one of 8000 bytes or more.
pub const NOTIFY_PAYLOAD_BYTES_MAX: usize = 7999;

/// The longest channel name PostgreSQL takes, in bytes (a name is cut at 63).
pub const CHANNEL_BYTES_MAX: usize = 63;

/// What a [`Listener`] holds for its reader by default before it drops notices (and owes the
/// reader a [`Gap::FellBehind`]).
pub const NOTICES_BUFFERED_MAX_DEFAULT: usize = 4096;

/// The first wait before the listener reconnects; it doubles with every failed attempt.
const RECONNECT_BACKOFF_MIN: Duration = Duration::from_millis(100);

/// The longest wait between two attempts to reconnect.
const RECONNECT_BACKOFF_MAX: Duration = Duration::from_secs(5);

/// How long the listener's connection may sit idle before TCP asks whether the server is still
/// there. A listener is idle for long stretches, and a server gone without a word (a host lost,
/// a network cut) must turn into a [`Gap`] rather than silence: with the interval and the
/// count below, in about a minute.
const KEEPALIVE_IDLE: Duration = Duration::from_secs(30);

/// The time between two unanswered keepalive probes.
const KEEPALIVE_INTERVAL: Duration = Duration::from_secs(10);

/// Unanswered keepalive probes after which the connection counts as lost.
const KEEPALIVE_RETRIES: u32 = 3;

/// The longest origin (the sending node's id) a notice carries, in bytes.
pub const ORIGIN_BYTES_MAX: usize = 64;

/// How much of a malformed payload its error shows, in chars.
const MALFORMED_SHOWN_CHARS_MAX: usize = 80;
