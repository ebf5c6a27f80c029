//! The drafts of streaming replies: for each reply that streams, the text so far, the
//! incremental compiler that compiled it, the blocks last stored and the reply's stored
//! revision, so that a delta costs work in proportion to the delta and to the block it
//! grows, not to the reply: the compile resumes (unchanged blocks are reused, the open block
//! resumes from its checkpoint, `UiCompiler`), only the blocks that changed are serialized
//! and written again, and the database stores the delta in a row of its own
//! (`ChatStore::append_reply`).
//!
//! A draft is only a cache of what the database holds: the store appends a delta only when
//! the reply is still at the draft's revision (nothing else wrote it since), and any other
//! case (no draft, a refused append, a finished or deleted item) takes the path that reads
//! the item and writes it whole. At most [`MAX_REPLY_DRAFTS`] drafts holding at most
//! [`MAX_REPLY_DRAFT_BYTES`] of text and JSON are kept; past either the one used longest
//! ago is dropped, and its reply's next delta reads the item and compiles it whole once.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use ui_compiler::{Block, UiCompiler};

use crate::limits::{MAX_REPLY_DRAFT_BYTES, MAX_REPLY_DRAFTS};
use crate::store::BlockWrites;

/// One streaming reply's draft.
#[derive(Debug, Default)]
pub(crate) struct ReplyDraft {
    /// The reply's text, as stored.
    pub(crate) text: String,
    /// The reply's revision in the store (`ChatStore::append_reply`).
    pub(crate) rev: i64,
    /// The compiler of the previews so far (its cache is the last preview's blocks).
    pub(crate) compiler: UiCompiler,
    /// The blocks stored apart by the last append, in order, each with its JSON's length.
    /// Empty in a draft whose reply was last written whole: its first append writes every
    /// block.
    stored: Vec<(Arc<Block>, usize)>,
    /// Whether the host service admitted the reply (`UiQueries::observe` answered `true`):
    /// later previews need not tell it.
    pub(crate) observed: bool,
}

impl ReplyDraft {
    /// A draft of a reply whose stored text is `text` at revision `rev`, written whole.
    pub(crate) fn new(text: String, rev: i64) -> Self {
        ReplyDraft {
            text,
            rev,
            ..ReplyDraft::default()
        }
    }

    /// The bytes of text and JSON the draft stands for (its compiler holds about as much
    /// again).
    fn weight(&self) -> usize {
        self.text.len() + self.stored.iter().map(|(_, len)| len).sum::<usize>()
    }

    /// What storing `blocks` after the last append's blocks writes: the JSON of each block
    /// whose index held another block (not the same [`Arc`]: the compiler reuses the
    /// blocks it did not change), and the new count. Remembers `blocks` for the next call.
    pub(crate) fn block_writes(
        &mut self,
        blocks: &[Arc<Block>],
    ) -> serde_json::Result<BlockWrites> {
        let mut changed = Vec::new();
        let mut stored = Vec::with_capacity(blocks.len());
        for (idx, block) in blocks.iter().enumerate() {
            let len = match self.stored.get(idx) {
                Some((before, len)) if Arc::ptr_eq(before, block) => *len,
                _ => {
                    let json = serde_json::to_string(&**block)?;
                    let len = json.len();
                    changed.push((idx, json));
                    len
                }
            };
            stored.push((Arc::clone(block), len));
        }
        self.stored = stored;
        Ok(BlockWrites {
            changed,
            len: blocks.len(),
        })
    }
}

/// The drafts of the replies that stream, at most [`MAX_REPLY_DRAFTS`]. A caller takes a
/// reply's draft out while it works on it (under the reply's lock) and puts it back.
#[derive(Debug, Default)]
pub(crate) struct ReplyDrafts {
    drafts: Mutex<Drafts>,
}

#[derive(Debug, Default)]
struct Drafts {
    /// Each draft with the tick it was last put back at.
    by_item: HashMap<(String, String), (u64, ReplyDraft)>,
    tick: u64,
}

impl Drafts {
    fn bytes(&self) -> usize {
        self.by_item.values().map(|(_, d)| d.weight()).sum()
    }
}

