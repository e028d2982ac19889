"""Page defects that need no browser: failed runs, hostile addresses, the cut warning,
the catalog reload, next slow step, idle controls and the sandbox's trace replay.

The browser side of the same defects is in test_page_browser.py.
"""

import os
import shutil
from pathlib import Path

import pytest

pytest.importorskip("panel")
pytest.importorskip("numpy")

import lab.core as core  # noqa: E402
from lab.core.spec import MAX_REQUESTS  # noqa: E402
from lab.ui.timeline.canvas import Canvas  # noqa: E402
from lab.ui.catalog import SANDBOX_ID, Catalog, folder_fingerprint  # noqa: E402
from lab.ui.views.controls import EMBED_CONTROL_FLEX, Controls, replay_html  # noqa: E402
from lab.ui.views.metrics_view import MetricsView, metrics_html, run_cut_html  # noqa: E402
from lab.ui.state import WINDOW_S, LabState, parse_search  # noqa: E402
from trace_mission import write_trace_mission  # noqa: E402  (tests/ui is on sys.path: pytest prepends it)

REPO = Path(__file__).resolve().parents[2]
FIXTURES = Path(__file__).resolve().parent / "missions"
M1 = "ui-mixing-hurts"
M2 = "ui-decode-drowns"
HUGE = "9" * 10_000


def trace_folder(tmp_path):
    """A missions folder with a mission that replays a trace file beside it."""
    mission, trace = write_trace_mission(tmp_path)
    return mission["id"], trace


# ---------------------------------------------------------------- 1. a run never hangs the page

def test_a_trace_that_vanished_fails_the_run_with_its_reason_and_the_state_goes_idle(tmp_path):
    mission_id, trace = trace_folder(tmp_path)
    state = LabState.from_query(Catalog(tmp_path), f"?mission={mission_id}")
    assert state.mission.id == mission_id
    trace.unlink()  # gone after the catalog loaded it (or made unreadable)
    state.busy = True
    assert state.run() is None
    assert not state.busy
    assert state.run_error.startswith("workload.trace.path: no trace file")
    assert state.result is None and state.metrics == {} and state.rows == []
    view = MetricsView(state)
    assert 'data-run-error="true"' in view.pane.object and "no trace file" in view.pane.object


def test_an_unexpected_error_is_escaped_and_the_next_change_runs_again(catalog, monkeypatch):
    state = LabState.from_query(catalog, f"?mission={M1}")
    view = MetricsView(state)
    real = core.simulate

    def boom(scenario, requests=None):
        raise RuntimeError("<img src=x onerror=alert(1)>")

    monkeypatch.setattr(core, "simulate", boom)
    assert state.run() is None
    assert not state.busy and state.run_id == 1
    assert "RuntimeError" in state.run_error
    assert "<img" not in view.pane.object and "&lt;img src=x" in view.pane.object
    monkeypatch.setattr(core, "simulate", real)
    assert state.change("gpus", 5)
    assert state.run() is not None
    assert state.run_error == "" and state.metrics["requests"] > 0
    assert 'data-metric="ttft"' in view.pane.object


def test_a_rate_whose_draw_passes_the_request_cap_is_a_run_error_not_a_hang(catalog, monkeypatch):
    """The workload's check uses the expected count; the random draw can still pass the cap."""
    import lab.core.engine as engine

    def draw_too_many(workload, seed):
        raise core.LabError("workload.rate", f"more than {MAX_REQUESTS:,} requests; lower the rate or duration")

    monkeypatch.setattr(engine, "generate_requests", draw_too_many)
    monkeypatch.setattr(core, "generate_requests", draw_too_many)  # (the page draws them first: run_work.page_requests)
    state = LabState.from_query(catalog, f"?mission={M1}")
    assert state.run() is None
    assert state.run_error == f"workload.rate: more than {MAX_REQUESTS:,} requests; lower the rate or duration"


