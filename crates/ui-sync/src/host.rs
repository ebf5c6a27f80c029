//! The change log as `ui-host` sees it: [`SyncService`] implements
//! [`ui_host::ChangeIndex`], so live readings follow change events (`sync.md` §8).

use std::time::Duration;

use async_trait::async_trait;
use ui_host::{ChangeIndex, ChangeScope};

use crate::service::SyncService;
use crate::types::{Audience, AudienceKind, Seq, Token};

/// Parses `global` or `kind:id` (`user`, `org`, `project`).
pub fn parse_audience(text: &str) -> Option<Audience> {
    if text == "global" {
        return Some(Audience::global());
    }
    let (kind, id) = text.split_once(':')?;
    let kind = AudienceKind::parse(kind).filter(|k| *k != AudienceKind::Global)?;
    (!id.is_empty()).then(|| Audience {
        kind,
        id: id.into(),
    })
}

#[async_trait]
impl ChangeIndex for SyncService {
    fn epoch(&self) -> String {
        SyncService::epoch(self).to_string()
    }

    fn head(&self) -> u64 {
        SyncService::head(self).seq.0
    }

    fn scope(&self, source: &str, audience: &str, keys: &[String]) -> Option<ChangeScope> {
        let audience = parse_audience(audience)?;
        let (scope, _) = self.tokens(source, &audience, None);
        let keys = keys
            .iter()
            .filter_map(|k| self.tokens(source, &audience, Some(k)).1)
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
        SyncService::relevant(self, &token, &keys).0
    }

    async fn catch_up_to(&self, seq: u64, within_ms: u64) -> bool {
        SyncService::catch_up_to(self, Seq(seq), Duration::from_millis(within_ms)).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn audiences_parse() {
        assert_eq!(parse_audience("global"), Some(Audience::global()));
        assert_eq!(
            parse_audience("project:web"),
            Some(Audience::project("web"))
        );
        assert_eq!(parse_audience("user:u1"), Some(Audience::user("u1")));
        assert_eq!(parse_audience("team:x"), None);
        assert_eq!(parse_audience("project:"), None);
        assert_eq!(parse_audience("global:x"), None);
    }
}
