// A compile-time test of src/index.d.ts: it is type checked, never run
// (`npm exec --prefix packages --no -- tsc -p packages/core/tsconfig.json`). Each use below must check;
// each `@ts-expect-error` line is a misuse the declarations must refuse.

import {
    UI_CATALOG_VERSION,
    UI_FENCE_LANGUAGE,
    UI_HOST_LIMITS,
    UI_LIMITS,
    UI_REPLY_LIMITS,
    UI_STREAM_INTERVAL_MS,
    UiCompiler,
    UiFailure,
    UiState,
    __trapForTests,
    catalogVersion,
    compileUi,
    compileUiBlock,
    evaluateUiBlock,
    initSync,
    ready,
    resolveUiChoice,
    uiCatalog,
    uiCatalogText,
    uiCompactCatalog,
    uiCoreLimits,
    uiDriverAnswer,
    uiFallbackText,
    uiHasFence,
    uiInputValues,
    uiLinkTargets,
    uiMayReferenceHost,
    uiQueryArguments,
    uiQueryFallback,
    uiReferenceText,
    uiSessionNote,
    uiValidatedState,
} from '@uiblocks/core';
import type {
    UiBlock,
    UiCatalog,
    UiCatalogComponent,
    UiChoiceSelection,
    UiCode,
    UiCompileOptions,
    UiCompileUpdate,
    UiCompilerOptions,
    UiCoreLimits,
    UiDiagnostic,
    UiEvaluation,
    UiExpression,
    UiFailureCode,
    UiHostLimits,
    UiJsonSchema,
    UiLimits,
    UiLinkTarget,
    UiModuleSource,
    UiNode,
    UiQuery,
    UiRecord,
    UiReplyLimits,
    UiTextOptions,
    UiValue,
    UiViewNode,
} from '@uiblocks/core';

/** `true` exactly when `A` and `B` are the same type. */
type Equal<A, B> = (<T>() => T extends A ? 1 : 2) extends <T>() => T extends B ? 1 : 2 ? true : false;
/** Compiles only when `T` is `true`. */
function assertType<T extends true>(): T | void {}

// ---------------------------------------------------------------------------------------
// Constants: read-only, literal-typed, and limits objects.

assertType<Equal<typeof UI_LIMITS.characters, 65536>>();
assertType<Equal<typeof UI_LIMITS.milliseconds, 30>>();
assertType<Equal<typeof UI_REPLY_LIMITS.blocks, 16>>();
assertType<Equal<typeof UI_REPLY_LIMITS.streamInterval, 250>>();
assertType<Equal<typeof UI_HOST_LIMITS.queries, 8>>();
assertType<Equal<typeof UI_HOST_LIMITS.refreshMilliseconds, 10000>>();
assertType<Equal<typeof UI_FENCE_LANGUAGE, 'ui'>>();
assertType<Equal<typeof UI_CATALOG_VERSION, 1>>();
assertType<Equal<typeof catalogVersion, 1>>();
assertType<Equal<typeof UI_STREAM_INTERVAL_MS, 250>>();
const limits: UiLimits = UI_LIMITS;
const replyLimits: UiReplyLimits = UI_REPLY_LIMITS;
const hostLimits: UiHostLimits = UI_HOST_LIMITS;
// @ts-expect-error the constants are read-only
UI_LIMITS.steps = 1;
// @ts-expect-error the constants are read-only
UI_HOST_LIMITS.links = 1;
// @ts-expect-error literal-typed: not any number
const notSteps: 20001 = UI_LIMITS.steps;

// ---------------------------------------------------------------------------------------
// Loading.

const loaded: Promise<void> = ready();
void ready(new URL('https://example.invalid/uiblocks_core_bg.wasm'));
void ready('/uiblocks_core_bg.wasm');
void ready(new Uint8Array(8));
void ready(new ArrayBuffer(8));
declare const response: Response;
declare const module: WebAssembly.Module;
void ready(response);
void ready(Promise.resolve(response));
void ready(module);
const source: UiModuleSource = module;
void ready(source);
initSync();
initSync(new Uint8Array(8));
initSync(module);
// (lib.dom's `WebAssembly.Module` is an empty interface, so any object passes for one: only
// null is refused here.)
// @ts-expect-error null is not a module source
void ready(null);
// @ts-expect-error null is not bytes
initSync(null);
// @ts-expect-error ready answers nothing
const notBlocks: UiBlock[] = await ready();

