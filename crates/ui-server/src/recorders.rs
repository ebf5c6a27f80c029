//! Recorders: services that record change events over HTTP (`POST /ui/changes`,
//! `sync.md` §4.5), declared in `sources.toml`:
//!
//! ```toml
//! [recorders.ci]
//! token_env = "CI_RECORDER_TOKEN"      # or token = "…": the bearer token, at least 16 bytes
//! sources = ["ci.runs"]                 # the sources it may record
//! ```
//!
//! `token_env` must not name a `UIBLOCKS_*` variable: those names are reserved for
//! settings, and one that is not a setting stops the start.
//!
//! A request carries `Authorization: Bearer <token>`; the token is compared in constant time
//! with each recorder's. Each recorder may send 50 requests a second (a bucket of 50).

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex, PoisonError};

use serde::Deserialize;
use ui_sync::{Audience, AudienceKind, ChangeDraft, RequestSource, is_source_name};

/// Requests a second one recorder may send (also the burst).
pub(crate) const RECORDER_RATE: u32 = 50;
/// Changes one request may carry.
pub(crate) const MAX_CHANGES: usize = 100;
/// Shortest token.
const MIN_TOKEN_BYTES: usize = 16;

/// `[recorders.NAME]` as written.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RecorderDecl {
    #[serde(default)]
    token: Option<String>,
    #[serde(default)]
    token_env: Option<String>,
    sources: Vec<String>,
}

/// A checked recorder.
pub(crate) struct Recorder {
    name: String,
    token: String,
    sources: BTreeSet<String>,
    /// Tokens left and when they were counted (the server's clock, ms).
    bucket: Mutex<(f64, Option<u64>)>,
}

impl std::fmt::Debug for Recorder {
    /// Never the token.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recorder")
            .field("name", &self.name)
            .field("sources", &self.sources)
            .finish()
    }
}

impl Recorder {
    /// Checks a declaration against the declared source names; errors name the key.
    pub(crate) fn check(
        name: &str,
        decl: RecorderDecl,
        declared: &BTreeSet<String>,
    ) -> Result<Arc<Recorder>, String> {
        let key = format!("recorders.{name}");
        let token = match (decl.token, decl.token_env) {
            (Some(t), None) => t,
            (None, Some(var)) => std::env::var(&var).map_err(|_| {
                format!("{key}.token_env: the environment variable `{var}` is not set")
            })?,
            _ => {
                return Err(format!(
                    "{key}: give exactly one of `token` and `token_env`"
                ));
            }
        };
        if token.len() < MIN_TOKEN_BYTES {
            return Err(format!(
                "{key}: the token must have at least {MIN_TOKEN_BYTES} bytes"
            ));
        }
        if decl.sources.is_empty() {
            return Err(format!("{key}.sources: name at least one source"));
        }
        for source in &decl.sources {
            if !declared.contains(source) {
                return Err(format!(
                    "{key}.sources: `{source}` is not a source of this file"
                ));
            }
        }
        Ok(Arc::new(Recorder {
            name: name.to_owned(),
            token,
            sources: decl.sources.into_iter().collect(),
            bucket: Mutex::new((f64::from(RECORDER_RATE), None)),
        }))
    }

    /// The recorder's name.
    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    /// Whether `token` is this recorder's (constant time in the token's length).
    fn matches(&self, token: &str) -> bool {
        let (a, b) = (self.token.as_bytes(), token.as_bytes());
        let mut diff = u8::from(a.len() != b.len());
        for (i, x) in a.iter().enumerate() {
            diff |= x ^ b.get(i).copied().unwrap_or(0);
        }
        diff == 0
    }

    /// Takes one request from the bucket at `now_ms` (the server's clock); `false` when
    /// it is empty.
    pub(crate) fn admit(&self, now_ms: u64) -> bool {
        let mut bucket = self.bucket.lock().unwrap_or_else(PoisonError::into_inner);
        let rate = f64::from(RECORDER_RATE);
        #[allow(clippy::cast_precision_loss)]
        let elapsed = bucket.1.map_or(0, |then| now_ms.saturating_sub(then)) as f64 / 1000.0;
        let refill = elapsed * rate;
        bucket.0 = (bucket.0 + refill).min(rate);
        bucket.1 = Some(now_ms);
        if bucket.0 >= 1.0 {
            bucket.0 -= 1.0;
            true
        } else {
            false
        }
    }
}

/// The recorder whose token `token` is, if any (every recorder is compared).
pub(crate) fn find<'a>(recorders: &'a [Arc<Recorder>], token: &str) -> Option<&'a Arc<Recorder>> {
    let mut found = None;
    for r in recorders {
        if r.matches(token) && found.is_none() {
            found = Some(r);
        }
    }
    found
}

/// One change of `POST /ui/changes`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ChangeItem {
    source: String,
    audience: AudienceItem,
    #[serde(default)]
    key: Option<String>,
    #[serde(default)]
    rs: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct AudienceItem {
    kind: String,
    id: String,
}

