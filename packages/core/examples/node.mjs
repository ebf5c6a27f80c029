// A reply with one block, as a Node.js host and a page see it: compile, draw, edit, choose.
// Run it with `node packages/core/examples/node.mjs` (after `cargo xtask wasm`).
import { UiFailure, UiState, compileUi, evaluateUiBlock, resolveUiChoice, uiInputValues } from '@uiblocks/core';

const reply = `Two tests failed at least once in the last 30 runs.
\`\`\`ui
$onlyFlaky = false
$tests = [{name: "refund", flaky: true}, {name: "reindex", flaky: false}]
<Summary tone="warning">{@Count(@Filter($tests, t, t.flaky))} flaky tests</Summary>
<Switch value={$onlyFlaky}>Only flaky tests</Switch>
<Table rows={@Filter($tests, t, !$onlyFlaky || t.flaky)}><Column key="name" title="Test"/></Table>
<Choices><Choice context="Quarantine the flaky tests">Quarantine</Choice></Choices>
\`\`\`
`;

// Node.js loads the WebAssembly module on first use. `now: () => 0` freezes the compile clock.
const [block] = compileUi(reply, { final: true, now: () => 0 });
console.log(`${block.id}: ${block.nodes.length} nodes, ${block.diagnostics.length} diagnostics`);

/** One line per top-level view node: its type, its text and what it holds. */
function draw(view) {
    const text = (node) => (node.type === '$text' ? node.props.text : node.children.map(text).join(''));
    for (const node of view.nodes) {
        const rows = node.type === 'Table' ? ` rows=${JSON.stringify(node.props.rows.map((row) => row.name))}` : '';
        const bound = Object.keys(node.bindings).length ? ` ${JSON.stringify(node.bindings)}` : '';
        const label = text(node) ? ` "${text(node)}"` : '';
        console.log(`  ${node.type}${label}${bound}${rows}`);
    }
}

const state = new UiState(block);
let view = evaluateUiBlock(block, state);
draw(view);

// A person turns the switch on: the table now lists only the flaky tests.
const toggle = view.nodes.find((node) => node.type === 'Switch');
console.log(`change ${toggle.id}: ${state.change(toggle.id, 'value', true)}`);
view = evaluateUiBlock(block, state);
draw(view);

// The page sends the choice with its input values; the host checks them against the block.
const choice = view.nodes.find((node) => node.type === 'Choices').children[0];
const selection = resolveUiChoice(block, choice.id, uiInputValues(block, state));
console.log(`choice: ${JSON.stringify(selection)}`);

// A value a person could not have set is refused with a stable code.
try {
    state.set('$onlyFlaky', 'yes');
} catch (error) {
    if (!(error instanceof UiFailure)) throw error;
    console.log(`refused: ${error.code}`);
}
