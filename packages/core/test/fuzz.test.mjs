// A fuzz-style property test over the whole API: random replies, values, options, limits
// and mutated blocks through every export and every method. Each call must return, or throw
// a UiFailure whose code is not `internal` (which would mean the module trapped); whatever
// it returns must be JSON data. Seeded and bounded:
//   UIBLOCKS_FUZZ_SEED=<n>   replay a run (the seed is printed)
//   UIBLOCKS_FUZZ_CALLS=<n>  calls to make (default 6000)
// Under CI (`CI` set) the seed is fixed, so a run's verdict depends on the code alone;
// elsewhere each run draws a new one and explores further.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, readdirSync } from 'node:fs';

import * as core from '../src/index.js';

const {
    UiFailure, UiCompiler, UiState, compileUi, compileUiBlock, evaluateUiBlock, uiInputValues,
    uiValidatedState, uiQueryArguments, uiLinkTargets, resolveUiChoice, uiQueryFallback, uiFallbackText,
    uiHasFence, uiMayReferenceHost, uiCatalogText, uiCompactCatalog, uiSessionNote, uiReferenceText,
    uiCatalog, uiCoreLimits, uiDriverAnswer, ready, initSync
} = core;

/** The seed CI runs with. */
const CI_SEED = 20261207;
const SEED = Number(process.env.UIBLOCKS_FUZZ_SEED ?? (process.env.CI ? CI_SEED : Math.floor(Math.random() * 2 ** 32))) >>> 0;
const CALLS = Number(process.env.UIBLOCKS_FUZZ_CALLS ?? 6000);

// ---------------------------------------------------------------------------------------
// The generator: mulberry32, our own and dependency-free.

let seed = SEED;
function random() {
    seed = (seed + 0x6d2b79f5) >>> 0;
    let t = seed;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 2 ** 32;
}
const int = (n) => Math.floor(random() * n);
const chance = (p) => random() < p;
const pick = (list) => list[int(list.length)];
const times = (n, make) => Array.from({ length: n }, (_, i) => make(i));

// ---------------------------------------------------------------------------------------
// Material.

const COMPONENTS = uiCatalog().components;
const TAGS = [...COMPONENTS.map((c) => c.name), 'Nope', 'script', 'tag', '$text', '__proto__', 'constructor'];
const PROPS = [...new Set(COMPONENTS.flatMap((c) => c.props.map((p) => p.name))), 'action', 'onClick', 'style', '__proto__', 'x'];
const VARIABLES = ['$n', '$s', '$on', '$list', '$rec', '$q', '$x', '$__proto__', '$constructor', '$'];
const HELPERS = ['@Count', '@Filter', '@Sum', '@Join', '@Round', '@Query', '@Set', '@Reset', '@Nope', '@'];
const ODD = ['\ud800', '\udc00', '\udbff\udfff', '\u0000', '\u0007', '\u001b', '\u2028', '\u2029', '\ufeff', '\r', '\r\n', '\t',
    '😀', 'é', '🐇', '\u200b', '\\', '"', "'", '`', '{', '}', '$', '@', '<', '>', '/', '=', '</', '/>', '{{', '}}'];
const { querySchemas } = JSON.parse(readFileSync(new URL('../../../tests/data/conformance/hosts.json', import.meta.url), 'utf8'));
const SOURCES = [...Object.keys(querySchemas), 'no.such', ''];
const CORPUS_DIR = new URL('../../../tests/data/conformance/', import.meta.url);
const CORPUS = readdirSync(CORPUS_DIR).filter((f) => f.endsWith('.md') && f !== 'README.md').sort()
    .map((f) => readFileSync(new URL(f, CORPUS_DIR), 'utf8'));

function literal(depth = 0) {
    switch (int(depth > 2 ? 5 : 7)) {
        case 0: return String(pick([0, -0, 1, 1.5, -7, 1e308, 1e400, 2 ** 53 + 1, 0.1, 1e-320]));
        case 1: return JSON.stringify(pick(['', 'a', 'main', 'x'.repeat(int(100)), 'é🐇', '\\u0000']));
        case 2: return pick(['true', 'false', 'null']);
        case 3: return `"${pick(ODD)}${pick(ODD)}`;
        case 4: return pick(VARIABLES);
        case 5: return `[${times(int(4), () => literal(depth + 1)).join(', ')}]`;
        default: return `{${times(int(4), () => `${pick(['a', 'b', '__proto__', 'constructor', '"k"', '1'])}: ${literal(depth + 1)}`).join(', ')}}`;
    }
}