@pytest.mark.parametrize("bound, value, words", [
    ("PAGE_MAX_REQUESTS", 500, "requests; the lab page runs at most 500 (`python -m lab run` runs up to 1,048,576 "),
    ("PAGE_MAX_S", 30.0, "s; the lab page runs at most 30 s (`python -m lab run` runs up to 1,048,576 "),
])
def test_a_mission_past_the_pages_bounds_is_refused_naming_the_bound(catalog, monkeypatch, bound, value, words):
    """A mission, not only an upload, is held to what one page runs (lab/core/page_bounds.py):
    mission 1 draws 722 requests over 60 s; the bounds are lowered here to meet it."""
    import lab.core.page_bounds as page_bounds

    state = LabState.from_query(catalog, f"?mission={M1}")
    assert state.run() is not None
    monkeypatch.setattr(page_bounds, bound, value)
    state.change("gpus", state.settings["gpus"] + 1)  # a run not kept (a kept one would not simulate)
    assert state.run() is None and not state.busy
    assert words in state.run_error
    assert state.run_error.startswith("workload.rate: 7" if bound == "PAGE_MAX_REQUESTS" else "workload.duration_s: requests arrive over 60 s")


def test_a_sweep_past_the_pages_bounds_stops_there_and_says_why(catalog, monkeypatch, app_timers):
    """The rate sweep runs the fleet up to twice its rate: a point past what one page runs ends
    the curve at the points before it, and the sweep's note names the rate and the bound
    (it used to end with an error in the server's log and nothing on the page)."""
    import lab.core.page_bounds as page_bounds
    import lab.ui.app as app
    from bokeh.document import Document

    monkeypatch.setattr(page_bounds, "PAGE_MAX_REQUESTS", 1_000)  # mission 1: 12 req/s over 60 s, so about 16 req/s
    state = LabState.from_query(catalog, f"?mission={M1}")
    sweep = state.run_sweep(points=8)
    assert 0 < len(sweep["rates"]) < 8 and len(sweep["goodput"]) == len(sweep["rates"])
    assert max(sweep["rates"]) * 60 < 1_100
    assert sweep["stopped"].startswith("The sweep stopped at ")
    assert "requests; the lab page runs at most 1,000" in sweep["stopped"]
    assert state.sweep_progress is None

    lab = app.LabApp(catalog, f"?mission={M1}")
    lab.view.server_doc(Document())
    lab.on_sweep()
    while any(t.callback == lab._sweep_step and not t.stopped for t in app_timers.timers):
        app_timers.fire(lab._sweep_step)
    assert lab.state.sweep["stopped"] == sweep["stopped"] and lab._sweep_iter is None
    assert "The sweep stopped at " in lab.plots.sweep_note.object
    assert not lab.plots.progress.visible and not lab.plots.sweep_button.disabled


def test_a_page_past_the_heavy_mark_runs_its_work_in_the_low_priority_pool(catalog, monkeypatch, app_timers):
    """Under `lab serve` a run expected to draw more than HEAVY_REQUESTS (rate x duration, the
    busiest phase's rate; a given trace's length; a trace the workload reads: its last run's)
    goes to the heavy pool (offload.py), and so do that page's sweep points and pinned fleet."""
    import lab.ui.app as app
    import lab.ui.runs.offload as offload
    import lab.ui.state as state_module
    from bokeh.document import Document
    from lab.ui.runs.run_work import expected_requests

    lab = app.LabApp(catalog, f"?mission={SANDBOX_ID}")
    lab.view.server_doc(Document())
    state = lab.state
    workload = state.scenario.workload
    expected = expected_requests(*state.run_input())
    assert expected == workload.rate * workload.duration_s
    HEAVY_REQUESTS = expected + 1  # (the sandbox's rate control stops far below the real mark)
    monkeypatch.setattr(state_module, "HEAVY_REQUESTS", HEAVY_REQUESTS)
    assert not state.heavy()
    sent = []
    monkeypatch.setattr(offload, "run", lambda work, then, heavy=False: sent.append(heavy))
    lab._run_now()
    state.change("rate", workload.rate * 2)
    assert state.heavy()
    lab._running = False
    lab._run_now()
    lab.on_sweep()
    app_timers.fire(lab._sweep_step)
    assert sent == [False, True, True]
    busiest = HEAVY_REQUESTS / workload.duration_s * 2
    scenario = state.scenario.with_changes({"workload.phases": [{"start_s": 1, "rate": busiest}], "workload.rate": 1})
    assert expected_requests(scenario, None) == busiest * workload.duration_s
    assert expected_requests(scenario, ((0.0, 10, 10),) * 3) == 3


