// Loading the module in Node.js: at once on first use where `process.getBuiltinModule`
// exists (Node.js 20.16 and later, Bun), and through `await ready()` where it does not
// (Node.js 20.0–20.15), which a child process without it stands in for.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const INDEX = fileURLToPath(new URL('../src/index.js', import.meta.url));

function run(script) {
    return execFileSync(process.execPath, ['--input-type=module', '-e', script], {
        encoding: 'utf8',
        timeout: 20_000
    }).trim();
}

test('the first call loads the module synchronously', () => {
    const out = run(`
        const core = await import(${JSON.stringify(INDEX)});
        console.log(core.compileUi('\`\`\`ui\\n<Summary>x</Summary>\\n\`\`\`\\n', { id: 'r', final: true })[0].id);
    `);
    assert.equal(out, 'r:ui:0');
});

test('without process.getBuiltinModule, calls wait for ready()', () => {
    const out = run(`
        process.getBuiltinModule = undefined;
        const core = await import(${JSON.stringify(INDEX)});
        let before;
        try { core.compileUi('x', { id: 'r' }); before = 'loaded'; } catch (error) { before = error.code; }
        await core.ready();
        await core.ready();
        const id = core.compileUi('\`\`\`ui\\n<Summary>x</Summary>\\n\`\`\`\\n', { id: 'r', final: true })[0].id;
        console.log(before + ' ' + id);
    `);
    assert.equal(out, 'not_ready r:ui:0');
});
