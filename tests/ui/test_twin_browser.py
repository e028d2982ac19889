"""The blame bar and twin runs in a real browser (`lab serve` + Debian's Chromium).

Mission 1 (mixing-hurts): the bar counts the missed requests the core blames; "Pin this
fleet", then a control change, shows both runs: the metrics pinned and now with their
change in words, both blame bars and the per-request scatter; the address carries the
pin, a reload keeps it, and "Unpin" ends it; axe finds nothing serious in the comparison. Waits are on DOM conditions, never sleeps.
At 390 px (a phone) the comparison wraps and nothing scrolls sideways. Set
STF_SCREENSHOTS=DIR to keep screenshots (desktop and 390 px).
"""

import os
import re

import pytest

pytest.importorskip("playwright.sync_api")

import lab.core as core  # noqa: E402
from axe_check import axe_missing, axe_violations, describe  # noqa: E402  (tests/ is on sys.path)
from lab.core.missions import list_missions  # noqa: E402
from siblings import sibling  # noqa: E402  (tests/ui is on sys.path: pytest prepends it)
from lab.ui.views.metrics_view import fmt_share  # noqa: E402

pytestmark = pytest.mark.browser

_browser = sibling("test_browser")
MISSION = next(m for m in list_missions() if m.id == "mixing-hurts")


def shot(page, name, width=None):
    folder = os.environ.get("STF_SCREENSHOTS")
    if not folder:
        return
    os.makedirs(folder, exist_ok=True)
    if width:
        page.set_viewport_size({"width": width, "height": 900})
        page.wait_for_function(f"window.innerWidth === {width}")
    page.screenshot(path=os.path.join(folder, name), full_page=True)


def test_the_blame_bar_counts_the_missed_requests_of_mission_one(page, server):
    _browser.open_lab(page, server, f"mission={MISSION.id}")
    result = core.simulate(MISSION.scenario)
    summary = core.blame_summary(core.request_blame(result))
    bar = page.locator('.stf-blame[data-blame="now"]')
    bar.wait_for()
    assert int(bar.get_attribute("data-missed")) == summary["missed"] > 0
    assert f"{summary['missed']:,} of {len(result.requests):,} requests missed the SLO" in bar.inner_text()
    shown = bar.locator(".stf-blame-legend li")
    expected = [c for c in core.CAUSES if summary["missed_by_cause"][c] > 0]
    assert [shown.nth(i).get_attribute("data-cause") for i in range(shown.count())] == expected
    label = bar.get_by_role("img").get_attribute("aria-label")
    assert "missed" in label and re.search(r"\d+%", label)
    shot(page, "blame-desktop.png")
    shot(page, "blame-390.png", width=390)


def test_pin_change_a_control_and_see_both_runs(page, server):
    run = _browser.open_lab(page, server, f"mission={MISSION.id}")
    assert "Compare with" in page.locator(".stf-twin-head").inner_text()
    assert not page.locator(".stf-twin").count()
    page.get_by_role("button", name="Pin this fleet").click()
    page.wait_for_function("location.search.includes('pin=start')")
    page.locator(".stf-twin-counts[data-same]").wait_for()
    before = run
    run = _browser.apply_in_ui(page, MISSION, "layout", "disaggregated")
    assert run > before
    twin = page.locator(f'.stf-twin[data-run="{run}"]')
    twin.wait_for()
    assert "pin=start" in page.evaluate("location.search") and "layout=disaggregated" in page.evaluate("location.search")

    start = core.summarize(core.simulate(MISSION.scenario))
    slo = twin.locator('tr[data-metric="slo_attainment"]')
    cells = slo.locator("td")
    assert cells.nth(0).inner_text() == fmt_share(start["slo_attainment"])  # the pinned run is the start
    assert cells.nth(1).inner_text() == _browser.metric_text(page, "slo")  # "now" is the page's run
    verdicts = [twin.locator("tbody tr").nth(i).get_attribute("data-verdict") for i in range(twin.locator("tbody tr").count())]
    assert any(v in ("better", "worse") for v in verdicts)
    for row, verdict in zip(range(len(verdicts)), verdicts):  # said in words, not only colour
        if verdict in ("better", "worse"):
            assert verdict in twin.locator("tbody tr").nth(row).locator("td").nth(2).inner_text()
    assert twin.locator('.stf-blame[data-blame="pinned"]').count() == 1
    assert twin.locator('.stf-blame[data-blame="now"]').count() == 1

    counts = page.locator(".stf-twin-counts[data-same]")
    total = sum(int(counts.get_attribute(f"data-{k}")) for k in ("worse", "better", "same"))
    requests = int(page.locator('.stf-status[data-run]').inner_text().split()[0].replace(",", ""))
    assert total == requests
    assert int(counts.get_attribute("data-worse")) + int(counts.get_attribute("data-better")) > 0
    plot = page.locator(".stf-twin-plot")
    plot.wait_for(state="visible")
    assert plot.bounding_box()["height"] > 150
    points = page.evaluate("""() => {
        for (const doc of window.Bokeh.documents) {
            const fig = doc.get_model_by_name('twin_plot');
            if (fig) return fig.renderers.filter(r => r.glyph.type === 'Scatter')
                .map(r => r.data_source.get_length()).reduce((a, b) => a + b, 0);
        }
        return null;
    }""")
    assert points == total + 3  # every request, plus the legend's three one-point swatches
    if not axe_missing():  # the comparison, its table and both bars: nothing serious for axe either
        found = axe_violations(page)
        assert found == [], describe(found)
    shot(page, "twin-desktop.png")
    page.set_viewport_size({"width": 390, "height": 900})  # a phone: the comparison wraps, nothing goes sideways
    page.wait_for_function("window.innerWidth === 390")
    page.evaluate("() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")  # laid out again
    fit = page.evaluate(sibling("test_page_fit").OFF_RIGHT)
    assert fit["scroll"] == 390 and fit["off"] == [], fit
    shot(page, "twin-390.png")
    page.set_viewport_size({"width": 1366, "height": 800})

    # The address carries the pin: a reload shows the same comparison.
    page.reload()
    _browser.settle(page)
    page.locator(".stf-twin[data-run]").wait_for()
    assert page.locator('.stf-twin tr[data-metric="slo_attainment"] td').nth(0).inner_text() == fmt_share(start["slo_attainment"])

    page.get_by_role("button", name="Unpin").click()
    page.wait_for_function("!location.search.includes('pin=')")
    page.locator(".stf-twin-body").wait_for(state="hidden")
