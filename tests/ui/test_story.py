"""A request's story (lab/ui/views/story.py) without a browser: what it says, that its TTFT parts add up
to the TTFT it shows, which request a click picks, and the view moving the canvas to it."""

import html
import re

import pytest

pytest.importorskip("panel")
pytest.importorskip("numpy")

import lab.core as core  # noqa: E402
from lab.ui.timeline.canvas import Canvas  # noqa: E402
from lab.ui.views.metrics_view import fmt_seconds  # noqa: E402
from lab.ui.state import WINDOW_S, LabState  # noqa: E402
from lab.ui.views.story import (  # noqa: E402
    StoryView, focus_of, focus_span, missed_order, nearest_point, request_at_step, severity, step_at, story_html,
)

M1 = "ui-mixing-hurts"


def make(fleet, slo, drain_s=120.0):
    return core.load_scenario({
        "workload": {"rate": 1, "duration_s": 1, "prompt_tokens": 100, "output_tokens": 10},
        "fleet": fleet, "model": {"cost": "linear"}, "slo": slo, "seed": 0, "drain_s": drain_s,
    })


def run(scenario, requests=None):
    result = core.simulate(scenario, requests)
    rows = core.request_metrics(result)
    return result, rows, core.request_blame(result, rows)


def story(result, rows, blames, i):
    return story_html(rows[i], blames[i], result, result.scenario)


def parts_shown(text):
    return {m.group(1): float(m.group(2)) for m in re.finditer(r'data-part="(\w+)" data-s="([^"]+)"', text)}


def secs(value):
    return fmt_seconds(value).replace("\u00a0", " ")


def text_of(markup):
    return html.unescape(re.sub(r"<[^>]+>", "", markup)).replace("\u00a0", " ")


# ---------------------------------------------------------------- what the story says


def test_a_colocated_request_stalled_by_a_mixed_in_prefill_names_that_cause():
    # One GPU: request 0 decodes; request 1's 8,000-token prompt arrives and is prefilled whole
    # in one of request 0's steps, a 400 ms stall against a 100 ms gap target.
    result, rows, blames = run(make({"layout": "colocated", "gpus": 1}, {"ttft_s": 1.0, "max_gap_ms": 100}),
                               [(0.0, 100, 50), (0.1, 8000, 5)])
    assert not rows[0]["met_slo"] and blames[0].dominant_cause == "prefill_interference"
    out = story(result, rows, blames, 0)
    words = text_of(out)
    assert 'data-missed="true"' in out and 'data-cause="prefill_interference"' in out
    assert "Why it missed: its worst gap was a step that also prefilled 8,000 prompt tokens" in words
    assert "Prefill on GPU 0" in words and "Decode on GPU 0" in words
    assert "prefill mixed in: 8,000 prompt tokens in that step" in words
    assert "over the 100 ms gap target" in words  # the per-token term this SLO uses
    assert "transfer" not in words.lower() and "link" not in words.lower()  # a colocated fleet has none
    assert "the GPU emits it at the end of the step that finishes the prefill" in words


def test_a_split_fleet_request_behind_another_on_a_slow_link_names_the_link_queue():
    scenario = make({"layout": "disaggregated", "prefill_gpus": 2, "decode_gpus": 1, "link": {"gbytes_per_s": 0.5}},
                    {"ttft_s": 1.0, "tpot_ms": 50})
    result, rows, blames = run(scenario, [(0.0, 2000, 20), (0.0, 2000, 20)])
    assert rows[0]["met_slo"] and not rows[1]["met_slo"]
    out = story(result, rows, blames, 1)
    words = text_of(out)
    assert 'data-cause="link_wait"' in out
    assert "Why it missed: its KV cache waited for the link" in words
    assert f"Waited {secs(blames[1].parts['link_wait'])} for the link" in words
    tr = result.transfers[result.requests[1].transfer]
    assert f"to GPU {tr.dst_gpu}" in words and f"Decode on GPU {tr.dst_gpu}" in words
    assert "first_token = decode" in words
    assert f"TTFT {secs(rows[1]['ttft_s'])} over the {secs(1.0)} target" in words
    met = story(result, rows, blames, 0)
    assert 'data-missed="false"' in met and "Why it missed" not in met and "met the SLO" in text_of(met)


def test_first_token_at_prefill_puts_the_transfer_in_the_first_gap():
    scenario = make({"layout": "disaggregated", "prefill_gpus": 1, "decode_gpus": 1, "first_token": "prefill",
                     "link": {"gbytes_per_s": 0.5}}, {"ttft_s": 1.0, "max_gap_ms": 100})
    result, rows, blames = run(scenario, [(0.0, 2000, 20)])
    out = story(result, rows, blames, 0)
    words = text_of(out)
    assert blames[0].dominant_cause == "transfer" and 'data-cause="transfer"' in out
    assert "first_token = prefill" in words and "Its first gap" in words and "wire" in words
    assert set(parts_shown(out)) <= {"queue", "prefill", "chunk_wait"}  # the link is not in this TTFT


