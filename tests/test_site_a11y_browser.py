"""The built static site's hub (index.html + hub.js) without sight and without a mouse.

axe-core (tests/axe_check.py) finds no serious or critical violation on the hub, with no
stars and with some; every tab stop shows its focus. Served by `python -m http.server`
like tests/test_site_browser.py (its Server), Pyodide's CDN unreachable. And the static lab
page in Pyodide (test_site_offline's site, with a local Pyodide folder): the live region,
a slider's value, the Table view and its CSV download, and axe.
"""

import json
import os
import re

import pytest

from axe_check import axe_missing, axe_violations, describe
from test_site_browser import KEY, _missing
from site_run import PANEL_WHEEL, Held
from test_site_browser import browser, dist, page, server  # noqa: F401 (the static site's fixtures)

pytestmark = pytest.mark.browser

FOCUSED = """() => {
    let el = document.activeElement;
    while (el && el.shadowRoot && el.shadowRoot.activeElement) el = el.shadowRoot.activeElement;
    if (!el || el === document.body) return null;
    const style = getComputedStyle(el);
    return {tag: el.tagName, id: el.id, text: (el.textContent || "").trim().slice(0, 40),
            outline: style.outlineStyle, width: parseFloat(style.outlineWidth) || 0};
}"""


@pytest.fixture(scope="module", autouse=True)
def _need_tools():
    reason = _missing() or axe_missing()
    if reason:
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(f"accessibility tests cannot run in CI: {reason}")
        pytest.skip(reason)


def open_hub(page, server):
    page.goto(server.url("index.html"))
    page.wait_for_selector('#stf-missions[data-loaded="true"]')


@pytest.mark.parametrize("stars", [None, {"mixing-hurts": [True, False, True]}])
def test_the_static_hub_has_nothing_serious_for_axe(page, server, stars):
    if stars:
        page.goto(server.url("index.html"))
        page.evaluate("([key, value]) => localStorage.setItem(key, value)", [KEY, json.dumps(stars)])
    open_hub(page, server)
    found = axe_violations(page)
    assert found == [], describe(found)


def test_every_tab_stop_of_the_static_hub_shows_its_focus(page, server):
    open_hub(page, server)
    seen = []
    for _ in range(40):
        page.keyboard.press("Tab")
        focused = page.evaluate(FOCUSED)
        if focused is None or (seen and focused == seen[0]):
            break
        seen.append(focused)
        assert focused["outline"] != "none" and focused["width"] >= 2, f"focus not visible: {focused}"
    assert sum(1 for f in seen if f["tag"] == "A") >= 5 and any(f["tag"] == "BUTTON" for f in seen), seen


# ---------------------------------------------------------------- the static lab, in Pyodide

from test_site_offline import _open_lab, mirror, site  # noqa: E402,F401  (fixtures: the site with a local Pyodide)


def test_the_static_lab_in_pyodide_announces_runs_and_downloads_the_table(page, site):
    import csv

    from playwright.sync_api import expect

    from lab.core.report import REQUESTS_CSV_COLUMNS
    from lab.ui.browser.a11y import ANNOUNCE_ID

    _open_lab(page, site.url("lab.html?mission=decode-drowns"))
    region = page.locator(f"#{ANNOUNCE_ID}")
    expect(region).to_have_text(re.compile(r"^SLO met by \d+% of requests; TTFT p90 .+\.$"), timeout=60_000)
    expect(page.get_by_role("slider", name="Decode GPUs")).to_have_attribute("aria-valuetext", "2 GPUs")
    page.get_by_role("button", name="Table view").click()
    rows = page.locator(".stf-request-table")
    expect(rows).to_have_attribute("data-shown", "50", timeout=60_000)
    requests = int(rows.get_attribute("data-requests"))
    with page.expect_download(timeout=60_000) as info:
        page.get_by_role("button", name="Download CSV").click()
    with open(info.value.path(), newline="", encoding="utf-8") as fh:
        table = list(csv.reader(fh))
    assert tuple(table[0]) == REQUESTS_CSV_COLUMNS and len(table) - 1 == requests
    found = axe_violations(page)
    assert found == [], describe(found)


def test_the_first_views_working_controls_have_nothing_serious_for_axe(page, site):
    """The pre-rendered view once its controls work (Panel's wheel held: the page stays so)."""
    panel_wheel = Held(page.context, PANEL_WHEEL)
    try:
        page.goto(site.url("lab.html?mission=decode-drowns"))
        page.wait_for_selector('#stf-prerender[data-early="open"]', state="attached", timeout=300_000)
        assert page.locator("#stf-prerender [data-control] input:not([disabled])").count() == 2  # its two sliders
        found = axe_violations(page)
        assert found == [], describe(found)
    finally:
        panel_wheel.release()


def test_the_prerendered_lab_page_has_nothing_serious_for_axe(page, site):
    """While Pyodide boots, the page shows the pre-rendered first view (inert) and the bar."""
    page.goto(site.url("lab.html?mission=decode-drowns"))
    page.wait_for_selector("html.stf-prerendered", state="attached", timeout=120_000)
    assert page.get_attribute("#stf-loader", "data-state") == "loading"  # still before the live page
    found = axe_violations(page)
    assert found == [], describe(found)
