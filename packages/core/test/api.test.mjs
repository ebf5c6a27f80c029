// The behaviour of every export of @uiblocks/core (src/index.js): compiling, streaming,
// evaluating, page state, the host's checks, the texts and the driver. Cases are data where
// they are many; the corpus (tests/data/conformance/) drives evaluate, links, args, choice
// and fallback through the package's functions exactly as driver.md's driver does.

import { describe, test } from 'node:test';
import assert from 'node:assert/strict';

import * as core from '../src/index.js';
import { comparable, corpus, querySchemas } from './corpus.mjs';
import {
    UiFailure, UiCompiler, UiState, compileUi, compileUiBlock, evaluateUiBlock, uiInputValues,
    uiValidatedState, uiQueryArguments, uiLinkTargets, resolveUiChoice, uiQueryFallback,
    uiFallbackText, uiHasFence, uiMayReferenceHost, uiCatalogText, uiCompactCatalog, uiSessionNote,
    uiReferenceText, uiCatalog, uiDriverAnswer, ready, initSync
} from '../src/index.js';

// ---------------------------------------------------------------------------------------
// Helpers.

/** Asserts that `work` throws a `UiFailure` with `code`. */
function fails(work, code, what = '') {
    let thrown;
    try {
        work();
    } catch (error) {
        thrown = error;
    }
    assert.ok(thrown !== undefined, `${what}: expected ${code}, nothing was thrown`);
    assert.ok(thrown instanceof UiFailure, `${what}: expected a UiFailure, got ${thrown?.name}: ${thrown?.message}`);
    assert.ok(thrown instanceof Error, `${what}: a UiFailure is an Error`);
    assert.equal(thrown.name, 'UiFailure', what);
    assert.equal(thrown.code, code, `${what}: ${thrown.message}`);
    assert.equal(typeof thrown.message, 'string');
    return thrown;
}

/** Every view node, depth first (parents before children), as the driver walks a view. */
function walk(nodes, out = []) {
    for (const node of nodes) {
        out.push(node);
        walk(node.children, out);
    }
    return out;
}

/** The first node of `nodes` (compiled or view, at any depth) that `match` accepts. */
function find(nodes, match) {
    const found = walk(nodes).find(match);
    assert.ok(found, `no node matches ${match}`);
    return found;
}

/** The text of a view node's `$text` descendants. */
function label(node) {
    return walk(node.children).filter((n) => n.type === '$text').map((n) => n.props.text).join('');
}

const corpusCase = (name) => corpus.find((c) => c.name === name);

/** Evaluation limits of the corpus: wall-clock budgets off (driver.md, `clock: "frozen"`). */
const FROZEN = { milliseconds: 1e9 };

// A block that uses every kind of local state: bindings, buttons, Each, Show and choices.
const PAGE = [
    '$n = 1',
    '$mode = "a"',
    '$on = false',
    '$tags = []',
    '$items = ["x", "y", "z"]',
    '<Switch value={$on}>On</Switch>',
    '<Slider value={$n} min={0} max={10} step={1}>N</Slider>',
    '<Segmented value={$mode}><Option value="a">A</Option><Option value="b">B</Option></Segmented>',
    '<Checklist value={$tags}><Item value="p">P</Item><Item value="q">Q</Item></Checklist>',
    '<Button action={@Set($mode, "b")}>To B</Button>',
    '<Button action={@Reset()} disabled={true}>Reset</Button>',
    '<Button action={@Reset($n)}>Reset n</Button>',
    '<Each items={$items} as="item"><Tag>{item}</Tag></Each>',
    '<Show when={$on}><Tag>shown</Tag></Show>',
    '<Choices><Choice context={"Mode " + $mode}>Go now</Choice></Choices>',
    '<Show when={false}><Choices><Choice>Hidden</Choice></Choices></Show>',
    ''
].join('\n');
const page = () => compileUiBlock(PAGE, { id: 'p', final: true });
/** The compiled id of the node whose tag starts with `tag` (ASCII sources only). */
const idOf = (source, blockId, tag, from = 0) => `${blockId}:${source.indexOf(tag, from)}`;

// ---------------------------------------------------------------------------------------
// The module.

describe('the module', () => {
    test('exports exactly the public API', () => {
        assert.deepEqual(Object.keys(core).sort(), [
            'UI_CATALOG_VERSION', 'UI_FENCE_LANGUAGE', 'UI_HOST_LIMITS', 'UI_LIMITS', 'UI_REPLY_LIMITS',
            'UI_STREAM_INTERVAL_MS', 'UiCompiler', 'UiFailure', 'UiState', '__trapForTests',
            'catalogVersion', 'compileUi', 'compileUiBlock', 'evaluateUiBlock', 'initSync', 'ready',
            'resolveUiChoice', 'uiCatalog', 'uiCatalogText', 'uiCompactCatalog', 'uiCoreLimits',
            'uiDriverAnswer', 'uiFallbackText', 'uiHasFence', 'uiInputValues', 'uiLinkTargets',
            'uiMayReferenceHost', 'uiQueryArguments', 'uiQueryFallback', 'uiReferenceText',
            'uiSessionNote', 'uiValidatedState'
        ]);
    });

    test('ready() resolves and initSync() is a no-op once loaded', async () => {
        assert.equal(await ready(), undefined);
        assert.equal(initSync(), undefined);
        assert.equal(await ready(), undefined);
    });

    test('UiFailure is an Error with a name and a code', () => {
        const failure = new UiFailure('invalid_value', 'Nope.');
        assert.ok(failure instanceof Error);
        assert.equal(failure.name, 'UiFailure');
        assert.equal(failure.code, 'invalid_value');
        assert.equal(failure.message, 'Nope.');
    });

    test('the fence word and the catalog version', () => {
        assert.equal(core.UI_FENCE_LANGUAGE, 'ui');
        assert.equal(core.catalogVersion, core.UI_CATALOG_VERSION);
        assert.equal(core.UI_STREAM_INTERVAL_MS, 250);
    });
});

// ---------------------------------------------------------------------------------------
// compileUi.

