//! The writing chat's access (`host.md` §4): captured once per item, joined by concurrent
//! requests, persisted "denied" first; and `observe`, which starts captures and freezes.

use std::sync::Arc;

use indexmap::IndexMap;
use tokio::sync::watch;
use ui_compiler::{Block, has_fence, may_reference_host};
use ui_core::{Budget, Value};

use super::{OnDrop, UiQueries, lock};
use crate::clock::BudgetClock;
use crate::store::{AccessRecord, UiQueryState};

/// A capture in flight: `None` until it settles, then the access (or none).
pub(super) type CaptureOutcome = watch::Receiver<Option<Option<Arc<Value>>>>;

impl UiQueries {
    // ---- capture (§4) ----

    /// The captured access of an item: joins a capture in flight, returns the stored access
    /// for an item authored here, or captures now (first time, or a forked item).
    pub async fn access(self: &Arc<Self>, chat_id: &str, item_id: &str) -> Option<Arc<Value>> {
        let k = (chat_id.to_owned(), item_id.to_owned());
        let mut rx = {
            let mut captures = lock(&self.captures);
            match captures.get(&k) {
                Some(rx) => rx.clone(),
                None => {
                    let (tx, rx) = watch::channel(None);
                    captures.insert(k.clone(), rx.clone());
                    let this = Arc::clone(self);
                    // However the capture ends, a panicking host included, its entry goes:
                    // the next request captures again instead of joining a dead capture.
                    let forget = OnDrop::new({
                        let this = Arc::clone(self);
                        move || {
                            lock(&this.captures).remove(&k);
                        }
                    });
                    let (chat, item) = (chat_id.to_owned(), item_id.to_owned());
                    tokio::spawn(async move {
                        let outcome = this.capture(&chat, &item).await;
                        drop(forget);
                        // Every joiner may have gone: nobody is left to tell.
                        let _ = tx.send(Some(outcome));
                    });
                    rx
                }
            }
        };
        match rx.wait_for(Option::is_some).await {
            Ok(v) => v.clone().flatten(),
            Err(_) => None,
        }
    }

    /// [`UiQueries::access`] for an item just read (`author_chat_id` is its
    /// `uiQueries.authorChatId`): an item this chat authored whose access
    /// is granted answers that access without a capture task (§4.2 step 2). Granted access
    /// is final for the chat and item — a capture in flight stores it last — so this is
    /// the outcome joining would give; anything else takes the full path. With whether the
    /// access is the store's granted record (as opposed to one the full path gave).
    pub(super) async fn access_of(
        self: &Arc<Self>,
        author_chat_id: Option<&str>,
        chat_id: &str,
        item_id: &str,
    ) -> Option<(Arc<Value>, bool)> {
        if author_chat_id == Some(chat_id)
            && let AccessRecord::Granted(access) = self.store.access(chat_id, item_id).await
        {
            return Some((access, true));
        }
        Some((self.access(chat_id, item_id).await?, false))
    }

