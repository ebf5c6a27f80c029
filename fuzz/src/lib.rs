//! The code paths the uiblocks fuzz targets drive, with the invariants each one checks.
//!
//! Every function takes arbitrary text, must not panic, and asserts properties the spec
//! (`language.md` §3, §5–§9, §17, §19) guarantees for *every* input:
//!
//! - [`fence_scan`]: the fence scanner's ranges, its streaming and early-stop forms, the cheap
//!   tests `has_fence` / `may_reference_host` against independent re-implementations.
//! - [`parse_compile`]: `compile_block` (final and streaming) with small limits — the
//!   diagnostic cap, whole-block budget failures, node ids `<block>:<utf16 start>`, UTF-8 and
//!   UTF-16 spans that agree — plus `UiCompiler` over growing prefixes, which must equal a
//!   fresh `compile_reply`; and, when the full text compiles without any diagnostic, the
//!   id-stability and "no prefix exceeds the budget" properties of §8/§9.
//! - [`compile_evaluate`]: `compile_reply` (final) then `UiState::new` + `evaluate_block`
//!   with small evaluation limits, plus `parse_expression` / `evaluate` of the raw input.
//!
//! The fuzz targets in `fuzz_targets/` call these functions; the seed-replay test in
//! `crates/ui-compiler/tests/robustness.rs` includes this very file (`#[path]`), so every
//! committed seed runs through the same checks under `cargo test`.

use std::collections::HashSet;

use ui_compiler::expr::{Expr, evaluate, parse_expression};
use ui_compiler::{
    Block, CompileOptions, Node, UiCompiler, UiState, compile_block, compile_reply, evaluate_block,
    has_fence, may_reference_host, scan_fences, scan_fences_with,
};
use ui_core::text::{is_js_whitespace, trim_js, truncate_utf16, utf16_len};
use ui_core::{Budget, Code, FrozenClock, Record, UiLimits, Value};

/// The frozen clock every path uses, so budgets never depend on the machine's speed.
static CLOCK: FrozenClock = FrozenClock(0.0);

/// The block id `parse_compile` compiles under.
pub const BLOCK_ID: &str = "fz:ui:0";

/// Small compile limits: budgets trip on inputs of a few hundred bytes, so the fuzzer
/// reaches every limit's boundary quickly.
pub fn compile_limits() -> UiLimits {
    limits(&[
        ("characters", 4_096),
        ("depth", 8),
        ("nodes", 128),
        ("steps", 4_000),
        ("iterations", 400),
        ("stringLength", 1_024),
    ])
}

/// Small evaluation limits (view nodes, steps, iterations).
pub fn eval_limits() -> UiLimits {
    limits(&[
        ("depth", 8),
        ("nodes", 64),
        ("steps", 3_000),
        ("iterations", 300),
        ("stringLength", 1_024),
    ])
}

fn limits(overrides: &[(&str, u64)]) -> UiLimits {
    overrides
        .iter()
        .fold(UiLimits::DEFAULT, |l, &(key, value)| {
            l.with(key, value).expect("valid limit override")
        })
}

/// Options for one compile with the frozen clock.
pub fn options(is_final: bool, limits: UiLimits) -> CompileOptions<'static> {
    CompileOptions {
        id: "fz".to_owned(),
        is_final,
        limits,
        clock: Some(&CLOCK),
        ..CompileOptions::default()
    }
}

/// The largest char boundary of `text` at or below `at`.
pub fn floor_boundary(text: &str, at: usize) -> usize {
    let mut at = at.min(text.len());
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    at
}

// ---------------------------------------------------------------------------------------
// fence_scan
// ---------------------------------------------------------------------------------------