// Each reply's blocks: id, reply range (UTF-16 units), completeness and top-level node ids.
const REPLIES = [
    { name: 'prose only', text: 'No blocks here.\n', blocks: [] },
    {
        name: 'one closed fence', text: 'Intro\n```ui\n<Tag>a</Tag>\n```\nafter',
        blocks: [{ id: 'r:ui:6', start: 6, end: 29, complete: true, nodes: ['r:ui:6:0'] }]
    },
    {
        name: 'emoji before the fence count two units each', text: '😀🎉 done\n```ui\n<Tag>é🐇</Tag>\n```\n',
        blocks: [{ id: 'r:ui:10', start: 10, end: 35, complete: true, nodes: ['r:ui:10:0'] }]
    },
    {
        name: 'CRLF lines', text: 'A\r\n```ui\r\n$n = 1\r\n<Tag>{$n}</Tag>\r\n```\r\nB',
        blocks: [{ id: 'r:ui:3', start: 3, end: 40, complete: true, nodes: ['r:ui:3:8'] }]
    },
    {
        name: 'an unclosed fence is incomplete (final defaults to false)', text: 'x\n```ui\n<Tag>a</Tag>',
        blocks: [{ id: 'r:ui:2', start: 2, end: 20, complete: false, nodes: ['r:ui:2:0'] }]
    },
    {
        name: 'an unclosed fence of a final reply is complete', text: 'x\n```ui\n<Tag>a</Tag>', options: { final: true },
        blocks: [{ id: 'r:ui:2', start: 2, end: 20, complete: true, nodes: ['r:ui:2:0'] }]
    },
    {
        name: 'final must be true, not truthy', text: 'x\n```ui\n<Tag>a</Tag>', options: { final: 1 },
        blocks: [{ id: 'r:ui:2', start: 2, end: 20, complete: false, nodes: ['r:ui:2:0'] }]
    },
    {
        name: 'a ui fence inside another fence is content', text: '````md\n```ui\n<Tag>a</Tag>\n```\n````\n',
        blocks: []
    },
    {
        name: 'two fences around a code fence',
        text: '```ui\n<Tag>a</Tag>\n```\n```js\nlet x;\n```\n~~~~ui\n<Tag>b</Tag>\n~~~~\n',
        blocks: [
            { id: 'r:ui:0', start: 0, end: 23, complete: true, nodes: ['r:ui:0:0'] },
            { id: 'r:ui:40', start: 40, end: 65, complete: true, nodes: ['r:ui:40:0'] }
        ]
    },
    {
        name: 'the host fence word', text: '```ui\n<Tag>a</Tag>\n```\n```blocks\n<Tag>b</Tag>\n```\n',
        options: { fenceLanguage: 'blocks' },
        blocks: [{ id: 'r:ui:23', start: 23, end: 50, complete: true, nodes: ['r:ui:23:0'] }]
    },
    {
        name: 'the fence word is trimmed, exact and case-sensitive', text: '```  ui  \n<Tag>a</Tag>\n```\n```UI\n<Tag>b</Tag>\n```\n',
        blocks: [{ id: 'r:ui:0', start: 0, end: 27, complete: true, nodes: ['r:ui:0:0'] }]
    }
];

describe('compileUi', () => {
    for (const { name, text, options, blocks } of REPLIES) {
        test(name, () => {
            const compiled = compileUi(text, { id: 'r', ...options });
            assert.deepEqual(compiled.map((b) => ({
                id: b.id, start: b.start, end: b.end, complete: b.complete, nodes: b.nodes.map((n) => n.id)
            })), blocks);
            for (const block of compiled) {
                assert.equal(block.catalogVersion, 1);
                assert.deepEqual(JSON.parse(JSON.stringify(block)), block, 'a block is plain JSON data');
            }
        });
    }

    test('the default id is "reply"', () => {
        assert.equal(compileUi('```ui\n<Tag>a</Tag>\n```\n')[0].id, 'reply:ui:0');
    });

    test('node and diagnostic ranges count UTF-16 units of the block body', () => {
        const [block] = compileUi('🐇\n```ui\n<Tag>é🐇</Tag><Nope/>\n```\n', { id: 'r' });
        assert.equal(block.id, 'r:ui:3');
        assert.deepEqual(block.nodes.map((n) => [n.id, n.type, n.start, n.end]), [
            ['r:ui:3:0', 'Tag', 0, 14], ['r:ui:3:14', 'Nope', 14, 21]
        ]);
        assert.deepEqual(block.diagnostics.map((d) => [d.code, d.start, d.end, d.nodeId]), [
            ['unknown_component', 14, 21, 'r:ui:3:14']
        ]);
    });

    test('a reply over the block cap keeps 16 blocks and reports the 17th', () => {
        const text = Array.from({ length: 17 }, (_, i) => `\`\`\`ui\n<Tag>${i}</Tag>\n\`\`\`\n`).join('');
        const blocks = compileUi(text, { id: 'r' });
        assert.equal(blocks.length, 16);
        assert.equal(blocks[15].diagnostics.at(-1).code, 'budget_exceeded');
    });

    test('the compile clock is the now option', () => {
        let calls = 0;
        const frozen = compileUi('```ui\n<Tag>a</Tag>\n```\n', { now: () => { calls += 1; return 0; } });
        assert.ok(calls > 0, 'now was called');
        assert.deepEqual(frozen[0].diagnostics, []);
        let t = 0;
        const slow = compileUi('```ui\n<Tag>a</Tag>\n```\n', { now: () => (t += 1000) });
        assert.deepEqual(slow[0].nodes, []);
        assert.deepEqual(slow[0].diagnostics.map((d) => d.code), ['budget_exceeded']);
    });

    const BAD_OPTIONS = [
        ['a limit of 0', { limits: { steps: 0 } }, 'invalid_limits'],
        ['a negative limit', { limits: { nodes: -1 } }, 'invalid_limits'],
        ['a fractional limit', { limits: { depth: 1.5 } }, 'invalid_limits'],
        ['a limit past 2^53', { limits: { characters: 2 ** 53 } }, 'invalid_limits'],
        ['a limit that is text', { limits: { steps: '10' } }, 'invalid_limits'],
        ['an unknown limit', { limits: { speed: 1 } }, 'invalid_limits'],
        ['limits that are no record', { limits: 5 }, 'invalid_limits'],
        ['a NaN limit', { limits: { steps: NaN } }, 'invalid_value'],
        ['an id that is no text', { id: 5 }, 'invalid_value'],
        ['a function in the options', { id: 'r', querySchemas: { x: () => 1 } }, 'invalid_value']
    ];
    for (const [name, options, code] of BAD_OPTIONS) {
        test(`options: ${name} is ${code}`, () => {
            fails(() => compileUi('```ui\n<Tag>a</Tag>\n```\n', options), code, name);
            fails(() => compileUiBlock('<Tag>a</Tag>', options), code, name);
            fails(() => new UiCompiler(options), code, name);
        });
    }

    test('an option given as undefined is an option not given', () => {
        const [block] = compileUi('```ui\n<Image generated="latest"/>\n```\n', { latestAttachment: undefined, id: 'r' });
        assert.equal(block.id, 'r:ui:0');
        assert.equal(block.nodes[0].props.attachment, undefined);
    });
});

// ---------------------------------------------------------------------------------------
// compileUiBlock.

describe('compileUiBlock', () => {
    test('the id is options.id, the range the whole body in UTF-16 units', () => {
        const source = '<Tag>é🐇</Tag>\r\n<Tag>b</Tag>';
        const block = compileUiBlock(source, { id: 'blk' });
        assert.equal(block.id, 'blk');
        assert.equal(block.start, 0);
        assert.equal(block.end, source.length);
        assert.equal(block.end, 28);
        assert.deepEqual(block.nodes.map((n) => n.id), ['blk:0', 'blk:16']);
    });

    test('complete follows final, which defaults to false', () => {
        assert.equal(compileUiBlock('<Tag>a', { id: 'b' }).complete, false);
        assert.deepEqual(compileUiBlock('<Tag>a', { id: 'b' }).diagnostics, []);
        const closed = compileUiBlock('<Tag>a', { id: 'b', final: true });
        assert.equal(closed.complete, true);
        assert.deepEqual(closed.diagnostics.map((d) => d.code), ['unclosed_tag']);
    });

    test('declarations: constant defaults, and queries checked against the host schemas', () => {
        const source = [
            '$branch = "main"', '$limit = 5',
            '$runs = @Query("ci.runs", {branch: $branch, limit: $limit})',
            '$bad = @Query("ci.runs", {limit: 500})',
            '$nope = @Query("no.such", {})',
            '$later = $limit',
            '<Tag>{$branch}</Tag>'
        ].join('\n');
        const block = compileUiBlock(source, { id: 'b', final: true, querySchemas });
        assert.deepEqual(block.defaults, { $branch: 'main', $limit: 5 });
        assert.deepEqual(comparable(block.queries), { $runs: { source: 'ci.runs', args: { branch: 'main', limit: 5 } } });
        assert.ok(block.queries.$runs.expression, 'the arguments read state: their tree is kept');
        assert.deepEqual(block.diagnostics.map((d) => d.code).sort(), ['invalid_default', 'invalid_query', 'unknown_query']);
    });

    test('Image generated="latest" takes latestAttachment', () => {
        const source = '<Image generated="latest" alt="chart"/>';
        assert.equal(compileUiBlock(source, { id: 'b', final: true, latestAttachment: 'att-7' }).nodes[0].props.attachment, 'att-7');
        assert.equal(compileUiBlock(source, { id: 'b', final: true }).nodes[0].props.attachment, undefined);
    });

    test('a block over its character budget is refused whole, its fallback the cut source', () => {
        const block = compileUiBlock('<Tag>abcdefghijklmnop</Tag>', { id: 'b', final: true, limits: { characters: 10 } });
        assert.deepEqual(block.nodes, []);
        assert.deepEqual(block.diagnostics.map((d) => [d.code, d.start, d.end]), [['budget_exceeded', 0, 27]]);
        assert.equal(block.fallback, '<Tag>abcde');
    });

    test('a Button keeps its action as a tree', () => {
        const block = compileUiBlock('$n = 1\n<Button action={@Set($n, 2)}>Two</Button>', { id: 'b', final: true });
        const button = block.nodes[0];
        assert.equal(button.error, undefined);
        assert.deepEqual(button.expressions.action.kind, 'call');
        assert.deepEqual(button.expressions.action.name, 'Set');
    });
});

