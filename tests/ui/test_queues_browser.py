"""The canvas's queue rows in a real browser (`lab serve` + Debian's Chromium): mission 3's
link queue is a row you can see, with a depth above zero, and the legend's words for an
over-target step are the briefs' ("red, hatched").

One file of its own (the fixtures are tests/ui/conftest.py's); waits are on DOM
conditions, never sleeps.
"""

import os

import pytest

pytest.importorskip("playwright.sync_api")

from lab.core.missions import list_missions  # noqa: E402
from lab.ui.words.targets import target_phrase  # noqa: E402
from test_browser import open_lab  # noqa: E402  (tests/ui is on sys.path: pytest prepends it)

pytestmark = pytest.mark.browser

# The named data source of a queue layer (lab.ui.timeline.canvas: canvas-<layer>), read in the page.
SOURCE = """(name) => {
    for (const doc of Bokeh.documents) {
        const src = doc.get_model_by_name(name);
        if (src) return {n: Array.from(src.data.n), left: Array.from(src.data.left), right: Array.from(src.data.right)};
    }
    return null;
}"""


def _shot(page, name):
    folder = os.environ.get("STF_SCREENSHOTS")
    if folder:
        os.makedirs(folder, exist_ok=True)
        page.screenshot(path=os.path.join(folder, name), full_page=True)


def test_the_slow_links_queue_row_shows_transfers_waiting_and_the_legend_says_red_hatched(page, server):
    open_lab(page, server, "mission=slow-link&t=30")
    label = page.locator(".stf-rows > div", has_text="link queue").first
    label.wait_for()
    assert label.is_visible()
    assert page.locator(".stf-rows > div", has_text="prefill queue").first.is_visible()
    page.wait_for_function("(name) => { for (const d of Bokeh.documents) { const s = d.get_model_by_name(name);"
                           " if (s && s.data.n.length) return true; } return false; }", arg="canvas-link_q")
    waiting = page.evaluate(SOURCE, "canvas-link_q")
    assert waiting is not None and max(waiting["n"]) > 1, waiting
    # What the browser holds is around the window (30 s + 2.5 s), not the whole run.
    assert min(waiting["right"]) >= 30 - 2 and max(waiting["left"]) <= 32.5 + 2
    # Every decoding GPU's KV band: the capacity frame is drawn for each decode GPU.
    tracks = page.evaluate(SOURCE, "canvas-kv_track")
    decode_rows = page.locator(".stf-rows > div", has_text="decode").count()
    assert tracks is not None and len(tracks["n"]) == decode_rows > 0
    # The row label sits beside the row's drawn area: the figure reaches the label's height.
    box = label.bounding_box()
    figure = page.locator(".stf-canvas").first.bounding_box()
    assert figure["y"] <= box["y"] + box["height"] / 2 <= figure["y"] + figure["height"]
    # The legend says how an over-target step looks in the briefs' words, and what it means.
    slo = next(m for m in list_missions() if m.id == "slow-link").scenario.slo
    text = page.locator(".stf-legend").first.inner_text()
    assert f"red, hatched: a step longer than {target_phrase(slo)}" in text, text
    assert "every sequence in it waited longer than the target for its next token" in text
    assert "KV band" in text and "queue rows" in text
    _shot(page, "queues-slow-link-1366.png")
