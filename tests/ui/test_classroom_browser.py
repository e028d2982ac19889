"""A classroom on one `lab serve`: one student's heavy run never holds another's page.

Runs go to worker threads (lab/ui/runs/offload.py), so while one page runs the heaviest mission
the page allows (PAGE_MAX_REQUESTS), light changes on another page are answered before that
run ends, and each page ends on the run its controls show. Held without timing anything:
the test reads, on the heavy page, that its run is still under way when the light page has
settled each change."""

import json
import time
from pathlib import Path

import pytest

pytest.importorskip("playwright.sync_api")

from lab.core.missions import Mission  # noqa: E402
from lab.ui.runs.run_work import PAGE_MAX_REQUESTS  # noqa: E402
from state_model import SETTLE_S, Page  # noqa: E402

pytestmark = pytest.mark.browser

REPO = Path(__file__).resolve().parents[2]
LIGHT = "mixing-hurts"
HEAVY_S = 1_980.0  # x the rate below: 99% of the page's bound, with room for the Poisson draw
HEAVY_GPUS = 32


def _missions(folder):
    """Mission 01 (light) and a copy of it at about 198,000 requests on 32 GPUs (heavy)."""
    light = json.loads((REPO / "missions" / "01-mixing-hurts.json").read_text(encoding="utf-8"))
    heavy = json.loads(json.dumps(light))
    heavy.update(id="heavy-class", title="Heavy", order=99)
    rate = round(PAGE_MAX_REQUESTS * 0.99 / HEAVY_S, 3)
    heavy["scenario"]["workload"].update(rate=rate, duration_s=HEAVY_S)
    heavy["scenario"]["fleet"]["gpus"] = HEAVY_GPUS
    heavy["controls"]["gpus"].update(min=HEAVY_GPUS - 4, max=HEAVY_GPUS + 4)
    heavy["stars"] = heavy["stars"][:1]
    (folder / "01-mixing-hurts.json").write_text(json.dumps(light), encoding="utf-8")
    (folder / "99-heavy.json").write_text(json.dumps(heavy), encoding="utf-8")
    return Mission.from_dict(light), Mission.from_dict(heavy)


def _busy(page):
    return page.views()["busy"] == "true"


def _until_busy(page):
    """Poll (every 100 ms, SETTLE_S at most) until the page says its change is running."""
    deadline = time.monotonic() + SETTLE_S
    while not _busy(page):
        assert time.monotonic() < deadline, "the heavy page's change did not start a run"
        page.page.wait_for_timeout(100)


def test_light_changes_are_answered_while_another_page_runs_the_heaviest_mission(new_page, missions_server, tmp_path):
    light, heavy = _missions(tmp_path)
    base = missions_server(tmp_path)
    url_of = lambda query: f"{base}/lab?{query}"  # noqa: E731
    slow = Page(new_page(), url_of, heavy)
    slow.open()  # its first run: the heaviest the page allows
    quick = Page(new_page(), url_of, light)
    quick.open()
    slow.act(("key", "gpus", 1))
    _until_busy(slow)
    for action in [("key", "gpus", 1), ("toggle", "layout", "disaggregated"), ("key", "decode_gpus", 1)]:
        quick.do(action)  # settled: idle, painted, controls = address = run
        quick.check_run()  # and what it shows is `lab run` on those settings
        assert _busy(slow), f"the heavy run ended before the light page's {action} was answered"
    slow.settle(timeout_s=SETTLE_S * 20)
    assert slow.shown["settings"]["gpus"] == str(HEAVY_GPUS + 1)
