//! Typed ids. Sessions, runs, accounts and continuations are uuids (v7 in the service, so they
//! sort by creation time); log events are the database's integer ids.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use uuid::Uuid;

thread_local! {
    static SEEDED: std::cell::RefCell<Option<SeededIds>> = const { std::cell::RefCell::new(None) };
}

/// Ids drawn from a seed: still uuid v7 in shape and still sorted by creation (the timestamp
/// field counts up), the rest from a splitmix64 stream.
#[derive(Debug)]
struct SeededIds {
    state: u64,
    n_issued: u64,
}

impl SeededIds {
    fn next(&mut self) -> Uuid {
        self.n_issued += 1;
        let mut random = || {
            self.state = self.state.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = self.state;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^ (z >> 31)
        };
        let bits = (u128::from(self.n_issued & 0xffff_ffff_ffff) << 80)
            | (u128::from(random()) << 16)
            | u128::from(random() & 0xffff);
        uuid::Builder::from_u128(bits)
            .with_version(uuid::Version::SortRand)
            .with_variant(uuid::Variant::RFC4122)
            .into_uuid()
    }
}

fn next_uuid() -> Uuid {
    SEEDED
        .with(|seeded| seeded.borrow_mut().as_mut().map(SeededIds::next))
        .unwrap_or_else(Uuid::now_v7)
}

/// While the returned guard lives, every new id made on this thread comes from `seed`: the same
/// seed gives the same ids in the same order. For deterministic simulation, where one thread
/// runs everything.
pub fn seed_ids(seed: u64) -> SeededIdsGuard {
    let previous = SEEDED.with(|seeded| {
        seeded.borrow_mut().replace(SeededIds {
            state: seed,
            n_issued: 0,
        })
    });
    SeededIdsGuard { previous }
}

/// Puts back the thread's earlier id source when dropped. See [`seed_ids`].
#[must_use = "ids are seeded only while the guard lives"]
#[derive(Debug)]
pub struct SeededIdsGuard {
    previous: Option<SeededIds>,
}

impl Drop for SeededIdsGuard {
    fn drop(&mut self) {
        let previous = self.previous.take();
        SEEDED.with(|seeded| *seeded.borrow_mut() = previous);
    }
}

macro_rules! uuid_id {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
        #[serde(transparent)]
        pub struct $name(pub Uuid);

        impl $name {
            /// A new time-ordered id (uuid v7). Only the imperative shell calls this; pure code
            /// takes ids as arguments. On a thread under [`seed_ids`], the id comes from the
            /// seed instead of the clock.
            pub fn new_v7() -> Self {
                Self(next_uuid())
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
uuid_id!(
    /// One wake-up a session scheduled for itself.
    ScheduleId
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

    #[test]
    fn seeded_ids_repeat_for_a_seed_sort_by_creation_and_end_with_their_guard() {
        let draw = |seed| {
            let _guard = seed_ids(seed);
            (0..5).map(|_| SessionId::new_v7()).collect::<Vec<_>>()
        };
        let first = draw(7);
        assert_eq!(first, draw(7));
        assert_ne!(first, draw(8));
        assert!(first.windows(2).all(|pair| pair[0] < pair[1]));
        assert!(first.iter().all(|id| id.0.get_version_num() == 7));
        // Outside the guard, ids come from the clock again.
        let clocked = SessionId::new_v7();
        assert!(!first.contains(&clocked));
        assert!(
            clocked > first[4],
            "clock ids are far past the seeded counter"
        );
    }
}
