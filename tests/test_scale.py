"""The representation that scales (docs/architecture.md "Scale"): compact step columns, the worst-gap
index, the percentile shortcut and the metrics that skip their sweep when their feature is
off all give exactly what the plain per-step computation gives; and a run's lists start
where the garbage collector leaves them alone."""

import gc
import platform
import random
import struct
from array import array

import pytest

from lab.core import load_scenario, simulate, summarize
from lab.core import engine, percentiles
from lab.core.engine import MAX_STEPS
from lab.core.metrics import (RangeMax, percentile, pooled_gaps, prefix_metrics, request_gaps, request_metrics,
                              step_gaps_of, weighted_percentile)
from lab.core.result import GpuLog
from lab.core.spec import MAX_DURATION_S, MAX_GPUS, MAX_REQUESTS

# The engine's collector handling (held off through a run and its metrics, a run's lists moved
# to the oldest generation, nothing collected while the page holds the collector) is for
# CPython's generational collector, as Pyodide runs it; PyPy's collector is another design,
# with neither generations nor callbacks, and is left alone (lab/core/collector.py).
CPYTHON_COLLECTOR = pytest.mark.skipif(platform.python_implementation() != "CPython",
                                       reason="CPython's generational collector (PyPy's has no generations)")

SCENARIOS = {
    "colocated-chunked": {
        "seed": 3, "workload": {"rate": 9, "duration_s": 20, "prompt_tokens": {"dist": "lognormal", "median": 1500, "sigma": 0.8},
                                "output_tokens": {"dist": "lognormal", "median": 150, "sigma": 0.8}},
        "fleet": {"layout": "colocated", "gpus": 3, "chunk_tokens": 512}},
    "disaggregated": {
        "seed": 4, "workload": {"rate": 8, "duration_s": 20, "prompt_tokens": {"dist": "lognormal", "median": 1500, "sigma": 0.8},
                                "output_tokens": {"dist": "lognormal", "median": 150, "sigma": 0.8}},
        "fleet": {"layout": "disaggregated", "prefill_gpus": 2, "decode_gpus": 2}},
    "on-demand": {
        "seed": 5, "workload": {"rate": 10, "duration_s": 15, "prompt_tokens": 1500, "output_tokens": 300},
        "fleet": {"layout": "colocated", "gpus": 2, "kv_policy": "on_demand"},
        "model": {"kv_capacity_tokens": 30000}},
}


def _bits(values, code):
    """The raw bytes of `values` as doubles ('d') or 8-byte ints: equal iff equal bit for bit."""
    return b"".join(struct.pack("<" + code, v) for v in values)


@pytest.fixture(scope="module", params=sorted(SCENARIOS))
def run(request):
    """Each scenario's run, its logs compacted (as a run of COMPACT_STEPS steps or more ends)."""
    saved = engine.COMPACT_STEPS
    engine.COMPACT_STEPS = 0
    try:
        return simulate(load_scenario(SCENARIOS[request.param]))
    finally:
        engine.COMPACT_STEPS = saved


def test_compact_columns_hold_every_step_bit_for_bit(run):
    plain = simulate(run.scenario)  # the same run under the threshold: lists, as the engine appended them
    assert sum(len(g) for g in run.gpus) > 100
    for log, raw in zip(run.gpus, plain.gpus):
        assert isinstance(raw.start, list) and isinstance(log.start, array)
        for name, code in GpuLog.COLUMN_TYPES:
            mine, theirs = getattr(log, name), getattr(raw, name)
            assert mine.typecode == code
            assert _bits(mine, "d" if code == "d" else "q") == _bits(theirs, "d" if code == "d" else "q"), name


def test_only_runs_of_at_least_compact_steps_are_compacted(monkeypatch):
    scenario = load_scenario(SCENARIOS["disaggregated"])
    steps = sum(len(g) for g in simulate(scenario).gpus)
    monkeypatch.setattr(engine, "COMPACT_STEPS", steps + 1)
    assert all(isinstance(g.end, list) for g in simulate(scenario).gpus)
    monkeypatch.setattr(engine, "COMPACT_STEPS", steps)
    assert all(isinstance(g.end, array) for g in simulate(scenario).gpus)


