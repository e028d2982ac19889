"""A run in two halves: the canvas's patch first (LabState.simulate), the metrics, stars and
tables in a later one (LabState.finish), and no simulated run left unjudged."""

import numpy as np
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


def _finish_turns(lab, app_timers, limit=10):
    """Fire the run's second half a part per turn, as the page's timers would; the turns it took."""
    turns = 0
    while any(t.callback == lab._finish_step and not t.stopped for t in app_timers.timers):
        app_timers.fire(lab._finish_step)
        turns += 1
        assert turns <= limit, "the second half never ends"
    return turns


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
    assert _finish_turns(lab, app_timers) >= 2  # the second half, in turns of its own
    second = {id(m) for m in seen}
    assert later_models & second and not canvas_models & second
    assert lab.state.run_id == 1 and not lab.state.busy and not lab.state.finishing
    assert lab.state.metrics["requests"] > 0 and len(lab.state.rows) == lab.state.metrics["requests"]
    assert 'data-run="1"' in lab.status.object
    # The plots still follow the metrics in a patch of their own.
    assert any(t.callback == lab._update_plots and not t.stopped for t in app_timers.timers)


def _watched_lab(app, catalog, monkeypatch):
    """Mission 1's lab, with the requests of every run judged and the stars saved recorded."""
    lab = app.LabApp(catalog, f"?mission={M1}&layout=disaggregated")
    judged = []
    evaluate = lab.state.mission.evaluate
    monkeypatch.setattr(type(lab.state.mission), "evaluate",
                        lambda self, metrics: judged.append(metrics["requests"]) or evaluate(metrics))
    earned = []
    monkeypatch.setattr(lab.bridge, "earn", lambda mission, stars: earned.append(list(stars)))
    return lab, judged, earned


def test_a_run_replaced_before_its_finish_is_judged_with_the_next_one(catalog, app_timers, monkeypatch):
    """A change that lands between a run's halves: the new run simulates at once (its canvas
    does not wait on the old run's metrics); the old run is not shown, but its stars are
    judged and saved with the new run's finish, so no run goes unjudged."""
    import lab.ui.app as app

    lab, judged, earned = _watched_lab(app, catalog, monkeypatch)
    lab.on_change("decode_gpus", 2)
    lab._run_now()
    first_result = lab.state.result
    assert judged == [] and lab.state.finishing
    lab.on_change("decode_gpus", 3)
    lab._run_now()  # the first run's second half has not run yet
    assert judged == [] and lab.state.run_id == 0 and lab.state.sim_id == 2
    assert lab.state.result is not first_result and lab.state.finishing
    assert not any(t.callback == lab._finish_step and not t.stopped for t in app_timers.timers[:-1])
    _finish_turns(lab, app_timers)
    assert len(judged) == 2 and lab.state.run_id == 2 and not lab.state.finishing
    assert earned and any(earned[-1])  # the first run's stars were saved
    # What is shown is the newest run's.
    assert lab.state.metrics == core.summarize(lab.state.result, core.request_metrics(lab.state.result))


def test_a_change_between_the_parts_of_a_finish_drops_the_rest(catalog, app_timers, monkeypatch):
    """The student changes a control while a run's second half is under way: its remaining
    parts are dropped (no metrics patch of a stale run), the newer run's metrics and stars
    arrive, and the stale run's stars still count."""
    import lab.ui.app as app

    lab, judged, earned = _watched_lab(app, catalog, monkeypatch)
    lab.on_change("decode_gpus", 2)
    app_timers.fire(lab._run_now)
    app_timers.fire(lab._finish_step)  # the metrics and stars measured, not yet shown
    assert len(judged) == 1 and lab.state.run_id == 0 and lab.state.metrics == {}
    lab.on_change("decode_gpus", 3)  # a run is now scheduled
    app_timers.fire(lab._finish_step)
    assert lab.state.run_id == 0 and lab.state.metrics == {}, "a stale run's metrics went out"
    assert not any(t.callback == lab._finish_step and not t.stopped for t in app_timers.timers)
    app_timers.fire(lab._run_now)
    _finish_turns(lab, app_timers)
    assert lab.state.run_id == lab.state.sim_id == 2 and not lab.state.busy
    assert len(judged) == 2  # the stale run's measuring was kept (LabState._kept): not judged twice
    assert earned and any(earned[-1])
    assert lab.state.metrics == core.summarize(lab.state.result, core.request_metrics(lab.state.result))


