// @uiblocks/core: the uiblocks block language (compiler, evaluator, validators) in every
// JavaScript runtime, as the Rust core compiled to WebAssembly (crates/ui-wasm).
//
// This file is the whole public API; `../wasm/uiblocks_core.js` is wasm-bindgen's glue,
// written by `cargo xtask wasm`. Everything larger than a name crosses the boundary as JSON
// text (the wire shapes of driver.md), compiled blocks and states stay inside WebAssembly
// behind handles, and failures come back as `UiFailure`. docs/core.md is the guide.

import * as glue from '../wasm/uiblocks_core.js';

/** A failure with a stable code from the spec (`budget_exceeded`, `invalid_value`, …). */
export class UiFailure extends Error {
    /**
     * @param {string} code
     * @param {string} message
     */
    constructor(code, message) {
        super(message);
        this.name = 'UiFailure';
        /** @readonly */
        this.code = code;
    }
}

/** The spec's limits (`language.md` §19); a test holds them equal to the Rust core's. */
export const UI_LIMITS = Object.freeze({
    characters: 65536, depth: 32, nodes: 512, diagnostics: 20,
    steps: 20000, iterations: 2000, stringLength: 16384, milliseconds: 30
});
/** What one reply may hold (`language.md` §17.2). */
export const UI_REPLY_LIMITS = Object.freeze({
    blocks: 16, characters: 262144, nodes: 2048, milliseconds: 60,
    refusedFallback: 4096, nodeSourceFallback: 1024, streamInterval: 250
});
/** What a host serves per block (`language.md` §19.4). */
export const UI_HOST_LIMITS = Object.freeze({ queries: 8, links: 64, refreshMilliseconds: 10000 });
/** The default fence word. */
export const UI_FENCE_LANGUAGE = 'ui';
/** The catalog version blocks are compiled against. */
export const UI_CATALOG_VERSION = 1;
/** The same, under the name the page packages use. */
export const catalogVersion = UI_CATALOG_VERSION;
/** The preview throttle of a streaming reply, in milliseconds. */
export const UI_STREAM_INTERVAL_MS = 250;

// ---------------------------------------------------------------------------------------
// Loading: once, synchronously where the runtime can read the file (Node.js, Bun),
// asynchronously otherwise (browsers and workers fetch it as application/wasm).

let loaded = false;
let loading;
/** Bumped whenever the module is instantiated again after a trap: handles made before are stale. */
let generation = 0;

const WASM_URL = new URL('../wasm/uiblocks_core_bg.wasm', import.meta.url);

/** Node.js's file system module, named where no bundler looks for a specifier. */
const NODE_FS = ['node', 'fs'].join(':');

/** The file system of a runtime that has one and lets us read it synchronously. */
function fileSystem() {
    const get = globalThis.process?.getBuiltinModule;
    return typeof get === 'function' ? get('node:fs') : undefined;
}

/**
 * Loads the WebAssembly module (once). `source` may be a URL, a `Response`, bytes or a
 * `WebAssembly.Module`; by default the `.wasm` beside this package.
 * @param {URL | string | Response | BufferSource | WebAssembly.Module} [source]
 * @returns {Promise<void>}
 */
export function ready(source) {
    if (loaded) return Promise.resolve();
    if (source === undefined && WASM_URL.protocol === 'file:' && globalThis.process?.versions?.node) {
        // Node.js and Bun read the file beside the package: at once where
        // `process.getBuiltinModule` exists (Node.js 20.16, Bun), else after importing `fs`
        // (a specifier no bundler resolves for a page, since pages never take this path).
        loading ??= (async () => {
            const fs = fileSystem() ?? await import(NODE_FS);
            initSync(fs.readFileSync(WASM_URL));
        })().catch((error) => { loading = undefined; throw error; });
        return loading;
    }
    loading ??= glue.default({ module_or_path: source ?? WASM_URL }).then(
        () => { loaded = true; },
        (error) => { loading = undefined; throw error; }
    );
    return loading;
}

