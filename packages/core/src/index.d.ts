// Type declarations of @uiblocks/core: every export of `index.js`, its whole public API.
// Checked by `npm exec --prefix packages --no -- tsc -p packages/core/tsconfig.json` against
// `test/types.ts`. docs/core.md is the guide; the wire shapes are those of driver.md.

// ---------------------------------------------------------------------------------------
// Values, limits and codes.

/**
 * A value of the block language: plain JSON data. Numbers are finite; records and arrays
 * hold only values.
 */
export type UiValue = null | boolean | number | string | UiValue[] | { [key: string]: UiValue };

/** A record of values by name: defaults, scopes, readings, arguments (`{"$name": value}`). */
export type UiRecord = { [name: string]: UiValue };

/**
 * The limits of one block (`language.md` §19). Every function that takes limits takes a
 * `Partial<UiLimits>`: the keys given replace those of {@link UI_LIMITS}. Each must be a
 * positive safe integer (`invalid_limits` otherwise).
 */
export interface UiLimits {
    /** Characters (UTF-16 units) of one block's source. */
    characters: number;
    /** Nesting depth of tags and of values. */
    depth: number;
    /** Nodes of one block, evaluated views included. */
    nodes: number;
    /** Diagnostics kept per block or evaluation. */
    diagnostics: number;
    /** Evaluation steps (the fuel). */
    steps: number;
    /** Elements touched by helpers, `Each` and copies. */
    iterations: number;
    /** Characters of one string value. */
    stringLength: number;
    /** Wall-clock time of one compile or evaluation, in milliseconds. */
    milliseconds: number;
}

/** What one reply may hold (`language.md` §17.2); `UiCompileOptions.replyLimits` overrides them. */
export interface UiReplyLimits {
    /** UI blocks per reply; the next fence adds a `budget_exceeded` diagnostic to the last block. */
    blocks: number;
    /** Characters (UTF-16 units) of all block bodies together. */
    characters: number;
    /** Nodes of all blocks together. */
    nodes: number;
    /** Wall-clock time of compiling the whole reply, in milliseconds. */
    milliseconds: number;
    /** Characters a refused block keeps as its fallback. */
    refusedFallback: number;
    /** Characters of source a node falls back to when its own fallback is blank. */
    nodeSourceFallback: number;
    /** The preview throttle of a streaming reply, in milliseconds. */
    streamInterval: number;
}

/** What a host serves per block (`language.md` §19.4); `UiCompileOptions.hostLimits` overrides them. */
export interface UiHostLimits {
    /** `@Query` declarations per block (the next one is a `budget_exceeded` diagnostic). */
    queries: number;
    /** Link targets a host resolves per block. */
    links: number;
    /** How often a visible block reads its queries again, in milliseconds. */
    refreshMilliseconds: number;
}

/** The host service's limits (`host.md`'s `HOST_LIMITS`), as {@link uiCoreLimits} reports them. */
export interface UiHostServiceLimits {
    readGapMilliseconds: number;
    inputRestMilliseconds: number;
    chatReadSlots: number;
    readSlots: number;
    readTimeoutMilliseconds: number;
    resultBytes: number;
    accessBytes: number;
    snapshotBytes: number;
    frozenFallback: number;
    oversizeFallback: number;
    reason: number;
    cacheEntries: number;
    attemptEntries: number;
    payloadId: number;
    payloadKey: number;
    linkPath: number;
    linkNodeId: number;
    agentDiagnostics: number;
}

/** Every limit group as the Rust core has it ({@link uiCoreLimits}). */
export interface UiCoreLimits {
    UI_LIMITS: UiLimits;
    UI_REPLY_LIMITS: UiReplyLimits;
    UI_HOST_LIMITS: UiHostLimits;
    HOST_LIMITS: UiHostServiceLimits;
    catalogVersion: number;
}

/**
 * A diagnostic or failure code of the block language (`language.md` §21). Codes are fixed
 * forever; new ones may be added.
 */
