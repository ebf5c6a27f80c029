//! The generated parts of `docs/language.md`: the component reference (from the catalog
//! and [`crate::examples`]), the lint table and the limit tables. Each sits in the file
//! between `<!-- generated:NAME -->` and `<!-- end generated:NAME -->`; the `docs` test
//! compares them with what these functions produce (and rewrites them with
//! `UIBLOCKS_BLESS=1`), so the reference cannot drift from the code.

use ui_compiler::LintCode;
use ui_core::catalog::{Group, components};
use ui_core::{ReplyLimits, UiHostLimits, UiLimits};

use crate::examples::component_example;

/// Every generated section: its name and its text.
pub fn sections() -> Vec<(&'static str, String)> {
    vec![
        ("components", component_reference()),
        ("lints", lint_table()),
        ("limits", limit_tables()),
    ]
}

/// One subsection per catalog group: a table of its components, then each component's
/// props, rules and example block.
pub fn component_reference() -> String {
    let mut out = String::new();
    for &group in Group::ALL {
        out.push_str(&format!(
            "### {} (`{}`)\n\n{} {}\n\n",
            group.display_name(),
            group.id(),
            group.description(),
            group.rules()
        ));
        out.push_str("| Component | Props (`?` optional) | Rules | What it is |\n");
        out.push_str("| --- | --- | --- | --- |\n");
        let members: Vec<_> = components().iter().filter(|c| c.group() == group).collect();
        for c in &members {
            let props: Vec<String> = c
                .props()
                .iter()
                .map(|p| {
                    format!(
                        "`{}{}`: {}",
                        p.name(),
                        if p.required() { "" } else { "?" },
                        p.kind().to_string().replace('|', "\\|")
                    )
                })
                .collect();
            let mut rules = Vec::new();
            if let Some(parent) = c.parent() {
                rules.push(format!("inside `{parent}`"));
            }
            if let Some(children) = c.children() {
                let names: Vec<String> = children.iter().map(|n| format!("`{n}`")).collect();
                rules.push(format!("children: {}", names.join(", ")));
            }
            if let Some(binding) = c.binding() {
                rules.push(format!("binds `{binding}`"));
            }
            if let Some(action) = c.action() {
                rules.push(format!("acts through `{action}`"));
            }
            if let Some(rule) = c.cross_prop_rule() {
                rules.push(rule.to_owned());
            }
            out.push_str(&format!(
                "| `{}` | {} | {} | {} |\n",
                c.name(),
                if props.is_empty() {
                    "—".to_owned()
                } else {
                    props.join("<br>")
                },
                if rules.is_empty() {
                    "—".to_owned()
                } else {
                    rules.join("; ")
                },
                c.description().replace('|', "\\|")
            ));
        }
        out.push('\n');
        for c in &members {
            let example = component_example(c.name()).unwrap_or_default();
            out.push_str(&format!("`{}`:\n\n```ui\n{example}\n```\n\n", c.name()));
        }
    }
    out.trim_end().to_owned() + "\n"
}

/// The lint codes with what each finds.
pub fn lint_table() -> String {
    let mut out = String::from("| Lint | Finds | Fix |\n| --- | --- | --- |\n");
    for code in LintCode::ALL {
        let (finds, fix) = match code {
            LintCode::UndeclaredReference => (
                "an expression (in text, a prop or a query's arguments) reads a `$name` (or a \
                 bare name) that is not declared, not a query and not an `Each`/`@Filter` \
                 local in scope; it reads nothing",
                "the closest declared name within edit distance 2",
            ),
            LintCode::UnusedDeclaration => (
                "a state variable or query that nothing reads, binds or sets (reads in query \
                 arguments count)",
                "delete the declaration",
            ),
            LintCode::UnlabelledControl => (
                "a `Switch`, `Slider`, `Checklist`, `Segmented` or `Button` with no text in its \
                 children: a screen reader has nothing to announce",
                "—",
            ),
            LintCode::MissingAlt => ("an `Image` with neither `alt` nor a caption", "—"),
            LintCode::ConstantCondition => (
                "a `Show` whose `when` is a literal: always or never shown",
                "—",
            ),
            LintCode::UnknownColumn => (
                "a `Column` whose `key` is in none of the rows, when the rows are record \
                 literals (in the prop, where values may be computed; in a declared default \
                 that holds rows, with the records a Button's `@Set` puts in; through \
                 `@Filter`) or come from a source whose fields the host knows; an empty list \
                 says nothing of fields, so it is never judged",
                "the closest field within edit distance 2",
            ),
            LintCode::UnknownOption => (
                "a `Segmented` whose value as the block starts (its literal, or the default of                  the variable it binds, e.g. `null`) is none of its `Option`s' values, or a                  `Checklist` starting with a value no `Item` offers: a person cannot pick it                  back, and a host refuses a Choice sent while it holds it; judged only when                  every option is a constant written as a direct child",
                "for a bound `Segmented`, start the variable at the first option",
            ),
            LintCode::UnpickableOption => (
                "an `Option` of a bound `Segmented` whose value is of another kind than the \
                 variable's default (text against a `null` default): picking it always fails, \
                 since a variable keeps the kind of its default",
                "—",
            ),
            _ => ("", "—"),
        };
        out.push_str(&format!("| `{}` | {finds} | {fix} |\n", code.as_str()));
    }
    out
}

/// A limit group's name, its keys and their default values.
type LimitGroup = (&'static str, &'static [&'static str], Vec<Option<u64>>);

/// The budget tables: `UI_LIMITS`, `UI_REPLY_LIMITS` and `UI_HOST_LIMITS` with their
/// defaults.
pub fn limit_tables() -> String {
    let groups: [LimitGroup; 3] = [
        (
            UiLimits::NAME,
            UiLimits::KEYS,
            UiLimits::KEYS
                .iter()
                .map(|k| UiLimits::DEFAULT.get(k))
                .collect(),
        ),
        (
            ReplyLimits::NAME,
            ReplyLimits::KEYS,
            ReplyLimits::KEYS
                .iter()
                .map(|k| ReplyLimits::DEFAULT.get(k))
                .collect(),
        ),
        (
            UiHostLimits::NAME,
            UiHostLimits::KEYS,
            UiHostLimits::KEYS
                .iter()
                .map(|k| UiHostLimits::DEFAULT.get(k))
                .collect(),
        ),
    ];
    let mut out = String::new();
    for (name, keys, values) in groups {
        out.push_str(&format!("| `{name}` | default |\n| --- | ---: |\n"));
        for (key, value) in keys.iter().zip(values) {
            let value = value.map_or_else(String::new, |v| v.to_string());
            out.push_str(&format!("| `{key}` | {value} |\n"));
        }
        out.push('\n');
    }
    out.trim_end().to_owned() + "\n"
}

/// `text` with every generated section replaced by its current content.
pub fn regenerate(text: &str) -> String {
    let mut out = text.to_owned();
    for (name, content) in sections() {
        let begin = format!("<!-- generated:{name} -->\n");
        let end = format!("<!-- end generated:{name} -->");
        if let (Some(b), Some(e)) = (out.find(&begin), out.find(&end)) {
            let from = b + begin.len();
            if from <= e {
                out.replace_range(from..e, &content);
            }
        }
    }
    out
}
