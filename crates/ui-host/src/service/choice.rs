//! The query values a choice or link may rely on (`host.md` §12.2) and `chat.uiChoice`
//! (§12.1).

use std::sync::Arc;

use indexmap::{Equivalent, IndexMap};
use ui_compiler::{Block, resolve_choice};
use ui_core::{HostCode, Record, Value, WireCode};

use super::key::{QueryIdRef, QueryKeyRef, Structural, reading_key_text};
use super::{UiQueries, lock};
use crate::clock::BudgetClock;
use crate::payload::{ChoicePayload, QueryPayload};
use crate::reading::{QueryReading, WireRefusal};
use crate::source::UiSource;
use crate::store::{ChoiceAnswer, ChoiceOrigin, StoreError, StoredBlock, StoredItem};

/// What a choice or link asks issued query values for (`host.md` §12.2).
#[derive(Debug, Clone, Copy)]
pub struct IssueRequest<'a> {
    /// The chat.
    pub chat_id: &'a str,
    /// The assistant item.
    pub item_id: &'a str,
    /// The block.
    pub block_id: &'a str,
    /// The block revision the page drew.
    pub revision: &'a str,
    /// The input values on screen.
    pub values: &'a Record,
    /// The read id of each query's reading on screen.
    pub reads: &'a IndexMap<String, String>,
    /// Whether a choice asks (an answered block then needs no values).
    pub for_choice: bool,
}

impl UiQueries {
    // ---- issued query values (§12.2) ----

    /// The query values a choice or link may rely on (`choiceValues`): for every declared
    /// query, the reading the page names in `reads`, accepted only when it was read for the
    /// current arguments (cache, any age) or is the frozen first reading for the defaults.
    ///
    /// # Errors
    /// A [`WireRefusal`]: `stale-ui-block`, `refused-query` (undeclared query, unregistered
    /// source, missing access, argument failures, a refusal of `authorize`) or
    /// `stale-ui-query` with `stale-read`.
    pub async fn issued_values(
        self: &Arc<Self>,
        request: &IssueRequest<'_>,
    ) -> Result<Record, WireRefusal> {
        let IssueRequest {
            chat_id,
            item_id,
            block_id,
            revision,
            values,
            reads,
            for_choice,
        } = *request;
        let Some(item) = self.store.item(chat_id, item_id).await else {
            return Ok(Record::default());
        };
        let Some(block) = item.blocks.iter().find(|b| b.id == block_id).cloned() else {
            return Ok(Record::default());
        };
        if for_choice
            && item
                .answers
                .get(block_id)
                .is_some_and(|a| a.origin.revision == revision)
        {
            return Ok(Record::default());
        }
        if block.queries.is_empty() {
            return Ok(Record::default());
        }
        let Some(access) = self.access(chat_id, item_id).await else {
            return Err(WireRefusal::new(
                WireCode::RefusedQuery,
                Some(HostCode::AccessUnavailable),
                "The writing chat's access is not available.",
            ));
        };
        // A chat deleted meanwhile: never ask `authorize` about a blank chat.
        let Some(info) = self.store.chat_info(chat_id).await else {
            return Err(WireRefusal::new(
                WireCode::StaleUiBlock,
                Some(HostCode::BlockStale),
                "The chat is gone.",
            ));
        };
        let mut issued = Record::default();
        for name in block.queries.keys() {
            let p = QueryPayload {
                chat_id: chat_id.to_owned(),
                item_id: item_id.to_owned(),
                block_id: block_id.to_owned(),
                revision: revision.to_owned(),
                query: name.clone(),
                values: values.clone(),
                seen: None,
            };
            let (source, args) = self.admit_for_values(&p).await?;
            match self
                .within_timeout(source.authorize(&info, &access, &args))
                .await
            {
                Some(Ok(())) => {}
                Some(Err(e)) => return Err(WireRefusal::from_host(&e)),
                None => {
                    return Err(WireRefusal::new(
                        WireCode::RefusedQuery,
                        Some(HostCode::TimedOut),
                        "The source's authorization did not answer in time.",
                    ));
                }
            }
            let stale = || {
                WireRefusal::new(
                    WireCode::StaleUiQuery,
                    Some(HostCode::StaleRead),
                    "The values on screen are no longer the ones the host read.",
                )
            };
            let Some(read_id) = reads.get(name) else {
                return Err(stale());
            };
            let parsed = Structural::new(Arc::clone(&args));
            let current = QueryKeyRef::reading(QueryIdRef::of(&p), &parsed);
            let cached = {
                let t = self.table.lock();
                t.cache
                    .get(read_id)
                    .filter(|e| current.equivalent(&e.key))
                    .map(|e| e.cached.reading.clone())
            };
            let reading = match cached {
                Some(r) => Some(r),
                None => match self
                    .frozen_for(&item, &block, name, read_id, &p, &args)
                    .await
                {
                    Some(r) => Some(r),
                    // Read by another process serving the same store (or evicted here).
                    None => self.kept_for(read_id, &p, &args).await,
                },
            };
            match reading {
                Some(r) if r.is_fresh() => {
                    issued.insert(name.clone(), r.value.unwrap_or_default());
                }
                _ => return Err(stale()),
            }
        }
        Ok(issued)
    }