export type UiCode =
    | 'invalid_syntax'
    | 'invalid_tag'
    | 'invalid_prop'
    | 'duplicate_prop'
    | 'unclosed_tag'
    | 'unmatched_tag'
    | 'invalid_declaration'
    | 'duplicate_declaration'
    | 'invalid_expression'
    | 'incomplete_expression'
    | 'refused_call'
    | 'refused_access'
    | 'invalid_value'
    | 'query_only'
    | 'action_only'
    | 'invalid_default'
    | 'invalid_query'
    | 'unknown_query'
    | 'unknown_component'
    | 'invalid_parent'
    | 'invalid_child'
    | 'refused_prop'
    | 'invalid_props'
    | 'refused_action'
    | 'refused_binding'
    | 'refused_query'
    | 'unknown_catalog'
    | 'budget_exceeded'
    | 'invalid_limits'
    | 'refused_choice'
    | 'invalid_block';

/**
 * The code of a {@link UiFailure}: a {@link UiCode}, `internal` (the WebAssembly module
 * stopped and was started again, or a handle outlived it) or `not_ready` (the module is not
 * loaded and this runtime cannot load it synchronously: `await ready()` first).
 */
export type UiFailureCode = UiCode | 'internal' | 'not_ready';

/** A problem found in a block: a stable code and a range of UTF-16 offsets in the block's source. */
export interface UiDiagnostic {
    code: UiCode;
    /** Text for people; not part of the contract. */
    message: string;
    /** First offset (UTF-16 units) in the block's source. */
    start: number;
    /** Offset just past the end (UTF-16 units). */
    end: number;
    /** The node the problem belongs to, when it belongs to one. */
    nodeId?: string;
}

// ---------------------------------------------------------------------------------------
// Compiled blocks (the wire shape of `language.md` §20).

/**
 * An expression tree in its wire shape: a non-constant prop, a text node's `{…}`, a
 * Button's action, a query's arguments. Read it only to pass it back (`UiState.run`); its
 * shape is internal.
 */
export type UiExpression =
    | { kind: 'literal'; value: UiValue }
    | { kind: 'reference'; name: string }
    | { kind: 'array'; items: UiExpression[] }
    | { kind: 'object'; entries: { key: string; value: UiExpression }[] }
    | { kind: 'member'; object: UiExpression; key: UiExpression }
    | { kind: 'unary'; operator: '!' | '-' | '+'; value: UiExpression }
    | {
          kind: 'binary';
          operator: '||' | '&&' | '==' | '!=' | '===' | '!==' | '<' | '<=' | '>' | '>=' | '+' | '-' | '*' | '/' | '%';
          left: UiExpression;
          right: UiExpression;
      }
    | { kind: 'call'; name: string; args: UiExpression[] };

/** One compiled node: a component of the catalog (or an unknown name, with `error`) or a `$text`. */
export interface UiNode {
    /** `<block id>:<start>`. */
    id: string;
    /** The component's name, or `$text`; an unknown name is kept as written. */
    type: string;
    /** Props whose values are constants, folded at compile time. */
    props: UiRecord;
    /** Props (and a text node's `text`, a Button's `action`) evaluated against state. */
    expressions: Record<string, UiExpression>;
    /** Bound props: prop name → the `$name` of local state the control writes. */
    bindings: Record<string, string>;
    children: UiNode[];
    /** Whether the node's closing tag (or `/>`) arrived. */
    complete: boolean;
    /** Plain text for clients that cannot draw the node. */
    fallback: string;
    /** The node's compile-time failure, if any. */
    error?: UiCode;
    /** Start offset in the block's source (UTF-16 units). */
    start: number;
    /** End offset in the block's source (UTF-16 units). */
    end: number;
}

/** One `$name = @Query(source, {…})` declaration. */
export interface UiQuery {
    /** The registered source's name. */
    source: string;
    /** The arguments evaluated with the defaults. */
    args: UiRecord;
    /** The arguments' expression, present only when they read state. */
    expression?: UiExpression;
}

