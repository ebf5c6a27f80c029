//! The writing guide for agents (issue 52): one Markdown text that teaches the whole
//! language before the first attempt — syntax, declarations and `@Query`, text rules,
//! operators and helpers, what the host accepts from a Choice, every component with each
//! prop's type, allowed values and what leaving it out means, fallbacks, streaming and worked
//! examples. The component part is generated from the catalog table; the reference's own
//! texts ([`session_note`](super::session_note), [`reference_text`](super::reference_text))
//! stay as they are.

use super::{Component, Group, PropKind, PropSpec, components, table::TONES};

/// The guide for blocks fenced as `fence_language`, with the host's query sources as
/// `sources`: a Markdown list the caller renders (one entry per source with its arguments
/// and, when known, its rows), or `None` when the host's sources are not known. Lines are
/// joined with `\n`; the text ends with one line break.
pub fn guide(fence_language: &str, sources: Option<&str>) -> String {
    let fence = format!("```{fence_language}");
    let mut out = String::new();
    out.push_str(&intro(&fence));
    out.push_str(&syntax(&fence));
    out.push_str(TEXT_RULES);
    out.push_str(EXPRESSIONS);
    out.push_str(STATE);
    out.push_str(&queries(sources));
    out.push_str(CHOICES);
    out.push_str(&component_section());
    out.push_str(FALLBACK_AND_STREAMING);
    out.push_str(&worked_examples(&fence));
    out.push_str(BEFORE_SENDING);
    out
}

/// The opening paragraph.
fn intro(fence: &str) -> String {
    format!(
        "# Writing uiblocks\n\n\
         A reply is Markdown prose with UI blocks in it. A block is a fenced `` {fence} `` code \
         block that the chat draws as a small interface: a summary, numbers, a table that \
         stays live, controls, and Choices that send the person's next message. Nothing in a \
         block runs code; every mistake is a diagnostic with a stable code. Write the \
         explanation as prose outside the fence and the part a person looks at or acts on \
         inside it.\n\n"
    )
}

/// Fences, declarations, tags and props.
fn syntax(fence: &str) -> String {
    format!(
        "## Syntax\n\n\
         - A block opens with a line holding exactly `` {fence} `` (lower case, nothing else on \
         the line) and closes with a line of three backticks. At most 16 blocks per reply.\n\
         - Declarations come first, one per line, before any tag: `$name = constant`, where \
         the constant is a number, a quoted string, `true`, `false`, `null`, or an array or \
         record of constants (`[1, 2]`, `{{state: \"open\", mine: true}}`). No expressions, \
         helpers or other `$names` in a default. A declaration is local state: it starts at \
         its default for everyone and changes only through the block's own controls.\n\
         - A live query is the other declaration: `$name = @Query(\"source\", {{args}})` \
         (see Live data).\n\
         - Tags are XML-like: `<Name prop=\"text\" other={{expression}}>children</Name>`, or \
         `<Name prop={{1}}/>` without children. Names are case-sensitive; only the components \
         and props listed below exist (no style, class, layout or color props).\n\
         - A quoted prop is a string. Everything else goes in braces: numbers `value={{3}}` \
         (not `value=\"3\"`), booleans `primary={{true}}` (no bare `primary`), arrays, records, \
         `$state` and expressions.\n\n"
    )
}

/// What text inside a block is.
const TEXT_RULES: &str = "## Text\n\n\
    - Text between tags is shown exactly as written. It is never Markdown: no `**bold**`, \
    `#` headings, `-` lists, `[links](…)` or backticks inside a block; no HTML entities \
    either (`&lt;` shows as `&lt;`). Use components (Summary, Callout, EntityList, Table, \
    File, Commit) for structure, and prose outside the fence for the rest.\n\
    - `{expression}` inside text shows a value: `{$count} of 5 passed`. `null` shows nothing; \
    an array or record cannot be shown as text (use `@Join`, `@Count` or a Table).\n\
    - A literal `<` or `{` in text must be written as an expression: `{\"<\"}`, `{\"{\"}`. \
    `>`, `}` and `$` are plain text.\n\
    - `CodeBlock` is the exception: its content is literal up to `</CodeBlock>`, so `<`, `{` \
    and backticks in code need no escaping.\n\n";

