// A plain script (no test framework) that the package works unchanged in a runtime:
//   node packages/core/test/smoke.mjs
//   bun packages/core/test/smoke.mjs
// It compiles, evaluates, edits a state, fails, asks the driver and recovers from a trap,
// checks the corpus's compile sections, and exits non-zero on the first mismatch.

import {
    UiFailure, UiState, UiCompiler, compileUi, evaluateUiBlock, uiFallbackText, uiDriverAnswer,
    uiInputValues, __trapForTests
} from '../src/index.js';
import { corpus } from './corpus.mjs';

const runtime = typeof globalThis.Bun === 'object' ? `bun ${globalThis.Bun.version}` : `node ${process.versions.node}`;
let checks = 0;

/** Stops the script when `actual` is not `expected` (compared as JSON). */
function same(actual, expected, what) {
    checks += 1;
    const a = JSON.stringify(actual);
    const e = JSON.stringify(expected);
    if (a !== e) {
        console.error(`smoke (${runtime}): ${what}\n  expected ${e}\n  actual   ${a}`);
        process.exit(1);
    }
}

/** The code of the UiFailure `work` throws (anything else stops the script). */
function failure(work) {
    try {
        work();
    } catch (error) {
        if (error instanceof UiFailure && error instanceof Error && error.name === 'UiFailure') return error.code;
        console.error(`smoke (${runtime}): not a UiFailure:`, error);
        process.exit(1);
    }
    return 'nothing thrown';
}

/** A JSON value with its keys sorted, so that key order does not matter. */
function sorted(value) {
    if (Array.isArray(value)) return value.map(sorted);
    if (value !== null && typeof value === 'object') {
        return Object.fromEntries(Object.keys(value).sort()
            .filter((key) => !['message', 'expressions', 'expression'].includes(key))
            .map((key) => [key, sorted(value[key])]));
    }
    return value;
}

// Compile: ids and UTF-16 offsets, with emoji and CRLF before the fences.
const reply = '😀 Hi\r\n```ui\r\n$n = 1\r\n$mode = "a"\r\n$xs = ["p", "q"]\r\n'
    + '<Slider value={$n} min={0} max={5}>N</Slider>\r\n'
    + '<Segmented value={$mode}><Option value="a">A</Option><Option value="b">B</Option></Segmented>\r\n'
    + '<Button action={@Set($mode, "b")}>B</Button>\r\n'
    + '<Each items={$xs} as="x"><Tag>{x}</Tag></Each>\r\n'
    + '```\r\nbye\n```ui\n<Tag>open';
const blocks = compileUi(reply, { id: 'r' });
same(blocks.map((b) => [b.id, b.start, b.end, b.complete]), [['r:ui:7', 7, 294, true], ['r:ui:298', 298, 313, false]], 'compile: ids, ranges, complete');
same(blocks[0].diagnostics, [], 'compile: no diagnostics');
same(uiFallbackText(reply, blocks), '😀 Hi\r\nN\nA\nB\nB\n<Tag>{x}</Tag>\nbye\nopen\n', 'fallback text');

// Streaming: an unchanged fence is the same object.
const compiler = new UiCompiler({ id: 'r' });
const first = compiler.compile(reply.slice(0, 305));
const second = compiler.compile(reply);
same([second[0] === first[0], second[1] === first[1], compiler.changed], [true, false, ['r:ui:298']], 'streaming reuse');

// Evaluate: plain view nodes, bindings, actions, Each ids.
const [block] = blocks;
const state = new UiState(block);
let view = evaluateUiBlock(block, state);
same(view.nodes.map((n) => [n.id, n.type, n.sourceId ?? null, n.action ?? false]), [
    ['r:ui:7:39', 'Slider', null, false], ['r:ui:7:86', 'Segmented', null, false],
    ['r:ui:7:181', 'Button', null, true], ['r:ui:7:252:0', 'Tag', 'r:ui:7:252', false], ['r:ui:7:252:1', 'Tag', 'r:ui:7:252', false]
], 'evaluate: view nodes');
same(view.nodes[0].bindings, { value: 1 }, 'evaluate: bindings');

// A state edit, a change, a press, a listener.
let heard = 0;
const stop = state.subscribe(() => { heard += 1; });
state.set('$n', 3);
same(state.change('r:ui:7:39', 'value', 4), true, 'change');
same(state.press('r:ui:7:181'), true, 'press');
stop();
state.set('$n', 5);
same([state.scope(), state.snapshot(), heard], [{ $n: 5, $mode: 'b', $xs: ['p', 'q'] }, 4, 3], 'state');
view = evaluateUiBlock(block, state);
same(view.nodes[1].bindings, { value: 'b' }, 'evaluate after the press');
same(uiInputValues(block, state), { $n: 5, $mode: 'b' }, 'input values');

// Failures.
same(failure(() => state.set('$nope', 1)), 'refused_binding', 'set of an undeclared name');
same(failure(() => state.set('$n', 'x')), 'invalid_value', 'set of a wrong kind');
same(failure(() => state.set('$n', NaN)), 'invalid_value', 'set of NaN');
same(failure(() => compileUi('x', { limits: { steps: 0 } })), 'invalid_limits', 'a bad limit');

// The driver.
const answer = JSON.parse(uiDriverAnswer(JSON.stringify({ op: 'compile', text: reply, final: false })));
same([answer.ok, sorted(answer.blocks)], [true, sorted(compileUi(reply, { final: false, now: () => 0 }))], 'driver compile');
same(JSON.parse(uiDriverAnswer('{"op":"fly"}')).error.code, 'driver:unknown_op', 'driver unknown op');

// A trap, and what survives it.
same(failure(() => __trapForTests()), 'internal', 'trap');
same(state.scope(), { $n: 5, $mode: 'b', $xs: ['p', 'q'] }, 'state after the trap');
same(evaluateUiBlock(block, state), view, 'evaluate after the trap');

// The corpus's compile sections.
let cases = 0;
for (const { name, text, expected: { compile: expected }, options } of corpus) {
    const got = compileUi(text, options);
    same(sorted(got), sorted(expected.blocks), `corpus ${name}: blocks`);
    same(uiFallbackText(text, got), expected.fallbackText, `corpus ${name}: fallback text`);
    cases += 1;
}
if (cases < 50) same(cases, '50 or more', 'corpus cases');

console.log(`smoke (${runtime}): ${checks} passed, 0 failed`);