/**
 * One compiled UI block. The objects this package returns carry a handle into WebAssembly
 * (evaluating them copies nothing back); a block read from JSON (a host's stored block) is
 * accepted too and read once.
 */
export interface UiBlock {
    /** `<compile id>:ui:<fence start>`, or the `id` option for {@link compileUiBlock}. */
    id: string;
    /** The catalog version the block was compiled against (1). */
    catalogVersion: number;
    /** Set by a host on a final block, never by the compiler. */
    revision?: string;
    /** Offset of the opening fence line in the reply (UTF-16 units). */
    start: number;
    /** Offset just past the closing fence line, or the reply's end (UTF-16 units). */
    end: number;
    /** Whether the fence was closed or the reply is final. */
    complete: boolean;
    /** Local state: each declared `$name` with its literal default. */
    defaults: UiRecord;
    /** Live queries by `$name`. */
    queries: Record<string, UiQuery>;
    /** The top-level nodes. */
    nodes: UiNode[];
    /** Problems found, at most `limits.diagnostics`. */
    diagnostics: UiDiagnostic[];
    /** Plain text for clients that cannot draw the block. */
    fallback: string;
}

// ---------------------------------------------------------------------------------------
// Evaluated views (driver.md's plain view nodes).

/** One node of an evaluated view: what a page draws. */
export interface UiViewNode {
    /** The compiled id plus `:<index>` per enclosing `Each` iteration. */
    id: string;
    /** The compiled node's id; present only when it differs from `id` (inside `Each`). */
    sourceId?: string;
    /** The component's name, or `$text`. */
    type: string;
    /** The evaluated props (`{text}` for a `$text`). */
    props: UiRecord;
    /** Each bound prop with its current value; {@link UiState.change} changes it. */
    bindings: UiRecord;
    children: UiViewNode[];
    /** Whether the compiled node is complete. */
    complete: boolean;
    /** The compiled node's fallback text. */
    fallback: string;
    /** The failure that keeps this node from being drawn, if any. */
    error?: UiCode;
    /** `true` on a node with an action (a Button): {@link UiState.press} takes it. */
    action?: true;
}

/** An evaluated block: the top-level views (`Show` and `Each` spliced in place) and the evaluation's diagnostics. */
export interface UiEvaluation {
    nodes: UiViewNode[];
    diagnostics: UiDiagnostic[];
}

// ---------------------------------------------------------------------------------------
// Host checks.

/** What a link node names (`host.md` §2.4): `{nodeId: target}` from {@link uiLinkTargets}. */
export type UiLinkTarget =
    | { type: 'File'; path: string; line?: number }
    | { type: 'Diff'; path: string }
    | { type: 'Commit'; sha: string }
    | { type: 'Node'; id: string };

/** What a choice sends ({@link resolveUiChoice}). */
export interface UiChoiceSelection {
    /** The Choice's text, whitespace collapsed. */
    label: string;
    /** The message sent: the Choice's `context`, or its label. */
    context: string;
    /** The input values a page sends with it ({@link uiInputValues}). */
    values: UiRecord;
}

// ---------------------------------------------------------------------------------------
// Compile options.

/**
 * A query source's argument schema: the JSON Schema subset of driver.md. `enum` is the
 * whole check where it appears; string lengths count code points; a `required` name that
 * `properties` does not list is not required. Other keywords are not read.
 */
export interface UiJsonSchema {
    type?: 'object' | 'string' | 'integer' | 'number' | 'boolean' | 'array';
    properties?: { readonly [name: string]: UiJsonSchema };
    required?: readonly string[];
    /** Only `false` is read: no other properties. */
    additionalProperties?: boolean;
    /** The allowed values, compared as literals. */
    enum?: readonly (string | number | boolean | null)[];
    minLength?: number;
    maxLength?: number;
    minimum?: number;
    maximum?: number;
    /** The schema of every element of an array. */
    items?: UiJsonSchema;
    /** Annotations, not read. */
    $schema?: string;
    title?: string;
    description?: string;
}

