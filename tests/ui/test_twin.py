"""Twin runs and the blame bar, without a browser: the pinned fleet runs on the same requests,
is cached, never earns stars; the deltas have the right sign; the bar shows what the core says.

Uses the fixture missions in tests/ui/missions plus the sandbox.
"""

import re

import numpy as np
import pytest

pytest.importorskip("panel")

import lab.core as core  # noqa: E402
from lab.core.blame import CAUSES  # noqa: E402
from lab.ui.views.blame_view import CAUSE_LABELS, BlameView, blame_bar_html  # noqa: E402
from lab.ui.catalog import SANDBOX_ID  # noqa: E402
from lab.ui.state import LabState  # noqa: E402
from lab.ui.views.twin_view import (  # noqa: E402
    TWIN_METRICS, TwinView, compare_html, metric_deltas, request_pairs, twin_sentence,
)

M1 = "ui-mixing-hurts"
SPLIT = {"layout": "disaggregated", "prefill_gpus": 2, "decode_gpus": 2}


def requests_of(result):
    return [(r.id, r.arrival, r.prompt_tokens, r.output_tokens) for r in result.requests]


@pytest.fixture(scope="module")
def twinned(catalog):
    """Mission 1 with its start pinned and the fleet split: both runs done."""
    state = LabState.from_query(catalog, f"?mission={M1}&pin=start")
    assert state.change_many({"layout": "disaggregated", "prefill_gpus": 1, "decode_gpus": 3})
    state.run()
    return state


# ---------------------------------------------------------------- the pinned run

def test_the_pinned_fleet_runs_on_the_same_requests(twinned):
    twin = twinned.twin
    assert twin is not None and twinned.twin_error == ""
    assert twin["scenario"].fleet.layout == "colocated" and twinned.scenario.fleet.layout == "disaggregated"
    assert requests_of(twin["result"]) == requests_of(twinned.result)
    assert twin["scenario"].workload == twinned.scenario.workload and twin["scenario"].seed == twinned.scenario.seed
    # ...and it is the mission's start, run on its own.
    alone = core.summarize(core.simulate(twinned.mission.scenario))
    assert twin["metrics"] == alone
    full = core.request_blame(twin["result"])
    assert twin["blames"] == [b for b in full if b.missed]  # (only the misses: the twin shows their summary)
    assert twin["blame_summary"] == core.blame_summary(full)


def test_the_same_requests_when_the_rate_moves_and_when_a_trace_replays(catalog):
    state = LabState.from_query(catalog, f"?mission={SANDBOX_ID}")
    state.pin_fleet("current")
    assert state.change_many({"rate": 7.5, "gpus": 3})
    state.run()
    assert state.twin["scenario"].workload.rate == 7.5
    assert requests_of(state.twin["result"]) == requests_of(state.result)
    rows = [(i * 0.25, 300 + 11 * i, 5 + i % 7) for i in range(60)]
    text = "arrival_s,prompt_tokens,output_tokens\n" + "".join(f"{a},{p},{o}\n" for a, p, o in rows)
    assert state.load_trace_text(text, "t.csv")
    state.run()
    assert [(r.arrival, r.prompt_tokens, r.output_tokens) for r in state.twin["result"].requests] == rows
    assert requests_of(state.twin["result"]) == requests_of(state.result)


def test_the_pinned_run_is_cached_until_the_pin_or_the_workload_changes(catalog):
    state = LabState.from_query(catalog, f"?mission={SANDBOX_ID}")
    state.pin_fleet("current")
    state.run()
    first, ran = state.twin, state.twin_id
    for gpus in (3, 5, 6):  # fleet changes: the pinned run is reused
        assert state.change("gpus", gpus)
        state.run()
        assert state.twin is first and state.twin_id == ran
    assert state.change("rate", 3.5)  # a workload change: run again
    state.run()
    assert state.twin is not first and state.twin_id == ran + 1
    second = state.twin
    assert state.pin_fleet("current")  # a new pin: run again (at the next run_twin)
    assert state.run_twin() and state.twin is not second
    assert not state.run_twin()  # nothing changed
    assert state.unpin() and state.twin is None and state.pin is None
    assert not state.unpin()


