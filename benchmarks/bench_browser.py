"""Browser benchmark (not a test): control change -> redrawn canvas, in Debian's Chromium.

    python benchmarks/bench_browser.py [--changes 20] [--mission ID] [--url http://...]
                                       [--fresh] [--think-ms MS] [--screenshots DIR] [--json OUT.json]
                                       [--site DIST [--loads N] [--first-change] [--trace] [--record-imports FILE]]

Starts `python -m lab.ui.serve` on a free port (unless --url points at a running one),
opens the mission's lab at 1366x800 and moves its GPU-count slider from the keyboard,
back and forth, N times. For each change it measures, on the page's own clock, the
time from the keydown to two animation frames after the new run's data reached the
canvas (the canvas marks that moment itself). That includes Panel's and the app's
waits, the simulation on the server, building the canvas and plot data, the
websocket transfer, applying the patch and the browser's paint. Prints the median and
spread, the simulation's own share (the server's wall-clock time for simulate +
metrics), and the split at the moment the data reached the page.

With --site DIST it measures the static site in Pyodide instead: --loads N rounds of a cold
load, a warm one (the first return: the service worker serves the site) and a later one (a
return after that: Chromium has kept the runtime's compiled code, sw.js `unpackedRuntime`),
each round in a fresh browser: the time to the first simulated canvas (the
pre-rendered view, when the site has one for the mission), to its controls working (the
worker answers them before the live page: "early-ready"), to the live page drawn with its
first run, when each loading step began, the bytes sent and the largest
files (--trace: and the page's main-thread work by each of those moments, from a Chrome
trace; --first-change: and when a slider moved on the pre-rendered view the moment its
controls work had its answer on screen: interactive, as issue 38 and benchmarks/README.md count
it); then the changes on the last page (a later visit), with the worker's
Python split into LabState.run (simulate + metrics, then the views' updates) and serializing the
patches. --record-imports FILE writes the modules the lab imported by then
(site_build/start_imports.txt, which build.py pre-compiles).

The default back-and-forth revisits two settings, and the lab keeps its last runs
(`LabState`), so after the first two changes it measures a kept run's redraw. --fresh makes
every change reach a setting not run before (`measure_fresh`: a slider to its end, the
layout switched, then a snake over two sliders; mission 1 gives 16 such changes).

With --screenshots DIR it also saves hub.png (the hub), mission-playing.png (the lab
mid-play), mission-split.png (the mission's fleet split into pools, when it can be) and
embed-700.png (the lab in a 700 px wide iframe).
"""

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # run as a script from anywhere
    sys.path.insert(0, str(REPO))
from lab.ui.app import DEBOUNCE_MS, FIRST_MS  # noqa: E402
CHROMIUM = "/usr/bin/chromium"
TRACED_CHANGES = 8  # --site: changes measured again under a Chrome trace (main-thread and worker work)
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync"]


def start_server(missions=None, timeout_s=90):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cmd = [sys.executable, "-m", "lab.ui.serve", "--port", str(port), "--no-show"]
    if missions:
        cmd += ["--missions", missions]
    log = tempfile.NamedTemporaryFile("w", prefix="bench-serve-", suffix=".log", delete=False)
    proc = subprocess.Popen(cmd, cwd=REPO, stdout=log, stderr=subprocess.STDOUT,
                            env=dict(os.environ, BOKEH_RESOURCES="server"))
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"server exited: see {log.name}")
        try:
            with urllib.request.urlopen(base + "/", timeout=5):
                return proc, base
        except OSError:
            time.sleep(0.3)
    proc.terminate()
    raise SystemExit("server did not answer in time")


def wait_run(page, after):
    page.wait_for_function(f"(window.__stfPainted || {{run: 0}}).run > {after}", timeout=60_000)
    return page.evaluate("window.__stfPainted")


def live_sliders(page, mission_id):
    """[(name, handle)] of the mission's integer sliders that are enabled now, in order."""
    from lab.core.missions import list_missions

    mission = next((m for m in list_missions() if m.id == mission_id), None)
    names = [n for n, c in mission.controls.items() if c.kind == "int"] if mission else ["gpus"]
    out = []
    for name in names:
        handle = page.locator(f".stf-control-{name} .noUi-handle")
        if handle.count() and not page.locator(f".stf-control-{name} [disabled]").count():
            out.append((name, handle))
    return out


def pick_slider(page, mission_id):
    """The first enabled integer slider of the mission (gpus, prefill_gpus, ...)."""
    sliders = live_sliders(page, mission_id)
    if not sliders:
        raise SystemExit(f"no enabled integer slider in {mission_id}")
    return sliders[0]


def _listen_keys(page):
    page.evaluate("""() => {
        window.__stfKey = 0;
        window.__stfKeys = [];  // on the epoch clock the worker's phases use (bench_site)
        if (window.__stfKeyListening) return;  // measured twice (traced_changes): one listener
        window.__stfKeyListening = true;
        document.addEventListener('keydown', () => {
            window.__stfKey = performance.now();
            window.__stfKeys.push(performance.timeOrigin + window.__stfKey);
        }, true);
    }""")


