"""One full run of the built lab page in Chromium: from navigation to the first simulated canvas.

`run_lab(browser, url)` opens the lab page, waits until the loading screen is done and the
lab has drawn its first simulation (the status line carries a run id and the GPU timeline
canvas is on the page), and returns what it saw: the time taken, every response and its
size, console errors, page errors and failed requests. It asserts nothing itself, so a test
(or a person, through the command line) decides what must hold.

    .venv/bin/python tests/site_run.py DIST [--port 5190] [--mission mixing-hurts] [--screenshot FILE]

serves DIST with tests/static_server.py and prints the run as JSON. tests/test_site_offline.py
uses `run_lab`; benchmarks/bench_browser.py --site measures cold, warm and later loads with it.
"""

import argparse
import contextlib
import dataclasses
import json
import re
import time

from static_server import Server

__all__ = ["LabRun", "run_lab", "serve", "main", "PLOTS_IN"]

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync"]
# The lab's status line once a simulation has been drawn (app.py's status pane).
RAN = '.stf-status[data-busy="false"][data-run]'
CANVAS = ".stf-canvas canvas"
# The plots' figures are in the page (they come after the page's first run is judged).
PLOTS_IN = """() => (window.Bokeh ? Bokeh.documents : []).some(
    (d) => ["gap_plot", "itl_plot", "sweep_plot"].every((name) => d.get_model_by_name(name) !== null))"""


@dataclasses.dataclass
class LabRun:
    url: str
    state: str                      # "canvas", "error" (the loading screen's) or "timeout"
    seconds_to_canvas: float | None
    error: str = ""                 # the loading screen's message and detail, when state is "error"
    responses: list = dataclasses.field(default_factory=list)   # [{url, status, bytes}]
    console_errors: list = dataclasses.field(default_factory=list)
    page_errors: list = dataclasses.field(default_factory=list)
    failed_requests: list = dataclasses.field(default_factory=list)
    then: object = None             # what run_lab's `then(page)` returned

    @property
    def bytes(self):
        """Bytes that came over the network: every response body, the page's, its worker's and
        the service worker's (it re-fetches what the lab loaded, to keep it for a second
        visit), except the page's responses the service worker answered itself."""
        return sum(r["bytes"] for r in self.responses if not r.get("from_service_worker"))

    @property
    def unique_bytes(self):
        """Bytes of the distinct files fetched: what the lab needs, each file once."""
        sizes = {}
        for r in self.responses:
            sizes[r["url"]] = max(sizes.get(r["url"], 0), r["bytes"])
        return sum(sizes.values())

    def summary(self):
        sw = [r for r in self.responses if r.get("service_worker")]
        return dict(dataclasses.asdict(self), bytes=self.bytes, unique_bytes=self.unique_bytes,
                    files=len({r["url"] for r in self.responses}), responses=len(self.responses),
                    service_worker_fetches=len(sw), service_worker_bytes=sum(r["bytes"] for r in sw))


def _body_size(request):
    try:
        return request.sizes()["responseBodySize"]
    except Exception:  # a request the browser could not size (cancelled, from the cache)
        response = request.response()
        return int(response.headers.get("content-length", 0)) if response else 0


def run_lab(browser, url, *, timeout_s=600, screenshot=None, viewport=(1280, 900), then=None):
    """Open `url` (a lab.html address) in a new context of `browser` (Playwright, sync API).

    `then(page)`, if given, runs once the canvas is drawn (to drive the lab further); what it
    returns is kept as `LabRun.then`, and an exception in it is kept as the run's error."""
    context = browser.new_context(viewport={"width": viewport[0], "height": viewport[1]})
    run = LabRun(url=url, state="timeout", seconds_to_canvas=None)
    def finished(req):
        try:
            response = req.response()
            run.responses.append({"url": req.url, "status": response.status if response else None,
                                  "bytes": _body_size(req), "service_worker": req.service_worker is not None,
                                  "from_service_worker": bool(response and response.from_service_worker)})
        except Exception:  # the context closed under it
            pass

    context.on("requestfinished", finished)
    context.on("requestfailed", lambda req: run.failed_requests.append(f"{req.url}: {req.failure}"))
    page = context.new_page()
    page.on("console", lambda msg: run.console_errors.append(msg.text) if msg.type == "error" else None)
    page.on("pageerror", lambda exc: run.page_errors.append(str(exc)))
    try:
        start = time.monotonic()
        page.goto(url)
        deadline = start + timeout_s
        page.wait_for_selector('#stf-loader[data-state="done"], #stf-loader[data-state="error"]',
                               state="attached", timeout=timeout_s * 1000)
        if page.get_attribute("#stf-loader", "data-state") == "error":
            run.state = "error"
            run.error = f"{page.inner_text('#stf-error-message')}\n{page.text_content('#stf-error-detail')}"
        else:
            left = max(1.0, deadline - time.monotonic()) * 1000
            page.locator(RAN).first.wait_for(timeout=left)
            page.locator(CANVAS).first.wait_for(timeout=max(1.0, deadline - time.monotonic()) * 1000)
            run.seconds_to_canvas = round(time.monotonic() - start, 2)
            run.state = "canvas"
            if then is not None:
                run.then = then(page)
    except Exception as exc:  # Playwright's TimeoutError: keep what was seen
        run.error = run.error or f"{type(exc).__name__}: {str(exc).splitlines()[0]}"
    finally:
        if screenshot:
            page.screenshot(path=str(screenshot), full_page=True)
        context.close()
    return run


@contextlib.contextmanager
def serve(root, port, log=None):
    """tests/static_server.py on 127.0.0.1:PORT serving `root` (what it sends logged to `log`),
    until the block ends; yields the site's URL."""
    server = Server(root, port=port, log=log)
    try:
        yield server.url()
    finally:
        server.stop()


def main(argv=None):
    from playwright.sync_api import sync_playwright

    p = argparse.ArgumentParser(description="Serve a built site and time the lab page to its first canvas.")
    p.add_argument("dist")
    p.add_argument("--mission", default="mixing-hurts")
    p.add_argument("--port", type=int, default=5190)
    p.add_argument("--screenshot", default=None)
    p.add_argument("--timeout", type=float, default=600)
    args = p.parse_args(argv)
    with serve(args.dist, args.port) as base, sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            run = run_lab(browser, f"{base}lab.html?mission={args.mission}", timeout_s=args.timeout,
                          screenshot=args.screenshot)
        finally:
            browser.close()
    print(json.dumps(run.summary(), indent=1))
    return 0 if run.state == "canvas" and not run.console_errors and not run.page_errors else 1


# Panel's wheel on the static site (the last big download before the lab starts building the page).
PANEL_WHEEL = r".*/panel-[0-9.]+-py3-none-any\.whl.*"


class Held:
    """The requests of `context` to URLs matching `pattern`, held until `release()` (so the worker
    waiting for them stays where it is; one asked for after the release goes through)."""

    def __init__(self, context, pattern):
        self.routes, self.released = [], False
        context.route(re.compile(pattern), self._hold)

    def _hold(self, route):
        return route.continue_() if self.released else self.routes.append(route)

    def release(self):
        self.released = True
        for route in self.routes:
            route.continue_()


if __name__ == "__main__":
    raise SystemExit(main())
