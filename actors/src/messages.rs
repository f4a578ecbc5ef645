//! The messages between the runs queue and the session actors (and the runtime, which sends
//! to both): a session holds the queue as a `Recipient` of [`RunDone`], so the session module
//! does not name the queue's actor, and the queue starts sessions' actors with [`StartRun`].

use actix::prelude::*;
use seed_events::{Queue, RunId};
use seed_store::RunRow;

/// Looks for runs to start.
#[derive(Message)]
#[rtype(result = "()")]
#[derive(Debug)]
pub struct Wake;

/// A run's session actor is done with it.
#[derive(Message)]
#[rtype(result = "()")]
#[derive(Debug)]
pub struct RunDone {
    pub queue: Queue,
    pub run_id: RunId,
    /// It could not run now: put it back in the queue.
    pub requeue: bool,
}

/// Spawns a session's actor (a continuation's successor) and looks for runs to start.
#[derive(Message)]
#[rtype(result = "()")]
#[derive(Debug)]
pub struct Activate {
    pub session_id: seed_events::SessionId,
}

/// Starts a run its message's write claimed at once, with a slot taken for it
/// ([`Slots::take`](crate::slots::Slots::take)).
#[derive(Message)]
#[rtype(result = "()")]
#[derive(Debug)]
pub struct StartClaimed {
    pub run: RunRow,
}

/// Runs `run` now.
#[derive(Message)]
#[rtype(result = "()")]
pub struct StartRun {
    pub run: RunRow,
}

/// Cuts off the turn in flight, if any.
#[derive(Message)]
#[rtype(result = "bool")]
#[derive(Debug)]
pub struct StopSession;

impl std::fmt::Debug for StartRun {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StartRun").finish_non_exhaustive()
    }
}