def test_stale_runs_are_judged_even_when_the_next_simulation_fails(catalog, monkeypatch):
    state = LabState.from_query(catalog, f"?mission={M1}&layout=disaggregated")
    state.change("decode_gpus", 2)
    assert state.simulate()
    judged = []
    evaluate = state.mission.evaluate
    monkeypatch.setattr(type(state.mission), "evaluate", lambda self, m: judged.append(1) or evaluate(m))
    monkeypatch.setattr(core, "simulate", lambda *a, **k: 1 / 0)
    state.change("decode_gpus", 3)
    assert state.simulate() is False
    assert judged == [1] and any(state.saved_stars) and "ZeroDivisionError" in state.run_error


def test_a_long_burst_without_a_finish_keeps_few_runs(catalog):
    """Runs replaced unfinished are kept (for their stars) up to MAX_UNJUDGED, then judged at once."""
    from lab.ui.state import MAX_UNJUDGED

    state = LabState.from_query(catalog, f"?mission={M1}")
    start = state.settings["gpus"]
    for i in range(MAX_UNJUDGED + 3):
        state.change("gpus", start + 1 if i % 2 == 0 else start)
        assert state.simulate()
        assert len(state._unjudged) <= MAX_UNJUDGED
    assert state.finish() is not None and state._unjudged == [] and not state.finishing


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


def test_a_setting_the_student_comes_back_to_reuses_its_run(catalog, monkeypatch):
    """Back to a setting seen before (a slider moved back and forth): its run and its measuring
    are reused, not recomputed, and what the state publishes equals a fresh run's."""
    state = LabState.from_query(catalog, f"?mission={M1}")
    start = state.settings["gpus"]
    assert state.run() is not None
    first, first_metrics = state.result, state.metrics
    state.change("gpus", start + 1)
    assert state.run() is not None and state.result is not first
    calls = []
    for name in ("simulate", "request_metrics", "request_blame"):
        real = getattr(core, name)
        monkeypatch.setattr(core, name, lambda *a, _real=real, _name=name, **k: calls.append(_name) or _real(*a, **k))
    state.change("gpus", start)
    assert state.run() is not None
    assert calls == [] and state.result is first and state.metrics == first_metrics
    monkeypatch.undo()
    fresh = LabState.from_query(catalog, f"?mission={M1}")
    assert fresh.run() == state.metrics and fresh.blame_summary == state.blame_summary
    assert fresh.rows == state.rows


def test_kept_runs_are_few_and_a_new_trace_is_a_new_run(catalog, monkeypatch):
    from lab.ui.state import MAX_KEPT_RUNS

    state = LabState.from_query(catalog, f"?mission={M1}")
    lo, hi = state.mission.controls["gpus"].min, state.mission.controls["gpus"].max
    values = [v for v in range(int(lo), int(hi) + 1)][:MAX_KEPT_RUNS + 2]
    assert len(values) > MAX_KEPT_RUNS, "the mission's gpus range is too narrow for this test"
    for v in values:
        state.change("gpus", v)
        assert state.simulate()
    assert len(state._kept) == MAX_KEPT_RUNS
    sims = []
    real = core.simulate
    monkeypatch.setattr(core, "simulate", lambda *a, **k: sims.append(1) or real(*a, **k))
    state.change("gpus", values[0])  # the oldest: no longer kept
    assert state.simulate() and sims == [1]
    state.change("gpus", values[-1])  # kept
    assert state.simulate() and sims == [1]
    # The same scenario on other requests is another run (identity of the request list).
    kept = state._kept_run(state.scenario, None)
    assert kept is not None and state._kept_run(state.scenario, [(0.0, 10, 10)]) is None