def test_compact_is_idempotent_and_keeps_sequence_reads():
    log = GpuLog(0, "colocated", start=[0.0, 0.1], end=[0.1, 0.30000000000000004], decode_seqs=[1, 2],
                 prefill_tokens=[512, 0], context_tokens=[3_000_000_000, 3_000_000_002])
    log.compact()
    first = log.start
    assert log.compact().start is first  # nothing converted twice
    assert log.end[-1] == 0.30000000000000004 and log.end[1:] == array("d", [0.30000000000000004])
    assert list(log.context_tokens) == [3_000_000_000, 3_000_000_002]  # over 2**31: 8-byte ints
    # Busy time sums the ticks of its seconds exactly (to_ticks(0.30000000000000004) is 3e11).
    assert len(log) == 2 and log.busy_s() == 0.3


def test_range_max_equals_max_of_every_range():
    rng = random.Random(7)
    values = [rng.random() for _ in range(1000)]
    index = RangeMax(values)
    for _ in range(3000):
        lo = rng.randrange(0, 1000)
        hi = rng.randrange(lo - 3, 1010)
        expected = max(values[lo:hi + 1], default=-1.0)
        assert index.max(lo, hi, -1.0) == expected, (lo, hi)
    for lo, hi in ((0, 999), (0, 63), (64, 127), (63, 64), (5, 5), (999, 999), (128, 2000)):
        assert index.max(lo, hi, None) == max(values[lo:hi + 1])


def test_worst_gaps_are_the_max_of_each_requests_gaps(run):
    rows = request_metrics(run)
    checked = 0
    for rec, row in zip(run.requests, rows):
        if row["worst_gap_ms"] is None:
            continue
        assert row["worst_gap_ms"] == max(request_gaps(run, rec)) * 1000.0
        checked += 1
    assert checked > 50


def test_pooled_percentiles_equal_the_expanded_gaps(run):
    values, counts = pooled_gaps(run, [step_gaps_of(g) for g in run.gpus])
    assert 0 in counts  # prompt-only steps: gaps no token waited, left out before the sort
    expanded = [v for v, c in zip(values, counts) for _ in range(c)]
    qs = (1, 50, 90, 99, 100)
    assert weighted_percentile(values, counts, qs) == [percentile(expanded, q) for q in qs]


def test_metrics_that_skip_their_sweep_when_off_give_what_the_sweep_gives(run):
    m = summarize(run)
    assert m["preemptions"] == sum(rec.preemptions for rec in run.requests)
    ended = [rec for rec in run.requests if rec.prefill_end is not None]
    assert run.scenario.fleet.prefix_cache == "off"
    assert prefix_metrics(run) == {"prefix_hit_rate": sum(r.prefix_hit_tokens for r in ended) / sum(r.prompt_tokens for r in ended),
                                   "prefill_tokens_saved": 0, "prefix_fetch_p99_ms": None}
    if run.scenario.fleet.kv_policy == "on_demand":
        assert m["preemptions"] > 0  # the on_demand case really sweeps


def test_the_caps_reach_a_week_a_million_requests_and_256_gpus():
    assert MAX_DURATION_S >= 7 * 24 * 3600 and MAX_GPUS >= 256
    # A million expected requests pass the request check, room for chance included.
    load_scenario({"workload": {"rate": 1_000_000 / 7200, "duration_s": 7200, "prompt_tokens": 100, "output_tokens": 10},
                   "fleet": {"layout": "colocated", "gpus": 256}})
    load_scenario({"workload": {"rate": 1.5, "duration_s": 7 * 24 * 3600, "prompt_tokens": 100, "output_tokens": 10},
                   "fleet": {"layout": "disaggregated", "prefill_gpus": 128, "decode_gpus": 128}})
    assert 0 < MAX_STEPS < 10**8  # a bound, whatever the caps above let through


# ------------------------------------------- run-ahead past other queues' arrivals

from reference_sim import reference_simulate  # noqa: E402
from test_reference import diff_engine_reference  # noqa: E402

