"""canvas.decode_runs: decode steps within the target, back to back, drawn as one box with
ticks at the step boundaries; slow and prefill steps stay boxes of their own, and a click
inside a run still finds its step."""

import numpy as np
import pytest

pytest.importorskip("panel")

from lab.ui.timeline.canvas import Canvas  # noqa: E402
from lab.ui.data.canvas_data import _rows, box_geometry, decode_runs, frame_px, row_geometry, timeline_data  # noqa: E402
from lab.ui.state import LabState  # noqa: E402
from lab.ui.views.story import step_at  # noqa: E402

M1 = "ui-mixing-hurts"


@pytest.fixture(scope="module")
def ran(catalog):
    state = LabState.from_query(catalog, f"?mission={M1}")
    state.run()
    return state


def test_runs_split_at_a_slow_step_a_prefill_step_and_an_idle_gap():
    # steps:     0    1    2   3 slow  4    5 prefill  6    7 (after a gap)  8
    start = np.array([0.0, 1.0, 2.0, 3.0, 5.0, 6.0, 7.0, 9.0, 10.0])
    end = np.array([1.0, 2.0, 3.0, 5.0, 6.0, 7.0, 8.0, 10.0, 11.0])
    batch = np.array([3, 4, 2, 9, 5, 0, 6, 1, 7], dtype=np.int32)
    prompt = np.array([0, 100, 0, 0, 0, 500, 0, 0, 20], dtype=np.int32)
    within = (batch > 0) & np.array([True, True, True, False, True, True, True, True, True])
    runs, bounds = decode_runs(start, end, batch, prompt, within)
    assert runs["left"].tolist() == [0.0, 5.0, 7.0, 9.0]
    assert runs["right"].tolist() == [3.0, 6.0, 8.0, 11.0]
    assert runs["steps"].tolist() == [3, 1, 1, 2]
    assert runs["batch"].tolist() == [2, 5, 6, 1] and runs["batch_hi"].tolist() == [4, 5, 6, 7]
    assert runs["prompt"].tolist() == [100, 0, 0, 20]
    assert bounds.tolist() == [1.0, 2.0, 10.0]  # the boundaries inside runs only
    assert decode_runs(start, end, batch, prompt, np.zeros(9, dtype=bool))[0] is None


def test_the_runs_cover_exactly_the_steps_they_replace_and_slow_steps_stay_apart(ran):
    result = ran.result
    target_s = ran.scenario.slo.per_token_target_ms / 1000.0
    data = timeline_data(result, ran.scenario.slo.per_token_target_ms)
    rows = _rows(result)[0]
    runs, slow = data["decode"], data["slow"]
    merged = 0
    for log, row in zip(result.gpus, rows):
        start, end = np.asarray(log.start), np.asarray(log.end)
        batch = np.asarray(log.decode_seqs)
        within = (batch > 0) & (end - start <= target_s)
        mine = runs["y"] == row
        lefts, rights = runs["left"][mine].astype(float), runs["right"][mine].astype(float)
        steps = runs["steps"][mine]
        # Every step within the target is in exactly one run, whose steps are just those in it.
        owner = np.searchsorted(lefts, start[within].astype(np.float32).astype(float), side="right") - 1
        assert np.all(owner >= 0)
        assert np.all(end[within] <= rights[owner] + 1e-5)
        assert np.bincount(owner, minlength=len(lefts)).tolist() == steps.tolist()
        # ... and a run's time is its steps' time: back to back, nothing else inside.
        assert np.allclose(rights - lefts, np.bincount(owner, weights=(end - start)[within], minlength=len(lefts)),
                           atol=1e-4)
        # No slow step lies inside a run (it ends the run and keeps its own red box).
        s_left = slow["left"][slow["y"] == row].astype(float)
        inside = (s_left[:, None] > lefts[None, :] + 1e-6) & (s_left[:, None] < rights[None, :] - 1e-6)
        assert not inside.any()
        merged += int(steps.sum()) - len(steps)
    assert merged > 0 and len(runs["left"]) * 5 < int(runs["steps"].sum())  # mission 1 merges most of them
    # One tick (three points: top, bottom, a NaN break) per step boundary inside a run.
    bounds = data["bounds"]
    assert len(bounds["left"]) == 3 * merged and np.isnan(bounds["y"][2::3]).all()
    height = box_geometry(row_geometry(data["meta"]["rows"], frame_px(data["meta"]["rows"]))[0])["step_height"]
    assert np.allclose(bounds["y"][1::3] - bounds["y"][0::3], height, atol=1e-5)


