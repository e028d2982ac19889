"""The pure work of the page's runs: what LabState hands to lab/ui/offload.py.

Each function takes values the state read beforehand (the mission, a scenario, its
requests) and touches nothing of the page, so it may run in a worker process while the
student keeps changing controls (the state hands them over as functools.partial objects,
which pickle); the state publishes what it returns, on the loop.
Failures come back as values (`error`), since what the page says about them is the
state's business.
"""

import time

import lab.core as core
import lab.core.spec as core_spec
from lab.core.errors import LabError

__all__ = ["measure", "run_work", "twin_work", "sweep_point", "refused", "upload_work", "parse_upload", "page_requests",
           "PAGE_MAX_REQUESTS", "PAGE_MAX_S"]

# What one page runs at most, a mission's or an uploaded trace's: the core's bounds before it
# scaled to a week and a million requests (`lab run` still runs those). A browser tab's Pyodide
# has far less memory and speed than a CPython run, and under `lab serve` a run this size
# (about 12 s of CPU) is already what a classroom's server can give one student.
PAGE_MAX_REQUESTS = min(200_000, core_spec.MAX_REQUESTS)
PAGE_MAX_S = min(7_200.0, core_spec.MAX_DURATION_S)


def measure(mission, result):
    """(rows, metrics, stars met) of `result`."""
    rows = core.request_metrics(result)
    metrics = core.summarize(result, rows)
    now = list(mission.evaluate(metrics)) if mission.stars else []
    return rows, metrics, now


def run_work(mission, scenario, requests, simulate=True, twin=None, measured=False):
    """A run's slow part: {"scenario", "requests", "ms" (the simulation's time), and "result"
    once `simulate` (False: the state keeps this run already), with "measured" and "blames" if
    `measured`; "error" if the simulation raised; "twin": twin_work(*twin) when the pinned
    fleet runs too}. A failure to measure or blame leaves those out: the state measures again
    in its own turn and says what failed."""
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
    except Exception:
        pass
    return out


def twin_work(scenario, requests, key):
    """The pinned fleet's run on these requests: {"key", "requests", and "twin" (the dict
    LabState.twin holds) or "error" (what it raised; a LabError's message is the twin's note)}."""
    out = {"key": key, "requests": requests}
    try:
        result = core.simulate(scenario, page_requests(scenario, requests))
        rows = core.request_metrics(result)
        metrics = core.summarize(result, rows)
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
    span = requests[-1][0] if requests else 0.0
    where = "workload.trace" if scenario.workload.trace is not None else "workload.rate"
    if len(requests) > PAGE_MAX_REQUESTS:
        raise LabError(where, f"{len(requests):,} requests; the lab page runs at most {PAGE_MAX_REQUESTS:,} "
                              "(`python -m lab run` runs up to {:,}): lower the rate or the duration".format(core_spec.MAX_REQUESTS))
    if span > PAGE_MAX_S:
        raise LabError("workload.duration_s", f"requests arrive over {span:,.0f} s; the lab page runs at most "
                                              f"{PAGE_MAX_S:,.0f} s (`python -m lab run` runs up to a week)")
    return requests


def refused(error):
    """run_work's value for a run that cannot start (`error`: what the state met preparing it)."""
    return {"error": error}


def upload_work(text, name, sandbox):
    """(name, the requests of an uploaded trace CSV, or the LabError refusing it)."""
    try:
        if not sandbox:
            raise LabError("upload", "only the sandbox replays uploaded traces")
        return name, parse_upload(text, name, PAGE_MAX_REQUESTS, PAGE_MAX_S)
    except LabError as exc:
        return name, exc


def parse_upload(text, name, max_requests, max_span_s):
    """An uploaded trace CSV's requests, within the page's bounds; raises LabError naming the file."""
    requests = core.parse_trace_text(text, name)
    if len(requests) > max_requests:
        raise LabError(name, f"{len(requests):,} requests; the limit is {max_requests:,}")
    if requests[-1][0] > max_span_s:
        raise LabError(name, f"the trace spans {requests[-1][0]:,.0f} s; the limit is {max_span_s:,.0f} s")
    return tuple(requests)
