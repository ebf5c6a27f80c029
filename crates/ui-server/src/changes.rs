//! Where the host service meets the change feed: [`SyncChanges`] implements `ui-host`'s
//! [`ChangeIndex`] over a `ui-sync` [`SyncService`], so live readings follow change events
//! (`sync.md` §8). The adapter lives here, where both crates are already dependencies, so the
//! change feed itself depends on neither `ui-host` nor the compiler.

use std::time::Duration;

use async_trait::async_trait;
use ui_host::{ChangeIndex, ChangeScope};
use ui_sync::{Seq, SyncService, Token, parse_audience};

/// The change log as `ui-host` sees it: attach it with
/// [`UiQueries::attach_changes`](ui_host::UiQueries::attach_changes).
#[derive(Debug, Clone)]
pub struct SyncChanges(pub SyncService);

#[async_trait]
impl ChangeIndex for SyncChanges {
    fn epoch(&self) -> String {
        self.0.epoch().to_string()
    }

    fn head(&self) -> u64 {
        self.0.head().seq.0
    }

    fn scope(&self, source: &str, audience: &str, keys: &[String]) -> Option<ChangeScope> {
        let audience = parse_audience(audience)?;
        let (scope, _) = self.0.tokens(source, &audience, None);
        let keys = keys
            .iter()
            .filter_map(|k| self.0.tokens(source, &audience, Some(k)).1)
            .map(|t| t.to_hex())
            .collect();
        Some(ChangeScope {
            scope: scope.to_hex(),
            keys,
        })
    }

    fn relevant(&self, scope: &ChangeScope) -> u64 {
        let Some(token) = Token::from_hex(&scope.scope) else {
            return 0;
        };
        let keys: Vec<Token> = scope
            .keys
            .iter()
            .filter_map(|k| Token::from_hex(k))
            .collect();
        self.0.relevant(&token, &keys).0
    }

    async fn catch_up_to(&self, seq: u64, within_ms: u64) -> bool {
        self.0
            .catch_up_to(Seq(seq), Duration::from_millis(within_ms))
            .await
    }
}
