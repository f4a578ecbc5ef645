//! Typed ids. Sessions, runs, accounts and continuations are uuids (v7 in the service, so they
//! sort by creation time); log events are the database's integer ids.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use uuid::Uuid;

macro_rules! uuid_id {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
        #[serde(transparent)]
        pub struct $name(pub Uuid);

        impl $name {
            /// A new time-ordered id (uuid v7). Only the imperative shell calls this; pure code
            /// takes ids as arguments.
            pub fn new_v7() -> Self {
                Self(Uuid::now_v7())
            }

            /// An id from 128 bits, for deterministic sources such as the simulator's seed.
            pub fn from_u128(bits: u128) -> Self {
                Self(Uuid::from_u128(bits))
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                self.0.hyphenated().fmt(f)
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}({})", stringify!($name), self.0.hyphenated())
            }
        }

        impl FromStr for $name {
            type Err = uuid::Error;
            fn from_str(text: &str) -> Result<Self, Self::Err> {
                Uuid::parse_str(text).map(Self)
            }
        }
    };
}

uuid_id!(
    /// One conversation: its log, its store and its runs.
    SessionId
);
uuid_id!(
    /// One queued or running turn of a session.
    RunId
);
uuid_id!(
    /// An account: the owner of sessions, memory files and a signing key.
    AccountId
);
uuid_id!(
    /// One continuation edge, from a predecessor session to its successor.
    ContinuationId
);

/// A log event's id: the database's integer row id, unique across sessions and increasing in
/// commit order.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct EventId(pub i64);

impl fmt::Display for EventId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl fmt::Debug for EventId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "EventId({})", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_round_trip_through_text() {
        let id = SessionId::from_u128(0x0123_4567_89ab_cdef_0123_4567_89ab_cdef);
        let text = id.to_string();
        assert_eq!(text, "01234567-89ab-cdef-0123-456789abcdef");
        assert_eq!(text.parse::<SessionId>().ok(), Some(id));
        assert!("not-a-uuid".parse::<SessionId>().is_err());
    }

    #[test]
    fn v7_ids_sort_by_creation() {
        let first = RunId::new_v7();
        let second = RunId::new_v7();
        assert!(first < second);
    }
}