@pytest.mark.parametrize("fleet", [
    {"layout": "colocated", "gpus": 2, "chunk_tokens": 512},
    {"layout": "colocated", "gpus": 2},
    {"layout": "disaggregated", "prefill_gpus": 1, "decode_gpus": 1, "link": {"gbytes_per_s": 2}},
    {"layout": "disaggregated", "prefill_gpus": 1, "decode_gpus": 1, "link": {"gbytes_per_s": 5, "layerwise": True}},
])
def test_every_ttft_part_shown_adds_up_to_the_ttft_shown(fleet):
    scenario = core.load_scenario({
        "workload": {"rate": 9, "duration_s": 8, "prompt_tokens": {"dist": "uniform", "low": 200, "high": 6000},
                     "output_tokens": {"dist": "uniform", "low": 1, "high": 200}},
        "fleet": fleet, "slo": {"ttft_s": 0.8, "tpot_ms": 25}, "seed": 4, "drain_s": 4,
    })
    result, rows, blames = run(scenario)
    assert any(not r["met_slo"] for r in rows) and any(r["met_slo"] for r in rows)
    for i, row in enumerate(rows):
        out = story(result, rows, blames, i)
        shown = parts_shown(out)
        ttft = float(re.search(r'data-ttft-s="([^"]+)"', out).group(1)) if "data-ttft-s" in out else 0.0
        assert ttft == row["ttft_s"] or result.requests[i].dropped
        assert sum(shown.values()) == pytest.approx(ttft, abs=1e-9), (i, shown, ttft)
        assert all(v > 0 for v in shown.values())
        if not row["met_slo"]:
            assert f'data-cause="{blames[i].dominant_cause}"' in out and "Why it missed" in out


def test_a_request_the_run_cut_off_says_where_it_was():
    scenario = make({"layout": "colocated", "gpus": 1}, {"ttft_s": 1.0}, drain_s=0.5)
    result, rows, blames = run(scenario, [(0.0, 30_000, 2000), (0.0, 30_000, 10), (0.0, 30_000, 10)])
    last = len(rows) - 1
    assert blames[last].open_part and not rows[last]["finished"]
    words = text_of(story(result, rows, blames, last))
    assert "when the run ended" in words
    assert "No first token" in words or "Unfinished" in words


# ---------------------------------------------------------------- which request a click means


def test_a_step_picks_the_request_whose_worst_gap_it_ended_else_the_longest_wait_it_served():
    result, rows, blames = run(make({"layout": "colocated", "gpus": 1}, {"ttft_s": 1.0, "max_gap_ms": 100}),
                               [(0.0, 100, 50), (0.1, 8000, 5)])
    kind, gpu, step = focus_of(result, result.requests[0], blames[0])
    assert kind == "gpu" and gpu == 0 and result.gpus[0].prefill_tokens[step] == 8000  # the stall
    assert request_at_step(result, rows, gpu, step) == 0
    first = result.gpus[0].prefill_tokens.index(100)  # request 0's own prefill step: no stalled stream
    assert request_at_step(result, rows, 0, first) == 0
    assert request_at_step(result, rows, 0, len(result.gpus[0])) is None
    log = result.gpus[0]
    assert step_at(log, (log.start[step] + log.end[step]) / 2) == step
    assert step_at(log, log.end[-1] + 1.0) is None


def test_a_ttft_miss_points_at_its_dominant_part_a_gap_miss_at_its_worst_gap():
    scenario = make({"layout": "disaggregated", "prefill_gpus": 2, "decode_gpus": 1, "link": {"gbytes_per_s": 0.5}},
                    {"ttft_s": 1.0, "tpot_ms": 50})
    result, rows, blames = run(scenario, [(0.0, 2000, 20), (0.0, 2000, 20)])
    rec = result.requests[1]
    assert focus_of(result, rec, blames[1]) == ("link", rec.transfer)  # it waited for the link: look there
    tr = result.transfers[rec.transfer]
    assert focus_span(result, ("link", rec.transfer)) == (tr.ready, tr.end)
    kind, gpu, step = focus_of(result, rec)  # no blame (or a met request): its worst gap's step
    assert kind == "gpu" and gpu == rec.decode_gpu and rec.decode_first_step <= step <= rec.decode_last_step
    queued = make({"layout": "colocated", "gpus": 1}, {"ttft_s": 0.3})
    result, rows, blames = run(queued, [(0.0, 4000, 5), (0.0, 4000, 5), (0.0, 4000, 5)])
    late = max(range(3), key=lambda i: rows[i]["ttft_s"])
    assert blames[late].dominant_cause in ("queue", "prefill", "chunk_wait")
    kind, gpu, step = focus_of(result, result.requests[late], blames[late])
    assert result.gpus[gpu].start[step] == result.requests[late].prefill_start  # its prefill


