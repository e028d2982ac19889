"""What a plan may build: the constraints, the fleet shapes they allow, and each shape's sizes.

A `Config` is a fleet shape without its size: colocated (GPU type, tp, chunk) or split
(each pool's GPU type and tp, the link). A `Candidate` is a config with instance counts.
`levels(config, bounds, max_gpus)` walks a config's sizes from its analytic lower bound up:
one size per level for a colocated fleet; for a split fleet, every total of instances is a
level holding the splits nearest the ratio of the pools' loads (the bound's own split, and
one instance either way), so the walk stays on the boundary instead of the whole grid.
"""

import itertools
import json
import math
from dataclasses import dataclass

from lab.core.errors import LabError
from lab.core.spec import GPU_PRESETS, MAX_GPUS

__all__ = ["Constraints", "Config", "Candidate", "configs", "levels", "LAYOUTS", "SPLIT_SPREAD",
           "parse_list", "parse_number_list"]

LAYOUTS = ("colocated", "disaggregated")
TP_CHOICES = (1, 2, 4, 8)
# A split fleet's level tries the bound's prefill share of the total and this many instances either way.
SPLIT_SPREAD = 1


def parse_list(text, field, allowed):
    """'h100,a100' -> ('h100', 'a100'); each item one of `allowed`, else LabError naming the flag."""
    items = tuple(dict.fromkeys(p.strip().lower() for p in str(text).split(",") if p.strip()))
    if not items:
        raise LabError(field, f"expected a comma-separated list of {', '.join(allowed)}, got {str(text)[:40]!r}")
    for item in items:
        if item not in allowed:
            raise LabError(field, f"{item[:40]!r} is not one of {', '.join(allowed)}")
    return items


def parse_number_list(text, field, lo, hi, whole=True, allowed=None, zero_ok=False):
    """'0,512,2048' -> (0, 512, 2048) within [lo, hi] (0 too when `zero_ok`), else LabError."""
    out = []
    for part in (p.strip() for p in str(text).split(",")):
        if not part:
            continue
        try:
            value = float(part) if len(part) <= 20 else math.inf
        except ValueError:
            raise LabError(field, f"{part[:20]!r} is not a number") from None
        if not math.isfinite(value) or (whole and not value.is_integer()):
            raise LabError(field, f"{part[:20]!r} is not a {'whole ' if whole else ''}number")
        value = int(value) if whole else value
        if allowed is not None and value not in allowed:
            raise LabError(field, f"{part} is not one of {', '.join(map(str, allowed))}")
        if not (lo <= value <= hi or (zero_ok and value == 0)):
            raise LabError(field, f"{part} is outside {lo:g} to {hi:g}" + (" (or 0)" if zero_ok else ""))
        out.append(value)
    if not out:
        raise LabError(field, f"expected a comma-separated list of numbers, got {str(text)[:40]!r}")
    return tuple(dict.fromkeys(out))


@dataclass(frozen=True)
class Constraints:
    """What the search may build. `gpu_types`/`tps`/`links` None: the scenario's own (tp:
    per GPU type the smallest of 1, 2, 4, 8 whose weights fit and whose one-sequence decode
    step meets the per-token target, else the smallest that fits)."""

    target: float = 0.9
    max_gpus: int = 16
    layouts: tuple = LAYOUTS
    gpu_types: tuple = None
    tps: tuple = None
    chunks: tuple = (256, 512, 1024)
    links: tuple = None
    budget_usd_per_hour: float = None

    def __post_init__(self):
        if not (isinstance(self.target, (int, float)) and 0 < self.target <= 1):
            raise LabError("--target", f"expected a share above 0 and at most 1, got {self.target!r}")
        if not (isinstance(self.max_gpus, int) and 1 <= self.max_gpus <= MAX_GPUS):
            raise LabError("--max-gpus", f"expected a whole number of GPUs from 1 to {MAX_GPUS}, got {self.max_gpus!r}")
        if self.budget_usd_per_hour is not None and not (math.isfinite(self.budget_usd_per_hour) and self.budget_usd_per_hour > 0):
            raise LabError("--budget", f"expected dollars per hour above 0, got {self.budget_usd_per_hour!r}")
        if "disaggregated" in self.layouts and self.max_gpus < 2:
            raise LabError("--max-gpus", "a split fleet needs at least 2 GPUs: raise --max-gpus or use --layouts colocated")


@dataclass(frozen=True)
class Config:
    """A fleet shape. Colocated: `gpu`, `tp`, `chunk` (0 = whole prefill). Split: the
    prefill and decode pools' GPU type and tp, and the link's GB/s."""

    layout: str
    gpu: str = None
    tp: int = 1
    chunk: int = 0
    prefill_gpu: str = None
    prefill_tp: int = 1
    decode_gpu: str = None
    decode_tp: int = 1
    link: float = None

    def describe(self):
        if self.layout == "colocated":
            return f"colocated {self.gpu}{_tp(self.tp)}, " + (f"chunk {self.chunk}" if self.chunk else "whole prefill")
        pools = (f"{self.prefill_gpu}{_tp(self.prefill_tp)}" if (self.prefill_gpu, self.prefill_tp) == (self.decode_gpu, self.decode_tp)
                 else f"{self.prefill_gpu}{_tp(self.prefill_tp)} / {self.decode_gpu}{_tp(self.decode_tp)}")
        return f"split {pools}, link {self.link:g} GB/s"


def _tp(tp):
    return f" TP{tp}" if tp > 1 else ""


