"""The static site's lab (Pyodide, offline) keeps one source of truth: the model-based walk
of tests/ui/state_model.py on the built page, WALK_ACTIONS actions on each of SITE_MISSIONS.
The seed is printed and named in any failure; STF_MODEL_SEED=N replays a walk.

SITE_MISSIONS is three of the six missions `lab serve`'s walk takes (tests/ui/
test_state_model_browser.py): sliders, the layout toggle and TP pools, KV on demand. The
page's state is the same Python in both; what only the static site has is its plumbing (the
Pyodide worker, the address, reloads), which no mission changes, and each of its walks took
about 70 s, most of it restarting Pyodide on reloads. STF_SITE_WALKS=all walks all six.
"""

import os
import sys
from pathlib import Path

import pytest

pytest.importorskip("playwright.sync_api")

sys.path.insert(0, str(Path(__file__).resolve().parent / "ui"))

from lab.core.missions import list_missions  # noqa: E402
from state_model import MODEL_MISSIONS, SEED, WALK_ACTIONS, Failure, shrink, walk  # noqa: E402
from test_site_offline import browser, mirror, site  # noqa: E402,F401  (fixtures)

pytestmark = pytest.mark.browser

BY_ID = {m.id: m for m in list_missions()}
SITE_MISSIONS = MODEL_MISSIONS if os.environ.get("STF_SITE_WALKS") == "all" else ("mixing-hurts", "tp-per-phase", "memory-on-demand")
assert set(SITE_MISSIONS) <= set(MODEL_MISSIONS)


@pytest.mark.parametrize("mission_id", SITE_MISSIONS)
def test_a_random_walk_on_the_static_lab_keeps_controls_address_and_run_equal(browser, site, mission_id):  # noqa: F811
    mission = BY_ID[mission_id]
    contexts = []

    def new_page():
        ctx = browser.new_context(viewport={"width": 1366, "height": 800})
        ctx.set_default_timeout(60_000)
        contexts.append(ctx)
        return ctx.new_page()

    def url_of(query):
        return site.url(f"lab.html?{query}")

    print(f"state model (static site): seed {SEED}, mission {mission_id}, {WALK_ACTIONS} actions")
    try:
        walk(new_page(), url_of, mission, SEED, WALK_ACTIONS)
    except Failure as failure:
        short = shrink(new_page, url_of, mission, failure)
        pytest.fail(f"seed {SEED}: {short}\n(first seen after {failure.step + 1} actions)", pytrace=False)
    finally:
        for ctx in contexts:
            ctx.close()
