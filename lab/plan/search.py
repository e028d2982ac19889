"""The plan's phases over a map function: size, screen, confirm, test the winner's robustness.

1. **Size**: each config's lower bounds (`sizing`), from the workload's token rates.
2. **Screen**: walk every config's sizes up from its bound (`space.levels`), LEVELS_PER_ROUND
   levels per config per round, all configs' runs in one map; a config stops at its first level
   with a fleet meeting the target, when its sizes pass `max_gpus` or the budget, or when its
   next level costs more than the cheapest fleet already meeting it. A long trace is screened
   on a few windows of it (`evaluate.screen_variants`); anything else on the workload itself.
3. **Confirm**: the screened fleets that met the target, cheapest first, run on the whole
   workload; one that misses there hands its place to its config's next size. The winner is
   the cheapest fleet that meets the target on the whole workload. The cheapest one's
   robustness runs go out with its full run (it is usually the winner; kept only if it is).
4. **Robustness**: the winner on 5 seeds (a trace: the same arrivals whatever the seed) and at
   the rate x0.8 and x1.2; the min and median attainment.

Rounds are synchronous and every map keeps its order, so the result is the same whatever
executes the runs (one process, many, or a Dask cluster).
"""

import heapq
import statistics
import time
from dataclasses import dataclass, field

from lab.core.errors import LabError

from . import evaluate as E
from .pareto import pareto_front
from .sizing import lower_bounds, workload_load
from .space import levels as config_levels, configs as all_configs

__all__ = ["plan", "PlanResult", "LEVELS_PER_ROUND", "MAX_CONFIRM_RUNS"]

LEVELS_PER_ROUND = 2
MAX_CONFIRM_RUNS = 8  # full-workload runs the confirm phase may spend before it gives up
CONFIRM_BATCH = 2


@dataclass
class PlanResult:
    load: object
    target: float
    bounds: list  # [(Config, Bounds)]
    rows: list  # every evaluated fleet: dicts (see _row)
    pareto: list
    winner: dict = None
    robustness: dict = None
    screened_on: str = "the whole workload"
    runs: int = 0
    skipped: list = field(default_factory=list)  # [(candidate description, reason)]
    seconds: dict = field(default_factory=dict)  # wall seconds by phase (figures only: not part of the answer)


def plan(scenario, constraints, map_fn=map, progress=None):
    """Search the fleets `constraints` allow for the cheapest meeting `constraints.target`."""
    progress = progress or (lambda phase, done, total: None)
    clock = [time.perf_counter()]

    def lap(phase):
        now = time.perf_counter()
        result.seconds[phase] = round(now - clock[0], 3)
        clock[0] = now

    target = constraints.target
    load = workload_load(scenario)
    if load.requests == 0:
        raise LabError("workload", "the workload has no requests to plan for")
    cfgs = all_configs(scenario, constraints)
    bounds = [(c, lower_bounds(c, scenario, load)) for c in cfgs]
    progress("size", len(cfgs), len(cfgs))
    state = _State(scenario, map_fn, progress)
    variants = E.screen_variants(scenario, load)
    screen_is_full = variants == [{}]
    result = PlanResult(load, target, bounds, [], [])
    lap("size")
    if not screen_is_full:
        result.screened_on = f"{len(variants)} windows of {E.SCREEN_S:g} s of the trace"

    # ---- screen
    walks = {c: config_levels(c, b, constraints.max_gpus) for c, b in bounds}
    active = list(cfgs)
    best_cost = float("inf")
    model = scenario.model
    while active:
        batch, still = [], []
        for c in active:
            took = []
            for _ in range(LEVELS_PER_ROUND):
                level = next(walks[c], None)
                if level is None:
                    break
                level = [x for x in level if _affordable(x, model, constraints, best_cost)]
                if not level:
                    break
                took.append(level)
            if len(took) == LEVELS_PER_ROUND:
                still.append(c)
            batch.extend(x for level in took for x in level)
        batch = [x for x in batch if state.valid(x, result.skipped)]
        rows = state.run(batch, variants, "screen")
        passed_cfgs = set()
        for cand, row in zip(batch, rows):
            if _meets(row, target):
                passed_cfgs.add(cand.config)
                best_cost = min(best_cost, cand.usd_per_hour(model))
        active = [c for c in still if c not in passed_cfgs]

    lap("screen")
    # ---- confirm
    screened = {x.key(): (x, row) for x, row in state.screened.items()}
    if screen_is_full:
        state.full = dict(state.screened)
    else:
        _confirm(state, screened, target, model, constraints)
    winner = _winner(state.full, target, model)
    lap("confirm")

    # ---- rows, front, robustness
    for cand, row in state.screened.items():
        full = state.full.get(cand)
        result.rows.append(_row(cand, full or row, "full" if full is not None else "screen", model))
    for cand, row in state.full.items():
        if cand not in state.screened:
            result.rows.append(_row(cand, row, "full", model))
    result.rows.sort(key=lambda r: (r["usd_per_hour"], r["gpus"], r["fleet"]))
    result.pareto = pareto_front([r for r in result.rows if r["slo_attainment"] is not None])
    if winner is not None:
        result.winner = _row(winner, state.full[winner], "full", model)
        result.robustness = _robustness(state, scenario, winner, state.full[winner])
    lap("robustness")
    result.runs = state.runs
    return result


