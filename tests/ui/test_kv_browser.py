"""KV on demand in a real browser (`lab serve` + Debian's Chromium), on mission 16: the
preemption marks on the GPU rows, the memory card, the legend, `reserve` taking them away,
and the page on a phone. Screenshots at 1366 and 390 px when STF_SCREENSHOTS names a folder.

Waits are on DOM conditions, never sleeps (the fixtures are tests/ui/conftest.py's).
"""

import re

import pytest

pytest.importorskip("playwright.sync_api")

import lab.core as core  # noqa: E402
from lab.core.missions import list_missions  # noqa: E402
from screenshots import shot  # noqa: E402
from test_browser import open_lab  # noqa: E402  (tests/ui is on sys.path: pytest prepends it)

pytestmark = pytest.mark.browser

MISSION = "memory-on-demand"
MARKS = """() => {
    for (const doc of Bokeh.documents) {
        const src = doc.get_model_by_name("canvas-preempt");
        if (src) return {left: Array.from(src.data.left), req: Array.from(src.data.req)};
    }
    return null;
}"""


def _start_metrics():
    mission = next(m for m in list_missions() if m.id == MISSION)
    result = core.simulate(mission.scenario)
    return result, core.summarize(result)


def test_preemptions_are_marked_on_the_gpu_rows_and_counted_in_the_memory_card(page, server):
    result, metrics = _start_metrics()
    open_lab(page, server, f"mission={MISSION}&t=20")
    page.wait_for_function("() => { for (const d of Bokeh.documents) { const s = d.get_model_by_name('canvas-preempt');"
                           " if (s && s.data.left.length) return true; } return false; }")
    marks = page.evaluate(MARKS)
    # What the browser holds: the preemptions around the window (20 s + 2.5 s, 1.5 s each side).
    expected = sorted(rid for log in result.gpus for s, rid in log.preempted
                      if 18.5 - 1e-3 <= (log.start[s] if s < len(log) else log.end[s - 1]) <= 24.0 + 1e-3)
    assert sorted(marks["req"]) == expected and expected
    card = page.locator('[data-metric="kv"]')
    assert card.is_visible()
    assert page.locator('[data-value="preemptions"]').inner_text() == f'{metrics["preemptions"]:,}'
    assert "%" in page.locator('[data-value="kv_util_p99"]').inner_text()
    legend = page.locator(".stf-legend").first.inner_text()
    assert "preempted: lost its KV, back to the queue" in legend
    shot(page, "kv-on-demand-1366.png")
    # Reserving: nothing is preempted, so no marks and no memory card.
    run = open_lab(page, server, f"mission={MISSION}&kv_policy=reserve&t=20")
    assert run >= 1
    assert page.evaluate(MARKS)["req"] == []
    assert page.locator('[data-metric="kv"]').count() == 0


def test_the_memory_card_and_the_marks_fit_a_phone(browser, new_page, server):
    ctx = browser.new_context(viewport={"width": 390, "height": 900})
    try:
        page = new_page(ctx)
        open_lab(page, server, f"mission={MISSION}&t=20")
        width = page.evaluate("document.documentElement.scrollWidth")
        assert width <= 390, f"the page scrolls sideways ({width}px)"
        box = page.locator('[data-metric="kv"]').bounding_box()
        assert box["x"] >= 0 and box["x"] + box["width"] <= 390
        shot(page, "kv-on-demand-390.png")
    finally:
        ctx.close()


def test_the_sandbox_offers_the_block_size_only_on_demand(page, server):
    open_lab(page, server, "mission=sandbox&kv_policy=reserve")
    assert page.locator(".stf-control-kv_policy").count() == 1
    assert page.locator(".stf-control-kv_block_tokens").count() == 1
    hint = page.locator(".stf-lock", has_text="Greyed").first
    assert "KV memory on demand" in hint.inner_text()
    open_lab(page, server, "mission=sandbox&kv_policy=on_demand&kv_block_tokens=64")
    block = page.get_by_role("slider", name=re.compile("KV block"))
    assert "64" in block.get_attribute("aria-valuetext")
    greyed = page.locator(".stf-lock", has_text="Greyed")
    assert greyed.count() == 0 or "KV memory on demand" not in greyed.first.inner_text()


def test_axe_finds_nothing_serious_on_the_memory_mission(page, server):
    from axe_check import axe_missing, axe_violations, describe  # tests/ is on sys.path

    if axe_missing():
        pytest.skip(axe_missing())
    open_lab(page, server, f"mission={MISSION}&t=20")
    found = axe_violations(page)
    assert found == [], describe(found)
