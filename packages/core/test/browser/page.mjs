// The browser test's page (test/browser.mjs serves and drives it): loads @uiblocks/core with
// `await ready()` under the page's CSP, runs the scenario on the main thread and in a module
// worker, and logs one `uiblocks:result <json>` console line for the test to check.
// `node --test test/` runs every script under test/, this one too: outside a page it does nothing.

import * as core from '../../src/index.js';
import { REPLY, scenario } from './scenario.mjs';

/** How long the worker may take to answer, in milliseconds. */
const WORKER_TIMEOUT_MS = 20000;

function described(error) {
    return { name: error?.name, code: error?.code, message: String(error?.message ?? error) };
}

/** The worker's answer: what worker.mjs posts, or why there is none. */
function runWorker() {
    return new Promise((resolve) => {
        const worker = new Worker(new URL('./worker.mjs', import.meta.url), { type: 'module' });
        const done = (answer) => {
            clearTimeout(timer);
            worker.terminate();
            resolve(answer);
        };
        const timer = setTimeout(() => done({ error: { message: `no answer within ${WORKER_TIMEOUT_MS} ms` } }), WORKER_TIMEOUT_MS);
        worker.onmessage = (event) => done(event.data);
        worker.onerror = (event) => done({ error: { message: event.message || 'the worker failed to load' } });
    });
}

/** A trap answers `internal`, the module starts again, and a state made before it keeps its values. */
function trap() {
    const [block] = core.compileUi(REPLY, { now: () => 0 });
    const state = new core.UiState(block);
    state.set('$onlyFlaky', true);
    const answer = { thrown: false };
    try {
        core.__trapForTests();
    } catch (error) {
        Object.assign(answer, { thrown: true, code: error.code, isUiFailure: error instanceof core.UiFailure });
    }
    answer.values = state.values();
    answer.view = core.evaluateUiBlock(block, state, { milliseconds: 10000 });
    return answer;
}

async function main() {
    const result = { violations: [] };
    addEventListener('securitypolicyviolation', (event) => {
        result.violations.push({ directive: event.effectiveDirective, blocked: event.blockedURI });
    });

    // The CSP is in force: eval is refused (script-src has no 'unsafe-eval').
    try {
        (0, eval)('1');
        result.evalRefused = false;
    } catch {
        result.evalRefused = true;
    }

    try {
        await core.ready();
        await core.ready();
        result.ready = true;
    } catch (error) {
        result.ready = described(error);
    }
    if (result.ready === true) {
        try {
            result.main = scenario(core);
            result.worker = await runWorker();
            result.trap = trap();
        } catch (error) {
            result.error = described(error);
        }
    }
    document.getElementById('status').textContent = 'done';
    console.log(`uiblocks:result ${JSON.stringify(result)}`);
}

if (typeof document !== 'undefined') main();
