//! Every compile limit at its value and one past it, asserting the code
//! (`language.md` §19, §17.2).

use std::cell::Cell;
use std::sync::Arc;

use ui_compiler::{Block, CompileOptions, UiCompiler, compile_block};
use ui_core::{Clock, Code, FrozenClock, UiLimits};

static FROZEN: FrozenClock = FrozenClock(0.0);

fn options(limits: UiLimits) -> CompileOptions<'static> {
    CompileOptions {
        is_final: true,
        limits,
        clock: Some(&FROZEN),
        ..CompileOptions::default()
    }
}

fn compile(source: &str, limits: UiLimits) -> Block {
    compile_block(source, "b", &options(limits))
}

fn codes(block: &Block) -> Vec<Code> {
    block.diagnostics.iter().map(|d| d.code).collect()
}

fn assert_budget_failure(block: &Block, source: &str) {
    assert_eq!(codes(block), [Code::BudgetExceeded]);
    assert!(block.nodes.is_empty());
    assert_eq!(
        block.fallback,
        source.chars().take(65_536).collect::<String>()
    );
}

fn limits(key: &str, value: u64) -> UiLimits {
    UiLimits::DEFAULT.with(key, value).unwrap()
}

fn code_block(units: usize) -> String {
    let frame = "<CodeBlock></CodeBlock>".len();
    format!("<CodeBlock>{}</CodeBlock>", "x".repeat(units - frame))
}

#[test]
fn characters() {
    // CodeBlock content costs no steps, so only the length limit can trip.
    let at = code_block(65_536);
    assert!(compile(&at, UiLimits::DEFAULT).diagnostics.is_empty());
    let past = code_block(65_537);
    assert_budget_failure(&compile(&past, UiLimits::DEFAULT), &past);
}

#[test]
fn depth() {
    let nested = |n: usize| format!("{}x{}", "<Summary>".repeat(n), "</Summary>".repeat(n));
    assert!(
        compile(&nested(32), UiLimits::DEFAULT)
            .diagnostics
            .is_empty()
    );
    let past = nested(33);
    assert_budget_failure(&compile(&past, UiLimits::DEFAULT), &past);
    // Expression depth: 32 nested parentheses parse, 33 do not.
    let parens = |n: usize| format!("<Summary>{{{}1{}}}</Summary>", "(".repeat(n), ")".repeat(n));
    assert!(
        compile(&parens(30), UiLimits::DEFAULT)
            .diagnostics
            .is_empty()
    );
    let past = parens(40);
    assert_eq!(
        codes(&compile(&past, UiLimits::DEFAULT)),
        [Code::BudgetExceeded]
    );
}

#[test]
fn nodes() {
    let tags = |n: usize| "<Tag/>".repeat(n);
    let block = compile(&tags(512), UiLimits::DEFAULT);
    assert!(block.diagnostics.is_empty());
    assert_eq!(block.node_count(), 512);
    let past = tags(513);
    assert_budget_failure(&compile(&past, UiLimits::DEFAULT), &past);
}

#[test]
fn diagnostics_are_capped() {
    let block = compile(&"<Gauge/>\n".repeat(25), UiLimits::DEFAULT);
    assert_eq!(block.diagnostics.len(), 20);
    assert!(codes(&block).iter().all(|c| *c == Code::UnknownComponent));
    assert_eq!(block.nodes.len(), 25);
    let block = compile(&"<Gauge/>\n".repeat(20), UiLimits::DEFAULT);
    assert_eq!(block.diagnostics.len(), 20);
    let block = compile(&"<Gauge/>\n".repeat(3), limits("diagnostics", 2));
    assert_eq!(block.diagnostics.len(), 2);
}

#[test]
fn steps() {
    // A text run of n units costs n steps plus the loop step, the depth check, the node,
    // and the node's compile depth check: n + 4.
    assert!(
        compile(&"x".repeat(96), limits("steps", 100))
            .diagnostics
            .is_empty()
    );
    let past = "x".repeat(97);
    assert_budget_failure(&compile(&past, limits("steps", 100)), &past);
    // Observable consequence (§19.2): ~20,000 ordinary characters exceed the default.
    assert!(
        compile(&"x".repeat(19_000), UiLimits::DEFAULT)
            .diagnostics
            .is_empty()
    );
    assert_eq!(
        codes(&compile(&"x".repeat(21_000), UiLimits::DEFAULT)),
        [Code::BudgetExceeded]
    );
}