// ---------------------------------------------------------------------------------------
// UiCompiler.

/** Feeds every `step`-unit prefix of `text`, then all of it as final; checks reuse on the way. */
function stream(text, options, step) {
    const compiler = new UiCompiler(options);
    let previous = [];
    for (let length = 0; length <= text.length; length += step) {
        const prefix = text.slice(0, length);
        const blocks = compiler.compile(prefix);
        // The same objects exactly for the fences that did not change: same place, same end,
        // same completeness (a prefix that did not move the end did not change the body).
        // The last block of a reply over the block cap is a copy carrying the refusal of the
        // next fence (language.md §17.2), new in every call.
        const expectedChanged = [];
        for (const block of blocks) {
            const before = previous.find((b) => b.id === block.id);
            const capped = block.diagnostics.some((d) => d.code === 'budget_exceeded' && d.start >= block.end);
            const unchanged = before && before.end === block.end && before.complete === block.complete && !capped;
            if (unchanged) assert.equal(block, before, `${length}: ${block.id} is the previous object`);
            else {
                assert.ok(!previous.includes(block), `${length}: ${block.id} is new`);
                expectedChanged.push(block.id);
            }
        }
        assert.deepEqual(compiler.changed, expectedChanged, `${length}: changed`);
        // An incremental compile answers what a one-shot compile of the prefix does.
        assert.deepEqual(blocks, compileUi(prefix, options), `${length}: incremental = one-shot`);
        previous = blocks;
    }
    const final = compiler.compile(text, { final: true, latestAttachment: options.latestAttachment });
    assert.ok(final.every((b) => !previous.includes(b)), 'a final compile makes every block anew');
    assert.deepEqual(compiler.changed, final.map((b) => b.id));
    assert.deepEqual(final, compileUi(text, { ...options, final: true }));
    return compiler;
}

describe('UiCompiler', () => {
    const REPLY = 'Intro 😀\r\n```ui\r\n<Tag>a</Tag>\r\n```\r\nmid\n```ui\n$xs = [1, 2]\n<Each items={$xs} as="x"><Tag>{x}</Tag></Each>\n```\nend\n';

    for (const step of [1, 7, 64]) {
        test(`streaming a reply in steps of ${step}`, () => {
            stream(REPLY, { id: 'r', now: () => 0 }, step);
        });
    }

    test('streaming every corpus reply', { timeout: 20_000 }, () => {
        for (const c of corpus) {
            const { final, ...options } = c.options;
            stream(c.text, options, 61);
        }
    });

    test('a closed fence is reused while later text streams; the growing one is new', () => {
        const compiler = new UiCompiler({ id: 'r' });
        const [a] = compiler.compile('```ui\n<Tag>a</Tag>\n```\n');
        const [a2, b] = compiler.compile('```ui\n<Tag>a</Tag>\n```\n```ui\n<Tag>b');
        assert.equal(a2, a);
        assert.equal(b.complete, false);
        assert.deepEqual(compiler.changed, ['r:ui:23']);
        const [a3, b2] = compiler.compile('```ui\n<Tag>a</Tag>\n```\n```ui\n<Tag>b</Tag>');
        assert.equal(a3, a);
        assert.notEqual(b2, b);
        assert.deepEqual(compiler.changed, ['r:ui:23']);
    });

    test('a changed latestAttachment recompiles the fence', () => {
        const text = '```ui\n<Image generated="latest"/>\n```\n';
        const compiler = new UiCompiler({ id: 'r' });
        const [first] = compiler.compile(text, { latestAttachment: 'one' });
        assert.equal(compiler.compile(text, { latestAttachment: 'one' })[0], first);
        assert.deepEqual(compiler.changed, []);
        const [second] = compiler.compile(text, { latestAttachment: 'two' });
        assert.notEqual(second, first);
        assert.equal(second.nodes[0].props.attachment, 'two');
        assert.deepEqual(compiler.changed, ['r:ui:0']);
    });

    test('clear() forgets: every block is made anew', () => {
        const text = '```ui\n<Tag>a</Tag>\n```\n';
        const compiler = new UiCompiler({ id: 'r' });
        const [first] = compiler.compile(text);
        assert.equal(compiler.compile(text)[0], first);
        compiler.clear();
        assert.deepEqual(compiler.changed, []);
        const [again] = compiler.compile(text);
        assert.notEqual(again, first);
        assert.deepEqual(again, first);
        assert.deepEqual(compiler.changed, ['r:ui:0']);
    });

    test('after a final compile the compiler starts afresh', () => {
        const text = '```ui\n<Tag>a</Tag>\n```\n';
        const compiler = new UiCompiler({ id: 'r' });
        const [final] = compiler.compile(text, { final: true });
        const [next] = compiler.compile(text);
        assert.notEqual(next, final);
        assert.deepEqual(compiler.changed, ['r:ui:0']);
    });

    test('free() and an update of null', () => {
        const compiler = new UiCompiler({ id: 'r' });
        assert.deepEqual(compiler.compile('```ui\n<Tag>a', null).map((b) => b.complete), [false]);
        compiler.free();
    });
});

// ---------------------------------------------------------------------------------------
// evaluateUiBlock.