class _Changes:
    """The figures of a series of control changes: each `press` sends one key to a control,
    waits for the run it starts to be painted, and keeps its keydown -> painted time, the
    split at the moment its data reached the page, and its status line's run time.

    `think_ms` (--think-ms): how long after a run's status line is out the next key comes.
    0 (the default) presses at once, while the run's plots are still being made and painted,
    so a change also waits behind the one before; a student reading the numbers between
    changes (some hundreds of ms) gives each change the page to itself."""

    think_ms = 0

    def __init__(self, page):
        self.page = page
        self.times, self.sims, self.arrivals = [], [], []
        self.last = page.evaluate("(window.__stfPainted || {run: 0}).run")

    def press(self, target, key):
        page = self.page
        target.focus()
        page.keyboard.press(key)
        done = wait_run(page, self.last)
        self.last = done["run"]
        pressed, arrived = page.evaluate("[window.__stfKey, window.__stfArrived]")
        self.times.append(done["at"] - pressed)
        if arrived and arrived["run"] == self.last:
            self.arrivals.append((arrived["at"] - pressed, done["at"] - arrived["at"]))
        status = page.locator(f'.stf-status[data-run="{self.last}"]')
        status.wait_for(state="attached")
        self.sims.append(float(status.get_attribute("data-run-ms")))
        if self.think_ms:
            page.wait_for_timeout(self.think_ms)  # a student's pause before the next change
        return len(self.times)

    def figures(self, name):
        return name, self.times, self.sims, self.arrivals, self.page.evaluate("window.__stfKeys")


def measure(page, changes, mission_id):
    name, handle = pick_slider(page, mission_id)
    _listen_keys(page)
    start = float(handle.get_attribute("aria-valuenow"))
    hi = float(handle.get_attribute("aria-valuemax"))
    up = start < hi
    series = _Changes(page)
    for i in range(changes):
        key = ("ArrowRight" if up else "ArrowLeft") if i % 2 == 0 else ("ArrowLeft" if up else "ArrowRight")
        series.press(handle, key)
    return series.figures(name)


def measure_fresh(page, changes, mission_id):
    """Like `measure`, but every change reaches a setting the page has not run before, so no
    change can reuse a kept run (LabState keeps the last few): the first integer slider
    walks up to its end, then the layout switches (when the mission offers another), then
    the two integer sliders that are live snake across their grid (the second one end to
    end, the first one a step towards its farther end, the second one back), as many
    changes as that gives, up to `changes`."""
    _listen_keys(page)
    series = _Changes(page)

    def press(target, key):
        return series.press(target, key) >= changes

    def value(handle, attr="aria-valuenow"):
        return float(handle.get_attribute(attr))

    sliders = live_sliders(page, mission_id)
    name = sliders[0][0] if sliders else "layout"
    if sliders:
        handle = sliders[0][1]
        while value(handle) < value(handle, "aria-valuemax"):
            if press(handle, "ArrowRight"):
                return series.figures(name)
    other = page.locator(".stf-control-layout button:not(.bk-active)")
    if other.count():
        if press(other.first, "Enter"):
            return series.figures(name)
        page.wait_for_timeout(300)  # the pool sliders come alive with the layout's patch
        sliders = live_sliders(page, mission_id)
    if len(sliders) >= 2:
        (_, outer), (_, inner) = sliders[:2]
        room_up = value(outer, "aria-valuemax") - value(outer)
        outer_key = "ArrowRight" if room_up >= value(outer) - value(outer, "aria-valuemin") else "ArrowLeft"
        while True:
            inner_key = "ArrowRight" if value(inner) < value(inner, "aria-valuemax") else "ArrowLeft"
            end = "aria-valuemax" if inner_key == "ArrowRight" else "aria-valuemin"
            while value(inner) != value(inner, end):
                if press(inner, inner_key):
                    return series.figures(name)
            edge = "aria-valuemax" if outer_key == "ArrowRight" else "aria-valuemin"
            if value(outer) == value(outer, edge) or press(outer, outer_key):
                break
    return series.figures(name)