    /// §6.1 steps 1–6 for issued values: failures are wire refusals.
    async fn admit_for_values(
        &self,
        p: &QueryPayload,
    ) -> Result<(Arc<dyn UiSource>, Arc<Record>), WireRefusal> {
        let Some(StoredBlock { block, .. }) = self
            .admitted_block(&p.chat_id, &p.item_id, &p.block_id, &p.revision)
            .await
        else {
            return Err(WireRefusal::new(
                WireCode::StaleUiBlock,
                Some(HostCode::BlockStale),
                "The block changed or is not final.",
            ));
        };
        let Some(query) = block
            .queries
            .get(&p.query)
            .filter(|_| block.queries.len() as u64 <= self.ui_host_limits.queries())
        else {
            return Err(WireRefusal::new(
                WireCode::RefusedQuery,
                Some(HostCode::QueryUndeclared),
                "The block does not declare this query.",
            ));
        };
        let Some(source) = self.host.sources().get(&query.source).cloned() else {
            return Err(WireRefusal::new(
                WireCode::RefusedQuery,
                Some(HostCode::SourceUnregistered),
                "The query's source is not registered.",
            ));
        };
        let args = self
            .arguments(&block, &p.query, &p.values, &*source)
            .map_err(|m| WireRefusal::new(WireCode::RefusedQuery, None, m))?;
        Ok((source, Arc::clone(args.value())))
    }

    /// The reading the store kept under `read_id` (by any process), when it was read for
    /// the same chat under the same key: the cache's rule (§12.2 step 4c), for a read id
    /// this process's cache does not hold.
    async fn kept_for(
        &self,
        read_id: &str,
        p: &QueryPayload,
        args: &Record,
    ) -> Option<QueryReading> {
        let kept = self.store.kept_reading(read_id).await?;
        (kept.chat_id == p.chat_id
            && kept.reading.read_id.as_deref() == Some(read_id)
            && kept.key == reading_key_text(p, args))
        .then_some(kept.reading)
    }

    /// The frozen reading of `name` when its revision and read id match and the current
    /// arguments equal the arguments of the defaults (§12.2 step 4d).
    async fn frozen_for(
        &self,
        item: &StoredItem,
        block: &Block,
        name: &str,
        read_id: &str,
        p: &QueryPayload,
        args: &Arc<Record>,
    ) -> Option<QueryReading> {
        let frozen = item.ui_queries.as_ref()?.blocks.get(&block.id)?;
        if Some(frozen.revision.as_str()) != block.revision.as_deref() {
            return None;
        }
        let reading = frozen.readings.get(name)?;
        if reading.read_id.as_deref() != Some(read_id) {
            return None;
        }
        let source = self.host.sources().get(&block.queries.get(name)?.source)?;
        let defaults = self
            .arguments(block, &p.query, &Record::default(), &**source)
            .ok()?;
        let defaults = Value::Record(Arc::clone(defaults.value()));
        (defaults == Value::Record(Arc::clone(args))).then(|| reading.clone())
    }

    // ---- chat.uiChoice (§12.1) ----