describe('evaluateUiBlock', () => {
    const VIEW_KEYS = ['bindings', 'children', 'complete', 'fallback', 'id', 'props', 'type'];
    const OPTIONAL_KEYS = new Set(['action', 'error', 'sourceId']);

    test('view nodes are plain and carry only the view keys', () => {
        const view = evaluateUiBlock(page());
        assert.deepEqual(Object.keys(view).sort(), ['diagnostics', 'nodes']);
        for (const node of walk(view.nodes)) {
            const keys = Object.keys(node);
            assert.deepEqual(keys.filter((k) => !OPTIONAL_KEYS.has(k)).sort(), VIEW_KEYS, node.id);
            if ('action' in node) assert.equal(node.action, true);
            if ('sourceId' in node) assert.notEqual(node.sourceId, node.id);
        }
    });

    test('bindings map each bound prop to its value; buttons have action: true', () => {
        const block = page();
        const state = new UiState(block);
        state.set('$n', 7);
        const view = evaluateUiBlock(block, state);
        const slider = find(view.nodes, (n) => n.type === 'Slider');
        assert.deepEqual(slider.bindings, { value: 7 });
        assert.equal(slider.props.value, 7);
        assert.equal(slider.id, idOf(PAGE, 'p', '<Slider'));
        assert.deepEqual(find(view.nodes, (n) => n.type === 'Segmented').bindings, { value: 'a' });
        const buttons = walk(view.nodes).filter((n) => n.type === 'Button');
        assert.deepEqual(buttons.map((b) => [label(b), b.action, b.props.disabled]), [
            ['To B', true, undefined], ['Reset', true, true], ['Reset n', true, undefined]
        ]);
        assert.ok(walk(view.nodes).filter((n) => n.action).every((n) => n.type === 'Button'));
        assert.deepEqual(view.diagnostics, []);
    });

    test('Each repeats its children with :i ids and their compiled sourceId', () => {
        const view = evaluateUiBlock(page());
        const tag = idOf(PAGE, 'p', '<Tag>{item}');
        const text = idOf(PAGE, 'p', '{item}');
        const tags = view.nodes.filter((n) => n.sourceId === tag);
        assert.deepEqual(tags.map((t) => [t.id, t.type, label(t)]), [
            [`${tag}:0`, 'Tag', 'x'], [`${tag}:1`, 'Tag', 'y'], [`${tag}:2`, 'Tag', 'z']
        ]);
        assert.deepEqual(tags.map((t) => [t.children[0].id, t.children[0].sourceId]), [
            [`${text}:0`, text], [`${text}:1`, text], [`${text}:2`, text]
        ]);
        assert.ok(!view.nodes.some((n) => n.type === 'Each'), 'Each itself is not drawn');
    });

    test('Show draws its children only while its condition holds', () => {
        const block = page();
        const state = new UiState(block);
        const shown = () => walk(evaluateUiBlock(block, state).nodes).filter((n) => label(n) === 'shown').length;
        assert.equal(shown(), 0);
        state.set('$on', true);
        assert.equal(shown(), 1);
        assert.ok(!walk(evaluateUiBlock(block, state).nodes).some((n) => n.type === 'Show'));
    });

    test('a failing node carries its error and a diagnostic', () => {
        const block = compileUiBlock('<Tag>{1 + "a" - 1}</Tag><Tag>ok</Tag>', { id: 'b', final: true });
        const view = evaluateUiBlock(block);
        assert.equal(view.nodes[1].error, undefined);
        const failed = walk(view.nodes).filter((n) => n.error);
        assert.deepEqual(failed.map((n) => n.error), ['invalid_value']);
        assert.deepEqual(view.diagnostics.map((d) => [d.code, d.nodeId]), [['invalid_value', failed[0].id]]);
    });

    test('limits: a node budget stops the view; a bad limit is invalid_limits', () => {
        const view = evaluateUiBlock(page(), undefined, { nodes: 2 });
        assert.ok(view.diagnostics.some((d) => d.code === 'budget_exceeded'));
        fails(() => evaluateUiBlock(page(), undefined, { nodes: 0 }), 'invalid_limits');
        fails(() => evaluateUiBlock(page(), undefined, { steps: -5 }), 'invalid_limits');
    });

    test('a block read back from its JSON evaluates as the original', () => {
        const block = page();
        assert.deepEqual(evaluateUiBlock(structuredClone(block)), evaluateUiBlock(block));
        assert.deepEqual(evaluateUiBlock(JSON.parse(JSON.stringify(block))), evaluateUiBlock(block));
    });

    const NOT_BLOCKS = [
        ['undefined', undefined, 'invalid_block'], ['null', null, 'invalid_block'], ['text', 'block', 'invalid_block'],
        ['a record without the fields', { id: 'x' }, 'invalid_value'],
        ['a cyclic record', (() => { const c = { id: 'x' }; c.self = c; return c; })(), 'invalid_value'],
        ['a record holding a bigint', { id: 1n }, 'invalid_value']
    ];
    for (const [name, block, code] of NOT_BLOCKS) {
        test(`a block that is ${name} is ${code}`, () => {
            fails(() => evaluateUiBlock(block), code, name);
        });
    }

    test('a state that is no UiState is invalid_value', () => {
        fails(() => evaluateUiBlock(page(), {}), 'invalid_value');
        fails(() => evaluateUiBlock(page(), null), 'invalid_value');
    });
});

// ---------------------------------------------------------------------------------------
// UiState.

