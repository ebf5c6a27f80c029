//! Replies while they stream: create an assistant item, append deltas (each compiled as a
//! preview), finish it (compiled with the host's query schemas, revisions set, first
//! readings frozen). The HTTP handlers call these; an agent runtime in the same process
//! may call them directly.

use std::sync::Arc;

use serde::Serialize;
use ui_compiler::{Block, CompileOptions, UiCompiler};
use ui_host::block_revision;

use crate::error::{ApiError, ErrorCode};
use crate::limits::{FREEZE_WAIT_MS, MAX_TITLE_CHARS};
use crate::state::AppState;
use crate::store::{Chat, ChatItem, ReplyUpdate, Role};

/// How often `finish` looks whether the freeze is done, in ms.
const FREEZE_POLL_MS: u64 = 20;

/// What a delta answers: the reply's size so far (the page reads the chat itself).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReplyProgress {
    /// The item id.
    pub id: String,
    /// Whether the reply still streams (always `true` after a delta).
    pub streaming: bool,
    /// The reply's text length in bytes.
    pub bytes: usize,
    /// Blocks compiled from it so far.
    pub blocks: usize,
}

fn too_long(max: usize) -> ApiError {
    ApiError::new(
        ErrorCode::PayloadTooLarge,
        format!("An item may hold at most {max} bytes of text."),
    )
}

fn not_streaming() -> ApiError {
    ApiError::new(
        ErrorCode::ItemNotStreaming,
        "The item is not a streaming reply.",
    )
}

fn no_item() -> ApiError {
    ApiError::new(ErrorCode::NotFound, "No such item in this chat.")
}

impl AppState {
    /// Compiles `text` as the reply `item_id` (a preview unless `is_final`), off the
    /// async workers; final blocks get their revision.
    async fn compile(&self, item_id: &str, text: String, is_final: bool) -> Vec<Arc<Block>> {
        let host = Arc::clone(self.host());
        let id = item_id.to_owned();
        let (limits, clock) = (*self.limits(), Arc::clone(self.clock()));
        tokio::task::spawn_blocking(move || {
            let clock = ui_host::BudgetClock(&*clock);
            let options = CompileOptions {
                id,
                is_final,
                limits: limits.ui,
                reply_limits: limits.reply,
                host_limits: limits.ui_host,
                query_schemas: Some(ui_host::UiHost::sources(&*host)),
                clock: Some(&clock),
                ..CompileOptions::default()
            };
            let blocks = UiCompiler::new().compile(&text, &options);
            if !is_final {
                return blocks;
            }
            blocks
                .into_iter()
                .map(|b| {
                    let mut block = Block::clone(&b);
                    block.revision = Some(block_revision(&block));
                    Arc::new(block)
                })
                .collect()
        })
        .await
        .unwrap_or_default()
    }

    /// Creates a chat owned by `owner` in `project` (whose member the caller made sure
    /// `owner` is), as `POST /api/chats` does.
    ///
    /// # Errors
    /// `bad-request` for a title over [`MAX_TITLE_CHARS`] characters; `internal` for the
    /// database.
    pub async fn create_chat(
        &self,
        owner: &str,
        project: &str,
        title: &str,
    ) -> Result<Chat, ApiError> {
        if title.chars().count() > MAX_TITLE_CHARS {
            return Err(ApiError::bad_request(format!(
                "`title` may hold at most {MAX_TITLE_CHARS} characters"
            )));
        }
        Ok(self.store().create_chat(owner, project, title).await?)
    }

    /// Appends a person's message to `chat_id`.
    ///
    /// # Errors
    /// `payload-too-large` over [`crate::ChatLimits::item_text_bytes`], `chat-full` over
    /// [`crate::ChatLimits::chat_items`]; `internal` for the database.
    pub async fn post_message(&self, chat_id: &str, text: &str) -> Result<ChatItem, ApiError> {
        let max = self.chat_limits().item_text_bytes;
        if text.len() > max {
            return Err(too_long(max));
        }
        Ok(self
            .store()
            .add_item(chat_id, Role::User, text, false)
            .await?)
    }

