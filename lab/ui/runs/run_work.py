"""The pure work of the page's runs: what LabState hands to lab/ui/runs/offload.py.

Each function takes values the state read beforehand (the mission, a scenario, its
requests) and touches nothing of the page, so it may run in a worker process while the
student keeps changing controls (the state hands them over as functools.partial objects,
which pickle); the state publishes what it returns, on the loop.
Failures come back as values (`error`), since what the page says about them is the
state's business. A measured run also brings its whole-run views (`warm_views`), so the
server's loop, which serves every student, does not build them.
"""

import time

import lab.core as core
from lab.core.errors import LabError
from lab.core.page_bounds import LAB_RUN_ADVICE, PAGE_MAX_REQUESTS, PAGE_MAX_S, check_page_bounds

from ..data.canvas_data import overview_data, run_layers
from ..data.plot_data import itl_histogram

__all__ = ["expected_requests", "HEAVY_REQUESTS", "HEAVY_UPLOAD_CHARS", "measure", "run_work", "warm_views",
           "twin_work", "sweep_point", "refused", "upload_work", "parse_upload", "page_requests",
           "PAGE_MAX_REQUESTS", "PAGE_MAX_S"]

# Work past these is heavy: `lab serve` runs it in its lower-priority processes (offload.py),
# so a student's big run does not slow every other student's small ones (an uploaded trace
# CSV of a million characters holds about 20,000 requests).
HEAVY_REQUESTS = 20_000
HEAVY_UPLOAD_CHARS = 1_000_000


def expected_requests(scenario, requests):
    """About how many requests a run of `scenario` draws (`requests`: the ones given), without
    drawing them: the busiest phase's rate over the whole duration; None for a trace the
    workload reads itself (unknown until read)."""
    if requests is not None:
        return len(requests)
    workload = scenario.workload
    if workload.rate is None:
        return None
    return max([workload.rate] + [p.rate for p in workload.phases if p.rate is not None]) * workload.duration_s


def measure(mission, result):
    """(rows, metrics, stars met) of `result` (no stars without a `mission`)."""
    rows = core.request_metrics(result)
    metrics = core.summarize(result, rows)
    now = list(mission.evaluate(metrics)) if mission is not None and mission.stars else []
    return rows, metrics, now


def run_work(mission, scenario, requests, simulate=True, twin=None, measured=False, plot_px=None):
    """A run's slow part: {"scenario", "requests", "ms" (the simulation's time), and "result"
    once `simulate` (False: the state keeps this run already), with "measured" and "blames" if
    `measured`, and its views built (warm_views, for a canvas `plot_px` high); "error" if the
    simulation raised; "twin": twin_work(*twin) when the pinned fleet runs too}. A failure to
    measure, blame or build a view leaves those out: the state measures again in its own turn
    and says what failed (the page builds a missing view when it shows it)."""
    out = {"scenario": scenario, "requests": requests, "ms": 0.0}
    if twin is not None:
        out["twin"] = twin_work(*twin)
    if not simulate:
        return out
    began = time.perf_counter()
    try:
        out["result"] = result = core.simulate(scenario, page_requests(scenario, requests))
    except Exception as exc:
        out["error"] = exc
        return out
    finally:
        out["ms"] = (time.perf_counter() - began) * 1000.0  # the run's own time, wherever it ran
    if not measured:
        return out
    try:
        out["measured"] = rows, _, _ = measure(mission, result)
        out["blames"] = core.request_blame(result, rows)
        warm_views(result, plot_px)
    except Exception:
        pass
    return out


def warm_views(result, plot_px):
    """Build the whole-run views the page shows of `result` (lab/ui/data/run_views.py): in a worker
    process they then travel back with the run."""
    target_ms = result.scenario.slo.per_token_target_ms
    run_layers(result, plot_px)
    overview_data(result, target_ms)
    itl_histogram(result, target_ms)


def twin_work(scenario, requests, key):
    """The pinned fleet's run on these requests: {"key", "requests", and "twin" (the dict
    LabState.twin holds) or "error" (what it raised; a LabError's message is the twin's note)}."""
    out = {"key": key, "requests": requests}
    try:
        result = core.simulate(scenario, page_requests(scenario, requests))
        rows, metrics, _stars = measure(None, result)
        blames = core.request_blame(result, rows, missed_only=True)  # (the twin shows only their summary)
    except Exception as exc:
        out["error"] = exc
        return out
    out["twin"] = {"scenario": scenario, "result": result, "metrics": metrics, "rows": rows, "blames": blames,
                   "blame_summary": core.blame_summary(blames), "key": key, "requests": requests}
    return out


def sweep_point(scenario, rate):
    """The fleet metrics of `scenario` at request rate `rate` (a point of the page's rate sweep)."""
    scenario = scenario.with_changes({"workload.rate": rate})
    return core.summarize(core.simulate(scenario, page_requests(scenario, None)))


def page_requests(scenario, requests):
    """The run's requests (`requests`, or the workload's own), within what a page runs
    (lab/core/page_bounds.py); raises LabError naming the bound."""
    if requests is None:
        requests = core.generate_requests(scenario.workload, scenario.seed)
    where = "workload.trace" if scenario.workload.trace is not None else "workload.rate"
    check_page_bounds(requests, where, "workload.duration_s", LAB_RUN_ADVICE)
    return requests


def refused(error):
    """run_work's value for a run that cannot start (`error`: what the state met preparing it)."""
    return {"error": error}


def upload_work(text, name, sandbox):
    """(name, the requests of an uploaded trace CSV, or the LabError refusing it)."""
    try:
        if not sandbox:
            raise LabError("upload", "only the sandbox replays uploaded traces")
        return name, parse_upload(text, name)
    except LabError as exc:
        return name, exc


def parse_upload(text, name):
    """An uploaded trace CSV's requests, within the page's bounds; raises LabError naming the file."""
    requests = core.parse_trace_text(text, name)
    check_page_bounds(requests, name, name)
    return tuple(requests)
