//! The block parser (`language.md` §5–§8): declarations, tags, props, text and text
//! expressions, with streaming semantics and line-level recovery.
//!
//! The parser never fails on bad input: it returns the syntax tree plus diagnostics. The one
//! exception is a whole-block failure (a budget, or a forbidden declaration name), which the
//! compiler turns into the block's single diagnostic (§12.3).

use memchr::memchr2;
use std::ops::Range;

use ui_core::text::{
    Utf16Map, is_js_whitespace, push_decimal, trim_js, utf16_len, utf16_len_of_utf8,
};
use ui_core::{Budget, Code, Diagnostic, Failure, TextRange, check_key};

use crate::expr::{Expr, parse_expression};
use crate::speedups::Paths;
#[cfg(feature = "speedups")]
use crate::speedups::literal::{Literal, parse_literal};
#[cfg(feature = "speedups")]
use crate::speedups::props;

/// A parsed declaration: `$name = value`.
#[derive(Debug, Clone)]
pub(crate) struct Decl {
    /// The name with its `$`.
    pub(crate) name: String,
    pub(crate) value: DeclValue,
}

/// The value of a [`Decl`].
#[derive(Debug, Clone)]
pub(crate) enum DeclValue {
    /// Any expression, from the full parser.
    Expr(Expr),
    /// A constant literal read by the fast path ([`parse_literal`]): what evaluating its
    /// expression gives, and charges.
    #[cfg(feature = "speedups")]
    Literal(Literal),
}

/// What a syntax node is.
#[derive(Debug, Clone)]
pub(crate) enum SynKind<'s> {
    /// A literal text run (or `CodeBlock` content).
    Text(&'s str),
    /// A `{expression}` in text; `None` while the braces are still open (streaming).
    TextExpr(Option<Expr>),
    /// A tag with its props in written order: `props` indexes [`Syntax::props`].
    Tag { name: &'s str, props: Range<usize> },
}

/// One prop of a tag.
#[derive(Debug, Clone)]
pub(crate) struct SynProp {
    /// Where its name starts in the block source (bytes).
    pub(crate) at: usize,
    /// The length of its name (bytes).
    pub(crate) len: usize,
    /// Its value; `None` once a compile has moved it out (so that dropping the moved-out
    /// props costs a check each, not a call).
    pub(crate) value: Option<Expr>,
}

impl SynProp {
    /// The prop's name in `src`, the block source it was read from.
    pub(crate) fn name<'s>(&self, src: &'s str) -> &'s str {
        src.get(self.at..self.at + self.len).unwrap_or_default()
    }
}

/// One syntax node; offsets are UTF-8 bytes into the block source.
#[derive(Debug, Clone)]
pub(crate) struct SynNode<'s> {
    pub(crate) kind: SynKind<'s>,
    pub(crate) start: usize,
    pub(crate) end: usize,
    pub(crate) complete: bool,
    pub(crate) children: Vec<usize>,
    /// For a tag restored by a resumed parse ([`parse_resumed`]): how many children it had
    /// before the resume point. They precede `children` and are not in this arena.
    pub(crate) reused: usize,
}

/// A closed quoted prop value.
struct Quoted {
    /// The opening quote.
    start: usize,
    /// Just after the closing quote.
    end: usize,
    /// When no backslash is inside: the UTF-16 length between the quotes.
    plain_units: Option<u64>,
    /// The quote is still open at the end of a final block: the value runs to the end.
    unclosed: bool,
}

/// The parse result: declarations, the node arena with its top-level list, diagnostics,
/// and the last point where a later parse of a longer source may resume.
#[derive(Debug, Default)]
pub(crate) struct Syntax<'s> {
    pub(crate) decls: Vec<Decl>,
    pub(crate) nodes: Vec<SynNode<'s>>,
    /// The props of every tag, each tag's in one run (a tag's props are read before any
    /// other node starts), so that a tag needs no vector of its own. Their names are byte
    /// ranges rather than borrowed strings, so that a compile can take the vector (and move
    /// the values out) while it reads the rest of the syntax.
    pub(crate) props: Vec<SynProp>,
    pub(crate) top: Vec<usize>,
    pub(crate) diagnostics: Vec<Diagnostic>,
    pub(crate) mark: Option<Mark>,
}

/// A resumable point of a parse: the start of the last body-loop iteration (§5 step 3),
/// before that iteration's charges, and the parser's state there.
///
/// Every iteration that sees the end of the input ends there, so an iteration that starts
/// before the end was reached without looking at the length of the input or at any byte
/// past `at`, nor at `final` (which only matters at the end). Any source that agrees with
/// this one on `..=at` therefore parses to the very same state at `at`: the same
/// declarations, diagnostics, budget counters and open tags, and the same nodes before
/// `at`, of which all but the open tags are finished (nothing later changes them).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Mark {
    /// Byte offset of the iteration's start; always less than the source's length.
    pub(crate) at: usize,
    /// The budget's steps, iterations and nodes at `at`.
    pub(crate) steps: u64,
    pub(crate) iterations: u64,
    pub(crate) nodes: u64,
    /// How many diagnostics the parse had kept before `at`.
    pub(crate) diagnostics: usize,
    /// How many finished top-level nodes of [`Syntax::top`] lie before `at` (the
    /// outermost open tag, if any, is the next one).
    pub(crate) top: usize,
    /// The tags open at `at`, outermost first: each one's index in [`Syntax::nodes`], how
    /// many finished `children` it had before `at` (the next open tag, if any, is the next
    /// one), and its `end` then (just after its `>`).
    pub(crate) open: Vec<OpenAt>,
}

/// A tag open at a [`Mark`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct OpenAt {
    pub(crate) idx: usize,
    pub(crate) children: usize,
    pub(crate) end: usize,
}