/**
 * Loads the WebAssembly module synchronously from `bytes` (or a compiled module); without
 * an argument, reads the `.wasm` beside this package (Node.js ≥ 20.16 and Bun).
 * @param {BufferSource | WebAssembly.Module} [bytes]
 */
export function initSync(bytes) {
    if (loaded) return;
    let module = bytes;
    if (module === undefined) {
        const fs = fileSystem();
        if (!fs || WASM_URL.protocol !== 'file:') {
            throw new UiFailure('not_ready', 'This runtime cannot read the module synchronously: await ready() first.');
        }
        module = fs.readFileSync(WASM_URL);
    }
    glue.initSync({ module });
    loaded = true;
}

function ensureLoaded() {
    if (!loaded) initSync();
}

/** Whether `error` is the module trapping (out of memory, or a bug that aborted). */
function isTrap(error) {
    return error instanceof WebAssembly.RuntimeError
        || (error instanceof RangeError && /memory|wasm/i.test(String(error.message)));
}

/** Turns what the module threw into a `UiFailure`; a trap instantiates the module again. */
function failure(error) {
    if (typeof error === 'string') {
        try {
            const { code, message } = JSON.parse(error);
            return new UiFailure(code, message);
        } catch {
            return new UiFailure('internal', error);
        }
    }
    if (isTrap(error)) {
        glue.__wbg_reset_state();
        generation += 1;
        return new UiFailure('internal', `The WebAssembly module stopped (${error.message}); it was started again.`);
    }
    if (error instanceof Error && /stale object from previous Wasm instance/.test(error.message)) {
        return new UiFailure('internal', 'A handle outlived the module it came from.');
    }
    if (error instanceof Error && error.code === 'ERR_STRING_TOO_LONG') {
        // An answer the module wrote (a driver `stream` of a long text in small steps) that
        // is longer than a string of this runtime can be.
        return new UiFailure('budget_exceeded', 'The answer is longer than a string can be.');
    }
    return error;
}

/** Runs `work` against the module, with its failures as `UiFailure`s. */
function call(work) {
    ensureLoaded();
    try {
        return work();
    } catch (error) {
        throw failure(error);
    }
}

// ---------------------------------------------------------------------------------------
// Values to JSON text, checked as the reference copies them: plain data only.

function plainJson(value, what) {
    try {
        checkPlain(value, what, []);
        return JSON.stringify(value);
    } catch (error) {
        if (error instanceof UiFailure) throw error;
        throw new UiFailure('invalid_value', `${what} is not JSON data: ${error.message}`);
    }
}

/**
 * Throws unless `value` is plain data as the reference's `copyUiValue` takes it: finite
 * numbers, strings, booleans, null, dense arrays and plain objects of own data properties
 * (an accessor or a hole is `refused_access`, and no getter is called), without cycles.
 */
function checkPlain(value, what, ancestors) {
    switch (typeof value) {
        case 'string':
        case 'boolean':
            return;
        case 'number':
            if (!Number.isFinite(value)) throw new UiFailure('invalid_value', `${what} holds a number that is not finite.`);
            return;
        case 'object': {
            if (value === null) return;
            const array = Array.isArray(value);
            if (!array) {
                const proto = Object.getPrototypeOf(value);
                if (proto !== Object.prototype && proto !== null) throw new UiFailure('invalid_value', `${what} holds an object that is not plain data.`);
            }
            if (ancestors.includes(value)) throw new UiFailure('invalid_value', `${what} holds itself.`);
            ancestors.push(value);
            const keys = array ? null : Object.keys(value);
            const count = array ? value.length : keys.length;
            for (let i = 0; i < count; i++) {
                const own = Object.getOwnPropertyDescriptor(value, array ? i : keys[i]);
                if (!own || !('value' in own)) throw new UiFailure('refused_access', `${what} holds a hole or an accessor.`);
                checkPlain(own.value, what, ancestors);
            }
            ancestors.pop();
            return;
        }
        default:
            throw new UiFailure('invalid_value', `${what} holds ${value === undefined ? 'undefined' : `a ${typeof value}`}.`);
    }
}

