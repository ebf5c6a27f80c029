// src/index.d.ts declares exactly the names src/index.js exports (the declarations' types
// are checked by `npm exec --prefix packages --no -- tsc -p packages/core/tsconfig.json`).

import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import test from 'node:test';

import * as core from '../src/index.js';

const declarations = readFileSync(new URL('../src/index.d.ts', import.meta.url), 'utf8');

test('every runtime export is declared, and nothing else', () => {
    const declared = [...declarations.matchAll(/^export declare (?:const|function|class) (\w+)/gm)].map((m) => m[1]);
    assert.deepEqual([...declared].sort(), Object.keys(core).sort());
    assert.equal(new Set(declared).size, declared.length, 'a name is declared twice');
});

test('the literal types of the constants are their values', () => {
    for (const name of ['UI_LIMITS', 'UI_REPLY_LIMITS', 'UI_HOST_LIMITS']) {
        const body = declarations.match(new RegExp(`export declare const ${name}: \\{([^}]*)\\}`))?.[1];
        assert.ok(body, `${name} is declared as an object type`);
        const typed = Object.fromEntries([...body.matchAll(/readonly (\w+): (\d+);/g)].map((m) => [m[1], Number(m[2])]));
        assert.deepEqual(typed, { ...core[name] }, name);
    }
    for (const name of ['UI_FENCE_LANGUAGE', 'UI_CATALOG_VERSION', 'catalogVersion', 'UI_STREAM_INTERVAL_MS']) {
        const literal = declarations.match(new RegExp(`export declare const ${name}: ([^;]+);`))?.[1];
        assert.equal(literal, JSON.stringify(core[name]).replaceAll('"', "'"), name);
    }
});

test('the declared codes and component names are the core\'s', () => {
    const union = (name) => {
        const body = declarations.match(new RegExp(`export type ${name} =([^;]+);`))?.[1] ?? '';
        return [...body.matchAll(/'([^']+)'/g)].map((m) => m[1]);
    };
    assert.deepEqual(union('UiComponentName'), core.uiCatalog().components.map((c) => c.name));
    assert.deepEqual(
        [...new Set(core.uiCatalog().components.map((c) => c.group))].sort(),
        union('UiCatalogGroup').sort()
    );
    // The codes of ui-core's `Code` enum (`crates/ui-core/src/code.rs`), in its order.
    const rust = readFileSync(new URL('../../../crates/ui-core/src/code.rs', import.meta.url), 'utf8');
    const codeEnum = rust.match(/pub enum Code \{([^}]*)\}/)?.[1] ?? '';
    assert.deepEqual(union('UiCode'), [...codeEnum.matchAll(/= "([a-z_]+)"/g)].map((m) => m[1]));
    const limits = core.uiCoreLimits();
    const hostService = declarations.match(/export interface UiHostServiceLimits \{([^}]*)\}/)?.[1] ?? '';
    assert.deepEqual([...hostService.matchAll(/(\w+): number;/g)].map((m) => m[1]).sort(), Object.keys(limits.HOST_LIMITS).sort());
});
