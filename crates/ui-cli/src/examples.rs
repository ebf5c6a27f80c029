//! One short example block body per catalog component, for `describe_component` (MCP) and
//! the component table of `docs/language.md`. A test compiles each one: no diagnostic and
//! no lint.

/// The example of each component, in catalog order.
const EXAMPLES: &[(&str, &str)] = &[
    (
        "Summary",
        r#"<Summary tone="success" badge="v2.1">Build finished</Summary>"#,
    ),
    (
        "Callout",
        r#"<Callout tone="warning" title="Disk">The cache volume is 91% full.</Callout>"#,
    ),
    ("Tag", r#"<Tag tone="info">flaky</Tag>"#),
    (
        "Progress",
        r#"<Progress value={3} max={8}>Migrating shards</Progress>"#,
    ),
    (
        "Steps",
        "<Steps>\n<Step state=\"done\">Build</Step>\n<Step state=\"running\" detail=\"2 of 5\">Deploy</Step>\n</Steps>",
    ),
    (
        "Step",
        "<Steps><Step state=\"failed\" detail=\"exit 1\">Lint</Step></Steps>",
    ),
    (
        "Stats",
        "<Stats>\n<Stat label=\"Tests\" value={412}/>\n<Stat label=\"Failures\" value={2} previous={5} tone=\"warning\"/>\n</Stats>",
    ),
    (
        "Stat",
        r#"<Stats><Stat label="p95" value={180} unit="ms"/></Stats>"#,
    ),
    (
        "EntityList",
        "<EntityList>\n<Entry label=\"Owner\">alice</Entry>\n<Entry label=\"Region\">eu-west-1</Entry>\n</EntityList>",
    ),
    (
        "Entry",
        r#"<EntityList><Entry label="Status">Healthy</Entry></EntityList>"#,
    ),
    (
        "Table",
        "$runs = [{name: \"build\", ms: 81000}, {name: \"test\", ms: 240000}]\n<Table rows={$runs}>\n<Column key=\"name\" title=\"Job\"/>\n<Column key=\"ms\" title=\"Time\" as=\"duration\"/>\n</Table>",
    ),
    (
        "Column",
        r#"<Table rows={[{size: 1024}]}><Column key="size" title="Size" as="bytes"/></Table>"#,
    ),
    (
        "Chart",
        r#"<Chart kind="bar" unit="ms" data={[{label: "Mon", p95: 180}, {label: "Tue", p95: 210}]}/>"#,
    ),
    (
        "Tabs",
        "<Tabs>\n<Tab title=\"Before\">42 warnings</Tab>\n<Tab title=\"After\">3 warnings</Tab>\n</Tabs>",
    ),
    ("Tab", r#"<Tabs><Tab title="Logs">No errors.</Tab></Tabs>"#),
    (
        "Sections",
        "<Sections>\n<Section title=\"Cause\">A stale lock file.</Section>\n<Section title=\"Fix\">Remove it and retry.</Section>\n</Sections>",
    ),
    (
        "Section",
        r#"<Sections><Section title="Details">Two retries, both timed out.</Section></Sections>"#,
    ),
    (
        "CodeBlock",
        "<CodeBlock language=\"sh\">cargo test -p ui-cli</CodeBlock>",
    ),
    (
        "Image",
        r#"<Image generated="latest" alt="The dependency graph of the build"/>"#,
    ),
    (
        "Sources",
        "<Sources>\n<Source title=\"Release notes\" url=\"https://example.com/notes\"/>\n</Sources>",
    ),
    (
        "Source",
        r#"<Sources><Source title="RFC 9110" url="https://www.rfc-editor.org/rfc/rfc9110"/></Sources>"#,
    ),
    ("File", r#"<File path="src/main.rs" line={42}/>"#),
    ("Diff", r#"<Diff path="src/lib.rs"/>"#),
    ("Commit", r#"<Commit sha="3f2a9c1"/>"#),
    (
        "Node",
        r#"<Node id="ticket-481">The flaky login test</Node>"#,
    ),
    (
        "Checklist",
        "$done = [\"build\"]\n<Checklist value={$done}>\n<Item value=\"build\">Build</Item>\n<Item value=\"deploy\">Deploy</Item>\n</Checklist>",
    ),
    (
        "Item",
        "$picked = []\n<Checklist value={$picked}><Item value=\"a\">Alpha</Item></Checklist>",
    ),
    (
        "Switch",
        "$verbose = false\n<Switch value={$verbose}>Show warnings</Switch>",
    ),
    (
        "Slider",
        "$days = 7\n<Slider value={$days} min={1} max={30} unit=\"days\">Window</Slider>",
    ),
    (
        "Segmented",
        "$range = \"week\"\n<Segmented value={$range}>\n<Option value=\"day\">Day</Option>\n<Option value=\"week\">Week</Option>\n</Segmented>",
    ),
    (
        "Option",
        "$tone = \"all\"\n<Segmented value={$tone}><Option value=\"all\">All</Option></Segmented>",
    ),
    (
        "Button",
        "$count = 0\n<Summary>{$count} selected</Summary>\n<Button action={@Reset($count)}>Clear</Button>",
    ),
    (
        "Show",
        "$details = false\n<Switch value={$details}>Details</Switch>\n<Show when={$details}>Ran on 4 workers.</Show>",
    ),
    (
        "Each",
        "$hosts = [\"web-1\", \"web-2\"]\n<Each items={$hosts} as=\"host\"><Tag>{host}</Tag></Each>",
    ),
    (
        "Choices",
        "<Choices>\n<Choice context=\"Retry the failed deploy\" primary={true}>Retry</Choice>\n<Choice context=\"Roll back to v2.0\">Roll back</Choice>\n</Choices>",
    ),
    (
        "Choice",
        r#"<Choices><Choice context="Open a ticket for the flaky test">Open ticket</Choice></Choices>"#,
    ),
];

/// The example block body of the component `name`, if it is in the catalog.
pub fn component_example(name: &str) -> Option<&'static str> {
    EXAMPLES.iter().find(|(n, _)| *n == name).map(|(_, e)| *e)
}

#[cfg(test)]
mod tests {
    use ui_compiler::{CompileOptions, LintOptions, compile_block, lint_block};
    use ui_core::catalog::components;

    use super::*;

    #[test]
    fn every_component_has_an_example_that_checks_clean() {
        assert_eq!(EXAMPLES.len(), components().len());
        for component in components() {
            let example = component_example(component.name())
                .unwrap_or_else(|| panic!("no example for {}", component.name()));
            assert!(example.contains(&format!("<{}", component.name())));
            let options = CompileOptions {
                is_final: true,
                ..CompileOptions::default()
            };
            let block = compile_block(example, "b", &options);
            assert_eq!(block.diagnostics, [], "{example}");
            let lints = lint_block(&block, example, &LintOptions::default());
            assert_eq!(lints, [], "{example}");
        }
    }
}