/** `value` as text, as `String` converts it; a value `String` cannot convert is `invalid_value`. */
function text(value, what) {
    if (typeof value === 'string') return value;
    try {
        return String(value);
    } catch {
        throw new UiFailure('invalid_value', `${what} is not text.`);
    }
}

/** The largest buffer kept for encoding texts, in bytes; a longer text is encoded on its own. */
const MAX_SCRATCH = 8 << 20;
const encoder = new TextEncoder();
let scratch = new Uint8Array(0);

/**
 * `value` as UTF-8 bytes (`text`'s conversion first). Texts cross as bytes because
 * `TextEncoder` copies them natively, where wasm-bindgen's string passing loops over the
 * characters in JavaScript (3.4 ms against 0.2 ms for 2 MB). A lone surrogate is written
 * as U+FFFD, one UTF-16 unit as the half was, so offsets stay the page's. The bytes are
 * copied into the module at once, so one buffer (at most `MAX_SCRATCH`) is reused: sized
 * for mostly ASCII text, with `encode` for a text that does not fit.
 */
function utf8(value, what) {
    const string = text(value, what);
    const wanted = string.length + (string.length >> 1) + 16;
    if (wanted > scratch.length) {
        if (wanted > MAX_SCRATCH) return encoder.encode(string);
        scratch = new Uint8Array(Math.min(MAX_SCRATCH, Math.max(wanted, 2 * scratch.length, 4096)));
    }
    const { read, written } = encoder.encodeInto(string, scratch);
    return read === string.length ? scratch.subarray(0, written) : encoder.encode(string);
}

function parse(text) {
    return JSON.parse(text);
}

// ---------------------------------------------------------------------------------------
// Blocks and their handles.

/** The module-side handle of each block object this package made or was given. */
const handles = new WeakMap();

function remember(block, handle) {
    handles.set(block, { handle, generation });
    return block;
}

/** The handle of `block`: the one it was made with, or one read from its JSON. */
function handleOf(block) {
    if (block === null || typeof block !== 'object') {
        throw new UiFailure('invalid_block', 'Not a compiled block.');
    }
    const known = handles.get(block);
    if (known && known.generation === generation) return known.handle;
    let json;
    try {
        json = JSON.stringify(block);
    } catch (error) {
        throw new UiFailure('invalid_value', `The block is not JSON data: ${error.message}`);
    }
    const handle = glue.BlockHandle.fromJson(json);
    handles.set(block, { handle, generation });
    return handle;
}

/**
 * Blocks of a compile: its JSON holds the new ones, each with its handle; an incremental
 * compile's `reused[i]` is the index in `previous` of a block that did not change, or -1.
 */
function blocksOf(compiled, previous) {
    const fresh = parse(compiled.takeJson());
    const list = compiled.takeHandles();
    const reused = previous ? compiled.reused() : undefined;
    compiled.free();
    if (reused === undefined) return fresh.map((block, i) => remember(block, list[i]));
    const blocks = new Array(reused.length);
    let next = 0;
    for (let i = 0; i < reused.length; i++) {
        if (reused[i] >= 0) {
            blocks[i] = previous[reused[i]];
        } else {
            blocks[i] = remember(fresh[next], list[next]);
            next += 1;
        }
    }
    return blocks;
}

/** The options as JSON text (`final` as the reference reads it: only `true` is final) and the clock. */
function compileOptions(options) {
    let now, rest;
    try {
        ({ now, ...rest } = options ?? {});
    } catch (error) {
        throw new UiFailure('invalid_value', `The options are not readable: ${error.message}`);
    }
    // An option given as `undefined` is one not given (`{latestAttachment: maybe}`), as in the reference.
    for (const key of Object.keys(rest)) if (rest[key] === undefined) delete rest[key];
    rest.final = rest.final === true;
    return [plainJson(rest, 'The options'), typeof now === 'function' ? now : undefined];
}