def screenshots(browser, base, mission_id, out):
    from lab.core.missions import list_missions

    out.mkdir(parents=True, exist_ok=True)
    ctx = browser.new_context(viewport={"width": 1366, "height": 800})
    page = ctx.new_page()
    page.goto(base + "/")
    page.locator('ul.stf-missions[data-loaded="true"]').wait_for()
    page.screenshot(path=str(out / "hub.png"), full_page=True)
    page.goto(f"{base}/lab?mission={mission_id}")
    wait_run(page, 0)
    page.locator(".stf-play button").click()
    start = float(page.evaluate("document.documentElement.dataset.canvasWindow"))
    page.mouse.move(5, 5)  # no tooltip over the canvas
    page.wait_for_function(f"Number(document.documentElement.dataset.canvasWindow) > {start + 1.0}")
    page.screenshot(path=str(out / "mission-playing.png"), full_page=True)
    page.locator(".stf-play button").click()
    # The same mission split into pools (if it can be): the link row, no slow steps.
    mission = next((m for m in list_missions() if m.id == mission_id), None)
    split = ""
    if mission is not None and "layout" in mission.controls and "disaggregated" in mission.controls["layout"].choices:
        split = "&layout=disaggregated"
        for name in ("prefill_gpus", "decode_gpus"):
            if name in mission.controls:
                split += f"&{name}={int(mission.controls[name].min) + 1}"
    page.goto(f"{base}/lab?mission={mission_id}{split}&t=12")
    wait_run(page, 0)
    page.mouse.move(5, 5)
    page.screenshot(path=str(out / "mission-split.png"), full_page=True)
    ctx.close()
    ctx = browser.new_context(viewport={"width": 740, "height": 900})
    host = ctx.new_page()
    host.set_content(f'<iframe id="f" src="{base}/lab?mission={mission_id}&embed=1" width="700" height="880" '
                     'style="border:1px solid #ccc"></iframe>')
    host.frames[1].wait_for_function("(window.__stfPainted || {run: 0}).run > 0", timeout=60_000)
    host.screenshot(path=str(out / "embed-700.png"))
    ctx.close()
    return [str(out / n) for n in ("hub.png", "mission-playing.png", "mission-split.png", "embed-700.png")]


# In the page, from its start (an init script): the moment the first view's controls work
# (loader.js sets data-early="open"), its first enabled slider moves one notch, as a key
# would move it (the input and change events its handlers take), with no round trip from the
# benchmark in between.
FIRST_CHANGE_JS = """
new MutationObserver((records, observer) => {
  const box = document.getElementById("stf-prerender");
  if (!box || box.getAttribute("data-early") !== "open") return;
  observer.disconnect();
  const input = box.shadowRoot.querySelector('[data-control] input[type="range"]:not([disabled])');
  input.stepUp();
  input.dispatchEvent(new Event("input", { bubbles: true }));
  input.dispatchEvent(new Event("change", { bubbles: true }));
}).observe(document, { subtree: true, attributes: true, attributeFilter: ["data-early"] });
"""


def _early_figures(which, steps):
    """A load's seconds to the first view's controls working and, with --first-change, to that
    change on screen, and its wait (`steps`: _steps of its timeline; {} without them)."""
    out = {f"{which}_controls_s": round(steps["early-ready"] / 1000, 2)} if "early-ready" in steps else {}
    if "early-painted" in steps:
        out[f"{which}_answered_s"] = round(steps["early-painted"] / 1000, 2)
        out[f"{which}_answer_wait_s"] = round((steps["early-painted"] - steps["early-change"]) / 1000, 2)
    return out


def _load_lab(ctx, url, first_change=False):
    """Open the static lab in `ctx`: (page, seconds to the first simulated canvas, seconds to
    the live page drawn, the loader's timeline in ms since navigation).

    The first simulated canvas is the pre-rendered view when the page has one (loader.js marks
    "prerendered"), else the live page's; the live page is drawn with its first
    run ("drawn": the pre-rendered view has gone). Both on the page's own clock.
    `first_change`: as soon as the pre-rendered view's controls work ("early-ready"), its first
    slider moves one notch (FIRST_CHANGE_JS); loader.js's timeline then has "early-painted":
    that change's view on screen (the live page then opens at the new setting)."""
    from site_run import CANVAS, RAN

    page = ctx.new_page()
    if first_change:
        page.add_init_script(FIRST_CHANGE_JS)
    page.goto(url)
    page.locator(RAN).first.wait_for(timeout=300_000)
    page.locator(CANVAS).first.wait_for(timeout=60_000)
    first_ms = page.evaluate("performance.now()")
    page.wait_for_selector('#stf-loader[data-state="done"]', state="attached", timeout=300_000)
    timeline = page.evaluate("(window.STFLoader && STFLoader.state.timeline) || []")
    steps = _steps(timeline)
    if first_change and "early-painted" not in steps:
        raise SystemExit("--first-change: the first view's controls never worked (no pre-rendered view? an old build?)")
    first_ms = steps.get("prerendered", first_ms)
    live_ms = steps.get("drawn", page.evaluate("performance.now()"))
    return page, first_ms / 1000, live_ms / 1000, timeline


TRACE_CATEGORIES = ["toplevel", "devtools.timeline", "blink.user_timing", "loading"]
TOP_TASKS = ("ThreadControllerImpl::RunTask", "RunTask")  # a top-level task of a thread (they do not nest)


