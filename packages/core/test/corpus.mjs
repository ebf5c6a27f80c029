// The conformance corpus (tests/data/conformance/) as the package's tests read it: each case
// with its reply, scenario input, the reference's answers and the compile options the corpus
// was run with, and driver.md's comparison (equal as JSON without `message`, `expressions`
// and `expression`). A helper module, not a test file.

import { readFileSync, readdirSync, existsSync } from 'node:fs';

const CORPUS = new URL('../../../tests/data/conformance/', import.meta.url);
const IGNORED = new Set(['message', 'expressions', 'expression']);

/** `value` without the keys the comparison with the corpus ignores, at any depth. */
export function comparable(value) {
    if (Array.isArray(value)) return value.map(comparable);
    if (value !== null && typeof value === 'object') {
        return Object.fromEntries(Object.entries(value)
            .filter(([key]) => !IGNORED.has(key))
            .map(([key, inner]) => [key, comparable(inner)]));
    }
    return value;
}

const json = (name) => JSON.parse(readFileSync(new URL(name, CORPUS), 'utf8'));

/** The host's argument schemas the corpus registers (`hosts.json`). */
export const { querySchemas } = json('hosts.json');

/**
 * Every case, in name order: `{name, text, input, expected, options}`, where `options` are
 * the compile options of driver.md's comparison (id `reply`, the case's `final`, fence word
 * and latest attachment, the hosts' schemas, a frozen compile clock).
 */
export const corpus = readdirSync(CORPUS)
    .filter((name) => name.endsWith('.md') && name !== 'README.md')
    .sort()
    .map((file) => {
        const name = file.slice(0, -'.md'.length);
        const input = existsSync(new URL(`${name}.input.json`, CORPUS)) ? json(`${name}.input.json`) : {};
        return {
            name,
            text: readFileSync(new URL(file, CORPUS), 'utf8'),
            input,
            expected: json(`${name}.expected.json`),
            options: {
                id: 'reply', final: input.final ?? true, fenceLanguage: input.fenceLanguage,
                latestAttachment: input.latestAttachment, querySchemas, now: () => 0
            }
        };
    });