/// A fence line as §3.2 defines it: `^ {0,3}(`{3,}|~{3,})` then the info up to CR/LF.
/// Returns the marker, the run length and the info.
fn fence_line(line: &str) -> Option<(char, usize, &str)> {
    let indent = line.bytes().take(4).take_while(|&b| b == b' ').count();
    if indent > 3 {
        return None;
    }
    let rest = &line[indent..];
    let marker = rest.chars().next().filter(|&c| c == '`' || c == '~')?;
    let run = rest.chars().take_while(|&c| c == marker).count();
    if run < 3 {
        return None;
    }
    let info = &rest[run..];
    let info = &info[..info.find(['\r', '\n']).unwrap_or(info.len())];
    Some((marker, run, info))
}

/// `uiMayReferenceHost` written out: `@Query`, or `<File|Diff|Commit|Node` followed by a
/// non-word character or the end (JavaScript's ASCII `\b`).
fn reference_may_reference_host(text: &str) -> bool {
    if text.contains("@Query") {
        return true;
    }
    ["<File", "<Diff", "<Commit", "<Node"].iter().any(|name| {
        text.match_indices(name).any(|(at, m)| {
            !text[at + m.len()..]
                .bytes()
                .next()
                .is_some_and(|b| b.is_ascii_alphanumeric() || b == b'_')
        })
    })
}

/// Scans `text` for fences (default and a host-named language) and checks the ranges and
/// the cheap tests.
pub fn fence_scan(text: &str) {
    for language in ["ui", "ruimte-ui"] {
        let fences = scan_fences(text, language);

        let mut streamed = Vec::new();
        scan_fences_with(text, language, |f| {
            streamed.push(f);
            true
        });
        assert_eq!(
            fences, streamed,
            "scan_fences and scan_fences_with disagree"
        );
        let mut visited = 0;
        scan_fences_with(text, language, |_| {
            visited += 1;
            false
        });
        assert_eq!(
            visited,
            fences.len().min(1),
            "scanning must stop when asked"
        );

        let mut previous_end = 0;
        let mut plain_info = false;
        for (i, f) in fences.iter().enumerate() {
            assert!(previous_end <= f.start, "fences overlap: {fences:?}");
            assert!(
                f.start < f.code_start && f.code_start <= f.code_end && f.code_end <= f.end,
                "unordered fence offsets: {f:?}"
            );
            assert!(f.end <= text.len());
            for at in [f.start, f.code_start, f.code_end, f.end] {
                assert!(
                    text.is_char_boundary(at),
                    "offset {at} splits a char: {f:?}"
                );
            }
            let opening = &text[f.start..f.code_start];
            assert!(
                opening.ends_with('\n') || f.code_start == text.len(),
                "the source must start after the opening line: {f:?}"
            );
            let (marker, run, info) =
                fence_line(opening).expect("a fence opens on a fence line (§3.2)");
            assert_eq!(
                trim_js(info),
                language,
                "the opening info names the language"
            );
            if f.closed {
                let closing = &text[f.code_end..f.end];
                let (m, r, info) = fence_line(closing).expect("a fence closes on a fence line");
                assert!(m == marker && r >= run && trim_js(info).is_empty());
                assert!(closing.ends_with('\n') || f.end == text.len());
            } else {
                assert_eq!(i, fences.len() - 1, "only the last fence may be open");
                assert_eq!((f.code_end, f.end), (text.len(), text.len()));
            }
            // `uiHasFence` only allows spaces and tabs around the language (§3.7).
            plain_info |= info.trim_matches([' ', '\t']) == language;
            previous_end = f.end;
        }
        if plain_info {
            assert!(has_fence(text, language), "has_fence misses a fence");
        }
    }
    assert_eq!(
        may_reference_host(text),
        reference_may_reference_host(text),
        "may_reference_host"
    );
}

// ---------------------------------------------------------------------------------------
// parse_compile
// ---------------------------------------------------------------------------------------

/// Every node of `block`, pre-order.
pub fn nodes_of(block: &Block) -> Vec<&Node> {
    let mut out = Vec::new();
    block.walk(&mut |n| out.push(n));
    out
}

