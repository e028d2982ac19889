"""The lab fits where it is shown: phones, iframes and wide screens (`lab serve` + Chromium).

- No sideways scrolling from 320 to 1,600 px, in the page and in an embed (`&embed=1`):
  no element whose visible part (after its clipping ancestors) reaches past the viewport,
  and the layout buttons (Colocated / Split) on screen.
- In docs/embedding.md's 700 x 760 iframe the controls, the canvas, the headline metric cards and
  the stars show without scrolling inside the frame.
- The plots below the fold, at a phone's width (a screenshot to look at).

Waits are on DOM conditions, never sleeps. Set STF_SCREENSHOTS=DIR to keep screenshots.
"""

import math

import pytest

pytest.importorskip("panel")

from bokeh.models import BasicTicker, FixedTicker, HoverTool, NoOverlap  # noqa: E402

from lab.core.missions import list_missions  # noqa: E402
from siblings import sibling  # noqa: E402  (tests/ui is on sys.path: pytest prepends it)
from screenshots import shot  # noqa: E402  (tests/ is on sys.path)
from lab.ui.catalog import Catalog  # noqa: E402
from lab.ui.views.plots import MAX_X_TICKS, MIN_PLOT_PX, Plots, log_ticks, strip_view, thin_ticks  # noqa: E402
from lab.ui.state import LabState  # noqa: E402





def settle(page, after=0):
    return sibling("test_browser").settle(page, after)


browser_test = pytest.mark.browser

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


def open_lab(page, server, query):
    page.goto(f"{server}/lab?{query}")
    settle(page)
    page.locator('.stf-metrics [data-metric="ttft"]').first.wait_for()


def _mission_queries():
    colocated = next(m for m in MISSIONS if m.scenario.fleet.layout == "colocated" and "layout" in m.controls)
    split = next(m for m in MISSIONS if m.scenario.fleet.layout == "disaggregated" and "layout" in m.controls)
    # The longest title must wrap beside the header's stars, not push them off a phone's screen.
    longest = max(MISSIONS, key=lambda m: len(m.title))
    return [f"mission={colocated.id}", f"mission={split.id}", "mission=sandbox", f"mission={longest.id}"]


@browser_test
@pytest.mark.parametrize("embed", [False, True], ids=["page", "embed"])
@pytest.mark.parametrize("query", _mission_queries(), ids=["colocated", "split", "sandbox", "longest-title"])
def test_no_sideways_scroll_from_320_to_1600_px(browser, new_page, server, query, embed):
    ctx = browser.new_context(viewport={"width": WIDTHS[0], "height": 800})
    try:
        page = new_page(ctx)
        open_lab(page, server, query + ("&embed=1" if embed else ""))
        for width in WIDTHS:
            page.set_viewport_size({"width": width, "height": 800})
            page.wait_for_function(f"window.innerWidth === {width}")
            # Bokeh lays out again after a resize, and the plots' figures are made after the
            # first run's paint (lab/ui/views/plots.py), so they may still be sizing: wait until no
            # element reaches past the screen (bounded), then look at every element again.
            try:
                page.wait_for_function(f"() => {{ const f = ({OFF_RIGHT})(); return f.scroll <= f.width && !f.off.length; }}",
                                       timeout=5_000, polling=100)
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


@browser_test
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
        # Every metric card's title is whole in the narrow cards (it wraps; an ellipsis hid
        # which metric "Goodput per G…" was).
        titles = frame.locator(".stf-metrics .stf-card .k").evaluate_all(
            "els => els.map(e => [e.textContent, e.scrollWidth, e.clientWidth])")
        assert len(titles) >= len(HEADLINE), titles
        assert [t for t in titles if t[1] > t[2]] == [], (mission, titles)
        shot(host, f"embed-700x760-{mission}.png")
    finally:
        ctx.close()


@browser_test
def test_the_plots_of_varied_prompts_at_a_phones_width(browser, new_page, server):
    """Mission 4 (prompts of every length) at 390 px: the plots are there, below the canvas, and
    no wider than the screen; STF_SCREENSHOTS keeps a picture of them to look at."""
    mission = next(m for m in MISSIONS if m.id == "long-document-surge")
    ctx = browser.new_context(viewport={"width": 390, "height": 900})
    try:
        page = new_page(ctx)
        open_lab(page, server, f"mission={mission.id}")
        plots = page.locator(".stf-main .bk-Figure").last
        plots.scroll_into_view_if_needed()
        for name in ("gap_plot", "itl_plot"):
            box = page.evaluate("""(name) => {
                for (const doc of Bokeh.documents) { const m = doc.get_model_by_name(name); if (m) return true; }
                return false; }""", name)
            assert box, name
        assert page.evaluate(OFF_RIGHT)["off"] == []
        shot(page, "plots-long-document-surge-390.png")
    finally:
        ctx.close()


