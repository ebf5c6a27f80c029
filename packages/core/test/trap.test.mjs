// A trap of the WebAssembly module (a panic, running out of memory) answers `internal` and
// the module starts again; what the package handed out before keeps working: blocks,
// compilers and page states (rebuilt from their log and, past 64 edits, their snapshot).

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';

import {
    UiFailure, UiCompiler, UiState, compileUi, compileUiBlock, evaluateUiBlock, uiValidatedState,
    uiInputValues, uiFallbackText, __trapForTests
} from '../src/index.js';

const { querySchemas } = JSON.parse(readFileSync(new URL('../../../tests/data/conformance/hosts.json', import.meta.url), 'utf8'));

function trap() {
    let thrown;
    try {
        __trapForTests();
    } catch (error) {
        thrown = error;
    }
    assert.ok(thrown instanceof UiFailure, `a UiFailure, got ${thrown}`);
    assert.ok(thrown instanceof Error);
    assert.equal(thrown.name, 'UiFailure');
    assert.equal(thrown.code, 'internal');
}

const SOURCE = [
    '$n = 1',
    '$on = false',
    '$mode = "a"',
    '$runs = @Query("ci.runs", {branch: $mode})',
    '<Switch value={$on}>On</Switch>',
    '<Slider value={$n} min={0} max={1000} step={1}>N</Slider>',
    '<Segmented value={$mode}><Option value="a">A</Option><Option value="b">B</Option></Segmented>',
    '<Button action={@Set($mode, "b")}>B</Button>',
    '<Table rows={$runs}><Column key="name"/></Table>'
].join('\n');
const compile = () => compileUiBlock(SOURCE, { id: 'b', final: true, querySchemas });
const REPLY = 'Hi\n```ui\n<Tag>a</Tag>\n```\nand\n```ui\n$xs = [1, 2]\n<Each items={$xs} as="x"><Tag>{x}</Tag></Each>\n```\n';

test('a trap is an internal UiFailure, and the module works afterwards', () => {
    const before = compileUi(REPLY, { id: 'r' });
    const fallback = uiFallbackText(REPLY, before);
    trap();
    assert.deepEqual(compileUi(REPLY, { id: 'r' }), before);
    trap();
    trap();
    assert.deepEqual(compileUi(REPLY, { id: 'r' }), before);
    assert.equal(uiFallbackText(REPLY, before), fallback);
});

test('a block compiled before the trap still evaluates', () => {
    const [one, each] = compileUi(REPLY, { id: 'r' });
    const views = [evaluateUiBlock(one), evaluateUiBlock(each)];
    trap();
    assert.deepEqual([evaluateUiBlock(one), evaluateUiBlock(each)], views);
});

test('a state edited before the trap keeps its values and keeps working', () => {
    const block = compile();
    const state = new UiState(block);
    const calls = [];
    state.subscribe(() => calls.push(state.snapshot()));
    state.set('$n', 5);
    state.setQuery('$runs', [{ name: 'run 1' }], block);
    const [button] = evaluateUiBlock(block, state).nodes.filter((n) => n.type === 'Button');
    assert.equal(state.press(button.id), true);
    const scope = state.scope();
    const revision = state.snapshot();
    const view = evaluateUiBlock(block, state);
    trap();
    assert.deepEqual(state.scope(), scope);
    assert.equal(state.snapshot(), revision, 'the revision does not go back');
    assert.deepEqual(evaluateUiBlock(block, state), view);
    state.set('$on', true);
    assert.equal(state.snapshot(), revision + 1);
    assert.deepEqual(state.scope(), { ...scope, $on: true });
    assert.deepEqual(uiInputValues(block, state), { $on: true, $n: 5, $mode: 'b' });
    const slider = evaluateUiBlock(block, state).nodes.find((n) => n.type === 'Slider');
    assert.equal(state.change(slider.id, 'value', 6), true);
    assert.deepEqual(calls, [1, 2, 3, 4, 5], 'listeners stay subscribed');
});

for (const edits of [63, 64, 65, 100, 200]) {
    test(`a state after ${edits} edits survives a trap (log, then snapshot)`, () => {
        const block = compile();
        const state = new UiState(block);
        state.setQuery('$runs', [{ name: 'kept' }], block);
        for (let i = 1; i <= edits; i += 1) {
            if (i % 10 === 0) state.run('@Set($on, true)');
            else state.set('$n', i);
        }
        const scope = state.scope();
        const revision = state.snapshot();
        assert.equal(revision, edits + 1);
        trap();
        assert.deepEqual(state.scope(), scope);
        assert.equal(state.scope().$runs[0].name, 'kept');
        assert.equal(state.snapshot(), revision);
        state.set('$n', 999);
        assert.equal(state.scope().$n, 999);
        assert.equal(state.snapshot(), revision + 1);
        // And a second trap, now with the edits since the first.
        trap();
        assert.deepEqual(state.scope(), { ...scope, $n: 999 });
        assert.equal(state.snapshot(), revision + 1);
    });
}

test('a state synced to a recompiled block before the trap follows that block', () => {
    const first = compileUiBlock('$a = 1\n$gone = "x"\n<Tag>{$a}</Tag>', { id: 'b', final: true });
    const second = compileUiBlock('$a = 1\n$added = true\n<Tag>{$a}</Tag>', { id: 'b', final: true });
    for (const edits of [2, 70]) {
        const state = new UiState(first);
        for (let i = 0; i < edits; i += 1) state.set('$gone', `edit ${i}`);
        state.set('$a', 7);
        state.sync(second);
        const scope = state.scope();
        assert.deepEqual(scope, { $a: 7, $added: true });
        trap();
        assert.deepEqual(state.scope(), scope, `${edits} edits`);
        assert.equal(state.block, second);
        state.set('$added', false);
        assert.deepEqual(state.scope(), { $a: 7, $added: false });
    }
});

test('a validated state keeps the validated input after a trap', () => {
    const block = compile();
    const state = uiValidatedState(block, { $on: true, $mode: 'b' }, { $runs: [{ name: 'r' }] });
    const scope = state.scope();
    const revision = state.snapshot();
    assert.deepEqual([scope.$on, scope.$mode, scope.$runs], [true, 'b', [{ name: 'r' }]]);
    trap();
    assert.deepEqual(state.scope(), scope);
    assert.equal(state.snapshot(), revision);
});

test('a compiler made before the trap keeps streaming', () => {
    const compiler = new UiCompiler({ id: 'r', now: () => 0 });
    const half = REPLY.slice(0, 30);
    compiler.compile(half);
    trap();
    const blocks = compiler.compile(REPLY);
    assert.deepEqual(blocks, compileUi(REPLY, { id: 'r' }));
    assert.deepEqual(compiler.changed, blocks.map((b) => b.id), 'after a trap every block is new');
    const again = compiler.compile(REPLY);
    assert.ok(again.every((b, i) => b === blocks[i]), 'and then reused again');
    compiler.clear();
    trap();
    compiler.clear();
    assert.deepEqual(compiler.compile(REPLY, { final: true }), compileUi(REPLY, { id: 'r', final: true }));
});