/// Whether `node` is a whitespace-only text run ending at `len16` — the one kind of node
/// that may vanish when more text arrives (§9 quirk).
pub fn may_vanish(node: &Node, len16: u32) -> bool {
    node.is_text()
        && node.end == len16
        && node.expressions.is_empty()
        && node
            .props
            .get("text")
            .and_then(Value::as_str)
            .is_some_and(|t| t.chars().all(is_js_whitespace))
}

/// The invariants of one compiled block body (`compile_block(source, id, …)`).
pub fn check_block(block: &Block, source: &str, id: &str, limits: &UiLimits, is_final: bool) {
    let len16 = utf16_len(source) as u32;
    assert_eq!(block.id, id);
    assert_eq!(block.catalog_version, 1);
    assert_eq!(block.complete, is_final);
    assert_eq!((block.start, block.end), (0, len16));
    assert!(
        block.diagnostics.len() as u64 <= limits.diagnostics(),
        "more than {} diagnostics: {}",
        limits.diagnostics(),
        block.diagnostics.len()
    );
    if block
        .diagnostics
        .iter()
        .any(|d| d.code == Code::BudgetExceeded)
    {
        // §12.3: a budget failure replaces the whole block.
        assert_eq!(block.diagnostics.len(), 1, "{:?}", block.diagnostics);
        assert!(block.nodes.is_empty() && block.defaults.is_empty() && block.queries.is_empty());
        assert_eq!(
            block.fallback,
            truncate_utf16(source, limits.characters() as usize)
        );
        assert_eq!(
            (
                block.diagnostics[0].range.start,
                block.diagnostics[0].range.end
            ),
            (0, len16)
        );
    }

    // UTF-16 offset of every byte offset that starts a char (and of the end).
    let mut utf16_at = vec![u32::MAX; source.len() + 1];
    let mut unit = 0;
    for (i, c) in source.char_indices() {
        utf16_at[i] = unit;
        unit += c.len_utf16() as u32;
    }
    utf16_at[source.len()] = unit;

    let nodes = nodes_of(block);
    let mut ids = HashSet::new();
    for node in &nodes {
        assert_eq!(node.id, format!("{id}:{}", node.start), "§9 node id");
        assert!(
            ids.insert(node.id.as_str()),
            "duplicate node id {}",
            node.id
        );
        assert!(node.start <= node.end && node.end <= len16, "{node:?}");
        let (b0, b1) = (node.bytes.start as usize, node.bytes.end as usize);
        assert!(b0 <= b1 && b1 <= source.len());
        assert!(source.is_char_boundary(b0) && source.is_char_boundary(b1));
        assert_eq!(utf16_at[b0], node.start, "UTF-16 start");
        assert_eq!(utf16_at[b1], node.end, "UTF-16 end");
        for child in &node.children {
            assert!(node.start < child.start, "a child starts after its parent");
        }
        if node.is_text() && node.expressions.is_empty() {
            let text = node.props.get("text").and_then(Value::as_str);
            let raw = &source[b0..b1];
            assert!(
                text == Some(raw) || (text == Some("") && raw.starts_with('{')),
                "text node {text:?} vs source {raw:?}"
            );
        }
    }
    for d in &block.diagnostics {
        assert!(
            d.range.start <= d.range.end && d.range.end <= len16,
            "{d:?}"
        );
        if let Some(bytes) = d.bytes {
            let (b0, b1) = (bytes.start as usize, bytes.end as usize);
            assert!(b0 <= b1 && b1 <= source.len(), "{d:?}");
            assert!(source.is_char_boundary(b0) && source.is_char_boundary(b1));
            assert_eq!(utf16_at[b0], d.range.start);
            assert_eq!(utf16_at[b1], d.range.end);
        }
        if let Some(node_id) = &d.node_id {
            assert!(ids.contains(node_id.as_str()), "{d:?} names no node");
        }
    }
}

