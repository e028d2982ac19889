"""The mission checker: run the start, then find the cheapest setting that earns each star.

    report = check_mission(load_mission("missions/02-decode-drowns.json"), seeds=5)
    print(report.format())
    report.ok            # False when the start already earns every star, a star cannot be
                         # earned by any allowed setting, or the time budget ran out; and when
                         # a star can be won without understanding (below)

Stars that need understanding (each a problem in the report):
- a later star's cheapest setting is an earlier star's (compared on the controls that
  matter in its layout): the later star teaches nothing new;
- the last star is earned by one control change from the start (every value of every
  control, the rate only for traffic stars);
- a star is earned in fewer than SEED_SHARE of `seeds` seeds (the scenario's seed and the
  next ones) at its cheapest setting, or the start earns it in any of them;
- a star is earned in passing: on a walk from the start to a star's cheapest setting, or
  from a star's to a later star's, each changed control moved one notch at a time in every
  order, a star the walk's start lacks is earned at a setting that is (later) a later
  star's but not its own cheapest, or (first notch) the walked-to star's on the first notch
  of a control its fix moves further, or (other choice) the walked-to star's before a
  choice switch its fix makes and that changes the run. Any fall on the scenario's seed
  (the one the student plays) is a problem; so are falls on more seeds of `seeds` than
  SEED_SHARE allows;
- a star has no debrief, or the mission no outro.
Each star's margin (per predicate, at its cheapest setting, on the worst seed) is reported.

How the search works (also in missions/README.md):
- "Cheapest" means the fewest GPUs in total; among settings with that many GPUs, the
  highest `slo_attainment`, then the highest `goodput_rps`, then the fewest controls
  moved away from the start.
- Fleet sizes are tried in increasing total GPUs; a star is settled at the first size
  where some setting earns it, so each star costs only the sizes below its answer.
  Predicates on `gpus`, `prefill_gpus` and `decode_gpus` are tested before running, so
  sizes a star rules out are never simulated for it.
- Fleet-size controls (`gpus`, `prefill_gpus`, `decode_gpus`) are searched exhaustively
  within their ranges. Every other control is searched on a coarse grid: all its
  settings when there are few (up to 17 when it is the only other control of its layout,
  7 when there are two, 5 when more), else that many spread over its range (including
  its ends and the start), geometrically when the range spans a factor of ten or more.
  Controls that do nothing in a layout (chunk size when disaggregated, link when
  colocated) stay at their start values there.
- The request rate stays at the start's rate, unless the star tests a metric that
  grows with traffic (goodput_rps, goodput_rps_per_gpu, throughput_tokens_per_s,
  requests, finished): then the rate control's coarse grid is searched too.
- Every run is cached by its settings and shared between stars. The search stops when
  `time_budget_s` runs out; the report then says so and is not ok.
"""

import itertools
import math
import time
from dataclasses import dataclass, field

from .engine import simulate
from .errors import LabError
from .metrics import summarize
from .missions import CONTROL_SPECS, RATE_METRICS, control_applies, load_mission
from . import page_bounds
from .workload import generate_requests

__all__ = ["check_mission", "CheckReport", "StarSolution", "DEFAULT_TIME_BUDGET_S", "DEFAULT_SEEDS", "REPORT_METRICS",
           "SEED_SHARE", "seeds_needed", "predicate_margin"]

DEFAULT_TIME_BUDGET_S = 5.0
DEFAULT_SEEDS = 5
# A star's cheapest setting must earn it in at least this share of the seeds checked.
SEED_SHARE = 0.8
FLEET_CONTROLS = ("gpus", "prefill_gpus", "decode_gpus")
# Metrics every report shows for the start (plus any metric a star tests).
REPORT_METRICS = (
    "requests", "slo_attainment", "goodput_rps", "goodput_rps_per_gpu", "ttft_p99_s", "tpot_p99_ms",
    "worst_gap_p99_ms", "transfer_p99_ms", "util_gpu", "gpus",
)


@dataclass
class StarSolution:
    """What the search found for one star."""

    index: int
    star: object
    earned_at_start: bool
    settings: dict = None  # the cheapest winning control settings, or None
    metrics: dict = None  # that setting's metrics
    runs: int = 0  # settings tested for this star (simulated or pruned by fleet predicates)
    note: str = ""
    changes: int = None  # controls the cheapest setting moves away from the start (the layout counts as one)
    seeds: list = field(default_factory=list)  # the seeds checked at the cheapest setting
    seeds_earned: int = None  # how many of them earn the star there
    start_seeds_earned: int = None  # how many of them the start earns it in (must be 0)
    margins: list = field(default_factory=list)  # [(predicate, worst value, worst margin)] over the seeds

    @property
    def gpus(self):
        return self.metrics["gpus"] if self.metrics else None

    def to_dict(self):
        return {
            "label": self.star.label,
            "when": self.star.describe(),
            "debrief": self.star.debrief,
            "earned_at_start": self.earned_at_start,
            "cheapest": self.settings,
            "metrics": self.metrics,
            "changes": self.changes,
            "runs": self.runs,
            "seeds": list(self.seeds),
            "seeds_earned": self.seeds_earned,
            "start_seeds_earned": self.start_seeds_earned,
            "margins": [{"predicate": p.describe(), "value": v, "margin": mg} for p, v, mg in self.margins],
            "note": self.note,
        }