describe('UiState', () => {
    test('set, scope, values, snapshot and listeners', () => {
        const block = page();
        const state = new UiState(block);
        assert.equal(state.block, block);
        assert.equal(state.snapshot(), 0);
        assert.deepEqual(state.scope(), block.defaults);
        const calls = [];
        const stop = state.subscribe(() => calls.push(state.snapshot()));
        state.set('$n', 4);
        state.set('$n', 4);
        state.set('$mode', 'b');
        assert.deepEqual(calls, [1, 2, 3], 'every set notifies, even one that changes nothing');
        assert.deepEqual(state.values(), { ...block.defaults, $n: 4, $mode: 'b' });
        stop();
        state.set('$n', 5);
        assert.deepEqual(calls, [1, 2, 3], 'an unsubscribed listener is not called');
        assert.equal(state.snapshot(), 4);
        stop();
        fails(() => state.subscribe('not a function'), 'invalid_value');
    });

    test('values are copied in and out', () => {
        const state = new UiState(page());
        const tags = ['p'];
        state.set('$tags', tags);
        tags.push('q');
        assert.deepEqual(state.scope().$tags, ['p']);
        state.scope().$tags.push('z');
        assert.deepEqual(state.scope().$tags, ['p']);
    });

    test('odd but plain values: -0, huge numbers, null-prototype records, unicode', () => {
        const block = compileUiBlock('$r = {}\n$n = 0\n$s = ""', { id: 'b', final: true });
        const state = new UiState(block);
        state.set('$n', -0);
        assert.ok(Object.is(state.scope().$n, 0) || Object.is(state.scope().$n, -0));
        state.set('$n', 1e308);
        assert.equal(state.scope().$n, 1e308);
        const bare = Object.create(null);
        bare.a = [1, { b: null }];
        state.set('$r', bare);
        assert.deepEqual(state.scope().$r, { a: [1, { b: null }] });
        state.set('$s', 'é🐇\u0000\n');
        assert.equal(state.scope().$s, 'é🐇\u0000\n');
        state.set('$s', '\ud800');
        assert.equal(state.scope().$s, '\ufffd', 'half a surrogate pair reads as U+FFFD');
    });

    test('undefined is no value, not even for a null default', () => {
        const state = new UiState(compileUiBlock('$x = null\n$r = {}', { id: 'b', final: true }));
        fails(() => state.set('$x', undefined), 'invalid_value');
        fails(() => state.set('$r', { a: undefined }), 'invalid_value');
        fails(() => state.set('$r', { toJSON: () => ({}) }), 'invalid_value', 'a toJSON function');
        state.set('$x', null);
        assert.deepEqual(state.scope(), { $x: null, $r: {} });
    });

    const cyclic = () => { const c = { a: 1 }; c.self = c; return c; };
    const nested = (depth) => { let v = 1; for (let i = 0; i < depth; i++) v = [v]; return v; };
    class Point { constructor() { this.x = 1; } }
    const BAD_SETS = [
        ['an undeclared name', '$nope', 1, 'refused_binding'],
        ['a number into text', '$mode', 5, 'invalid_value'],
        ['null into a number', '$n', null, 'invalid_value'],
        ['an array into a record-less number', '$n', [1], 'invalid_value'],
        ['NaN', '$n', NaN, 'invalid_value'],
        ['Infinity', '$n', Infinity, 'invalid_value'],
        ['undefined', '$n', undefined, 'invalid_value'],
        ['undefined inside an array', '$tags', [undefined], 'invalid_value'],
        ['a function', '$n', () => 1, 'invalid_value'],
        ['a Date', '$mode', new Date(0), 'invalid_value'],
        ['a Map', '$tags', new Map(), 'invalid_value'],
        ['a class instance', '$tags', [new Point()], 'invalid_value'],
        ['a bigint', '$n', 1n, 'invalid_value'],
        ['a symbol', '$mode', Symbol('s'), 'invalid_value'],
        ['a cyclic record', '$tags', [cyclic()], 'invalid_value'],
        ['a cyclic array', '$tags', (() => { const a = []; a.push(a); return a; })(), 'invalid_value'],
        ['a getter', '$tags', [{ get x() { throw new Error('read'); } }], 'refused_access'],
        ['a sparse array', '$tags', [1, , 2], 'refused_access'], // eslint-disable-line no-sparse-arrays
        ['a __proto__ key', '$tags', [JSON.parse('{"__proto__": 1}')], 'refused_access'],
        ['a constructor key', '$tags', [{ constructor: 1 }], 'refused_access'],
        ['a value nested past the depth budget', '$tags', nested(40), 'budget_exceeded'],
        ['more items than the iteration budget', '$tags', Array.from({ length: 2001 }, (_, i) => i), 'budget_exceeded'],
        ['text past the string budget', '$mode', 'x'.repeat(16385), 'budget_exceeded']
    ];
    for (const [name, variable, value, code] of BAD_SETS) {
        test(`set: ${name} is ${code}, and changes nothing`, () => {
            const state = new UiState(page());
            let calls = 0;
            state.subscribe(() => { calls += 1; });
            const before = state.scope();
            fails(() => state.set(variable, value), code, name);
            assert.deepEqual(state.scope(), before);
            assert.equal(state.snapshot(), 0);
            assert.equal(calls, 0);
        });
    }

    test('the limits of the state are its copy budget', () => {
        const block = compileUiBlock('$tags = ["a"]', { id: 'b', final: true });
        const state = new UiState(block, { iterations: 3 });
        state.set('$tags', ['a', 'b', 'c']);
        fails(() => state.set('$tags', ['a', 'b', 'c', 'd']), 'budget_exceeded');
        fails(() => new UiState(block, { iterations: 0 }), 'invalid_limits');
        fails(() => new UiState(block, { stringLength: 1.5 }), 'invalid_limits');
        fails(() => new UiState(page(), { iterations: 3 }), 'budget_exceeded', 'defaults larger than the budget');
    });

    test('setQuery stores a reading of a declared query of this block', () => {
        const source = '$branch = "main"\n$runs = @Query("ci.runs", {branch: $branch})\n<Table rows={$runs}><Column key="name"/></Table>';
        const block = compileUiBlock(source, { id: 'b', final: true, querySchemas });
        const state = new UiState(block);
        let calls = 0;
        state.subscribe(() => { calls += 1; });
        assert.equal(evaluateUiBlock(block, state).nodes[0].error, 'refused_access', 'no reading yet');
        state.setQuery('$runs', [{ name: 'one' }], block);
        assert.deepEqual(state.scope().$runs, [{ name: 'one' }]);
        assert.deepEqual(evaluateUiBlock(block, state).nodes[0].props.rows, [{ name: 'one' }]);
        assert.equal(calls, 1);
        fails(() => state.setQuery('$branch', [], block), 'refused_query', 'a variable');
        fails(() => state.setQuery('$nope', [], block), 'refused_query', 'an undeclared name');
        const other = compileUiBlock(source, { id: 'other', final: true, querySchemas });
        fails(() => state.setQuery('$runs', [], other), 'refused_query', 'another block');
        fails(() => state.setQuery('$runs', NaN, block), 'invalid_value', 'NaN');
        fails(() => state.set('$runs', []), 'refused_binding', 'set of a query');
        assert.equal(calls, 1);
    });

    test('run: actions as source text', () => {
        const state = new UiState(page());
        state.run('@Set($n, $n + 2)');
        assert.equal(state.scope().$n, 3);
        state.run('@Set($mode, "b")');
        state.run('@Reset($n)');
        assert.deepEqual([state.scope().$n, state.scope().$mode], [1, 'b']);
        state.run('@Reset()');
        assert.deepEqual(state.scope(), page().defaults);
        assert.equal(state.snapshot(), 4);
    });

    const BAD_RUNS = [
        ['a helper that is no action', '@Count($items)', 'refused_action'],
        ['a wrong arity', '@Set($n)', 'refused_action'],
        ['an undeclared target', '@Set($nope, 1)', 'refused_binding'],
        ['a target that is no reference', '@Set("n", 1)', 'refused_binding'],
        ['a wrong kind', '@Set($n, "x")', 'invalid_value'],
        ['an unknown helper', '@Launch()', 'refused_call'],
        ['broken syntax', '@Set($n,', 'invalid_expression'],
        ['a tree that is no expression', { kind: 'rocket' }, 'refused_action'],
        ['a call whose arguments are no list', { kind: 'call', name: 'Set', args: 5 }, 'refused_action'],
        ['null', null, 'refused_action'],
        ['a tree that is no action', { kind: 'literal', value: 1 }, 'refused_action'],
        ['a cyclic tree', (() => { const c = { kind: 'call', name: 'Reset' }; c.args = [c]; return c; })(), 'invalid_value'],
        ['no action at all', undefined, 'invalid_value']
    ];
    for (const [name, action, code] of BAD_RUNS) {
        test(`run: ${name} is ${code}`, () => {
            const state = new UiState(page());
            fails(() => state.run(action), code, name);
            assert.equal(state.snapshot(), 0);
        });
    }

    test('run: a Button\'s action tree', () => {
        const block = page();
        const state = new UiState(block);
        const toB = find(block.nodes, (n) => n.type === 'Button');
        state.run(toB.expressions.action);
        assert.equal(state.scope().$mode, 'b');
        state.run(structuredClone(find(block.nodes, (n) => n.id === idOf(PAGE, 'p', '<Button action={@Reset()}')).expressions.action));
        assert.equal(state.scope().$mode, 'a');
    });

    test('press runs the action of a node on screen, unless it is disabled', () => {
        const block = page();
        const state = new UiState(block);
        const calls = [];
        state.subscribe(() => calls.push(state.snapshot()));
        const view = evaluateUiBlock(block, state);
        const [toB, reset, resetN] = walk(view.nodes).filter((n) => n.type === 'Button').map((n) => n.id);
        assert.equal(state.press(toB), true);
        assert.equal(state.scope().$mode, 'b');
        assert.equal(state.press(reset), false, 'a disabled button does nothing');
        assert.equal(state.scope().$mode, 'b');
        state.set('$n', 9);
        assert.equal(state.press(resetN), true, 'a press after an edit sees the edited view');
        assert.equal(state.scope().$n, 1);
        assert.deepEqual(calls, [1, 2, 3]);
        fails(() => state.press(idOf(PAGE, 'p', '<Slider')), 'refused_action', 'a node without an action');
        fails(() => state.press('p:99999'), 'refused_binding', 'a node that is not on screen');
        assert.equal(state.snapshot(), 3);
    });

    test('press of an incomplete Button does nothing', () => {
        const block = compileUiBlock('$n = 1\n<Button action={@Set($n, 2)}>Two', { id: 'b' });
        const state = new UiState(block);
        const [button] = evaluateUiBlock(block, state).nodes;
        assert.equal(button.complete, false);
        assert.equal(state.press(button.id), false);
        assert.equal(state.scope().$n, 1);
    });

    test('change sets a bound variable when the control takes the value', () => {
        const block = page();
        const state = new UiState(block);
        const view = evaluateUiBlock(block, state);
        const id = (type) => find(view.nodes, (n) => n.type === type).id;
        assert.equal(state.change(id('Switch'), 'value', true), true);
        assert.equal(state.change(id('Slider'), 'value', 10), true);
        assert.equal(state.change(id('Slider'), 'value', 11), false, 'past max');
        assert.equal(state.change(id('Switch'), 'value', 'yes'), false, 'not a boolean');
        assert.equal(state.change(id('Checklist'), 'value', ['p']), true);
        assert.equal(state.change(id('Segmented'), 'value', 'b'), true);
        assert.deepEqual(state.values(), { $n: 10, $mode: 'b', $on: true, $tags: ['p'], $items: ['x', 'y', 'z'] });
        assert.equal(state.snapshot(), 4);
        fails(() => state.change(id('Segmented'), 'value', 5), 'invalid_value', 'a number into text');
        fails(() => state.change(id('Slider'), 'min', 1), 'refused_binding', 'a prop that is not bound');
        fails(() => state.change('p:99999', 'value', 1), 'refused_binding', 'a node not on screen');
        fails(() => state.change(id('Slider'), 'value', NaN), 'invalid_value', 'NaN');
        assert.equal(state.snapshot(), 4);
    });

    test('sync follows a recompiled block and keeps edits of unchanged defaults', () => {
        const before = compileUiBlock('$a = 1\n$b = "x"\n$d = true\n<Tag>{$a}</Tag>', { id: 'b', final: true });
        const state = new UiState(before);
        state.set('$a', 10);
        state.set('$b', 'edited');
        state.set('$d', false);
        let calls = 0;
        state.subscribe(() => { calls += 1; });
        const after = compileUiBlock('$a = 1\n$b = "y"\n$c = [1]\n<Tag>{$a} {$b}</Tag>', { id: 'b', final: true });
        state.sync(after);
        assert.equal(state.block, after);
        assert.deepEqual(state.values(), { $a: 10, $b: 'y', $c: [1] });
        assert.equal(calls, 0, 'sync does not notify');
        assert.equal(state.snapshot(), 3, 'nor bump the revision');
        assert.deepEqual(evaluateUiBlock(after, state).nodes[0].children.map((n) => n.props.text), ['10', ' ', 'y']);
        state.sync(compileUiBlock('$a = 1\n<Tag>{$a}</Tag>', { id: 'another', final: true }));
        assert.deepEqual(state.values(), { $a: 1 }, 'another block id starts afresh');
    });

    test('sync drops the reading of a query whose definition changed', () => {
        const compile = (limit) => compileUiBlock(`$runs = @Query("ci.runs", {branch: "main", limit: ${limit}})\n<Tag>x</Tag>`, { id: 'b', final: true, querySchemas });
        const state = new UiState(compile(5));
        state.setQuery('$runs', [1], compile(5));
        state.sync(compile(5));
        assert.deepEqual(state.scope(), { $runs: [1] });
        state.sync(compile(6));
        assert.deepEqual(state.scope(), {});
    });

    test('reset puts every variable back to its default and notifies', () => {
        const block = page();
        const state = new UiState(block);
        state.set('$n', 3);
        let calls = 0;
        state.subscribe(() => { calls += 1; });
        state.reset();
        assert.deepEqual(state.values(), block.defaults);
        assert.equal(calls, 1);
        assert.equal(state.snapshot(), 2);
        state.free();
    });
});

