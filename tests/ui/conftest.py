"""Fixtures for the UI tests: the test missions' catalog, a `lab serve` subprocess and Debian's Chromium.

`catalog`: tests/ui/missions (ui-mixing-hurts, ui-decode-drowns, ...), checked to load.
`fleet_catalog`: tests/ui/fleet_missions (ui-fleet-built: Llama 3 70B on H100 prefill instances in TP 2
and A100 decode instances in TP 4), for the page of fleets as they are built; serve it with
`missions_server(FLEET_MISSIONS)`.
`app_timers`: lab.ui.app's timers held, to fire by hand (`fire(callback)`), for the app tests
that need no browser.

The server is started once per session on a free port (one of STF_TEST_PORTS, e.g.
"6200-6299", when set) and stopped at the end; the
browser is Debian's /usr/bin/chromium driven by Playwright (never a downloaded one).
Each test gets a fresh browser context (so its own localStorage) and a page that
records console errors, page errors and any request that leaves this machine; a test
fails if any of those happened.
"""

import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import pytest
from static_server import free_port  # STF_TEST_PORTS picks from a range

REPO = Path(__file__).resolve().parents[2]
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
    "--disable-component-update", "--disable-sync",
]
SERVER_START_TIMEOUT_S = 90
UI_MISSIONS = Path(__file__).resolve().parent / "missions"
FLEET_MISSIONS = Path(__file__).resolve().parent / "fleet_missions"
LOCAL_PREFIXES = ("http://127.0.0.1", "http://localhost", "ws://127.0.0.1", "ws://localhost", "data:", "blob:", "about:")




def start_server(extra_args=(), port=None):
    """Start `python -m lab.ui.serve` and wait (bounded) until it answers. Returns (proc, base_url)."""
    port = port or free_port()
    env = dict(os.environ, PYTHONUNBUFFERED="1", BOKEH_RESOURCES="server")
    log = tempfile.NamedTemporaryFile("w", prefix=f"lab-serve-{port}-", suffix=".log", delete=False, encoding="utf-8")
    proc = subprocess.Popen(
        [sys.executable, "-m", "lab.ui.serve", "--port", str(port), "--no-show", *extra_args],
        cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT,
    )
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + SERVER_START_TIMEOUT_S
    while True:
        if proc.poll() is not None:
            log.close()
            text = Path(log.name).read_text(encoding="utf-8")
            raise RuntimeError(f"lab serve exited with {proc.returncode}:\n{text}")
        try:
            with urllib.request.urlopen(base + "/", timeout=5) as resp:
                if resp.status == 200:
                    break
        except OSError:
            pass
        if time.monotonic() > deadline:
            stop_server(proc)
            raise RuntimeError(f"lab serve did not answer within {SERVER_START_TIMEOUT_S} s")
        time.sleep(0.3)
    proc._log = log  # closed in stop_server
    return proc, base


def stop_server(proc):
    proc.terminate()
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=15)
    log = getattr(proc, "_log", None)
    if log is not None:
        log.close()
        try:
            os.unlink(log.name)
        except OSError:
            pass


@pytest.fixture(scope="session")
def server():
    if not os.path.exists(CHROMIUM):
        pytest.skip(f"{CHROMIUM} is not installed (apt-get install chromium)")
    proc, base = start_server()
    try:
        yield base
    finally:
        stop_server(proc)


@pytest.fixture(scope="session")
def browser(playwright_driver):
    if not os.path.exists(CHROMIUM):
        pytest.skip(f"{CHROMIUM} is not installed (apt-get install chromium)")
    b = playwright_driver.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
    try:
        yield b
    finally:
        b.close()


class PageWatch:
    """What went wrong on a page: console errors, uncaught errors, off-machine requests, dialogs."""

    def __init__(self, page):
        self.errors = []
        self.external = []
        self.dialogs = []
        page.on("console", lambda m: self.errors.append(f"console.{m.type}: {m.text}") if m.type == "error" else None)
        page.on("pageerror", lambda e: self.errors.append(f"pageerror: {e}"))
        page.on("request", lambda r: self.external.append(r.url) if not r.url.startswith(LOCAL_PREFIXES) else None)
        page.on("dialog", lambda d: (self.dialogs.append(d.message), d.dismiss()))

    def check(self):
        assert self.errors == [], f"console errors: {self.errors}"
        assert self.external == [], f"requests that left the machine: {self.external}"
        assert self.dialogs == [], f"dialogs opened (script injection?): {self.dialogs}"


@pytest.fixture(scope="module")
def catalog():
    from lab.ui.catalog import Catalog

    cat = Catalog(UI_MISSIONS)
    assert not cat.error, cat.error
    return cat


@pytest.fixture(scope="session")
def fleet_catalog():
    from lab.ui.catalog import Catalog

    cat = Catalog(FLEET_MISSIONS)
    assert not cat.error, cat.error
    return cat


class HeldTimers:
    """Stands in for lab.ui.app.later: every timer is kept, and runs only when fired."""

    class Timer:
        def __init__(self, callback, delay_ms=None):
            self.callback, self.delay_ms, self.stopped = callback, delay_ms, False

        def stop(self):
            self.stopped = True

    def __init__(self):
        self.timers = []

    def later(self, callback, delay_ms):
        timer = self.Timer(callback, delay_ms)
        self.timers.append(timer)
        return timer

    def fire(self, callback):
        """Run the pending timers of `callback` (each once)."""
        for t in [t for t in self.timers if not t.stopped and t.callback == callback]:
            t.stopped = True
            t.callback()


@pytest.fixture
def app_timers(monkeypatch):
    """lab.ui.app with its timers held and no page to load: build a LabApp without a browser."""
    import lab.ui.app as app

    held = HeldTimers()
    monkeypatch.setattr(app, "later", held.later)
    monkeypatch.setattr(app.pn.state, "onload", lambda callback: None)
    return held


@pytest.fixture
def context(browser):
    ctx = browser.new_context(viewport={"width": 1366, "height": 800})
    ctx.set_default_timeout(30_000)
    yield ctx
    ctx.close()


@pytest.fixture
def new_page(context):
    """A factory of watched pages in this test's context; all are checked at the end."""
    watches = []

    def make(ctx=None):
        pg = (ctx or context).new_page()
        watches.append(PageWatch(pg))
        return pg

    yield make
    for watch in watches:
        watch.check()


@pytest.fixture
def page(new_page):
    return new_page()


@pytest.fixture(scope="session")
def missions_server():
    """A factory: `lab serve --missions DIR` for a folder of test missions -> base URL (one server per folder)."""
    if not os.path.exists(CHROMIUM):
        pytest.skip(f"{CHROMIUM} is not installed (apt-get install chromium)")
    started = {}

    def start(directory):
        key = str(Path(directory).resolve())
        if key not in started:
            started[key] = start_server(["--missions", key])
        return started[key][1]

    yield start
    for proc, _ in started.values():
        stop_server(proc)
