// uiblocks demo page: plain JavaScript, no build step.
// Draws every catalog component from the view tree of `POST /ui/view`:
// Summary, Callout, Tag, Progress, Steps, Step, Stats, Stat, EntityList, Entry, Table,
// Column, Chart, Tabs, Tab, Sections, Section, CodeBlock, Image, Sources, Source, File,
// Diff, Commit, Node, Checklist, Item, Switch, Slider, Segmented, Option, Button, Show,
// Each, Choices, Choice. (Show and Each are resolved by the evaluation: they never reach
// the page as nodes of their own.)
"use strict";

const REFRESH_MS = 10000; // host.md §10: one refresh cycle per 10 s per block
const REST_MS = 300; // an input change rests 300 ms before it is read
const CHANGE_WINDOW_MS = 250; // sync.md §7.7: non-resetting window after a counter moves
const MIN_CHANGE_GAP_MS = 1000; // at most one change-driven read per query per second
const HEALTHY_MS = 45000; // sync.md §7.2
const POLL_HEALTHY_MS = 60000;
const POLL_UNHEALTHY_MS = 2000;
const MAX_QUERIES_PER_CYCLE = 8;
const MAX_LINKS = 64;

const REASONS = {
  busy: "The data source is busy; showing the last value.",
  "refresh-limit": "Refreshed too often; the next read comes shortly.",
  "timed-out": "The read took too long.",
  unreadable: "The server could not be reached.",
  "rate-limited": "Too many reads; slowing down.",
  "refused-query": "This query is not allowed here.",
  unattached: "This chat is not yours to read.",
  "too-large": "The answer was too large to show.",
  "invalid-args": "The query's arguments were refused.",
  "unknown-query": "The block names a query the host does not know.",
  "unknown-source": "The block names a source the host does not know.",
  "stale-ui-block": "The block changed; reload the chat.",
  unavailable: "The data source is unavailable.",
  internal: "The server failed while reading.",
};

const TONE_ICON = { info: "ℹ", success: "✓", warning: "⚠", danger: "✕", neutral: "•" };
const STEP_ICON = { done: "✓", running: "◐", pending: "○", failed: "✕", skipped: "–" };
const COLORS = ["#2456c7", "#1a7f37", "#c62828", "#9a6700", "#7b3fb5", "#0f7c8c"];

// ---------- small helpers ----------

const $ = (sel) => document.querySelector(sel);

function h(tag, attrs, ...kids) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === "class") el.className = v;
    else if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else if (k === "text") el.textContent = v;
    else el.setAttribute(k, v === true ? "" : v);
  }
  for (const kid of kids.flat()) {
    if (kid === null || kid === undefined || kid === false) continue;
    el.append(kid instanceof Node ? kid : document.createTextNode(String(kid)));
  }
  return el;
}

function svg(tag, attrs, ...kids) {
  const el = document.createElementNS("http://www.w3.org/2000/svg", tag);
  for (const [k, v] of Object.entries(attrs || {})) el.setAttribute(k, v);
  for (const kid of kids.flat()) if (kid) el.append(kid instanceof Node ? kid : document.createTextNode(String(kid)));
  return el;
}