@dataclass
class CheckReport:
    mission: object
    start_settings: dict
    start_metrics: dict
    start_stars: list
    solutions: list = field(default_factory=list)  # StarSolution per star, in star order
    runs: int = 0  # simulations actually run (the cache makes repeats free)
    elapsed_s: float = 0.0
    start_run_s: float = 0.0  # how long one run of the start took (what the UI pays per change)
    time_budget_s: float = DEFAULT_TIME_BUDGET_S
    timed_out: bool = False
    problems: list = field(default_factory=list)  # why the mission is not ok
    notes: list = field(default_factory=list)  # worth knowing, not failures
    seeds: list = field(default_factory=list)  # the seeds each star is checked on (the scenario's first)
    one_change: dict = None  # the single control change from the start that earns the most stars
    in_passing: list = field(default_factory=list)  # stars earned in passing on the scenario's seed (the first found per star)
    in_passing_by_seed: dict = field(default_factory=dict)  # seed -> its falls, for each seed walked
    walk_points: int = 0  # settings the walks between the start and the stars' fixes passed

    @property
    def seeds_without_falls(self):
        """How many of the walked seeds earn no star in passing."""
        return sum(1 for falls in self.in_passing_by_seed.values() if not falls)

    @property
    def ok(self):
        return not self.problems

    @property
    def cheapest(self):
        """Per star, the cheapest winning settings or None."""
        return [s.settings for s in self.solutions]

    def to_dict(self):
        m = self.mission
        return {
            "mission": m.id,
            "path": m.path,
            "ok": self.ok,
            "start": {"settings": self.start_settings, "metrics": self.start_metrics, "stars": self.start_stars},
            "stars": [s.to_dict() for s in self.solutions],
            "runs": self.runs,
            "elapsed_s": round(self.elapsed_s, 3),
            "start_run_s": round(self.start_run_s, 4),
            "time_budget_s": self.time_budget_s,
            "timed_out": self.timed_out,
            "seeds": list(self.seeds),
            "one_change": self.one_change,
            "in_passing": [dict(f) for f in self.in_passing],
            "in_passing_by_seed": [{"seed": sd, "falls": [dict(f) for f in falls]}
                                   for sd, falls in self.in_passing_by_seed.items()],
            "walk_points": self.walk_points,
            "problems": list(self.problems),
            "notes": list(self.notes),
        }

    def format(self):
        """The short text report `python -m lab check` prints."""
        return "\n".join(self.lines())

    def lines(self):
        """The report's lines (a printer may escape each: a file name or mission text is not ours)."""
        m = self.mission
        where = f"{m.path}: " if m.path else ""
        lines = [f"{where}{m.id} — {m.title}"]
        lines.append(f"  start: {_settings_text(m, self.start_settings)}")
        lines.append(f"    {_metrics_text(self.start_metrics, _star_metrics(m))}")
        earned = sum(self.start_stars)
        marks = "".join("★" if e else "☆" for e in self.start_stars)
        lines.append(f"  stars at start: {marks} ({earned} of {len(self.start_stars)})")
        shown = []
        for sol in self.solutions:
            head = f"  {'★' if sol.earned_at_start else '☆'} {sol.index + 1}. {sol.star.label} [{sol.star.describe()}]"
            lines.append(head)
            same = next((s for s in shown if s.settings == sol.settings), None) if sol.settings is not None else None
            moves = "" if sol.changes is None else f"; {sol.changes} change{'' if sol.changes == 1 else 's'} from the start"
            if same is not None:
                lines.append(f"      cheapest: {_settings_text(m, sol.settings)} (as star {same.index + 1}{moves})")
            elif sol.settings is not None:
                lines.append(f"      cheapest: {_settings_text(m, sol.settings)} ({moves[2:]})" if moves else f"      cheapest: {_settings_text(m, sol.settings)}")
                lines.append(f"        {_metrics_text(sol.metrics, [p.metric for p in sol.star.when])}")
                shown.append(sol)
            else:
                lines.append(f"      {sol.note or 'no allowed setting earns it'}")
            if sol.seeds_earned is not None:
                n = len(sol.seeds)
                start = "" if sol.start_seeds_earned is None else (
                    f"; the start fails it in all {n}" if sol.start_seeds_earned == 0
                    else f"; the START earns it in {sol.start_seeds_earned} of {n}")
                lines.append(f"      seeds: earned in {sol.seeds_earned} of {n} seeds ({_seed_range(sol.seeds)}){start}")
            if sol.margins:
                worst = "worst seed" if len(sol.seeds) > 1 else "seed"
                parts = [f"{p.metric} {_fmt_value(v)} vs {p.op} {p.value:g}: {_fmt_margin(mg)}" for p, v, mg in sol.margins]
                lines.append(f"      margin ({worst}): " + "; ".join(parts))
        if self.one_change is not None:
            oc = self.one_change
            lines.append(f"  one change from the start earns at most {oc['stars']} of {len(self.solutions)} stars"
                         + (f" ({oc['control']}={_fmt_value(oc['value'])})" if oc["stars"] else ""))
        walked = len(self.in_passing_by_seed)
        clean = self.seeds_without_falls
        for seed, falls in self.in_passing_by_seed.items():
            for f in falls:
                lines.append(f"  in passing ({f['why']}, seed {seed}): star {f['star']} at {_settings_text(m, f['setting'])} "
                             f"(from {f['from']} toward {f['to']}: {f['path_text']})")
        lines.append(f"  in passing: no star on {clean} of {walked} seeds ({self.walk_points} settings walked)")
        status = "ok" if self.ok else "NOT OK"
        timing = f"{self.runs} runs in {self.elapsed_s:.1f} s (budget {self.time_budget_s:g} s; one run of the start {self.start_run_s * 1000:.0f} ms)"
        lines.append(f"  {timing}: {status}")
        for note in self.notes:
            lines.append(f"  note: {note}")
        for problem in self.problems:
            lines.append(f"  problem: {problem}")
        return lines


