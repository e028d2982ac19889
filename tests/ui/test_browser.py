"""The lab in a real browser: `lab serve` + Playwright driving Debian's Chromium.

Each test runs in a fresh browser context (its own localStorage). Every page fails its
test on a console error, an uncaught error, a dialog, or a request leaving the machine
(the lab must work offline). Waits are on DOM conditions, never sleeps: the canvas
marks <html data-canvas-painted="N"> two animation frames after run N's data arrived.
"""

import json
import re

import pytest

pytest.importorskip("playwright.sync_api")

import lab.core as core  # noqa: E402
from lab.core.missions import list_missions  # noqa: E402
from lab.ui.words.control_words import CHOICE_LABELS  # noqa: E402
from lab.ui.stars.stars_bridge import BACKUP_KEY, STORAGE_KEY  # noqa: E402
from lab.ui.views.metrics_view import FRESH_STYLES, STALE_STYLES  # noqa: E402
from site_run import PLOTS_IN  # noqa: E402  (tests/ is on sys.path)

pytestmark = pytest.mark.browser

MISSIONS = list_missions()


def painted(page):
    return int(page.evaluate("document.documentElement.dataset.canvasPainted || '0'"))


def wait_painted(page, after=0):
    page.wait_for_function(
        f"Number(document.documentElement.dataset.canvasPainted || 0) > {after}", timeout=30_000
    )
    return painted(page)


def settle(page, after=0):
    """Wait until the lab is idle, run N (> after) is painted and the plots are in; returns N."""
    wait_painted(page, after)
    status = page.locator('.stf-status[data-busy="false"][data-run]')
    status.wait_for(state="attached")
    run = int(status.get_attribute("data-run"))
    page.wait_for_function(f"Number(document.documentElement.dataset.canvasPainted || 0) >= {run}")
    page.wait_for_function(PLOTS_IN, timeout=30_000)
    return run


WATCH_BUSY = """() => {
    window.__stfSawBusy = false;
    const find = (cls) => {
        const stack = [document.body];
        while (stack.length) {
            const node = stack.pop();
            if (node.classList && node.classList.contains(cls)) return node;
            if (node.shadowRoot) stack.push(node.shadowRoot);
            for (const child of (node.children || [])) stack.push(child);
        }
        return null;
    };
    const host = find("stf-status-pane");
    const root = host.shadowRoot || host;
    // The style opacity of the metric cards', the stars' and the blame's panes (FADES reads them again later)
    const fades = window.__stfFades = () => ["stf-metrics-pane", "stf-stars-pane", "stf-blame-pane"].map((cls) => find(cls).style.opacity);
    const check = () => {
        const el = root.querySelector('[data-busy="true"]');
        if (el && !window.__stfSawBusy) { window.__stfSawBusy = true; window.__stfBusyText = el.textContent; window.__stfBusyFades = fades(); }
    };
    new MutationObserver(check).observe(root, {subtree: true, childList: true, attributes: true, characterData: true});
}"""
FADES = "() => window.__stfFades()"  # (after WATCH_BUSY)


def open_lab(page, base, query):
    page.goto(f"{base}/lab?{query}")
    return settle(page)


def metric_text(page, name):
    return page.locator(f'[data-metric="{name}"] .v').inner_text()


def stored(page):
    raw = page.evaluate(f"localStorage.getItem({json.dumps(STORAGE_KEY)})")
    return None if raw is None else json.loads(raw)


def winning_change(mission):
    """The fleet change the mission is after: the simplest that earns a star the start does not.

    Single changes first (switching the layout before anything else), then a layout
    switch plus one pool size. Returned as an ordered list of (control, value).
    """
    start = mission.settings(mission.scenario)
    before = mission.evaluate(core.summarize(core.simulate(mission.scenario)))

    def earns(changes):
        try:
            scenario = mission.apply({**start, **dict(changes)})
        except core.LabError:
            return False
        now = mission.evaluate(core.summarize(core.simulate(scenario)))
        return any(n and not b for n, b in zip(now, before))

    order = sorted(mission.controls.values(), key=lambda c: c.name != "layout")
    for c in order:
        for value in c.grid() or []:
            if value != start[c.name] and c.applies(mission.apply({**start, c.name: value})) and earns([(c.name, value)]):
                return [(c.name, value)]
    if "layout" in mission.controls:
        for other in ("layout",):
            for value in mission.controls[other].choices:
                if value == start[other]:
                    continue
                for c in mission.controls.values():
                    for v in c.grid() or []:
                        if c.name != other and v != start[c.name] and earns([(other, value), (c.name, v)]):
                            return [(other, value), (c.name, v)]
    raise AssertionError(f"no simple change earns a star in {mission.id}")