def _main_thread_ms(trace, timeline):
    """Main-thread work of the page (the renderer's top-level tasks, from a Chrome trace) up to
    the first simulated canvas and up to the live page drawn: {"first": ms, "live": ms}.

    Load on a shared machine stretches wall-clock times; the work done on the main thread by a
    moment moves much less. The page's clock (performance.now(), the loader's timeline) is
    mapped onto the trace's by its navigationStart mark."""
    events = json.loads(trace)
    events = events.get("traceEvents", events) if isinstance(events, dict) else events
    mains = {(e["pid"], e["tid"]) for e in events
             if e.get("ph") == "M" and e.get("name") == "thread_name" and e.get("args", {}).get("name") == "CrRendererMain"}
    starts = [e for e in events if e.get("name") == "navigationStart" and (e.get("pid"), e.get("tid")) in mains
              and "lab.html" in json.dumps(e.get("args", {}))]
    if not starts:
        return None
    nav = starts[-1]
    pid, tid, t0 = nav["pid"], nav["tid"], nav["ts"]
    tasks = [(e["ts"], e.get("dur", 0)) for e in events
             if e.get("ph") == "X" and e.get("name") in TOP_TASKS and e.get("pid") == pid and e.get("tid") == tid]
    steps = _steps(timeline)
    out = {}
    for key, stage in (("first", "prerendered"), ("live", "drawn")):
        if stage in steps:
            end = t0 + steps[stage] * 1000
            out[key] = round(sum(max(0, min(ts + dur, end) - max(ts, t0)) for ts, dur in tasks) / 1000)
    return out


def _settled_bytes(log, quiet_s=2.0, limit_s=60.0):
    """What the server has sent, once it has sent nothing more for `quiet_s` (the service
    worker keeps what the page loaded after the canvas is up)."""
    from static_server import sent_bytes

    last, since, deadline = sent_bytes(log), time.monotonic(), time.monotonic() + limit_s
    while time.monotonic() < deadline:
        time.sleep(0.25)
        now = sent_bytes(log)
        if now != last:
            last, since = now, time.monotonic()
        elif time.monotonic() - since >= quiet_s:
            break
    return last


def _steps(timeline):
    """{step: ms} from the loader's timeline: when each stage started and when the canvas was drawn."""
    first = {}
    for e in timeline:
        key = e["stage"] if e["stage"] != "app" else f"app{e['done']}"
        first.setdefault(key, e["ms"])
    return first


# Run in the lab's worker (Pyodide) before the changes: times each phase of a control change
# in Python, without changing the lab, on the clock the page uses too (performance.timeOrigin
# + now(), epoch ms): the page's patch applied (Document.apply_json_patch), the widget's change (LabApp.on_change), the run's first half
# (LabState.simulate: the simulation and, as its watchers fire, the canvas's data), its second
# half (LabState.finish: metrics, blame, stars and the views that show them), the plots, and
# each patch: the serialization of the queued document events (one per Python turn,
# lab/ui/panel_shims.encode_patch; panel.io.pyodide's own in a tree from before). Each entry: (phase, start, end).
PHASES_PY = """
import js
import panel.io.pyodide as _p
import lab.ui.browser.panel_shims as _shims
from lab.ui.app import LabApp
from lab.ui.state import LabState
_stf_phases = []

def _stf_now():
    return js.performance.timeOrigin + js.performance.now()

def _stf_timed(fn, key):
    def timed(*a, **k):
        t = _stf_now()
        try:
            return fn(*a, **k)
        finally:
            _stf_phases.append((key, t, _stf_now()))
    return timed

from bokeh.document import Document as _Doc
from lab.ui.views.controls import Controls
for _owner, _name, _key in ((_Doc, "apply_json_patch", "apply"), (Controls, "_changed", "change"), (LabState, "simulate", "simulate"),
                            (LabState, "finish", "finish"), (LabApp, "_finish_part", "finish"),
                            (LabApp, "_update_plots", "plots"),
                            (_p, "_process_document_events", "serialize"), (_shims, "encode_patch", "serialize")):
    if hasattr(_owner, _name):
        setattr(_owner, _name, _stf_timed(getattr(_owner, _name), _key))
if not hasattr(LabState, "simulate"):  # a tree from before the run's two halves: the whole run
    LabState.run = _stf_timed(LabState.run, "simulate")
"""

