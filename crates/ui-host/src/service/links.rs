//! `ui.link` (`host.md` §13.3): a visible link target of a complete block, resolved by the
//! host with the writing chat's access, or `plain` with the reason.

use std::sync::Arc;

use ui_core::{HostCode, HostLimits};
use ui_links::{LinkResolution, link_targets};

use super::{IssueRequest, UiQueries};
use crate::clock::BudgetClock;
use crate::payload::LinkPayload;
use crate::reading::HostError;

impl UiQueries {
    // ---- ui.link (§13.3) ----

    /// Answers `ui.link`: always a resolution, `plain` with a code when the host cannot or
    /// will not make it a chip.
    pub async fn link(self: &Arc<Self>, p: &LinkPayload) -> LinkResolution {
        let Some(resolver) = self.host.links() else {
            return plain(
                &self.limits,
                HostCode::LinksUnsupported,
                "The host resolves no links.",
            );
        };
        let Some((item, block)) = self
            .stored_block(&p.chat_id, &p.item_id, &p.block_id, &p.revision)
            .await
        else {
            return plain(
                &self.limits,
                HostCode::BlockStale,
                "The block changed or is not final.",
            );
        };
        if item.ui_queries.is_none() {
            return plain(
                &self.limits,
                HostCode::AccessUnavailable,
                "The item was never captured.",
            );
        }
        let Some(access) = self.access(&p.chat_id, &p.item_id).await else {
            return plain(
                &self.limits,
                HostCode::AccessUnavailable,
                "The writing chat's access is not available.",
            );
        };
        let issued = match self
            .issued_values(&IssueRequest {
                chat_id: &p.chat_id,
                item_id: &p.item_id,
                block_id: &p.block_id,
                revision: &p.revision,
                values: &p.values,
                reads: &p.reads,
                for_choice: false,
            })
            .await
        {
            Ok(v) => v,
            Err(r) => return LinkResolution::plain(r.code.as_deref(), &r.message, &self.limits),
        };
        let clock = BudgetClock(&*self.clock);
        let targets = match link_targets(
            &block,
            &p.values,
            &issued,
            self.ui_limits,
            &self.limits,
            &clock,
        ) {
            Ok(t) => t,
            Err(f) => return LinkResolution::plain(None, &f.message, &self.limits),
        };
        let Some(target) = targets.get(&p.node_id) else {
            return plain(
                &self.limits,
                HostCode::LinkUnsupported,
                "The node is not a visible link of this block.",
            );
        };
        // A chat deleted meanwhile: never ask `link` about a blank chat.
        let Some(info) = self.store.chat_info(&p.chat_id).await else {
            return plain(&self.limits, HostCode::BlockStale, "The chat is gone.");
        };
        self.resolved(resolver.link(&info, &access, target)).await
    }
}

impl UiQueries {
    /// The resolution of a host's `link` call, bounded by the read timeout
    /// (`host.md` §17.7: a link that does not settle in time is plain, `timed-out`).
    pub(super) async fn resolved(
        &self,
        link: impl std::future::Future<Output = Result<serde_json::Value, HostError>>,
    ) -> LinkResolution {
        match self.within_timeout(link).await {
            Some(Ok(answer)) => {
                LinkResolution::from_host_answer(&answer, &self.limits, self.ui_limits)
            }
            Some(Err(e)) => LinkResolution::plain(e.code(), e.reason(), &self.limits),
            None => plain(
                &self.limits,
                HostCode::TimedOut,
                "The host did not resolve the link in time.",
            ),
        }
    }
}

pub(super) fn plain(limits: &HostLimits, code: HostCode, reason: &str) -> LinkResolution {
    LinkResolution::plain(Some(code.as_str()), reason, limits)
}