# Many colocated GPUs and dense arrivals: almost every arrival lands while most GPUs run
# decode-only steps, so a GPU that stopped at every arrival would go through the heap.
DENSE = {"seed": 11, "drain_s": 30,
         "workload": {"rate": 45, "duration_s": 5,
                      "prompt_tokens": {"dist": "mix", "components": [
                          {"weight": 3, "length": {"dist": "uniform", "low": 50, "high": 900}},
                          {"weight": 1, "length": {"dist": "uniform", "low": 2500, "high": 6000}}]},
                      "output_tokens": {"dist": "uniform", "low": 1, "high": 160}},
         "fleet": {"layout": "colocated", "gpus": 12, "chunk_tokens": 512, "long_prompt_tokens": 2500, "long_gpus": 4},
         "slo": {"ttft_s": 0.6, "tpot_ms": 40}}

DENSE_VARIANTS = {
    "reserve": {},
    "whole-prompts": {"fleet.chunk_tokens": None},
    "on-demand": {"fleet.kv_policy": "on_demand", "model.kv_capacity_tokens": 12000},
    "admission": {"fleet.admission": {"reject_when": "predicted_ttft_over_slo"}},
}


def _dense(dispatch, variant):
    raw = {**DENSE, "fleet": dict(DENSE["fleet"], dispatch=dispatch), "model": {"cost": "linear"}}
    for dotted, value in DENSE_VARIANTS[variant].items():
        node = raw
        *parents, last = dotted.split(".")
        for p in parents:
            node = node.setdefault(p, {})
        if value is None:
            node.pop(last, None)
        else:
            node[last] = value
    return load_scenario(raw)


def _plain_run_ahead(monkeypatch, sc):
    """The engine with every GPU's run-ahead stopping at every arrival (as before bound queues)."""
    with monkeypatch.context() as m:
        m.setattr(engine._Simulation, "_plan_arrivals", lambda self: None)
        return simulate(sc)


def _same_run(a, b):
    fields = ("prefill_gpu", "decode_gpu", "prefill_start", "prefill_end", "first_token", "finish",
              "decode_first_step", "decode_last_step", "preemptions", "rejected", "predicted_ttft_s", "earlier")
    assert [[getattr(r, f) for f in fields] for r in a.requests] == [[getattr(r, f) for f in fields] for r in b.requests]
    for x, y in zip(a.gpus, b.gpus):
        for name, _ in GpuLog.COLUMN_TYPES:
            assert list(getattr(x, name)) == list(getattr(y, name)), name
        assert (x.kv_used, x.preempted, x.readmitted) == (y.kv_used, y.preempted, y.readmitted)
    assert (a.end_time, a.capped) == (b.end_time, b.capped)


@pytest.mark.parametrize("variant", sorted(DENSE_VARIANTS))
@pytest.mark.parametrize("dispatch", ["queue", "round_robin", "least_loaded", "length_split"])
def test_many_gpus_and_dense_arrivals_match_the_reference(dispatch, variant):
    problems = diff_engine_reference(_dense(dispatch, variant))
    assert not problems, "engine != reference:\n  " + "\n  ".join(problems)


@pytest.mark.parametrize("variant", sorted(DENSE_VARIANTS))
@pytest.mark.parametrize("dispatch", ["round_robin", "length_split"])
def test_bound_dispatch_stops_only_the_gpus_an_arrival_joins(monkeypatch, dispatch, variant):
    """round_robin and length_split bind a prompt from its order and length, so a GPU runs
    ahead past the arrivals bound elsewhere: the same run in fewer heap events."""
    sc = _dense(dispatch, variant)
    fast, plain = simulate(sc), _plain_run_ahead(monkeypatch, sc)
    _same_run(fast, plain)
    assert sum(r.finished for r in fast.requests) > 150
    # round_robin stops one GPU of 12 per arrival; length_split the 8 or the 4 of a group.
    assert fast.events < (0.7 if dispatch == "round_robin" else 0.97) * plain.events, (fast.events, plain.events)


@pytest.mark.parametrize("dispatch", ["queue", "least_loaded"])
def test_dispatch_that_reads_the_fleet_still_stops_every_gpu_at_every_arrival(monkeypatch, dispatch):
    sc = _dense(dispatch, "reserve")
    fast, plain = simulate(sc), _plain_run_ahead(monkeypatch, sc)
    _same_run(fast, plain)
    assert fast.events == plain.events