/// A prop value read by [`Parser::prop_value`]: its byte range in the source (between the
/// braces or quotes), the UTF-16 length of a quoted value without a backslash, and whether
/// it is a braced small integer (the fast paths read both without the expression lexer).
struct PropValue {
    range: (usize, usize),
    plain: Option<u64>,
    integer: bool,
    /// A quoted value whose quote is still open at the end of a final block.
    unclosed: bool,
}

/// A tag open at a [`Mark`], detached from its source so that a later parse can restore
/// it: offsets instead of borrowed names.
#[derive(Debug, Clone)]
pub(crate) struct OpenTag {
    /// The `<` of the tag.
    pub(crate) start: usize,
    /// Just after its `>`.
    pub(crate) end: usize,
    /// The length of the tag name, which follows the `<`.
    pub(crate) name_len: usize,
    /// Its props, in written order.
    pub(crate) props: Vec<SynProp>,
    /// How many children the tag had before the mark.
    pub(crate) children: usize,
}

impl OpenTag {
    /// Detaches the open tag `open` of a parse, taking its props' values out of `syntax`.
    pub(crate) fn take(syntax: &mut Syntax<'_>, open: OpenAt) -> Option<OpenTag> {
        let node = &syntax.nodes[open.idx];
        let SynKind::Tag { name, props } = &node.kind else {
            return None;
        };
        // Each value is moved out; nothing reads the syntax's copy again.
        let props = syntax.props.get_mut(props.clone())?;
        Some(OpenTag {
            start: node.start,
            end: open.end,
            name_len: name.len(),
            props: props
                .iter_mut()
                .map(|prop| SynProp {
                    value: prop.value.take(),
                    ..*prop
                })
                .collect(),
            children: node.reused + open.children,
        })
    }

    /// The tag as a syntax node of `src` (which agrees on the tag's bytes with the source it
    /// was taken from), with its earlier children counted in `reused` and its props pushed
    /// on the props of `syntax`.
    fn restore<'s>(self, src: &'s str, syntax: &mut Syntax<'s>) -> Option<SynNode<'s>> {
        let name = src.get(self.start + 1..self.start + 1 + self.name_len)?;
        let from = syntax.props.len();
        for prop in self.props {
            src.get(prop.at..prop.at + prop.len)?;
            syntax.props.push(prop);
        }
        Some(SynNode {
            kind: SynKind::Tag {
                name,
                props: from..syntax.props.len(),
            },
            start: self.start,
            end: self.end,
            complete: false,
            children: Vec::new(),
            reused: self.children,
        })
    }
}

/// Shared state of one block's parse and compile: ids, offsets and the cap of its
/// diagnostics, and the paths the parse takes.
pub(crate) struct DiagSink<'a> {
    pub(crate) block_id: &'a str,
    pub(crate) map: &'a Utf16Map,
    pub(crate) cap: usize,
    #[cfg_attr(not(feature = "speedups"), allow(dead_code))]
    pub(crate) paths: Paths,
}

impl DiagSink<'_> {
    /// A node id for a node starting at byte `start`.
    pub(crate) fn node_id(&self, start: usize) -> String {
        let mut id = String::with_capacity(self.block_id.len() + 11);
        id.push_str(self.block_id);
        id.push(':');
        push_decimal(&mut id, self.map.utf16(start) as u64);
        id
    }

    /// Converts a byte range to UTF-16.
    pub(crate) fn range(&self, start: usize, end: usize) -> TextRange {
        TextRange::new(self.map.utf16(start) as u32, self.map.utf16(end) as u32)
    }

    /// Appends a diagnostic unless the cap is reached.
    pub(crate) fn push(
        &self,
        out: &mut Vec<Diagnostic>,
        failure: Failure,
        start: usize,
        end: usize,
        node_start: Option<usize>,
    ) {
        if out.len() >= self.cap {
            return;
        }
        let mut d = Diagnostic::new(failure, self.range(start, end))
            .with_bytes(TextRange::new(start as u32, end as u32));
        if let Some(s) = node_start {
            d = d.with_node(self.node_id(s));
        }
        out.push(d);
    }
}

/// Bytes that matter while scanning a declaration value: line feed, quotes, brackets.
const DECLARATION_SPECIAL: [bool; 256] = {
    let mut t = [false; 256];
    let special = *b"\n\"'[{(]})";
    let mut i = 0;
    while i < special.len() {
        t[special[i] as usize] = true;
        i += 1;
    }
    t
};

fn fail(code: Code, message: impl Into<Box<str>>) -> Failure {
    Failure::new(code, message)
}

/// The first `<` or `{` of `hay`. Text runs inside a block are mostly short (the line
/// break between two tags), so the first bytes are looked at one by one before a vector
/// search, which costs a call and a setup.
#[inline]
fn find_tag_or_brace(hay: &[u8]) -> Option<usize> {
    const SHORT: usize = 16;
    if let Some(i) = hay.iter().take(SHORT).position(|&c| c == b'<' || c == b'{') {
        return Some(i);
    }
    let rest = hay.get(SHORT..)?;
    memchr2(b'<', b'{', rest).map(|i| i + SHORT)
}

/// Byte classes of the scanner, one table lookup each (names and blanks are read a byte at
/// a time, so a lookup beats a chain of range tests).
const WS: u8 = 1;
const ALPHA: u8 = 2;
const DIGIT: u8 = 4;
const UNDERSCORE: u8 = 8;

static CLASS: [u8; 256] = {
    let mut table = [0u8; 256];
    let mut b = 0;
    while b < 256 {
        let c = b as u8;
        table[b] = if matches!(c, b' ' | b'\t' | b'\n' | b'\r' | 0x0B | 0x0C) {
            WS
        } else if c.is_ascii_alphabetic() {
            ALPHA
        } else if c.is_ascii_digit() {
            DIGIT
        } else if c == b'_' {
            UNDERSCORE
        } else {
            0
        };
        b += 1;
    }
    table
};

