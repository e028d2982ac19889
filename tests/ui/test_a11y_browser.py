"""Usable without sight and without a mouse, in a real browser (`lab serve` + Chromium).

axe-core (npm, tests/axe_check.py) finds no serious or critical violation on the hub and
on mission pages (colocated, split, table open, embed); sliders and choices have names and
values a screen reader reads as a person would; the live region announces each run; every
tab stop shows its focus and none is a bare canvas; the Table view shows the run's
numbers and downloads them as the CLI's CSV. Waits are on DOM conditions, never sleeps.
Set STF_SCREENSHOTS=DIR to keep screenshots.
"""

import csv
import os
import re

import pytest

pytest.importorskip("playwright.sync_api")

from playwright.sync_api import expect  # noqa: E402

from axe_check import axe_missing, axe_violations, describe  # noqa: E402  (tests/ is on sys.path)
from lab.core.report import REQUESTS_CSV_COLUMNS  # noqa: E402
from lab.ui.browser.a11y import ANNOUNCE_ID  # noqa: E402
from siblings import sibling  # noqa: E402
from screenshots import shot  # noqa: E402

_browser = sibling("test_browser")
settle, painted = _browser.settle, _browser.painted

pytestmark = pytest.mark.browser

SUMMARY = re.compile(r"^SLO met by [\d.]+% of requests; TTFT p90 [\d.,]+ (ms|s); TPOT p99 [\d.,]+ (ms|s)(; .+)?\.$")

FOCUSED = """() => {
    // The focused element itself, through shadow roots, and how its focus shows.
    let el = document.activeElement;
    while (el && el.shadowRoot && el.shadowRoot.activeElement) el = el.shadowRoot.activeElement;
    if (!el || el === document.body) return null;
    const style = getComputedStyle(el);
    const box = el.getBoundingClientRect();
    return {tag: el.tagName, cls: typeof el.className === "string" ? el.className : "", role: el.getAttribute("role"),
            text: (el.textContent || "").trim().slice(0, 40), outline: style.outlineStyle,
            width: parseFloat(style.outlineWidth) || 0, visible: box.width > 0 && box.height > 0,
            inCanvas: !!(el.closest && el.closest(".bk-Canvas")) || el.tagName === "CANVAS"};
}"""


@pytest.fixture(autouse=True)
def _need_axe():
    reason = axe_missing()
    if reason:
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(reason)
        pytest.skip(reason)


def open_lab(page, server, query):
    page.goto(f"{server}/lab?{query}")
    return settle(page)


def open_path(page, server, path):
    """The hub ("/") once its list is in, or a lab page once it has run."""
    page.goto(server + path)
    if path == "/":
        page.locator('ul.stf-missions[data-loaded="true"]').wait_for()
    else:
        settle(page)


def announced(page):
    return page.locator(f"#{ANNOUNCE_ID}")


def open_table(page):
    header = page.get_by_role("button", name="Table view")
    header.click()
    page.locator(".stf-tables").wait_for()
    return header


# ---------------------------------------------------------------- axe


@pytest.mark.parametrize("path", [
    "/", "/lab?mission=mixing-hurts", "/lab?mission=decode-drowns", "/lab?mission=chunk-it&embed=1",
])
def test_axe_finds_nothing_serious(page, server, path):
    open_path(page, server, path)
    found = axe_violations(page)
    assert found == [], describe(found)


def test_axe_finds_nothing_serious_with_the_table_open_on_a_split_fleet(page, server):
    open_lab(page, server, "mission=mixing-hurts&layout=disaggregated")
    open_table(page)
    found = axe_violations(page)
    assert found == [], describe(found)


# ---------------------------------------------------------------- names and values


def test_sliders_read_their_label_and_a_value_in_units(page, server):
    open_lab(page, server, "mission=chunk-it")
    gpus = page.get_by_role("slider", name="GPUs")
    assert gpus.get_attribute("aria-valuetext") == "4 GPUs"
    chunk = page.get_by_role("slider", name="Prefill chunk")
    assert chunk.get_attribute("aria-valuetext") == "whole prompt"  # 0 means whole prefill
    before = painted(page)
    chunk.focus()
    page.keyboard.press("ArrowRight")
    page.wait_for_function("location.search.includes('chunk_tokens=')")
    settle(page, before)
    expect(chunk).to_have_attribute("aria-valuetext", "128 tokens")
    window = page.get_by_role("slider", name="Window start")
    assert re.fullmatch(r"\d+(\.\d{1,2})? s", window.get_attribute("aria-valuetext")), window.get_attribute("aria-valuetext")


def test_the_layout_choice_says_which_is_selected(page, server):
    open_lab(page, server, "mission=mixing-hurts")
    group = page.get_by_role("group", name="Layout")
    colocated = group.get_by_role("button", name="Colocated", exact=True)
    split = group.get_by_role("button", name="Split (prefill | decode)", exact=True)
    assert (colocated.get_attribute("aria-pressed"), split.get_attribute("aria-pressed")) == ("true", "false")
    before = painted(page)
    split.click()
    settle(page, before)
    expect(split).to_have_attribute("aria-pressed", "true")
    expect(colocated).to_have_attribute("aria-pressed", "false")
    speed = page.get_by_role("group", name="Playback speed")
    assert speed.get_by_role("button", name="1×").get_attribute("aria-pressed") == "true"