# ------------------------------------------------------------------ formatting

def _fmt_value(value):
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        if value.is_integer() and abs(value) < 1e6:
            return str(int(value))
        if abs(value) >= 100:
            return f"{value:,.0f}"
        if abs(value) >= 1:
            return f"{value:.2f}"
        if value and abs(value) < 0.01:
            # Dollars per request (0.00123) and other small metrics: 3 significant digits,
            # so a margin of 0.0004 does not read as +0.000.
            return f"{value:.3g}"
        return f"{value:.3f}"
    return str(value)


def _fmt_margin(value):
    if value is None:
        return "undefined"
    return ("+" if value >= 0 else "-") + _fmt_value(abs(value))


def _seed_range(seeds):
    if len(seeds) > 2 and seeds == list(range(seeds[0], seeds[0] + len(seeds))):
        return f"seeds {seeds[0]}-{seeds[-1]}"
    return "seed" + ("s " if len(seeds) > 1 else " ") + ", ".join(str(x) for x in seeds)


def _settings_text(mission, settings):
    layout = settings.get("layout", mission.scenario.fleet.layout)
    parts = []
    if "layout" not in settings:
        parts.append(layout)
    for name, value in settings.items():
        if layout not in CONTROL_SPECS[name][2]:
            continue
        parts.append(f"{name}={_fmt_value(value)}")
    return ", ".join(parts)


def _star_metrics(mission):
    out = []
    for star in mission.stars:
        for p in star.when:
            if p.metric not in out:
                out.append(p.metric)
    return out


def _metrics_text(metrics, extra=()):
    names = list(REPORT_METRICS)
    for name in extra:
        if name not in names:
            names.append(name)
    return "  ".join(f"{n} {_fmt_value(metrics.get(n))}" for n in names if metrics.get(n) is not None)


# ------------------------------------------------------------------ grids

def _coarse(control, start, limit):
    """At most about `limit` values of a non-fleet control, always with its ends and the start."""
    grid = control.grid()
    if grid is not None and len(grid) <= limit:
        return grid
    lo, hi = control.min, control.max
    if control.kind == "choice":
        return list(control.choices)
    picks = {lo, hi, start}
    positive_lo = lo if lo > 0 else (control.step or hi / 64)
    geometric = positive_lo > 0 and hi / positive_lo >= 10
    n = max(limit - 2, 2)
    for i in range(n):
        t = i / (n - 1)
        v = positive_lo * (hi / positive_lo) ** t if geometric else lo + (hi - lo) * t
        picks.add(_snap(control, v))
    values = sorted(v for v in picks if lo <= v <= hi)
    return values


def _snap(control, v):
    if control.step is not None:
        k = round((v - control.min) / control.step)
        v = control.min + k * control.step
        v = min(max(v, control.min), control.max)
    if control.kind == "int":
        return int(round(v))
    return round(v, 6)


