//! Reusing an earlier preview of the same block: the resume room.
//!
//! A compile meets this module through two doors. Before it starts, [`resume`] is given the
//! previous compile (its source, its block and the [`Checkpoint`] it left) and the new,
//! longer text, and either restores the parse at the checkpoint and hands back what the
//! compile reuses, or answers `None`: compile afresh. While it runs, the compile holds one
//! [`Reuse`]: it asks it for what the previous compile left of each tag open at the
//! checkpoint, replays those lumps through it, tells it where the top level and each tag
//! open at the parser's mark start and reach the mark, and at the end asks it for the
//! [`Checkpoint`] to leave. Everything a checkpoint is made of (segments, recordings,
//! restored tags) lives here; the compile of a node knows only those calls. The result is
//! the one a fresh compile gives (see [`compile_block_with`](super::compile_block_with)
//! for why; property tests compare the two).

use std::sync::Arc;

use ui_core::{Budget, Code, Diagnostic, Failure, Props, ReplyLimits, TextRange, UiLimits};

use super::{Charges, CompileOptions};
use crate::block::{Block, Node};
use crate::syntax::{Decl, DiagSink, Mark, OpenTag, Resume, Syntax, parse_resumed};

/// A stretch of compile work that a resumed compile replays instead of doing again: what
/// it charged and every diagnostic it pushed (none was dropped by the cap). What it built is
/// taken from the previous block.
#[derive(Debug, Default)]
pub(super) struct Segment {
    pub(super) charges: Charges,
    pub(super) diagnostics: Vec<Diagnostic>,
}

/// A tag open at a checkpoint: how to restore its parse, the compile of its finished
/// children, and, when it was still incomplete, the compile of the tag itself (§12.2 steps
/// 1–4: everything before its children), with the values of its expressions that its
/// fallback reads. The tag's own diagnostics carry its range, whose end moves with the
/// source: they are replayed with the new end.
#[derive(Debug)]
pub(super) struct OpenLevel {
    pub(super) tag: OpenTag,
    pub(super) children: Segment,
    pub(super) own: Option<(Segment, Props)>,
}

/// What a compile of a block leaves so that the next compile of a source extending it can
/// skip the work both share (see [`compile_block_with`](super::compile_block_with)).
///
/// It is taken at the parser's last [`Mark`](crate::syntax::Mark). The source up to and
/// including that byte fixes the parse up to it: the declarations, the diagnostics, the
/// charges, the tags open there and every finished node before it; `final` plays no part
/// in it (it only matters at the end of the input). The compile of a finished node depends
/// on nothing else but its effective parent and depth (fixed by the open tags), the defaults
/// (compiled again from the same declarations), the block id (compared with the previous
/// block's), the limits and `latest_attachment` (recorded here); not on `final` either. So
/// the checkpoint of a preview also serves the compile of the fence once it closes, and the
/// final call.
#[derive(Debug)]
pub(crate) struct Checkpoint {
    pub(super) limits: UiLimits,
    pub(super) reply_limits: ReplyLimits,
    pub(super) latest_attachment: Option<String>,
    /// The mark's byte offset and budget counters.
    pub(super) at: usize,
    pub(super) parse: Charges,
    /// The diagnostics the parser had kept before the mark.
    pub(super) parse_diagnostics: Vec<Diagnostic>,
    /// The parsed declarations (all before the mark).
    pub(super) decls: Vec<Decl>,
    /// How many top-level nodes lie before the mark, and their compile.
    pub(super) top: usize,
    pub(super) top_segment: Segment,
    /// The tags open at the mark, outermost first. The outermost is top-level node `top`,
    /// each next one the child after the finished children of the one before.
    pub(super) open: Vec<OpenLevel>,
}

impl Checkpoint {
    /// Whether a compile of `source` under `block_id` and `options` may resume from this
    /// checkpoint, taken by the compile of `previous_source` into the block `previous_id`.
    pub(super) fn applies(
        &self,
        source: &str,
        previous_source: &str,
        previous_id: &str,
        block_id: &str,
        options: &CompileOptions<'_>,
    ) -> bool {
        let at = self.at;
        previous_id == block_id
            && self.limits == options.limits
            && self.reply_limits == options.reply_limits
            && self.latest_attachment == options.latest_attachment
            && at < source.len()
            && at < previous_source.len()
            && source.as_bytes()[..=at] == previous_source.as_bytes()[..=at]
    }
}

