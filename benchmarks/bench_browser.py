"""Browser benchmark (not a test): control change -> redrawn canvas, in Debian's Chromium.

    python benchmarks/bench_browser.py [--changes 20] [--mission ID] [--url http://...]
                                       [--screenshots DIR] [--json OUT.json]

Starts `python -m lab.ui.serve` on a free port (unless --url points at a running one),
opens the mission's lab at 1366x800 and moves its GPU-count slider from the keyboard,
back and forth, N times. For each change it measures, on the page's own clock, the
time from the keydown to two animation frames after the new run's data reached the
canvas (the canvas marks that moment itself). That includes Panel's and the app's
waits, the simulation on the server, building the canvas and plot data, the
websocket transfer, applying the patch and the browser's paint. Prints the median and
spread, the simulation's own share (the server's wall-clock time for simulate +
metrics), and the split at the moment the data reached the page.

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


def pick_slider(page, mission_id):
    """The first enabled integer slider of the mission (gpus, prefill_gpus, ...)."""
    from lab.core.missions import list_missions

    mission = next((m for m in list_missions() if m.id == mission_id), None)
    names = [n for n, c in mission.controls.items() if c.kind == "int"] if mission else ["gpus"]
    for name in names:
        handle = page.locator(f".stf-control-{name} .noUi-handle")
        if handle.count() and not page.locator(f".stf-control-{name} [disabled]").count():
            return name, handle
    raise SystemExit(f"no enabled integer slider in {mission_id}")


def measure(page, changes, mission_id):
    name, handle = pick_slider(page, mission_id)
    page.evaluate("""() => {
        window.__stfKey = 0;
        document.addEventListener('keydown', () => { window.__stfKey = performance.now(); }, true);
    }""")
    start = float(handle.get_attribute("aria-valuenow"))
    hi = float(handle.get_attribute("aria-valuemax"))
    up = start < hi
    times, sims, arrivals = [], [], []
    last = page.evaluate("(window.__stfPainted || {run: 0}).run")
    handle.focus()
    for i in range(changes):
        key = ("ArrowRight" if up else "ArrowLeft") if i % 2 == 0 else ("ArrowLeft" if up else "ArrowRight")
        page.keyboard.press(key)
        done = wait_run(page, last)
        last = done["run"]
        pressed, arrived = page.evaluate("[window.__stfKey, window.__stfArrived]")
        times.append(done["at"] - pressed)
        if arrived and arrived["run"] == last:
            arrivals.append((arrived["at"] - pressed, done["at"] - arrived["at"]))
        status = page.locator(f'.stf-status[data-run="{last}"]')
        status.wait_for(state="attached")
        sims.append(float(status.get_attribute("data-run-ms")))
    return name, times, sims, arrivals


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


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--changes", type=int, default=20)
    parser.add_argument("--mission", default=None, help="mission id (default: the first mission)")
    parser.add_argument("--missions", default=None, help="missions folder for the server")
    parser.add_argument("--url", default=None, help="use a running server instead of starting one")
    parser.add_argument("--screenshots", metavar="DIR", default=None)
    parser.add_argument("--json", metavar="OUT", default=None)
    args = parser.parse_args(argv)
    if not os.path.exists(CHROMIUM):
        raise SystemExit(f"{CHROMIUM} not found (apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    from lab.ui.catalog import Catalog

    catalog = Catalog(args.missions)
    mission_id = args.mission or catalog.first().id
    proc = None
    base = args.url
    if base is None:
        proc, base = start_server(args.missions)
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
            ctx = browser.new_context(viewport={"width": 1366, "height": 800})
            page = ctx.new_page()
            page.goto(f"{base}/lab?mission={mission_id}")
            wait_run(page, 0)
            name, times, sims, arrivals = measure(page, args.changes, mission_id)
            ctx.close()
            shots = screenshots(browser, base, mission_id, Path(args.screenshots)) if args.screenshots else []
            browser.close()
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(timeout=15)
    times_sorted = sorted(times)
    report = {
        "mission": mission_id,
        "control": name,
        "changes": len(times),
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
    }
    print(f"control change -> redrawn canvas, mission {mission_id}, {len(times)} changes of '{name}' (keyboard):")
    print(f"  median {report['median_ms']:.0f} ms   p90 {report['p90_ms']:.0f} ms   "
          f"min {report['min_ms']:.0f} ms   max {report['max_ms']:.0f} ms")
    print(f"  of which simulate + metrics on the server: median {report['simulate_median_ms']:.0f} ms "
          f"(a lone change waits {FIRST_MS} ms, one in a burst {DEBOUNCE_MS} ms)")
    if arrivals:
        print(f"  keydown -> data in the page: median {report['to_data_median_ms']:.0f} ms; "
              f"-> painted: median {report['to_paint_median_ms']:.0f} ms more")
    for path in shots:
        print(f"  screenshot: {path}")
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