def test_a_failed_run_clears_the_canvas_and_advances_its_run_marker(catalog, monkeypatch):
    state = LabState.from_query(catalog, f"?mission={M1}")
    state.run()
    canvas = Canvas(state)
    assert len(canvas.sources["decode"].data["left"]) > 0
    assert len(canvas.sources["queue"].data["left"]) > 0 and canvas.peak_labels["prefill"].text
    monkeypatch.setattr(core, "simulate", lambda *a, **k: 1 / 0)
    state.change("gpus", state.settings["gpus"] + 1)  # not run before (a kept run would not simulate)
    state.run()
    assert canvas.meta.data["run"] == [state.run_id]
    assert all(len(src.data["left"]) == 0 for src in canvas.sources.values())  # the queue rows and KV bands too
    assert all(label.text == "" for label in canvas.peak_labels.values())  # no queue peak of an unshown run


# ---------------------------------------------------------------- 2. hostile addresses

@pytest.mark.parametrize("key", ["gpus", "rate", "mission", "window", "t"])
def test_ten_thousand_digits_in_any_value_go_through_the_lab_parser(catalog, key):
    mission = M1 if key != "mission" else HUGE
    query = f"?mission={mission}&{key}={HUGE}" if key != "mission" else f"?mission={HUGE}&gpus=5"
    state = LabState.from_query(catalog, query)
    assert state.notes, "a rejected value must be named in a note"
    assert all(len(n) < 400 for n in state.notes)
    assert state.mission.id == M1
    assert HUGE not in state.search()


def test_a_huge_value_does_not_hide_the_values_after_it():
    params = parse_search(f"?gpus={HUGE}&mission={M2}&rate=3")
    assert params["mission"] == M2 and params["rate"] == "3"
    assert len(params["gpus"]) <= 256


def test_panel_location_no_longer_parses_the_query_it_does_not_sync():
    from panel.io.location import Location

    from lab.ui.browser.page_bridge import guard_location

    guard_location()
    loc = Location()
    loc.search = f"?mission={M1}&gpus={HUGE}"  # raised ValueError (int digit limit) before the guard
    assert loc.search.endswith(HUGE)


# ---------------------------------------------------------------- 8. the cut

def test_a_cut_run_shows_a_warning_with_when_why_and_how_many(catalog):
    state = LabState.from_query(catalog, f"?mission={M1}")
    metrics = dict(state.run(), run_cut="drain_s", run_end_s=180.0, unfinished=37)
    page = metrics_html(metrics, state.scenario)
    assert "This run was cut at 180 s (drain limit): 37 requests unfinished count as misses." in page
    assert 'data-run-cut="drain_s"' in page
    steps = run_cut_html({"run_cut": "max_steps", "run_end_s": 12.5, "unfinished": 1})
    assert "cut at 12 s (step limit): 1 request unfinished counts as a miss" in steps
    assert run_cut_html({"run_cut": None, "unfinished": 3}) == "" == run_cut_html({})
    assert "stf-cut" not in metrics_html({**metrics, "run_cut": None}, state.scenario)


# ---------------------------------------------------------------- 9. the catalog follows its folder

def test_the_catalog_reloads_when_a_mission_file_is_added_and_isolates_a_broken_one(tmp_path):
    for name in ("01-mixing-hurts.json",):
        shutil.copy(FIXTURES / name, tmp_path / name)
    cat = Catalog(tmp_path)
    assert [m.id for m in cat.missions] == [M1] and not cat.refresh()
    shutil.copy(FIXTURES / "02-decode-drowns.json", tmp_path / "02-decode-drowns.json")
    assert cat.refresh()
    assert [m.id for m in cat.missions] == [M1, M2]
    (tmp_path / "03-broken.json").write_text('{"id": "broken", ', encoding="utf-8")
    assert cat.refresh()
    assert [m.id for m in cat.missions] == [M1, M2]  # the good ones still load
    assert [name for name, _ in cat.broken] == ["03-broken.json"]
    assert "03-broken.json" in cat.error
    assert folder_fingerprint(tmp_path) == cat.fingerprint and not cat.refresh()
    (tmp_path / "03-broken.json").unlink()
    assert cat.refresh() and cat.broken == [] and cat.error == ""


