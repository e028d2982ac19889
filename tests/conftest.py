"""Shared test helpers. Kept small on purpose: two fixtures, `run_in_pyodide` and
`playwright_driver` (whose waits poll every WAIT_POLL_MS)."""

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
HARNESS = REPO / "tests" / "pyodide" / "run_core.mjs"
PYODIDE_PKG = REPO / "node_modules" / "pyodide" / "pyodide.mjs"


def _pyodide_missing():
    """Why bare Pyodide can't run here, or None when it can."""
    if shutil.which("node") is None:
        return "node not found (scripts/setup.sh needs node and npm)"
    if not PYODIDE_PKG.exists():
        return "node_modules/pyodide missing: run `npm ci` or scripts/setup.sh"
    return None


def _run_in_pyodide(code, timeout=900, wheels=(), args=()):
    """Run `code` in bare Pyodide (repo core copied to /repo, cwd /repo); return its stdout.
    `wheels`: local Pyodide packages to load first (nothing else may load); `args`: its argv."""
    with tempfile.TemporaryDirectory(prefix="pyodide-") as tmp:
        program = Path(tmp) / "program.py"
        program.write_text(code, encoding="utf-8")
        proc = subprocess.run(
            ["node", str(HARNESS), *[part for wheel in wheels for part in ("--wheel", str(wheel))], str(program), *args],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    if proc.returncode != 0:
        raise AssertionError(
            f"program failed in Pyodide (exit {proc.returncode})\n"
            f"--- stderr ---\n{proc.stderr}\n--- stdout ---\n{proc.stdout[-4000:]}"
        )
    return proc.stdout


@pytest.fixture(scope="session")
def run_in_pyodide():
    """`run_in_pyodide(code) -> stdout`. Skips when node/npm pyodide are missing;
    under CI (CI=true), where scripts/setup.sh installs them, that is a failure instead."""
    reason = _pyodide_missing()
    if reason:
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(f"bare Pyodide unavailable in CI: {reason}")
        pytest.skip(reason)
    return _run_in_pyodide


# How often a `wait_for_function` without its own `polling` re-checks, in ms. Playwright's
# default re-checks on every animation frame, which keeps an idle page drawing frames: 0.2-0.3 s
# of Chromium's CPU per 4 s waited against 0.03-0.05 s at 25 ms, and the browser phase is CPU-bound
# (benchmarks/README.md, "The suite's time"). What the tests wait for lasts (idle, painted, shown).
WAIT_POLL_MS = 25


def _poll_every(method, ms):
    def wait_for_function(self, expression, *, arg=None, timeout=None, polling=None):
        return method(self, expression, arg=arg, timeout=timeout, polling=ms if polling is None else polling)

    wait_for_function.__doc__ = method.__doc__
    return wait_for_function


@pytest.fixture(scope="session")
def playwright_driver():
    """The session's one Playwright driver. Its sync API refuses to start a second driver in
    a thread while one is open, so the UI tests' browser (session-wide) and the site tests'
    browsers (one a module) all launch from this one: any subset runs in any order.
    Its pages and frames wait for a function every WAIT_POLL_MS, not every frame."""
    sync_api = pytest.importorskip("playwright.sync_api")
    waits = {cls: cls.wait_for_function for cls in (sync_api.Page, sync_api.Frame)}
    for cls, method in waits.items():
        cls.wait_for_function = _poll_every(method, WAIT_POLL_MS)
    try:
        with sync_api.sync_playwright() as p:
            yield p
    finally:
        for cls, method in waits.items():
            cls.wait_for_function = method


def pytest_report_header(config):
    """The seed of this session's model-based walks (tests/ui/state_model.py): STF_MODEL_SEED=N replays them."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parent / "ui"))
    try:
        from state_model import SEED, WALK_ACTIONS, MODEL_MISSIONS
    except ImportError as exc:  # no playwright: the walks skip
        return f"state model walks: not run ({exc})"
    return (f"state model walks: seed {SEED} (STF_MODEL_SEED={SEED} replays them), {WALK_ACTIONS} actions "
            f"on each of {len(MODEL_MISSIONS)} missions, under lab serve and on the static site")


def pytest_collection_modifyitems(config, items):
    """A test that drives Chromium (it uses the Playwright driver, directly or through a
    fixture) is a browser test, marked or not: scripts/test.sh runs those one at a time, and
    the driver's event loop, open to the session's end, must not meet a test that starts its
    own (asyncio.run, as a Dask client does)."""
    for item in items:
        if "playwright_driver" in getattr(item, "fixturenames", ()) and not item.get_closest_marker("browser"):
            item.add_marker(pytest.mark.browser)
