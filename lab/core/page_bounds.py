"""What one lab page runs at most, and the message for a run past it.

A page is for changing a fleet and watching what it does, a run per change. A browser tab's
Pyodide has far less memory and speed than a CPython run, and under `lab serve` one server
computes and sends every student's runs: at 200,000 requests a change cost about 12 s of
CPU and seconds of the server's loop, and a class of 30 waited on one student
(benchmarks/README.md, "A classroom on one server"). So a page runs at most
PAGE_MAX_REQUESTS requests arriving over at most PAGE_MAX_S, a mission's or an uploaded
trace's: room for each whole trace the project reads (the Azure 2023 hours, the Mooncake
traces: tests/test_solver.py holds that they fit) and for an hour of most missions' traffic
(`lab run` takes up to a week and a million requests). The page refuses a run past them
(`check_page_bounds`); `lab check` fails a mission whose start is past them and notes a rate
control that reaches past them (solver.check_mission).
"""

from .errors import LabError
from .spec import MAX_DURATION_S, MAX_REQUESTS

__all__ = ["PAGE_MAX_REQUESTS", "PAGE_MAX_S", "check_page_bounds", "LAB_RUN_ADVICE"]

PAGE_MAX_REQUESTS = min(50_000, MAX_REQUESTS)
PAGE_MAX_S = min(7_200.0, MAX_DURATION_S)
LAB_RUN_ADVICE = (f" (`python -m lab run` runs up to {MAX_REQUESTS:,} requests over a week): "
                  "lower the rate or the duration")


def check_page_bounds(requests, where, where_span, advice=""):
    """Raise LabError naming `where` (for the count) or `where_span` (for the time span) when
    `requests` ((arrival s, ...) in order) pass the page's bounds; `advice` ends the message."""
    if len(requests) > PAGE_MAX_REQUESTS:
        raise LabError(where, f"{len(requests):,} requests; the lab page runs at most {PAGE_MAX_REQUESTS:,}{advice}")
    span = requests[-1][0] if requests else 0.0
    if span > PAGE_MAX_S:
        raise LabError(where_span, f"requests arrive over {span:,.0f} s; the lab page runs at most {PAGE_MAX_S:,.0f} s{advice}")