def test_missions_are_numbered_by_their_order_and_each_broken_file_gets_one_note(tmp_path):
    """An instructor's folder: a mission of order 20 is "Mission 20" on the hub and the lab page
    (not "Mission 1"), and each file that fails to load gets a note of its own naming it once,
    with no claim that the missions could not be loaded while one did."""
    import json

    from lab.ui.hub import HubApp

    data = json.loads((FIXTURES / "01-mixing-hurts.json").read_text(encoding="utf-8"))
    data.update(id="my-mission", order=20)
    (tmp_path / "20-my-mission.json").write_text(json.dumps(data), encoding="utf-8")
    (tmp_path / "21-broken.json").write_text('{"id": "broken", ', encoding="utf-8")
    (tmp_path / "22-also-broken.json").write_text('{"id": "also-broken"}', encoding="utf-8")
    cat = Catalog(tmp_path)
    mission = cat.get("my-mission")
    assert cat.kicker(mission) == "Mission 20" and cat.kicker(cat.sandbox) == "Sandbox"
    assert len(cat.broken_notes) == 2
    for name, note in zip(("21-broken.json", "22-also-broken.json"), cat.broken_notes):
        assert note.count(name) == 1 and note.startswith(f"{name} could not be loaded"), note
    assert "Could not load the missions" not in cat.error
    hub = HubApp(cat)
    assert '<span class="num">Mission 20</span>' in hub.list.object
    assert hub.note.object.count("<li>") == 2 and "22-also-broken.json could not be loaded" in hub.note.object
    shipped = Catalog()  # (orders 1 to N: "of N" too)
    assert all(shipped.kicker(m) == f"Mission {m.order} of {len(shipped.missions)}" for m in shipped.missions)


def test_a_duplicate_id_is_listed_as_broken_not_fatal(tmp_path):
    shutil.copy(FIXTURES / "01-mixing-hurts.json", tmp_path / "01-mixing-hurts.json")
    shutil.copy(FIXTURES / "01-mixing-hurts.json", tmp_path / "01-copy.json")
    cat = Catalog(tmp_path)
    assert [m.id for m in cat.missions] == [M1]
    assert cat.broken and "unique" in cat.broken[0][1]


# ---------------------------------------------------------------- 5. next slow step

def test_next_slow_step_moves_past_the_window_when_slow_steps_are_dense():
    mission = core.load_mission(str(REPO / "missions" / "01-mixing-hurts.json"))
    state = LabState(mission)
    state.run()
    canvas = Canvas(state)
    starts = canvas._slow_starts
    state.window_start = 10.0
    dense = ((starts >= 10.0) & (starts <= 10.0 + WINDOW_S)).sum()
    assert dense >= 3, "mission 1's start should have many slow steps in a window"
    seen = []
    for _ in range(4):
        before = state.window_start
        assert canvas.jump_to_slow() == "moved"
        after = state.window_start
        assert after >= before + WINDOW_S * 0.5, (before, after)
        # the step it jumped to is the first slow one after the old window, a fifth into the new one
        first_new = starts[starts > before + WINDOW_S + 1e-6][0]
        assert after == pytest.approx(first_new - WINDOW_S * 0.2, abs=1e-3)
        seen.append(after)
    assert seen == sorted(seen)
    state.window_start = max(state.result.end_time - WINDOW_S, 0)  # the last window: wrap to the first
    canvas.set_window(state.window_start)
    assert canvas.jump_to_slow() == "wrapped"
    assert state.window_start == pytest.approx(max(starts[0] - WINDOW_S * 0.2, 0), abs=1e-3)
    assert "back to the first slow step" in canvas.keys_pane.object


def test_next_slow_step_says_so_when_there_is_nothing_else(catalog):
    state = LabState.from_query(catalog, f"?mission={M1}")
    state.run()
    canvas = Canvas(state)
    canvas._slow_starts = canvas._slow_starts[:0]
    assert canvas.jump_to_slow() == "none" and "no slow steps" in canvas.keys_pane.object
    import numpy as np

    canvas._slow_starts = np.array([state.window_start + 0.3])  # the only one is on screen
    before = state.window_start
    assert canvas.jump_to_slow() == "none" and state.window_start == before
    assert "no more slow steps" in canvas.keys_pane.object