# ---------------------------------------------------------------- the plots' figures, without a browser


def _ran(mission_id=None, catalog=None, query=""):
    catalog = catalog or Catalog()
    state = LabState.from_query(catalog, f"?mission={mission_id}{query}")
    state.run()
    plots = Plots(state, on_sweep=lambda: None)
    return state, plots


def _label_width_px(text):
    return 6.5 * len(text) + 4  # 11 px labels: a generous width per character, plus a gap


def test_one_prompt_length_gets_a_strip_not_a_padded_axis():
    mission = MISSIONS[0]  # every prompt is the same length
    state, plots = _ran(mission.id)
    prompts = {r["prompt_tokens"] for r in state.rows}
    assert len(prompts) == 1
    (length,) = prompts
    shown = list(plots.gap_met.data["x"]) + list(plots.gap_miss.data["x"])
    rng = plots.gap_fig.x_range
    assert rng.start <= min(shown) and max(shown) <= rng.end  # every request on the plot
    assert rng.start > 0.5 * length and rng.end < 1.5 * length  # no invented range of lengths around it
    ticker = plots.gap_fig.xaxis.ticker
    assert isinstance(ticker, FixedTicker) and list(ticker.ticks) == [length]
    assert f"{length:,}" in plots.gap_fig.xaxis.axis_label


def test_varied_prompt_lengths_get_a_plain_axis_with_few_short_labels():
    state, plots = _ran("long-document-surge")
    assert len({r["prompt_tokens"] for r in state.rows}) > 50
    axis = plots.gap_fig.xaxis
    assert isinstance(axis.ticker, BasicTicker) and axis.ticker.desired_num_ticks <= 3
    assert "k" in axis.formatter.code and axis.axis_label == "prompt tokens"
    rng = plots.gap_fig.x_range
    xs = list(plots.gap_met.data["x"]) + list(plots.gap_miss.data["x"])
    assert rng.start <= min(xs) and max(xs) <= rng.end


@pytest.mark.parametrize("mission_id", ["mixing-hurts", "long-document-surge", "chunk-it"])
def test_log_axis_labels_never_touch_at_the_narrowest_plot(mission_id):
    """The gap distribution's x ticks, placed on its log scale in the narrowest plot's frame."""
    _state, plots = _ran(mission_id)
    fig = plots.itl_fig
    ticks = list(fig.xaxis.ticker.ticks)
    assert 2 <= len(ticks) <= MAX_X_TICKS
    lo, hi = math.log10(fig.x_range.start), math.log10(fig.x_range.end)
    frame = MIN_PLOT_PX - 60  # the y axis and its label take the rest
    xs = [(math.log10(t) - lo) / (hi - lo) * frame for t in ticks]
    for (a, ta), (b, tb) in zip(zip(xs, ticks), zip(xs[1:], ticks[1:])):
        assert b - a >= (_label_width_px(f"{ta:g}") + _label_width_px(f"{tb:g}")) / 2, (mission_id, ticks)
    for f in (plots.gap_fig, plots.itl_fig, plots.sweep_fig):  # and Bokeh drops any label that would touch
        assert isinstance(f.xaxis[0].major_label_policy, NoOverlap), f.name


def test_thin_ticks_prefer_round_marks():
    assert thin_ticks(log_ticks(1, 1000), 5) == [1, 10, 100, 1000]
    assert thin_ticks([1, 2, 5, 10, 20, 50], 4) == [1, 5, 10, 50]
    assert thin_ticks([3, 4, 6, 7, 8, 9], 3) == [3, 7]  # no round marks: every k-th
    assert strip_view([2500] * 9) == (2250.0, 2750.0, [2500])
    assert strip_view(range(50)) is None


def test_every_plot_has_a_hover_with_the_points_values():
    _state, plots = _ran("mixing-hurts")
    for fig, fields in ((plots.gap_fig, ("@id", "@prompt", "@y")), (plots.itl_fig, ("@left", "@share")),
                        (plots.sweep_fig, ("@rate", "@goodput", "@attainment"))):
        hovers = [t for t in fig.tools if isinstance(t, HoverTool)]
        assert len(hovers) == 1, fig.name
        text = " ".join(v for _, v in hovers[0].tooltips)
        assert all(f in text for f in fields), (fig.name, text)
        assert hovers[0].renderers and all(r.data_source.data for r in hovers[0].renderers)


def test_the_target_label_is_drawn_over_the_points():
    _state, plots = _ran("mixing-hurts")
    label = plots.gap_label
    assert label.level == "overlay" and label.background_fill_alpha >= 0.8 and label.text == "TPOT target"
    assert label.y == plots.gap_target.location


