"""The first view answering its controls before the live page (lab/ui/early_page.py), in CPython.

What a change on the pre-rendered view shows is what the live page shows at the address it
leads to; a change that cannot be made says why and keeps the view; the live page built at
that address counts the student's change (stars), once; the view's controls are the live
page's (values, ranges, notches). In the browser: tests/test_site_prerender.py.
"""

import re

import pytest

pytest.importorskip("panel")

from lab.ui import early_page  # noqa: E402
from lab.ui.catalog import get_catalog  # noqa: E402
from lab.ui.state import LabState  # noqa: E402
from lab.ui.views.metrics_html import metrics_html  # noqa: E402
from lab.ui.words.refusal import refusal_html  # noqa: E402

MISSION = "mixing-hurts"


@pytest.fixture(autouse=True)
def no_early_page_left():
    yield
    early_page._page = None  # (one per worker: a test's never reaches the next)


def _live(query):
    """The live page's state at lab.html?QUERY after its first run."""
    state = LabState.from_query(get_catalog(), "?" + query)
    assert state.run() is not None
    return state


def _pressed(view, control):
    return re.findall(rf'data-control="{control}".*?</div></div>', view)[0].count('aria-pressed="true"')


def test_a_change_shows_what_the_live_page_shows_at_its_address():
    page = early_page.start(f"mission={MISSION}")
    out = page.answer("layout", "disaggregated")
    assert "refusal" not in out
    assert out["query"] == f"mission={MISSION}&layout=disaggregated"
    live = _live(out["query"])
    assert metrics_html(live.metrics, live.scenario) in out["html"]  # the same run, measured the same
    assert 'data-value="disaggregated" aria-pressed="true"' in out["html"] and _pressed(out["html"], "layout") == 1
    assert "simulated while the lab loads" in out["html"] and "simulated in advance" not in out["html"]
    # A slider of the split fleet now moves; the colocated one is greyed out, as on the live page.
    assert 'class="stf-fv-control idle" data-control="gpus"' in out["html"]
    again = page.answer("decode_gpus", "2")
    assert again["query"] == f"mission={MISSION}&layout=disaggregated&decode_gpus=2"
    assert 'id="stf-fv-decode_gpus" min="1" max="4" step="1" value="2"' in again["html"]


@pytest.mark.parametrize("name, raw, words", [
    ("prefill_gpus", "99", "Prefill GPUs: 99 is out of range"),
    ("prefill_gpus", "two", "Prefill GPUs: expected a whole number"),
    ("layout", "<b>both</b>", "Layout: expected one of colocated, disaggregated"),
    ("gpus", "5", "gpus is not a control this view can change"),  # greyed out in a split fleet
    ("llm", "llama3-70b", "llm is not a control this view can change"),  # locked in this mission
    ("prefill_gpus", "9" * 10_000, "Prefill GPUs: expected a whole number"),  # not echoed
    ("x" * 5_000, "1", "x" * 40 + " is not a control"),
])
def test_a_change_that_cannot_be_made_says_why_and_keeps_the_view(name, raw, words):
    page = early_page.start(f"mission={MISSION}")
    before = page.answer("layout", "disaggregated")
    out = page.answer(name, raw)
    assert out["refusal"].startswith("Not changed: ") and words in out["refusal"] and len(out["refusal"]) < 120
    # The view as it was (a moved slider goes back), with the refusal under the controls, as on the live page.
    note = f'<div style="margin:4px 10px">{refusal_html(out["refusal"], "")}</div>'
    assert out["query"] == before["query"] and out["html"].replace(note, "", 1) == before["html"]


def test_a_change_the_spec_refuses_says_so_in_the_live_pages_words():
    page = early_page.start("mission=tp-per-phase")
    out = page.answer("decode_tp", "8")
    assert out["refusal"].startswith("Decode tensor parallel 8 was not applied: 4 Decode GPUs do not split")
    assert out["query"] == "mission=tp-per-phase"
    assert refusal_html(page.state.refusal, page.state.error) in out["html"]  # the sentence, the spec's detail folded
    assert 'class="stf-refusal-detail"' in out["html"]
    again = page.answer("decode_gpus", "8")  # the fix it names: then 8 works
    assert "refusal" not in again and 'data-refused' not in again["html"]
    assert "refusal" not in page.answer("decode_tp", "8")


def test_the_live_page_at_the_last_address_counts_the_students_change_once():
    page = early_page.start(f"mission={MISSION}")
    query = page.answer("layout", "disaggregated")["query"]
    linked = LabState.from_query(get_catalog(), "?" + query)
    assert linked.from_link and not linked.touched  # a link's fleet: its stars say it earns nothing yet
    live = LabState.from_query(get_catalog(), "?" + query)
    early_page.claim(live)
    assert live.touched and not live.from_link
    another = LabState.from_query(get_catalog(), "?" + query)
    early_page.claim(another)  # the early page is done: nothing to claim any more
    assert another.from_link and not another.touched


