"""The metrics on numpy (lab/core/fast_metrics.py) equal the pure path's: every value, and
its type, on every shipped mission, the property scenarios (colocated and split fleets,
built fleets, KV on demand under pressure with its preemptions, the planner's role
changes, early rejection), the engine's reference cases, the production traces, compacted
and int-tick runs, and hand-built results; with the rows `lab run` passes, and without.
Then the choice `summarize` makes between the two paths (fast_metrics.usable)."""

import os
import subprocess
import sys
from types import SimpleNamespace

import pytest
from hypothesis import given

np = pytest.importorskip("numpy")

from lab.core import engine, fast_metrics, load_scenario, request_metrics, simulate, summarize  # noqa: E402
from lab.core.missions import list_missions  # noqa: E402
from test_admission import admitting_scenarios  # noqa: E402
from test_kv import under_pressure  # noqa: E402
from test_metrics import hand_built, two_stretches  # noqa: E402
from test_planner import PLANNER_SETTINGS, planner_scenarios  # noqa: E402
from test_properties import PROPERTY_SETTINGS, any_drain, built_fleets, scenarios  # noqa: E402
from test_reference import CASES, SHARED_TRACES  # noqa: E402


def assert_same(result):
    """The pure and the numpy summaries of `result` (with its rows and without) are the same
    values of the same types (repr tells 1 from 1.0, and a numpy scalar from a float)."""
    rows = request_metrics(result)
    pure = {k: repr(v) for k, v in summarize(result, numpy=False).items()}
    for fast in (summarize(result, numpy=True), summarize(result, rows, numpy=True)):
        fast = {k: repr(v) for k, v in fast.items()}
        assert list(fast) == list(pure)
        assert {k: (pure[k], fast[k]) for k in pure if fast[k] != pure[k]} == {}
    assert {k: repr(v) for k, v in summarize(result, rows, numpy=False).items()} == pure


@pytest.mark.parametrize("mission", list_missions(), ids=lambda m: m.id)
def test_every_mission(mission):
    assert_same(simulate(mission.scenario))


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_reference_cases(name):
    assert_same(simulate(CASES[name]))


@PROPERTY_SETTINGS
@given(scenarios(drain=any_drain))
def test_random_scenarios(raw):
    assert_same(simulate(load_scenario(raw)))


@PROPERTY_SETTINGS
@given(built_fleets(drain=any_drain, max_duration=4.0))
def test_random_built_fleets(raw):
    assert_same(simulate(load_scenario(raw)))


@PROPERTY_SETTINGS
@given(under_pressure())
def test_kv_on_demand_under_pressure(raw):
    """Preempted requests decode in several stretches: the numpy path leaves them to the pure rule."""
    assert_same(simulate(load_scenario(raw)))


@PLANNER_SETTINGS
@given(planner_scenarios())
def test_the_planners_role_changes(raw):
    assert_same(simulate(load_scenario(raw)))


@PROPERTY_SETTINGS
@given(admitting_scenarios())
def test_early_rejection(raw):
    assert_same(simulate(load_scenario(raw)))


TRACES = {
    "azure-conversation-split": ("azure_conv_2023.csv", {"layout": "disaggregated", "prefill_gpus": 1, "decode_gpus": 1}),
    "azure-conversation-colocated": ("azure_conv_2023.csv", {"layout": "colocated", "gpus": 2}),
    "azure-code-colocated-chunked": ("azure_code_2023.csv", {"layout": "colocated", "gpus": 4, "chunk_tokens": 512}),
    "mooncake-conversation-on-demand": ("mooncake_conversation_fast25.jsonl",
                                        {"layout": "colocated", "gpus": 8, "kv_policy": "on_demand"}),
}


@pytest.mark.parametrize("name", sorted(TRACES))
def test_the_production_traces(name):
    path, fleet = TRACES[name]
    if not (SHARED_TRACES / path).exists():
        pytest.skip(f"{SHARED_TRACES / path} is not beside this checkout")
    raw = {"workload": {"trace": {"path": path}}, "fleet": fleet, "model": {"cost": "linear"},
           "slo": {"ttft_s": 2.0, "tpot_ms": 50}}
    result = simulate(load_scenario(raw, base_dir=SHARED_TRACES))
    assert_same(result)