# ---------------------------------------------------------------- 7. idle controls

def test_controls_that_do_not_apply_are_disabled_greyed_and_listed_idle(catalog):
    state = LabState.from_query(catalog, f"?mission={M1}&layout=disaggregated")
    controls = Controls(state, lambda *a: None)
    assert "gpus" in controls.idle and "prefill_gpus" not in controls.idle
    idle, live = controls.widgets["gpus"], controls.widgets["prefill_gpus"]
    assert idle.disabled and not live.disabled
    assert float(idle.styles["opacity"]) < float(live.styles["opacity"])
    assert state.change("layout", "colocated")
    assert "gpus" not in controls.idle and controls.widgets["prefill_gpus"].disabled


def test_the_embed_keeps_its_flex_layout_under_the_idle_look(catalog):
    state = LabState.from_query(catalog, f"?mission={M1}")
    controls = Controls(state, lambda *a: None, embed=True)
    for widget in controls.widgets.values():
        assert widget.styles.get("flex") == EMBED_CONTROL_FLEX and "opacity" in widget.styles


# ---------------------------------------------------------------- 10. the sandbox replays a trace

def sandbox(catalog):
    return LabState.from_query(catalog, f"?mission={SANDBOX_ID}")


def test_an_uploaded_trace_replaces_the_workload_until_cleared(catalog):
    state = sandbox(catalog)
    generated = state.run()["requests"]
    rows = [(i * 0.5, 800 + 7 * i, 20 + i % 13) for i in range(90)]
    text = "arrival_s,prompt_tokens,output_tokens\n" + "".join(f"{a},{p},{o}\n" for a, p, o in rows)
    assert state.load_trace_text(text, "mine.csv") and state.busy
    assert state.replay == {"name": "mine.csv", "requests": 90, "span_s": 44.5}
    assert not state.can_sweep()
    metrics = state.run()
    assert metrics["requests"] == 90 != generated
    assert [(r.arrival, r.prompt_tokens, r.output_tokens) for r in state.result.requests] == rows
    assert "Replaying <b>mine.csv</b>: 90 requests over 44 s" in replay_html(state)
    # Controls still apply to the replayed requests.
    assert state.change("gpus", 8)
    assert state.run()["gpus"] == 8 and state.metrics["requests"] == 90
    assert state.clear_replay()
    assert state.run()["requests"] == generated and state.replay is None


def test_a_replayed_run_back_from_a_worker_process_is_kept_and_its_pinned_twin_cached(catalog):
    """Under `lab serve` a run comes back pickled (lab/ui/runs/offload.py): its requests are a copy of
    the uploaded trace's. The state still keeps the run (coming back to the setting does not
    simulate again) and the pinned fleet's run (the next run does not run it again)."""
    import pickle

    state = sandbox(catalog)
    rows = [(i * 0.5, 800 + 7 * i, 20 + i % 13) for i in range(90)]
    assert state.load_trace_text("arrival_s,prompt_tokens,output_tokens\n" + "".join(f"{a},{p},{o}\n" for a, p, o in rows), "mine.csv")
    state.pin_fleet("current")

    def in_a_worker():
        return pickle.loads(pickle.dumps(state.prepare_run(whole=True)()))

    first = in_a_worker()
    assert "result" in first and "twin" in first and first["requests"] is not state._replay_requests
    assert state.simulate(first) and state.finish()["requests"] == 90
    assert state.twin is not None and state.twin["metrics"]["requests"] == 90
    again = in_a_worker()
    assert "result" not in again and "twin" not in again  # both kept: nothing to simulate


def test_azure_columns_replay_too(catalog):
    state = sandbox(catalog)
    text = ("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.6805900,374,44\n"
            "2023-11-16 18:15:50.9951690,396,109\n2023-11-16 18:15:51.5312460,879,45\n")
    assert state.load_trace_text(text, "azure.csv")
    assert state.replay["requests"] == 3 and state.replay["span_s"] == pytest.approx(4.850656, abs=1e-6)
    assert state.run()["requests"] == 3


