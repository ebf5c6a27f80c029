//! The browser end-to-end test: the demo page in headless Chromium, driven over WebDriver
//! (fantoccini and a chromedriver child process) against the demo server on a loopback
//! port. It signs in as alice, opens the builds chat, checks the blocks are drawn, switches
//! the Segmented and checks the table is read again with the new branch, inserts a CI run
//! through the source's write path and checks it is on the page within 2 s without a
//! reload, presses a Choice and checks it became the chat's next user message (and that
//! the sent one is marked), checks that the page logged no error and got no failed
//! request from its boot on, and saves a screenshot (`demo.png`, or `failure.png` when a
//! step fails) under `$CARGO_TARGET_DIR/e2e/` (`UI_E2E_ARTIFACTS` overrides the directory).
//!
//! Accessibility: axe-core ([`AXE_VERSION`], injected into the page) runs the WCAG 2.0/2.1
//! A and AA rules on the signed-out page, on each demo chat once its blocks are drawn,
//! after each kind of control was changed and with the pointer over a pressed Segmented
//! option; any violation fails the test. A contrast check of its own adds the controls
//! axe skips (disabled ones). In the chat that shows all 36 components, the test walks
//! the page with Tab from its start, operates each control of the block with the keyboard
//! (Space, Enter, arrow keys) and asserts that focus stays on the same control (after a
//! Choice is sent: on the sent Choice) and that the next Tab goes on to the next stop.
//!
//! Ignored by default because it needs Debian's `chromium` and `chromium-driver` and
//! axe-core from npm; `cargo xtask ci` installs them when missing and runs it with
//! `--include-ignored`. `UI_E2E_CHROMEDRIVER` and `UI_E2E_CHROMIUM` override
//! `/usr/bin/chromedriver` and `/usr/bin/chromium`, `UI_E2E_AXE` the path of
//! `axe.min.js` (see [`axe_path`]).

#![allow(missing_docs)]

mod common;
mod e2e;

use std::panic::AssertUnwindSafe;
use std::time::{Duration, Instant};

use axum::http::StatusCode;
use common::TempDir;
use e2e::*;
use fantoccini::actions::{InputSource, KeyAction, KeyActions, MouseActions, PointerAction};
use fantoccini::key::Key;
use fantoccini::{Client, Locator};
use futures_util::FutureExt;
use serde_json::{Value as Json, json};

/// Waits for the page to load, draw or read: generous, the machine may be busy.
const SLOW: Duration = Duration::from_secs(15);
/// The issue's bound: a write shows on the page within 2 s.
const LIVE: Duration = Duration::from_secs(2);
/// The whole flow, so that a hang ends as a failure with a screenshot.
const WHOLE: Duration = Duration::from_secs(150);
/// At most this many Tab presses in the keyboard walk of the page.
const MAX_STOPS: usize = 60;

const CHAT_TITLE: &str = "How are the builds?";
const RELEASE_TITLE: &str = "Release";
const EVERY_TITLE: &str = "Every component";

/// A snapshot of the builds block (the one with the Segmented and the live Table).
const RUNS_BLOCK: &str = r##"
const block = [...document.querySelectorAll("#items .block")]
  .find((b) => b.querySelector(".segmented") && b.querySelector("table"));
if (!block) return null;
const text = (el) => (el ? el.textContent.trim() : null);
const summary = block.querySelector(".summary > span:not(.icon):not(.badge)");
return {
  summary: text(summary),
  badge: text(block.querySelector(".summary .badge")),
  rows: [...block.querySelectorAll("tbody tr")].map((tr) => [...tr.cells].map((td) => td.textContent.trim())),
  heads: [...block.querySelectorAll("thead th")].map(text),
  branches: [...block.querySelectorAll(".segmented button")].map((b) => [text(b), b.getAttribute("aria-pressed"), b.disabled]),
  status: text(block.querySelector(".block-status")),
  muted: block.querySelector(".block-body").classList.contains("muted-value"),
  stats: [...block.querySelectorAll(".stat")].map((s) => [text(s.querySelector(".label")), text(s.querySelector(".value"))]),
  callout: text(block.querySelector(".callout .title")),
  calloutIcon: (() => {
    // The tone icon sits beside the title with a gap, centred on its line.
    const icon = block.querySelector(".callout > svg.icon");
    const title = block.querySelector(".callout .title");
    if (!icon || !title) return null;
    const i = icon.getBoundingClientRect();
    const range = document.createRange();
    range.selectNodeContents(title);
    const t = range.getBoundingClientRect();
    return { tone: icon.getAttribute("class"), hidden: icon.getAttribute("aria-hidden"), width: Math.round(i.width),
      gap: Math.round(t.left - i.right), offset: Math.round(Math.abs((i.top + i.bottom) / 2 - (t.top + t.bottom) / 2)) };
  })(),
  progress: block.querySelector("[role=progressbar]")?.getAttribute("aria-valuetext") ?? null,
  // How full the bar is drawn, in percent (its width is set through the CSSOM).
  fill: (() => { const bar = block.querySelector("[role=progressbar]"); const fill = bar && bar.querySelector(".fill");
    return fill ? Math.round(fill.getBoundingClientRect().width / bar.getBoundingClientRect().width * 100) : null; })(),
  steps: block.querySelectorAll(".steps > li").length,
  choices: [...block.querySelectorAll("button.choice")].map((b) => ({
    label: [...b.querySelector(".label").childNodes].filter((n) => n.nodeType === 3).map((n) => n.textContent).join("").trim(),
    context: text(b.querySelector(".ctx")), disabled: b.disabled, node: b.dataset.node,
    chosen: b.classList.contains("chosen"), check: !!b.querySelector(".label .check"),
    pressed: b.getAttribute("aria-pressed"), ariaDisabled: b.getAttribute("aria-disabled"),
    opacity: getComputedStyle(b).opacity, border: getComputedStyle(b).borderTopColor,
    borderStyle: getComputedStyle(b).borderTopStyle, color: getComputedStyle(b.querySelector(".label")).color })),
  answered: text(block.querySelector(".answered")),
};
"##;

/// A snapshot of the chat: its title, the messages, the other blocks' components.
const CHAT: &str = r##"
const text = (el) => (el ? el.textContent.trim() : null);
return {
  title: text(document.querySelector("#chat-title")),
  who: text(document.querySelector("#who")),
  feed: text(document.querySelector("#feed-state")),
  signinHidden: document.querySelector("#signin").hidden,
  workspaceHidden: document.querySelector("#workspace").hidden,
  chats: [...document.querySelectorAll("#chat-list button")].map((b) => text(b.firstChild)),
  messages: [...document.querySelectorAll("#items > li.msg")].map((li) => ({
    role: li.classList.contains("user") ? "user" : "assistant",
    text: text(li.querySelector(".prose")),
  })),
  blocks: document.querySelectorAll("#items .block").length,
  stats: [...document.querySelectorAll("#items .stats .stat .label")].map(text),
  charts: document.querySelectorAll("#items figure.chart svg").length,
  ticks: [...document.querySelectorAll("#items figure.chart svg")].map((svg) => [...svg.querySelectorAll("text.tick")].map(text)),
  entities: [...document.querySelectorAll("#items dl.entities dt")].map(text),
  couldNot: [...document.querySelectorAll("#items .could-not")].map(text),
  marker: window.__e2e ? window.__e2e.marker : null,
  favicon: document.querySelector('link[rel="icon"]')?.getAttribute("href")?.slice(0, 18) ?? null,
};
"##;

