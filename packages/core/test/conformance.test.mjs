// The conformance corpus (tests/data/conformance/) through the package: every case's
// compile section, and its fallback text, must be what the reference gave (driver.md,
// "Comparing with the corpus": equal as JSON without `message`, `expressions`, `expression`).

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { compileUi, uiFallbackText } from '../src/index.js';
import { comparable, corpus } from './corpus.mjs';

test('the corpus is there', () => {
    assert.ok(corpus.length >= 50, `only ${corpus.length} cases`);
});

for (const { name, text, expected: { compile: expected }, options } of corpus) {
    test(`conformance: ${name}`, { timeout: 10_000 }, () => {
        const blocks = compileUi(text, options);
        assert.deepEqual(comparable(blocks), comparable(expected.blocks), `${name}: compile.blocks`);
        assert.equal(uiFallbackText(text, blocks), expected.fallbackText, `${name}: compile.fallbackText`);
    });
}
