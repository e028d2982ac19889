"""Early rejection on the page, without a browser (mission 18, "Say no early"): the control,
the rejections on the prefill queue row, the metric card, the story of a rejected request,
the worst-gap plot's rejected marks, the Table view; and nothing of it without admission."""

import re

import numpy as np
import pytest

pytest.importorskip("panel")
pytest.importorskip("numpy")

import lab.core as core  # noqa: E402
from lab.ui.browser.a11y import run_summary  # noqa: E402
from lab.ui.timeline.canvas import Canvas, legend_html  # noqa: E402
from lab.ui.data.canvas_data import timeline_data  # noqa: E402
from lab.ui.words.control_words import CHOICE_LABELS  # noqa: E402
from lab.ui.views.controls import locked_html  # noqa: E402
from lab.ui.views.metrics_view import metrics_html  # noqa: E402
from lab.ui.views.plots import Plots, gap_scatter_data  # noqa: E402
from lab.ui.data.queues import prefill_queue, rejections  # noqa: E402
from lab.ui.state import LabState  # noqa: E402
from lab.ui.views.story import StoryView, missed_order, story_html  # noqa: E402
from lab.ui.views.table_view import requests_table_html  # noqa: E402

ON = "predicted_ttft_over_slo"


@pytest.fixture(scope="module")
def mission():
    return core.load_mission(core.default_missions_dir() + "/18-say-no-early.json")


@pytest.fixture(scope="module")
def admitting(mission):
    """Mission 18 with early rejection turned on, run once."""
    state = LabState(mission)
    assert state.change("admission", ON)
    state.run()
    return state


def test_the_control_reads_in_words_and_moves_the_field(mission, admitting):
    assert set(CHOICE_LABELS["admission"]) == set(mission.controls["admission"].choices)
    assert admitting.scenario.fleet.admission.reject_when == ON
    assert admitting.metrics["rejected"] == sum(r.rejected for r in admitting.result.requests) > 0
    assert admitting.query()["admission"] == ON


def test_a_mission_without_the_control_does_not_list_it_as_locked(catalog):
    state = LabState(catalog.missions[0])
    assert not state.can_reject
    assert "Early rejection" not in locked_html(state)