    /// Answers `chat.uiChoice`: checks the issued query values and the input, resolves the
    /// choice, sends its context as the person's next message and records the answer. A
    /// repeated identical pick answers the recorded answer again.
    ///
    /// # Errors
    /// A [`WireRefusal`] with the wire code of `host.md` §12.4.
    pub async fn choose(self: &Arc<Self>, p: &ChoicePayload) -> Result<ChoiceAnswer, WireRefusal> {
        let issued = self
            .issued_values(&IssueRequest {
                chat_id: &p.chat_id,
                item_id: &p.item_id,
                block_id: &p.block_id,
                revision: &p.revision,
                values: &p.values,
                reads: &p.reads,
                for_choice: true,
            })
            .await?;
        let _turn = ChoiceTurn::take(self, p).await;
        let Some((item, block)) = self
            .stored_block(&p.chat_id, &p.item_id, &p.block_id, &p.revision)
            .await
        else {
            return Err(WireRefusal::new(
                WireCode::StaleUiBlock,
                None,
                "The block changed or is not final.",
            ));
        };
        if let Some(answer) = item
            .answers
            .get(&p.block_id)
            .filter(|a| a.origin.revision == p.revision)
        {
            if answer.origin.choice_id == p.choice_id {
                return Ok(answer.clone());
            }
            return Err(WireRefusal::new(
                WireCode::UiAlreadyAnswered,
                None,
                "Another choice of this block was already sent.",
            ));
        }
        let clock = BudgetClock(&*self.clock);
        let selection = resolve_choice(
            &block,
            &p.choice_id,
            &p.values,
            &issued,
            self.ui_limits,
            &clock,
        )
        .map_err(|f| WireRefusal::from_failure(&f))?;
        let origin = ChoiceOrigin {
            item_id: p.item_id.clone(),
            block_id: p.block_id.clone(),
            revision: p.revision.clone(),
            choice_id: p.choice_id.clone(),
            label: selection.label,
            source_at: item.created_at,
            older: self.store.has_newer_item(&p.chat_id, &p.item_id).await,
            values: Some(selection.values),
            at: self.clock.now_ms(),
        };
        let failed = |e: StoreError| match e {
            StoreError::ChatFull(reason) => WireRefusal::new(WireCode::RefusedChoice, None, reason),
            e => {
                tracing::error!(chat_id = %p.chat_id, item_id = %p.item_id, error = %e,
                    "a choice could not be stored");
                WireRefusal::new(
                    WireCode::Internal,
                    None,
                    "The choice could not be stored; send it again.",
                )
            }
        };
        let sent = self
            .store
            .send_choice(&p.chat_id, &origin, &selection.context)
            .await
            .map_err(failed)?;
        let answer = ChoiceAnswer { origin, sent };
        self.store
            .record_answer(&p.chat_id, answer.clone())
            .await
            .map_err(failed)?;
        Ok(answer)
    }
}

/// A block, by chat, item and block id: the unit in which choices take turns.
pub(super) type BlockKey = (String, String, String);

/// A turn at answering one block's choices. Two picks in one block must not both pass the
/// "already answered" check, so they take turns; the turn is per block, so a pick never
/// waits behind another block's store writes. The map entry goes with the last holder or
/// waiter of the turn, also when its request is dropped while waiting.
struct ChoiceTurn<'a> {
    service: &'a UiQueries,
    key: BlockKey,
    turn: Arc<tokio::sync::Mutex<()>>,
    held: Option<tokio::sync::OwnedMutexGuard<()>>,
}

impl<'a> ChoiceTurn<'a> {
    async fn take(service: &'a UiQueries, p: &ChoicePayload) -> ChoiceTurn<'a> {
        let key = (p.chat_id.clone(), p.item_id.clone(), p.block_id.clone());
        let turn = Arc::clone(lock(&service.choices).entry(key.clone()).or_default());
        let mut this = ChoiceTurn {
            service,
            key,
            turn,
            held: None,
        };
        this.held = Some(Arc::clone(&this.turn).lock_owned().await);
        this
    }
}

impl Drop for ChoiceTurn<'_> {
    fn drop(&mut self) {
        // The guard holds a count of the turn too: release it first.
        drop(self.held.take());
        let mut turns = lock(&self.service.choices);
        // The map's count and this one: nobody else holds or waits for the turn.
        if Arc::strong_count(&self.turn) == 2 {
            turns.remove(&self.key);
        }
    }
}
