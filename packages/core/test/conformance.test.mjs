// The conformance corpus (tests/data/conformance/) through the package: every case's
// compile section, and its fallback text, must be what the reference gave (driver.md,
// "Comparing with the corpus": equal as JSON without `message`, `expressions`, `expression`).

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, readdirSync, existsSync } from 'node:fs';

import { compileUi, uiFallbackText } from '../src/index.js';

const CORPUS = new URL('../../../tests/data/conformance/', import.meta.url);
const IGNORED = new Set(['message', 'expressions', 'expression']);

/** `value` without the keys the comparison ignores, at any depth. */
export function comparable(value) {
    if (Array.isArray(value)) return value.map(comparable);
    if (value !== null && typeof value === 'object') {
        return Object.fromEntries(Object.entries(value)
            .filter(([key]) => !IGNORED.has(key))
            .map(([key, inner]) => [key, comparable(inner)]));
    }
    return value;
}

const json = (name) => JSON.parse(readFileSync(new URL(name, CORPUS), 'utf8'));
const { querySchemas } = json('hosts.json');
const cases = readdirSync(CORPUS)
    .filter((name) => name.endsWith('.md') && name !== 'README.md')
    .map((name) => name.slice(0, -'.md'.length))
    .sort();

test('the corpus is there', () => {
    assert.ok(cases.length >= 50, `only ${cases.length} cases`);
});

for (const name of cases) {
    test(`conformance: ${name}`, { timeout: 10_000 }, () => {
        const text = readFileSync(new URL(`${name}.md`, CORPUS), 'utf8');
        const input = existsSync(new URL(`${name}.input.json`, CORPUS)) ? json(`${name}.input.json`) : {};
        const expected = json(`${name}.expected.json`).compile;
        const blocks = compileUi(text, {
            id: 'reply',
            final: input.final ?? true,
            fenceLanguage: input.fenceLanguage,
            latestAttachment: input.latestAttachment,
            querySchemas,
            now: () => 0
        });
        assert.deepEqual(comparable(blocks), comparable(expected.blocks), `${name}: compile.blocks`);
        assert.equal(uiFallbackText(text, blocks), expected.fallbackText, `${name}: compile.fallbackText`);
    });
}