def test_kept_and_unjudged_runs_are_bounded_by_their_steps_too(catalog, monkeypatch):
    """A few big runs (a replayed trace) must not fill the tab: past MAX_HELD_STEPS logged
    steps in all the oldest kept run goes (the newest always stays), and runs replaced
    unfinished are judged at once rather than held."""
    from lab.ui import state as state_module

    state = LabState.from_query(catalog, f"?mission={M1}")
    start = state.settings["gpus"]
    assert state.simulate()
    one_run = sum(len(log) for log in state.result.gpus)
    monkeypatch.setattr(state_module, "MAX_HELD_STEPS", int(one_run * 1.5))  # room for one run, not two
    state.change("gpus", start + 1)
    assert state.simulate()
    assert list(state._kept.values())[-1]["result"] is state.result and len(state._kept) == 1
    assert len(state._unjudged) == 1  # the first run, replaced unfinished: within the bound, held
    monkeypatch.setattr(state_module, "MAX_HELD_STEPS", 1)  # below even one run: the newest stays
    state.change("gpus", start)
    assert state.simulate() and len(state._kept) == 1 and state._kept_run(state.scenario, state.run_input()[1])
    assert state._unjudged == []  # the two replaced runs were over the bound: judged at once


def test_a_run_a_worker_measured_is_judged_without_measuring_it_again(catalog, monkeypatch):
    """A run replaced before its finish, whose kept entry then went (big runs: MAX_HELD_STEPS),
    is judged by the stars its worker measured: the loop does not measure it again (at the
    page's bound that took 2 s of the loop, every page waiting)."""
    from lab.ui import state as state_module

    state = LabState.from_query(catalog, f"?mission={M1}")
    start = state.settings["gpus"]
    first = state.prepare_run(whole=True)()  # what a worker sends back: the run and its measures
    assert state.simulate(first)
    first_met = state_module.measure(state.mission, state.result)[2]
    one_run = sum(len(log) for log in state.result.gpus)
    monkeypatch.setattr(state_module, "MAX_HELD_STEPS", int(one_run * 1.5))  # room for one run
    measured = []
    real_measure = state_module.measure
    monkeypatch.setattr(state_module, "measure", lambda *args: measured.append(args) or real_measure(*args))
    state.change("gpus", start + 1)
    assert state.simulate(state.prepare_run(whole=True)())
    assert len(state._kept) == 1 and state._unjudged == [(None, first_met)]  # the first run's stars, not the run
    assert state.finish() is not None and state._unjudged == []
    assert measured == []


def _pending(app_timers, callback):
    return [t for t in app_timers.timers if t.callback == callback and not t.stopped]


def test_the_second_half_starts_once_the_page_has_painted_the_canvas(catalog, app_timers):
    """The metrics wait for the page's word that the run's canvas is painted (the canvas's
    `stf-painted`, through PageBridge), so the browser draws it with the CPU to itself; a
    page that says nothing (a hidden tab) gets them FINISH_WAIT_MS later all the same."""
    import lab.ui.app as app

    lab = app.LabApp(catalog, f"?mission={M1}")
    lab._run_now()
    waiting = _pending(app_timers, lab._finish_step)
    assert [t.delay_ms for t in waiting] == [app.FINISH_WAIT_MS] and app.FINISH_WAIT_MS > 10 * app.FINISH_LAG_MS
    lab.url._handle_msg({"type": "painted", "run": lab.state.sim_id - 1})  # an older run's paint
    lab.url._handle_msg({"type": "painted", "run": str(lab.state.sim_id)})  # not a run number
    assert _pending(app_timers, lab._finish_step) == waiting
    lab.url._handle_msg({"type": "painted", "run": lab.state.sim_id})
    now = _pending(app_timers, lab._finish_step)
    assert waiting[0].stopped and [t.delay_ms for t in now] == [app.FINISH_LAG_MS]
    lab.url._handle_msg({"type": "painted", "run": lab.state.sim_id})  # said twice: still one second half
    assert _pending(app_timers, lab._finish_step) == now
    _finish_turns(lab, app_timers)
    assert lab.state.run_id == lab.state.sim_id == 1 and not lab.state.busy


