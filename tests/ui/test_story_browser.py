"""A request's story and stars that need a change, in a real browser (`lab serve` + Debian's Chromium).

- "Show the next missed request" opens the worst miss's story, the canvas window moves to
  its worst gap's step, and the live region reads it; a click on a step of the timelines
  opens the story of the request the rule picks (story.request_at_step).
- A solution link in a fresh browser shows its fleet and the stars it meets, earns and
  stores nothing; a control changed on the page then earns and stores the star.

Expectations come from the core run of the same mission (same seed, same result).
Waits are on DOM conditions (test_browser's helpers), never sleeps.
"""

import json

import pytest

pytest.importorskip("playwright.sync_api")

import lab.core as core  # noqa: E402
from lab.core.missions import list_missions  # noqa: E402
from lab.ui.data.canvas_data import _rows  # noqa: E402
from lab.ui.words.control_words import CHOICE_LABELS  # noqa: E402
from lab.ui.state import WINDOW_S, format_value  # noqa: E402
from lab.ui.stars.stars_bridge import STORAGE_KEY  # noqa: E402
from lab.ui.views.story import focus_of, focus_span, missed_order, request_at_step  # noqa: E402
from axe_check import axe_missing, axe_violations, describe  # noqa: E402  (tests/ is on sys.path)
from test_browser import open_lab, painted, settle, stored, winning_change  # noqa: E402

pytestmark = pytest.mark.browser

MISSIONS = list_missions()

# The timeline's plot area in page pixels, from Bokeh's own view of the figure named "timeline".
FRAME_JS = """() => {
    for (const root of Object.values(window.Bokeh.index)) {
        const stack = [root];
        while (stack.length) {
            const view = stack.pop();
            if (view.model && view.model.name === "timeline" && view.frame) {
                const f = view.frame.bbox, c = view.el.getBoundingClientRect();
                return {x: c.x + f.x, y: c.y + f.y, w: f.width, h: f.height};
            }
            stack.push(...(view.child_views || []));
        }
    }
    return null;
}"""


def window_start(page):
    return float(page.evaluate("document.documentElement.dataset.canvasWindow"))


def run_of(mission, settings=None):
    scenario = mission.apply({**mission.settings(mission.scenario), **(settings or {})}) if settings else mission.scenario
    result = core.simulate(scenario)
    return result, core.request_metrics(result)


def test_next_missed_and_a_step_click_open_a_story_and_the_canvas_goes_there(page, server):
    m1 = MISSIONS[0]
    result, rows = run_of(m1)
    order = missed_order(rows, m1.scenario.slo)
    assert order, "mission 1's start has misses"
    open_lab(page, server, f"mission={m1.id}")
    page.locator(".stf-story").wait_for(state="detached")  # no story until asked
    before = window_start(page)

    page.locator(".stf-next-missed button").click()
    story = page.locator(f'.stf-story[data-request="{order[0]}"][data-missed="true"]')
    story.wait_for()
    assert "Why it missed" in story.inner_text()
    assert story.locator("mark.stf-worst").count() == 1
    blame = core.request_blame(result, rows)[order[0]]
    left, _right = focus_span(result, focus_of(result, result.requests[order[0]], blame))
    page.wait_for_function(f"""() => {{ const t = Number(document.documentElement.dataset.canvasWindow);
        return t <= {left} && {left} <= t + {WINDOW_S}; }}""")
    assert window_start(page) != before
    page.wait_for_function(f"document.getElementById('stf-announce').textContent.startsWith('Request {order[0]} missed')")
    if axe_missing() is None:  # the open story is as readable as the rest of the page
        found = axe_violations(page)
        assert not found, describe(found)

    # A click on the widest step on screen that means another request: that request's story,
    # and the window stays where the student is looking.
    t0 = window_start(page)
    rows_of, _link, _link_queue, labels = _rows(result)
    best = None
    for g, log in enumerate(result.gpus):
        for j in range(len(log)):
            s, e = log.start[j], log.end[j]
            if s >= t0 + 0.1 and e <= t0 + WINDOW_S - 0.1 and (best is None or e - s > best[0]):
                rid = request_at_step(result, rows, g, j)
                if rid is not None and rid != order[0]:
                    best = (e - s, g, j, rid)
    assert best is not None
    _, g, j, rid = best
    frame = page.evaluate(FRAME_JS)
    n = len(labels)
    mid = (result.gpus[g].start[j] + result.gpus[g].end[j]) / 2
    x = frame["x"] + (mid - t0) / WINDOW_S * frame["w"]
    y = frame["y"] + (rows_of[g] + 0.5) / n * frame["h"]
    page.mouse.click(x, y)
    page.locator(f'.stf-story[data-request="{rid}"]').wait_for()
    assert window_start(page) == t0
    page.locator(".stf-story-close button").click()
    page.locator(".stf-story").wait_for(state="hidden")


def _move(page, mission, name, there):
    """Move control `name` one notch (a choice: to `there`; a slider: the arrow key `there`) and
    wait for the run it starts."""
    before = painted(page)
    if mission.controls[name].kind == "choice":
        label = CHOICE_LABELS.get(name, {}).get(there, str(there))
        page.locator(f".stf-control-{name}").get_by_role("button", name=label, exact=True).click()
    else:
        page.locator(f".stf-control-{name} .noUi-handle").focus()
        page.keyboard.press(there)
    return settle(page, before)


def test_a_solution_link_in_a_fresh_browser_earns_nothing_until_a_control_changes(page, server):
    m1 = MISSIONS[0]
    changes = winning_change(m1)
    query = "&".join(f"{n}={format_value(v)}" for n, v in changes)
    open_lab(page, server, f"mission={m1.id}&{query}")
    assert page.locator('.stf-star[data-live="true"]').count() >= 1  # the link's fleet meets a star ...
    assert page.locator('.stf-star[data-earned="true"]').count() == 0  # ... and earns none
    assert page.locator(".stf-head-stars").get_attribute("data-earned") == "0"
    note = page.locator('.stf-stars-note[data-stars-wait="true"]')
    assert note.is_visible() and "Stars count once you change a control" in note.inner_text()
    saved = stored(page)
    assert saved is None or not any(saved["stars"].get(m1.id, []))

    # Away from the solution and back: the student's own change earns the star.
    name, value = changes[-1]
    control = m1.controls[name]
    if control.kind == "choice":
        other = next(c for c in control.choices if c != value)
        steps = (other, value)
    else:
        steps = ("ArrowLeft", "ArrowRight") if value > control.min else ("ArrowRight", "ArrowLeft")
    for there in steps:
        _move(page, m1, name, there)
    page.locator('.stf-star[data-earned="true"]').first.wait_for()
    page.wait_for_function(f"""() => {{ try {{ const s = JSON.parse(localStorage.getItem({json.dumps(STORAGE_KEY)}));
        return s.stars[{json.dumps(m1.id)}].includes(true); }} catch (e) {{ return false; }} }}""")
    assert page.locator(".stf-stars-note").count() == 0
