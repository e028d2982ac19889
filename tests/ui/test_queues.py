"""The canvas's queue rows and KV bands (lab/ui/data/queues.py, canvas.timeline_data) and the one
per-token target (Slo.per_token_target_ms) every view marks steps against.

Hand-built Results give series whose every value is known; engine runs check the
derivation against the engine's own rules (KV reserved never over capacity, a link that
is too slow queues).
"""

import numpy as np
import pytest

pytest.importorskip("panel")

import lab.core as core  # noqa: E402
from lab.core.result import GpuLog, RequestRecord, Result, Transfer  # noqa: E402
from lab.ui.data.canvas_data import box_geometry, timeline_data  # noqa: E402
from lab.ui.data.queues import kv_usage, link_queue, occupancy, prefill_queue  # noqa: E402

CAPACITY = 1000


def _scenario(layout):
    fleet = ({"layout": "colocated", "gpus": 2} if layout == "colocated"
             else {"layout": "disaggregated", "prefill_gpus": 1, "decode_gpus": 2})
    return core.load_scenario({"workload": {"rate": 1, "duration_s": 5, "prompt_tokens": 100, "output_tokens": 10},
                               "fleet": fleet, "model": {"kv_capacity_tokens": CAPACITY},
                               "slo": {"ttft_s": 1, "tpot_ms": 25}})


def _result(layout, requests, transfers=(), stop=10.0):
    roles = ["colocated", "colocated"] if layout == "colocated" else ["prefill", "decode", "decode"]
    gpus = [GpuLog(i, role) for i, role in enumerate(roles)]
    return Result(_scenario(layout), list(requests), gpus, list(transfers), end_time=stop, arrivals_end=5.0,
                  stopped_at=stop)


def _series(triple):
    left, right, value = triple
    return [(float(a), float(b), float(v)) for a, b, v in zip(left, right, value)]


def _at(triple, t):
    """The series' value at time t (0 outside its spans)."""
    for a, b, v in _series(triple):
        if a <= t < b:
            return v
    return 0.0


# ---------------------------------------------------------------- the series


def test_occupancy_sums_overlaps_merges_equal_neighbours_and_drops_zeros():
    # [0,2) + [1,3) + [3,4) (touching at 3: one change, no spike) + an empty and a reversed one.
    got = _series(occupancy([0, 1, 3, 5, 7], [2, 3, 4, 5, 6]))
    assert got == [(0, 1, 1), (1, 2, 2), (2, 4, 1)]
    weighted = _series(occupancy([0, 2], [4, 6], [300, 500]))
    assert weighted == [(0, 2, 300), (2, 4, 800), (4, 6, 500)]
    assert _series(occupancy([], [])) == []


def test_the_prefill_queue_counts_requests_from_arrival_to_prefill_start():
    reqs = [
        RequestRecord(0, 0.0, 100, 10, prefill_start=2.0),
        RequestRecord(1, 1.0, 100, 10, prefill_start=3.0),
        RequestRecord(2, 1.5, 100, 10),  # still waiting when the run stopped at 5
        RequestRecord(3, 0.5, 100, 10, dropped="larger than KV memory"),  # never queued
        RequestRecord(4, 4.0, 100, 10, prefill_start=4.0),  # started at once: never waited
    ]
    got = _series(prefill_queue(_result("colocated", reqs, stop=5.0)))
    assert got == [(0, 1, 1), (1, 1.5, 2), (1.5, 2, 3), (2, 3, 2), (3, 5, 1)]


def test_the_link_queue_splits_waiting_for_room_from_waiting_for_the_wire():
    reqs = [
        RequestRecord(0, 0.0, 100, 10, prefill_gpu=0, prefill_start=0.0, prefill_end=1.0, transfer=0),
        RequestRecord(1, 0.0, 100, 10, prefill_gpu=0, prefill_start=0.0, prefill_end=1.0, transfer=1),
        RequestRecord(2, 0.0, 100, 10, prefill_gpu=0, prefill_start=1.0, prefill_end=2.0),  # never reserved
        RequestRecord(3, 0.0, 100, 1, prefill_gpu=0, prefill_start=1.0, prefill_end=2.0),  # one token: no transfer
    ]
    transfers = [
        Transfer(0, 0, 1, ready=1.0, reserved=1.0, start=1.0, end=2.0, bytes=1),  # no wait at all
        Transfer(1, 0, 2, ready=1.0, reserved=3.0, start=4.0, end=5.0, bytes=1),  # room 1..3, then the wire 3..4
    ]
    parts = link_queue(_result("disaggregated", reqs, transfers, stop=6.0))
    assert _series(parts["room"]) == [(1, 2, 1), (2, 3, 2), (3, 6, 1)]
    assert _series(parts["link"]) == [(3, 4, 1)]
    assert _series(link_queue(_result("colocated", [RequestRecord(0, 0.0, 100, 10, prefill_start=0.0)]))["room"]) == []