def apply_in_ui(page, mission, name, value):
    """Move one control the way a student would: click a choice, or arrow keys on a slider."""
    control = mission.controls[name]
    before = painted(page)
    if control.kind == "choice":
        label = CHOICE_LABELS.get(name, {}).get(value, str(value))
        page.locator(f".stf-control-{name}").get_by_role("button", name=label, exact=True).click()
    else:
        handle = page.locator(f".stf-control-{name} .noUi-handle")
        current = float(handle.get_attribute("aria-valuenow"))
        steps = int(round((value - current) / (control.step or 1)))
        handle.focus()
        for _ in range(abs(steps)):
            page.keyboard.press("ArrowRight" if steps > 0 else "ArrowLeft")
    page.wait_for_function(f"location.search.includes({json.dumps(f'{name}=')})")
    return settle(page, before)


# ---------------------------------------------------------------- the hub


def test_hub_lists_every_mission_in_order_then_the_sandbox(page, server):
    page.goto(server + "/")
    page.locator('ul.stf-missions[data-loaded="true"]').wait_for()
    cards = page.locator("a.stf-mission")
    ids = cards.evaluate_all("els => els.map(e => e.dataset.mission)")
    assert ids == [m.id for m in MISSIONS] + ["sandbox"]
    for i, m in enumerate(MISSIONS):
        card = cards.nth(i)
        assert m.title in card.inner_text()
        assert card.get_attribute("href") == f"lab?mission={m.id}"
        assert card.get_attribute("data-stars") == "0"
    assert page.locator(".stf-reset-progress button").is_visible()


# ---------------------------------------------------------------- mission 1, end to end


def test_mission_one_change_fleet_earn_star_and_find_it_on_the_hub(page, server):
    m1 = MISSIONS[0]
    changes = winning_change(m1)
    page.goto(server + "/")
    page.locator('ul.stf-missions[data-loaded="true"]').wait_for()
    page.locator(f'a.stf-mission[data-mission="{m1.id}"]').click()
    page.wait_for_url(re.compile(rf"/lab\?mission={m1.id}"))
    first = settle(page)
    assert page.locator("h1.stf-title").inner_text() == m1.title
    rows_before = page.evaluate("document.documentElement.dataset.canvasRows")
    shown_before = {n: metric_text(page, n) for n in ("slo", "gap", "tpot", "goodput")}
    assert page.locator('.stf-star[data-earned="true"]').count() == 0

    for name, value in changes:
        apply_in_ui(page, m1, name, value)

    rows_after = page.evaluate("document.documentElement.dataset.canvasRows")
    shown_after = {n: metric_text(page, n) for n in ("slo", "gap", "tpot", "goodput")}
    assert painted(page) > first
    assert shown_after != shown_before, "the metrics did not change"
    if any(n in ("layout", "gpus", "prefill_gpus", "decode_gpus") for n, _ in changes):
        assert rows_after != rows_before, "the canvas rows did not change"
    # A live tick and a saved star.
    assert page.locator('.stf-star[data-live="true"]').count() >= 1
    page.locator('.stf-star[data-earned="true"]').first.wait_for()
    page.wait_for_function(f"(localStorage.getItem({json.dumps(STORAGE_KEY)}) || '').includes('true')")
    saved = stored(page)
    assert saved["version"] == 1 and any(saved["stars"][m1.id])
    earned = sum(saved["stars"][m1.id])

    # Back to the hub, and after a reload the star is still there.
    page.locator("a", has_text="All missions").click()
    card = page.locator(f'a.stf-mission[data-mission="{m1.id}"]')
    page.locator('ul.stf-missions[data-loaded="true"]').wait_for()
    assert card.get_attribute("data-stars") == str(earned)
    page.reload()
    page.locator('ul.stf-missions[data-loaded="true"]').wait_for()
    assert page.locator(f'a.stf-mission[data-mission="{m1.id}"]').get_attribute("data-stars") == str(earned)
    assert f"★ {earned} of" in page.locator(".stf-total").inner_text()


