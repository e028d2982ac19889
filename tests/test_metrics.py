"""Metrics: percentiles bit-for-bit numpy's, per-request TPOT / gaps / SLO on a hand-built
Result, fleet summaries, and the same numbers recomputed with numpy on real runs."""

import random

import numpy as np
import pytest

from lab.core import (
    METRIC_NAMES, GpuLog, RequestRecord, Result, Transfer, load_scenario, percentile, request_gaps,
    request_metrics, simulate, summarize,
)
from lab.core import engine
from lab.core.blame import request_blame
from lab.core.metrics import RUN_NAMES, weighted_percentile
from lab.core.report import gpu_rows

QS = [0, 1, 5, 10, 25, 33.3, 50, 66.7, 75, 90, 95, 99, 99.9, 100]


# ---------------------------------------------------------------- percentiles


def test_percentile_equals_numpy_exactly():
    rng = random.Random(5)
    for trial in range(300):
        n = rng.choice([1, 2, 3, 4, 7, 10, 99, 100, 101, 1000])
        kind = trial % 3
        if kind == 0:
            xs = [rng.random() * 10 ** rng.randint(-3, 3) for _ in range(n)]
        elif kind == 1:
            xs = [rng.lognormvariate(0, 2) for _ in range(n)]
        else:
            xs = [float(rng.randint(0, 5)) for _ in range(n)]  # many ties
        q = rng.choice(QS) if trial % 2 else rng.uniform(0, 100)
        assert percentile(xs, q) == np.percentile(xs, q), (xs, q)


def test_percentile_presorted_and_input_untouched():
    xs = [3.0, 1.0, 2.0]
    assert percentile(xs, 50) == 2.0
    assert xs == [3.0, 1.0, 2.0]
    assert percentile(sorted(xs), 75, presorted=True) == np.percentile(xs, 75)


def test_percentile_of_nothing_is_none():
    assert percentile([], 50) is None


def expand(values, counts):
    return np.repeat(np.array(values, dtype=float), np.array(counts, dtype=int))


def test_weighted_percentile_equals_numpy_on_expanded_data():
    rng = random.Random(9)
    for _ in range(300):
        k = rng.randint(1, 30)
        values = [rng.choice([rng.random(), float(rng.randint(0, 4))]) for _ in range(k)]
        counts = [rng.choice([0, 1, 1, 2, 3, 50]) for _ in range(k)]
        if sum(counts) == 0:
            counts[0] = 1
        qs = rng.sample(QS, 3) + [rng.uniform(0, 100)]
        got = weighted_percentile(values, counts, qs)
        want = [np.percentile(expand(values, counts), q) for q in qs]
        assert got == want, (values, counts, qs)


def test_weighted_percentile_of_nothing():
    assert weighted_percentile([], [], [50, 99]) == [None, None]
    assert weighted_percentile([1.0, 2.0], [0, 0], [50]) == [None]


# ---------------------------------------------------------------- a hand-built run

SLO = {"ttft_s": 1.0, "tpot_ms": 70, "max_gap_ms": 150}