function expression(depth = 0) {
    if (depth > 3 || chance(0.3)) return literal(depth);
    switch (int(6)) {
        case 0: return `${expression(depth + 1)} ${pick(['+', '-', '*', '/', '%', '==', '!=', '===', '<', '>=', '&&', '||', '??', '**'])} ${expression(depth + 1)}`;
        case 1: return `${pick(['!', '-', '+', ''])}${expression(depth + 1)}`;
        case 2: return `${pick(HELPERS)}(${times(int(4), () => expression(depth + 1)).join(', ')})`;
        case 3: return `${pick(VARIABLES)}${pick(['.a', '[0]', '["b"]', '.__proto__', '.constructor', '.length', '[', '.'])}`;
        case 4: return `(${expression(depth + 1)}`;
        default: return `@Filter(${pick(VARIABLES)}, item, item${pick(['.a', ' > 1', ''])})`;
    }
}

function prop() {
    const name = pick(PROPS);
    switch (int(5)) {
        case 0: return `${name}="${pick(['', 'info', 'danger', 'x', 'latest', 'a.rs', 'abc1234', pick(ODD)])}"`;
        case 1: return `${name}={${expression()}}`;
        case 2: return `${name}={${pick(['@Set($n, 1)', '@Reset()', '@Reset($s)', '@Set($on, $on)', '@Set(', '@Set($q, [])'])}}`;
        case 3: return `${name}`;
        default: return `${name}={${expression()}`;
    }
}

function declaration() {
    const name = pick(VARIABLES);
    switch (int(4)) {
        case 0: return `${name} = ${literal()}`;
        case 1: return `${name} = @Query(${JSON.stringify(pick(SOURCES))}, {${pick(['branch', 'limit', 'pipeline', 'x'])}: ${literal(2)}})`;
        case 2: return `${name} = ${expression()}`;
        default: return `${name} =`;
    }
}

function element(depth = 0) {
    const tag = pick(TAGS);
    const props = times(int(4), prop).join(' ');
    if (chance(0.3) || depth > 4) return `<${tag} ${props}/>`;
    const children = times(int(4), () => (chance(0.5) ? element(depth + 1) : pick(['text', `{${expression()}}`, pick(ODD), ' ', '\n'])));
    return `<${tag} ${props}>${children.join('')}${chance(0.85) ? `</${chance(0.9) ? tag : pick(TAGS)}>` : ''}`;
}

function source() {
    const lines = [...times(int(5), declaration), ...times(int(5), () => element())];
    if (chance(0.1)) lines.push('x'.repeat(int(70000)));
    if (chance(0.1)) lines.push('<Show when={true}>'.repeat(40 + int(30)));
    if (chance(0.1)) lines.push(`$big = [${times(int(3000), (i) => i).join(',')}]`);
    if (chance(0.2)) lines.splice(int(lines.length + 1), 0, pick(ODD).repeat(1 + int(5)));
    const body = lines.join(pick(['\n', '\r\n', '\n\n', ' ']));
    return chance(0.2) ? body.slice(0, int(body.length + 1)) : body;
}

function reply() {
    if (chance(0.15)) {
        const text = pick(CORPUS);
        return chance(0.5) ? text : text.slice(0, int(text.length + 1));
    }
    const parts = times(1 + int(4), () => {
        const word = pick(['ui', 'ui', 'ui', ' ui ', 'UI', 'blocks', 'js', '']);
        const fence = pick(['```', '~~~', '````', '  ```', '    ```']);
        const close = chance(0.8) ? `\n${fence.trim()}\n` : '';
        return `${pick(['Prose. ', '', pick(ODD)])}\n${fence}${word}\n${source()}${close}`;
    });
    if (chance(0.05)) parts.push(...times(17, () => '```ui\n<Tag>a</Tag>\n```\n'));
    return parts.join(pick(['\n', '\r\n', '']));
}

class Thing { constructor() { this.a = 1; } }