def test_busy_indicator_shows_while_resimulating(page, server):
    m1 = MISSIONS[0]
    open_lab(page, server, f"mission={m1.id}")
    name, value = winning_change(m1)[0]
    control = m1.controls[name]
    before = painted(page)
    # Watch the status element itself, so a short busy spell cannot slip between polls.
    page.evaluate(WATCH_BUSY)
    if control.kind == "choice":
        label = CHOICE_LABELS.get(name, {}).get(value, str(value))
        page.locator(f".stf-control-{name}").get_by_role("button", name=label, exact=True).click()
    else:
        page.locator(f".stf-control-{name} .noUi-handle").focus()
        page.keyboard.press("ArrowRight")
    page.wait_for_function("window.__stfSawBusy === true")
    assert "Simulating" in page.evaluate("window.__stfBusyText")
    # Until the new run's metrics are in, the cards, stars and blame bar still show the run before: faded
    assert page.evaluate("window.__stfBusyFades") == [STALE_STYLES["opacity"]] * 3
    settle(page, before)
    assert page.locator('.stf-status[data-busy="true"]').count() == 0
    assert page.evaluate(FADES) == [FRESH_STYLES["opacity"]] * 3


# ---------------------------------------------------------------- URL state


def test_url_round_trip_reproduces_the_state(new_page, server):
    m1 = MISSIONS[0]
    page = new_page()
    open_lab(page, server, f"mission={m1.id}")
    for name, value in winning_change(m1):
        apply_in_ui(page, m1, name, value)
    url = page.url
    assert "mission=" + m1.id in url
    shown = {n: metric_text(page, n) for n in ("ttft", "tpot", "gap", "slo", "goodput")}
    rows = page.evaluate("document.documentElement.dataset.canvasRows")

    other = new_page()
    other.goto(url)
    settle(other)
    assert {n: metric_text(other, n) for n in ("ttft", "tpot", "gap", "slo", "goodput")} == shown
    assert other.evaluate("document.documentElement.dataset.canvasRows") == rows
    assert other.locator(".stf-notes-pane .stf-notes").count() == 0
    assert other.url == url  # the page writes back the same address


def test_hostile_url_falls_back_with_a_visible_note(page, server):
    page.goto(server + "/lab?mission=../../etc&gpus=1e99&layout=<script>alert(1)</script>")
    settle(page)
    notes = page.locator(".stf-notes")
    notes.wait_for()
    text = notes.inner_text()
    assert "There is no mission ../../etc" in text
    assert page.locator("h1.stf-title").inner_text() == MISSIONS[0].title
    assert page.evaluate("typeof window.__pwned") == "undefined"


def test_bad_values_for_a_real_mission_are_named_in_the_note(page, server):
    m1 = MISSIONS[0]
    numeric = next(c for c in m1.controls.values() if c.kind == "int")
    page.goto(f"{server}/lab?mission={m1.id}&{numeric.name}=abc&layout=%3Cimg%20src%3Dx%20onerror%3Dwindow.__pwned%3D1%3E")
    settle(page)
    text = page.locator(".stf-notes").inner_text()
    assert f"Ignored {numeric.name}=abc: expected a whole number; using the mission's start" in text
    assert "<img" in text  # shown as text, not markup
    assert page.evaluate("typeof window.__pwned") == "undefined"
    assert page.locator(".stf-notes img").count() == 0


# ---------------------------------------------------------------- stars storage


