"""The scenario a plan starts from: a trace file replayed whole, or a scenario or mission file."""

import os

from lab.core import fields as F
from lab.core.errors import LabError
from lab.core.loading import load_scenario, read_json
from lab.core.spec import apply_overrides

__all__ = ["plan_scenario", "DEFAULT_TRACE_SLO", "is_trace_path"]

# A trace carries no SLO: the conversation and code missions' (8 and 9) unless flags say otherwise.
DEFAULT_TRACE_SLO = {"ttft_s": 1.0, "tpot_ms": 20.0}
SLO_FLAGS = (("ttft_s", "--ttft-s"), ("tpot_ms", "--tpot-ms"), ("max_gap_ms", "--max-gap-ms"))
TRACE_MODEL = {"cost": "calibrated", "llm": "llama3-8b", "gpu": "h100"}


def is_trace_path(path):
    """A .json file is a scenario or a mission; anything else (.csv, .jsonl) is read as a trace."""
    return not str(path).lower().endswith(".json")


def plan_scenario(path, slo=None, overrides=()):
    """The base Scenario of a plan, and a short description of its workload.

    A trace is replayed whole (up to the run's 7,200-s cap; `--set workload.trace.duration_s=...`
    cuts a window) on a placeholder fleet the search replaces; its path may lie anywhere the
    user points (it is their own file), so its folder is the one root. `slo` maps SLO terms to
    values (None: keep the scenario's, or DEFAULT_TRACE_SLO for a trace).
    """
    slo = {k: v for k, v in (slo or {}).items() if v is not None}
    if is_trace_path(path):
        full = os.path.abspath(str(path))
        raw = {
            "workload": {"trace": {"path": full}},
            "fleet": {"layout": "colocated", "gpus": 1},
            # A trace names no model: plan Llama-3-8B on H100s, on the calibrated step times.
            "model": dict(TRACE_MODEL),
            "slo": dict(DEFAULT_TRACE_SLO) if not slo else {},
        }
        raw["slo"].update(slo)
        if overrides:
            raw = apply_overrides(raw, overrides)
        folder = os.path.dirname(full)
        return load_scenario(raw, base_dir=folder), f"trace {os.path.basename(full)}"
    data = read_json(path)
    if not isinstance(data, dict):  # (a string here is text from the file, never a path to read)
        raise LabError(os.path.basename(str(path)), f"expected a scenario or mission object, got {F.describe(data)}")
    if slo:
        # The flags' terms join the file's SLO, checked as `lab run` checks a scenario.
        if "scenario" in data and "workload" not in data:  # a mission (as load_scenario tells them)
            body = F.read_dict(data, "scenario", "")
            data = dict(data, scenario=dict(body, slo=dict(F.read_dict(body, "slo", "scenario", default={}), **slo)))
        else:
            data = dict(data, slo=dict(F.read_dict(data, "slo", "", default={}), **slo))
    base = os.path.dirname(os.path.abspath(str(path)))
    scenario = load_scenario(data, overrides=overrides, base_dir=base)
    if scenario.slo.ttft_s is None and scenario.slo.tpot_ms is None and scenario.slo.max_gap_ms is None:
        raise LabError("--ttft-s", f"{F.describe(str(path))} sets no SLO: give --ttft-s, --tpot-ms or --max-gap-ms")
    wl = scenario.workload
    what = f"trace {os.path.basename(wl.trace.path)}" if wl.trace else f"Poisson {wl.rate:g} req/s for {wl.duration_s:g} s"
    return scenario, what
