// A host checks what a page sends against its own copy of the block: query arguments, the
// rebuilt state, link targets, a choice and the text kept for clients that cannot draw.
// Run it with `node packages/core/examples/host.mjs` (after `cargo xtask wasm`).
import { compileUi, evaluateUiBlock, resolveUiChoice, uiLinkTargets, uiQueryArguments, uiQueryFallback, uiValidatedState } from '@uiblocks/core';

// The host's registered query sources, each with a JSON Schema of its arguments.
const querySchemas = {
    'ci.runs': {
        type: 'object',
        properties: { branch: { type: 'string' }, limit: { type: 'integer', minimum: 1, maximum: 50 } },
        required: ['branch'],
        additionalProperties: false
    }
};
const reply = `\`\`\`ui
$branch = "main"
$runs = @Query("ci.runs", {branch: $branch, limit: 10})
<Segmented value={$branch}><Option value="main">main</Option><Option value="dev">dev</Option></Segmented>
<Table rows={$runs}><Column key="id" title="Run"/></Table>
<File path="src/lib.rs" line={3}/>
<Choices><Choice>Rerun</Choice></Choices>
\`\`\`
`;
const [block] = compileUi(reply, { final: true, querySchemas, now: () => 0 });
const show = (label, value) => console.log(`${label}: ${JSON.stringify(value)}`);

show('query', block.queries.$runs.args);
// The page asks for the runs of the branch a person picked.
show('arguments', uiQueryArguments(block, '$runs', { $branch: 'dev' }));
try {
    uiQueryArguments(block, '$runs', { $branch: 'release' });
} catch (error) {
    show('refused', error.code); // no control on screen offers "release"
}
// The page's input and the readings it drew, checked.
const state = uiValidatedState(block, { $branch: 'dev' }, { $runs: [{ id: 7 }] });
show('scope', state.scope());
show('links', uiLinkTargets(block));
const choice = evaluateUiBlock(block, state).nodes.find((node) => node.type === 'Choices').children[0];
show('choice', resolveUiChoice(block, choice.id, { $branch: 'dev' }));
show('fallback', uiQueryFallback(block, { $runs: [{ id: 7 }] }));
