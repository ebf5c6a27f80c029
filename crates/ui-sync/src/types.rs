//! The change feed's vocabulary (`sync.md` §2, §3.1, §11.2): positions, epochs, cursors,
//! audiences, opaque tokens, request sources, drafts, log rows and wire events.

use std::collections::HashSet;
use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};
use sha2::Sha256;

pub use ui_core::Token;

use crate::error::SyncError;

/// Seqs stay below 2⁵³ so that JSON numbers are exact in browsers.
pub const MAX_SEQ: u64 = (1 << 53) - 1;

/// A position in the log: strictly increasing in commit order.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize,
)]
#[serde(transparent)]
pub struct Seq(pub u64);

impl fmt::Display for Seq {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

const BASE32: &[u8; 32] = b"abcdefghijklmnopqrstuvwxyz234567";

/// Random bytes from the operating system.
pub(crate) fn random_bytes<const N: usize>() -> [u8; N] {
    let mut out = [0u8; N];
    // The OS source only fails on exotic platforms; fall back to time-based bytes there,
    // and say so: a salt made this way is guessable.
    if let Err(e) = getrandom::fill(&mut out) {
        tracing::error!(
            target: "ui_sync",
            error = %e,
            "the operating system gave no random bytes; using time-based bytes instead"
        );
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        for (i, b) in out.iter_mut().enumerate() {
            *b = (t >> ((i % 16) * 8)) as u8 ^ (i as u8).wrapping_mul(151);
        }
    }
    out
}

/// `n` random lowercase base32 characters.
pub(crate) fn random_base32(n: usize) -> String {
    let bytes: [u8; 32] = random_bytes();
    bytes
        .iter()
        .take(n)
        .map(|b| BASE32[(b & 31) as usize] as char)
        .collect()
}

/// One incarnation of the log: 12 lowercase base32 characters (`[a-z2-7]`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Epoch(Arc<str>);

impl Epoch {
    /// A new random epoch.
    pub fn random() -> Self {
        Epoch(random_base32(12).into())
    }

    /// The epoch's text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl FromStr for Epoch {
    type Err = SyncError;
    fn from_str(s: &str) -> Result<Self, SyncError> {
        if s.len() == 12 && s.bytes().all(|b| BASE32.contains(&b)) {
            Ok(Epoch(s.into()))
        } else {
            Err(SyncError::Invalid(format!("`{s}` is not an epoch")))
        }
    }
}

impl TryFrom<String> for Epoch {
    type Error = SyncError;
    fn try_from(s: String) -> Result<Self, SyncError> {
        s.parse()
    }
}

impl From<Epoch> for String {
    fn from(e: Epoch) -> String {
        e.0.to_string()
    }
}

impl fmt::Display for Epoch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// `<epoch>.<seq>`: everything visible to the holder up to and including `seq` is known.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Cursor {
    /// The log incarnation.
    pub epoch: Epoch,
    /// The position.
    pub seq: Seq,
}

impl fmt::Display for Cursor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.epoch, self.seq)
    }
}

impl FromStr for Cursor {
    type Err = SyncError;
    fn from_str(s: &str) -> Result<Self, SyncError> {
        let bad = || SyncError::Invalid(format!("`{s}` is not a cursor"));
        let (epoch, seq) = s.split_once('.').ok_or_else(bad)?;
        if seq.is_empty() || !seq.bytes().all(|b| b.is_ascii_digit()) || seq.len() > 16 {
            return Err(bad());
        }
        let seq: u64 = seq.parse().map_err(|_| bad())?;
        if seq > MAX_SEQ {
            return Err(bad());
        }
        Ok(Cursor {
            epoch: epoch.parse().map_err(|_| bad())?,
            seq: Seq(seq),
        })
    }
}

impl Serialize for Cursor {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// Who may learn of an event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AudienceKind {
    /// One principal.
    User,
    /// Members of an organisation.
    Org,
    /// Members of a project.
    Project,
    /// Everyone signed in (internal sources only).
    Global,
}

impl AudienceKind {
    /// The stored name: `user`, `org`, `project`, `global`.
    pub fn as_str(self) -> &'static str {
        match self {
            AudienceKind::User => "user",
            AudienceKind::Org => "org",
            AudienceKind::Project => "project",
            AudienceKind::Global => "global",
        }
    }

    /// The kind named `s`.
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "user" => AudienceKind::User,
            "org" => AudienceKind::Org,
            "project" => AudienceKind::Project,
            "global" => AudienceKind::Global,
            _ => return None,
        })
    }
}