# ------------------------------------------- percentiles by selection, compacted metrics

def _percentiles_by_walk(values, counts, qs):
    """numpy's linear percentile of the expanded multiset, by walking the sorted pairs."""
    pairs = sorted(zip(values, counts))
    n = sum(counts)

    def at(rank):
        seen = 0
        for v, c in pairs:
            seen += c
            if seen > rank:
                return v

    out = []
    for q in qs:
        pos = q / 100 * (n - 1)
        lo = int(pos)
        out.append(percentiles._lerp(at(lo), at(min(lo + 1, n - 1)), pos - lo))
    return out


def _big_multisets():
    rng = random.Random(13)
    k = 3 * percentiles.SELECT_MIN
    yield "random", [rng.random() for _ in range(k)], [rng.choice([0, 1, 2, 5, 60]) for _ in range(k)]
    # Heavy copies where the strided sample never looks: the brackets miss and widen.
    stride = k // percentiles.SELECT_SAMPLE
    values, counts = [rng.random() for _ in range(k)], [1] * k
    for i in range(1, k, 3 * stride):
        values[i], counts[i] = rng.random() / 100, 5_000
    yield "hidden-weight", values, counts
    yield "ties", [float(rng.randint(0, 40)) for _ in range(k)], [rng.randint(0, 3) for _ in range(k)]
    ascending = sorted(rng.random() for _ in range(k))  # like a decode stretch's step gaps
    yield "ascending", ascending, [0 if i % 7 == 0 else 3 for i in range(k)]


def test_a_bracket_that_misses_widens_a_little_at_a_time(monkeypatch):
    # Brackets one sample value wide miss often: each miss widens its side and takes
    # another pass, and the answer is still the sort's, without sorting most of the data.
    monkeypatch.setattr(percentiles, "SELECT_MARGIN", 1)
    monkeypatch.setattr(percentiles, "SELECT_SIGMAS", 0)
    _, values, counts = next(_big_multisets())
    sorted_sizes, passes = [], []
    real_sort, real_in_bucket = percentiles._by_sort, percentiles._in_bucket
    monkeypatch.setattr(percentiles, "_by_sort", lambda v, c, r: sorted_sizes.append(len(v)) or real_sort(v, c, r))
    monkeypatch.setattr(percentiles, "_in_bucket", lambda v, c, b, k, s: (k == 1 and passes.append(k)) or real_in_bucket(v, c, b, k, s))
    qs = (0, 1, 50, 90, 99, 99.9, 100)
    assert weighted_percentile(values, counts, qs) == _percentiles_by_walk(values, counts, qs)
    assert len(passes) > 1  # a bracket missed
    assert max(sorted_sizes) < len(values) / 10


def test_many_percentiles_at_once_are_the_sorts_too():
    # 201 percentiles: past what one byte a value can bucket, so they come from the one sort
    _, values, counts = next(_big_multisets())
    qs = [q / 2 for q in range(201)]
    assert weighted_percentile(values, counts, qs) == _percentiles_by_walk(values, counts, qs)
    assert weighted_percentile(values, counts, qs[::8]) == _percentiles_by_walk(values, counts, qs[::8])  # 26: by selection


# _select's passes over every value: C's loops (CPython's) or plain ones (PyPy's), each tried
# under whichever interpreter runs the tests (the CI runs this file under both).
PASSES = pytest.mark.parametrize("plain_loops", [False, True], ids=["c-loops", "plain-loops"])


@PASSES
@pytest.mark.parametrize("name, values, counts", list(_big_multisets()), ids=lambda x: x if isinstance(x, str) else "")
def test_percentiles_by_selection_are_the_sorts(monkeypatch, name, values, counts, plain_loops):
    monkeypatch.setattr(percentiles, "PYPY", plain_loops)
    qs = (0, 1, 50, 90, 99, 99.9, 100)  # 0, 1 and 99-100: brackets that overlap and merge
    want = _percentiles_by_walk(values, counts, qs)
    widened = []
    real = percentiles._by_sort
    monkeypatch.setattr(percentiles, "_by_sort", lambda v, c, r: widened.append(len(v)) or real(v, c, r))
    assert weighted_percentile(values, counts, qs) == want
    assert weighted_percentile(array("d", values), array("i", counts), qs) == want  # a big run's columns
    if name == "ties":  # a long run's ticks are ints: its brackets' ends are ints too
        assert weighted_percentile(array("q", map(int, values)), counts, qs) == want
    if name == "hidden-weight":
        assert max(widened) > len(values) / 2  # the sample missed the copies: a bracket widened
    else:
        assert max(widened) < len(values) / 10  # only the values inside a bracket were sorted