/// Records every `/ui/query` the page sends (its body and the reading it got) without
/// changing what the page does: `api()` calls the global `fetch` on each request.
const SPY: &str = r##"
if (window.__e2e) return window.__e2e.marker;
window.__e2e = { marker: arguments[0], queries: [], seenAt: null, wroteAt: null, switchedAt: null, errors: [], failed: [] };
// Console errors and failed requests from now on (the requests since the page loaded are
// in the resource timing buffer, see PROBLEMS).
performance.setResourceTimingBufferSize(100000);
window.addEventListener("error", (e) => window.__e2e.errors.push("error: " + (e.message || (e.target && (e.target.src || e.target.href)) || "unknown")), true);
window.addEventListener("unhandledrejection", (e) => window.__e2e.errors.push("unhandled rejection: " + String(e.reason)));
const consoleError = console.error;
console.error = function (...args) {
  window.__e2e.errors.push("console.error: " + args.map(String).join(" "));
  return consoleError.apply(this, args);
};
// When the person first presses the Segmented (before the page handles the click).
document.addEventListener("click", (e) => {
  if (window.__e2e.switchedAt === null && e.target.closest(".segmented")) window.__e2e.switchedAt = performance.now();
}, true);
const original = window.fetch;
window.fetch = async function (url, init) {
  const sentAt = performance.now();
  let response;
  try {
    response = await original.apply(this, arguments);
  } catch (e) {
    if (!(e && e.name === "AbortError")) window.__e2e.failed.push(`${String(url)}: ${e}`);
    throw e;
  }
  if (!response.ok) window.__e2e.failed.push(`${String(url)}: ${response.status}`);
  if (String(url).endsWith("/ui/query")) {
    const entry = { body: JSON.parse(init.body), reading: null, sentAt, at: performance.now() };
    try { entry.reading = await response.clone().json(); } catch (_) { /* not JSON */ }
    window.__e2e.queries.push(entry);
  }
  return response;
};
return window.__e2e.marker;
"##;

/// Inserts one run through the write path with the page's own session (same origin, the
/// page's cookie), after arming an observer that notes when its name is drawn.
const INSERT: &str = r##"
const [name, branch, done] = arguments;
const e2e = window.__e2e;
e2e.seenAt = null;
const drawn = () => [...document.querySelectorAll("#items .block tbody td")].some((td) => td.textContent.trim() === name);
const observer = new MutationObserver(() => {
  if (e2e.seenAt === null && drawn()) { e2e.seenAt = performance.now(); observer.disconnect(); }
});
observer.observe(document.querySelector("#items"), { childList: true, subtree: true, characterData: true });
const started = performance.now();
fetch("/api/sources/ci.runs/rows", {
  method: "POST", credentials: "same-origin",
  headers: { "content-type": "application/json" },
  body: JSON.stringify({ rows: [{ branch, name, status: "passed" }] }),
}).then(async (r) => {
  e2e.wroteAt = performance.now();
  done({ status: r.status, body: await r.json(), ms: e2e.wroteAt - started });
}, (e) => done({ error: String(e) }));
"##;

/// What went wrong in the page: errors and failed fetches seen since [`SPY`] was installed,
/// and every request since the page loaded (its boot included) that got a 4xx or 5xx (the
/// resource timing buffer; a fetch is in it once its body was read, as `api()` does).
const PROBLEMS: &str = r##"
const bad = [...performance.getEntriesByType("navigation"), ...performance.getEntriesByType("resource")]
  .filter((e) => e.responseStatus >= 400)
  .map((e) => `${e.responseStatus} ${new URL(e.name).pathname}`);
return { errors: window.__e2e.errors, failed: window.__e2e.failed, responses: bad,
         requests: performance.getEntriesByType("resource").length };
"##;

/// Runs axe-core on the whole document with the given rule tags; its violations (rule,
/// impact, the elements and why) and how many rules passed.
const AXE_RUN: &str = r##"
const [tags, done] = arguments;
window.axe.run(document, { runOnly: { type: "tag", values: tags }, resultTypes: ["violations"] }).then(
  (r) => done({
    violations: r.violations.map((v) => ({ id: v.id, impact: v.impact, help: v.help,
      nodes: v.nodes.map((n) => ({ target: n.target.join(" "), html: n.html.slice(0, 160), why: n.failureSummary })) })),
    passes: r.passes.length,
  }),
  (e) => done({ error: String(e) }));
"##;

/// The contrast of the text of every control on the page in its current state (hover,
/// focus, pressed and disabled included; axe skips disabled controls): the ones below
/// WCAG AA's 4.5:1, with their colours. Backgrounds are composited from the root down,
/// opacity multiplies down the ancestors.
const CONTRAST: &str = r##"
const rgba = (s) => { const m = /rgba?\(([^)]*)\)/.exec(s); if (!m) return [0, 0, 0, 0];
  const p = m[1].split(/[\s,\/]+/).filter(Boolean).map(Number); return [p[0], p[1], p[2], p.length > 3 ? p[3] : 1]; };
const over = (top, under) => [0, 1, 2].map((i) => top[i] * top[3] + under[i] * (1 - top[3])).concat([1]);
const lum = (c) => { const [r, g, b] = c.slice(0, 3).map((v) => { v /= 255; return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; });
  return 0.2126 * r + 0.7152 * g + 0.0722 * b; };
const ratio = (a, b) => { const [x, y] = [lum(a), lum(b)].sort((p, q) => q - p); return (x + 0.05) / (y + 0.05); };
const controls = [...document.querySelectorAll("button, summary, a[href], select, [tabindex]")]
  .filter((e) => e.getClientRects().length > 0 && e.textContent.trim() !== "");
const low = [];
for (const el of controls) {
  const chain = []; for (let e = el; e; e = e.parentElement) chain.unshift(e);
  let bg = [255, 255, 255, 1], opacity = 1;
  for (const e of chain) { const st = getComputedStyle(e); opacity *= Number(st.opacity); const c = rgba(st.backgroundColor); if (c[3] > 0) bg = over(c, bg); }
  // The text of the control itself and of its direct text-bearing children.
  for (const t of [el, ...el.querySelectorAll("span, div")]) {
    if (![...t.childNodes].some((n) => n.nodeType === 3 && n.textContent.trim())) continue;
    let tbg = bg;
    for (let e = t; e && e !== el; e = e.parentElement) { const c = rgba(getComputedStyle(e).backgroundColor); if (c[3] > 0) { tbg = over(c, bg); break; } }
    const fg = rgba(getComputedStyle(t).color);
    const shown = over([fg[0], fg[1], fg[2], fg[3] * opacity], tbg);
    const r = ratio(shown, tbg);
    if (r < 4.5) low.push({ text: t.textContent.trim().slice(0, 40), ratio: Math.round(r * 100) / 100,
      color: getComputedStyle(t).color, background: `rgb(${tbg.slice(0, 3).map(Math.round).join(", ")})`, opacity,
      disabled: el.disabled || el.getAttribute("aria-disabled") === "true", hover: el.matches(":hover") });
  }
}
return { checked: controls.length, low };
"##;

/// Where focus is: the focused element's key (the page's `data-focus` key of a block's
/// control, else its id, else its path in the document), what kind of control it is, its
/// state, the block it is in, and the page's tab stops in order (focusable, not disabled,
/// shown, `tabindex` not negative).
const FOCUS: &str = r##"
const el = document.activeElement;
const key = (e) => !e || e === document.body || e === document.documentElement ? "body"
  : e.dataset && e.dataset.focus ? "focus:" + e.dataset.focus
  : e.id ? "#" + e.id : path(e);
function path(e) {
  const steps = [];
  for (; e && e.parentElement && e !== document.body; e = e.parentElement) {
    steps.unshift(e.tagName.toLowerCase() + ":" + [...e.parentElement.children].indexOf(e));
  }
  return steps.join("/");
}
const kind = (e) => !e || e === document.body ? "body"
  : e.getAttribute("role") === "switch" ? "switch" : e.type === "range" ? "slider" : e.type === "checkbox" ? "checkbox"
  : e.closest(".segmented") ? "segmented" : e.getAttribute("role") === "tab" ? "tab" : e.tagName === "SUMMARY" ? "section"
  : e.classList.contains("choice") ? "choice" : e.classList.contains("chip") ? "link" : e.tagName === "A" ? "anchor"
  : e.classList.contains("answered") ? "sent" : e.tagName === "BUTTON" ? "button" : e.tagName.toLowerCase();
const stops = [...document.querySelectorAll("a[href], button, input, select, summary, [tabindex]")]
  .filter((e) => !e.disabled && e.tabIndex >= 0 && e.getClientRects().length > 0);
