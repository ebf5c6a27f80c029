//! The host's clock: epoch milliseconds for `readAt` and timers on the same time line.

use std::future::Future;
use std::pin::Pin;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// A boxed sleep future.
pub type Sleep = Pin<Box<dyn Future<Output = ()> + Send>>;

/// Time for the host: `now_ms` goes into `readAt`, `sleep` arms the read timeout. Both must
/// follow one time line so that windows and timers agree.
pub trait HostClock: Send + Sync + 'static {
    /// Milliseconds since the Unix epoch.
    fn now_ms(&self) -> u64;
    /// A future that completes after `ms` milliseconds.
    fn sleep(&self, ms: u64) -> Sleep;
}

/// The production clock, also right for tests: epoch milliseconds at creation plus the
/// time tokio's clock has moved since, so a paused tokio clock (`start_paused`) moves both
/// `now_ms` and the timers together.
#[derive(Debug, Clone, Copy)]
pub struct TokioClock {
    base_ms: u64,
    start: tokio::time::Instant,
}

impl TokioClock {
    /// A clock reading the system's epoch time now.
    pub fn new() -> Self {
        let base_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        Self::starting_at(base_ms)
    }

    /// A clock reading `base_ms` now (for tests).
    pub fn starting_at(base_ms: u64) -> Self {
        TokioClock {
            base_ms,
            start: tokio::time::Instant::now(),
        }
    }
}

impl Default for TokioClock {
    fn default() -> Self {
        Self::new()
    }
}

impl HostClock for TokioClock {
    fn now_ms(&self) -> u64 {
        self.base_ms + self.start.elapsed().as_millis() as u64
    }

    fn sleep(&self, ms: u64) -> Sleep {
        Box::pin(tokio::time::sleep(Duration::from_millis(ms)))
    }
}

/// A [`HostClock`] as the work budgets' [`ui_core::Clock`]: every compile, evaluation and
/// value copy of the service measures its wall time on the injected clock, so a paused
/// tokio clock pauses the budgets too.
#[derive(Clone, Copy)]
pub struct BudgetClock<'a>(pub &'a dyn HostClock);

impl std::fmt::Debug for BudgetClock<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("BudgetClock")
            .field(&self.0.now_ms())
            .finish()
    }
}

impl ui_core::Clock for BudgetClock<'_> {
    fn now_ms(&self) -> f64 {
        self.0.now_ms() as f64
    }
}
