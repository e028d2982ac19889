"""The scenario: everything one simulation run needs, as frozen, validated dataclasses.

Its parts live in modules of their own (spec_limits.py: bounds and presets; spec_workload.py;
spec_fleet.py); the model, the SLO, the scenario and `--set` overrides are here, and every
part is imported from here.

A scenario is plain JSON (a mission's `scenario` object or a bare scenario file).
`Scenario.from_dict` validates every field and raises `LabError` naming its path;
`Scenario.to_dict` gives back JSON that loads to an equal scenario. Nothing here
does I/O: trace files are read by `workload.py`.
"""

import copy
import dataclasses
from dataclasses import dataclass

from . import fields as F
from .errors import WEIGHTS_DO_NOT_FIT, LabError, Mistakes
# The scenario's parts, each in a module of its own; `lab.core.spec` is where callers find
# every one of them (hence the names imported here and not used).
from .spec_fleet import Admission, Fleet, Link, PlanStep, Planner, Pool  # noqa: F401
from .spec_limits import (GPU_KEYS, GPU_PRESETS, LLM_PRESETS, MAX_DURATION_S, MAX_GPUS, MAX_REQUESTS,  # noqa: F401
                          MAX_TOKENS, MAX_TP, MAX_TRACE_TIME_S, REQUEST_MARGIN_SD, _frozen_dict_of)
from .spec_workload import MAX_HASH_IDS, LengthDist, Phase, Prefixes, Trace, Workload  # noqa: F401
from .stacks import DEFAULT_STACK, STACK_PRESETS

__all__ = [
    "LengthDist",
    "Phase",
    "Trace",
    "Prefixes",
    "Workload",
    "Model",
    "Link",
    "Admission",
    "Fleet",
    "Planner",
    "PlanStep",
    "Pool",
    "Slo",
    "Scenario",
    "LLM_PRESETS",
    "GPU_PRESETS",
    "apply_overrides",
    "parse_override",
]

# ---------------------------------------------------------------- model