class _State:
    """The runs so far: screened and full-workload results by candidate, and the run count."""

    def __init__(self, scenario, map_fn, progress):
        self.scenario = scenario
        self.map_fn = map_fn
        self.progress = progress
        self.screened = {}
        self.full = {}
        self.robust = {}  # candidate -> its robustness runs' results, when run ahead of time
        self.runs = 0

    def valid(self, cand, skipped):
        problem = E.check_changes(self.scenario, cand.changes())
        if problem is not None:
            skipped.append((cand.describe(), problem))
        return problem is None

    def confirm_with_robustness(self, cand):
        """The cheapest screened fleet's full run and, in the same map, its robustness runs: it
        usually is the winner, and the runs fill the cores the single full run would leave idle."""
        variants = E.robustness_variants(self.scenario)
        tasks = [E.task(self.scenario, cand.changes())]
        tasks += [E.task(self.scenario, {**cand.changes(), **changes}) for _, changes in variants]
        results = []
        for res in self.map_fn(E.run_task, tasks):
            results.append(res)
            self.progress("confirm", len(results), len(tasks))
        self.runs += len(tasks)
        self.full[cand] = E.pool_windows(results[:1])
        self.robust[cand] = results[1:]
        return self.full[cand]

    def run(self, cands, variants, phase):
        """Pooled rows of `cands`, each run on every variant, in one map."""
        tasks = [E.task(self.scenario, {**c.changes(), **v}) for c in cands for v in variants]
        if not tasks:
            return []
        results = []
        for res in self.map_fn(E.run_task, tasks):
            results.append(res)
            self.progress(phase, len(results), len(tasks))
        self.runs += len(tasks)
        k = len(variants)
        rows = [E.pool_windows(results[i * k:(i + 1) * k]) for i in range(len(cands))]
        store = self.screened if phase == "screen" else self.full
        for c, row in zip(cands, rows):
            store[c] = row
        return rows


def _affordable(cand, model, constraints, best_cost):
    cost = cand.usd_per_hour(model)
    if constraints.budget_usd_per_hour is not None and cost > constraints.budget_usd_per_hour + 1e-9:
        return False
    return cost <= best_cost + 1e-9


def _meets(row, target):
    return row["slo_attainment"] is not None and row["slo_attainment"] >= target


def _price(cand, model):
    """What "cheaper" means: $/hour, then fewer GPUs."""
    return (round(cand.usd_per_hour(model), 9), cand.gpus)


