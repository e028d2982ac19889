"""lab.ui.timeline.paint_speed: BokehJS's per-paint `--bk-*` CSS-variable lookups answer "" without
asking, which is exact only while nothing the page loads sets such a variable."""

import re
from pathlib import Path

import pytest

pytest.importorskip("panel")

import bokeh  # noqa: E402
import panel  # noqa: E402

from lab.ui.words import theme  # noqa: E402
from lab.ui.timeline.paint_speed import BOKEH_MAJOR  # noqa: E402

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


# Every glyph renderer view of the canvas that hatches (its glyph's hatch has something to draw) and
# has data: the canvas gets new data with every run, so after a change its visuals were made
# with PaintSpeed on (a view whose visuals were made before it keeps its own tile).
HATCHED_VIEWS_JS = """() => {
    const found = [], seen = new Set();
    const walk = (view) => {
        if (view == null || seen.has(view)) return;
        seen.add(view);
        if (view.glyph && view.muted_glyph && view.glyph.visuals && view.glyph.visuals.hatch
            && view.glyph.visuals.hatch.doit && view.glyph.data_size > 0
            && view.plot_view && view.plot_view.model.name === "timeline") found.push(view);
        const kids = typeof view.children_views === "function" ? view.children_views() : [];
        for (const kid of kids) walk(kid);
    };
    for (const root of Bokeh.index.roots) walk(root);
    return found;
}"""


@pytest.mark.browser
def test_hatch_tiles_are_drawn_once_and_plot_font_sizes_are_not_looked_up_again(page, server):
    """The canvas's red, hatched slow steps: the glyph views that hatch
    alike (pattern, colour, alpha, scale, weight) read one shared tile, also after a new run's
    data; and a plot's font size is looked up once (its first answer is kept, not asked again
    at every paint)."""
    pytest.importorskip("playwright.sync_api")
    page.goto(f"{server}/lab?mission=mixing-hurts")
    page.wait_for_function("document.documentElement.dataset.stfPaintSpeed === 'on'", timeout=30_000)
    page.wait_for_function("Number(document.documentElement.dataset.canvasPainted || 0) > 0", timeout=60_000)
    # {hatch key: [tile per glyph view hatching that way]}, the tiles kept in window.__stfTiles.
    tiles_js = "() => { const by = {}; for (const v of (" + HATCHED_VIEWS_JS + """)()) {
        for (const g of [v.glyph, v.selection_glyph, v.nonselection_glyph, v.muted_glyph, v.decimated_glyph]) {
            const h = g.visuals.hatch;
            const key = ["hatch_pattern", "hatch_color", "hatch_alpha", "hatch_scale", "hatch_weight"]
                .map((n) => String(h[n].value)).join("|");
            (by[key] = by[key] || []).push(h._hatch_image.value);
        } }
        window.__stfTiles = window.__stfTiles || by; return by; }"""
    tiles = "(" + tiles_js + ")()"
    # A plot's font size: looked up once (getComputedStyle), then kept.
    lookups = page.evaluate("""() => {
        const stack = [...Bokeh.index.roots], plots = [];
        while (stack.length) {
            const v = stack.pop();
            if (v && v.model && (v.model.type === "Plot" || v.model.type === "Figure")) plots.push(v);
            if (v && typeof v.children_views === "function") stack.push(...v.children_views());
        }
        let count = 0;
        const original = window.getComputedStyle;
        window.getComputedStyle = function (el, ...rest) { count += 1; return original.call(this, el, ...rest); };
        try {
            const sizes = plots.map((v) => v.base_font_size);  // (the first ask of any not painted yet)
            const before = count;
            const again = plots.map((v) => [v.base_font_size, v.base_font_size]);
            return {plots: plots.length, asked: count - before, same: again.every(([a, b], i) => a === sizes[i] && b === a && a > 0)};
        } finally { window.getComputedStyle = original; }
    }""")
    assert lookups["plots"] >= 2 and lookups["asked"] == 0 and lookups["same"], lookups
    # Only a renderer's glyph view follows its data until its other views are ever painted
    # (lazySecondaryGlyphs): muted, the hatched renderers' five views all follow from then on.
    page.evaluate("() => (" + HATCHED_VIEWS_JS + ")().forEach((v) => { v.model.muted = true; })")
    page.wait_for_function("() => (" + HATCHED_VIEWS_JS + ")().every((v) => v._stfAllGlyphs && !v._stfUpdate)",
                           timeout=30_000)
    before = int(page.evaluate("document.documentElement.dataset.canvasPainted"))
    handle = page.locator(".stf-control-gpus .noUi-handle").first
    handle.focus()
    page.keyboard.press("ArrowRight")  # one more GPU: still slow steps to hatch
    page.wait_for_function(f"Number(document.documentElement.dataset.canvasPainted || 0) > {before}", timeout=60_000)
    shared = page.evaluate(f"() => Object.values({tiles}).map((imgs) => [imgs.length,"
                           " imgs.every((img) => img === imgs[0] && img instanceof HTMLCanvasElement)])")
    assert shared and all(ok for _n, ok in shared), shared
    # The slow steps' five views hatch alike, on one tile: lean_figure leaves the nonselection and
    # muted glyphs to BokehJS, which makes them with the glyph's hatch (they were copies whose alpha
    # Bokeh's Python side had changed: three keys).
    assert any(n >= 5 for n, _ok in shared), shared
    before = int(page.evaluate("document.documentElement.dataset.canvasPainted"))
    page.keyboard.press("ArrowLeft")
    page.wait_for_function(f"Number(document.documentElement.dataset.canvasPainted || 0) > {before}", timeout=60_000)
    first = page.evaluate("() => window.__stfTiles")  # (kept from before this change)
    again = page.evaluate(f"() => {{ const old = window.__stfTiles; window.__stfTiles = null; const now = {tiles};"
                          " return Object.entries(now).map(([k, imgs]) => !old[k] || imgs.every((img) => img === old[k][0])); }")
    assert first and again and all(again), again  # the new run's data reused the tiles drawn before


