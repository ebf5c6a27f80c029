// The package's constants are the Rust core's (uiCoreLimits()), and each limit holds at its
// value and trips one past it.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';

import {
    UI_LIMITS, UI_REPLY_LIMITS, UI_HOST_LIMITS, UI_CATALOG_VERSION, UI_STREAM_INTERVAL_MS, catalogVersion,
    uiCoreLimits, compileUi, compileUiBlock, UiState, uiCatalog
} from '../src/index.js';

const core = uiCoreLimits();

test('UI_LIMITS is the core\'s', () => {
    assert.deepEqual({ ...UI_LIMITS }, core.UI_LIMITS);
});

test('UI_REPLY_LIMITS is the core\'s', () => {
    assert.deepEqual({ ...UI_REPLY_LIMITS }, core.UI_REPLY_LIMITS);
    assert.equal(UI_STREAM_INTERVAL_MS, core.UI_REPLY_LIMITS.streamInterval);
});

test('UI_HOST_LIMITS is the core\'s', () => {
    assert.deepEqual({ ...UI_HOST_LIMITS }, core.UI_HOST_LIMITS);
});

test('UI_CATALOG_VERSION is the core\'s and the catalog\'s', () => {
    assert.equal(UI_CATALOG_VERSION, core.catalogVersion);
    assert.equal(catalogVersion, core.catalogVersion);
    assert.equal(uiCatalog().version, core.catalogVersion);
});

test('the constants are frozen', () => {
    for (const limits of [UI_LIMITS, UI_REPLY_LIMITS, UI_HOST_LIMITS]) {
        assert.ok(Object.isFrozen(limits));
        assert.throws(() => { 'use strict'; limits.steps = 1; }, TypeError);
    }
});

test('the reference\'s values (language.md §19)', () => {
    assert.deepEqual({ ...UI_LIMITS }, {
        characters: 65536, depth: 32, nodes: 512, diagnostics: 20,
        steps: 20000, iterations: 2000, stringLength: 16384, milliseconds: 30
    });
    assert.deepEqual(
        [UI_REPLY_LIMITS.blocks, UI_REPLY_LIMITS.characters, UI_REPLY_LIMITS.nodes, UI_REPLY_LIMITS.milliseconds],
        [16, 262144, 2048, 60]
    );
    assert.deepEqual({ ...UI_HOST_LIMITS }, { queries: 8, links: 64, refreshMilliseconds: 10000 });
    assert.equal(UI_CATALOG_VERSION, 1);
});

// Each limit at its value and one past it: [name, limit, passes(n) → whether n is accepted].
const { querySchemas } = JSON.parse(readFileSync(new URL('../../../tests/data/conformance/hosts.json', import.meta.url), 'utf8'));
const codes = (block) => block.diagnostics.map((d) => d.code);
const setOk = (source, name, value) => {
    const state = new UiState(compileUiBlock(source, { id: 'b', final: true }));
    try {
        state.set(name, value);
        return true;
    } catch (error) {
        assert.equal(error.code, 'budget_exceeded');
        return false;
    }
};
const BOUNDS = [
    ['UI_LIMITS.characters', UI_LIMITS.characters,
        (n) => !codes(compileUiBlock('x'.repeat(n), { id: 'b', final: true, limits: { steps: 10 ** 6 } })).includes('budget_exceeded')],
    ['UI_LIMITS.depth', UI_LIMITS.depth,
        (n) => codes(compileUiBlock('<Show when={true}>'.repeat(n) + 'x' + '</Show>'.repeat(n), { id: 'b', final: true })).length === 0],
    ['UI_LIMITS.iterations', UI_LIMITS.iterations, (n) => setOk('$l = []', '$l', Array(n).fill(0))],
    ['UI_LIMITS.stringLength', UI_LIMITS.stringLength, (n) => setOk('$s = ""', '$s', 'x'.repeat(n))],
    ['UI_REPLY_LIMITS.blocks', UI_REPLY_LIMITS.blocks, (n) => {
        const blocks = compileUi('```ui\n<Tag>a</Tag>\n```\n'.repeat(n), { now: () => 0 });
        return blocks.length === n && !codes(blocks.at(-1)).includes('budget_exceeded');
    }],
    ['UI_HOST_LIMITS.queries', UI_HOST_LIMITS.queries, (n) => {
        const source = Array.from({ length: n }, (_, i) => `$q${i} = @Query("ci.runs", {branch: "main"})`).join('\n');
        return codes(compileUiBlock(source, { id: 'b', final: true, querySchemas })).length === 0;
    }]
];
for (const [name, limit, passes] of BOUNDS) {
    test(`${name} (${limit}) holds at the limit and trips past it`, () => {
        assert.equal(passes(limit), true, `${name} at ${limit}`);
        assert.equal(passes(limit + 1), false, `${name} at ${limit + 1}`);
    });
}