def hand_built(slo=SLO):
    """One colocated GPU; times are binary fractions so every difference is exact.

    step  start   end     decodes         prefill
    0     0       0.125   -               A (100)
    1     0.125   0.1875  A               -
    2     0.1875  0.375   A               B (50), C (10)
    3     0.375   0.4375  A, B            -
    4     0.4375  0.5     B               -
    A: O=4, tokens 0.125 | 0.1875 0.375 0.4375  gaps 62.5, 187.5, 62.5 ms
    B: O=3, tokens 0.375 | 0.4375 0.5           gaps 62.5, 62.5 ms
    C: O=1, token 0.375
    D: never started; E: dropped
    """
    sc = load_scenario({"workload": {"rate": 1, "duration_s": 0.75, "prompt_tokens": 10, "output_tokens": 2},
                        "fleet": {"layout": "colocated", "gpus": 1}, "slo": slo})
    log = GpuLog(0, "colocated", start=[0.0, 0.125, 0.1875, 0.375, 0.4375], end=[0.125, 0.1875, 0.375, 0.4375, 0.5],
                 decode_seqs=[0, 1, 1, 2, 1], prefill_tokens=[100, 0, 60, 0, 0], context_tokens=[0, 101, 102, 156, 52])
    reqs = [
        RequestRecord(0, 0.0, 100, 4, 0, 0, 0.0, 0.125, 0.125, 0.4375, 1, 3),
        RequestRecord(1, 0.125, 50, 3, 0, 0, 0.1875, 0.375, 0.375, 0.5, 3, 4),
        RequestRecord(2, 0.25, 10, 1, 0, -1, 0.1875, 0.375, 0.375, 0.375),
        RequestRecord(3, 0.3125, 10, 5),
        RequestRecord(4, 0.5, 10**6, 5, dropped="too big"),
    ]
    return Result(scenario=sc, requests=reqs, gpus=[log], transfers=[], end_time=1.0, arrivals_end=0.75)


def test_request_gaps_from_the_step_log():
    res = hand_built()
    assert request_gaps(res, res.requests[0]) == [0.0625, 0.1875, 0.0625]
    assert request_gaps(res, res.requests[1]) == [0.0625, 0.0625]
    assert request_gaps(res, res.requests[2]) == []
    assert request_gaps(res, res.requests[3]) == []
    assert request_gaps(res, res.requests[4]) == []


def test_request_metrics_tpot_worst_gap_and_slo():
    rows = {r["id"]: r for r in request_metrics(hand_built())}
    a, b, c, d, e = (rows[i] for i in range(5))
    assert a["ttft_s"] == 0.125 and a["tpot_ms"] == (0.4375 - 0.125) / 3 * 1000 and a["worst_gap_ms"] == 187.5
    assert a["met_slo"] is False  # TPOT 104 ms > 70 (and its worst gap 187.5 > 150)
    assert b["ttft_s"] == 0.25 and b["tpot_ms"] == 62.5 and b["worst_gap_ms"] == 62.5 and b["met_slo"] is True
    # one-token output: no TPOT, no gaps, meets any TPOT / gap target
    assert c["tpot_ms"] is None and c["worst_gap_ms"] is None and c["ttft_s"] == 0.125 and c["met_slo"] is True
    # never started: TTFT counts to the end of the run, a lower bound
    assert d["ttft_s"] == 1.0 - 0.3125 and d["finished"] is False and d["met_slo"] is False
    assert e["finished"] is False and e["met_slo"] is False and e["dropped"] == "too big"
    assert a["finish_s"] == 0.4375 and d["finish_s"] is None


@pytest.mark.parametrize("slo,met", [
    ({}, [True, True, True, False, False]),
    ({"ttft_s": 0.2}, [True, False, True, False, False]),
    ({"tpot_ms": 104.2}, [True, True, True, False, False]),
    ({"tpot_ms": 104.1}, [False, True, True, False, False]),
    ({"max_gap_ms": 187.5}, [True, True, True, False, False]),
    ({"max_gap_ms": 187.4}, [False, True, True, False, False]),
    ({"tpot_ms": 62.4}, [False, False, True, False, False]),
    ({"ttft_s": 0.1, "tpot_ms": 1}, [False, False, False, False, False]),
])
def test_met_slo_needs_every_target(slo, met):
    assert [r["met_slo"] for r in request_metrics(hand_built(slo))] == met


