//! The expression language through its public API: identity, wire nodes built by hand, the
//! wire round trip and the cost model (`language.md` §10 and §19.2). Grammar, semantics and
//! helpers are the `expr_*` fixtures of `tests/data/`.

use proptest::prelude::*;
use serde_json::json;
use ui_compiler::expr::{BinaryOp, Expr, UnaryOp, evaluate, evaluate_in_scope, parse_expression};
use ui_core::{Budget, Code, Failure, FrozenClock, Record, UiLimits, Value};

static CLOCK: FrozenClock = FrozenClock(0.0);

fn budget_with(limits: UiLimits) -> Budget<'static> {
    Budget::new(limits, &CLOCK)
}

fn budget() -> Budget<'static> {
    budget_with(UiLimits::DEFAULT)
}

/// The variables most tests evaluate against.
fn vars() -> Record {
    let value = Value::from_json_str(
        r#"{
            "$n": 2,
            "$s": "text",
            "$l": [10, 20, 30],
            "$r": {"name": "prod", "1": "one", "n": 5},
            "$recs": [{"n": 1, "k": "a"}, {"n": 2, "k": "b"}, {"n": 3, "k": "c"}],
            "$nums": [1, 2, 3],
            "$empty": [],
            "$t": true,
            "$f": false,
            "$null": null,
            "x": 99
        }"#,
    )
    .unwrap();
    value.as_record().unwrap().clone()
}

fn parse(source: &str) -> Expr {
    parse_expression(source, &mut budget())
        .unwrap_or_else(|e| panic!("`{source}` should parse: {e}"))
}

fn parse_err(source: &str) -> Failure {
    match parse_expression(source, &mut budget()) {
        Ok(expr) => panic!("`{source}` should not parse, got {expr:?}"),
        Err(e) => e,
    }
}

fn run(source: &str) -> Result<Value, Failure> {
    let mut budget = budget();
    let expr = parse_expression(source, &mut budget)?;
    evaluate(&expr, &vars(), &mut budget)
}

fn wire(json: serde_json::Value) -> Expr {
    serde_json::from_value(json).unwrap()
}

fn lit(value: impl Into<Value>) -> Expr {
    Expr::Literal(value.into())
}

fn reference(name: &str) -> Expr {
    Expr::Reference(name.to_owned())
}

fn un(op: UnaryOp, value: Expr) -> Expr {
    Expr::Unary {
        op,
        value: Box::new(value),
    }
}

// ---------------------------------------------------------------------------------------
// Grammar, JavaScript semantics, strings and helpers are fixtures: `tests/data/parse/*/expr_*.md`
// (wire shapes, grammar messages) and `tests/data/eval/*/expr_*.md` (values and failure
// codes), run by `parse_fixtures.rs` and `eval_fixtures.rs`. What stays here checks the API
// (identity of shared allocations, wire nodes built by hand) and the budgets.