def _fleet_shapes(mission, layout, start):
    """[(settings for the fleet-size controls, prefill, decode, total)] for one layout."""
    controls = mission.controls
    fleet = mission.scenario.fleet
    if layout == "colocated":
        sizes = controls["gpus"].grid() if "gpus" in controls else [start.get("gpus", fleet.gpus if fleet.gpus is not None else fleet.total_gpus)]
        return [({"gpus": g} if "gpus" in controls else {}, 0, 0, g) for g in sizes]
    prefills = controls["prefill_gpus"].grid() if "prefill_gpus" in controls else [fleet.prefill_gpus]
    decodes = controls["decode_gpus"].grid() if "decode_gpus" in controls else [fleet.decode_gpus]
    shapes = []
    for p in prefills:
        for d in decodes:
            chosen = {}
            if "prefill_gpus" in controls:
                chosen["prefill_gpus"] = p
            if "decode_gpus" in controls:
                chosen["decode_gpus"] = d
            shapes.append((chosen, p, d, p + d))
    return shapes


def _extra_grids(mission, layout, start, vary_rate):
    """[(name, values)] for the non-fleet controls that matter in `layout`."""
    names = [
        n for n, c in mission.controls.items()
        if n not in FLEET_CONTROLS and n != "layout" and layout in c.layouts and (n != "rate" or vary_rate)
    ]
    limit = 17 if len(names) <= 1 else 7 if len(names) == 2 else 5
    return [(n, _coarse(mission.controls[n], start[n], limit)) for n in names]


# ------------------------------------------------------------------ search

class _Search:
    def __init__(self, mission, budget_s, clock):
        self.mission = mission
        self.budget_s = budget_s
        self.clock = clock
        self.t0 = clock()
        self.cache = {}
        self.runs = 0
        self.timed_out = False
        self.start = mission.settings()

    def out_of_time(self):
        if self.clock() - self.t0 > self.budget_s:
            self.timed_out = True
        return self.timed_out

    def metrics(self, settings, seed=None):
        """The metrics of `settings` (cached), on `seed` if given; None when they make no valid scenario.

        Controls that do nothing in the settings' layout are left out of the cache key:
        they give the same run.
        """
        if seed == self.mission.scenario.seed:
            seed = None
        key = (tuple(sorted((k, repr(v)) for k, v in _effective(self.mission, settings).items())), seed)
        if key in self.cache:
            return self.cache[key]
        try:
            scenario = self.mission.apply(settings)
            if seed is not None:
                scenario = scenario.with_changes({"seed": seed})
        except LabError:
            self.cache[key] = None
            return None
        result = summarize(simulate(scenario))
        self.runs += 1
        self.cache[key] = result
        return result

    def candidates_by_total(self, vary_rate):
        """{total GPUs: [(settings, fleet metrics)]} over every allowed setting on the coarse grid."""
        m = self.mission
        layouts = m.controls["layout"].choices if "layout" in m.controls else (m.scenario.fleet.layout,)
        by_total = {}
        for layout in layouts:
            extras = _extra_grids(m, layout, self.start, vary_rate)
            names = [n for n, _ in extras]
            for chosen, p, d, total in _fleet_shapes(m, layout, self.start):
                fleet_metrics = {"gpus": total, "prefill_gpus": p, "decode_gpus": d}
                for combo in itertools.product(*(values for _, values in extras)):
                    settings = dict(self.start)
                    if "layout" in m.controls:
                        settings["layout"] = layout
                    settings.update(chosen)
                    settings.update(zip(names, combo, strict=True))
                    by_total.setdefault(total, []).append((settings, fleet_metrics))
        return by_total


def _effective(mission, settings):
    """`settings` without the controls that do nothing there: those of the other layout, and
    those waiting for a field at another value (CONTROL_REQUIRES: the long-prompt split
    under `queue` routing), which give the same run."""
    try:
        scenario = mission.apply(settings)
    except LabError:  # no valid scenario: fall back to the layout alone
        layout = settings.get("layout", mission.scenario.fleet.layout)
        return {k: v for k, v in settings.items() if layout in CONTROL_SPECS[k][2]}
    return {k: v for k, v in settings.items() if control_applies(k, scenario)}


def _changes(mission, settings, start):
    """How many controls a student moves to go from `start` to `settings` (those that matter there)."""
    return sum(1 for k, v in _effective(mission, settings).items() if start.get(k) != v)