def test_a_click_inside_a_run_opens_the_step_under_it(ran):
    canvas = Canvas(ran)
    picked = []
    canvas.on_step = lambda gpu, step: picked.append((gpu, step))
    result = ran.result
    rows = _rows(result)[0]
    runs = canvas.sources["decode"].data  # the runs around the window
    i = int(np.argmax(runs["steps"]))  # the longest run
    gpu = rows.index(int(runs["y"][i]))
    log = result.gpus[gpu]
    t_left, t_right = float(runs["left"][i]), float(runs["right"][i])
    inside = [k for k in range(len(log)) if t_left - 1e-6 <= log.start[k] and log.end[k] <= t_right + 1e-6]
    assert len(inside) == int(runs["steps"][i]) > 2
    k = inside[len(inside) // 2]

    class Tap:
        x, y = (log.start[k] + log.end[k]) / 2, float(rows[gpu]) + 0.1

    canvas._on_step_tap(Tap)
    assert picked == [(gpu, k)] and step_at(log, Tap.x) == k


def _rows_of(cols):
    names = sorted(cols)
    return {tuple(float(cols[c][i]) for c in names) for i in range(len(cols[names[0]]))}


@pytest.mark.parametrize("mission, settings", [(M1, {}), (M1, {"layout": "disaggregated"}), ("ui-decode-drowns", {})])
def test_the_steps_built_around_a_window_are_the_whole_runs_steps_there(catalog, mission, settings):
    """The live canvas builds only the steps around its window (step_layers over step_range):
    the same boxes, runs and ticks as the whole run's, every one that overlaps the span, and
    runs whole (a run breaks at each whole second, so none is cut at the span's edges)."""
    from lab.ui.data.canvas_data import run_layers, step_layers

    state = LabState.from_query(catalog, f"?mission={mission}")
    assert not settings or state.change_many(settings)
    state.run()
    result, target = state.result, state.scenario.slo.per_token_target_ms
    whole = timeline_data(result, target)
    meta = run_layers(result)["meta"]
    for lo, hi in ((-1.5, 4.0), (7.3, 12.8), (result.end_time - 3.0, result.end_time + 1.5), (1e6, 1e6 + 5)):
        part = step_layers(result, target, meta, (lo, hi))
        for name in ("decode", "slow", "prefill", "strip"):
            got, every = _rows_of(part[name]), _rows_of(whole[name])
            assert got <= every, name  # nothing the whole run does not draw, runs not cut
            cols = whole[name]
            overlap = (cols["right"] >= lo) & (cols["left"] <= hi)
            assert _rows_of({c: v[overlap] for c, v in cols.items()}) <= got, name  # and all it draws there
        ticks = set(part["bounds"]["left"][0::3].tolist())
        assert ticks <= set(whole["bounds"]["left"][0::3].tolist())
        inside = whole["bounds"]["left"][0::3]
        assert set(inside[(inside >= lo) & (inside <= hi)].tolist()) <= ticks
    runs = whole["decode"]
    assert len(runs["left"]) * 5 < int(runs["steps"].sum())  # broken at each second, runs still merge most steps


def test_a_run_breaks_where_its_steps_start_in_a_new_second():
    start = np.array([0.2, 0.5, 0.8, 1.1, 1.4, 1.7, 2.0])
    end = np.append(start[1:], 2.3)
    ones = np.ones(7, dtype=np.int32)
    runs, bounds = decode_runs(start, end, ones, ones * 0, np.ones(7, dtype=bool), second=np.floor(start))
    assert runs["left"].tolist() == [0.2, 1.1, 2.0] and runs["steps"].tolist() == [3, 3, 1]
    assert runs["right"].tolist() == [1.1, 2.0, 2.3]  # a run's last step may end in the next second
    assert bounds.tolist() == [0.5, 0.8, 1.4, 1.7]
    assert decode_runs(start, end, ones, ones * 0, np.ones(7, dtype=bool))[0]["steps"].tolist() == [7]