# Every glyph renderer view of the timeline, `fn(view)` called on each; returns {model id: fn's value}.
TIMELINE_VIEWS_JS = """(fn) => {
    const out = {}, seen = new Set();
    const walk = (view) => {
        if (view == null || seen.has(view)) return;
        seen.add(view);
        if (view.glyph && view.muted_glyph && view.plot_view && view.plot_view.model.name === "timeline") {
            out[view.model.id] = fn(view);
        }
        const kids = typeof view.children_views === "function" ? view.children_views() : [];
        for (const kid of kids) walk(kid);
    };
    for (const root of Bokeh.index.roots) walk(root);
    return out;
}"""
COUNT_SET_DATA_JS = "(" + TIMELINE_VIEWS_JS + """)((view) => {
    view.__setData = 0;
    const original = view.set_data;
    view.set_data = function (...args) { this.__setData += 1; return original.apply(this, args); };
    return 0;
})"""
READ_JS = "(" + TIMELINE_VIEWS_JS + """)((view) =>
    [view.__setData, view.glyph.data_size, view.model.data_source.get_length() || 0])"""


@pytest.mark.browser
def test_a_change_of_rows_data_and_heights_updates_each_renderer_once_with_the_new_data(page, server):
    """A GPU-count change sends each timeline renderer new data, a new box height and a new
    Dodge in one patch: its glyph views are updated once (not once per property), and what they
    hold is the new data."""
    pytest.importorskip("playwright.sync_api")
    page.goto(f"{server}/lab?mission=mixing-hurts")
    page.wait_for_function("document.documentElement.dataset.stfPaintSpeed === 'on'", timeout=30_000)
    page.wait_for_function("Number(document.documentElement.dataset.canvasPainted || 0) > 0", timeout=60_000)
    page.evaluate(COUNT_SET_DATA_JS)
    rows = page.evaluate("document.documentElement.dataset.canvasRows")
    painted = int(page.evaluate("document.documentElement.dataset.canvasPainted"))
    handle = page.locator(".stf-control-gpus .noUi-handle").first
    handle.focus()
    page.keyboard.press("ArrowRight")  # one more GPU: another row, so new heights and offsets too
    page.wait_for_function(f"Number(document.documentElement.dataset.canvasPainted || 0) > {painted}", timeout=60_000)
    after = page.evaluate(READ_JS)
    assert page.evaluate("document.documentElement.dataset.canvasRows") != rows
    runs = {k: v[0] for k, v in after.items()}
    assert max(runs.values()) == 1 and sum(runs.values()) >= 4, runs  # the step layers got new data, once each
    stale = {k: v for k, v in after.items() if v[1] != v[2]}
    assert not stale, stale  # every glyph holds its source's rows


@pytest.mark.browser
def test_glyph_views_never_painted_wait_until_they_are(page, server):
    """After a change only a renderer's glyph view takes the new data (the lab selects, mutes
    and zooms nothing); muting a renderer brings its other views up to date before they paint."""
    pytest.importorskip("playwright.sync_api")
    page.goto(f"{server}/lab?mission=mixing-hurts")
    page.wait_for_function("document.documentElement.dataset.stfPaintSpeed === 'on'", timeout=30_000)
    page.wait_for_function("Number(document.documentElement.dataset.canvasPainted || 0) > 0", timeout=60_000)
    painted = int(page.evaluate("document.documentElement.dataset.canvasPainted"))
    handle = page.locator(".stf-control-gpus .noUi-handle").first
    handle.focus()
    page.keyboard.press("ArrowRight")
    page.wait_for_function(f"Number(document.documentElement.dataset.canvasPainted || 0) > {painted}", timeout=60_000)
    sizes = "(" + TIMELINE_VIEWS_JS + """)((v) => [v.model.data_source.get_length() || 0, v.glyph.data_size,
        v.muted_glyph._data_size, v.selection_glyph._data_size, v.model.data_source.name || ""])"""  # their own (data_size is the base glyph's)
    now = page.evaluate(sizes)
    assert all(n == glyph for n, glyph, *_ in now.values()), now
    lagging = [k for k, (n, _g, muted, sel, _name) in now.items() if muted != n and sel != n]
    assert lagging, now  # some layer's data changed and its never-painted views were left as they were
    key = lagging[0]
    page.evaluate("(id) => { const m = Bokeh.documents[0].get_model_by_id(id);"
                  " m.muted = true; }", key)
    page.wait_for_function("(id) => (" + TIMELINE_VIEWS_JS + ")((v) => v.muted_glyph._data_size"
                           " === (v.model.data_source.get_length() || 0))[id]", arg=key, timeout=30_000)
