//! The one static table of catalog version 1: 36 entries in catalog order (`catalog.md` §2.1,
//! descriptions from §6.2).

use super::{Component, Group, PropKind, PropSpec, Refinement};

/// The five tones, in the order the spec lists them.
pub(super) const TONES: &[&str] = &["neutral", "info", "success", "warning", "danger"];

const STEP_STATES: &[&str] = &["done", "running", "pending", "failed", "skipped"];
const COLUMN_FORMATS: &[&str] = &["text", "number", "bytes", "duration", "date", "file", "tag"];
const CHART_KINDS: &[&str] = &["bar", "hbar", "stacked", "line"];

/// Any finite number.
const NUMBER: PropKind = PropKind::Number {
    min: None,
    exclusive: false,
};
/// A finite number `>= 0`.
const NON_NEGATIVE: PropKind = PropKind::Number {
    min: Some(0.0),
    exclusive: false,
};
/// A finite number `> 0`.
const POSITIVE: PropKind = PropKind::Number {
    min: Some(0.0),
    exclusive: true,
};

const fn req(name: &'static str, kind: PropKind) -> PropSpec {
    PropSpec {
        name,
        kind,
        required: true,
        when_absent: None,
    }
}

/// An optional prop, and what leaving it out means.
const fn opt(name: &'static str, kind: PropKind, when_absent: &'static str) -> PropSpec {
    PropSpec {
        name,
        kind,
        required: false,
        when_absent: Some(when_absent),
    }
}

/// One of a set of props of which exactly one is given.
const fn one_of(name: &'static str, kind: PropKind) -> PropSpec {
    PropSpec {
        name,
        kind,
        required: false,
        when_absent: None,
    }
}

const fn entry(
    name: &'static str,
    group: Group,
    description: &'static str,
    props: &'static [PropSpec],
) -> Component {
    Component {
        name,
        group,
        description,
        props,
        refinement: None,
        parent: None,
        children: None,
        binding: None,
        action: None,
        pass_through: false,
    }
}

impl Component {
    const fn parent_is(mut self, parent: &'static str) -> Self {
        self.parent = Some(parent);
        self
    }

    const fn children_are(mut self, children: &'static [&'static str]) -> Self {
        self.children = Some(children);
        self
    }

    const fn binds_value(mut self) -> Self {
        self.binding = Some("value");
        self
    }

    const fn acts_through(mut self, prop: &'static str) -> Self {
        self.action = Some(prop);
        self
    }

    const fn refined_by(mut self, refinement: Refinement) -> Self {
        self.refinement = Some(refinement);
        self
    }

    const fn passes_through(mut self) -> Self {
        self.pass_through = true;
        self
    }
}

use Group::{Choices, Content, Data, Inputs, Links, Status, Structure};
use PropKind::{
    AnyList, Bool, ChartData, Enum, FileLine, HttpUrl, Identifier, Latest, Name, Rows, Scalar,
    ScalarList, Sha, Text, Tone,
};