def test_missed_requests_are_ordered_worst_first_and_points_are_picked_by_distance():
    slo = core.Slo(ttft_s=1.0, tpot_ms=20)
    rows = [
        {"id": 0, "met_slo": True, "finished": True, "ttft_s": 0.2, "tpot_ms": 10, "worst_gap_ms": 12},
        {"id": 1, "met_slo": False, "finished": True, "ttft_s": 1.5, "tpot_ms": 10, "worst_gap_ms": 12},
        {"id": 2, "met_slo": False, "finished": True, "ttft_s": 0.3, "tpot_ms": 60, "worst_gap_ms": 90},
        {"id": 3, "met_slo": False, "finished": False, "ttft_s": 9.0, "tpot_ms": None, "worst_gap_ms": None},
    ]
    assert severity(rows[0], slo) == 0 and severity(rows[2], slo) == 3
    assert missed_order(rows, slo) == [3, 2, 1]
    points = {"x": [100, 200], "y": [10, 1000], "id": [7, 8]}
    assert nearest_point(points, 102, 11, x_span=1000, y_span=3) == 7
    assert nearest_point(points, 199, 900, x_span=1000, y_span=3) == 8
    assert nearest_point(points, 600, 100, x_span=1000, y_span=3) is None


# ---------------------------------------------------------------- the view


def test_next_missed_shows_the_worst_miss_outlines_its_step_and_brings_it_into_view(catalog):
    state = LabState.from_query(catalog, f"?mission={M1}")
    canvas = Canvas(state)
    said = []
    view = StoryView(state, canvas, say=said.append)
    state.run()
    order = missed_order(state.rows, state.scenario.slo)
    assert order and view.next_button.styles["pointer-events"] == "auto"
    assert view.next_missed() == order[0]
    assert view.pane.visible and f'data-request="{order[0]}"' in view.pane.object
    focus = focus_of(state.result, state.result.requests[order[0]], state.blame_of(order[0]))
    left, right = focus_span(state.result, focus)
    assert state.window_start <= left <= state.window_start + WINDOW_S
    assert canvas.focus_source.data["left"] == [left] and canvas.focus_source.data["right"] == [right]
    kind, gpu, step = focus
    assert said and said[-1].startswith(f"Request {order[0]} missed the SLO")
    assert view.next_missed() == order[1]  # then the next one
    canvas.on_step(gpu, step)  # a click on a step: the rule's request, the window stays
    before = state.window_start
    assert view.selected == request_at_step(state.result, state.rows, gpu, step)
    assert state.window_start == before
    state.change("gpus", 5)
    state.run()  # the same request in the new run
    assert view.pane.visible and f'data-request="{view.selected}"' in view.pane.object
    view.close()
    assert not view.pane.visible and canvas.focus_source.data["left"] == []


class _Tap:
    def __init__(self, x, y):
        self.x, self.y = x, y


def test_a_click_on_a_scatter_point_or_a_timeline_step_reaches_the_story(catalog):
    from lab.ui.data.canvas_data import _rows
    from lab.ui.views.plots import Plots

    state = LabState.from_query(catalog, f"?mission={M1}")
    canvas = Canvas(state)
    plots = Plots(state, on_sweep=lambda: None)
    view = StoryView(state, canvas, plots=plots)
    state.run()
    miss = plots.gap_miss.data
    i = len(miss["id"]) // 2
    plots._on_gap_tap(_Tap(float(miss["x"][i]), float(miss["y"][i]) * 1.01))  # a hair off the point
    assert view.selected == int(miss["id"][i]) and f'data-request="{view.selected}"' in view.pane.object
    assert plots.gap_pick.data["x"] == [float(miss["x"][i])]  # ringed
    plots._on_gap_tap(_Tap(float(plots.gap_fig.x_range.end) * 10, 1.0))  # nowhere near a point: no change
    assert view.selected == int(miss["id"][i])
    result = state.result
    rows, _link, _link_queue, _labels = _rows(result)
    log = result.gpus[1]
    j = max(range(len(log)), key=lambda k: log.end[k] - log.start[k])
    canvas._on_step_tap(_Tap((log.start[j] + log.end[j]) / 2, rows[1] + 0.2))
    assert view.selected == request_at_step(result, state.rows, 1, j)
    view.close()
    assert plots.gap_pick.data["x"] == []