def _fleet_metrics(mission, settings):
    """{gpus, prefill_gpus, decode_gpus} of `settings`, without a run (None: not a valid fleet)."""
    try:
        fleet = mission.apply(settings).fleet
    except LabError:
        return None
    if fleet.layout == "colocated":
        return {"gpus": fleet.total_gpus, "prefill_gpus": 0, "decode_gpus": 0}
    return {"gpus": fleet.total_gpus, "prefill_gpus": fleet.prefill_gpus, "decode_gpus": fleet.decode_gpus}


def _fleet_allows(star, fleet_metrics):
    """Whether the star's fleet predicates hold for this fleet (if not, no run can earn it)."""
    return fleet_metrics is not None and all(p.holds(fleet_metrics) for p in star.when if p.about_fleet)


def seeds_needed(n):
    """Of `n` seeds, how many a star's cheapest setting must earn it in."""
    return math.ceil(SEED_SHARE * n - 1e-9)


def predicate_margin(pred, metrics):
    """How far `metrics` is on the right side of `pred` (negative: the wrong side; None: undefined)."""
    actual = metrics.get(pred.metric) if metrics else None
    if actual is None or isinstance(actual, bool) or (isinstance(actual, float) and math.isnan(actual)):
        return None
    if pred.op in (">", ">="):
        return actual - pred.value
    if pred.op in ("<", "<="):
        return pred.value - actual
    return -abs(actual - pred.value)


def _one_change_settings(mission, start, vary_rate):
    """[(control, value, settings)]: every setting that moves one control away from the start."""
    layout = start.get("layout", mission.scenario.fleet.layout)
    out = []
    for name, control in mission.controls.items():
        if name == "rate" and not vary_rate:
            continue
        if layout not in control.layouts:
            continue  # changes nothing until the layout changes too (that is two moves)
        grid = control.grid()
        values = grid if grid is not None else _coarse(control, start[name], 17)
        for value in values:
            if value != start[name]:
                out.append((name, value, {**start, name: value}))
    return out


def _rank(settings, metrics, start):
    slo = metrics.get("slo_attainment")
    goodput = metrics.get("goodput_rps")
    moved = sum(1 for k, v in settings.items() if start.get(k) != v)
    return (-(slo if slo is not None else -1.0), -(goodput if goodput is not None else -1.0), moved)


def _vary_rate(mission, star):
    return "rate" in mission.controls and any(p.metric in RATE_METRICS for p in star.when)


def _start_in_page(mission):
    """Raise LabError when the mission's start is past the lab page's bounds (page_bounds.py):
    the page would refuse its first run."""
    scenario = mission.scenario
    where = "workload.trace" if scenario.workload.trace is not None else "workload.rate"
    try:
        page_bounds.check_page_bounds(generate_requests(scenario.workload, scenario.seed), where, "workload.duration_s")
    except LabError as exc:
        raise LabError(exc.path, f"the start is past what the lab page runs: {exc.detail}") from None


def _rate_past_page(mission, report):
    """Note a rate control that reaches past the lab page's bounds (the page refuses those
    rates, saying why)."""
    control, workload = mission.controls.get("rate"), mission.scenario.workload
    if control is None or control.max is None or workload.trace is not None:
        return
    expected = control.max * workload.duration_s
    if expected > page_bounds.PAGE_MAX_REQUESTS:
        report.notes.append(f"at the rate control's maximum, {control.max:g} req/s, the workload draws about "
                            f"{expected:,.0f} requests, past the {page_bounds.PAGE_MAX_REQUESTS:,} the lab page runs: the page "
                            "refuses those rates with a note")


