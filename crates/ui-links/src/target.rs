//! [`LinkTarget`] and [`link_targets`] (`host.md` §2.4, §13.2).

use indexmap::IndexMap;
use serde::{Deserialize, Serialize};
use ui_compiler::{Block, validated_view};
use ui_core::limits::{MAX_SHA_DIGITS, MIN_SHA_DIGITS};
use ui_core::{Clock, Failure, HostLimits, Record, UiLimits, Value};

/// What a link names: a tagged union on `type`, each variant closed.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[cfg_attr(feature = "schema", schemars(rename = "UiLinkTarget"))]
#[serde(tag = "type", deny_unknown_fields)]
pub enum LinkTarget {
    /// A project or worktree file, optionally at a line.
    File {
        /// The path as the agent knows it, 1..=4,096 characters.
        path: String,
        /// A positive line number.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        line: Option<u64>,
    },
    /// The changes made to one file.
    Diff {
        /// The path, 1..=4,096 characters.
        path: String,
    },
    /// A commit by its hash.
    Commit {
        /// 7..=64 hexadecimal digits.
        sha: String,
    },
    /// Something the host knows by an id.
    Node {
        /// The id, 1..=256 characters.
        id: String,
    },
}

/// Why a link target is invalid.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum LinkTargetError {
    /// A path that is empty or longer than the limit.
    #[error("the path must be 1 to {max} characters long")]
    Path {
        /// The longest path allowed.
        max: u64,
    },
    /// A `sha` that is not 7..=64 hexadecimal digits.
    #[error("the sha must be 7 to 64 hexadecimal digits")]
    Sha,
    /// A node id that is empty or longer than the limit.
    #[error("the node id must be 1 to {max} characters long")]
    NodeId {
        /// The longest id allowed.
        max: u64,
    },
    /// A line that is not a positive integer.
    #[error("the line must be a positive integer")]
    Line,
}

fn is_sha(s: &str) -> bool {
    (MIN_SHA_DIGITS..=MAX_SHA_DIGITS).contains(&s.len()) && s.bytes().all(|b| b.is_ascii_hexdigit())
}

impl LinkTarget {
    /// Checks the length and pattern rules of `host.md` §2.4 with `limits`.
    ///
    /// # Errors
    /// The first rule the target breaks.
    pub fn validate(&self, limits: &HostLimits) -> Result<(), LinkTargetError> {
        // Lengths in characters (Unicode code points), as the reference's zod 4 counts
        // a string's `min` and `max`: a character outside the BMP counts once.
        let within = |s: &str, max: u64| (1..=max).contains(&(s.chars().count() as u64));
        match self {
            LinkTarget::File { path, line } => {
                if !within(path, limits.link_path()) {
                    return Err(LinkTargetError::Path {
                        max: limits.link_path(),
                    });
                }
                if *line == Some(0) {
                    return Err(LinkTargetError::Line);
                }
            }
            LinkTarget::Diff { path } if !within(path, limits.link_path()) => {
                return Err(LinkTargetError::Path {
                    max: limits.link_path(),
                });
            }
            LinkTarget::Commit { sha } if !is_sha(sha) => return Err(LinkTargetError::Sha),
            LinkTarget::Node { id } if !within(id, limits.link_node_id()) => {
                return Err(LinkTargetError::NodeId {
                    max: limits.link_node_id(),
                });
            }
            _ => {}
        }
        Ok(())
    }

    /// The target an evaluated node names, if it is a link component whose props form a
    /// valid target (`{type, ...props}` against the target schema, §13.2 step 3).
    pub fn from_node(kind: &str, props: &Record, limits: &HostLimits) -> Option<LinkTarget> {
        let text = |key: &str| props.get(key).and_then(Value::as_str).map(str::to_owned);
        let only = |keys: &[&str]| props.keys().all(|k| keys.contains(&k.as_str()));
        let target = match kind {
            "File" if only(&["path", "line"]) => {
                let line = match props.get("line") {
                    None => None,
                    Some(v) => {
                        let x = v.as_f64()?;
                        if x.fract() != 0.0
                            || x < 1.0
                            || x > ui_core::limits::MAX_SAFE_INTEGER as f64
                        {
                            return None;
                        }
                        Some(x as u64)
                    }
                };
                LinkTarget::File {
                    path: text("path")?,
                    line,
                }
            }
            "Diff" if only(&["path"]) => LinkTarget::Diff {
                path: text("path")?,
            },
            "Commit" if only(&["sha"]) => LinkTarget::Commit { sha: text("sha")? },
            "Node" if only(&["id"]) => LinkTarget::Node { id: text("id")? },
            _ => return None,
        };
        target.validate(limits).ok().map(|()| target)
    }
}

/// The link targets of a complete block for a page's `input` and the host's issued query
/// readings (`uiLinkTargets`, `host.md` §13.2): the state is validated first, then every
/// live view — complete, without error, not under a failed or incomplete node, not inside a
/// false `Show` — that names a valid target, keyed by evaluated node id in document order.
/// The map has no cap; a host applies the 64-target limit where it freezes or checks links.
/// `limits` budget the evaluation; `host` bounds the targets (path and id lengths), so a
/// host's configured limits reach this check too.
///
/// # Errors
/// The failures of [`ui_compiler::validated_state`].
pub fn link_targets(
    block: &Block,
    input: &Record,
    queries: &Record,
    limits: UiLimits,
    host: &HostLimits,
    clock: &dyn Clock,
) -> Result<IndexMap<String, LinkTarget>, Failure> {
    let (_, view) = validated_view(block, input, queries, limits, clock)?;
    let mut targets = IndexMap::new();
    view.walk_live(&mut |node, _| {
        if let Some(target) = LinkTarget::from_node(&node.kind, &node.props, host) {
            targets.insert(node.id.clone(), target);
        }
    });
    Ok(targets)
}
