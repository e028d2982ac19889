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


class _Silent:
    """A worker stand-in whose pipe never answers; its process is `proc`."""

    def __init__(self, proc):
        self.proc = proc
        self.conn = self

    def poll(self, seconds):
        import time

        time.sleep(seconds)
        return False


def test_a_hang_is_cpu_time_spent_not_a_starved_wait(fuzz):
    """A loop that burns CPU is a hang once it spent the timeout; a process that only waits is given
    ten times the timeout of wall-clock time first (a busy machine must not turn a slow run into a hang)."""
    import subprocess
    import sys
    import time

    spin = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    idle = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        t0 = time.perf_counter()
        assert fuzz._answered(_Silent(spin), 0.3) is False
        assert fuzz._cpu_seconds(spin.pid) >= 0.3
        t1 = time.perf_counter()
        assert fuzz._answered(_Silent(idle), 0.2) is False
        waited = time.perf_counter() - t1
        assert waited >= 10 * 0.2 - 0.01  # the wall-clock backstop, not the CPU timeout
        assert fuzz._cpu_seconds(idle.pid) < 0.2 and t1 - t0 < 10 * 0.3
    finally:
        spin.kill()
        idle.kill()


def test_the_docs_state_the_fuzz_workers_limits_as_the_script_has_them(fuzz):
    readme = " ".join((REPO / "docs" / "testing.md").read_text(encoding="utf-8").split())
    assert f"under a {fuzz.MEMORY_MB // 1024} GB address-space limit" in readme
    assert fuzz.MEMORY_MB % 1024 == 0
    assert f"a timeout of {fuzz.TIMEOUT_S:g} s of CPU time" in readme
