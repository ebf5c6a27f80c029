#!/usr/bin/env node
// The JSON-lines driver of driver.md over @uiblocks/core: one request per line of standard
// input, one answer per line of standard output, in order. The answers are the bytes
// `uiblocks driver` writes (both come from the Rust crate ui-driver). Lines are split at
// line feeds only; a carriage return before one is dropped, and a blank line is skipped.

import { uiDriverAnswer } from '../src/index.js';

const decoder = new TextDecoder();
let pending = Buffer.alloc(0);
let output = [];
let outputBytes = 0;

/** Writes what is buffered; resolves when the stream can take more. */
function flush() {
    if (output.length === 0) return Promise.resolve();
    const chunk = output.join('');
    output = [];
    outputBytes = 0;
    return new Promise((resolve) => {
        if (process.stdout.write(chunk)) resolve();
        else process.stdout.once('drain', resolve);
    });
}

function answer(bytes) {
    let line = decoder.decode(bytes);
    if (line.endsWith('\r')) line = line.slice(0, -1);
    const text = uiDriverAnswer(line);
    if (text !== '') {
        output.push(text, '\n');
        outputBytes += text.length + 1;
    }
}

for await (const chunk of process.stdin) {
    pending = pending.length ? Buffer.concat([pending, chunk]) : chunk;
    let start = 0;
    for (let end = pending.indexOf(10, start); end !== -1; end = pending.indexOf(10, start)) {
        answer(pending.subarray(start, end));
        start = end + 1;
        // Answer as we go, so a host waiting for each answer gets it at once.
        if (outputBytes > 0 && (pending.indexOf(10, start) === -1 || outputBytes > 1 << 20)) await flush();
    }
    pending = pending.subarray(start);
}
if (pending.length) answer(pending);
await flush();