#[test]
fn identity_follows_allocations_after_the_boundary() {
    // Variables parsed from JSON (and every state) hold distinct allocations per path, so
    // two variables with equal contents are not identical, as after JavaScript's copy.
    let vars = Value::from_json_str(r#"{"$a": [1, 2], "$b": [1, 2]}"#).unwrap();
    let vars = vars.as_record().unwrap();
    let same = evaluate(&parse("$a == $b"), vars, &mut budget()).unwrap();
    assert_eq!(same, Value::Bool(false));
    let same = evaluate(&parse("$a == $a"), vars, &mut budget()).unwrap();
    assert_eq!(same, Value::Bool(true));
    // The boundary copy is charged in full, but it shares the allocations: a caller that
    // stores one value under two names gets them identical (documented on `evaluate`).
    let shared = Value::from_json_str("[1, 2]").unwrap();
    let mut vars = Record::default();
    vars.insert("$a".into(), shared.clone());
    vars.insert("$b".into(), shared.clone());
    let value = evaluate(&parse("$a"), &vars, &mut budget()).unwrap();
    assert!(value.identical(&shared));
    let value = evaluate_in_scope(&parse("$a"), &vars, &mut budget()).unwrap();
    assert!(value.identical(&shared));
}

// ---------------------------------------------------------------------------------------
// Forbidden names from the wire (§10.7).

#[test]
fn forbidden_names_from_the_wire_are_refused_at_evaluation() {
    let mut scope = Record::default();
    scope.insert("constructor".into(), Value::from(1));
    for expr in [
        reference("constructor"),
        Expr::Object(vec![("__proto__".into(), lit(1))]),
        Expr::Call {
            name: "Filter".into(),
            args: vec![reference("$l"), reference("prototype"), lit(true)],
        },
    ] {
        let mut vars = vars();
        vars.insert("__ok".into(), Value::Null);
        let err = evaluate_in_scope(&expr, &vars, &mut budget()).unwrap_err();
        assert_eq!(err.code, Code::RefusedAccess, "{expr:?}");
    }
    // The boundary copy refuses a forbidden variable name.
    let err = evaluate(&lit(1), &scope, &mut budget()).unwrap_err();
    assert_eq!(err.code, Code::RefusedAccess);
}

#[test]
fn unknown_wire_nodes_are_kept_and_fail_when_evaluated() {
    let raw = json!({"kind": "lambda", "body": {"kind": "literal", "value": 1}});
    let expr = wire(raw.clone());
    assert_eq!(expr, Expr::Unknown(raw.clone()));
    assert_eq!(serde_json::to_value(&expr).unwrap(), raw);
    let err = evaluate(&expr, &Record::default(), &mut budget()).unwrap_err();
    assert_eq!(err.code, Code::InvalidExpression);
    // Inside a known node only the unknown child is opaque.
    let nested = wire(json!({"kind": "array", "items": [{"kind": "literal", "value": 1}, raw]}));
    assert!(matches!(&nested, Expr::Array(items) if matches!(items[1], Expr::Unknown(_))));
    let err = evaluate(&nested, &Record::default(), &mut budget()).unwrap_err();
    assert_eq!(err.code, Code::InvalidExpression);
    // A malformed known node and an unknown operator are kept too.
    for raw in [
        json!({"kind": "binary", "operator": "**", "left": {"kind": "literal", "value": 1},
               "right": {"kind": "literal", "value": 2}}),
        json!({"kind": "member", "object": {"kind": "reference", "name": "$a"}}),
        json!({"kind": "reference", "name": 5}),
        json!(42),
    ] {
        let expr = wire(raw.clone());
        assert_eq!(expr, Expr::Unknown(raw.clone()));
        assert_eq!(serde_json::to_value(&expr).unwrap(), raw);
    }
    // An unknown helper name read from the wire is kept and refused when called.
    let call = wire(json!({"kind": "call", "name": "Eval", "args": []}));
    assert_eq!(call.as_call().map(|(name, _)| name), Some("Eval"));
    let err = evaluate(&call, &Record::default(), &mut budget()).unwrap_err();
    assert_eq!(err.code, Code::RefusedCall);
}

#[test]
fn a_string_may_hold_a_raw_line_feed() {
    // The one string case a line-based fixture (`tests/data/eval/*/expr_*.md`) cannot hold.
    assert_eq!(run("\"line\nfeed\"").unwrap(), Value::from("line\nfeed"));
}

// ---------------------------------------------------------------------------------------
// Wire shape (§10.3).

#[test]
fn wire_shape_matches_the_conformance_corpus() {
    // From bad-05-prototype-access.expected.json.
    let member = json!({"kind": "member", "object": {"kind": "reference", "name": "$config"},
        "key": {"kind": "binary", "operator": "+", "left": {"kind": "literal", "value": "na"},
        "right": {"kind": "literal", "value": "me"}}});
    // From ok-05-flaky-tests.expected.json.
    let filter = json!({"kind": "call", "name": "Filter", "args": [
        {"kind": "reference", "name": "$tests"}, {"kind": "reference", "name": "test"},
        {"kind": "binary", "operator": "||",
         "left": {"kind": "unary", "operator": "!", "value": {"kind": "reference", "name": "$onlyFlaky"}},
         "right": {"kind": "member", "object": {"kind": "reference", "name": "test"},
                   "key": {"kind": "literal", "value": "flaky"}}}]});
    let round = json!({"kind": "call", "name": "Round", "args": [
        {"kind": "binary", "operator": "*", "left": {"kind": "binary", "operator": "/",
          "left": {"kind": "call", "name": "Sum", "args": [{"kind": "reference", "name": "$tests"},
                   {"kind": "literal", "value": "failures"}]},
          "right": {"kind": "call", "name": "Sum", "args": [{"kind": "reference", "name": "$tests"},
                   {"kind": "literal", "value": "runs"}]}},
         "right": {"kind": "literal", "value": 100}},
        {"kind": "literal", "value": 1}]});
    // From ok-02-ci-live-runs.expected.json.
    let object = json!({"kind": "object", "entries": [
        {"key": "branch", "value": {"kind": "reference", "name": "$branch"}},
        {"key": "limit", "value": {"kind": "reference", "name": "$limit"}}]});
    // From bad-20-expression-errors.expected.json.
    let array = json!({"kind": "call", "name": "Join", "args": [{"kind": "array", "items": [
        {"kind": "array", "items": [{"kind": "literal", "value": 1}]},
        {"kind": "literal", "value": 2}]}]});
    let negative = json!({"kind": "call", "name": "Round", "args": [
        {"kind": "unary", "operator": "-", "value": {"kind": "literal", "value": 2.5}}]});
    for (source, expected) in [
        ("$config[\"na\" + \"me\"]", member),
        ("@Filter($tests, test, !$onlyFlaky || test.flaky)", filter),
        (
            "@Round(@Sum($tests, \"failures\") / @Sum($tests, \"runs\") * 100, 1)",
            round,
        ),
        ("{branch: $branch, limit: $limit}", object),
        ("@Join([[1], 2])", array),
        ("@Round(-2.5)", negative),
    ] {
        let parsed = parse(source);
        assert_eq!(serde_json::to_value(&parsed).unwrap(), expected, "{source}");
        assert_eq!(wire(expected), parsed, "{source}");
        let text = serde_json::to_string(&parsed).unwrap();
        assert_eq!(serde_json::from_str::<Expr>(&text).unwrap(), parsed);
    }
    let literals = parse("[null, true, 1.5, 1e21, \"s\", -0]");
    assert_eq!(
        serde_json::to_string(&literals).unwrap(),
        r#"{"kind":"array","items":[{"kind":"literal","value":null},{"kind":"literal","value":true},{"kind":"literal","value":1.5},{"kind":"literal","value":1e+21},{"kind":"literal","value":"s"},{"kind":"unary","operator":"-","value":{"kind":"literal","value":0}}]}"#
    );
}

#[test]
fn constants_and_references() {
    for source in [
        "1",
        "\"s\"",
        "null",
        "[1, [2, \"x\"]]",
        "{a: {b: [true]}}",
        "-1",
        "+-1",
        "[-1]",
    ] {
        assert!(parse(source).is_constant(), "{source}");
    }
    for source in [
        "!true",
        "1 + 2",
        "$a",
        "[1, $a]",
        "{a: $a}",
        "-$a",
        "@Count([])",
        "[1][0]",
    ] {
        assert!(!parse(source).is_constant(), "{source}");
    }
    let expr = parse("@Filter($rows, row, row.n > $min) + {a: $x[$y]}.a");
    let names: Vec<&str> = expr.references().collect();
    assert_eq!(names, ["$rows", "row", "row", "$min", "$x", "$y"]);
    let mut visited = Vec::new();
    expr.visit_references(&mut |name| visited.push(name.to_owned()));
    assert_eq!(visited, names);
    assert_eq!(parse("$rows").as_reference(), Some("$rows"));
    assert_eq!(parse("$rows.a").as_reference(), None);
    assert_eq!(parse("1").as_literal(), Some(&Value::from(1)));
    assert_eq!(BinaryOp::parse("!=="), Some(BinaryOp::StrictNe));
    assert_eq!(BinaryOp::StrictNe.as_str(), "!==");
    assert_eq!(UnaryOp::parse("!"), Some(UnaryOp::Not));
    assert_eq!(UnaryOp::Neg.to_string(), "-");
    for op in BinaryOp::ALL {
        assert_eq!(BinaryOp::parse(op.as_str()), Some(op));
    }
}

// ---------------------------------------------------------------------------------------
// Budgets (§19).

fn nested_parens(n: usize) -> String {
    format!("{}1{}", "(".repeat(n), ")".repeat(n))
}

#[test]
fn parse_depth_limit() {
    parse(&nested_parens(32));
    let err = parse_err(&nested_parens(33));
    assert_eq!(err.code, Code::BudgetExceeded);
    assert!(err.message.contains("nesting budget"), "{}", err.message);
    // Arrays and unary operators nest the same way.
    parse(&format!("{}1{}", "[".repeat(32), "]".repeat(32)));
    assert_eq!(
        parse_err(&format!("{}1{}", "[".repeat(33), "]".repeat(33))).code,
        Code::BudgetExceeded
    );
    // 31 prefix operators reach expression depth 32 (the literal itself needs none).
    parse(&format!("{}1", "-".repeat(32)));
    assert_eq!(
        parse_err(&format!("{}1", "-".repeat(33))).code,
        Code::BudgetExceeded
    );
}

#[test]
fn evaluation_depth_limit() {
    let deep = parse(&format!("{}1{}", "[".repeat(32), "]".repeat(32)));
    evaluate(&deep, &Record::default(), &mut budget()).unwrap();
    // A deeper AST (from the wire) fails at evaluation.
    let deeper = Expr::Array(vec![deep]);
    let err = evaluate(&deeper, &Record::default(), &mut budget()).unwrap_err();
    assert_eq!(err.code, Code::BudgetExceeded);
    assert!(err.message.contains("nesting budget"));
    // Deep variables fail at the boundary copy.
    let mut value = Value::Null;
    for _ in 0..32 {
        value = Value::array(vec![value]);
    }
    let mut vars = Record::default();
    vars.insert("$v".into(), value);
    let err = evaluate(&lit(1), &vars, &mut budget()).unwrap_err();
    assert_eq!(err.code, Code::BudgetExceeded);
}

#[test]
fn absurd_depth_limits_cannot_overflow_the_stack() {
    let limits = UiLimits::DEFAULT
        .with("depth", 1_000_000)
        .and_then(|l| l.with("steps", 10_000_000))
        .and_then(|l| l.with("nodes", 1_000_000))
        .unwrap();
    let err = parse_expression(&nested_parens(5_000), &mut budget_with(limits)).unwrap_err();
    assert_eq!(err.code, Code::BudgetExceeded);
    let err = parse_expression(&"-".repeat(5_000), &mut budget_with(limits)).unwrap_err();
    assert_eq!(err.code, Code::BudgetExceeded);
    let mut deep = lit(1);
    for _ in 0..5_000 {
        deep = un(UnaryOp::Neg, deep);
    }
    let err = evaluate(&deep, &Record::default(), &mut budget_with(limits)).unwrap_err();
    assert_eq!(err.code, Code::BudgetExceeded);
    // Dropping such a tree must not overflow either (5,000 levels is fine).
    drop(deep);
}

#[test]
fn array_literal_node_limit() {
    let items = |n: usize| format!("[{}]", vec!["1"; n].join(","));
    // One node for the array's own expression() call plus one per item.
    let expr = parse(&items(511));
    assert!(matches!(&expr, Expr::Array(items) if items.len() == 511));
    let err = parse_err(&items(512));
    assert_eq!(err.code, Code::BudgetExceeded);
    assert!(err.message.contains("node budget"), "{}", err.message);
}

#[test]
fn expression_source_length_limit() {
    let limits = UiLimits::DEFAULT.with("steps", 1_000_000).unwrap();
    let max = limits.string_length() as usize;
    let at_limit = format!("\"{}\"", "a".repeat(max - 2));
    let value = parse_expression(&at_limit, &mut budget_with(limits)).unwrap();
    assert_eq!(
        value.as_literal().and_then(Value::as_str).map(str::len),
        Some(max - 2)
    );
    let over = format!("\"{}\"", "a".repeat(max - 1));
    let err = parse_expression(&over, &mut budget_with(limits)).unwrap_err();
    assert_eq!(err.code, Code::BudgetExceeded);
    assert_eq!(&*err.message, "The expression is too long.");
    // The limit counts UTF-16 units: 🐇 is two.
    let small = UiLimits::DEFAULT.with("stringLength", 4).unwrap();
    parse_expression("\"🐇\"", &mut budget_with(small)).unwrap();
    let err = parse_expression("\"🐇 \"", &mut budget_with(small)).unwrap_err();
    assert_eq!(err.code, Code::BudgetExceeded);
    // Before lexing: even an invalid source fails on its length first.
    let err = parse_expression("#####", &mut budget_with(small)).unwrap_err();
    assert_eq!(err.code, Code::BudgetExceeded);
}

#[test]
fn string_value_length_limit() {
    let limits = UiLimits::DEFAULT.with("stringLength", 20).unwrap();
    let mut vars = Record::default();
    vars.insert("$a".into(), Value::from("a".repeat(19)));
    let run = |source: &str| {
        let mut budget = budget_with(limits);
        let expr = parse_expression(source, &mut budget)?;
        evaluate(&expr, &vars, &mut budget)
    };
    assert_eq!(run("$a + \"b\"").unwrap().as_str().map(str::len), Some(20));
    let err = run("$a + \"bc\"").unwrap_err();
    assert_eq!(err.code, Code::BudgetExceeded);
    assert!(err.message.contains("string budget"), "{}", err.message);
    assert_eq!(
        run("@Join([$a, 1], \"\")").unwrap().as_str().map(str::len),
        Some(20)
    );
    assert_eq!(
        run("@Join([$a, 1])").unwrap_err().code,
        Code::BudgetExceeded
    );
    assert_eq!(run("@Count($a)").unwrap(), Value::from(19));
}

#[test]
fn join_is_charged_quadratically() {
    let item = Value::from("abcdefghij");
    let vars_of = |n: usize| {
        let mut vars = Record::default();
        vars.insert("$items".into(), Value::array(vec![item.clone(); n]));
        vars
    };
    let expr = parse("@Join($items)");
    // 100 items of 10 units: Σ (12·i − 2) = 60,400 steps for the results so far alone.
    let err = evaluate(&expr, &vars_of(100), &mut budget()).unwrap_err();
    assert_eq!(err.code, Code::BudgetExceeded);
    assert!(err.message.contains("work budget"), "{}", err.message);
    // 20 items: Σ (12·i − 2) = 2,480 steps.
    let mut b = budget();
    let joined = evaluate(&expr, &vars_of(20), &mut b).unwrap();
    assert_eq!(joined.as_str().map(str::len), Some(20 * 10 + 19 * 2));
    // copy: 1 + (1 + 1) + 20·(1 + 1 + 10) = 243; nodes: call 2, reference 2;
    // Join: 20 iterations + 2,480.
    assert_eq!(b.steps(), 243 + 4 + 20 + 2_480);
    assert_eq!(b.iterations(), 1 + 20 + 20);
}

#[test]
fn the_boundary_copy_is_charged() {
    // 120 one-key records: 1 key + 120 items + 120 keys = 241 iterations for the copy.
    let rows: Vec<Value> = (0..120)
        .map(|i| {
            let mut r = Record::default();
            r.insert("k".into(), Value::from(i));
            Value::record(r)
        })
        .collect();
    let mut vars = Record::default();
    vars.insert("$d".into(), Value::array(rows));
    let mut b = budget();
    evaluate(&lit(1), &vars, &mut b).unwrap();
    assert_eq!(b.iterations(), 241);
    let mut b = budget();
    evaluate_in_scope(&lit(1), &vars, &mut b).unwrap();
    assert_eq!(b.iterations(), 0);
}

#[test]
fn exact_parse_and_evaluation_costs() {
    // Parse "1 + 2": tokens `1` (1), `+` (1 + 1 space), `2` (1 + 1 space), end (1);
    // expression(0,0) depth + node (2), operator node (1), expression(6,1) depth + node (2).
    let mut b = budget();
    let expr = parse_expression("1 + 2", &mut b).unwrap();
    assert_eq!((b.steps(), b.nodes()), (11, 3));
    // Evaluate: copy of {} (1); binary depth + step (2); each literal depth + step + copy (3).
    let mut b = budget();
    evaluate(&expr, &Record::default(), &mut b).unwrap();
    assert_eq!(b.steps(), 1 + 2 + 3 + 3);

    // A string token: 1 + one step per iteration (a, b, closing quote) + string(2); an
    // escaped surrogate pair is two iterations.
    let mut b = budget();
    parse_expression("\"ab\"", &mut b).unwrap();
    assert_eq!(b.steps(), (1 + 3 + 2) + 2 + 1);
    let mut b = budget();
    parse_expression("\"\\uD83D\\uDE00\"", &mut b).unwrap();
    assert_eq!(b.steps(), (1 + 3 + 2) + 2 + 1);
    // Postfix: depth(++d) + node per `.field`.
    let mut b = budget();
    parse_expression("$a.b", &mut b).unwrap();
    // tokens: $a, ., b, end = 4; expression 2; postfix 2.
    assert_eq!((b.steps(), b.nodes()), (8, 2));
    // Evaluating a string literal charges its copy: depth(0) + string.
    let mut b = budget();
    evaluate_in_scope(&lit("abc"), &Record::default(), &mut b).unwrap();
    assert_eq!(b.steps(), 2 + 1 + 3);
    // Array and record literals charge one iteration per item or entry.
    let mut b = budget();
    evaluate_in_scope(&parse("[1, {a: 2}]"), &Record::default(), &mut b).unwrap();
    assert_eq!(b.iterations(), 3);
}

#[test]
fn step_limit_stops_long_sources() {
    let limits = UiLimits::DEFAULT.with("steps", 100).unwrap();
    let source = vec!["1"; 60].join(" + ");
    let err = parse_expression(&source, &mut budget_with(limits)).unwrap_err();
    assert_eq!(err.code, Code::BudgetExceeded);
    assert!(err.message.contains("work budget"));
}

// ---------------------------------------------------------------------------------------
// Robustness.

fn token_soup() -> impl Strategy<Value = String> {
    let tokens = prop::sample::select(vec![
        "1",
        "0.5",
        "1e3",
        ".5",
        "\"s\"",
        "'t'",
        "\"\\u00e9\"",
        "\"\\uD83D\\uDE00\"",
        "\"\\uD83D\"",
        "$l",
        "$r",
        "$n",
        "$s",
        "$missing",
        "x",
        "v",
        "true",
        "false",
        "null",
        "constructor",
        "@Count",
        "@Filter",
        "@Sum",
        "@Join",
        "@Round",
        "@Query",
        "@Set",
        "@Nope",
        "(",
        ")",
        "[",
        "]",
        "{",
        "}",
        ",",
        ".",
        ":",
        "!",
        "+",
        "-",
        "*",
        "/",
        "%",
        "<",
        "<=",
        ">",
        ">=",
        "==",
        "!=",
        "===",
        "!==",
        "&&",
        "||",
        "length",
        "\"",
        "\\",
        "=",
        " ",
        "🐇",
    ]);
    prop::collection::vec(tokens, 0..40).prop_map(|tokens| tokens.concat())
}

fn check_never_panics(source: &str) {
    let limits = UiLimits::DEFAULT.with("steps", 5_000).unwrap();
    let mut budget = budget_with(limits);
    if let Ok(expr) = parse_expression(source, &mut budget) {
        // Every parsed AST survives the wire.
        let text = serde_json::to_string(&expr).unwrap();
        let back: Expr = serde_json::from_str(&text).unwrap();
        assert_eq!(back, expr);
        let _ = evaluate(&expr, &vars(), &mut budget);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn arbitrary_text_never_panics(source in "\\PC{0,48}") {
        check_never_panics(&source);
    }

    #[test]
    fn token_soup_never_panics(source in token_soup()) {
        check_never_panics(&source);
    }
}
