"""Stars: what a mission rewards, as predicates over the fleet metrics.

A star is a label and one or more predicates that must all hold, e.g.

    {"label": "Meet the SLO on 8 GPUs",
     "when": [{"metric": "slo_attainment", "op": ">=", "value": 0.95},
              {"metric": "gpus", "op": "<=", "value": 8}]}

Metrics are the names in `metrics.METRIC_NAMES` (the fleet's size is among them:
`gpus`, `prefill_gpus`, `decode_gpus`; a colocated fleet has 0 prefill and 0 decode
GPUs). A metric that is undefined for a run (None, e.g. `transfer_p99_ms` of a
colocated fleet) never satisfies a predicate.
"""

import difflib
import math
from dataclasses import dataclass

from . import fields as F
from .errors import LabError, Mistakes
from .metrics import METRIC_NAMES

__all__ = ["OPS", "MAX_STARS", "MAX_DEBRIEF", "Predicate", "Star", "parse_stars", "evaluate_stars"]

MAX_STARS = 3
# A debrief is 1 to 3 sentences (why the star's fix works); longer belongs in the brief.
MAX_DEBRIEF = 500

# The comparison operators a predicate may use, in the order the docs list them.
OPS = {
    "<": lambda a, b: a < b,
    "<=": lambda a, b: a <= b,
    ">": lambda a, b: a > b,
    ">=": lambda a, b: a >= b,
    "==": lambda a, b: a == b,
}

# Metrics fixed by the fleet's shape alone: the solver can test them without a run.
FLEET_METRICS = ("gpus", "prefill_gpus", "decode_gpus")


def _suggest(word, options):
    close = difflib.get_close_matches(str(word), options, n=1, cutoff=0.6)
    return f"did you mean {close[0]!r}? " if close else ""


# Words an author may write for what the lab measures, and the metrics that measure it. By
# spelling alone, "latency" is nearest to slo_attainment and "utilization" to util_link.
_LATENCY = ("ttft_p99_s", "tpot_p99_ms", "worst_gap_p99_ms")
_FIRST_TOKEN = ("ttft_p50_s", "ttft_p90_s", "ttft_p99_s")
_BETWEEN_TOKENS = ("itl_p99_ms", "tpot_p99_ms", "worst_gap_p99_ms")
_STALLS = ("worst_gap_p50_ms", "worst_gap_p99_ms", "itl_p99_ms")
_COST = ("usd_per_good_request", "usd_per_million_tokens", "usd_per_hour")
_BUSY = ("util_gpu", "util_prefill", "util_decode")
_ON_TIME = ("slo_attainment", "served_slo_attainment", "goodput_rps")
METRIC_WORDS = {
    "latency": _LATENCY, "time_to_first_token": _FIRST_TOKEN, "first_token": _FIRST_TOKEN,
    "tbt": _BETWEEN_TOKENS, "time_between_tokens": _BETWEEN_TOKENS, "inter_token_latency": _BETWEEN_TOKENS,
    "stall": _STALLS, "stalls": _STALLS, "freeze": _STALLS, "freezes": _STALLS,
    "cost": _COST, "price": _COST, "dollars": _COST, "usd": _COST,
    "utilization": _BUSY, "utilisation": _BUSY, "busy": _BUSY,
    "attainment": _ON_TIME, "on_time": _ON_TIME,
    "memory": ("kv_util_p50", "kv_util_p99", "preemptions"),
    "queue": ("admission_wait_p99_ms", "ttft_p99_s", "rejected"),
    "cache": ("prefix_hit_rate", "prefill_tokens_saved", "prefix_fetch_p99_ms"),
}


def unknown_metric(word):
    """Why `word` is no metric, and what to write instead (never all of METRIC_NAMES: a list
    that long hides the answer): the metrics that measure a word of METRIC_WORDS; else the one
    it most likely meant by spelling; else the metrics it is a part of ("gap"); else the three
    nearest by spelling."""
    text = str(word)
    key = "_".join(text.lower().replace("-", " ").split())
    tail = f"({len(METRIC_NAMES)} in all: `python -m lab run FILE --json` prints every one)"
    if key in METRIC_WORDS:
        return f"{F.describe(word)} is not a metric; it is measured by {_names(METRIC_WORDS[key])} {tail}"
    close = difflib.get_close_matches(text, METRIC_NAMES, n=1, cutoff=0.6)
    if close:
        return f"{F.describe(word)} is not a metric; did you mean {close[0]!r}?"
    nearest = [n for n in METRIC_NAMES if key and key in n.split("_")][:3]
    nearest = nearest or difflib.get_close_matches(text, METRIC_NAMES, n=3, cutoff=0.0)
    return f"{F.describe(word)} is not a metric; the nearest are {_names(nearest)} {tail}"


def _names(names):
    return ", ".join(repr(n) for n in names)


def _format_number(value):
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    return f"{value:g}"