/// The invariants of a compiled reply: one block per accepted UI fence, in order, with
/// reply ranges and ids from the fence scan (§3.5, §3.6, §17.2).
pub fn check_reply(blocks: &[impl AsRef<Block>], text: &str, options: &CompileOptions<'_>) {
    let fences = scan_fences(text, &options.fence_language);
    assert!(blocks.len() <= fences.len());
    assert!(blocks.len() as u64 <= options.reply_limits.blocks());
    let mut total_nodes = 0;
    for (block, fence) in blocks.iter().map(AsRef::as_ref).zip(&fences) {
        let start = utf16_len(&text[..fence.start]) as u32;
        assert_eq!(block.id, format!("{}:ui:{start}", options.id));
        assert_eq!(block.start, start);
        assert_eq!(block.end, utf16_len(&text[..fence.end]) as u32);
        assert_eq!(block.complete, fence.closed || options.is_final);
        assert!(block.diagnostics.len() as u64 <= options.limits.diagnostics());
        total_nodes += block.node_count() as u64;
    }
    assert!(total_nodes <= options.reply_limits.nodes());
}

/// Compiles `reply`'s prefixes in order with one `UiCompiler`, each non-final, then the
/// whole reply final; each result must equal a fresh `compile_reply` (§17.1).
pub fn check_incremental(reply: &str, cuts: &[usize], limits: UiLimits) {
    let mut compiler = UiCompiler::new();
    let steps = cuts
        .iter()
        .map(|&cut| (&reply[..floor_boundary(reply, cut)], false))
        .chain([(reply, false), (reply, true)]);
    for (prefix, is_final) in steps {
        let options = options(is_final, limits);
        let incremental = compiler.compile(prefix, &options);
        let fresh = compile_reply(prefix, &options);
        assert_eq!(incremental.len(), fresh.len());
        for (a, b) in incremental.iter().zip(&fresh) {
            assert_eq!(
                **a, *b,
                "incremental and fresh compiles differ on {prefix:?}"
            );
        }
        check_reply(&incremental, prefix, &options);
    }
}

/// Compiles `source` as one block body (final and streaming, small limits), then as a reply
/// through `UiCompiler` over growing prefixes, and checks the streaming properties when the
/// whole body is valid.
pub fn parse_compile(source: &str) {
    let limits = compile_limits();
    let full = compile_block(source, BLOCK_ID, &options(true, limits));
    check_block(&full, source, BLOCK_ID, &limits, true);
    let streaming = compile_block(source, BLOCK_ID, &options(false, limits));
    check_block(&streaming, source, BLOCK_ID, &limits, false);
    if full.diagnostics.is_empty() {
        check_valid_prefixes(source, &full, limits);
    }

    // The body inside a reply, growing; and the input itself when it holds a fence.
    let wrapped = format!("Intro\n```ui\n{source}\n```\nOutro");
    check_incremental(&wrapped, &[wrapped.len() / 2], limits);
    if source.contains("```") || source.contains("~~~") {
        check_incremental(source, &[source.len() / 2], limits);
    }
}

/// §8/§9 for a block `full` that compiled without any diagnostic: no streaming prefix
/// exceeds the budget, and every node of a prefix keeps its id in the final block (except a
/// trailing whitespace run). Checks up to 12 prefixes, spread over the source.
pub fn check_valid_prefixes(source: &str, full: &Block, limits: UiLimits) {
    let final_ids: HashSet<&str> = nodes_of(full).iter().map(|n| n.id.as_str()).collect();
    let cuts = (0..12).map(|k| floor_boundary(source, source.len() * k / 11));
    for cut in cuts {
        let prefix = &source[..cut];
        let block = compile_block(prefix, BLOCK_ID, &options(false, limits));
        check_block(&block, prefix, BLOCK_ID, &limits, false);
        assert!(
            !block
                .diagnostics
                .iter()
                .any(|d| d.code == Code::BudgetExceeded),
            "a prefix of a valid block exceeded the budget: {prefix:?}"
        );
        let len16 = utf16_len(prefix) as u32;
        for node in nodes_of(&block) {
            assert!(
                final_ids.contains(node.id.as_str()) || may_vanish(node, len16),
                "node {} of prefix {prefix:?} is not in the final block",
                node.id
            );
        }
    }
}

