//! Node fallback text (`catalog.md` §7.2): what a client that cannot draw a node shows.

use std::borrow::Cow;

use ui_core::{Record, Value};

/// The fallback of a node of type `kind` with `props`, given the concatenated fallbacks of
/// its children (`node_fallback`, `catalog.md` §7.2). Works for unknown types too (they use
/// the generic rule).
pub fn node_fallback(kind: &str, props: &Record, children: &str) -> String {
    node_fallback_with(kind, |key| props.get(key), Cow::Borrowed(children))
}

/// [`node_fallback`] over any lookup of the props by name; a text built from the children's
/// alone reuses `children` when it is owned.
pub(crate) fn node_fallback_with<'v>(
    kind: &str,
    get: impl Fn(&str) -> Option<&'v Value>,
    children: Cow<'_, str>,
) -> String {
    let plain = |key: &str| get(key).map(Value::plain_text).unwrap_or_default();
    let present = |key: &str| get(key).filter(|v| !v.is_null());
    // The label: a non-null `label`, else `title` (even null), each looked up once.
    let label_value = present("label").or_else(|| get("title"));
    let label = || label_value.map(Value::plain_text).unwrap_or_default();
    match kind {
        "$text" => plain("text"),
        "Stat" => {
            let mut out = String::with_capacity(64);
            if let Some(label) = label_value {
                label.write_plain(&mut out);
            }
            out.push_str(": ");
            if let Some(value) = get("value") {
                value.write_plain(&mut out);
            }
            if let Some(unit) = get("unit").filter(|v| v.is_truthy()) {
                out.push(' ');
                unit.write_plain(&mut out);
            }
            out.push('\n');
            out
        }
        "Source" => format!("{}: {}\n", label(), plain("url")),
        "Table" => format!("{}\n", json_or_empty(get("rows"))),
        "Chart" => format!("{}\n", json_or_empty(get("data"))),
        "Image" => {
            let source = ["alt", "attachment", "generated"]
                .into_iter()
                .find_map(present)
                .map_or_else(|| "unavailable".to_owned(), Value::plain_text);
            format!("[Image: {source}]{children}\n")
        }
        _ => {
            let target = present("path")
                .or_else(|| present("sha"))
                .map(Some)
                .or_else(|| (kind == "Node" && get("id").is_some()).then(|| get("id")));
            let mut out = match (label_value, target) {
                (None, None) => children.into_owned(),
                _ => {
                    let mut out = String::new();
                    if label_value.is_some() {
                        out.push_str(&label());
                        out.push_str(": ");
                    }
                    if let Some(target) = target {
                        if let Some(v) = target {
                            v.write_plain(&mut out);
                        }
                        out.push(' ');
                    }
                    out.push_str(&children);
                    out
                }
            };
            if let Some(context) = get("context").filter(|v| v.is_truthy()) {
                out.push('\n');
                context.write_plain(&mut out);
            }
            if kind != "Tag" && !out.ends_with('\n') {
                out.push('\n');
            }
            out
        }
    }
}

fn json_or_empty(value: Option<&Value>) -> String {
    match value {
        None | Some(Value::Null) => "[]".to_owned(),
        Some(v) => v.plain_text(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn props(json: &str) -> Record {
        Value::from_json_str(json)
            .unwrap()
            .as_record()
            .unwrap()
            .clone()
    }

    #[test]
    fn per_component_shapes() {
        assert_eq!(
            node_fallback(
                "Stat",
                &props(r#"{"label":"D","value":93.5,"unit":"s"}"#),
                "x"
            ),
            "D: 93.5 s\n"
        );
        assert_eq!(node_fallback("Stat", &props("{}"), ""), ": \n");
        assert_eq!(node_fallback("Tag", &props("{}"), "p1"), "p1");
        assert_eq!(
            node_fallback("Callout", &props(r#"{"tone":"danger","title":"B"}"#), "W"),
            "B: W\n"
        );
        assert_eq!(
            node_fallback("File", &props(r#"{"path":"a.yml","line":12}"#), "T"),
            "a.yml T\n"
        );
        assert_eq!(node_fallback("Node", &props(r#"{"id":null}"#), ""), " \n");
        assert_eq!(
            node_fallback("Table", &props(r#"{"rows":[{"id":1}]}"#), ""),
            "[{\"id\":1}]\n"
        );
        assert_eq!(node_fallback("Chart", &props("{}"), ""), "[]\n");
        assert_eq!(
            node_fallback("Image", &props(r#"{"attachment":"a","alt":""}"#), "cap"),
            "[Image: ]cap\n"
        );
        assert_eq!(
            node_fallback("Image", &props("{}"), ""),
            "[Image: unavailable]\n"
        );
        assert_eq!(
            node_fallback("Choice", &props(r#"{"context":"Do it"}"#), "Go"),
            "Go\nDo it\n"
        );
        assert_eq!(
            node_fallback("Section", &props(r#"{"title":null}"#), "b"),
            ": b\n"
        );
        assert_eq!(node_fallback("$text", &props(r#"{"text":"hi"}"#), ""), "hi");
    }
}
