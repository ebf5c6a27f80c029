#!/usr/bin/env node
// @uiblocks/core against the reference TypeScript package, side by side in one Node.js process,
// on the workloads of the shared benchmark set (the inputs in benches/data, described by the shared
// set's README, ../shared/bench/README.md beside the repository).
//
//   node packages/core/bench/bench.mjs [--runs 60] [--warmup 10] [--only stats100,streaming]
//                                      [--blocks] [--json-only]
//
// Environment:
//   UIBLOCKS_REFERENCE   the reference's module file (an ES module exporting the reference API:
//                        compileUi, compileUiBlock, UiCompiler, UiState, evaluateUiBlock), built
//                        outside the repository (README.md beside this file says how). Unset or
//                        empty: ours only. Nothing of the reference lives in this repo.
//   UIBLOCKS_BENCH_DATA  the directory of the inputs (*.txt.gz). Default: the repo copy
//                        benches/data, else ../shared/bench beside the repository.
//   UIBLOCKS_WASM        another build of the .wasm to load with the package's glue (an opt-level
//                        variant bound by the same wasm-bindgen); its sizes are the ones printed.
//
// Needs the built module (`cargo xtask wasm` writes packages/core/wasm/). See README.md beside this
// file for what each figure measures and what bounds it.
//
// Every workload is timed as `--warmup` untimed runs of each variant, then `--runs` rounds, each
// round timing every variant once in turn (ours through the public API, ours through the glue,
// ours inside WebAssembly only, the reference, …), so that the machine's load drifts over all of
// them alike (`--blocks`: each variant's runs one after another instead, caches warm for each).
// The figures are the median and the minimum of the rounds. Between rounds the event
// loop turns once (untimed), as it does between a page's compiles: that is when the glue's
// FinalizationRegistry frees the module-side copies of blocks that JavaScript dropped; a loop that
// never yields keeps every one of them and the module's heap grows without bound.

import { existsSync, readFileSync } from 'node:fs';
import { gunzipSync, gzipSync } from 'node:zlib';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { performance } from 'node:perf_hooks';
import os from 'node:os';

const PACKAGE = new URL('..', import.meta.url);
const WASM_FILE = process.env.UIBLOCKS_WASM ? pathToFileURL(process.env.UIBLOCKS_WASM) : new URL('wasm/uiblocks_core_bg.wasm', PACKAGE);
const GLUE_FILE = new URL('wasm/uiblocks_core.js', PACKAGE);
const API_FILE = new URL('src/index.js', PACKAGE);

// ---------------------------------------------------------------------------------------------
// Arguments.

const argv = process.argv.slice(2);
function option(name, fallback) {
    const i = argv.indexOf(name);
    return i === -1 ? fallback : argv[i + 1];
}
const RUNS = Number(option('--runs', 60));
const WARMUP = Number(option('--warmup', 10));
const ONLY = option('--only', null)?.split(',');
const JSON_ONLY = argv.includes('--json-only');
const BLOCKS = argv.includes('--blocks');
const say = JSON_ONLY ? () => {} : (line = '') => console.log(line);

// ---------------------------------------------------------------------------------------------
// The two packages.

if (!existsSync(WASM_FILE) || !existsSync(GLUE_FILE)) {
    console.error('packages/core/wasm/ is missing: run `cargo xtask wasm` first.');
    process.exit(2);
}
const ours = await import('../src/index.js');
ours.initSync(process.env.UIBLOCKS_WASM ? readFileSync(WASM_FILE) : undefined);
const glue = await import('../wasm/uiblocks_core.js');
/** The module's exports (the glue hands back the instance it already has). */
const exports = glue.initSync();

const referencePath = process.env.UIBLOCKS_REFERENCE ?? '';
let ref = null;
let referenceNote;
if (referencePath === '') {
    referenceNote = 'absent (UIBLOCKS_REFERENCE names no module): ours only';
} else if (!existsSync(referencePath)) {
    referenceNote = `absent (${referencePath} does not exist): ours only`;
} else {
    ref = await import(pathToFileURL(referencePath).href);
    referenceNote = referencePath;
}