/// The counters and the number of diagnostics at some point of a compile.
pub(super) type Point = (Charges, usize);

/// The segment between two points, if both were seen and no diagnostic of it was dropped
/// by the cap.
fn segment(
    from: Option<Point>,
    to: Option<Point>,
    diagnostics: &[Diagnostic],
    cap: usize,
) -> Option<Segment> {
    let ((from, start), (to, end)) = (from?, to?);
    (end < cap).then(|| Segment {
        charges: to.since(from),
        diagnostics: diagnostics[start..end].to_vec(),
    })
}

/// How the compile of a tag open at the parser's mark is being recorded for this compile's
/// checkpoint: the points where the tag's compile starts (`entry`), where its children
/// start (`from`) and where its children after the mark start (`to`); and, for an
/// incomplete tag, the values of its expressions.
#[derive(Debug, Default)]
struct Recording {
    pub(super) entry: Option<Point>,
    pub(super) from: Option<Point>,
    pub(super) to: Option<Point>,
    pub(super) incomplete: bool,
    pub(super) evaluated: Option<Props>,
}

/// What a resumed compile takes over for a tag open at the checkpoint.
pub(super) struct Restored {
    /// The tag's node in the previous block, without children.
    pub(super) node: Node,
    /// The compile of the tag itself, if it was incomplete, and its expressions' values.
    pub(super) own: Option<(Segment, Props)>,
    /// Its finished children and their compile.
    pub(super) finished: Vec<Node>,
    pub(super) children: Segment,
}

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

/// The resume room's part of one compile, the only way the compile reaches it: what a
/// resumed compile takes over from the previous one (the open tags it restores; whether a
/// replayed lump did not fit), and how this compile is recorded for the checkpoint it
/// leaves at the parser's mark (the points where the top level and each tag open at the
/// mark start and reach the mark). A fresh compile that leaves no checkpoint restores and
/// records nothing.
pub(super) struct Reuse {
    /// The parser's last mark, when this compile leaves a checkpoint.
    mark: Option<Mark>,
    /// One recording per tag open at the mark, outermost first.
    recording: Vec<Recording>,
    top_from: Option<Point>,
    top_to: Option<Point>,
    /// How many top-level nodes were taken from the previous compile.
    reused_top: usize,
    /// For each tag restored by a resumed parse (arena indices from 0): what the previous
    /// compile left of it.
    restored: Vec<Option<Restored>>,
    /// Set when a replayed segment did not fit the limits: the compile must start over.
    restart: bool,
}

impl Reuse {
    /// The room for a compile that leaves a checkpoint at `mark` (none without one).
    pub(super) fn new(mark: Option<Mark>) -> Self {
        let mut recording = Vec::new();
        recording.resize_with(
            mark.as_ref().map_or(0, |m| m.open.len()),
            Recording::default,
        );
        Reuse {
            mark,
            recording,
            top_from: None,
            top_to: None,
            reused_top: 0,
            restored: Vec::new(),
            restart: false,
        }
    }

    /// Takes over the open tags a resumed parse restored, and the number of top-level
    /// nodes taken from the previous block.
    pub(super) fn take_over(&mut self, restored: Vec<Option<Restored>>, top: usize) {
        self.restored = restored;
        self.reused_top = top;
    }

    /// Whether a replayed lump did not fit: the compile must start over.
    pub(super) fn must_restart(&self) -> bool {
        self.restart
    }

    /// What the previous compile left of the tag `idx`, once.
    pub(super) fn take_restored(&mut self, idx: usize) -> Option<Restored> {
        self.restored.get_mut(idx).and_then(Option::take)
    }

