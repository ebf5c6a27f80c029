//! Every limit of the spec, as one documented value per group.
//!
//! Each group has a `DEFAULT` with the spec's numbers, a getter per limit, and overrides that
//! are validated when the group is built: every limit is a positive safe integer
//! (1 ..= 2⁵³−1), anything else is refused with [`Code::InvalidLimits`]. No other crate
//! hard-codes one of these numbers; code receives the group and reads it.
//!
//! Facts fixed by catalog version 1 (schema caps such as 1,000 list items) are constants at
//! the end of this module: changing them would change the catalog, not a deployment.

use std::fmt;

use serde::ser::{Serialize, SerializeMap, Serializer};

use crate::code::Code;
use crate::diag::Failure;
use crate::value::Value;

/// The largest safe integer of JavaScript, 2⁵³−1: the upper bound of every limit.
pub const MAX_SAFE_INTEGER: u64 = 9_007_199_254_740_991;

/// A limit override that is refused: an unknown key, or a value that is not a positive safe
/// integer. Its code is always [`Code::InvalidLimits`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid limits: {group}.{key} {reason}")]
pub struct LimitsError {
    /// The group's spec name (`UI_LIMITS`, …).
    pub group: &'static str,
    /// The offending key as written.
    pub key: String,
    /// What is wrong with it.
    pub reason: &'static str,
}

impl LimitsError {
    /// Always [`Code::InvalidLimits`].
    pub fn code(&self) -> Code {
        Code::InvalidLimits
    }
}

impl From<LimitsError> for Failure {
    fn from(error: LimitsError) -> Self {
        Failure::new(Code::InvalidLimits, error.to_string())
    }
}

fn check_limit(group: &'static str, key: &str, value: &Value) -> Result<u64, LimitsError> {
    let err = |reason| LimitsError {
        group,
        key: key.to_owned(),
        reason,
    };
    let x = value.as_f64().ok_or_else(|| err("is not a number"))?;
    if x.fract() != 0.0 || x < 1.0 || x > MAX_SAFE_INTEGER as f64 {
        return Err(err("is not a positive safe integer"));
    }
    Ok(x as u64)
}

