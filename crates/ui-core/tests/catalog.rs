//! The catalog table and prop validation (`catalog.md` §1–§4, §9): one accepted example per
//! component, and every constraint violated at least once.

use std::collections::BTreeSet;

use proptest::prelude::*;
use ui_core::catalog::{self, Component, Group, PropKind, PropsError};
use ui_core::{Code, Failure, Record, Value};

fn json(text: &str) -> Value {
    Value::from_json_str(text).unwrap_or_else(|e| panic!("bad test JSON {text}: {e}"))
}

fn record(text: &str) -> Record {
    json(text).as_record().expect("a record").clone()
}

fn component(name: &str) -> &'static Component {
    catalog::lookup(name).unwrap_or_else(|| panic!("{name} is not in the catalog"))
}

/// `name` accepts `props` (JSON text); returns the normalised props.
fn accept(name: &str, props: &str) -> Record {
    accept_record(name, &record(props))
}

fn accept_record(name: &str, props: &Record) -> Record {
    component(name)
        .validate(props)
        .unwrap_or_else(|e| panic!("{name} {props:?} was refused: {}", e.message()))
}

/// `name` refuses `props` (JSON text) with `invalid_props`.
fn refuse(name: &str, props: &str) -> PropsError {
    refuse_record(name, &record(props))
}

fn refuse_record(name: &str, props: &Record) -> PropsError {
    let error = component(name)
        .validate(props)
        .expect_err(&format!("{name} {props:?} was accepted"));
    assert_eq!(error.code(), Code::InvalidProps);
    assert!(!error.message().is_empty());
    assert_eq!(error.to_string(), error.message());
    let failure = Failure::from(error.clone());
    assert_eq!(failure.code, Code::InvalidProps);
    assert_eq!(&*failure.message, error.message());
    error
}

/// `name` refuses `props`, blaming the prop `prop`.
fn refuse_at(name: &str, props: &str, prop: &str) -> PropsError {
    let error = refuse(name, props);
    assert_eq!(
        error.prop(),
        Some(prop),
        "{name} {props}: {}",
        error.message()
    );
    assert!(
        error.message().starts_with(prop),
        "message should name the prop: {}",
        error.message()
    );
    error
}

/// `base` with `key` set to `value`.
fn with(base: &str, key: &str, value: Value) -> Record {
    let mut props = record(base);
    props.insert(key.to_owned(), value);
    props
}

fn text_of_units(units: usize) -> Value {
    Value::string("a".repeat(units))
}

fn list_of(len: usize, item: &Value) -> Value {
    Value::array(vec![item.clone(); len])
}

