//! Waiting for the writer or a reader without paying for a thread wake-up each time.
//!
//! A parked executor thread is woken by the other thread's futex call, and on a virtual machine
//! that costs tens of microseconds: more than a commit. [`SpinThenPark`] polls its channel for a
//! short window first, waking its own task after each miss so the executor polls it again after
//! the other ready tasks (it never blocks them), and only then registers to be woken.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use futures::channel::oneshot;

/// A one-shot reply, polled without parking for `spin` after it was asked for.
pub(crate) struct SpinThenPark<T> {
    receiver: oneshot::Receiver<T>,
    spin_until: Instant,
}

impl<T> SpinThenPark<T> {
    pub(crate) fn new(receiver: oneshot::Receiver<T>, spin: Duration) -> Self {
        SpinThenPark {
            receiver,
            spin_until: Instant::now() + spin,
        }
    }
}

impl<T> Future for SpinThenPark<T> {
    type Output = Result<T, oneshot::Canceled>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        if Instant::now() < self.spin_until {
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
            assert_eq!(
                futures::executor::block_on(SpinThenPark::new(receiver, spin)),
                Ok(7)
            );
            assert_eq!(thread.join().ok(), Some(Ok(())));
        }
        let (sender, receiver) = oneshot::channel::<u8>();
        drop(sender);
        assert!(futures::executor::block_on(SpinThenPark::new(receiver, Duration::ZERO)).is_err());
    }
}