impl ReplyDrafts {
    fn lock(&self) -> std::sync::MutexGuard<'_, Drafts> {
        self.drafts.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Takes the draft of the reply `item_id` of `chat_id` out, if there is one.
    pub(crate) fn take(&self, chat_id: &str, item_id: &str) -> Option<ReplyDraft> {
        self.lock()
            .by_item
            .remove(&(chat_id.to_owned(), item_id.to_owned()))
            .map(|(_, draft)| draft)
    }

    /// Keeps `draft` for the reply `item_id` of `chat_id`; drops the drafts put back
    /// longest ago while more than [`MAX_REPLY_DRAFTS`] drafts or [`MAX_REPLY_DRAFT_BYTES`]
    /// would be kept (a draft heavier than that alone is not kept).
    pub(crate) fn put(&self, chat_id: &str, item_id: &str, draft: ReplyDraft) {
        let weight = draft.weight();
        if weight > MAX_REPLY_DRAFT_BYTES {
            return;
        }
        let mut drafts = self.lock();
        let key = (chat_id.to_owned(), item_id.to_owned());
        drafts.by_item.remove(&key);
        while drafts.by_item.len() >= MAX_REPLY_DRAFTS
            || drafts.bytes() + weight > MAX_REPLY_DRAFT_BYTES
        {
            let oldest = drafts
                .by_item
                .iter()
                .min_by_key(|(_, (tick, _))| *tick)
                .map(|(key, _)| key.clone());
            match oldest {
                Some(oldest) => drafts.by_item.remove(&oldest),
                None => break,
            };
        }
        drafts.tick += 1;
        let tick = drafts.tick;
        drafts.by_item.insert(key, (tick, draft));
    }

    /// How many drafts are kept.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.lock().by_item.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ui_compiler::CompileOptions;

    #[test]
    fn block_writes_keep_the_stored_rows_the_json_of_the_list() {
        let text = "Hi\n```ui\n<Text>one</Text>\n```\nand\n```ui\n<Badge>two</Badge>\n```\n\
                    then\n```ui\n<Text>three";
        let options = CompileOptions {
            is_final: false,
            ..CompileOptions::default()
        };
        let mut draft = ReplyDraft::new(String::new(), 0);
        // The rows as the store keeps them, by index.
        let mut rows: Vec<String> = Vec::new();
        let mut written = 0;
        for cut in (0..=text.len()).filter(|&c| text.is_char_boundary(c)) {
            let blocks = draft.compiler.compile(&text[..cut], &options);
            let writes = draft.block_writes(&blocks).unwrap();
            for (idx, json) in writes.changed {
                if idx >= rows.len() {
                    rows.resize(idx + 1, String::new());
                }
                rows[idx] = json;
                written += 1;
            }
            rows.truncate(writes.len);
            let joined = format!("[{}]", rows.join(","));
            assert_eq!(joined, serde_json::to_string(&blocks).unwrap(), "at {cut}");
        }
        // Each cut rewrites the open block, not the finished ones before it.
        let cuts = text.len() + 1;
        assert!(written < cuts + 6, "{written} block writes for {cuts} cuts");
    }

    #[test]
    fn drafts_are_bounded() {
        let drafts = ReplyDrafts::default();
        for i in 0..MAX_REPLY_DRAFTS + 3 {
            drafts.put("c", &i.to_string(), ReplyDraft::new(String::new(), 0));
        }
        assert_eq!(drafts.len(), MAX_REPLY_DRAFTS);
        // The first ones put back went first.
        assert!(drafts.take("c", "0").is_none());
        assert!(drafts.take("c", "2").is_none());
        assert!(drafts.take("c", "3").is_some());
        let last = (MAX_REPLY_DRAFTS + 2).to_string();
        assert!(drafts.take("c", &last).is_some());
        // So are their bytes.
        let heavy = || ReplyDraft::new("x".repeat(MAX_REPLY_DRAFT_BYTES / 2 + 1), 0);
        drafts.put("c", "h1", heavy());
        drafts.put("c", "h2", heavy());
        assert!(drafts.take("c", "h1").is_none());
        assert!(drafts.take("c", "h2").is_some());
        drafts.put(
            "c",
            "h3",
            ReplyDraft::new("x".repeat(MAX_REPLY_DRAFT_BYTES + 1), 0),
        );
        assert!(drafts.take("c", "h3").is_none());
    }
}