// ---------------------------------------------------------------------------------------
// The host's checks.

describe('inputs, validation, arguments, links and choices', () => {
    test('uiInputValues: bound variables and button targets, visible or not', () => {
        const block = page();
        const state = new UiState(block);
        state.set('$n', 2);
        assert.deepEqual(uiInputValues(block, state), { $on: false, $n: 2, $mode: 'a', $tags: [] });
        fails(() => uiInputValues(block, {}), 'invalid_value');
    });

    test('uiValidatedState: input a person could have set', () => {
        const block = page();
        const state = uiValidatedState(block, { $mode: 'b', $n: 4, $on: true });
        assert.ok(state instanceof UiState);
        assert.deepEqual(state.values(), { ...block.defaults, $mode: 'b', $n: 4, $on: true });
        state.set('$n', 5);
        assert.equal(state.scope().$n, 5);
        assert.deepEqual(uiValidatedState(block).values(), block.defaults);
    });

    const BAD_INPUT = [
        ['a value no control offers', { $mode: 'c' }, 'invalid_value'],
        ['a slider value past max', { $n: 11 }, 'invalid_value'],
        ['a name that is no input', { $items: [] }, 'refused_binding'],
        ['an undeclared name', { $nope: 1 }, 'refused_binding'],
        ['a wrong kind', { $on: 'yes' }, 'invalid_value'],
        ['NaN', { $n: NaN }, 'invalid_value'],
        ['a function', { $n: () => 1 }, 'invalid_value']
    ];
    for (const [name, input, code] of BAD_INPUT) {
        test(`uiValidatedState: ${name} is ${code}`, () => {
            fails(() => uiValidatedState(page(), input), code, name);
        });
    }

    test('uiValidatedState refuses an incomplete block', () => {
        fails(() => uiValidatedState(compileUiBlock(PAGE, { id: 'p' })), 'invalid_block');
    });

    const QUERY_BLOCK = [
        '$branch = "main"', '$limit = 5',
        '$runs = @Query("ci.runs", {branch: $branch, limit: $limit})',
        '$fixed = @Query("ci.jobs", {pipeline: 7})',
        '<Segmented value={$branch}><Option value="main">main</Option><Option value="next">next</Option></Segmented>',
        '<Slider value={$limit} min={1} max={50}>Runs</Slider>',
        '<Table rows={$runs}><Column key="name"/></Table>'
    ].join('\n');
    const queryBlock = () => compileUiBlock(QUERY_BLOCK, { id: 'q', final: true, querySchemas });

    test('uiQueryArguments: the arguments with the validated input', () => {
        const block = queryBlock();
        assert.deepEqual(uiQueryArguments(block, '$runs'), { branch: 'main', limit: 5 });
        assert.deepEqual(uiQueryArguments(block, '$runs', { $branch: 'next', $limit: 9 }), { branch: 'next', limit: 9 });
        assert.deepEqual(uiQueryArguments(block, '$fixed', { $branch: 'next' }), { pipeline: 7 });
        fails(() => uiQueryArguments(block, '$nope'), 'invalid_query', 'an unknown query');
        fails(() => uiQueryArguments(block, '$branch'), 'invalid_query', 'a variable');
        fails(() => uiQueryArguments(block, '$runs', { $branch: 'elsewhere' }), 'invalid_value', 'a value not offered');
        fails(() => uiQueryArguments(block, '$runs', {}, { steps: 0 }), 'invalid_limits', 'a bad limit');
    });

    test('uiQueryFallback: the block as text with its readings', () => {
        const block = queryBlock();
        const text = uiQueryFallback(block, { $runs: [{ name: 'run 42' }] });
        assert.match(text, /run 42/);
        assert.doesNotMatch(uiQueryFallback(block, {}), /run 42/);
        fails(() => uiQueryFallback(block, { $runs: NaN }), 'invalid_value');
    });

    test('uiLinkTargets: the targets of the link nodes on screen', () => {
        const source = [
            '$show = false',
            '<File path="src/main.rs" line={12}/>', '<Diff path="README.md"/>', '<Commit sha="abc1234"/>',
            '<Node id="job-7"/>', '<Commit sha="not a sha"/>',
            '<Show when={$show}><File path="hidden.rs"/></Show>',
            '<Switch value={$show}>Show</Switch>'
        ].join('\n');
        const block = compileUiBlock(source, { id: 'l', final: true });
        const at = (tag) => idOf(source, 'l', tag);
        assert.deepEqual(uiLinkTargets(block), {
            [at('<File path="src')]: { type: 'File', path: 'src/main.rs', line: 12 },
            [at('<Diff')]: { type: 'Diff', path: 'README.md' },
            [at('<Commit sha="abc')]: { type: 'Commit', sha: 'abc1234' },
            [at('<Node')]: { type: 'Node', id: 'job-7' }
        });
        assert.deepEqual(uiLinkTargets(block, { $show: true })[at('<File path="hidden')], { type: 'File', path: 'hidden.rs' });
        fails(() => uiLinkTargets(block, { $nope: 1 }), 'refused_binding');
    });

    test('resolveUiChoice: label, context and values of a visible choice', () => {
        const block = page();
        const go = idOf(PAGE, 'p', '<Choice context');
        assert.deepEqual(resolveUiChoice(block, go), {
            label: 'Go now', context: 'Mode a', values: { $on: false, $n: 1, $mode: 'a', $tags: [] }
        });
        assert.deepEqual(resolveUiChoice(block, go, { $mode: 'b' }).context, 'Mode b');
        fails(() => resolveUiChoice(block, idOf(PAGE, 'p', '<Choice>Hidden')), 'refused_choice', 'a hidden choice');
        fails(() => resolveUiChoice(block, 'p:99999'), 'refused_choice', 'no such choice');
        fails(() => resolveUiChoice(block, idOf(PAGE, 'p', '<Tag>shown')), 'refused_choice', 'a node that is no choice');
        fails(() => resolveUiChoice(compileUiBlock(PAGE, { id: 'p' }), go), 'refused_choice', 'an incomplete block');
        fails(() => resolveUiChoice(block, go, { $mode: 'zzz' }), 'invalid_value', 'a value not offered');
        fails(() => resolveUiChoice(block, go, { $items: [] }), 'refused_binding', 'a name that is no input');
    });
});

