"""Metrics across a range of one setting, and DistServe's goodput (max rate meeting the SLO)."""

import math

from .errors import LabError
from .fields import describe
from .engine import simulate
from .metrics import summarize

__all__ = ["parse_range", "sweep", "sweep_points", "sweep_task", "run_point", "max_rate_meeting_slo", "MAX_SWEEP_POINTS"]

MAX_SWEEP_POINTS = 200


def parse_range(text, field="--vary"):
    """'workload.rate=4:24:2' -> ("workload.rate", [4, 6, ..., 24]); also 'path=1,2,5'."""
    if "=" not in text:
        raise LabError(field, f"{text!r} is not of the form dotted.path=start:stop:step or dotted.path=a,b,c")
    path, spec = (part.strip() for part in text.split("=", 1))
    if not path:
        raise LabError(field, f"{text!r} has no field name before '='")
    bad = LabError(field, f"{spec!r} is not start:stop:step or a comma-separated list of numbers")
    if ":" in spec:
        try:
            start, stop, step = (float(p) for p in spec.split(":"))
        except ValueError:
            raise bad from None
        if not all(math.isfinite(v) for v in (start, stop, step)):
            raise LabError(field, f"{describe(spec)}: start, stop and step must be finite numbers")
        if step <= 0:
            raise LabError(field, f"step {step:g} must be positive")
        if stop < start:
            raise LabError(field, f"stop {stop:g} is below start {start:g}")
        count = int((stop - start) / step + 1e-9) + 1
        if count > MAX_SWEEP_POINTS:
            raise LabError(field, f"{count} points; at most {MAX_SWEEP_POINTS} (use a larger step)")
        values = [round(start + i * step, 10) for i in range(count)]
    else:
        try:
            values = [float(p) for p in spec.split(",") if p.strip()]
        except ValueError:
            raise bad from None
        if not all(math.isfinite(v) for v in values):
            raise LabError(field, f"{describe(spec)}: every value must be a finite number")
    if not values:
        raise LabError(field, "no values to sweep")
    if len(values) > MAX_SWEEP_POINTS:
        raise LabError(field, f"{len(values)} points; at most {MAX_SWEEP_POINTS}")
    values = [int(v) if float(v).is_integer() else v for v in values]
    return path, values


def sweep_points(scenario, path, values):
    """Yield (value, metrics) for each value of the dotted `path`, one run at a time.

    A generator, so a caller on an event loop (the lab page) can show progress and
    stay responsive between runs.
    """
    for value in values:
        yield value, summarize(simulate(scenario.with_changes({path: value})))


def sweep_task(scenario, path, value):
    """One point's run as plain data (the scenario as its dict), for a map over processes."""
    return (scenario.to_dict(), scenario.base_dir, scenario.trace_roots, path, value)


def run_point(task):
    """The metrics of one `sweep_task`: a module-level function, so any executor can call it."""
    from .spec import Scenario

    raw, base_dir, roots, path, value = task
    scenario = Scenario.from_dict(raw, base_dir=base_dir, roots=roots)
    return summarize(simulate(scenario.with_changes({path: value})))


def sweep(scenario, path, values, progress=None, map_fn=None):
    """[(value, metrics)] for each value of the dotted `path`; `progress(done, total)` after each.

    `map_fn(run_point, tasks)` runs the points elsewhere (lab/parallel.py: processes or Dask)
    and yields their metrics in order; without it they run here, one after another. Either
    way the points are the same runs, so the results are identical.
    """
    if map_fn is None:
        points = sweep_points(scenario, path, values)
    else:
        points = zip(values, map_fn(run_point, [sweep_task(scenario, path, v) for v in values]))
    out = []
    for point in points:
        out.append(point)
        if progress is not None:
            progress(len(out), len(values))
    return out


def max_rate_meeting_slo(scenario, points, target=0.9, refine_steps=5):
    """Highest request rate (req/s) at which >= `target` of requests meet the SLO.

    `points` are (rate, metrics) from a rate sweep. Between the best passing rate and
    the next failing one the answer is refined by bisection. Returns None when no
    swept rate passes.
    """
    ordered = sorted(points, key=lambda p: p[0])
    best = None
    above = None
    for rate, metrics in ordered:
        if (metrics["slo_attainment"] or 0) >= target:
            best, above = rate, None
        elif best is not None and above is None:
            above = rate
    if best is None:
        return None
    if above is not None:
        lo, hi = float(best), float(above)
        for _ in range(refine_steps):
            mid = (lo + hi) / 2
            metrics = summarize(simulate(scenario.with_changes({"workload.rate": mid})))
            if (metrics["slo_attainment"] or 0) >= target:
                lo = mid
            else:
                hi = mid
        best = lo
    return best