def test_corrupt_local_storage_is_set_aside_without_losing_other_stars(page, server):
    m1, m2 = MISSIONS[0], MISSIONS[1]
    page.goto(server + "/")
    page.locator('ul.stf-missions[data-loaded="true"]').wait_for()
    good = [True] + [False] * (len(m1.stars) - 1)
    corrupt = {"version": 1, "stars": {m1.id: good, m2.id: "garbage", "Not An Id": [True]}}
    page.evaluate(f"localStorage.setItem({json.dumps(STORAGE_KEY)}, {json.dumps(json.dumps(corrupt))})")
    page.reload()
    page.locator('ul.stf-missions[data-loaded="true"]').wait_for()
    assert page.locator(f'a.stf-mission[data-mission="{m1.id}"]').get_attribute("data-stars") == "1"
    assert page.locator(f'a.stf-mission[data-mission="{m2.id}"]').get_attribute("data-stars") == "0"
    assert "could not be read" in page.locator(".stf-hub-note .stf-notes").inner_text()
    assert json.loads(page.evaluate(f"localStorage.getItem({json.dumps(BACKUP_KEY)})")) == corrupt
    assert stored(page) == {"version": 1, "stars": {m1.id: good}}

    # Wholly unreadable JSON: the hub still works, the raw text is backed up.
    page.evaluate(f"localStorage.setItem({json.dumps(STORAGE_KEY)}, '{{not json')")
    page.reload()
    page.locator('ul.stf-missions[data-loaded="true"]').wait_for()
    assert page.evaluate(f"localStorage.getItem({json.dumps(BACKUP_KEY)})") == "{not json"
    assert stored(page) == {"version": 1, "stars": {}}


def test_earning_a_star_keeps_stars_of_other_missions(page, server):
    m1, m2 = MISSIONS[0], MISSIONS[1]
    page.goto(server + "/")
    page.locator('ul.stf-missions[data-loaded="true"]').wait_for()
    other = [True] * len(m2.stars)
    data = {"version": 1, "stars": {m2.id: other, m1.id: [False, "x"]}}
    page.evaluate(f"localStorage.setItem({json.dumps(STORAGE_KEY)}, {json.dumps(json.dumps(data))})")
    open_lab(page, server, f"mission={m1.id}")
    for name, value in winning_change(m1):
        apply_in_ui(page, m1, name, value)
    page.wait_for_function(
        f"JSON.parse(localStorage.getItem({json.dumps(STORAGE_KEY)})).stars[{json.dumps(m1.id)}].includes(true)"
    )
    saved = stored(page)
    assert saved["stars"][m2.id] == other


def test_reset_progress_asks_first_then_clears(page, server):
    m1 = MISSIONS[0]
    page.goto(server + "/")
    page.locator('ul.stf-missions[data-loaded="true"]').wait_for()
    page.evaluate(f"localStorage.setItem({json.dumps(STORAGE_KEY)}, "
                  f"{json.dumps(json.dumps({'version': 1, 'stars': {m1.id: [True]}}))})")
    page.reload()
    card = page.locator(f'a.stf-mission[data-mission="{m1.id}"][data-stars="1"]')
    card.wait_for()
    button = page.locator(".stf-reset-progress button")
    button.click()
    page.locator(".stf-reset-progress button", has_text="again").wait_for()
    assert stored(page) is not None  # one click only arms it
    button.click()
    page.locator(f'a.stf-mission[data-mission="{m1.id}"][data-stars="0"]').wait_for()
    assert stored(page) is None


# ---------------------------------------------------------------- playback, sweep, embed


def test_play_and_pause_from_the_keyboard_move_the_window(page, server):
    open_lab(page, server, f"mission={MISSIONS[0].id}&t=5")
    start = float(page.evaluate("document.documentElement.dataset.canvasWindow"))
    play = page.locator(".stf-play button")
    play.focus()
    page.keyboard.press("Space")
    page.wait_for_function(f"Number(document.documentElement.dataset.canvasWindow) > {start + 0.2}")
    page.locator(".stf-play button", has_text="Pause").wait_for()
    page.keyboard.press("Space")  # the focus stays on the button after its label changed
    page.locator(".stf-play button", has_text="Play").wait_for()
    stopped = float(page.evaluate("document.documentElement.dataset.canvasWindow"))
    # Shortcuts: L moves forward a second, K plays and pauses.
    page.keyboard.press("l")
    page.wait_for_function(f"Number(document.documentElement.dataset.canvasWindow) > {stopped + 0.9}")
    page.keyboard.press("k")
    page.locator(".stf-play button", has_text="Pause").wait_for()
    page.keyboard.press("k")
    page.locator(".stf-play button", has_text="Play").wait_for()