/// The ASCII members of W.
#[inline]
fn is_ascii_ws(b: u8) -> bool {
    CLASS[b as usize] == WS
}

#[inline]
fn is_name_start(b: u8) -> bool {
    CLASS[b as usize] & (ALPHA | UNDERSCORE) != 0
}

/// The length of the run at the start of `bytes` whose bytes are all in `class`.
#[inline]
fn run_of(bytes: &[u8], class: u8) -> usize {
    bytes
        .iter()
        .position(|&b| CLASS[b as usize] & class == 0)
        .unwrap_or(bytes.len())
}

struct Parser<'s, 'd, 'b, 'c> {
    src: &'s str,
    b: &'s [u8],
    pos: usize,
    fin: bool,
    budget: &'b mut Budget<'c>,
    sink: &'d DiagSink<'d>,
    out: Syntax<'s>,
    stack: Vec<usize>,
    /// Whether to keep the last [`Mark`].
    marking: bool,
}

/// Where a parse resumes: the state of an earlier parse at its [`Mark`], of a source that
/// agrees with this one on `..=at`.
pub(crate) struct Resume {
    pub(crate) at: usize,
    pub(crate) steps: u64,
    pub(crate) iterations: u64,
    pub(crate) nodes: u64,
    /// The diagnostics the parse had kept before `at`.
    pub(crate) diagnostics: Vec<Diagnostic>,
    /// The tags open at `at`, outermost first.
    pub(crate) open: Vec<OpenTag>,
}

/// Parses one block source; with `marking`, keeps its last [`Mark`]. `Err` is a
/// whole-block failure.
pub(crate) fn parse<'s>(
    src: &'s str,
    fin: bool,
    sink: &DiagSink<'_>,
    budget: &mut Budget<'_>,
    marking: bool,
) -> Result<Syntax<'s>, Failure> {
    let mut p = Parser::new(src, fin, sink, budget, 0)?;
    p.marking = marking;
    p.declarations()?;
    // Every node but text starts at `<` or `{` of the body, and text lies between them: a
    // bound that spares the arena its regrowth (the declarations, which may be a large
    // literal, hold no node).
    let capacity = node_capacity(&p.b[p.pos..], p.budget.limits().nodes());
    p.out.nodes.reserve_exact(capacity);
    // Likewise every prop follows a `=`.
    let props = memchr::memchr_iter(b'=', &p.b[p.pos..])
        .count()
        .min(1 << 12);
    p.out.props.reserve_exact(props);
    p.body()?;
    Ok(p.out)
}

/// Parses one block source from the [`Mark`] of an earlier parse of a source that agrees
/// with this one on `..=resume.at`; `budget` must be fresh. The counters, diagnostics and
/// open tags of the mark are restored and the parse continues there, so everything that
/// follows — diagnostics, counters, failures, the open tags' fates — is what parsing the
/// whole source would give. Only what the mark does not cover is returned: no declarations
/// (they precede every mark; the caller keeps the earlier ones), no finished node before
/// the mark; the open tags are the first nodes of the arena, outermost first, the outermost
/// the first of [`Syntax::top`], each one the first child of the one before, with its earlier
/// children counted in [`SynNode::reused`]. With `marking`, keeps its last [`Mark`], which
/// counts only the nodes this parse returns.
///
/// `Ok(None)` when the parse cannot resume (the mark lies outside `src`, or its counters do
/// not fit the budget's limits); nothing was charged and the caller parses afresh. `Err` is
/// a whole-block failure.
pub(crate) fn parse_resumed<'s>(
    src: &'s str,
    fin: bool,
    sink: &DiagSink<'_>,
    budget: &mut Budget<'_>,
    resume: Resume,
    marking: bool,
) -> Result<Option<Syntax<'s>>, Failure> {
    if resume.at >= src.len() || !src.is_char_boundary(resume.at) {
        return Ok(None);
    }
    let mut p = Parser::new(src, fin, sink, budget, resume.at)?;
    p.marking = marking;
    for tag in resume.open {
        let Some(node) = tag.restore(src, &mut p.out) else {
            return Ok(None);
        };
        let idx = p.out.nodes.len();
        p.out.nodes.push(node);
        match p.stack.last() {
            Some(&parent) => p.out.nodes[parent].children.push(idx),
            None => p.out.top.push(idx),
        }
        p.stack.push(idx);
    }
    if !p
        .budget
        .replay(resume.steps, resume.iterations, resume.nodes)?
    {
        return Ok(None);
    }
    p.pos = resume.at;
    p.out.diagnostics = resume.diagnostics;
    p.body()?;
    Ok(Some(p.out))
}

impl<'s, 'd, 'b, 'c> Parser<'s, 'd, 'b, 'c> {
    /// A parser at the start of `src`, after the length check of §5 step 1. The arena is
    /// empty for a parse from the start (sized once the declarations are read), and holds a
    /// few nodes for a parse that resumes at byte `from` (the nodes after a resume point are
    /// few, and a large allocation costs more than a little regrowth).
    fn new(
        src: &'s str,
        fin: bool,
        sink: &'d DiagSink<'d>,
        budget: &'b mut Budget<'c>,
        from: usize,
    ) -> Result<Self, Failure> {
        let limit = budget.limits().characters();
        if utf16_len(src) as u64 > limit {
            return Err(fail(
                Code::BudgetExceeded,
                format!("The block is longer than {limit} characters."),
            ));
        }
        let capacity = match from {
            0 => 0,
            _ => 8,
        };
        Ok(Parser {
            src,
            b: src.as_bytes(),
            pos: 0,
            fin,
            budget,
            sink,
            out: Syntax {
                nodes: Vec::with_capacity(capacity),
                ..Syntax::default()
            },
            stack: Vec::new(),
            marking: true,
        })
    }
}

