//! `uiblocks guide`: the writing guide for agents ([`ui_core::catalog::guide`]), with the
//! host's sources (their arguments and, when the file gives them, their descriptions and
//! rows) when `--sources` names a sources file. The guide goes to standard output; its size
//! (characters and an estimate of tokens) to standard error.

use std::io::Write as _;

use serde_json::Value as Json;
use ui_core::catalog;

use super::check::{SourceEntry, Sources};
use crate::cli::GuideArgs;

/// The token budget the guide keeps to without sources (an estimate: characters / 4).
pub const MAX_GUIDE_TOKENS: usize = 6_000;

/// The guide for blocks fenced as `fence_language`, listing `sources` when given.
pub fn text(fence_language: &str, sources: Option<&Sources>) -> String {
    let list = sources.map(|s| sources_list(s.entries()));
    catalog::guide(fence_language, list.as_deref())
}

/// The size of `text`: its characters and an estimate of its tokens (characters / 4,
/// rounded up).
pub fn size(text: &str) -> (usize, usize) {
    let chars = text.chars().count();
    (chars, chars.div_ceil(4))
}

/// The guide's size line: `guide: 18,234 characters, about 4,559 tokens`.
pub fn size_line(text: &str) -> String {
    let (chars, tokens) = size(text);
    format!(
        "guide: {} characters, about {} tokens (characters / 4)",
        thousands(chars),
        thousands(tokens)
    )
}

fn thousands(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// One Markdown list item per source: `` - `name`: description `{args}` → rows `{fields}` ``.
pub fn sources_list(entries: &[SourceEntry]) -> String {
    if entries.is_empty() {
        return "- (none: the host registers no source, so write no `@Query`)".to_owned();
    }
    entries
        .iter()
        .map(|e| {
            let mut line = format!("- `{}`", e.name);
            if let Some(description) = e.description.as_deref().filter(|d| !d.trim().is_empty()) {
                let description = description.trim();
                let stop = if description.ends_with(['.', '!', '?']) {
                    ""
                } else {
                    "."
                };
                line.push_str(&format!(": {description}{stop}"));
            }
            line.push_str(&format!(" Arguments: `{}`", schema_text(&e.args)));
            if let Some(result) = &e.result {
                line.push_str(&format!(" → {}", result_text(result)));
            }
            line
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// A result schema: `rows of `{…}`` for an array of records, else its type.
fn result_text(schema: &Json) -> String {
    match schema.get("items") {
        Some(items) if type_names(schema) == ["array"] => {
            format!("rows `{}`", schema_text(items))
        }
        _ => format!("`{}`", schema_text(schema)),
    }
}

/// The `type` of a schema as a list (`"string"` or `["string", "null"]`).
fn type_names(schema: &Json) -> Vec<&str> {
    match schema.get("type") {
        Some(Json::String(t)) => vec![t.as_str()],
        Some(Json::Array(ts)) => ts.iter().filter_map(Json::as_str).collect(),
        _ => Vec::new(),
    }
}

/// A JSON Schema written compactly: `{branch: string (min length 1), limit?: integer
/// 1..50}`, enums as `"a"|"b"`, arrays as `[T]`, a property's description after it.
pub fn schema_text(schema: &Json) -> String {
    if let Some(values) = schema.get("enum").and_then(Json::as_array) {
        return values
            .iter()
            .map(Json::to_string)
            .collect::<Vec<_>>()
            .join("|");
    }
    if let Some(value) = schema.get("const") {
        return value.to_string();
    }
    let types = type_names(schema);
    let mut parts = Vec::new();
    for t in &types {
        parts.push(match *t {
            "object" => object_text(schema),
            "array" => match schema.get("items") {
                Some(items) => format!("[{}]", schema_text(items)),
                None => "array".to_owned(),
            },
            "integer" | "number" => format!("{t}{}", bounds(schema)),
            "string" => format!("string{}", string_bounds(schema)),
            other => other.to_owned(),
        });
    }
    if parts.is_empty() {
        if schema.get("properties").is_some() {
            return object_text(schema);
        }
        return "any".to_owned();
    }
    parts.join("|")
}

fn object_text(schema: &Json) -> String {
    let Some(properties) = schema.get("properties").and_then(Json::as_object) else {
        return "record".to_owned();
    };
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Json::as_array)
        .map(|r| r.iter().filter_map(Json::as_str).collect())
        .unwrap_or_default();
    let fields: Vec<String> = properties
        .iter()
        .map(|(name, property)| {
            let optional = if required.contains(&name.as_str()) {
                ""
            } else {
                "?"
            };
            let mut field = format!("{name}{optional}: {}", schema_text(property));
            if let Some(d) = property.get("description").and_then(Json::as_str) {
                field.push_str(&format!(" ({})", d.trim()));
            }
            field
        })
        .collect();
    format!("{{{}}}", fields.join(", "))
}

/// ` 1..50`, ` ≥ 1`, ` ≤ 50` or nothing.
fn bounds(schema: &Json) -> String {
    let min = schema.get("minimum").map(Json::to_string);
    let max = schema.get("maximum").map(Json::to_string);
    match (min, max) {
        (Some(min), Some(max)) => format!(" {min}..{max}"),
        (Some(min), None) => format!(" ≥ {min}"),
        (None, Some(max)) => format!(" ≤ {max}"),
        (None, None) => String::new(),
    }
}

/// ` (date-time)`, ` (min length 1)`, ` (pattern ^a$)` or nothing.
fn string_bounds(schema: &Json) -> String {
    let mut notes = Vec::new();
    if let Some(format) = schema.get("format").and_then(Json::as_str) {
        notes.push(format.to_owned());
    }
    if let Some(min) = schema.get("minLength") {
        notes.push(format!("min length {min}"));
    }
    if let Some(max) = schema.get("maxLength") {
        notes.push(format!("max length {max}"));
    }
    if let Some(pattern) = schema.get("pattern").and_then(Json::as_str) {
        notes.push(format!("pattern {pattern}"));
    }
    if notes.is_empty() {
        String::new()
    } else {
        format!(" ({})", notes.join(", "))
    }
}

/// Prints the guide, and its size to standard error.
///
/// # Errors
/// When the sources file cannot be read or standard output fails.
pub fn run(args: &GuideArgs) -> anyhow::Result<u8> {
    let sources = args.sources.as_deref().map(Sources::load).transpose()?;
    let text = text(&args.fence_language, sources.as_ref());
    std::io::stdout().lock().write_all(text.as_bytes())?;
    eprintln!("{}", size_line(&text));
    Ok(0)
}