    /// §4.2 steps 2–3 (the leader of a capture).
    async fn capture(&self, chat_id: &str, item_id: &str) -> Option<Arc<Value>> {
        let item = self.store.item(chat_id, item_id).await?;
        if item
            .ui_queries
            .as_ref()
            .is_some_and(|q| q.author_chat_id == chat_id)
        {
            return match self.store.access(chat_id, item_id).await {
                AccessRecord::Granted(v) => Some(v),
                _ => None,
            };
        }
        // Persist "denied" first, so a crash during capture never widens rights. A failed
        // write fails the capture (nothing is granted that the store does not hold); the
        // next request captures again.
        let denied = self.store.set_access(chat_id, item_id, None).await;
        let authored = match denied {
            Ok(()) => {
                self.store
                    .set_ui_queries(
                        chat_id,
                        item_id,
                        UiQueryState {
                            author_chat_id: chat_id.to_owned(),
                            blocks: IndexMap::new(),
                        },
                    )
                    .await
            }
            Err(e) => Err(e),
        };
        if let Err(e) = authored {
            tracing::error!(chat_id, item_id, error = %e, "the capture could not be stored");
            return None;
        }
        let info = self.store.chat_info(chat_id).await?;
        let captured = match self.within_timeout(self.host.capture(&info)).await {
            Some(Ok(captured)) => captured,
            Some(Err(e)) => {
                tracing::warn!(chat_id, item_id, error = %e, "the host's capture failed");
                return None;
            }
            None => {
                tracing::warn!(
                    chat_id,
                    item_id,
                    "the host's capture did not answer in time"
                );
                return None;
            }
        };
        let clock = BudgetClock(&*self.clock);
        let copy = match Budget::new(self.ui_limits, &clock).copy_value(&captured) {
            Ok(copy) => copy,
            Err(f) => {
                tracing::warn!(chat_id, item_id, reason = %f.message, "the captured access cannot be copied");
                return None;
            }
        };
        let bytes = copy.js_json_len() as u64;
        if bytes > self.limits.access_bytes() {
            tracing::warn!(
                chat_id,
                item_id,
                bytes,
                limit = self.limits.access_bytes(),
                "the captured access is over the size limit"
            );
            return None;
        }
        let copy = Arc::new(copy);
        if let Err(e) = self
            .store
            .set_access(chat_id, item_id, Some(Arc::clone(&copy)))
            .await
        {
            tracing::error!(chat_id, item_id, error = %e, "the captured access could not be stored");
            return None;
        }
        Some(copy)
    }

    /// Called for every change of an assistant item that may carry UI (`observe`, §4.1,
    /// §9): starts or joins the capture when the item may reference the host, and when the
    /// reply is final starts one background freeze of its first readings.
    ///
    /// Answers whether it admitted the item (§4.1). A non-final call only starts a capture
    /// the item does not have yet: once a call admitted the item, later non-final calls
    /// for it only join that capture, and a call on an item that [`admits_by_content`]
    /// refuses can at most join one started elsewhere. So a caller that streams a reply
    /// may skip the non-final calls once one answered `true`, and while the reply opens no
    /// UI fence or [`admits_by_content`] refuses it.
    pub async fn observe(self: &Arc<Self>, chat_id: &str, item_id: &str, is_final: bool) -> bool {
        let Some(item) = self.store.item(chat_id, item_id).await else {
            return false;
        };
        if !item.assistant
            || item.parent_tool_use_id.is_some()
            || !has_fence(&item.text, &self.fence_language)
        {
            return false;
        }
        let capturing =
            lock(&self.captures).contains_key(&(chat_id.to_owned(), item_id.to_owned()));
        let admitted = capturing
            || item
                .ui_queries
                .as_ref()
                .is_some_and(|q| q.author_chat_id == chat_id)
            || admits_by_content(&item.text, &item.blocks);
        if !admitted {
            return false;
        }
        let this = Arc::clone(self);
        let (chat, id) = (chat_id.to_owned(), item_id.to_owned());
        tokio::spawn(async move {
            this.access(&chat, &id).await;
        });
        if is_final && !item.blocks.is_empty() {
            let k = (chat_id.to_owned(), item_id.to_owned());
            if lock(&self.freezing).insert(k.clone()) {
                let this = Arc::clone(self);
                let (chat, item) = k.clone();
                // However the freeze ends, its mark goes, so a later final call may freeze.
                let unmark = OnDrop::new(move || {
                    lock(&this.freezing).remove(&k);
                });
                let this = Arc::clone(self);
                tokio::spawn(async move {
                    this.freeze(&chat, &item).await;
                    drop(unmark);
                });
            }
        }
        true
    }
}

/// Whether an assistant item's text and blocks admit it to a capture by themselves
/// (`host.md` §4.1, conditions 2 and 3): the text may reference the host, or a block
/// declares a query. ([`UiQueries::observe`] also admits an item whose capture is in flight
/// or recorded, and only an item whose text opens a UI fence.)
pub fn admits_by_content(text: &str, blocks: &[Arc<Block>]) -> bool {
    may_reference_host(text) || blocks.iter().any(|b| !b.queries.is_empty())
}