def test_the_pinned_run_never_earns_a_star(catalog):
    state = LabState.from_query(catalog, f"?mission={M1}")
    assert state.change_many(SPLIT)
    state.run()
    assert any(state.stars_now)  # the split earns stars here...
    fresh = LabState.from_query(catalog, f"?mission={M1}")
    assert fresh.set_pin({**fresh.settings, **SPLIT})
    fresh.run()  # ...but pinned, it is only compared with
    assert fresh.twin["metrics"]["slo_attainment"] == state.metrics["slo_attainment"]
    assert fresh.stars_now == fresh.mission.evaluate(fresh.metrics)
    assert fresh.saved_stars == fresh.stars_now


def test_pinning_the_mission_start_after_changes(catalog):
    state = LabState.from_query(catalog, f"?mission={M1}")
    assert state.change_many(SPLIT)
    assert state.pin_fleet("start")
    assert state.pinned_start
    assert state.pin["layout"] == "colocated"
    assert "pin=start" in state.search()
    assert not state.pin_fleet("start")  # already pinned


# ---------------------------------------------------------------- deltas and per-request pairs

def test_deltas_say_better_or_worse_by_the_metrics_direction():
    pinned = {"slo_attainment": 0.80, "ttft_p99_s": 2.0, "tpot_p99_ms": 30.0, "worst_gap_p99_ms": 300.0,
              "goodput_rps_per_gpu": 2.0, "gpus": 4}
    now = {"slo_attainment": 0.95, "ttft_p99_s": 2.5, "tpot_p99_ms": 30.0, "worst_gap_p99_ms": 40.0,
           "goodput_rps_per_gpu": 1.5, "gpus": 6}
    rows = {r["name"]: r for r in metric_deltas(now, pinned, now_missed=10, pinned_missed=40)}
    assert [r for r in rows] == [m[0] for m in TWIN_METRICS]
    assert rows["slo_attainment"]["verdict"] == "better" and rows["slo_attainment"]["change"].startswith("+15")
    assert rows["missed"]["verdict"] == "better" and rows["missed"]["change"] == "−30"
    assert rows["ttft_p99_s"]["verdict"] == "worse" and rows["ttft_p99_s"]["change"].startswith("+")
    assert rows["tpot_p99_ms"]["verdict"] == "same" and rows["tpot_p99_ms"]["change"] == "no change"
    assert rows["worst_gap_p99_ms"]["verdict"] == "better" and rows["worst_gap_p99_ms"]["change"].startswith("−")
    assert rows["goodput_rps_per_gpu"]["verdict"] == "worse"
    assert rows["gpus"]["verdict"] == "worse" and rows["gpus"]["change"] == "+2"
    # Equal as shown is "same", whatever the last digits; a missing value has no verdict.
    rows = {r["name"]: r for r in metric_deltas({"tpot_p99_ms": 30.00001, "gpus": 4}, {"tpot_p99_ms": 30.0})}
    assert rows["tpot_p99_ms"]["verdict"] == "same"
    assert rows["gpus"]["verdict"] is None and rows["gpus"]["pinned"] == "—"


def test_deltas_of_real_runs_agree_with_their_numbers(twinned):
    now, pinned = twinned.metrics, twinned.twin["metrics"]
    for r in metric_deltas(now, pinned, twinned.blame_summary["missed"], twinned.twin["blame_summary"]["missed"]):
        if r["verdict"] in ("better", "worse"):
            spec = next(m for m in TWIN_METRICS if m[0] == r["name"])
            a = twinned.twin["blame_summary"]["missed"] if r["name"] == "missed" else pinned[r["name"]]
            b = twinned.blame_summary["missed"] if r["name"] == "missed" else now[r["name"]]
            assert ((b - a) * spec[2] > 0) == (r["verdict"] == "better")