def test_kv_usage_is_prompt_plus_output_from_admission_to_the_last_token():
    colocated = [
        RequestRecord(0, 0.0, 300, 100, prefill_gpu=0, decode_gpu=0, prefill_start=1.0, finish=4.0),
        RequestRecord(1, 0.0, 500, 100, prefill_gpu=0, decode_gpu=0, prefill_start=2.0),  # unfinished at 6
        RequestRecord(2, 0.0, 200, 1, prefill_gpu=1, prefill_start=0.5, first_token=1.5, finish=1.5),
        RequestRecord(3, 0.0, 200, 10),  # never admitted
    ]
    usage = kv_usage(_result("colocated", colocated, stop=6.0))
    assert set(usage) == {0, 1}
    assert _series(usage[0]) == [(1, 2, 400), (2, 4, 1000), (4, 6, 600)]
    assert _series(usage[1]) == [(0.5, 1.5, 201)]
    # A split fleet: held on the decode GPU from the reservation (not the landing) to the finish.
    split = [RequestRecord(0, 0.0, 300, 100, prefill_gpu=0, decode_gpu=2, prefill_start=0.0, prefill_end=1.0,
                           transfer=0, finish=5.0)]
    transfers = [Transfer(0, 0, 2, ready=1.0, reserved=1.5, start=2.0, end=3.0, bytes=1)]
    usage = kv_usage(_result("disaggregated", split, transfers, stop=6.0))
    assert set(usage) == {1, 2}  # the decode GPUs; a prefill GPU holds none
    assert _series(usage[1]) == [] and _series(usage[2]) == [(1.5, 5, 400)]


def test_the_canvas_draws_the_kv_band_against_capacity_and_queues_against_their_peak():
    reqs = [
        RequestRecord(0, 0.0, 300, 100, prefill_gpu=0, decode_gpu=0, prefill_start=1.0, finish=4.0),
        RequestRecord(1, 0.0, 500, 100, prefill_gpu=0, decode_gpu=0, prefill_start=2.0),
    ]
    data = timeline_data(_result("colocated", reqs, stop=6.0), 25.0, frame=300)
    meta = data["meta"]
    half = meta["half"]
    geo = box_geometry(half)
    gpu0 = 1  # row 0 is the prefill queue
    assert meta["labels"][0] == "prefill queue" and meta["labels"][gpu0] == "GPU 0 · colocated"
    # The track (the capacity frame): one per GPU, the whole run; its top edge is 100%.
    track = data["kv_track"]
    assert sorted(track["bottom"].astype(float) - track["top"]) == pytest.approx([geo["band_bottom"] - geo["band_top"]] * 2)
    kv = data["kv"]
    band = geo["band_bottom"] - geo["band_top"]
    on0 = np.asarray(kv["left"]) >= 0  # every segment here is GPU 0's
    heights = (kv["bottom"].astype(float) - kv["top"])[on0]
    assert heights.tolist() == pytest.approx([band * 0.4, band * 1.0, band * 0.6], rel=1e-5)
    full = int(np.argmax(heights))
    assert float(kv["top"][full]) == pytest.approx(gpu0 + geo["band_top"], abs=1e-6)  # full reaches the capacity line
    assert kv["n"].tolist() == pytest.approx([0.4, 1.0, 0.6])
    # The prefill queue: both waited from 0; full height is the peak (2), which meta names.
    q = data["queue"]
    assert meta["peaks"][0] == 2
    assert (q["bottom"].astype(float) - q["top"]).tolist() == pytest.approx([2 * half, half], rel=1e-5)
    assert np.all(q["bottom"] == np.float32(half))


# ---------------------------------------------------------------- engine runs


def test_kv_reserved_never_exceeds_capacity_and_fills_when_memory_binds():
    """The engine admits only what fits: a derivation that counted the wrong interval would exceed it."""
    for fleet in ({"layout": "colocated", "gpus": 2},
                  {"layout": "disaggregated", "prefill_gpus": 2, "decode_gpus": 1}):
        sc = core.load_scenario({"seed": 2, "workload": {"rate": 8, "duration_s": 20, "prompt_tokens": 1500,
                                                         "output_tokens": 400},
                                 "fleet": fleet, "model": {"kv_capacity_tokens": 9000}})
        result = core.simulate(sc)
        usage = kv_usage(result)
        peak = max(float(v.max()) for _, _, v in usage.values())
        assert peak <= 9000
        assert peak >= 9000 - 1900  # memory binds: a GPU filled to within one request of capacity
        if fleet["layout"] == "disaggregated":
            assert max(link_queue(result)["room"][2]) > 1  # transfers wait for room on the decode GPU


