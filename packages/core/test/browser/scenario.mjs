// What the browser test runs in every realm (the page, a module worker, and Node.js for the
// expected answers): one reply compiled, evaluated, pressed, edited, streamed and checked.
// It takes the package's namespace, so each realm passes the module it imported, and it
// answers plain data, so the realms' answers can be compared as JSON.

/** A reply with a bound Switch, a Button, an Each, a link and a choice. */
export const REPLY = [
    'Two tests failed at least once.',
    '```ui',
    '$onlyFlaky = false',
    '$picked = 0',
    '$tests = [{name: "refund", flaky: true}, {name: "reindex", flaky: false}]',
    '<Summary tone="warning">{@Count(@Filter($tests, t, t.flaky))} flaky of {@Count($tests)}</Summary>',
    '<Switch value={$onlyFlaky}>Only flaky tests</Switch>',
    '<Each items={@Filter($tests, t, !$onlyFlaky || t.flaky)} as="t"><Tag>{t.name}</Tag></Each>',
    '<Button action={@Set($picked, 1)}>Pick</Button>',
    '<File path="src/refund.rs" line={12}/>',
    '<Choices><Choice context="Quarantine the flaky tests">Quarantine</Choice></Choices>',
    '```',
    'Anything else?',
    ''
].join('\n');

/** The evaluation's limits: a generous time budget, so a cold start cannot change the answer. */
const LIMITS = { milliseconds: 10000 };

/** The first view node (depth first) that `test` accepts. */
function find(nodes, test) {
    for (const node of nodes) {
        if (test(node)) return node;
        const inner = find(node.children, test);
        if (inner) return inner;
    }
    return undefined;
}

/** Runs the scenario against `core` (the package's namespace, loaded). */
export function scenario(core) {
    const [block, ...others] = core.compileUi(REPLY, { id: 'reply', final: true, now: () => 0 });
    const state = new core.UiState(block);
    const view = core.evaluateUiBlock(block, state, LIMITS);
    const toggle = find(view.nodes, (n) => n.type === 'Switch');
    const button = find(view.nodes, (n) => n.action === true);
    const choice = find(view.nodes, (n) => n.type === 'Choice');

    const changed = state.change(toggle.id, 'value', true);
    const afterChange = core.evaluateUiBlock(block, state, LIMITS);
    const pressed = state.press(button.id);
    const afterPress = core.evaluateUiBlock(block, state, LIMITS);

    const compiler = new core.UiCompiler({ id: 'reply', now: () => 0 });
    const stream = [];
    for (const length of [40, 120, 120, 260, REPLY.length]) {
        const blocks = compiler.compile(REPLY.slice(0, length), { final: length === REPLY.length });
        stream.push({ length, ids: blocks.map((b) => b.id), complete: blocks.map((b) => b.complete), changed: [...compiler.changed] });
    }

    let failure;
    try {
        core.compileUi(REPLY, { limits: { steps: 0 } });
    } catch (error) {
        failure = { name: error.name, code: error.code, isUiFailure: error instanceof core.UiFailure, isError: error instanceof Error };
    }

    return {
        others: others.length,
        block,
        view,
        changed,
        afterChange,
        pressed,
        afterPress,
        values: state.values(),
        inputValues: core.uiInputValues(block, state),
        links: core.uiLinkTargets(block),
        choice: core.resolveUiChoice(block, choice.id, { $onlyFlaky: true }),
        fallbackText: core.uiFallbackText(REPLY, [block]),
        stream,
        failure,
        hasFence: core.uiHasFence(REPLY),
        driver: JSON.parse(core.uiDriverAnswer(JSON.stringify({ op: 'evaluate', tag: 't', text: REPLY, press: [{ action: 0 }] })))
    };
}
