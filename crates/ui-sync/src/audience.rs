//! Audience names as hosts write them (`global`, `kind:id`): a source's change feed names
//! the audience of a reading this way, and the host turns it into tokens with
//! [`SyncService::tokens`](crate::SyncService::tokens).

use crate::types::{Audience, AudienceKind};

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