def test_rejected_requests_never_wait_and_are_marked_at_arrival(admitting):
    result = admitting.result
    times, ids, predicted = rejections(result)
    turned = [r for r in result.requests if r.rejected]
    assert list(ids) == [r.id for r in turned] and list(times) == [r.arrival for r in turned]
    assert all(p > admitting.scenario.slo.ttft_s for p in predicted)
    # the prefill queue counts only the requests that queued: at its peak no more than were admitted
    left, right, n = prefill_queue(result)
    served = [r for r in result.requests if not r.rejected]
    assert n.max() <= len(served)
    # every moment's count is the admitted requests between their arrival and their prefill start
    t = float(left[len(left) // 2])
    waiting = sum(1 for r in served if r.arrival <= t < (r.prefill_start if r.prefill_start is not None else np.inf))
    assert n[len(n) // 2] == waiting
    data = timeline_data(result, admitting.scenario.slo.per_token_target_ms)
    cross = data["rejected"]
    assert list(cross["req"]) == list(ids)
    assert np.allclose(cross["left"], times, atol=1e-5) and np.array_equal(cross["left"], cross["right"])
    assert np.all((cross["y"] < 0) & (cross["y"] > -0.5))  # on the prefill queue row (row 0), in its upper half


def test_off_nothing_is_marked_and_the_prefill_queue_holds_everyone(mission):
    state = LabState(mission)
    state.run()
    data = timeline_data(state.result, state.scenario.slo.per_token_target_ms)
    assert len(data["rejected"]["left"]) == 0
    assert 'data-value="rejected"' not in metrics_html(state.metrics, state.scenario)
    assert f'{state.metrics["requests"]:,} requests' in metrics_html(state.metrics, state.scenario)


def test_the_metric_card_shows_rejected_and_the_served_share(admitting):
    page = metrics_html(admitting.metrics, admitting.scenario)
    m = admitting.metrics
    assert f'<span data-value="rejected">{m["rejected"]:,}</span>' in page
    served = re.search(r'data-value="served_slo_attainment">(\d+)%<', page)
    assert served and int(served.group(1)) == round(m["served_slo_attainment"] * 100)
    assert f"{m['rejected']:,} of {m['requests']:,} requests rejected at arrival" in page


def test_a_rejected_requests_story_says_why_with_its_prediction(admitting):
    result, rows = admitting.result, admitting.rows
    rid = next(r.id for r in result.requests if r.rejected)
    blame = admitting.blame_of(rid)
    text = story_html(rows[rid], blame, result, admitting.scenario)
    assert 'data-cause="rejected"' in text and 'data-event="rejected"' in text
    assert f'data-predicted-s="{result.requests[rid].predicted_ttft_s!r}"' in text
    assert "no-first-token" not in text and "stf-story-bar" not in text  # it never waited for a token
    order = missed_order(rows, admitting.scenario.slo)
    first_rejected = next(i for i, r in enumerate(order) if rows[r]["rejected"])
    assert first_rejected > 0 and all(rows[r]["rejected"] for r in order[first_rejected:])


def test_a_click_on_a_cross_opens_its_story(admitting):
    canvas = Canvas(admitting)
    story = StoryView(admitting, canvas=canvas)
    rec = next(r for r in admitting.result.requests if r.rejected)
    rid = canvas._rejection_at(rec.arrival)
    assert rid == rec.id
    canvas.on_request(rid)
    assert story.selected == rec.id and 'data-event="rejected"' in story.pane.object
    # a tap far from every cross picks none
    arrivals = np.array([r.arrival for r in admitting.result.requests if r.rejected])
    quiet = next(t for t in np.arange(0.0, 60.0, 0.01) if np.min(np.abs(arrivals - t)) > 0.1)
    assert canvas._rejection_at(float(quiet)) is None


def test_the_worst_gap_plot_puts_rejected_requests_on_its_floor(admitting):
    data = gap_scatter_data(admitting.rows)
    ids = [r.id for r in admitting.result.requests if r.rejected]
    assert list(data["rejected"]["id"]) == ids
    plots = Plots(admitting, on_sweep=lambda: None)
    ys = plots.gap_rejected.data["y"]
    yr = plots.gap_fig.y_range
    assert len(ys) == len(ids) and all(yr.start < y < yr.end for y in ys)
    assert max(ys) < min(plots.gap_miss.data["y"].min(), plots.gap_met.data["y"].min())  # under every gap
    from bokeh.models import HoverTool

    tips = [" ".join(v for _, v in t.tooltips) for t in plots.gap_fig.tools if isinstance(t, HoverTool)]
    assert any("@pred" in t and "rejected" in t for t in tips)  # its own hover: the prediction, not a gap


def test_the_legend_lists_the_cross_only_where_rejection_can_happen(admitting):
    slo = admitting.scenario.slo
    assert admitting.can_reject
    assert "rejected at arrival" in legend_html(slo, rejection=True)
    assert "rejected" not in legend_html(slo)


def test_the_table_view_shows_no_ttft_for_a_rejected_request(admitting):
    blames = [admitting.blame_of(i) for i in range(len(admitting.rows))]
    table = requests_table_html(admitting.result, admitting.rows, blames, shown=len(admitting.rows))
    rid = next(r.id for r in admitting.result.requests if r.rejected)
    row = re.search(rf'<tr data-request="{rid}">(.*?)</tr>', table).group(1)
    assert 'data-ttft="None">—<' in row and "✗ no (rejected)" in row


def test_the_live_region_says_how_many_were_rejected(mission, admitting):
    m = admitting.metrics
    said = run_summary(m, admitting.scenario, [], [], [], [])
    assert f"{m['rejected']:,} rejected at arrival" in said
    off = LabState(mission)
    off.run()
    assert "rejected" not in run_summary(off.metrics, off.scenario, [], [], [], [])