@PASSES
@pytest.mark.parametrize("sparse_share", [0.0, 2.0], ids=["every-bucket-by-a-pass", "every-bucket-by-positions"])
def test_a_bucket_read_either_way_gives_the_sorts(monkeypatch, sparse_share, plain_loops):
    # _select reads a small bucket at its positions and a big one in a pass: forced all one
    # way, then all the other, the percentiles are still the sort's (lists and arrays).
    monkeypatch.setattr(percentiles, "SPARSE_SHARE", sparse_share)
    monkeypatch.setattr(percentiles, "PYPY", plain_loops)
    qs = (0, 1, 50, 90, 99, 99.9, 100)
    for _, values, counts in _big_multisets():
        want = _percentiles_by_walk(values, counts, qs)
        assert weighted_percentile(values, counts, qs) == want
        assert weighted_percentile(array("d", values), array("i", counts), qs) == want


def test_a_compacted_run_has_the_same_metrics_in_doubles(run):
    plain = simulate(run.scenario)
    assert isinstance(step_gaps_of(run.gpus[0]), array) and isinstance(step_gaps_of(plain.gpus[0]), list)
    values, counts = pooled_gaps(run, [step_gaps_of(g) for g in run.gpus])
    assert isinstance(values, array) and values.typecode == "d"
    assert summarize(run) == summarize(plain)


