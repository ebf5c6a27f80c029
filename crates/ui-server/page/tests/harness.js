// Runs the page's app.js in node, without a browser: a small stand-in for the DOM, fetch and
// EventSource, and a clock the test moves (timers fire in order as it advances). What the
// page asks for is logged; a test's `server` function answers each request.
"use strict";

const fs = require("fs");
const path = require("path");
const vm = require("vm");

const APP = path.join(__dirname, "..", "app.js");

class El {
  constructor(tag) {
    this.tagName = tag;
    this.children = [];
    this.attrs = {};
    this.dataset = {};
    this.style = {};
    this.hidden = false;
    this.textContent = "";
    this.className = "";
    this.classList = { toggle() {}, add() {}, remove() {} };
    this.isConnected = true;
  }
  addEventListener() {}
  removeEventListener() {}
  setAttribute(k, v) { this.attrs[k] = v; }
  getAttribute(k) { return this.attrs[k]; }
  append(...kids) { this.children.push(...kids); }
  replaceChildren(...kids) { this.children = kids; }
  querySelector() { return null; }
  querySelectorAll() { return []; }
  closest() { return null; }
  getClientRects() { return []; }
  focus() {}
  remove() {}
}

// `server(url, method, body, now)` answers `{status?, body?, headers?, delay?}`, or
// "network" for a request that fails to connect.
function makePage(server) {
  let now = 1_000_000;
  const timers = new Map();
  let nextId = 1;
  const log = [];
  const streams = [];
  const byId = {};
  const document = {
    hidden: false,
    activeElement: null,
    body: new El("body"),
    querySelector(sel) { return byId[sel] || (byId[sel] = new El("div")); },
    querySelectorAll() { return []; },
    createElement: (t) => new El(t),
    createElementNS: (_, t) => new El(t),
    createTextNode: (t) => ({ text: t }),
    createDocumentFragment: () => new El("frag"),
    addEventListener() {},
  };
  const headers = (h) => ({ get: (k) => (h || {})[k.toLowerCase()] ?? null });
  const ctx = {
    console, document, URLSearchParams, AbortController, TypeError, JSON, Math, Object, Array,
    Map, Set, Promise, Number, String, Error, isFinite, isNaN,
    CSS: { escape: (s) => s },
    crypto: require("crypto").webcrypto, // global only from Node 19; Debian's is 18
    location: { origin: "http://127.0.0.1", search: "" },
    navigator: {},
    Node: El,
    Element: El,
    addEventListener() {},
    setTimeout(f, ms) {
      const id = nextId++;
      timers.set(id, { at: now + Math.max(0, ms || 0), f });
      return id;
    },
    clearTimeout(id) { timers.delete(id); },
    setInterval(f, ms) {
      const id = nextId++;
      const t = { at: now + ms, f: null };
      t.f = () => { t.at = now + ms; timers.set(id, t); f(); };
      timers.set(id, t);
      return id;
    },
    clearInterval(id) { timers.delete(id); },
    async fetch(url, init = {}) {
      const method = init.method || "GET";
      const body = init.body ? JSON.parse(init.body) : undefined;
      log.push({ t: now, method, url, body });
      const answer = server(url, method, body, now);
      if (answer === "network") throw new TypeError("network");
      if (answer.delay) {
        // An aborted request fails at once, as a browser's does.
        await new Promise((done, fail) => {
          ctx.setTimeout(done, answer.delay);
          if (init.signal) init.signal.addEventListener("abort", () => fail(new Error("AbortError")));
        });
      }
      const status = answer.status || 200;
      return {
        ok: status >= 200 && status < 300,
        status,
        headers: headers(answer.headers),
        json: async () => answer.body,
        text: async () => (answer.body === undefined ? "" : JSON.stringify(answer.body)),
      };
    },
    EventSource: class {
      constructor(url) {
        this.url = url;
        this.readyState = 0;
        this.listeners = {};
        streams.push(this);
        log.push({ t: now, method: "SSE", url });
      }
      addEventListener(name, f) { (this.listeners[name] = this.listeners[name] || []).push(f); }
      emit(name, data, id) {
        for (const f of this.listeners[name] || []) f({ data: JSON.stringify(data), lastEventId: id });
      }
      close() { this.readyState = 2; }
    },
  };
  ctx.window = ctx;
  const RealDate = Date;
  ctx.Date = class extends RealDate {
    constructor(...a) { if (a.length) super(...a); else super(now); }
    static now() { return now; }
    static parse(s) { return RealDate.parse(s); }
  };
  vm.createContext(ctx);
  const source = fs.readFileSync(APP, "utf8") + "\nglobalThis.__page = { feed, page };";
  const settle = async () => { for (let i = 0; i < 20; i++) await new Promise((r) => setImmediate(r)); };
  return {
    log,
    streams,
    now: () => now,
    /// The page's objects: `feed` (the change feed) and `page` (with `blocks`).
    get app() { return ctx.__page; },
    async start() { vm.runInContext(source, ctx); await settle(); },
    /// Moves the clock `ms` on, firing every timer due on the way in order.
    async advance(ms) {
      const end = now + ms;
      for (;;) {
        let next = null;
        let nextKey = null;
        for (const [id, t] of timers) if (t.at <= end && (!next || t.at < next.at)) { next = t; nextKey = id; }
        if (!next) break;
        timers.delete(nextKey);
        now = next.at;
        next.f();
        await settle();
      }
      now = end;
      await settle();
    },
    /// The stand-in element the page reaches as `$(selector)`.
    element(selector) { return document.querySelector(selector); },
    /// The requests to `url` logged so far.
    requests(url) { return log.filter((r) => r.url === url); },
  };
}

module.exports = { makePage };