def check_mission(mission, time_budget_s=DEFAULT_TIME_BUDGET_S, clock=time.perf_counter, seeds=DEFAULT_SEEDS):
    """Validate (when given a path or dict), run the start, solve every star, and test each fix on `seeds` seeds."""
    if isinstance(seeds, bool) or not isinstance(seeds, int) or not 1 <= seeds <= 100:
        raise LabError("--seeds", f"expected a whole number from 1 to 100, got {seeds!r}")
    mission = load_mission(mission)
    _start_in_page(mission)
    search = _Search(mission, time_budget_s, clock)
    t = clock()
    start_metrics = search.metrics(dict(search.start))
    start_run_s = clock() - t
    start_stars = mission.evaluate(start_metrics)
    report = CheckReport(mission, dict(search.start), start_metrics, start_stars, time_budget_s=time_budget_s, start_run_s=start_run_s)
    solutions = [StarSolution(i, star, start_stars[i]) for i, star in enumerate(mission.stars)]
    report.solutions = solutions
    _rate_past_page(mission, report)

    # Candidates grouped by total GPUs; one table for fixed-rate stars, one for rate stars.
    tables = {}
    for sol in solutions:
        vary = _vary_rate(mission, sol.star)
        if vary not in tables:
            tables[vary] = search.candidates_by_total(vary)
    totals = sorted(set().union(*(set(t) for t in tables.values())))
    open_stars = list(solutions)
    for total in totals:
        if not open_stars or search.out_of_time():
            break
        for sol in list(open_stars):
            fleet_preds = [p for p in sol.star.when if p.about_fleet]
            best = None
            for settings, fleet_metrics in tables[_vary_rate(mission, sol.star)].get(total, ()):
                if not all(p.holds(fleet_metrics) for p in fleet_preds):
                    sol.runs += 1
                    continue
                if search.out_of_time():
                    break
                metrics = search.metrics(settings)
                sol.runs += 1
                if metrics is None or not sol.star.earned(metrics):
                    continue
                rank = _rank(settings, metrics, search.start)
                if best is None or rank < best[0]:
                    best = (rank, settings, metrics)
            if best is not None:
                sol.settings, sol.metrics = best[1], best[2]
                open_stars.remove(sol)
    for sol in solutions:
        if sol.settings is not None:
            sol.changes = _changes(mission, sol.settings, search.start)
    last_by_one = _scan_one_change(mission, search, report)
    _check_seeds(mission, search, report, seeds)
    _walk_in_passing(mission, search, report)
    report.runs = search.runs
    report.elapsed_s = clock() - search.t0
    report.timed_out = search.timed_out

    # Verdict.
    if all(start_stars):
        report.problems.append("the start already earns every star: there is nothing for the student to do")
    _verdict_new_rules(mission, report, last_by_one)
    for sol in solutions:
        if sol.settings is None:
            if search.timed_out:
                sol.note = f"not found within the {time_budget_s:g} s budget ({sol.runs} settings tried)"
            else:
                sol.note = f"no allowed setting earns it ({sol.runs} settings tried)"
                report.problems.append(f"star {sol.index + 1} ({sol.star.label!r}) cannot be earned with the allowed controls")
    if search.timed_out:
        report.problems.append(
            f"checking took longer than the {time_budget_s:g} s budget ({search.runs} runs); "
            "narrow the control ranges or shorten the run"
        )
    if "rate" in mission.controls and not any(_vary_rate(mission, s) for s in mission.stars):
        report.notes.append("students may lower the request rate, and no star rewards traffic served (goodput_rps, ...): the SLO stars get easier that way")
    return report


# ------------------------------------------------------------------ stars that need understanding

def _scan_one_change(mission, search, report):
    """Run every one-control change from the start; record the best one; return (control, value) earning the last star."""
    vary = [_vary_rate(mission, star) for star in mission.stars]
    best, last_by_one = None, None
    for name, value, settings in _one_change_settings(mission, search.start, any(vary)):
        if search.out_of_time():
            break
        fleet = _fleet_metrics(mission, settings)
        if not any(_fleet_allows(star, fleet) for star in mission.stars):
            metrics = fleet or {}  # no star allows this fleet: nothing to run
        else:
            metrics = search.metrics(settings)
        if metrics is None:
            continue
        # A change of the rate only counts for the stars that reward traffic (the solver's rule too).
        earned = [star.earned(metrics) and (name != "rate" or vary[i]) for i, star in enumerate(mission.stars)]
        count = sum(earned)
        if best is None or count > best["stars"]:
            best = {"control": name, "value": value, "stars": count}
        if earned[-1] and last_by_one is None:
            last_by_one = (name, value)
    report.one_change = best if best is not None else {"control": None, "value": None, "stars": 0}
    return last_by_one


def _check_seeds(mission, search, report, n):
    """Each star at its cheapest setting, and the start, on the scenario's seed and the next n - 1."""
    base = mission.scenario.seed
    seeds = [(base + k) % 2**63 for k in range(n)]
    report.seeds = seeds
    if mission.scenario.workload.trace is not None and n > 1:
        report.notes.append("the workload replays a trace: every seed gives the same requests")
    start_fleet = _fleet_metrics(mission, search.start)
    for sol in report.solutions:
        sol.seeds = seeds
        start_runs = []
        for sd in (seeds if _fleet_allows(sol.star, start_fleet) else ()):
            if search.out_of_time():
                return
            start_runs.append(search.metrics(search.start, sd))
        sol.start_seeds_earned = sum(1 for r in start_runs if r is not None and sol.star.earned(r))
        if sol.settings is None:
            continue
        runs = []
        for sd in seeds:
            if search.out_of_time():
                return
            runs.append(search.metrics(sol.settings, sd))
        sol.seeds_earned = sum(1 for r in runs if r is not None and sol.star.earned(r))
        margins = []
        for pred in sol.star.when:
            worst = None
            for r in runs:
                mg = predicate_margin(pred, r)
                if mg is None:
                    worst = (None, None)
                    break
                if worst is None or mg < worst[1]:
                    worst = (r.get(pred.metric), mg)
            margins.append((pred, worst[0], worst[1]))
        sol.margins = margins