def test_buttons_are_named_without_glyphs_and_an_idle_one_says_so(page, server):
    open_lab(page, server, "mission=decode-drowns")
    assert page.get_by_role("button", name="Play", exact=True).count() == 1  # "▶ Play" on screen
    reset = page.get_by_role("button", name="Back to the start", exact=True)
    assert reset.get_attribute("aria-disabled") == "true"  # at the start it has nothing to do
    before = painted(page)
    page.get_by_role("slider", name="Decode GPUs").focus()
    page.keyboard.press("ArrowRight")
    settle(page, before)
    expect(reset).not_to_have_attribute("aria-disabled", "true")


# ---------------------------------------------------------------- live region


def test_the_live_region_announces_each_run(page, server):
    open_lab(page, server, "mission=decode-drowns")
    region = announced(page)
    assert region.get_attribute("role") == "status" and region.get_attribute("aria-live") == "polite"
    page.wait_for_function(f"document.getElementById('{ANNOUNCE_ID}').textContent.length > 0")
    first, n = region.text_content(), int(region.get_attribute("data-n"))
    assert SUMMARY.match(first), first
    share = page.locator('[data-metric="slo"] .v').inner_text()
    assert f"SLO met by {share} of requests" in first  # the same number as the card
    before = painted(page)
    page.get_by_role("slider", name="Decode GPUs").focus()
    page.keyboard.press("ArrowRight")
    settle(page, before)
    page.wait_for_function(f"Number(document.getElementById('{ANNOUNCE_ID}').dataset.n) > {n}")
    second = region.text_content()
    assert SUMMARY.match(second) and second != first, (first, second)


# ---------------------------------------------------------------- keyboard


@pytest.mark.parametrize("path", ["/lab?mission=mixing-hurts", "/"])
def test_every_tab_stop_shows_its_focus_and_none_is_a_bare_canvas(page, server, path):
    open_path(page, server, path)
    seen = []
    for _ in range(60):
        page.keyboard.press("Tab")
        focused = page.evaluate(FOCUSED)
        if focused is None:  # past the last stop: the focus left the page
            break
        if seen and focused == seen[0]:
            break
        seen.append(focused)
        assert not focused["inCanvas"], f"a tab stop on a canvas: {focused}"
        assert focused["visible"], focused
        assert focused["outline"] != "none" and focused["width"] >= 2, f"focus not visible: {focused}"
    kinds = {(f["tag"], f["role"]) for f in seen}
    assert ("BUTTON", None) in kinds and len(seen) >= 12, seen
    if path != "/":
        assert ("DIV", "slider") in kinds, seen


def test_focus_ring_on_a_slider(page, server):
    open_lab(page, server, "mission=mixing-hurts")
    page.get_by_role("slider", name="GPUs (colocated)").focus()
    page.keyboard.press("Shift+Tab")
    page.keyboard.press("Tab")  # keyboard focus: :focus-visible applies
    focused = page.evaluate(FOCUSED)
    assert focused["role"] == "slider" and focused["outline"] == "solid" and focused["width"] >= 3, focused
    shot(page, "focus-on-slider.png")


# ---------------------------------------------------------------- table view


def test_the_table_view_shows_the_run_and_downloads_the_cli_csv(page, server):
    open_lab(page, server, "mission=mixing-hurts&layout=disaggregated")
    assert page.locator(".stf-tables").count() == 0  # closed: not built
    header = open_table(page)
    expect(header).to_have_attribute("aria-expanded", "true")  # set by the a11y bridge when the browser is idle
    gpus = page.locator(".stf-gpu-table")
    reqs = page.locator(".stf-request-table")
    goodput = page.locator('[data-metric="goodput"] .t').inner_text()  # "4 GPUs · 2.8 req/s in all"
    n_gpus = int(re.match(r"(\d+) GPUs", goodput).group(1))
    assert int(gpus.get_attribute("data-gpus")) == n_gpus == gpus.locator("tbody tr").count()
    requests = int(page.locator('[data-metric="slo"] .t').inner_text().split()[0].replace(",", ""))
    assert int(reqs.get_attribute("data-requests")) == requests
    shown = reqs.locator("tbody tr").count()
    assert shown == min(requests, 50) == int(reqs.get_attribute("data-shown"))
    # The decode pool's busy share is the mean of its GPUs' shares.
    decode = [float(c) for c in gpus.locator("tbody tr", has_text="decode").locator("td[data-busy]").evaluate_all(
        "cells => cells.map(c => c.dataset.busy)")]
    bar = float(page.locator('[data-metric="util_decode"]').inner_text().rstrip("%"))
    assert abs(100 * sum(decode) / len(decode) - bar) <= 0.5 + 1e-9
    shot(page, "table-view.png")
    with page.expect_download() as info:
        page.get_by_role("button", name="Download CSV").click()
    download = info.value
    assert download.suggested_filename == "requests.csv"
    with open(download.path(), newline="", encoding="utf-8") as fh:
        table = list(csv.reader(fh))
    assert tuple(table[0]) == REQUESTS_CSV_COLUMNS
    assert len(table) - 1 == requests
    first = dict(zip(table[0], table[1]))
    cell = reqs.locator("tbody tr").first.locator("td[data-ttft]")
    assert float(first["ttft_s"]) == float(cell.get_attribute("data-ttft"))
    finished = sum(1 for row in table[1:] if row[table[0].index("finish_s")] != "")
    assert int(reqs.get_attribute("data-finished")) == finished
    # Open, it follows the next run.
    run = page.locator(".stf-tables").get_attribute("data-run")
    before = painted(page)
    page.get_by_role("slider", name="Decode GPUs").focus()
    page.keyboard.press("ArrowRight")
    settle(page, before)
    expect(page.locator(".stf-tables")).not_to_have_attribute("data-run", run)
    expect(gpus.locator("tbody tr")).to_have_count(n_gpus + 1)
