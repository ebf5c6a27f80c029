// The page's client rules that need no browser (`cargo xtask ci` runs this with
// `node --test`): the cadence survives a signed-out spell, a refused chat is not re-read
// for every change, and edits are never undone by an answer that arrives later.
"use strict";

const test = require("node:test");
const assert = require("node:assert/strict");
const { makePage } = require("./harness");

/// A chat `c1` of alice with one finished reply holding `block`.
function chatWith(block) {
  return { id: "c1", title: "t", items: [{ id: "i1", role: "assistant", text: "x", ui: [block], streaming: false }] };
}

/// Answers the page's own requests; `ui` answers `/ui/query` and `/ui/view` (and may
/// override the rest).
function server(block, state, ui) {
  return (url, method, body, now) => {
    const own = ui(url, body, now);
    if (own) return own;
    if (url === "/api/session") return { body: { user: { userId: "alice", projects: ["web"] } } };
    if (url === "/api/chats") return { body: { chats: [{ id: "c1", title: "t", project: "web" }] } };
    if (url === "/api/chats/c1") return { body: chatWith(block) };
    if (url.startsWith("/ui/poll")) {
      if (state.signedOut) return { status: 401, body: { error: { code: "unauthenticated" } } };
      return { body: { epoch: "e", cursor: "e." + state.head, events: [], reset: null } };
    }
    if (url.startsWith("/ui/events")) return { status: 200 };
    return { status: 404, body: { error: { code: "not-found" } } };
  };
}

const runs = { id: "b1", revision: "r1", complete: true, queries: { $runs: { source: "ci.runs" } }, defaults: {}, nodes: [], fallback: "", start: 0, end: 1 };

test("after a signed-out spell every block reads on its 10 s cadence again", async () => {
  const state = { head: 5, signedOut: false };
  let n = 0;
  const page = makePage(server(runs, state, (url, body, now) => {
    if (url === "/ui/query") {
      if (state.signedOut) return { status: 401, body: { error: { code: "unauthenticated" } } };
      return { body: { state: "fresh", value: ++n, readId: "r" + n, readAt: now } };
    }
    if (url === "/ui/view") return { body: { values: body.values, view: { nodes: [] } } };
  }));
  await page.start();
  await page.advance(35_000);
  assert.ok(page.requests("/ui/query").length >= 3, "the block reads on its cadence");
  // The session is refused for a while (a sign-in elsewhere, an expired token), then works.
  state.signedOut = true;
  await page.advance(10_000);
  assert.equal(page.app.feed.signedOut, true);
  state.signedOut = false;
  await page.advance(70_000);
  assert.equal(page.app.feed.signedOut, false);
  const before = page.requests("/ui/query").length;
  await page.advance(300_000);
  const after = page.requests("/ui/query").length - before;
  assert.ok(after >= 25, `${after} reads in the 5 minutes after the spell, not about 30`);
});

test("a session the server no longer knows takes the page back to sign-in", async () => {
  // The demo server restarted and forgot its sessions: every read is 401 and
  // `/api/session` says nobody is signed in.
  const state = { head: 5, signedOut: false };
  const base = server(runs, state, (url, body, now) => {
    if (url === "/ui/query") {
      if (state.signedOut) return { status: 401, body: { error: { code: "unauthenticated" } } };
      return { body: { state: "fresh", value: 1, readId: "r1", readAt: now } };
    }
    if (url === "/ui/view") return { body: { values: body.values, view: { nodes: [] } } };
  });
  const page = makePage((url, method, body, now) => {
    if (url === "/api/session" && state.signedOut) return { body: { user: null } };
    return base(url, method, body, now);
  });
  await page.start();
  await page.advance(12_000);
  assert.equal(page.app.page.me.userId, "alice");
  const sessionChecks = page.requests("/api/session").length;
  state.signedOut = true;
  await page.advance(12_000);
  assert.equal(page.requests("/api/session").length, sessionChecks + 1, "asked once");
  assert.equal(page.app.page.me, null, "signed out on the page too");
  assert.equal(page.app.feed.running, false, "the feed stopped");
  assert.equal(page.element("#signin").hidden, false, "the sign-in screen is back");
  assert.match(page.element("#signin-error").textContent, /session ended/);
  // Nothing more is asked of the server until someone signs in.
  const asked = page.log.length;
  await page.advance(300_000);
  assert.equal(page.log.length, asked, JSON.stringify(page.log.slice(asked, asked + 3)));
});

test("a refusal while the session still holds keeps the page and asks once", async () => {
  const state = { head: 5, signedOut: false };
  const page = makePage(server(runs, state, (url, body, now) => {
    if (url === "/ui/query") {
      if (state.signedOut) return { status: 401, body: { error: { code: "unauthenticated" } } };
      return { body: { state: "fresh", value: 1, readId: "r1", readAt: now } };
    }
    if (url === "/ui/view") return { body: { values: body.values, view: { nodes: [] } } };
  }));
  await page.start();
  await page.advance(12_000);
  const sessionChecks = page.requests("/api/session").length;
  state.signedOut = true;
  await page.advance(130_000);
  assert.equal(page.requests("/api/session").length, sessionChecks + 1);
  assert.equal(page.app.page.me.userId, "alice");
  assert.equal(page.app.feed.signedOut, true);
  assert.equal(page.element("#signin").hidden, true);
});

