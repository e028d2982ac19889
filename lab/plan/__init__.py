"""`lab plan`: search the fleets that serve a workload within its SLO, and name the cheapest.

The search is pure and testable, separate from where its runs execute:

- `space`: the constraints (`Constraints`), the fleet shapes they allow (`Config`) and the
  candidates of each shape in order of size (`Candidate`, `levels`);
- `sizing`: lower bounds on each pool's instances from the workload's token rates and one
  instance's prefill and decode throughput (the cost model);
- `pareto`: the non-dominated candidates ($/hour against goodput per GPU and attainment);
- `evaluate`: one run as plain data (`task`, `run_task`), for any executor's map;
- `search`: `plan(...)`, the phases (size, screen, confirm, robustness) over a map function.

`lab/parallel.py` provides the map (this process, local processes or a Dask cluster).
"""

from .pareto import pareto_front
from .search import PlanResult, plan
from .sizing import Load, instance_throughput, lower_bounds, workload_load
from .space import Candidate, Config, Constraints, configs, levels
from .workload import plan_scenario

__all__ = [
    "plan", "PlanResult", "plan_scenario",
    "Constraints", "Config", "Candidate", "configs", "levels",
    "Load", "workload_load", "instance_throughput", "lower_bounds",
    "pareto_front",
]