macro_rules! limit_group {
    (
        $(#[doc = $doc:literal])*
        pub struct $name:ident = $spec:literal {
            $( $(#[doc = $fdoc:literal])* $field:ident : $key:literal = $default:expr, )*
        }
    ) => {
        $(#[doc = $doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub struct $name {
            $( $field: u64, )*
        }

        impl $name {
            /// The group's name in the spec.
            pub const NAME: &'static str = $spec;

            /// The wire keys of the group, in spec order.
            pub const KEYS: &'static [&'static str] = &[$($key),*];

            /// The spec's values.
            pub const DEFAULT: $name = $name { $( $field: $default, )* };

            $(
                $(#[doc = $fdoc])*
                #[inline]
                pub const fn $field(&self) -> u64 {
                    self.$field
                }
            )*

            /// The value of the limit named `key` (its wire key), if the group has it.
            pub fn get(&self, key: &str) -> Option<u64> {
                match key {
                    $( $key => Some(self.$field), )*
                    _ => None,
                }
            }

            /// A copy with the limit named `key` (its wire key) set to `value`.
            ///
            /// # Errors
            /// [`LimitsError`] for an unknown key or a value outside 1 ..= 2⁵³−1.
            pub fn with(mut self, key: &str, value: u64) -> Result<$name, LimitsError> {
                if value == 0 || value > MAX_SAFE_INTEGER {
                    return Err(LimitsError {
                        group: $spec,
                        key: key.to_owned(),
                        reason: "is not a positive safe integer",
                    });
                }
                match key {
                    $( $key => self.$field = value, )*
                    _ => {
                        return Err(LimitsError {
                            group: $spec,
                            key: key.to_owned(),
                            reason: "is not a limit of this group",
                        })
                    }
                }
                Ok(self)
            }

            /// A copy with a partial override applied: `overrides` is a record of wire keys
            /// to numbers (`{"steps": 1000}`); `null` means no override.
            ///
            /// # Errors
            /// [`LimitsError`] when `overrides` is not a record, names an unknown key, or
            /// holds a value that is not a positive safe integer.
            pub fn with_overrides(self, overrides: &Value) -> Result<$name, LimitsError> {
                let record = match overrides {
                    Value::Null => return Ok(self),
                    Value::Record(record) => record,
                    _ => {
                        return Err(LimitsError {
                            group: $spec,
                            key: String::new(),
                            reason: "overrides are not a record",
                        })
                    }
                };
                let mut out = self;
                for (key, value) in record.iter() {
                    out = out.with(key, check_limit($spec, key, value)?)?;
                }
                Ok(out)
            }
        }

        impl Default for $name {
            fn default() -> Self {
                Self::DEFAULT
            }
        }

        impl Serialize for $name {
            fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                let mut map = serializer.serialize_map(Some(Self::KEYS.len()))?;
                $( map.serialize_entry($key, &self.$field)?; )*
                map.end()
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str($spec)?;
                f.write_str(" {")?;
                let mut first = true;
                $(
                    if !first { f.write_str(",")?; }
                    first = false;
                    write!(f, " {}: {}", $key, self.$field)?;
                )*
                let _ = first;
                f.write_str(" }")
            }
        }
    };
}

limit_group! {
    /// `UI_LIMITS`: the work budget of one block compile, one evaluation and one value copy
    /// (`language.md` §19.1).
    pub struct UiLimits = "UI_LIMITS" {
        /// Maximum block source length, in UTF-16 units; also the whole-block fallback
        /// truncation. Default 65,536.
        characters: "characters" = 65_536,
        /// Maximum nesting (open tags, expression depth, value nesting, tree depth); a check
        /// fails when the depth exceeds it. Default 32.
        depth: "depth" = 32,
        /// Syntax plus expression nodes during a compile; view nodes during an evaluation.
        /// Default 512.
        nodes: "nodes" = 512,
        /// Diagnostics kept per block and per evaluation. Default 20.
        diagnostics: "diagnostics" = 20,
        /// Units of work. Default 20,000.
        steps: "steps" = 20_000,
        /// Items and keys copied, literal items, helper loops, `Each` reservations.
        /// Default 2,000.
        iterations: "iterations" = 2_000,
        /// Maximum length of any string value and of any expression source, in UTF-16
        /// units. Default 16,384.
        string_length: "stringLength" = 16_384,
        /// Wall time since the budget was created, in milliseconds. Default 30.
        milliseconds: "milliseconds" = 30,
    }
}

limit_group! {
    /// `UI_REPLY_LIMITS`: what one reply may hold (`language.md` §17.2).
    pub struct ReplyLimits = "UI_REPLY_LIMITS" {
        /// UI blocks per reply; the 17th fence stops the scan. Default 16.
        blocks: "blocks" = 16,
        /// Total UI source per reply, in UTF-16 units. Default 262,144.
        characters: "characters" = 262_144,
        /// Total compiled nodes per reply. Default 2,048.
        nodes: "nodes" = 2_048,
        /// Cumulative compile time per reply call, in milliseconds. Default 60.
        milliseconds: "milliseconds" = 60,
        /// Fallback of a block refused by these limits: the fence source truncated to this
        /// many UTF-16 units. Default 4,096.
        refused_fallback: "refusedFallback" = 4_096,
        /// Fallback of a node whose own text is blank: its source, truncated to this many
        /// UTF-16 units. Default 1,024.
        node_source_fallback: "nodeSourceFallback" = 1_024,
        /// Preview throttle of a streaming reply (`UI_STREAM_INTERVAL_MS`), in
        /// milliseconds. Default 250.
        stream_interval: "streamInterval" = 250,
    }
}

limit_group! {
    /// `UI_HOST_LIMITS`: what a host serves per block (`language.md` §19.4).
    pub struct UiHostLimits = "UI_HOST_LIMITS" {
        /// Queries per block; the 9th fails the whole block. Default 8.
        queries: "queries" = 8,
        /// Link targets a host resolves per block. Default 64.
        links: "links" = 64,
        /// One read per query and arguments per window: cache freshness and failed-attempt
        /// window, in milliseconds. Default 10,000.
        refresh_milliseconds: "refreshMilliseconds" = 10_000,
    }
}

limit_group! {
    /// The host's serving limits (`host.md` §16) beyond `UI_HOST_LIMITS`.
    pub struct HostLimits = "HOST_LIMITS" {
        /// Minimum gap between two reads of one query (any arguments), in milliseconds.
        /// Default 250.
        read_gap: "readGapMilliseconds" = 250,
        /// The page re-reads an input after it rested this long, in milliseconds.
        /// Default 300.
        input_rest: "inputRestMilliseconds" = 300,
        /// Reads at once per chat. Default 2.
        chat_read_slots: "chatReadSlots" = 2,
        /// Reads at once over the whole host. Default 16.
        read_slots: "readSlots" = 16,
        /// Read timeout in milliseconds; the source is aborted. Default 8,000.
        read_timeout: "readTimeoutMilliseconds" = 8_000,
        /// Largest validated result, in bytes of compact JSON (more fails). Default 65,536.
        result_bytes: "resultBytes" = 65_536,
        /// Largest captured access, in bytes of compact JSON. Default 32,768.
        access_bytes: "accessBytes" = 32_768,
        /// Frozen snapshot per item over all its blocks, in bytes. Default 131,072.
        snapshot_bytes: "snapshotBytes" = 131_072,
        /// Frozen fallback, in UTF-16 units. Default 8,192.
        frozen_fallback: "frozenFallback" = 8_192,
        /// Frozen fallback when the snapshot is over size, in UTF-16 units. Default 2,048.
        oversize_fallback: "oversizeFallback" = 2_048,
        /// Longest reason text, in UTF-16 units. Default 240.
        reason: "reason" = 240,
        /// Cache entries across the host. Default 128.
        cache_entries: "cacheEntries" = 128,
        /// Attempt entries across the host. Default 256.
        attempt_entries: "attemptEntries" = 256,
        /// Longest `itemId`, `blockId` or `choiceId`, in UTF-16 units. Default 256.
        payload_id: "payloadId" = 256,
        /// Longest revision, query name, value key, read key or read id, in UTF-16 units.
        /// Default 128.
        payload_key: "payloadKey" = 128,
        /// Longest File or Diff link path, in UTF-16 units. Default 4,096.
        link_path: "linkPath" = 4_096,
        /// Longest Node link id, in UTF-16 units. Default 256.
        link_node_id: "linkNodeId" = 256,
        /// Diagnostic messages fed back to the agent. Default 6.
        agent_diagnostics: "agentDiagnostics" = 6,
    }
}

limit_group! {
    /// `SyncConfig`: the change feed's limits (`sync.md` §9.1). Durations are milliseconds.
    pub struct SyncLimits = "SYNC_LIMITS" {
        /// Appender coalescing window. Default 50 ms.
        appender_window: "appenderWindow" = 50,
        /// Drafts queued before the appender applies backpressure. Default 10,000.
        appender_queue: "appenderQueue" = 10_000,
        /// Key pairs kept before a write overflows to whole-source rows. Default 10,000.
        overflow_pairs: "overflowPairs" = 10_000,
        /// Rows per tailer batch. Default 1,000.
        tailer_batch: "tailerBatch" = 1_000,
        /// SQLite `data_version` check interval. Default 100 ms.
        sqlite_check: "sqliteCheck" = 100,
        /// PostgreSQL tail tick. Default 2,000 ms.
        postgres_tick: "postgresTick" = 2_000,
        /// First LISTEN reconnect delay (doubling). Default 250 ms.
        listen_reconnect_min: "listenReconnectMin" = 250,
        /// Longest LISTEN reconnect delay. Default 30,000 ms.
        listen_reconnect_max: "listenReconnectMax" = 30_000,
        /// Hub capacity in batches. Default 1,024.
        hub_capacity: "hubCapacity" = 1_024,
        /// Stream flush window. Default 100 ms.
        flush_window: "flushWindow" = 100,
        /// Keys per stream frame. Default 256.
        frame_keys: "frameKeys" = 256,
        /// Bytes per stream frame. Default 65,536.
        frame_bytes: "frameBytes" = 65_536,
        /// Heartbeat tick after this much silence. Default 15,000 ms.
        tick: "tick" = 15_000,
        /// Stream lifetime before a spread `bye`. Default 900,000 ms (15 min).
        stream_lifetime: "streamLifetime" = 900_000,
        /// Uniform jitter added to the stream lifetime. Default 60,000 ms.
        stream_lifetime_jitter: "streamLifetimeJitter" = 60_000,
        /// Streams per session; one more is refused with 429. Default 6.
        session_streams: "sessionStreams" = 6,
        /// Streams per process. Default 10,000.
        process_streams: "processStreams" = 10_000,
        /// Socket write timeout without progress. Default 30,000 ms.
        write_timeout: "writeTimeout" = 30_000,
        /// Visible rows a catch-up may return before it becomes a reset. Default 2,000.
        catch_up_rows: "catchUpRows" = 2_000,
        /// Catch-ups at once per process. Default 32.
        catch_up_concurrency: "catchUpConcurrency" = 32,
        /// Longest wait for a catch-up slot. Default 5,000 ms.
        catch_up_wait: "catchUpWait" = 5_000,
        /// Poll requests per second per session. Default 4.
        poll_rate: "pollRate" = 4,
        /// Poll burst per session. Default 8.
        poll_burst: "pollBurst" = 8,
        /// Log retention age. Default 3,600,000 ms (60 min).
        retention_age: "retentionAge" = 3_600_000,
        /// Log retention rows. Default 100,000.
        retention_rows: "retentionRows" = 100_000,
        /// Prune interval. Default 60,000 ms.
        prune_interval: "pruneInterval" = 60_000,
        /// Rows per prune batch. Default 5,000.
        prune_batch: "pruneBatch" = 5_000,
        /// Prune batches per run. Default 20.
        prune_batches: "pruneBatches" = 20,
        /// Age after which rows may be compacted. Default 300,000 ms.
        compaction_age: "compactionAge" = 300_000,
        /// Endpoints answer 503 after log writes failed this long. Default 30,000 ms.
        log_failure_grace: "logFailureGrace" = 30_000,
        /// Reading cache TTL. Default 10,000 ms.
        reading_ttl: "readingTtl" = 10_000,
        /// Minimum gap between change-driven reads of one key. Default 1,000 ms.
        change_gap: "changeGap" = 1_000,
        /// Longest wait for a read slot. Default 2,000 ms.
        slot_wait: "slotWait" = 2_000,
        /// Bound of the `seen` catch-up. Default 250 ms.
        seen_catch_up: "seenCatchUp" = 250,
        /// Entries of the latest-change index. Default 100,000.
        latest_index: "latestIndex" = 100_000,
        /// Entries of an audience set. Default 1,000.
        audience_entries: "audienceEntries" = 1_000,
        /// Client: coalescing window. Default 250 ms.
        client_window: "clientWindow" = 250,
        /// Client: gap between reads of one query. Default 1,000 ms.
        client_query_gap: "clientQueryGap" = 1_000,
        /// Client: change-driven requests in flight per page. Default 4.
        client_requests: "clientRequests" = 4,
        /// Client: poll cadence while active. Default 2,000 ms.
        poll_active: "pollActive" = 2_000,
        /// Client: poll cadence while idle. Default 60,000 ms.
        poll_idle: "pollIdle" = 60_000,
        /// Client: poll floor of a hidden page. Default 10,000 ms.
        poll_hidden_floor: "pollHiddenFloor" = 10_000,
        /// Client: how long a run keeps the fast cadence. Default 300,000 ms.
        run_ttl: "runTtl" = 300_000,
        /// Client: shortest poll timeout (the timeout is max(this, 4 × interval)).
        /// Default 10,000 ms.
        poll_timeout: "pollTimeout" = 10_000,
        /// Client: poll failure backoff cap. Default 300,000 ms.
        backoff_cap: "backoffCap" = 300_000,
        /// Client: cooldown after an authorization failure. Default 60,000 ms.
        auth_cooldown: "authCooldown" = 60_000,
        /// Client: first stream reconnect delay. Default 1,000 ms.
        reconnect_min: "reconnectMin" = 1_000,
        /// Client: longest stream reconnect delay. Default 30,000 ms.
        reconnect_max: "reconnectMax" = 30_000,
        /// Client: reconnect jitter, in percent. Default 20.
        reconnect_jitter: "reconnectJitter" = 20,
        /// Client: silence after which an open stream is reconnected. Default 45,000 ms.
        client_silence: "clientSilence" = 45_000,
        /// Client: unobserved counter entries kept. Default 1,000.
        client_counters: "clientCounters" = 1_000,
    }
}

/// Catalog version 1's cap on `Each.items`, `Checklist.value`, `Table.rows` and
/// `Chart.data`, in items.
pub const MAX_LIST_ITEMS: usize = 1_000;
/// Catalog version 1's cap on `Text` props, in characters (Unicode code points, as the
/// reference's zod 4 counts a string for `max`; a character outside the BMP counts once).
/// `catalog.md` §1 says UTF-16 units, but the corpus was produced with zod 4.6.5, whose
/// length checks count code points, and where the two disagree the corpus decides.
pub const MAX_TEXT_CHARS: usize = 16_384;
/// Catalog version 1's cap on `Name` props, in characters (the minimum is 1), counted as
/// [`MAX_TEXT_CHARS`] is.
pub const MAX_NAME_CHARS: usize = 256;
/// Largest `File.line`.
pub const MAX_FILE_LINE: u64 = 10_000_000;
/// Shortest `Commit.sha`, in hex digits.
pub const MIN_SHA_DIGITS: usize = 7;
/// Longest `Commit.sha`, in hex digits.
pub const MAX_SHA_DIGITS: usize = 64;
/// Largest `@Round` precision (the smallest is 0).
pub const MAX_ROUND_DIGITS: u32 = 6;
/// Smallest fence marker run (backticks or tildes).
pub const MIN_FENCE_RUN: usize = 3;
/// Most spaces a fence line may be indented by.
pub const MAX_FENCE_INDENT: usize = 3;
/// The agent's session note stays below this many characters.
pub const MAX_SESSION_NOTE_CHARS: usize = 2_400;

#[cfg(test)]
mod tests {
    use super::*;

    fn record(json: &str) -> Value {
        Value::from_json_str(json).unwrap()
    }

    #[test]
    fn defaults_are_the_spec_values() {
        let ui = UiLimits::DEFAULT;
        assert_eq!(
            (ui.characters(), ui.depth(), ui.nodes(), ui.diagnostics()),
            (65_536, 32, 512, 20)
        );
        assert_eq!(
            (
                ui.steps(),
                ui.iterations(),
                ui.string_length(),
                ui.milliseconds()
            ),
            (20_000, 2_000, 16_384, 30)
        );
        let reply = ReplyLimits::DEFAULT;
        assert_eq!(
            (
                reply.blocks(),
                reply.characters(),
                reply.nodes(),
                reply.milliseconds()
            ),
            (16, 262_144, 2_048, 60)
        );
        let host = UiHostLimits::DEFAULT;
        assert_eq!(
            (host.queries(), host.links(), host.refresh_milliseconds()),
            (8, 64, 10_000)
        );
        let h = HostLimits::DEFAULT;
        assert_eq!(
            (h.chat_read_slots(), h.read_slots(), h.read_timeout()),
            (2, 16, 8_000)
        );
        assert_eq!(
            (h.result_bytes(), h.access_bytes(), h.snapshot_bytes()),
            (65_536, 32_768, 131_072)
        );
        let s = SyncLimits::DEFAULT;
        assert_eq!(
            (s.appender_window(), s.frame_keys(), s.session_streams()),
            (50, 256, 6)
        );
    }

    #[test]
    fn partial_overrides_keep_the_rest() {
        let l = UiLimits::DEFAULT
            .with_overrides(&record(r#"{"steps": 100, "stringLength": 5}"#))
            .unwrap();
        assert_eq!(l.steps(), 100);
        assert_eq!(l.string_length(), 5);
        assert_eq!(l.nodes(), 512);
        assert_eq!(
            UiLimits::DEFAULT.with_overrides(&Value::Null).unwrap(),
            UiLimits::DEFAULT
        );
        assert_eq!(l.get("stringLength"), Some(5));
    }

    #[test]
    fn overrides_must_be_positive_safe_integers() {
        for bad in [
            r#"{"steps": 0}"#,
            r#"{"steps": -1}"#,
            r#"{"steps": 1.5}"#,
            r#"{"steps": "5"}"#,
            r#"{"steps": null}"#,
            r#"{"steps": 9007199254740992}"#,
            r#"{"stepz": 5}"#,
            r#"[1]"#,
        ] {
            let err = UiLimits::DEFAULT.with_overrides(&record(bad)).unwrap_err();
            assert_eq!(err.code(), Code::InvalidLimits, "{bad}");
            assert_eq!(Failure::from(err).code, Code::InvalidLimits);
        }
        // The largest safe integer itself is accepted.
        let l = UiLimits::DEFAULT
            .with_overrides(&record(r#"{"milliseconds": 9007199254740991}"#))
            .unwrap();
        assert_eq!(l.milliseconds(), MAX_SAFE_INTEGER);
        assert!(SyncLimits::DEFAULT.with("tick", 0).is_err());
        assert_eq!(SyncLimits::DEFAULT.with("tick", 1).unwrap().tick(), 1);
    }

    #[test]
    fn serialises_with_wire_keys() {
        let json = serde_json::to_value(UiLimits::DEFAULT).unwrap();
        assert_eq!(json["stringLength"], 16_384);
        assert_eq!(UiLimits::KEYS.len(), 8);
        assert!(UiLimits::DEFAULT.to_string().starts_with("UI_LIMITS {"));
    }
}
