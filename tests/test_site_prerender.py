"""The lab page's pre-rendered first view (lab/ui/prerender.py, site_build/prerender.py, loader.js).

Static HTML + SVG of each mission's first run, built into the site: one stamped file per
mission and layout, listed in build-info.json, the same bytes on every build. In Chromium,
offline (test_site_offline's site, with a local Pyodide): the first view shows the numbers,
stars and slow steps the live page then shows; a click on it is refused, visibly, and changes
nothing; the live page replaces it and re-simulates on a control change; a view that is
missing, corrupt or from another build means the normal load, no error; an address with
other settings never uses one.
"""

import gzip
import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from site_run import PANEL_WHEEL, PLOTS_IN, Held
from test_site_offline import LOADED, browser, mirror, site  # noqa: F401  (fixtures: the offline site)

REPO = Path(__file__).resolve().parent.parent
RAN = '.stf-status[data-busy="false"][data-run]'
MISSION = "mixing-hurts"


def _slow_rows_in_svg(text):
    """Per canvas row, the red (slow) steps the view's SVG draws."""
    counts = {}
    for row in re.findall(r'<rect class="slow" data-row="(\d+)"', text):
        counts[int(row)] = counts.get(int(row), 0) + 1
    return counts


# ---------------------------------------------------------------- the view, in CPython

def test_the_first_view_is_the_first_run_at_the_live_pages_window():
    from lab.core.missions import list_missions  # noqa: F401  (the corpus is the repo's)
    from lab.ui.data.canvas_data import timeline_data
    from lab.ui.views.metrics_view import metrics_html
    from lab.ui.prerender import PRERENDER_FORMAT, first_view_html, first_window, view_state
    from lab.ui.state import WINDOW_S

    text = first_view_html(f"mission={MISSION}", stamp="abc123")
    root = re.match(r'<div class="stf-first" data-stamp="([^"]*)" data-format="(\d+)" data-query="([^"]*)">', text)
    assert root and root.groups() == ("abc123", str(PRERENDER_FORMAT), f"mission={MISSION}")
    state, _catalog = view_state(f"mission={MISSION}")
    assert state.run_id == 1 and state.metrics and not state.busy
    assert state.window_start == first_window(state.result) > 0  # not the run's start: where the live page opens
    assert metrics_html(state.metrics, state.scenario) in text  # the headline metrics, as the live pane writes them
    assert 'data-run="1"' in text and "simulated in advance" in text
    # The slow steps drawn: those of the live canvas's data in the window, per GPU row.
    data = timeline_data(state.result, state.scenario.slo.per_token_target_ms)
    slow = data["slow"]
    keep = (slow["right"] >= state.window_start) & (slow["left"] <= state.window_start + WINDOW_S)
    rows, counts = np.unique(slow["y"][keep].astype(int), return_counts=True)
    expected = dict(zip(rows.tolist(), counts.tolist()))
    assert expected and _slow_rows_in_svg(text) == expected
    svg_rows = json.loads(re.search(r"data-slow-rows='([^']*)'", text).group(1))
    assert {int(k): v for k, v in svg_rows.items() if v} == expected
    # The SVG says what it shows (a role and a text alternative naming the slow steps per GPU).
    alt = re.search(r'<svg role="img" aria-labelledby="stf-fv-alt"[^>]*><title id="stf-fv-alt">([^<]+)</title>', text)
    assert alt and f"GPU 0 · colocated: {expected.get(1, 0)}," in alt.group(1)


@pytest.mark.parametrize("query", ["mission=sandbox&gpus=7&t=0", "mission=mixing-hurts&layout=disaggregated&t=30.3",
                                   "mission=sandbox&layout=disaggregated&prefill_gpus=3&decode_gpus=5&t=55.5"])
def test_the_views_steps_are_the_whole_runs_in_its_window(monkeypatch, query):
    """The view builds only its window's steps (as the live canvas does): the same SVG as from
    the whole run's."""
    from lab.ui import prerender
    from lab.ui.data.canvas_data import step_layers

    state, _catalog = prerender.view_state(query)
    windowed = prerender.canvas_html(state, embed=False)
    monkeypatch.setattr(prerender, "step_layers", lambda result, target, meta, span: step_layers(result, target, meta))
    assert prerender.canvas_html(state, embed=False) == windowed and windowed.count("<rect") > 100


