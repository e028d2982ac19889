"""benchmarks/fuzz.py's generator, run in-process on a few scenarios: each one is either
simulated with finite metrics or refused with a LabError, never anything else."""

import importlib.util
import random
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def fuzz():
    spec = importlib.util.spec_from_file_location("fuzz", REPO / "benchmarks" / "fuzz.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_fuzz_scenarios_are_ok_or_rejected(fuzz):
    rng = random.Random(20261201)
    outcomes = []
    for i in range(30):
        job = fuzz.random_job(rng)
        status, detail = fuzz.run_one(*job)
        assert status in ("ok", "rejected"), f"scenario {i} {status}:\n{detail}\n{job}"
        outcomes.append(status)
    # The generator makes both kinds, or it tests nothing.
    assert "ok" in outcomes and "rejected" in outcomes


def test_fuzz_traces_are_ok_or_rejected(fuzz):
    rng = random.Random(7)
    outcomes = []
    for i in range(15):
        raw = {"workload": {"trace": {"path": "trace.csv", "time_scale": rng.choice([0.001, 1, 1000])}},
               "fleet": {"layout": "colocated", "gpus": 2}}
        status, detail = fuzz.run_one(raw, trace_text=fuzz.random_trace(rng))
        assert status in ("ok", "rejected"), f"trace {i} {status}:\n{detail}"
        outcomes.append(status)
    assert "ok" in outcomes


def test_run_one_reports_other_exceptions_as_crashes(fuzz, monkeypatch):
    from lab import core

    def broken(scenario):
        raise ZeroDivisionError("boom")

    monkeypatch.setattr(core, "simulate", broken)
    status, detail = fuzz.run_one({"workload": {"rate": 1, "duration_s": 1, "prompt_tokens": 10, "output_tokens": 2},
                                   "fleet": {"layout": "colocated", "gpus": 1}})
    assert status == "crashed" and "ZeroDivisionError" in detail