/** How to compile. Every field is optional; an option given as `undefined` is one not given. */
export interface UiCompileOptions {
    /** The compile id: blocks are `<id>:ui:<fence start>` (for {@link compileUiBlock}: the block's id). Default `"reply"`. */
    id?: string | undefined;
    /** Whether the text is the whole reply: an unclosed fence is then complete. Only `true` is final. */
    final?: boolean | undefined;
    /** Overrides of {@link UI_LIMITS} for each block. */
    limits?: Partial<UiLimits> | undefined;
    /** Overrides of {@link UI_REPLY_LIMITS} (an extension of this package). */
    replyLimits?: Partial<UiReplyLimits> | undefined;
    /** Overrides of {@link UI_HOST_LIMITS} (an extension of this package). */
    hostLimits?: Partial<UiHostLimits> | undefined;
    /** The attachment id that `Image generated="latest"` resolves to. */
    latestAttachment?: string | undefined;
    /** `{source: schema}` of every registered query source; a `@Query` of another source is `unknown_query`. */
    querySchemas?: { readonly [source: string]: UiJsonSchema } | undefined;
    /** The info string that marks a UI fence; default {@link UI_FENCE_LANGUAGE}. */
    fenceLanguage?: string | undefined;
    /**
     * The compile clock, in milliseconds (default: the real one). `() => 0` freezes it, so
     * time budgets never fire and the output is deterministic. A call that throws or
     * answers no finite number reads 0.
     */
    now?: (() => number) | undefined;
    /**
     * `'frozen'`: the compile clock always reads 0, without calling into JavaScript (as
     * `now: () => 0`); ignored when `now` is given. Default `'real'`.
     */
    clock?: 'frozen' | 'real' | undefined;
}

/** The options of a {@link UiCompiler}: `final` is each call's own; `latestAttachment` is the default of every call. */
export type UiCompilerOptions = Omit<UiCompileOptions, 'final'>;

/** What one {@link UiCompiler.compile} call says besides the text. */
export interface UiCompileUpdate {
    /** Whether the text is the whole reply. Only `true` is final; a final call reuses nothing and ends the stream. */
    final?: boolean | undefined;
    /** The attachment id that `Image generated="latest"` resolves to (the compiler's own by default). */
    latestAttachment?: string | undefined;
}

/** Options of the agent texts. */
export interface UiTextOptions {
    /** The fence word the host's compiler looks for; default {@link UI_FENCE_LANGUAGE}. */
    fenceLanguage?: string | undefined;
}

// ---------------------------------------------------------------------------------------
// The catalog as data.

/** A group of the catalog. */
export type UiCatalogGroup = 'status' | 'data' | 'structure' | 'content' | 'links' | 'inputs' | 'choices';

/** The 36 components of catalog version 1, in catalog order. */
export type UiComponentName =
    | 'Summary' | 'Callout' | 'Tag' | 'Progress' | 'Steps' | 'Step' | 'Stats' | 'Stat'
    | 'EntityList' | 'Entry' | 'Table' | 'Column' | 'Chart' | 'Tabs' | 'Tab' | 'Sections'
    | 'Section' | 'CodeBlock' | 'Image' | 'Sources' | 'Source' | 'File' | 'Diff' | 'Commit'
    | 'Node' | 'Checklist' | 'Item' | 'Switch' | 'Slider' | 'Segmented' | 'Option' | 'Button'
    | 'Show' | 'Each' | 'Choices' | 'Choice';

/** One prop of a component. */
export interface UiCatalogProp {
    readonly name: string;
    /** The value's shape in words (`text`, `number >= 0`, `one of done|running|…`). */
    readonly kind: string;
    readonly required: boolean;
    /** What an optional prop's absence means. */
    readonly whenAbsent?: string;
    /** The allowed values of an enumeration. */
    readonly values?: readonly string[];
}