// ---------------------------------------------------------------------------------------------
// Inputs.

const dataDirs = [
    process.env.UIBLOCKS_BENCH_DATA,
    fileURLToPath(new URL('../../../benches/data', import.meta.url)),
    fileURLToPath(new URL('../../../../shared/bench', import.meta.url))
].filter(Boolean);
const DATA = dataDirs.find((dir) => existsSync(`${dir}/stats100.txt.gz`));
if (!DATA) {
    console.error(`No inputs: none of ${dataDirs.join(', ')} holds stats100.txt.gz.`);
    process.exit(2);
}
const read = (name) => gunzipSync(readFileSync(`${DATA}/${name}.txt.gz`)).toString('utf8');
const texts = Object.fromEntries(
    ['prose2m', 'proseWithBlock', 'fences100k', 'stats100', 'table1000', 'streaming'].map((n) => [n, read(n)])
);

// ---------------------------------------------------------------------------------------------
// Options, the same for both packages.

/** The compile clock: frozen, as the corpus and the reference's figures run. */
const FROZEN = () => 0;
/** The texts as the package hands them to the module: UTF-8 bytes (see `utf8` in index.js). */
const BYTES = new TextEncoder();
/** One reused buffer, as the package's `utf8` keeps (index.js). */
let scratch = new Uint8Array(0);
/** `text` as the package hands it to the module: encoded into the reused buffer. */
function bytes(text) {
    const wanted = text.length + (text.length >> 1) + 16;
    if (wanted > scratch.length) scratch = new Uint8Array(Math.max(wanted, 2 * scratch.length));
    const { read, written } = BYTES.encodeInto(text, scratch);
    return read === text.length ? scratch.subarray(0, written) : BYTES.encode(text);
}
/** The texts encoded once, for the timers of the work inside WebAssembly alone. */
const WASM_TEXT = Object.fromEntries(Object.entries(texts).map(([name, text]) => [name, BYTES.encode(text)]));
/** The README's raised limits. */
const RAISED = Object.freeze({ characters: 2 ** 20, nodes: 2 ** 20, stringLength: 2 ** 20, steps: 2 ** 28, iterations: 2 ** 24 });
/** The same for evaluation, whose clock is always the real one: its time budget raised so it never fires. */
const RAISED_EVAL = Object.freeze({ ...RAISED, milliseconds: 2 ** 30 });
const STEP = 64;

const replyOptions = { id: 'reply', final: true, now: FROZEN };
const blockOptions = (limits) => ({ id: 'bench', final: true, ...(limits ? { limits } : {}), now: FROZEN });
/** What the package hands the glue for `options` (index.js's compileOptions: `now` apart, `final` read). */
const wire = ({ now, ...rest }) => JSON.stringify(rest);
/** The timers inside WebAssembly cannot take a JavaScript clock: the frozen clock by name. */
const wasmOptions = (options) => JSON.stringify({ ...JSON.parse(wire(options)), clock: 'frozen' });

// ---------------------------------------------------------------------------------------------
// Result summaries, compared between the packages before anything is timed.

/** Nodes in the trees of `roots`, every level counted. */
function treeSize(roots) {
    let size = 0;
    const pending = [...roots];
    while (pending.length) {
        const node = pending.pop();
        size += 1;
        if (node.children) pending.push(...node.children);
    }
    return size;
}
/** The codes of the diagnostics of `blocks`, in order. */
function diagnosticCodes(blocks) {
    const list = [];
    for (const block of blocks) for (const diagnostic of block.diagnostics) list.push(diagnostic.code);
    return list;
}
const blockSummary = (block) => ({ nodes: treeSize(block.nodes), codes: diagnosticCodes([block]) });
const replySummary = (blocks) => ({
    blocks: blocks.length,
    nodes: blocks.reduce((sum, block) => sum + treeSize(block.nodes), 0),
    codes: diagnosticCodes(blocks)
});
const fencesSummary = (blocks) => ({ blocks: blocks.length, lastCodes: blocks.length ? diagnosticCodes(blocks.slice(-1)) : undefined });
/** The first node of type `type` in document order. */
function firstOfType(roots, type) {
    const pending = [...roots].reverse();
    while (pending.length) {
        const node = pending.pop();
        if (node.type === type) return node;
        if (node.children) pending.push(...[...node.children].reverse());
    }
    return undefined;
}
const evaluationSummary = (view) => ({ rows: firstOfType(view.nodes, 'Table')?.props.rows?.length, diagnostics: diagnosticCodes([view]) });