async function api(method, path, body) {
  const init = { method, headers: {}, credentials: "same-origin" };
  if (body !== undefined) {
    init.headers["content-type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  const res = await fetch(path, init);
  const text = await res.text();
  let json = null;
  try { json = text ? JSON.parse(text) : null; } catch (_) { json = null; }
  if (!res.ok) {
    const err = new Error((json && json.error && json.error.message) || res.statusText);
    err.status = res.status;
    err.code = json && json.error && json.error.code;
    err.reason = json && json.error && json.error.reason;
    throw err;
  }
  return json;
}

function scalarText(v) {
  if (v === null || v === undefined) return "";
  if (typeof v === "object") return JSON.stringify(v);
  return String(v);
}

function fmtNumber(n) {
  if (typeof n !== "number" || !isFinite(n)) return scalarText(n);
  return n.toLocaleString(undefined, { maximumFractionDigits: 2 });
}

function withUnit(n, unit) {
  const s = fmtNumber(n);
  if (!unit) return s;
  return unit === "%" ? s + "%" : s + " " + unit;
}

function fmtBytes(n) {
  if (typeof n !== "number") return scalarText(n);
  const units = ["B", "KB", "MB", "GB", "TB"];
  let i = 0;
  while (Math.abs(n) >= 1024 && i < units.length - 1) { n /= 1024; i++; }
  return fmtNumber(n) + " " + units[i];
}

function fmtDuration(ms) {
  if (typeof ms !== "number") return scalarText(ms);
  if (ms < 1000) return fmtNumber(ms) + " ms";
  const s = ms / 1000;
  if (s < 60) return fmtNumber(s) + " s";
  const m = Math.floor(s / 60);
  const rest = Math.round(s - m * 60);
  if (m < 60) return `${m} min ${rest} s`;
  return `${Math.floor(m / 60)} h ${m % 60} min`;
}

function fmtDate(v) {
  const d = typeof v === "number" || typeof v === "string" ? new Date(v) : null;
  if (!d || isNaN(d.getTime())) return scalarText(v);
  return d.toLocaleString();
}

// Minimal Markdown: paragraphs, **bold**, `code`. Text only, never HTML.
function prose(text) {
  const wrap = h("div", { class: "prose" });
  for (const para of text.split(/\n{2,}/)) {
    if (!para.trim()) continue;
    const p = h("p");
    for (const part of para.split(/(\*\*[^*]+\*\*|`[^`]+`)/)) {
      if (part.startsWith("**") && part.endsWith("**") && part.length > 4) p.append(h("strong", { text: part.slice(2, -2) }));
      else if (part.startsWith("`") && part.endsWith("`") && part.length > 2) p.append(h("code", { text: part.slice(1, -1) }));
      else if (part) p.append(part);
    }
    wrap.append(p);
  }
  return wrap;
}

// UTF-16 offsets: JavaScript strings are UTF-16, so slice works directly.
function splitReply(text, blocks) {
  const parts = [];
  let at = 0;
  for (const b of [...blocks].sort((a, b) => a.start - b.start)) {
    if (b.start > at) parts.push({ text: text.slice(at, b.start) });
    parts.push({ block: b });
    at = Math.max(at, b.end);
  }
  if (at < text.length) parts.push({ text: text.slice(at) });
  return parts;
}

// ---------- page state ----------

const page = {
  me: null,
  chats: [],
  chatId: null,
  detail: null,
  blocks: new Map(), // blockId -> BlockView
  pageId: (crypto.randomUUID && crypto.randomUUID()) || String(Math.random()).slice(2),
};

// ---------- the change feed: one transport per page ----------

const feed = {
  es: null,
  cursor: null,
  epoch: null,
  lastFrameAt: 0,
  state: "idle",
  pollTimer: null,
  healthTimer: null,
  reconnectTimer: null,
  attempts: 0,
  failures: 0,
  lastPollAt: 0,
  pollInFlight: false,
  signedOut: false,

  healthy() {
    return this.es !== null && this.es.readyState === 1 && Date.now() - this.lastFrameAt < HEALTHY_MS;
  },

  show() {
    const label = this.signedOut ? "signed out" : this.healthy() ? "live" : this.es ? "connecting…" : "polling";
    $("#feed-state").textContent = "feed: " + label + (this.cursor ? " · " + this.cursor : "");
  },

  start() {
    this.stop();
    this.signedOut = false;
    this.poll(); // a poll when the transport starts establishes the cursor
    this.connect();
    this.healthTimer = setInterval(() => {
      if (this.es && Date.now() - this.lastFrameAt > HEALTHY_MS) {
        // A buffering proxy can hold a silent stream: close it and reconnect.
        this.es.close();
        this.es = null;
        this.reconnect();
      }
      this.show();
    }, 5000);
  },

  stop() {
    if (this.es) this.es.close();
    this.es = null;
    clearTimeout(this.pollTimer);
    clearTimeout(this.reconnectTimer);
    clearInterval(this.healthTimer);
    this.pollTimer = this.reconnectTimer = this.healthTimer = null;
    this.cursor = null;
    this.epoch = null;
    this.show();
  },

  connect() {
    const url = "/ui/events" + (this.cursor ? "?cursor=" + encodeURIComponent(this.cursor) : "");
    let es;
    try { es = new EventSource(url); } catch (_) { this.reconnect(); return; }
    this.es = es;
    const frame = (name, fn) => es.addEventListener(name, (e) => {
      this.lastFrameAt = Date.now();
      let data = {};
      try { data = JSON.parse(e.data); } catch (_) { /* ignore */ }
      fn(data, e);
      this.show();
      this.schedulePoll();
    });
    frame("hello", (d) => { this.attempts = 0; this.adopt(d.cursor, true); });
    frame("tick", (d) => this.adopt(d.cursor));
    frame("changes", (d) => this.deliver(d.events || [], d.cursor));
    frame("reset", (d) => this.reset(d.cursor));
    frame("bye", (d) => {
      es.close();
      if (this.es === es) this.es = null;
      this.reconnect(typeof d.retryMs === "number" ? d.retryMs : undefined);
    });
    es.onerror = () => {
      if (es.readyState === 2) {
        if (this.es === es) this.es = null;
        this.reconnect();
      }
      this.show();
      this.schedulePoll();
    };
  },

  reconnect(first) {
    clearTimeout(this.reconnectTimer);
    if (this.signedOut || !page.me) return;
    const base = first !== undefined ? first : Math.min(30000, 1000 * 2 ** this.attempts);
    this.attempts++;
    const delay = base * (0.8 + Math.random() * 0.4);
    this.reconnectTimer = setTimeout(() => this.connect(), delay);
    this.schedulePoll();
  },

  epochOf(cursor) {
    return cursor ? String(cursor).split(".")[0] : null;
  },

  seqOf(cursor) {
    const n = Number(String(cursor || "").split(".")[1]);
    return isFinite(n) ? n : 0;
  },

  // The cursor only moves forward within an epoch; an epoch change is a reset.
  adopt(cursor, fromHello) {
    if (!cursor) return;
    const epoch = this.epochOf(cursor);
    if (this.epoch && epoch !== this.epoch) { this.reset(cursor); return; }
    if (!this.cursor || this.seqOf(cursor) > this.seqOf(this.cursor) || fromHello && !this.cursor) {
      this.cursor = cursor;
    }
    this.epoch = epoch;
  },

  reset(cursor) {
    this.cursor = cursor || null;
    this.epoch = this.epochOf(cursor);
    // Every reading is stale: re-read what is visible.
    for (const view of page.blocks.values()) view.markAllStale(cursor);
    changes.flushSoon();
  },

  deliver(events, cursor) {
    const floor = this.seqOf(this.cursor);
    const epoch = this.epochOf(cursor);
    if (this.epoch && epoch && epoch !== this.epoch) { this.reset(cursor); return; }
    const fresh = events.filter((e) => typeof e.seq !== "number" || e.seq > floor);
    this.adopt(cursor);
    if (fresh.length) changes.receive(fresh, cursor);
  },

  interval() {
    const base = this.healthy() ? POLL_HEALTHY_MS : POLL_UNHEALTHY_MS;
    const backoff = Math.min(300000, base * 2 ** Math.min(this.failures, 5));
    return this.failures ? backoff : document.hidden ? Math.max(base, 10000) : base;
  },

  schedulePoll() {
    if (!page.me || this.pollInFlight) return;
    clearTimeout(this.pollTimer);
    const wait = Math.max(0, this.lastPollAt + this.interval() - Date.now());
    this.pollTimer = setTimeout(() => this.poll(), wait);
  },

  async poll() {
    if (!page.me || this.pollInFlight) return;
    clearTimeout(this.pollTimer);
    this.pollInFlight = true;
    this.lastPollAt = Date.now();
    try {
      const q = this.cursor ? "?cursor=" + encodeURIComponent(this.cursor) : "";
      const body = await api("GET", "/ui/poll" + q);
      this.failures = 0;
      if (body.reset) this.reset(body.cursor);
      else this.deliver(body.events || [], body.cursor);
    } catch (e) {
      if (e.status === 401 || e.status === 403) {
        this.signedOut = true;
        if (this.es) this.es.close();
        this.es = null;
      } else if (e.status !== 429) {
        this.failures++;
      }
    } finally {
      this.pollInFlight = false;
      this.show();
      if (this.signedOut) this.pollTimer = setTimeout(() => { this.signedOut = false; this.poll(); }, 60000);
      else this.schedulePoll();
    }
  },
};

// Counters and the 250 ms window of change-driven re-reads (sync.md §7.5, §7.7).
const changes = {
  scope: new Map(), // scope -> max seq
  whole: new Map(), // scope -> max seq of key-less events
  key: new Map(), // key -> max seq
  windowTimer: null,
  lastCursor: null,
  chatsDirty: false,

  bump(map, k, seq) {
    if (k === null || k === undefined) return;
    if (!(map.get(k) >= seq)) map.set(k, seq);
  },

  receive(events, cursor) {
    for (const e of events) {
      const seq = typeof e.seq === "number" ? e.seq : feed.seqOf(cursor);
      this.bump(this.scope, e.scope, seq);
      if (e.key === null || e.key === undefined) this.bump(this.whole, e.scope, seq);
      else this.bump(this.key, e.key, seq);
      if (e.source === "host.chats") this.chatsDirty = true;
    }
    this.lastCursor = cursor;
    // A non-resetting window: events during it join, it is not extended.
    if (!this.windowTimer) this.windowTimer = setTimeout(() => this.flush(), CHANGE_WINDOW_MS);
  },

  flushSoon() {
    if (!this.windowTimer) this.windowTimer = setTimeout(() => this.flush(), CHANGE_WINDOW_MS);
  },

  // The counter value that makes a reading stale, or 0.
  staleBy(sync) {
    if (!sync) return 0;
    if (feed.epoch && sync.epoch && sync.epoch !== feed.epoch) return feed.seqOf(feed.cursor) || 1;
    let top;
    if (!sync.keys || sync.keys.length === 0) top = this.scope.get(sync.scope) || 0;
    else top = Math.max(this.whole.get(sync.scope) || 0, ...sync.keys.map((k) => this.key.get(k) || 0));
    return top > sync.version ? top : 0;
  },

  flush() {
    this.windowTimer = null;
    if (feed.signedOut) return;
    for (const view of page.blocks.values()) view.onChanges(this);
    if (this.chatsDirty) {
      this.chatsDirty = false;
      reloadChat(true);
    }
  },
};

// ---------- one block on screen ----------

class BlockView {
  constructor(chatId, item, block, frozen, answer) {
    this.chatId = chatId;
    this.item = item;
    this.block = block;
    this.frozen = frozen; // {revision, readings, links, fallback} or undefined
    this.answer = answer;
    this.values = { ...(block.defaults || {}) };
    this.defaultsKey = JSON.stringify(this.values);
    this.readings = {}; // name -> latest reading (any state)
    this.good = {}; // name -> {inputs, reading}: last fresh reading per input set
    this.stale = {}; // name -> seen cursor
    this.inFlight = {};
    this.lastChangeRead = {};
    this.links = new Map(); // nodeId -> resolution
    this.linkKey = "";
    this.cycleTimer = null;
    this.restTimer = null;
    this.refreshing = false;
    this.visible = true;
    this.view = null;
    this.error = null;
    this.el = h("div", { class: "block", role: "group" });
    this.body = h("div", { class: "block-body" });
    this.status = h("div", { class: "block-status", "aria-live": "polite" });
    this.el.append(this.body, this.status);
    if (frozen && frozen.revision === block.revision) {
      for (const [name, r] of Object.entries(frozen.readings || {})) {
        this.readings[name] = r;
        if (r.state === "fresh") this.good[name] = { inputs: this.defaultsKey, reading: r };
      }
      for (const [id, res] of Object.entries(frozen.links || {})) this.links.set(id, res);
    }
    if ("IntersectionObserver" in window) {
      this.observer = new IntersectionObserver((entries) => {
        const was = this.visible;
        this.visible = entries.some((e) => e.isIntersecting);
        if (this.visible && !was) this.trigger();
      });
      this.observer.observe(this.el);
    }
  }

  get queryNames() {
    return Object.keys(this.block.queries || {});
  }

  get live() {
    return !this.item.streaming && this.block.complete && !!this.block.revision && this.queryNames.length > 0;
  }

  get inputsKey() {
    return JSON.stringify(this.values);
  }

  dispose() {
    clearTimeout(this.cycleTimer);
    clearTimeout(this.restTimer);
    if (this.observer) this.observer.disconnect();
  }

  // What /ui/view gets: the value of each query's usable reading for the current inputs.
  readingValues() {
    const out = {};
    for (const name of this.queryNames) {
      const g = this.good[name];
      if (g && g.inputs === this.inputsKey && g.reading.value !== undefined) out[name] = g.reading.value;
      else if (g && g.reading.value !== undefined) out[name] = g.reading.value; // muted last value
    }
    return out;
  }

  reads() {
    const out = {};
    for (const name of this.queryNames) {
      const g = this.good[name];
      if (g && g.inputs === this.inputsKey && g.reading.readId) out[name] = g.reading.readId;
    }
    return out;
  }

  async evaluate(extra) {
    const body = {
      chatId: this.chatId,
      itemId: this.item.id,
      blockId: this.block.id,
      values: this.values,
      readings: this.readingValues(),
      ...extra,
    };
    if (this.block.revision) body.revision = this.block.revision;
    try {
      const answer = await api("POST", "/ui/view", body);
      this.values = answer.values || this.values;
      this.view = answer.view;
      this.error = null;
    } catch (e) {
      this.error = e;
      if (extra) return; // a refused edit keeps the drawing as it was
    }
    this.draw();
    this.checkLinks();
  }

  async change(nodeId, prop, value) {
    const before = this.inputsKey;
    await this.evaluate({ change: { nodeId, prop, value } });
    if (this.inputsKey !== before) this.inputsChanged();
  }

  async press(nodeId) {
    const before = this.inputsKey;
    await this.evaluate({ press: nodeId });
    if (this.inputsKey !== before) this.inputsChanged();
  }

  inputsChanged() {
    if (!this.live) return;
    clearTimeout(this.restTimer);
    // Frozen readings serve the default inputs; other inputs are read once they rest.
    this.restTimer = setTimeout(() => this.cycle(), REST_MS);
  }

  trigger() {
    if (!this.live || !this.visible || document.hidden) return;
    const since = Date.now() - (this.lastCycleAt || 0);
    if (since >= REFRESH_MS) this.cycle();
    else this.scheduleCycle(REFRESH_MS - since);
  }

  scheduleCycle(ms) {
    clearTimeout(this.cycleTimer);
    this.cycleTimer = setTimeout(() => this.cycle(), ms);
  }

  async cycle() {
    if (!this.live) return;
    clearTimeout(this.cycleTimer);
    if (!this.visible || document.hidden || feed.signedOut) { this.scheduleCycle(REFRESH_MS); return; }
    if (this.refreshing) return;
    this.refreshing = true;
    this.lastCycleAt = Date.now();
    this.drawStatus();
    try {
      for (const name of this.queryNames.slice(0, MAX_QUERIES_PER_CYCLE)) {
        if (!this.visible) break;
        await this.read(name);
      }
    } finally {
      this.refreshing = false;
      await this.evaluate();
      this.scheduleCycle(REFRESH_MS);
    }
  }

  async read(name, seen) {
    if (this.inFlight[name]) { this.inFlight[name].trailing = seen || true; return; }
    const slot = { trailing: null };
    this.inFlight[name] = slot;
    const inputs = this.inputsKey;
    const body = {
      chatId: this.chatId,
      itemId: this.item.id,
      blockId: this.block.id,
      revision: this.block.revision,
      query: name,
      values: this.values,
    };
    if (typeof seen === "string") body.seen = seen;
    let reading;
    try {
      reading = await api("POST", "/ui/query", body);
    } catch (e) {
      reading = { state: "failed", code: e.code || "unreadable", reason: e.message, readAt: Date.now() };
      if (e.status === 401) feed.signedOut = true;
    }
    this.readings[name] = reading;
    if (reading.state === "fresh") {
      this.good[name] = { inputs, reading };
      delete this.stale[name];
    }
    delete this.inFlight[name];
    if (slot.trailing) await this.read(name, typeof slot.trailing === "string" ? slot.trailing : undefined);
  }

  markAllStale(cursor) {
    for (const name of this.queryNames) this.stale[name] = cursor || "";
  }

  // A `changes` frame moved a counter: re-read each visible stale reading once.
  onChanges(counters) {
    if (!this.live || !this.visible || document.hidden) return;
    const due = [];
    for (const name of this.queryNames) {
      const r = this.good[name] && this.good[name].reading;
      const by = r ? counters.staleBy(r.sync) : 0;
      if (by || name in this.stale) due.push([name, counters.lastCursor || this.stale[name]]);
    }
    if (!due.length) return;
    (async () => {
      for (const [name, seen] of due) {
        const gap = Date.now() - (this.lastChangeRead[name] || 0);
        if (gap < MIN_CHANGE_GAP_MS) await new Promise((r) => setTimeout(r, MIN_CHANGE_GAP_MS - gap));
        this.lastChangeRead[name] = Date.now();
        await this.read(name, seen || undefined);
      }
      await this.evaluate();
    })();
  }

  // ---- links ----

  linkNodes() {
    const out = [];
    const walk = (n) => {
      if (["File", "Diff", "Commit", "Node"].includes(n.type) && n.complete && !n.error) out.push(n);
      if (n.complete && !n.error) (n.children || []).forEach(walk);
    };
    if (this.view) this.view.nodes.forEach(walk);
    return out.slice(0, MAX_LINKS);
  }

  async checkLinks() {
    if (!this.block.revision) return;
    const nodes = this.linkNodes();
    const key = JSON.stringify([nodes.map((n) => [n.id, n.props]), this.inputsKey, this.reads()]);
    if (key === this.linkKey) return;
    this.linkKey = key;
    let changed = false;
    await Promise.all(nodes.map(async (n) => {
      const res = await this.checkLink(n.id);
      if (res && JSON.stringify(res) !== JSON.stringify(this.links.get(n.id))) { this.links.set(n.id, res); changed = true; }
    }));
    if (changed) this.draw();
  }

  async checkLink(nodeId) {
    try {
      return await api("POST", "/ui/link", {
        chatId: this.chatId,
        itemId: this.item.id,
        blockId: this.block.id,
        revision: this.block.revision,
        nodeId,
        values: this.values,
        reads: this.reads(),
      });
    } catch (_) {
      return { state: "plain" };
    }
  }

  async openLink(nodeId) {
    const res = await this.checkLink(nodeId);
    this.links.set(nodeId, res);
    if (res.state === "chip" && res.target) {
      const t = res.target;
      const what = t.type === "Commit" ? t.sha : t.type === "Node" ? t.id : t.path + (t.line ? ":" + t.line : "");
      showNote(`Open ${t.type} ${what}` + (res.projectId ? ` in project ${res.projectId}` : ""));
    } else {
      showNote("This link is not available.");
    }
    this.draw();
  }

  // ---- choices ----

  // The stored answer of this block for its revision (its origin fields are flattened).
  sent() {
    const a = this.answer && (this.answer.origin || this.answer);
    return a && a.revision === this.block.revision ? a : null;
  }

  choicesBlocked() {
    if (this.sent()) return "answered";
    if (this.item.streaming || !this.block.revision) return "streaming";
    if (this.refreshing) return "refreshing";
    for (const name of this.queryNames) {
      const g = this.good[name];
      if (!g || g.inputs !== this.inputsKey) return "no-reading";
      if (this.readings[name] && this.readings[name].state === "refused") return "refused";
    }
    return null;
  }

  async choose(choiceId) {
    try {
      await api("POST", "/ui/choice", {
        chatId: this.chatId,
        itemId: this.item.id,
        blockId: this.block.id,
        revision: this.block.revision,
        choiceId,
        values: this.values,
        reads: this.reads(),
      });
      showNote("Choice sent.");
    } catch (e) {
      showNote("The choice was not sent: " + e.message);
    }
    await reloadChat(false);
  }

  // ---- drawing ----

  draw() {
    const focusId = document.activeElement && document.activeElement.dataset && document.activeElement.dataset.node;
    this.body.replaceChildren();
    if (!this.view) {
      this.body.append(h("div", { class: "fallback", text: this.block.fallback || "" }));
      if (this.error) this.body.append(h("div", { class: "could-not", text: "could not draw this block (" + (this.error.code || this.error.message) + ")" }));
    } else {
      const nodes = this.view.nodes;
      nodes.forEach((n, i) => this.body.append(h("div", { class: "top-node" }, this.node(n, { top: true, heads: i === 0 }))));
      const head = nodes[0] && nodes[0].type === "Summary" ? this.body.querySelector(".summary") : null;
      if (head && head.id) this.el.setAttribute("aria-labelledby", head.id);
    }
    this.drawStatus();
    if (focusId) {
      const el = this.body.querySelector(`[data-node="${CSS.escape(focusId)}"]`);
      if (el) el.focus();
    }
  }

  drawStatus() {
    const parts = [];
    if (this.live) {
      for (const name of this.queryNames) {
        const r = this.readings[name];
        const g = this.good[name];
        if (!r) { parts.push(h("span", { text: `${name}: not read yet` })); continue; }
        if (r.state === "fresh") {
          parts.push(h("span", { text: `${name}: read ${new Date(r.readAt).toLocaleTimeString()}` }));
        } else {
          const text = REASONS[r.code] || r.reason || "The live data could not be read.";
          parts.push(h("span", { class: "warn", text: `${name}: ${text}` + (g ? " (showing the last value)" : "") }));
        }
      }
      if (this.refreshing) parts.push(h("span", { text: "refreshing…" }));
    }
    this.status.replaceChildren(...parts);
    this.status.hidden = parts.length === 0;
    this.body.classList.toggle("muted-value", this.live && this.queryNames.some((n) => this.readings[n] && this.readings[n].state !== "fresh"));
  }

  text(children) {
    return (children || []).map((c) => (c.type === "$text" ? scalarText(c.props.text) : this.text(c.children))).join("");
  }

  kids(n, ctx) {
    return (n.children || []).map((c) => this.node(c, { ...ctx, top: false }));
  }

  fallback(n, why) {
    return h("span", { class: "fallback-node" },
      h("span", { class: "fallback", text: n.fallback || "" }),
      why ? h("span", { class: "could-not", text: " (could not draw: " + why + ")" }) : null);
  }

  node(n, ctx) {
    if (n.type === "$text") return document.createTextNode(scalarText(n.props.text));
    if (n.error) return this.fallback(n, n.error);
    const draw = this.renderers[n.type];
    if (!draw) return this.fallback(n, "unknown component " + n.type);
    try {
      const el = draw.call(this, n, n.props || {}, ctx || {});
      if (el instanceof Element) el.dataset.node = el.dataset.node || n.id;
      return el;
    } catch (e) {
      return this.fallback(n, e.message);
    }
  }
}

function toneOf(p) {
  return ["info", "success", "warning", "danger", "neutral"].includes(p.tone) ? p.tone : null;
}

function interactive(n) {
  return n.complete && !n.error;
}

BlockView.prototype.renderers = {
  Summary(n, p, ctx) {
    const tone = toneOf(p);
    const heads = ctx.heads;
    const el = h(heads ? "h3" : "h4", { class: "summary" + (heads ? "" : " sub"), id: "s-" + n.id.replace(/[^A-Za-z0-9_-]/g, "_") });
    if (tone && heads) el.append(h("span", { class: "icon tone-" + tone, "aria-hidden": "true", text: TONE_ICON[tone] }));
    el.append(h("span", {}, this.kids(n, ctx)));
    if (p.badge) el.append(h("span", { class: "badge", text: p.badge }));
    return el;
  },
  Callout(n, p, ctx) {
    const tone = toneOf(p) || "neutral";
    return h("div", { class: "callout " + tone, role: tone === "danger" || tone === "warning" ? "note" : null },
      p.title ? h("div", { class: "title" }, h("span", { class: "icon", "aria-hidden": "true", text: TONE_ICON[tone] + " " }), p.title) : null,
      h("div", {}, this.kids(n, ctx)));
  },
  Tag(n, p, ctx) {
    return h("span", { class: "tag " + (toneOf(p) || "") }, this.kids(n, ctx));
  },
  Progress(n, p, ctx) {
    const label = this.text(n.children);
    const has = typeof p.value === "number";
    const max = typeof p.max === "number" ? p.max : 100;
    const pct = has ? Math.max(0, Math.min(100, (p.value / max) * 100)) : 0;
    const reads = !has ? "in progress" : typeof p.max === "number" ? `${fmtNumber(p.value)} of ${fmtNumber(p.max)}` : `${fmtNumber(p.value)}%`;
    return h("div", { class: "progress" },
      h("div", {}, this.kids(n, ctx), h("span", { class: "muted", text: " · " + reads })),
      h("div", { class: "bar", role: "progressbar", "aria-label": label, "aria-valuemin": "0", "aria-valuemax": String(max), "aria-valuenow": has ? String(p.value) : null, "aria-valuetext": reads },
        h("div", { class: "fill" + (has ? "" : " indeterminate"), style: has ? `width:${pct}%` : null })));
  },
  Steps(n, p, ctx) {
    return h("ol", { class: "steps" }, this.kids(n, ctx));
  },
  Step(n, p, ctx) {
    const state = p.state || "pending";
    return h("li", { class: state },
      h("span", { class: "icon " + (state === "done" ? "tone-success" : state === "failed" ? "tone-danger" : state === "running" ? "tone-info" : ""), "aria-hidden": "true", text: STEP_ICON[state] || "•" }),
      h("span", { class: "sr-only", hidden: true, text: state }),
      " ", this.kids(n, ctx),
      p.detail ? h("span", { class: "detail", text: p.detail }) : null,
      h("span", { class: "detail", text: "(" + state + ")" }));
  },
  Stats(n, p, ctx) {
    return h("div", { class: "stats" }, this.kids(n, ctx));
  },
  Stat(n, p) {
    let delta = null;
    if (typeof p.previous === "number" && typeof p.value === "number") {
      const d = p.value - p.previous;
      const pct = p.previous !== 0 ? ` (${d >= 0 ? "+" : ""}${fmtNumber((d / Math.abs(p.previous)) * 100)}%)` : "";
      const tone = toneOf(p);
      delta = h("div", { class: "delta " + (tone ? "tone-" + tone : "muted"), text: `${d >= 0 ? "▲ +" : "▼ "}${withUnit(d, p.unit)}${pct} vs ${withUnit(p.previous, p.unit)}` });
    }
    return h("div", { class: "stat" }, h("div", { class: "label", text: p.label }), h("div", { class: "value", text: withUnit(p.value, p.unit) }), delta);
  },
  EntityList(n, p, ctx) {
    return h("dl", { class: "entities" }, this.kids(n, ctx));
  },
  Entry(n, p, ctx) {
    const frag = document.createDocumentFragment();
    frag.append(h("dt", { text: p.label }), h("dd", {}, this.kids(n, ctx)));
    return frag;
  },
  Table(n, p) {
    const rows = Array.isArray(p.rows) ? p.rows : [];
    let cols = (n.children || []).filter((c) => c.type === "Column" && !c.error).map((c) => c.props);
    if (cols.length === 0) {
      const keys = [];
      for (const r of rows) for (const k of Object.keys(r || {})) if (!keys.includes(k)) keys.push(k);
      cols = keys.map((key) => ({ key }));
    } else {
      cols = cols.filter((c) => rows.some((r) => r && c.key in r));
    }
    const cell = (c, v) => {
      if (v === undefined || v === null) return h("td", {});
      switch (c.as) {
        case "bytes": return h("td", { class: "num", text: fmtBytes(v) });
        case "duration": return h("td", { class: "num", text: fmtDuration(v) });
        case "date": return h("td", { text: fmtDate(v) });
        case "file": return h("td", { class: "mono", text: scalarText(v) });
        case "tag": {
          const t = scalarText(v).toLowerCase();
          const tone = /pass|ok|success|done/.test(t) ? "success" : /fail|error/.test(t) ? "danger" : /warn|flaky/.test(t) ? "warning" : "";
          return h("td", {}, h("span", { class: "tag " + tone, text: scalarText(v) }));
        }
        case "text": return h("td", { text: scalarText(v) });
        default:
          if (typeof v === "number") return h("td", { class: "num", text: withUnit(v, c.unit) });
          return h("td", { text: scalarText(v) });
      }
    };
    const body = h("tbody");
    const limit = 50;
    const fill = (all) => {
      body.replaceChildren(...rows.slice(0, all ? rows.length : limit).map((r) => h("tr", {}, cols.map((c) => cell(c, r ? r[c.key] : undefined)))));
    };
    fill(false);
    const more = rows.length > limit
      ? h("button", { type: "button", class: "quiet", text: `Show all ${rows.length} rows`, onclick: (e) => { fill(true); e.target.remove(); } })
      : null;
    return h("div", { class: "table-wrap" },
      h("table", {},
        h("thead", {}, h("tr", {}, cols.map((c) => h("th", { scope: "col", text: (c.title || c.key) + (c.unit && c.as !== "bytes" && c.as !== "duration" ? ` (${c.unit})` : "") })))),
        body),
      rows.length === 0 ? h("p", { class: "muted", text: "No rows." }) : null,
      more);
  },
  Column() {
    return document.createDocumentFragment(); // metadata read by Table
  },
  Chart(n, p) {
    return drawChart(n, p);
  },
  Tabs(n, p, ctx) {
    const tabs = (n.children || []).filter((c) => c.type === "Tab" && !c.error);
    const key = "tab:" + n.id;
    const current = Math.min(this[key] || 0, Math.max(0, tabs.length - 1));
    const list = h("div", { role: "tablist" });
    const panels = [];
    tabs.forEach((t, i) => {
      const tid = "t-" + t.id.replace(/[^A-Za-z0-9_-]/g, "_");
      list.append(h("button", {
        type: "button", role: "tab", id: tid, "aria-selected": i === current ? "true" : "false", tabindex: i === current ? "0" : "-1",
        "aria-controls": tid + "-p", text: t.props.title, "data-node": t.id,
        onclick: () => { this[key] = i; this.draw(); },
        onkeydown: (e) => {
          if (e.key === "ArrowRight" || e.key === "ArrowLeft") {
            this[key] = (i + (e.key === "ArrowRight" ? 1 : tabs.length - 1)) % tabs.length;
            this.draw();
            const next = this.body.querySelector(`[data-node="${CSS.escape(tabs[this[key]].id)}"]`);
            if (next) next.focus();
          }
        },
      }));
      panels.push(h("div", { role: "tabpanel", id: tid + "-p", "aria-labelledby": tid, hidden: i !== current }, this.node(t, ctx)));
    });
    return h("div", { class: "tabs" }, list, panels);
  },
  Tab(n, p, ctx) {
    return h("div", {}, this.kids(n, ctx));
  },
  Sections(n, p, ctx) {
    return h("div", { class: "sections" }, this.kids(n, ctx));
  },
  Section(n, p, ctx) {
    const key = "fold:" + n.id;
    const d = h("details", { open: !this[key] }, h("summary", { text: p.title }), h("div", { class: "body" }, this.kids(n, ctx)));
    d.addEventListener("toggle", () => { this[key] = !d.open; });
    return d;
  },
  CodeBlock(n, p) {
    return h("pre", { class: "code" }, p.language ? h("span", { class: "lang", text: p.language }) : null, h("code", { text: this.text(n.children) }));
  },
  Image(n, p, ctx) {
    const name = p.alt != null ? p.alt : p.attachment != null ? p.attachment : p.generated != null ? p.generated : "unavailable";
    return h("figure", { class: "image" },
      h("div", { class: "ph", role: "img", "aria-label": String(name), text: "🖼 " + name + (p.attachment ? ` (attachment ${p.attachment})` : "") }),
      n.children && n.children.length ? h("figcaption", {}, this.kids(n, ctx)) : null);
  },
  Sources(n, p, ctx) {
    return h("ol", { class: "sources", "aria-label": "Sources" }, this.kids(n, ctx));
  },
  Source(n, p) {
    const ok = /^https?:\/\//i.test(p.url || "");
    return h("li", {}, ok
      ? h("a", { href: p.url, target: "_blank", rel: "noopener noreferrer nofollow", text: p.title })
      : h("span", { text: p.title }), h("span", { class: "muted", text: " " + (p.url || "") }));
  },
  File(n, p, ctx) { return this.link(n, (p.path || "") + (p.line ? ":" + p.line : ""), ctx); },
  Diff(n, p, ctx) { return this.link(n, "Δ " + (p.path || ""), ctx); },
  Commit(n, p, ctx) { return this.link(n, String(p.sha || "").slice(0, 7), ctx); },
  Node(n, p, ctx) { return this.link(n, "◆ " + (p.id || ""), ctx); },
  Checklist(n, p) {
    const checked = Array.isArray(p.value) ? p.value : [];
    const bound = "value" in (n.bindings || {}) && interactive(n);
    return h("ul", { class: "checklist" }, (n.children || []).filter((c) => c.type === "Item").map((item) => {
      const v = item.props.value;
      const on = checked.some((c) => JSON.stringify(c) === JSON.stringify(v));
      const box = h("input", {
        type: "checkbox", checked: on, disabled: !bound || !interactive(item), "data-node": n.id + "#" + JSON.stringify(v),
        onchange: () => {
          const next = on ? checked.filter((c) => JSON.stringify(c) !== JSON.stringify(v)) : [...checked, v];
          this.change(n.id, "value", next);
        },
      });
      return h("li", {}, h("label", { class: "control" }, box, h("span", {}, this.kids(item, {}))));
    }));
  },
  Item(n, p, ctx) {
    return h("span", {}, this.kids(n, ctx)); // drawn by Checklist
  },
  Switch(n, p, ctx) {
    const bound = "value" in (n.bindings || {}) && interactive(n);
    return h("label", { class: "control" },
      h("input", { type: "checkbox", role: "switch", checked: p.value === true, "aria-checked": p.value === true ? "true" : "false", disabled: !bound, onchange: (e) => this.change(n.id, "value", e.target.checked) }),
      h("span", {}, this.kids(n, ctx)));
  },
  Slider(n, p, ctx) {
    const bound = "value" in (n.bindings || {}) && interactive(n);
    const out = h("output", { text: withUnit(p.value, p.unit) });
    const input = h("input", {
      type: "range", min: String(p.min), max: String(p.max), step: String(p.step || "any"), value: String(p.value),
      disabled: !bound, "aria-valuetext": withUnit(p.value, p.unit),
      oninput: (e) => { out.textContent = withUnit(Number(e.target.value), p.unit); },
      onchange: (e) => this.change(n.id, "value", Number(e.target.value)),
    });
    return h("label", { class: "control" }, h("span", {}, this.kids(n, ctx)), input, out);
  },
  Segmented(n, p) {
    const bound = "value" in (n.bindings || {}) && interactive(n);
    const label = (n.children || []).filter((c) => c.type === "Option").map((o) => this.text(o.children)).join(" / ");
    return h("div", { class: "segmented", role: "group", "aria-label": label }, (n.children || []).filter((c) => c.type === "Option" && !c.error).map((o) => {
      const on = JSON.stringify(o.props.value) === JSON.stringify(p.value);
      return h("button", {
        type: "button", "aria-pressed": on ? "true" : "false", disabled: !bound, "data-node": o.id,
        onclick: () => { if (!on) this.change(n.id, "value", o.props.value); },
      }, this.kids(o, {}));
    }));
  },
  Option(n, p, ctx) {
    return h("span", {}, this.kids(n, ctx)); // read by Segmented
  },
  Button(n, p, ctx) {
    return h("button", { type: "button", disabled: p.disabled === true || !interactive(n) || !n.action, onclick: () => this.press(n.id) }, this.kids(n, ctx));
  },
  Show(n, p, ctx) { return h("span", {}, this.kids(n, ctx)); }, // resolved by evaluation
  Each(n, p, ctx) { return h("span", {}, this.kids(n, ctx)); }, // resolved by evaluation
  Choices(n, p, ctx) {
    const blocked = this.choicesBlocked();
    const answer = this.sent();
    const items = (n.children || []).filter((c) => c.type === "Choice" && !c.error);
    items.sort((a, b) => (b.props.primary === true) - (a.props.primary === true));
    const note = answer
      ? h("div", { class: "answered", text: "✓ Sent: " + (answer.label || answer.choiceId) })
      : blocked && blocked !== "answered"
        ? h("div", { class: "muted", text: { streaming: "Choices open when the reply has finished.", refreshing: "Reading live data…", "no-reading": "Waiting for live data…", refused: "Live data was refused." }[blocked] || "" })
        : null;
    return h("div", {}, h("div", { class: "choices", role: "group", "aria-label": "Choices" }, items.map((c) => {
      const label = this.text(c.children);
      const context = typeof c.props.context === "string" && c.props.context.trim() ? c.props.context : null;
      const chosen = answer && answer.choiceId === c.id;
      return h("button", {
        type: "button", class: "choice" + (c.props.primary === true ? " primary" : ""), "data-node": c.id,
        disabled: !!blocked || c.props.disabled === true || !interactive(c), "aria-pressed": chosen ? "true" : null,
        onclick: () => this.choose(c.id),
      }, h("span", { text: (chosen ? "✓ " : "") + label }), context ? h("span", { class: "ctx", text: context }) : null);
    })), note);
  },
  Choice(n, p, ctx) {
    return h("span", {}, this.kids(n, ctx)); // drawn by Choices
  },
};

// A link chip: plain text until checked; a click checks again and opens only a chip.
BlockView.prototype.link = function (n, label, ctx) {
  const res = this.links.get(n.id);
  const chip = res && res.state === "chip";
  const el = chip
    ? h("button", { type: "button", class: "chip", title: res.label || label, "data-node": n.id, onclick: () => this.openLink(n.id) }, res.label && n.type !== "Diff" && n.type !== "Node" ? res.label + (n.props.line ? ":" + n.props.line : "") : label)
    : h("span", { class: "chip plain", title: "not a link", text: label });
  if (n.children && n.children.length) return h("div", { class: "link-row" }, el, h("span", {}, this.kids(n, ctx)));
  return el;
};

function drawChart(n, p) {
  const data = Array.isArray(p.data) ? p.data : [];
  const series = [];
  for (const row of data) {
    for (const [k, v] of Object.entries(row || {})) {
      if (k !== "label" && typeof v === "number" && isFinite(v) && !series.includes(k) && series.length < 6) series.push(k);
    }
  }
  if (!series.length || !data.length) return h("div", { class: "fallback", text: n.fallback });
  const val = (row, s) => (typeof row[s] === "number" && isFinite(row[s]) ? row[s] : null);
  const label = (row, i) => (row.label !== undefined ? scalarText(row.label) : String(i + 1));
  const W = 560, H = 220, L = 44, B = 28, T = 10, R = 10;
  const kind = p.kind;
  const plotW = W - L - R, plotH = H - T - B;
  const root = svg("svg", { viewBox: `0 0 ${W} ${kind === "hbar" ? 30 + data.length * 28 : H}`, role: "img", width: String(W) });
  const title = `${kind} chart of ${series.join(", ")}` + (p.unit ? ` in ${p.unit}` : "");
  root.append(svg("title", {}, title));
  let max = 0;
  for (const row of data) {
    if (kind === "stacked") max = Math.max(max, series.reduce((a, s) => a + Math.max(0, val(row, s) || 0), 0));
    else for (const s of series) max = Math.max(max, val(row, s) || 0);
  }
  if (max <= 0) max = 1;
  if (kind === "hbar") {
    const rowH = 28, lw = 90;
    data.forEach((row, i) => {
      const y = 10 + i * rowH;
      root.append(svg("text", { x: "0", y: String(y + 14), "font-size": "11", fill: "#444" }, label(row, i)));
      const bh = (rowH - 8) / series.length;
      series.forEach((s, j) => {
        const v = val(row, s);
        if (v === null) return;
        const w = Math.max(0, (v / max) * (W - lw - 80));
        root.append(svg("rect", { x: String(lw), y: String(y + j * bh), width: String(w), height: String(bh - 1), fill: COLORS[j] }, svg("title", {}, `${label(row, i)} ${s}: ${withUnit(v, p.unit)}`)));
        root.append(svg("text", { x: String(lw + w + 4), y: String(y + j * bh + bh - 3), "font-size": "10", fill: "#444" }, withUnit(v, p.unit)));
      });
    });
  } else {
    // axis
    root.append(svg("line", { x1: String(L), y1: String(T + plotH), x2: String(W - R), y2: String(T + plotH), stroke: "#999" }));
    for (let k = 0; k <= 4; k++) {
      const y = T + plotH - (k / 4) * plotH;
      root.append(svg("line", { x1: String(L), y1: String(y), x2: String(W - R), y2: String(y), stroke: "#eee" }));
      root.append(svg("text", { x: String(L - 4), y: String(y + 3), "font-size": "10", "text-anchor": "end", fill: "#666" }, fmtNumber((max * k) / 4)));
    }
    const slot = plotW / data.length;
    data.forEach((row, i) => {
      root.append(svg("text", { x: String(L + slot * i + slot / 2), y: String(H - 10), "font-size": "11", "text-anchor": "middle", fill: "#444" }, label(row, i)));
    });
    if (kind === "line") {
      series.forEach((s, j) => {
        let d = "";
        data.forEach((row, i) => {
          const v = val(row, s);
          const x = L + slot * i + slot / 2;
          if (v === null) { d += " "; return; }
          const y = T + plotH - (v / max) * plotH;
          d += (d === "" || d.endsWith(" ") ? "M" : "L") + x.toFixed(1) + "," + y.toFixed(1);
          root.append(svg("circle", { cx: String(x), cy: String(y), r: "3", fill: COLORS[j] }, svg("title", {}, `${label(row, i)} ${s}: ${withUnit(v, p.unit)}`)));
        });
        root.append(svg("path", { d: d.replace(/ M/g, "M").trim(), fill: "none", stroke: COLORS[j], "stroke-width": "2" }));
      });
    } else {
      data.forEach((row, i) => {
        const x0 = L + slot * i + slot * 0.15;
        const width = slot * 0.7;
        let base = 0;
        series.forEach((s, j) => {
          const v = val(row, s);
          if (v === null) return;
          const hgt = (Math.max(0, v) / max) * plotH;
          let x, w, y;
          if (kind === "stacked") { x = x0; w = width; y = T + plotH - base - hgt; base += hgt; }
          else { w = width / series.length; x = x0 + j * w; y = T + plotH - hgt; }
          root.append(svg("rect", { x: String(x), y: String(y), width: String(Math.max(0, w - 1)), height: String(hgt), fill: COLORS[j] }, svg("title", {}, `${label(row, i)} ${s}: ${withUnit(v, p.unit)}`)));
        });
      });
    }
  }
  const legend = h("div", { class: "legend" }, series.map((s, j) => h("span", {}, h("span", { class: "swatch", style: `background:${COLORS[j]}` }), s)));
  // A readable table of the same numbers for assistive tech.
  const table = h("table", { class: "sr-table", hidden: true }, h("caption", { text: title }),
    h("tr", {}, h("th", { text: "label" }), series.map((s) => h("th", { text: s }))),
    data.map((row, i) => h("tr", {}, h("td", { text: label(row, i) }), series.map((s) => h("td", { text: val(row, s) === null ? "" : withUnit(val(row, s), p.unit) })))));
  return h("figure", { class: "chart", "aria-label": title, style: "margin:0" }, root, legend, table);
}

// ---------- chats ----------

function showNote(text) {
  $("#insert-note").textContent = text;
}

async function signIn(user) {
  try {
    page.me = await api("POST", "/api/login", { user });
    await enter();
  } catch (e) {
    $("#signin-error").textContent = "Could not sign in: " + e.message;
  }
}

async function enter() {
  $("#signin").hidden = true;
  $("#workspace").hidden = false;
  $("#who").textContent = `${page.me.userId} · ${page.me.projects.join(", ")}`;
  feed.start();
  await loadChats();
}

async function loadChats() {
  const { chats } = await api("GET", "/api/chats");
  page.chats = chats;
  const list = $("#chat-list");
  list.replaceChildren(...chats.map((c) => h("li", {}, h("button", {
    type: "button", "aria-current": c.id === page.chatId ? "true" : "false",
    onclick: () => openChat(c.id),
  }, h("div", { text: c.title || "(untitled)" }), h("div", { class: "muted", text: c.project })))));
  if (!page.chatId && chats.length) await openChat(chats[chats.length - 1].id);
}

async function openChat(id) {
  page.chatId = id;
  for (const b of page.blocks.values()) b.dispose();
  page.blocks.clear();
  for (const btn of document.querySelectorAll("#chat-list button")) btn.setAttribute("aria-current", "false");
  const chat = page.chats.find((c) => c.id === id);
  const idx = page.chats.indexOf(chat);
  const btn = document.querySelectorAll("#chat-list button")[idx];
  if (btn) btn.setAttribute("aria-current", "true");
  await reloadChat(false);
}

let reloading = null;
async function reloadChat(quiet) {
  if (!page.chatId) return;
  if (reloading) return reloading;
  reloading = (async () => {
    try {
      const detail = await api("GET", "/api/chats/" + encodeURIComponent(page.chatId));
      page.detail = detail;
      drawChat(detail, quiet);
    } catch (e) {
      if (!quiet) $("#items").replaceChildren(h("li", { class: "error", text: "Could not load the chat: " + e.message }));
    } finally {
      reloading = null;
    }
  })();
  return reloading;
}

function drawChat(detail) {
  $("#chat-title").textContent = detail.title || "(untitled)";
  const keep = new Map();
  const items = $("#items");
  items.replaceChildren();
  for (const item of detail.items) {
    const li = h("li", { class: "msg " + item.role });
    li.append(h("div", { class: "who-line", text: item.role === "user" ? "you" : "assistant" + (item.streaming ? " (writing…)" : "") }));
    if (item.role === "user" || !item.ui || !item.ui.length) {
      li.append(prose(item.text));
    } else {
      for (const part of splitReply(item.text, item.ui)) {
        if (part.text !== undefined) { li.append(prose(part.text)); continue; }
        const b = part.block;
        const id = b.id;
        let view = page.blocks.get(id);
        const frozen = item.uiQueries && item.uiQueries.blocks ? item.uiQueries.blocks[id] : undefined;
        const answer = item.uiAnswers ? item.uiAnswers[id] : undefined;
        if (!view || view.block.revision !== b.revision || view.item.streaming !== item.streaming) {
          if (view) view.dispose();
          view = new BlockView(detail.id, item, b, frozen, answer);
          view.draw();
          view.evaluate().then(() => view.trigger());
        } else {
          view.answer = answer;
          view.item = item;
          view.draw();
        }
        keep.set(id, view);
        li.append(view.el);
      }
    }
    items.append(li);
  }
  for (const [id, v] of page.blocks) if (!keep.has(id)) v.dispose();
  page.blocks = keep;
}

async function insertRun() {
  const branch = $("#insert-branch").value;
  const n = Math.floor(Math.random() * 900) + 100;
  const status = Math.random() < 0.7 ? "passed" : "failed";
  try {
    const res = await api("POST", "/api/sources/ci.runs/rows", { rows: [{ branch, name: `manual run ${n}`, status }] });
    showNote(`Inserted "manual run ${n}" (${status}) on ${branch}` + (res && res.cursor ? ` at ${res.cursor}` : ""));
  } catch (e) {
    showNote("Insert failed: " + e.message);
  }
}

async function signOut() {
  try { await api("POST", "/api/logout"); } catch (_) { /* already out */ }
  feed.stop();
  for (const b of page.blocks.values()) b.dispose();
  page.blocks.clear();
  page.me = null;
  page.chatId = null;
  $("#workspace").hidden = true;
  $("#signin").hidden = false;
  $("#who").textContent = "";
}

document.addEventListener("visibilitychange", () => {
  if (!document.hidden) {
    if (Date.now() - feed.lastPollAt > 2000) feed.poll();
    for (const b of page.blocks.values()) b.trigger();
  } else {
    feed.schedulePoll();
  }
});

async function boot() {
  for (const btn of document.querySelectorAll("[data-user]")) btn.addEventListener("click", () => signIn(btn.dataset.user));
  $("#insert-run").addEventListener("click", insertRun);
  $("#signout").addEventListener("click", signOut);
  const wanted = new URLSearchParams(location.search).get("user");
  try {
    page.me = await api("GET", "/api/me");
    if (wanted && wanted !== page.me.userId) { await signIn(wanted); return; }
    await enter();
  } catch (_) {
    if (wanted) await signIn(wanted);
  }
}

boot();