/** One component of the catalog. */
export interface UiCatalogComponent {
    readonly name: UiComponentName;
    readonly group: UiCatalogGroup;
    readonly description: string;
    /** Its props, the action prop excepted. */
    readonly props: readonly UiCatalogProp[];
    /** The one parent it must sit in, if any. */
    readonly parent: UiComponentName | null;
    /** The only children it takes, if it restricts them. */
    readonly children: readonly UiComponentName[] | null;
    /** Its bound prop (inputs). */
    readonly binding: 'value' | null;
    /** Its action prop (Button). */
    readonly action: 'action' | null;
    /** A rule between its props, in words. */
    readonly crossPropRule: string | null;
}

/** The catalog as data ({@link uiCatalog}); shared, so it is read-only. */
export interface UiCatalog {
    readonly version: number;
    readonly components: readonly UiCatalogComponent[];
}

// ---------------------------------------------------------------------------------------
// Constants.

/** The spec's limits of one block (`language.md` §19). */
export declare const UI_LIMITS: {
    readonly characters: 65536;
    readonly depth: 32;
    readonly nodes: 512;
    readonly diagnostics: 20;
    readonly steps: 20000;
    readonly iterations: 2000;
    readonly stringLength: 16384;
    readonly milliseconds: 30;
};
/** What one reply may hold (`language.md` §17.2). */
export declare const UI_REPLY_LIMITS: {
    readonly blocks: 16;
    readonly characters: 262144;
    readonly nodes: 2048;
    readonly milliseconds: 60;
    readonly refusedFallback: 4096;
    readonly nodeSourceFallback: 1024;
    readonly streamInterval: 250;
};
/** What a host serves per block (`language.md` §19.4). */
export declare const UI_HOST_LIMITS: {
    readonly queries: 8;
    readonly links: 64;
    readonly refreshMilliseconds: 10000;
};
/** The default fence word. */
export declare const UI_FENCE_LANGUAGE: 'ui';
/** The catalog version blocks are compiled against. */
export declare const UI_CATALOG_VERSION: 1;
/** The same, under the name the page packages use. */
export declare const catalogVersion: 1;
/** The preview throttle of a streaming reply, in milliseconds. */
export declare const UI_STREAM_INTERVAL_MS: 250;

// ---------------------------------------------------------------------------------------
// Failures and loading.

/** A failure with a stable code; the package throws nothing else for bad input. */
export declare class UiFailure extends Error {
    /** @param code a stable code @param message text for people */
    constructor(code: UiFailureCode, message: string);
    /** The stable code (`budget_exceeded`, `invalid_value`, …). */
    readonly code: UiFailureCode;
}

/** What {@link ready} can load the module from. */
export type UiModuleSource =
    | URL
    | string
    | Request
    | Response
    | PromiseLike<Response>
    | BufferSource
    | WebAssembly.Module;

/**
 * Loads the WebAssembly module, once; later calls resolve at once. Without `source`,
 * Node.js and Bun read the `.wasm` beside the package synchronously, and browsers and
 * workers fetch it (it must be served as `application/wasm`). Rejects with what the fetch
 * or instantiation threw; a later call tries again.
 */
export declare function ready(source?: UiModuleSource): Promise<void>;

/**
 * Loads the WebAssembly module synchronously from `bytes` or a compiled module; without
 * them, reads the `.wasm` beside the package (Node.js ≥ 20.16 and Bun).
 * @throws {UiFailure} `not_ready` where the runtime cannot read the file synchronously.
 */
export declare function initSync(bytes?: BufferSource | WebAssembly.Module): void;

// ---------------------------------------------------------------------------------------
// Compiling.

/**
 * Compiles every UI fence of a reply (one fresh compile, nothing reused).
 * @throws {UiFailure} `invalid_value` for options that are not plain data, `invalid_limits`.
 */
export declare function compileUi(text: string, options?: UiCompileOptions): UiBlock[];