    /// Starts a streaming assistant reply in `chat_id` with `text` so far.
    ///
    /// # Errors
    /// As [`AppState::post_message`].
    pub async fn start_reply(&self, chat_id: &str, text: &str) -> Result<ChatItem, ApiError> {
        let max = self.chat_limits().item_text_bytes;
        if text.len() > max {
            return Err(too_long(max));
        }
        let mut item = self
            .store()
            .add_item(chat_id, Role::Assistant, "", true)
            .await?;
        if !text.is_empty() {
            self.append_delta(chat_id, &item.id, text).await?;
            item = self
                .store()
                .chat_item(chat_id, &item.id)
                .await?
                .ok_or_else(no_item)?;
        }
        Ok(item)
    }

    /// Appends `delta` to the streaming reply `item_id`, compiles the preview, stores it
    /// and tells the host service (`observe`, not final).
    ///
    /// # Errors
    /// `not-found` for an unknown item, `item-not-streaming` for a finished one or a
    /// person's message, `payload-too-large` when the reply would exceed
    /// [`crate::ChatLimits::item_text_bytes`].
    pub async fn append_delta(
        &self,
        chat_id: &str,
        item_id: &str,
        delta: &str,
    ) -> Result<ReplyProgress, ApiError> {
        let _in_order = self.reply_lock(chat_id, item_id).lock().await;
        let item = self
            .store()
            .stored_item(chat_id, item_id)
            .await?
            .ok_or_else(no_item)?;
        if !item.assistant || !item.streaming {
            return Err(not_streaming());
        }
        let max = self.chat_limits().item_text_bytes;
        if item.text.len() + delta.len() > max {
            return Err(too_long(max));
        }
        let text = item.text + delta;
        let blocks = self.compile(item_id, text.clone(), false).await;
        let progress = ReplyProgress {
            id: item_id.to_owned(),
            streaming: true,
            bytes: text.len(),
            blocks: blocks.len(),
        };
        self.store()
            .update_reply(
                chat_id,
                item_id,
                ReplyUpdate {
                    text,
                    blocks,
                    streaming: true,
                },
            )
            .await?;
        self.queries().observe(chat_id, item_id, false).await;
        Ok(progress)
    }

    /// Finishes the streaming reply `item_id` (with `text` as its whole text when given):
    /// compiles it with the host's query schemas, gives every block its revision, stores
    /// it, and tells the host service (`observe`, final), which freezes the first
    /// readings. With `wait`, answers once they are frozen (at most
    /// [`FREEZE_WAIT_MS`]), so the item it returns carries them.
    ///
    /// # Errors
    /// As [`AppState::append_delta`].
    pub async fn finish_reply(
        &self,
        chat_id: &str,
        item_id: &str,
        text: Option<String>,
        wait: bool,
    ) -> Result<ChatItem, ApiError> {
        {
            let _in_order = self.reply_lock(chat_id, item_id).lock().await;
            let item = self
                .store()
                .stored_item(chat_id, item_id)
                .await?
                .ok_or_else(no_item)?;
            if !item.assistant || !item.streaming {
                return Err(not_streaming());
            }
            let text = text.unwrap_or(item.text);
            let max = self.chat_limits().item_text_bytes;
            if text.len() > max {
                return Err(too_long(max));
            }
            let blocks = self.compile(item_id, text.clone(), true).await;
            self.store()
                .update_reply(
                    chat_id,
                    item_id,
                    ReplyUpdate {
                        text,
                        blocks,
                        streaming: false,
                    },
                )
                .await?;
        }
        self.queries().observe(chat_id, item_id, true).await;
        if wait {
            self.wait_for_freeze(chat_id, item_id).await;
        }
        self.store()
            .chat_item(chat_id, item_id)
            .await?
            .ok_or_else(no_item)
    }

    /// Waits until every block of the item has its frozen entry for its revision, no
    /// freeze runs any more, or [`FREEZE_WAIT_MS`] passed.
    async fn wait_for_freeze(&self, chat_id: &str, item_id: &str) {
        let clock = self.clock();
        let deadline = clock.now_ms() + FREEZE_WAIT_MS;
        let blocks = self.limits().reply.blocks() as usize;
        loop {
            let Ok(Some(item)) = self.store().stored_item(chat_id, item_id).await else {
                return;
            };
            let frozen = item.blocks.iter().take(blocks).all(|b| {
                item.ui_queries
                    .as_ref()
                    .and_then(|q| q.blocks.get(&b.id))
                    .is_some_and(|f| Some(&f.revision) == b.revision.as_ref())
            });
            if frozen || self.queries().stats().freezes == 0 || clock.now_ms() >= deadline {
                return;
            }
            clock.sleep(FREEZE_POLL_MS).await;
        }
    }
}