/// Operators, the missing ones, and the helpers.
const EXPRESSIONS: &str = "## Expressions\n\n\
    One small language with JavaScript's semantics, in braced props, text and query \
    arguments:\n\n\
    - Values: `3`, `1.5`, `\"text\"`, `true`, `null`, `[1, 2]`, `{name: \"a\", \"with space\": 2}`; \
    `$name`; fields and indexes `$run.status`, `$list[0].name`, `$list.length`.\n\
    - Arithmetic `+ - * / %` on numbers; `+` joins text when either side is a string \
    (`\"Deploy \" + $version`).\n\
    - Comparison `< <= > >=` (numbers only) and `== !=` (strict: `1 == \"1\"` is false).\n\
    - Logic `! && ||`; `&&` and `||` return an operand, as in JavaScript.\n\
    - There is **no `?:`**. Use `{$failed > 0 && \"danger\" || \"success\"}` (when the middle \
    value is truthy), `{$note || \"none\"}`, or two `Show`s. No method calls \
    (`.toString()`, `.map()`), no assignment, no coercion (`1 + true` fails), no division by \
    zero.\n\n\
    Helpers:\n\n\
    - `@Count(list)`: the number of items (or a string's length).\n\
    - `@Filter(list, row, predicate)`: the items for which the predicate, reading each item \
    as the bare name `row`, is `true` (`@Filter($jobs, j, j.status == \"failed\")`).\n\
    - `@Sum(list)` or `@Sum(list, \"key\")`: the sum of numbers, or of each record's field.\n\
    - `@Join(list)` or `@Join(list, \" / \")`: the items as text (default separator `, `).\n\
    - `@Round(x)` or `@Round(x, 2)`: rounded half up to 0–6 digits.\n\
    - `@Query` only as a declaration; `@Set`, `@Reset` only as a Button's `action`.\n\n";

/// Controls, Buttons, Show and Each.
const STATE: &str = "## State and controls\n\n\
    - Bind a control with `value={$name}`: Switch holds a boolean, Slider a number between \
    `min` and `max`, Segmented one of its Options' values, Checklist an array of its Items' \
    values. Put the control's label between its tags. A default is an answer shown as \
    given: don't preselect a substantive one the person has not chosen (offer a neutral \
    Option such as \"No preference\").\n\
    - A Button changes local state with one action: `action={@Set($name, constant)}`, \
    `{@Reset($name)}` or `{@Reset()}` (every variable back to its default). It never sends \
    anything.\n\
    - `<Show when={…}>` draws its children while the condition is a real boolean `true`; \
    `<Each items={…} as=\"row\">` draws its children once per item, read as the bare `row`.\n\n";

/// Live data: how to read a source, and which ones exist.
fn queries(sources: Option<&str>) -> String {
    let list = match sources {
        Some(list) if !list.trim().is_empty() => format!(
            "The host's sources (only these exist; `?` marks an optional argument, `→` the \
             rows a reading holds):\n\n{}\n\n",
            list.trim_end()
        ),
        _ => "Only the sources the host registers exist; this guide was printed without \
              them, so write no `@Query` unless the host names its sources and their \
              arguments.\n\n"
            .to_owned(),
    };
    format!(
        "## Live data\n\n\
         - Read a host source only in a declaration: `$runs = @Query(\"ci.runs\", {{branch: \
         \"main\", limit: 20}})`, never inline in a prop. The arguments are a record literal; \
         its values may read local state (`{{window: $window}}`), and a person's edit then \
         reads the source again. At most 8 queries per block.\n\
         - A reading is an array of row records: `{{@Count($runs)}}`, `{{$runs[0].status}}`, \
         `rows={{$runs}}`, `@Filter($runs, r, r.status == \"failed\")`. Use the field names \
         the source's rows have; nothing renames a field.\n\
         - Until the first reading arrives, every part that reads the query is drawn as its \
         fallback. Keep the Summary true without the data, and put warnings about the data \
         inside a `Show` whose condition reads it.\n\n\
         {list}"
    )
}

