//! Stopping a turn from outside: a flag the harness checks before each request and races
//! against the response stream.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};

use futures::task::AtomicWaker;

/// A stop request for one turn. Clones share it.
#[derive(Debug, Clone, Default)]
pub struct StopSignal {
    inner: Arc<StopInner>,
}

#[derive(Debug, Default)]
struct StopInner {
    stopped: AtomicBool,
    waker: AtomicWaker,
}

impl StopSignal {
    pub fn new() -> StopSignal {
        StopSignal::default()
    }

    /// Asks the turn to stop: the response in flight is cut off and no new request is sent.
    pub fn stop(&self) {
        self.inner.stopped.store(true, Ordering::SeqCst);
        self.inner.waker.wake();
    }

    pub fn is_stopped(&self) -> bool {
        self.inner.stopped.load(Ordering::SeqCst)
    }

    /// Resolves once [`StopSignal::stop`] was called.
    pub fn stopped(&self) -> Stopped {
        Stopped {
            inner: Arc::clone(&self.inner),
        }
    }
}

/// The future of [`StopSignal::stopped`].
#[derive(Debug)]
pub struct Stopped {
    inner: Arc<StopInner>,
}

impl Future for Stopped {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.inner.stopped.load(Ordering::SeqCst) {
            return Poll::Ready(());
        }
        self.inner.waker.register(cx.waker());
        if self.inner.stopped.load(Ordering::SeqCst) {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    }
}
