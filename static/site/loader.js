// Split the Fleet: the lab page's loading screen (lab.html). Plain script, no modules,
// so it also runs from file:// (to say why the lab cannot start there).
//
// build.py puts a call to STFLoader.createWorker("./lab.js") where Panel's converted
// page starts its Pyodide worker. The worker reports {type: "stf-progress" | "stf-error"
// | "stf-fetched"} alongside Panel's own messages; this file turns them into the
// three steps on screen, a progress bar, and, when something fails, a clear message
// with a Retry button instead of a blank page.
(function () {
  "use strict";

  var config = {};
  try {
    config = JSON.parse(document.getElementById("stf-config").textContent);
  } catch (e) { /* the page still loads; messages just say less */ }

  var STAGES = ["runtime", "packages", "app"];
  // Share of the bar per stage (downloads dominate).
  var SPAN = { runtime: [0, 30], packages: [30, 85], app: [85, 100] };
  var query = new URLSearchParams(window.location.search);
  var embed = /^(1|true|yes)$/i.test(query.get("embed") || "");
  var state = { stage: "runtime", failed: false, done: false, lastMessage: Date.now(), fetched: [], timeline: [], messages: {}, patches: [] };
  var slowTimer = null;

  // The page's scripts (BokehJS, Panel's JS) when the build took them out of <head>
  // (site_build/pages.py defer_page_scripts): all fetched at once as .gz, unpacked with the
  // browser's DecompressionStream and run in order from blob URLs; the plain file where a
  // .gz cannot be had. (The service worker keeps the .gz like everything the page fetched:
  // keepFetched reads resource timing.) They run later (`letScriptsRun`): BokehJS is a
  // megabyte of JavaScript to compile and run on the main thread, with V8's compile threads,
  // and nothing needs it before the live page is drawn. With a first view on screen, they run
  // once its controls work (stf-early-ready) and have answered a change (its view painted), or
  // SCRIPTS_AFTER_CONTROLS_MS after they work: until then the worker's start and a student's
  // first change are what the student waits for, and on two cores the scripts took from both
  // (benchmarks/README.md, "The page's scripts after the first view's controls"). Without a
  // first view (none for this address, or it failed, or it is not on screen within
  // FIRST_VIEW_WAIT_MS), at once; in any case when the worker starts building the live page
  // (stage "app": the live page draws with them).
  var FIRST_VIEW_WAIT_MS = 1500;
  var SCRIPTS_AFTER_CONTROLS_MS = 1000;
  var letScriptsRun = null;
  var scriptsMayRun = new Promise(function (resolve) { letScriptsRun = resolve; });
  var scriptsReady = loadScripts(config.scripts || [], scriptsMayRun);
  scriptsReady.then(function () { mark("scripts"); }, function () {});

  // The pre-rendered first view (site_build/prerender.py): static HTML + SVG of this
  // mission's first run at its starting controls, built at build time from the same
  // deterministic run the worker makes later. Fetched at once and shown as soon as the page
  // is parsed: no BokehJS, so the main thread stays free for the live page. Inert (nothing
  // a student does on it is taken, and the bar says so) until the worker can answer its
  // controls ("the first view's controls" below), then again while the worker builds the
  // live page, which replaces it. Only for the address it was built for (?mission=ID,
  // optionally &embed=1); anything missing, from another build or unreadable: the normal
  // loading screen, no error.
  var prerender = { file: prerenderFile(), container: null, live: null, shown: false };
  // Its controls, once the worker answers them ("the first view's controls" below).
  var early = { state: "off", seq: 0, busy: false, waiting: null, asked: false, html: null, focus: null };
  var prerenderReady = prerender.file ? fetchPrerender(prerender.file) : Promise.resolve(null);

  function scriptSource(url) {
    if (typeof DecompressionStream !== "function" || typeof fetch !== "function") return Promise.resolve(url);
    return fetch(url + ".gz").then(function (response) {
      if (!response.ok || !response.body) return url;
      return new Response(response.body.pipeThrough(new DecompressionStream("gzip"))).blob().then(function (blob) {
        return URL.createObjectURL(new Blob([blob], { type: "text/javascript" }));
      });
    }).catch(function () { return url; });
  }

  function runScript(src, url) {
    return new Promise(function (resolve, reject) {
      var el = document.createElement("script");
      el.src = src;
      el.async = false;
      el.setAttribute("data-stf-src", url);
      el.onload = function () { resolve(); };
      el.onerror = function () { reject(new Error(url)); };
      document.head.appendChild(el);
    });
  }

  function loadScripts(urls, after) {
    var sources = urls.map(scriptSource);
    return sources.reduce(function (previous, source, i) {
      return previous.then(function () { return source; }).then(function (src) { return runScript(src, urls[i]); });
    }, Promise.resolve(after));
  }

  function prerenderFile() {
    var want = config.prerender;
    if (!want || !want.stamp || window.location.hash) return null;
    var keys = Array.from(query.keys());
    var id = query.get("mission") || "";
    var ok = keys.every(function (k) { return k === "mission" || k === "embed"; })
      && query.getAll("mission").length === 1 && query.getAll("embed").length <= 1;
    if (!ok || !Object.prototype.hasOwnProperty.call(config.missions || {}, id)) return null;
    if (query.has("embed") && !embed) return null;  // ?embed=0: a layout no file was built for
    return "./prerender/" + encodeURIComponent(id) + (embed ? ".embed" : "") + ".html";
  }

  // The .gz beside it where the browser can unpack it (a fifth of the bytes; many hosts send
  // files as they are), else the plain file.
  function fetchPrerender(url) {
    if (typeof fetch !== "function" || typeof document.createElement("div").attachShadow !== "function") return Promise.resolve(null);
    var gz = typeof DecompressionStream === "function";
    return fetch(gz ? url + ".gz" : url).then(function (response) {
      if (!response.ok) return null;
      if (!gz || !response.body) return response.text();
      return new Response(response.body.pipeThrough(new DecompressionStream("gzip"))).text();
    }).then(checkPrerender).catch(function () { return null; });
  }

  // A view this page can show, or null: one root element of this build's stamp and format,
  // built for this address.
  function checkPrerender(text) {
    var want = config.prerender || {};
    if (!text) return null;
    var t = document.createElement("template");
    t.innerHTML = text;
    var root = t.content.firstElementChild;
    if (!root || !root.classList.contains("stf-first") || t.content.children.length !== 1) return null;
    if (root.getAttribute("data-stamp") !== want.stamp || root.getAttribute("data-format") !== String(want.format)) return null;
    return root;
  }

  if (embed) document.documentElement.classList.add("stf-embed");
  document.documentElement.classList.add("stf-loading");

  function $(id) { return document.getElementById(id); }
  // For the benchmark and a curious reader: a moment of the load, in ms since navigation.
  function mark(stage) {
    state.timeline.push({ stage: stage, done: 1, total: 1, detail: "", ms: Math.round(performance.now()) });
  }
  function whenReady(fn) {
    if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", fn, { once: true });
    else fn();
  }
  function host(url) {
    try { return new URL(url, window.location.href).host || url; } catch (e) { return url; }
  }

  function setStage(stage, status) {
    var steps = document.querySelectorAll(".stf-steps li");
    var index = STAGES.indexOf(stage);
    for (var i = 0; i < steps.length; i++) {
      var s = steps[i].getAttribute("data-step");
      var j = STAGES.indexOf(s);
      var st = j < index ? "done" : j === index ? status : "pending";
      steps[i].setAttribute("data-status", st);
    }
    var loader = $("stf-loader");
    if (loader) loader.setAttribute("data-stage", stage);
  }

  function setBar(percent) {
    var bar = $("stf-progress");
    if (!bar) return;
    var p = Math.max(0, Math.min(100, Math.round(percent)));
    bar.setAttribute("aria-valuenow", String(p));
    bar.firstElementChild.style.width = p + "%";
  }

  function setDetail(text) {
    var el = $("stf-loader-detail");
    if (el) el.textContent = text;
  }

  function onProgress(msg) {
    if (state.failed) return;
    // For the benchmark and a curious reader: when each step began, in ms since navigation.
    state.timeline.push({ stage: msg.stage, done: msg.done, total: msg.total, detail: msg.detail || "", ms: Math.round(performance.now()) });
    var stage = STAGES.indexOf(msg.stage) >= 0 ? msg.stage : state.stage;
    state.stage = stage;
    if (stage === "app") letScriptsRun();  // (the live page is on its way: it draws with them)
    setStage(stage, "active");
    var span = SPAN[stage];
    var frac = msg.total > 0 ? Math.min(1, msg.done / msg.total) : 0;
    setBar(span[0] + (span[1] - span[0]) * frac);
    var info = document.querySelector('[data-info="' + stage + '"]');
    var text;
    if (stage === "runtime") {
      text = msg.done >= msg.total ? "Python is ready (" + msg.detail + ")" : "Downloading Python (" + msg.detail + ") from " + host(config.pyodideBase || "");
    } else if (stage === "packages") {
      text = msg.done >= msg.total ? "Packages installed" : "Downloading packages: " + msg.done + " of " + msg.total + (msg.detail ? " (" + msg.detail + ")" : "");
      if (info) info.textContent = msg.done + " of " + msg.total;
    } else {
      text = msg.detail === "Drawing" ? "Drawing the lab…" : msg.detail + "…";
    }
    setDetail(text);
    if (prerender.shown) setPrerenderTitle();
  }

  // ---- the pre-rendered first view ------------------------------------------------------
  var STEP_NAMES = { runtime: "Python runtime", packages: "packages", app: "the lab" };

  function setPrerenderTitle() {
    var title = $("stf-loader-title");
    var step = "step " + (STAGES.indexOf(state.stage) + 1) + " of " + STAGES.length + " (" + STEP_NAMES[state.stage] + ")";
    if (title) title.textContent = early.state === "open" ? "The controls work · the rest of the lab is loading, " + step
      : "Starting the simulator… " + step;
  }

  function nextFrame() {
    return new Promise(function (resolve) { requestAnimationFrame(function () { requestAnimationFrame(resolve); }); });
  }

  // Put the view in its own element, in a shadow root (its styles are the panes' own, and stay
  // its own), before the page's root elements (which stay empty for the live document).
  function showPrerender(root) {
    if (!root || state.done || state.failed || prerender.closed) return null;
    var roots = document.querySelectorAll("[data-root-id]");
    if (!roots.length) return null;
    var box = document.createElement("div");
    box.id = "stf-prerender";
    box.className = "stf-prerender";
    box.inert = true;  // looked at, not used: the controls are not live yet (the bar says so)
    box.setAttribute("aria-busy", "true");
    var live = document.createElement("div");
    live.id = "stf-live";
    live.className = "stf-live";
    roots[0].parentNode.insertBefore(box, roots[0]);
    box.parentNode.insertBefore(live, roots[0]);
    for (var r = 0; r < roots.length; r++) live.appendChild(roots[r]);
    box.attachShadow({ mode: "open" }).appendChild(root);
    prerender.container = box;
    prerender.live = live;
    mark("prerender-start");
    prerender.shown = true;
    document.body.classList.remove("pn-loading");
    document.documentElement.classList.add("stf-prerendered");
    var loader = $("stf-loader");
    if (loader) loader.setAttribute("data-mode", "prerendered");
    setPrerenderTitle();
    return nextFrame().then(function () {
      if (prerender.shown) mark("prerendered");
    });
  }

  function dropPrerender() {
    if (prerender.container) prerender.container.remove();
    prerender.container = null;
    prerender.shown = false;
    document.documentElement.classList.remove("stf-prerendered", "stf-swapping");
    var loader = $("stf-loader");
    if (loader) loader.removeAttribute("data-mode");
  }

  // The worker's document arrives: Panel's handler draws it into the page's root elements.
  // The first view stays on screen while the live document is built underneath (hidden, in
  // the same place). The live document starts as the lab's shell ("Simulating…"); its first
  // run and then the plots follow as patches. The pre-rendered views go once both are in
  // (or a moment after the run if no plots patch comes): nothing on screen goes back.
  var SWAP_QUIET_MS = 300;        // the run's patches (canvas, metrics and stars, plots) come tens of ms apart
  var SWAP_AFTER_RUN_MS = 2000;   // at most this long after the run's first patch
  var SWAP_LATEST_MS = 20000;     // a live page that never reports a run still takes over
  function renderLive(handler, event) {
    prerender.closed = true;
    return Promise.resolve(prerender.drawing).then(function () {
      if (!prerender.shown) { dropPrerender(); return handler(event); }
      if (prerender.live && prerender.container) prerender.live.style.top = prerender.container.offsetTop + "px";
      document.documentElement.classList.add("stf-swapping");
      prerender.swapped = new Promise(function (resolve) { prerender.swap = resolve; });
      return Promise.resolve(handler(event)).then(function () {
        state.timeline.push({ stage: "live", done: 1, total: 1, detail: "", ms: Math.round(performance.now()) });
        prerender.waiting = true;
        prerender.latest = setTimeout(swapNow, SWAP_LATEST_MS, "late");
      }, function (e) { swapNow("failed"); throw e; });
    });
  }

  // After Panel applied a patch to the hidden live document: the swap comes with the patch
  // that says the first run is judged (the lab's judged mark: its metrics and stars are in;
  // the plots, below them, follow), or from the first that reports a run (the status line's
  // data-run), once the run's patches go quiet.
  var JUDGED_MARK = /data-judged-run=(?:"|&quot;)(\d+)/;
  function livePatched(msg) {
    if (!prerender.waiting) return;
    var events = (msg.patch && msg.patch.events) || [];
    var marked = function (mark) { return events.some(function (e) { return typeof e["new"] === "string" && mark.test(e["new"]); }); };
    if (marked(JUDGED_MARK)) return swapNow("judged");
    var ran = marked(RUN_MARK);
    if (!ran && !prerender.ran) return;
    if (!prerender.ran) {
      prerender.ran = true;
      clearTimeout(prerender.latest);
      prerender.latest = setTimeout(swapNow, SWAP_AFTER_RUN_MS, "late");
    }
    clearTimeout(prerender.quiet);
    prerender.quiet = setTimeout(swapNow, SWAP_QUIET_MS, "quiet");
  }

  // `why` goes into the timeline's "swap" moment: judged (the mark), quiet, late or failed.
  function swapNow(why) {
    if (!prerender.waiting) return;
    prerender.waiting = false;
    state.timeline.push({ stage: "swap", done: 1, total: 1, detail: why, ms: Math.round(performance.now()) });
    clearTimeout(prerender.latest);
    clearTimeout(prerender.quiet);
    nextFrame().then(function () {
      if (prerender.live) prerender.live.style.top = "";
      dropPrerender();
      handFocus();
      if (prerender.swap) prerender.swap();
    });
  }

  // A click on the pre-rendered page is refused, visibly: the bar says what is going on. Once
  // its controls work, a click on one of them is taken (a greyed-out one does nothing, as on
  // the live page); on anything else (play, the plots' places) it is refused the same way.
  function nudge(e) {
    if (!prerender.shown || state.done || state.failed || !prerender.container) return;
    var box = prerender.container.getBoundingClientRect();
    if (e.clientX < box.left || e.clientX > box.right || e.clientY < box.top || e.clientY > box.bottom) return;
    var loader = $("stf-loader");
    if (!loader) return;
    if (early.state === "open") {
      var path = e.composedPath ? e.composedPath() : [];
      if (path.some(function (el) { return el.hasAttribute && (el.hasAttribute("data-control") || el.hasAttribute("data-reset")); })) return;
    }
    setDetail({
      open: "Only the fleet's controls work yet: the rest comes with the lab (step " + STAGES.length + "). Nothing was changed.",
      closed: "The lab is starting: everything works in a moment. Nothing was changed.",
    }[early.state] || "Not yet: the controls work in a moment. Nothing was changed.");
    loader.classList.remove("stf-nudge");
    void loader.offsetWidth;  // restart the flash
    loader.classList.add("stf-nudge");
  }
  document.addEventListener("pointerdown", nudge, true);

  // ---- the first view's controls (lab-worker.js, lab/ui/early_page.py) ----------------------
  // Once the worker can answer them (stf-early-ready), the first view's controls work: a change
  // goes to the worker, which runs it and sends the view of the new settings, and the address
  // follows. One change at a time: one made meanwhile waits for the answer (only the latest
  // is sent). When the worker starts building the live page (stf-early-closed) the view is
  // inert again until the live page, built at its last address, replaces it.
  function askEarly() {
    if (early.asked || !prerender.shown || !prerender.worker) return;
    early.asked = true;
    prerender.worker.postMessage({ type: "stf-early-wanted" });
  }

  function viewRoot() { return prerender.container && prerender.container.shadowRoot; }

  function setControls(enabled) {
    var root = viewRoot();
    var els = root ? root.querySelectorAll("[data-control] button, [data-control] input, button[data-reset]") : [];
    for (var i = 0; i < els.length; i++) els[i].disabled = !enabled || !!els[i].closest(".idle");
  }

  function openEarly() {
    var root = viewRoot();
    if (!root || !prerender.shown || prerender.closed || early.state !== "off") return;
    early.state = "open";
    early.html = root.firstElementChild ? root.firstElementChild.outerHTML : null;
    prerender.container.inert = false;
    prerender.container.setAttribute("data-early", "open");
    root.addEventListener("click", onViewClick);
    root.addEventListener("input", onViewInput);
    root.addEventListener("change", onViewChange);
    setControls(true);
    mark("early-ready");
    setTimeout(letScriptsRun, SCRIPTS_AFTER_CONTROLS_MS);
    setPrerenderTitle();
  }

  // "↺ Back to the start" sends this name (early_page.RESET); greyed at the start (aria-disabled),
  // it does nothing there, as on the live page.
  var RESET = "reset";

  function onViewClick(e) {
    var reset = e.target.closest && e.target.closest("button[data-reset]");
    if (reset) {
      if (!reset.disabled && early.state === "open" && reset.getAttribute("aria-disabled") !== "true") sendChange(RESET, "");
      return;
    }
    var button = e.target.closest && e.target.closest("[data-control] button[data-value]");
    if (!button || button.disabled || early.state !== "open" || button.classList.contains("on")) return;
    var siblings = button.parentNode.querySelectorAll("button");
    for (var i = 0; i < siblings.length; i++) {
      siblings[i].classList.toggle("on", siblings[i] === button);
      siblings[i].setAttribute("aria-pressed", String(siblings[i] === button));
    }
    sendChange(button.closest("[data-control]").getAttribute("data-control"), button.getAttribute("data-value"));
  }

  // A slider's bar and value follow it as it moves; the change is sent when it is let go
  // (or per key press).
  function onViewInput(e) {
    var input = e.target;
    if (!input || input.type !== "range" || early.state !== "open") return;
    var lo = Number(input.min), hi = Number(input.max), v = Number(input.value);
    var bar = input.parentNode.querySelector("span");
    if (bar) bar.style.width = (hi > lo ? Math.max(0, Math.min(1, (v - lo) / (hi - lo))) * 100 : 0) + "%";
    var shown = input.closest("[data-control]").querySelector("label b");
    if (shown) shown.textContent = input.value;
  }

  function onViewChange(e) {
    var input = e.target;
    if (!input || input.type !== "range" || input.disabled || early.state !== "open") return;
    sendChange(input.closest("[data-control]").getAttribute("data-control"), input.value);
  }

  function sendChange(name, value) {
    if (early.busy) { early.waiting = { name: name, value: value }; return; }
    early.busy = true;
    early.seq += 1;
    var root = viewRoot();
    var status = root && root.querySelector(".stf-status");
    if (status) { status.setAttribute("data-busy", "true"); status.textContent = "Simulating…"; }
    mark("early-change");
    prerender.worker.postMessage({ type: "stf-early-change", name: name, value: String(value), seq: early.seq });
  }

  // The view of the settings that ran (or, refused, of those before: a slider moved back).
  function showEarlyView(msg) {
    if (msg.seq !== early.seq) return;
    early.busy = false;
    var focused = early.state === "open" && msg.html ? replaceView(msg.html) : null;
    if (focused !== null) {
      early.html = msg.html;
      if (!msg.refusal && typeof msg.query === "string") {
        try { history.replaceState(history.state, "", "?" + msg.query + window.location.hash); } catch (e) { /* sandboxed */ }
      }
      // (for the benchmark and the tests: when, which control has the focus after it, and
      // when it is on screen: two frames later)
      state.timeline.push({ stage: "early-view", done: 1, total: 1, detail: focused, ms: Math.round(performance.now()) });
      nextFrame().then(function () { mark("early-painted"); setTimeout(letScriptsRun, 0); });
    }
    if (msg.refusal || msg.error) setDetail(msg.refusal || "The simulation could not run: " + msg.error);
    var next = early.waiting;
    early.waiting = null;
    if (next && early.state === "open") sendChange(next.name, next.value);
  }

  // The view replaced, the focus on the same control as before: returns that control's name
  // ("" if none had it), or null when the text is not a view.
  function replaceView(text) {
    var root = viewRoot();
    var t = document.createElement("template");
    t.innerHTML = text;
    var view = t.content.firstElementChild;
    if (!root || !view || !view.classList.contains("stf-first")) return null;
    var focusKey = focusedControl();
    root.replaceChildren(view);
    setControls(early.state === "open");
    var again = null;
    if (focusKey) {
      again = focusKey.name === RESET ? root.querySelector("button[data-reset]")
        : root.querySelector('[data-control="' + CSS.escape(focusKey.name) + '"] ' + (focusKey.value === null ? "input"
          : 'button[data-value="' + CSS.escape(focusKey.value) + '"]'));
      if (again) again.focus();
    }
    return again && root.activeElement === again ? focusKey.name : "";
  }

  // The worker builds the live page now: the view is looked at, not used, again. A change it
  // did not take (sent just before) is undone on screen, and the bar says so.
  function closeEarlyView() {
    if (early.state !== "open") return;
    early.state = "closed";
    var lost = early.busy || early.waiting;
    early.busy = false;
    early.waiting = null;
    if (lost && early.html) replaceView(early.html);
    early.focus = focusedControl();
    setControls(false);
    if (prerender.container) {
      prerender.container.inert = true;
      prerender.container.setAttribute("data-early", "closed");
    }
    if (lost) setDetail("Not taken: the lab is starting. Nothing was changed.");
    setPrerenderTitle();
  }

  // The first view's control that has the keyboard's focus: {name, value, label} (a button's
  // value as the address writes it and its words; both null for a slider; name RESET for the
  // reset button), or null.
  function focusedControl() {
    var root = viewRoot();
    var active = root && root.activeElement;
    if (!active) return null;
    var label = active.tagName === "BUTTON" ? active.textContent.trim() : null;
    if (active.hasAttribute("data-reset")) return { name: RESET, value: null, label: label };
    var control = active.closest("[data-control]");
    if (!control) return null;
    return { name: control.getAttribute("data-control"), value: active.getAttribute("data-value"), label: label };
  }

  // The view goes inert as it closes and takes the focus with it: once the live page has taken
  // its place, the focus goes to the same control there (the button with the same words, or the
  // slider's handle), unless the student has put it somewhere since. A keyboard user goes on
  // where they were. The timeline's "focus" moment says on which control, for the tests.
  function handFocus() {
    var want = early.focus;
    early.focus = null;
    var active = document.activeElement;
    if (!want || (active && active !== document.body && active !== document.documentElement)) return;
    var host = deepQuery(prerender.live || document, want.name === RESET ? ".stf-reset" : ".stf-control-" + CSS.escape(want.name));
    var root = host && host.shadowRoot;
    if (!root) return;
    var target = null;
    if (want.label === null) {
      target = root.querySelector(".noUi-handle");
    } else {
      var buttons = root.querySelectorAll("button");
      for (var i = 0; i < buttons.length && !target; i++) {
        if (buttons[i].textContent.trim() === want.label) target = buttons[i];
      }
    }
    if (!target) return;
    target.focus();
    state.timeline.push({ stage: "focus", done: 1, total: 1, detail: want.name, ms: Math.round(performance.now()) });
  }

  // The first element matching `selector` under `root`, looking into shadow roots too (Bokeh
  // draws each view in its own).
  function deepQuery(root, selector) {
    var found = root.querySelector(selector);
    if (found) return found;
    var all = root.querySelectorAll("*");
    for (var i = 0; i < all.length; i++) {
      if (all[i].shadowRoot) {
        found = deepQuery(all[i].shadowRoot, selector);
        if (found) return found;
      }
    }
    return null;
  }

  var HINTS = {
    file:
      "<p>Browsers run the lab's Python worker only for pages served over <b>HTTP</b>, not for files opened from disk.</p>" +
      "<p>In the folder that holds <code>lab.html</code>, run <code>python -m http.server 8000</code> and open " +
      "<a href=\"http://localhost:8000/\">http://localhost:8000/</a>. Any static web host works too.</p>",
    selfhosted:
      "<p>This site carries its own copy of Pyodide (<code>{base}</code>), and part of it could not be loaded. " +
      "Check your connection and press Retry; if it keeps failing, the copy is incomplete: whoever built the site should " +
      "rebuild it with <code>python build.py --pyodide-dir</code> pointing at the full Pyodide release.</p>",
    network:
      "<p>Are you offline, or is <b>{host}</b> blocked on this network (a school or company firewall, a content blocker)? " +
      "Check your connection and press Retry.</p>" +
      "<p class=\"stf-small\">Teaching without internet? The site can carry its own copy of Pyodide: see “A classroom without internet” in the project's docs/embedding.md " +
      "(<code>python build.py --pyodide-dir …</code>).</p>",
    page:
      "<p>Part of the page did not load. Check your connection and press Retry.</p>",
    app:
      "<p>This looks like a bug in the lab. Retry, or go back to the missions; the technical details below help whoever fixes it.</p>",
  };

  function fail(stage, message, detail, kind) {
    if (state.done && stage !== "app") return;
    state.failed = true;
    state.failedStage = stage;
    if (slowTimer) clearInterval(slowTimer);
    whenReady(function () {
      var loader = $("stf-loader");
      if (!loader) return;
      loader.setAttribute("data-state", "error");
      document.documentElement.classList.add("stf-load-failed");
      if (STAGES.indexOf(stage) >= 0) setStage(stage, "failed");
      $("stf-loader-title").textContent = kind === "file" ? "Serve the site over HTTP to run the lab" : "The lab could not start";
      $("stf-error-message").textContent = message;
      var hint = HINTS[kind] || HINTS.network;
      $("stf-error-hint").innerHTML = hint.replace("{host}", escapeHtml(host(config.pyodideBase || "")))
        .replace("{base}", escapeHtml(config.pyodideBase || ""));
      $("stf-error-detail").textContent = detail || "";
      $("stf-error-details").hidden = !detail;
      $("stf-retry").hidden = kind === "file";
      $("stf-loader-error").hidden = false;
      var detailLine = $("stf-loader-detail");
      if (detailLine) detailLine.hidden = true;
      var note = $("stf-loader-note");
      if (note) note.hidden = true;
      if (kind !== "file") $("stf-retry").focus();
    });
  }

  function selfHosted() {
    return !/^[a-z][a-z0-9+.-]*:/i.test(config.pyodideBase || "");
  }

  function escapeHtml(text) {
    return String(text).replace(/[&<>"']/g, function (c) {
      return { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" }[c];
    });
  }

  function finish() {
    if (state.done || state.failed) return;
    state.done = true;
    if (slowTimer) clearInterval(slowTimer);
    setStage("app", "done");
    setBar(100);
    var loader = $("stf-loader");
    document.documentElement.classList.remove("stf-loading");
    document.documentElement.classList.add("stf-loaded");
    keepFetched(state.fetched);
    state.timeline.push({ stage: "drawn", done: 1, total: 1, detail: "", ms: Math.round(performance.now()) });
    if (loader) {
      loader.setAttribute("data-state", "done");
      setTimeout(function () { loader.hidden = true; }, 350);
    }
  }

  // Panel's handler draws the app after {type: "render"}; wait until BokehJS has views.
  function waitForDraw() {
    var started = Date.now();
    (function poll() {
      if (state.failed) return;
      var roots = 0;
      try {
        roots = window.Bokeh && Bokeh.index && Bokeh.index.roots ? Array.from(Bokeh.index.roots).length : 0;
      } catch (e) { roots = 0; }
      if (roots > 0 && prerender.swapped) return prerender.swapped.then(function () { requestAnimationFrame(finish); });
      if (roots > 0) return requestAnimationFrame(finish);
      if (Date.now() - started > 60000) return fail("app", "The lab was built but did not appear on the page.", "", "app");
      setTimeout(poll, 50);
    })();
  }

  // What the page itself loaded (BokehJS, Panel's JS and CSS, the worker script).
  function pageResources() {
    try {
      return performance.getEntriesByType("resource").map(function (e) { return e.name; });
    } catch (e) { return []; }
  }

  function keepFetched(urls) {
    urls = (urls || []).concat(pageResources());
    if (!urls.length || !("serviceWorker" in navigator) || !/^https?:$/.test(window.location.protocol)) return;
    try {
      navigator.serviceWorker.ready.then(function (reg) {
        if (reg.active) reg.active.postMessage({ type: "stf-cache", urls: urls });
      });
    } catch (e) { /* no service worker: nothing to keep */ }
  }

  // The site's service worker serving this page, or null (none yet, or storage blocked).
  function serviceWorkerInControl() {
    try { return (navigator.serviceWorker && navigator.serviceWorker.controller) || null; } catch (e) { return null; }
  }

  // Retry. A start that failed reading the runtime or the packages may have read a copy
  // the service worker keeps that is damaged (cache-first never fetches it again): the retry
  // has it forget those downloads first, so they come afresh. Pages and assets stay (offline,
  // the page still opens), and nothing of the student's is there (stars: localStorage).
  function retry() {
    var asked = false;
    var reload = function () { if (!asked) { asked = true; window.location.reload(); } };
    if (state.failedStage !== "runtime" && state.failedStage !== "packages") return reload();
    var controller = serviceWorkerInControl();
    if (!controller) return reload();
    var channel = new MessageChannel();
    channel.port1.onmessage = reload;
    setTimeout(reload, 3000);  // never wait long for it
    controller.postMessage({ type: "stf-forget-downloads" }, [channel.port2]);
  }

  // The runtime the service worker kept did not start (the worker goes on with its own copy):
  // the service worker drops it, and unpacks a fresh one on the next visit.
  function dropKeptRuntime(detail) {
    state.keptRuntimeFailed = String(detail || "");  // for tests
    var controller = serviceWorkerInControl();
    if (controller) controller.postMessage({ type: "stf-drop-runtime" });
  }

  // For tests: each patch's number, its event count and the run it reports (the status
  // line's data-run), so a test finds the patch that carried a run whatever timers sent around it.
  var RUN_MARK = /data-run=(?:"|&quot;)(\d+)/;
  function notePatch(msg) {
    var events = (msg.patch && msg.patch.events) || [];
    var run = null;
    for (var i = 0; i < events.length; i++) {
      var found = typeof events[i]["new"] === "string" && RUN_MARK.exec(events[i]["new"]);
      if (found) run = Number(found[1]);
    }
    state.patches.push({ n: state.messages.patch, events: events.length, run: run });
    if (state.patches.length > 200) state.patches.shift();
  }

  function onMessage(event) {
    var msg = event.data || {};
    state.lastMessage = Date.now();
    state.messages[msg.type] = (state.messages[msg.type] || 0) + 1;  // for tests: patches per update
    if (msg.type === "patch") notePatch(msg);
    if (msg.type === "stf-progress") onProgress(msg);
    else if (msg.type === "stf-error") fail(msg.stage, msg.message, msg.detail, msg.stage === "app" ? "app" : selfHosted() ? "selfhosted" : "network");
    else if (msg.type === "stf-fetched") { state.fetched = msg.urls || []; keepFetched(state.fetched); }
    else if (msg.type === "stf-kept-runtime-failed") dropKeptRuntime(msg.detail);
    else if (msg.type === "stf-early-ready") openEarly();
    else if (msg.type === "stf-early-view") showEarlyView(msg);
    else if (msg.type === "stf-early-closed") closeEarlyView();
    else if (msg.type === "render") { onProgress({ stage: "app", done: 2, total: 2, detail: "Drawing" }); waitForDraw(); }
  }

  var stub = { postMessage: function () {}, addEventListener: function () {}, terminate: function () {}, busy: false, queue: [] };

  function createWorker(url) {
    if (window.location.protocol === "file:") {
      fail("runtime", "This page was opened as a file (" + window.location.pathname.split("/").pop() + "), so the browser will not run the lab's worker.", "", "file");
      return stub;
    }
    if (typeof window.Worker !== "function") {
      fail("runtime", "This browser cannot run web workers, which the lab needs.", "", "page");
      return stub;
    }
    if (!(config.scripts || []).length && typeof window.Bokeh === "undefined") {
      fail("runtime", "BokehJS (the page's plotting library) did not load, so the lab cannot be drawn.", "", "page");
      return stub;
    }
    var worker;
    try {
      worker = new Worker(url);
    } catch (e) {
      fail("runtime", "The browser refused to start the lab's worker (" + url + ").", String(e && e.message || e), "page");
      return stub;
    }
    // Panel's handler (set right after this returns) draws with BokehJS: hold each message
    // until the page's scripts have run.
    var setHandler = Object.getOwnPropertyDescriptor(Worker.prototype, "onmessage").set;
    Object.defineProperty(worker, "onmessage", {
      configurable: true,
      set: function (handler) {
        setHandler.call(worker, function (event) {
          return scriptsReady.then(function () {
            var type = event.data && event.data.type;
            if (type === "render") return renderLive(handler, event);
            var done = handler(event);
            if (type === "patch" && prerender.waiting) livePatched(event.data);
            return done;
          });
        });
      },
    });
    scriptsReady.catch(function (e) {
      fail("runtime", "A part of the page did not load: " + (e && e.message || e) + ", so the lab cannot be drawn.", "", "page");
    });
    worker.addEventListener("message", onMessage);
    worker.addEventListener("error", function (e) {
      e.preventDefault();
      fail(state.stage, "The lab's worker (" + url + ") stopped: " + (e.message || "it could not be loaded"), (e.filename || "") + (e.lineno ? ":" + e.lineno : ""), "page");
    });
    worker.postMessage({ type: "stf-init", location: JSON.stringify(window.location), controlled: !!serviceWorkerInControl() });
    prerender.worker = worker;
    askEarly();
    slowTimer = setInterval(function () {
      if (state.done || state.failed) return clearInterval(slowTimer);
      if (Date.now() - state.lastMessage > 45000) {
        setDetail("Still working… this is taking longer than usual (a slow network?).");
      }
    }, 5000);
    return worker;
  }

  // A script or stylesheet of the page that failed to load (BokehJS, Panel's JS).
  window.addEventListener("error", function (e) {
    var t = e.target;
    if (t && t !== window && (t.tagName === "SCRIPT" || t.tagName === "LINK")) {
      var src = t.src || t.href || "";
      if (t.tagName === "SCRIPT") fail(state.stage, "A part of the page did not load: " + src, "", "page");
    }
  }, true);
  window.addEventListener("unhandledrejection", function (e) {
    if (state.done || state.failed) return;
    var r = e.reason;
    if (state.stage === "app") fail("app", "The lab could not be drawn: " + (r && r.message || r), String(r && r.stack || r), "app");
  });

  whenReady(function () {
    var id = query.get("mission") || "";
    var titles = config.missions || {};
    var el = $("stf-loader-mission");
    if (el) el.textContent = id ? (titles[id] ? (id === "sandbox" ? "Sandbox" : "Mission: " + titles[id]) : "Mission: " + id) : "";
    $("stf-retry").addEventListener("click", retry);
    if (embed) {
      // In someone else's page: "All missions" opens the hub in a new tab, not inside the iframe.
      var links = document.querySelectorAll(".stf-loader a[href]");
      for (var i = 0; i < links.length; i++) { links[i].target = "_blank"; links[i].rel = "noopener"; }
    }
    if (window.location.protocol === "file:") {
      fail("runtime", "This page was opened as a file (" + window.location.pathname.split("/").pop() + "), so the browser will not run the lab's worker.", "", "file");
    }
  });

  if (prerender.file) {
    prerender.drawing = new Promise(function (resolve) { whenReady(resolve); })
      .then(function () { return prerenderReady; })
      .then(showPrerender)
      .catch(function () { dropPrerender(); });
    var unlessFirstViewShown = function () { if (!prerender.shown) letScriptsRun(); };
    prerender.drawing.then(unlessFirstViewShown);
    setTimeout(unlessFirstViewShown, FIRST_VIEW_WAIT_MS);
    prerender.drawing.then(askEarly);
  } else {
    letScriptsRun();
  }

  // Offline second visits: a service worker scoped to this folder (never "/").
  if ("serviceWorker" in navigator && /^https?:$/.test(window.location.protocol)) {
    window.addEventListener("load", function () {
      try {
        navigator.serviceWorker.register("./sw.js", { scope: "./" }).catch(function () {});
      } catch (e) { /* storage blocked (some iframes): fine, just no offline */ }
    });
  }

  window.STFLoader = { createWorker: createWorker, fail: fail, state: state, scriptsReady: scriptsReady, prerender: prerender,
    early: early };
})();