/** Compiles one fence's body as a block whose id is `options.id` (default `"reply"`). */
export declare function compileUiBlock(source: string, options?: UiCompileOptions): UiBlock;

/**
 * One streaming reply's compiler: call {@link UiCompiler.compile} with the reply so far
 * after each delta, then with the whole reply and `{final: true}`. Fences that did not
 * change come back as the same objects; {@link UiCompiler.changed} names the others.
 */
export declare class UiCompiler {
    constructor(options?: UiCompilerOptions);
    /** Compiles `text`, the reply so far (with `final: true`, all of it). */
    compile(text: string, update?: UiCompileUpdate): UiBlock[];
    /** The ids of the blocks the last {@link UiCompiler.compile} made anew. */
    get changed(): readonly string[];
    /** Forgets earlier calls: the next compile starts afresh. */
    clear(): void;
    /** Frees the compiler's memory now (it is also freed when collected). */
    free(): void;
}

// ---------------------------------------------------------------------------------------
// State and evaluation.

/** The state of one block on a page: its variables' values and its queries' readings. */
export declare class UiState {
    /**
     * A state of `block`'s defaults.
     * @throws {UiFailure} `budget_exceeded` when the defaults do not fit `limits`.
     */
    constructor(block: UiBlock, limits?: Partial<UiLimits>);
    /** @internal the module-side handle, for this package's functions. */
    handle(): object;
    /** The block this state follows. */
    get block(): UiBlock;
    /** Follows a recompiled `block`: new or changed defaults take effect, edits of unchanged ones stay. */
    sync(block: UiBlock): void;
    /** The revision: bumped by every change. */
    snapshot(): number;
    /** Calls `listener` after every change made through this object; returns the function that stops it. */
    subscribe(listener: () => void): () => void;
    /** Every variable and reading: what expressions read. */
    scope(): UiRecord;
    /** The variables' current values. */
    values(): UiRecord;
    /**
     * Sets a declared variable, as a person's edit does.
     * @throws {UiFailure} `refused_binding` (not declared), `invalid_value` (another type than its default, or not plain data).
     */
    set(name: string, value: unknown): void;
    /**
     * Stores a reading of the query `name` of `block`.
     * @throws {UiFailure} `refused_query` when `block` does not declare that query (any more).
     */
    setQuery(name: string, value: unknown, block: UiBlock): void;
    /**
     * Runs a state action: `@Set($x, value)`, `@Reset($x)` or `@Reset()`, as source text
     * or as an expression tree (a Button's `expressions.action`).
     * @throws {UiFailure} `refused_action`, `refused_binding`, `invalid_value`, a syntax code.
     */
    run(action: string | UiExpression): void;
    /**
     * A person pressed the node `nodeId` (one with `action: true`) of the view last
     * evaluated with this state. Returns whether the state changed (a disabled or
     * incomplete node does nothing).
     * @throws {UiFailure} `refused_binding` (no such node on screen), `refused_action` (it has no action).
     */
    press(nodeId: string): boolean;
    /**
     * A person changed the bound `prop` of the node `nodeId` to `value`: the variable is set
     * when the control allows the value. Returns whether the state changed.
     * @throws {UiFailure} `refused_binding` (no such node on screen, or the prop is not bound).
     */
    change(nodeId: string, prop: string, value: unknown): boolean;
    /** Puts every variable back to its default (`@Reset()`). */
    reset(): void;
    /** Frees the state's memory now (it is also freed when collected). */
    free(): void;
}

/**
 * Evaluates `block` in `state` (a fresh state of its defaults when absent): the view a
 * page draws. The view is remembered by `state` for {@link UiState.press} and {@link UiState.change}.
 * @throws {UiFailure} `invalid_value` when `state` is not a `UiState`, `budget_exceeded`
 * when the state does not fit `limits`, `invalid_limits`.
 */
export declare function evaluateUiBlock(block: UiBlock, state?: UiState, limits?: Partial<UiLimits>): UiEvaluation;