def test_the_overview_follows_with_the_plots_not_with_the_canvas(catalog, app_timers):
    """A change's canvas patch carries the window's steps only; the whole run's overview (and
    the slow steps "next slow step" jumps to) come with the plots, after the paint."""
    import lab.ui.app as app

    lab = app.LabApp(catalog, f"?mission={M1}")
    doc = Document()
    lab.view.server_doc(doc)
    lab._run_now()  # the first run: its overview comes with it (nothing on screen yet to hurry)
    first = list(lab.canvas.overview_source.data["busy"])
    assert first and max(first) > 0
    _finish_turns(lab, app_timers)
    app_timers.fire(lab._update_plots)
    seen = _changed_models(doc)
    lab.on_change("gpus", lab.state.settings["gpus"] + 1)
    assert lab.state.busy
    lab._run_now()
    assert id(lab.canvas.sources["decode"]) in {id(m) for m in seen}
    assert id(lab.canvas.overview_source) not in {id(m) for m in seen}
    assert lab.canvas.overview_source.data["busy"] == first  # still the last run's, for a moment
    seen.clear()
    _finish_turns(lab, app_timers)
    app_timers.fire(lab._update_plots)
    assert id(lab.canvas.overview_source) in {id(m) for m in seen}
    assert lab.canvas.overview_source.data["busy"] != first
    starts = lab.canvas.slow_starts()
    assert len(starts) and np.all(np.diff(starts) >= 0)


def test_the_canvas_holds_data_only_for_runs_the_state_still_keeps(catalog, monkeypatch):
    """The canvas's per-run data (Canvas._built) follows the state's kept runs, so the steps
    bound on kept runs bounds what the canvas holds too; the run shown always has its data."""
    from lab.ui import state as state_module
    from lab.ui.timeline.canvas import Canvas

    state = LabState.from_query(catalog, f"?mission={M1}")
    canvas = Canvas(state)
    start = state.settings["gpus"]
    assert start + 3 <= state.mission.controls["gpus"].max, "the mission's gpus range is too narrow for this test"
    assert state.simulate()
    for gpus in (start + 1, start + 2):
        state.change("gpus", gpus)
        assert state.simulate()
    assert len(canvas._built) == 3  # three runs, all kept
    monkeypatch.setattr(state_module, "MAX_HELD_STEPS", 1)  # from the next new run on, only the newest is kept
    state.change("gpus", start + 3)
    assert state.simulate() and len(state._kept) == 1
    assert [e["result"] for e in canvas._built] == [state.result]


def test_no_garbage_collection_runs_until_the_canvas_is_out(catalog, app_timers, monkeypatch):
    """lab/ui/timeline/collector.py: the collector is off from a run's start to its second half, on
    again from the second half's first turn, and back on when a run fails; the page's heap is
    frozen once its first run's plots are out."""
    import gc

    import lab.ui.app as app
    from lab.ui.timeline import collector

    frozen = []
    monkeypatch.setattr(collector.gc, "freeze", lambda: frozen.append(True))
    assert gc.isenabled()
    lab = app.LabApp(catalog, f"?mission={M1}")
    try:
        enabled = []
        simulate = core.simulate
        monkeypatch.setattr(core, "simulate", lambda *args: enabled.append(gc.isenabled()) or simulate(*args))
        lab._run_now()
        assert enabled == [False] and not gc.isenabled()  # off while simulating, and until the second half
        app_timers.fire(lab._finish_step)
        assert gc.isenabled()
        _finish_turns(lab, app_timers)
        assert not frozen
        app_timers.fire(lab._update_plots)
        assert frozen == [True]  # the first run is up: the heap that lives as long as the page
        lab._update_plots()
        assert frozen == [True]  # once a page

        def fail():
            raise RuntimeError("boom")

        monkeypatch.setattr(lab.state, "simulate", fail)
        lab._run_now()
        assert gc.isenabled() and lab.state.run_error  # a failed run holds nothing
    finally:
        collector.release()
        gc.enable()