/**
 * Compiles every UI fence of a reply.
 * @param {string} source the reply
 * @param {import('./index.js').UiCompileOptions} [options]
 */
export function compileUi(source, options = {}) {
    return call(() => {
        const [json, now] = compileOptions(options);
        return blocksOf(glue.compileReply(utf8(source, 'The reply'), json, now));
    });
}

/**
 * Compiles one fence body as a block whose id is `options.id`.
 * @param {string} source
 * @param {import('./index.js').UiCompileOptions} [options]
 */
export function compileUiBlock(source, options = {}) {
    return call(() => {
        const [json, now] = compileOptions(options);
        return blocksOf(glue.compileBlock(utf8(source, 'The source'), json, now))[0];
    });
}

/**
 * One streaming reply's compiler: each `compile` compiles the reply so far, hands back the
 * same block objects for fences that did not change, and says which blocks changed.
 */
export class UiCompiler {
    #options;
    #now;
    #inner;
    #generation;
    #blocks = [];
    #changed = [];

    /** @param {import('./index.js').UiCompileOptions} [options] */
    constructor(options = {}) {
        [this.#options, this.#now] = compileOptions(options);
        this.#open();
    }

    #open() {
        call(() => {
            this.#inner = new glue.IncrementalCompiler(this.#options, this.#now);
            this.#generation = generation;
        });
    }

    /**
     * Compiles `reply`, the reply so far (`final`: all of it).
     * @param {string} reply
     * @param {{final?: boolean, latestAttachment?: string}} [update]
     */
    compile(reply, update = {}) {
        if (this.#generation !== generation) {
            this.#open();
            this.#blocks = [];
        }
        const { final, latestAttachment } = update ?? {};
        const blocks = call(() => blocksOf(
            this.#inner.compile(
                utf8(reply, 'The reply'),
                final === true,
                latestAttachment == null ? undefined : text(latestAttachment, 'The latest attachment')
            ),
            this.#blocks
        ));
        const before = new Set(this.#blocks);
        this.#changed = blocks.filter((b) => !before.has(b)).map((b) => b.id);
        this.#blocks = final === true ? [] : blocks;
        return blocks;
    }

    /** The ids of the blocks the last `compile` made anew (the others are the same objects as before). */
    get changed() {
        return this.#changed;
    }