def test_the_embed_is_its_own_layout_and_the_controls_show_their_start():
    from lab.ui.prerender import first_view_html

    full = first_view_html(f"mission={MISSION}")
    embed = first_view_html(f"mission={MISSION}&embed=1")
    assert 'class="stf-first stf-fv-embed"' in embed and "stf-fv-embed" not in full.split(">")[0]
    assert "Mission 1 of" in full and "2.5 s window" in full and "2.5 s window" not in embed
    # The layout choice shows its start (colocated), the split one as a button not chosen; the pool
    # sizes of a split fleet greyed, with the line saying when they matter. Real controls, disabled
    # until the worker can answer them (loader.js enables them).
    assert ('<button type="button" class="stf-fv-btn on" data-value="colocated" aria-pressed="true" disabled>'
            'Colocated</button>') in full
    assert ('<button type="button" class="stf-fv-btn" data-value="disaggregated" aria-pressed="false" disabled>'
            'Split (prefill | decode)</button>') in full
    assert 'class="stf-fv-control idle" data-control="prefill_gpus"' in full and "Greyed out:" in full
    assert '<input type="range" id="stf-fv-gpus" min="2" max="8" step="1" value="4" aria-valuetext="4" disabled>' in full


def test_a_first_view_is_the_same_bytes_on_every_run():
    code = ("import sys; from lab.ui.prerender import first_view_html; "
            f"sys.stdout.write(first_view_html('mission={MISSION}&embed=1', stamp='s'))")
    outs = []
    for seed in ("0", "12345"):  # nothing may hang on hash order
        proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, timeout=300,
                              env={"PYTHONHASHSEED": seed, "PATH": "/usr/bin:/bin"})
        assert proc.returncode == 0, proc.stderr[-2000:]
        outs.append(proc.stdout)
    assert outs[0] == outs[1] and len(outs[0]) > 10_000


def test_a_first_view_is_drawn_without_panel_or_bokeh():
    """What draws the first view imports neither (so a worker can draw it before Panel is up)."""
    code = ("import sys; from lab.ui.prerender import first_view_html; first_view_html('mission=sandbox'); "
            "print(sorted({m.split('.')[0] for m in sys.modules} & {'panel', 'bokeh', 'pyviz_comms', 'lab'}))")
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.split() == ["['lab']"]


# ---------------------------------------------------------------- the build

def test_every_mission_has_a_stamped_first_view_for_both_layouts(site):
    from lab.core.missions import list_missions
    from lab.ui.prerender import PRERENDER_FORMAT

    dist = Path(site.root)
    info = json.loads((dist / "build-info.json").read_text(encoding="utf-8"))
    ids = [m.id for m in list_missions(str(REPO / "missions"))] + ["sandbox"]
    expected = sorted(f"prerender/{i}{e}.html" for i in ids for e in ("", ".embed"))
    assert sorted(info["prerender"]["files"]) == expected
    assert all(name in info["files"] for name in expected)  # hashed like every other file
    config = json.loads(re.search(r'id="stf-config">(.*?)</script>', (dist / "lab.html").read_text(encoding="utf-8"),
                                  re.S).group(1))
    assert config["prerender"] == {"stamp": info["prerender"]["stamp"], "format": PRERENDER_FORMAT}
    for name, query in ((f"{MISSION}.html", f"mission={MISSION}"), (f"{MISSION}.embed.html", f"mission={MISSION}&embed=1")):
        head = (dist / "prerender" / name).read_text(encoding="utf-8")[:300]
        assert (f'data-stamp="{config["prerender"]["stamp"]}" data-format="{PRERENDER_FORMAT}" '
                f'data-query="{query.replace("&", "&amp;")}"') in head
        # What loader.js fetches: the .gz beside each file (test_build checks it unpacks to it).
        assert (dist / "prerender" / (name + ".gz")).is_file()
    assert not list((dist / "prerender").glob("*.json*"))  # no BokehJS documents any more


# ---------------------------------------------------------------- in the browser