@pytest.mark.parametrize("name", ["colocated-kv-limited-chunked", "disagg-fifo", "colocated-overloaded-capped"])
def test_compacted_and_int_tick_runs(name, monkeypatch):
    """A big run's columns are arrays; a long run's ticks are ints (forced here on short runs)."""
    monkeypatch.setattr(engine, "COMPACT_STEPS", 0)
    assert_same(simulate(CASES[name]))
    monkeypatch.setattr(engine, "FLOAT_TICKS_BELOW", 0)
    result = simulate(CASES[name])
    assert not isinstance(result.gpus[0].end_t[-1], float)
    assert_same(result)


def test_hand_built_results():
    """Logs built in seconds (their ticks are ints) and records with no engine ticks."""
    assert_same(hand_built())
    for layout in ("colocated", "disaggregated"):
        assert_same(two_stretches(layout))


@pytest.mark.parametrize("seed", range(6))
def test_the_value_at_every_rank_of_a_weighted_multiset(seed, monkeypatch):
    """fast_metrics._at_ranks against the expanded multiset, sorted, at every rank (one at a
    time, and all at once): values with many repeats, zero weights, a pivot's own copies at
    the ends of a part."""
    monkeypatch.setattr(fast_metrics, "SORT_BELOW", 3)  # (narrowing down to three values, not thousands)
    rng = np.random.default_rng(seed)
    values = rng.integers(0, 12, size=60).astype(float)
    counts = rng.integers(0, 4, size=60)
    expanded = np.sort(np.repeat(values, counts))
    ranks = list(range(len(expanded)))
    assert [fast_metrics._at_ranks(np, values, counts, [rank])[rank] for rank in ranks] == expanded.tolist()
    assert fast_metrics._at_ranks(np, values, counts, ranks) == dict(zip(ranks, expanded.tolist()))


# ------------------------------------------------------------------ the choice


def _small_run():
    return simulate(list_missions()[0].scenario)


def test_numpy_is_chosen_when_already_imported_or_the_run_is_big(monkeypatch):
    result = _small_run()
    assert fast_metrics.usable(result) is np  # (imported by this module)
    monkeypatch.setattr(fast_metrics, "sys", SimpleNamespace(modules={}))  # as if nothing had imported numpy
    assert fast_metrics.usable(result) is None  # small, and numpy not imported: not worth importing
    steps = sum(len(log) for log in result.gpus)
    monkeypatch.setattr(fast_metrics, "FAST_MIN_STEPS", steps)
    assert fast_metrics.usable(result) is not None
    # With the per-request values in hand (lab run's rows), only the step passes gain: a bigger run.
    assert fast_metrics.usable(result, with_rows=True) is None
    monkeypatch.setattr(fast_metrics, "FAST_MIN_STEPS_WITH_ROWS", steps)
    assert fast_metrics.usable(result, with_rows=True) is not None


def test_forcing_and_refusing(monkeypatch):
    result = _small_run()
    assert fast_metrics.usable(result, numpy=False) is None
    monkeypatch.setattr(fast_metrics, "PYPY", True)
    assert fast_metrics.usable(result) is None  # never by choice under PyPy
    assert fast_metrics.usable(result, numpy=True) is np
    monkeypatch.setattr(fast_metrics, "numpy_module", lambda: None)
    assert fast_metrics.usable(result) is None
    with pytest.raises(ImportError, match="numpy is not installed"):
        summarize(result, numpy=True)


def test_ticks_past_what_a_double_holds_stay_on_the_pure_path(monkeypatch):
    monkeypatch.setattr(engine, "FLOAT_TICKS_BELOW", 0)
    result = _small_run()
    log = max(result.gpus, key=len)
    assert fast_metrics.usable(result, numpy=True) is np
    log.end_t[-1] = fast_metrics.EXACT_BELOW  # as a run of 2.5 hours ends
    assert fast_metrics.usable(result, numpy=True) is None


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="counts threads through Linux's /proc")
def test_numpy_imported_after_the_lab_starts_no_blas_threads_unless_asked():
    """lab/__init__.py asks OpenBLAS for one thread (the lab does no linear algebra, and the
    spare threads' spinning doubled numpy's import in CPU); a user's own setting wins."""
    count = ("import lab, numpy, os; numpy.ones(3).sum(); "
             "print(len(os.listdir('/proc/self/task')), os.environ['OPENBLAS_NUM_THREADS'])")
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    ours = subprocess.run([sys.executable, "-c", count], env=env, cwd=repo, capture_output=True, text=True, check=True)
    assert ours.stdout.split() == ["1", "1"]
    theirs = subprocess.run([sys.executable, "-c", count], env=dict(env, OPENBLAS_NUM_THREADS="2"), cwd=repo,
                            capture_output=True, text=True, check=True)
    assert theirs.stdout.split()[1] == "2"