/** What a page sends with a choice: the values of `block`'s inputs and Button targets in `state`. */
export declare function uiInputValues(block: UiBlock, state: UiState): UiRecord;

// ---------------------------------------------------------------------------------------
// Host-side checks: a page's submission checked against the stored block.

/**
 * The state a host rebuilds from a page's submission, every input checked as something a
 * person could have set on screen.
 * @throws {UiFailure} `invalid_block` (incomplete, or another catalog), `refused_binding`,
 * `refused_query`, `invalid_value`, `budget_exceeded`.
 */
export declare function uiValidatedState(
    block: UiBlock,
    input?: Readonly<Record<string, unknown>>,
    queries?: Readonly<Record<string, unknown>>,
    limits?: Partial<UiLimits>
): UiState;

/**
 * The arguments of the query `name` with a page's `input` (validated as by {@link uiValidatedState}).
 * @throws {UiFailure} `invalid_query` when the block does not declare `name`, and the validation's codes.
 */
export declare function uiQueryArguments(
    block: UiBlock,
    name: string,
    input?: Readonly<Record<string, unknown>>,
    limits?: Partial<UiLimits>
): UiRecord;

/** The link targets of the nodes on screen with the validated `input` and `queries`, by view node id. */
export declare function uiLinkTargets(
    block: UiBlock,
    input?: Readonly<Record<string, unknown>>,
    queries?: Readonly<Record<string, unknown>>,
    limits?: Partial<UiLimits>
): Record<string, UiLinkTarget>;

/**
 * What the choice `choiceId` (a visible Choice's view id) sends, every value checked.
 * @throws {UiFailure} `refused_choice` and the validation's codes.
 */
export declare function resolveUiChoice(
    block: UiBlock,
    choiceId: string,
    input?: Readonly<Record<string, unknown>>,
    queries?: Readonly<Record<string, unknown>>,
    limits?: Partial<UiLimits>
): UiChoiceSelection;

/**
 * The block's text with its queries' readings: what a final reply keeps for clients that cannot draw it.
 * @throws {UiFailure} `refused_query` for a reading of a name the block does not declare as a query.
 */
export declare function uiQueryFallback(block: UiBlock, queries?: Readonly<Record<string, unknown>>): string;

/** The reply `text` with each of `blocks` replaced by its fallback text. */
export declare function uiFallbackText(text: string, blocks: Iterable<UiBlock>): string;

// ---------------------------------------------------------------------------------------
// Text checks, the catalog and its agent texts.

/** Whether `text` opens a fence of `fenceLanguage` (default {@link UI_FENCE_LANGUAGE}): cheap, before a compiler is worth making. */
export declare function uiHasFence(text: string, fenceLanguage?: string): boolean;

/** Whether `text` may declare a query or name a link target: cheap, before anything is read for it. */
export declare function uiMayReferenceHost(text: string): boolean;

/** One line per component: `Name(props): description`. */
export declare function uiCatalogText(): string;

/** Every component and its props on one line (`?` marks optional props). */
export declare function uiCompactCatalog(): string;

/** The short note for an agent's session: syntax, rules, the compact catalog, an example. */
export declare function uiSessionNote(options?: UiTextOptions): string;

/** The full reference for an agent: syntax, an example, every group and component. */
export declare function uiReferenceText(options?: UiTextOptions): string;

/** The catalog as data (one shared object). */
export declare function uiCatalog(): UiCatalog;

/** Every limit group as the Rust core has it: for tests that hold this package's constants to them. */
export declare function uiCoreLimits(): UiCoreLimits;

/**
 * The answer to one request line of the JSON-lines driver (driver.md), without its line
 * feed: the bytes `uiblocks driver` writes. `""` for a blank line.
 */
export declare function uiDriverAnswer(line: string): string;

/** @internal Makes the module trap, for the test that a trap answers `internal` and the module starts again. */
export declare function __trapForTests(): void;