/// Choices, and the host's rule about the values they rest on.
const CHOICES: &str = "## Choices\n\n\
    - Picking a Choice sends its label plus its `context` as the person's next message, once, \
    after the reply finished streaming. A block is answered once: after one Choice is sent, \
    the others are refused. Keep the label short and the context precise; build it from \
    state with `+` (`context={\"Upgrade \" + @Join($picked)}`).\n\
    - Gate a Choice on the state it needs with `disabled={…}` \
    (`disabled={@Count($checks) < 3}`) rather than claiming something the block does not \
    enforce.\n\
    - The host refuses a Choice when a state variable differs from its default and no \
    visible control offers its current value: a bound control outside any closed `Show`, \
    or an enabled Button whose `@Set` sets exactly that value. So a state changed only by \
    Buttons that have since been hidden (a wizard's \"Next\"), or by a control that a `Show` \
    has hidden again, makes the Choice fail. Drive a wizard's step with a Segmented that \
    stays visible, and keep every control a Choice depends on visible whenever the Choice \
    is enabled (gate it with `disabled`).\n\n";

/// What makes a good fallback and a reply that streams well.
const FALLBACK_AND_STREAMING: &str = "## Fallback and streaming\n\n\
    - A client that cannot draw a block shows its fallback, plain text built from it: the \
    Summary's text, `label: value` for a Stat and an Entry, `title: text` for a Callout, the \
    JSON of a Table's rows or a Chart's data, a Choice's label and context. Open every block \
    with one Summary that states the outcome in words (\"2 of 14 jobs failed on main\"), so \
    the fallback alone says it; don't leave the meaning to a number, a tone or a chart.\n\
    - Tones state what a value means (`danger` for a failure), never a rise or a fall. Show a \
    missing value as missing (a `Show`, or `||` \"none\"), never as `0`.\n\
    - A reply streams: a block is drawn while it arrives. Say the point in a sentence of prose \
    first, then the block; prefer several small blocks between paragraphs to one huge one; \
    declarations first, then the Summary; Choices last (they can be sent only once the reply \
    is finished). Each block stands alone: state and queries are not shared between blocks.\n\n";

/// The closing advice.
const BEFORE_SENDING: &str = "## Before sending\n\n\
    Check the whole reply (`uiblocks check`, or the MCP tool `check_reply`) and fix every \
    error, and every warning unless you mean it; `preview_reply` with sample readings shows \
    what a person will see.\n";

/// The components, group by group, each with its props.
fn component_section() -> String {
    let mut out = String::from(
        "## Components\n\n\
         Each prop: its name (`?`: optional), the value it takes, and in parentheses what \
         leaving it out means (there are no other defaults). Quoted values are strings; \
         `{…}` values go in braces. Enum values are exact and case-sensitive: anything else \
         is an error: a tone is never `error`, `ok` or `critical`.\n\n",
    );
    for &group in Group::ALL {
        out.push_str(&format!(
            "### {}\n\n{} {}\n\n",
            group.display_name(),
            group.description(),
            group.rules()
        ));
        for component in components().iter().filter(|c| c.group() == group) {
            out.push_str(&component_line(component));
            out.push('\n');
        }
        out.push('\n');
    }
    out
}

/// `- `Name` (inside `Parent`): description Props: …; rules.`
fn component_line(c: &Component) -> String {
    let mut line = format!("- `{}`", c.name());
    if let Some(parent) = c.parent() {
        line.push_str(&format!(" (inside `{parent}`)"));
    }
    line.push_str(&format!(": {}", c.description()));
    let mut props: Vec<String> = Vec::new();
    if let Some(action) = c.action() {
        props.push(format!(
            "`{action}`: `{{@Set($name, constant)}}`, `{{@Reset($name)}}` or `{{@Reset()}}`"
        ));
    }
    props.extend(c.props().iter().map(|p| prop_text(c, p)));
    if !props.is_empty() {
        line.push_str(&format!(" Props: {}.", props.join("; ")));
    }
    let mut rules = Vec::new();
    if let Some(children) = c.children() {
        let names: Vec<String> = children.iter().map(|n| format!("`{n}`")).collect();
        rules.push(format!("Children: {} only", names.join(", ")));
    }
    if let Some(binding) = c.binding() {
        rules.push(format!("Bind with `{binding}={{$name}}`"));
    }
    if let Some(rule) = c.cross_prop_rule() {
        rules.push(format!("Rule: {rule}"));
    }
    if let Some(note) = component_note(c.name()) {
        rules.push(note.to_owned());
    }
    for rule in rules {
        line.push_str(&format!(" {rule}."));
    }
    line
}

