"""Pools that change roles in a real browser (`lab serve` + Debian's Chromium), on mission 19:
the planner choice turns a hand schedule on, the moved GPUs' rows get their role bands (the
reload hatched), the legend names them, the metrics count the role changes; screenshots at
1366 and 390 px (STF_SCREENSHOTS=DIR keeps them). Waits are on DOM conditions, never sleeps."""

import json

import pytest

pytest.importorskip("playwright.sync_api")

from screenshots import shot  # noqa: E402  (tests/ is on sys.path)
from siblings import sibling  # noqa: E402

pytestmark = pytest.mark.browser

B = sibling("test_browser")
settle = B.settle

# A named data source of the canvas (lab.ui.timeline.canvas: canvas-<layer>), read in the page.
SOURCE = """(name) => {
    for (const doc of Bokeh.documents) {
        const src = doc.get_model_by_name(name);
        if (src) return {left: Array.from(src.data.left), right: Array.from(src.data.right)};
    }
    return null;
}"""


def test_a_hand_schedule_moves_gpus_and_their_rows_show_it(page, server):
    run = B.open_lab(page, server, "mission=traffic-shifts")
    assert page.evaluate(SOURCE, "canvas-role_switching")["left"] == []  # fixed pools: no bands
    assert "role over time" in page.locator(".stf-legend").first.inner_text()
    # The swatch draws (an invalid gradient, e.g. one nested as a colour stop, leaves it blank).
    layers = page.locator(".stf-legend .sw.roles").first.evaluate("el => getComputedStyle(el).backgroundImage")
    assert layers.count("gradient(") == 2, layers
    # The schedule's controls wait for the planner to be "By hand".
    at = page.locator(".stf-control-plan_at_s")
    assert at.count() == 1
    page.locator(".stf-control-planner").get_by_role("button", name="By hand", exact=True).click()
    page.wait_for_function(f"location.search.includes({json.dumps('planner=schedule')})")
    run = settle(page, run)
    # The start's row moves one decode GPU to prefill at 28 s: one reload band.
    reloads = page.evaluate(SOURCE, "canvas-role_switching")
    assert len(reloads["left"]) == 1 and abs(reloads["left"][0] - 28) < 0.1
    assert abs(reloads["right"][0] - reloads["left"][0] - 3) < 0.01  # switch_s 3
    foot = page.locator('[data-metric="reconfigurations"]').first
    foot.wait_for()
    assert "Role changes: 1" in foot.inner_text() and "GPU-s lost" in foot.inner_text()
    # Two prefill GPUs from 24 s on: two GPUs move.
    handle = page.locator(".stf-control-plan_prefill_gpus .noUi-handle")
    handle.focus()
    page.keyboard.press("ArrowRight")
    page.wait_for_function(f"location.search.includes({json.dumps('plan_prefill_gpus=4')})")
    settle(page, run)
    page.wait_for_function("(n) => { for (const d of Bokeh.documents) { const s = d.get_model_by_name(n);"
                           " if (s && s.data.left.length == 2) return true; } return false; }", arg="canvas-role_switching")
    assert "Role changes: 2" in page.locator('[data-metric="reconfigurations"]').first.inner_text()
    assert len(page.evaluate(SOURCE, "canvas-role_prefill")["left"]) == 2
    rows = page.evaluate("document.documentElement.dataset.canvasRows").split(" | ")
    assert sum("→prefill" in r for r in rows) == 2, rows


@pytest.mark.parametrize("width", [1366, 390])
def test_the_moves_on_the_canvas_at_1366_and_390_px(browser, new_page, server, width):
    ctx = browser.new_context(viewport={"width": width, "height": 900})
    try:
        page = new_page(ctx)
        B.open_lab(page, server, "mission=traffic-shifts&prefill_gpus=2&decode_gpus=4&planner=schedule"
                                 "&plan_at_s=24&plan_prefill_gpus=4&t=22.5")
        bands = page.evaluate(SOURCE, "canvas-role_switching")
        assert len(bands["left"]) == 2
        assert page.evaluate("document.documentElement.scrollWidth") <= width, "the page scrolls sideways"
        assert "Role changes: 2" in page.locator('[data-metric="reconfigurations"]').first.inner_text()
        shot(page, f"planner-traffic-shifts-{width}.png")
    finally:
        ctx.close()
