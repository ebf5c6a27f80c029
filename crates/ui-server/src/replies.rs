//! Replies while they stream: create an assistant item, append deltas (each compiled as a
//! preview), finish it (compiled with the host's query schemas, revisions set, first
//! readings frozen). The HTTP handlers call these; an agent runtime in the same process
//! may call them directly.

use std::sync::Arc;

use serde::Serialize;
use ui_compiler::{Block, CompileOptions, UiCompiler, has_fence};
use ui_host::block_revision;

use crate::db::DbError;
use crate::drafts::ReplyDraft;
use crate::error::{ApiError, ErrorCode};
use crate::limits::{MAX_TITLE_CHARS, freeze_wait_ms};
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
    /// Compiles `text` as the reply `item_id` with `compiler` (a preview unless
    /// `is_final`), off the async workers; final blocks get their revision. `None` when the
    /// compile did not finish (its task panicked).
    async fn compile(
        &self,
        item_id: &str,
        text: String,
        is_final: bool,
        mut compiler: UiCompiler,
    ) -> Option<(String, UiCompiler, Vec<Arc<Block>>)> {
        let host = Arc::clone(self.host());
        let id = item_id.to_owned();
        let (limits, clock) = (*self.limits(), Arc::clone(self.clock()));
        let compiled = tokio::task::spawn_blocking(move || {
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
            let blocks = compiler.compile(&text, &options);
            if !is_final {
                return (text, compiler, blocks);
            }
            let blocks = blocks
                .into_iter()
                .map(|b| {
                    let mut block = Block::clone(&b);
                    block.revision = Some(block_revision(&block));
                    Arc::new(block)
                })
                .collect();
            (text, compiler, blocks)
        })
        .await;
        match compiled {
            Ok(compiled) => Some(compiled),
            Err(e) => {
                tracing::error!(item_id, error = %e, "a reply's compile did not finish");
                None
            }
        }
    }

    /// Tells the host service of a preview of the reply `item_id` unless it need not hear
    /// of it: once it admitted the reply, and while the reply opens no UI fence or its text
    /// and blocks do not admit it by themselves (see [`ui_host::UiQueries::observe`]).
    async fn observe_preview(
        &self,
        chat_id: &str,
        item_id: &str,
        draft: &mut ReplyDraft,
        blocks: &[Arc<Block>],
    ) {
        if !draft.observed
            && has_fence(&draft.text, ui_core::FENCE_LANGUAGE)
            && ui_host::admits_by_content(&draft.text, blocks)
        {
            draft.observed = self.queries().observe(chat_id, item_id, false).await;
        }
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
        let max = self.chat_limits().item_text_bytes;
        // The draft's text is the stored one unless the store refuses the append, so only
        // a draft that the delta keeps within the limit is tried; anything else reads the
        // item.
        if let Some(draft) = self.drafts().take(chat_id, item_id)
            && draft.text.len() + delta.len() <= max
            && let Some(progress) = self.append_to_draft(chat_id, item_id, draft, delta).await?
        {
            return Ok(progress);
        }
        let item = self
            .store()
            .stored_item(chat_id, item_id)
            .await?
            .ok_or_else(no_item)?;
        if !item.assistant || !item.streaming {
            return Err(not_streaming());
        }
        if item.text.len() + delta.len() > max {
            return Err(too_long(max));
        }
        let text = item.text + delta;
        let (text, compiler, blocks) = self
            .compile(item_id, text.clone(), false, UiCompiler::new())
            .await
            .unwrap_or_else(|| (text, UiCompiler::new(), Vec::new()));
        let progress = ReplyProgress {
            id: item_id.to_owned(),
            streaming: true,
            bytes: text.len(),
            blocks: blocks.len(),
        };
        let rev = self
            .store()
            .update_reply(
                chat_id,
                item_id,
                ReplyUpdate {
                    text: text.clone(),
                    blocks: blocks.clone(),
                    streaming: true,
                },
            )
            .await?
            .ok_or_else(no_item)?;
        let mut draft = ReplyDraft::new(text, rev);
        draft.compiler = compiler;
        self.observe_preview(chat_id, item_id, &mut draft, &blocks)
            .await;
        self.drafts().put(chat_id, item_id, draft);
        Ok(progress)
    }

    /// [`AppState::append_delta`] from the reply's draft: compiles the preview resuming
    /// from the previous one, and stores the delta and the blocks that changed. `None`
    /// when the store refused the append (the draft is then dropped, and the caller reads
    /// the item).
    async fn append_to_draft(
        &self,
        chat_id: &str,
        item_id: &str,
        mut draft: ReplyDraft,
        delta: &str,
    ) -> Result<Option<ReplyProgress>, ApiError> {
        draft.text.push_str(delta);
        let (text, compiler) = (
            std::mem::take(&mut draft.text),
            std::mem::take(&mut draft.compiler),
        );
        let Some((text, compiler, blocks)) = self.compile(item_id, text, false, compiler).await
        else {
            return Ok(None);
        };
        (draft.text, draft.compiler) = (text, compiler);
        let writes = draft.block_writes(&blocks).map_err(DbError::from)?;
        if !self
            .store()
            .append_reply(chat_id, item_id, draft.rev, delta, writes)
            .await?
        {
            return Ok(None);
        }
        draft.rev += 1;
        let progress = ReplyProgress {
            id: item_id.to_owned(),
            streaming: true,
            bytes: draft.text.len(),
            blocks: blocks.len(),
        };
        self.observe_preview(chat_id, item_id, &mut draft, &blocks)
            .await;
        self.drafts().put(chat_id, item_id, draft);
        Ok(Some(progress))
    }

    /// Finishes the streaming reply `item_id` (with `text` as its whole text when given):
    /// compiles it with the host's query schemas, gives every block its revision, stores
    /// it, and tells the host service (`observe`, final), which freezes the first
    /// readings. With `wait`, answers once they are frozen (at most the configured read
    /// timeout plus a margin, [`freeze_wait_ms`]), so the item it returns carries them.
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
            // The previews' compiler: the final compile reuses what they left.
            let compiler = self
                .drafts()
                .take(chat_id, item_id)
                .map(|d| d.compiler)
                .unwrap_or_default();
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
            let blocks = self
                .compile(item_id, text.clone(), true, compiler)
                .await
                .map(|(_, _, blocks)| blocks)
                .unwrap_or_default();
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
    /// freeze runs any more, or the configured read timeout plus a margin passed
    /// ([`freeze_wait_ms`]).
    async fn wait_for_freeze(&self, chat_id: &str, item_id: &str) {
        let clock = self.clock();
        let deadline = clock
            .now_ms()
            .saturating_add(freeze_wait_ms(self.limits().host.read_timeout()));
        let blocks = self.limits().reply.blocks() as usize;
        loop {
            let item = match self.store().stored_item(chat_id, item_id).await {
                Ok(Some(item)) => item,
                Ok(None) => return,
                Err(e) => {
                    // The answer then carries what the store holds; the freeze goes on.
                    tracing::warn!(
                        chat = chat_id,
                        item = item_id,
                        error = %e,
                        "reading the item while waiting for its freeze failed"
                    );
                    return;
                }
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A reply of three blocks (one that reads a query, one with a link tag) between prose.
    fn reply() -> String {
        let mut text = String::new();
        for i in 0..3 {
            text.push_str(&format!(
                "Paragraph {i} of prose — with ünïcode — before the block.\n\n```ui\n\
                 $branch = \"main\"\n$runs = @Query(\"ci.runs\", {{branch: $branch}})\n\
                 <Summary tone=\"warning\">Pipeline #{i} on {{$branch}}</Summary>\n\
                 <Stats><Stat label=\"Passed\" value={{12}}/><Stat label=\"Failed\" value={{2}}/></Stats>\n\
                 <File path=\"src/lib.rs\" line={{{i}}}>Failing</File>\n```\n\
                 After block {i}.\n"
            ));
        }
        text
    }

    /// The blocks of a fresh compile of `text`, as JSON (the stored blocks went through it).
    async fn fresh(
        state: &AppState,
        item_id: &str,
        text: &str,
        is_final: bool,
    ) -> serde_json::Value {
        let (_, _, blocks) = state
            .compile(item_id, text.to_owned(), is_final, UiCompiler::new())
            .await
            .unwrap();
        serde_json::to_value(&blocks).unwrap()
    }

    async fn stored(state: &AppState, chat_id: &str, item_id: &str) -> ChatItem {
        state
            .store()
            .chat_item(chat_id, item_id)
            .await
            .unwrap()
            .unwrap()
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_reply_streamed_in_deltas_is_stored_as_a_fresh_compile_gives_it() {
        let (state, dir) = crate::state::temp_state("deltas").await;
        let chat = state
            .store()
            .create_chat("alice", "web", "t")
            .await
            .unwrap();
        let item = state.start_reply(&chat.id, "").await.unwrap();
        let text = reply();
        let chars: Vec<char> = text.chars().collect();
        let mut sent = String::new();
        for (n, delta) in chars.chunks(5).enumerate() {
            let delta: String = delta.iter().collect();
            sent.push_str(&delta);
            let progress = state
                .append_delta(&chat.id, &item.id, &delta)
                .await
                .unwrap();
            assert_eq!(progress.bytes, sent.len());
            let now = stored(&state, &chat.id, &item.id).await;
            assert_eq!(now.text, sent);
            assert_eq!(
                serde_json::to_value(&now.ui).unwrap(),
                fresh(&state, &item.id, &sent, false).await,
                "after delta {n}"
            );
            assert_eq!(progress.blocks, now.ui.len());
        }
        assert_eq!(state.drafts().len(), 1);
        // The host service heard of the reply while it streamed: its access is captured.
        let mut captured = false;
        for _ in 0..200 {
            let now = stored(&state, &chat.id, &item.id).await;
            if now.ui_queries.is_some() {
                captured = true;
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        assert!(captured, "the capture started while the reply streamed");
        let done = state
            .finish_reply(&chat.id, &item.id, None, false)
            .await
            .unwrap();
        assert_eq!(state.drafts().len(), 0);
        assert_eq!(done.text, text);
        assert_eq!(
            serde_json::to_value(&done.ui).unwrap(),
            fresh(&state, &item.id, &text, true).await
        );
        let refused = state.append_delta(&chat.id, &item.id, "more").await;
        assert_eq!(refused.unwrap_err().code(), ErrorCode::ItemNotStreaming);
        state.sync().shutdown().await;
        std::fs::remove_dir_all(&dir).ok();
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_draft_that_no_longer_matches_the_store_is_not_used() {
        let (state, dir) = crate::state::temp_state("stale-draft").await;
        let chat = state
            .store()
            .create_chat("alice", "web", "t")
            .await
            .unwrap();
        let item = state
            .start_reply(&chat.id, "Start\n```ui\n<Text>a")
            .await
            .unwrap();
        state.append_delta(&chat.id, &item.id, "b").await.unwrap();
        // Another writer (say, another process on the same file) changes the text, to one
        // as long as the draft's.
        let other = "Other\n```ui\n<Badge>x".to_owned();
        state
            .store()
            .update_reply(
                &chat.id,
                &item.id,
                ReplyUpdate {
                    text: other.clone(),
                    blocks: Vec::new(),
                    streaming: true,
                },
            )
            .await
            .unwrap();
        state.append_delta(&chat.id, &item.id, "y").await.unwrap();
        let now = stored(&state, &chat.id, &item.id).await;
        let text = other + "y";
        assert_eq!(now.text, text);
        assert_eq!(
            serde_json::to_value(&now.ui).unwrap(),
            fresh(&state, &item.id, &text, false).await
        );
        // The draft made from the stored reply goes on delta by delta.
        state
            .append_delta(&chat.id, &item.id, "</Badge>")
            .await
            .unwrap();
        let text = text + "</Badge>";
        let now = stored(&state, &chat.id, &item.id).await;
        assert_eq!(now.text, text);
        assert_eq!(
            serde_json::to_value(&now.ui).unwrap(),
            fresh(&state, &item.id, &text, false).await
        );
        // A delta over the limit is refused, whatever the draft says.
        let max = state.chat_limits().item_text_bytes;
        let big = "x".repeat(max);
        let refused = state.append_delta(&chat.id, &item.id, &big).await;
        assert_eq!(refused.unwrap_err().code(), ErrorCode::PayloadTooLarge);
        assert_eq!(stored(&state, &chat.id, &item.id).await.text, text);
        state.sync().shutdown().await;
        std::fs::remove_dir_all(&dir).ok();
    }
}
