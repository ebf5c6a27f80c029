//! Where the host service meets the change feed: [`SyncChanges`] implements `ui-host`'s
//! [`ChangeIndex`] over a `ui-sync` [`SyncService`], so live readings follow change events
//! (`sync.md` §8). The adapter lives here, where both crates are already dependencies, so the
//! change feed itself depends on neither `ui-host` nor the compiler.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use ui_host::{ChangeIndex, ChangeScope};
use ui_sync::{Seq, SyncService, parse_audience};

/// How many scopes [`SyncChanges`] remembers; when full it forgets them all and starts
/// again (a page's readings name a handful, so the memo is refilled at once).
const MAX_MEMOIZED_SCOPES: usize = 1024;

/// The change log as `ui-host` sees it: attach it with
/// [`UiQueries::attach_changes`](ui_host::UiQueries::attach_changes).
///
/// It remembers the scope of each (source, audience, keys) it was asked for: the tokens are
/// keyed hashes (HMAC-SHA256 with the log's salt, one per key and one for the scope), which
/// once were about 40% of the time a cached `ui.query` spends in its handler
/// (`benches/NOTES.md`). A service's salt is fixed for its lifetime (a new salt comes only
/// with a new log, opened as a new service), so a remembered scope is what computing it
/// again would give. A scope's tokens stay bytes, so [`ChangeIndex::relevant`] looks them
/// up as they are.
#[derive(Debug, Clone)]
pub struct SyncChanges {
    service: SyncService,
    scopes: Arc<Mutex<HashMap<String, ChangeScope>>>,
}

impl SyncChanges {
    /// The change log of `service`.
    pub fn new(service: SyncService) -> Self {
        SyncChanges {
            service,
            scopes: Arc::default(),
        }
    }

    /// The tokens of `(source, audience, keys)`, computed.
    fn compute_scope(&self, source: &str, audience: &str, keys: &[String]) -> Option<ChangeScope> {
        let audience = parse_audience(audience)?;
        let (scope, _) = self.service.tokens(source, &audience, None);
        let keys = keys
            .iter()
            .filter_map(|k| self.service.tokens(source, &audience, Some(k)).1)
            .collect();
        Some(ChangeScope { scope, keys })
    }
}

/// The memo's key of `(source, audience, keys)`: each part after its length, so parts
/// never run into each other whatever they hold.
fn scope_key(source: &str, audience: &str, keys: &[String]) -> String {
    let mut out = String::with_capacity(
        source.len() + audience.len() + keys.iter().map(|k| k.len() + 8).sum::<usize>() + 16,
    );
    for part in [source, audience]
        .into_iter()
        .chain(keys.iter().map(String::as_str))
    {
        out.push_str(itoa::Buffer::new().format(part.len()));
        out.push(':');
        out.push_str(part);
    }
    out
}

#[async_trait]
impl ChangeIndex for SyncChanges {
    fn epoch(&self) -> String {
        self.service.epoch().to_string()
    }

    fn head(&self) -> u64 {
        self.service.head().seq.0
    }

    fn scope(&self, source: &str, audience: &str, keys: &[String]) -> Option<ChangeScope> {
        let key = scope_key(source, audience, keys);
        let lock = || self.scopes.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(scope) = lock().get(&key) {
            return Some(scope.clone());
        }
        let scope = self.compute_scope(source, audience, keys)?;
        let mut scopes = lock();
        if scopes.len() >= MAX_MEMOIZED_SCOPES {
            scopes.clear();
        }
        scopes.insert(key, scope.clone());
        Some(scope)
    }

    fn relevant(&self, scope: &ChangeScope) -> u64 {
        self.service.relevant(&scope.scope, &scope.keys).0
    }

    async fn catch_up_to(&self, seq: u64, within_ms: u64) -> bool {
        self.service
            .catch_up_to(Seq(seq), Duration::from_millis(within_ms))
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::scope_key;

    #[test]
    fn memo_keys_keep_their_parts_apart() {
        let keys = |k: &[&str]| k.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        assert_ne!(scope_key("a", "bc", &[]), scope_key("ab", "c", &[]));
        assert_ne!(
            scope_key("s", "a", &keys(&["k1", "k2"])),
            scope_key("s", "a", &keys(&["k1k2"]))
        );
        assert_ne!(
            scope_key("s", "a", &keys(&["1:x"])),
            scope_key("s", "a", &keys(&["1", "x"]))
        );
        assert_eq!(
            scope_key("ci.runs", "project:web", &keys(&["branch:main"])),
            "7:ci.runs11:project:web11:branch:main"
        );
        assert_eq!(scope_key("", "global", &[]), "0:6:global");
    }
}