# Run in the lab's worker after the changes: the core's parts of one run of the page's current
# scenario, each timed 5 times (median ms), so the lead sees what in lab.core costs most in
# Pyodide for a mission-sized run; then the canvas's data (canvas.timeline_data, the whole
# run's) and, in a tree that builds it in parts, what a change's canvas patch builds (its
# window: run_layers + step_layers around the window) and what follows the paint (overview_data).
CORE_PY = """
import json, statistics, time
import lab.core as _core
import lab.ui.timeline.canvas as _canvas
from lab.ui.data.canvas_data import timeline_data as _timeline_data
import gc as _gc
_frozen = _gc.get_freeze_count()  # (the page freezes its heap, lab/ui/timeline/collector.py: look there too)
_gc.unfreeze()
_lab = [o for o in _gc.get_objects() if type(o).__name__ == "LabState"][0]
if _frozen:
    _gc.freeze()
_sc, _req = _lab.run_input()
_t = {}
def _time(key, fn):
    runs = []
    for _ in range(5):
        t = time.perf_counter(); out = fn(); runs.append((time.perf_counter() - t) * 1000.0)
    _t[key] = round(statistics.median(runs), 1)
    return out
_res = _time("simulate", lambda: _core.simulate(_sc, _req))
_rows = _time("request_metrics", lambda: _core.request_metrics(_res))
_time("summarize", lambda: _core.summarize(_res, _rows))
_time("request_blame", lambda: _core.request_blame(_res, _rows))
_time("timeline_data", lambda: _timeline_data(_res, _sc.slo.per_token_target_ms, 200))
if hasattr(_canvas, "step_layers"):
    _lo = _lab.window_start - _canvas.BUFFER_S
    _hi = _lab.window_start + _canvas.WINDOW_S + _canvas.BUFFER_S
    _time("canvas_window", lambda: _canvas.step_layers(_res, _sc.slo.per_token_target_ms,
                                                       _canvas.run_layers(_res, 200)["meta"], (_lo, _hi)))
    _overview = getattr(_canvas.overview_data, "uncached", _canvas.overview_data)  # (built afresh each time)
    _time("overview_data", lambda: _overview(_res, _sc.slo.per_token_target_ms))
_t["steps"] = sum(len(g) for g in _res.gpus)
_t["requests"] = len(_rows)
json.dumps(_t)
"""


def traced_changes(browser, page, changes, mission_id, path):
    """`changes` more control changes under a Chrome trace: per change, the main thread's and the
    worker's busy time (their top-level tasks, ms) from the keydown to the canvas painted. A
    count of work, which a loaded machine disturbs far less than the wall-clock figures."""
    browser.start_tracing(page=page, path=str(path), categories=["toplevel", "devtools.timeline"])
    try:
        _name, times, _sims, _arrivals, _keys = measure(page, changes, mission_id)
    finally:
        browser.stop_tracing()
    return busy_in_changes(json.loads(Path(path).read_text(encoding="utf-8")), times)


def busy_in_changes(trace, times):
    """{"main": [ms per change], "worker": [...]} from a Chrome trace: the top-level tasks of the
    page's main thread and of its web worker, clipped to each change's window (its keydown,
    found in the trace, to `times[i]` ms later)."""
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    names = {(e["pid"], e["tid"]): e["args"]["name"] for e in events
             if e.get("ph") == "M" and e.get("name") == "thread_name"}
    threads = {"main": {k for k, v in names.items() if v == "CrRendererMain"},
               "worker": {k for k, v in names.items() if v.startswith("DedicatedWorker")}}
    keys = sorted(e["ts"] for e in events if e.get("name") == "EventDispatch"
                  and (e.get("args", {}).get("data") or {}).get("type") == "keydown"
                  and (e["pid"], e["tid"]) in threads["main"])
    windows = [(k, k + t * 1000.0) for k, t in zip(keys, times)]
    out = {}
    for which, ids in threads.items():
        tasks = [(e["ts"], e["ts"] + e["dur"]) for e in events if e.get("ph") == "X" and "dur" in e
                 and e.get("name") == "ThreadControllerImpl::RunTask" and (e["pid"], e["tid"]) in ids]
        out[which] = [sum(max(0.0, min(b, hi) - max(a, lo)) for a, b in tasks) / 1000.0 for lo, hi in windows]
    out["windows_ms"] = [(hi - lo) / 1000.0 for lo, hi in windows]
    return out


def core_split(page):
    """CORE_PY in the page's worker: {part: median ms} of one run in Pyodide."""
    worker = next((w for w in page.workers if "lab.js" in w.url), None)
    if worker is None:
        return None
    return json.loads(worker.evaluate("(code) => self.pyodide.runPython(code)", CORE_PY))


def _worker_phases(page, install):
    """Install PHASES_PY in the page's Pyodide worker, or read what it recorded ([(phase, start, end)])."""
    workers = [w for w in page.workers if "lab.js" in w.url]
    if not workers:
        return None
    if install:
        workers[0].evaluate("(code) => self.pyodide.runPython(code)", PHASES_PY)
        return None
    return json.loads(workers[0].evaluate(
        "() => self.pyodide.runPython('import json; json.dumps(_stf_phases)')"))


def split_changes(phases, keys):
    """Per change (keydown at epoch ms `keys[i]`): {phase: ms} from the worker's timeline:
    wait (keydown -> the widget's change in Python), change (Controls._changed), gap (-> the simulation),
    simulate (with the canvas's data), canvas_patch (serializing the patch after it), finish
    (metrics, stars, views), plots; summed over a change's turns."""
    out = []
    bounds = list(keys) + [float("inf")]
    for i, key in enumerate(keys):
        mine = [(k, a, b) for k, a, b in phases if bounds[i] <= a < bounds[i + 1]]
        row = {}
        first = {k: a for k, a, _ in reversed(mine)}
        ends = {k: b for k, _, b in mine}
        for k, a, b in mine:
            row[k] = row.get(k, 0.0) + (b - a)
        if "change" in first:
            row["wait"] = first["change"] - key
            applied = [a for k, a, _ in mine if k == "apply" and a <= first["change"]]
            if applied:  # the page's patch reached Python (Document.apply_json_patch), then it ran to on_change
                row["to_worker"] = applied[-1] - key
        if "simulate" in first and "change" in ends:
            row["gap"] = first["simulate"] - ends["change"]
        after = [b - a for k, a, b in mine if k == "serialize" and "simulate" in ends and a >= ends["simulate"]]
        if after:
            row["canvas_patch"] = after[0]
        out.append(row)
    return out


