//! The agent-facing texts of the catalog (`catalog.md` §6): exact spec strings for the
//! compact catalog and the session note, required shapes of the other texts, and snapshots.

use ui_core::catalog;
use ui_core::limits::MAX_SESSION_NOTE_CHARS;
use ui_core::text::utf16_len;

const SPEC_COMPACT_CATALOG: &str = concat!(
    "Summary: tone?,badge? · Callout: tone,title? · Tag: tone? · Progress: value?,max? · ",
    "Steps · Step: state,detail? · Stats · Stat: label,value,previous?,unit?,tone? · ",
    "EntityList · Entry: label · Table: rows · Column: key,title?,unit?,as? · Chart: ",
    "kind,data,unit? · Tabs · Tab: title · Sections · Section: title · CodeBlock: language? ",
    "· Image: attachment?,generated?,alt? · Sources · Source: title,url · File: path,line? · ",
    "Diff: path · Commit: sha · Node: id · Checklist: value · Item: value · Switch: value · ",
    "Slider: value,min,max,step?,unit? · Segmented: value · Option: value · Button: ",
    "action,disabled? · Show: when · Each: items,as · Choices · Choice: ",
    "context?,primary?,disabled?",
);

const SPEC_SESSION_NOTE_UI: &str = concat!(
    "Answer with components by writing XML-style tags inside a fenced ui code block. ",
    "Children go between an opening and a closing tag; a tag without children closes itself ",
    "with />. Write string props in quotes; write numbers, booleans, arrays, records and ",
    "expressions in braces. Keep explanations as prose outside the fence. Use only the props ",
    "the catalog names; there are no layout, style or color props. Declare state above the ",
    "tags as $name = literal JSON. Bind an input with value={$name}. A Button changes local ",
    "state only, with action={@Set($name, literal)}, {@Reset($name)} or {@Reset()}. Braced ",
    "expressions may use @Count, @Filter(list,row,predicate), @Sum, @Join and @Round. Show ",
    "and Each decide which children appear. Every Choice shows a short label and a precise ",
    "context, and sends them once. An Image takes attachment or generated=\"latest\", never a ",
    "URL or a path. Nothing runs code. Local state is lost on reload. Catalog (? marks an ",
    "optional prop): Summary: tone?,badge? · Callout: tone,title? · Tag: tone? · Progress: ",
    "value?,max? · Steps · Step: state,detail? · Stats · Stat: ",
    "label,value,previous?,unit?,tone? · EntityList · Entry: label · Table: rows · Column: ",
    "key,title?,unit?,as? · Chart: kind,data,unit? · Tabs · Tab: title · Sections · Section: ",
    "title · CodeBlock: language? · Image: attachment?,generated?,alt? · Sources · Source: ",
    "title,url · File: path,line? · Diff: path · Commit: sha · Node: id · Checklist: value · ",
    "Item: value · Switch: value · Slider: value,min,max,step?,unit? · Segmented: value · ",
    "Option: value · Button: action,disabled? · Show: when · Each: items,as · Choices · ",
    "Choice: context?,primary?,disabled?\n",
    "Example:\n",
    "```ui\n",
    "$verbose = false\n",
    "<Summary tone=\"success\" badge=\"v2.1\">Build finished</Summary>\n",
    "<Stats><Stat label=\"Warnings\" value={3}/></Stats>\n",
    "<Switch value={$verbose}>Show warnings</Switch>\n",
    "<Choices><Choice context=\"List the three build warnings with their files\">Show ",
    "details</Choice></Choices>\n",
    "```\n",
);

#[test]
fn compact_catalog_is_the_spec_string() {
    let compact = catalog::compact_catalog();
    assert_eq!(compact, SPEC_COMPACT_CATALOG);
    assert_eq!(compact.chars().count(), 679);
    assert_eq!(utf16_len(&compact), 679);
    assert!(!compact.contains("Summary("));
    assert_eq!(compact.split(" \u{B7} ").count(), 36);
}

#[test]
fn session_note_for_ui_is_the_spec_note() {
    let note = catalog::session_note("ui");
    assert_eq!(note, SPEC_SESSION_NOTE_UI);
    assert_eq!(note.chars().count(), 1_940);
    assert_eq!(utf16_len(&note), 1_940);
    assert!(utf16_len(&note) < MAX_SESSION_NOTE_CHARS);
    assert!(note.contains("@Filter(list,row,predicate)"));
    assert!(!note.contains("Summary("));
    assert!(note.contains(&catalog::compact_catalog()));
    assert!(note.contains("Catalog (? marks an optional prop): Summary: tone?,badge?"));
    assert!(note.ends_with(&format!("\nExample:\n{}\n", catalog::example("ui"))));
    for token in [
        "outside the fence",
        "no layout, style or color props",
        "$name = literal JSON",
        "value={$name}",
        "action={@Set($name, literal)}",
        "{@Reset($name)}",
        "{@Reset()}",
        "@Count",
        "@Sum",
        "@Join",
        "@Round",
        "Show and Each",
        "generated=\"latest\"",
        "Nothing runs code.",
        "lost on reload",
    ] {
        assert!(note.contains(token), "{token}");
    }
}

