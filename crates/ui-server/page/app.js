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
// Longest wait for any API answer: the server bounds its own work (a read at 8 s), so a
// request still unanswered after this was lost on the way; it fails, and what waited on
// it (a block's next `/ui/view`, a query's next read) goes on.
const API_TIMEOUT_MS = 30000;
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

// Tone icons: inline SVG in the tone's colour (currentColor), the same size and
// alignment in every font; decorative (the tone is also in the words beside them).
const TONE_ICON = {
  info: [["circle", { cx: "8", cy: "8", r: "7.2", fill: "currentColor" }], ["rect", { x: "7.1", y: "6.8", width: "1.8", height: "5", rx: ".9", fill: "#fff" }], ["circle", { cx: "8", cy: "4.6", r: "1.1", fill: "#fff" }]],
  success: [["circle", { cx: "8", cy: "8", r: "7.2", fill: "currentColor" }], ["path", { d: "M4.7 8.2l2.2 2.2 4.4-4.6", fill: "none", stroke: "#fff", "stroke-width": "1.8", "stroke-linecap": "round", "stroke-linejoin": "round" }]],
  warning: [["path", { d: "M8 1.2L15.2 14.3H.8Z", fill: "currentColor", stroke: "currentColor", "stroke-width": "1.2", "stroke-linejoin": "round" }], ["rect", { x: "7.1", y: "5.4", width: "1.8", height: "4.8", rx: ".9", fill: "#fff" }], ["circle", { cx: "8", cy: "12.1", r: "1.05", fill: "#fff" }]],
  danger: [["circle", { cx: "8", cy: "8", r: "7.2", fill: "currentColor" }], ["path", { d: "M5.4 5.4l5.2 5.2M10.6 5.4l-5.2 5.2", fill: "none", stroke: "#fff", "stroke-width": "1.8", "stroke-linecap": "round" }]],
  neutral: [["circle", { cx: "8", cy: "8", r: "7.2", fill: "currentColor" }], ["circle", { cx: "8", cy: "8", r: "2.4", fill: "#fff" }]],
};
const STEP_ICON = { done: "✓", running: "◐", pending: "○", failed: "✕", skipped: "–" };
// Chart series colours, in order. A series' colour says nothing about its meaning (the
// catalog gives series no tone), so the first ones avoid the green and red that read as
// "passed" and "failed"; each has at least 4.5:1 against white (WCAG 1.4.11 asks 3:1).
const COLORS = ["#2456c7", "#b35900", "#7b3fb5", "#0f7c8c", "#a3206a", "#5b6572"];

// ---------- small helpers ----------

const $ = (sel) => document.querySelector(sel);

function h(tag, attrs, ...kids) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === "class") el.className = v;
    else if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else if (k === "text") el.textContent = v;
    // Style properties through the CSSOM: the page's Content-Security-Policy refuses
    // `style` attributes.
    else if (k === "style") Object.assign(el.style, v);
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

// The icon of a tone (decorative: hidden from assistive tech).
function toneIcon(tone) {
  const shapes = TONE_ICON[tone] || TONE_ICON.neutral;
  return svg("svg", { class: "icon tone-" + tone, viewBox: "0 0 16 16", "aria-hidden": "true", focusable: "false" },
    shapes.map(([tag, attrs]) => svg(tag, attrs)));
}

// A picture's outline, drawn where an image would be (an emoji may have no glyph).
function pictureIcon() {
  return svg("svg", { class: "icon", viewBox: "0 0 16 16", "aria-hidden": "true", focusable: "false" },
    svg("rect", { x: "1.5", y: "2.5", width: "13", height: "11", rx: "1.5", fill: "none", stroke: "currentColor", "stroke-width": "1.3" }),
    svg("circle", { cx: "5.5", cy: "6", r: "1.3", fill: "currentColor" }),
    svg("path", { d: "M2.5 12.5l3.8-4 2.7 2.6 2-1.9 2.5 3.3", fill: "none", stroke: "currentColor", "stroke-width": "1.3", "stroke-linejoin": "round" }));
}