def _verdict_new_rules(mission, report, last_by_one):
    """The rules that make a star need understanding: a new idea per star, more than one move, not luck."""
    m = mission
    sols = report.solutions
    need = seeds_needed(len(report.seeds))
    for sol in sols:
        i, label = sol.index + 1, sol.star.label
        if sol.start_seeds_earned:
            report.problems.append(
                f"star {i} ({label!r}): the start already earns it in {sol.start_seeds_earned} of {len(report.seeds)} seeds; "
                "a star must need a change from the start in every seed")
        if sol.seeds_earned is not None and sol.seeds_earned < need:
            report.problems.append(
                f"star {i} ({label!r}) is earned in only {sol.seeds_earned} of {len(report.seeds)} seeds at its cheapest setting "
                f"({_settings_text(m, sol.settings)}); it needs {need}: the fix sits on the edge of the threshold")
        if sol.settings is None:
            continue
        earlier = next((e for e in sols[:sol.index] if e.settings is not None
                        and _effective(m, e.settings) == _effective(m, sol.settings)), None)
        if earlier is not None:
            report.problems.append(
                f"star {i}'s cheapest fix is star {earlier.index + 1}'s ({_settings_text(m, sol.settings)}): "
                f"star {i} ({label!r}) should need a different change, not the same setting")
    if last_by_one is not None:
        name, value = last_by_one
        report.problems.append(
            f"star {len(sols)} ({sols[-1].star.label!r}), the last, is earned by one control change from the start "
            f"({name}={_fmt_value(value)}): the last star should need more than one move")
    walked, clean = len(report.in_passing_by_seed), report.seeds_without_falls
    if walked and clean < need:
        other = next(f for falls in report.in_passing_by_seed.values() for f in falls)
        report.problems.append(
            f"stars are earned in passing on {walked - clean} of {walked} seeds (on seed {other['seed']}, star "
            f"{other['star']} at {_settings_text(m, other['setting'])}, from {other['from']} toward {other['to']}); "
            f"at most {walked - need} may")
    for f in report.in_passing:
        i, d = f["star"], int(f["to"].split()[1])
        where = f"at {_settings_text(m, f['setting'])}, on the way from {f['from']} to star {d}'s fix ({f['path_text']})"
        own = _settings_text(m, sols[i - 1].settings)
        if f["why"] == "later":
            tail = f"before star {d}: a later star should not fall on the way to an earlier one (its fix: {own})"
        elif f["why"] == "first notch":
            tail = f"on the first notch of a control its fix ({own}) moves further: its debrief explains a bigger change"
        else:
            tail = f"before the walk switches to its fix's choice ({own}): its debrief explains a choice the student did not make"
        report.problems.append(f"star {i} ({f['label']!r}) is earned in passing {where}, {tail}")
    for sol in sols:
        if not sol.star.debrief:
            report.problems.append(
                f"star {sol.index + 1} ({sol.star.label!r}) has no debrief: say in 1 to 3 sentences why its fix works "
                "(the page shows it when the star is earned)")
    if not m.outro:
        report.problems.append("the mission has no outro: say what it taught and point to the next mission "
                               "(the page shows it when every star is earned)")


# ------------------------------------------------------------------ stars earned in passing

MAX_WALK_ORDERS = 24  # orders of the changed controls walked per pair (4 controls: all 24)


def _notches(mission, name, a, b):
    """The values a student passes moving control `name` from `a` to `b`, one notch at a time
    (ending at `b`): a choice switches at once; a number walks its step grid (a continuous
    control: the solver's 17 points) between the two."""
    control = mission.controls[name]
    if control.kind == "choice" or a == b:
        return [b]
    grid = control.grid()
    if grid is None:
        grid = _coarse(control, a, 17)
    lo, hi = min(a, b), max(a, b)
    between = sorted({v for v in grid if lo < v < hi})
    if b < a:
        between.reverse()
    return between + [b]


def _walk_points(mission, origin, dest):
    """{intermediate setting key: (setting, path)} from `origin` to `dest`, moving each changed
    control notch by notch, one control after the other, in every order of the changed controls
    (up to MAX_WALK_ORDERS orders). `path` is [(control, [values passed])] up to the setting.
    The origin and the destination themselves are left out."""
    names = [n for n in mission.controls if origin.get(n) != dest.get(n)]
    # A control that matters in neither end's layout changes no run: set it at once.
    eff_o, eff_d = _effective(mission, origin), _effective(mission, dest)
    silent = [n for n in names if n not in eff_o and n not in eff_d]
    moved = [n for n in names if n not in silent]
    base = dict(origin)
    base.update({n: dest[n] for n in silent})
    points = {}
    dest_key = _key(mission, dest)
    for order in itertools.islice(itertools.permutations(moved), MAX_WALK_ORDERS):
        current, path = dict(base), []
        for name in order:
            passed = []
            for value in _notches(mission, name, origin[name], dest[name]):
                current[name] = value
                passed.append(value)
                key = _key(mission, current)
                if key != dest_key and key not in points:
                    points[key] = (dict(current), path + [(name, list(passed))])
            path = path + [(name, list(passed))]
    points.pop(_key(mission, origin), None)
    return points