/// One prop: `` `name?` `value` (when absent) ``, plus a note on what its values mean.
fn prop_text(c: &Component, p: &PropSpec) -> String {
    let mut text = format!(
        "`{}{}` {}",
        p.name(),
        if p.required() { "" } else { "?" },
        kind_text(p.kind())
    );
    let mut notes = Vec::new();
    notes.extend(prop_note(c.name(), p.name()).map(str::to_owned));
    notes.extend(p.when_absent().map(|absent| format!("absent: {absent}")));
    if !notes.is_empty() {
        text.push_str(&format!(" ({})", notes.join("; ")));
    }
    text
}

/// The value a prop of `kind` takes, written as the agent writes it.
fn kind_text(kind: PropKind) -> String {
    let choices = |values: &[&str]| {
        let quoted: Vec<String> = values.iter().map(|v| format!("\"{v}\"")).collect();
        format!("`{}`", quoted.join("|"))
    };
    match kind {
        PropKind::Text => "`\"text\"`".to_owned(),
        PropKind::Name => "`\"name\"` (1–256 characters)".to_owned(),
        PropKind::Identifier => "`\"identifier\"` (letters, digits, `_`)".to_owned(),
        PropKind::Number { min: None, .. } => "`{number}`".to_owned(),
        PropKind::Number {
            min: Some(min),
            exclusive,
        } => format!(
            "`{{number}}` {} {}",
            if exclusive { ">" } else { "≥" },
            crate::value::number_text(min)
        ),
        PropKind::Bool => "`{true|false}`".to_owned(),
        PropKind::Scalar => "a `\"text\"`, `{number}`, `{boolean}` or `{null}`".to_owned(),
        PropKind::Tone => choices(TONES),
        PropKind::Enum(values) => choices(values),
        PropKind::Rows => "`{array of records}` (≤ 1,000)".to_owned(),
        PropKind::ChartData => "`{array of records}` (≤ 1,000; values are scalars)".to_owned(),
        PropKind::ScalarList => "`{array of scalars}`".to_owned(),
        PropKind::AnyList => "`{array}`".to_owned(),
        PropKind::FileLine => "`{number}` (a line, from 1)".to_owned(),
        PropKind::Sha => "`\"hash\"` (7–64 hex digits)".to_owned(),
        PropKind::HttpUrl => "`\"https://…\"` (http or https)".to_owned(),
        PropKind::Latest => "`\"latest\"` (only this value)".to_owned(),
    }
}

/// What the values of a prop mean, where its type does not say.
fn prop_note(component: &str, prop: &str) -> Option<&'static str> {
    Some(match (component, prop) {
        ("Column", "key") => "the field of each row",
        ("Column", "as") => {
            "`duration` is milliseconds, `date` epoch milliseconds or ISO text, `bytes` a \
             byte count, `file` a path in mono text, `tag` a small label"
        }
        ("Chart", "data") => {
            "each row a `label` field (the axis) plus at most six number fields, e.g. \
             `{label: \"Mon\", p95: 180}`; rows without `label` get no axis labels, so show query \
             rows that have none in a Table"
        }
        ("Image", "attachment") => "the name of an image the chat already holds",
        ("Show", "when") => "a real boolean, e.g. `{$n > 0}`",
        ("Each", "items") => "each item is read as the bare name given in `as`",
        ("Choice", "context") => "what is sent besides the label; precise",
        ("Choice", "primary") => "the recommended one",
        _ => return None,
    })
}

/// Advice about a component that its props do not carry.
fn component_note(component: &str) -> Option<&'static str> {
    Some(match component {
        "Progress" => "The label goes between the tags",
        "Entry" => "The value goes between the tags",
        "Table" => "Without Columns every field of the rows is shown",
        "Segmented" => {
            "The value must be one of its Options' values, and so must the default of the \
             variable it binds (never `null` for text options: a variable keeps the kind of \
             its default, so every pick would fail); for \"not picked yet\" offer an Option \
             `value=\"\"`"
        }
        _ => return None,
    })
}

/// The worked examples, each a complete block fenced as `fence`.
fn worked_examples(fence: &str) -> String {
    let mut out = String::from("## Worked examples\n\n");
    for (title, body) in EXAMPLES {
        out.push_str(&format!("{title}\n\n{fence}\n{body}\n```\n\n"));
    }
    out
}