// ---------------------------------------------------------------------------------------
// The corpus through the package, as the driver runs it (driver.md: evaluate, links, args,
// choice, fallback), for the default section and the scenario.

/** What a failure answers in a driver section: its code (messages are not compared). */
function outcome(work, ok) {
    try {
        return ok(work());
    } catch (error) {
        if (!(error instanceof UiFailure)) throw error;
        return { error: { code: error.code } };
    }
}

/** The state a page builds (driver.md, evaluate): readings, input, then each press. */
function pageState(block, scenario) {
    const state = new UiState(block, FROZEN);
    const applied = [];
    for (const [name, value] of Object.entries(scenario.queries ?? {})) {
        if (!(name in block.queries)) continue;
        const failed = outcome(() => state.setQuery(name, value, block), () => null);
        if (failed) applied.push({ setQuery: name, ...failed });
    }
    for (const [name, value] of Object.entries(scenario.input ?? {})) {
        if (!(name in block.defaults)) continue;
        const failed = outcome(() => state.set(name, value), () => null);
        if (failed) applied.push({ set: name, ...failed });
    }
    for (const press of scenario.press ?? []) {
        if (typeof press === 'string' && !press.startsWith(`${block.id}:`)) continue;
        const view = walk(evaluateUiBlock(block, state, FROZEN).nodes);
        const echo = typeof press === 'string' ? press : `action#${press.action}`;
        const node = typeof press === 'string'
            ? view.find((n) => n.id === press)
            : view.filter((n) => n.action)[press.action];
        if (!node) applied.push({ press: echo, error: { code: 'driver:no_node' } });
        else if (!node.action) applied.push({ press: echo, error: { code: 'driver:no_action' } });
        else {
            state.press(node.id);
            applied.push({ press: echo, node: node.id, ok: true });
        }
    }
    return { state, applied };
}

function sections(text, blocks, scenario) {
    const readings = (block) => Object.fromEntries(Object.entries(scenario.queries ?? {}).filter(([name]) => name in block.queries));
    const input = scenario.input ?? {};
    const evaluate = blocks.map((block, index) => {
        const { state, applied } = pageState(block, scenario);
        const view = evaluateUiBlock(block, state, FROZEN);
        const entry = { index, id: block.id, nodes: view.nodes, diagnostics: view.diagnostics, scope: state.scope(), inputValues: uiInputValues(block, state) };
        if (applied.length) entry.applied = applied;
        return entry;
    });
    const links = blocks.map((block, index) => ({
        index, id: block.id, ...outcome(() => uiLinkTargets(block, input, readings(block), FROZEN), (targets) => ({ targets }))
    }));
    const args = blocks.map((block, index) => ({
        index, id: block.id,
        args: Object.fromEntries(Object.keys(block.queries).map((name) =>
            [name, outcome(() => uiQueryArguments(block, name, input, FROZEN), (value) => ({ value }))])),
        validated: outcome(() => uiValidatedState(block, input, {}, FROZEN).scope(), (scope) => ({ scope }))
    }));
    const choice = blocks.map((block, index) => {
        const { state } = pageState(block, scenario);
        const sent = scenario.press?.length ? uiInputValues(block, state) : input;
        const ids = walk(evaluateUiBlock(block, state, FROZEN).nodes).filter((n) => n.type === 'Choice' && !n.error).map((n) => n.id);
        return {
            index, id: block.id,
            choices: ids.map((id) => ({ id, ...outcome(() => resolveUiChoice(block, id, sent, readings(block), FROZEN), (selection) => ({ selection })) }))
        };
    });
    const fallback = {
        fallbackText: uiFallbackText(text, blocks),
        blocks: blocks.map((block, index) => {
            const entry = { index, id: block.id, fallback: block.fallback };
            if (Object.keys(block.queries).length) {
                try {
                    entry.queryFallback = uiQueryFallback(block, readings(block));
                } catch (error) {
                    if (!(error instanceof UiFailure)) throw error;
                    entry.queryFallbackError = { code: error.code };
                }
            }
            return entry;
        })
    };
    return { evaluate, links, args, choice, fallback };
}

describe('the corpus through the package', () => {
    for (const c of corpus) {
        test(c.name, { timeout: 10_000 }, () => {
            const blocks = compileUi(c.text, c.options);
            const runs = [['default', {}, c.expected.default]];
            if (c.expected.scenario) runs.push(['scenario', c.input, c.expected.scenario]);
            for (const [section, scenario, expected] of runs) {
                const got = sections(c.text, blocks, scenario);
                assert.deepEqual(comparable(got.evaluate), comparable(expected.evaluate.blocks), `${c.name} ${section}: evaluate`);
                assert.deepEqual(comparable(got.links), comparable(expected.links.blocks), `${c.name} ${section}: links`);
                assert.deepEqual(comparable(got.args), comparable(expected.args.blocks), `${c.name} ${section}: args`);
                assert.deepEqual(comparable(got.choice), comparable(expected.choice.blocks), `${c.name} ${section}: choice`);
                assert.deepEqual(comparable(got.fallback), comparable({ fallbackText: expected.fallback.fallbackText, blocks: expected.fallback.blocks }), `${c.name} ${section}: fallback`);
            }
        });
    }
});