// ---------------------------------------------------------------------------------------
// compile_evaluate
// ---------------------------------------------------------------------------------------

/// Variables the raw-input expression is evaluated against.
pub fn variables() -> Record {
    let value = Value::from_json_str(
        r#"{"$n": 2, "$s": "text", "$l": [10, 20, 30], "$r": {"name": "x", "n": 5},
            "$recs": [{"n": 1, "k": "a"}, {"n": 2, "k": "b"}], "$t": true, "$null": null}"#,
    )
    .expect("valid JSON");
    value.as_record().cloned().expect("a record")
}

/// Compiles `text` as a final reply and evaluates every block with a fresh state under
/// small limits; then parses and evaluates `text` as one expression.
pub fn compile_evaluate(text: &str) {
    let limits = eval_limits();
    let options = options(true, compile_limits());
    let blocks = compile_reply(text, &options);
    check_reply(&blocks, text, &options);
    for block in &blocks {
        let node_ids: HashSet<&str> = nodes_of(block).iter().map(|n| n.id.as_str()).collect();
        let state = match UiState::new(block, limits) {
            Ok(state) => state,
            Err(f) => {
                assert_eq!(f.code, Code::BudgetExceeded, "UiState::new: {f}");
                continue;
            }
        };
        let view = match evaluate_block(block, &state, limits, Some(&CLOCK)) {
            Ok(view) => view,
            Err(f) => {
                assert_eq!(f.code, Code::BudgetExceeded, "evaluate_block: {f}");
                continue;
            }
        };
        assert!(view.diagnostics.len() as u64 <= limits.diagnostics());
        let mut views = 0u64;
        view.walk(&mut |v| {
            views += 1;
            assert!(
                node_ids.contains(v.source_id.as_str()),
                "{} has no source",
                v.id
            );
            let suffix =
                v.id.strip_prefix(v.source_id.as_str())
                    .expect("a view id extends its source id");
            assert!(
                suffix
                    .split(':')
                    .skip(1)
                    .all(|i| i.parse::<usize>().is_ok())
                    && (suffix.is_empty() || suffix.starts_with(':')),
                "view id suffix {suffix:?} is not a list of Each indexes"
            );
        });
        // Each visit charges the node budget first; the visit that trips it still yields
        // its (failed) view, and nothing is visited after it.
        assert!(
            views <= limits.nodes() + 1,
            "{views} view nodes over the node budget"
        );
        // Deterministic under the frozen clock. `UiState` copies its values under the wall
        // clock (it takes no clock), so only that copy may time out on a stalled machine.
        match evaluate_block(block, &state, limits, Some(&CLOCK)) {
            Ok(again) => assert_eq!(again, view, "evaluation is deterministic"),
            Err(f) => assert_eq!(f.code, Code::BudgetExceeded, "evaluate_block: {f}"),
        }
    }

    let mut budget = Budget::new(compile_limits(), &CLOCK);
    if let Ok(expr) = parse_expression(text, &mut budget) {
        let json = serde_json::to_string(&expr).expect("an expression serialises");
        let back: Expr = serde_json::from_str(&json).expect("its wire shape reads back");
        assert_eq!(back, expr, "wire round trip of {json}");
        let vars = variables();
        let run = || {
            let mut budget = Budget::new(limits, &CLOCK);
            evaluate(&expr, &vars, &mut budget).map_err(|f| f.code)
        };
        let first = run();
        assert_eq!(first, run(), "evaluation is deterministic");
        if let Ok(value) = first {
            // Values always print (no NaN or infinity can be built).
            let _ = value.to_js_json();
        }
    }
}