/// The worked examples: a title line and a block body. Each compiles without a diagnostic
/// (ui-cli's guide test runs them; the live one against a source it registers).
const EXAMPLES: &[(&str, &str)] = &[
    (
        "A report with links, a literal `<` and a gated Choice:",
        "$checks = []\n\
         <Summary tone=\"danger\" badge=\"build 4812\">The release build failed: 2 tests broke</Summary>\n\
         <Callout tone=\"warning\" title=\"Cause\">parse_amount now returns {\"<\"}0 for refunds, see <File path=\"src/money.rs\" line={88}/> in <Commit sha=\"3f2a9c1\"/></Callout>\n\
         <Stats><Stat label=\"Failed\" value={2} tone=\"danger\"/><Stat label=\"Passed\" value={410} tone=\"success\"/></Stats>\n\
         <Checklist value={$checks}><Item value=\"logs\">I read the logs</Item><Item value=\"owner\">The owner agreed</Item></Checklist>\n\
         <Choices><Choice primary={true} disabled={@Count($checks) < 2} context=\"Revert commit 3f2a9c1 and re-run build 4812\">Revert</Choice><Choice context=\"Open a ticket for the refund tests\">File a ticket</Choice></Choices>",
    ),
    (
        "A table with formats, a filter and a conditional tone:",
        "$failedOnly = false\n\
         $jobs = [{name: \"build\", status: \"passed\", ms: 81000}, {name: \"test\", status: \"failed\", ms: 240000}]\n\
         <Summary tone={@Count(@Filter($jobs, j, j.status == \"failed\")) > 0 && \"danger\" || \"success\"}>{@Count(@Filter($jobs, j, j.status == \"failed\"))} of {@Count($jobs)} jobs failed</Summary>\n\
         <Switch value={$failedOnly}>Only failed jobs</Switch>\n\
         <Table rows={@Filter($jobs, j, !$failedOnly || j.status == \"failed\")}><Column key=\"name\" title=\"Job\"/><Column key=\"status\" as=\"tag\"/><Column key=\"ms\" title=\"Time\" as=\"duration\"/></Table>\n\
         <Steps><Step state=\"done\">Build</Step><Step state=\"failed\" detail=\"2 tests\">Test</Step><Step state=\"skipped\">Deploy</Step></Steps>\n\
         <Chart kind=\"bar\" unit=\"s\" data={[{label: \"build\", seconds: 81}, {label: \"test\", seconds: 240}]}/>",
    ),
    (
        "Live data with a window a person picks (the source is an example):",
        "$window = 24\n\
         $errors = @Query(\"example.errors\", {hours: $window})\n\
         <Summary>The most frequent errors of the last hours</Summary>\n\
         <Segmented value={$window}><Option value={1}>1 h</Option><Option value={24}>24 h</Option></Segmented>\n\
         <Show when={@Count($errors) > 0}><Callout tone=\"danger\" title=\"Top error\">{$errors[0].message}: {$errors[0].count} times</Callout></Show>\n\
         <Table rows={$errors}><Column key=\"message\" title=\"Error\"/><Column key=\"count\" as=\"number\"/></Table>\n\
         <Choices><Choice context={\"Investigate the top error of the last \" + $window + \" hours\"}>Investigate</Choice></Choices>",
    ),
    (
        "A wizard whose step is a visible Segmented, so its Choice is accepted:",
        "$step = \"plan\"\n\
         $region = \"eu\"\n\
         <Summary>Create the service in three steps</Summary>\n\
         <Segmented value={$step}><Option value=\"plan\">1 Plan</Option><Option value=\"region\">2 Region</Option><Option value=\"confirm\">3 Confirm</Option></Segmented>\n\
         <Show when={$step == \"plan\"}>A small service with one database.</Show>\n\
         <Show when={$step != \"plan\"}><Segmented value={$region}><Option value=\"eu\">EU</Option><Option value=\"us\">US</Option></Segmented></Show>\n\
         <Choices><Choice disabled={$step != \"confirm\"} context={\"Create the service in region \" + $region}>Create</Choice></Choices>",
    ),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_component_and_every_enum_value_is_in_the_guide() {
        let text = guide("ui", None);
        for c in components() {
            assert!(text.contains(&format!("`{}`", c.name())), "{}", c.name());
            for p in c.props() {
                let values: &[&str] = match p.kind() {
                    PropKind::Tone => TONES,
                    PropKind::Enum(values) => values,
                    _ => &[],
                };
                for v in values {
                    assert!(
                        text.contains(&format!("\"{v}\"")),
                        "{}.{} {v}",
                        c.name(),
                        p.name()
                    );
                }
            }
        }
    }
}