def test_sweep_shows_progress_then_plots(page, server):
    open_lab(page, server, f"mission={MISSIONS[0].id}")
    # A fast machine can show and hide the bar between two of Playwright's polls,
    # so the page itself records every change the server makes to the bar.
    hooked = page.evaluate("""() => {
        window.stfSweepBar = [];
        for (const doc of window.Bokeh.documents) {
            for (const m of doc.all_models) {
                if ((m.css_classes || []).includes('stf-sweep-progress')) {
                    const note = () => window.stfSweepBar.push([m.visible, m.value]);
                    m.properties.visible.change.connect(note);
                    m.properties.value.change.connect(note);
                    return true;
                }
            }
        }
        return false;
    }""")
    assert hooked, "no sweep progress bar on the page"
    page.locator(".stf-sweep button").click()
    page.wait_for_function(
        "window.stfSweepBar.length > 0 && window.stfSweepBar[window.stfSweepBar.length - 1][0] === false",
        timeout=60_000,
    )
    bar = page.evaluate("window.stfSweepBar")
    shown = [value for visible, value in bar if visible]
    assert shown, f"the progress bar never showed: {bar}"
    assert shown == sorted(shown) and max(shown) >= 50, f"progress did not climb: {bar}"
    assert page.locator(".bk-panel-models-widgets-Progress.stf-sweep-progress").is_hidden()
    # The button comes back in the sweep's last patch, which may land after the bar's (a busy machine).
    from playwright.sync_api import expect

    expect(page.locator(".stf-sweep button")).to_be_enabled(timeout=30_000)
    points = """() => {
        for (const doc of window.Bokeh.documents) {
            const fig = doc.get_model_by_name('sweep_plot');
            if (fig) return fig.renderers.map(r => r.data_source.data.rate ? r.data_source.data.rate.length : 0);
        }
        return null;
    }"""
    # ...and the plot's points in the plots' own patch, after it (a busy machine: they were not in yet).
    page.wait_for_function(f"() => {{ const p = ({points})(); return p !== null && Math.max(...p) > 0; }}", timeout=30_000)
    counts = page.evaluate(points)
    assert counts and max(counts) == 8, counts


def test_embed_fits_a_700px_iframe_without_hub_chrome(browser, new_page, server):
    m1 = MISSIONS[0]
    ctx = browser.new_context(viewport={"width": 760, "height": 800})
    try:
        host = new_page(ctx)
        host.set_content(
            f'<iframe id="f" src="{server}/lab?mission={m1.id}&embed=1" width="700" height="760" style="border:0"></iframe>'
        )
        frame = host.frame_locator("#f")
        inner = host.frames[1]
        inner.wait_for_function("Number(document.documentElement.dataset.canvasPainted || 0) >= 1", timeout=30_000)
        assert frame.locator("h1.stf-title").inner_text() == m1.title
        assert frame.locator("a", has_text="All missions").count() == 0
        width = inner.evaluate("document.documentElement.scrollWidth")
        assert width <= 700, f"the embed scrolls sideways ({width}px)"
        assert inner.evaluate("location.search").endswith("embed=1")
    finally:
        ctx.close()


def test_sandbox_opens_with_every_control(page, server):
    from lab.core.missions import CONTROL_SPECS

    open_lab(page, server, "mission=sandbox&layout=disaggregated&link_gbytes_per_s=6.5")
    for name in CONTROL_SPECS:
        assert page.locator(f".stf-control-{name}").count() == 1, name
    assert "link (KV)" in page.evaluate("document.documentElement.dataset.canvasRows")
    assert page.locator(".stf-notes").count() == 0


# ---------------------------------------------------------------- window in the address, legends, embed, layout


def canvas_window(page):
    return float(page.evaluate("document.documentElement.dataset.canvasWindow"))


def url_t(page):
    search = page.evaluate("location.search")
    match = re.search(r"[?&]t=([0-9.]+)", search)
    return float(match.group(1)) if match else None


