"""The pure work of the page's runs: what LabState hands to lab/ui/offload.py.

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
import lab.core.spec as core_spec
from lab.core.errors import LabError

from .canvas_data import overview_data, run_layers
from .plot_data import itl_histogram

__all__ = ["measure", "run_work", "warm_views", "twin_work", "sweep_point", "refused", "upload_work", "parse_upload",
           "page_requests", "PAGE_MAX_REQUESTS", "PAGE_MAX_S"]

# What one page runs at most, a mission's or an uploaded trace's: the core's bounds before it
# scaled to a week and a million requests (`lab run` still runs those). A browser tab's Pyodide
# has far less memory and speed than a CPython run, and under `lab serve` a run this size
# (about 12 s of CPU) is already what a classroom's server can give one student.
PAGE_MAX_REQUESTS = min(200_000, core_spec.MAX_REQUESTS)
PAGE_MAX_S = min(7_200.0, core_spec.MAX_DURATION_S)


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
    """Build the whole-run views the page shows of `result` (lab/ui/run_views.py): in a worker
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
        blames = core.request_blame(result, rows)
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
    (PAGE_MAX_REQUESTS arriving over at most PAGE_MAX_S); raises LabError naming the bound."""
    if requests is None:
        requests = core.generate_requests(scenario.workload, scenario.seed)
    where = "workload.trace" if scenario.workload.trace is not None else "workload.rate"
    _within_page(requests, where, "workload.duration_s", " (`python -m lab run` runs up to "
                 f"{core_spec.MAX_REQUESTS:,} requests over a week): lower the rate or the duration")
    return requests


def _within_page(requests, where, where_span, advice=""):
    """Raise LabError naming `where` (the count) or `where_span` (the time span) when `requests`
    pass the page's bounds; `advice` ends the message."""
    if len(requests) > PAGE_MAX_REQUESTS:
        raise LabError(where, f"{len(requests):,} requests; the lab page runs at most {PAGE_MAX_REQUESTS:,}{advice}")
    span = requests[-1][0] if requests else 0.0
    if span > PAGE_MAX_S:
        raise LabError(where_span, f"requests arrive over {span:,.0f} s; the lab page runs at most {PAGE_MAX_S:,.0f} s{advice}")


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
    _within_page(requests, name, name)
    return tuple(requests)