def test_no_empty_goodput_plot_where_a_trace_replays(tmp_path):
    write_trace_mission = sibling("trace_mission").write_trace_mission
    mission, _trace = write_trace_mission(tmp_path)
    state, plots = _ran(mission["id"], catalog=Catalog(tmp_path))
    assert not state.can_sweep()
    assert not plots.sweep_pane.visible and not plots.sweep_button.visible
    assert "no rate to sweep" in plots.sweep_note.object
    _state, generated = _ran("mixing-hurts")  # a generated workload keeps its sweep
    assert generated.sweep_pane.visible and generated.sweep_button.visible


STRIP_MISSIONS = ("mixing-hurts", "slow-link", "memory-on-demand")
STRIP_VIEWS = {"phone": (390, 844, False), "iframe": (374, 760, True)}
# The fixed strip (not its invisible twin that keeps its room): its box, run and SLO share.
STRIP = """() => {
    const st = [document];
    while (st.length) {
        const r = st.pop();
        const s = r.querySelector(".stf-strip");
        if (s) { const b = s.getBoundingClientRect(), slo = s.querySelector('[data-metric="slo"]');
                 return {top: b.top, bottom: b.bottom, height: b.height, display: getComputedStyle(s).display,
                         run: s.dataset.run, busy: s.dataset.busy, rows: Number(s.dataset.rows || 0),
                         slo: slo ? slo.textContent : null, H: window.innerHeight}; }
        for (const e of r.querySelectorAll("*")) if (e.shadowRoot) st.push(e.shadowRoot);
    }
    return null;
}"""


def _open_in_view(page, server, mission, view):
    """The mission's page at one of STRIP_VIEWS (a phone's viewport, or an iframe of that size
    in a blank page), once its canvas has painted: the frame the lab runs in."""
    width, height, embed = STRIP_VIEWS[view]
    url = f"{server}/lab?mission={mission}" + ("&embed=1" if embed else "")
    if embed:
        page.set_content(f'<iframe id="f" src="{url}" width="{width}" height="{height}" style="border:0;display:block"></iframe>')
        frame = page.frames[1]
    else:
        page.set_viewport_size({"width": width, "height": height})
        page.goto(url)
        frame = page.main_frame
    frame.wait_for_function("Number(document.documentElement.dataset.canvasPainted || 0) >= 1", timeout=30_000)
    return frame


@browser_test
@pytest.mark.parametrize("view", list(STRIP_VIEWS))
@pytest.mark.parametrize("mission", STRIP_MISSIONS)
def test_a_change_shows_its_result_on_a_phone_and_in_a_narrow_embed_without_scrolling(browser, new_page, server,
                                                                                        mission, view):
    """At 390 px and in a 374 x 760 iframe the controls fill the screen: the result strip at its
    bottom shows the new run's SLO share and one bar per GPU row, with nothing scrolled."""
    width, height, embed = STRIP_VIEWS[view]
    ctx = browser.new_context(viewport={"width": max(width, 420), "height": height + 40})
    try:
        frame = _open_in_view(new_page(ctx), server, mission, view)
        page = frame.page
        status = frame.locator('.stf-status[data-busy="false"][data-run]').first
        status.wait_for(state="attached")
        run = status.get_attribute("data-run")
        slider = next(n for n, c in list_missions_by_id()[mission].controls.items() if c.kind != "choice")
        frame.locator(f".stf-control-{slider} .noUi-handle").first.focus()  # a student's change, by key
        frame.page.keyboard.press("ArrowRight")
        frame.wait_for_function(f"""() => {{ const s = ({STRIP})(); return s && s.busy === "false" && s.run !== "{run}"; }}""",
                                timeout=30_000)
        strip = frame.evaluate(STRIP)
        assert strip["display"] == "block" and strip["height"] > 0, strip
        # On screen wherever the page is scrolled (focusing a control lower down scrolls it into view).
        assert strip["top"] >= 0 and strip["bottom"] <= strip["H"] + 0.5, strip
        new_run = frame.locator('.stf-status[data-busy="false"][data-run]').first.get_attribute("data-run")
        assert strip["run"] == new_run != run
        card = frame.locator('.stf-metrics [data-metric="slo"] .v').first.text_content().strip()
        assert strip["slo"] == f"{card} meet the SLO", (strip, card)
        assert strip["rows"] >= 1
        shot(page, f"strip-{mission}-{view}.png")
        if not embed:  # a wide screen has the cards beside the controls: no strip
            page.set_viewport_size({"width": 1366, "height": 800})
            page.wait_for_function(f"() => ({STRIP})().display === 'none'", timeout=10_000)
    finally:
        ctx.close()


def list_missions_by_id():
    return {m.id: m for m in MISSIONS}


