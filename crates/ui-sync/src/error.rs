//! [`SyncError`].

/// A failure of the change feed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SyncError {
    /// Input that does not parse or breaks a rule (a cursor, a draft).
    #[error("invalid: {0}")]
    Invalid(String),
    /// A non-internal source recorded without an audience.
    #[error("the source `{0}` needs an audience")]
    NoAudience(String),
    /// The log could not be read or written.
    #[error("log: {0}")]
    Store(String),
    /// The appender is gone (the service shut down).
    #[error("the change feed is closed")]
    Closed,
    /// No catch-up slot freed within the wait (`catchUpConcurrency`, `catchUpWait`); the
    /// caller answers 503 with `Retry-After`.
    #[error("too many catch-up reads at once")]
    Busy,
}