// ---------------------------------------------------------------------------------------
// Fallback text, cheap checks, the catalog, the driver.

describe('uiFallbackText', () => {
    const text = 'Before 😀\n```ui\n<Tag>a</Tag>\n```\nbetween\n```ui\n<Callout tone="info">b</Callout>\n```\nafter';
    test('each block is replaced by its fallback', () => {
        const blocks = compileUi(text, { id: 'r' });
        assert.equal(uiFallbackText(text, blocks), 'Before 😀\na\nbetween\nb\nafter');
        assert.equal(uiFallbackText(text, [...blocks].reverse()), 'Before 😀\na\nbetween\nb\nafter', 'order does not matter');
        assert.equal(uiFallbackText(text, [blocks[1]]), 'Before 😀\n```ui\n<Tag>a</Tag>\n```\nbetween\nb\nafter');
        assert.equal(uiFallbackText(text, []), text);
        assert.equal(uiFallbackText(text, new Set(blocks)), 'Before 😀\na\nbetween\nb\nafter', 'any iterable');
    });
    test('what is not a list of blocks is refused', () => {
        fails(() => uiFallbackText(text, null), 'invalid_value');
        fails(() => uiFallbackText(text, 5), 'invalid_value');
        fails(() => uiFallbackText(text, [null]), 'invalid_block');
    });
});

describe('uiHasFence and uiMayReferenceHost', () => {
    const FENCES = [
        ['```ui\n', undefined, true], ['  ```ui  \n', undefined, true], ['    ```ui\n', undefined, false],
        ['~~~ui\r\n', undefined, true], ['```UI\n', undefined, false], ['```ui extra\n', undefined, false],
        ['text ```ui\n', undefined, false], ['foo\r```ui\n', undefined, true], ['```\tui\t', undefined, true],
        ['```blocks\n', 'blocks', true], ['```ui\n', 'blocks', false], ['', undefined, false]
    ];
    for (const [text, word, expected] of FENCES) {
        test(`uiHasFence(${JSON.stringify(text)}, ${word}) is ${expected}`, () => {
            assert.equal(uiHasFence(text, word), expected);
        });
    }
    const HOSTS = [
        ['$r = @Query("x", {})', true], ['<File path="a"/>', true], ['<Diff path="a"/>', true],
        ['<Commit sha="abc1234"/>', true], ['<Node id="x"/>', true], ['<Nodes/>', false], ['<Tag>@query</Tag>', false],
        ['plain', false]
    ];
    for (const [text, expected] of HOSTS) {
        test(`uiMayReferenceHost(${JSON.stringify(text)}) is ${expected}`, () => {
            assert.equal(uiMayReferenceHost(text), expected);
        });
    }
});

describe('the catalog and its texts', () => {
    const NAMES = ['Summary', 'Callout', 'Tag', 'Progress', 'Steps', 'Step', 'Stats', 'Stat', 'EntityList', 'Entry',
        'Table', 'Column', 'Chart', 'Tabs', 'Tab', 'Sections', 'Section', 'CodeBlock', 'Image', 'Sources', 'Source',
        'File', 'Diff', 'Commit', 'Node', 'Checklist', 'Item', 'Switch', 'Slider', 'Segmented', 'Option', 'Button',
        'Show', 'Each', 'Choices', 'Choice'];

    test('uiCatalog: 36 components in order', () => {
        const catalog = uiCatalog();
        assert.equal(catalog.version, core.UI_CATALOG_VERSION);
        assert.deepEqual(catalog.components.map((c) => c.name), NAMES);
        const byName = Object.fromEntries(catalog.components.map((c) => [c.name, c]));
        assert.deepEqual(NAMES.filter((n) => byName[n].binding), ['Checklist', 'Switch', 'Slider', 'Segmented']);
        assert.deepEqual(NAMES.filter((n) => byName[n].action), ['Button']);
        assert.deepEqual(byName.Step.parent, 'Steps');
        for (const c of catalog.components) {
            assert.equal(typeof c.description, 'string');
            assert.ok(Array.isArray(c.props));
            for (const p of c.props) assert.equal(typeof p.required, 'boolean');
        }
    });

    test('uiCatalogText: one line per component', () => {
        const lines = uiCatalogText().split('\n');
        assert.equal(lines.length, 36);
        assert.deepEqual(lines.map((l) => l.slice(0, l.indexOf('('))), NAMES);
        assert.equal(lines[1], "Callout(tone, title?): Draws the reader's eye to a warning or remark.");
    });

    test('uiCompactCatalog: every component on one line', () => {
        const compact = uiCompactCatalog();
        assert.ok(!compact.includes('\n'));
        const parts = compact.split(' · ');
        assert.deepEqual(parts.map((p) => p.split(':')[0]), NAMES);
        assert.equal(parts[0], 'Summary: tone?,badge?');
        assert.equal(parts.at(-1), 'Choice: context?,primary?,disabled?');
        assert.ok(parts.includes('Choices'), 'a prop-less container has no colon');
    });

    test('uiSessionNote and uiReferenceText name the fence word', () => {
        for (const make of [uiSessionNote, uiReferenceText]) {
            const plain = make();
            assert.equal(make({}), plain);
            assert.equal(make(null), plain);
            assert.equal(make({ fenceLanguage: 'ui' }), plain);
            assert.match(plain, /```ui\n/);
            const hosted = make({ fenceLanguage: 'blocks' });
            assert.match(hosted, /```blocks\n/);
            assert.doesNotMatch(hosted, /```ui\n/);
        }
        assert.ok(uiSessionNote().includes(uiCompactCatalog()));
        assert.ok(uiReferenceText().length > uiSessionNote().length);
    });
});

describe('uiDriverAnswer', () => {
    const answer = (request) => JSON.parse(uiDriverAnswer(JSON.stringify(request)));

    test('compile answers the blocks compileUi gives (final, frozen clock)', () => {
        const c = corpusCase('ok-05-flaky-tests');
        const got = answer({ op: 'compile', tag: 't1', text: c.text, querySchemas });
        assert.equal(got.op, 'compile');
        assert.equal(got.tag, 't1');
        assert.equal(got.ok, true);
        assert.deepEqual(got.blocks, compileUi(c.text, { final: true, querySchemas, now: () => 0 }));
        assert.equal(got.fallbackText, c.expected.compile.fallbackText);
    });

    test('text answers the package\'s texts', () => {
        const got = answer({ op: 'text', text: '```ui\n<File path="a"/>', fenceLanguage: 'ui' });
        assert.deepEqual(
            [got.catalogText, got.compactCatalog, got.sessionNote, got.referenceText, got.hasFence, got.mayReferenceHost],
            [uiCatalogText(), uiCompactCatalog(), uiSessionNote(), uiReferenceText(), true, true]
        );
    });

    test('failures are answers, never throws', () => {
        assert.deepEqual(comparable(JSON.parse(uiDriverAnswer('{nope'))), { ok: false, error: { code: 'driver:bad_json' } });
        assert.deepEqual(comparable(answer({ op: 'fly' })), { op: 'fly', ok: false, error: { code: 'driver:unknown_op' } });
        assert.deepEqual(comparable(answer({ op: 'compile', limits: { steps: 0 } })), { op: 'compile', ok: false, error: { code: 'invalid_limits' } });
        assert.equal(uiDriverAnswer(''), '');
        assert.equal(uiDriverAnswer('  \t'), '');
    });
});
