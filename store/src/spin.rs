//! Waiting for the writer or a reader without paying for a thread wake-up each time.
//!
//! A parked executor thread is woken by the other thread's futex call, and on a virtual machine
//! that costs tens of microseconds: more than a commit. [`SpinThenPark`] polls its channel for a
//! short window first, waking its own task after each miss so the executor polls it again after
//! the other ready tasks (it never blocks them), and only then registers to be woken.
//!
//! A caller spins only while it is the store's one waiting caller. With others waiting, its
//! executor has their replies to run when they come, so it is not about to park; spinning would
//! only poll the waiting task over and over (an actor's task polls its whole context each
//! time), taking the executor's time from the replies that have come.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use futures::channel::oneshot;

/// How a store's callers wait for the replies of its writer and readers: one per store, shared
/// by both, counting the callers waiting now.
#[derive(Debug)]
pub(crate) struct Replies {
    /// How long a caller polls before parking, while it waits alone.
    spin: Duration,
    waiting: AtomicUsize,
}

impl Replies {
    pub(crate) fn new(spin: Duration) -> Replies {
        Replies {
            spin,
            waiting: AtomicUsize::new(0),
        }
    }

    /// Waits for `receiver`'s reply: polled for the spin window while no other caller waits.
    pub(crate) fn wait<T>(&self, receiver: oneshot::Receiver<T>) -> SpinThenPark<'_, T> {
        self.waiting.fetch_add(1, Ordering::Relaxed);
        SpinThenPark {
            receiver,
            spin_until: Instant::now() + self.spin,
            replies: self,
        }
    }

    /// Whether at most one caller waits (the one asking, once it counts itself).
    pub(crate) fn alone(&self) -> bool {
        self.waiting.load(Ordering::Relaxed) <= 1
    }
}

/// A one-shot reply, polled without parking for a while after it was asked for, while no
/// other caller of the store waits ([`Replies::wait`]).
pub(crate) struct SpinThenPark<'a, T> {
    receiver: oneshot::Receiver<T>,
    spin_until: Instant,
    replies: &'a Replies,
}

impl<T> Drop for SpinThenPark<'_, T> {
    fn drop(&mut self) {
        self.replies.waiting.fetch_sub(1, Ordering::Relaxed);
    }
}

impl<T> Future for SpinThenPark<'_, T> {
    type Output = Result<T, oneshot::Canceled>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        if self.replies.alone() && Instant::now() < self.spin_until {
            return match self.receiver.try_recv() {
                Ok(Some(value)) => Poll::Ready(Ok(value)),
                Ok(None) => {
                    cx.waker().wake_by_ref();
                    Poll::Pending
                }
                Err(canceled) => Poll::Ready(Err(canceled)),
            };
        }
        Pin::new(&mut self.receiver).poll(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reply_arrives_whether_it_comes_while_spinning_or_after() {
        for spin in [Duration::ZERO, Duration::from_secs(60)] {
            let (sender, receiver) = oneshot::channel();
            let thread = std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(5));
                sender.send(7)
            });
            let replies = Replies::new(spin);
            assert_eq!(futures::executor::block_on(replies.wait(receiver)), Ok(7));
            assert_eq!(thread.join().ok(), Some(Ok(())));
            assert_eq!(replies.waiting.load(Ordering::Relaxed), 0);
        }
        let (sender, receiver) = oneshot::channel::<u8>();
        drop(sender);
        let replies = Replies::new(Duration::ZERO);
        assert!(futures::executor::block_on(replies.wait(receiver)).is_err());
    }

    /// Counts the times its task was woken.
    struct CountingWaker(AtomicUsize);

    impl futures::task::ArcWake for CountingWaker {
        fn wake_by_ref(arc_self: &std::sync::Arc<Self>) {
            arc_self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    #[test]
    fn a_waiter_spins_only_while_no_other_caller_waits() {
        let wakes = std::sync::Arc::new(CountingWaker(AtomicUsize::new(0)));
        let waker = futures::task::waker(std::sync::Arc::clone(&wakes));
        let mut cx = Context::from_waker(&waker);
        let replies = Replies::new(Duration::from_secs(60));

        // Alone, it polls again at once: it woke its own task.
        let (_sender_a, receiver_a) = oneshot::channel::<u8>();
        let mut first = replies.wait(receiver_a);
        assert!(Pin::new(&mut first).poll(&mut cx).is_pending());
        assert_eq!(wakes.0.load(Ordering::SeqCst), 1);

        // With a second caller waiting, both park: neither wakes itself, and each is woken
        // by its reply.
        let (sender_b, receiver_b) = oneshot::channel::<u8>();
        let mut second = replies.wait(receiver_b);
        assert!(Pin::new(&mut first).poll(&mut cx).is_pending());
        assert!(Pin::new(&mut second).poll(&mut cx).is_pending());
        assert_eq!(wakes.0.load(Ordering::SeqCst), 1);
        assert_eq!(sender_b.send(9), Ok(()));
        assert_eq!(wakes.0.load(Ordering::SeqCst), 2);
        assert_eq!(Pin::new(&mut second).poll(&mut cx), Poll::Ready(Ok(9)));

        // Once the second is done, the first is alone again and spins.
        drop(second);
        assert!(Pin::new(&mut first).poll(&mut cx).is_pending());
        assert_eq!(wakes.0.load(Ordering::SeqCst), 3);
        drop(first);
        assert_eq!(replies.waiting.load(Ordering::Relaxed), 0);
    }
}
