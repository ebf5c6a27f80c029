// The browser test's module worker (page.mjs starts it): @uiblocks/core before and after
// `await ready()`, then the scenario; posts its answer to the page.
// `node --test test/` runs every script under test/, this one too: outside a worker it does nothing.

import * as core from '../../src/index.js';
import { scenario } from './scenario.mjs';

async function main() {
    const answer = {};
    // Before ready(), a worker cannot load the module synchronously: `not_ready`.
    try {
        core.uiHasFence('```ui\n');
        answer.beforeReady = { thrown: false };
    } catch (error) {
        answer.beforeReady = { thrown: true, code: error.code, isUiFailure: error instanceof core.UiFailure };
    }
    try {
        await core.ready();
        answer.scenario = scenario(core);
    } catch (error) {
        answer.error = { name: error?.name, code: error?.code, message: String(error?.message ?? error) };
    }
    postMessage(answer);
}

if (typeof WorkerGlobalScope !== 'undefined' && globalThis instanceof WorkerGlobalScope) main();