def test_summarize_hand_built():
    m = summarize(hand_built())
    assert list(m) == list(METRIC_NAMES) + list(RUN_NAMES)
    assert m["run_cut"] is None and m["run_end_s"] == 1.0
    assert (m["requests"], m["finished"], m["unfinished"]) == (5, 3, 2)
    ttfts = [0.125, 0.25, 0.125, 1.0 - 0.3125, 1.0 - 0.5]
    for q in (50, 90, 99):
        assert m[f"ttft_p{q}_s"] == np.percentile(ttfts, q)
    tpots = [(0.4375 - 0.125) / 3 * 1000, 62.5]
    assert m["tpot_p50_ms"] == np.percentile(tpots, 50) and m["tpot_p99_ms"] == np.percentile(tpots, 99)
    itl = [62.5, 187.5, 62.5, 62.5, 62.5]
    assert m["itl_p50_ms"] == np.percentile(itl, 50) and m["itl_p99_ms"] == np.percentile(itl, 99)
    assert m["worst_gap_p50_ms"] == np.percentile([187.5, 62.5], 50)
    assert m["slo_attainment"] == 2 / 5
    assert m["goodput_rps"] == 2 / 0.75 and m["goodput_rps_per_gpu"] == 2 / 0.75
    assert m["throughput_tokens_per_s"] == (4 + 3 + 1) / 1.0
    assert m["util_gpu"] == 0.5
    assert (m["gpus"], m["prefill_gpus"], m["decode_gpus"]) == (1, 0, 0)
    assert m["util_link"] is None and m["transfer_p50_ms"] is None
    assert m["util_prefill"] is None and m["util_decode"] is None


def test_one_token_outputs_only():
    sc = load_scenario({"workload": {"rate": 5, "duration_s": 10, "prompt_tokens": 500, "output_tokens": 1},
                        "fleet": {"layout": "colocated", "gpus": 1}, "slo": {"tpot_ms": 1, "max_gap_ms": 1}})
    res = simulate(sc)
    m = summarize(res)
    assert m["finished"] == m["requests"] > 20
    assert all(request_gaps(res, r) == [] for r in res.requests)
    assert all(r.finish == r.first_token for r in res.requests)
    assert m["tpot_p50_ms"] is None and m["itl_p50_ms"] is None and m["worst_gap_p99_ms"] is None
    assert m["slo_attainment"] == 1.0  # gap and TPOT targets do not apply to one-token answers
    assert m["throughput_tokens_per_s"] == m["requests"] / res.end_time


def test_summarize_with_a_gpu_that_never_ran():
    """Two colocated GPUs, one request: GPU 1 never takes a step. Its empty log must
    not break the pooled-gap percentiles."""
    sc = load_scenario({"workload": {"rate": 1, "duration_s": 1, "prompt_tokens": 10, "output_tokens": 3},
                        "fleet": {"layout": "colocated", "gpus": 2}})
    res = simulate(sc, requests=[(0.0, 10, 3)])
    assert len(res.gpus[1]) == 0
    m = summarize(res)
    gaps = request_gaps(res, res.requests[0])
    assert len(gaps) == 2
    assert m["itl_p50_ms"] == np.percentile(gaps, 50) * 1000


# ---------------------------------------------------------------- a run cut short

CUT = {"workload": {"rate": 1, "duration_s": 1, "prompt_tokens": 100, "output_tokens": 2},
       "fleet": {"layout": "colocated", "gpus": 1}}


def test_summary_says_the_drain_cap_cut_the_run():
    # 5,000 tokens at ~8 ms a step need ~40 s; the run may drain for 2 s after arrivals end at 1 s
    res = simulate(load_scenario({**CUT, "drain_s": 2}), requests=[(0.0, 100, 5000), (0.1, 100, 3)])
    m = summarize(res)
    assert res.capped == "drain_s"
    assert (m["run_cut"], m["run_end_s"], m["unfinished"]) == ("drain_s", 3.0, 1)


def test_summary_says_the_step_bound_cut_the_run(monkeypatch):
    monkeypatch.setattr(engine, "MAX_STEPS", 50)  # read at run time; 36,000,000 in earnest
    res = simulate(load_scenario({**CUT, "drain_s": 1000}), requests=[(0.0, 100, 5000)])
    m = summarize(res)
    assert res.capped == "max_steps" and sum(len(g) for g in res.gpus) == 50
    assert m["run_cut"] == "max_steps" and m["unfinished"] == 1
    # it stopped when the 51st step would have begun, before arrivals ended at 1 s (the
    # span metrics use still runs to 1 s, so requests that arrive later count as unserved)
    assert m["run_end_s"] == res.gpus[0].end[-1] < res.end_time == 1.0


