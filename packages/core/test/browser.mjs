#!/usr/bin/env node
// @uiblocks/core in Chromium, in a page and in a module worker:
//
//     node packages/core/test/browser.mjs
//
// Serves packages/ on 127.0.0.1 (a free port) with Node's http module, starts Debian's
// Chromium (`/usr/bin/chromium`, or $UI_E2E_CHROMIUM) headless with a fresh profile, drives
// it through playwright-core over the DevTools protocol (no browser is ever downloaded),
// and opens test/browser/index.html under `Content-Security-Policy: script-src 'self'
// 'wasm-unsafe-eval'`. The page runs test/browser/scenario.mjs after `await ready()` on
// the main thread and in a module worker; each answer must equal the one Node.js gives
// for the same scenario. The server's log shows that each realm fetched the .wasm once, as
// application/wasm. A second page without 'wasm-unsafe-eval' shows that a page needs it.
//
// Prints one line per check and `N passed, N failed`; exits 1 when a check fails. The run
// is bounded (60 s) and always ends Chromium (its whole process group) and the server.
// Under `node --test` (which runs every script under test/) it does nothing: it is a
// target of its own.

import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { createServer } from 'node:http';
import { tmpdir } from 'node:os';
import { extname, join, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';

/** Debian's Chromium. */
const CHROMIUM = process.env.UI_E2E_CHROMIUM || '/usr/bin/chromium';
/** The whole run, start to cleanup, in milliseconds. */
const RUN_TIMEOUT_MS = 60_000;
/** How long Chromium may take to open its DevTools endpoint, in milliseconds. */
const LAUNCH_TIMEOUT_MS = 20_000;
/** How long one page may take to report, in milliseconds. */
const PAGE_TIMEOUT_MS = 30_000;
/** How long each cleanup step may take, in milliseconds. */
const CLEANUP_STEP_MS = 5_000;
/** The policy the page must work under. */
const CSP = "script-src 'self' 'wasm-unsafe-eval'";
/** The same without WebAssembly: the page must fail to load the module. */
const CSP_WITHOUT_WASM = "script-src 'self'";

const ROOT = fileURLToPath(new URL('../../', import.meta.url)); // packages/
const PAGE = '/core/test/browser/index.html';
const WASM = '/core/wasm/uiblocks_core_bg.wasm';
const TYPES = {
    '.html': 'text/html; charset=utf-8',
    '.js': 'text/javascript; charset=utf-8',
    '.mjs': 'text/javascript; charset=utf-8',
    '.wasm': 'application/wasm',
    '.json': 'application/json; charset=utf-8'
};

if (process.env.NODE_TEST_CONTEXT) {
    console.log('# skipped under node --test: run `node packages/core/test/browser.mjs`');
    process.exit(0);
}

const started = performance.now();
const results = [];

/** Records one check: `run` passes unless it throws. */
function check(name, run) {
    try {
        run();
        results.push({ name, ok: true });
    } catch (error) {
        const detail = String(error?.message ?? error);
        results.push({ name, ok: false, detail: detail.length > 3000 ? `${detail.slice(0, 3000)}…` : detail });
    }
}

function delay(ms) {
    return new Promise((done) => setTimeout(done, ms).unref());
}

/** `promise`, or a rejection naming `what` after `ms`. */
function within(promise, ms, what) {
    let timer;
    return Promise.race([
        promise.finally(() => clearTimeout(timer)),
        new Promise((_, reject) => {
            timer = setTimeout(() => reject(new Error(`${what} took longer than ${ms} ms`)), ms);
        })
    ]);
}

// ---------------------------------------------------------------------------------------
// The server: packages/ as static files, every request logged.

const log = [];
let label = 'none';
let csp = CSP;

const server = createServer((request, response) => {
    const path = decodeURIComponent(new URL(request.url, 'http://127.0.0.1').pathname);
    const file = resolve(ROOT, `.${path}`);
    const type = TYPES[extname(file)] ?? 'application/octet-stream';
    let status = 200;
    let body;
    if (request.method !== 'GET' || !(file + sep).startsWith(ROOT)) {
        status = 404;
    } else {
        try {
            body = statSync(file).isFile() ? readFileSync(file) : undefined;
        } catch {
            body = undefined;
        }
        if (body === undefined) status = 404;
    }
    log.push({ page: label, path, status, type: status === 200 ? type : undefined, referer: request.headers.referer ?? '' });
    if (status !== 200) {
        response.writeHead(status, { 'content-type': 'text/plain' }).end('not found');
        return;
    }
    response.writeHead(200, {
        'content-type': type,
        'content-length': body.length,
        // Every fetch reaches the server, so its log counts them.
        'cache-control': 'no-store',
        'content-security-policy': csp
    });
    response.end(body);
});

// ---------------------------------------------------------------------------------------
// Chromium: started here, so that this script owns its process group and ends it.

let chromium;
let browser;
const profile = mkdtempSync(join(tmpdir(), 'uiblocks-core-chromium-'));
let stderrTail = '';

/** Starts Chromium and answers its DevTools WebSocket address. */
async function launch() {
    chromium = spawn(
        CHROMIUM,
        [
            '--headless',
            '--no-sandbox',
            '--disable-gpu',
            '--disable-quic',
            '--no-first-run',
            '--disable-background-networking',
            '--disable-component-update',
            '--disable-sync',
            `--user-data-dir=${profile}`,
            '--remote-debugging-address=127.0.0.1',
            '--remote-debugging-port=0',
            'about:blank'
        ],
        { detached: true, stdio: ['ignore', 'ignore', 'pipe'] }
    );
    const exited = once(chromium, 'exit').then(([code, signal]) => {
        throw new Error(`Chromium exited (${signal ?? code}) before it listened:\n${stderrTail}`);
    });
    const failed = once(chromium, 'error').then(([error]) => {
        throw new Error(`Chromium did not start (${CHROMIUM}: ${error.message}); apt-get install chromium`);
    });
    const listening = new Promise((done) => {
        chromium.stderr.setEncoding('utf8');
        chromium.stderr.on('data', (text) => {
            stderrTail = (stderrTail + text).slice(-4000);
            const found = /DevTools listening on (ws:\/\/\S+)/.exec(stderrTail);
            if (found) done(found[1]);
        });
    });
    return within(Promise.race([listening, exited, failed]), LAUNCH_TIMEOUT_MS, 'starting Chromium');
}

/** Ends Chromium's whole process group with `signal`; whether it was still running. */
function signalChromium(signal) {
    if (!chromium || chromium.exitCode !== null || chromium.signalCode !== null) return false;
    try {
        process.kill(-chromium.pid, signal);
        return true;
    } catch {
        return false;
    }
}

let cleaned = false;
async function cleanup() {
    if (cleaned) return;
    cleaned = true;
    if (browser) await within(browser.close(), CLEANUP_STEP_MS, 'closing the connection').catch(() => {});
    if (signalChromium('SIGTERM')) {
        await within(once(chromium, 'exit'), CLEANUP_STEP_MS, 'ending Chromium').catch(() => {
            signalChromium('SIGKILL');
        });
    }
    server.closeAllConnections();
    await within(new Promise((done) => server.close(done)), CLEANUP_STEP_MS, 'closing the server').catch(() => {});
    rmSync(profile, { recursive: true, force: true });
}

// Whatever happens, Chromium does not outlive this process.
process.on('exit', () => {
    signalChromium('SIGKILL');
    rmSync(profile, { recursive: true, force: true });
});
for (const signal of ['SIGINT', 'SIGTERM']) {
    process.on(signal, () => {
        signalChromium('SIGKILL');
        process.exit(1);
    });
}
const watchdog = setTimeout(() => {
    console.log(`not ok - the run took longer than ${RUN_TIMEOUT_MS / 1000} s`);
    console.log(`${results.filter((r) => r.ok).length} passed, ${results.filter((r) => !r.ok).length + 1} failed`);
    process.exit(1);
}, RUN_TIMEOUT_MS);

// ---------------------------------------------------------------------------------------
// One page: opened, its `uiblocks:result` console line read.

async function open(context, url, pageLabel, policy) {
    label = pageLabel;
    csp = policy;
    const page = await context.newPage();
    const messages = [];
    const errors = [];
    page.on('pageerror', (error) => errors.push(String(error)));
    const reported = new Promise((done) => {
        page.on('console', (message) => {
            const text = message.text();
            if (text.startsWith('uiblocks:result ')) done(JSON.parse(text.slice('uiblocks:result '.length)));
            else messages.push({ type: message.type(), text });
        });
    });
    await page.goto(url);
    const result = await within(reported, PAGE_TIMEOUT_MS, `the page ${pageLabel}`);
    await page.close();
    return { result, messages, errors };
}

// ---------------------------------------------------------------------------------------
// The run.

let failedToRun;
try {
    const { chromium: playwright } = await import('playwright-core').catch(() => {
        throw new Error('playwright-core is missing: npm ci --prefix packages');
    });
    const core = await import('../src/index.js');
    const { REPLY, scenario } = await import('./browser/scenario.mjs');

    // What Node.js answers: the browser's realms must answer the same.
    const expected = JSON.parse(JSON.stringify(scenario(core)));
    const [trapBlock] = core.compileUi(REPLY, { now: () => 0 });
    const trapState = new core.UiState(trapBlock);
    trapState.set('$onlyFlaky', true);
    const expectedTrap = { values: trapState.values(), view: core.evaluateUiBlock(trapBlock, trapState, { milliseconds: 10000 }) };

    server.listen(0, '127.0.0.1');
    await within(once(server, 'listening'), CLEANUP_STEP_MS, 'starting the server');
    const origin = `http://127.0.0.1:${server.address().port}`;
    browser = await playwright.connectOverCDP(await launch());
    const context = browser.contexts()[0] ?? (await browser.newContext());
    const version = browser.version();

    // The page under the policy it must work with.
    const strict = await open(context, `${origin}${PAGE}`, 'strict', CSP);
    const page = strict.result;
    check(`the page loads the module under ${CSP} (await ready())`, () => assert.equal(page.ready, true, JSON.stringify(page.ready)));
    check('the policy is in force (eval is refused)', () => assert.equal(page.evalRefused, true));
    check('no policy violation (but the eval probe\'s), page error, console error or warning', () => {
        assert.deepEqual(page.violations.filter((v) => v.blocked !== 'eval'), []);
        assert.deepEqual(strict.errors, []);
        assert.deepEqual(strict.messages.filter((m) => m.type === 'error' || m.type === 'warning'), []);
        assert.equal(page.error, undefined, JSON.stringify(page.error));
    });
    check('main thread: compile, evaluate, change, press, stream, links, choice, driver as in Node.js', () =>
        assert.deepEqual(page.main, expected)
    );
    check('main thread: a failure is a UiFailure with its code', () =>
        assert.deepEqual(page.main?.failure, { name: 'UiFailure', code: 'invalid_limits', isUiFailure: true, isError: true })
    );
    check('worker: before ready() the module cannot load synchronously (not_ready)', () =>
        assert.deepEqual(page.worker?.beforeReady, { thrown: true, code: 'not_ready', isUiFailure: true })
    );
    check('worker: after ready() the same answers as Node.js', () => {
        assert.equal(page.worker?.error, undefined, JSON.stringify(page.worker?.error));
        assert.deepEqual(page.worker.scenario, expected);
    });
    check('a trap answers internal, the module starts again, a state keeps its values', () => {
        assert.deepEqual(page.trap && { thrown: page.trap.thrown, code: page.trap.code, isUiFailure: page.trap.isUiFailure }, {
            thrown: true,
            code: 'internal',
            isUiFailure: true
        });
        assert.deepEqual({ values: page.trap.values, view: page.trap.view }, expectedTrap);
    });
    const strictLog = log.filter((entry) => entry.page === 'strict');
    check('the page and the worker each fetched the .wasm once, as application/wasm', () => {
        const fetches = strictLog.filter((entry) => entry.path === WASM);
        assert.deepEqual(
            fetches.map((f) => ({ status: f.status, type: f.type, from: new URL(f.referer || 'http://x/none').pathname })).sort((a, b) => a.from.localeCompare(b.from)),
            [
                { status: 200, type: 'application/wasm', from: PAGE },
                { status: 200, type: 'application/wasm', from: '/core/test/browser/worker.mjs' }
            ],
            JSON.stringify(fetches)
        );
    });
    check('every script came as text/javascript, and nothing was missing', () => {
        assert.deepEqual(strictLog.filter((entry) => entry.status !== 200), []);
        const scripts = strictLog.filter((entry) => /\.m?js$/.test(entry.path));
        assert.ok(scripts.some((entry) => entry.path === '/core/src/index.js'), 'index.js was fetched');
        assert.ok(scripts.some((entry) => entry.path === '/core/wasm/uiblocks_core.js'), 'the glue was fetched');
        assert.deepEqual(scripts.filter((entry) => !entry.type.startsWith('text/javascript')), []);
    });

    // The same page without 'wasm-unsafe-eval': the module cannot be compiled.
    const bare = await open(context, `${origin}${PAGE}`, 'bare', CSP_WITHOUT_WASM);
    check(`without 'wasm-unsafe-eval' (${CSP_WITHOUT_WASM}) ready() rejects`, () => {
        assert.notEqual(bare.result.ready, true);
        assert.equal(bare.result.ready?.name, 'CompileError', JSON.stringify(bare.result.ready));
        assert.equal(bare.result.main, undefined);
    });
    check(`without 'wasm-unsafe-eval' the page reports a script-src violation`, () =>
        assert.ok(bare.result.violations.some((v) => v.directive === 'script-src'), JSON.stringify(bare.result.violations))
    );
    console.log(`# ${version} at ${origin}`);
} catch (error) {
    failedToRun = error;
} finally {
    await cleanup();
    clearTimeout(watchdog);
}

if (failedToRun) results.push({ name: 'the run', ok: false, detail: failedToRun.stack ?? String(failedToRun) });
for (const result of results) {
    console.log(`${result.ok ? 'ok' : 'not ok'} - ${result.name}`);
    if (!result.ok) console.log(result.detail.replace(/^/gm, '    '));
}
const failed = results.filter((result) => !result.ok).length;
console.log(`# ${((performance.now() - started) / 1000).toFixed(1)} s`);
console.log(`${results.length - failed} passed, ${failed} failed`);
process.exitCode = failed > 0 ? 1 : 0;