function value(depth = 0) {
    switch (int(depth > 3 ? 8 : 17)) {
        case 0: return null;
        case 1: return chance(0.5);
        case 2: return pick([0, -0, 1, -1, 0.5, 1e308, -1e308, Number.MAX_SAFE_INTEGER, 2 ** 60, 5e-324, NaN, Infinity, -Infinity]);
        case 3: return pick(['', 'a', 'main', 'b', 'x'.repeat(int(20000)), pick(ODD), 'é🐇', '\ud800x']);
        case 4: return undefined;
        case 5: return pick([() => 1, function named() {}, Symbol('s'), 10n, new Date(0), new Map(), new Thing(), /re/, new Uint8Array(2)]);
        case 6: return pick([true, false, 1, 'a', 'b', 'main', 'next', 0, 5, 'p']);
        case 7: return pick(['release/3.2', 'staging', 'production', 3, 20, 50]);
        case 8: return times(int(5), () => value(depth + 1));
        case 9: return Object.fromEntries(times(int(5), () => [pick(['a', 'b', 'name', 'value', 'id', '0', '']), value(depth + 1)]));
        case 10: { const c = { a: 1 }; c.self = chance(0.5) ? c : [c]; return c; }
        case 11: return Object.defineProperty({}, 'x', { get() { throw new Error('getter'); }, enumerable: true });
        case 12: return JSON.parse(pick(['{"__proto__": 1}', '{"constructor": {}}', '{"prototype": []}', '{"a": {"__proto__": null}}']));
        case 13: { const bare = Object.create(null); bare.k = value(depth + 1); return bare; }
        case 14: { let v = 1; for (let i = 0, n = int(300); i < n; i++) v = chance(0.5) ? [v] : { v }; return v; }
        case 15: return chance(0.5) ? Array(int(3000)).fill(1) : [1, , 3]; // eslint-disable-line no-sparse-arrays
        default: return Object.fromEntries(pick(VARIABLES).split('').length && times(int(4), () => [pick(VARIABLES), value(depth + 1)]));
    }
}

/** A record of `$name → value`: what a page sends as input or readings. */
function record() {
    if (chance(0.1)) return value();
    if (chance(0.3)) return {};
    return Object.fromEntries(times(int(4), () => [chance(0.8) ? pick(VARIABLES) : pick(['n', '', '__proto__']), value(1)]));
}

function limits() {
    switch (int(6)) {
        case 0: return undefined;
        case 1: return {};
        case 2: return { milliseconds: 1e9 };
        case 3: return Object.fromEntries(times(1 + int(3), () => [
            pick(['characters', 'depth', 'nodes', 'diagnostics', 'steps', 'iterations', 'stringLength', 'milliseconds']),
            pick([1, 2, 5, 50, 1000, 1e9])
        ]));
        case 4: return { [pick(['steps', 'depth', 'speed', '__proto__'])]: pick([0, -1, 1.5, '10', null, NaN, 2 ** 53, true, undefined]) };
        default: return value();
    }
}

const CLOCKS = [() => 0, () => 0, () => random() * 100, () => NaN, () => 'soon', () => { throw new Error('clock'); }, () => Infinity, () => -1e12];
function options() {
    if (chance(0.05)) return value();
    const out = {};
    if (chance(0.7)) out.id = chance(0.9) ? pick(['r', 'reply', '', 'é🐇', 'a:b']) : value();
    if (chance(0.5)) out.final = chance(0.8) ? chance(0.5) : value();
    if (chance(0.2)) out.fenceLanguage = chance(0.8) ? pick(['ui', 'blocks', '', ' ui']) : value();
    if (chance(0.2)) out.latestAttachment = chance(0.8) ? pick(['att-1', '']) : value();
    if (chance(0.5)) out.querySchemas = chance(0.9) ? querySchemas : value();
    if (chance(0.3)) out.limits = limits();
    if (chance(0.6)) out.now = pick(CLOCKS);
    return out;
}

/** A deep copy of `block` with random damage. */
function mutate(block) {
    const copy = JSON.parse(JSON.stringify(block));
    const paths = [];
    (function collect(node, path) {
        if (node === null || typeof node !== 'object' || path.length > 12) return;
        for (const key of Object.keys(node)) {
            paths.push([...path, key]);
            collect(node[key], [...path, key]);
        }
    })(copy, []);
    for (let n = 1 + int(3); n > 0 && paths.length; n -= 1) {
        const path = pick(paths);
        let holder = copy;
        for (const key of path.slice(0, -1)) holder = holder !== null && typeof holder === 'object' ? holder[key] : undefined;
        const key = path.at(-1);
        if (holder === null || typeof holder !== 'object') continue;
        switch (int(5)) {
            case 0: delete holder[key]; break;
            case 1: holder[key] = pick([null, 5, 'x', [], {}, true, -1, 1e308, 'Button', 'reply:ui:0:0']); break;
            case 2: try { holder[key] = JSON.parse(JSON.stringify(copy)); } catch { holder[key] = {}; } break;
            case 3: { let v = {}; for (let i = 0; i < 200; i++) v = { children: [v], type: 'Show', id: `d${i}` }; holder[key] = v; break; }
            default: holder[key] = value(2);
        }
    }
    return copy;
}