// ---------------------------------------------------------------------------------------------
// Ours through the glue alone (no JSON.parse, no block objects): the answer's JSON text.

/** One compile through the glue: the JSON text of the answer; every handle freed. */
function glueCompile(compiled) {
    const json = compiled.takeJson();
    for (const handle of compiled.takeHandles()) handle.free();
    compiled.free();
    return json;
}

function glueStream(text, options) {
    const compiler = new glue.IncrementalCompiler(wire(options), options.now);
    const answers = [];
    for (let length = STEP; length < text.length; length += STEP) {
        answers.push(glueCompile(compiler.compile(bytes(text.slice(0, length)), false, undefined)));
    }
    answers.push(glueCompile(compiler.compile(bytes(text), true, undefined)));
    compiler.free();
    return answers;
}

// ---------------------------------------------------------------------------------------------
// The workloads.

/** The blocks of a stream's last answer: its final compile answers every block anew. */
const latest = (answers) => answers.at(-1);

/** Every `STEP`-unit prefix of `text`, then all of it: what a stream hands the compiler. */
function prefixes(text) {
    const list = [];
    for (let length = STEP; length < text.length; length += STEP) list.push(text.slice(0, length));
    list.push(text);
    return list;
}

/**
 * A block compiled inside WebAssembly for `__benchEvaluate` (its handle is not exposed by the API),
 * with the frozen clock like every compile here: with the real one, a slow compile on a loaded
 * machine can pass the 30 ms budget and leave a block with nothing to evaluate.
 */
function tableHandle() {
    const options = blockOptions(RAISED);
    const compiled = glue.compileBlock(BYTES.encode(texts.table1000), wire(options), options.now);
    const [handle] = compiled.takeHandles();
    compiled.free();
    return handle;
}

/**
 * `kind`: 'block' (the targets apply: ≥ 1× with marshalling, ≥ 3× inside WebAssembly) or 'reply'
 * (megabytes of text cross the boundary: reported with the cost of that copy).
 */