/// Where the default step budget runs out with declarations or quoted props before a long
/// text: each pair (last text length that compiles, first that fails) was measured against
/// the reference implementation. A declaration's scan also pays for the line feed that ends
/// it (which the whitespace skip then pays for again), and a quoted value's scan steps over
/// its opening quote unpaid; one step off either way moves the boundary by one per
/// declaration or prop.
#[test]
fn steps_of_declarations_and_quoted_props() {
    // `declarations` declarations, then `props` tags with one quoted prop each, then a
    // Summary of `n` units.
    let source = |declarations: usize, props: usize, n: usize| {
        let mut lines: Vec<String> = (0..declarations).map(|i| format!("$a{i} = 1")).collect();
        lines.extend((0..props).map(|_| "<Tag tone=\"info\">x</Tag>".to_owned()));
        lines.push(format!("<Summary>{}</Summary>", "p".repeat(n)));
        lines.join("\n")
    };
    // (what, declarations, quoted props, the first text length that fails)
    let cases = [
        ("text alone", 0, 0, 19_991),
        ("1 declaration", 1, 0, 19_979),
        ("10 declarations", 10, 0, 19_871),
        ("1 quoted prop", 0, 1, 19_950),
        ("10 quoted props", 0, 10, 19_581),
    ];
    for (what, declarations, props, fails_at) in cases {
        let last = compile(
            &source(declarations, props, fails_at - 1),
            UiLimits::DEFAULT,
        );
        assert!(last.diagnostics.is_empty(), "{what}: {:?}", codes(&last));
        let first = compile(&source(declarations, props, fails_at), UiLimits::DEFAULT);
        assert_eq!(codes(&first), [Code::BudgetExceeded], "{what}");
    }
}

#[test]
fn iterations() {
    // §19.2: a default of 120 one-key records read by 8 text expressions exceeds the
    // iterations at compile time, 7 do not.
    let rows: Vec<String> = (0..120).map(|i| format!("{{k: {i}}}")).collect();
    let source = |n: usize| {
        format!(
            "$rows = [{}]\n<Summary>{}</Summary>",
            rows.join(", "),
            "{@Count($rows)}".repeat(n)
        )
    };
    assert!(
        compile(&source(7), UiLimits::DEFAULT)
            .diagnostics
            .is_empty()
    );
    assert_eq!(
        codes(&compile(&source(8), UiLimits::DEFAULT)),
        [Code::BudgetExceeded]
    );
}

#[test]
fn string_length() {
    let raised = UiLimits::DEFAULT.with("steps", 10_000_000).unwrap();
    // A quoted prop is parsed as an expression source *with* its quotes, so the longest
    // quoted value is two units shorter than `stringLength`.
    let prop = |n: usize| format!("<Summary badge=\"{}\">x</Summary>", "a".repeat(n));
    assert!(compile(&prop(16_382), raised).diagnostics.is_empty());
    assert_eq!(
        codes(&compile(&prop(16_383), raised)),
        [Code::BudgetExceeded]
    );
    // A string value built by an expression may be exactly `stringLength` long.
    let built = |n: usize| {
        format!(
            "$a = \"{}\"\n<Summary>{{$a + \"b\"}}</Summary>",
            "a".repeat(n - 1)
        )
    };
    assert!(compile(&built(16_382), raised).diagnostics.is_empty());
    assert_eq!(
        codes(&compile(&built(16_385), raised)),
        [Code::BudgetExceeded]
    );
}

/// A clock that moves 5 ms forward every time it is read.
struct Ticking(Cell<f64>);

impl Clock for Ticking {
    fn now_ms(&self) -> f64 {
        let now = self.0.get();
        self.0.set(now + 5.0);
        now
    }
}

#[test]
fn milliseconds() {
    let clock = Ticking(Cell::new(0.0));
    let mut opts = options(UiLimits::DEFAULT);
    opts.clock = Some(&clock);
    // A small block reads the clock a few times; 200 text expressions read it every
    // CLOCK_CHECK_STEPS steps, far more than 30 ms of ticks.
    assert!(
        compile_block("<Tag>x</Tag>", "b", &opts)
            .diagnostics
            .is_empty()
    );
    clock.0.set(0.0);
    let busy = "{1}".repeat(200);
    let block = compile_block(&busy, "b", &opts);
    assert_eq!(codes(&block), [Code::BudgetExceeded]);
    // The same text under a frozen clock is fine.
    assert!(compile(&busy, UiLimits::DEFAULT).diagnostics.is_empty());
}

fn reply(fences: &[String]) -> String {
    fences
        .iter()
        .map(|body| format!("```ui\n{body}\n```\n"))
        .collect()
}

fn compile_reply(text: &str) -> Vec<Arc<Block>> {
    UiCompiler::new().compile(text, &options(UiLimits::DEFAULT))
}