def test_the_first_document_goes_without_the_plots_figures_which_come_after_the_paint(catalog, app_timers):
    """The three plots' figures (a third of the page's models) are made at the first run's
    plots. A run judged before the page painted its canvas (the page's first, simulated while
    the browser still builds the page) sends its metrics, stars and the judged mark (the
    static site swaps its first view at it) alone; its plots wait for that paint (or
    PLOTS_WAIT_MS). Judged after the paint, the plots follow PLOTS_LAG_MS later."""
    import lab.ui.app as app

    lab = app.LabApp(catalog, f"?mission={M1}")
    doc = Document()
    lab.view.server_doc(doc)
    names = lambda: {m.name for m in doc.models if m.name}  # noqa: E731
    plots = {"gap_plot", "itl_plot", "sweep_plot"}
    first_models = len(doc.models)
    assert not plots & names()
    lab._run_now()
    _finish_turns(lab, app_timers)  # the page never said it painted: the second half after FINISH_WAIT_MS
    assert lab.judged_mark.object == '<span data-judged-run="1"></span>'
    assert not plots & names()  # judged: the metrics and stars are out, the plots not yet
    waiting = _pending(app_timers, lab._update_plots)
    assert [t.delay_ms for t in waiting] == [app.PLOTS_WAIT_MS] and app.PLOTS_WAIT_MS > 10 * app.PLOTS_LAG_MS
    lab.url._handle_msg({"type": "painted", "run": 1})
    now = _pending(app_timers, lab._update_plots)
    assert waiting[0].stopped and [t.delay_ms for t in now] == [app.PLOTS_LAG_MS]
    app_timers.fire(lab._update_plots)
    assert plots <= names()
    assert len(doc.models) > first_models * 1.3
    assert len(lab.plots.gap_met.data["x"]) + len(lab.plots.gap_miss.data["x"]) > 0

    lab.on_change("gpus", lab.state.settings["gpus"] + 1)  # a run the page paints before it is judged
    lab._run_now()
    lab.url._handle_msg({"type": "painted", "run": lab.state.sim_id})
    _finish_turns(lab, app_timers)
    assert lab.judged_mark.object == '<span data-judged-run="2"></span>'
    assert [t.delay_ms for t in _pending(app_timers, lab._update_plots)] == [app.PLOTS_LAG_MS]


def test_the_first_plots_join_the_page_in_one_walk_of_its_models(catalog, app_timers, monkeypatch):
    """Bokeh walks every model of the page (about 600) whenever one joins it outside a freeze:
    the first plots' three figures once made it walk four times in that patch. Now once, and a
    later run's plots, which add no model, not at all. The page still knows every model."""
    import lab.ui.app as app
    from bokeh.document.models import DocumentModelManager
    from bokeh.model.util import collect_models
    from panel.io.state import set_curdoc

    walks = []
    recompute = DocumentModelManager.recompute
    monkeypatch.setattr(DocumentModelManager, "recompute", lambda self: walks.append(1) or recompute(self))
    lab = app.LabApp(catalog, f"?mission={M1}")
    doc = Document()
    with set_curdoc(doc):  # as under `lab serve` and in Pyodide, where callbacks run in the page's document
        lab.view.server_doc(doc)
        lab._run_now()
        _finish_turns(lab, app_timers)
        walks.clear()
        app_timers.fire(lab._update_plots)
        assert len(walks) == 1
        assert {"gap_plot", "itl_plot", "sweep_plot"} <= {m.name for m in doc.models if m.name}
        assert set(doc.models) == set(collect_models(*doc.roots))
        lab.on_change("gpus", lab.state.settings["gpus"] + 1)
        lab._run_now()
        _finish_turns(lab, app_timers)
        walks.clear()
        app_timers.fire(lab._update_plots)
        assert walks == []