def test_a_run_compacted_midway_equals_the_plain_run(monkeypatch):
    """Crossing COMPACT_STEPS at an arrival mid-run turns the logs into arrays there and the
    rest of the run appends to them: every step, record and metric as with lists throughout."""
    raw = SCENARIOS["colocated-chunked"]
    plain = simulate(load_scenario(raw))
    total = sum(len(g) for g in plain.gpus)
    at = []  # steps logged (all GPUs) when each compaction ran
    compact = GpuLog.compact

    def spy(log, *types):  # (mid-run the engine compacts its tick columns: GpuLog.TICK_COLUMN_TYPES)
        at.append(len(log))
        return compact(log, *types)

    monkeypatch.setattr(GpuLog, "compact", spy)
    monkeypatch.setattr(engine, "COMPACT_STEPS", total // 2)
    mid = simulate(load_scenario(raw))
    assert at and sum(at[:len(mid.gpus)]) < total  # compacted before the run ended
    for log, theirs in zip(mid.gpus, plain.gpus):
        assert isinstance(log.start, array) and isinstance(theirs.start, list)
        for name, code in GpuLog.COLUMN_TYPES:
            kind = "d" if code == "d" else "q"
            assert _bits(getattr(log, name), kind) == _bits(getattr(theirs, name), kind), name
    assert [(r.first_token, r.finish, r.decode_last_step) for r in mid.requests] == [
        (r.first_token, r.finish, r.decode_last_step) for r in plain.requests]
    assert summarize(mid) == summarize(plain)


def test_summarize_without_rows_equals_summarize_from_request_metrics(run):
    assert summarize(run) == summarize(run, request_metrics(run))


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_int_ticks_give_the_results_of_float_ticks(name, monkeypatch):
    """A run short enough holds its ticks as whole-number floats, a long one as ints
    (engine.FLOAT_TICKS_BELOW, docs/model.md "Time base"): the same whole numbers, so forcing
    ints on a short run must change no bit of its result."""
    sc = load_scenario(SCENARIOS[name])
    floats = simulate(sc)
    monkeypatch.setattr(engine, "FLOAT_TICKS_BELOW", 0)
    ints = simulate(sc)
    assert isinstance(floats.gpus[0].start[0], float) and isinstance(ints.gpus[0].start[0], float)
    for mine, theirs in zip(ints.gpus, floats.gpus):
        for name_, code in GpuLog.COLUMN_TYPES:
            kind = "d" if code == "d" else "q"
            assert _bits(getattr(mine, name_), kind) == _bits(getattr(theirs, name_), kind), name_
        assert mine.kv_used == theirs.kv_used
    fields = ("arrival", "prefill_start", "prefill_end", "first_token", "finish", "decode_last_step", "preemptions")
    assert [[getattr(r, f) for f in fields] for r in ints.requests] == [[getattr(r, f) for f in fields] for r in floats.requests]
    assert [(t.ready, t.reserved, t.start, t.end) for t in ints.transfers] == [
        (t.ready, t.reserved, t.start, t.end) for t in floats.transfers]
    assert summarize(ints) == summarize(floats)


# ------------------------------------------------------------- the garbage collector

@CPYTHON_COLLECTOR
def test_a_runs_step_lists_start_in_the_collectors_oldest_generation():
    # The lists live to the end of the run; made young, every collection the run sets off
    # would walk them as they grow (benchmarks/README.md, "Scale": up to 100 ms of a 350 ms run).
    gc.collect()
    junk = [[] for _ in range(5000)]  # young objects, as a page or a sweep leaves behind
    result = simulate(load_scenario(SCENARIOS["disaggregated"]))
    oldest = {id(o) for o in gc.get_objects(generation=2)}
    assert all(id(log.end_t) in oldest and id(log.decode_seqs) in oldest for log in result.gpus)
    assert all(id(rec) in oldest for rec in result.requests[:10])
    del junk


def _collections_during(work):
    """The generations of the collections `work()` set off, and what it returned."""
    collections = []
    callback = lambda phase, info: phase == "start" and collections.append(info["generation"])  # noqa: E731
    gc.callbacks.append(callback)
    try:
        out = work()
    finally:
        gc.callbacks.remove(callback)
    return collections, out


@CPYTHON_COLLECTOR
def test_a_run_and_its_metrics_hold_the_collector_off_and_switch_it_back_on():
    # lab/core/collector.py: the one young collection that moves the run's lists, then none
    # until summarize has returned; the collector is on again after each.
    assert gc.isenabled()
    scenario = load_scenario(SCENARIOS["disaggregated"])
    threshold = gc.get_threshold()
    gc.set_threshold(10)  # (every ten new tracked objects would set a collection off)
    try:
        during_run, result = _collections_during(lambda: simulate(scenario))
        assert gc.isenabled()
        during_metrics, metrics = _collections_during(lambda: summarize(result, numpy=False))
        assert gc.isenabled()
    finally:
        gc.set_threshold(*threshold)
    # the move, then at most the one young collection put off, as the collector comes back on
    assert during_run in ([1], [1, 0])
    assert during_metrics in ([], [0]) and metrics["requests"] == len(result.requests) > 100


@CPYTHON_COLLECTOR
def test_the_collector_is_on_again_after_a_run_that_failed(monkeypatch):
    def fail(simulated_s, arrivals_end_s):
        raise KeyboardInterrupt  # (as a student's Ctrl-C in `lab run`)

    monkeypatch.setattr(engine, "PROGRESS_ARRIVALS", 10)
    with pytest.raises(KeyboardInterrupt):
        simulate(load_scenario(SCENARIOS["disaggregated"]), progress=fail)
    assert gc.isenabled()


def test_only_cpythons_collector_is_held_off_during_a_run(monkeypatch):
    # Under PyPy the collector frees everything (no reference counting): left on.
    seen = []
    monkeypatch.setattr(engine, "PROGRESS_ARRIVALS", 10)
    simulate(load_scenario(SCENARIOS["disaggregated"]), progress=lambda *_: seen.append(gc.isenabled()))
    assert seen and set(seen) == {percentiles.PYPY}
    assert gc.isenabled()


@CPYTHON_COLLECTOR
def test_a_run_with_the_collector_off_collects_nothing():
    # The lab page switches the collector off for a run's first half (lab/ui/timeline/collector.py):
    # the run must not collect behind its back.
    scenario = load_scenario(SCENARIOS["disaggregated"])
    gc.disable()
    try:
        collections, _ = _collections_during(lambda: simulate(scenario))
    finally:
        gc.enable()
    assert collections == []