/// One valid example per component: (name, props, normalised props when they differ).
const EXAMPLES: &[(&str, &str, Option<&str>)] = &[
    ("Summary", r#"{"tone": "success", "badge": "v2"}"#, None),
    ("Callout", r#"{"tone": "danger", "title": "Blocked"}"#, None),
    ("Tag", r#"{"tone": "neutral"}"#, None),
    ("Progress", r#"{"value": 3, "max": 8}"#, None),
    ("Steps", "{}", None),
    ("Step", r#"{"state": "running", "detail": "2 s"}"#, None),
    ("Stats", "{}", None),
    (
        "Stat",
        r#"{"label": "Duration", "value": 93.5, "previous": -1, "unit": "s", "tone": "info"}"#,
        None,
    ),
    ("EntityList", "{}", None),
    ("Entry", r#"{"label": "Owner"}"#, None),
    (
        "Table",
        r#"{"rows": [{"id": 1, "ok": true, "nested": {"a": [1]}}]}"#,
        None,
    ),
    (
        "Column",
        r#"{"key": "id", "title": "Id", "unit": "ms", "as": "duration"}"#,
        None,
    ),
    (
        "Chart",
        r#"{"kind": "hbar", "data": [{"label": "a", "x": 1, "y": null, "z": true}], "unit": "%"}"#,
        None,
    ),
    ("Tabs", "{}", None),
    ("Tab", r#"{"title": "Fast"}"#, None),
    ("Sections", "{}", None),
    ("Section", r#"{"title": "Logs"}"#, None),
    ("CodeBlock", r#"{"language": "sh"}"#, None),
    (
        "Image",
        r#"{"attachment": "img-4", "alt": "Login screen"}"#,
        None,
    ),
    ("Sources", "{}", None),
    (
        "Source",
        r#"{"title": "Docs", "url": "https://example.com/a"}"#,
        None,
    ),
    (
        "File",
        r#"{"line": "148", "path": "src/main.rs"}"#,
        Some(r#"{"path": "src/main.rs", "line": 148}"#),
    ),
    ("Diff", r#"{"path": "src/lib.rs"}"#, None),
    ("Commit", r#"{"sha": "0123abcDEF"}"#, None),
    ("Node", r#"{"id": "ticket-7"}"#, None),
    ("Checklist", r#"{"value": ["a", 1, true, null]}"#, None),
    ("Item", r#"{"value": "a"}"#, None),
    ("Switch", r#"{"value": false}"#, None),
    (
        "Slider",
        r#"{"value": 5, "min": 0, "max": 10, "step": 0.5, "unit": "px"}"#,
        None,
    ),
    ("Segmented", r#"{"value": "fast"}"#, None),
    ("Option", r#"{"value": 2}"#, None),
    ("Button", r#"{"disabled": true}"#, None),
    ("Show", r#"{"when": true}"#, None),
    (
        "Each",
        r#"{"items": [1, "two", [3], {"four": 4}], "as": "row"}"#,
        None,
    ),
    ("Choices", "{}", None),
    (
        "Choice",
        r#"{"context": "Open a PR", "primary": true, "disabled": false}"#,
        None,
    ),
];

fn example_of(name: &str) -> &'static str {
    EXAMPLES
        .iter()
        .find(|(n, _, _)| *n == name)
        .map(|(_, props, _)| *props)
        .unwrap_or_else(|| panic!("no example for {name}"))
}

// ---------------------------------------------------------------------------------------------
// The table

#[test]
fn the_catalog_has_36_components_in_order() {
    let names: Vec<&str> = catalog::components().iter().map(Component::name).collect();
    assert_eq!(
        names,
        [
            "Summary",
            "Callout",
            "Tag",
            "Progress",
            "Steps",
            "Step",
            "Stats",
            "Stat",
            "EntityList",
            "Entry",
            "Table",
            "Column",
            "Chart",
            "Tabs",
            "Tab",
            "Sections",
            "Section",
            "CodeBlock",
            "Image",
            "Sources",
            "Source",
            "File",
            "Diff",
            "Commit",
            "Node",
            "Checklist",
            "Item",
            "Switch",
            "Slider",
            "Segmented",
            "Option",
            "Button",
            "Show",
            "Each",
            "Choices",
            "Choice",
        ]
    );
    for c in catalog::components() {
        assert!(std::ptr::eq(catalog::lookup(c.name()).unwrap(), c));
        assert!(!c.description().is_empty());
    }
}

#[test]
fn lookup_is_exact_and_own_keys_only() {
    for name in [
        "summary",
        "SUMMARY",
        "Summary ",
        "",
        "toString",
        "__proto__",
        "constructor",
        "prototype",
        "hasOwnProperty",
        "valueOf",
        "Widget",
        "Gauge",
    ] {
        assert!(catalog::lookup(name).is_none(), "{name:?}");
    }
    // Near misses of every name: its prefixes, and each byte changed or dropped.
    let named = |s: &str| catalog::components().iter().find(|c| c.name() == s);
    for c in catalog::components() {
        let name = c.name();
        let mut near: Vec<String> = (0..name.len()).map(|i| name[..i].to_owned()).collect();
        for i in 0..name.len() {
            near.push(format!("{}{}", &name[..i], &name[i + 1..]));
            for b in [b'a', b'S', b'z', b'_'] {
                let mut bytes = name.as_bytes().to_vec();
                bytes[i] = b;
                near.push(String::from_utf8(bytes).unwrap());
            }
        }
        for s in near {
            let found = catalog::lookup(&s).map(catalog::Component::name);
            assert_eq!(found, named(&s).map(catalog::Component::name), "{s:?}");
        }
    }
}

#[test]
fn groups_in_order_with_their_members() {
    let ids: Vec<&str> = Group::ALL.iter().map(|g| g.id()).collect();
    assert_eq!(
        ids,
        [
            "status",
            "data",
            "structure",
            "content",
            "links",
            "inputs",
            "choices"
        ]
    );
    let display: Vec<&str> = Group::ALL.iter().map(|g| g.display_name()).collect();
    assert_eq!(
        display,
        [
            "Status",
            "Data",
            "Structure",
            "Content",
            "Host links",
            "Local inputs",
            "Choices"
        ]
    );
    let members = |g: Group| -> Vec<&str> {
        catalog::components()
            .iter()
            .filter(|c| c.group() == g)
            .map(Component::name)
            .collect()
    };
    assert_eq!(
        members(Group::Status),
        ["Summary", "Callout", "Tag", "Progress", "Steps", "Step"]
    );
    assert_eq!(
        members(Group::Data),
        [
            "Stats",
            "Stat",
            "EntityList",
            "Entry",
            "Table",
            "Column",
            "Chart"
        ]
    );
    assert_eq!(
        members(Group::Structure),
        ["Tabs", "Tab", "Sections", "Section"]
    );
    assert_eq!(
        members(Group::Content),
        ["CodeBlock", "Image", "Sources", "Source"]
    );
    assert_eq!(members(Group::Links), ["File", "Diff", "Commit", "Node"]);
    assert_eq!(
        members(Group::Inputs),
        [
            "Checklist",
            "Item",
            "Switch",
            "Slider",
            "Segmented",
            "Option",
            "Button",
            "Show",
            "Each"
        ]
    );
    assert_eq!(members(Group::Choices), ["Choices", "Choice"]);
    // Groups never interleave: catalog order is group order.
    let order: Vec<usize> = catalog::components()
        .iter()
        .map(|c| Group::ALL.iter().position(|g| *g == c.group()).unwrap())
        .collect();
    assert!(order.is_sorted());
    assert_eq!(Group::Links.to_string(), "links");
    for g in Group::ALL {
        assert!(g.description().ends_with('.'));
        assert!(g.rules().ends_with('.'));
    }
    assert!(Group::Content.rules().contains("generated=\"latest\""));
}

#[test]
fn parents_and_children_match_the_spec() {
    let pairs = [
        ("Steps", "Step"),
        ("Stats", "Stat"),
        ("EntityList", "Entry"),
        ("Table", "Column"),
        ("Tabs", "Tab"),
        ("Sections", "Section"),
        ("Sources", "Source"),
        ("Checklist", "Item"),
        ("Segmented", "Option"),
        ("Choices", "Choice"),
    ];
    for c in catalog::components() {
        let as_container = pairs.iter().find(|(p, _)| *p == c.name());
        assert_eq!(
            c.children(),
            as_container.map(|(_, child)| std::slice::from_ref(child)),
            "{}",
            c.name()
        );
        let as_child = pairs.iter().find(|(_, ch)| *ch == c.name());
        assert_eq!(c.parent(), as_child.map(|(p, _)| *p), "{}", c.name());
    }
}

#[test]
fn bindings_actions_and_pass_through() {
    for c in catalog::components() {
        let bound = matches!(c.name(), "Checklist" | "Switch" | "Slider" | "Segmented");
        assert_eq!(c.binding(), bound.then_some("value"), "{}", c.name());
        if bound {
            assert!(c.prop("value").unwrap().required());
        }
        assert_eq!(
            c.action(),
            (c.name() == "Button").then_some("action"),
            "{}",
            c.name()
        );
        assert_eq!(
            c.is_pass_through(),
            matches!(c.name(), "Show" | "Each"),
            "{}",
            c.name()
        );
        assert!(!c.has_prop("action"), "{}", c.name());
    }
}

#[test]
fn prop_lists_put_the_action_first_and_mark_optional_props() {
    assert_eq!(component("Button").prop_list(), ["action", "disabled?"]);
    assert_eq!(component("Steps").prop_list(), Vec::<String>::new());
    assert_eq!(
        component("Stat").prop_list(),
        ["label", "value", "previous?", "unit?", "tone?"]
    );
    assert_eq!(
        component("Image").prop_list(),
        ["attachment?", "generated?", "alt?"]
    );
    assert_eq!(component("Each").prop_list(), ["items", "as"]);
    let names: Vec<&str> = component("Slider")
        .props()
        .iter()
        .map(|p| p.name())
        .collect();
    assert_eq!(names, ["value", "min", "max", "step", "unit"]);
    assert_eq!(
        component("Step").prop("state").unwrap().kind().to_string(),
        "one of done|running|pending|failed|skipped"
    );
    assert_eq!(
        component("Callout").prop("tone").unwrap().kind(),
        PropKind::Tone
    );
    assert!(component("Callout").prop("tone").unwrap().required());
    assert!(!component("Summary").prop("tone").unwrap().required());
    assert_eq!(
        component("Progress")
            .prop("max")
            .unwrap()
            .kind()
            .to_string(),
        "number > 0"
    );
    assert_eq!(
        component("Progress")
            .prop("value")
            .unwrap()
            .kind()
            .to_string(),
        "number >= 0"
    );
    assert!(component("Summary").has_prop("badge"));
    assert!(!component("Summary").has_prop("Badge"));
    assert!(!component("Step").has_prop("status"));
}

// ---------------------------------------------------------------------------------------------
// Valid examples

#[test]
fn every_component_accepts_its_example() {
    let covered: BTreeSet<&str> = EXAMPLES.iter().map(|(n, _, _)| *n).collect();
    let all: BTreeSet<&str> = catalog::components().iter().map(Component::name).collect();
    assert_eq!(covered, all);
    assert_eq!(EXAMPLES.len(), 36);
    for (name, props, normalised) in EXAMPLES {
        let out = accept(name, props);
        let want = record(normalised.unwrap_or(props));
        assert_eq!(out, want, "{name}");
        // Keys come back in declaration order.
        let keys: Vec<&str> = out.keys().map(String::as_str).collect();
        let declared: Vec<&str> = component(name)
            .props()
            .iter()
            .map(|p| p.name())
            .filter(|n| out.contains_key(*n))
            .collect();
        assert_eq!(keys, declared, "{name}");
    }
}

#[test]
fn output_keeps_declaration_order_and_values() {
    let out = accept("Stat", r#"{"tone": "danger", "value": 1, "label": "x"}"#);
    let keys: Vec<&str> = out.keys().map(String::as_str).collect();
    assert_eq!(keys, ["label", "value", "tone"]);
    // Values are not copied: the rows of a Table are the very same array.
    let rows = json(r#"[{"a": 1}]"#);
    let out = accept_record("Table", &with("{}", "rows", rows.clone()));
    assert!(out["rows"].identical(&rows));
}

#[test]
fn no_defaults_absent_props_stay_absent() {
    for c in catalog::components() {
        let required: Record = c
            .props()
            .iter()
            .filter(|p| p.required())
            .map(|p| {
                let example = record(example_of(c.name()));
                (p.name().to_owned(), example[p.name()].clone())
            })
            .collect();
        if c.name() == "Image" {
            // Every Image prop is optional, but the refinement wants one source.
            refuse_record(c.name(), &required);
            continue;
        }
        let out = accept_record(c.name(), &required);
        assert_eq!(out.len(), required.len(), "{}", c.name());
        assert!(
            c.props()
                .iter()
                .filter(|p| !p.required())
                .all(|p| !out.contains_key(p.name()))
        );
    }
}

#[test]
fn minimal_props() {
    accept("Summary", "{}");
    accept("Tag", "{}");
    accept("Progress", "{}");
    accept("Button", "{}");
    accept("Choice", "{}");
    accept("CodeBlock", "{}");
    accept("Image", r#"{"generated": "latest"}"#);
    accept("File", r#"{"path": ""}"#);
    accept("Diff", r#"{"path": ""}"#);
    accept("Each", r#"{"items": [], "as": "_"}"#);
    accept("Checklist", r#"{"value": []}"#);
    accept("Table", r#"{"rows": []}"#);
    accept("Chart", r#"{"kind": "line", "data": []}"#);
    accept("Chart", r#"{"kind": "bar", "data": [{}]}"#);
    accept("Item", r#"{"value": null}"#);
    accept("Option", r#"{"value": false}"#);
    accept("Segmented", r#"{"value": -2.5}"#);
}

// ---------------------------------------------------------------------------------------------
// Generic violations, for every component and prop

#[test]
fn unknown_keys_are_refused_everywhere() {
    for c in catalog::components() {
        let props = with(example_of(c.name()), "style", json(r#""bold""#));
        let error = refuse_record(c.name(), &props);
        assert_eq!(error.prop(), Some("style"), "{}", c.name());
        let props = with(example_of(c.name()), "action", json("null"));
        assert_eq!(
            refuse_record(c.name(), &props).prop(),
            Some("action"),
            "{}",
            c.name()
        );
    }
    refuse_at("Steps", r#"{"x": 1}"#, "x");
    refuse_at("Step", r#"{"status": "done"}"#, "state");
    refuse_at("Step", r#"{"state": "done", "status": "done"}"#, "status");
    refuse_at("Image", r#"{"src": "a.png", "attachment": "a"}"#, "src");
    refuse_at(
        "Image",
        r#"{"url": "https://x", "generated": "latest"}"#,
        "url",
    );
    refuse_at("Summary", r#"{"Tone": "info"}"#, "Tone");
    refuse_at("Summary", r#"{"__proto__": "info"}"#, "__proto__");
}

#[test]
fn missing_required_props_are_refused() {
    let mut checked = 0;
    for c in catalog::components() {
        for p in c.props().iter().filter(|p| p.required()) {
            let mut props = record(example_of(c.name()));
            props.shift_remove(p.name());
            let error = refuse_record(c.name(), &props);
            assert_eq!(error.prop(), Some(p.name()), "{}", c.name());
            assert!(error.message().contains("required"), "{}", error.message());
            checked += 1;
        }
    }
    assert_eq!(checked, 28);
}

#[test]
fn wrong_types_are_refused_for_every_prop() {
    for c in catalog::components() {
        for p in c.props() {
            // A record fits no prop kind, and null only fits a Scalar.
            for bad in ["{}", "null", r#"{"a": 1}"#] {
                if bad == "null" && p.kind() == PropKind::Scalar {
                    continue;
                }
                let props = with(example_of(c.name()), p.name(), json(bad));
                let error = refuse_record(c.name(), &props);
                assert_eq!(
                    error.prop(),
                    Some(p.name()),
                    "{}.{} = {bad}",
                    c.name(),
                    p.name()
                );
            }
        }
    }
}

#[test]
fn specific_wrong_types() {
    refuse_at("Stat", r#"{"label": "x", "value": "42"}"#, "value");
    refuse_at("Stat", r#"{"label": 1, "value": 42}"#, "label");
    refuse_at("Show", r#"{"when": 1}"#, "when");
    refuse_at("Show", r#"{"when": "yes"}"#, "when");
    refuse_at("Show", r#"{"when": []}"#, "when");
    refuse_at("Switch", r#"{"value": "true"}"#, "value");
    refuse_at("Switch", r#"{"value": 0}"#, "value");
    refuse_at("Button", r#"{"disabled": "true"}"#, "disabled");
    refuse_at("Button", r#"{"disabled": 1}"#, "disabled");
    refuse_at("Choice", r#"{"primary": null}"#, "primary");
    refuse_at("Slider", r#"{"value": "5", "min": 0, "max": 10}"#, "value");
    refuse_at("Summary", r#"{"badge": 2}"#, "badge");
    refuse_at("Table", r#"{"rows": {"a": 1}}"#, "rows");
    refuse_at("Each", r#"{"items": "abc", "as": "x"}"#, "items");
    refuse_at("Each", r#"{"items": {}, "as": "x"}"#, "items");
    refuse_at("Checklist", r#"{"value": "a"}"#, "value");
    refuse_at("Item", r#"{"value": ["a"]}"#, "value");
    refuse_at("Option", r#"{"value": {"a": 1}}"#, "value");
    refuse_at("Segmented", r#"{"value": []}"#, "value");
    refuse_at("Commit", r#"{"sha": 1234567}"#, "sha");
    refuse_at("Source", r#"{"title": "x", "url": 1}"#, "url");
    refuse_at("Image", r#"{"attachment": 5}"#, "attachment");
}

#[test]
fn enums_are_exact() {
    for tone in ["neutral", "info", "success", "warning", "danger"] {
        accept("Callout", &format!(r#"{{"tone": "{tone}"}}"#));
    }
    let error = refuse_at("Callout", r#"{"tone": "Info"}"#, "tone");
    assert_eq!(
        error.message(),
        "tone: expected one of neutral|info|success|warning|danger"
    );
    refuse_at("Tag", r#"{"tone": "error"}"#, "tone");
    refuse_at("Stat", r#"{"label": "x", "value": 1, "tone": ""}"#, "tone");
    for state in ["done", "running", "pending", "failed", "skipped"] {
        accept("Step", &format!(r#"{{"state": "{state}"}}"#));
    }
    refuse_at("Step", r#"{"state": "Done"}"#, "state");
    refuse_at("Step", r#"{"state": "ok"}"#, "state");
    for format in ["text", "number", "bytes", "duration", "date", "file", "tag"] {
        accept("Column", &format!(r#"{{"key": "k", "as": "{format}"}}"#));
    }
    refuse_at("Column", r#"{"key": "k", "as": "Text"}"#, "as");
    refuse_at("Column", r#"{"key": "k", "as": "currency"}"#, "as");
    for kind in ["bar", "hbar", "stacked", "line"] {
        accept("Chart", &format!(r#"{{"kind": "{kind}", "data": []}}"#));
    }
    refuse_at("Chart", r#"{"kind": "pie", "data": []}"#, "kind");
    refuse_at("Chart", r#"{"kind": "BAR", "data": []}"#, "kind");
}

// ---------------------------------------------------------------------------------------------
// Lengths (characters: Unicode code points, as zod 4 counts them) and list sizes

#[test]
fn text_is_at_most_16384_characters() {
    let text_props = [
        ("Summary", "badge"),
        ("Callout", "title"),
        ("Step", "detail"),
        ("Stat", "label"),
        ("Stat", "unit"),
        ("Entry", "label"),
        ("Column", "title"),
        ("Chart", "unit"),
        ("Tab", "title"),
        ("Section", "title"),
        ("Image", "alt"),
        ("Source", "title"),
        ("File", "path"),
        ("Diff", "path"),
        ("Slider", "unit"),
        ("Choice", "context"),
    ];
    for (name, prop) in text_props {
        assert_eq!(component(name).prop(prop).unwrap().kind(), PropKind::Text);
        let base = example_of(name);
        accept_record(name, &with(base, prop, text_of_units(16_384)));
        accept_record(name, &with(base, prop, text_of_units(0)));
        let error = refuse_record(name, &with(base, prop, text_of_units(16_385)));
        assert_eq!(error.prop(), Some(prop));
    }
    // Lengths are characters (code points), as the reference's zod 4 counts them: 16,384
    // rabbits (32,768 UTF-16 units, 65,536 bytes) pass, one more character does not.
    let rabbits = "\u{1F407}".repeat(16_384);
    accept_record(
        "Summary",
        &with("{}", "badge", Value::string(rabbits.as_str())),
    );
    let error = refuse_record(
        "Summary",
        &with("{}", "badge", Value::string(format!("{rabbits}a"))),
    );
    assert_eq!(error.prop(), Some("badge"));
    // 16,384 characters of two UTF-8 bytes pass too.
    accept_record(
        "Summary",
        &with("{}", "badge", Value::string("é".repeat(16_384))),
    );
    // Scalars that are strings are Text too.
    for (name, base) in [("Item", "{}"), ("Option", "{}"), ("Segmented", "{}")] {
        accept_record(name, &with(base, "value", text_of_units(16_384)));
        refuse_record(name, &with(base, "value", text_of_units(16_385)));
    }
    let long = Value::array(vec![text_of_units(16_385)]);
    assert_eq!(
        refuse_record("Checklist", &with("{}", "value", long)).message(),
        "value[0]: must be at most 16384 characters long (got 16385)"
    );
    // The address of a Source is Text as well.
    let url = Value::string(format!("https://{}", "a".repeat(16_376)));
    accept_record("Source", &with(r#"{"title": "t"}"#, "url", url));
    let url = Value::string(format!("https://{}", "a".repeat(16_377)));
    refuse_record("Source", &with(r#"{"title": "t"}"#, "url", url));
}

#[test]
fn names_are_1_to_256_characters() {
    let name_props = [
        ("Column", "key"),
        ("CodeBlock", "language"),
        ("Image", "attachment"),
        ("Node", "id"),
        ("Each", "as"),
    ];
    for (name, prop) in name_props {
        let base = example_of(name);
        accept_record(name, &with(base, prop, text_of_units(256)));
        accept_record(name, &with(base, prop, text_of_units(1)));
        let error = refuse_record(name, &with(base, prop, text_of_units(257)));
        assert_eq!(error.prop(), Some(prop), "{name}.{prop}");
        let error = refuse_record(name, &with(base, prop, Value::string("")));
        assert_eq!(error.prop(), Some(prop), "{name}.{prop}");
    }
    refuse_at("CodeBlock", r#"{"language": ""}"#, "language");
    // Characters, not UTF-16 units: 256 rabbits (512 units) pass, 257 do not, as the
    // reference's zod 4 counts them.
    accept_record(
        "Node",
        &with("{}", "id", Value::string("\u{1F407}".repeat(256))),
    );
    refuse_record(
        "Node",
        &with("{}", "id", Value::string("\u{1F407}".repeat(257))),
    );
}

#[test]
fn lists_hold_at_most_1000_items() {
    let cases = [
        ("Table", r#"{}"#, "rows", json(r#"{"a": 1}"#)),
        (
            "Chart",
            r#"{"kind": "bar"}"#,
            "data",
            json(r#"{"label": "a", "x": 1}"#),
        ),
        ("Checklist", r#"{}"#, "value", json(r#""a""#)),
        ("Each", r#"{"as": "row"}"#, "items", json("[1]")),
    ];
    for (name, base, prop, item) in cases {
        accept_record(name, &with(base, prop, list_of(1_000, &item)));
        accept_record(name, &with(base, prop, list_of(0, &item)));
        let error = refuse_record(name, &with(base, prop, list_of(1_001, &item)));
        assert_eq!(error.prop(), Some(prop), "{name}.{prop}");
    }
}

#[test]
fn rows_chart_data_and_checklists_check_their_items() {
    let error = refuse_at("Table", r#"{"rows": [{"a": 1}, [1]]}"#, "rows");
    assert_eq!(error.message(), "rows[1]: expected record, received array");
    refuse_at("Table", r#"{"rows": [1]}"#, "rows");
    refuse_at("Table", r#"{"rows": [null]}"#, "rows");
    accept("Table", r#"{"rows": [{"a": {"b": [1, {"c": null}]}}]}"#);
    let error = refuse_at(
        "Chart",
        r#"{"kind": "bar", "data": [{"label": "a", "x": [1]}]}"#,
        "data",
    );
    assert_eq!(
        error.message(),
        "data[0].x: expected a scalar (string, number, boolean or null), received array"
    );
    refuse_at(
        "Chart",
        r#"{"kind": "bar", "data": [{"label": {"a": 1}}]}"#,
        "data",
    );
    refuse_at("Chart", r#"{"kind": "bar", "data": ["a"]}"#, "data");
    accept(
        "Chart",
        r#"{"kind": "bar", "data": [{"label": "no numbers", "x": "y"}]}"#,
    );
    accept(
        "Chart",
        r#"{"kind": "line", "data": [{"a": 1, "b": 2, "c": 3, "d": 4, "e": 5, "f": 6, "g": 7}]}"#,
    );
    refuse_at("Checklist", r#"{"value": [1, [2]]}"#, "value");
    refuse_at("Checklist", r#"{"value": [{}]}"#, "value");
    accept(
        "Each",
        r#"{"items": [[1, [2]], {"a": {}}, null], "as": "x"}"#,
    );
}

// ---------------------------------------------------------------------------------------------
// Component-specific rules

#[test]
fn progress_bounds() {
    accept("Progress", r#"{"value": 0}"#);
    accept("Progress", r#"{"value": 0.5, "max": 0.25}"#);
    accept("Progress", r#"{"value": 150, "max": 100}"#);
    accept("Progress", r#"{"max": 5e-324}"#);
    refuse_at("Progress", r#"{"value": -0.001}"#, "value");
    refuse_at("Progress", r#"{"value": -1, "max": 10}"#, "value");
    refuse_at("Progress", r#"{"max": 0}"#, "max");
    refuse_at("Progress", r#"{"max": -0.0}"#, "max");
    refuse_at("Progress", r#"{"max": -3}"#, "max");
    refuse_at("Progress", r#"{"value": "3"}"#, "value");
}

#[test]
fn slider_range() {
    accept("Slider", r#"{"value": 0, "min": 0, "max": 1}"#);
    accept("Slider", r#"{"value": 1, "min": 0, "max": 1}"#);
    accept(
        "Slider",
        r#"{"value": -5, "min": -10, "max": -1, "step": 100}"#,
    );
    // min == max
    let error = refuse("Slider", r#"{"value": 1, "min": 1, "max": 1}"#);
    assert_eq!(error.prop(), None);
    // min > max
    refuse("Slider", r#"{"value": 1, "min": 2, "max": 0}"#);
    // value outside
    refuse("Slider", r#"{"value": 11, "min": 0, "max": 10}"#);
    refuse("Slider", r#"{"value": -0.5, "min": 0, "max": 10}"#);
    // step
    refuse_at(
        "Slider",
        r#"{"value": 1, "min": 0, "max": 10, "step": 0}"#,
        "step",
    );
    refuse_at(
        "Slider",
        r#"{"value": 1, "min": 0, "max": 10, "step": -1}"#,
        "step",
    );
    // The range is checked only once every prop passed: the prop error is reported.
    refuse_at("Slider", r#"{"value": 20, "min": 0, "max": "10"}"#, "max");
    refuse_at("Slider", r#"{"value": 20, "min": 0}"#, "max");
}

#[test]
fn image_takes_exactly_one_source() {
    accept("Image", r#"{"attachment": "a"}"#);
    accept("Image", r#"{"generated": "latest", "alt": ""}"#);
    let error = refuse("Image", r#"{"attachment": "a", "generated": "latest"}"#);
    assert_eq!(error.prop(), None);
    assert!(
        error.message().contains("exactly one"),
        "{}",
        error.message()
    );
    refuse("Image", "{}");
    refuse("Image", r#"{"alt": "Login screen"}"#);
    refuse_at("Image", r#"{"generated": "Latest"}"#, "generated");
    refuse_at("Image", r#"{"generated": "first"}"#, "generated");
    refuse_at("Image", r#"{"generated": true}"#, "generated");
    refuse_at("Image", r#"{"attachment": ""}"#, "attachment");
    refuse_at(
        "Image",
        r#"{"attachment": null, "generated": "latest"}"#,
        "attachment",
    );
}

#[test]
fn commit_sha_is_7_to_64_ascii_hex_digits() {
    for sha in [
        "abcdef0",
        "ABCDEF0",
        "0123456789abcdefABCDEF",
        &"f".repeat(64),
    ] {
        accept_record("Commit", &with("{}", "sha", Value::string(sha)));
    }
    for sha in [
        "abcdef".to_owned(),
        "f".repeat(65),
        String::new(),
        "abcdefg".to_owned(),
        "abcdef0\n".to_owned(),
        "\nabcdef0".to_owned(),
        " abcdef0".to_owned(),
        "abcdef0 ".to_owned(),
        "abc-def0".to_owned(),
        // Full-width digits are not `\d` in a JS regex without the `u` flag.
        "\u{FF10}\u{FF11}\u{FF12}\u{FF13}\u{FF14}\u{FF15}\u{FF16}".to_owned(),
        "\u{0660}\u{0661}\u{0662}\u{0663}\u{0664}\u{0665}\u{0666}".to_owned(),
    ] {
        let error = refuse_record("Commit", &with("{}", "sha", Value::string(sha.as_str())));
        assert_eq!(error.prop(), Some("sha"), "{sha:?}");
    }
}

#[test]
fn source_url_starts_with_http_or_https() {
    for url in [
        "https://example.com",
        "http://example.com",
        "HTTPS://EXAMPLE.COM",
        "hTtP://x",
        "https://",
        "http://not a url at all",
    ] {
        accept_record(
            "Source",
            &with(r#"{"title": "t"}"#, "url", Value::string(url)),
        );
    }
    for url in [
        "",
        "ftp://example.com",
        "example.com",
        "//example.com",
        " https://example.com",
        "https:/example.com",
        "https:",
        "javascript:alert(1)",
        "file:///etc/passwd",
        "httpss://x",
        "mailto:a@b.c",
        // U+017F LATIN SMALL LETTER LONG S folds to `s` only under Unicode case folding.
        "http\u{17F}://example.com",
        // Full-width letters are not ASCII letters.
        "\u{FF48}ttps://example.com",
    ] {
        let error = refuse_record(
            "Source",
            &with(r#"{"title": "t"}"#, "url", Value::string(url)),
        );
        assert_eq!(error.prop(), Some("url"), "{url:?}");
    }
}

#[test]
fn each_as_is_an_identifier_without_dollar() {
    for name in ["row", "_", "_row_1", "Row", "a1", "ROW_2"] {
        accept_record("Each", &with(r#"{"items": []}"#, "as", Value::string(name)));
    }
    for name in [
        "$row", "1row", "row-1", "row.name", "ro w", "é", "", " row", "row\n",
    ] {
        let error = refuse_record("Each", &with(r#"{"items": []}"#, "as", Value::string(name)));
        assert_eq!(error.prop(), Some("as"), "{name:?}");
    }
    let long = Value::string(format!("_{}", "a".repeat(255)));
    accept_record("Each", &with(r#"{"items": []}"#, "as", long));
    let long = Value::string(format!("_{}", "a".repeat(256)));
    refuse_record("Each", &with(r#"{"items": []}"#, "as", long));
}

// ---------------------------------------------------------------------------------------------
// File.line coercion (JS `Number(x)`, then an integer 1..=10,000,000)

fn line(value: Value) -> Result<Value, PropsError> {
    component("File")
        .validate(&with(r#"{"path": "a.rs"}"#, "line", value))
        .map(|out| out["line"].clone())
}

#[test]
fn file_line_accepts_numbers_and_numeric_text() {
    let cases: &[(&str, f64)] = &[
        ("148", 148.0),
        (r#""148""#, 148.0),
        (r#"" 12 ""#, 12.0),
        (r#""\t\n 12\u00a0\ufeff""#, 12.0),
        (r#""1e3""#, 1_000.0),
        (r#""1E3""#, 1_000.0),
        (r#""0x10""#, 16.0),
        (r#""0o17""#, 15.0),
        (r#""0b11""#, 3.0),
        (r#""+5""#, 5.0),
        (r#""5.""#, 5.0),
        (r#""5.0""#, 5.0),
        (r#""007""#, 7.0),
        (r#""1""#, 1.0),
        ("1", 1.0),
        ("1.0", 1.0),
        ("10000000", 10_000_000.0),
        (r#""10000000""#, 10_000_000.0),
        (r#""1e7""#, 10_000_000.0),
        ("true", 1.0),
        ("[7]", 7.0),
        (r#"["148"]"#, 148.0),
        ("[[2]]", 2.0),
        (r#"[" 3 "]"#, 3.0),
    ];
    for &(input, want) in cases {
        let got = line(json(input)).unwrap_or_else(|e| panic!("{input}: {}", e.message()));
        assert_eq!(got, Value::number(want).unwrap(), "{input}");
        assert_eq!(got.kind(), ui_core::Kind::Number, "{input}");
    }
}

#[test]
fn file_line_refuses_everything_else() {
    for input in [
        r#""abc""#,
        r#""1.5""#,
        r#""""#,
        r#""   ""#,
        r#""0""#,
        r#""-1""#,
        r#""-0x10""#,
        r#""0x""#,
        r#""1_000""#,
        r#""12px""#,
        r#""Infinity""#,
        r#""-Infinity""#,
        r#""NaN""#,
        r#""1e400""#,
        r#""10000001""#,
        r#""٣""#,
        "0",
        "-3",
        "1.5",
        "0.999",
        "10000001",
        "10000000.5",
        "1e300",
        "false",
        "null",
        "[]",
        "[1,2]",
        "[null]",
        "[true]",
        "[[]]",
        r#"[""]"#,
        "[1.5]",
        "[{}]",
        "{}",
        r#"{"valueOf": 3}"#,
    ] {
        let error = line(json(input)).expect_err(input);
        assert_eq!(error.code(), Code::InvalidProps, "{input}");
        assert_eq!(error.prop(), Some("line"), "{input}");
    }
}

#[test]
fn file_line_absent_stays_absent() {
    let out = accept("File", r#"{"path": "a.rs"}"#);
    assert!(!out.contains_key("line"));
    refuse_at("File", r#"{"line": 3}"#, "path");
}

proptest! {
    #[test]
    fn file_line_text_round_trips(n in 1u32..=10_000_000, pad_left in "[ \t\n]{0,3}", pad_right in "[ \t\n]{0,3}") {
        let text = format!("{pad_left}{n}{pad_right}");
        let got = line(Value::string(text.as_str())).unwrap();
        prop_assert_eq!(got, Value::from(n));
        let hex = format!("0x{n:x}");
        prop_assert_eq!(line(Value::string(hex.as_str())).unwrap(), Value::from(n));
    }

    #[test]
    fn file_line_never_panics_and_only_keeps_integers_in_range(text in "\\PC{0,12}") {
        if let Ok(value) = line(Value::string(text.as_str())) {
            let n = value.as_f64().unwrap();
            prop_assert!(n.fract() == 0.0 && (1.0..=10_000_000.0).contains(&n), "{text:?} -> {n}");
        }
    }

    #[test]
    fn numbers_pass_file_line_iff_integer_in_range(x in -20.0f64..2.0e7) {
        let accepted = line(Value::number(x).unwrap()).is_ok();
        prop_assert_eq!(accepted, x.fract() == 0.0 && (1.0..=10_000_000.0).contains(&x));
    }

    #[test]
    fn text_props_accept_exactly_up_to_the_cap(extra in 0usize..3, wide in any::<bool>()) {
        // `wide` uses a character of two UTF-16 units, which still counts once.
        let unit = if wide { "\u{1F407}" } else { "é" };
        let count = 16_384 - 1 + extra;
        let value = Value::string(unit.repeat(count));
        let ok = component("Tab").validate(&with("{}", "title", value)).is_ok();
        prop_assert_eq!(ok, count <= 16_384);
    }
}

#[test]
fn every_optional_prop_says_what_leaving_it_out_means() {
    for component in catalog::components() {
        for prop in component.props() {
            let one_of =
                component.name() == "Image" && ["attachment", "generated"].contains(&prop.name());
            let expected = !prop.required() && !one_of;
            assert_eq!(
                prop.when_absent().is_some(),
                expected,
                "{}.{}",
                component.name(),
                prop.name()
            );
        }
    }
    let progress = catalog::lookup("Progress").unwrap();
    assert_eq!(
        progress.prop("max").unwrap().when_absent(),
        Some("the value is read as a percentage")
    );
}
