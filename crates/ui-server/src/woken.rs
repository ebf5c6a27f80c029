//! [`Woken`]: a future polled only when its own waker fired.
//!
//! A task that waits on several things (`select!`) polls all of them whenever any one wakes
//! it. For a channel, such a poll takes the channel's waiter lock just to find nothing new;
//! with 10,000 open event streams woken at once by one change, those locks were a fair part
//! of the fan-out, contended between the worker threads. Wrapped in [`Woken`], a future is
//! polled only after its own waker fired (and on its first poll).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll, Waker};

use futures_util::task::AtomicWaker;

/// A future polled only after its own waker fired (and on its first poll): a stream
/// waiting on several things and woken by one does not poll the others, each of which
/// would take its channel's lock just to find nothing new.
pub(crate) struct Woken<F> {
    inner: F,
    flag: Arc<WakeFlag>,
    /// The waker handed to `inner`: sets the flag, then wakes the task.
    waker: Waker,
}

/// Whether a [`Woken`] future's waker fired, and the task to wake when it does.
struct WakeFlag {
    woken: AtomicBool,
    task: AtomicWaker,
}

impl std::task::Wake for WakeFlag {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.woken.store(true, Ordering::Release);
        self.task.wake();
    }
}

impl<F> Woken<F> {
    pub(crate) fn new(inner: F) -> Woken<F> {
        let flag = Arc::new(WakeFlag {
            woken: AtomicBool::new(true),
            task: AtomicWaker::new(),
        });
        Woken {
            inner,
            waker: Waker::from(flag.clone()),
            flag,
        }
    }

    /// The future itself, to replace it: the next poll polls it.
    pub(crate) fn inner_mut(&mut self) -> &mut F {
        self.flag.woken.store(true, Ordering::Release);
        &mut self.inner
    }
}

impl<F: Future + Unpin> Future for Woken<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = self.get_mut();
        // Registered before the flag is read: a wake after the read wakes this poll's task.
        this.flag.task.register(cx.waker());
        if !this.flag.woken.swap(false, Ordering::AcqRel) {
            return Poll::Pending;
        }
        Pin::new(&mut this.inner).poll(&mut Context::from_waker(&this.waker))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicUsize;
    use std::task::Wake;

    use super::*;

    /// Counts its polls, keeps the last waker, and is ready once `ready` is set.
    #[derive(Default)]
    struct Probe {
        polls: AtomicUsize,
        ready: AtomicBool,
        waker: std::sync::Mutex<Option<Waker>>,
    }

    struct Polled(Arc<Probe>);

    impl Future for Polled {
        type Output = usize;

        fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<usize> {
            let polls = self.0.polls.fetch_add(1, Ordering::SeqCst) + 1;
            *self.0.waker.lock().unwrap() = Some(cx.waker().clone());
            if self.0.ready.load(Ordering::SeqCst) {
                Poll::Ready(polls)
            } else {
                Poll::Pending
            }
        }
    }

    /// A task waker that counts its wakes.
    #[derive(Default)]
    struct Task(AtomicUsize);

    impl Wake for Task {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    #[test]
    fn the_inner_future_is_polled_first_and_then_only_after_its_own_wake() {
        let probe = Arc::new(Probe::default());
        let task = Arc::new(Task::default());
        let waker = Waker::from(task.clone());
        let mut cx = Context::from_waker(&waker);
        let mut woken = Woken::new(Polled(probe.clone()));

        assert!(Pin::new(&mut woken).poll(&mut cx).is_pending());
        assert_eq!(probe.polls.load(Ordering::SeqCst), 1);
        // Woken for something else: the inner future is left alone.
        for _ in 0..3 {
            assert!(Pin::new(&mut woken).poll(&mut cx).is_pending());
        }
        assert_eq!(probe.polls.load(Ordering::SeqCst), 1);

        // Its own waker fires: the task is woken, and the next poll reaches it.
        probe.ready.store(true, Ordering::SeqCst);
        probe.waker.lock().unwrap().take().unwrap().wake();
        assert_eq!(task.0.load(Ordering::SeqCst), 1);
        assert_eq!(Pin::new(&mut woken).poll(&mut cx), Poll::Ready(2));
    }

    #[test]
    fn a_replaced_inner_future_is_polled_at_once() {
        let first = Arc::new(Probe::default());
        let second = Arc::new(Probe::default());
        second.ready.store(true, Ordering::SeqCst);
        let waker = Waker::from(Arc::new(Task::default()));
        let mut cx = Context::from_waker(&waker);
        let mut woken = Woken::new(Polled(first.clone()));
        assert!(Pin::new(&mut woken).poll(&mut cx).is_pending());
        *woken.inner_mut() = Polled(second.clone());
        assert_eq!(Pin::new(&mut woken).poll(&mut cx), Poll::Ready(1));
        assert_eq!(first.polls.load(Ordering::SeqCst), 1);
    }
}