def test_scrubbing_and_pausing_put_the_moment_in_the_address(new_page, server):
    m1 = MISSIONS[0]
    page = new_page()
    open_lab(page, server, f"mission={m1.id}")
    assert url_t(page) is None  # the automatic window is not written
    start = canvas_window(page)
    page.keyboard.press("l")  # a second forward (a scrub)
    page.wait_for_function("/[?&]t=/.test(location.search)")
    assert url_t(page) == pytest.approx(start + 1.0, abs=0.011)
    # Play, then pause: the address gets the moment the student stopped at.
    page.keyboard.press("k")
    page.locator(".stf-play button", has_text="Pause").wait_for()
    page.wait_for_function(f"Number(document.documentElement.dataset.canvasWindow) > {start + 1.5}")
    page.keyboard.press("k")
    page.locator(".stf-play button", has_text="Play").wait_for()
    stopped = canvas_window(page)
    page.wait_for_function(f"Math.abs(Number((/[?&]t=([0-9.]+)/.exec(location.search) || [0, -1])[1]) - {stopped}) < 0.011")
    # A shared link opens at that moment, with the same settings.
    other = new_page()
    other.goto(page.url)
    settle(other)
    assert canvas_window(other) == pytest.approx(stopped, abs=0.011)
    assert other.url == page.url
    assert other.locator(".stf-notes-pane .stf-notes").count() == 0


def test_every_legend_entry_has_a_swatch_before_any_data(page, server):
    open_lab(page, server, f"mission={MISSIONS[0].id}")
    legends = page.evaluate("""() => {
        for (const doc of window.Bokeh.documents) {
            const out = {};
            for (const name of ['gap_plot', 'itl_plot', 'sweep_plot']) {
                const fig = doc.get_model_by_name(name);
                if (!fig) return null;
                const legend = [...fig.below, ...fig.center, ...fig.right].find(m => m.type === 'Legend');
                out[name] = legend.items.map(item => ({
                    label: item.label.value,
                    points: item.renderers.map(r => r.data_source.get_length()),
                }));
            }
            return out;
        }
        return null;
    }""")
    assert legends is not None
    assert [i["label"] for i in legends["sweep_plot"]] == ["every request on time", "goodput per GPU"]
    for name, items in legends.items():
        for item in items:
            assert item["points"] and all(n == 1 for n in item["points"]), (name, item)


def test_embed_shows_the_locked_settings_on_one_collapsed_line(browser, new_page, server):
    m1 = MISSIONS[0]
    ctx = browser.new_context(viewport={"width": 760, "height": 800})
    try:
        host = new_page(ctx)
        host.set_content(
            f'<iframe id="f" src="{server}/lab?mission={m1.id}&embed=1" width="700" height="760" style="border:0"></iframe>'
        )
        frame = host.frame_locator("#f")
        host.frames[1].wait_for_function("Number(document.documentElement.dataset.canvasPainted || 0) >= 1", timeout=30_000)
        details = frame.locator("details.stf-locked-compact")
        details.wait_for()
        locked = int(details.get_attribute("data-locked"))
        assert locked >= 1 and details.get_attribute("open") is None
        box = details.bounding_box()
        assert box["height"] <= 24, f"the locked settings take {box['height']}px"
        assert frame.locator(".stf-locked-compact summary b").count() == locked
        assert not frame.locator(".stf-locked-compact ul").is_visible()
        frame.locator(".stf-locked-compact summary").click()
        frame.locator(".stf-locked-compact ul").wait_for(state="visible")
        assert frame.locator(".stf-locked-compact li").count() == locked
    finally:
        ctx.close()


def test_changing_the_gpu_count_keeps_the_canvas_size(page, server):
    """A canvas that grew a row per GPU made the browser re-lay out the whole page per change."""
    m1 = MISSIONS[0]
    open_lab(page, server, f"mission={m1.id}")
    canvas = page.locator(".stf-canvas")
    before = canvas.bounding_box()
    rows_before = page.evaluate("document.documentElement.dataset.canvasRows")
    gpus = m1.controls["gpus"]
    apply_in_ui(page, m1, "gpus", gpus.max)
    after = canvas.bounding_box()
    assert page.evaluate("document.documentElement.dataset.canvasRows") != rows_before
    assert after["height"] == before["height"]


