//! Live readings that follow change events (`sync.md` §8): what a source declares about
//! its change feed ([`ChangeFeed`]) and what the host asks of the change log
//! ([`ChangeIndex`]; `ui-server`'s `SyncChanges` implements it over `ui-sync`'s
//! `SyncService`).

use async_trait::async_trait;
use ui_core::{Record, Token, Value};

/// A source's change feed (`sync.md` §8.1): which audience and keys a reading depends on.
///
/// Each method must be a function of its arguments alone: the service remembers a
/// reading's audience, keys and completeness per source, arguments and access, and asks
/// again only when it has forgotten them.
pub trait ChangeFeed: Send + Sync + 'static {
    /// The audience of the data read with `args` and `access`, as `kind:id`
    /// (`project:web`, `user:u1`, `org:o1`) or `global`; `None` when the reading cannot
    /// follow changes.
    fn audience(&self, args: &Record, access: &Value) -> Option<String>;

    /// The raw keys the reading depends on; empty means the whole source.
    fn keys(&self, _args: &Record) -> Vec<String> {
        Vec::new()
    }

    /// Whether every change of the data is recorded as an event (`Complete`).
    fn complete(&self) -> bool {
        false
    }
}

/// The opaque tokens of one reading's dependencies. Kept as bytes: the service asks the
/// index about them on every `ui.query` of a feed source ([`ChangeIndex::relevant`]), and
/// writes them as hex only into a new reading's [`ReadingSync`](crate::ReadingSync).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChangeScope {
    /// The scope token.
    pub scope: Token,
    /// The key tokens; empty = the whole scope.
    pub keys: Vec<Token>,
}

/// The change log as the host sees it.
#[async_trait]
pub trait ChangeIndex: Send + Sync + 'static {
    /// The log's epoch.
    fn epoch(&self) -> String;
    /// The highest seq this process has tailed.
    fn head(&self) -> u64;
    /// The tokens of `(source, audience, keys)`; `None` for an audience that does not
    /// parse. The same triple gets the same tokens for the index's lifetime (the service
    /// remembers them).
    fn scope(&self, source: &str, audience: &str, keys: &[String]) -> Option<ChangeScope>;
    /// The newest seq of a change in `scope` (any of its keys, or the whole scope).
    fn relevant(&self, scope: &ChangeScope) -> u64;
    /// Tails the log until its head reaches `seq`, waiting at most `within_ms`; whether it
    /// got there.
    async fn catch_up_to(&self, seq: u64, within_ms: u64) -> bool;
}