/// An audience: a kind and an id (empty for `global`). Server-side only.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Audience {
    /// The kind.
    pub kind: AudienceKind,
    /// The id (`""` for `global`).
    pub id: Arc<str>,
}

impl Audience {
    /// `user:<id>`.
    pub fn user(id: &str) -> Self {
        Audience {
            kind: AudienceKind::User,
            id: id.into(),
        }
    }

    /// `org:<id>`.
    pub fn org(id: &str) -> Self {
        Audience {
            kind: AudienceKind::Org,
            id: id.into(),
        }
    }

    /// `project:<id>`.
    pub fn project(id: &str) -> Self {
        Audience {
            kind: AudienceKind::Project,
            id: id.into(),
        }
    }

    /// `global`.
    pub fn global() -> Self {
        Audience {
            kind: AudienceKind::Global,
            id: "".into(),
        }
    }
}

impl fmt::Display for Audience {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.kind == AudienceKind::Global {
            f.write_str("global")
        } else {
            write!(f, "{}:{}", self.kind.as_str(), self.id)
        }
    }
}

/// The audiences a connection or request may see: always includes `global`, at most
/// `audienceEntries` (1,000) entries.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct AudienceSet(HashSet<Audience>);

impl AudienceSet {
    /// The set of `audiences` plus `global`, cut to `max` entries (users and orgs first,
    /// then projects in the order given — pass the most recently used first).
    pub fn new(audiences: impl IntoIterator<Item = Audience>, max: usize) -> Self {
        let mut set = HashSet::new();
        set.insert(Audience::global());
        let mut projects = Vec::new();
        for a in audiences {
            if a.kind == AudienceKind::Project {
                projects.push(a);
            } else if set.len() < max {
                set.insert(a);
            }
        }
        for p in projects {
            if set.len() >= max {
                break;
            }
            set.insert(p);
        }
        AudienceSet(set)
    }

    /// Whether an event of `audience` may be delivered.
    pub fn contains(&self, audience: &Audience) -> bool {
        self.0.contains(audience)
    }

    /// The audiences.
    pub fn iter(&self) -> impl Iterator<Item = &Audience> {
        self.0.iter()
    }

    /// The number of audiences.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether the set is empty (never: it holds `global`).
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// The per-log secret that salts tokens (32 random bytes, created with the epoch).
#[derive(Clone, PartialEq, Eq)]
pub struct Salt(pub [u8; 32]);

impl fmt::Debug for Salt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Salt(…)")
    }
}

impl Salt {
    /// A new random salt.
    pub fn random() -> Self {
        Salt(random_bytes())
    }

    fn token(&self, parts: &[&[u8]]) -> Token {
        let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(&self.0).expect("any key length");
        for (i, part) in parts.iter().enumerate() {
            if i > 0 {
                mac.update(&[0]);
            }
            mac.update(part);
        }
        let full = mac.finalize().into_bytes();
        let mut out = [0u8; 16];
        out.copy_from_slice(&full[..16]);
        Token(out)
    }

    /// The scope token of `(source, audience)`.
    pub fn scope(&self, source: &str, audience: &Audience) -> Token {
        self.token(&[source.as_bytes(), audience.to_string().as_bytes()])
    }

    /// The key token of `(source, audience, raw key)`.
    pub fn key(&self, source: &str, audience: &Audience, raw_key: &str) -> Token {
        self.token(&[
            source.as_bytes(),
            audience.to_string().as_bytes(),
            raw_key.as_bytes(),
        ])
    }
}

/// Whether `s` is a valid source name: `[a-z0-9._-]`, 1–128 bytes.
pub fn is_source_name(s: &str) -> bool {
    (1..=128).contains(&s.len())
        && s.bytes().all(|b| {
            b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'.' | b'_' | b'-')
        })
}

/// A validated request source: 1–64 characters of `[A-Za-z0-9._:-]`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(transparent)]
pub struct RequestSource(Arc<str>);