// ---------------------------------------------------------------------------------------
// The checks.

const failures = [];
let calls = 0;
const codes = new Map();
const called = new Map();

function describeArgs(args) {
    return args.map((a) => {
        try {
            const text = typeof a === 'function' ? `[function]` : typeof a === 'bigint' || typeof a === 'symbol' ? String(a) : JSON.stringify(a);
            return text === undefined ? String(a) : text.length > 300 ? `${text.slice(0, 300)}…` : text;
        } catch {
            return `[${Object.prototype.toString.call(a)}]`;
        }
    }).join(', ');
}

/** Calls `work`; a return must be JSON data, a throw a UiFailure other than `internal`. */
function check(name, work, ...args) {
    calls += 1;
    called.set(name, (called.get(name) ?? 0) + 1);
    let result;
    try {
        result = work(...args);
    } catch (error) {
        const ok = error instanceof UiFailure && error instanceof Error && error.name === 'UiFailure'
            && typeof error.code === 'string' && error.code !== '' && error.code !== 'internal' && typeof error.message === 'string';
        if (!ok) failures.push(`${name}(${describeArgs(args)}) threw ${error?.name}: ${error?.code ?? ''} ${String(error?.message).slice(0, 300)}`);
        else codes.set(error.code, (codes.get(error.code) ?? 0) + 1);
        return undefined;
    }
    codes.set('ok', (codes.get('ok') ?? 0) + 1);
    const handle = result instanceof UiState || result instanceof UiCompiler || typeof result === 'function' || result === undefined;
    if (!handle && !isJsonData(result)) failures.push(`${name}(${describeArgs(args)}) answered something that is not JSON data`);
    return result;
}

/** Whether `value` is JSON data: null, booleans, finite numbers, strings, arrays and plain records of them. */
function isJsonData(value, depth = 0) {
    if (depth > 1000) return false;
    switch (typeof value) {
        case 'string': case 'boolean': return true;
        case 'number': return Number.isFinite(value);
        case 'object': {
            if (value === null) return true;
            if (Array.isArray(value)) return value.every((v) => isJsonData(v, depth + 1));
            const proto = Object.getPrototypeOf(value);
            if (proto !== Object.prototype && proto !== null) return false;
            return Object.keys(value).every((k) => isJsonData(value[k], depth + 1));
        }
        default: return false;
    }
}

/** The driver's answers: JSON lines, never `internal`. */
function driver(line) {
    const answer = check('uiDriverAnswer', uiDriverAnswer, line);
    if (typeof answer !== 'string' || answer === '') return;
    try {
        const parsed = JSON.parse(answer);
        if (parsed.error?.code === 'internal') failures.push(`uiDriverAnswer(${line.slice(0, 300)}) answered internal: ${parsed.error.message}`);
    } catch {
        failures.push(`uiDriverAnswer(${line.slice(0, 300)}) answered no JSON: ${answer.slice(0, 300)}`);
    }
}

// ---------------------------------------------------------------------------------------
// The run.

/** Some block: compiled, mutated, or no block at all. */
function someBlock(pool) {
    const roll = random();
    if (roll < 0.7 && pool.length) return pick(pool);
    if (roll < 0.85 && pool.length) return mutate(pick(pool));
    return value();
}

function viewIds(block, state) {
    try {
        const nodes = [];
        (function walk(list) { for (const n of list) { nodes.push(n); walk(n.children); } })(evaluateUiBlock(block, state).nodes);
        return nodes.map((n) => n.id);
    } catch {
        return [];
    }
}

