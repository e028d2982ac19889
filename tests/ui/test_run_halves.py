"""A run in two halves: the canvas's patch first (LabState.simulate), the metrics, stars and
tables in a later one (LabState.finish), and no simulated run left unjudged."""

import pytest

pytest.importorskip("panel")
pytest.importorskip("numpy")

import lab.core as core  # noqa: E402
from bokeh.document import Document  # noqa: E402
from bokeh.document.events import ColumnDataChangedEvent, ColumnsStreamedEvent, ModelChangedEvent  # noqa: E402
from lab.ui.state import LabState  # noqa: E402

M1 = "ui-mixing-hurts"


def _changed_models(doc):
    """The models each document event touches, recorded until the list is read."""
    seen = []

    def record(event):
        if isinstance(event, (ModelChangedEvent, ColumnDataChangedEvent, ColumnsStreamedEvent)):
            seen.append(event.model)

    doc.on_change(record)
    return seen


def _pane_models(pane):
    return {id(model) for model, _parent in pane._models.values()}


def test_the_canvas_patch_goes_out_before_the_metrics_and_the_stars(catalog, app_timers):
    import lab.ui.app as app

    lab = app.LabApp(catalog, f"?mission={M1}")
    doc = Document()
    lab.view.server_doc(doc)
    seen = _changed_models(doc)
    canvas_models = {id(lab.canvas.meta), id(lab.canvas.sources["decode"])}
    later_models = _pane_models(lab.metrics.pane) | _pane_models(lab.stars.pane) | _pane_models(lab.status)
    assert later_models

    lab._run_now()  # the first half: the simulation and the canvas's data
    first = {id(m) for m in seen}
    assert canvas_models <= first
    assert not first & later_models, "the metrics, stars or status went out with the canvas"
    assert lab.canvas.meta.data["run"] == [1] and lab.state.sim_id == 1
    assert lab.state.run_id == 0 and lab.state.busy and lab.state.metrics == {}
    assert lab.state.finishing

    seen.clear()
    app_timers.fire(lab._finish_now)  # the second half, in a turn of its own
    second = {id(m) for m in seen}
    assert later_models & second and not canvas_models & second
    assert lab.state.run_id == 1 and not lab.state.busy and not lab.state.finishing
    assert lab.state.metrics["requests"] > 0 and len(lab.state.rows) == lab.state.metrics["requests"]
    assert 'data-run="1"' in lab.status.object
    # The plots still follow the metrics in a patch of their own.
    assert any(t.callback == lab._update_plots and not t.stopped for t in app_timers.timers)


def test_a_run_simulated_before_the_last_one_finished_is_judged_first(catalog, app_timers, monkeypatch):
    """A change that lands between a run's halves: the old run's stars are judged (and saved)
    before the new one simulates, so no run goes unjudged."""
    import lab.ui.app as app

    lab = app.LabApp(catalog, f"?mission={M1}&layout=disaggregated")
    judged = []
    evaluate = lab.state.mission.evaluate
    monkeypatch.setattr(type(lab.state.mission), "evaluate",
                        lambda self, metrics: judged.append(metrics["requests"]) or evaluate(metrics))
    earned = []
    monkeypatch.setattr(lab.bridge, "earn", lambda mission, stars: earned.append(list(stars)))
    lab.on_change("decode_gpus", 2)
    lab._run_now()
    first_result = lab.state.result
    assert judged == [] and lab.state.finishing
    lab.on_change("decode_gpus", 3)
    lab._run_now()  # the timer of the first run's second half has not fired yet
    assert len(judged) == 1 and lab.state.run_id == 1 and lab.state.sim_id == 2
    assert lab.state.result is not first_result and lab.state.finishing
    assert earned and any(earned[-1])  # the first run's stars were saved
    app_timers.fire(lab._finish_now)
    assert len(judged) == 2 and lab.state.run_id == 2 and not lab.state.finishing


def test_simulate_publishes_the_result_and_finish_measures_that_result(catalog):
    state = LabState.from_query(catalog, f"?mission={M1}")
    assert state.finish() is None  # nothing simulated: nothing to finish
    assert state.simulate()
    result = state.result
    assert state.sim_id == 1 and state.run_id == 0 and state.metrics == {}
    state.change("gpus", state.settings["gpus"] + 1)  # a change in between does not alter what is judged
    metrics = state.finish()
    assert metrics == core.summarize(result, core.request_metrics(result))
    assert state.run_id == state.sim_id == 1 and not state.busy
    assert state.run_ms > 0


def test_a_simulation_that_fails_ends_the_run_at_once(catalog, monkeypatch):
    state = LabState.from_query(catalog, f"?mission={M1}")
    monkeypatch.setattr(core, "simulate", lambda *a, **k: 1 / 0)
    assert state.simulate() is False
    assert state.run_id == state.sim_id == 1 and not state.busy and not state.finishing
    assert "ZeroDivisionError" in state.run_error and state.result is None


def test_metrics_that_fail_clear_the_published_result(catalog, monkeypatch):
    state = LabState.from_query(catalog, f"?mission={M1}")
    assert state.simulate() and state.result is not None
    monkeypatch.setattr(core, "summarize", lambda *a, **k: 1 / 0)
    assert state.finish() is None
    assert state.result is None and state.run_id == state.sim_id == 2 and not state.busy
    assert "ZeroDivisionError" in state.run_error