impl RequestSource {
    /// The request source `s`, or `None` when it is invalid (treated as absent).
    pub fn parse(s: &str) -> Option<Self> {
        ((1..=64).contains(&s.len())
            && s.bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b':' | b'-')))
        .then(|| RequestSource(s.into()))
    }

    /// A new page id: `p-` and 26 random base32 characters.
    pub fn new_page_id() -> Self {
        RequestSource(format!("p-{}", random_base32(26)).into())
    }

    /// The text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// Whether a row is a change or a system reset.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Op {
    /// Something in the scope (maybe the key) changed.
    Change,
    /// Every client must re-read what it shows.
    Reset,
}

impl Op {
    /// `change` or `reset`.
    pub fn as_str(self) -> &'static str {
        match self {
            Op::Change => "change",
            Op::Reset => "reset",
        }
    }
}

/// What a writer records: which source, for whom, which key, who wrote.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ChangeDraft {
    /// The source name.
    pub source: String,
    /// The audience of the changed data (required unless the source is internal).
    pub audience: Option<Audience>,
    /// The raw key inside the source; `None` = the whole source.
    pub key: Option<String>,
    /// The writer.
    pub rs: Option<RequestSource>,
}

/// A row to append (after coalescing; tokens computed).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewRow {
    /// The source name.
    pub source: String,
    /// The audience.
    pub audience: Audience,
    /// The scope token.
    pub scope: Token,
    /// The key token (`None`: whole source).
    pub key: Option<Token>,
    /// The writer, when known.
    pub rs: Option<RequestSource>,
    /// Change or reset.
    pub op: Op,
    /// How many writes the row stands for.
    pub n: u32,
    /// Writer's wall clock (ms since the Unix epoch).
    pub at_ms: i64,
}

/// A row of the log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogRow {
    /// Its position.
    pub seq: Seq,
    /// The row as appended.
    pub row: NewRow,
}

/// An event on the wire: `{seq, source, scope, key, rs, at, n}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[cfg_attr(feature = "schema", schemars(deny_unknown_fields))]
pub struct WireEvent {
    /// Its position.
    pub seq: u64,
    /// The source name.
    pub source: String,
    /// The scope token (hex).
    pub scope: String,
    /// The key token (hex), or null for the whole source.
    pub key: Option<String>,
    /// The writer, or null when unknown or merged.
    pub rs: Option<String>,
    /// The writer's wall clock (ms).
    pub at: i64,
    /// How many writes it stands for.
    pub n: u32,
}

impl From<&LogRow> for WireEvent {
    fn from(row: &LogRow) -> Self {
        WireEvent {
            seq: row.seq.0,
            source: row.row.source.clone(),
            scope: row.row.scope.to_hex(),
            key: row.row.key.map(|k| k.to_hex()),
            rs: row.row.rs.as_ref().map(|r| r.as_str().to_owned()),
            at: row.row.at_ms,
            n: row.row.n,
        }
    }
}

/// Why a client must re-read what it shows instead of applying events.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum ResetReason {
    /// The cursor did not parse.
    Invalid,
    /// The cursor is of another log incarnation.
    Epoch,
    /// The cursor is ahead of the log (restored from an older backup).
    Ahead,
    /// The cursor is older than what retention kept.
    Expired,
    /// More visible events than a catch-up returns.
    TooFarBehind,
    /// The server recorded a reset (overflow).
    Server,
}

impl ResetReason {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            ResetReason::Invalid => "invalid",
            ResetReason::Epoch => "epoch",
            ResetReason::Ahead => "ahead",
            ResetReason::Expired => "expired",
            ResetReason::TooFarBehind => "too-far-behind",
            ResetReason::Server => "server",
        }
    }
}

/// Rows the tailer read in one go, in seq order: what the hub broadcasts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Batch {
    /// The seq of the first row.
    pub first: Seq,
    /// The seq of the last row (the head after this batch).
    pub last: Seq,
    /// The rows, by seq.
    pub rows: Vec<LogRow>,
    /// When the tailer published it to the hub (`None` for a batch made by hand). A stream
    /// that takes the batch later opens its flush window from this moment, so every stream
    /// of the process flushes one change at the same instant however long the wake-ups of
    /// the others took.
    pub published: Option<tokio::time::Instant>,
}

/// The log's identity and bounds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogMeta {
    /// The incarnation.
    pub epoch: Epoch,
    /// The token salt.
    pub salt: Salt,
}

