"""The page's goodput sweep: the rates it tries, and the curve a point at a time.

The sweep runs the current scenario at eight rates, from a quarter of the mission's rate
to twice it, and draws goodput and SLO attainment against rate (the plots' sweep pane).
It is a generator so the page can run each point in its own turn (in a worker process
under `lab serve`) and show progress between them; `run_in_place` runs it in one go.
"""

import functools

from lab.core.errors import LabError

from .offload import Outcome
from .run_work import sweep_point

__all__ = ["sweep_rates", "sweep_curve", "sweep_next", "run_in_place"]


def sweep_rates(rate, points=8):
    """Request rates for the goodput sweep: from a quarter of `rate` to twice it."""
    if not rate or rate <= 0:
        return []
    factors = [0.25 + i * (1.75 / (points - 1)) for i in range(points)]
    rates = sorted({round(rate * f, 2) for f in factors} | {float(rate)})
    return [r for r in rates if r > 0]


def sweep_curve(scenario, key, points=8, on_point=None):
    """The sweep of `scenario` a point at a time, as a generator: it yields each point's run
    as a function of no arguments (run_work.sweep_point) and takes what it returned back
    through `send`, or what it raised through `throw`; `on_point(fraction_done)` after each
    point. It returns the curve (`key` says what it was measured for). A point past the page's
    bounds (a LabError) ends the curve there, and `curve["stopped"]` says why."""
    rates = sweep_rates(scenario.workload.rate, points)
    goodput, attainment, stopped = [], [], None
    for i, rate in enumerate(rates):
        try:
            metrics = yield functools.partial(sweep_point, scenario, rate)
        except LabError as exc:
            stopped = f"The sweep stopped at {rate:.3g} req/s: {exc}"
            break
        goodput.append(metrics["goodput_rps_per_gpu"])
        attainment.append(metrics["slo_attainment"] or 0.0)
        if on_point is not None:
            on_point((i + 1) / len(rates))
    return {
        "rates": rates[:len(goodput)],
        "goodput": goodput,
        "attainment": attainment,
        "gpus": scenario.fleet.total_gpus,
        "rate": float(scenario.workload.rate),
        "key": key,
        "stopped": stopped,
    }


def sweep_next(steps, outcome):
    """A sweep's next point after the last point's Outcome: its metrics are sent in, a
    LabError it raised is thrown in (the sweep stops there, saying why); None once the sweep
    is over. Any other error is raised, the sweep closed first."""
    try:
        try:
            value = outcome.get()
        except LabError as exc:
            return steps.throw(exc)
        return steps.send(value)
    except StopIteration:
        return None
    except Exception:
        steps.close()
        raise


def run_in_place(steps, total, progress=None):
    """Every point of a sweep (`steps`, of `total` points) now; `progress(done, total)` after each."""
    work, done = next(steps, None), 0
    while work is not None:
        outcome = Outcome.of(work)
        done += 1
        work = sweep_next(steps, outcome)
        if progress is not None:
            progress(done, total)