impl<'s> Parser<'s, '_, '_, '_> {
    fn len(&self) -> usize {
        self.b.len()
    }

    fn at_end(&self) -> bool {
        self.pos >= self.b.len()
    }

    fn diag(&mut self, failure: Failure, start: usize, end: usize, node: Option<usize>) {
        let node_start = node.map(|i| self.out.nodes[i].start);
        self.sink
            .push(&mut self.out.diagnostics, failure, start, end, node_start);
    }

    /// Charges one step per UTF-16 unit of `src[from..to]`.
    fn charge(&mut self, from: usize, to: usize) -> Result<(), Failure> {
        let n = utf16_len_of_utf8(&self.b[from..to]) as u64;
        self.budget.step(n)
    }

    /// The char at byte `at`, if any.
    fn char_at(&self, at: usize) -> Option<char> {
        self.src.get(at..).and_then(|s| s.chars().next())
    }

    /// Skips W, one step per unit.
    #[inline(always)]
    fn skip_ws(&mut self) -> Result<(), Failure> {
        match self.b.get(self.pos) {
            // Most calls: nothing to skip, nothing to charge.
            None => Ok(()),
            Some(&b) if b.is_ascii() && !is_ascii_ws(b) => Ok(()),
            Some(_) => self.skip_ws_run(),
        }
    }

    /// [`Parser::skip_ws`] where W may start (kept out of line, so that the common case of
    /// nothing to skip stays small where it is inlined).
    #[inline(never)]
    fn skip_ws_run(&mut self) -> Result<(), Failure> {
        let from = self.pos;
        // ASCII first: W's other members are rare.
        self.pos += run_of(&self.b[self.pos..], WS);
        match self.b.get(self.pos) {
            // Nothing skipped and no W next: no charge.
            Some(b) if self.pos == from && b.is_ascii() => return Ok(()),
            // An ASCII byte (not W) or the end next: W ended, and all of it was ASCII.
            Some(b) if b.is_ascii() => return self.budget.step((self.pos - from) as u64),
            None => return self.budget.step((self.pos - from) as u64),
            // Maybe W outside ASCII.
            Some(_) => {}
        }
        while let Some(c) = self.char_at(self.pos) {
            if !is_js_whitespace(c) {
                break;
            }
            self.pos += c.len_utf8();
        }
        self.charge(from, self.pos)
    }

    fn match_tag_name(&mut self) -> Option<&'s str> {
        let start = self.pos;
        if self.pos < self.len() && self.b[self.pos].is_ascii_alphabetic() {
            self.pos += 1 + run_of(&self.b[self.pos + 1..], ALPHA | DIGIT);
            Some(&self.src[start..self.pos])
        } else {
            None
        }
    }

    fn match_prop_name(&mut self) -> Option<&'s str> {
        let start = self.pos;
        if self.pos < self.len() && is_name_start(self.b[self.pos]) {
            self.pos += 1 + run_of(&self.b[self.pos + 1..], ALPHA | DIGIT | UNDERSCORE);
            Some(&self.src[start..self.pos])
        } else {
            None
        }
    }

    // ---- declarations (§6) ----

    fn declarations(&mut self) -> Result<(), Failure> {
        loop {
            self.skip_ws()?;
            if self.at_end() || self.b[self.pos] != b'$' {
                return Ok(());
            }
            let start = self.pos;
            let Some((name_end, value_start)) = self.match_declaration_head() else {
                if self.fin {
                    self.diag(
                        fail(
                            Code::InvalidDeclaration,
                            "Expected a declaration `$name = value`.",
                        ),
                        start,
                        start,
                        None,
                    );
                }
                self.pos = self.len();
                return Ok(());
            };
            let bare = &self.src[start + 1..name_end];
            // A forbidden declaration name fails the whole block (§6 step 2).
            check_key(bare)?;
            let name = self.src[start..name_end].to_owned();
            self.pos = value_start;
            self.scan_declaration_value()?;
            let value_end = self.pos;
            let terminated = !self.at_end();
            let result = if self.out.decls.iter().any(|d| d.name == name) {
                Err(fail(
                    Code::DuplicateDeclaration,
                    format!("`{name}` is declared twice."),
                ))
            } else {
                let source = trim_js(&self.src[value_start..value_end]);
                match self.fast_declaration(source) {
                    Some(value) => value,
                    None => parse_expression(source, self.budget).map(DeclValue::Expr),
                }
            };
            match result {
                Ok(value) => self.out.decls.push(Decl { name, value }),
                Err(f) if f.code == Code::BudgetExceeded => return Err(f),
                Err(f) => {
                    if self.fin || terminated {
                        self.diag(f, start, value_end, None);
                    }
                }
            }
        }
    }

    /// The literal fast path for a declaration's value, when it answers.
    #[inline]
    #[cfg_attr(not(feature = "speedups"), allow(unused_variables))]
    fn fast_declaration(&mut self, source: &str) -> Option<Result<DeclValue, Failure>> {
        #[cfg(feature = "speedups")]
        if self.sink.paths.fast() {
            return parse_literal(source, self.budget).map(|r| r.map(DeclValue::Literal));
        }
        None
    }

    /// Matches `\$NAME W* =` at `pos`; returns the end of the name and the offset after `=`.
    fn match_declaration_head(&self) -> Option<(usize, usize)> {
        let b = self.b;
        let mut p = self.pos + 1;
        if p >= b.len() || !is_name_start(b[p]) {
            return None;
        }
        p += 1 + run_of(&b[p + 1..], ALPHA | DIGIT | UNDERSCORE);
        let name_end = p;
        while let Some(c) = self.char_at(p) {
            if !is_js_whitespace(c) {
                break;
            }
            p += c.len_utf8();
        }
        (p < b.len() && b[p] == b'=').then_some((name_end, p + 1))
    }

    /// Scans a declaration value up to an unquoted line feed at bracket depth ≤ 0.
    fn scan_declaration_value(&mut self) -> Result<(), Failure> {
        let mut depth: i64 = 0;
        let mut quote: Option<u8> = None;
        let from = self.pos;
        while self.pos < self.len() {
            if let Some(q) = quote {
                self.pos = self.skip_quoted(q);
                quote = None;
                continue;
            }
            // Jump over bytes that cannot change the scan.
            while self.pos < self.len() && !DECLARATION_SPECIAL[usize::from(self.b[self.pos])] {
                self.pos += 1;
            }
            let Some(&c) = self.b.get(self.pos) else {
                break;
            };
            match c {
                b'\n' if depth <= 0 => break,
                b'"' | b'\'' => quote = Some(c),
                b'[' | b'{' | b'(' => {
                    depth += 1;
                    self.budget.depth(depth as u64)?;
                }
                b']' | b'}' | b')' => depth -= 1,
                _ => {}
            }
            self.pos += 1;
        }
        // Normalise to a char boundary (escapes may skip into a multi-byte char).
        while !self.src.is_char_boundary(self.pos) {
            self.pos += 1;
        }
        self.charge(from, self.pos)?;
        // Upstream's scan pays for the line feed that ends the value before it stops
        // there (and the whitespace skip after it pays for it again).
        if self.b.get(self.pos) == Some(&b'\n') {
            self.budget.step(1)?;
        }
        Ok(())
    }

    /// From just inside a quote `q` (at `pos`, after the opening quote), the position
    /// after the closing quote, or the end of input; a backslash escapes the next byte.
    fn skip_quoted(&self, q: u8) -> usize {
        let mut p = self.pos;
        loop {
            match memchr2(q, b'\\', &self.b[p..]) {
                None => return self.len(),
                Some(i) if self.b[p + i] == q => return p + i + 1,
                Some(i) => p = (p + i + 2).min(self.len()),
            }
        }
    }

    // ---- body (§5) ----

    fn body(&mut self) -> Result<(), Failure> {
        while !self.at_end() {
            if self.marking {
                self.mark();
            }
            self.budget.step(1)?;
            self.budget.depth(self.stack.len() as u64)?;
            let start = self.pos;
            let result = match self.b[self.pos] {
                b'<' => self.tag(),
                b'{' => self.text_expression(),
                _ => self.text_run(),
            };
            if let Err(f) = result {
                if f.code == Code::BudgetExceeded {
                    return Err(f);
                }
                self.diag(f, start, self.pos, None);
                if self.pos <= start {
                    self.pos = start + self.char_at(start).map_or(1, char::len_utf8);
                }
                let from = self.pos;
                while self.pos < self.len() && !matches!(self.b[self.pos], b'\n' | b'<') {
                    self.pos += 1;
                }
                self.charge(from, self.pos)?;
            }
        }
        let len = self.len();
        for idx in std::mem::take(&mut self.stack) {
            self.out.nodes[idx].end = len;
            if self.fin {
                let start = self.out.nodes[idx].start;
                let name = self.tag_name(idx);
                self.diag(
                    fail(Code::UnclosedTag, format!("`<{name}>` is not closed.")),
                    start,
                    len,
                    Some(idx),
                );
            }
        }
        Ok(())
    }

    /// Records the state at the start of an iteration as the parse's [`Mark`].
    fn mark(&mut self) {
        let Syntax {
            nodes,
            top,
            diagnostics,
            mark,
            ..
        } = &mut self.out;
        let mark = mark.get_or_insert_with(Mark::default);
        mark.at = self.pos;
        mark.steps = self.budget.steps();
        mark.iterations = self.budget.iterations();
        mark.nodes = self.budget.nodes();
        mark.diagnostics = diagnostics.len();
        // An open tag is the last node of its parent's list (or of the top level): only
        // the nodes before it are finished.
        let depth = self.stack.len();
        mark.top = top.len() - usize::from(depth > 0);
        mark.open.clear();
        mark.open
            .extend(self.stack.iter().enumerate().map(|(level, &idx)| OpenAt {
                idx,
                children: nodes[idx].children.len() - usize::from(level + 1 < depth),
                end: nodes[idx].end,
            }));
    }

    fn tag_name(&self, idx: usize) -> &'s str {
        match &self.out.nodes[idx].kind {
            SynKind::Tag { name, .. } => name,
            _ => "",
        }
    }

    fn add_node(&mut self, kind: SynKind<'s>, start: usize, end: usize, complete: bool) -> usize {
        let idx = self.out.nodes.len();
        self.out.nodes.push(SynNode {
            kind,
            start,
            end,
            complete,
            children: Vec::new(),
            reused: 0,
        });
        match self.stack.last() {
            Some(&parent) => self.out.nodes[parent].children.push(idx),
            None => self.out.top.push(idx),
        }
        idx
    }

    // ---- text (§7.4) ----

    fn text_run(&mut self) -> Result<(), Failure> {
        let start = self.pos;
        self.pos = find_tag_or_brace(&self.b[self.pos..]).map_or(self.len(), |i| self.pos + i);
        self.charge(start, self.pos)?;
        let text = &self.src[start..self.pos];
        let droppable = text.chars().all(is_js_whitespace) && text.contains(['\n', '\r']);
        if !droppable {
            self.budget.node()?;
            self.add_node(SynKind::Text(text), start, self.pos, true);
        }
        Ok(())
    }

    // ---- text expressions (§7.3) ----

    /// The node is charged once the braces are scanned: a final block's expression that
    /// never closes fails `incomplete_expression` without counting as a node.
    fn text_expression(&mut self) -> Result<(), Failure> {
        let start = self.pos;
        let body = self.balanced()?;
        self.budget.node()?;
        match body {
            Some((from, to)) => {
                let expr = parse_expression(&self.src[from..to], self.budget)?;
                self.add_node(SynKind::TextExpr(Some(expr)), start, self.pos, true);
            }
            None => {
                self.add_node(SynKind::TextExpr(None), start, self.pos, false);
            }
        }
        Ok(())
    }

    /// The fast path for a `{digits}` value at `pos` (which is `{`), of 1 to 15 ASCII
    /// digits: what [`Parser::balanced`] does for it (the digits and the `}` charged one
    /// step each), without its loop. Returns the digits' byte range, or `None` (nothing
    /// read) for anything else, or without the fast paths.
    #[inline]
    fn fast_braced_integer(&mut self) -> Result<Option<(usize, usize)>, Failure> {
        #[cfg(feature = "speedups")]
        if self.sink.paths.fast()
            && let Some((from, to)) = props::braced_integer(self.b, self.pos)
        {
            self.pos = to + 1;
            self.budget.step((to - from) as u64 + 1)?;
            return Ok(Some((from, to)));
        }
        Ok(None)
    }

    /// The fast path for a prop value `raw` (quotes or braces included): a quoted string
    /// without a backslash (`plain_units` its UTF-16 length between the quotes), a braced
    /// integer (`integer`), or one of those shapes in braces. `None` when it does not
    /// answer, or without the fast paths.
    #[inline]
    #[cfg_attr(not(feature = "speedups"), allow(unused_variables))]
    fn fast_prop_value(
        &mut self,
        raw: &str,
        plain_units: Option<u64>,
        integer: bool,
    ) -> Option<Result<Expr, Failure>> {
        #[cfg(feature = "speedups")]
        if self.sink.paths.fast() {
            return if let Some(units) = plain_units {
                props::plain_string(&raw[1..raw.len() - 1], units, self.budget)
            } else if integer {
                props::plain_integer(raw, self.budget)
            } else {
                props::parse_plain_literal(raw, self.budget)
            };
        }
        None
    }

    /// Reads a balanced `{…}` body at `pos` (which is `{`). Returns the body's byte range,
    /// or `None` when input ended first while streaming.
    fn balanced(&mut self) -> Result<Option<(usize, usize)>, Failure> {
        self.pos += 1;
        let from = self.pos;
        let mut depth: u64 = 1;
        let mut quote: Option<u8> = None;
        while self.pos < self.len() {
            let c = self.b[self.pos];
            if let Some(q) = quote {
                if c == b'\\' {
                    self.pos += 2;
                    continue;
                }
                if c == q {
                    quote = None;
                }
                self.pos += 1;
                continue;
            }
            match c {
                b'"' | b'\'' => quote = Some(c),
                b'{' => {
                    depth += 1;
                    self.budget.depth(depth)?;
                }
                b'}' => {
                    depth -= 1;
                    if depth == 0 {
                        let body_end = self.pos;
                        self.pos += 1;
                        self.charge(from, self.pos)?;
                        return Ok(Some((from, body_end)));
                    }
                }
                _ => {}
            }
            self.pos += 1;
        }
        self.pos = self.len();
        self.charge(from, self.pos)?;
        if self.fin {
            return Err(fail(
                Code::IncompleteExpression,
                "The expression is not closed with `}`.",
            ));
        }
        Ok(None)
    }

    // ---- tags (§7.1, §7.2, §7.5) ----

    fn tag(&mut self) -> Result<(), Failure> {
        let start = self.pos;
        self.pos += 1;
        if self.pos < self.len() && self.b[self.pos] == b'/' {
            return self.closing_tag();
        }
        let Some(name) = self.match_tag_name() else {
            if !self.fin && self.at_end() {
                return Ok(());
            }
            return Err(fail(Code::InvalidTag, "Expected a tag name after `<`."));
        };
        self.budget.node()?;
        let code_block = name == "CodeBlock";
        let props = self.out.props.len();
        let idx = self.add_node(
            SynKind::Tag {
                name,
                props: props..props,
            },
            start,
            self.pos,
            false,
        );
        while !self.at_end() {
            self.skip_ws()?;
            if self.b[self.pos..].starts_with(b"/>") {
                self.pos += 2;
                let node = &mut self.out.nodes[idx];
                node.complete = true;
                node.end = self.pos;
                return Ok(());
            }
            if self.pos < self.len() && self.b[self.pos] == b'>' {
                self.pos += 1;
                if code_block {
                    return self.code_block(idx);
                }
                self.out.nodes[idx].end = self.pos;
                self.stack.push(idx);
                return Ok(());
            }
            if !self.prop(idx, props)? {
                return Ok(());
            }
        }
        let len = self.len();
        self.out.nodes[idx].end = len;
        if self.fin {
            self.diag(
                fail(Code::UnclosedTag, "The tag is incomplete."),
                start,
                len,
                Some(idx),
            );
        }
        Ok(())
    }

    /// Reads one prop `name={…}` or `name="…"` of the tag `idx`, whose props start at
    /// `props` in the arena: `Ok(true)` when it was read, `Ok(false)` when the tag's parse
    /// stops here (input ended while streaming). `Err` fails the tag.
    #[inline]
    fn prop(&mut self, idx: usize, props: usize) -> Result<bool, Failure> {
        let name_start = self.pos;
        let Some(prop) = self.match_prop_name() else {
            return self
                .wait_or(Code::InvalidProp, "Expected a prop name.")
                .map(|()| false);
        };
        if let Err(f) = check_key(prop) {
            // The name is refused before it is consumed.
            self.pos = name_start;
            return Err(f);
        }
        self.skip_ws()?;
        if self.at_end() {
            return self
                .wait_or(Code::InvalidSyntax, "Expected `=` after a prop name.")
                .map(|()| false);
        }
        if self.b[self.pos] != b'=' {
            return Err(fail(
                Code::InvalidSyntax,
                format!("Expected `=` after the prop `{prop}`."),
            ));
        }
        self.pos += 1;
        self.skip_ws()?;
        if self.at_end() {
            return self
                .wait_or(Code::InvalidProp, "Expected a prop value.")
                .map(|()| false);
        }
        let Some(PropValue {
            range: value,
            plain,
            integer,
            unclosed,
        }) = self.prop_value(idx, prop)?
        else {
            return Ok(false);
        };
        if self.out.props[props..]
            .iter()
            .any(|p| p.name(self.src) == prop)
        {
            return Err(fail(
                Code::DuplicateProp,
                format!("The prop `{prop}` is written twice."),
            ));
        }
        let raw = &self.src[value.0..value.1];
        if unclosed {
            // The lexer reports the open quote (or an escape it meets first), after the
            // duplicate check, as upstream does for a quoted value.
            parse_expression(raw, self.budget)?;
            return Err(fail(
                Code::IncompleteExpression,
                "The quoted value is not closed.",
            ));
        }
        let expr = match self.fast_prop_value(raw, plain, integer) {
            Some(parsed) => parsed?,
            None => parse_expression(raw, self.budget)?,
        };
        self.push_prop(idx, prop, expr);
        Ok(true)
    }

    /// Reads the value of the prop `prop` of the tag `idx`, at the current position: `None`
    /// when the input ends inside it while streaming (a partial quoted value is kept as the
    /// prop's value so far, a braced one is absent; either way the tag's parse stops).
    fn prop_value(&mut self, idx: usize, prop: &'s str) -> Result<Option<PropValue>, Failure> {
        let value_start = self.pos;
        let value = match self.b[self.pos] {
            b'{' => match self.fast_braced_integer()? {
                Some(range) => PropValue {
                    range,
                    plain: None,
                    integer: true,
                    unclosed: false,
                },
                None => match self.balanced()? {
                    Some(range) => PropValue {
                        range,
                        plain: None,
                        integer: false,
                        unclosed: false,
                    },
                    // A braced value cut off while streaming: the prop is absent and
                    // the tag still ends after its name (§7.1 step 3).
                    None => return Ok(None),
                },
            },
            q @ (b'"' | b'\'') => match self.quoted(q)? {
                Some(quoted) => PropValue {
                    range: (quoted.start, quoted.end),
                    plain: quoted.plain_units,
                    integer: false,
                    unclosed: quoted.unclosed,
                },
                None => {
                    self.partial_prop(idx, prop, value_start)?;
                    return Ok(None);
                }
            },
            _ => {
                return Err(fail(
                    Code::InvalidProp,
                    format!("The value of `{prop}` must be quoted or in braces."),
                ));
            }
        };
        Ok(Some(value))
    }

    /// At the end of input inside a tag: wait for more text while streaming, else fail.
    /// Waiting leaves the tag's `end` where it was, right after its name (§7.1 step 3):
    /// a cut-off prop name, a missing `=` or value, or trailing whitespace add nothing
    /// to the tag yet.
    fn wait_or(&self, code: Code, message: &str) -> Result<(), Failure> {
        if self.at_end() && !self.fin {
            return Ok(());
        }
        Err(fail(code, message))
    }

    /// Adds a prop to the tag `idx`, the tag being read (so its props end the arena).
    fn push_prop(&mut self, idx: usize, prop: &'s str, expr: Expr) {
        let at = prop.as_ptr() as usize - self.src.as_ptr() as usize;
        self.out.props.push(SynProp {
            at,
            len: prop.len(),
            value: Some(expr),
        });
        if let SynKind::Tag { props, .. } = &mut self.out.nodes[idx].kind {
            props.end = self.out.props.len();
        }
    }

    /// Scans a quoted value at `pos`. Returns the value, both quotes included, or `None`
    /// (pos at the end) when the quote is still open while streaming. In a final block an
    /// open quote runs to the end (`unclosed`): the prop fails `duplicate_prop` when its
    /// name is taken, else `incomplete_expression` via the expression lexer.
    fn quoted(&mut self, q: u8) -> Result<Option<Quoted>, Failure> {
        let open = self.pos;
        let mut at = open + 1;
        let mut escaped = false;
        while let Some(i) = memchr2(q, b'\\', self.b.get(at..).unwrap_or_default()) {
            if self.b[at + i] == q {
                self.pos = at + i + 1;
                let units = utf16_len_of_utf8(&self.b[open..self.pos]) as u64;
                // Upstream's scan steps over the opening quote unpaid.
                self.budget.step(units - 1)?;
                return Ok(Some(Quoted {
                    start: open,
                    end: self.pos,
                    plain_units: (!escaped).then(|| units - 2),
                    unclosed: false,
                }));
            }
            // A backslash escapes the byte after it.
            escaped = true;
            at += i + 2;
        }
        self.pos = self.len();
        self.charge(open + 1, self.pos)?;
        if self.fin {
            // The caller checks the prop's name first, then lets the lexer report it.
            return Ok(Some(Quoted {
                start: open,
                end: self.pos,
                plain_units: None,
                unclosed: true,
            }));
        }
        Ok(None)
    }

    /// A quoted prop still open at the end of a streaming prefix: the text so far.
    fn partial_prop(&mut self, idx: usize, prop: &'s str, open: usize) -> Result<(), Failure> {
        let len = self.len();
        self.out.nodes[idx].end = len;
        let q = self.b[open];
        let mut raw = &self.src[open..];
        if ends_with_lone_backslash(&raw[1..]) {
            raw = &raw[..raw.len() - 1];
        }
        let mut text = String::with_capacity(raw.len() + 1);
        text.push_str(raw);
        text.push(q as char);
        match parse_expression(&text, self.budget) {
            Ok(expr) => self.set_partial_prop(idx, prop, expr),
            Err(f) if f.code == Code::BudgetExceeded => return Err(f),
            Err(_) => {}
        }
        Ok(())
    }

    /// Sets a partial prop without the duplicate check: a name the tag already has keeps
    /// its one entry and its place and takes the new value, as upstream's props record
    /// does, so a preview reports a refused name once.
    fn set_partial_prop(&mut self, idx: usize, prop: &'s str, expr: Expr) {
        let props = match &self.out.nodes[idx].kind {
            SynKind::Tag { props, .. } => props.clone(),
            _ => 0..0,
        };
        let src = self.src;
        match self.out.props[props]
            .iter_mut()
            .find(|p| p.name(src) == prop)
        {
            Some(existing) => existing.value = Some(expr),
            None => self.push_prop(idx, prop, expr),
        }
    }

    fn code_block(&mut self, idx: usize) -> Result<(), Failure> {
        const CLOSE: &str = "</CodeBlock>";
        let content_start = self.pos;
        let rest = &self.src[content_start..];
        let (content_end, closed) = match rest.find(CLOSE) {
            Some(i) => (content_start + i, true),
            None => (self.len(), false),
        };
        self.budget.node()?;
        let text = &self.src[content_start..content_end];
        // The content node is a child of the CodeBlock, which is never on the stack.
        let child = self.out.nodes.len();
        self.out.nodes.push(SynNode {
            kind: SynKind::Text(text),
            start: content_start,
            end: content_end,
            complete: true,
            children: Vec::new(),
            reused: 0,
        });
        self.out.nodes[idx].children.push(child);
        if closed {
            self.pos = content_end + CLOSE.len();
            let node = &mut self.out.nodes[idx];
            node.complete = true;
            node.end = self.pos;
        } else {
            self.pos = self.len();
            let len = self.len();
            self.out.nodes[idx].end = len;
            if self.fin {
                let start = self.out.nodes[idx].start;
                self.diag(
                    fail(Code::UnclosedTag, "`<CodeBlock>` is not closed."),
                    start,
                    len,
                    Some(idx),
                );
            }
        }
        Ok(())
    }

    fn closing_tag(&mut self) -> Result<(), Failure> {
        self.pos += 1;
        let Some(name) = self.match_tag_name() else {
            if !self.fin && self.at_end() {
                return Ok(());
            }
            return Err(fail(Code::InvalidTag, "Expected a tag name after `</`."));
        };
        self.skip_ws()?;
        if self.at_end() {
            if !self.fin {
                return Ok(());
            }
            return Err(fail(
                Code::InvalidSyntax,
                format!("Expected `>` to close `</{name}`."),
            ));
        }
        if self.b[self.pos] != b'>' {
            return Err(fail(
                Code::InvalidSyntax,
                format!("Expected `>` to close `</{name}`."),
            ));
        }
        self.pos += 1;
        let Some(at) = self.stack.iter().rposition(
            |&i| matches!(&self.out.nodes[i].kind, SynKind::Tag { name: n, .. } if *n == name),
        ) else {
            return Err(fail(
                Code::UnmatchedTag,
                format!("`</{name}>` closes no open tag."),
            ));
        };
        let closed: Vec<usize> = self.stack.drain(at..).collect();
        let end = self.pos;
        for (k, idx) in closed.into_iter().enumerate() {
            self.out.nodes[idx].end = end;
            if k == 0 {
                self.out.nodes[idx].complete = true;
            } else {
                let start = self.out.nodes[idx].start;
                let inner = self.tag_name(idx);
                self.diag(
                    fail(
                        Code::UnclosedTag,
                        format!("`<{inner}>` is closed by `</{name}>`."),
                    ),
                    start,
                    end,
                    Some(idx),
                );
            }
        }
        Ok(())
    }
}