def test_the_live_region_hears_the_comparison_in_words(twinned, catalog):
    from lab.ui.views.metrics_view import fmt_share

    text = twin_sentence(twinned)
    now, pinned = twinned.metrics["slo_attainment"], twinned.twin["metrics"]["slo_attainment"]
    assert fmt_share(now) in text and fmt_share(pinned) in text
    assert ("(better)" in text) == (fmt_share(now) != fmt_share(pinned) and now > pinned)
    assert twin_sentence(LabState.from_query(catalog, f"?mission={M1}")) == ""  # nothing pinned: nothing said


def test_request_pairs_split_by_the_diagonal(twinned):
    for key in ("ttft_s", "worst_gap_ms"):
        pairs = request_pairs(twinned.twin["rows"], twinned.rows, key)
        both = [r for r in twinned.rows if r[key] is not None
                and twinned.twin["rows"][r["id"]][key] is not None]
        assert sum(pairs["counts"].values()) == len(both) > 0
        assert np.all(pairs["worse"]["y"] > pairs["worse"]["x"])
        assert np.all(pairs["better"]["y"] < pairs["better"]["x"])
        for name in ("worse", "better", "same"):  # each point is its request's two values
            for i, x, y in zip(pairs[name]["id"][:20], pairs[name]["x"][:20], pairs[name]["y"][:20]):
                assert (twinned.twin["rows"][i][key], twinned.rows[i][key]) == (x, y)


def test_a_fleet_pinned_against_itself_is_the_same_everywhere(catalog):
    state = LabState.from_query(catalog, f"?mission={M1}")
    state.pin_fleet("current")
    state.run()
    pairs = request_pairs(state.twin["rows"], state.rows, "ttft_s")
    assert pairs["counts"]["worse"] == pairs["counts"]["better"] == 0 < pairs["counts"]["same"]
    assert all(r["verdict"] == "same" for r in metric_deltas(state.metrics, state.twin["metrics"],
                                                              state.blame_summary["missed"],
                                                              state.twin["blame_summary"]["missed"]))


def test_the_twin_view_shows_both_runs_only_while_pinned(catalog):
    state = LabState.from_query(catalog, f"?mission={M1}")
    view = TwinView(state, lambda which: None, lambda: None)
    state.run()
    assert not view.body.visible and not view.unpin_button.visible
    assert "Compare with" in view.head.object
    assert view.fig is None and view.plot.object is None  # the scatter's figure is made at the first pin
    state.pin_fleet("start")
    assert state.change_many(SPLIT)
    state.run()
    assert view.body.visible and view.unpin_button.visible
    text = view.compare.object
    assert 'data-blame="pinned"' in text and 'data-blame="now"' in text
    assert all(f'data-metric="{m[0]}"' in text for m in TWIN_METRICS)
    assert re.search(r'data-verdict="(better|worse)"', text)
    counts = {k: int(v) for k, v in re.findall(r'data-(worse|better|same)="(\d+)"', view.counts.object)}
    assert counts == {k: len(view.src[k].data["x"]) for k in ("worse", "better", "same")}
    assert sum(counts.values()) == len(state.rows)
    view.toggle.value = "Worst gap"  # the other measure: points of requests with a gap
    assert view.fig.yaxis.axis_label == "now: worst gap (ms)"
    assert sum(len(view.src[k].data["x"]) for k in ("worse", "better", "same")) == sum(
        1 for r in state.rows if r["worst_gap_ms"] is not None)
    state.unpin()
    assert not view.body.visible


def test_a_failed_pinned_run_says_why_and_the_page_stays_usable(catalog, monkeypatch):
    state = LabState.from_query(catalog, f"?mission={M1}")
    state.run()
    state.pin_fleet("current")
    real = core.simulate
    monkeypatch.setattr(core, "simulate", lambda *a, **k: (_ for _ in ()).throw(RuntimeError("<b>bug</b>")))
    assert state.run_twin()
    assert state.twin is None and "RuntimeError" in state.twin_error
    html_text = compare_html(state)
    assert "could not run" in html_text and "<b>bug</b>" not in html_text
    monkeypatch.setattr(core, "simulate", real)
    assert state.run_twin() and state.twin is not None and state.twin_error == ""
    monkeypatch.setattr(core, "simulate", lambda *a, **k: (_ for _ in ()).throw(core.LabError("x", "boom")))
    state.change("gpus", state.settings["gpus"] + 1)  # a fleet not run before (a kept run would not simulate)
    state.run()  # now this fleet's run fails: the comparison says so rather than "running"
    assert state.run_error and "nothing to compare" in compare_html(state)