@dataclass(frozen=True)
class Predicate:
    """`metric op value`, e.g. Predicate("slo_attainment", ">=", 0.95)."""

    metric: str
    op: str
    value: float

    def __post_init__(self):
        if not isinstance(self.metric, str) or self.metric not in METRIC_NAMES:
            raise LabError("metric", unknown_metric(self.metric))
        if not isinstance(self.op, str) or self.op not in OPS:
            raise LabError("op", f"{F.describe(self.op)} is not an operator; use one of {', '.join(OPS)}")
        if not F.is_number(self.value) or isinstance(self.value, F.BigNumber) or abs(self.value) > 1e300 or not math.isfinite(self.value):
            raise LabError("value", f"expected a finite number, got {F.describe(self.value)}")

    @classmethod
    def from_dict(cls, data, path):
        F.check_keys(data, path, ("metric", "op", "value"))
        metric = F.read_str(data, "metric", path)
        if metric not in METRIC_NAMES:
            raise LabError(F.join(path, "metric"), unknown_metric(metric))
        op = data.get("op")
        if op is None:
            raise LabError(F.join(path, "op"), f"required field is missing; use one of {', '.join(OPS)}")
        if not isinstance(op, str) or op not in OPS:  # a list or object is not hashable
            hint = " ('=' is written '==')" if op == "=" else ""
            raise LabError(F.join(path, "op"), f"{F.describe(op)} is not an operator{hint}; use one of {', '.join(OPS)}")
        value = F.read_number(data, "value", path)
        raw = data["value"]
        return cls(metric, op, raw if isinstance(raw, int) else value)

    def to_dict(self):
        return {"metric": self.metric, "op": self.op, "value": self.value}

    def describe(self):
        return f"{self.metric} {self.op} {_format_number(self.value)}"

    def holds(self, metrics):
        """True when the metric is defined and satisfies the comparison."""
        actual = metrics.get(self.metric)
        if actual is None or isinstance(actual, bool):
            return False
        try:
            if isinstance(actual, float) and math.isnan(actual):
                return False
            return bool(OPS[self.op](actual, self.value))
        except TypeError:
            return False

    @property
    def about_fleet(self):
        return self.metric in FLEET_METRICS


@dataclass(frozen=True)
class Star:
    """A label and the predicates that must all hold to earn it."""

    label: str
    when: tuple
    debrief: str = ""  # Markdown: why the fix works, shown once the star is earned ("" = none written)

    @classmethod
    def from_dict(cls, data, path):
        F.check_keys(data, path, ("label", "when", "debrief"))
        label = F.read_str(data, "label", path).strip()
        debrief = F.read_lines(data, "debrief", path, default="", max_chars=MAX_DEBRIEF).strip()
        items = F.read_list(data, "when", path)
        if not items:
            raise LabError(F.join(path, "when"), "a star needs at least one predicate, e.g. {\"metric\": \"slo_attainment\", \"op\": \">=\", \"value\": 0.95}")
        preds = []
        for i, item in enumerate(items):
            where = F.join(F.join(path, "when"), i)
            pred = Predicate.from_dict(item, where)
            for j, other in enumerate(preds):
                if other.metric == pred.metric and other.op == pred.op:
                    raise LabError(where, f"repeats the test {pred.metric} {pred.op} of when[{j}]; keep one")
            preds.append(pred)
        star = cls(label, tuple(preds), debrief)
        empty = star.contradiction()
        if empty:
            raise LabError(F.join(path, "when"), empty)
        return star

    def to_dict(self):
        out = {"label": self.label, "when": [p.to_dict() for p in self.when]}
        if self.debrief:
            out["debrief"] = self.debrief
        return out

    def describe(self):
        """'slo_attainment >= 0.95 and gpus <= 8'."""
        return " and ".join(p.describe() for p in self.when)

    def earned(self, metrics):
        return all(p.holds(metrics) for p in self.when)

    def explain(self, metrics):
        """[(predicate, actual value or None, holds)] for live star ticks in the UI."""
        return [(p, metrics.get(p.metric), p.holds(metrics)) for p in self.when]

    def contradiction(self):
        """A message when no value of some metric can satisfy all its predicates, else ''."""
        by_metric = {}
        for p in self.when:
            by_metric.setdefault(p.metric, []).append(p)
        for metric, preds in by_metric.items():
            if len(preds) < 2:
                continue
            lo, lo_open, hi, hi_open = -math.inf, False, math.inf, False
            for p in preds:
                v = p.value
                if p.op in (">", ">=", "==") and (v > lo or (v == lo and p.op == ">")):
                    lo, lo_open = v, p.op == ">"
                if p.op in ("<", "<=", "==") and (v < hi or (v == hi and p.op == "<")):
                    hi, hi_open = v, p.op == "<"
            if lo > hi or (lo == hi and (lo_open or hi_open)):
                tests = " and ".join(p.describe() for p in preds)
                return f"{tests} cannot all hold: no value of {metric} earns this star"
        return ""


def parse_stars(items, path="stars"):
    """A tuple of 1..MAX_STARS stars from their JSON list."""
    if not isinstance(items, list):
        raise LabError(path, f"expected a list of 1 to {MAX_STARS} stars, got {F.describe(items)}")
    mistakes = Mistakes()  # each star's first mistake, not only the first star's (lab check)
    stars = []
    for i, item in enumerate(items):
        star = mistakes.check(lambda: Star.from_dict(item, F.join(path, i)))
        if star is None:
            continue
        same = next((j for j, other in enumerate(stars) if other.label.casefold() == star.label.casefold()), None)
        if same is not None:
            mistakes.add(LabError(F.join(F.join(path, i), "label"),
                                  f"{F.describe(star.label)} is already the label of stars[{same}]; each star needs its own label"))
        stars.append(star)
    if not 1 <= len(items) <= MAX_STARS:
        mistakes.add(LabError(path, f"expected 1 to {MAX_STARS} stars, got {len(items)}"))
    mistakes.raise_any()
    return tuple(stars)


def evaluate_stars(mission_or_stars, metrics):
    """[earned?] for each star of a mission (or of a list of stars), given fleet metrics."""
    stars = getattr(mission_or_stars, "stars", mission_or_stars)
    return [star.earned(metrics) for star in stars]
