//! The server's own limits. Each is enforced in one place and has a test that hits it.
//! (The spec's limits — payload ids, reads, streams, polls — come from `ui-core`.)

use std::time::Duration;

/// Largest request body, in bytes; a larger one is refused with `payload-too-large`
/// (413). 256 KiB holds a whole reply's UI source (262,144 UTF-16 units at most of
/// UI source per reply, `host.md` §16) in the common case, and every payload of §2.1.
pub const MAX_BODY_BYTES: usize = 256 * 1024;

/// Longest text of one item, in bytes of UTF-8; a message, or a delta or finish that
/// would make a reply longer, is refused with `payload-too-large`. 1 MiB. The default of
/// [`crate::ChatLimits::item_text_bytes`].
pub const MAX_ITEM_TEXT_BYTES: usize = 1024 * 1024;

/// Items one chat may hold (messages, replies, choices); one more is refused with
/// `chat-full`. The default of [`crate::ChatLimits::chat_items`].
pub const MAX_CHAT_ITEMS: usize = 1_000;

/// Items one page of `GET /api/chats/{chat}` holds at most (also the default page). The
/// default of [`crate::ChatLimits::page_items`].
pub const MAX_CHAT_PAGE_ITEMS: usize = 50;

/// Stored bytes (text, blocks, frozen readings, answers) one page of
/// `GET /api/chats/{chat}` holds at most; the page ends before the item that would cross
/// it, but always holds its newest item. 4 MiB. The default of
/// [`crate::ChatLimits::page_bytes`].
pub const MAX_CHAT_PAGE_BYTES: usize = 4 * 1024 * 1024;

/// Longest chat title, in characters; longer titles are `bad-request`.
pub const MAX_TITLE_CHARS: usize = 200;

/// Rows one source read may return; one more fails the read. The catalog's list cap.
pub const MAX_SOURCE_ROWS: usize = ui_core::limits::MAX_LIST_ITEMS;

/// The margin of `finish`'s wait for the freeze of the item's first readings, in ms: the
/// wait is the configured read timeout of one query (`readTimeoutMilliseconds`,
/// `host.md` §16) plus this ([`freeze_wait_ms`]). The freeze goes on after it.
pub const FREEZE_WAIT_MARGIN_MS: u64 = 2_000;

/// Longest wait of `finish` for the freeze of the item's first readings, in ms, under a
/// read timeout of `read_timeout_ms`: the read timeout plus [`FREEZE_WAIT_MARGIN_MS`]
/// (10 s under the default 8 s).
pub const fn freeze_wait_ms(read_timeout_ms: u64) -> u64 {
    read_timeout_ms.saturating_add(FREEZE_WAIT_MARGIN_MS)
}

/// Sessions whose poll rate is tracked at once; past it the fullest buckets are dropped.
pub const MAX_TRACKED_SESSIONS: usize = 10_000;

/// Demo sessions kept at once; past it the oldest is signed out.
pub const MAX_DEMO_SESSIONS: usize = 10_000;

/// Reader connections of the store's own reads (chats, items, access). Source reads have
/// a pool of their own, one connection per read slot (`HostLimits::read_slots`, 16), so
/// a slow source never delays the store.
pub const DB_READERS: usize = 4;

/// Chats whose row the store keeps in memory (owner, project, title). Past it the least
/// recently used half is dropped.
pub const MAX_CACHED_CHATS: usize = 10_000;

/// Finished items whose compiled blocks and flags the store keeps in memory, so that a
/// cached `ui.query` needs no database read. Past it the least recently used half is
/// dropped.
pub const MAX_CACHED_ITEMS: usize = 4_096;

/// Bytes of stored block JSON the item cache may hold in all (16 MiB; compiled blocks take
/// a few times their JSON in memory); an item whose blocks take more than half of it is
/// never cached.
pub const MAX_CACHED_ITEM_BYTES: usize = 16 * 1024 * 1024;

/// Streaming replies whose draft (text so far, incremental compiler, stored block JSON) is
/// kept in memory so that a delta costs in proportion to the delta; past it the draft used
/// longest ago is dropped, and its reply's next delta reads the item and compiles it whole.
pub const MAX_REPLY_DRAFTS: usize = 64;

