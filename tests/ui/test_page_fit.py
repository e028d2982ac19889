"""The lab fits where it is shown: phones, iframes and wide screens (`lab serve` + Chromium).

- No sideways scrolling from 320 to 1,600 px, in the page and in an embed (`&embed=1`):
  no element whose visible part (after its clipping ancestors) reaches past the viewport,
  and the layout buttons (Colocated / Split) on screen.
- In the README's 700 x 760 iframe the controls, the canvas, the headline metric cards and
  the stars show without scrolling inside the frame.
- The plots below the fold, at a phone's width (a screenshot to look at).

Waits are on DOM conditions, never sleeps. Set STF_SCREENSHOTS=DIR to keep screenshots.
"""

import importlib.util
import os
from pathlib import Path

import pytest

pytest.importorskip("playwright.sync_api")

from lab.core.missions import list_missions  # noqa: E402

HERE = Path(__file__).resolve().parent


def _helpers(name):
    spec = importlib.util.spec_from_file_location(f"_stf_ui_{name}", HERE / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


settle = _helpers("test_browser").settle

pytestmark = pytest.mark.browser

MISSIONS = list_missions()
WIDTHS = [320, 390, 700, 1024, 1280, 1600]
HEADLINE = ("ttft", "tpot", "gap", "slo")  # the metric cards an embed must show at once

# Every element whose visible part (its box cut by each ancestor that clips) ends right of the
# viewport, walking into shadow roots. Bokeh draws glyphs in clipped layers, hence the clipping.
OFF_RIGHT = """() => {
    const W = window.innerWidth, out = [];
    const clips = (el) => { const s = getComputedStyle(el); return s.overflowX !== "visible" || s.contain.includes("paint"); };
    const stack = [[document.body, Infinity]];
    while (stack.length) {
        const [node, clip] = stack.pop();
        let right = clip;
        if (node.getBoundingClientRect) {
            const b = node.getBoundingClientRect();
            const s = node.nodeType === 1 ? getComputedStyle(node) : null;
            const shown = s && s.display !== "none" && s.visibility !== "hidden";
            if (shown && b.width > 0 && b.height > 0 && Math.min(b.right, clip) > W + 0.5 && b.left < Math.min(b.right, clip)) {
                out.push([node.tagName, String(node.className).slice(0, 60), Math.round(b.left), Math.round(b.right)]);
            }
            if (shown && clips(node)) right = Math.min(clip, b.right);
            if (s && s.display === "none") continue;
        }
        if (node.shadowRoot) stack.push([node.shadowRoot, right]);
        for (const child of (node.children || [])) stack.push([child, right]);
    }
    return {scroll: document.scrollingElement.scrollWidth, width: W, off: out.slice(0, 12)};
}"""


def shot(target, name):
    folder = os.environ.get("STF_SCREENSHOTS")
    if folder:
        os.makedirs(folder, exist_ok=True)
        target.screenshot(path=os.path.join(folder, name), full_page=True)


def open_lab(page, server, query):
    page.goto(f"{server}/lab?{query}")
    settle(page)
    page.locator('.stf-metrics [data-metric="ttft"]').first.wait_for()


def _mission_queries():
    colocated = next(m for m in MISSIONS if m.scenario.fleet.layout == "colocated" and "layout" in m.controls)
    split = next(m for m in MISSIONS if m.scenario.fleet.layout == "disaggregated" and "layout" in m.controls)
    return [f"mission={colocated.id}", f"mission={split.id}", "mission=sandbox"]


@pytest.mark.parametrize("embed", [False, True], ids=["page", "embed"])
@pytest.mark.parametrize("query", _mission_queries(), ids=["colocated", "split", "sandbox"])
def test_no_sideways_scroll_from_320_to_1600_px(browser, new_page, server, query, embed):
    ctx = browser.new_context(viewport={"width": WIDTHS[0], "height": 800})
    try:
        page = new_page(ctx)
        open_lab(page, server, query + ("&embed=1" if embed else ""))
        for width in WIDTHS:
            page.set_viewport_size({"width": width, "height": 800})
            page.wait_for_function(f"window.innerWidth === {width}")
            # Bokeh lays out again after a resize: wait until the page is no wider than the screen
            # (bounded), then look at every element.
            try:
                page.wait_for_function("document.scrollingElement.scrollWidth <= window.innerWidth", timeout=5_000)
            except Exception:
                pass
            fit = page.evaluate(OFF_RIGHT)
            assert fit["scroll"] <= width, (query, embed, width, fit)
            assert fit["off"] == [], (query, embed, width, fit)
            for button in page.locator(".stf-control-layout button").all():
                box = button.bounding_box()
                assert box and box["x"] >= 0 and box["x"] + box["width"] <= width, (query, embed, width, box)
            if width in (390, 1280):
                shot(page, f"fit-{query.split('=')[1]}-{'embed' if embed else 'page'}-{width}.png")
    finally:
        ctx.close()


@pytest.mark.parametrize("mission", [MISSIONS[0].id, MISSIONS[1].id])
def test_the_readme_iframe_shows_controls_canvas_headline_metrics_and_stars(browser, new_page, server, mission):
    ctx = browser.new_context(viewport={"width": 760, "height": 800})
    try:
        host = new_page(ctx)
        host.set_content(f'<iframe id="f" src="{server}/lab?mission={mission}&embed=1" width="700" height="760" '
                         'style="border:0;display:block"></iframe>')
        inner = host.frames[1]
        inner.wait_for_function("Number(document.documentElement.dataset.canvasPainted || 0) >= 1", timeout=30_000)
        frame = host.frame_locator("#f")
        frame.locator('.stf-metrics [data-metric="ttft"]').first.wait_for()
        parts = {"controls": frame.locator(".stf-controls").first, "canvas": frame.locator(".stf-canvas").first,
                 "stars": frame.locator(".stf-stars").first, "header stars": frame.locator(".stf-head-stars").first}
        for key in HEADLINE:
            parts[key] = frame.locator(f'.stf-metrics [data-metric="{key}"]').first
        for name, loc in parts.items():
            box = loc.bounding_box()  # relative to the host page; the frame sits at its top left
            assert box is not None, name
            assert box["y"] >= 0 and box["y"] + box["height"] <= 760, (mission, name, box)
        assert inner.evaluate("window.scrollY") == 0
        shot(host, f"embed-700x760-{mission}.png")
    finally:
        ctx.close()
