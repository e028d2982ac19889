"""lab/ui/data/run_views.py: a whole-run view is computed once per run, and under `lab serve` in the
worker process, whose values travel back with the run so the page's loop only looks them up."""

import functools
import pickle
from pathlib import Path

import pytest

pytest.importorskip("numpy")

import lab.core as core  # noqa: E402
from lab.ui.data.canvas_data import overview_data, run_layers  # noqa: E402
from lab.ui.data.plot_data import itl_histogram  # noqa: E402
from lab.ui.data.run_views import KEPT_AS, per_run  # noqa: E402
from lab.ui.runs.run_work import run_work  # noqa: E402

MISSION_01 = Path(__file__).resolve().parents[2] / "missions" / "01-mixing-hurts.json"


def _same(a, b):
    """Equal views: dicts, tuples and lists of numbers and numpy arrays."""
    import numpy as np

    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (tuple, list)) and not isinstance(a, str):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, np.ndarray):
        return a.dtype == b.dtype and np.array_equal(a, b, equal_nan=True)
    return a == b


def test_a_view_is_computed_once_per_run_and_arguments():
    calls = []

    @per_run
    def view(result, scale):
        calls.append(scale)
        return [len(result.requests) * scale]

    result = core.simulate(core.load_mission(str(MISSION_01)).scenario)
    assert view(result, 2) is view(result, 2)  # the same value, kept
    assert view(result, 3) == [3 * len(result.requests)]
    assert calls == [2, 3]
    other = core.simulate(core.load_mission(str(MISSION_01)).scenario)
    view(other, 2)
    assert calls == [2, 3, 2]  # kept per run, not per equal run
    assert view.uncached(result, 2) == [2 * len(result.requests)] and calls[-1] == 2


def test_a_measured_run_brings_its_views_which_the_page_then_only_looks_up():
    mission = core.load_mission(str(MISSION_01))
    target = mission.scenario.slo.per_token_target_ms
    work = functools.partial(run_work, mission, mission.scenario, None, True, None, measured=True, plot_px=198)
    back = pickle.loads(pickle.dumps(work()))["result"]  # as it crosses from a worker process
    kept = back.__dict__[KEPT_AS]
    assert len(kept) == 3
    for view, args in ((run_layers, (198,)), (overview_data, (target,)), (itl_histogram, (target,))):
        value = view(back, *args)
        assert any(value is v for v in kept.values())  # looked up, not built again
        assert _same(value, view.uncached(back, *args))  # and what building it gives
    assert len(kept) == 3


def test_the_page_shows_a_worker_run_without_building_its_views(catalog, app_timers):
    """The loop's half of a run that came from a worker process: the canvas's layers and the
    plots' histogram are the run's own (built in the worker), not built again."""
    import lab.ui.app as app
    from bokeh.document import Document
    from lab.ui.runs import offload

    lab = app.LabApp(catalog, "?mission=ui-mixing-hurts")
    lab.view.server_doc(Document())
    work = lab.state.prepare_run(whole=True, plot_px=lab.canvas.plot_px)
    outcome = pickle.loads(pickle.dumps(offload.Outcome.of(work)))
    lab._ran(outcome)
    result = lab.state.result
    kept = result.__dict__[KEPT_AS]
    layers = lab.canvas._data_for(result, lab.state.scenario.slo.per_token_target_ms)["layers"]
    assert any(layers is v for v in kept.values())
    assert len(kept) == 3