function round(pool, states) {
    const block = someBlock(pool);
    const state = states.length && chance(0.8) ? pick(states) : undefined;
    const names = block && typeof block === 'object' ? [...Object.keys(block.defaults ?? {}), ...Object.keys(block.queries ?? {})] : [];
    const name = () => (names.length && chance(0.8) ? pick(names) : chance(0.5) ? pick(VARIABLES) : value());
    const ids = () => (state && block ? viewIds(block, state) : []);
    const id = () => { const list = ids(); return list.length && chance(0.8) ? pick(list) : chance(0.5) ? `reply:ui:${int(99)}:${int(99)}` : value(); };
    switch (int(30)) {
        case 0: case 1: case 2: {
            const blocks = check('compileUi', compileUi, reply(), options());
            if (Array.isArray(blocks)) pool.push(...blocks.slice(0, 4));
            break;
        }
        case 3: {
            const made = check('compileUiBlock', compileUiBlock, chance(0.9) ? source() : value(), options());
            if (made) pool.push(made);
            break;
        }
        case 4: {
            const compiler = check('new UiCompiler', (o) => new UiCompiler(o), options());
            if (!compiler) break;
            const text = reply();
            const step = Math.max(1, Math.ceil(text.length / (2 + int(6))));
            for (let length = 0; length <= text.length; length += step) {
                check('UiCompiler.compile', (t, u) => compiler.compile(t, u), text.slice(0, length), chance(0.8) ? undefined : { latestAttachment: value(), final: chance(0.1) });
                if (!compiler.changed.every((c) => typeof c === 'string')) failures.push('UiCompiler.changed holds something that is no id');
                if (chance(0.05)) check('UiCompiler.clear', () => compiler.clear());
            }
            const blocks = check('UiCompiler.compile', (t, u) => compiler.compile(t, u), text, { final: true });
            if (Array.isArray(blocks)) pool.push(...blocks.slice(0, 2));
            check('UiCompiler.free', () => compiler.free());
            break;
        }
        case 5: case 6: check('evaluateUiBlock', evaluateUiBlock, block, chance(0.7) ? state : chance(0.5) ? undefined : value(), limits()); break;
        case 7: {
            const made = check('new UiState', (b, l) => new UiState(b, l), block, limits());
            if (made) states.push(made);
            break;
        }
        case 8: case 9: if (state) check('UiState.set', (n, v) => state.set(n, v), name(), chance(0.3) ? pick([1, 'a', true, [], {}, null]) : value()); break;
        case 10: if (state) check('UiState.setQuery', (n, v, b) => state.setQuery(n, v, b), name(), value(), chance(0.8) ? state.block : block); break;
        case 11: if (state) check('UiState.run', (a) => state.run(a), pick([
            () => `@Set(${pick(VARIABLES)}, ${expression()})`, () => expression(), () => `@Reset(${chance(0.5) ? pick(VARIABLES) : ''})`,
            () => { const nodes = []; (function walk(list) { for (const n of list ?? []) { nodes.push(n); walk(n.children); } })(state.block?.nodes); const b = nodes.find((n) => n.expressions?.action); return b ? b.expressions.action : value(); },
            () => value(), () => mutate({ kind: 'call', name: 'Set', args: [{ kind: 'reference', name: '$n' }, { kind: 'literal', value: 1 }] })
        ])()); break;
        case 12: case 13: if (state) check('UiState.press', (i) => state.press(i), id()); break;
        case 14: case 15: if (state) check('UiState.change', (i, p, v) => state.change(i, p, v), id(), chance(0.8) ? 'value' : pick([...PROPS, value()]), value()); break;
        case 16: if (state) {
            check('UiState.sync', (b) => state.sync(b), chance(0.8) ? pick(pool) : block);
            check('UiState.reset', () => state.reset());
            check('UiState.snapshot', () => state.snapshot());
            check('UiState.scope', () => state.scope());
            check('UiState.values', () => state.values());
            check('UiState.block', () => state.block !== undefined);
            const stop = check('UiState.subscribe', (l) => state.subscribe(l), chance(0.9) ? () => {} : value());
            if (typeof stop === 'function') check('unsubscribe', stop);
        } break;
        case 17: check('uiInputValues', uiInputValues, block, chance(0.8) ? state : value()); break;
        case 18: {
            const made = check('uiValidatedState', uiValidatedState, block, record(), record(), limits());
            if (made) { check('validated scope', () => made.scope()); states.push(made); }
            break;
        }
        case 19: check('uiQueryArguments', uiQueryArguments, block, name(), record(), limits()); break;
        case 20: check('uiLinkTargets', uiLinkTargets, block, record(), record(), limits()); break;
        case 21: check('resolveUiChoice', resolveUiChoice, block, id(), record(), record(), limits()); break;
        case 22: check('uiQueryFallback', uiQueryFallback, block, record()); break;
        case 23: check('uiFallbackText', uiFallbackText, chance(0.9) ? reply() : value(), chance(0.9) ? times(int(4), () => someBlock(pool)) : value()); break;
        case 24: check('uiHasFence', uiHasFence, chance(0.9) ? reply() : value(), chance(0.7) ? undefined : pick(['ui', 'blocks', '', '.*', value()])); break;
        case 25: check('uiMayReferenceHost', uiMayReferenceHost, chance(0.9) ? reply() : value()); break;
        case 26: {
            check('uiCatalogText', uiCatalogText);
            check('uiCompactCatalog', uiCompactCatalog);
            check('uiSessionNote', uiSessionNote, chance(0.5) ? { fenceLanguage: pick(['ui', 'x', '', '```', '\ud800']) } : value());
            check('uiReferenceText', uiReferenceText, chance(0.5) ? { fenceLanguage: pick(['ui', 'x', '']) } : value());
            check('uiCatalog', () => uiCatalog().components.length);
            check('uiCoreLimits', uiCoreLimits);
            check('initSync', initSync, chance(0.5) ? undefined : value());
            check('ready', () => { ready(); });
            break;
        }
        default: {
            const op = pick(['compile', 'evaluate', 'links', 'args', 'choice', 'fallback', 'expression', 'text', 'stream', 'nope', null]);
            const request = { op, text: chance(0.7) ? reply() : expression(), final: chance(0.5), block: chance(0.2), querySchemas };
            for (const key of ['input', 'queries', 'press', 'limits', 'evalLimits', 'perBlock', 'blockIndex', 'step', 'variables', 'clock', 'choice', 'name']) {
                if (chance(0.2)) {
                    try {
                        request[key] = JSON.parse(JSON.stringify(value(1)) ?? 'null');
                    } catch {
                        request[key] = null;
                    }
                }
            }
            // A stream answers every prefix's blocks, fallbacks included: quadratic in the text
            // over the step (a 40k text in steps of 1 answers 800M characters), so a few steps.
            if (op === 'stream') request.step = Math.max(64, Math.ceil(request.text.length / (1 + int(16))));
            let line = JSON.stringify(request);
            if (chance(0.1)) line = line.slice(0, int(line.length));
            if (chance(0.05)) line = pick(['', '   ', '{', '[]', 'null', '"x"', '{"op":"compile","text":"\\ud800"}']);
            driver(line);
        }
    }
}