/// The body (`sync.md` §4.5): one change, or an array of up to [`MAX_CHANGES`] of them.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub(crate) enum ChangesBody {
    /// One change.
    One(ChangeItem),
    /// Up to [`MAX_CHANGES`].
    Many(Vec<ChangeItem>),
}

/// Why a body was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Refused {
    /// A source the recorder may not record (`403`).
    NotAllowed(String),
    /// Anything else (`400`).
    Invalid(String),
}

/// The drafts of a body, checked against what `recorder` may record.
pub(crate) fn drafts(recorder: &Recorder, body: ChangesBody) -> Result<Vec<ChangeDraft>, Refused> {
    let items = match body {
        ChangesBody::One(item) => vec![item],
        ChangesBody::Many(changes) => changes,
    };
    if items.is_empty() || items.len() > MAX_CHANGES {
        return Err(Refused::Invalid(format!("send 1 to {MAX_CHANGES} changes")));
    }
    let mut out = Vec::with_capacity(items.len());
    for (i, item) in items.into_iter().enumerate() {
        if !is_source_name(&item.source) {
            return Err(Refused::Invalid(format!(
                "[{i}].source `{}` is not a source name",
                item.source
            )));
        }
        if !recorder.sources.contains(&item.source) {
            return Err(Refused::NotAllowed(format!(
                "the recorder `{}` may not record `{}`",
                recorder.name, item.source
            )));
        }
        let kind = match AudienceKind::parse(&item.audience.kind) {
            Some(k @ (AudienceKind::User | AudienceKind::Org | AudienceKind::Project))
                if !item.audience.id.is_empty() =>
            {
                k
            }
            _ => {
                return Err(Refused::Invalid(format!(
                    "[{i}].audience must be a user, org or project with an id"
                )));
            }
        };
        let rs = match item.rs {
            None => None,
            Some(rs) => Some(
                RequestSource::parse(&rs)
                    .ok_or_else(|| Refused::Invalid(format!("[{i}].rs `{rs}` is not a writer")))?,
            ),
        };
        out.push(ChangeDraft {
            source: item.source,
            audience: Some(Audience {
                kind,
                id: item.audience.id.into(),
            }),
            key: item.key,
            rs,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn recorder() -> Arc<Recorder> {
        let declared: BTreeSet<String> = ["ci.runs".to_owned()].into();
        let decl = RecorderDecl {
            token: Some("0123456789abcdef-token".into()),
            token_env: None,
            sources: vec!["ci.runs".into()],
        };
        Recorder::check("ci", decl, &declared).unwrap()
    }

    #[test]
    fn declarations_are_checked() {
        let declared: BTreeSet<String> = ["ci.runs".to_owned()].into();
        let decl = |token: &str, sources: &[&str]| RecorderDecl {
            token: Some(token.into()),
            token_env: None,
            sources: sources.iter().map(|s| (*s).to_owned()).collect(),
        };
        let e = Recorder::check("ci", decl("short", &["ci.runs"]), &declared).unwrap_err();
        assert!(e.starts_with("recorders.ci:"), "{e}");
        let e = Recorder::check("ci", decl("0123456789abcdef", &["x"]), &declared).unwrap_err();
        assert!(e.starts_with("recorders.ci.sources:"), "{e}");
        assert!(
            format!("{:?}", recorder()).contains("ci")
                && !format!("{:?}", recorder()).contains("token")
        );
    }

    #[test]
    fn tokens_buckets_and_bodies() {
        let r = recorder();
        let all = [Arc::clone(&r)];
        assert!(find(&all, "0123456789abcdef-token").is_some());
        assert!(find(&all, "0123456789abcdef-toke").is_none());
        assert!(find(&all, "0123456789abcdef-tokens").is_none());
        let t0 = 1_000_000;
        for _ in 0..RECORDER_RATE {
            assert!(r.admit(t0));
        }
        assert!(!r.admit(t0));
        assert!(r.admit(t0 + 25));
        assert!(!r.admit(t0 + 25));
        let body: ChangesBody = serde_json::from_str(
            r#"[{"source": "ci.runs", "audience": {"kind": "project", "id": "web"}, "key": "branch:main"}]"#,
        )
        .unwrap();
        let d = drafts(&r, body).unwrap();
        assert_eq!(d[0].audience.as_ref().unwrap().to_string(), "project:web");
        let other: ChangesBody = serde_json::from_str(
            r#"{"source": "other", "audience": {"kind": "project", "id": "web"}}"#,
        )
        .unwrap();
        assert!(matches!(drafts(&r, other), Err(Refused::NotAllowed(_))));
        let global: ChangesBody = serde_json::from_str(
            r#"{"source": "ci.runs", "audience": {"kind": "global", "id": ""}}"#,
        )
        .unwrap();
        assert!(matches!(drafts(&r, global), Err(Refused::Invalid(_))));
        assert!(matches!(
            drafts(&r, ChangesBody::Many(Vec::new())),
            Err(Refused::Invalid(_))
        ));
    }
}
