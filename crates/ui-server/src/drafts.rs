//! The drafts of streaming replies: for each reply that streams, the text so far, the
//! incremental compiler that compiled it and the stored JSON of each of its blocks, so that
//! a delta costs work in proportion to the delta and to the block it grows, not to the
//! reply: the compile resumes (unchanged blocks are reused, the open block resumes from its
//! checkpoint, `UiCompiler`), only the blocks that changed are serialized again, and the
//! database appends the delta to the stored text.
//!
//! A draft is only a cache of what the database holds: the store appends a delta only when
//! the stored text is still the draft's (`SqliteUiStore::append_reply`), and any other case (no draft, a refused
//! append, a finished or deleted item) takes the path that reads the item. At most
//! [`MAX_REPLY_DRAFTS`] drafts holding at most [`MAX_REPLY_DRAFT_BYTES`] of text and JSON are
//! kept; past either the one used longest ago is dropped, and its reply's next delta reads
//! the item and compiles it whole once.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use ui_compiler::{Block, UiCompiler};

use crate::limits::{MAX_REPLY_DRAFT_BYTES, MAX_REPLY_DRAFTS};

/// One streaming reply's draft.
#[derive(Debug, Default)]
pub(crate) struct ReplyDraft {
    /// The reply's text, as stored.
    pub(crate) text: String,
    /// The compiler of the previews so far (its cache is the last preview's blocks).
    pub(crate) compiler: UiCompiler,
    /// The last preview's blocks, each with its JSON as stored.
    stored: Vec<(Arc<Block>, String)>,
    /// Whether the host service admitted the reply (`UiQueries::observe` answered `true`):
    /// later previews need not tell it.
    pub(crate) observed: bool,
}

impl ReplyDraft {
    /// A draft of a reply whose stored text is `text`.
    pub(crate) fn new(text: String) -> Self {
        ReplyDraft {
            text,
            ..ReplyDraft::default()
        }
    }

    /// The bytes of text and JSON the draft holds (its compiler holds about as much again).
    fn weight(&self) -> usize {
        self.text.len()
            + self
                .stored
                .iter()
                .map(|(_, json)| json.len())
                .sum::<usize>()
    }

    /// The JSON of `blocks` as the store holds it (the same text as `serde_json` gives for
    /// the list), serializing only the blocks that are not the same [`Arc`] as one of the
    /// previous call's; remembers `blocks` for the next call.
    pub(crate) fn blocks_json(&mut self, blocks: &[Arc<Block>]) -> serde_json::Result<String> {
        let mut stored = Vec::with_capacity(blocks.len());
        let mut previous = std::mem::take(&mut self.stored).into_iter().peekable();
        for block in blocks {
            // Reused blocks keep their order, so the previous list is walked once.
            while previous
                .next_if(|(b, _)| !Arc::ptr_eq(b, block) && b.start < block.start)
                .is_some()
            {}
            let json = match previous.next_if(|(b, _)| Arc::ptr_eq(b, block)) {
                Some((_, json)) => json,
                None => serde_json::to_string(&**block)?,
            };
            stored.push((Arc::clone(block), json));
        }
        let len = 2 + stored.iter().map(|(_, j)| j.len() + 1).sum::<usize>();
        let mut out = String::with_capacity(len);
        out.push('[');
        for (i, (_, json)) in stored.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            out.push_str(json);
        }
        out.push(']');
        self.stored = stored;
        Ok(out)
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
    fn blocks_json_is_the_json_of_the_list() {
        let text = "Hi\n```ui\n<Text>one</Text>\n```\nand\n```ui\n<Badge>two</Badge>\n";
        let options = CompileOptions {
            is_final: false,
            ..CompileOptions::default()
        };
        let mut draft = ReplyDraft::new(String::new());
        for cut in (0..=text.len()).filter(|&c| text.is_char_boundary(c)) {
            let blocks = draft.compiler.compile(&text[..cut], &options);
            let json = draft.blocks_json(&blocks).unwrap();
            assert_eq!(json, serde_json::to_string(&blocks).unwrap(), "at {cut}");
        }
    }

    #[test]
    fn drafts_are_bounded() {
        let drafts = ReplyDrafts::default();
        for i in 0..MAX_REPLY_DRAFTS + 3 {
            drafts.put("c", &i.to_string(), ReplyDraft::new(String::new()));
        }
        assert_eq!(drafts.len(), MAX_REPLY_DRAFTS);
        // The first ones put back went first.
        assert!(drafts.take("c", "0").is_none());
        assert!(drafts.take("c", "2").is_none());
        assert!(drafts.take("c", "3").is_some());
        let last = (MAX_REPLY_DRAFTS + 2).to_string();
        assert!(drafts.take("c", &last).is_some());
        // So are their bytes.
        let heavy = || ReplyDraft::new("x".repeat(MAX_REPLY_DRAFT_BYTES / 2 + 1));
        drafts.put("c", "h1", heavy());
        drafts.put("c", "h2", heavy());
        assert!(drafts.take("c", "h1").is_none());
        assert!(drafts.take("c", "h2").is_some());
        drafts.put(
            "c",
            "h3",
            ReplyDraft::new("x".repeat(MAX_REPLY_DRAFT_BYTES + 1)),
        );
        assert!(drafts.take("c", "h3").is_none());
    }
}