test("a reading refused with 403 is not read again for each change", async () => {
  const state = { head: 5, denied: false };
  let n = 0;
  const page = makePage(server(runs, state, (url, body, now) => {
    if (url === "/ui/query") {
      if (state.denied) return { status: 403, body: { error: { code: "refused-query", message: "no" } } };
      return { body: { state: "fresh", value: ++n, readId: "r" + n, readAt: now, sync: { epoch: "e", version: state.head, scope: "S", keys: [], feed: "partial" } } };
    }
    if (url === "/ui/view") return { body: { values: body.values, view: { nodes: [] } } };
  }));
  await page.start();
  await page.advance(1_500);
  const stream = page.streams.at(-1);
  stream.readyState = 1;
  stream.emit("hello", { cursor: "e.5" });
  await page.advance(12_000);
  // The chat is no longer the caller's: the next read is refused.
  state.denied = true;
  await page.advance(10_000);
  const block = page.app.page.blocks.get("b1");
  assert.equal(block.readings.$runs.code, "refused-query");
  const before = page.requests("/ui/query").length;
  // The source keeps changing, once every 2 s for a minute.
  for (let i = 0; i < 30; i++) {
    state.head++;
    stream.emit("changes", { cursor: "e." + state.head, events: [{ seq: state.head, source: "ci.runs", scope: "S", key: null, rs: null, at: 0, n: 1 }] });
    await page.advance(2_000);
  }
  const reads = page.requests("/ui/query").slice(before);
  assert.equal(reads.filter((r) => r.body.seen).length, 0, "no change-driven read of a refused chat");
  assert.ok(reads.length <= 7, `${reads.length} reads in a minute: the 10 s cadence only`);
});

test("an edit made while a read is in flight is kept, and the query is read with it", async () => {
  const block = {
    ...runs,
    defaults: { $branch: "main" },
    nodes: [{ id: "n1", type: "Segmented", complete: true, bindings: { value: "$branch" }, children: [] }],
  };
  let n = 0;
  const page = makePage(server(block, { head: 5 }, (url, body, now) => {
    if (url === "/ui/view") {
      const values = { ...body.values };
      if (body.change) values.$branch = body.change.value;
      return { delay: 50, body: { values, view: { nodes: [] } } };
    }
    if (url === "/ui/query") return { delay: 30, body: { state: "fresh", value: ++n, readId: "r" + n, readAt: now } };
  }));
  await page.start();
  const view = page.app.page.blocks.get("b1");
  // Up to just after the cadence read left: it is in flight when the person picks "dev".
  const cadence = () => page.requests("/ui/query").length;
  const first = cadence();
  while (cadence() === first) await page.advance(5);
  await page.advance(5);
  const picked = view.change("n1", "value", "dev");
  await page.advance(2_000);
  await picked;
  assert.deepEqual({ ...view.values }, { $branch: "dev" });
  const last = page.requests("/ui/query").at(-1);
  assert.deepEqual(last.body.values, { $branch: "dev" });
});

test("two quick checklist toggles keep both", async () => {
  const block = {
    ...runs,
    defaults: { $picked: [] },
    nodes: [],
  };
  const page = makePage(server(block, { head: 5 }, (url, body, now) => {
    if (url === "/ui/view") {
      const values = { ...body.values };
      if (body.change) values.$picked = body.change.value;
      return { delay: 40, body: { values, view: { nodes: [] } } };
    }
    if (url === "/ui/query") return { body: { state: "fresh", value: [], readId: "r", readAt: now } };
  }));
  await page.start();
  const view = page.app.page.blocks.get("b1");
  // What the checklist sends: a toggle of one item against the values of that moment.
  const toggle = (item) => (values) => {
    const now = values.$picked;
    return now.includes(item) ? now.filter((c) => c !== item) : [...now, item];
  };
  const a = view.change("n1", "value", toggle("a"));
  const b = view.change("n1", "value", toggle("b"));
  await page.advance(1_000);
  await Promise.all([a, b]);
  assert.deepEqual([...view.values.$picked], ["a", "b"]);
});

test("a /ui/view that never answers fails after 30 s, and the next edit goes out", async () => {
  const block = {
    ...runs,
    defaults: { $branch: "main" },
    nodes: [{ id: "n1", type: "Segmented", complete: true, bindings: { value: "$branch" }, children: [] }],
  };
  let lost = true;
  const page = makePage(server(block, { head: 5 }, (url, body, now) => {
    if (url === "/ui/view") {
      const values = { ...body.values };
      if (body.change) values.$branch = body.change.value;
      // The first edit's request is lost on the way: no answer for an hour.
      if (body.change && lost) {
        lost = false;
        return { delay: 3_600_000, body: { values, view: { nodes: [] } } };
      }
      return { body: { values, view: { nodes: [] } } };
    }
    if (url === "/ui/query") return { body: { state: "fresh", value: 1, readId: "r", readAt: now } };
  }));
  await page.start();
  const view = page.app.page.blocks.get("b1");
  const first = view.change("n1", "value", "dev");
  const second = view.change("n1", "value", "ops");
  await page.advance(29_000);
  assert.equal(page.requests("/ui/view").filter((r) => r.body.change).length, 1, "the second waits its turn");
  await page.advance(2_000);
  await Promise.all([first, second]);
  assert.deepEqual({ ...view.values }, { $branch: "ops" });
});