def _key(mission, settings):
    return tuple(sorted((k, repr(v)) for k, v in _effective(mission, settings).items()))


def _path_text(mission, origin_settings, path):
    parts = []
    for name, values in path:
        steps = "→".join(_fmt_value(v) for v in [origin_settings[name], *values])
        parts.append(f"{name} {steps}")
    return ", then ".join(parts)


def _walk_in_passing(mission, search, report):
    """Walk from the start and from each star's cheapest setting to each later star's, notch by
    notch, and record each star earned in passing (the rule: missions/README.md, "Checking a
    mission"), on each of the report's seeds. `report.in_passing` holds the falls on the
    scenario's seed (the one the student plays); `in_passing_seeds` how many seeds had none."""
    report.walk_points = 0
    report.in_passing_by_seed = {}
    for seed in report.seeds or [mission.scenario.seed]:
        falls = _walk_one_seed(mission, search, report, seed)
        if falls is None:  # out of time
            break
        report.in_passing_by_seed[seed] = falls
    first = mission.scenario.seed
    report.in_passing = report.in_passing_by_seed.get(first, [])


def _walk_one_seed(mission, search, report, seed):
    """The stars earned in passing on `seed`'s walks (one dict per star, the first found), or
    None when the time budget ran out."""
    sols = report.solutions
    start = search.start
    vary = [_vary_rate(mission, s.star) for s in sols]
    found = {}  # star index -> the first fall found for it
    count_points = not report.in_passing_by_seed  # the settings walked are the same on every seed
    seen = set()
    origins = [("start", -1, start)] + [(f"star {s.index + 1}", s.index, s.settings) for s in sols if s.settings is not None]
    for origin_name, origin_index, origin in origins:
        dests = [dest for dest in sols[origin_index + 1:] if dest.settings is not None]
        origin_metrics = search.metrics(origin, seed) if dests else None
        if origin_metrics is None:
            continue
        held = mission.evaluate(origin_metrics)
        for dest in dests:
            d = dest.index
            fix = dest.settings
            long_moves = {n for n in mission.controls if len(_notches(mission, n, origin[n], fix[n])) > 1}
            switches = [n for n in mission.controls if mission.controls[n].kind == "choice" and origin[n] != fix[n]]
            for key, (setting, path) in _walk_points(mission, origin, fix).items():
                if count_points and key not in seen:
                    seen.add(key)
                    report.walk_points += 1
                fleet = _fleet_metrics(mission, setting)
                if not any(_fleet_allows(s.star, fleet) and not held[s.index] and s.index >= d for s in sols):
                    continue  # no star this walk could drop allows this fleet: nothing to run
                if search.out_of_time():
                    return None
                metrics = search.metrics(setting, seed)
                if metrics is None:
                    continue  # not a valid fleet (e.g. not whole instances): the page skips it too
                rate_moved = "rate" in setting and setting["rate"] != start.get("rate")
                first_notch = len(path) == 1 and len(path[0][1]) == 1
                for sol in sols[d:]:
                    i = sol.index
                    if held[i] or i in found or (rate_moved and not vary[i]) or not sol.star.earned(metrics):
                        continue
                    if i > d:
                        if key == _key(mission, sol.settings):
                            continue  # its own fix lies on the way: its debrief explains what was done
                        why = "later"  # a harder star, before the one the walk goes to, without its own fix
                    elif first_notch and path[0][0] in long_moves:
                        why = "first notch"  # one notch of a control its fix moves further
                    else:
                        pending = [n for n in switches if setting[n] == origin[n]]
                        if not pending or search.metrics({**setting, **{n: fix[n] for n in pending}}, seed) == metrics:
                            continue  # every switch its fix makes is made, or changes nothing here
                        why = "other choice"  # earned before a switch its fix makes, which changes the run
                    found[i] = {
                        "star": i + 1, "label": sol.star.label, "setting": setting, "why": why,
                        "from": origin_name, "to": f"star {d + 1}", "seed": seed,
                        "path": [{"control": n, "values": list(v)} for n, v in path],
                        "path_text": _path_text(mission, origin, path),
                    }
    return [found[i] for i in sorted(found)]