def test_summary_of_a_run_that_ends_by_itself():
    res = simulate(load_scenario({**CUT, "drain_s": 2}), requests=[(0.0, 100, 3)])
    m = summarize(res)
    assert m["run_cut"] is None and m["unfinished"] == 0
    assert m["run_end_s"] == 1.0  # arrivals ran until 1 s; the request was done long before


# ---------------------------------------------------------------- real runs vs numpy

RUNS = {
    "colocated": {"workload": {"rate": 6, "duration_s": 20, "prompt_tokens": {"dist": "lognormal", "median": 1200, "sigma": 0.8, "max": 8000},
                               "output_tokens": {"dist": "uniform", "low": 1, "high": 250}},
                  "fleet": {"layout": "colocated", "gpus": 2, "chunk_tokens": 512},
                  "slo": {"ttft_s": 1.0, "tpot_ms": 30, "max_gap_ms": 100}},
    "disaggregated": {"workload": {"rate": 6, "duration_s": 20, "prompt_tokens": {"dist": "lognormal", "median": 1200, "sigma": 0.8, "max": 8000},
                                   "output_tokens": {"dist": "uniform", "low": 1, "high": 250}},
                      "fleet": {"layout": "disaggregated", "prefill_gpus": 1, "decode_gpus": 2, "link": {"gbytes_per_s": 5}},
                      "slo": {"ttft_s": 0.3, "tpot_ms": 10, "max_gap_ms": 40}},
}


def tick_rule_gaps(res, rec):
    """A request's gaps by docs/model.md's rule ("Time base"), from the log's ticks and nothing in metrics.py:
    its first token's tick (its seconds x 10**12, rounded), then the ends of its decode
    steps; each gap a difference of ticks, divided once by 10**12 (one decode stretch)."""
    assert not rec.earlier
    if rec.decode_first_step < 0:
        return []
    end_t = res.gpus[rec.decode_gpu].end_t
    ticks = [round(rec.first_token * 1e12)] + list(end_t[rec.decode_first_step:rec.decode_last_step + 1])
    return [(b - a) / 10**12 for a, b in zip(ticks, ticks[1:])]


@pytest.mark.parametrize("name", sorted(RUNS))
def test_summary_equals_numpy_recomputation(name):
    res = simulate(load_scenario(RUNS[name]))
    assert not res.capped
    m = summarize(res)
    rows = request_metrics(res)
    slo = res.scenario.slo
    all_gaps, tpots, worst, met = [], [], [], 0
    for rec, row in zip(res.requests, rows):
        gaps = request_gaps(res, rec)
        assert len(gaps) == rec.output_tokens - 1
        assert gaps == tick_rule_gaps(res, rec)  # docs/model.md's rule, recomputed here
        all_gaps.extend(gaps)
        if gaps:
            tpot = (rec.finish - rec.first_token) / (rec.output_tokens - 1) * 1000
            assert row["tpot_ms"] == tpot
            assert row["worst_gap_ms"] == max(gaps) * 1000
            assert sum(gaps) == pytest.approx(rec.finish - rec.first_token, rel=1e-9)
            tpots.append(tpot)
            worst.append(max(gaps) * 1000)
        ok = rec.finished and row["ttft_s"] <= slo.ttft_s
        if gaps:
            ok = ok and (slo.tpot_ms is None or row["tpot_ms"] <= slo.tpot_ms)
            ok = ok and (slo.max_gap_ms is None or row["worst_gap_ms"] <= slo.max_gap_ms)
        assert row["met_slo"] == ok
        met += ok
    ttfts = [r.first_token - r.arrival for r in res.requests]
    for q in (50, 90, 99):
        assert m[f"ttft_p{q}_s"] == np.percentile(ttfts, q)
    assert m["tpot_p50_ms"] == np.percentile(tpots, 50) and m["tpot_p99_ms"] == np.percentile(tpots, 99)
    # pooled over every gap of every request, in seconds, then scaled
    assert m["itl_p50_ms"] == np.percentile(all_gaps, 50) * 1000
    assert m["itl_p99_ms"] == np.percentile(all_gaps, 99) * 1000
    assert m["worst_gap_p50_ms"] == np.percentile(worst, 50)
    assert m["slo_attainment"] == met / len(rows)
    assert m["goodput_rps"] == met / res.scenario.workload.duration_s
    assert m["goodput_rps_per_gpu"] == m["goodput_rps"] / res.scenario.fleet.total_gpus
    assert 0 < m["slo_attainment"] < 1  # the SLO is tight enough to mean something here
    busy = sum(e - s for g in res.gpus for s, e in zip(g.start, g.end))
    assert m["util_gpu"] == pytest.approx(busy / (len(res.gpus) * res.end_time), rel=1e-9)
    if res.transfers:
        waits = [(t.end - t.ready) * 1000 for t in res.transfers]
        assert m["transfer_p50_ms"] == np.percentile(waits, 50)
        assert m["transfer_p99_ms"] == np.percentile(waits, 99)
        assert m["util_link"] == pytest.approx(sum(t.end - t.start for t in res.transfers) / res.end_time, rel=1e-9)
        decode = [g for g in res.gpus if g.role == "decode"]
        assert m["util_decode"] == pytest.approx(sum(g.busy_s() for g in decode) / (len(decode) * res.end_time), rel=1e-9)