/// The answer of a catch-up read (`read_after`, §3.8).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReadAfter {
    /// The events after the cursor (collapsed), and the snapshot head as the new cursor.
    Events {
        /// The snapshot head.
        cursor: Cursor,
        /// Collapsed events, by seq.
        events: Vec<WireEvent>,
    },
    /// The client must re-read what it shows.
    Reset {
        /// The snapshot head.
        cursor: Cursor,
        /// Why.
        reason: ResetReason,
    },
}

impl ReadAfter {
    /// The cursor the answer moves the client to.
    pub fn cursor(&self) -> &Cursor {
        match self {
            ReadAfter::Events { cursor, .. } | ReadAfter::Reset { cursor, .. } => cursor,
        }
    }
}

/// Collapses rows by (source, scope, key): the largest seq, `n` summed, `rs` kept only if
/// every row shares it, the latest `at`; sorted by seq (§3.8 step 8, §4.2 step 4).
pub fn collapse<'a>(rows: impl IntoIterator<Item = &'a LogRow>) -> Vec<WireEvent> {
    let mut groups: std::collections::HashMap<(String, Token, Option<Token>), WireEvent> =
        std::collections::HashMap::new();
    let mut mixed: HashSet<(String, Token, Option<Token>)> = HashSet::new();
    for row in rows {
        let k = (row.row.source.clone(), row.row.scope, row.row.key);
        let event = WireEvent::from(row);
        match groups.get_mut(&k) {
            None => {
                groups.insert(k, event);
            }
            Some(e) => {
                if e.rs != event.rs {
                    mixed.insert(k.clone());
                }
                e.seq = e.seq.max(event.seq);
                e.n = e.n.saturating_add(event.n);
                e.at = e.at.max(event.at);
            }
        }
    }
    let mut out: Vec<WireEvent> = groups
        .into_iter()
        .map(|(k, mut e)| {
            if mixed.contains(&k) {
                e.rs = None;
            }
            e
        })
        .collect();
    out.sort_by_key(|e| e.seq);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_round_trip_and_refuse_junk() {
        let c: Cursor = "mq3x7kd2pa4r.1042".parse().unwrap();
        assert_eq!(c.seq, Seq(1042));
        assert_eq!(c.to_string(), "mq3x7kd2pa4r.1042");
        for bad in [
            "",
            "x.1",
            "mq3x7kd2pa4r.",
            "mq3x7kd2pa4r.-1",
            "MQ3X7KD2PA4R.1",
            "mq3x7kd2pa4r.9007199254740992",
            "mq3x7kd2pa41.1",
        ] {
            assert!(bad.parse::<Cursor>().is_err(), "{bad}");
        }
        assert_eq!(Epoch::random().as_str().len(), 12);
    }

    #[test]
    fn tokens_depend_on_salt_audience_and_key() {
        let salt = Salt([7; 32]);
        let a = salt.scope("ci.runs", &Audience::project("p1"));
        let b = salt.scope("ci.runs", &Audience::project("p2"));
        assert_ne!(a, b);
        assert_eq!(a.to_hex().len(), 32);
        assert_eq!(Token::from_hex(&a.to_hex()), Some(a));
        let k = salt.key("ci.runs", &Audience::project("p1"), "branch:main");
        assert_ne!(k, a);
        assert_ne!(Salt([8; 32]).scope("ci.runs", &Audience::project("p1")), a);
    }

    #[test]
    fn request_sources_and_names() {
        assert!(RequestSource::parse("agent:c1").is_some());
        assert!(RequestSource::parse("").is_none());
        assert!(RequestSource::parse(&"a".repeat(65)).is_none());
        assert!(RequestSource::parse("p 1").is_none());
        let id = RequestSource::new_page_id();
        assert_eq!(id.as_str().len(), 28);
        assert!(is_source_name("ci.runs"));
        assert!(!is_source_name("CI"));
    }

    #[test]
    fn audience_sets_always_hold_global_and_stay_bounded() {
        let set = AudienceSet::new((0..2000).map(|i| Audience::project(&i.to_string())), 1000);
        assert_eq!(set.len(), 1000);
        assert!(set.contains(&Audience::global()));
        assert!(set.contains(&Audience::project("0")));
        assert!(!set.contains(&Audience::project("1999")));
    }
}