def _order(cand, model, row):
    """Confirm and winner order: the price, then the higher attainment, then the name (a fixed tie-break)."""
    return (_price(cand, model), -(row["slo_attainment"] or 0.0), cand.describe())


def _next_sizes(cand):
    from .space import Candidate

    if cand.config.layout == "colocated":
        return [Candidate(cand.config, (cand.instances[0] + 1,))]
    p, d = cand.instances
    return [Candidate(cand.config, (p + 1, d)), Candidate(cand.config, (p, d + 1))]


def _confirm(state, screened, target, model, constraints):
    """Full runs of screened passers, cheapest first, until none left is cheaper than a confirmed one."""
    queue = [(_order(c, model, row), c) for c, row in screened.values() if _meets(row, target)]
    heapq.heapify(queue)
    spent = 0

    def step_up(cand):  # a fleet that missed on the whole workload: its shape's next sizes
        for nxt in _next_sizes(cand):
            if nxt.gpus <= constraints.max_gpus and _affordable(nxt, model, constraints, float("inf")) \
                    and nxt not in state.full and state.valid(nxt, []):
                heapq.heappush(queue, (_order(nxt, model, screened.get(nxt.key(), (None, {"slo_attainment": None}))[1]), nxt))

    if queue:
        _, first = heapq.heappop(queue)
        spent += 1
        if not _meets(state.confirm_with_robustness(first), target):
            step_up(first)
    while queue and spent < MAX_CONFIRM_RUNS:
        best = _winner(state.full, target, model)
        if best is not None and _price(best, model) <= _price(queue[0][1], model):
            return  # nothing left in the queue is cheaper than a confirmed fleet
        batch = []
        while queue and len(batch) < CONFIRM_BATCH:
            _, c = heapq.heappop(queue)
            if c not in state.full and c not in batch and (best is None or _price(c, model) < _price(best, model)):
                batch.append(c)
        rows = state.run(batch, [{}], "confirm")
        spent += len(batch)
        for c, row in zip(batch, rows):
            if not _meets(row, target):
                step_up(c)


def _winner(full, target, model):
    passing = [(_order(c, model, row), c) for c, row in full.items() if _meets(row, target)]
    return min(passing)[1] if passing else None


def _row(cand, metrics, measured, model):
    return {
        "fleet": cand.describe(),
        "layout": cand.config.layout,
        "gpus": cand.gpus,
        "usd_per_hour": round(cand.usd_per_hour(model), 6),
        "slo_attainment": metrics["slo_attainment"],
        "goodput_rps_per_gpu": metrics["goodput_rps_per_gpu"],
        "goodput_rps": metrics["goodput_rps"],
        "ttft_p99_s": metrics["ttft_p99_s"],
        "tpot_p99_ms": metrics["tpot_p99_ms"],
        "unfinished": metrics["unfinished"],
        "requests": metrics["requests"],
        "measured": measured,
        "set": cand.set_args(),
        "changes": cand.changes(),
    }


def _robustness(state, scenario, winner, base_row):
    variants = E.robustness_variants(scenario)
    results = state.robust.get(winner)
    if results is None:
        tasks = [E.task(scenario, {**winner.changes(), **changes}) for _, changes in variants]
        results = []
        for res in state.map_fn(E.run_task, tasks):
            results.append(res)
            state.progress("robustness", len(results), len(tasks))
        state.runs += len(tasks)
    runs = [{"run": "as planned", "slo_attainment": base_row["slo_attainment"]}]
    runs += [{"run": label, "slo_attainment": r["slo_attainment"]} for (label, _), r in zip(variants, results)]
    values = [r["slo_attainment"] or 0.0 for r in runs]
    note = None
    if scenario.workload.trace is not None:
        note = "a trace replays the same arrivals on every seed, so its rate is varied instead (arrival times scaled)"
    return {"runs": runs, "min": min(values), "median": statistics.median(values), "note": note}
