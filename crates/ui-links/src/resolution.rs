//! [`LinkResolution`]: the host's answer for one link (`host.md` §2.4, §13.5).

use serde::{Deserialize, Serialize};
use serde_json::Value as Json;
use ui_core::{Budget, FrozenClock, HostLimits, UiLimits, Value};

use crate::target::LinkTarget;

/// Whether a link is drawn as a chip a person can open, or as plain text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "lowercase")]
pub enum LinkState {
    /// An openable chip; needs a target.
    Chip,
    /// Plain text.
    #[default]
    Plain,
}

/// The host's resolution of a link (`UiLinkResolution`, `ChatUiLinkReading` on the wire).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[cfg_attr(
    feature = "schema",
    schemars(rename = "UiLinkResolution", deny_unknown_fields)
)]
#[serde(rename_all = "camelCase")]
pub struct LinkResolution {
    /// Chip or plain.
    pub state: LinkState,
    /// What the chip opens; required for a chip.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<LinkTarget>,
    /// The host's name for it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    /// Working directory the host opens it in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    /// Path relative to `cwd`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub relative_path: Option<String>,
    /// The host view that opens it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub view_id: Option<String>,
    /// The project it belongs to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub project_id: Option<String>,
    /// Whether a changed file is staged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub staged: Option<bool>,
    /// Whether a changed file has conflicts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conflicted: Option<bool>,
    /// Stable reason code of a plain link (an open set).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
    /// Why the link is plain, for people.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

impl LinkResolution {
    /// A plain resolution with an optional stable `code` and a `reason` truncated to the
    /// host's reason limit (`limits.reason()` UTF-16 units).
    pub fn plain(code: Option<&str>, reason: impl AsRef<str>, limits: &HostLimits) -> Self {
        let max = limits.reason() as usize;
        LinkResolution {
            state: LinkState::Plain,
            code: code.map(str::to_owned),
            reason: Some(ui_core::text::truncate_utf16(reason.as_ref(), max).to_owned()),
            ..LinkResolution::default()
        }
    }

    /// A chip that opens `target`.
    pub fn chip(target: LinkTarget) -> Self {
        LinkResolution {
            state: LinkState::Chip,
            target: Some(target),
            ..LinkResolution::default()
        }
    }

    /// Checks a resolution: a chip needs a valid target.
    ///
    /// # Errors
    /// A message naming what is wrong.
    pub fn validate(&self, limits: &HostLimits) -> Result<(), String> {
        match (&self.state, &self.target) {
            (LinkState::Chip, None) => Err("a chip needs a target".to_owned()),
            (_, Some(target)) => target.validate(limits).map_err(|e| e.to_string()),
            (LinkState::Plain, None) => Ok(()),
        }
    }

    /// Reads a host's answer (`host.md` §13.5): the value is copied under the `budget`
    /// limits, parsed (unknown fields dropped) and validated against `limits`. An answer
    /// that fails becomes a plain resolution with the failure as reason and no code; a
    /// plain answer keeps its own code and reason.
    pub fn from_host_answer(answer: &Json, limits: &HostLimits, budget: UiLimits) -> Self {
        // A count of work, not of time: the copy's clock never advances.
        let clock = FrozenClock(0.0);
        let mut budget = Budget::new(budget, &clock);
        if let Err(f) = budget.copy_value(&Value::from(answer)) {
            return LinkResolution::plain(None, f.message, limits);
        }
        let parsed: LinkResolution = match serde_json::from_value(answer.clone()) {
            Ok(r) => r,
            Err(e) => return LinkResolution::plain(None, e.to_string(), limits),
        };
        match parsed.validate(limits) {
            Ok(()) => parsed,
            Err(reason) => LinkResolution::plain(None, reason, limits),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn wire_shape_and_validation() {
        let chip = LinkResolution::from_host_answer(
            &json!({
                "state": "chip", "target": {"type": "File", "path": "a.rs", "line": 3},
                "label": "a.rs", "relativePath": "src/a.rs", "extra": 1,
            }),
            &HostLimits::DEFAULT,
            UiLimits::DEFAULT,
        );
        assert_eq!(chip.state, LinkState::Chip);
        assert_eq!(chip.relative_path.as_deref(), Some("src/a.rs"));
        assert_eq!(
            serde_json::to_value(&chip).unwrap(),
            json!({"state": "chip", "target": {"type": "File", "path": "a.rs", "line": 3},
                   "label": "a.rs", "relativePath": "src/a.rs"})
        );
        let no_target = LinkResolution::from_host_answer(
            &json!({"state": "chip"}),
            &HostLimits::DEFAULT,
            UiLimits::DEFAULT,
        );
        assert_eq!(no_target.state, LinkState::Plain);
        assert_eq!(no_target.code, None);
        let bad_sha = LinkResolution::from_host_answer(
            &json!({"state": "chip", "target": {"type": "Commit", "sha": "xyz"}}),
            &HostLimits::DEFAULT,
            UiLimits::DEFAULT,
        );
        assert_eq!(bad_sha.state, LinkState::Plain);
        let extra_field = LinkResolution::from_host_answer(
            &json!({"state": "chip", "target": {"type": "Node", "id": "n", "more": 1}}),
            &HostLimits::DEFAULT,
            UiLimits::DEFAULT,
        );
        assert_eq!(extra_field.state, LinkState::Plain);
        let plain = LinkResolution::from_host_answer(
            &json!({"state": "plain", "code": "target-unavailable", "reason": "gone"}),
            &HostLimits::DEFAULT,
            UiLimits::DEFAULT,
        );
        assert_eq!(plain.code.as_deref(), Some("target-unavailable"));
        let forbidden = LinkResolution::from_host_answer(
            &json!({"state": "plain", "__proto__": {}}),
            &HostLimits::DEFAULT,
            UiLimits::DEFAULT,
        );
        assert_eq!(forbidden.code, None);
        assert!(
            LinkResolution::plain(None, "x".repeat(500), &HostLimits::DEFAULT)
                .reason
                .unwrap()
                .len()
                == 240
        );
    }
}
