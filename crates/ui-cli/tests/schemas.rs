//! Every published wire schema (`uiblocks schema`, `GET /api/schema/{type}`) accepts the
//! real outputs: the conformance corpus is run through the driver as
//! `tests/conformance.rs` runs it, and each compiled block, view (with its diagnostics)
//! and link target is validated against the schema derived from its type. The reference
//! implementation's compiled blocks are validated too, so the schemas describe the
//! contract and not only this implementation.
//!
//! The validator is the `jsonschema` crate (draft 2020-12), a dev-dependency only.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value as Json, json};

fn corpus() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/data/conformance")
}

fn read_json(path: &Path) -> Json {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path:?}: {e}"))
}

/// The validators of the wire types, by name.
struct Schemas(BTreeMap<&'static str, jsonschema::Validator>);

impl Schemas {
    fn new(names: &[&'static str]) -> Self {
        Schemas(
            names
                .iter()
                .map(|&name| {
                    let schema = ui_server::schema::wire_schema(name)
                        .unwrap_or_else(|| panic!("no wire schema named {name}"));
                    let validator = jsonschema::draft202012::new(&schema)
                        .unwrap_or_else(|e| panic!("the schema of {name} is invalid: {e}"));
                    (name, validator)
                })
                .collect(),
        )
    }

    /// The errors of `value` against the schema of `name`, each with where it is.
    fn check(&self, name: &str, value: &Json, at: &str) -> Vec<String> {
        self.0[name]
            .iter_errors(value)
            .map(|e| format!("{at}: {name}: {e} at {}", e.instance_path()))
            .collect()
    }
}

/// The driver requests of one case: `compile`, then `evaluate` and `links` with the
/// defaults and, when the case has one, with its scenario.
fn requests(dir: &Path, name: &str, hosts: &Json) -> Vec<(String, Json)> {
    let text = std::fs::read_to_string(dir.join(format!("{name}.md"))).unwrap();
    let input_path = dir.join(format!("{name}.input.json"));
    let input = if input_path.exists() {
        read_json(&input_path)
    } else {
        json!({})
    };
    let mut base = Map::new();
    base.insert("text".into(), Json::String(text));
    base.insert("id".into(), json!("reply"));
    base.insert(
        "final".into(),
        input.get("final").cloned().unwrap_or(json!(true)),
    );
    base.insert("querySchemas".into(), hosts.clone());
    for key in ["fenceLanguage", "latestAttachment"] {
        if let Some(v) = input.get(key) {
            base.insert(key.into(), v.clone());
        }
    }
    let mut out = Vec::new();
    let mut compile = base.clone();
    compile.insert("op".into(), json!("compile"));
    out.push(("compile".to_owned(), Json::Object(compile)));
    for op in ["evaluate", "links"] {
        let mut request = base.clone();
        request.insert("op".into(), json!(op));
        out.push((format!("default.{op}"), Json::Object(request.clone())));
        for key in ["input", "queries", "press", "perBlock"] {
            if let Some(v) = input.get(key) {
                request.insert(key.into(), v.clone());
            }
        }
        out.push((format!("scenario.{op}"), Json::Object(request)));
    }
    out
}

#[test]
fn every_corpus_output_fits_the_schema_of_its_type() {
    let dir = corpus();
    let hosts = read_json(&dir.join("hosts.json"))["querySchemas"].clone();
    let schemas = Schemas::new(&["UiBlock", "UiView", "UiLinkTarget"]);
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .expect("corpus directory")
        .filter_map(|e| {
            let name = e.ok()?.file_name().into_string().ok()?;
            let stem = name.strip_suffix(".md")?;
            (stem != "README").then(|| stem.to_owned())
        })
        .collect();
    names.sort();
    assert!(names.len() >= 50, "the corpus has {} cases", names.len());

    let mut errors = Vec::new();
    let mut checked: BTreeMap<&str, usize> = BTreeMap::new();
    let mut check = |name: &'static str, value: &Json, at: String| {
        errors.extend(schemas.check(name, value, &at));
        *checked.entry(name).or_default() += 1;
    };
    for case in &names {
        // The reference implementation's compiled blocks.
        let expected = read_json(&dir.join(format!("{case}.expected.json")));
        for (i, block) in expected["compile"]["blocks"]
            .as_array()
            .into_iter()
            .flatten()
            .enumerate()
        {
            check(
                "UiBlock",
                block,
                format!("{case} reference compile blocks[{i}]"),
            );
        }
        for (section, request) in requests(&dir, case, &hosts) {
            let answer = ui_cli::driver::handle(&request);
            assert_eq!(answer["ok"], true, "{case} {section}: {answer}");
            for (i, entry) in answer["blocks"].as_array().unwrap().iter().enumerate() {
                let at = format!("{case} {section} blocks[{i}]");
                match section.as_str() {
                    "compile" => check("UiBlock", entry, at),
                    _ if section.ends_with("evaluate") => {
                        if entry.get("error").is_none() {
                            let view = json!({"nodes": entry["nodes"], "diagnostics": entry["diagnostics"]});
                            check("UiView", &view, at);
                        }
                    }
                    _ => {
                        for (node, target) in entry["targets"].as_object().into_iter().flatten() {
                            check("UiLinkTarget", target, format!("{at} {node}"));
                        }
                    }
                }
            }
        }
    }
    // The check has teeth: an unknown field or an unknown code is refused.
    let first =
        ui_cli::driver::handle(&requests(&dir, &names[0], &hosts)[0].1)["blocks"][0].clone();
    let mut extra = first.clone();
    extra["surprise"] = json!(1);
    assert!(!schemas.check("UiBlock", &extra, "extra").is_empty());
    let mut bad_code = first;
    bad_code["diagnostics"] =
        json!([{"code": "no_such_code", "message": "", "start": 0, "end": 0}]);
    assert!(!schemas.check("UiBlock", &bad_code, "bad code").is_empty());
    // Every type met real outputs, many of them.
    for (name, min) in [("UiBlock", 100), ("UiView", 100), ("UiLinkTarget", 10)] {
        let n = checked.get(name).copied().unwrap_or(0);
        assert!(n >= min, "only {n} outputs of {name} were checked");
    }
    assert!(
        errors.is_empty(),
        "{} outputs do not fit their schemas:\n{}",
        errors.len(),
        errors.join("\n")
    );
}