/// Every component of catalog version 1, in catalog order.
pub(super) static COMPONENTS: [Component; 36] = [
    // status
    entry(
        "Summary",
        Status,
        "One-sentence statement of the outcome.",
        &[opt("tone", Tone, "no icon"), opt("badge", Text, "no badge")],
    ),
    entry(
        "Callout",
        Status,
        "Draws the reader's eye to a warning or remark.",
        &[req("tone", Tone), opt("title", Text, "no heading line")],
    ),
    entry(
        "Tag",
        Status,
        "Small inline label for a state.",
        &[opt("tone", Tone, "neutral")],
    ),
    entry(
        "Progress",
        Status,
        "How far something has got, with a label; without value the bar is indeterminate.",
        &[
            opt("value", NON_NEGATIVE, "indeterminate"),
            opt("max", POSITIVE, "the value is read as a percentage"),
        ],
    ),
    entry("Steps", Status, "Stages of a process, in order.", &[]).children_are(&["Step"]),
    entry(
        "Step",
        Status,
        "A single stage and the state it is in.",
        &[
            req("state", Enum(STEP_STATES)),
            opt("detail", Text, "no extra text"),
        ],
    )
    .parent_is("Steps"),
    // data
    entry("Stats", Data, "A handful of headline numbers.", &[]).children_are(&["Stat"]),
    entry(
        "Stat",
        Data,
        "A labeled number, optionally set against an earlier number.",
        &[
            req("label", Text),
            req("value", NUMBER),
            opt("previous", NUMBER, "no change shown"),
            opt("unit", Text, "no unit"),
            opt(
                "tone",
                Tone,
                "neutral (never inferred from the direction of the change)",
            ),
        ],
    )
    .parent_is("Stats"),
    entry(
        "EntityList",
        Data,
        "Key\u{2013}value facts describing one subject.",
        &[],
    )
    .children_are(&["Entry"]),
    entry(
        "Entry",
        Data,
        "One fact: a label and its value.",
        &[req("label", Text)],
    )
    .parent_is("EntityList"),
    entry(
        "Table",
        Data,
        "Records laid out in rows under column headings.",
        &[req("rows", Rows)],
    )
    .children_are(&["Column"]),
    entry(
        "Column",
        Data,
        "Picks and formats one field of the rows.",
        &[
            req("key", Name),
            opt("title", Text, "the key"),
            opt("unit", Text, "no unit"),
            opt("as", Enum(COLUMN_FORMATS), "text"),
        ],
    )
    .parent_is("Table"),
    entry(
        "Chart",
        Data,
        "Plots numbers per labeled row; give every row a label plus no more than six numeric series.",
        &[
            req("kind", Enum(CHART_KINDS)),
            req("data", ChartData),
            opt("unit", Text, "no unit"),
        ],
    ),
    // structure
    entry("Tabs", Structure, "Alternatives shown one at a time.", &[]).children_are(&["Tab"]),
    entry(
        "Tab",
        Structure,
        "One titled alternative.",
        &[req("title", Text)],
    )
    .parent_is("Tabs"),
    entry(
        "Sections",
        Structure,
        "Self-contained topics a reader may fold away.",
        &[],
    )
    .children_are(&["Section"]),
    entry(
        "Section",
        Structure,
        "One titled topic.",
        &[req("title", Text)],
    )
    .parent_is("Sections"),
    // content
    entry(
        "CodeBlock",
        Content,
        "Literal code, shown and never run.",
        &[opt("language", Name, "no highlighting")],
    ),
    entry(
        "Image",
        Content,
        "Shows an image the chat already holds; children are an optional caption.",
        &[
            one_of("attachment", Name),
            one_of("generated", Latest),
            opt("alt", Text, "no screen-reader text but the caption"),
        ],
    )
    .refined_by(Refinement::Image),
    entry(
        "Sources",
        Content,
        "Numbered references; nothing is fetched ahead of a click.",
        &[],
    )
    .children_are(&["Source"]),
    entry(
        "Source",
        Content,
        "One reference whose address uses http or https.",
        &[req("title", Text), req("url", HttpUrl)],
    )
    .parent_is("Sources"),
    // links
    entry(
        "File",
        Links,
        "Points at a project or worktree file.",
        &[req("path", Text), opt("line", FileLine, "the whole file")],
    ),
    entry(
        "Diff",
        Links,
        "The changes made to one project file.",
        &[req("path", Text)],
    ),
    entry(
        "Commit",
        Links,
        "Names one commit by its hash.",
        &[req("sha", Sha)],
    ),
    entry(
        "Node",
        Links,
        "Something the host knows by an id.",
        &[req("id", Name)],
    ),
    // inputs
    entry(
        "Checklist",
        Inputs,
        "Tick any number of values in a local list.",
        &[req("value", ScalarList)],
    )
    .children_are(&["Item"])
    .binds_value(),
    entry(
        "Item",
        Inputs,
        "One value a Checklist can tick.",
        &[req("value", Scalar)],
    )
    .parent_is("Checklist"),
    entry(
        "Switch",
        Inputs,
        "A local on/off value.",
        &[req("value", Bool)],
    )
    .binds_value(),
    entry(
        "Slider",
        Inputs,
        "Adjust a local number between two bounds.",
        &[
            req("value", NUMBER),
            req("min", NUMBER),
            req("max", NUMBER),
            opt("step", POSITIVE, "any value in the range"),
            opt("unit", Text, "no unit"),
        ],
    )
    .binds_value()
    .refined_by(Refinement::Slider),
    entry(
        "Segmented",
        Inputs,
        "Select a single local value from a few options.",
        &[req("value", Scalar)],
    )
    .children_are(&["Option"])
    .binds_value(),
    entry(
        "Option",
        Inputs,
        "One value a Segmented control offers.",
        &[req("value", Scalar)],
    )
    .parent_is("Segmented"),
    entry(
        "Button",
        Inputs,
        "Pressing it changes local state through one action; the children form its label.",
        &[opt("disabled", Bool, "enabled")],
    )
    .acts_through("action"),
    entry(
        "Show",
        Inputs,
        "Renders its children only while the condition holds.",
        &[req("when", Bool)],
    )
    .passes_through(),
    entry(
        "Each",
        Inputs,
        "Renders its children once per item of local data.",
        &[req("items", AnyList), req("as", Identifier)],
    )
    .passes_through(),
    // choices
    entry("Choices", Choices, "The next steps on offer.", &[]).children_are(&["Choice"]),
    entry(
        "Choice",
        Choices,
        "Picking it sends the label plus its shown context a single time.",
        &[
            opt("context", Text, "the label is sent"),
            opt("primary", Bool, "not the recommended choice"),
            opt("disabled", Bool, "can be picked"),
        ],
    )
    .parent_is("Choices"),
];