def test_no_change_or_other_settings_claim_nothing():
    early_page.start(f"mission={MISSION}")
    state = LabState.from_query(get_catalog(), f"?mission={MISSION}")
    early_page.claim(state)
    assert not state.touched  # opened and untouched: stars still wait for a change
    page = early_page.start(f"mission={MISSION}")
    page.answer("layout", "disaggregated")
    other = LabState.from_query(get_catalog(), f"?mission={MISSION}&layout=disaggregated&decode_gpus=3")
    early_page.claim(other)
    assert not other.touched and other.from_link
    early_page.claim(LabState.from_query(get_catalog(), "?mission=sandbox"))  # no early page: nothing happens


def test_back_to_the_start_shows_the_missions_start_as_the_live_page_does():
    page = early_page.start(f"mission={MISSION}")
    page.answer("layout", "disaggregated")
    changed = page.answer("decode_gpus", "2")
    assert "data-reset disabled" in changed["html"]  # not greyed away from the start (disabled until loader.js enables it)
    out = page.answer(early_page.RESET, "")
    assert "refusal" not in out and out["query"] == f"mission={MISSION}"
    assert 'data-reset aria-disabled="true" disabled' in out["html"]  # greyed: nothing left to undo
    live = _live(f"mission={MISSION}")
    assert metrics_html(live.metrics, live.scenario) in out["html"]  # the start's own run
    assert 'data-value="colocated" aria-pressed="true"' in out["html"]
    # At the start there is nothing to undo: the view stays, and says so.
    again = page.answer(early_page.RESET, "")
    assert again["refusal"] == "Nothing to undo: the controls are at the mission's start."
    assert again["query"] == f"mission={MISSION}"
    # The student's way back counts as their change, as on the live page: stars count.
    state = LabState.from_query(get_catalog(), f"?mission={MISSION}")
    early_page.claim(state)
    assert state.touched


def test_no_control_has_the_reset_buttons_name():
    from lab.core.missions import CONTROL_SPECS

    assert early_page.RESET not in CONTROL_SPECS


def test_the_views_sliders_are_the_live_pages():
    """Every numeric control of every mission: the first view's range input has the live
    slider's start, end, step and value (a GPU-count slider moves in whole instances)."""
    from lab.ui.prerender import controls_html
    from lab.ui.views.controls import Controls

    catalog = get_catalog()
    seen = 0
    states = [LabState(m, position=catalog.position(m)) for m in catalog.missions] + [
        LabState.from_query(catalog, "?mission=sandbox&tp=2&gpus=4"),  # GPU counts in instances of 2 and 4
        LabState.from_query(catalog, "?mission=sandbox&layout=disaggregated&prefill_tp=2&prefill_gpus=4&decode_tp=4"
                                     "&decode_gpus=8")]
    for state in states:
        mission = state.mission
        view = controls_html(state)
        widgets = Controls(state, on_change=lambda *_: None).widgets
        for name, control in mission.controls.items():
            if control.kind == "choice":
                continue
            w = widgets[name]
            found = re.search(rf'id="stf-fv-{name}" min="([^"]+)" max="([^"]+)" step="([^"]+)" value="([^"]+)"', view)
            assert found, (mission.id, name)
            assert tuple(float(x) for x in found.groups()) == (w.start, w.end, w.step, w.value), (mission.id, name)
            seen += 1
    assert seen > 40


def test_a_refusal_before_any_change_shows_the_first_view():
    """The early page runs nothing until a change needs it; a first change refused still draws
    the start's view, the pre-rendered one."""
    from lab.ui.prerender import first_view_html

    page = early_page.start(f"mission={MISSION}")
    assert page.state.result is None
    out = page.answer("prefill_gpus", "2")  # greyed out while the fleet is colocated
    assert out["refusal"] == "Not changed: prefill_gpus is not a control this view can change."
    note = f'<div style="margin:4px 10px">{refusal_html(out["refusal"], "")}</div>'
    assert out["query"] == f"mission={MISSION}"
    assert out["html"].replace(note, "", 1) == first_view_html(f"mission={MISSION}")


def test_a_run_that_fails_says_why_where_its_metrics_would_be(monkeypatch):
    """As on the live page: the controls at the new setting (and the address), the run's error
    where the metrics would be; the next change runs again."""
    import time

    from lab.ui.views.metrics_html import run_error_html

    page = early_page.start(f"mission={MISSION}")
    real = LabState.simulate
    monkeypatch.setattr(LabState, "simulate", lambda self, work=None: self._failed("the run broke", time.perf_counter()))
    out = page.answer("gpus", "6")
    assert out["error"] == "the run broke" and out["query"] == f"mission={MISSION}&gpus=6"
    assert run_error_html("the run broke") in out["html"] and 'id="stf-fv-gpus" min="2" max="8" step="1" value="6"' in out["html"]
    assert page.answer("prefill_gpus", "2")["refusal"]  # greyed out: refused, the view as it was, no run tried
    monkeypatch.setattr(LabState, "simulate", real)
    again = page.answer("gpus", "5")
    assert "error" not in again and "data-run-error" not in again["html"] and metrics_html(
        _live(again["query"]).metrics, page.state.scenario) in again["html"]