def test_mission_3s_slow_link_shows_a_link_queue_on_the_canvas():
    from lab.ui.catalog import Catalog
    from lab.ui.state import LabState

    state = LabState.from_query(Catalog(), "?mission=slow-link")
    state.run()
    data = timeline_data(state.result, state.scenario.slo.per_token_target_ms)
    meta = data["meta"]
    row = meta["link_queue_row"]
    assert meta["labels"][row] == "link queue"
    waiting = np.asarray(data["link_q"]["n"]) + 0  # waiting for the wire
    assert waiting.max() > 1 and meta["peaks"][row] > 1
    # Drawn in the link queue's row, growing up from its bottom.
    assert np.all(data["link_q"]["bottom"] == np.float32(row + meta["half"]))
    assert np.all(data["link_q"]["top"] < data["link_q"]["bottom"])


# ---------------------------------------------------------------- one definition of "over the target"


@pytest.mark.parametrize("slo, ms, name", [
    ({"tpot_ms": 25}, 25, "tpot_ms"),
    ({"tpot_ms": 30, "max_gap_ms": 60}, 60, "max_gap_ms"),
    ({"max_gap_ms": 50}, 50, "max_gap_ms"),
    ({"ttft_s": 1}, None, None),
])
def test_the_per_token_target_is_the_max_gap_if_set_else_tpot(slo, ms, name):
    from lab.ui.words.targets import over_target_label, target_phrase

    s = core.Slo.from_dict(slo)
    assert s.per_token_target_ms == ms and s.per_token_target_name == name
    if ms is None:
        assert target_phrase(s) is None and "no step is marked" in over_target_label(s)
    else:
        assert over_target_label(s).startswith(f"red, hatched: a step longer than the {ms} ms ")


def test_a_step_lasting_exactly_the_target_is_slow_nowhere():
    """The table (report.gpu_rows) and the canvas judge a step by its exact tick length
    (report.slow_limit_t): a 50 ms step whose seconds, each rounded, differ by a hair more
    than 0.05 is slow in neither; one tick longer is slow in both."""
    from lab.core.report import gpu_rows
    from lab.ui.data.canvas_data import overview_data

    target_ms, step_t = 50, 5 * 10**10
    start_t = 158_380_000_000  # (its seconds and its end's differ by more than 0.05)
    assert (start_t + step_t) / 1e12 - start_t / 1e12 > target_ms / 1000
    for length, slow in ((step_t, 0), (step_t + 1, 1)):
        res = _result("colocated", [])
        res.gpus[0] = GpuLog(0, "colocated", start_t=[float(start_t)], end_t=[float(start_t + length)],
                             decode_seqs=[1], prefill_tokens=[0], context_tokens=[100])
        assert gpu_rows(res, target_ms)[0]["slow_steps"] == slow
        assert len(timeline_data(res, target_ms)["slow"]["left"]) == slow
        assert len(overview_data(res, target_ms)[1]) == slow


def test_every_view_marks_steps_against_the_max_gap_when_the_slo_sets_one():
    """Mission 5 sets TPOT 30 ms and a 60 ms max gap: a 40 ms step is not "over the target"."""
    from lab.core.report import gpu_rows
    from lab.ui.timeline.canvas import Canvas, legend_html
    from lab.ui.catalog import Catalog
    from lab.ui.views.plots import Plots
    from lab.ui.state import LabState
    from lab.ui.views.table_view import gpu_table_html

    state = LabState.from_query(Catalog(), "?mission=chunk-it")
    state.run()
    slo = state.scenario.slo
    assert slo.tpot_ms is not None and slo.max_gap_ms is not None and slo.tpot_ms < slo.max_gap_ms
    canvas = Canvas(state)
    slow = timeline_data(state.result, slo.per_token_target_ms)["slow"]
    dur_ms = (slow["right"].astype(float) - slow["left"]) * 1000.0
    assert np.all(dur_ms > slo.max_gap_ms - 0.02)
    between = sum(1 for g in state.result.gpus for s, e, b in zip(g.start, g.end, g.decode_seqs)
                  if b and slo.tpot_ms < (e - s) * 1000 <= slo.max_gap_ms)
    assert between > 0  # steps a TPOT rule would have marked, and this one does not
    counted = sum(r["slow_steps"] for r in gpu_rows(state.result, slo.per_token_target_ms))
    assert len(slow["left"]) == counted == len(canvas._slow_starts)
    assert "60 ms max gap" in gpu_table_html(state.result, slo)
    assert "red, hatched: a step longer than the 60 ms max gap" in legend_html(slo)
    plots = Plots(state, on_sweep=lambda: None)
    assert plots.itl_target.location == slo.max_gap_ms and plots.gap_target.location == slo.max_gap_ms
    assert plots.gap_label.text == "gap target"
    over = np.asarray(plots.hist_over.data["left"], float)
    assert len(over) == 0 or over.min() >= slo.max_gap_ms - 1e-6