@dataclass(frozen=True)
class Model:
    """How long a GPU step takes, and how much KV memory a token needs.

    `linear` uses the lab's illustrative constants; `roofline` derives step time
    from the LLM's shape and the GPU's bandwidth and compute.
    """

    cost: str = "linear"  # "calibrated" when the model names both `llm` and `gpu` (from_dict)
    llm: str = "llama3-8b"
    gpu: str = "h100"
    prefill_ms_per_token: float = 0.05
    decode_step_ms: float = 8.0
    decode_ms_per_seq: float = 0.25
    decode_ms_per_context_token: float = 0.00004
    efficiency: float = 0.5  # roofline: share of peak FLOP/s actually reached
    memory_utilization: float = 0.9  # share of HBM the server may use (vLLM's default)
    kv_capacity_tokens: int = None  # override (tokens per instance); default derived from memory
    attention: bool = False  # roofline: add attention FLOPs and chunks' re-read of earlier KV
    tp_efficiency: float = 0.9  # linear: an instance of tp GPUs runs tp x this as fast
    gpu_overrides: dict = None  # {gpu name: {preset key: number}} over GPU_PRESETS
    dtype: str = "bf16"  # weights and KV: "bf16" (2 bytes) or "fp8" (1 byte, FP8 tensor cores)
    stack: str = DEFAULT_STACK  # calibrated: the serving software's overheads (stacks.py)

    COSTS = ("linear", "roofline", "calibrated")
    DTYPES = ("bf16", "fp8")

    @classmethod
    def from_dict(cls, data, path="model"):
        F.check_keys(data, path, [f.name for f in dataclasses.fields(cls)])
        d = cls()
        # A model that names its LLM and its GPU is a real one: it gets the calibrated step
        # times unless it asks for another; otherwise the lab's illustrative constants.
        default_cost = "calibrated" if "llm" in data and "gpu" in data else d.cost
        model = cls(
            cost=F.read_choice(data, "cost", path, cls.COSTS, default=default_cost),
            llm=F.read_choice(data, "llm", path, tuple(LLM_PRESETS), default=d.llm),
            gpu=F.read_choice(data, "gpu", path, tuple(GPU_PRESETS), default=d.gpu),
            # Lower bounds keep every step measurably long, so no setting can make a run
            # take millions of near-zero steps.
            prefill_ms_per_token=F.read_number(data, "prefill_ms_per_token", path, default=d.prefill_ms_per_token, lo=0.0001, hi=100),
            decode_step_ms=F.read_number(data, "decode_step_ms", path, default=d.decode_step_ms, lo=0.1, hi=10_000),
            decode_ms_per_seq=F.read_number(data, "decode_ms_per_seq", path, default=d.decode_ms_per_seq, lo=0, hi=1_000),
            decode_ms_per_context_token=F.read_number(data, "decode_ms_per_context_token", path, default=d.decode_ms_per_context_token, lo=0, hi=1),
            efficiency=F.read_number(data, "efficiency", path, default=d.efficiency, lo=0, hi=1, lo_open=True),
            memory_utilization=F.read_number(data, "memory_utilization", path, default=d.memory_utilization, lo=0, hi=1, lo_open=True),
            kv_capacity_tokens=F.read_int(data, "kv_capacity_tokens", path, default=None, lo=1, hi=100_000_000),
            attention=F.read_bool(data, "attention", path, default=d.attention),
            tp_efficiency=F.read_number(data, "tp_efficiency", path, default=d.tp_efficiency, lo=0, hi=1, lo_open=True),
            gpu_overrides=_read_gpu_overrides(data, path),
            dtype=F.read_choice(data, "dtype", path, cls.DTYPES, default=d.dtype),
            stack=F.read_choice(data, "stack", path, tuple(STACK_PRESETS), default=d.stack),
        )
        return model

    @property
    def reads_attention(self):
        """Whether steps carry attention terms: the calibrated model always, the roofline with
        `attention` on (engine.py logs the terms only then)."""
        return self.cost == "calibrated" or (self.cost == "roofline" and self.attention)

    @property
    def bytes_per_value(self):
        return 1 if self.dtype == "fp8" else self.shape["bytes_per_value"]

    def peak_tflops(self, spec):
        """The dense peak a step's matrix multiplies run at on GPU `spec`, in this dtype."""
        return spec["fp8_tflops"] if self.dtype == "fp8" else spec["peak_tflops"]

    @property
    def shape(self):
        return LLM_PRESETS[self.llm]

    @property
    def hardware(self):
        return self.gpu_spec(self.gpu)

    def gpu_spec(self, name):
        """GPU `name`'s preset with this scenario's overrides applied."""
        spec = dict(GPU_PRESETS[name])
        spec.update((self.gpu_overrides or {}).get(name, {}))
        return spec

    @property
    def kv_bytes_per_token(self):
        s = self.shape
        return 2 * s["layers"] * s["kv_heads"] * s["head_dim"] * self.bytes_per_value

    @property
    def weight_bytes(self):
        return self.shape["params"] * self.bytes_per_value

    def derived_kv_capacity_tokens(self, gpu=None, tp=1):
        """KV tokens one instance of `tp` GPUs of type `gpu` holds: tp x usable HBM - weights."""
        hbm = self.gpu_spec(gpu or self.gpu)["memory_gb"] * 1e9
        usable = tp * hbm * self.memory_utilization - self.weight_bytes
        return int(usable // self.kv_bytes_per_token)

    def kv_tokens_per_instance(self, gpu=None, tp=1):
        if self.kv_capacity_tokens is not None:
            return self.kv_capacity_tokens
        return self.derived_kv_capacity_tokens(gpu, tp)

    @property
    def kv_tokens_per_gpu(self):
        """One tp-1 instance of `model.gpu` (the whole fleet's capacity before tensor parallelism)."""
        return self.kv_tokens_per_instance()

    def to_dict(self):
        out = _frozen_dict_of(self)
        for key in ("dtype", "stack"):  # the defaults: keep older scenarios' JSON as it was
            if out.get(key) == getattr(Model, key):
                del out[key]
        return out


def _read_gpu_overrides(data, path):
    if data.get("gpu_overrides") is None:
        return None
    raw = F.read_dict(data, "gpu_overrides", path)
    where = F.join(path, "gpu_overrides")
    F.check_keys(raw, where, tuple(GPU_PRESETS))
    out = {}
    for name, values in raw.items():
        gpu_where = F.join(where, name)
        if not isinstance(values, dict):
            raise LabError(gpu_where, f"expected an object of preset values, got {F.describe(values)}")
        F.check_keys(values, gpu_where, GPU_KEYS)
        # Every preset value is a positive size, rate, power or price.
        out[name] = {key: F.read_number(values, key, gpu_where, lo=0, hi=1e9, lo_open=True) for key in values}
    spec = dict(GPU_PRESETS)
    for name, values in out.items():
        merged = {**spec[name], **values}
        if merged["idle_w"] >= merged["tdp_w"]:
            raise LabError(F.join(F.join(where, name), "idle_w"), f"{merged['idle_w']:g} W must be below tdp_w ({merged['tdp_w']:g} W)")
    return out


@dataclass(frozen=True)
class Slo:
    """The latency targets; a request meets the SLO when it meets every one set."""

    ttft_s: float = None
    tpot_ms: float = None
    max_gap_ms: float = None

    @classmethod
    def from_dict(cls, data, path="slo"):
        F.check_keys(data, path, ("ttft_s", "tpot_ms", "max_gap_ms"))
        return cls(
            F.read_number(data, "ttft_s", path, default=None, lo=0, hi=86_400, lo_open=True),
            F.read_number(data, "tpot_ms", path, default=None, lo=0, hi=1e7, lo_open=True),
            F.read_number(data, "max_gap_ms", path, default=None, lo=0, hi=1e7, lo_open=True),
        )

    @property
    def per_token_target_ms(self):
        """The one per-token target a single step is judged against (the canvas's "over
        target" steps, the slow-step counts, the gap plots' target line): `max_gap_ms` if
        set (a step longer than it is a gap over the SLO for every sequence in it), else
        `tpot_ms` (a step longer than it only pushes those sequences' averages up), else None.
        """
        return self.max_gap_ms if self.max_gap_ms is not None else self.tpot_ms

    @property
    def per_token_target_name(self):
        """Which term `per_token_target_ms` is: "max_gap_ms", "tpot_ms" or None."""
        return "max_gap_ms" if self.max_gap_ms is not None else ("tpot_ms" if self.tpot_ms is not None else None)

    def to_dict(self):
        return _frozen_dict_of(self)


# ---------------------------------------------------------------- scenario

@dataclass(frozen=True)
class Scenario:
    workload: Workload
    fleet: Fleet
    model: Model = Model()
    slo: Slo = Slo()
    seed: int = 0
    drain_s: float = 120.0  # after arrivals stop, simulate at most this long (overload cap)

    KEYS = ("workload", "fleet", "model", "slo", "seed", "drain_s")

    @classmethod
    def from_dict(cls, data, path="", base_dir="", roots=None):
        """`roots`: the folders a trace may lie in (default: `base_dir` only; "" = working directory)."""
        if not isinstance(data, dict):
            raise LabError(path, f"expected a scenario object, got {F.describe(data)}")
        # The parts are read independently, so a file with a mistake in its workload and another
        # in its SLO hears of both in one run; the checks across parts (__post_init__) need them all.
        mistakes = Mistakes()
        mistakes.check(lambda: F.check_keys(data, path, cls.KEYS))
        parts = {
            "workload": mistakes.check(lambda: Workload.from_dict(F.read_dict(data, "workload", path),
                                                                  F.join(path, "workload"), base_dir, roots)),
            "fleet": mistakes.check(lambda: Fleet.from_dict(F.read_dict(data, "fleet", path), F.join(path, "fleet"))),
            "model": mistakes.check(lambda: Model.from_dict(F.read_dict(data, "model", path, default={}),
                                                            F.join(path, "model"))),
            "slo": mistakes.check(lambda: Slo.from_dict(F.read_dict(data, "slo", path, default={}), F.join(path, "slo"))),
            "seed": mistakes.check(lambda: F.read_int(data, "seed", path, default=0, lo=0, hi=2**63 - 1)),
            "drain_s": mistakes.check(lambda: F.read_number(data, "drain_s", path, default=120.0, lo=0,
                                                            hi=MAX_DURATION_S)),
        }
        mistakes.raise_any()
        return cls(**parts)

    def __post_init__(self):
        _check_pools(self)
        _check_admission(self)
        if self.fleet.planner is not None:
            self.fleet.planner.check(self.fleet, self.workload)

    def pools(self):
        """The fleet's pools in GPU order: one colocated pool, or the prefill then the decode pool."""
        f, m = self.fleet, self.model
        if f.layout == "colocated":
            return (Pool("colocated", f.gpus, f.tp, m.gpu, f.power_cap_w, 0, "fleet.tp", "model.gpu", "fleet.power_cap_w"),)
        return (
            Pool("prefill", f.prefill_gpus, f.prefill_tp, f.prefill_gpu or m.gpu, f.prefill_power_cap_w, 0,
                 "fleet.prefill_tp", "fleet.prefill_gpu", "fleet.prefill_power_cap_w"),
            Pool("decode", f.decode_gpus, f.decode_tp, f.decode_gpu or m.gpu, f.decode_power_cap_w, f.prefill_gpus,
                 "fleet.decode_tp", "fleet.decode_gpu", "fleet.decode_power_cap_w"),
        )

    @property
    def base_dir(self):
        return self.workload.trace.base_dir if self.workload.trace else ""

    @property
    def trace_roots(self):
        return self.workload.trace.roots if self.workload.trace else None

    def to_dict(self):
        return _frozen_dict_of(self)

    def with_changes(self, changes):
        """A new scenario with dotted-path changes applied, e.g. {"fleet.gpus": 5}."""
        raw = self.to_dict()
        for dotted, value in changes.items():
            _set_dotted(raw, dotted, value)
        return Scenario.from_dict(raw, base_dir=self.base_dir, roots=self.trace_roots)


def _check_admission(scenario):
    """The admission rule compares a prediction with the SLO's TTFT target: it needs one."""
    if scenario.fleet.admission is not None and scenario.slo.ttft_s is None:
        raise LabError(
            "fleet.admission.reject_when",
            f"{scenario.fleet.admission.reject_when!r} compares each arrival's predicted TTFT with the SLO's TTFT "
            "target, and slo sets no ttft_s: set slo.ttft_s, or turn admission off (null or \"off\")",
        )


def _check_pools(scenario):
    """What needs both the fleet and the model: the weights fit each pool's instance, caps lie
    between a GPU's idle and full power."""
    model = scenario.model
    for pool in scenario.pools():
        spec = model.gpu_spec(pool.gpu)
        if model.kv_capacity_tokens is None and model.derived_kv_capacity_tokens(pool.gpu, pool.tp) < 1:
            weights_gb = model.weight_bytes / 1e9
            usable_gb = pool.tp * spec["memory_gb"] * model.memory_utilization
            raise LabError(
                pool.tp_key,
                f"{model.llm} ({weights_gb:.0f} GB of weights) does not fit on {pool.tp} {pool.gpu} "
                f"({usable_gb:.0f} GB usable at memory_utilization {model.memory_utilization:g}), leaving no memory "
                f"for the KV cache: raise {pool.tp_key.split('.')[-1]} or pick a GPU with more memory",
                WEIGHTS_DO_NOT_FIT,
                {"llm": model.llm, "weights_gb": weights_gb, "tp": pool.tp, "gpu": pool.gpu, "usable_gb": usable_gb},
            )
        _check_prefix_share(scenario, pool)
        cap = pool.power_cap_w
        if cap is not None and not spec["idle_w"] < cap <= spec["tdp_w"]:
            raise LabError(pool.cap_key, f"{cap:g} W is outside {pool.gpu}'s range: above its idle {spec['idle_w']:g} W and at most its TDP {spec['tdp_w']:g} W")


def _check_prefix_share(scenario, pool):
    """per_gpu prefix caching: the cache holds at least one block and leaves KV memory."""
    from .prefix_cache import cache_blocks, kv_taken_tokens  # standard library only, no cycle at import

    fleet = scenario.fleet
    if fleet.prefix_cache == "off":
        return
    block = scenario.workload.prefix_block_tokens
    block_mb = block * scenario.model.kv_bytes_per_token / 1e6
    if fleet.prefix_cache == "shared":
        if pool.role != "decode" and cache_blocks(scenario, fleet.prefix_setting("prefix_pool_gb")) < 1:
            raise LabError("fleet.prefix_pool_gb", f"{fleet.prefix_setting('prefix_pool_gb'):g} GB holds no block of {block:,} "
                                                   f"tokens ({block_mb:,.1f} MB each): use more")
        return
    if pool.role == "decode":
        return  # decode instances never prefill, so they keep no cache
    taken = kv_taken_tokens(scenario, pool)
    gb = fleet.prefix_setting("prefix_cache_gb")
    if taken < block:
        raise LabError("fleet.prefix_cache_gb", f"{gb:g} GB per GPU holds no block of {block:,} tokens ({block_mb:,.1f} MB "
                                                f"each): use more")
    kv = scenario.model.kv_tokens_per_instance(pool.gpu, pool.tp)
    if kv - taken < 1:
        raise LabError("fleet.prefix_cache_gb", f"{gb:g} GB per GPU takes all of a {pool.role} instance's KV memory "
                                                f"({kv:,} tokens, {kv * scenario.model.kv_bytes_per_token / 1e9:,.1f} GB): use less")


# ---------------------------------------------------------------- overrides

def parse_override(text):
    """'fleet.gpus=5' -> ("fleet.gpus", 5). Values are JSON when they parse, else text."""
    if "=" not in text:
        raise LabError("--set", f"{text!r} is not of the form dotted.path=value")
    key, raw = text.split("=", 1)
    key = key.strip()
    if not key or any(not part for part in key.split(".")):
        raise LabError("--set", f"{text!r} has an empty field name")
    try:
        value = F.loads(raw)
    except (ValueError, RecursionError):
        value = raw
    return key, value


def _set_dotted(raw, dotted, value):
    node = raw
    parts = dotted.split(".")
    for i, part in enumerate(parts[:-1]):
        if isinstance(node, list):  # a list's item by its number (fleet.planner.schedule.0.at_s)
            node = _list_item(node, part, dotted)
            continue
        child = node.get(part)
        if child is None:
            child = node[part] = {}
        if not isinstance(child, (dict, list)):
            raise LabError(".".join(parts[: i + 1]), f"is {F.describe(child)}, not an object, so {dotted!r} cannot be set")
        node = child
    if isinstance(node, list):
        node[_index(node, parts[-1], dotted)] = value
    else:
        node[parts[-1]] = value


def _index(items, part, dotted):
    if not part.isdigit() or int(part) >= len(items):
        raise LabError(dotted, f"{part!r} is not an item of a list of {len(items)}")
    return int(part)


def _list_item(items, part, dotted):
    item = items[_index(items, part, dotted)]
    if not isinstance(item, dict):
        raise LabError(dotted, f"item {part} is {F.describe(item)}, not an object")
    return item


def apply_overrides(raw, overrides):
    """Apply ["a.b=1", ...] to a scenario dict (a deep copy is returned)."""
    raw = copy.deepcopy(raw)
    for text in overrides:
        key, value = parse_override(text)
        _set_dotted(raw, key, value)
    return raw