@pytest.mark.parametrize("text, needle", [
    ("", "the trace file is empty"),
    ("hello,<b>x</b>\n1,2\n", "does not name a known set of columns"),
    ("arrival_s,prompt_tokens,output_tokens\n0,abc,3\n", "line 2"),
    ("arrival_s,prompt_tokens,output_tokens\n", "no requests"),
])
def test_a_bad_upload_keeps_the_previous_workload_and_says_why(catalog, text, needle):
    state = sandbox(catalog)
    good = "arrival_s,prompt_tokens,output_tokens\n0,100,10\n1,200,20\n"
    assert state.load_trace_text(good, "good.csv")
    state.run()
    assert not state.load_trace_text(text, "<i>bad</i>.csv")
    assert needle in state.upload_error
    assert state.replay["name"] == "good.csv"
    page = replay_html(state)
    assert "<i>" not in page and "&lt;i&gt;bad&lt;/i&gt;.csv" in page and "Not replayed" in page
    assert state.run()["requests"] == 2


def test_only_the_sandbox_replays_uploads(catalog):
    state = LabState.from_query(catalog, f"?mission={M1}")
    assert not state.load_trace_text("arrival_s,prompt_tokens,output_tokens\n0,1,1\n", "x.csv")
    assert "only the sandbox" in state.upload_error and state.replay is None


def test_the_upload_refuses_text_over_the_limit_even_if_the_page_did_not(monkeypatch):
    import lab.ui.browser.trace_upload as tu

    got, refused = [], []
    upload = tu.TraceUpload(on_file=lambda text, name: got.append(name), on_refused=refused.append)
    monkeypatch.setattr(tu, "MAX_UPLOAD_BYTES", 10)
    upload._handle_msg({"type": "file", "name": "big.csv", "text": "x" * 11})
    upload._handle_msg({"type": "file", "name": "ok.csv", "text": "x" * 10})
    upload._handle_msg({"type": "refused", "name": "huge.csv", "why": "huge.csv is 99.0 MB"})
    upload._handle_msg("garbage")
    assert got == ["ok.csv"] and upload.received == 1
    assert refused[0].startswith("big.csv is larger") and refused[1] == "huge.csv is 99.0 MB"


def test_the_upload_is_measured_as_it_travels_not_as_a_file(monkeypatch):
    import lab.ui.browser.trace_upload as tu
    from bokeh.server.tornado import DEFAULT_WEBSOCKET_MAX_MESSAGE_SIZE_BYTES

    # JSON writes each quote and CR or LF as two characters: a fully quoted CRLF row grows by 8 of 13 bytes.
    row = '"1","2","3"\r\n'
    assert tu.sent_bytes("t.csv", row * 1000) - tu.sent_bytes("t.csv", "") == 21 * 1000
    # The bound leaves room for Bokeh's envelope under its websocket message limit.
    assert tu.MAX_UPLOAD_BYTES < tu.MAX_SENT_BYTES < DEFAULT_WEBSOCKET_MAX_MESSAGE_SIZE_BYTES - 64 * 1024
    got, refused = [], []
    upload = tu.TraceUpload(on_file=lambda text, name: got.append(name), on_refused=refused.append)
    monkeypatch.setattr(tu, "MAX_SENT_BYTES", tu.sent_bytes("q.csv", row * 10))
    upload._handle_msg({"type": "file", "name": "q.csv", "text": row * 11})  # the page checks first; Python too
    upload._handle_msg({"type": "file", "name": "q.csv", "text": row * 10})
    assert got == ["q.csv"] and len(refused) == 1 and "as the page sends it" in refused[0]


