"""One plan run as plain data, and the workload variants a plan runs a fleet on.

A task is `(scenario dict, base_dir, roots, changes)`: picklable, so local processes and
Dask workers run it alike (`run_task` rebuilds the Scenario there). A variant is a dict of
extra changes: a window of the trace (screening), another seed or a scaled rate (robustness).
"""

import bisect
import math

from lab.core.engine import simulate
from lab.core.errors import LabError
from lab.core.metrics import summarize
from lab.core.spec import Scenario

__all__ = ["task", "run_task", "KEPT_METRICS", "screen_variants", "robustness_variants", "pool_windows",
           "check_changes", "SCREEN_WINDOWS", "SCREEN_S"]

# The metrics a plan reads and reports; the rest stay on the worker.
KEPT_METRICS = ("requests", "unfinished", "slo_attainment", "goodput_rps", "goodput_rps_per_gpu", "gpus",
                "usd_per_hour", "ttft_p99_s", "tpot_p99_ms", "worst_gap_p99_ms", "util_prefill", "util_decode", "util_gpu")
# Screening a long trace: this many windows of this many seconds (trace time), spread evenly over it.
# Eight of 60 s rather than four of 120 s (the same simulated time): on the code trace a 2 + 1
# fleet's windows read 87.5% rather than 91.3% against 82.4% on the whole trace, as more of its
# bursts fall in a window.
SCREEN_WINDOWS = 8
SCREEN_S = 60.0


def task(scenario, changes):
    return (scenario.to_dict(), scenario.base_dir, scenario.trace_roots, dict(changes))


def run_task(item):
    """The KEPT_METRICS of one task's run (a module-level function: any executor can call it)."""
    raw, base_dir, roots, changes = item
    scenario = Scenario.from_dict(raw, base_dir=base_dir, roots=roots).with_changes(changes)
    metrics = summarize(simulate(scenario))
    return {k: metrics.get(k) for k in KEPT_METRICS}


def screen_variants(scenario, load):
    """[changes] whose pooled runs screen a fleet: SCREEN_WINDOWS windows of a long trace
    (those holding requests), else the workload itself ([{}]: screening is the full run)."""
    trace = scenario.workload.trace
    if trace is None:
        return [{}]
    span = load.span_s / trace.time_scale  # in the trace's own seconds
    if span < 2 * SCREEN_WINDOWS * SCREEN_S:
        return [{}]
    step = (span - SCREEN_S) / (SCREEN_WINDOWS - 1)
    starts = [round(i * step, 6) for i in range(SCREEN_WINDOWS)]
    # A window of a trace's quiet gap has no requests to run (the run would refuse it).
    starts = [s for s in starts if _holds_arrivals(load.arrivals, s * trace.time_scale, (s + SCREEN_S) * trace.time_scale)]
    if len(starts) < 2:
        return [{}]
    return [{"workload.trace.start_s": round(trace.start_s + s, 6), "workload.trace.duration_s": SCREEN_S}
            for s in starts]


def _holds_arrivals(arrivals, start, end):
    """Whether the sorted `arrivals` have one in [start, end)."""
    i = bisect.bisect_left(arrivals, start)
    return i < len(arrivals) and arrivals[i] < end


def pool_windows(results):
    """One row from the runs of a fleet's variants: attainment over all their requests, goodput
    and per-GPU goodput averaged over the (equal) windows, the worst tails."""
    if len(results) == 1:
        return dict(results[0])
    total = sum(r["requests"] for r in results)
    met = math.fsum((r["slo_attainment"] or 0.0) * r["requests"] for r in results)
    out = dict(results[0])
    out["requests"] = total
    out["unfinished"] = sum(r["unfinished"] for r in results)
    out["slo_attainment"] = met / total if total else None
    for key in ("goodput_rps", "goodput_rps_per_gpu", "util_prefill", "util_decode", "util_gpu"):
        values = [r[key] for r in results if r[key] is not None]
        out[key] = math.fsum(values) / len(values) if values else None
    for key in ("ttft_p99_s", "tpot_p99_ms", "worst_gap_p99_ms"):
        values = [r[key] for r in results if r[key] is not None]
        out[key] = max(values) if values else None
    return out


def robustness_variants(scenario, spread=0.2, seeds=5):
    """[(label, changes)]: the winner again on `seeds` seeds and at rate x(1 -/+ spread).

    A trace replays the same arrivals whatever the seed, so it gets rates only: its arrival
    times are scaled (workload.trace.time_scale divided by the rate factor)."""
    wl = scenario.workload
    out = []
    if wl.trace is None:
        out.extend((f"seed {scenario.seed + k}", {"seed": scenario.seed + k}) for k in range(1, seeds))
    for factor in (1 - spread, 1 + spread):
        label = f"rate x{factor:g}"
        if wl.trace is not None:
            out.append((label, {"workload.trace.time_scale": wl.trace.time_scale / factor}))
            continue
        changes = {"workload.rate": wl.rate * factor}
        for i, phase in enumerate(wl.phases):
            if phase.rate is not None:
                changes[f"workload.phases.{i}.rate"] = phase.rate * factor
        out.append((label, changes))
    return out


def check_changes(scenario, changes):
    """None if the spec accepts the changed scenario, else its LabError's message."""
    try:
        scenario.with_changes(changes)
    except LabError as exc:
        return str(exc)
    return None
