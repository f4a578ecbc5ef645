//! The runs in flight on each queue, against its limit: counters the queue and the runtime
//! share ([`Slots`]).

use std::sync::atomic::{AtomicUsize, Ordering};

use seed_events::Queue;

/// The runs in flight on each queue, against its limit. The queue takes slots before it
/// claims runs, and the runtime takes one before a message's write, which then claims the
/// message's run at once when the session is free ([`crate::Runtime`]); a slot goes back when
/// its run is done, or when nothing was claimed with it.
#[derive(Debug)]
pub struct Slots {
    interactive: AtomicUsize,
    background: AtomicUsize,
    interactive_max: usize,
    background_max: usize,
    /// The slots of each queue a claim of the queue's holds while it runs
    /// ([`Slots::take_for_claim`]).
    interactive_claiming: AtomicUsize,
    background_claiming: AtomicUsize,
}

impl Slots {
    pub fn new(interactive_max: usize, background_max: usize) -> Slots {
        Slots {
            interactive: AtomicUsize::new(0),
            background: AtomicUsize::new(0),
            interactive_max,
            background_max,
            interactive_claiming: AtomicUsize::new(0),
            background_claiming: AtomicUsize::new(0),
        }
    }

    fn of(&self, queue: Queue) -> (&AtomicUsize, usize) {
        match queue {
            Queue::Interactive => (&self.interactive, self.interactive_max),
            Queue::Background => (&self.background, self.background_max),
        }
    }

    /// Takes up to `n` of `queue`'s free slots; returns how many it took.
    pub fn take(&self, queue: Queue, n: usize) -> usize {
        let (in_flight, max) = self.of(queue);
        let mut taken = 0;
        let _ = in_flight.fetch_update(Ordering::AcqRel, Ordering::Acquire, |now| {
            taken = n.min(max.saturating_sub(now));
            (taken > 0).then_some(now + taken)
        });
        taken
    }

    /// Gives `n` slots of `queue` back.
    pub fn give_back(&self, queue: Queue, n: usize) {
        let (in_flight, _) = self.of(queue);
        let _ = in_flight.fetch_update(Ordering::AcqRel, Ordering::Acquire, |now| {
            Some(now.saturating_sub(n))
        });
    }

    /// Counts a run in flight whatever the limit (one put back while it waits to be requeued).
    pub(crate) fn hold(&self, queue: Queue) {
        self.of(queue).0.fetch_add(1, Ordering::AcqRel);
    }

    fn claiming_of(&self, queue: Queue) -> &AtomicUsize {
        match queue {
            Queue::Interactive => &self.interactive_claiming,
            Queue::Background => &self.background_claiming,
        }
    }

    /// Takes every free slot of `queue` for a claim of the queue's runs; until the claim ends
    /// ([`Slots::end_claim`]) they still count as [`room`](Slots::room), being held for the
    /// queued runs. Returns how many it took.
    pub(crate) fn take_for_claim(&self, queue: Queue) -> usize {
        let taken = self.take(queue, usize::MAX);
        self.claiming_of(queue).fetch_add(taken, Ordering::AcqRel);
        taken
    }

    /// Ends a claim that took `n_taken` slots and started `n_used` runs: the rest go back.
    pub(crate) fn end_claim(&self, queue: Queue, n_taken: usize, n_used: usize) {
        let _ = self
            .claiming_of(queue)
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |now| {
                Some(now.saturating_sub(n_taken))
            });
        self.give_back(queue, n_taken.saturating_sub(n_used));
    }

    /// The runs `queue` has room for now besides those in flight: its free slots, and those a
    /// claim in flight holds for the queued runs it is claiming.
    pub fn room(&self, queue: Queue) -> usize {
        let (in_flight, max) = self.of(queue);
        let free = max.saturating_sub(in_flight.load(Ordering::Acquire));
        free + self.claiming_of(queue).load(Ordering::Acquire)
    }

    /// The runs in flight on `queue` now.
    pub fn in_flight(&self, queue: Queue) -> usize {
        self.of(queue).0.load(Ordering::Acquire)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_claims_slots_count_as_room_until_it_ends() {
        let slots = Slots::new(4, 1);
        assert_eq!(slots.take(Queue::Interactive, 1), 1);
        assert_eq!(slots.room(Queue::Interactive), 3);
        assert_eq!(slots.take_for_claim(Queue::Interactive), 3);
        assert_eq!(
            slots.take(Queue::Interactive, 1),
            0,
            "the claim holds the rest"
        );
        assert_eq!(
            slots.room(Queue::Interactive),
            3,
            "held for the queued runs"
        );
        slots.end_claim(Queue::Interactive, 3, 1);
        assert_eq!(
            slots.room(Queue::Interactive),
            2,
            "one run claimed, two back"
        );
        assert_eq!(slots.in_flight(Queue::Interactive), 2);
        assert_eq!(slots.room(Queue::Background), 1);
    }

    #[test]
    fn slots_are_taken_up_to_the_limit_and_given_back() {
        let slots = Slots::new(3, 1);
        assert_eq!(slots.take(Queue::Interactive, 2), 2);
        assert_eq!(
            slots.take(Queue::Interactive, usize::MAX),
            1,
            "only one left"
        );
        assert_eq!(slots.take(Queue::Interactive, 1), 0, "none left");
        assert_eq!(slots.take(Queue::Background, 5), 1, "each queue its own");
        slots.give_back(Queue::Interactive, 2);
        assert_eq!(slots.in_flight(Queue::Interactive), 1);
        assert_eq!(slots.take(Queue::Interactive, 1), 1);
        // A run put back while it waits to be requeued counts whatever the limit.
        slots.hold(Queue::Background);
        assert_eq!(slots.in_flight(Queue::Background), 2);
        slots.give_back(Queue::Background, 5);
        assert_eq!(slots.in_flight(Queue::Background), 0, "never below none");
    }
}