def test_transfer_ms_is_wait_plus_wire():
    sc = load_scenario(RUNS["disaggregated"])
    res = simulate(sc)
    rows = request_metrics(res)
    for rec, row in zip(res.requests, rows):
        if rec.transfer >= 0:
            tr = res.transfers[rec.transfer]
            assert isinstance(tr, Transfer) and tr.request == rec.id
            assert row["transfer_ms"] == (tr.end - tr.ready) * 1000
        else:
            assert row["transfer_ms"] is None


# ---------------------------------------------------- decode stretches (preemption)
#
# A request preempted once decodes in two stretches, here on two GPUs: tokens 2-3 at the
# ends of GPU 0's steps 1-2, then (after its wait and re-prefill) tokens 4-5 at the ends
# of GPU 1's steps 0-1. Binary fractions, so the sums are exact.


def two_stretches(layout):
    fleet = {"layout": "colocated", "gpus": 2} if layout == "colocated" else {
        "layout": "disaggregated", "prefill_gpus": 1, "decode_gpus": 2}
    sc = load_scenario({"workload": {"rate": 1, "duration_s": 1, "prompt_tokens": 10, "output_tokens": 5},
                        "fleet": fleet, "slo": {"ttft_s": 10, "tpot_ms": 200, "max_gap_ms": 200}})
    g0, g1 = (0, 1) if layout == "colocated" else (1, 2)
    logs = [GpuLog(i, "colocated" if layout == "colocated" else ("prefill", "decode", "decode")[i])
            for i in range(2 if layout == "colocated" else 3)]

    def step(log, start, end, seqs, prompt=0):
        log.start.append(start)
        log.end.append(end)
        log.decode_seqs.append(seqs)
        log.prefill_tokens.append(prompt)
        log.context_tokens.append(seqs * 12)

    first_log = logs[0]
    step(first_log, 0.0, 0.5, 0, 10)  # the prefill: first token at 0.5
    base = 1 if layout == "colocated" else 0  # colocated: GPU 0's step 0 was the prefill
    step(logs[g0], 0.5, 0.625, 1)
    step(logs[g0], 0.625, 0.75, 1)
    if layout == "colocated":
        step(logs[g1], 0.75, 1.0, 0, 12)  # the re-prefill of prompt + 2 emitted tokens: token 4
    else:
        step(logs[g1], 0.75, 1.0, 1)  # after a fresh prefill and transfer: token 4
    step(logs[g1], 1.0, 1.125, 1)
    logs[g0].preempted.append((base + 2, 0))  # preempted at the boundary after its stretch's last step
    rec = RequestRecord(0, 0.0, 10, 5, prefill_gpu=0, decode_gpu=g1, prefill_start=0.0, prefill_end=0.5,
                        first_token=0.5, finish=1.125, decode_first_step=0, decode_last_step=1,
                        earlier=[(g0, base, base + 1)], preemptions=1)
    return Result(scenario=sc, requests=[rec], gpus=logs, transfers=[], end_time=1.125, arrivals_end=1.0)