/// A bound on the syntax nodes of `src`, at most `limit` (the node budget): one per `<`
/// and `{`, plus a text run before each and one at the end.
fn node_capacity(src: &[u8], limit: u64) -> usize {
    let opens = memchr::memchr2_iter(b'<', b'{', src).count();
    (2 * opens + 1)
        .min(usize::try_from(limit).unwrap_or(usize::MAX))
        .min(1 << 16)
}

/// Whether `s` ends with a backslash that escapes nothing.
fn ends_with_lone_backslash(s: &str) -> bool {
    let n = s.bytes().rev().take_while(|&b| b == b'\\').count();
    n % 2 == 1
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_classes_are_the_grammar_s() {
        for b in 0..=255u8 {
            let ws = matches!(b, b' ' | b'\t' | b'\n' | b'\r' | 0x0B | 0x0C);
            assert_eq!(is_ascii_ws(b), ws, "{b}");
            assert_eq!(run_of(&[b], WS), usize::from(ws), "{b}");
            let start = b.is_ascii_alphabetic() || b == b'_';
            assert_eq!(is_name_start(b), start, "{b}");
            let name = b.is_ascii_alphanumeric() || b == b'_';
            assert_eq!(
                run_of(&[b], ALPHA | DIGIT | UNDERSCORE),
                usize::from(name),
                "{b}"
            );
            let tag = b.is_ascii_alphanumeric();
            assert_eq!(run_of(&[b], ALPHA | DIGIT), usize::from(tag), "{b}");
        }
        assert_eq!(run_of(b"ab_9-c", ALPHA | DIGIT | UNDERSCORE), 4);
        assert_eq!(run_of(b"", WS), 0);
    }
}
