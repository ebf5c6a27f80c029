// The examples run and print what docs/core.md shows, and docs/core.md shows each
// example's file as it is: neither can drift from the other.

import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import test from 'node:test';
import { fileURLToPath } from 'node:url';

const doc = readFileSync(new URL('../../../docs/core.md', import.meta.url), 'utf8');

/** The body of the fenced block that follows the line `<!-- marker -->` in docs/core.md. */
function blockAfter(marker) {
    const at = doc.indexOf(`<!-- ${marker} -->\n`);
    assert.notEqual(at, -1, `docs/core.md has no <!-- ${marker} --> line`);
    const found = /^(`{3,}|~{3,})[^\n]*\n([\s\S]*?)^\1[ \t]*$/m.exec(doc.slice(at));
    assert.ok(found, `no fenced block after <!-- ${marker} -->`);
    return found[2];
}

/** What `node <example>` prints, from the repository's root. */
function run(example) {
    const file = fileURLToPath(new URL(`../examples/${example}`, import.meta.url));
    return execFileSync(process.execPath, [file], { encoding: 'utf8', timeout: 30_000 });
}

test('examples/node.mjs prints what it always prints', () => {
    assert.equal(
        run('node.mjs'),
        [
            'reply:ui:52: 4 nodes, 0 diagnostics',
            '  Summary "1 flaky tests"',
            '  Switch "Only flaky tests" {"value":false}',
            '  Table rows=["refund","reindex"]',
            '  Choices "Quarantine"',
            'change reply:ui:52:177: true',
            '  Summary "1 flaky tests"',
            '  Switch "Only flaky tests" {"value":true}',
            '  Table rows=["refund"]',
            '  Choices "Quarantine"',
            'choice: {"label":"Quarantine","context":"Quarantine the flaky tests","values":{"$onlyFlaky":true}}',
            'refused: invalid_value',
            ''
        ].join('\n')
    );
});

test('examples/host.mjs prints what it always prints', () => {
    assert.equal(
        run('host.mjs'),
        [
            'query: {"branch":"main","limit":10}',
            'arguments: {"branch":"dev","limit":10}',
            'refused: "invalid_value"',
            'scope: {"$branch":"dev","$runs":[{"id":7}]}',
            'links: {"reply:ui:0:238":{"type":"File","path":"src/lib.rs","line":3}}',
            'choice: {"label":"Rerun","context":"Rerun","values":{"$branch":"dev"}}',
            'fallback: "main\\ndev\\n[{\\"id\\":7}]\\nsrc/lib.rs \\nRerun"',
            ''
        ].join('\n')
    );
});

for (const example of ['node.mjs', 'host.mjs']) {
    test(`docs/core.md shows examples/${example} as it is, and its output`, () => {
        const source = readFileSync(new URL(`../examples/${example}`, import.meta.url), 'utf8');
        assert.equal(blockAfter(`packages/core/examples/${example}`), source);
        assert.equal(blockAfter(`output of packages/core/examples/${example}`), run(example));
    });
}

test('docs/core.md links only its own headings and files of the repository', () => {
    // GitHub's anchors: the heading in lower case, without punctuation, spaces as dashes.
    const anchors = new Set(
        [...doc.matchAll(/^#{1,6} (.+)$/gm)].map((m) => m[1].toLowerCase().replace(/[^\p{L}\p{N} _-]/gu, '').replaceAll(' ', '-'))
    );
    for (const [, target] of doc.matchAll(/\]\(([^)\s]+)\)/g)) {
        assert.ok(!/^[a-z]+:/.test(target), `docs/core.md links outside the repository: ${target}`);
        if (target.startsWith('#')) assert.ok(anchors.has(target.slice(1)), `no heading for ${target}`);
        else assert.ok(existsSync(new URL(`../../../docs/${target.split('#')[0]}`, import.meta.url)), `no file ${target}`);
    }
});
