//! Freezing (`host.md` §9): the first readings and link resolutions of a final reply's
//! blocks, stored with the item so later readers see what the reply first showed.

use std::sync::Arc;

use indexmap::IndexMap;
use ui_compiler::Block;
use ui_core::text::truncate_utf16;
use ui_core::{HostCode, Record, Value};
use ui_links::{LinkResolution, link_targets};

use super::UiQueries;
use super::links::plain;
use crate::clock::BudgetClock;
use crate::payload::QueryPayload;
use crate::reading::QueryReading;
use crate::store::{FrozenBlock, UiQueryState};

/// Attempts of a freeze to store its frozen readings before it gives up (and logs).
const FREEZE_WRITE_ATTEMPTS: u32 = 5;
/// The first wait between two attempts, in ms; it doubles after each.
const FREEZE_RETRY_MS: u64 = 100;

impl UiQueries {
    // ---- freezing (§9) ----

    pub(super) async fn freeze(self: &Arc<Self>, chat_id: &str, item_id: &str) {
        let access = self.access(chat_id, item_id).await;
        let Some(item) = self.store.item(chat_id, item_id).await else {
            return;
        };
        let blocks: Vec<Arc<Block>> = item
            .blocks
            .iter()
            .take(self.reply_limits.blocks() as usize)
            .cloned()
            .collect();
        for block in blocks {
            let Some(revision) = block.revision.clone() else {
                return;
            };
            let Some(now_item) = self.store.item(chat_id, item_id).await else {
                return;
            };
            if !now_item
                .blocks
                .iter()
                .any(|b| b.id == block.id && b.revision.as_deref() == Some(&revision))
            {
                return;
            }
            if now_item
                .ui_queries
                .as_ref()
                .and_then(|q| q.blocks.get(&block.id))
                .is_some_and(|f| f.revision == revision)
            {
                continue;
            }
            let mut readings = IndexMap::new();
            let mut fresh = Record::default();
            for name in block
                .queries
                .keys()
                .take(self.ui_host_limits.queries() as usize)
            {
                let p = QueryPayload {
                    chat_id: chat_id.to_owned(),
                    item_id: item_id.to_owned(),
                    block_id: block.id.clone(),
                    revision: revision.clone(),
                    query: name.clone(),
                    values: Record::default(),
                    seen: None,
                };
                let reading = self.query(&p).await;
                if let Some(v) = reading.value.clone().filter(|_| reading.is_fresh()) {
                    fresh.insert(name.clone(), v);
                }
                readings.insert(name.clone(), reading);
            }
            let links = self
                .freeze_links(chat_id, &block, &fresh, access.as_ref())
                .await;
            let Some(now_item) = self.store.item(chat_id, item_id).await else {
                return;
            };
            let Some(state) = now_item.ui_queries.clone() else {
                return;
            };
            if !now_item
                .blocks
                .iter()
                .any(|b| b.id == block.id && b.revision.as_deref() == Some(&revision))
            {
                return;
            }
            let clock = BudgetClock(&*self.clock);
            let text = ui_fallback::query_fallback(&block, &fresh, self.ui_limits, &clock)
                .unwrap_or_else(|_| block.fallback.clone());
            let mut fallback =
                truncate_utf16(&text, self.limits.frozen_fallback() as usize).to_owned();
            let sources = sources_line(&block);
            if !block.queries.is_empty() {
                fallback.push_str(&sources);
            }
            for (name, reading) in &readings {
                if !reading.is_fresh() {
                    fallback.push_str(&format!(
                        "\n{name}: {}",
                        reading.reason.as_deref().unwrap_or_default()
                    ));
                }
            }
            let entry = FrozenBlock {
                revision: revision.clone(),
                readings,
                links,
                fallback,
            };
            let mut map = state.blocks.clone();
            map.insert(block.id.clone(), entry);
            if self.snapshot_bytes(&map) > self.limits.snapshot_bytes() {
                let now = self.clock.now_ms();
                let reason = "The first values were too large to keep.";
                let entry = map.get_mut(&block.id).expect("just inserted");
                for reading in entry.readings.values_mut() {
                    *reading = QueryReading::failed(
                        now,
                        Some(HostCode::SnapshotTooLarge.as_str()),
                        reason,
                    );
                }
                for link in entry.links.values_mut() {
                    *link = LinkResolution::plain(
                        Some(HostCode::LinkUnchecked.as_str()),
                        reason,
                        &self.limits,
                    );
                }
                entry.fallback = format!(
                    "{}{sources}\nThe live values were too large to keep.",
                    truncate_utf16(&block.fallback, self.limits.oversize_fallback() as usize)
                );
                if self.snapshot_bytes(&map) > self.limits.snapshot_bytes() {
                    map.shift_remove(&block.id);
                }
            }
            let state = UiQueryState {
                author_chat_id: state.author_chat_id,
                blocks: map,
            };
            if !self.store_frozen(chat_id, item_id, state).await {
                return;
            }
        }
    }