// ---------------------------------------------------------------------------------------
// Compiling.

const schemas: Record<string, UiJsonSchema> = {
    'ci.runs': {
        $schema: 'https://json-schema.org/draft/2020-12/schema',
        type: 'object',
        properties: {
            branch: { type: 'string', minLength: 1, maxLength: 200 },
            limit: { type: 'integer', minimum: 1, maximum: 50 },
            state: { enum: ['passed', 'failed', null] },
            tags: { type: 'array', items: { type: 'string' } },
        },
        required: ['branch'],
        additionalProperties: false,
    },
};
const options: UiCompileOptions = {
    id: 'reply-1',
    final: true,
    limits: { steps: 1000 },
    replyLimits: { blocks: 4 },
    hostLimits: { queries: 2 },
    latestAttachment: 'att-1',
    querySchemas: schemas,
    fenceLanguage: 'ui',
    now: () => 0,
    clock: 'frozen',
};
// An option may be given as undefined (exactOptionalPropertyTypes is on in this project).
const maybeAttachment = undefined as string | undefined;
compileUi('text', { latestAttachment: maybeAttachment, limits: undefined });
const blocks: UiBlock[] = compileUi('Hi\n```ui\n<Summary>Hi</Summary>\n```\n', options);
compileUi('no options');
const block: UiBlock = compileUiBlock('<Summary>Hi</Summary>', { id: 'b' });
compileUiBlock('<Summary>Hi</Summary>');
// @ts-expect-error `id` is a string
compileUi('x', { id: 1 });
// @ts-expect-error unknown option (a typo of `final`)
compileUi('x', { finale: true });
// @ts-expect-error limits are numbers
compileUi('x', { limits: { steps: '100' } });
// @ts-expect-error an unknown limit
compileUi('x', { limits: { fuel: 100 } });
// @ts-expect-error a limit given as undefined fails `invalid_value`
compileUi('x', { limits: { steps: undefined } });
// @ts-expect-error the clock answers a number
compileUi('x', { now: () => 'now' });
// @ts-expect-error only 'frozen' and 'real' clocks
compileUi('x', { clock: 'fast' });
// @ts-expect-error a type outside the subset
compileUi('x', { querySchemas: { s: { type: 'null' } } });
// @ts-expect-error a misspelt keyword
compileUi('x', { querySchemas: { s: { type: 'string', minLenght: 1 } } });
// @ts-expect-error compileUiBlock answers one block
const notOne: UiBlock[] = compileUiBlock('x');
// @ts-expect-error the text is a string
compileUi(42);

// Streaming.
const compilerOptions: UiCompilerOptions = { id: 'reply', now: () => 0, latestAttachment: 'att-1' };
const compiler = new UiCompiler(compilerOptions);
new UiCompiler();
const preview: UiBlock[] = compiler.compile('```ui\n<Summa');
const update: UiCompileUpdate = { final: true, latestAttachment: 'att-2' };
const finished: UiBlock[] = compiler.compile('```ui\n<Summary/>\n```\n', update);
const changed: readonly string[] = compiler.changed;
compiler.clear();
compiler.free();
// @ts-expect-error `final` is each call's own, not the compiler's
new UiCompiler({ final: true });
// @ts-expect-error `changed` is read-only
compiler.changed = [];
// @ts-expect-error nothing can be pushed onto `changed`
compiler.changed.push('x');
// @ts-expect-error an update has only `final` and `latestAttachment`
compiler.compile('x', { id: 'other' });

// ---------------------------------------------------------------------------------------
// The block's wire shape.