const block = el && el.closest ? el.closest("#items .block") : null;
return {
  key: key(el), kind: kind(el),
  block: block ? block.dataset.block || "block " + [...document.querySelectorAll("#items .block")].indexOf(block) : null,
  text: el ? el.textContent.trim().slice(0, 60) : null,
  checked: el ? !!el.checked : null, value: el && el.value !== undefined ? String(el.value) : null,
  pressed: el ? el.getAttribute("aria-pressed") : null, selected: el ? el.getAttribute("aria-selected") : null,
  disabled: el ? el.getAttribute("aria-disabled") : null,
  open: el && el.tagName === "SUMMARY" ? el.parentElement.open : null,
  stops: stops.map(key),
  // The element a key press was made on, once a redraw replaced it.
  replaced: !!window.__e2eMark && !window.__e2eMark.isConnected,
  // The focus ring: an outline at least 2 px wide, drawn (`:focus-visible`).
  ring: !!el && el !== document.body && el.matches(":focus-visible") && getComputedStyle(el).outlineStyle !== "none"
    && parseFloat(getComputedStyle(el).outlineWidth) >= 2,
  visible: (() => { if (!el || el === document.body) return false; const r = el.getBoundingClientRect(); return r.bottom > 0 && r.top < innerHeight; })(),
};
"##;

/// A snapshot of the block that shows every component: which components it drew.
const EVERY_BLOCK: &str = r##"
const block = document.querySelector("#items .block");
if (!block) return null;
const has = (sel) => block.querySelectorAll(sel).length;
return {
  summary: block.querySelector(".summary")?.textContent.trim() ?? null,
  callouts: has(".callout"), tags: has(".tag"), progress: has("[role=progressbar]"), steps: has(".steps > li"),
  stats: has(".stat"), entries: has("dl.entities dt"), rows: has("tbody tr"), charts: has("figure.chart svg"),
  tabs: has("[role=tab]"), sections: has("details"), code: has("pre.code"), images: has("figure.image"),
  sources: has(".sources li"), links: has(".chip"), checklist: has(".checklist input"),
  switches: has("input[role=switch]"), sliders: has("input[type=range]"), options: has(".segmented button"),
  buttons: has("button:not(.choice):not(.chip):not([role=tab])"), choices: has("button.choice"),
  couldNot: [...block.querySelectorAll(".could-not")].map((e) => e.textContent.trim()),
  status: block.querySelector(".block-status")?.textContent.trim() ?? null,
};
"##;

fn rows(snapshot: &Json) -> Vec<Vec<String>> {
    serde_json::from_value(snapshot["rows"].clone()).unwrap_or_default()
}

fn row(name: &str, status: &str) -> Vec<String> {
    vec![name.to_owned(), status.to_owned()]
}

