"""The metrics' numpy path (lab/core/metrics_numpy.py) gives the pure path's values bit for
bit: on every mission's start, on the reference cases, on random scenarios (reserve and on
demand, colocated and split) and on the Azure conversation trace in both layouts."""

import contextlib
from pathlib import Path

import pytest
from hypothesis import given

from lab.core import load_mission, load_scenario, simulate, summarize
from lab.core import metrics_numpy

from test_kv import on_demand_scenarios, under_pressure
from test_properties import PROPERTY_SETTINGS, scenarios
from test_reference import CASES, SHARED_TRACES

pytest.importorskip("numpy")
REPO = Path(__file__).resolve().parent.parent
MISSIONS = sorted(p for p in (REPO / "missions").glob("*.json") if p.name != "schema.json")


@contextlib.contextmanager
def path(forced):
    """Take (True) or skip (False) the numpy path whatever the run's size."""
    before = metrics_numpy.FORCED
    metrics_numpy.FORCED = forced
    try:
        yield
    finally:
        metrics_numpy.FORCED = before


def assert_same_both_ways(result):
    with path(True):
        assert metrics_numpy.usable(result), "the numpy path was not taken: the test compares nothing"
        fast = summarize(result)
    with path(False):
        pure = summarize(result)
    # repr tells every float apart (0.0 from -0.0, each last bit), and None from 0
    differ = {k: (pure[k], fast[k]) for k in pure if repr(pure[k]) != repr(fast[k])}
    assert differ == {}, f"numpy path != pure path: {differ}"
    assert list(fast) == list(pure)


@pytest.mark.parametrize("mission", MISSIONS, ids=lambda p: p.stem)
def test_every_missions_start(mission):
    m = load_mission(mission)
    assert_same_both_ways(simulate(m.scenario))


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_reference_cases(name):
    assert_same_both_ways(simulate(CASES[name]))


@PROPERTY_SETTINGS
@given(scenarios())
def test_random_scenarios(raw):
    assert_same_both_ways(simulate(load_scenario(raw)))


@PROPERTY_SETTINGS
@given(on_demand_scenarios(max_duration=5.0))
def test_random_on_demand_scenarios(raw):
    assert_same_both_ways(simulate(load_scenario(raw)))


@PROPERTY_SETTINGS
@given(under_pressure())
def test_on_demand_under_pressure(raw):
    assert_same_both_ways(simulate(load_scenario(raw)))


CONVERSATION = {"workload": {"trace": {"path": "azure_conv_2023.csv"}}, "model": {"cost": "linear"},
                "slo": {"ttft_s": 2.0, "tpot_ms": 50}}  # (benchmarks/scenarios.py's CONVERSATION_TRACE)


@pytest.mark.parametrize("fleet", [{"layout": "disaggregated", "prefill_gpus": 1, "decode_gpus": 1},
                                   {"layout": "colocated", "gpus": 2}], ids=["1+1", "2-colocated"])
def test_the_conversation_trace(fleet):
    if not (SHARED_TRACES / "azure_conv_2023.csv").exists():
        pytest.skip(f"the shared traces are not at {SHARED_TRACES}")
    scenario = load_scenario({**CONVERSATION, "fleet": fleet}, base_dir=SHARED_TRACES)
    result = simulate(scenario)
    assert len(result.requests) >= metrics_numpy.FROM_REQUESTS  # the size that takes the numpy path by itself
    with path(None):
        assert metrics_numpy.usable(result)
    assert_same_both_ways(result)


def test_small_runs_and_integer_ticks_stay_on_the_pure_path():
    result = simulate(CASES["colocated-whole"])
    assert len(result.requests) < metrics_numpy.FROM_REQUESTS
    assert not metrics_numpy.usable(result)
    with path(True):
        assert metrics_numpy.usable(result)
        for log in result.gpus:  # a run past 2**52 ticks keeps them as Python integers
            log.end_t = [int(t) for t in log.end_t]
        assert not metrics_numpy.usable(result)