const id: string = block.id;
const version: number = block.catalogVersion;
const revision: string | undefined = block.revision;
const range: [number, number] = [block.start, block.end];
const complete: boolean = block.complete;
const defaults: UiRecord = block.defaults;
const queries: Record<string, UiQuery> = block.queries;
const query: UiQuery | undefined = block.queries['$runs'];
const querySource: string | undefined = query?.source;
const queryArgs: UiRecord | undefined = query?.args;
const queryExpression: UiExpression | undefined = query?.expression;
const node: UiNode | undefined = block.nodes[0];
const diagnostic: UiDiagnostic | undefined = block.diagnostics[0];
const code: UiCode | undefined = diagnostic?.code;
const nodeId: string | undefined = diagnostic?.nodeId;
const fallback: string = block.fallback;
if (node) {
    const bound: string | undefined = node.bindings['value'];
    const expression: UiExpression | undefined = node.expressions['action'];
    const error: UiCode | undefined = node.error;
    const children: UiNode[] = node.children;
    void [bound, expression, error, children, node.props, node.complete, node.fallback, node.start, node.end, node.type];
}
// @ts-expect-error diagnostic codes are the spec's
const badCode: UiCode = 'budget-exceeded';
// @ts-expect-error a value is plain data
const badValue: UiValue = { when: new Date() };
// @ts-expect-error a value has no undefined
const undefinedValue: UiValue = [undefined];
const goodValue: UiValue = { rows: [{ name: 'a', n: 1, ok: true, none: null }] };
if (diagnostic) {
    // @ts-expect-error the wire's offsets are numbers
    const start: string = diagnostic.start;
    void start;
}

// Expressions: a tree whose `kind` tells its fields.
function describe(expression: UiExpression): string {
    switch (expression.kind) {
        case 'literal':
            return JSON.stringify(expression.value);
        case 'reference':
            return expression.name;
        case 'call':
            return `@${expression.name}(${expression.args.map(describe).join(', ')})`;
        case 'binary':
            return `${describe(expression.left)} ${expression.operator} ${describe(expression.right)}`;
        case 'unary':
            return `${expression.operator}${describe(expression.value)}`;
        case 'member':
            return `${describe(expression.object)}[${describe(expression.key)}]`;
        case 'array':
            return `[${expression.items.map(describe).join(', ')}]`;
        case 'object':
            return `{${expression.entries.map((e) => `${e.key}: ${describe(e.value)}`).join(', ')}}`;
    }
}

// ---------------------------------------------------------------------------------------
// State and evaluation.

const state = new UiState(block, { steps: 5000 });
new UiState(block);
const view: UiEvaluation = evaluateUiBlock(block, state, { milliseconds: 100 });
evaluateUiBlock(block);
evaluateUiBlock(block, undefined, { steps: 10 });
const first: UiViewNode | undefined = view.nodes[0];
if (first) {
    const sourceId: string | undefined = first.sourceId;
    const action: true | undefined = first.action;
    const boundValue: UiValue | undefined = first.bindings['value'];
    const text: UiValue | undefined = first.props['text'];
    const viewError: UiCode | undefined = first.error;
    void [sourceId, action, boundValue, text, viewError, first.children, first.complete, first.fallback, first.type, first.id];
    const pressed: boolean = state.press(first.id);
    const edited: boolean = state.change(first.id, 'value', true);
    void [pressed, edited];
    // @ts-expect-error a view node has no compiled expressions
    void first.expressions;
    // @ts-expect-error `action` is a flag, not the action
    const notAction: UiExpression = first.action;
}
const evaluationDiagnostics: UiDiagnostic[] = view.diagnostics;
const followed: UiBlock = state.block;
state.sync(block);
const revisionNumber: number = state.snapshot();
const stop: () => void = state.subscribe(() => {});
stop();
const scope: UiRecord = state.scope();
const values: UiRecord = state.values();
state.set('$onlyFlaky', true);
state.set('$rows', [{ name: 'a' }]);
state.setQuery('$runs', [{ id: 1 }], block);
state.run('@Reset()');
if (node?.expressions['action']) state.run(node.expressions['action']);
state.reset();
state.free();
// @ts-expect-error `block` is read-only
state.block = block;
// @ts-expect-error setQuery needs the block the reading is for
state.setQuery('$runs', []);
// @ts-expect-error press takes a node id
state.press(first);
// @ts-expect-error change needs the prop and the value
state.change('id', 'value');
// @ts-expect-error a listener is called with no arguments
state.subscribe((event: string) => void event);
// @ts-expect-error limits are partial UI_LIMITS
new UiState(block, { queries: 2 });
// @ts-expect-error the state comes second
evaluateUiBlock(state, block);
// @ts-expect-error a block is required
evaluateUiBlock();
const inputs: UiRecord = uiInputValues(block, state);
// @ts-expect-error uiInputValues needs the state
uiInputValues(block);

// ---------------------------------------------------------------------------------------
// Host-side checks.