def test_history_entries_and_popstate_restore_through_the_app(catalog, app_timers):
    """The app pushes one entry per settled change and restores an entry's settings on popstate."""
    import lab.ui.app as app

    lab = app.LabApp(catalog, f"?mission={M1}&gpus=abc")
    assert lab.url.address["search"] == f"?mission={M1}" and not lab.url.address["push"]  # rejected value gone

    def settle():
        app_timers.fire(lab._settle)

    lab.on_change("gpus", 5)
    assert lab.url.address == {"search": f"?mission={M1}&gpus=5", "push": True, "n": 2}
    lab.on_change("gpus", 6)  # within the burst: rewrites that entry
    assert lab.url.address["push"] is False and lab.url.address["search"].endswith("gpus=6")
    settle()
    assert lab.url.settled == lab.url.address["n"]
    lab.on_change("gpus", 7)
    assert lab.url.address["push"] is True
    n = lab.url.address["n"]
    lab.url._handle_msg({"type": "popstate", "search": f"?mission={M1}&gpus=6"})
    assert lab.state.settings["gpus"] == 6 and lab.state.busy
    assert lab.url.address["n"] == n  # restoring writes no entry
    lab.url._handle_msg({"type": "popstate", "search": f"?mission={M1}"})
    assert lab.state.is_start
    lab.url._handle_msg({"type": "popstate", "search": "?mission=other&gpus=2"})  # not this page's: ignored
    assert lab.state.is_start


def test_mission_files_in_the_repo_fingerprint_cheaply():
    fp = folder_fingerprint(REPO / "missions")
    assert len(fp) == len([n for n in os.listdir(REPO / "missions") if n.endswith(".json") and n != "schema.json"])
    assert folder_fingerprint(REPO / "no-such-folder")[0] == "error"


def test_an_embed_never_pushes_history_entries(catalog, app_timers):
    """An iframe's entries join its host page's history: Back would step through the lab."""
    import lab.ui.app as app

    lab = app.LabApp(catalog, f"?mission={M1}&embed=1")
    lab.on_change("gpus", 5)
    assert lab.url.address["search"] == f"?mission={M1}&gpus=5&embed=1" and lab.url.address["push"] is False


def test_a_solution_link_saves_no_star_until_the_student_changes_a_control(catalog, app_timers, monkeypatch):
    """The app hands the storage bridge only stars the student earned on the page: not the link's,
    not a popped history entry's; a change of a control (then its run) does."""
    import lab.ui.app as app

    lab = app.LabApp(catalog, f"?mission={M1}&layout=disaggregated")
    earned = []
    monkeypatch.setattr(lab.bridge, "earn", lambda mission, stars: earned.append((mission, list(stars))))
    lab.state.run()
    assert all(lab.state.stars_now) and earned == [] and not any(lab.state.saved_stars)
    assert "Stars count once you change a control" in lab.stars.pane.object
    lab.url._handle_msg({"type": "popstate", "search": f"?mission={M1}&layout=disaggregated&decode_gpus=3"})
    lab.state.run()
    assert earned == [] and not lab.state.touched  # Back/Forward is not the student's change
    lab.on_change("decode_gpus", 2)
    lab.state.run()
    assert earned and earned[-1] == (M1, lab.state.stars_now) and any(lab.state.stars_now)
    assert "Stars count once you change a control" not in lab.stars.pane.object


def test_the_docs_state_the_pages_bounds_and_the_servers_workers_as_the_code_has_them():
    from lab.ui.runs.offload import DEFAULT_WORKERS, MAX_WORKERS
    from lab.core.page_bounds import PAGE_MAX_REQUESTS, PAGE_MAX_S

    readme = " ".join(" ".join((REPO / "docs" / name).read_text(encoding="utf-8") for name in ("cli.md", "scenario.md")).split())
    assert f"runs at most {PAGE_MAX_REQUESTS:,} requests arriving over at most {PAGE_MAX_S:,.0f} s" in readme
    assert f"(a trace uploaded to the lab page: {PAGE_MAX_S:,.0f} s and {PAGE_MAX_REQUESTS:,} requests" in readme
    assert f"`--workers N`, default {DEFAULT_WORKERS}, at most {MAX_WORKERS})" in readme
    assert f"[--workers {DEFAULT_WORKERS}]" in readme
    from lab.ui.runs.run_work import HEAVY_REQUESTS, HEAVY_UPLOAD_CHARS

    assert HEAVY_UPLOAD_CHARS == 1_000_000
    assert (f"a run expected to draw more than {HEAVY_REQUESTS:,} requests, an upload of over a million characters) "
            "goes to a second pool of half as many processes") in readme