#[test]
fn reply_blocks() {
    let sixteen = reply(&vec!["<Tag>x</Tag>".to_owned(); 16]);
    let blocks = compile_reply(&sixteen);
    assert_eq!(blocks.len(), 16);
    assert!(blocks.iter().all(|b| b.diagnostics.is_empty()));

    let seventeen = reply(&vec!["<Tag>x</Tag>".to_owned(); 17]);
    let blocks = compile_reply(&seventeen);
    assert_eq!(blocks.len(), 16);
    let last = &blocks[15];
    assert_eq!(codes(last), [Code::BudgetExceeded]);
    // The diagnostic names the refused fence in reply offsets.
    let fence_len = "```ui\n<Tag>x</Tag>\n```\n".len() as u32;
    assert_eq!(last.diagnostics[0].range.start, 16 * fence_len);
    assert_eq!(last.diagnostics[0].range.end, 17 * fence_len);

    // While streaming, the 16th block is also in the compiler's cache: the refusal goes on
    // a copy, so the next preview, which reuses the cached block, adds it once again.
    let streaming = CompileOptions {
        is_final: false,
        ..options(UiLimits::DEFAULT)
    };
    let mut compiler = UiCompiler::new();
    let first = compiler.compile(&seventeen, &streaming);
    let second = compiler.compile(&format!("{seventeen}More prose."), &streaming);
    for blocks in [&first, &second] {
        assert_eq!(blocks.len(), 16);
        assert_eq!(codes(&blocks[15]), [Code::BudgetExceeded]);
        assert!(blocks[..15].iter().all(|b| b.diagnostics.is_empty()));
    }
}

#[test]
fn reply_characters() {
    // Four blocks of 65,535 units plus their line feeds: 262,144 exactly, then one more.
    let body = code_block(65_535);
    let at = reply(&vec![body.clone(); 4]);
    let blocks = compile_reply(&at);
    assert_eq!(blocks.len(), 4);
    assert!(blocks.iter().all(|b| b.diagnostics.is_empty()));
    let past = reply(&[body.clone(), body.clone(), body.clone(), code_block(65_536)]);
    let blocks = compile_reply(&past);
    assert_eq!(blocks.len(), 4);
    assert_eq!(codes(&blocks[3]), [Code::BudgetExceeded]);
    assert!(blocks[3].nodes.is_empty());
    assert_eq!(blocks[3].fallback.len(), 4_096);
}

#[test]
fn reply_nodes() {
    // 16 blocks of 128 nodes: 2,048 exactly; one more node refuses the last block.
    let body = "<Tag/>".repeat(128);
    let at = reply(&vec![body.clone(); 16]);
    let blocks = compile_reply(&at);
    assert_eq!(blocks.iter().map(|b| b.node_count()).sum::<usize>(), 2_048);
    assert!(blocks.iter().all(|b| b.diagnostics.is_empty()));
    let mut bodies = vec![body.clone(); 15];
    bodies.push(format!("{body}<Tag/>"));
    let blocks = compile_reply(&reply(&bodies));
    assert_eq!(blocks.len(), 16);
    assert_eq!(codes(&blocks[15]), [Code::BudgetExceeded]);
    assert!(blocks[15].nodes.is_empty());
}

#[test]
fn reply_milliseconds() {
    let clock = Ticking(Cell::new(0.0));
    let mut opts = options(UiLimits::DEFAULT);
    opts.clock = Some(&clock);
    let text = reply(&vec!["<Tag>x</Tag>".to_owned(); 16]);
    let blocks = UiCompiler::new().compile(&text, &opts);
    // The reply clock passes 60 ms part-way; that fence is refused and scanning stops.
    let refused = blocks.last().unwrap();
    assert_eq!(codes(refused), [Code::BudgetExceeded]);
    assert!(blocks.len() < 16);
    let frozen = compile_reply(&text);
    assert!(frozen.iter().all(|b| b.diagnostics.is_empty()));
}

#[test]
fn queries_per_block() {
    struct Any;
    impl ui_compiler::QuerySchemas for Any {
        fn check(&self, _: &str, _: &ui_core::Value) -> Option<Result<(), String>> {
            Some(Ok(()))
        }
    }
    let source = |n: usize| {
        let mut s: String = (0..n)
            .map(|i| format!("$q{i} = @Query(\"s\", {{}})\n"))
            .collect();
        s.push_str("<Tag>x</Tag>");
        s
    };
    let mut opts = options(UiLimits::DEFAULT);
    opts.query_schemas = Some(&Any);
    let block = compile_block(&source(8), "b", &opts);
    assert!(block.diagnostics.is_empty());
    assert_eq!(block.queries.len(), 8);
    let block = compile_block(&source(9), "b", &opts);
    assert_eq!(codes(&block), [Code::BudgetExceeded]);
    assert!(block.queries.is_empty());
}
