//! The agent-facing texts (`catalog.md` §6.4–§6.9), all built from the catalog table.

use super::{Component, Group, components};

/// The catalog label of the session note; it says what `?` means.
const CATALOG_LABEL: &str = "Catalog (? marks an optional prop): ";

/// The rule sentences of the session note (`catalog.md` §6.8), one line.
const RULES: &str = "Keep explanations as prose outside the fence. \
    Use only the props the catalog names; there are no layout, style or color props. \
    Declare state above the tags as $name = literal JSON. \
    Bind an input with value={$name}. \
    A Button changes local state only, with action={@Set($name, literal)}, {@Reset($name)} \
    or {@Reset()}. \
    Braced expressions may use @Count, @Filter(list,row,predicate), @Sum, @Join and @Round. \
    Show and Each decide which children appear. \
    Every Choice shows a short label and a precise context, and sends them once. \
    An Image takes attachment or generated=\"latest\", never a URL or a path. \
    Nothing runs code. \
    Local state is lost on reload.";

/// The syntax paragraph for blocks fenced as `lang` (`catalog.md` §6.7).
fn syntax(lang: &str) -> String {
    format!(
        "Answer with components by writing XML-style tags inside a fenced {lang} code block. \
         Children go between an opening and a closing tag; a tag without children closes \
         itself with />. Write string props in quotes; write numbers, booleans, arrays, records \
         and expressions in braces."
    )
}

/// A complete example block fenced as `` ```<fence_language> `` (`catalog.md` §6.7): it
/// compiles without diagnostics, opens with a Summary and binds a Switch to a variable whose
/// default is `false`. Lines are joined with `\n`; no trailing line break.
pub fn example(fence_language: &str) -> String {
    [
        &format!("```{fence_language}"),
        "$verbose = false",
        r#"<Summary tone="success" badge="v2.1">Build finished</Summary>"#,
        r#"<Stats><Stat label="Warnings" value={3}/></Stats>"#,
        r#"<Switch value={$verbose}>Show warnings</Switch>"#,
        r#"<Choices><Choice context="List the three build warnings with their files">Show details</Choice></Choices>"#,
        "```",
    ]
    .join("\n")
}

/// The tooling listing `uiCatalogText()` (`catalog.md` §6.4): one line per component,
/// `Name(prop, list?): description`, joined with `\n`.
pub fn catalog_text() -> String {
    components()
        .iter()
        .map(|c| {
            format!(
                "{}({}): {}",
                c.name(),
                c.prop_list().join(", "),
                c.description()
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The one-line catalog `uiCompactCatalog()` (`catalog.md` §6.5): `Name` or
/// `Name: prop,list?` per component, joined with `" · "`.
pub fn compact_catalog() -> String {
    components()
        .iter()
        .map(|c| {
            let props = c.prop_list();
            if props.is_empty() {
                c.name().to_owned()
            } else {
                format!("{}: {}", c.name(), props.join(","))
            }
        })
        .collect::<Vec<_>>()
        .join(" \u{B7} ")
}

/// The short instructions for every session, `uiSessionNote` (`catalog.md` §6.8): syntax,
/// rules, the compact catalog and the example, for blocks fenced as `fence_language`. Stays
/// below [`MAX_SESSION_NOTE_CHARS`](crate::limits::MAX_SESSION_NOTE_CHARS) for short
/// languages (1,940 characters for `ui`).
pub fn session_note(fence_language: &str) -> String {
    format!(
        "{} {RULES} {CATALOG_LABEL}{}\nExample:\n{}\n",
        syntax(fence_language),
        compact_catalog(),
        example(fence_language)
    )
}

/// The long form on request, `uiReferenceText` (`catalog.md` §6.9): syntax, the example,
/// then one block per group with its description, rules and members.
pub fn reference_text(fence_language: &str) -> String {
    let groups: Vec<String> = Group::ALL.iter().map(|&g| group_block(g)).collect();
    format!(
        "{}\nExample:\n{}\n\n{}",
        syntax(fence_language),
        example(fence_language),
        groups.join("\n\n")
    )
}

/// A group's description, rules and one line per member component.
fn group_block(group: Group) -> String {
    let mut lines = vec![group.description().to_owned(), group.rules().to_owned()];
    lines.extend(
        components()
            .iter()
            .filter(|c| c.group() == group)
            .map(member_line),
    );
    lines.join("\n")
}

/// `Name: description` plus ` Props: a, b?.` when the component has props.
fn member_line(component: &Component) -> String {
    let props = component.prop_list();
    if props.is_empty() {
        format!("{}: {}", component.name(), component.description())
    } else {
        format!(
            "{}: {} Props: {}.",
            component.name(),
            component.description(),
            props.join(", ")
        )
    }
}