# ---------------------------------------------------------------- the blame bar

def test_the_blame_bar_shows_each_cause_with_a_share_and_its_count():
    summary = {"missed": 7, "missed_by_cause": {c: 0.0 for c in CAUSES}}
    summary["missed_by_cause"].update(queue=3 / 7, prefill_interference=3 / 7, wire=1 / 7)
    text = blame_bar_html(summary, total=100)
    assert 'data-missed="7"' in text and "7 of 100 requests missed the SLO" in text
    shown = re.findall(r'<li data-cause="(\w+)"', text)
    assert shown == ["queue", "wire", "prefill_interference"]  # CAUSES order, zero shares hidden
    assert sum(int(n) for n in re.findall(r"<small>\((\d+)\)</small>", text)) == 7
    label = re.search(r'role="img" aria-label="([^"]+)"', text).group(1)
    assert all(CAUSE_LABELS[c] in label for c in shown) and "43%" in label
    widths = [float(w) for w in re.findall(r"width:([\d.]+)%", text)]
    assert abs(sum(widths) - 100) < 0.05


def test_the_blame_bar_of_a_run_without_misses_says_so():
    summary = {"missed": 0, "missed_by_cause": {c: 0.0 for c in CAUSES}}
    text = blame_bar_html(summary, total=12)
    assert "0 of 12 requests missed" in text and "every request met the SLO" in text and "<li" not in text


def test_counts_add_up_when_shares_round(catalog):
    summary = {"missed": 3, "missed_by_cause": {c: 0.0 for c in CAUSES}}
    summary["missed_by_cause"].update(queue=1 / 3, prefill=1 / 3, wire=1 / 3)
    assert sum(int(n) for n in re.findall(r"<small>\((\d+)\)</small>", blame_bar_html(summary))) == 3


def test_every_core_cause_has_a_label_and_the_view_follows_runs(catalog):
    assert set(CAUSE_LABELS) == set(CAUSES)
    state = LabState.from_query(catalog, f"?mission={M1}")
    view = BlameView(state)
    state.run()
    missed = state.blame_summary["missed"]
    assert missed > 0 and f'data-missed="{missed}"' in view.pane.object
    top = max(state.blame_summary["missed_by_cause"].items(), key=lambda kv: kv[1])[0]
    assert f'data-cause="{top}"' in view.pane.object


# ---------------------------------------------------------------- through the app (no browser)

def test_the_app_pins_writes_the_address_and_back_restores_the_pin(catalog, app_timers):
    import lab.ui.app as app

    fire = app_timers.fire
    lab = app.LabApp(catalog, f"?mission={M1}")
    lab.state.run()
    lab.on_pin("current")
    assert lab.url.address["search"] == f"?mission={M1}&pin=start"
    assert lab.state.twin is None and "Running the pinned fleet" in lab.twin.compare.object
    fire(lab._twin_now)  # the pinned run follows in its own callback
    assert lab.state.twin is not None and lab.twin.body.visible
    lab.on_change("gpus", 6)
    assert lab.url.address["search"] == f"?mission={M1}&gpus=6&pin=start"
    lab.url._handle_msg({"type": "popstate", "search": f"?mission={M1}&gpus=6"})  # an entry without the pin
    assert lab.state.pin is None and not lab.twin.body.visible
    lab.url._handle_msg({"type": "popstate", "search": f"?mission={M1}&gpus=6&pin=gpus:5"})
    assert lab.state.pin["gpus"] == 5
    fire(lab._twin_now)
    assert lab.state.twin["scenario"].fleet.total_gpus == 5
    lab.on_unpin()
    assert "pin=" not in lab.url.address["search"] and lab.state.twin is None