const validated: UiState = uiValidatedState(block, { $onlyFlaky: true }, { $runs: [] }, { steps: 100 });
uiValidatedState(block);
const args: UiRecord = uiQueryArguments(block, '$runs', { $branch: 'main' }, { steps: 100 });
uiQueryArguments(block, '$runs');
const targets: Record<string, UiLinkTarget> = uiLinkTargets(block, {}, {}, {});
uiLinkTargets(block);
for (const target of Object.values(targets)) {
    switch (target.type) {
        case 'File': {
            const line: number | undefined = target.line;
            void [target.path, line];
            break;
        }
        case 'Diff':
            void target.path;
            break;
        case 'Commit':
            void target.sha;
            break;
        case 'Node':
            void target.id;
            // @ts-expect-error a Node target has no path
            void target.path;
            break;
    }
}
const selection: UiChoiceSelection = resolveUiChoice(block, 'reply:ui:0:40', { $onlyFlaky: true }, {}, { steps: 100 });
const selected: [string, string, UiRecord] = [selection.label, selection.context, selection.values];
const queryFallback: string = uiQueryFallback(block, { $runs: [] });
uiQueryFallback(block);
const replyFallback: string = uiFallbackText('text', blocks);
uiFallbackText('text', new Set(blocks));
// @ts-expect-error the choice id is a string
resolveUiChoice(block, 3);
// @ts-expect-error the query's name is required
uiQueryArguments(block);
// @ts-expect-error uiFallbackText takes blocks
uiFallbackText('text', ['not a block']);
// @ts-expect-error a link target's type is one of four
const badTarget: UiLinkTarget = { type: 'Url', path: 'x' };
// @ts-expect-error a Commit target names a sha
const badCommit: UiLinkTarget = { type: 'Commit', path: 'x' };

// ---------------------------------------------------------------------------------------
// Texts, the catalog, the driver.

const textOptions: UiTextOptions = { fenceLanguage: 'uiblock' };
const texts: string[] = [
    uiCatalogText(),
    uiCompactCatalog(),
    uiSessionNote(),
    uiSessionNote(textOptions),
    uiReferenceText({ fenceLanguage: undefined }),
    uiDriverAnswer('{"op":"text"}'),
];
const hasFence: boolean = uiHasFence('```ui\n', 'ui') && uiHasFence('x') && uiMayReferenceHost('<File path="a"/>');
const catalog: UiCatalog = uiCatalog();
const button: UiCatalogComponent | undefined = catalog.components.find((c) => c.name === 'Button');
const buttonAction: 'action' | null | undefined = button?.action;
const propNames: string[] | undefined = button?.props.map((p) => `${p.name}${p.required ? '' : '?'}: ${p.kind}`);
const core: UiCoreLimits = uiCoreLimits();
const readSlots: number = core.HOST_LIMITS.readSlots;
// @ts-expect-error the catalog is shared and read-only
catalog.components.push(catalog.components[0]!);
// @ts-expect-error a component name is one of the catalog's
const badName: UiCatalogComponent['name'] = 'Chartt';
// @ts-expect-error the options are an object
uiSessionNote('uiblock');

// ---------------------------------------------------------------------------------------
// Failures.

try {
    compileUi('x', options);
} catch (error) {
    if (error instanceof UiFailure) {
        const failureCode: UiFailureCode = error.code;
        const message: string = error.message;
        const isError: Error = error;
        if (error.code === 'budget_exceeded' || error.code === 'internal' || error.code === 'not_ready') void message;
        // @ts-expect-error no such code
        if (error.code === 'budget-exceeded') void message;
        // @ts-expect-error the code is read-only
        error.code = 'internal';
        void [failureCode, isError];
    }
}
const made = new UiFailure('invalid_value', 'not plain data');
// @ts-expect-error a failure has a spec code
new UiFailure('oops', 'message');
__trapForTests();

void [
    limits, replyLimits, hostLimits, notSteps, loaded, notBlocks, blocks, notOne, preview, finished, changed,
    id, version, revision, range, complete, defaults, queries, querySource, queryArgs, queryExpression, code,
    nodeId, fallback, badCode, badValue, undefinedValue, goodValue, describe, evaluationDiagnostics, followed,
    revisionNumber, scope, values, inputs, validated, args, selected, queryFallback, replyFallback, badTarget,
    badCommit, texts, hasFence, buttonAction, propNames, readSlots, badName, made,
];
