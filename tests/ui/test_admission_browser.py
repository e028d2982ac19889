"""Early rejection in a real browser (`lab serve` + Debian's Chromium), on mission 18 "Say no
early": turning the control on draws a cross per rejected request on the prefill queue row,
the SLO card gives the rejected count and the served share, a click on a cross opens that
request's story ("Rejected at arrival: predicted TTFT ..."), the worst-gap plot lists the
rejected, and the first star is met; axe-core finds nothing serious on the page with the story
open. At 1366 and 390 px, screenshots kept with STF_SCREENSHOTS.

Expectations come from the core run of the same settings (same seed, same result). Waits are
on DOM conditions (test_browser's helpers), never sleeps.
"""

import pytest

pytest.importorskip("playwright.sync_api")

import lab.core as core  # noqa: E402
from lab.core.missions import list_missions  # noqa: E402
from lab.ui.data.canvas_data import REJECT_Y, _rows, row_geometry  # noqa: E402
from lab.ui.state import WINDOW_S  # noqa: E402
from axe_check import axe_missing, axe_violations, describe  # noqa: E402  (tests/ is on sys.path)
from screenshots import shot  # noqa: E402
from test_browser import apply_in_ui, open_lab  # noqa: E402
from test_story_browser import FRAME_JS, window_start  # noqa: E402

pytestmark = pytest.mark.browser

ON = "predicted_ttft_over_slo"
SOURCE = """(name) => {
    for (const doc of Bokeh.documents) {
        const src = doc.get_model_by_name(name);
        if (src) return {req: Array.from(src.data.req), left: Array.from(src.data.left), y: Array.from(src.data.y)};
    }
    return null;
}"""


def _mission():
    return next(m for m in list_missions() if m.id == "say-no-early")


def _expected(mission):
    scenario = mission.apply({**mission.settings(mission.scenario), "admission": ON})
    result = core.simulate(scenario)
    return result, core.summarize(result)


@pytest.mark.parametrize("width", [1366, 390])
def test_rejected_requests_are_drawn_counted_and_told(context, new_page, server, width):
    mission = _mission()
    result, metrics = _expected(mission)
    page = new_page()
    page.set_viewport_size({"width": width, "height": 900})
    open_lab(page, server, f"mission={mission.id}&t=16")
    assert page.locator('[data-value="rejected"]').count() == 0  # off at the start: no rejection shown
    apply_in_ui(page, mission, "admission", ON)

    # the SLO card: how many were turned away and how the rest did, as the core counts them
    card = page.locator('[data-metric="slo"]')
    assert card.locator('[data-value="rejected"]').inner_text() == f"{metrics['rejected']:,}"
    served = card.locator('[data-value="served_slo_attainment"]').inner_text()
    assert served == f"{metrics['served_slo_attainment'] * 100:.0f}%"
    assert page.locator('.stf-star[data-star="0"][data-live="true"]').count() == 1

    # the crosses: the rejected requests around the window, on the prefill queue row
    page.wait_for_function("(name) => { for (const d of Bokeh.documents) { const s = d.get_model_by_name(name);"
                           " if (s && s.data.req.length) return true; } return false; }", arg="canvas-rejected")
    crosses = page.evaluate(SOURCE, "canvas-rejected")
    t0 = window_start(page)
    expected = {r.id for r in result.requests if r.rejected and t0 - 1.4 <= r.arrival <= t0 + WINDOW_S + 1.4}  # the slice held: BUFFER_S = 1.5 either side
    assert expected and expected <= set(crosses["req"]) <= {r.id for r in result.requests if r.rejected}
    assert all(-0.5 < y < 0 for y in crosses["y"])
    if width == 1366:
        shot(page, "admission-say-no-early-1366.png")

    # a click on a cross in the window opens its story
    inside = sorted((r.arrival, r.id) for r in result.requests
                    if r.rejected and t0 + 0.3 <= r.arrival <= t0 + WINDOW_S - 0.3)
    # the most isolated cross, so the click cannot be taken for a neighbour's
    gaps = [(min([b - a for a, _ in inside if a < b] + [1.0]) + min([a - b for a, _ in inside if a > b] + [1.0]), b, rid)
            for b, rid in inside]
    _, when, rid = max(gaps)
    page.locator(".stf-canvas").first.scroll_into_view_if_needed()
    frame = page.evaluate(FRAME_JS)
    _, _, _, labels = _rows(result)
    n = len(labels)
    half = row_geometry(n, frame["h"])[0]
    x = frame["x"] + (when - t0) / WINDOW_S * frame["w"]
    y = frame["y"] + (0.5 - half * REJECT_Y) / n * frame["h"]
    page.mouse.click(x, y)
    story = page.locator(f'.stf-story[data-request="{rid}"][data-cause="rejected"]')
    story.wait_for()
    text = story.inner_text()
    assert "Rejected at arrival: predicted TTFT" in text and "It never queued" in text
    assert window_start(page) == t0  # the student is looking at it already
    shot(page, f"admission-story-{width}.png")
    if width == 1366 and axe_missing() is None:  # the crosses, the card and the story are as readable as the rest
        found = axe_violations(page)
        assert not found, describe(found)

    # the worst-gap plot holds every rejected request, along its floor
    floor = page.evaluate("""() => { for (const d of Bokeh.documents) { const s = d.get_model_by_name("gap-rejected");
        if (s) return s.data.id.length; } return null; }""")
    assert floor == metrics["rejected"]
    if width == 390:
        shot(page.locator(".stf-metrics-pane").first, "admission-metrics-390.png")