@dataclass(frozen=True)
class Candidate:
    """A config with its size in instances: (n,) colocated, (prefill, decode) split."""

    config: Config
    instances: tuple

    @property
    def gpus(self):
        c = self.config
        if c.layout == "colocated":
            return self.instances[0] * c.tp
        return self.instances[0] * c.prefill_tp + self.instances[1] * c.decode_tp

    def usd_per_hour(self, model):
        """The fleet's $/hour: its instances at `PoolCost.usd_per_hour` (the presets' prices,
        with the scenario's gpu_overrides), known before any run."""
        from lab.core.cost import PoolCost

        c = self.config
        if c.layout == "colocated":
            return self.instances[0] * PoolCost(model, c.gpu, c.tp).usd_per_hour
        return (self.instances[0] * PoolCost(model, c.prefill_gpu, c.prefill_tp).usd_per_hour
                + self.instances[1] * PoolCost(model, c.decode_gpu, c.decode_tp).usd_per_hour)

    def changes(self):
        """The dotted scenario changes that build this fleet (for `with_changes` and `--set`)."""
        c = self.config
        if c.layout == "colocated":
            return {"fleet.layout": "colocated", "model.gpu": c.gpu, "fleet.tp": c.tp,
                    "fleet.gpus": self.gpus, "fleet.chunk_tokens": c.chunk}
        return {"fleet.layout": "disaggregated", "fleet.prefill_gpu": c.prefill_gpu, "fleet.decode_gpu": c.decode_gpu,
                "fleet.prefill_tp": c.prefill_tp, "fleet.decode_tp": c.decode_tp,
                "fleet.prefill_gpus": self.instances[0] * c.prefill_tp, "fleet.decode_gpus": self.instances[1] * c.decode_tp,
                "fleet.link.gbytes_per_s": c.link}

    def set_args(self):
        """['fleet.layout="colocated"', ...]: `lab run --set` arguments that build this fleet."""
        return [f"{k}={json.dumps(v)}" for k, v in self.changes().items()]

    def describe(self):
        c = self.config
        if c.layout == "colocated":
            return f"{self.gpus} GPU{'s' if self.gpus != 1 else ''} {c.describe()}"
        p, d = self.instances[0] * c.prefill_tp, self.instances[1] * c.decode_tp
        return f"{p} + {d} GPUs {c.describe()}"

    def key(self):
        return (self.config, self.instances)


def _fits(model, gpu, tp):
    return model.kv_capacity_tokens is not None or model.derived_kv_capacity_tokens(gpu, tp) >= 1


def _one_token_meets(scenario, gpu, tp):
    from lab.core.cost import PoolCost

    target = scenario.slo.per_token_target_ms
    return target is None or PoolCost(scenario.model, gpu, tp).step_s(1, 1, 0) * 1000.0 <= target


def configs(scenario, constraints):
    """Every fleet shape the constraints allow, in a fixed order (layouts, GPU types, tp, chunk/link)."""
    model = scenario.model
    gpu_types = constraints.gpu_types or (model.gpu,)
    for gpu in gpu_types:
        if gpu not in GPU_PRESETS:
            raise LabError("--gpu-types", f"{gpu!r} is not one of {', '.join(GPU_PRESETS)}")

    def tps_for(gpu):
        if constraints.tps is not None:
            return tuple(tp for tp in constraints.tps if _fits(model, gpu, tp))
        # The smallest tp whose weights fit and whose one-sequence decode step meets the SLO's
        # per-token target (70B on two H100s reads its weights in 21 ms: over a 20 ms TPOT).
        fitting = [tp for tp in TP_CHOICES if _fits(model, gpu, tp)]
        quick = [tp for tp in fitting if _one_token_meets(scenario, gpu, tp)]
        return (quick or fitting)[:1]

    links = constraints.links or (scenario.fleet.link.gbytes_per_s,)
    out = []
    if "colocated" in constraints.layouts:
        for gpu in gpu_types:
            for tp, chunk in itertools.product(tps_for(gpu), constraints.chunks):
                if tp <= constraints.max_gpus:
                    out.append(Config("colocated", gpu=gpu, tp=tp, chunk=chunk))
    if "disaggregated" in constraints.layouts:
        for pgpu, dgpu in itertools.product(gpu_types, gpu_types):
            for ptp, dtp, link in itertools.product(tps_for(pgpu), tps_for(dgpu), links):
                if ptp + dtp <= constraints.max_gpus:
                    out.append(Config("disaggregated", prefill_gpu=pgpu, prefill_tp=ptp, decode_gpu=dgpu,
                                      decode_tp=dtp, link=link))
    if not out:
        tps = ", ".join(map(str, constraints.tps or TP_CHOICES))
        raise LabError("--tp", f"{scenario.model.llm} fits on no allowed GPU type at tensor parallelism {tps} within "
                               f"{constraints.max_gpus} GPUs: allow a larger --tp or more --max-gpus")
    return out


def levels(config, bounds, max_gpus):
    """The config's candidates level by level (each a list), smallest first, up to `max_gpus`.

    `bounds` is `sizing.lower_bounds`: whole instances per pool, and the pools' fractional
    loads (for a split fleet's ratio)."""
    if config.layout == "colocated":
        n = bounds.instances[0]
        while n * config.tp <= max_gpus:
            yield [Candidate(config, (n,))]
            n += 1
        return
    p0, d0 = bounds.instances
    share = bounds.loads[0] / (bounds.loads[0] + bounds.loads[1]) if sum(bounds.loads) > 0 else 0.5
    total = p0 + d0
    while True:
        centre = round(total * share)
        splits = sorted({min(max(centre + k, p0), total - d0) for k in range(-SPLIT_SPREAD, SPLIT_SPREAD + 1)})
        level = [Candidate(config, (p, total - p)) for p in splits]
        level = [c for c in level if c.gpus <= max_gpus]
        if not level:
            return
        yield level
        total += 1