# The module files the running lab has imported, as archive member names (`asyncio/events.py`,
# `panel/io/pyodide.py`): the standard library's and site-packages' (the lab's own excepted).
IMPORTS_PY = """
import json, sys
_names = set()
for _m in list(sys.modules.values()):
    _f = getattr(_m, "__file__", None) or ""
    for _root in (".zip/", "/site-packages/"):
        if _root in _f and _f.endswith((".py", ".pyc")):
            _name = _f.split(_root, 1)[1]
            _name = _name[:-1] if _name.endswith(".pyc") else _name
            if not _name.startswith(("lab/", "__pycache__")):
                _names.add(_name)
json.dumps(sorted(_names))
"""


def record_imports(page, path):
    """Write site_build/start_imports.txt's list (see site_build/precompile.py) from the running lab."""
    worker = next(w for w in page.workers if "lab.js" in w.url)
    names = json.loads(worker.evaluate("(code) => self.pyodide.runPython(code)", IMPORTS_PY))
    header = ("# Modules the static lab imports by the end of benchmarks/bench_browser.py --site (load, 20 changes),\n"
              "# as archive member names: site_build/precompile.py compiles these to .pyc, the rest stay source.\n"
              "# Regenerate: python benchmarks/bench_browser.py --site DIST --record-imports site_build/start_imports.txt\n")
    Path(path).write_text(header + "".join(n + "\n" for n in names), encoding="utf-8")
    return len(names)


def _sent_by_file(log, top=8):
    """The largest responses of a load: [(bytes, path)]."""
    from static_server import responses

    by = {}
    for _, size, path in responses(log):
        by[path] = by.get(path, 0) + size
    return sorted(((b, p) for p, b in by.items()), reverse=True)[:top]


def bench_site(dist, mission_id, changes, port, loads=1, imports_to=None, trace=False, fresh=False, first_change=False):
    """Cold load, warm load (service worker), bytes, and control -> canvas, in Pyodide.

    `loads` pairs of cold + warm loads, each pair in a fresh browser (the figures are noisy on
    a shared machine); the control changes are measured on the last warm page. `trace`: each
    load also records a Chrome trace and reports the page's main-thread work (_main_thread_ms).
    `first_change`: each load changes a control on the pre-rendered view as soon as it works
    (_load_lab)."""
    sys.path.insert(0, str(REPO / "tests"))
    from site_run import serve

    tmp = Path(tempfile.mkdtemp(prefix="bench-site-"))
    from playwright.sync_api import sync_playwright

    pairs = []
    with sync_playwright() as p:
        for i in range(loads):
            log = tmp / f"sent-{i}.log"
            with serve(dist, port, log=log) as base:
                browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
                ctx = browser.new_context(viewport={"width": 1366, "height": 800})
                url = f"{base}lab.html?mission={mission_id}"
                work = {}

                def load(which):
                    if trace:
                        browser.start_tracing(categories=TRACE_CATEGORIES)
                    got = _load_lab(ctx, url, first_change)
                    if trace:
                        work[which] = _main_thread_ms(browser.stop_tracing(), got[3])
                    return got

                page, cold_s, cold_live_s, cold_tl = load("cold")
                cold_bytes = _settled_bytes(log)
                largest = _sent_by_file(log)
                page.close()
                page, warm_s, warm_live_s, warm_tl = load("warm")
                warm_bytes = _settled_bytes(log) - cold_bytes
                page.close()
                page, later_s, later_live_s, later_tl = load("later")
                pairs.append({"cold_s": round(cold_s, 2), "warm_s": round(warm_s, 2), "later_s": round(later_s, 2),
                              "cold_live_s": round(cold_live_s, 2), "warm_live_s": round(warm_live_s, 2),
                              "later_live_s": round(later_live_s, 2),
                              **_early_figures("cold", _steps(cold_tl)), **_early_figures("warm", _steps(warm_tl)),
                              **_early_figures("later", _steps(later_tl)),
                              "prerendered": "prerendered" in _steps(cold_tl), "cold_bytes": cold_bytes,
                              "warm_bytes": warm_bytes, "cold_steps_ms": _steps(cold_tl),
                              "warm_steps_ms": _steps(warm_tl), "later_steps_ms": _steps(later_tl),
                              "cold_largest": largest, "main_thread_ms": work})
                if i == loads - 1:
                    _worker_phases(page, install=True)
                    measured = (measure_fresh if fresh else measure)(page, changes, mission_id)
                    phases = _worker_phases(page, install=False)
                    busy = traced_changes(browser, page, TRACED_CHANGES, mission_id, tmp / "changes-trace.json") \
                        if TRACED_CHANGES else None
                    core = core_split(page)
                    if imports_to:
                        print(f"recorded {record_imports(page, imports_to)} imported modules in {imports_to}")
                browser.close()
    load = dict(pairs[-1])
    load["pairs"] = pairs
    load["python_phases_ms"] = phases
    load["busy_ms"] = busy
    load["core_ms"] = core
    return load, measured