def _text(page, root, css):
    return page.locator(f"{root} {css}").first.inner_text()


def _live_metrics(page):
    """The live page's metrics card, once it shows them: the loader says "done" when the page is
    drawn, and on a busy machine the card's own patch can follow it (it was read empty once in CI)."""
    from playwright.sync_api import expect

    card = page.locator(f"#stf-live {SHOWN['metrics']}").first
    expect(card).not_to_have_text(re.compile(r"^\s*$"), timeout=60_000)
    return card.inner_text()


# Inside shadow roots (a locator pierces them): the live panes', and the first view's own.
SHOWN = {"metrics": ".stf-metrics", "stars": ".stf-stars", "header stars": ".stf-head-stars"}

# The live canvas's slow steps in its window, per row: the data source of the red, hatched boxes.
LIVE_SLOW_ROWS = """() => {
  const doc = Bokeh.documents[Bokeh.documents.length - 1];
  const t0 = Number(document.documentElement.dataset.canvasWindow);
  for (const m of doc.all_models) {
    const g = m.glyph, src = m.data_source;
    if (!g || !src || g.hatch_pattern === undefined) continue;
    const fill = JSON.stringify(g.fill_color).toUpperCase(), hatch = JSON.stringify(g.hatch_pattern);
    if (!fill.includes("D7191C") || !hatch.includes("/") || !src.data.batch) continue;
    const out = {};
    const d = src.data;
    for (let i = 0; i < d.left.length; i++) {
      if (d.right[i] >= t0 && d.left[i] <= t0 + 2.5) out[d.y[i]] = (out[d.y[i]] || 0) + 1;
    }
    return {t0, rows: out};
  }
  return null;
}"""