    /// Stores a freeze's UI query state, retrying a failed write up to
    /// [`FREEZE_WRITE_ATTEMPTS`] times with a doubling wait; whether it was stored.
    async fn store_frozen(&self, chat_id: &str, item_id: &str, state: UiQueryState) -> bool {
        let mut wait = FREEZE_RETRY_MS;
        for attempt in 1..=FREEZE_WRITE_ATTEMPTS {
            match self
                .store
                .set_ui_queries(chat_id, item_id, state.clone())
                .await
            {
                Ok(()) => return true,
                Err(e) if attempt < FREEZE_WRITE_ATTEMPTS => {
                    tracing::warn!(chat_id, item_id, attempt, error = %e,
                        "the frozen readings could not be stored; retrying");
                    self.clock.sleep(wait).await;
                    wait *= 2;
                }
                Err(e) => {
                    tracing::error!(chat_id, item_id, attempt, error = %e,
                        "the frozen readings could not be stored; giving up");
                }
            }
        }
        false
    }

    /// §9 step 2d: resolutions of the first 64 link targets for the defaults and the fresh
    /// values; empty when the host resolves no links or the block has no targets (step f).
    async fn freeze_links(
        &self,
        chat_id: &str,
        block: &Block,
        fresh: &Record,
        access: Option<&Arc<Value>>,
    ) -> IndexMap<String, LinkResolution> {
        let Some(resolver) = self.host.links() else {
            return IndexMap::new();
        };
        let clock = BudgetClock(&*self.clock);
        let Ok(targets) = link_targets(
            block,
            &Record::default(),
            fresh,
            self.ui_limits,
            &self.limits,
            &clock,
        ) else {
            return IndexMap::new();
        };
        // A chat deleted meanwhile has nothing to freeze links for.
        let Some(info) = self.store.chat_info(chat_id).await else {
            return IndexMap::new();
        };
        let mut out = IndexMap::new();
        for (node_id, target) in targets.iter().take(self.ui_host_limits.links() as usize) {
            let resolution = match access {
                None => plain(
                    &self.limits,
                    HostCode::AccessUnavailable,
                    "The writing chat's access is not available.",
                ),
                Some(access) => self.resolved(resolver.link(&info, access, target)).await,
            };
            out.insert(node_id.clone(), resolution);
        }
        out
    }

    fn snapshot_bytes(&self, map: &IndexMap<String, FrozenBlock>) -> u64 {
        serde_json::to_value(map)
            .map(|json| Value::from(&json).js_json_len() as u64)
            .unwrap_or(u64::MAX)
    }
}

/// `\nSources: name: source, …` for a block's declared queries.
fn sources_line(block: &Block) -> String {
    let list: Vec<String> = block
        .queries
        .iter()
        .map(|(name, q)| format!("{name}: {}", q.source))
        .collect();
    format!("\nSources: {}", list.join(", "))
}