def bench_serve(args, mission_id):
    """Control -> canvas under `lab serve` (CPython), and the screenshots if asked."""
    from playwright.sync_api import sync_playwright

    proc, base = (None, args.url) if args.url else start_server(args.missions)
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
            ctx = browser.new_context(viewport={"width": 1366, "height": 800})
            page = ctx.new_page()
            page.goto(f"{base}/lab?mission={mission_id}")
            wait_run(page, 0)
            measured = (measure_fresh if args.fresh else measure)(page, args.changes, mission_id)
            ctx.close()
            shots = screenshots(browser, base, mission_id, Path(args.screenshots)) if args.screenshots else []
            browser.close()
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(timeout=15)
    return measured, shots


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--site", metavar="DIST", default=None,
                        help="measure the static site built in DIST (Pyodide) instead of `lab serve`: "
                             "also cold and warm load and bytes sent")
    parser.add_argument("--port", type=int, default=5191, help="port for serving --site")
    parser.add_argument("--changes", type=int, default=20)
    parser.add_argument("--fresh", action="store_true",
                        help="every change reaches a setting not run before (no kept run reused): "
                             "a slider to its end, the layout, then a snake over two sliders (measure_fresh)")
    parser.add_argument("--think-ms", type=int, default=0,
                        help="wait this long after each run's status line before the next key (a student's "
                             "pause; 0: back to back, each change behind the last one's plots)")
    parser.add_argument("--trace", action="store_true",
                        help="with --site: also count the page's main-thread work (a Chrome trace of each load)")
    parser.add_argument("--first-change", action="store_true",
                        help="--site: each load moves a slider of the pre-rendered view as soon as its controls work, "
                             "and reports when the answer showed (the live page then opens at that setting)")
    parser.add_argument("--loads", type=int, default=1,
                        help="--site: rounds of a cold, a warm and a later load, each round in a fresh browser "
                             "(the last page is measured)")
    parser.add_argument("--record-imports", metavar="FILE", default=None,
                        help="--site: write the modules the lab imported (site_build/start_imports.txt's list)")
    parser.add_argument("--mission", default=None, help="mission id (default: the first mission)")
    parser.add_argument("--missions", default=None, help="missions folder for the server")
    parser.add_argument("--url", default=None, help="use a running server instead of starting one")
    parser.add_argument("--screenshots", metavar="DIR", default=None)
    parser.add_argument("--json", metavar="OUT", default=None)
    args = parser.parse_args(argv)
    if not os.path.exists(CHROMIUM):
        raise SystemExit(f"{CHROMIUM} not found (apt-get install chromium)")
    _Changes.think_ms = max(0, args.think_ms)

    from lab.ui.catalog import Catalog

    catalog = Catalog(args.missions)
    mission_id = args.mission or catalog.first().id
    load, shots = None, []
    if args.site:
        load, (name, times, sims, arrivals, keys) = bench_site(args.site, mission_id, args.changes, args.port, args.loads,
                                                         args.record_imports, trace=args.trace, fresh=args.fresh,
                                                         first_change=args.first_change)
    else:
        (name, times, sims, arrivals, keys), shots = bench_serve(args, mission_id)
    times_sorted = sorted(times)
    report = {
        "mission": mission_id,
        "control": name,
        "changes": len(times),
        "fresh": args.fresh,
        "think_ms": _Changes.think_ms,
        "median_ms": statistics.median(times),
        "p90_ms": times_sorted[int(0.9 * (len(times) - 1))],
        "min_ms": times_sorted[0],
        "max_ms": times_sorted[-1],
        "simulate_median_ms": statistics.median(sims),
        # keydown -> the run's data applied to the page's models (server + transfer + patch),
        # then -> two frames later (the browser's paint of that frame and the next).
        "to_data_median_ms": statistics.median(a for a, _ in arrivals) if arrivals else None,
        "to_paint_median_ms": statistics.median(p for _, p in arrivals) if arrivals else None,
        "all_ms": [round(t, 1) for t in times],
        "screenshots": shots,
        "runtime": "pyodide (static site)" if args.site else "lab serve (CPython)",
        "load": load,
    }
    if load:
        for pair in load["pairs"]:
            shown = "pre-rendered" if pair["prerendered"] else "live, no pre-render"
            print(f"static site {args.site}: cold load {pair['cold_s']:.2f} s to the first simulated canvas ({shown}), "
                  f"{pair['cold_live_s']:.2f} s to the live page, {pair['cold_bytes'] / 1e6:.2f} MB sent; "
                  f"warm (service worker) {pair['warm_s']:.2f} s, {pair['warm_live_s']:.2f} s to the live page, "
                  f"{pair['warm_bytes'] / 1e6:.2f} MB sent; a later visit {pair['later_live_s']:.2f} s to the live page")
            for which in ("cold", "warm", "later"):
                steps = pair[f"{which}_steps_ms"]
                print(f"  {which}: " + "  ".join(f"{k} {v / 1000:.2f}s" for k, v in steps.items()))
                work = (pair.get("main_thread_ms") or {}).get(which)
                if work:
                    print(f"  {which}, main-thread work (Chrome trace): " + ", ".join(
                        f"{v / 1000:.2f} s by the {k} {'simulated canvas' if k == 'first' else 'page'}" for k, v in work.items()))
        if len(load["pairs"]) > 1:
            figures = (("_s", "first simulated canvas"), ("_controls_s", "the first view's controls work"),
                    ("_answered_s", "interactive: a change answered on the first view (--first-change)"),
                    ("_answer_wait_s", "that change's wait, change to its view painted"),
                    ("_live_s", "the live page drawn with its first run"))
            for key, what in figures:
                if any("cold" + key not in q or "warm" + key not in q for q in load["pairs"]):
                    continue
                colds = [q["cold" + key] for q in load["pairs"]]
                warms = [q["warm" + key] for q in load["pairs"]]
                laters = [q["later" + key] for q in load["pairs"] if "later" + key in q]
                print(f"  over {len(colds)} loads, {what}: cold median {statistics.median(colds):.2f} s "
                      f"(min {min(colds):.2f}), warm median {statistics.median(warms):.2f} s (min {min(warms):.2f})"
                      + (f", later median {statistics.median(laters):.2f} s (min {min(laters):.2f})" if laters else ""))
        print("  largest files sent, cold: " + ", ".join(f"{p.rsplit('/', 1)[-1]} {b / 1e6:.2f} MB"
                                                        for b, p in load["cold_largest"]))
    print(f"control change -> redrawn canvas ({report['runtime']}), mission {mission_id}, {len(times)} changes "
          + (f"each to a setting not run before, from '{name}' on (--fresh)" if args.fresh else f"of '{name}'")
          + (f", {_Changes.think_ms} ms between a run's status and the next key" if _Changes.think_ms else ", back to back")
          + " (keyboard):")
    print(f"  median {report['median_ms']:.0f} ms   p90 {report['p90_ms']:.0f} ms   "
          f"min {report['min_ms']:.0f} ms   max {report['max_ms']:.0f} ms")
    print(f"  of which simulate + metrics in Python: median {report['simulate_median_ms']:.0f} ms "
          f"(a lone change waits {FIRST_MS} ms, one in a burst {DEBOUNCE_MS} ms)")
    if arrivals:
        print(f"  keydown -> data in the page: median {report['to_data_median_ms']:.0f} ms; "
              f"-> painted: median {report['to_paint_median_ms']:.0f} ms more")
    phases = (load or {}).get("python_phases_ms")
    if phases:
        split = split_changes(phases, keys)
        report["worker_split_ms"] = split

        def med(key):
            got = [row[key] for row in split if key in row]
            return f"{statistics.median(got):.0f}" if got else "-"

        ser = [b - a for k, a, b in phases if k == "serialize"]
        print("  in the worker, per change (medians, ms): keydown -> on_change " + med("wait") +
              " (of which keydown -> the page's patch applied in Python " + med("to_worker") + ")" +
              ", on_change " + med("change") + ", -> simulate " + med("gap") +
              ", simulate + canvas data " + med("simulate") + ", its patch serialized " + med("canvas_patch") +
              "; then finish (metrics, blame, stars, views) " + med("finish") + ", plots " + med("plots"))
        print(f"  patches: {len(ser)} for {len(times)} changes, serializing one median {statistics.median(ser):.0f} ms "
              f"(max {max(ser):.0f})")
    busy = (load or {}).get("busy_ms")
    if busy and busy["main"]:
        report["busy_ms"] = busy
        print(f"  traced ({len(busy['main'])} more changes, Chrome trace), keydown -> painted: "
              f"median {statistics.median(busy['windows_ms']):.0f} ms, of which the main thread busy "
              f"{statistics.median(busy['main']):.0f} ms and the worker busy {statistics.median(busy['worker']):.0f} ms (medians)")
    core = (load or {}).get("core_ms")
    if core:
        print(f"  one run of the last setting in Pyodide ({core.pop('steps'):,} steps, {core.pop('requests'):,} requests), "
              "median of 5, ms: " + ", ".join(f"{k} {v:.0f}" for k, v in core.items()))
    for path in shots:
        print(f"  screenshot: {path}")
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