def test_the_first_view_shows_the_live_numbers_and_steps_then_the_live_page_takes_over(browser, site):
    from playwright.sync_api import expect

    context = browser.new_context(viewport={"width": 1280, "height": 900})
    # The lab's wheel is held until after the click below: the worker cannot answer the view before it has it.
    lab_wheel = Held(context, r".*/wheels/split_the_fleet-.*")
    page = context.new_page()
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    try:
        page.goto(site.url(f"lab.html?mission={MISSION}"))
        page.wait_for_selector("html.stf-prerendered", state="attached", timeout=120_000)
        loader = page.locator("#stf-loader")
        assert loader.get_attribute("data-mode") == "prerendered"
        expect(page.locator("#stf-loader-title")).to_have_text(re.compile(r"^Starting the simulator… step [123] of 3 "))
        assert page.evaluate("() => document.getElementById('stf-prerender').inert") is True
        before = {k: _text(page, "#stf-prerender", css) for k, css in SHOWN.items()}
        assert re.search(r"TTFT p50 / p99\s+\d+\s*ms", before["metrics"]), before["metrics"]
        assert page.locator(f"#stf-prerender {RAN}").first.get_attribute("data-run") == "1"
        drawn = page.evaluate("""() => {
          const out = {};
          for (const r of document.getElementById('stf-prerender').shadowRoot.querySelectorAll('rect.slow'))
            out[r.dataset.row] = (out[r.dataset.row] || 0) + 1;
          return out; }""")
        assert drawn
        # A click on a control of the first view before the worker can answer it: refused, and
        # the bar says so.
        box = page.locator("#stf-prerender").get_by_text("Split (prefill | decode)").first.bounding_box()
        page.mouse.click(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
        expect(page.locator("#stf-loader-detail")).to_contain_text("Nothing was changed", timeout=5_000)
        assert page.locator('#stf-prerender [data-value="disaggregated"]').get_attribute("aria-pressed") == "false"
        lab_wheel.release()

        page.wait_for_selector(LOADED, state="attached", timeout=600_000)
        assert page.get_attribute("#stf-loader", "data-state") == "done", page.inner_text("#stf-error-message")
        assert page.locator("#stf-prerender").count() == 0
        assert "stf-prerendered" not in (page.get_attribute("html", "class") or "")
        after = {k: _text(page, "#stf-live", css) for k, css in SHOWN.items()}
        assert after == before  # the same numbers and stars: the click changed nothing
        assert page.locator(f"#stf-live {RAN}").first.get_attribute("data-run") == "1"
        live = page.evaluate(LIVE_SLOW_ROWS)
        assert live is not None
        assert {str(int(float(k))): v for k, v in live["rows"].items()} == drawn  # the same red steps, GPU by GPU
        timeline = page.evaluate("() => STFLoader.state.timeline")
        stages = [e["stage"] for e in timeline]
        assert stages.index("prerendered") < stages.index("live") < stages.index("swap") < stages.index("drawn"), stages
        # BokehJS and Panel's JS ran only once the first view's controls worked (not meanwhile,
        # taking the cores from the worker's start), and before the live page needed them.
        assert stages.index("early-ready") < stages.index("scripts") < stages.index("live"), stages
        # The swap came with the first run's metrics and stars (the lab's judged mark), not after
        # a quiet wait; the plots follow.
        assert [e["detail"] for e in timeline if e["stage"] == "swap"] == ["judged"], timeline
        assert page.locator('#stf-live [data-judged-run="1"]').count() == 1
        page.wait_for_function(PLOTS_IN, timeout=60_000)

        # Live: a control change re-simulates.
        page.locator("#stf-live").get_by_role("button", name="Split (prefill | decode)").first.click()
        expect(page.locator(f"#stf-live {RAN}").first).not_to_have_attribute("data-run", "1", timeout=120_000)
        assert _text(page, "#stf-live", SHOWN["metrics"]) != before["metrics"]
        assert errors == []
    finally:
        context.close()


# The lab's control (its stf-control-* class, or stf-reset) that holds the keyboard's focus,
# through Bokeh's shadow roots, or null.
FOCUSED_CONTROL = """() => {
  let el = document.activeElement;
  while (el && el.shadowRoot && el.shadowRoot.activeElement) el = el.shadowRoot.activeElement;
  for (; el; el = el.parentElement || (el.getRootNode() && el.getRootNode().host)) {
    const name = [...(el.classList || [])].find((c) => c.startsWith("stf-control-") || c === "stf-reset");
    if (name) return name;
  }
  return null;
}"""


# The loader's answers to the first view's changes (their timeline moments).
EARLY_VIEWS = "() => STFLoader.state.timeline.filter((e) => e.stage === 'early-view')"


def _early_view(browser, site):
    """The mission opened in a new context with Panel's wheel held (so the first view stays),
    once the view's controls work: (context, the held wheel, page, its errors, the view)."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    try:
        panel_wheel = Held(context, PANEL_WHEEL)
        page = context.new_page()
        errors = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(site.url(f"lab.html?mission={MISSION}"))
        page.wait_for_selector('#stf-prerender[data-early="open"]', state="attached", timeout=300_000)
    except Exception:
        context.close()
        raise
    return context, panel_wheel, page, errors, page.locator("#stf-prerender")


def test_the_first_views_controls_work_before_the_live_page(browser, site):
    """Once the worker can answer them, the first view's controls run: the view of the new
    settings, the address with them; by keys too, the focus kept; a click elsewhere on the view
    is refused, visibly. The live page then opens at those settings with the same run, and
    counts them as the student's (stars)."""
    from playwright.sync_api import expect

    context, panel_wheel, page, errors, view = _early_view(browser, site)
    views = f"() => ({EARLY_VIEWS})().length"
    try:
        expect(page.locator("#stf-loader-title")).to_contain_text("The controls work")
        before = _text(page, "#stf-prerender", SHOWN["metrics"])
        split = view.get_by_role("button", name="Split (prefill | decode)")
        expect(split).to_be_enabled()
        expect(view.locator('[data-control="prefill_gpus"] input')).to_be_disabled()  # greyed out: colocated
        split.click()
        page.wait_for_function(f"() => ({views})() === 1", timeout=60_000)
        assert page.url.endswith(f"lab.html?mission={MISSION}&layout=disaggregated")
        expect(split).to_have_attribute("aria-pressed", "true")
        expect(view.locator(".stf-status")).to_contain_text("simulated while the lab loads")
        assert _text(page, "#stf-prerender", SHOWN["metrics"]) != before
        # The decode pool's slider by keys: one notch up, the focus still on it after the new view.
        decode = view.locator("#stf-fv-decode_gpus")
        decode.focus()
        page.keyboard.press("ArrowRight")
        page.wait_for_function(f"() => ({views})() === 2", timeout=60_000)
        assert page.url.endswith("&layout=disaggregated&decode_gpus=2")
        expect(decode).to_have_attribute("value", "2")
        focused = page.evaluate(f"() => ({EARLY_VIEWS})().map((e) => e.detail)")
        assert focused == ["layout", "decode_gpus"]  # the focus stayed on the control that changed
        expect(decode).to_be_focused()
        shown = {k: _text(page, "#stf-prerender", css) for k, css in SHOWN.items() if k == "metrics"}
        # Anything else on the view (the play button's place) is refused, and the bar says so.
        view.get_by_text("▶ Play").click()
        expect(page.locator("#stf-loader-detail")).to_contain_text("Only the fleet's controls work yet")
        assert page.evaluate(views) == 2 and page.url.endswith("&decode_gpus=2")
        decode.focus()  # (the click took the focus off it) the student goes back to the slider
        panel_wheel.release()

        page.wait_for_selector(LOADED, state="attached", timeout=600_000)
        assert page.get_attribute("#stf-loader", "data-state") == "done", page.inner_text("#stf-error-message")
        live = page.locator("#stf-live")
        expect(live.get_by_role("button", name="Split (prefill | decode)").first).to_have_class(re.compile("bk-active"))
        assert {"metrics": _live_metrics(page)} == shown  # the same run, the same numbers
        assert page.url.endswith("&layout=disaggregated&decode_gpus=2")
        assert "Stars count once you change a control" not in _text(page, "#stf-live", SHOWN["stars"])
        # The keyboard's focus, on the decode slider when the view closed, is on the live page's
        # decode slider: the next key press moves it.
        assert page.evaluate("() => STFLoader.state.timeline.filter((e) => e.stage === 'focus').map((e) => e.detail)") == [
            "decode_gpus"]
        assert page.evaluate(FOCUSED_CONTROL) == "stf-control-decode_gpus"
        page.keyboard.press("ArrowRight")
        page.wait_for_function("() => window.location.search.endsWith('&decode_gpus=3')", timeout=120_000)
        assert errors == []
    finally:
        context.close()


def test_the_first_views_back_to_the_start_works_before_the_live_page(browser, site):
    """"↺ Back to the start" on the first view, once its controls work: greyed at the start, it
    takes a change back (the view and the address of the mission's start), by a click or a key,
    and keeps the focus; the live page opens at the start with the focus on its own reset button."""
    from playwright.sync_api import expect

    context, panel_wheel, page, errors, view = _early_view(browser, site)
    try:
        start = _text(page, "#stf-prerender", SHOWN["metrics"])
        reset = view.locator("button[data-reset]")
        expect(reset).to_have_attribute("aria-disabled", "true")  # nothing to undo yet
        reset.click(force=True)  # (greyed: nothing happens, and it is a control: no nudge)
        view.get_by_role("button", name="Split (prefill | decode)").click()
        page.wait_for_function(f"() => ({EARLY_VIEWS})().length === 1", timeout=60_000)
        assert page.url.endswith("&layout=disaggregated")
        expect(view.locator("button[data-reset]")).not_to_have_attribute("aria-disabled", "true")
        view.locator("button[data-reset]").focus()
        page.keyboard.press("Enter")
        page.wait_for_function(f"() => ({EARLY_VIEWS})().length === 2", timeout=60_000)
        assert page.url.endswith(f"lab.html?mission={MISSION}")
        assert page.evaluate(f"() => ({EARLY_VIEWS})().map((e) => e.detail)") == ["layout", "reset"]  # the focus kept on each
        expect(view.locator("button[data-reset]")).to_have_attribute("aria-disabled", "true")
        expect(view.locator("button[data-reset]")).to_be_focused()
        expect(view.locator('[data-value="colocated"]')).to_have_attribute("aria-pressed", "true")
        assert _text(page, "#stf-prerender", SHOWN["metrics"]) == start  # the start's own run again
        assert "Only the fleet's controls" not in page.inner_text("#stf-loader-detail")
        panel_wheel.release()

        page.wait_for_selector(LOADED, state="attached", timeout=600_000)
        assert page.get_attribute("#stf-loader", "data-state") == "done", page.inner_text("#stf-error-message")
        assert page.url.endswith(f"lab.html?mission={MISSION}")
        assert _live_metrics(page) == start
        assert page.evaluate(FOCUSED_CONTROL) == "stf-reset"
        # The student's way back counted as their change, as on the live page: stars count.
        assert "Stars count once you change a control" not in _text(page, "#stf-live", SHOWN["stars"])
        assert errors == []
    finally:
        context.close()


def _fake(kind, site):
    if kind == "missing":
        return {"status": 404, "body": b"not here"}
    if kind == "corrupt":
        return {"status": 200, "body": b"\x1f\x8b\x08 <div>this is not a first view", "content_type": "text/html"}
    real = (Path(site.root) / f"prerender/{MISSION}.html").read_text(encoding="utf-8")
    stale = re.sub(r'data-stamp="[^"]*"', 'data-stamp="0000000000000000"', real, count=1)  # another build's file
    return {"status": 200, "body": gzip.compress(stale.encode("utf-8")), "content_type": "application/gzip"}


@pytest.mark.parametrize("kind", ["missing", "corrupt", "stale"])
def test_a_missing_corrupt_or_stale_first_view_means_the_normal_load(browser, site, kind):
    context = browser.new_context(viewport={"width": 1000, "height": 800}, service_workers="block")
    fake = _fake(kind, site)
    asked = []

    def answer(route):
        asked.append(route.request.url)
        route.fulfill(**fake)

    context.route(re.compile(r".*/prerender/.*"), answer)
    page = context.new_page()
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    try:
        page.goto(site.url(f"lab.html?mission={MISSION}"))
        page.wait_for_selector(LOADED, state="attached", timeout=600_000)
        assert page.get_attribute("#stf-loader", "data-state") == "done", page.inner_text("#stf-error-message")
        page.locator(RAN).first.wait_for(timeout=120_000)
        assert asked and asked[0].endswith(f"/prerender/{MISSION}.html.gz")
        stages = [e["stage"] for e in page.evaluate("() => STFLoader.state.timeline")]
        assert "prerendered" not in stages and "drawn" in stages, stages
        assert page.locator("#stf-prerender").count() == 0
        assert errors == []
    finally:
        context.close()


@pytest.mark.parametrize("query, expected", [
    (f"mission={MISSION}", f"./prerender/{MISSION}.html"),
    (f"mission={MISSION}&embed=1", f"./prerender/{MISSION}.embed.html"),
    (f"mission={MISSION}&gpus=6", None),        # other controls: not the mission's start
    (f"mission={MISSION}&hide=brief", None),
    (f"mission={MISSION}&embed=0", None),
    ("mission=no-such-mission", None),
    ("", None),
])
def test_only_a_mission_at_its_start_uses_a_first_view(browser, site, query, expected):
    context = browser.new_context(service_workers="block")
    page = context.new_page()
    try:
        page.goto(site.url("lab.html?" + query))
        assert page.evaluate("() => STFLoader.prerender.file") == expected
    finally:
        context.close()


def test_mission_text_reaches_the_first_view_as_text(tmp_path):
    """The hostile missions' titles, briefs, star and control labels: shown, never markup (the
    view goes into the page with innerHTML, where an <img onerror> would run)."""
    from mission_text_payloads import write_hostile_missions

    from lab.ui.prerender import first_view_html

    folder = write_hostile_missions(tmp_path / "missions")
    for mission_id in ("xss-brief", "xss-comment", "xss-close"):
        text = first_view_html(f"mission={mission_id}", str(folder))
        assert not re.search(r"<(script|img|iframe|math|details|a (?!href=\"#stf-safe\"))|<!--|<svg\s+onload", text, re.I), mission_id
        if mission_id == "xss-brief":
            assert "&lt;img src=x onerror=window.__pwned=1&gt;GPUs" in text  # the control's label: there, as text
        assert text.count("<style>") == 1, mission_id  # only the view's own
