//! Reusing an earlier preview of the same block.
//!
//! Given the previous compile (its source, its block and the [`Checkpoint`] it left) and
//! the new, longer text, [`resume`] either restores the parse at the checkpoint and hands
//! back what the compile reuses, or answers `None`: compile afresh. The compile then runs
//! as a fresh one does, taking the reused nodes and replaying their charges where a fresh
//! compile would compile them (see [`compile_block_with`](super::compile_block_with) for
//! why the result is the same).

use std::sync::Arc;

use ui_core::{Budget, Failure};

use super::{Checkpoint, Restored, Segment};
use crate::block::{Block, Node};
use crate::syntax::{Decl, DiagSink, Resume, Syntax, parse_resumed};

/// An earlier compile of the same block: its source, its block, and the checkpoint it
/// left.
#[derive(Debug)]
pub(crate) struct Previous<'p> {
    pub(crate) source: &'p str,
    /// The finished nodes before the checkpoint are reused: moved out when the block is not
    /// shared (it then loses them), cloned otherwise.
    pub(crate) block: &'p mut Arc<Block>,
    pub(crate) checkpoint: Box<Checkpoint>,
}

/// What a resumed parse hands the compile.
pub(super) struct Resumed<'s> {
    /// The parse from the checkpoint on (see [`parse_resumed`]).
    pub(super) syntax: Syntax<'s>,
    /// The declarations, all parsed before the checkpoint.
    pub(super) decls: Vec<Decl>,
    /// The finished top-level nodes before the checkpoint, and their compile.
    pub(super) top: Vec<Node>,
    pub(super) top_segment: Segment,
    /// For each tag open at the checkpoint, outermost first: what the previous compile left
    /// of it.
    pub(super) restored: Vec<Option<Restored>>,
}

/// Resumes the compile of `source` from `previous`, whose checkpoint applies to it:
/// `Ok(None)` when it cannot (the parse cannot resume, or the previous block lacks the
/// nodes), and the caller compiles afresh. `Err` is a whole-block failure.
pub(super) fn resume<'s>(
    source: &'s str,
    is_final: bool,
    sink: &DiagSink<'_>,
    budget: &mut Budget<'_>,
    previous: Previous<'_>,
    keep: bool,
) -> Result<Option<Resumed<'s>>, Failure> {
    let c = *previous.checkpoint;
    let mut counts = Vec::with_capacity(c.open.len() + 1);
    counts.push(c.top);
    counts.extend(c.open.iter().map(|level| level.tag.children));
    let mut tags = Vec::with_capacity(c.open.len());
    let mut segments = Vec::with_capacity(c.open.len());
    for level in c.open {
        tags.push(level.tag);
        segments.push((level.children, level.own));
    }
    let resume = Resume {
        at: c.at,
        steps: c.parse.steps,
        iterations: c.parse.iterations,
        nodes: c.parse.nodes,
        diagnostics: c.parse_diagnostics,
        open: tags,
    };
    let Some(syntax) = parse_resumed(source, is_final, sink, budget, resume, keep)? else {
        return Ok(None);
    };
    let Some(taken) = take_nodes(previous.block, &counts) else {
        return Ok(None);
    };
    let mut finished = taken.finished.into_iter();
    let top = finished.next().unwrap_or_default();
    let restored = finished
        .zip(taken.open)
        .zip(segments)
        .map(|((finished, node), (children, own))| {
            Some(Restored {
                node,
                own,
                finished,
                children,
            })
        })
        .collect();
    Ok(Some(Resumed {
        syntax,
        decls: c.decls,
        top,
        top_segment: c.top_segment,
        restored,
    }))
}

/// What a resumed compile takes from the block compiled at the checkpoint, for the top level
/// and each tag open at the checkpoint.
struct Taken {
    /// The finished nodes before the checkpoint: the first `counts[0]` top-level nodes,
    /// then the first `counts[1]` children of top-level node `counts[0]` (the outermost open
    /// tag), and so on down the open tags.
    finished: Vec<Vec<Node>>,
    /// The open tags' nodes, outermost first, without their children.
    open: Vec<Node>,
}

/// [`Taken`] from `block`: moved out when the block is not shared (which leaves it without
/// nodes), cloned otherwise; `None` when the block lacks them.
fn take_nodes(block: &mut Arc<Block>, counts: &[usize]) -> Option<Taken> {
    let depth = counts.len() - 1;
    let mut taken = Taken {
        finished: Vec::with_capacity(depth + 1),
        open: Vec::with_capacity(depth),
    };
    if let Some(block) = Arc::get_mut(block) {
        let mut nodes = std::mem::take(&mut block.nodes);
        for (level, &count) in counts.iter().enumerate() {
            if level < depth {
                nodes.truncate(count + 1);
                let mut open = nodes.pop().filter(|_| nodes.len() == count)?;
                let deeper = std::mem::take(&mut open.children);
                taken.open.push(open);
                taken.finished.push(std::mem::replace(&mut nodes, deeper));
            } else {
                (nodes.len() >= count).then_some(())?;
                nodes.truncate(count);
                taken.finished.push(std::mem::take(&mut nodes));
            }
        }
    } else {
        let mut nodes: &[Node] = &block.nodes;
        for (level, &count) in counts.iter().enumerate() {
            taken.finished.push(nodes.get(..count)?.to_vec());
            if level < depth {
                let open = nodes.get(count)?;
                taken.open.push(without_children(open));
                nodes = &open.children;
            }
        }
    }
    Some(taken)
}

/// A copy of `node` without its children.
fn without_children(node: &Node) -> Node {
    Node {
        id: node.id.clone(),
        kind: node.kind.clone(),
        props: node.props.clone(),
        expressions: node.expressions.clone(),
        bindings: node.bindings.clone(),
        children: Vec::new(),
        complete: node.complete,
        fallback: String::new(),
        error: node.error,
        start: node.start,
        end: node.end,
        bytes: node.bytes,
    }
}