#[test]
fn texts_use_the_fence_language() {
    let note = catalog::session_note("widget");
    assert!(note.contains("```widget\n"));
    assert!(note.contains("inside a fenced widget code block."));
    assert!(!note.contains("```ui"));
    assert_eq!(utf16_len(&note), 1_940 + 2 * ("widget".len() - "ui".len()));
    let reference = catalog::reference_text("widget");
    assert!(reference.contains("```widget\n$verbose = false\n"));
    assert!(reference.contains("inside a fenced widget code block."));
    assert!(!reference.contains("```ui"));
}

#[test]
fn example_is_one_complete_fence() {
    let example = catalog::example("ui");
    let lines: Vec<&str> = example.split('\n').collect();
    assert_eq!(lines.first(), Some(&"```ui"));
    assert_eq!(lines.last(), Some(&"```"));
    assert_eq!(lines.len(), 7);
    assert_eq!(lines[1], "$verbose = false");
    assert!(lines[2].starts_with("<Summary "));
    assert!(lines[4].contains("<Switch value={$verbose}>"));
    assert!(example.contains("<Stat label=\"Warnings\" value={3}/>"));
    assert!(example.contains("<Choice context="));
    assert!(!example.ends_with('\n'));
    assert_eq!(catalog::example("x").lines().next(), Some("```x"));
}

#[test]
fn catalog_text_has_one_line_per_component() {
    let text = catalog::catalog_text();
    let lines: Vec<&str> = text.split('\n').collect();
    assert_eq!(lines.len(), 36);
    assert!(!text.ends_with('\n'));
    assert!(lines.contains(
        &"Button(action, disabled?): Pressing it changes local state through one action; \
          the children form its label."
    ));
    assert!(lines.contains(&"Steps(): Stages of a process, in order."));
    assert!(lines.contains(
        &"Image(attachment?, generated?, alt?): Shows an image the chat already holds; \
          children are an optional caption."
    ));
    assert_eq!(
        lines[0],
        "Summary(tone?, badge?): One-sentence statement of the outcome."
    );
    assert_eq!(
        lines[35],
        "Choice(context?, primary?, disabled?): Picking it sends the label plus its shown \
         context a single time."
    );
    for (line, component) in lines.iter().zip(catalog::components()) {
        assert!(
            line.starts_with(&format!("{}(", component.name())),
            "{line}"
        );
        assert!(line.ends_with(component.description()), "{line}");
    }
}

#[test]
fn reference_text_lists_every_group() {
    let text = catalog::reference_text("ui");
    assert!(text.starts_with(
        "Answer with components by writing XML-style tags inside a fenced ui code block."
    ));
    assert!(text.contains(&format!("\nExample:\n{}\n\n", catalog::example("ui"))));
    assert!(text.contains("```ui\n"));
    assert!(!text.contains("Summary("));
    assert!(!text.ends_with('\n'));
    assert!(text.contains(
        "For an Image, name a chat attachment or write generated=\"latest\"; web addresses and \
         file paths are not accepted."
    ));
    assert!(text.contains(
        "\nSlider: Adjust a local number between two bounds. Props: value, min, max, step?, \
         unit?.\n"
    ));
    assert!(text.contains("\nSteps: Stages of a process, in order.\n"));
    assert!(text.contains(
        "\nButton: Pressing it changes local state through one action; the \
         children form its label. Props: action, disabled?.\n"
    ));
    // Seven group blocks after the example, in group order, each opening with its description
    // and rules.
    let (_, groups) = text.split_once("```\n\n").unwrap();
    let blocks: Vec<&str> = groups.split("\n\n").collect();
    assert_eq!(blocks.len(), 7);
    let mut members = 0;
    for (block, group) in blocks.iter().zip(catalog::Group::ALL) {
        let lines: Vec<&str> = block.split('\n').collect();
        assert_eq!(lines[0], group.description());
        assert_eq!(lines[1], group.rules());
        members += lines.len() - 2;
    }
    assert_eq!(members, 36);
    assert!(text.ends_with(
        "Choice: Picking it sends the label plus its shown context a single \
         time. Props: context?, primary?, disabled?."
    ));
}

#[test]
fn snapshot_catalog_text() {
    insta::assert_snapshot!("catalog_text", catalog::catalog_text());
}

#[test]
fn snapshot_compact_catalog() {
    insta::assert_snapshot!("compact_catalog", catalog::compact_catalog());
}

#[test]
fn snapshot_session_note() {
    insta::assert_snapshot!("session_note_ui", catalog::session_note("ui"));
}

#[test]
fn snapshot_reference_text() {
    insta::assert_snapshot!("reference_text_ui", catalog::reference_text("ui"));
}