test(`fuzz: ${CALLS} calls over the whole API (UIBLOCKS_FUZZ_SEED=${SEED})`, { timeout: 120_000 }, () => {
    console.log(`# fuzz seed ${SEED} (replay with UIBLOCKS_FUZZ_SEED=${SEED})`);
    const pool = compileUi(CORPUS.join('\n'), { querySchemas, now: () => 0 }).slice(0, 8);
    const states = [];
    const started = Date.now();
    while (calls < CALLS && failures.length < 20) {
        round(pool, states);
        if (pool.length > 64) pool.splice(0, pool.length - 32);
        if (states.length > 32) states.splice(0, states.length - 16);
    }
    const seconds = (Date.now() - started) / 1000;
    console.log(`# fuzz: ${calls} calls in ${seconds.toFixed(1)} s; outcomes ${JSON.stringify(Object.fromEntries([...codes].sort()))}`);
    console.log(`# fuzz: calls ${JSON.stringify(Object.fromEntries([...called].sort()))}`);
    assert.deepEqual(failures, [], `seed ${SEED}: ${failures.length} bad calls`);
    const exported = Object.keys(core).filter((name) => typeof core[name] === 'function' && !['UiFailure', 'UiState', 'UiCompiler', '__trapForTests', 'ready'].includes(name));
    for (const name of [...exported, 'new UiState', 'new UiCompiler', 'UiCompiler.compile', 'UiState.set', 'UiState.setQuery', 'UiState.run', 'UiState.press', 'UiState.change', 'UiState.sync', 'UiState.reset', 'UiState.subscribe']) {
        assert.ok(called.get(name) > 0, `${name} was called`);
    }
    assert.ok((codes.get('ok') ?? 0) > CALLS / 10, 'most calls are not refused outright');
});