@pytest.mark.parametrize("layout", ["colocated", "disaggregated"])
def test_gaps_tpot_and_worst_gap_run_over_every_stretch(layout):
    res = two_stretches(layout)
    rec = res.requests[0]
    gaps = request_gaps(res, rec)
    # 2nd, 3rd: GPU 0's steps; 4th: from GPU 0's last token to GPU 1's first; 5th: GPU 1's step.
    assert gaps == [0.125, 0.125, 0.25, 0.125]
    assert sum(b - a + 1 for _, a, b in rec.stretches()) == rec.output_tokens - 1
    [row] = request_metrics(res)
    assert row["tpot_ms"] == (1.125 - 0.5) / 4 * 1000.0
    assert row["worst_gap_ms"] == 250.0
    assert row["met_slo"] is False  # the preemption's gap is over max_gap_ms
    s = summarize(res)
    # Every token's gap pooled once: the step log's counts are corrected for both stretch starts.
    assert s["itl_p99_ms"] == np.percentile(np.array(gaps) * 1000.0, 99)
    assert s["itl_p50_ms"] == 125.0


def test_a_request_waiting_after_its_preemption_has_only_its_earlier_gaps():
    res = two_stretches("colocated")
    rec = res.requests[0]
    rec.decode_first_step = rec.decode_last_step = -1  # preempted, not yet resumed
    rec.finish = None
    assert request_gaps(res, rec) == [0.125, 0.125]
    assert rec.stretches() == [(0, 1, 2)]


# ---------------------------------------------------------------- step times: ticks and seconds


@pytest.mark.parametrize("name", sorted(RUNS))
def test_a_runs_logs_keep_ticks_and_metrics_never_make_their_seconds(name):
    res = simulate(load_scenario(RUNS[name]))
    summarize(res)
    request_blame(res)
    gpu_rows(res, 25)
    for log in res.gpus:
        assert "start" not in vars(log) and "end" not in vars(log)  # no seconds made: none read
        assert all(t == int(t) for t in log.end_t)  # whole ticks, as the engine added them up


@pytest.mark.parametrize("name", sorted(RUNS))
def test_seconds_are_made_from_the_ticks_once_when_read(name):
    res = simulate(load_scenario(RUNS[name]))
    for log in res.gpus:
        end, start = log.end, log.start
        assert end == [t / 10**12 for t in log.end_t] and start == [t / 10**12 for t in log.start_t]
        assert log.end is end and log.start is start  # made once, then kept
        # a step that starts where the one before it ended shares that end's float
        shared = [j for j in range(1, len(log)) if log.start_t[j] == log.end_t[j - 1]]
        assert shared and all(start[j] is end[j - 1] for j in shared)


def test_a_log_built_in_seconds_keeps_them_and_reads_its_ticks_from_them():
    log = GpuLog(0, "colocated", start=[0.0, 0.1], end=[0.1, 0.30000000000000004], decode_seqs=[1, 1],
                 prefill_tokens=[0, 0], context_tokens=[0, 0])
    assert log.end == [0.1, 0.30000000000000004]  # as given, not rounded through ticks
    assert (log.start_t, log.end_t) == ([0, 10**11], [10**11, 3 * 10**11])
    log.end[1] = 0.5  # editing its seconds in place shows in its ticks
    assert log.end_t == [10**11, 5 * 10**11] and log.busy_s() == 0.5
    grown = GpuLog(1, "decode")
    grown.start.append(0.25)
    grown.end.append(0.75)
    assert (grown.start_t, grown.end_t, len(grown)) == ([25 * 10**10], [75 * 10**10], 1)
