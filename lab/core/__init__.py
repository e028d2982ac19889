"""The simulation core: standard library only, so it runs in bare Pyodide.

    s = load_scenario("missions/01-mixing-hurts.json")   # or a dict
    result = simulate(s)                                   # requests, step logs, transfers
    metrics = summarize(result)                            # {metric name: value}
    blame_summary(request_blame(result))                   # why requests missed, by cause

    mission = load_mission("missions/01-mixing-hurts.json")  # brief, controls, stars
    evaluate_stars(mission, metrics)                          # [True, False, False]
"""

from .blame import BLAME_COLUMNS, BLAME_NAMES, CAUSES, GAP_CAUSES, TTFT_PARTS, Blame, blame_summary, request_blame
from .cost import PoolCost, instance_costs, pool_costs, step_ticks_fn, step_time_fn
from .engine import simulate
from .errors import LabError
from .loading import load_scenario, parse_json, read_json
from .metrics import METRIC_NAMES, percentile, request_gaps, request_metrics, summarize
from .missions import CONTROL_PATHS, Control, Mission, default_missions_dir, list_missions, load_mission
from .solver import CheckReport, check_mission
from .stars import Predicate, Star, evaluate_stars
from .result import GpuLog, RequestRecord, Result, Transfer
from .spec import Fleet, LengthDist, Link, Model, Scenario, Slo, Workload
from .workload import generate_requests, parse_trace_text

__all__ = [
    "LabError",
    "Scenario", "Workload", "LengthDist", "Model", "Fleet", "Link", "Slo",
    "load_scenario", "read_json", "parse_json",
    "generate_requests", "parse_trace_text",
    "simulate", "Result", "GpuLog", "RequestRecord", "Transfer",
    "summarize", "request_metrics", "request_gaps", "percentile", "METRIC_NAMES",
    "request_blame", "blame_summary", "Blame", "TTFT_PARTS", "GAP_CAUSES", "CAUSES", "BLAME_NAMES", "BLAME_COLUMNS",
    "step_time_fn",
    "step_ticks_fn",
    "PoolCost",
    "pool_costs",
    "instance_costs",
    "Mission", "Control", "CONTROL_PATHS", "load_mission", "list_missions", "default_missions_dir",
    "Star", "Predicate", "evaluate_stars", "check_mission", "CheckReport",
]
