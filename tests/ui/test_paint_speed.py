"""lab.ui.paint_speed: BokehJS's per-paint `--bk-*` CSS-variable lookups answer "" without
asking, which is exact only while nothing the page loads sets such a variable."""

import re
from pathlib import Path

import pytest

pytest.importorskip("panel")

import bokeh  # noqa: E402
import panel  # noqa: E402

from lab.ui import theme  # noqa: E402
from lab.ui.paint_speed import BOKEH_MAJOR  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
# What VisualProperties._get_css_value reads: --bk-<prefix><fill|line|hatch|text>-<attribute>.
VISUAL_VAR = re.compile(r"--bk-[a-z0-9-]*(?:fill|line|hatch|text)-(?:color|alpha|width|join|cap|dash|dash-offset|"
                        r"font|font-size|font-style|align|baseline|line-height|pattern|scale|weight|extra|outline-color)"
                        r"\s*:")


def _sources():
    """Every stylesheet and script the lab page loads: the lab's own, the site's, Panel's and Bokeh's."""
    yield from (REPO / "lab" / "ui").glob("*.py")
    yield from (REPO / "static").rglob("*.css")
    yield from (REPO / "static").rglob("*.js")
    for package in (panel, bokeh):
        root = Path(package.__file__).parent
        for ext in ("*.css", "*.js"):
            yield from (p for p in root.rglob(ext) if "/tests/" not in str(p))


def test_nothing_the_page_loads_sets_a_bokeh_visual_css_variable():
    found = []
    for path in _sources():
        text = path.read_text(encoding="utf-8", errors="replace")
        found += [f"{path.name}: {m.group(0)}" for m in VISUAL_VAR.finditer(text)]
    assert not found, found[:10]
    # The check above does find one (so it would catch a stylesheet that starts using them).
    assert VISUAL_VAR.search(".x { --bk-major-label-text-color: red; }")
    assert not any(VISUAL_VAR.search(css) for css in (theme.CSS, theme.HUB_CSS))


def test_the_bridge_targets_the_installed_bokeh():
    """A new BokehJS line may look its visuals up differently: the bridge then does nothing, and this fails."""
    assert bokeh.__version__.startswith(BOKEH_MAJOR)


@pytest.mark.browser
def test_the_lab_page_turns_the_lookup_off_and_still_draws_a_change(page, server):
    pytest.importorskip("playwright.sync_api")
    page.goto(f"{server}/lab?mission=mixing-hurts")
    page.wait_for_function("document.documentElement.dataset.stfPaintSpeed === 'on'", timeout=30_000)
    page.wait_for_function("Number(document.documentElement.dataset.canvasPainted || 0) > 0", timeout=60_000)
    answer = page.evaluate("() => Bokeh.require('core/visuals/visual').VisualProperties.prototype._get_css_value('fill-color')")
    assert answer == ""
    before = int(page.evaluate("document.documentElement.dataset.canvasPainted"))
    page.get_by_role("button", name="Split (prefill | decode)").first.click()
    page.wait_for_function(f"Number(document.documentElement.dataset.canvasPainted || 0) > {before}", timeout=60_000)