// `opts.write`: the request writes, so it names this page as its request source
// (sync.md §4.4, §7.6); `opts.seq` then gets the answer's `X-UI-Sync-Seq`, if any.
async function api(method, path, body, opts) {
  const init = { method, headers: {}, credentials: "same-origin" };
  if (body !== undefined) {
    init.headers["content-type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  if (opts && opts.write) init.headers["x-ui-request-source"] = page.pageId;
  const ctl = new AbortController();
  init.signal = ctl.signal;
  const timer = setTimeout(() => ctl.abort(), API_TIMEOUT_MS);
  let res, text;
  try {
    res = await fetch(path, init);
    text = await res.text();
  } catch (e) {
    if (!ctl.signal.aborted) throw e;
    const err = new Error("The server did not answer in time.");
    err.status = 0;
    err.code = "timed-out";
    throw err;
  } finally {
    clearTimeout(timer);
  }
  if (opts) opts.seq = res.headers.get("x-ui-sync-seq");
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
  // Two decimals at most; small fractions keep three significant digits (0.0005, not 0).
  const small = n !== 0 && Math.abs(n) < 1;
  return n.toLocaleString(undefined, small ? { maximumSignificantDigits: 3 } : { maximumFractionDigits: 2 });
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

// sync.md §2, §7.6: one page id per page load, "p-" + 26 base32 chars (128 random bits).
// Kept in memory only: a duplicated tab copies sessionStorage, and two tabs sharing an id
// would ignore each other's writes.
function newPageId() {
  const abc = "abcdefghijklmnopqrstuvwxyz234567";
  let out = "p-", acc = 0, bits = 0;
  for (const byte of crypto.getRandomValues(new Uint8Array(16))) {
    acc = (acc << 8) | byte;
    bits += 8;
    while (bits >= 5) { bits -= 5; out += abc[(acc >>> bits) & 31]; }
    acc &= (1 << bits) - 1;
  }
  return out + abc[(acc << (5 - bits)) & 31]; // the last 3 bits
}

const page = {
  me: null,
  chats: [],
  chatId: null,
  detail: null,
  blocks: new Map(), // blockId -> BlockView
  pageId: newPageId(),
  chatVersion: 0, // the `host.chats` counter the shown chat reflects (sync.md §4.4)
};

// ---------- the change feed: one transport per page (sync.md §7.1–§7.4) ----------

const FEED_EVENTS = "/ui/events";
const FEED_POLL = "/ui/poll";
const CHATS_SOURCE = "host.chats";
const RECONNECT_MIN_MS = 1000; // §7.2: 1 s doubling to 30 s, ±20% jitter
const RECONNECT_MAX_MS = 30000;
const POLL_HIDDEN_MIN_MS = 10000; // §7.3
const POLL_FAILURE_CAP_MS = 300000;
const SIGNED_OUT_COOLDOWN_MS = 60000;
const RUN_TTL_MS = 300000;
const NUDGE_GAP_MS = 2000;
const MAX_CHANGE_READS = 4; // §7.7: change-driven requests in flight per page
// The host counts its 1 s gap from when its read started, a little after the page sent
// the request: asking right at 1 s would only earn a `retryAfterMs` of a few ms.
const GAP_SLACK_MS = 100;
const MAX_COUNTERS = 1000; // §7.5

// `Retry-After` of a response in ms (seconds or an HTTP date), or 0.
function retryAfterMs(res) {
  const v = res && res.headers.get("retry-after");
  if (!v) return 0;
  const secs = Number(v);
  if (isFinite(secs)) return Math.max(0, secs * 1000);
  const at = Date.parse(v);
  return isFinite(at) ? Math.max(0, at - Date.now()) : 0;
}

const feed = {
  role: null, // "leader" | "follower" | "solo"; null while stopped
  running: false,
  gen: 0, // bumped by start and stop: callbacks of an older transport are ignored
  me: null, // the principal id the transport (its lock and channel) belongs to
  es: null,
  streams: new Set(), // EventSources this tab opened and has not closed
  streamCursor: null, // the open stream's position: the id of its last frame
  streamSince: 0,
  opened: false,
  cursor: null,
  epoch: null,
  above: new Set(), // seqs delivered above the cursor by non-contiguous answers (§7.4)
  lastFrameAt: 0,
  pollTimer: null,
  healthTimer: null,
  reconnectTimer: null,
  attempts: 0,
  failures: 0,
  lastPollAt: 0,
  lastNudgeAt: 0,
  pollNotBefore: 0,
  pollInFlight: false,
  signedOut: false,
  runUntil: 0,
  channel: null,
  lockAbort: null,
  releaseLock: null,

  // §7.2: healthy = a stream is open and a frame arrived in the last 45 s. A follower's
  // stream is the leader's: it counts the frames the leader forwards.
  healthy() {
    const recent = Date.now() - this.lastFrameAt < HEALTHY_MS;
    if (this.role === "follower") return recent;
    return this.es !== null && this.es.readyState === 1 && recent;
  },

  show() {
    const el = $("#feed-state");
    const label = !this.running ? "idle" : this.signedOut ? "signed out" : this.healthy() ? "live" : this.es ? "connecting…" : "polling";
    // The status region is announced when its text changes: it says the state only, and
    // the cursor (for whoever debugs the feed) goes in its tooltip.
    const text = "feed: " + label;
    if (el.textContent !== text) el.textContent = text;
    el.title = this.cursor ? "cursor " + this.cursor : "";
    el.dataset.role = this.role || "";
  },

  // §7.1: the page's one transport, for the signed-in principal `me`. Signing in as
  // someone else stops it and starts a new one (new election, new counters).
  start(me) {
    this.stop();
    this.running = true;
    this.me = me;
    changes.clear();
    this.poll(); // a poll when the transport starts establishes the cursor (§7.3)
    this.elect(this.gen);
    this.healthTimer = setInterval(() => this.checkHealth(), 5000);
    this.show();
  },

  stop() {
    this.gen++;
    this.running = false;
    this.closeStream();
    this.resign();
    clearTimeout(this.pollTimer);
    clearTimeout(this.reconnectTimer);
    clearInterval(this.healthTimer);
    this.pollTimer = this.reconnectTimer = this.healthTimer = null;
    this.role = null;
    this.cursor = this.epoch = null;
    this.above.clear();
    this.signedOut = this.pollInFlight = false;
    this.attempts = this.failures = this.lastFrameAt = this.pollNotBefore = 0;
    changes.clear();
    this.show();
  },

  // ---- §7.1, §5.3: one stream per (endpoint, principal) across tabs ----
  // The Web Lock and the BroadcastChannel are both named from the endpoint and the
  // principal id, so a tab signed in as someone else never hears these frames. The lock
  // holder (leader) opens the stream and forwards every frame and poll answer; the others
  // (followers) open none and keep their own poll loop as a safety net. When the leader
  // goes away (tab closed, sign-out, other principal) the lock passes to the next tab.
  // Without Web Locks or BroadcastChannel each tab holds its own stream ("solo").
  elect(gen) {
    const name = "uiblocks-feed " + location.origin + FEED_EVENTS + " " + this.me;
    const shared = typeof BroadcastChannel === "function" && navigator.locks && typeof navigator.locks.request === "function";
    if (!shared) {
      this.role = "solo";
      this.connect();
      return;
    }
    this.role = "follower";
    this.channel = new BroadcastChannel(name);
    this.channel.onmessage = (e) => { if (gen === this.gen) this.onForward(e.data); };
    this.channel.postMessage({ t: "join", who: this.me }); // the leader answers with its health
    const abort = new AbortController();
    this.lockAbort = abort;
    navigator.locks.request(name, { signal: abort.signal }, () => {
      if (gen !== this.gen) return undefined; // stopped meanwhile: release at once
      this.role = "leader";
      this.attempts = 0;
      this.connect();
      this.show();
      return new Promise((resolve) => { this.releaseLock = resolve; });
    }).catch(() => { /* aborted: stopped before being elected */ });
  },

  resign() {
    if (this.lockAbort) this.lockAbort.abort();
    if (this.releaseLock) this.releaseLock();
    if (this.channel) this.channel.close();
    this.lockAbort = this.releaseLock = this.channel = null;
  },

  // The leader sends what it got, with the cursor it continues from (`from`).
  forward(msg) {
    if (this.role === "leader" && this.channel) this.channel.postMessage({ ...msg, who: this.me });
  },

  onForward(msg) {
    if (!msg || msg.who !== this.me) return;
    if (this.role === "leader" && msg.t === "join") this.forward({ t: "state", healthy: this.healthy() });
    if (this.role !== "follower") return;
    if (msg.t === "state") {
      this.lastFrameAt = msg.healthy ? Date.now() : 0;
    } else if (msg.t === "down") {
      this.lastFrameAt = 0; // the leader's stream closed: not healthy until it is back
    } else if (msg.t === "frame" && msg.name === "bye") {
      if (msg.data && msg.data.reason === "signed-out") this.enterSignedOut();
      return;
    } else if (msg.t === "frame") {
      this.lastFrameAt = Date.now();
      this.apply(msg);
    } else if (msg.t === "poll") {
      this.apply(msg);
    }
    this.show();
    this.schedulePoll();
  },

  // ---- §7.2: the stream (leader or solo only) ----

  connect() {
    clearTimeout(this.reconnectTimer);
    if (!this.running || this.signedOut || this.role === "follower" || this.es) return;
    const gen = this.gen;
    const url = FEED_EVENTS + (this.cursor ? "?cursor=" + encodeURIComponent(this.cursor) : "");
    let es;
    try { es = new EventSource(url); } catch (_) { this.reconnect(); return; }
    this.es = es;
    this.streams.add(es);
    this.opened = false;
    this.streamSince = Date.now();
    es.onopen = () => { if (this.es === es) this.opened = true; };
    for (const name of ["hello", "tick", "changes", "reset", "bye"]) {
      es.addEventListener(name, (e) => {
        if (gen !== this.gen || this.es !== es) return;
        let data = {};
        try { data = JSON.parse(e.data) || {}; } catch (_) { /* ignore */ }
        this.onFrame(name, data);
      });
    }
    es.onerror = () => { if (gen === this.gen && this.es === es) this.streamFailed(url); };
  },

  closeStream() {
    if (this.es) {
      this.es.close();
      this.streams.delete(this.es);
    }
    this.es = null;
    this.streamCursor = null;
    this.opened = false;
  },

  onFrame(name, data) {
    if (name === "bye") {
      this.forward({ t: "frame", name, data });
      this.closeStream();
      this.forward({ t: "down" });
      // A signed-out session gets no new stream; otherwise reconnect after `retryMs`.
      if (data.reason === "signed-out") this.enterSignedOut();
      else this.reconnect(typeof data.retryMs === "number" ? data.retryMs : undefined);
      this.show();
      return;
    }
    this.lastFrameAt = Date.now();
    if (name === "hello") {
      this.attempts = 0; // the backoff resets on hello, not on open
      this.streamCursor = data.cursor;
    }
    const msg = { t: "frame", name, from: this.streamCursor, cursor: data.cursor, events: data.events || [] };
    if (data.cursor) this.streamCursor = data.cursor;
    this.apply(msg);
    this.forward(msg);
    this.show();
    this.schedulePoll();
  },

  // The stream failed: close it (this backoff replaces the browser's fixed retry). A
  // stream that never opened was refused or unreachable; EventSource hides the status,
  // so one fetch of the same URL, dropped at its headers, tells which.
  async streamFailed(url) {
    const opened = this.opened;
    const gen = this.gen;
    this.closeStream();
    this.forward({ t: "down" });
    this.show();
    this.schedulePoll();
    if (opened) { this.reconnect(); return; }
    const res = await this.probe(url);
    if (gen !== this.gen) return;
    const status = res ? res.status : 0;
    if (status === 401 || status === 403) this.enterSignedOut();
    else if (status === 429 || status === 503) this.reconnect(retryAfterMs(res) || undefined); // poll meanwhile
    else this.reconnect();
  },

  async probe(url) {
    const ctl = new AbortController();
    const timer = setTimeout(() => ctl.abort(), 10000);
    try {
      return await fetch(url, { credentials: "same-origin", signal: ctl.signal, headers: { accept: "text/event-stream" } });
    } catch (_) {
      return null;
    } finally {
      clearTimeout(timer);
      ctl.abort(); // never read the body: a 200 here would be a stream
    }
  },

  // The next connect: `ms` when given (bye's retryMs, Retry-After), else the backoff.
  reconnect(ms) {
    clearTimeout(this.reconnectTimer);
    if (!this.running || this.signedOut || this.role === "follower") return;
    const backoff = Math.min(RECONNECT_MAX_MS, RECONNECT_MIN_MS * 2 ** this.attempts) * (0.8 + Math.random() * 0.4);
    this.attempts++;
    this.reconnectTimer = setTimeout(() => this.connect(), typeof ms === "number" ? ms : backoff);
    this.schedulePoll();
  },

  checkHealth() {
    // 45 s of silence (a buffering proxy can hold a mute stream): close and reconnect.
    if (this.es && Date.now() - Math.max(this.lastFrameAt, this.streamSince) > HEALTHY_MS) {
      this.closeStream();
      this.forward({ t: "down" });
      this.reconnect();
    }
    this.show();
    this.schedulePoll(); // health and the run's expiry change the cadence
  },

  // §7.2: 401/403 from either endpoint: close the stream, stop polling for 60 s, then
  // try one poll. Blocks send no change-driven reads meanwhile (they check `signedOut`).
  enterSignedOut() {
    const first = !this.signedOut;
    this.signedOut = true;
    this.closeStream();
    this.forward({ t: "down" });
    clearTimeout(this.reconnectTimer);
    clearTimeout(this.pollTimer);
    const gen = this.gen;
    this.pollTimer = setTimeout(() => { if (gen === this.gen) this.poll(); }, SIGNED_OUT_COOLDOWN_MS);
    this.show();
    if (first) checkSessionAfterRefusal();
  },

  leaveSignedOut() {
    this.signedOut = false;
    this.attempts = 0;
    this.connect();
    changes.flushSoon(); // readings that went stale meanwhile are read once
    // A cadence timer that fired while signed out read nothing and set no next one:
    // every block reads what is due now, which restarts its 10 s cadence (host.md §10).
    for (const view of page.blocks.values()) view.trigger();
  },

  // ---- §7.4: cursor handling ----

  epochOf(cursor) {
    return cursor ? String(cursor).split(".")[0] : null;
  },

  seqOf(cursor) {
    const n = Number(String(cursor || "").split(".")[1]);
    return isFinite(n) ? n : 0;
  },

  // One answer (own frame, own poll, or one the leader forwarded).
  apply(msg) {
    if (msg.name === "reset" || msg.reset) this.reset(msg.cursor);
    else this.deliver(msg.events || [], msg.from, msg.cursor);
  },

  // Events at or below the cursor are dropped before subscribers see them, so no seq is
  // delivered twice in an epoch. The cursor only moves forward, and only with an answer
  // that continues from where this tab is (`from` ≤ cursor): a follower adopts a cursor
  // only together with the events it came with. Events of an answer that does not
  // continue are delivered but remembered (`above`) until the cursor passes them.
  deliver(events, from, cursor) {
    if (!cursor) return;
    const epoch = this.epochOf(cursor);
    if (this.epoch && epoch !== this.epoch) { this.reset(cursor); return; }
    const mine = this.cursor ? this.seqOf(this.cursor) : 0;
    const fresh = events.filter((e) => e && typeof e.seq === "number" && e.seq > mine && !this.above.has(e.seq));
    const continues = !this.cursor || (!!from && this.epochOf(from) === this.epoch && this.seqOf(from) <= mine);
    if (continues) this.adopt(cursor);
    else for (const e of fresh) if (this.above.size < 10000) this.above.add(e.seq);
    if (fresh.length) changes.receive(fresh);
  },

  adopt(cursor) {
    if (!this.cursor) {
      this.cursor = cursor;
      this.epoch = this.epochOf(cursor);
      changes.start(this.epoch, this.seqOf(cursor)); // the counters' floor (§7.5)
    } else if (this.seqOf(cursor) > this.seqOf(this.cursor)) {
      this.cursor = cursor;
    }
    const at = this.seqOf(this.cursor);
    for (const seq of this.above) if (seq <= at) this.above.delete(seq);
  },

  // A reset (frame, poll, or epoch change) sets cursor and epoch from the signal, sets
  // the counter floor to its seq, and makes every reading stale; visible ones re-read
  // once under the normal scheduling, hidden ones when they become visible.
  reset(cursor) {
    if (!cursor) return;
    this.cursor = cursor;
    this.epoch = this.epochOf(cursor);
    this.above.clear();
    changes.reset(this.epoch, this.seqOf(cursor));
    for (const view of page.blocks.values()) view.markAllStale(cursor);
    changes.chatsDirty = true;
    changes.flushSoon();
  },

  // ---- §7.3: the poll loop (every role; a follower's is the safety net) ----

  // §7.3: a reply being written in the shown chat makes a run active for 5 min,
  // renewed by every chat load that still shows it writing.
  setRunActive(active) {
    const was = Date.now() < this.runUntil;
    this.runUntil = active ? Date.now() + RUN_TTL_MS : 0;
    if (active && !was) this.nudge();
    this.schedulePoll();
  },

  interval() {
    const run = Date.now() < this.runUntil;
    const base = run && !this.healthy() ? POLL_UNHEALTHY_MS : POLL_HEALTHY_MS;
    const shown = document.hidden ? Math.max(base, POLL_HIDDEN_MIN_MS) : base;
    if (!this.failures) return shown;
    return Math.min(POLL_FAILURE_CAP_MS, shown * 2 ** Math.min(this.failures, 5));
  },

  // Polls never overlap; the next one is due at the last start + the current interval
  // (so a changed condition reschedules it), never before a Retry-After.
  schedulePoll() {
    if (!this.running || this.signedOut || this.pollInFlight) return;
    clearTimeout(this.pollTimer);
    const at = Math.max(this.lastPollAt + this.interval(), this.pollNotBefore);
    this.pollTimer = setTimeout(() => this.poll(), Math.max(0, at - Date.now()));
  },

  // A poll now on run start, page shown or window focus, at most once per 2 s.
  nudge() {
    const now = Date.now();
    if (!this.running || this.signedOut || now - this.lastNudgeAt < NUDGE_GAP_MS || now < this.pollNotBefore) return;
    this.lastNudgeAt = now;
    this.poll();
  },

  async poll() {
    if (!this.running || this.pollInFlight) return;
    clearTimeout(this.pollTimer);
    const gen = this.gen;
    const from = this.cursor;
    const ctl = new AbortController();
    const timer = setTimeout(() => ctl.abort(), Math.max(10000, 4 * this.interval()));
    this.pollInFlight = true;
    this.lastPollAt = Date.now();
    let res = null;
    let body = null;
    try {
      res = await fetch(FEED_POLL + (from ? "?cursor=" + encodeURIComponent(from) : ""), { credentials: "same-origin", signal: ctl.signal });
      if (res.ok) body = await res.json();
    } catch (_) {
      body = null;
    } finally {
      clearTimeout(timer);
    }
    if (gen !== this.gen) return; // stopped or restarted meanwhile
    this.pollInFlight = false;
    const status = res ? res.status : 0;
    if (body && body.cursor) {
      this.failures = 0;
      if (this.signedOut) this.leaveSignedOut();
      const msg = { t: "poll", from, cursor: body.cursor, events: body.events || [], reset: !!body.reset };
      this.apply(msg);
      this.forward(msg);
    } else if (status === 401 || status === 403) {
      this.enterSignedOut();
      return;
    } else {
      if (status !== 429) this.failures++; // 5xx, network, timeout
      const wait = retryAfterMs(res);
      if (wait) this.pollNotBefore = Date.now() + wait;
      if (this.signedOut) { this.enterSignedOut(); return; } // the one poll failed: wait again
    }
    this.show();
    this.schedulePoll();
  },
};

// ---------- counters (sync.md §7.5) ----------

// Every delivered event bumps `s:<scope>`, `w:<scope>` (key-less events), `k:<key>` and
// `n:<source name>` to its seq. Reads return max(value, floor) within the epoch; the
// floor is the cursor seq the transport started at, raised by resets. At most 1,000
// entries: the least recently bumped one that no block on the page observes is evicted
// (it then reads as the floor). Counters are bumped by the page's own echoes too: live
// blocks never ignore echoes (§7.6); reading versions keep echoes from causing work.
const changes = {
  epoch: null,
  floor: null,
  entries: new Map(), // id -> seq, least recently bumped first
  windowTimer: null,
  chatsDirty: false,

  clear() {
    this.epoch = this.floor = null;
    this.entries.clear();
    clearTimeout(this.windowTimer);
    this.windowTimer = null;
    this.chatsDirty = false;
  },

  // The transport's first cursor: readings below it are stale from the start, so the
  // visible ones read at once.
  start(epoch, seq) {
    this.epoch = epoch;
    this.floor = seq;
    this.checkViews();
  },

  reset(epoch, seq) {
    this.entries.clear();
    this.epoch = epoch;
    this.floor = seq;
  },

  value(id) {
    const v = this.entries.get(id);
    return Math.max(v === undefined ? 0 : v, this.floor || 0);
  },

  counter(source) {
    return this.value("n:" + source);
  },

  // The maximum over several sources: it moves whenever any of them does (seqs are global).
  counters(sources) {
    return Math.max(this.floor || 0, ...sources.map((s) => this.counter(s)));
  },

  bump(id, seq) {
    if (this.entries.get(id) >= seq) return false;
    this.entries.delete(id); // re-inserted last: the most recently bumped
    this.entries.set(id, seq);
    return true;
  },

  receive(events) {
    let moved = false;
    for (const e of events) {
      if (typeof e.scope === "string") {
        moved = this.bump("s:" + e.scope, e.seq) || moved;
        if (e.key === null || e.key === undefined) moved = this.bump("w:" + e.scope, e.seq) || moved;
      }
      if (typeof e.key === "string") moved = this.bump("k:" + e.key, e.seq) || moved;
      if (typeof e.source === "string") moved = this.bump("n:" + e.source, e.seq) || moved;
      if (e.source === CHATS_SOURCE) this.chatsDirty = true;
    }
    this.evict();
    if (moved) this.flushSoon();
  },

  evict() {
    if (this.entries.size <= MAX_COUNTERS) return;
    const watched = new Set(["n:" + CHATS_SOURCE]);
    for (const view of page.blocks.values()) for (const id of view.counterIds()) watched.add(id);
    for (const id of this.entries.keys()) {
      if (this.entries.size <= MAX_COUNTERS) break;
      if (!watched.has(id)) this.entries.delete(id);
    }
  },

  // §7.7: the counter value that makes a reading with this `sync` stale, or 0.
  staleBy(sync) {
    if (!sync || this.epoch === null) return 0;
    if (sync.epoch !== this.epoch) return Math.max(this.floor || 0, 1);
    let top = this.floor || 0;
    if (!sync.keys || sync.keys.length === 0) top = Math.max(top, this.value("s:" + sync.scope));
    else for (const id of ["w:" + sync.scope, ...sync.keys.map((k) => "k:" + k)]) top = Math.max(top, this.value(id));
    return top > sync.version ? top : 0;
  },

  // §7.7: a 250 ms non-resetting window after a counter moves: events during it join,
  // it is not extended.
  flushSoon() {
    if (!this.windowTimer) this.windowTimer = setTimeout(() => this.flush(), CHANGE_WINDOW_MS);
  },

  flush() {
    this.windowTimer = null;
    if (!feed.running || feed.signedOut) return;
    this.checkViews();
    // §4.4: the shown chat is re-read only when `host.chats` moved past what it shows,
    // so the echo of the page's own write (already shown) triggers nothing.
    if (this.chatsDirty) {
      this.chatsDirty = false;
      if (this.counter(CHATS_SOURCE) > page.chatVersion) reloadChat(true);
    }
  },

  checkViews() {
    for (const view of page.blocks.values()) view.onChanges();
  },
};

// ---------- change-driven reads (sync.md §7.7) ----------

// Per page at most 4 change-driven `ui.query` requests in flight; the rest wait in
// order. Per query: one request at a time, at least 1 s between the starts of two
// change-driven ones, and a `retryAfterMs` from the host is honoured (`notBefore`).
// A queued query is re-checked when its turn comes: fresh by then, hidden, or given up
// for its counter, it is dropped.
const reader = {
  queue: [], // {view, name}
  inFlight: 0,
  timer: null,

  want(view, name) {
    if (!this.queue.some((j) => j.view === view && j.name === name)) this.queue.push({ view, name });
    this.pump();
  },

  pump() {
    clearTimeout(this.timer);
    this.timer = null;
    const now = Date.now();
    let wake = Infinity;
    for (let i = 0; i < this.queue.length && this.inFlight < MAX_CHANGE_READS;) {
      const { view, name } = this.queue[i];
      const seq = view.changeDue(name);
      if (!seq) { this.queue.splice(i, 1); continue; }
      const q = view.q(name);
      const at = Math.max(q.lastChangeStart + MIN_CHANGE_GAP_MS + GAP_SLACK_MS, q.notBefore);
      if (q.inFlight || at > now) {
        if (!q.inFlight) wake = Math.min(wake, at); // else: its answer pumps again
        i++;
        continue;
      }
      this.queue.splice(i, 1);
      this.start(view, name, seq);
    }
    if (wake < Infinity) this.timer = setTimeout(() => this.pump(), wake - now);
  },

  async start(view, name, seq) {
    this.inFlight++;
    view.q(name).lastChangeStart = Date.now();
    try {
      await view.read(name, changes.epoch + "." + seq, seq);
    } finally {
      this.inFlight--;
      this.pump();
    }
  },
};

// Read-only state for tests and debugging.
window.uiblocksDebug = Object.freeze({
  role: () => feed.role,
  cursor: () => feed.cursor,
  streams: () => [...feed.streams].filter((es) => es.readyState !== 2).length,
  inFlight: () => reader.inFlight,
});

// §5.3: tabs share one cookie, so signing in or out in one tab changes every tab's
// principal. Tabs tell each other; each re-reads /api/me and, if it changed, restarts
// its transport (a new election under the new principal's lock and channel).
const sessionChannel = typeof BroadcastChannel === "function" ? new BroadcastChannel("uiblocks-session") : null;

function announcePrincipal() {
  if (sessionChannel) sessionChannel.postMessage({ userId: page.me ? page.me.userId : null });
}

if (sessionChannel) {
  sessionChannel.onmessage = (e) => {
    const userId = e.data ? e.data.userId : null;
    if (userId !== (page.me ? page.me.userId : null)) recheckPrincipal(userId);
  };
}

// `userId` is what the other tab announced: null (signed out) needs no request.
async function recheckPrincipal(userId) {
  let me = null;
  if (userId) try { me = await currentUser(); } catch (_) { me = null; }
  if ((me ? me.userId : null) === (page.me ? page.me.userId : null)) return;
  leaveWorkspace();
  if (me) {
    page.me = me;
    await enter();
  }
}

// ---------- keeping a keyboard user's place ----------

// Every control a block draws carries `data-focus`, a key that stays the same across
// redraws (its node id, with a suffix where one node draws several controls), and the
// block's element carries `data-block`. A redraw replaces the elements, which drops focus
// to <body>; putting it back on the control with the same key lets the next Tab or arrow
// key go on from where the person was. When that control cannot take focus now (it became
// disabled, or the block has not been drawn yet), focus goes to a stand-in: the key named
// by `data-focus-else` (a Choice's: the note that a choice was sent), else the next
// control of the block; the control itself gets focus back on a later redraw, unless the
// person moved on meanwhile (or 10 s passed).
let lostPlace = null; // {block, key, alt, standIn, at}
let restoringFocus = false;
const LOST_PLACE_MS = 10000;

// Where focus is, as a place a redraw can give back; null when it is on no block control.
function focusPlace() {
  const el = document.activeElement;
  const lost = lostPlace && Date.now() - lostPlace.at < LOST_PLACE_MS ? lostPlace : null;
  if (el && el !== document.body && el.isConnected) {
    if (!el.dataset || !el.dataset.focus) return null;
    const block = el.closest("[data-block]");
    const here = { block: block ? block.dataset.block : null, key: el.dataset.focus, alt: el.dataset.focusElse || null };
    // Still on the stand-in a redraw chose: the control the person was on comes first.
    if (lost && lost.standIn === here.key && lost.block === here.block) return lost;
    return here;
  }
  return lost;
}

function canFocus(el) {
  return !!el && !el.disabled && el.getClientRects().length > 0;
}

function focusOn(el) {
  restoringFocus = true;
  try { el.focus({ preventScroll: true }); } finally { restoringFocus = false; }
}

// Gives focus back to `place` after a redraw, if it was dropped (it is on <body>).
function restorePlace(place) {
  if (!place) return;
  const active = document.activeElement;
  if (active && active !== document.body && active.isConnected) return;
  const at = place.at || Date.now();
  const scope = place.block ? document.querySelector(`[data-block="${CSS.escape(place.block)}"]`) : document;
  const find = (key) => (scope && key ? scope.querySelector(`[data-focus="${CSS.escape(key)}"]`) : null);
  const el = find(place.key);
  if (canFocus(el)) {
    lostPlace = null;
    focusOn(el);
    return;
  }
  let stand = find(place.alt);
  if (!canFocus(stand)) {
    const all = scope && el ? [...scope.querySelectorAll("[data-focus]")].filter(canFocus) : [];
    stand = all.find((c) => el.compareDocumentPosition(c) & Node.DOCUMENT_POSITION_FOLLOWING)
      || all.reverse().find((c) => el.compareDocumentPosition(c) & Node.DOCUMENT_POSITION_PRECEDING)
      || null;
  }
  lostPlace = { block: place.block, key: place.key, alt: place.alt, standIn: stand ? stand.dataset.focus : null, at };
  if (stand) focusOn(stand);
}

// The person moved focus (or pointed somewhere): a lost place is no longer theirs.
document.addEventListener("focusin", () => { if (!restoringFocus) lostPlace = null; });
document.addEventListener("pointerdown", () => { lostPlace = null; }, true);

// ---------- one block on screen ----------

class BlockView {
  constructor(chatId, item, block, frozen, answer) {
    this.chatId = chatId;
    this.item = item;
    this.block = block;
    this.frozen = frozen; // {revision, readings, links, fallback} or undefined
    this.answer = answer;
    this.values = { ...(block.defaults || {}) };
    this.inputs = inputNames(block);
    this.defaultsKey = JSON.stringify(this.values);
    this.readings = {}; // name -> latest reading (any state)
    this.good = {}; // name -> {inputs, reading}: last fresh reading per input set
    this.stale = {}; // name -> {seq, at}: made stale by a reset (sync.md §7.4)
    this.qs = {}; // name -> per-query read state, see q()
    this.links = new Map(); // nodeId -> resolution
    this.linkKey = "";
    this.restTimer = null;
    this.evalTimer = null;
    this.viewQueue = Promise.resolve(); // the `/ui/view` requests in order (evaluate)
    this.refreshing = false;
    this.again = new Set(); // queries asked for while a cycle ran
    this.disposed = false;
    // Hidden blocks never read (sync.md §7.7): with an IntersectionObserver a block counts
    // as hidden until it reports being on screen.
    this.visible = !("IntersectionObserver" in window);
    this.view = null;
    this.error = null;
    this.el = h("div", { class: "block", role: "group", "data-block": block.id });
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

  // What `ui.query`, `ui.link` and `ui.choice` get as `values`: the inputs only (a
  // declared variable no control binds is not something a page may send).
  inputValues() {
    const out = {};
    for (const name of this.inputs) if (Object.prototype.hasOwnProperty.call(this.values, name)) out[name] = this.values[name];
    return out;
  }

  dispose() {
    this.disposed = true;
    clearTimeout(this.restTimer);
    clearTimeout(this.evalTimer);
    for (const q of Object.values(this.qs)) clearTimeout(q.cadence);
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

  // One `/ui/view` at a time per block, in the order asked: each is built when it is sent,
  // from the values the one before left, so an answer never undoes a later edit (host.md
  // §10: a changed input is read with its last value). A change's value may be a function
  // of the values at that moment (a checklist toggles one item of what is set by then).
  evaluate(extra) {
    const run = this.viewQueue.then(() => this.evaluateNow(extra));
    this.viewQueue = run.catch(() => {});
    return run;
  }

  async evaluateNow(extra) {
    if (this.disposed) return;
    if (extra && extra.change && typeof extra.change.value === "function") {
      extra = { ...extra, change: { ...extra.change, value: extra.change.value(this.values) } };
    }
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

  // Per-query read state: the request in flight, the 10 s cadence timer, and the
  // change-driven bookkeeping of sync.md §7.7.
  q(name) {
    return this.qs[name] || (this.qs[name] = {
      inFlight: null, // {inputs, trailing, at}
      cadence: null,
      lastReadingAt: 0,
      lastChangeStart: 0,
      notBefore: 0, // retryAfterMs from the host
      tries: 0,
      gaveUp: 0, // the counter no more change-driven requests are sent for
    });
  }

  // The block became visible, or the page did: a stale reading is read once at once
  // (change-driven); a query not read for 10 s (or never on this page) is read now.
  trigger() {
    if (!this.live || !this.visible || document.hidden || feed.signedOut) return;
    const due = [];
    for (const name of this.queryNames) {
      const q = this.q(name);
      if (this.changeDue(name)) reader.want(this, name);
      else if (!q.inFlight && Date.now() - q.lastReadingAt >= REFRESH_MS) due.push(name);
    }
    if (due.length) this.cycle(due);
  }

  // §7.7: every reading that arrives, whatever caused it, restarts its query's 10 s
  // cadence timer. A timer that fires while the block is hidden does nothing: the block
  // reads when it becomes visible (trigger).
  restartCadence(name) {
    const q = this.q(name);
    clearTimeout(q.cadence);
    q.cadence = setTimeout(() => { q.cadence = null; this.cycle([name]); }, REFRESH_MS);
  }

  // Reads `names` (all queries by default) one after the other, then draws.
  async cycle(names) {
    if (!this.live || this.disposed) return;
    if (!this.visible || document.hidden || feed.signedOut) return;
    const wanted = (names || this.queryNames).slice(0, MAX_QUERIES_PER_CYCLE);
    if (this.refreshing) { for (const n of wanted) this.again.add(n); return; }
    this.refreshing = true;
    this.drawStatus();
    try {
      for (const name of wanted) {
        if (!this.visible || this.disposed) break;
        await this.read(name);
      }
    } finally {
      this.refreshing = false;
      this.evaluateSoon();
    }
    if (this.again.size) {
      const more = [...this.again];
      this.again.clear();
      this.cycle(more);
    }
  }

  evaluateSoon() {
    if (this.evalTimer || this.disposed) return;
    this.evalTimer = setTimeout(() => { this.evalTimer = null; this.evaluate(); }, 0);
  }

  // One `ui.query`; `seen`/`seq` for a change-driven request (sync.md §8.3). At most one
  // request per query at a time; inputs changed meanwhile are read once it settles.
  async read(name, seen, seq) {
    const q = this.q(name);
    const inputs = this.inputsKey;
    if (q.inFlight) {
      if (q.inFlight.inputs !== inputs) q.inFlight.trailing = true;
      return;
    }
    const slot = { inputs, trailing: false, at: Date.now() };
    q.inFlight = slot;
    const body = {
      chatId: this.chatId,
      itemId: this.item.id,
      blockId: this.block.id,
      revision: this.block.revision,
      query: name,
      values: this.inputValues(),
    };
    if (seen) body.seen = seen;
    let reading;
    try {
      reading = await api("POST", "/ui/query", body);
    } catch (e) {
      reading = { state: "failed", code: e.code || "unreadable", reason: e.message, readAt: Date.now() };
      // 403: the chat is gone or no longer the caller's; like a refused reading it is
      // not read again for change events (sync.md §9.2), only by the cadence.
      if (e.status === 403) reading.denied = true;
      if (e.status === 401) feed.enterSignedOut();
    }
    q.inFlight = null;
    if (this.disposed) return;
    this.readings[name] = reading;
    if (reading.state === "fresh") {
      this.good[name] = { inputs, reading };
      if (this.stale[name] && this.stale[name].at <= slot.at) delete this.stale[name];
    }
    q.lastReadingAt = Date.now();
    this.restartCadence(name);
    if (seq) this.settleChange(q, reading, seq);
    this.evaluateSoon();
    if (slot.trailing) await this.read(name);
    else if (this.changeDue(name)) reader.want(this, name); // stale again meanwhile: one trailing request
    reader.pump();
  }

  // §7.7, §8.4: after a change-driven answer. A `retryAfterMs` (the host's 1 s gap, busy
  // slots) delays the next try; an answer whose version is still below the counter
  // that triggered it is not retried for that counter: the 10 s cadence takes over.
  settleChange(q, reading, seq) {
    const version = reading.sync && typeof reading.sync.version === "number" ? reading.sync.version : -1;
    if (version >= seq) {
      q.tries = 0;
    } else if (typeof reading.retryAfterMs === "number" && q.tries < 3) {
      q.tries++;
      q.notBefore = Date.now() + reading.retryAfterMs;
    } else {
      q.tries = 0;
      q.gaveUp = Math.max(q.gaveUp, seq);
    }
  }

  // The counter seq that makes `name` due for a change-driven read, or 0: hidden blocks
  // never read, nothing is read while signed out, and a reading last refused is retried
  // only by the cadence or a user action (sync.md §9.2); so is one the server refused
  // with a 403.
  changeDue(name) {
    if (this.disposed || !this.live || !this.visible || document.hidden || feed.signedOut) return 0;
    const r = this.readings[name];
    if (r && (r.state === "refused" || r.denied)) return 0;
    const g = this.good[name];
    let seq = g ? changes.staleBy(g.reading.sync) : 0;
    if (this.stale[name]) seq = Math.max(seq, this.stale[name].seq || 1);
    return seq > this.q(name).gaveUp ? seq : 0;
  }

  // A reset: every reading is stale; what was given up for (seqs of the old position,
  // maybe of another epoch) no longer counts.
  markAllStale(cursor) {
    const seq = feed.seqOf(cursor);
    for (const name of this.queryNames) {
      this.stale[name] = { seq, at: Date.now() };
      Object.assign(this.q(name), { gaveUp: 0, tries: 0, notBefore: 0 });
    }
  }

  // The counters moved (end of the 250 ms window) or the transport started: each
  // visible stale reading gets one change-driven request.
  onChanges() {
    for (const name of this.queryNames) if (this.changeDue(name)) reader.want(this, name);
  }

  // The counter entries this block's readings observe (never evicted, §7.5).
  counterIds() {
    const out = [];
    for (const g of Object.values(this.good)) {
      const sync = g.reading.sync;
      if (!sync) continue;
      if (!sync.keys || sync.keys.length === 0) out.push("s:" + sync.scope);
      else out.push("w:" + sync.scope, ...sync.keys.map((k) => "k:" + k));
    }
    return out;
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
        values: this.inputValues(),
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
      toast(`A host would open ${t.type} ${what}` + (res.projectId ? ` of project ${res.projectId}` : "") + " here.");
    } else {
      toast("This link is not available.");
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
    const write = { write: true };
    try {
      await api("POST", "/ui/choice", {
        chatId: this.chatId,
        itemId: this.item.id,
        blockId: this.block.id,
        revision: this.block.revision,
        choiceId,
        values: this.inputValues(),
        reads: this.reads(),
      }, write);
      toast("Choice sent as your next message; an agent would answer it (the demo has none).");
    } catch (e) {
      toast("The choice was not sent: " + e.message);
    }
    await reloadChat(false);
    // sync.md §4.4: this load (started after the write) shows it, so the write's seq is
    // the version of the shown chat; its echo then triggers no second load.
    if (write.seq) page.chatVersion = Math.max(page.chatVersion, feed.seqOf(write.seq));
  }

  // ---- drawing ----

  draw() {
    const place = focusPlace();
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
    if (place && place.block === this.block.id) restorePlace(place);
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

// The names a page may send as `values` (host.md §11, `uiInputValues`): the local
// variables bound by a complete, error-free control and the targets of Button actions.
function inputNames(block) {
  const own = (o, k) => !!o && Object.prototype.hasOwnProperty.call(o, k);
  const local = (n) => typeof n === "string" && own(block.defaults, n) && !own(block.queries, n);
  const names = new Set();
  const walk = (node) => {
    if (!node || node.type === "$text") return;
    if (!node.error && node.complete) {
      for (const v of Object.values(node.bindings || {})) if (local(v)) names.add(v);
      const action = node.type === "Button" && node.expressions ? node.expressions.action : null;
      const target = action && action.kind === "call" && Array.isArray(action.args) ? action.args[0] : null;
      if (target && target.kind === "reference" && local(target.name)) names.add(target.name);
    }
    (node.children || []).forEach(walk);
  };
  (block.nodes || []).forEach(walk);
  return names;
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
    if (tone && heads) el.append(toneIcon(tone));
    el.append(h("span", {}, this.kids(n, ctx)));
    if (p.badge) el.append(h("span", { class: "badge", text: p.badge }));
    return el;
  },
  Callout(n, p, ctx) {
    const tone = toneOf(p) || "neutral";
    // The icon sits in a column of its own, beside the title (or the first line).
    return h("div", { class: "callout " + tone, role: tone === "danger" || tone === "warning" ? "note" : null },
      toneIcon(tone),
      h("div", { class: "callout-body" },
        p.title ? h("div", { class: "title", text: p.title }) : null,
        h("div", { class: "callout-text" }, this.kids(n, ctx))));
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
        h("div", { class: "fill" + (has ? "" : " indeterminate"), style: has ? { width: `${pct}%` } : null })));
  },
  Steps(n, p, ctx) {
    return h("ol", { class: "steps" }, this.kids(n, ctx));
  },
  Step(n, p, ctx) {
    const state = p.state || "pending";
    return h("li", { class: state },
      h("span", { class: "icon " + (state === "done" ? "tone-success" : state === "failed" ? "tone-danger" : state === "running" ? "tone-info" : ""), "aria-hidden": "true", text: STEP_ICON[state] || "•" }),
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
      const pct = p.previous !== 0 ? ` (${d >= 0 ? "+" : ""}${fmtNumber(Math.round((d / Math.abs(p.previous)) * 1000) / 10)}%)` : "";
      const tone = toneOf(p);
      // The change of a percentage is in percentage points, told apart from the relative
      // change beside it: "▲ +4.5 pts (+5.1%) vs 88%".
      const change = p.unit === "%" ? fmtNumber(d) + " pts" : withUnit(d, p.unit);
      delta = h("div", { class: "delta " + (tone ? "tone-" + tone : "muted"), text: `${d >= 0 ? "▲ +" : "▼ "}${change}${pct} vs ${withUnit(p.previous, p.unit)}` });
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
      ? h("button", { type: "button", class: "quiet", text: `Show all ${rows.length} rows`, "data-focus": n.id + "#more", onclick: (e) => { fill(true); e.target.remove(); } })
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
        "aria-controls": tid + "-p", text: t.props.title, "data-node": t.id, "data-focus": t.id,
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
    const d = h("details", { open: !this[key] }, h("summary", { text: p.title, "data-focus": n.id }), h("div", { class: "body" }, this.kids(n, ctx)));
    d.addEventListener("toggle", () => { this[key] = !d.open; });
    return d;
  },
  CodeBlock(n, p) {
    return h("pre", { class: "code" }, p.language ? h("span", { class: "lang", text: p.language }) : null, h("code", { text: this.text(n.children) }));
  },
  Image(n, p, ctx) {
    const name = p.alt != null ? p.alt : p.attachment != null ? p.attachment : p.generated != null ? p.generated : "unavailable";
    return h("figure", { class: "image" },
      h("div", { class: "ph", role: "img", "aria-label": String(name) }, pictureIcon(),
        " " + name + (p.attachment ? ` (attachment ${p.attachment})` : "")),
      n.children && n.children.length ? h("figcaption", {}, this.kids(n, ctx)) : null);
  },
  Sources(n, p, ctx) {
    return h("ol", { class: "sources", "aria-label": "Sources" }, this.kids(n, ctx));
  },
  Source(n, p) {
    const ok = /^https?:\/\//i.test(p.url || "");
    return h("li", {}, ok
      ? h("a", { href: p.url, target: "_blank", rel: "noopener noreferrer nofollow", text: p.title, "data-focus": n.id })
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
        type: "checkbox", checked: on, disabled: !bound || !interactive(item), "data-node": n.id + "#" + JSON.stringify(v), "data-focus": n.id + "#" + JSON.stringify(v),
        onchange: () => {
          // Toggled against what is set when the edit is sent, not what was drawn: two
          // quick clicks keep both.
          const name = n.bindings.value;
          const same = (c) => JSON.stringify(c) === JSON.stringify(v);
          this.change(n.id, "value", (values) => {
            const now = Array.isArray(values[name]) ? values[name] : checked;
            return now.some(same) ? now.filter((c) => !same(c)) : [...now, v];
          });
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
      h("input", { type: "checkbox", role: "switch", checked: p.value === true, "aria-checked": p.value === true ? "true" : "false", disabled: !bound, "data-focus": n.id, onchange: (e) => this.change(n.id, "value", e.target.checked) }),
      h("span", {}, this.kids(n, ctx)));
  },
  Slider(n, p, ctx) {
    const bound = "value" in (n.bindings || {}) && interactive(n);
    const out = h("output", { text: withUnit(p.value, p.unit) });
    const input = h("input", {
      type: "range", min: String(p.min), max: String(p.max), step: String(p.step || "any"), value: String(p.value),
      disabled: !bound, "aria-valuetext": withUnit(p.value, p.unit), "data-focus": n.id,
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
        type: "button", "aria-pressed": on ? "true" : "false", disabled: !bound, "data-node": o.id, "data-focus": o.id,
        onclick: () => { if (!on) this.change(n.id, "value", o.props.value); },
      }, this.kids(o, {}));
    }));
  },
  Option(n, p, ctx) {
    return h("span", {}, this.kids(n, ctx)); // read by Segmented
  },
  Button(n, p, ctx) {
    // Disabled, a Button stays focusable (aria-disabled): a press that disables it (an
    // action that sets what its `disabled` reads) leaves the person where they were.
    const off = p.disabled === true || !interactive(n) || !n.action;
    return h("button", { type: "button", "aria-disabled": off ? "true" : null, "data-focus": n.id, onclick: () => { if (!off) this.press(n.id); } }, this.kids(n, ctx));
  },
  Show(n, p, ctx) { return h("span", {}, this.kids(n, ctx)); }, // resolved by evaluation
  Each(n, p, ctx) { return h("span", {}, this.kids(n, ctx)); }, // resolved by evaluation
  Choices(n, p, ctx) {
    const blocked = this.choicesBlocked();
    const answer = this.sent();
    const items = (n.children || []).filter((c) => c.type === "Choice" && !c.error);
    items.sort((a, b) => (b.props.primary === true) - (a.props.primary === true));
    const note = answer
      ? h("div", { class: "answered", tabindex: "-1", "data-focus": n.id + "#sent", text: "✓ Sent: " + (answer.label || answer.choiceId) })
      : blocked && blocked !== "answered"
        ? h("div", { class: "muted", text: { streaming: "Choices open when the reply has finished.", refreshing: "Reading live data…", "no-reading": "Waiting for live data…", refused: "Live data was refused." }[blocked] || "" })
        : null;
    // Once a choice was sent, the sent one stays in full colour with a check mark
    // (pressed, but no longer pressable: aria-disabled keeps it focusable and readable);
    // the others are disabled and muted.
    return h("div", {}, h("div", { class: "choices" + (answer ? " settled" : ""), role: "group", "aria-label": "Choices" }, items.map((c) => {
      const label = this.text(c.children);
      const context = typeof c.props.context === "string" && c.props.context.trim() ? c.props.context : null;
      const chosen = !!answer && answer.choiceId === c.id;
      return h("button", {
        type: "button", class: "choice" + (c.props.primary === true ? " primary" : "") + (chosen ? " chosen" : ""), "data-node": c.id,
        "data-focus": c.id, "data-focus-else": n.id + "#sent",
        disabled: !chosen && (!!blocked || c.props.disabled === true || !interactive(c)),
        "aria-pressed": answer ? (chosen ? "true" : "false") : null,
        "aria-disabled": chosen ? "true" : null,
        onclick: () => { if (!chosen) this.choose(c.id); },
      },
      h("span", { class: "label" }, chosen ? h("span", { class: "check", "aria-hidden": "true", text: "✓" }) : null, label),
      context ? h("span", { class: "ctx", text: context }) : null);
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
    ? h("button", { type: "button", class: "chip", title: res.label || label, "data-node": n.id, "data-focus": n.id, onclick: () => this.openLink(n.id) }, res.label && n.type !== "Diff" && n.type !== "Node" ? res.label + (n.props.line ? ":" + n.props.line : "") : label)
    : h("span", { class: "chip plain", title: "not a link", text: label });
  if (n.children && n.children.length) return h("div", { class: "link-row" }, el, h("span", {}, this.kids(n, ctx)));
  return el;
};

// A value axis from 0 to at least `max` with "nice" steps (1, 2, 2.5 or 5 × 10^n) and
// 3–6 intervals: the smallest top wins, then the count nearest 5. Whole-number data gets
// whole-number steps only.
function niceAxis(max, integers) {
  if (!(max > 0)) max = 1;
  let best = null;
  const e0 = Math.floor(Math.log10(max));
  for (let e = e0 - 2; e <= e0 + 1; e++) {
    for (const m of [1, 2, 2.5, 5]) {
      const step = Number((m * 10 ** e).toPrecision(12));
      if (integers && !Number.isInteger(step)) continue;
      const n = Math.ceil(max / step - 1e-9);
      if (n < 3 || n > 6) continue;
      const top = Number((n * step).toPrecision(12));
      if (!best || top < best.top || (top === best.top && Math.abs(n - 5) < Math.abs(best.n - 5))) best = { step, n, top };
    }
  }
  if (!best) {
    const step = integers ? 1 : Number((10 ** e0).toPrecision(12));
    const n = Math.max(1, Math.ceil(max / step - 1e-9));
    best = { step, n, top: Number((n * step).toPrecision(12)) };
  }
  const ticks = [];
  for (let k = 0; k <= best.n; k++) ticks.push(Number((k * best.step).toPrecision(12)));
  return { top: best.top, ticks };
}

function drawChart(n, p) {
  const data = Array.isArray(p.data) ? p.data : [];
  const series = [];
  for (const row of data) {
    for (const [k, v] of Object.entries(row || {})) {
      if (k !== "label" && typeof v === "number" && isFinite(v) && !series.includes(k) && series.length < 6) series.push(k);
    }
  }
  if (!series.length || !data.length) return h("div", { class: "fallback", text: n.fallback });
  const val = (row, s) => (row && typeof row[s] === "number" && isFinite(row[s]) ? row[s] : null);
  const label = (row, i) => (row && row.label !== undefined ? scalarText(row.label) : String(i + 1));
  // One formatter for values, tooltips, the table and the axis ticks.
  const fmt = (v) => withUnit(v, p.unit);
  const kind = p.kind;
  const title = `${kind} chart of ${series.join(", ")}` + (p.unit ? ` in ${p.unit}` : "");
  const CHAR = 6.4; // about the width of a character at font size 11
  let max = 0;
  let integers = true;
  for (const row of data) {
    for (const s of series) if (val(row, s) !== null && !Number.isInteger(val(row, s))) integers = false;
    if (kind === "stacked") max = Math.max(max, series.reduce((a, s) => a + Math.max(0, val(row, s) || 0), 0));
    else for (const s of series) max = Math.max(max, val(row, s) || 0);
  }
  const W = 560;
  let root;
  if (kind === "hbar") {
    const rowH = 30;
    const labels = data.map(label);
    const lw = Math.min(160, Math.max(40, Math.ceil(Math.max(...labels.map((t) => t.length)) * CHAR) + 12));
    const valueW = Math.ceil(Math.max(...data.flatMap((row) => series.map((s) => (val(row, s) === null ? 0 : fmt(val(row, s)).length)))) * CHAR) + 12;
    const scale = max > 0 ? max : 1;
    root = svg("svg", { viewBox: `0 0 ${W} ${12 + data.length * rowH}`, width: String(W) });
    root.append(svg("title", {}, title));
    data.forEach((row, i) => {
      const y = 6 + i * rowH;
      root.append(svg("text", { x: String(lw - 8), y: String(y + rowH / 2 + 1), "font-size": "11", "text-anchor": "end", "dominant-baseline": "middle", fill: "#3d4550" }, labels[i]));
      const bh = (rowH - 8) / series.length;
      series.forEach((s, j) => {
        const v = val(row, s);
        if (v === null) return;
        const w = Math.max(0, (Math.max(0, v) / scale) * (W - lw - valueW));
        const by = y + 4 + j * bh;
        root.append(svg("rect", { x: String(lw), y: String(by), width: String(w), height: String(Math.max(1, bh - 2)), rx: "2", fill: COLORS[j] }, svg("title", {}, `${labels[i]} ${s}: ${fmt(v)}`)));
        root.append(svg("text", { x: String(lw + w + 6), y: String(by + (bh - 2) / 2 + 1), "font-size": "11", "dominant-baseline": "middle", fill: "#3d4550" }, fmt(v)));
      });
    });
  } else {
    const H = 220, B = 26, T = 10, R = 10;
    const axis = niceAxis(max, integers);
    const L = Math.max(28, Math.ceil(Math.max(...axis.ticks.map((t) => fmt(t).length)) * CHAR) + 10);
    const plotW = W - L - R, plotH = H - T - B;
    const yOf = (v) => T + plotH - (v / axis.top) * plotH;
    root = svg("svg", { viewBox: `0 0 ${W} ${H}`, width: String(W) });
    root.append(svg("title", {}, title));
    for (const t of axis.ticks) {
      const y = yOf(t);
      if (t > 0) root.append(svg("line", { x1: String(L), y1: String(y), x2: String(W - R), y2: String(y), stroke: "#e4e7eb" }));
      root.append(svg("text", { class: "tick", x: String(L - 6), y: String(y), "font-size": "11", "text-anchor": "end", "dominant-baseline": "middle", fill: "#4a525d" }, fmt(t)));
    }
    root.append(svg("line", { x1: String(L), y1: String(T + plotH), x2: String(W - R), y2: String(T + plotH), stroke: "#9aa1a9" }));
    const slot = plotW / data.length;
    data.forEach((row, i) => {
      root.append(svg("text", { x: String(L + slot * i + slot / 2), y: String(H - 8), "font-size": "11", "text-anchor": "middle", fill: "#3d4550" }, label(row, i)));
    });
    if (kind === "line") {
      series.forEach((s, j) => {
        let d = "";
        data.forEach((row, i) => {
          const v = val(row, s);
          const x = L + slot * i + slot / 2;
          if (v === null) { d += " "; return; }
          const y = yOf(v);
          d += (d === "" || d.endsWith(" ") ? "M" : "L") + x.toFixed(1) + "," + y.toFixed(1);
          root.append(svg("circle", { cx: String(x), cy: String(y), r: "3", fill: COLORS[j] }, svg("title", {}, `${label(row, i)} ${s}: ${fmt(v)}`)));
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
          const hgt = (Math.max(0, v) / axis.top) * plotH;
          let x, w, y;
          if (kind === "stacked") { x = x0; w = width; y = T + plotH - base - hgt; base += hgt; }
          else { w = width / series.length; x = x0 + j * w; y = T + plotH - hgt; }
          root.append(svg("rect", { x: String(x), y: String(y), width: String(Math.max(0, w - 1)), height: String(hgt), fill: COLORS[j] }, svg("title", {}, `${label(row, i)} ${s}: ${fmt(v)}`)));
        });
      });
    }
  }
  const legend = h("div", { class: "legend", "aria-hidden": "true" }, series.map((s, j) => h("span", {}, h("span", { class: "swatch", style: { background: COLORS[j] } }), s)));
  // The same numbers as a table for assistive tech (visually hidden, not `hidden`).
  const table = h("table", { class: "sr-only" }, h("caption", { text: title }),
    h("thead", {}, h("tr", {}, h("th", { scope: "col", text: "label" }), series.map((s) => h("th", { scope: "col", text: s })))),
    h("tbody", {}, data.map((row, i) => h("tr", {}, h("th", { scope: "row", text: label(row, i) }), series.map((s) => h("td", { text: val(row, s) === null ? "" : fmt(val(row, s)) }))))));
  root.setAttribute("aria-hidden", "true");
  return h("figure", { class: "chart", "aria-label": title }, root, legend, table);
}

// ---------- chats ----------

// The signed-in principal, or null. `GET /api/session` answers 200 either way, so a
// signed-out page load shows no failed request (`GET /api/me` answers 401 then).
async function currentUser() {
  const session = await api("GET", "/api/session");
  return session && session.user ? session.user : null;
}

function showNote(text) {
  $("#insert-note").textContent = text;
}

// What a press of a link or a choice did, shown for a few seconds at the bottom of the
// window, where it is seen whatever part of the page is scrolled into view. The element
// is a live region that stays in the document (drawn only while it holds text), so a
// screen reader announces each message.
let toastTimer = null;
const TOAST_MS = 5000;
function toast(text) {
  const el = $("#toast");
  el.textContent = text;
  clearTimeout(toastTimer);
  toastTimer = setTimeout(() => { el.textContent = ""; }, TOAST_MS);
}

async function signIn(user) {
  try {
    page.me = await api("POST", "/api/login", { user });
    announcePrincipal();
    await enter();
  } catch (e) {
    $("#signin-error").textContent = "Could not sign in: " + e.message;
  }
}

async function enter() {
  $("#signin-error").textContent = "";
  $("#signin").hidden = true;
  $("#workspace").hidden = false;
  $("#who").textContent = `${page.me.userId} · ${page.me.projects.join(", ")}`;
  feed.start(page.me.userId);
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
  if (!page.chatId && chats.length) {
    const linked = chats.find((c) => c.id === chatInAddress());
    await openChat((linked || chats[chats.length - 1]).id);
  }
}

// The open chat is in the address (`#chat=<id>`), so a reload or a copied link opens it
// again; a link to a chat the user cannot see opens their first chat instead.
function chatInAddress() {
  const hash = typeof location.hash === "string" ? location.hash : "";
  return new URLSearchParams(hash.replace(/^#/, "")).get("chat");
}

// `id` null: no chat (signed out).
function putChatInAddress(id) {
  if (typeof history === "undefined" || !history.replaceState) return;
  const hash = id === null ? "" : "#chat=" + encodeURIComponent(id);
  if ((location.hash || "") !== hash) history.replaceState(null, "", location.pathname + location.search + hash);
}

async function openChat(id) {
  page.chatId = id;
  putChatInAddress(id);
  for (const b of page.blocks.values()) b.dispose();
  page.blocks.clear();
  for (const btn of document.querySelectorAll("#chat-list button")) btn.setAttribute("aria-current", "false");
  const chat = page.chats.find((c) => c.id === id);
  const idx = page.chats.indexOf(chat);
  const btn = document.querySelectorAll("#chat-list button")[idx];
  if (btn) btn.setAttribute("aria-current", "true");
  await reloadChat(false);
}

// One chat load at a time. A load asked for while one runs starts after it (the running
// one may have begun before the caller's change); further asks join that second load.
let reloading = null;
let reloadNext = null;
function reloadChat(quiet) {
  if (!page.chatId) return Promise.resolve();
  if (reloading) {
    if (!reloadNext) reloadNext = reloading.then(() => { reloadNext = null; return reloadChat(quiet); });
    return reloadNext;
  }
  reloading = (async () => {
    // The `host.chats` counter before the load: the version of what it shows (§4.4).
    const version = changes.counter(CHATS_SOURCE);
    const chatId = page.chatId;
    try {
      const detail = await api("GET", "/api/chats/" + encodeURIComponent(chatId));
      if (chatId !== page.chatId) return; // another chat was opened meanwhile: its load follows
      page.detail = detail;
      page.chatVersion = Math.max(page.chatVersion, version);
      drawChat(detail, quiet);
      // sync.md §7.3: a reply being written here makes an agent run active.
      feed.setRunActive(detail.items.some((item) => item.streaming));
    } catch (e) {
      if (!quiet) $("#items").replaceChildren(h("li", { class: "error", text: "Could not load the chat: " + e.message }));
    }
  })().finally(() => { reloading = null; });
  return reloading;
}

function drawChat(detail) {
  // The blocks are drawn while out of the document: focus is given back once they are in.
  const place = focusPlace();
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
  restorePlace(place);
}

async function insertRun() {
  const branch = $("#insert-branch").value;
  const n = Math.floor(Math.random() * 900) + 100;
  const status = Math.random() < 0.7 ? "passed" : "failed";
  try {
    const res = await api("POST", "/api/sources/ci.runs/rows", { rows: [{ branch, name: `manual run ${n}`, status }] }, { write: true });
    showNote(`Inserted "manual run ${n}" (${status}) on ${branch}` + (res && res.cursor ? ` at ${res.cursor}` : ""));
  } catch (e) {
    showNote("Insert failed: " + e.message);
  }
}

async function signOut() {
  try { await api("POST", "/api/logout"); } catch (_) { /* already out */ }
  leaveWorkspace();
  announcePrincipal();
}

// A refusal (401/403) may mean the session itself is gone: signed out in another window,
// or a demo server that restarted and forgot its sessions. The page asks once per
// signed-out spell; when the server no longer knows the session it goes back to the
// sign-in screen and says why, rather than keep showing blocks that can no longer be read
// as if they were live, and when the browser's cookie is now another user's it follows
// that user. A session the server still knows waits out the cooldown of sync.md §7.2.
async function checkSessionAfterRefusal() {
  const was = page.me ? page.me.userId : null;
  if (!was) return;
  let me;
  try { me = await currentUser(); } catch (_) { return; } // unreachable: the cooldown goes on
  if (!page.me || page.me.userId !== was) return; // changed meanwhile by another path
  if (me && me.userId === was) return;
  leaveWorkspace();
  announcePrincipal();
  if (me) {
    page.me = me;
    await enter();
  } else {
    $("#signin-error").textContent = "Your session ended. Sign in again.";
  }
}

// Back to the sign-in screen: the transport stops (its leadership passes to another tab).
function leaveWorkspace() {
  feed.stop();
  for (const b of page.blocks.values()) b.dispose();
  page.blocks.clear();
  page.me = null;
  page.chatId = null;
  page.chats = [];
  // Nothing of the last user's chats stays in the document.
  $("#items").replaceChildren();
  $("#chat-list").replaceChildren();
  $("#chat-title").textContent = "Pick a chat";
  $("#insert-note").textContent = "";
  putChatInAddress(null);
  $("#workspace").hidden = true;
  $("#signin").hidden = false;
  $("#who").textContent = "";
}

// sync.md §7.3: showing the page or focusing the window polls at once (at most once per
// 2 s) and changes the cadence; a shown page reads its visible blocks if due (§7.7).
document.addEventListener("visibilitychange", () => {
  if (!document.hidden) {
    feed.nudge();
    for (const b of page.blocks.values()) b.trigger();
  }
  feed.schedulePoll();
});
window.addEventListener("focus", () => feed.nudge());

async function boot() {
  for (const btn of document.querySelectorAll("[data-user]")) btn.addEventListener("click", () => signIn(btn.dataset.user));
  $("#insert-run").addEventListener("click", insertRun);
  $("#signout").addEventListener("click", signOut);
  const wanted = new URLSearchParams(location.search).get("user");
  let me = null;
  try { me = await currentUser(); } catch (_) { me = null; }
  if (me && (!wanted || wanted === me.userId)) {
    page.me = me;
    await enter();
  } else if (wanted) {
    await signIn(wanted);
  }
}

boot();