function workloads() {
    const oursTable = ours.compileUiBlock(texts.table1000, blockOptions(RAISED));
    const refTable = ref?.compileUiBlock(texts.table1000, blockOptions(RAISED));
    const evalHandle = tableHandle();
    const evalWire = JSON.stringify({ limits: RAISED_EVAL });

    const reply = (name, summary, bound) => ({
        name, kind: 'reply', input: name, bound,
        summary,
        ours: () => ours.compileUi(texts[name], replyOptions),
        glue: () => glueCompile(glue.compileReply(bytes(texts[name]), wire(replyOptions), FROZEN)),
        parse: (json) => JSON.parse(json),
        wasm: () => glue.__benchCompile(WASM_TEXT[name], wasmOptions(replyOptions), false, 1),
        ref: ref && (() => ref.compileUi(texts[name], replyOptions)),
        copy: [texts[name]]
    });
    const block = (name, input, limits, bound) => ({
        name, kind: 'block', input, bound,
        summary: blockSummary,
        ours: () => ours.compileUiBlock(texts[input], blockOptions(limits)),
        glue: () => glueCompile(glue.compileBlock(bytes(texts[input]), wire(blockOptions(limits)), FROZEN)),
        parse: (json) => JSON.parse(json),
        wasm: () => glue.__benchCompile(WASM_TEXT[input], wasmOptions(blockOptions(limits)), true, 1),
        ref: ref && (() => ref.compileUiBlock(texts[input], blockOptions(limits))),
        copy: [texts[input]]
    });

    return [
        reply('prose2m', replySummary,
            'the copy of 2,000,000 UTF-16 units into WebAssembly (UTF-8), its UTF-8 check and the fence scan inside; the answer is "[]"'),
        reply('proseWithBlock', replySummary,
            'the same copy and scan, plus one 38-node block compiled and returned as JSON'),
        reply('fences100k', fencesSummary,
            'the copy of 5.6 M units and their UTF-8 check; the scan stops at the reply cap (16 blocks)'),
        block('stats100', 'stats100', undefined,
            'the compile, then 103 nodes as JSON: written in Rust, decoded and JSON.parse\'d in JS'),
        block('table1000', 'table1000', undefined,
            'a compile the step budget stops early; the answer is the 50 KB body coming back as the fallback (54 KB of JSON)'),
        block('table1000Raised', 'table1000', RAISED,
            'the compile of the 1,000-row literal, then its copy as JSON (77 KB) to JS values'),
        {
            name: 'evaluateTable1000Raised', kind: 'block', input: 'table1000', bound:
                'a fresh state (copies the 1,000 rows), the @Filter over them, then the 192-row view as JSON (23 KB)',
            summary: evaluationSummary,
            ours: () => {
                const state = new ours.UiState(oursTable, RAISED_EVAL);
                const view = ours.evaluateUiBlock(oursTable, state, RAISED_EVAL);
                state.free();
                return view;
            },
            glue: () => {
                const state = new glue.StateHandle(evalHandle, evalWire);
                const json = state.evaluate(evalHandle, evalWire);
                state.free();
                return json;
            },
            parse: (json) => JSON.parse(json),
            wasm: () => glue.__benchEvaluate(evalHandle, evalWire, 1),
            ref: ref && (() => ref.evaluateUiBlock(refTable, new ref.UiState(refTable, RAISED_EVAL), RAISED_EVAL))
        },
        {
            name: 'streaming', kind: 'block', input: 'streaming', bound:
                '321 compiles of a growing prefix (up to 20 KB, copied in each time); the changed blocks (1.16 MB of JSON in all) written, decoded and parsed',
            summary: ({ compiles, blocks }) => ({ compiles, ...replySummary(blocks) }),
            ours: () => {
                const text = texts.streaming;
                const compiler = new ours.UiCompiler({ id: 'reply', now: FROZEN });
                let compiles = 0;
                for (let length = STEP; length < text.length; length += STEP) {
                    compiler.compile(text.slice(0, length));
                    compiles += 1;
                }
                const blocks = compiler.compile(text, { final: true });
                compiler.free();
                return { compiles: compiles + 1, blocks };
            },
            glue: () => glueStream(texts.streaming, { id: 'reply', now: FROZEN }),
            parse: (answers) => answers.map((json) => JSON.parse(json)),
            wasm: () => glue.__benchStream(texts.streaming, JSON.stringify({ id: 'reply', clock: 'frozen' }), STEP, 1),
            copy: prefixes(texts.streaming),
            ref: ref && (() => {
                const text = texts.streaming;
                const compiler = new ref.UiCompiler({ id: 'reply', now: FROZEN });
                let compiles = 0;
                for (let length = STEP; length < text.length; length += STEP) {
                    compiler.compile(text.slice(0, length));
                    compiles += 1;
                }
                const blocks = compiler.compile(text, { final: true });
                return { compiles: compiles + 1, blocks };
            })
        }
    ];
}

// ---------------------------------------------------------------------------------------------
// Timing.