def test_back_to_the_start_is_inert_at_the_start_and_resets_after_a_change(page, server):
    m1 = MISSIONS[0]
    open_lab(page, server, f"mission={m1.id}")
    host = page.locator(".stf-reset").first
    opacity = lambda: float(host.evaluate("el => getComputedStyle(el).opacity"))  # noqa: E731
    assert opacity() < 1 and host.evaluate("el => getComputedStyle(el).pointerEvents") == "none"
    name, value = winning_change(m1)[0]
    apply_in_ui(page, m1, name, value)
    page.wait_for_function("location.search.includes('=')")
    assert opacity() == 1
    before = painted(page)
    page.locator(".stf-reset button").click()
    page.wait_for_function(f"!location.search.includes({json.dumps(f'{name}=')})")
    settle(page, before)
    assert opacity() < 1


def test_step_tooltip_names_the_gpu_and_times_the_step(page, server):
    """The tooltip derives GPU, start and duration in the browser (fewer columns to send)."""
    open_lab(page, server, f"mission={MISSIONS[0].id}&t=11")
    box = page.locator(".stf-canvas").bounding_box()
    text = ""
    for fy in (0.12, 0.3, 0.5, 0.7):
        for fx in (0.3, 0.5, 0.7, 0.9):
            page.mouse.move(box["x"] + box["width"] * fx, box["y"] + box["height"] * fy)
            tip = page.locator(".bk-tooltip-content", has_text="duration")
            try:
                tip.first.wait_for(state="visible", timeout=1500)
            except Exception:
                continue
            text = tip.first.inner_text()
            break
        if text:
            break
    assert re.search(r"GPU \d+ · (decode|prefill) step", text), text
    match = re.search(r"start: ([\d,]+\.\d) ms · duration: (\d+\.\d) ms", text)
    assert match, text
    start_ms = float(match.group(1).replace(",", ""))
    assert 11_000 <= start_ms <= 13_600 and 0 < float(match.group(2)) < 1000


DEEP_FOCUS = """() => { let a = document.activeElement;
    while (a && a.shadowRoot && a.shadowRoot.activeElement) a = a.shadowRoot.activeElement;
    return a && a.tagName === "BUTTON" ? a.textContent.trim() : (a ? a.tagName : null); }"""


def test_enter_on_play_keeps_the_focus_on_the_button_through_its_relabel(page, server):
    """Bokeh re-renders a button whose label changes; the label's patch could land after the
    page's refocus had run, and the focus stayed on the page's body (a second Enter did nothing)."""
    open_lab(page, server, f"mission={MISSIONS[0].id}&t=5")
    page.locator(".stf-play button").focus()
    for want in ("Pause", "Play", "Pause", "Play", "Pause", "Play"):
        page.keyboard.press("Enter")
        page.locator(".stf-play button", has_text=want).wait_for()
        page.wait_for_function(f"() => ({DEEP_FOCUS})().endsWith({json.dumps(want)})", timeout=5_000)


def test_a_focused_button_keeps_the_focus_whenever_its_relabel_lands(page, server):
    """The root of Enter on Play losing the focus: Bokeh replaces a button's <button> when its
    label changes. The relabel here lands two seconds after the key, with no refocus message
    from Python at all (a slow link, a busy worker); the focus must still follow the button."""
    open_lab(page, server, f"mission={MISSIONS[0].id}&t=5")
    page.locator(".stf-play button").focus()
    page.keyboard.press("Enter")
    page.locator(".stf-play button", has_text="Pause").wait_for()
    page.wait_for_function(f"() => ({DEEP_FOCUS})().endsWith('Pause')", timeout=5_000)
    page.wait_for_timeout(2_000)  # past any window a refocus message keeps open
    relabelled = page.evaluate("""() => {
        const view = [...Bokeh.index.all_views()].find(v => v.model && Array.isArray(v.model.css_classes)
                                                           && v.model.css_classes.includes("stf-play"));
        const old = view.shadow_el.querySelector("button");
        view.model.label = "❚❚ Pause ";  // a patch as the server sends it: Bokeh re-renders the button
        return old !== null;
    }""")
    assert relabelled
    page.wait_for_function(f"() => ({DEEP_FOCUS})() === '❚❚ Pause'", timeout=5_000)
    page.keyboard.press("Enter")  # and the focus is a live one: Enter pauses
    page.locator(".stf-play button", has_text="Play").wait_for()
    page.wait_for_function(f"() => ({DEEP_FOCUS})().endsWith('Play')", timeout=5_000)