fn pressed(snapshot: &Json) -> Option<String> {
    snapshot["branches"].as_array()?.iter().find_map(|b| {
        (b[1] == "true")
            .then(|| b[0].as_str().map(str::to_owned))
            .flatten()
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs chromium, chromedriver and axe-core; run by cargo xtask ci"]
async fn the_demo_page_reads_live_data_and_sends_a_choice_in_chromium() {
    let started = Instant::now();
    // Before anything starts: a missing axe-core fails here, naming the command.
    let axe = axe_source();
    let _ = std::fs::remove_file(artifacts_dir().join("failure.png"));
    let dir = TempDir::new("e2e");
    let profile = dir.0.join("chromium-profile");
    std::fs::create_dir_all(&profile).unwrap();
    let driver = ChromeDriver::start(&dir.0);
    let server = DemoServer::start(&dir).await;
    let client = open_browser(&driver, &profile).await;
    eprintln!(
        "e2e: chromedriver and Chromium up after {:.1}s",
        started.elapsed().as_secs_f64()
    );

    let outcome = AssertUnwindSafe(async {
        tokio::time::timeout(WHOLE, flow(&client, &server, &axe))
            .await
            .unwrap_or_else(|_| panic!("the browser flow did not finish within {WHOLE:?}"));
    })
    .catch_unwind()
    .await;

    match outcome {
        Ok(()) => {
            let _ = client.close().await;
            server.stop().await;
            drop(driver);
            println!(
                "e2e: passed in {:.1}s (browser start included)",
                started.elapsed().as_secs_f64()
            );
        }
        Err(panic) => {
            // Bounded, in case the browser itself is what hangs.
            let _ = tokio::time::timeout(Duration::from_secs(30), diagnose(&client, &driver)).await;
            let _ = tokio::time::timeout(Duration::from_secs(10), client.close()).await;
            server.stop().await;
            std::panic::resume_unwind(panic);
        }
    }
}

/// What a failed run leaves: `failure.png`, the page's state and the chromedriver log.
async fn diagnose(client: &Client, driver: &ChromeDriver) {
    match screenshot(client, "failure.png").await {
        Ok(path) => eprintln!("e2e: FAILED; screenshot {}", path.display()),
        Err(e) => eprintln!("e2e: FAILED; no screenshot: {e}"),
    }
    if let Ok(state) = client.execute(CHAT, Vec::new()).await {
        eprintln!("e2e: the chat when it failed: {state:#}");
    }
    if let Ok(state) = client.execute(RUNS_BLOCK, Vec::new()).await {
        eprintln!("e2e: the builds block when it failed: {state:#}");
    }
    if let Ok(q) = client
        .execute("return window.__e2e && window.__e2e.queries;", Vec::new())
        .await
    {
        eprintln!("e2e: the page's ui.query requests: {q:#}");
    }
    let log = driver.log_text();
    eprintln!("e2e: chromedriver log (last lines, newest first):");
    for line in log.lines().rev().take(30) {
        eprintln!("  {line}");
    }
}

async fn flow(client: &Client, server: &DemoServer, axe: &str) {
    // ---- the signed-out page ----
    client.goto(&server.url("/")).await.expect("the page loads");
    wait_js(
        client,
        "the sign-in buttons",
        SLOW,
        r##"return !document.querySelector("#signin").hidden && !!document.querySelector("[data-user=alice]");"##,
    )
    .await;
    check_accessibility(client, axe, "the signed-out page").await;

    // ---- sign in through the page's own button ----
    click(
        client,
        "the `Sign in as alice` button",
        SLOW,
        r#"//section[@id="signin"]//button[@data-user="alice"]"#,
    )
    .await;
    let chat = wait_until(client, "alice to be signed in", SLOW, CHAT, |c| {
        c["who"].as_str().is_some_and(|w| w.starts_with("alice"))
            && c["workspaceHidden"] == false
            && c["signinHidden"] == true
            && c["chats"].as_array().is_some_and(|l| l.len() == 3)
    })
    .await;
    assert_eq!(
        chat["chats"],
        json!([EVERY_TITLE, RELEASE_TITLE, CHAT_TITLE]),
        "{chat:#}"
    );
    let marker = format!("page-{}", std::process::id());
    assert_eq!(js(client, SPY, vec![json!(marker)]).await, json!(marker));

    // ---- open the builds chat: its blocks are drawn ----
    click(
        client,
        "the builds chat in the list",
        SLOW,
        &format!(r#"//ul[@id="chat-list"]//button[contains(., "{CHAT_TITLE}")]"#),
    )
    .await;
    let chat = wait_until(client, "the builds chat to be drawn", SLOW, CHAT, |c| {
        c["title"] == CHAT_TITLE
            && c["blocks"] == 2
            && c["charts"] == 4
            && c["feed"]
                .as_str()
                .is_some_and(|f| f.starts_with("feed: live"))
    })
    .await;
    assert_eq!(
        chat["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["role"].as_str().unwrap())
            .collect::<Vec<_>>(),
        ["user", "assistant", "user", "assistant"],
        "{chat:#}"
    );
    assert_eq!(
        chat["messages"][0]["text"], "How are the web builds doing?",
        "{chat:#}"
    );
    assert_eq!(
        chat["messages"][2]["text"], "And over the week?",
        "{chat:#}"
    );
    assert_eq!(
        chat["stats"],
        json!(["Runs", "Failed", "Builds", "Pass rate", "Median time"]),
        "{chat:#}"
    );
    // Axis ticks in "nice" steps, formatted like the values (the hbar chart has none).
    assert_eq!(
        chat["ticks"],
        json!([
            ["0", "2", "4", "6", "8", "10"],
            [],
            ["0", "2", "4", "6", "8", "10"],
            ["0 s", "100 s", "200 s", "300 s", "400 s", "500 s"]
        ]),
        "{chat:#}"
    );
    assert_eq!(chat["favicon"], "data:image/svg+xml", "{chat:#}");
    assert_eq!(
        chat["entities"],
        json!(["Owner", "Runner", "Cache"]),
        "{chat:#}"
    );
    assert_eq!(chat["couldNot"], json!([]), "{chat:#}");

    // The live Table over `ci.runs` shows the seeded run of `main`, read fresh.
    let block = wait_until(client, "a fresh reading of main", SLOW, RUNS_BLOCK, |b| {
        rows(b) == [row("web build 1", "passed")]
            && b["status"]
                .as_str()
                .is_some_and(|s| s.starts_with("$runs: read "))
            && b["muted"] == false
    })
    .await;
    assert_eq!(block["summary"], "CI runs on main", "{block:#}");
    assert_eq!(
        block["stats"],
        json!([["Runs", "1"], ["Failed", "0"]]),
        "{block:#}"
    );
    assert_eq!(block["badge"], "live", "{block:#}");
    assert_eq!(block["heads"], json!(["Run", "Status"]), "{block:#}");
    assert_eq!(pressed(&block).as_deref(), Some("main"), "{block:#}");
    assert_eq!(block["callout"], "Flaky test", "{block:#}");
    let icon = &block["calloutIcon"];
    assert_eq!(icon["tone"], "icon tone-warning", "{block:#}");
    assert_eq!(icon["hidden"], "true", "{block:#}");
    assert!(
        icon["width"].as_i64().is_some_and(|w| w >= 12)
            && icon["gap"].as_i64().is_some_and(|g| (6..=16).contains(&g))
            && icon["offset"].as_i64().is_some_and(|o| o <= 3),
        "the callout icon is beside its title, with a gap, on its line: {block:#}"
    );
    assert_eq!(block["progress"], "7 of 10", "{block:#}");
    assert_eq!(block["fill"], 70, "{block:#}");
    assert_eq!(block["steps"], 5, "{block:#}");
    let labels: Vec<&str> = block["choices"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["label"].as_str().unwrap())
        .collect();
    assert_eq!(
        labels,
        ["Rerun failed", "Ignore for now", "Roll back"],
        "{block:#}"
    );
    assert_eq!(
        block["choices"][0]["context"], "Rerun the failed jobs on main",
        "{block:#}"
    );
    check_accessibility(client, axe, "the builds chat, drawn").await;

    // ---- the Segmented: the table is read again with branch `dev` ----
    click(
        client,
        "the `dev` option of the Segmented",
        SLOW,
        r#"//div[contains(@class, "segmented")]/button[normalize-space(.)="dev"]"#,
    )
    .await;
    let block = wait_until(
        client,
        "the table to show dev's runs",
        SLOW,
        RUNS_BLOCK,
        |b| {
            pressed(b).as_deref() == Some("dev")
                && rows(b) == [row("web build 2", "failed")]
                && b["muted"] == false
        },
    )
    .await;
    assert_eq!(block["summary"], "CI runs on dev", "{block:#}");
    assert_eq!(
        block["stats"],
        json!([["Runs", "1"], ["Failed", "1"]]),
        "{block:#}"
    );
    // The reads the page sent after the press (a read of `main` may still have been on
    // its way when the option was pressed).
    let queries = js(
        client,
        "return window.__e2e.queries.filter((q) => q.sentAt > window.__e2e.switchedAt);",
        vec![],
    )
    .await;
    let dev_read = queries
        .as_array()
        .unwrap()
        .iter()
        .find(|q| q["body"]["values"]["$branch"] == "dev")
        .unwrap_or_else(|| panic!("no ui.query with branch dev: {queries:#}"));
    assert_eq!(dev_read["body"]["query"], "$runs", "{queries:#}");
    assert_eq!(dev_read["reading"]["state"], "fresh", "{queries:#}");
    assert_eq!(
        dev_read["reading"]["value"],
        json!([{"name": "web build 2", "status": "failed"}]),
        "{queries:#}"
    );
    assert!(
        queries
            .as_array()
            .unwrap()
            .iter()
            .all(|q| q["body"]["values"]["$branch"] == "dev"),
        "after the switch every read asks for dev: {queries:#}"
    );
    // The pressed option stays readable under the pointer.
    hover_pressed_option(client).await;
    check_accessibility(
        client,
        axe,
        "the builds chat, the pointer over the pressed option",
    )
    .await;

    // ---- a write through the source's write path shows within 2 s, no reload ----
    // The normal case of `sync.md` §6.6: the reading on screen is at least 1 s old. (A
    // write less than 1 s after the previous read of the same arguments gets the cached
    // reading with `retryAfterMs` first, §8.4 step 5, and the page's next change-driven
    // read waits for its own 1 s gap, §7.7: about 1.5 s in all.)
    wait_js(
        client,
        "the dev reading to be 1 s old",
        SLOW,
        r##"const q = window.__e2e.queries.filter((q) => q.body.values["$branch"] === "dev");
            return q.length > 0 && performance.now() - q[q.length - 1].sentAt >= 1000;"##,
    )
    .await;
    let name = format!("e2e run {}", std::process::id());
    let write_started = Instant::now();
    let wrote = client
        .execute_async(INSERT, vec![json!(name), json!("dev")])
        .await
        .expect("the insert script runs");
    assert_eq!(wrote["status"], 200, "{wrote:#}");
    assert_eq!(wrote["body"]["rows"], 1, "{wrote:#}");
    let write_ms = write_started.elapsed();
    let block = wait_until(
        client,
        "the inserted run on the page",
        LIVE.saturating_sub(write_ms),
        RUNS_BLOCK,
        |b| rows(b) == [row(&name, "passed"), row("web build 2", "failed")],
    )
    .await;
    let shown_after = write_started.elapsed();
    let in_page = js(
        client,
        "return window.__e2e.seenAt - window.__e2e.wroteAt;",
        vec![],
    )
    .await;
    eprintln!(
        "e2e: the inserted run was drawn {:.0} ms after the write answered (in the page); \
         {:.0} ms after the write was sent (seen by the test)",
        in_page.as_f64().unwrap_or(f64::NAN),
        shown_after.as_secs_f64() * 1000.0
    );
    assert!(
        in_page.as_f64().is_some_and(|ms| ms < 2000.0),
        "drawn {in_page} ms after the write"
    );
    assert_eq!(block["summary"], "CI runs on dev", "{block:#}");
    assert_eq!(
        block["stats"],
        json!([["Runs", "2"], ["Failed", "1"]]),
        "{block:#}"
    );
    assert_eq!(pressed(&block).as_deref(), Some("dev"), "{block:#}");
    let chat = js(client, CHAT, vec![]).await;
    assert_eq!(chat["marker"], json!(marker), "the page was not reloaded");

    // ---- a Choice becomes the next user message ----
    let block = wait_until(client, "the choices to open", SLOW, RUNS_BLOCK, |b| {
        b["choices"][0]["disabled"] == false
            && b["choices"][0]["context"] == "Rerun the failed jobs on dev"
    })
    .await;
    let choice_id = block["choices"][0]["node"].as_str().unwrap().to_owned();
    let rerun = r#"//button[contains(@class, "choice")][not(@disabled)][span[1][normalize-space(.)="Rerun failed"]]"#;
    let deadline = Instant::now() + SLOW;
    let chat = loop {
        // A reading that arrives between the check and the click closes the choices for
        // a moment (`refreshing`); clicking again sends the same choice, which the host
        // answers with the recorded answer.
        click(client, "the `Rerun failed` choice", SLOW, rerun).await;
        let sent = tokio::time::timeout(
            Duration::from_secs(3),
            wait_until(client, "the choice to be sent", SLOW, CHAT, |c| {
                c["messages"].as_array().is_some_and(|m| m.len() == 5)
            }),
        )
        .await;
        match sent {
            Ok(chat) => break chat,
            Err(_) if Instant::now() < deadline => continue,
            Err(_) => panic!("the choice was not sent within {SLOW:?}"),
        }
    };
    assert_eq!(
        chat["messages"][4],
        json!({"role": "user", "text": "Rerun the failed jobs on dev"}),
        "{chat:#}"
    );
    let block = wait_until(client, "the answered note", SLOW, RUNS_BLOCK, |b| {
        b["answered"] == "✓ Sent: Rerun failed"
    })
    .await;
    // The sent choice stands out (pressed, a check mark, full colour, the accent border)
    // and can no longer be pressed; the others are disabled and muted.
    let sent = &block["choices"][0];
    assert_eq!(sent["label"], "Rerun failed", "{block:#}");
    assert_eq!(sent["chosen"], true, "{block:#}");
    assert_eq!(sent["check"], true, "{block:#}");
    assert_eq!(sent["pressed"], "true", "{block:#}");
    assert_eq!(sent["ariaDisabled"], "true", "{block:#}");
    assert_eq!(sent["disabled"], false, "still focusable: {block:#}");
    assert_eq!(sent["opacity"], "1", "{block:#}");
    assert_eq!(sent["color"], "rgb(36, 86, 199)", "{block:#}");
    assert_eq!(
        sent["border"], "rgb(36, 86, 199)",
        "the accent border: {block:#}"
    );
    for other in &block["choices"].as_array().unwrap()[1..] {
        assert_eq!(other["chosen"], false, "{block:#}");
        assert_eq!(other["check"], false, "{block:#}");
        assert_eq!(other["pressed"], "false", "{block:#}");
        assert_eq!(other["disabled"], true, "{block:#}");
        // Muted by colour and a dashed border, not by an opacity that fades the text
        // below 4.5:1 (the contrast check below holds it).
        assert_eq!(other["opacity"], "1", "{block:#}");
        assert_eq!(other["borderStyle"], "dashed", "muted: {block:#}");
        assert_eq!(other["color"], "rgb(93, 102, 114)", "muted: {block:#}");
    }
    check_accessibility(client, axe, "the builds chat, after a choice was sent").await;

    // The same over HTTP, with the browser's session cookie.
    let cookie = client
        .get_named_cookie(ui_server::SESSION_COOKIE)
        .await
        .expect("the page's session cookie");
    let cookie = format!("{}={}", cookie.name(), cookie.value());
    let (status, chats) = server.get("/api/chats", &cookie).await;
    assert_eq!(status, StatusCode::OK, "{chats:#}");
    let chat_id = chats["chats"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["title"] == CHAT_TITLE)
        .and_then(|c| c["id"].as_str())
        .unwrap()
        .to_owned();
    let (status, detail) = server.get(&format!("/api/chats/{chat_id}"), &cookie).await;
    assert_eq!(status, StatusCode::OK, "{detail:#}");
    let items = detail["items"].as_array().unwrap();
    assert_eq!(items.len(), 5, "{detail:#}");
    let last = &items[4];
    assert_eq!(last["role"], "user", "{last:#}");
    assert_eq!(last["text"], "Rerun the failed jobs on dev", "{last:#}");
    assert_eq!(last["uiChoice"]["choiceId"], choice_id.as_str(), "{last:#}");
    assert_eq!(last["uiChoice"]["label"], "Rerun failed", "{last:#}");
    assert_eq!(last["uiChoice"]["itemId"], items[1]["id"], "{last:#}");
    assert_eq!(
        last["uiChoice"]["values"],
        json!({"$branch": "dev"}),
        "{last:#}"
    );
    let shot = full_page_screenshot(client, "demo.png").await;
    println!("e2e: screenshot {}", shot.display());

    // ---- the release chat ----
    open_chat(client, RELEASE_TITLE, 2).await;
    check_accessibility(client, axe, "the release chat, drawn").await;

    // ---- every component at once, by keyboard ----
    every_component(client, axe).await;
    let shot = full_page_screenshot(client, "every-component.png").await;
    println!("e2e: screenshot {}", shot.display());

    // ---- a phone's width ----
    narrow_window(client).await;

    // No console errors and no failed request during the whole flow (the page's boot
    // included: signed out, it asks `/api/session`, which answers 200).
    let problems = js(client, PROBLEMS, vec![]).await;
    assert_eq!(problems["errors"], json!([]), "{problems:#}");
    assert_eq!(problems["failed"], json!([]), "{problems:#}");
    assert_eq!(problems["responses"], json!([]), "{problems:#}");
    assert!(
        problems["requests"].as_u64().is_some_and(|n| n > 0),
        "the resource timing buffer records the page's requests: {problems:#}"
    );
}

/// At a phone's width every demo chat fits the window: the page stacks into one column,
/// and a block's long words wrap and its wide tables scroll inside it. (The workspace was
/// two columns at any width: at 390 px the chat column was 90 px wide and the page 493–722
/// px wide.) The window is asked for a 390 px viewport; whatever the browser allows, it
/// must be a phone's width (at most 500 px) for the check to mean anything.
async fn narrow_window(client: &Client) {
    let frame = js(
        client,
        "return window.outerWidth - window.innerWidth;",
        vec![],
    )
    .await
    .as_u64()
    .unwrap_or(0);
    client
        .set_window_size(390 + frame as u32, 844)
        .await
        .expect("the window resizes");
    let width = wait_until(
        client,
        "the viewport to narrow",
        SLOW,
        "return window.innerWidth;",
        |w| w.as_u64().is_some_and(|w| w <= 500),
    )
    .await
    .as_u64()
    .unwrap_or(0);
    for (title, blocks) in [(CHAT_TITLE, 2), (RELEASE_TITLE, 2), (EVERY_TITLE, 1)] {
        open_chat(client, title, blocks).await;
        let page = js(
            client,
            "const d = document.documentElement; return [d.scrollWidth, d.clientWidth];",
            vec![],
        )
        .await;
        assert!(
            page[0].as_u64() <= page[1].as_u64(),
            "{title}: the page ([scroll, client] {page}) is wider than the {width} px window"
        );
    }
}

/// A screenshot of the whole page: the window is made as tall as the document first
/// (at most 6,000 px), so the new user message at the bottom is in the picture too.
async fn full_page_screenshot(client: &Client, name: &str) -> std::path::PathBuf {
    let sizes = js(
        client,
        "window.scrollTo(0, 0); \
         return [document.documentElement.scrollHeight, window.outerHeight - window.innerHeight];",
        vec![],
    )
    .await;
    let page = sizes[0].as_u64().unwrap_or(1800);
    let frame = sizes[1].as_u64().unwrap_or(0);
    let height = (page + frame).clamp(600, 6000);
    if client.set_window_size(1280, height as u32).await.is_ok() {
        // Wait until the viewport has taken the new size (no fixed sleep).
        let _ = tokio::time::timeout(
            Duration::from_secs(5),
            wait_until(
                client,
                "the window to grow",
                Duration::from_secs(5),
                "return window.innerHeight;",
                |h| h.as_u64().is_some_and(|h| h + frame >= height),
            ),
        )
        .await;
    }
    screenshot(client, name)
        .await
        .unwrap_or_else(|e| panic!("{e}"))
}

/// Runs axe-core ([`AXE_VERSION`], injected when the page has none yet) with the WCAG
/// 2.0/2.1 A and AA rules, and [`CONTRAST`], on the page as it is now; panics listing
/// every violation.
async fn check_accessibility(client: &Client, axe: &str, what: &str) {
    let started = Instant::now();
    // The source runs as the body of the WebDriver script (no inline script in the page).
    let inject =
        format!("if (!window.axe) {{\n{axe}\n}}\nreturn window.axe ? window.axe.version : null;");
    let version = client
        .execute(&inject, Vec::new())
        .await
        .unwrap_or_else(|e| panic!("axe-core could not be loaded into the page ({what}): {e}"));
    assert_eq!(version, AXE_VERSION, "axe-core in the page ({what})");
    let result = client
        .execute_async(AXE_RUN, vec![json!(AXE_TAGS)])
        .await
        .unwrap_or_else(|e| panic!("axe-core did not run ({what}): {e}"));
    assert!(
        result["error"].is_null(),
        "axe-core failed ({what}): {result:#}"
    );
    assert_eq!(
        result["violations"],
        json!([]),
        "axe-core {AXE_VERSION} found WCAG 2.1 A/AA violations in {what}: {:#}",
        result["violations"]
    );
    let contrast = js(client, CONTRAST, vec![]).await;
    assert_eq!(
        contrast["low"],
        json!([]),
        "control text below 4.5:1 in {what}: {contrast:#}"
    );
    eprintln!(
        "e2e: axe {what}: 0 violations ({} rules passed; contrast of {} controls) in {:.1}s",
        result["passes"],
        contrast["checked"],
        started.elapsed().as_secs_f64()
    );
}

/// Moves the pointer over the pressed option of the first Segmented (WebDriver actions;
/// retried when a redraw made the element stale) and checks it reads white on the dark
/// accent under the pointer.
async fn hover_pressed_option(client: &Client) {
    let xpath = r#"(//div[contains(@class, "segmented")]/button[@aria-pressed="true"])[1]"#;
    let deadline = Instant::now() + SLOW;
    loop {
        let moved = match client.find(Locator::XPath(xpath)).await {
            Ok(element) => {
                let mouse =
                    MouseActions::new("mouse".to_owned()).then(PointerAction::MoveToElement {
                        element,
                        duration: None,
                        x: 0.0,
                        y: 0.0,
                    });
                client.perform_actions(mouse).await
            }
            Err(e) => Err(e),
        };
        let style = js(
            client,
            r#"const b = document.querySelector(".segmented button[aria-pressed=true]");
               return b && b.matches(":hover") ? [getComputedStyle(b).backgroundColor, getComputedStyle(b).color] : null;"#,
            vec![],
        )
        .await;
        if moved.is_ok() && !style.is_null() {
            assert_eq!(
                style,
                json!(["rgb(27, 66, 153)", "rgb(255, 255, 255)"]),
                "the pressed option under the pointer"
            );
            return;
        }
        assert!(
            Instant::now() < deadline,
            "could not move the pointer over the pressed option: {moved:?} {style}"
        );
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

/// Opens the chat titled `title` from the list and waits until its `blocks` blocks are
/// drawn (evaluated: no block shows only its fallback).
async fn open_chat(client: &Client, title: &str, blocks: u64) {
    click(
        client,
        &format!("the chat `{title}` in the list"),
        SLOW,
        &format!(r#"//ul[@id="chat-list"]//button[contains(., "{title}")]"#),
    )
    .await;
    wait_until(
        client,
        &format!("the chat `{title}` to be drawn"),
        SLOW,
        r##"return [document.querySelector("#chat-title").textContent,
                   document.querySelectorAll("#items .block").length,
                   document.querySelectorAll("#items .block .block-body > .fallback").length];"##,
        |v| v[0] == title && v[1] == blocks && v[2] == 0,
    )
    .await;
}

/// Presses and releases `key` (WebDriver key actions, sent to the focused element).
async fn press(client: &Client, key: Key) {
    let value: char = key.into();
    let keys = KeyActions::new("keyboard".to_owned())
        .then(KeyAction::Down { value })
        .then(KeyAction::Up { value });
    client
        .perform_actions(keys)
        .await
        .unwrap_or_else(|e| panic!("pressing {key:?}: {e}"));
}

/// Marks the focused element, presses `key` and waits until `done` holds for [`FOCUS`]
/// or focus fell to `<body>`; then asserts focus is on `key_of` (the same control, unless
/// told otherwise) and returns the focus state.
async fn press_on(
    client: &Client,
    key: Key,
    before: &Json,
    expect_key: &str,
    done: impl Fn(&Json) -> bool,
) -> Json {
    js(
        client,
        "window.__e2eMark = document.activeElement; return true;",
        vec![],
    )
    .await;
    press(client, key).await;
    let what = format!(
        "{key:?} on the {} `{}` to take effect",
        before["kind"], before["text"]
    );
    let after = wait_until(client, &what, SLOW, FOCUS, |f| {
        f["key"] == "body" || done(f)
    })
    .await;
    assert_eq!(
        after["key"], expect_key,
        "after {key:?} on the {} `{}` focus is not where the person was: {after:#}",
        before["kind"], before["text"]
    );
    assert_eq!(after["block"], before["block"], "{after:#}");
    assert_eq!(
        after["ring"], true,
        "the focus ring is still drawn: {after:#}"
    );
    assert_eq!(
        after["visible"], true,
        "the focused control is on screen: {after:#}"
    );
    after
}

/// The chat with all 36 components: its block is drawn whole, passes axe, and a keyboard
/// walk of the page reaches and operates each of its controls without losing focus.
async fn every_component(client: &Client, axe: &str) {
    open_chat(client, EVERY_TITLE, 1).await;
    let block = wait_until(client, "every component drawn", SLOW, EVERY_BLOCK, |b| {
        b["options"] == 2 && b["choices"] == 3
    })
    .await;
    for (what, at_least) in [
        ("callouts", 2),
        ("tags", 3),
        ("progress", 1),
        ("steps", 4),
        ("stats", 2),
        ("entries", 3),
        ("rows", 2),
        ("charts", 1),
        ("tabs", 2),
        ("sections", 1),
        ("code", 1),
        ("images", 1),
        ("sources", 1),
        ("links", 4),
        ("checklist", 2),
        ("switches", 1),
        ("sliders", 1),
        ("buttons", 2),
    ] {
        assert!(
            block[what].as_u64().is_some_and(|n| n >= at_least),
            "{what}: {block:#}"
        );
    }
    assert_eq!(block["couldNot"], json!([]), "{block:#}");
    check_accessibility(client, axe, "the every-component chat, drawn").await;

    // Tab from the first stop of the page (the chat list) through the block's controls.
    let first = js(
        client,
        r##"window.scrollTo(0, 0);
           const first = document.querySelector("#chat-list button"); first.focus(); return !!first && document.activeElement === first;"##,
        vec![],
    )
    .await;
    assert_eq!(first, true);
    let mut previous = js(client, FOCUS, vec![]).await["key"]
        .as_str()
        .unwrap()
        .to_owned();
    let mut operated: Vec<String> = Vec::new();
    let mut walked = Vec::new();
    let mut sent = false;
    for _ in 0..MAX_STOPS {
        press(client, Key::Tab).await;
        let here = js(client, FOCUS, vec![]).await;
        let key = here["key"].as_str().unwrap().to_owned();
        assert_ne!(key, "body", "Tab after `{previous}` lost focus: {here:#}");
        let stops: Vec<String> = serde_json::from_value(here["stops"].clone()).unwrap();
        let next = stops
            .iter()
            .position(|s| *s == previous)
            .and_then(|i| stops.get(i + 1));
        assert_eq!(
            next,
            Some(&key),
            "Tab after `{previous}` did not go to the next stop: {here:#}"
        );
        assert_eq!(here["ring"], true, "`{key}` shows no focus ring: {here:#}");
        walked.push(key.clone());
        if here["block"].is_null() {
            if !operated.is_empty() {
                break;
            }
            previous = key;
            continue;
        }
        let kind = here["kind"].as_str().unwrap().to_owned();
        let changed = operate(client, &here).await;
        if changed {
            operated.push(kind.clone());
            check_accessibility(
                client,
                axe,
                &format!(
                    "the every-component chat after the {kind} `{}` changed",
                    here["text"].as_str().unwrap_or("")
                ),
            )
            .await;
            if kind == "segmented" {
                hover_pressed_option(client).await;
                check_accessibility(
                    client,
                    axe,
                    "the every-component chat, the pointer over the pressed option",
                )
                .await;
            }
        }
        // Where focus is now (the same control; its key, should the page have none).
        previous = js(client, FOCUS, vec![]).await["key"]
            .as_str()
            .unwrap()
            .to_owned();
        if kind == "choice" && changed {
            sent = true;
            break;
        }
    }
    eprintln!(
        "e2e: keyboard walk: {} stops; operated {operated:?}",
        walked.len()
    );
    for kind in [
        "tab",
        "section",
        "checkbox",
        "switch",
        "slider",
        "segmented",
        "button",
        "choice",
    ] {
        assert!(
            operated.iter().any(|k| k == kind),
            "the walk operated no {kind}: {operated:?}; stops {walked:#?}"
        );
    }
    assert!(sent, "the walk sent a choice: {walked:#?}");
    let chat = wait_until(client, "the choice as the next message", SLOW, CHAT, |c| {
        c["messages"].as_array().is_some_and(|m| m.len() == 3)
    })
    .await;
    assert_eq!(
        chat["messages"][2],
        json!({"role": "user", "text": "Release main with 4 shards"}),
        "{chat:#}"
    );
}

/// Operates the focused control of kind `here["kind"]` with the keyboard and asserts that
/// focus stays on it; whether it changed something (a link of the `Sources` list is not
/// followed: it would open a tab; a pressed option or a disabled Choice does nothing).
async fn operate(client: &Client, here: &Json) -> bool {
    let key = here["key"].as_str().unwrap();
    let replaced = |f: &Json| f["replaced"] == true;
    match here["kind"].as_str().unwrap() {
        "checkbox" | "switch" => {
            let was = here["checked"].as_bool().unwrap();
            press_on(client, Key::Space, here, key, |f| {
                replaced(f) && f["checked"] == !was
            })
            .await;
        }
        "slider" => {
            // Twice: the second arrow key must move it too (focus is still on it).
            let v: f64 = here["value"].as_str().unwrap().parse().unwrap();
            for step in [1.0, 2.0] {
                let want = (v + step).to_string();
                press_on(client, Key::Right, here, key, |f| {
                    replaced(f) && f["value"] == want.as_str()
                })
                .await;
            }
        }
        "segmented" => {
            if here["pressed"] == "true" {
                return false;
            }
            press_on(client, Key::Space, here, key, |f| {
                replaced(f) && f["pressed"] == "true"
            })
            .await;
        }
        "tab" => {
            // Arrow to the next tab (focus follows the selection), then back.
            press(client, Key::Right).await;
            let next = wait_until(client, "the next tab", SLOW, FOCUS, |f| {
                f["key"] == "body" || (f["key"] != key && f["selected"] == "true")
            })
            .await;
            assert_eq!(next["kind"], "tab", "focus follows the next tab: {next:#}");
            press_on(client, Key::Left, &next, key, |f| {
                f["key"] == key && f["selected"] == "true"
            })
            .await;
        }
        "section" => {
            for open in [false, true] {
                press_on(client, Key::Enter, here, key, |f| f["open"] == open).await;
            }
        }
        "button" | "link" => {
            press_on(client, Key::Enter, here, key, replaced).await;
        }
        "choice" => {
            if here["disabled"] == "true" {
                return false;
            }
            press_on(client, Key::Enter, here, key, |f| {
                replaced(f) && f["pressed"] == "true"
            })
            .await;
        }
        _ => return false,
    }
    true
}

// ---- write to screen: many writes, each timed in the page ----

/// How many rows the write-to-screen test writes (issue 18 asks for at least 20).
const WRITES: usize = 25;
/// The branch the write-to-screen chat reads and the test writes: none of the seed's.
const W2S_BRANCH: &str = "w2s";
const W2S_TITLE: &str = "Write to screen";
/// The write-to-screen chat's reply: one live Table over the test's branch (the source
/// orders by id, newest first, and the block asks for up to 50 rows, so every written row
/// is drawn).
const W2S_REPLY: &str = "Runs written by the test:\n```ui\n\
$runs = @Query(\"ci.runs\", {branch: \"w2s\", limit: 50})\n\
<Summary>{@Count($runs)} runs</Summary>\n\
<Table rows={$runs}><Column key=\"name\" title=\"Run\"/><Column key=\"status\" title=\"Status\" as=\"tag\"/></Table>\n```\n";

/// Creates the write-to-screen chat as the signed-in user, through the same API a host
/// uses (a chat, a reply streamed in one delta, finished): the chat's id.
const W2S_SEED: &str = r##"
const [title, text, done] = arguments;
const post = async (path, body) => {
  const r = await fetch(path, { method: "POST", credentials: "same-origin",
    headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
  if (!r.ok) throw new Error(`${path}: ${r.status} ${await r.text()}`);
  return r.json();
};
(async () => {
  const chat = await post("/api/chats", { title });
  const items = `/api/chats/${chat.id}/items`;
  const item = await post(items, {});
  await post(`${items}/${item.id}/delta`, { text });
  const finished = await post(`${items}/${item.id}/finish`, {});
  return { chat: chat.id, blocks: finished.ui.length };
})().then(done, (e) => done({ error: String(e) }));
"##;

/// Arms the page's clock for the write-to-screen test: a MutationObserver on the chat
/// notes, for every cell whose text starts with `w2s-`, the `performance.now()` of the
/// first mutation that put it in the document (`drawn`) and of the animation frame after
/// it (`frame`: the frame that paints it).
const W2S_ARM: &str = r##"
const w = window.__w2s = { drawn: {}, frame: {} };
const items = document.querySelector("#items");
new MutationObserver(() => {
  const now = performance.now();
  for (const td of items.querySelectorAll(".block tbody td")) {
    const name = td.textContent.trim();
    if (name.startsWith("w2s-") && !(name in w.drawn)) {
      w.drawn[name] = now;
      requestAnimationFrame(() => { w.frame[name] = performance.now(); });
    }
  }
}).observe(items, { childList: true, subtree: true, characterData: true });
return true;
"##;

/// Writes one row of the test's branch through the source's write path, from the page
/// (its session cookie): when the request was sent and when its answer came, in the
/// page's clock.
const W2S_WRITE: &str = r##"
const [name, branch, done] = arguments;
const sentAt = performance.now();
fetch("/api/sources/ci.runs/rows", {
  method: "POST", credentials: "same-origin",
  headers: { "content-type": "application/json" },
  body: JSON.stringify({ rows: [{ branch, name, status: "passed" }] }),
}).then(async (r) => {
  const answeredAt = performance.now();
  done({ status: r.status, body: await r.json(), sentAt, answeredAt });
}, (e) => done({ error: String(e) }));
"##;

/// One write's times in the page's clock (ms).
#[derive(Debug, Clone, Copy)]
struct WriteTimes {
    sent: f64,
    answered: f64,
    drawn: f64,
    frame: f64,
    /// The change-driven `ui.query` that brought the row: sent and answered.
    read_sent: f64,
    read_answered: f64,
}

/// The value at fraction `p` of `sorted` (nearest rank).
fn nearest_rank(sorted: &[f64], p: f64) -> f64 {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

/// Where the write-to-screen figures go: `UI_E2E_FIGURES` (`cargo xtask bench` sets it),
/// else `write-to-screen.json` in the artifacts directory.
fn figures_path() -> std::path::PathBuf {
    std::env::var_os("UI_E2E_FIGURES")
        .filter(|p| !p.is_empty())
        .map_or_else(
            || artifacts_dir().join("write-to-screen.json"),
            std::path::PathBuf::from,
        )
}

/// Write to screen (issue 18, item 6): alice's page shows a chat whose live Table reads
/// one branch of `ci.runs`; the test writes [`WRITES`] rows of that branch through the
/// source's write path, one at a time, and asserts that every row is drawn (newest first),
/// without a reload, and that the page logged no error. It does not assert how fast:
/// the times taken in the page (write sent → row in the document) are printed and written
/// to [`figures_path`], where `cargo xtask bench` reads them.
///
/// Each write waits until the page's last `ui.query` of the block is at least 1 s old and
/// then a further 0–250 ms that varies from write to write (so the writes fall at every
/// phase of the server's and the page's windows): the normal case of `sync.md` §6.6, a
/// reading on screen older than the 1 s gap between change-driven reads (§7.7, §8.4).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs chromium and chromedriver; run by cargo xtask ci and cargo xtask bench"]
async fn every_write_is_drawn_in_chromium() {
    let started = Instant::now();
    let dir = TempDir::new("e2e-w2s");
    let profile = dir.0.join("chromium-profile");
    std::fs::create_dir_all(&profile).unwrap();
    let driver = ChromeDriver::start(&dir.0);
    let server = DemoServer::start(&dir).await;
    let client = open_browser(&driver, &profile).await;
    let outcome = AssertUnwindSafe(async {
        tokio::time::timeout(WHOLE, write_to_screen(&client, &server))
            .await
            .unwrap_or_else(|_| panic!("the write-to-screen flow did not finish within {WHOLE:?}"));
    })
    .catch_unwind()
    .await;
    match outcome {
        Ok(()) => {
            let _ = client.close().await;
            server.stop().await;
            drop(driver);
            println!(
                "e2e: write to screen passed in {:.1}s (browser start included)",
                started.elapsed().as_secs_f64()
            );
        }
        Err(panic) => {
            let _ = tokio::time::timeout(Duration::from_secs(30), diagnose(&client, &driver)).await;
            let _ = tokio::time::timeout(Duration::from_secs(10), client.close()).await;
            server.stop().await;
            std::panic::resume_unwind(panic);
        }
    }
}

async fn write_to_screen(client: &Client, server: &DemoServer) {
    client.goto(&server.url("/")).await.expect("the page loads");
    click(
        client,
        "the `Sign in as alice` button",
        SLOW,
        r#"//section[@id="signin"]//button[@data-user="alice"]"#,
    )
    .await;
    wait_until(client, "alice to be signed in", SLOW, CHAT, |c| {
        c["who"].as_str().is_some_and(|w| w.starts_with("alice")) && c["workspaceHidden"] == false
    })
    .await;
    let seeded = client
        .execute_async(W2S_SEED, vec![json!(W2S_TITLE), json!(W2S_REPLY)])
        .await
        .expect("the seed script runs");
    assert_eq!(seeded["blocks"], 1, "{seeded:#}");
    // The page lists chats when it boots: load it again to see the new one.
    client.refresh().await.expect("the page reloads");
    let marker = format!("w2s-page-{}", std::process::id());
    wait_until(client, "the chat list", SLOW, CHAT, |c| {
        c["chats"]
            .as_array()
            .is_some_and(|l| l.iter().any(|t| t == W2S_TITLE))
    })
    .await;
    assert_eq!(js(client, SPY, vec![json!(marker)]).await, json!(marker));
    open_chat(client, W2S_TITLE, 1).await;
    wait_until(client, "the live feed", SLOW, CHAT, |c| {
        c["feed"]
            .as_str()
            .is_some_and(|f| f.starts_with("feed: live"))
    })
    .await;
    assert_eq!(js(client, W2S_ARM, vec![]).await, json!(true));

    let mut times = Vec::with_capacity(WRITES);
    for i in 0..WRITES {
        wait_js(
            client,
            "the last reading to be 1 s old",
            SLOW,
            r##"const q = window.__e2e.queries;
                return q.length > 0 && performance.now() - q[q.length - 1].sentAt >= 1000;"##,
        )
        .await;
        // 0–250 ms more, a different phase each time (a step of 97 ms modulo 251).
        tokio::time::sleep(Duration::from_millis((i as u64 * 97) % 251)).await;
        let name = format!("w2s-{i:02}");
        let wrote = client
            .execute_async(W2S_WRITE, vec![json!(name), json!(W2S_BRANCH)])
            .await
            .expect("the write script runs");
        assert_eq!(wrote["status"], 200, "{wrote:#}");
        assert_eq!(wrote["body"]["rows"], 1, "{wrote:#}");
        let seen = wait_until(
            client,
            &format!("{name} on the page"),
            SLOW,
            &format!(
                "const w = window.__w2s; return [w.drawn[{name:?}] ?? null, w.frame[{name:?}] ?? null];"
            ),
            |v| v[0].is_number() && v[1].is_number(),
        )
        .await;
        // The change-driven read that brought the row: the first `ui.query` sent after the
        // write whose reading holds it.
        let read = js(
            client,
            "const [name, after] = arguments;
             return window.__e2e.queries.find((q) => q.sentAt > after && q.reading
               && Array.isArray(q.reading.value) && q.reading.value.some((r) => r.name === name)) ?? null;",
            vec![json!(name), wrote["sentAt"].clone()],
        )
        .await;
        assert!(read.is_object(), "no ui.query brought {name}");
        let f = |v: &Json| v.as_f64().expect("a time");
        times.push(WriteTimes {
            sent: f(&wrote["sentAt"]),
            answered: f(&wrote["answeredAt"]),
            drawn: f(&seen[0]),
            frame: f(&seen[1]),
            read_sent: f(&read["sentAt"]),
            read_answered: f(&read["at"]),
        });
    }

    // Every row is drawn, newest first as the source orders them, and the page was never
    // reloaded.
    let block = js(
        client,
        r##"return [...document.querySelectorAll("#items .block tbody tr")].map((tr) => tr.cells[0].textContent.trim());"##,
        vec![],
    )
    .await;
    let expected: Vec<String> = (0..WRITES).rev().map(|i| format!("w2s-{i:02}")).collect();
    assert_eq!(block, json!(expected), "every write is drawn, newest first");
    let chat = js(client, CHAT, vec![]).await;
    assert_eq!(chat["marker"], json!(marker), "the page was not reloaded");
    let problems = js(client, PROBLEMS, vec![]).await;
    assert_eq!(problems["errors"], json!([]), "{problems:#}");
    assert_eq!(problems["failed"], json!([]), "{problems:#}");

    report_write_to_screen(&times);
}

/// Prints the write-to-screen figures and writes them to [`figures_path`].
fn report_write_to_screen(times: &[WriteTimes]) {
    let sorted = |f: &dyn Fn(&WriteTimes) -> f64| {
        let mut v: Vec<f64> = times.iter().map(f).collect();
        v.sort_by(f64::total_cmp);
        v
    };
    let to_drawn = sorted(&|t| t.drawn - t.sent);
    let to_frame = sorted(&|t| t.frame - t.sent);
    let ack_to_drawn = sorted(&|t| t.drawn - t.answered);
    let write = sorted(&|t| t.answered - t.sent);
    let to_read = sorted(&|t| t.read_sent - t.sent);
    let read = sorted(&|t| t.read_answered - t.read_sent);
    let render = sorted(&|t| t.drawn - t.read_answered);
    let stats = |v: &[f64]| {
        json!({
            "p50_ms": (nearest_rank(v, 0.5) * 10.0).round() / 10.0,
            "p99_ms": (nearest_rank(v, 0.99) * 10.0).round() / 10.0,
            "max_ms": (nearest_rank(v, 1.0) * 10.0).round() / 10.0,
        })
    };
    let figures = json!({
        "writes": times.len(),
        "write_to_drawn": stats(&to_drawn),
        "write_to_frame": stats(&to_frame),
        "answer_to_drawn": stats(&ack_to_drawn),
        "write_request": stats(&write),
        "write_to_read_sent": stats(&to_read),
        "read": stats(&read),
        "read_answer_to_drawn": stats(&render),
        // Each write in order: write sent → drawn, and its parts (write request, write sent →
        // read sent, the read, read answered → drawn).
        "samples_ms": times.iter().map(|t| {
            let r = |ms: f64| (ms * 10.0).round() / 10.0;
            json!([r(t.drawn - t.sent), r(t.answered - t.sent), r(t.read_sent - t.sent),
                   r(t.read_answered - t.read_sent), r(t.drawn - t.read_answered)])
        }).collect::<Vec<_>>(),
    });
    println!(
        "e2e: write to screen over {} writes (page clock, write sent → row in the document): \
         p50 {:.0} ms, p99 {:.0} ms, max {:.0} ms; to the next frame p99 {:.0} ms; parts (p50): \
         write request {:.0} ms, write → change-driven read sent {:.0} ms, read {:.0} ms, \
         answer → drawn {:.0} ms",
        times.len(),
        nearest_rank(&to_drawn, 0.5),
        nearest_rank(&to_drawn, 0.99),
        nearest_rank(&to_drawn, 1.0),
        nearest_rank(&to_frame, 0.99),
        nearest_rank(&write, 0.5),
        nearest_rank(&to_read, 0.5),
        nearest_rank(&read, 0.5),
        nearest_rank(&render, 0.5),
    );
    let path = figures_path();
    let written = path
        .parent()
        .map_or(Ok(()), std::fs::create_dir_all)
        .and_then(|()| std::fs::write(&path, format!("{figures:#}\n")));
    match written {
        Ok(()) => println!("e2e: write-to-screen figures in {}", path.display()),
        Err(e) => eprintln!("e2e: cannot write {}: {e}", path.display()),
    }
}