/** Median, minimum and maximum of `samples` (ms). */
function stats(samples) {
    const s = Float64Array.from(samples).sort();
    const n = s.length;
    const median = n % 2 === 1 ? s[(n - 1) / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
    return { medianMs: round(median), minMs: round(s[0]), maxMs: round(s[n - 1]) };
}
const round = (x, digits = 4) => (x == null ? null : Number(x.toPrecision(digits)));

/** One turn of the event loop (finalizers run). */
const turn = () => new Promise((resolve) => setImmediate(resolve));

/** A variant timed from JavaScript: `run` is the timed unit. */
const wall = (run) => () => {
    const t0 = performance.now();
    run();
    return performance.now() - t0;
};

/**
 * Times every variant of `variants` ({name: () => ms}): `WARMUP` untimed runs of each, then
 * `RUNS` rounds timing each once in turn.
 */
async function timeRounds(variants) {
    const names = Object.keys(variants);
    for (const name of names) {
        for (let i = 0; i < WARMUP; i++) variants[name]();
        await turn();
    }
    const samples = Object.fromEntries(names.map((n) => [n, []]));
    if (BLOCKS) {
        for (const name of names) {
            for (let i = 0; i < RUNS; i++) {
                samples[name].push(variants[name]());
                await turn();
            }
        }
    } else {
        for (let i = 0; i < RUNS; i++) {
            for (const name of names) samples[name].push(variants[name]());
            await turn();
        }
    }
    return Object.fromEntries(names.map((n) => [n, stats(samples[n])]));
}

// ---------------------------------------------------------------------------------------------
// Sizes and the machine.

function sizeOf(url) {
    const bytes = readFileSync(url);
    return { raw: bytes.length, gzip9: gzipSync(bytes, { level: 9 }).length };
}
const sizes = { wasm: sizeOf(WASM_FILE), glue: sizeOf(GLUE_FILE), api: sizeOf(API_FILE) };
sizes.javascript = { raw: sizes.glue.raw + sizes.api.raw, gzip9: sizes.glue.gzip9 + sizes.api.gzip9 };
const LIMIT_WASM = 300 * 1024;
const LIMIT_JS = 20 * 1024;
const kib = (bytes) => (bytes / 1024).toFixed(1);

const loadBefore = os.loadavg();
const machine = {
    node: process.version,
    v8: process.versions.v8,
    cpu: `${os.cpus()[0]?.model ?? '?'} × ${os.cpus().length}`,
    platform: `${os.platform()} ${os.release()}`
};

// ---------------------------------------------------------------------------------------------
// The run.

const started = performance.now();
say('# @uiblocks/core against the reference, side by side in one Node.js process');
say();
say(`- Node ${machine.node} (V8 ${machine.v8}), ${machine.cpu}, ${machine.platform}`);
say(`- load average before: ${loadBefore.map((x) => x.toFixed(2)).join(' / ')} (1 / 5 / 15 min)`);
say(`- reference: ${referenceNote}`);
say(`- inputs: ${DATA}; ${RUNS} timed ${BLOCKS ? 'runs of each variant in turn' : 'rounds (every variant once per round)'} after ${WARMUP} warm-up runs of each variant; compile clock frozen (\`now: () => 0\`), evaluation's time budget raised`);
say();

const records = [];
for (const w of workloads()) {
    if (ONLY && !ONLY.includes(w.name)) continue;

    // The results first: both packages must answer the same, and the glue's answer must be ours.
    const summary = w.summary(w.ours());
    const refSummary = w.ref ? w.summary(w.ref()) : null;
    const same = refSummary ? JSON.stringify(summary) === JSON.stringify(refSummary) : null;
    if (same === false) {
        console.error(`${w.name}: the answers differ: ours ${JSON.stringify(summary)}, reference ${JSON.stringify(refSummary)}`);
    }
    const answer = w.glue();
    const parsed = w.parse(answer);
    const glueSummary = w.summary(Array.isArray(answer) ? { compiles: answer.length, blocks: latest(parsed) } : w.kind === 'reply' ? parsed : (Array.isArray(parsed) ? parsed[0] : parsed));
    if (JSON.stringify(glueSummary) !== JSON.stringify(summary)) {
        console.error(`${w.name}: the glue's answer differs from the API's: ${JSON.stringify(glueSummary)} against ${JSON.stringify(summary)}`);
    }
    const answerBytes = Array.isArray(answer) ? answer.reduce((n, s) => n + s.length, 0) : answer.length;

    const variants = {
        ours: wall(w.ours),
        glue: wall(w.glue),
        parse: wall(() => w.parse(answer)),
        wasm: () => w.wasm()
    };
    if (w.ref) variants.ref = wall(w.ref);
    if (w.copy !== undefined) {
        const strings = w.copy;
        const buffer = new Uint8Array(Math.max(...strings.map((s) => Buffer.byteLength(s))));
        const encoder = new TextEncoder();
        // What the package does to hand the text over (TextEncoder, the bytes copied in, the
        // UTF-8 check and the options read on the Rust side, the copy freed) with no compile
        // at all: __benchCompile with 0 iterations.
        variants.copyGlue = wall(() => {
            for (const s of strings) glue.__benchCompile(bytes(s), '', false, 0);
        });
        // The floor of any copy of the text as UTF-8: TextEncoder.encodeInto into a buffer of its size.
        variants.copyEncodeInto = wall(() => {
            for (const s of strings) encoder.encodeInto(s, buffer);
        });
    }
    const t = await timeRounds(variants);

    const ratio = (a, b) => (a && b ? round(a / b, 3) : null);
    const record = {
        workload: w.name,
        kind: w.kind,
        result: summary,
        sameAsReference: same,
        answerJsonChars: answerBytes,
        oursMs: t.ours,
        oursWasmMs: t.wasm,
        referenceMs: t.ref ?? null,
        ratio: t.ref ? {
            marshalled: ratio(t.ref.medianMs, t.ours.medianMs),
            wasm: ratio(t.ref.medianMs, t.wasm.medianMs),
            marshalledMin: ratio(t.ref.minMs, t.ours.minMs),
            wasmMin: ratio(t.ref.minMs, t.wasm.minMs)
        } : null,
        breakdownMs: {
            wasmWork: t.wasm.medianMs,
            glueCall: t.glue.medianMs,
            jsonParse: t.parse.medianMs,
            api: t.ours.medianMs
        },
        copyMs: t.copyGlue ? { glue: t.copyGlue, encodeInto: t.copyEncodeInto, units: w.copy.reduce((n, s) => n + s.length, 0) } : null,
        bound: w.bound,
        runs: RUNS,
        warmup: WARMUP
    };
    if (w.kind === 'block' && record.ratio) {
        record.targets = { marshalledAtLeast1: record.ratio.marshalled >= 1, wasmAtLeast3: record.ratio.wasm >= 3 };
    }
    records.push(record);
    if (JSON_ONLY) console.log(JSON.stringify(record));
    await turn();
}

const loadAfter = os.loadavg();
const seconds = (performance.now() - started) / 1000;

// ---------------------------------------------------------------------------------------------
// The report.

const ms = (s) => (s ? `${s.medianMs} / ${s.minMs}` : '–');
const x = (r) => (r == null ? '–' : `${r.toFixed(2)}×`);
say('## Times (ms, median / min)');
say();
say('| workload | result | ours, JS values | ours, inside wasm | reference | ref/ours, JS values | ref/ours, wasm | targets (≥1× / ≥3×) |');
say('| --- | --- | ---: | ---: | ---: | ---: | ---: | --- |');
for (const r of records) {
    const target = r.kind === 'reply'
        ? 'none (copy-bound, see below)'
        : r.targets ? `${r.targets.marshalledAtLeast1 ? 'met' : '**missed**'} / ${r.targets.wasmAtLeast3 ? 'met' : '**missed**'}` : '–';
    const result = Object.entries(r.result).map(([k, v]) => `${k} ${Array.isArray(v) ? (v.join(',') || '–') : v}`).join(', ');
    say(`| ${r.workload} | ${result}${r.sameAsReference === false ? ' (**differs**)' : ''} | ${ms(r.oursMs)} | ${ms(r.oursWasmMs)} | ${ms(r.referenceMs)} | ${x(r.ratio?.marshalled)} | ${x(r.ratio?.wasm)} | ${target} |`);
}
say();
say('## Where ours goes (ms, medians; each part timed on its own)');
say();
say('The glue call is the wasm-bindgen function alone (the text encoded into one reused buffer as the package does, the bytes copied in, the compile, JSON text out, the handles freed); the public API adds JSON.parse and the block objects. "copy in" is the text handed over with nothing compiled: encoded as the package does, the bytes copied into linear memory, the UTF-8 check and the copy freed (`__benchCompile(bytes, \'\', false, 0)`). "encodeInto" is `TextEncoder.encodeInto` of the same text into a buffer of its size, the floor of any UTF-8 copy.');
say();
say('| workload | UTF-16 units in | copy in (glue) | encodeInto | work inside wasm | glue call | JSON.parse | public API | answer JSON chars | ours minus copy in | reference | bound by |');
say('| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |');
for (const r of records) {
    const b = r.breakdownMs;
    const c = r.copyMs;
    say(`| ${r.workload} | ${c?.units ?? '–'} | ${c?.glue.medianMs ?? '–'} | ${c?.encodeInto.medianMs ?? '–'} | ${b.wasmWork} | ${b.glueCall} | ${b.jsonParse} | ${b.api} | ${r.answerJsonChars} | ${c ? round(b.api - c.glue.medianMs, 3) : '–'} | ${r.referenceMs?.medianMs ?? '–'} | ${r.bound} |`);
}
say();
say('## Sizes');
say();
say('| file | raw | gzip -9 | limit (gzip -9) | |');
say('| --- | ---: | ---: | ---: | --- |');
say(`| ${process.env.UIBLOCKS_WASM ?? 'wasm/uiblocks_core_bg.wasm'} | ${kib(sizes.wasm.raw)} KiB | ${kib(sizes.wasm.gzip9)} KiB | 300 KiB | ${sizes.wasm.gzip9 <= LIMIT_WASM ? 'met' : '**over**'} |`);
say(`| wasm/uiblocks_core.js + src/index.js | ${kib(sizes.javascript.raw)} KiB | ${kib(sizes.javascript.gzip9)} KiB (${kib(sizes.glue.gzip9)} + ${kib(sizes.api.gzip9)}) | 20 KiB | ${sizes.javascript.gzip9 <= LIMIT_JS ? 'met' : '**over**'} |`);
say();
say(`Load average after: ${loadAfter.map((v) => v.toFixed(2)).join(' / ')}; the run took ${seconds.toFixed(1)} s; the module's memory ended at ${(exports.memory.buffer.byteLength / 2 ** 20).toFixed(1)} MiB.`);
say();
say('## JSON lines');
say();

const meta = {
    bench: '@uiblocks/core',
    ...machine,
    reference: ref ? referencePath : null,
    data: DATA,
    runs: RUNS,
    warmup: WARMUP,
    order: BLOCKS ? 'blocks' : 'rounds',
    loadBefore: loadBefore.map((v) => round(v, 3)),
    loadAfter: loadAfter.map((v) => round(v, 3)),
    seconds: round(seconds, 3),
    wasmMemoryBytes: exports.memory.buffer.byteLength,
    sizes: {
        wasmRaw: sizes.wasm.raw, wasmGzip9: sizes.wasm.gzip9,
        glueRaw: sizes.glue.raw, glueGzip9: sizes.glue.gzip9,
        apiRaw: sizes.api.raw, apiGzip9: sizes.api.gzip9,
        javascriptGzip9: sizes.javascript.gzip9,
        wasmWithinLimit: sizes.wasm.gzip9 <= LIMIT_WASM,
        javascriptWithinLimit: sizes.javascript.gzip9 <= LIMIT_JS
    }
};
if (!JSON_ONLY) for (const r of records) console.log(JSON.stringify(r));
console.log(JSON.stringify(meta));