    /** Forgets earlier calls: the next compile starts afresh. */
    clear() {
        this.#blocks = [];
        this.#changed = [];
        if (this.#generation === generation) call(() => this.#inner.reset());
    }

    /** Frees the compiler's memory now (it is also freed when collected). */
    free() {
        this.#blocks = [];
        if (this.#generation === generation) this.#inner.free();
    }
}

// ---------------------------------------------------------------------------------------
// State and evaluation.

function limitsJson(limits) {
    return plainJson({ limits: limits ?? {} }, 'The limits');
}

/** Replayed state operations kept before a snapshot is taken (after a trap the state is rebuilt). */
const MAX_LOG = 64;

/** A handle a validating function made, which the next `UiState` constructed takes. */
let adopted;

/** The state of one block on a page: the values of its declared variables and its query readings. */
export class UiState {
    #block;
    #limits;
    #handle;
    #generation;
    /** The block a rebuild starts from: `#base` and `#log` were recorded against it. */
    #start;
    /** Operations since `#base`, replayed if the module is ever instantiated again. */
    #log = [];
    #base;
    #listeners = new Set();
    /** The last revision answered, and what a rebuilt handle's revision is short of it. */
    #revision = 0;
    #offset = 0;

    /**
     * @param {object} block a compiled block
     * @param {Partial<typeof UI_LIMITS>} [limits]
     */
    constructor(block, limits = {}) {
        const made = adopted;
        adopted = undefined;
        this.#block = block;
        this.#start = block;
        this.#limits = limitsJson(limits);
        this.#handle = made ?? call(() => new glue.StateHandle(handleOf(block), this.#limits));
        this.#generation = generation;
        if (made) {
            // A validated state holds input and readings already: a rebuild starts from them.
            this.#base = baseOf(made, block);
            this.#revision = made.revision();
        }
    }

    /** The handle, rebuilt after a trap from the defaults and the operations since. */
    #current() {
        if (this.#generation === generation) return this.#handle;
        const handle = new glue.StateHandle(handleOf(this.#start), this.#limits);
        for (const op of this.#base ?? []) apply(handle, op);
        for (const op of this.#log) apply(handle, op);
        this.#handle = handle;
        this.#generation = generation;
        this.#offset = this.#revision - handle.revision();
        return handle;
    }

    /** Records `op`, compacting the log into a base once it is long. */
    #record(op) {
        this.#log.push(op);
        if (this.#log.length > MAX_LOG) {
            this.#base = baseOf(this.#handle, this.#block);
            this.#start = this.#block;
            this.#log = [];
        }
        this.#revision = this.#handle.revision() + this.#offset;
    }

    #did(op) {
        this.#record(op);
        for (const listener of this.#listeners) listener();
    }

    /** @internal the handle for this package's functions. */
    handle() {
        return this.#current();
    }

    /** The block this state follows. */
    get block() {
        return this.#block;
    }

    /**
     * Follows a recompiled `block`: new or changed defaults take effect, edits of unchanged ones stay.
     * @param {object} block
     */
    sync(block) {
        call(() => {
            this.#current().sync(handleOf(block));
            this.#block = block;
            this.#record(['sync', block]);
        });
    }

    /** The revision: bumped by every change. */
    snapshot() {
        return call(() => this.#current().revision() + this.#offset);
    }

    /**
     * Calls `listener` after every change; returns the function that stops it.
     * @param {() => void} listener
     */
    subscribe(listener) {
        if (typeof listener !== 'function') throw new UiFailure('invalid_value', 'A listener is a function.');
        this.#listeners.add(listener);
        return () => { this.#listeners.delete(listener); };
    }

    /** Every variable and reading: what expressions read. */
    scope() {
        return call(() => parse(this.#current().scope()));
    }

    /** The variables' current values. */
    values() {
        return call(() => parse(this.#current().values()));
    }

    /**
     * Sets a declared variable, as a person's edit does.
     * @param {string} name
     * @param {unknown} value
     */
    set(name, value) {
        const json = plainJson(value, 'The value');
        const key = text(name, 'The name');
        call(() => this.#current().set(key, json));
        this.#did(['set', key, json]);
    }

    /**
     * Stores a reading of the query `name` of `block`.
     * @param {string} name
     * @param {unknown} value
     * @param {object} block
     */
    setQuery(name, value, block) {
        const json = plainJson(value, 'The reading');
        const key = text(name, 'The name');
        call(() => this.#current().setQuery(key, json, handleOf(block)));
        this.#did(['setQuery', key, json, block]);
    }

    /**
     * Runs a state action: `@Set($x, value)`, `@Reset($x)` or `@Reset()`, as source text or
     * as an expression tree (a Button's `expressions.action`).
     * @param {string | object} action
     */
    run(action) {
        const op = typeof action === 'string' ? ['run', action] : ['runTree', plainJson(action, 'The action')];
        call(() => apply(this.#current(), op));
        this.#did(op);
    }

    /**
     * A person pressed the node `nodeId` (a Button) of the view last evaluated with this
     * state. Returns whether the state changed (a disabled or incomplete node does nothing).
     * @param {string} nodeId
     */
    press(nodeId) {
        const op = ['press', text(nodeId, 'The node id'), this.#block];
        const changed = call(() => apply(this.#current(), op));
        if (changed) this.#did(op);
        return changed;
    }

    /**
     * A person changed the bound `prop` of the node `nodeId` to `value`: the variable is set
     * when the control allows the value. Returns whether the state changed.
     * @param {string} nodeId
     * @param {string} prop
     * @param {unknown} value
     */
    change(nodeId, prop, value) {
        const op = ['change', text(nodeId, 'The node id'), text(prop, 'The prop'), plainJson(value, 'The value'), this.#block];
        const changed = call(() => apply(this.#current(), op));
        if (changed) this.#did(op);
        return changed;
    }

    /** Puts every variable back to its default (`@Reset()`). */
    reset() {
        call(() => this.#current().resetAll());
        this.#did(['resetAll']);
    }

    /** Frees the state's memory now (it is also freed when collected). */
    free() {
        if (this.#generation === generation) this.#handle.free();
    }
}

/** Operations that bring a fresh state of `block` to where `handle` is: its values, then its readings. */
function baseOf(handle, block) {
    return [
        ...Object.entries(parse(handle.values())).map(([name, value]) => ['set', name, JSON.stringify(value)]),
        ...Object.entries(parse(handle.readings())).map(([name, value]) => ['setQuery', name, JSON.stringify(value), block])
    ];
}

/** Applies one recorded state operation to `handle`. */
function apply(handle, op) {
    switch (op[0]) {
        case 'set': return handle.set(op[1], op[2]);
        case 'setQuery': return handle.setQuery(op[1], op[2], handleOf(op[3]));
        case 'run': return handle.run(op[1]);
        case 'runTree': return handle.runTree(op[1]);
        case 'press': return handle.press(handleOf(op[2]), op[1]);
        case 'change': return handle.change(handleOf(op[4]), op[1], op[2], op[3]);
        case 'resetAll': return handle.resetAll();
        case 'sync': return handle.sync(handleOf(op[1]));
        default: return undefined;
    }
}

/**
 * Evaluates `block` in `state` (a fresh state of its defaults when absent): the view a page
 * draws, as driver.md's plain view nodes (`bindings` map each bound prop to its value,
 * `action: true` marks a node `state.press` takes).
 * @param {object} block
 * @param {UiState} [state]
 * @param {Partial<typeof UI_LIMITS>} [limits]
 */
export function evaluateUiBlock(block, state, limits = {}) {
    return call(() => {
        const options = limitsJson(limits);
        const handle = handleOf(block);
        if (state === undefined) return parse(glue.evaluate(handle, options));
        return parse(stateHandle(state).evaluate(handle, options));
    });
}

/**
 * What a page sends with a choice: the values of the block's inputs in `state`.
 * @param {object} block
 * @param {UiState} state
 */
export function uiInputValues(block, state) {
    return call(() => parse(stateHandle(state).inputValues(handleOf(block))));
}

/** The handle of `state`, which must be a `UiState`. */
function stateHandle(state) {
    if (!(state instanceof UiState)) throw new UiFailure('invalid_value', 'Not a UiState.');
    return state.handle();
}

/**
 * The state a host rebuilds from a page's submission, every value checked as something a
 * person could have set on screen.
 */
export function uiValidatedState(block, input = {}, queries = {}, limits = {}) {
    adopted = call(() => glue.validatedState(handleOf(block), plainJson(input, 'The input'), plainJson(queries, 'The readings'), limitsJson(limits)));
    return new UiState(block, limits);
}

/** The arguments of the query `name` with a page's `input`. */
export function uiQueryArguments(block, name, input = {}, limits = {}) {
    return call(() => parse(glue.queryArguments(handleOf(block), text(name, 'The query name'), plainJson(input, 'The input'), limitsJson(limits))));
}

/** The link targets of the nodes on screen: `{nodeId: {type, path | sha | id, line?}}`. */
export function uiLinkTargets(block, input = {}, queries = {}, limits = {}) {
    return call(() => parse(glue.linkTargets(handleOf(block), plainJson(input, 'The input'), plainJson(queries, 'The readings'), limitsJson(limits))));
}

/** What the choice `choiceId` sends: `{label, context, values}`, every value checked. */
export function resolveUiChoice(block, choiceId, input = {}, queries = {}, limits = {}) {
    return call(() => parse(glue.resolveChoice(handleOf(block), text(choiceId, 'The choice id'), plainJson(input, 'The input'), plainJson(queries, 'The readings'), limitsJson(limits))));
}

/** The block's text with its queries' readings: what a final reply keeps for clients that cannot draw it. */
export function uiQueryFallback(block, queries = {}) {
    return call(() => glue.queryFallback(handleOf(block), plainJson(queries, 'The readings'), ''));
}

/** The reply with each block replaced by its fallback text. */
export function uiFallbackText(reply, blocks) {
    return call(() => {
        if (typeof blocks?.[Symbol.iterator] !== 'function') throw new UiFailure('invalid_value', 'Not a list of blocks.');
        const list = new glue.BlockList();
        try {
            for (const block of blocks) list.push(handleOf(block));
            return glue.fallbackText(utf8(reply, 'The reply'), list);
        } finally {
            list.free();
        }
    });
}

// ---------------------------------------------------------------------------------------
// Text checks, the catalog and its agent texts.

/** Whether `text` opens a fence of `fenceLanguage`. */
export function uiHasFence(reply, fenceLanguage = UI_FENCE_LANGUAGE) {
    return call(() => glue.hasFence(utf8(reply, 'The text'), text(fenceLanguage, 'The fence language')));
}

/** Whether `text` may declare a query or name a link target. */
export function uiMayReferenceHost(reply) {
    return call(() => glue.mayReferenceHost(utf8(reply, 'The text')));
}

const texts = new Map();
function textsFor(word) {
    const fenceLanguage = text(word, 'The fence language');
    let found = texts.get(fenceLanguage);
    if (!found) {
        found = call(() => parse(glue.catalogTexts(fenceLanguage)));
        if (texts.size < 16) texts.set(fenceLanguage, found);
    }
    return found;
}

/** One line per component: its props and what it is for. */
export function uiCatalogText() {
    return textsFor(UI_FENCE_LANGUAGE).catalogText;
}

/** Every component and its props on one line. */
export function uiCompactCatalog() {
    return textsFor(UI_FENCE_LANGUAGE).compactCatalog;
}

/** The short note for an agent's session: syntax, rules, the compact catalog, an example. */
export function uiSessionNote(options) {
    const { fenceLanguage = UI_FENCE_LANGUAGE } = options ?? {};
    return textsFor(fenceLanguage).sessionNote;
}

/** The full reference for an agent: syntax, an example, every group and component. */
export function uiReferenceText(options) {
    const { fenceLanguage = UI_FENCE_LANGUAGE } = options ?? {};
    return textsFor(fenceLanguage).referenceText;
}

let catalog;
/** The catalog as data: `{version, components: [{name, group, description, props, …}]}`. */
export function uiCatalog() {
    catalog ??= call(() => parse(glue.catalogJson()));
    return catalog;
}

/** The limits as the Rust core has them, for tests that hold this file's constants to them. */
export function uiCoreLimits() {
    return call(() => parse(glue.limitsJson()));
}

/**
 * The answer to one line of the JSON-lines driver (driver.md), the bytes `uiblocks driver`
 * writes; `""` for a blank line.
 * @param {string} line
 */
export function uiDriverAnswer(line) {
    return call(() => glue.driverAnswer(utf8(line, 'The line')));
}

/** Makes the module trap, for the test that a trap answers `internal` and the module starts again. */
export function __trapForTests() {
    return call(() => glue.__trapForTests());
}