    /// Replays `segment` into `budget` and `diagnostics`: charges it as one lump and pushes
    /// its diagnostics under `cap`, with the range of `node` when given (the diagnostics of
    /// an open tag's own compile). When the lump does not fit, marks the compile for a
    /// restart and fails.
    pub(super) fn replay(
        &mut self,
        budget: &mut Budget<'_>,
        diagnostics: &mut Vec<Diagnostic>,
        cap: usize,
        segment: &Segment,
        node: Option<&Node>,
    ) -> Result<(), Failure> {
        let Charges {
            steps,
            iterations,
            nodes,
        } = segment.charges;
        if !budget.replay(steps, iterations, nodes)? {
            self.restart = true;
            return Err(Failure::new(
                Code::BudgetExceeded,
                "The compile starts over.",
            ));
        }
        for d in &segment.diagnostics {
            if diagnostics.len() >= cap {
                break;
            }
            let mut d = d.clone();
            if let Some(node) = node {
                debug_assert_eq!(d.range.start, node.start);
                d.range = TextRange::new(node.start, node.end);
                d.bytes = Some(node.bytes);
            }
            diagnostics.push(d);
        }
        Ok(())
    }

    /// The top-level nodes start compiling at `point`.
    pub(super) fn top_starts(&mut self, point: Point) {
        self.top_from = Some(point);
    }

    /// The compile reaches top-level node `i` (or the end, `i` being their number) at
    /// `point`.
    pub(super) fn top_reaches(&mut self, i: usize, point: impl FnOnce() -> Point) {
        if self.mark.as_ref().map(|m| m.top) == Some(i) {
            self.top_to = Some(point());
        }
    }

    /// The compile of the tag `idx` starts at `point`: the tag's level among those open at
    /// the mark, if it is one.
    pub(super) fn tag_starts(
        &mut self,
        idx: usize,
        point: impl FnOnce() -> Point,
    ) -> Option<usize> {
        let level = self
            .mark
            .as_ref()?
            .open
            .iter()
            .position(|open| open.idx == idx)?;
        self.recording[level].entry = Some(point());
        Some(level)
    }

    /// The children of the open tag at `level` start compiling at `point`.
    pub(super) fn children_start(&mut self, level: usize, incomplete: bool, point: Point) {
        self.recording[level].from = Some(point);
        self.recording[level].incomplete = incomplete;
    }

    /// The compile of the open tag at `level` reaches its child `i` (or the end, `i` being
    /// their number) at `point`.
    pub(super) fn child_reaches(&mut self, level: usize, i: usize, point: impl FnOnce() -> Point) {
        let at = self.mark.as_ref().map(|m| m.open[level].children);
        if at == Some(i) {
            self.recording[level].to = Some(point());
        }
    }

    /// The open tag at `level` is incomplete, and its expressions evaluate to `evaluated`.
    pub(super) fn incomplete_tag(&mut self, level: usize, evaluated: Props) {
        self.recording[level].evaluated = Some(evaluated);
    }

    /// The checkpoint this compile leaves, if it recorded every segment whole (no
    /// diagnostic dropped by the cap inside one) and can detach the open tags from `syntax`.
    pub(super) fn checkpoint(
        self,
        syntax: &mut Syntax<'_>,
        diagnostics: &[Diagnostic],
        cap: usize,
        options: &CompileOptions<'_>,
        decls: Vec<Decl>,
    ) -> Option<Box<Checkpoint>> {
        let mark = self.mark?;
        let top_segment = segment(self.top_from, self.top_to, diagnostics, cap)?;
        let mut open = Vec::with_capacity(mark.open.len());
        for (&at, r) in mark.open.iter().zip(self.recording) {
            let children = segment(r.from, r.to, diagnostics, cap)?;
            let own = match (r.incomplete, r.evaluated) {
                (true, Some(evaluated)) => {
                    Some((segment(r.entry, r.from, diagnostics, cap)?, evaluated))
                }
                _ => None,
            };
            let tag = OpenTag::take(syntax, at)?;
            open.push(OpenLevel { tag, children, own });
        }
        Some(Box::new(Checkpoint {
            limits: options.limits,
            reply_limits: options.reply_limits,
            latest_attachment: options.latest_attachment.clone(),
            at: mark.at,
            parse: Charges {
                steps: mark.steps,
                iterations: mark.iterations,
                nodes: mark.nodes,
            },
            parse_diagnostics: diagnostics[..mark.diagnostics].to_vec(),
            decls,
            top: self.reused_top + mark.top,
            top_segment,
            open,
        }))
    }
}