/// Bytes of text and block JSON the streaming replies' drafts may hold in all (32 MiB; a
/// draft's compiler holds about as much again).
pub const MAX_REPLY_DRAFT_BYTES: usize = 32 * 1024 * 1024;

/// Items whose captured access the store keeps in memory.
pub const MAX_CACHED_ACCESS: usize = 10_000;

/// Bytes of stored access JSON the access cache may hold in all (8 MiB; one access holds
/// at most `accessBytes`, 32 KiB).
pub const MAX_CACHED_ACCESS_BYTES: usize = 8 * 1024 * 1024;

/// `PRAGMA busy_timeout` of every application connection, in ms (as the log's, `sync.md`
/// §3.6).
pub const DB_BUSY_TIMEOUT_MS: u64 = 5_000;

/// Connections of the store's pool on PostgreSQL at most (`database.pool`).
pub const DB_PG_POOL: usize = 16;

/// Longest call to the PostgreSQL database (`database.timeout`), enforced by the client
/// and inside the database (`statement_timeout`).
pub const DB_PG_TIMEOUT: Duration = Duration::from_secs(5);

/// Longest wait for the [`crate::Authenticator`]: its `principal` (every authenticated
/// request; a slower answer is `503 unavailable` with `Retry-After: 5`, logged) and its
/// `refresh` (an event stream whose memberships cannot be re-resolved in time rotates).
/// A host's own authenticator that calls out (a session store, an identity provider)
/// cannot hold a request or a stream longer than this.
pub const AUTH_TIMEOUT: Duration = Duration::from_secs(5);

/// Upper bound of the random `retryMs` of a `bye shutdown` frame (`sync.md` §4.2).
pub const SHUTDOWN_RETRY_MS: u64 = 5_000;

/// `Retry-After` (seconds) while the change feed is degraded (`sync.md` §4.1).
pub const DEGRADED_RETRY_AFTER_SECS: u64 = 10;

/// `Retry-After` (seconds) when no catch-up slot freed in time (`sync.md` §4.1).
pub const CATCH_UP_RETRY_AFTER_SECS: u64 = 5;

/// Default [`crate::ServerConfig::header_read_timeout`]: a request head must arrive within
/// 10 s of its first byte.
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);

/// Default [`crate::ServerConfig::body_read_timeout`]: a body must arrive within 30 s of
/// its head (256 KiB at 70 kbit/s).
pub const BODY_READ_TIMEOUT: Duration = Duration::from_secs(30);

/// Default [`crate::ServerConfig::idle_timeout`]: a kept-alive connection may wait 60 s
/// for its next request.
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(60);

/// Default [`crate::ServerConfig::max_connections`]: `processStreams` (10,000 event
/// streams, `sync.md` §9.1) and room for the requests beside them.
pub const MAX_CONNECTIONS: usize = 11_000;

/// Shortest header-read, body-read, idle and write timeout a configuration may set
/// (10 ms): a connection's watchdog wakes at least this often, so 0 would spin.
pub const MIN_CONN_TIMEOUT: Duration = Duration::from_millis(10);

/// Longest connection timeout, shutdown spread or drain timeout a configuration may set
/// (24 h): deadlines are computed from now, and an absurd one must not overflow.
pub const MAX_CONN_DURATION: Duration = Duration::from_secs(24 * 3_600);

/// Largest [`crate::ServerConfig::max_connections`] a configuration may set (1,000,000;
/// far above what one process's file descriptors allow).
pub const MAX_MAX_CONNECTIONS: usize = 1_000_000;

/// Default [`crate::ServerConfig::shutdown_spread`]: `sync.md` §4.2's min(10 s, grace
/// period).
pub const SHUTDOWN_SPREAD: Duration = Duration::from_secs(10);

/// Default [`crate::ServerConfig::drain_timeout`]: the spread and 5 s for what is in
/// flight.
pub const DRAIN_TIMEOUT: Duration = Duration::from_secs(15);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_freeze_wait_is_the_read_timeout_plus_the_margin() {
        let default = ui_core::HostLimits::DEFAULT.read_timeout();
        assert_eq!(freeze_wait_ms(default), 10_000);
        assert_eq!(freeze_wait_ms(30_000), 32_000);
        assert_eq!(freeze_wait_ms(u64::MAX), u64::MAX);
    }
}