# The refusal note under the controls (its sentence and the whole note) and the fixed strip, in
# the frame's own viewport. `scrolled`: how far the frame's page is scrolled.
REFUSAL = """() => {
    const find = (cls) => {
        const st = [document];
        while (st.length) {
            const r = st.pop();
            const hit = r.querySelector("." + cls);
            if (hit) return hit;
            for (const e of r.querySelectorAll("*")) if (e.shadowRoot) st.push(e.shadowRoot);
        }
        return null;
    };
    const box = (el) => { if (!el) return null; const b = el.getBoundingClientRect();
                          return {top: b.top, bottom: b.bottom, left: b.left, right: b.right, height: b.height}; };
    const text = find("stf-refusal"), strip = find("stf-strip");
    return {text: box(text), note: box(text && text.closest(".stf-error")), words: text ? text.textContent : null,
            strip: box(strip), W: window.innerWidth, H: window.innerHeight, scrolled: window.scrollY};
}"""
# Seen at once: inside the viewport and wholly above the strip's top edge.
REFUSAL_SEEN = f"""() => {{ const r = ({REFUSAL})();
    return !!(r.text && r.text.height > 0 && r.note.top >= 0 && r.note.bottom <= r.strip.top + 0.5
              && r.text.left >= 0 && r.text.right <= r.W + 0.5); }}"""


@browser_test
@pytest.mark.parametrize("view", list(STRIP_VIEWS))
def test_a_refusal_shows_above_the_strip_on_a_phone_and_in_a_narrow_embed(browser, new_page, server, view):
    """Mission 12's decode TP 8 on its 4 decode GPUs is refused: the note under the controls
    (its sentence and its Details line) comes into view above the fixed result strip, not
    under it, without the student scrolling."""
    width, height, embed = STRIP_VIEWS[view]
    ctx = browser.new_context(viewport={"width": max(width, 420), "height": height + 40})
    try:
        frame = _open_in_view(new_page(ctx), server, "tp-per-phase", view)
        page = frame.page
        frame.locator('.stf-status[data-busy="false"][data-run]').first.wait_for(state="attached")
        frame.wait_for_function(f"() => {{ const r = ({REFUSAL})(); return r.strip && r.strip.height > 0; }}")
        # The student has scrolled down to the decode TP buttons until they sit just above the
        # strip: the note, which comes under them, would start under the strip. (In the embed
        # they sit higher than that with nothing scrolled, so the page stays at its top.)
        control = frame.locator(".stf-control-decode_tp")
        strip_top = frame.evaluate(REFUSAL)["strip"]["top"]
        frame.evaluate(f"window.scrollBy(0, {control.bounding_box()['y'] + control.bounding_box()['height'] - strip_top + 4})")
        before = control.bounding_box()
        assert before["y"] >= 0 and before["y"] + before["height"] <= strip_top, (before, strip_top)
        control.get_by_role("button", name="8", exact=True).click()  # on screen: Playwright scrolls nothing
        frame.locator(".stf-control-error .stf-refusal").wait_for()
        try:
            frame.wait_for_function(REFUSAL_SEEN, timeout=5_000, polling=100)
        except Exception:
            pass
        seen = frame.evaluate(REFUSAL)
        assert seen["words"].startswith("Decode tensor parallel 8 was not applied"), seen
        assert seen["strip"]["height"] > 0 and seen["strip"]["bottom"] <= seen["H"] + 0.5, seen  # the strip is there
        assert seen["note"]["top"] >= 0 and seen["note"]["bottom"] <= seen["strip"]["top"] + 0.5, seen
        assert seen["text"]["left"] >= 0 and seen["text"]["right"] <= seen["W"] + 0.5, seen
        # The button the student tapped is still on screen too.
        tapped = frame.locator(".stf-control-decode_tp").bounding_box()
        assert tapped and tapped["y"] >= 0, (tapped, seen)
        shot(page, f"refusal-tp-per-phase-{view}.png")
    finally:
        ctx.close()


@browser_test
@pytest.mark.parametrize("path", ["/", "/lab?mission=mixing-hurts"])
def test_lab_serve_pages_lay_out_at_a_phones_width_not_at_980_px(browser, new_page, server, path):
    """A phone lays out a page without a viewport meta 980 px wide and shows it at about 40%."""
    import urllib.request

    with urllib.request.urlopen(server + path, timeout=30) as resp:
        assert '<meta name="viewport" content="width=device-width, initial-scale=1">' in resp.read().decode()
    ctx = browser.new_context(viewport={"width": 390, "height": 844}, is_mobile=True, has_touch=True,
                              device_scale_factor=3)
    try:
        page = new_page(ctx)
        page.goto(server + path)
        page.wait_for_function("document.readyState === 'complete'")
        assert page.evaluate("[window.innerWidth, window.visualViewport.scale]") == [390, 1]
    finally:
        ctx.close()
