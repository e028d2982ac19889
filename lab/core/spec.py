"""The scenario: everything one simulation run needs, as frozen, validated dataclasses.

A scenario is plain JSON (a mission's `scenario` object or a bare scenario file).
`Scenario.from_dict` validates every field and raises `LabError` naming its path;
`Scenario.to_dict` gives back JSON that loads to an equal scenario. Nothing here
does I/O: trace files are read by `workload.py`.
"""

import copy
import dataclasses
import math
from dataclasses import dataclass, field

from . import fields as F
from .errors import WEIGHTS_DO_NOT_FIT, WHOLE_INSTANCES, LabError
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

# Hard limits that keep every run bounded in time and memory (README "Scale"): 2**20
# requests (a million, with the room for chance the rate check leaves), 256 GPUs, a week
# of arrivals; the engine's step bound (engine.MAX_STEPS)
# caps what a run can log whatever these allow.
MAX_REQUESTS = 1_048_576
MAX_GPUS = 256
MAX_DURATION_S = 604_800.0
MAX_TOKENS = 1_000_000
# Trace arrival times (and trace.start_s) in seconds; wall-clock timestamps are ~1.7e9.
# With time_scale <= 1000 every scaled arrival stays a finite float.
MAX_TRACE_TIME_S = 1e12
# The request cap is checked on the expected count plus this many standard deviations
# of the Poisson count, so a random draw cannot cross it during a run.
REQUEST_MARGIN_SD = 10

# Model shapes: KV bytes per token = 2 (K and V) x layers x KV heads x head dim x bytes.
# `hidden` sizes the tensor-parallel all-reduces; `heads` (query heads) the attention FLOPs.
# `bytes_per_value` is BF16's; `model.dtype: "fp8"` stores weights and KV in one byte.
LLM_PRESETS = {
    "llama3-8b": {"params": 8.03e9, "layers": 32, "kv_heads": 8, "head_dim": 128, "bytes_per_value": 2,
                  "hidden": 4096, "heads": 32},
    "llama3-70b": {"params": 70.6e9, "layers": 80, "kv_heads": 8, "head_dim": 128, "bytes_per_value": 2,
                   "hidden": 8192, "heads": 64},
    # Splitwise's model (its calibration rows): the 70B shape with Llama 2's smaller vocabulary.
    "llama2-70b": {"params": 69.0e9, "layers": 80, "kv_heads": 8, "head_dim": 128, "bytes_per_value": 2,
                   "hidden": 8192, "heads": 64},
}
# GPUs: HBM capacity (GB), HBM bandwidth (TB/s), dense BF16 peak (TFLOP/s), NVLink
# bandwidth for tensor-parallel all-reduces (GB/s) and each all-reduce's fixed latency (us),
# board power at full load and idle (W), and an hourly price (USD). Power and prices are
# illustrative defaults, not quotes: a scenario overrides them with `model.gpu_overrides`.
# `fp8_tflops` is the dense FP8 peak (NVIDIA's H100 and H200 datasheets: 1,979, half the
# sparse figure); the A100 has no FP8 tensor cores, so FP8 weights are widened and
# multiplied at its BF16 peak there. Two measured figures serve the calibrated model only
# (docs/calibration.md): `stream_share`, the share of `hbm_tb_s` a STREAM triad reaches, and
# `nccl_latency_scale`, a small all-reduce's time relative to the H100's (the Azure
# AI-benchmarking-guide's NCCL bus bandwidth at 1 MB on 8 GPUs: 43.7, 36.2, 53.0 GB/s).
GPU_PRESETS = {
    "h100": {"memory_gb": 80.0, "hbm_tb_s": 3.35, "peak_tflops": 989.0, "fp8_tflops": 1979.0,
             "nvlink_gbytes_per_s": 450.0, "allreduce_latency_us": 10.0, "tdp_w": 700.0, "idle_w": 100.0,
             "usd_per_hour": 2.50, "stream_share": 0.89, "nccl_latency_scale": 1.0},
    "a100": {"memory_gb": 80.0, "hbm_tb_s": 2.039, "peak_tflops": 312.0, "fp8_tflops": 312.0,
             "nvlink_gbytes_per_s": 300.0, "allreduce_latency_us": 10.0, "tdp_w": 400.0, "idle_w": 60.0,
             "usd_per_hour": 1.30, "stream_share": 0.83, "nccl_latency_scale": 1.21},
    "h200": {"memory_gb": 141.0, "hbm_tb_s": 4.8, "peak_tflops": 989.0, "fp8_tflops": 1979.0,
             "nvlink_gbytes_per_s": 450.0, "allreduce_latency_us": 10.0, "tdp_w": 700.0, "idle_w": 100.0,
             "usd_per_hour": 3.50, "stream_share": 0.86, "nccl_latency_scale": 0.83},
}
GPU_KEYS = tuple(GPU_PRESETS["h100"])
MAX_TP = 8  # GPUs one instance spans (one NVLink domain)


def _frozen_dict_of(obj):
    """`to_dict` for our dataclasses: drop None so JSON stays minimal and reloadable."""
    out = {}
    for f in dataclasses.fields(obj):
        if f.metadata.get("derived"):
            continue
        value = getattr(obj, f.name)
        if value is None or value == ():
            continue
        if dataclasses.is_dataclass(value):
            value = value.to_dict()
        elif isinstance(value, tuple):
            value = [v.to_dict() if dataclasses.is_dataclass(v) else list(v) if isinstance(v, tuple) else v for v in value]
        out[f.name] = value
    return out


# ---------------------------------------------------------------- workload

@dataclass(frozen=True)
class LengthDist:
    """A token-length distribution: fixed, uniform, lognormal or a weighted mix."""

    dist: str
    value: int = None  # fixed
    low: int = None  # uniform (inclusive)
    high: int = None
    median: float = None  # lognormal, clipped to [min, max]
    sigma: float = None
    min: int = None
    max: int = None
    components: tuple = ()  # mix: ((weight, LengthDist), ...)

    KINDS = ("fixed", "uniform", "lognormal", "mix")

    @classmethod
    def from_dict(cls, data, path):
        if F.is_number(data):
            # Shorthand: a bare number means a fixed length.
            data = {"dist": "fixed", "value": data}
        F.check_keys(data, path, ("dist", "value", "low", "high", "median", "sigma", "min", "max", "components"))
        kind = F.read_choice(data, "dist", path, cls.KINDS)
        allowed = {
            "fixed": {"dist", "value"},
            "uniform": {"dist", "low", "high"},
            "lognormal": {"dist", "median", "sigma", "min", "max"},
            "mix": {"dist", "components"},
        }[kind]
        for key in data:
            if key not in allowed:
                raise LabError(F.join(path, key), f"not used by dist {kind!r}; it takes: {', '.join(sorted(allowed))}")
        if kind == "fixed":
            return cls(kind, value=F.read_int(data, "value", path, lo=1, hi=MAX_TOKENS))
        if kind == "uniform":
            low = F.read_int(data, "low", path, lo=1, hi=MAX_TOKENS)
            high = F.read_int(data, "high", path, lo=1, hi=MAX_TOKENS)
            if high < low:
                raise LabError(F.join(path, "high"), f"{high} is below low ({low})")
            return cls(kind, low=low, high=high)
        if kind == "lognormal":
            median = F.read_number(data, "median", path, lo=1, hi=MAX_TOKENS)
            sigma = F.read_number(data, "sigma", path, lo=0, hi=5)
            lo = F.read_int(data, "min", path, default=1, lo=1, hi=MAX_TOKENS)
            hi = F.read_int(data, "max", path, default=MAX_TOKENS, lo=1, hi=MAX_TOKENS)
            if hi < lo:
                raise LabError(F.join(path, "max"), f"{hi} is below min ({lo})")
            return cls(kind, median=median, sigma=sigma, min=lo, max=hi)
        items = F.read_list(data, "components", path)
        if not items:
            raise LabError(F.join(path, "components"), "a mix needs at least one component")
        comps = []
        for i, item in enumerate(items):
            where = F.join(F.join(path, "components"), i)
            F.check_keys(item, where, ("weight", "length"))
            weight = F.read_number(item, "weight", where, lo=0, hi=1e9, lo_open=True)
            if item.get("length") is None:
                raise LabError(F.join(where, "length"), "required field is missing")
            sub = cls.from_dict(item["length"], F.join(where, "length"))  # a number or a dist
            if sub.dist == "mix":
                raise LabError(F.join(where, "length.dist"), "a mix cannot contain another mix")
            comps.append((weight, sub))
        return cls(kind, components=tuple(comps))

    def to_dict(self):
        if self.dist == "mix":
            return {"dist": "mix", "components": [{"weight": w, "length": d.to_dict()} for w, d in self.components]}
        return {k: v for k, v in _frozen_dict_of(self).items() if k != "components" or v}

    def mean_estimate(self):
        """A rough mean, used only for sizing hints and sanity checks."""
        if self.dist == "fixed":
            return float(self.value)
        if self.dist == "uniform":
            return (self.low + self.high) / 2.0
        if self.dist == "lognormal":
            return min(max(self.median * math.exp(self.sigma**2 / 2), self.min), self.max)
        total = math.fsum(w for w, _ in self.components)
        return math.fsum(w * d.mean_estimate() for w, d in self.components) / total


@dataclass(frozen=True)
class Phase:
    """From `start_s` until the next phase (or the end), arrivals use these settings."""

    start_s: float
    rate: float = None
    prompt_tokens: LengthDist = None
    output_tokens: LengthDist = None

    @classmethod
    def from_dict(cls, data, path):
        F.check_keys(data, path, ("start_s", "rate", "prompt_tokens", "output_tokens"))
        start = F.read_number(data, "start_s", path, lo=0, hi=MAX_DURATION_S)
        rate = F.read_number(data, "rate", path, default=None, lo=0, hi=10_000)
        prompt = data.get("prompt_tokens")
        output = data.get("output_tokens")
        return cls(
            start,
            rate,
            LengthDist.from_dict(prompt, F.join(path, "prompt_tokens")) if prompt is not None else None,
            LengthDist.from_dict(output, F.join(path, "output_tokens")) if output is not None else None,
        )

    def to_dict(self):
        return _frozen_dict_of(self)


@dataclass(frozen=True)
class Trace:
    """Replay a request trace CSV instead of generating arrivals.

    `path` is relative to the scenario/mission file's folder (`base_dir`) and must
    resolve inside one of `roots` ("" is the working directory); see
    workload.resolve_trace_path. `start_s` and `duration_s` cut a window out of the
    trace (re-based to 0); `time_scale` stretches (>1) or compresses (<1) inter-arrival times.
    """

    path: str
    start_s: float = 0.0
    duration_s: float = None
    time_scale: float = 1.0
    base_dir: str = field(default="", compare=False, metadata={"derived": True})
    roots: tuple = field(default=("",), compare=False, metadata={"derived": True})

    @classmethod
    def from_dict(cls, data, path, base_dir="", roots=None):
        if isinstance(data, str):
            data = {"path": data}
        F.check_keys(data, path, ("path", "start_s", "duration_s", "time_scale"))
        return cls(
            F.read_str(data, "path", path),
            F.read_number(data, "start_s", path, default=0.0, lo=0, hi=MAX_TRACE_TIME_S),
            F.read_number(data, "duration_s", path, default=None, lo=0, hi=MAX_DURATION_S, lo_open=True),
            F.read_number(data, "time_scale", path, default=1.0, lo=0.001, hi=1000),
            base_dir,
            tuple(roots) if roots is not None else (base_dir,),
        )

    def to_dict(self):
        return _frozen_dict_of(self)


@dataclass(frozen=True)
class Prefixes:
    """Shared prompt prefixes of a generated workload (README "Prefix caching").

    A new conversation starts with one of `systems` system prompts of `system_tokens`
    (with probability `system_share`), then its own message (`workload.prompt_tokens`). An
    arrival is, with probability `followup_share`, the next turn of one of the
    `open_conversations` most recent conversations instead: its prompt is that
    conversation's previous prompt and answer plus a new message (`followup_tokens`,
    default the workload's prompt_tokens). A turn that would pass `max_prompt_tokens`
    starts a new conversation instead.
    """

    system_tokens: int = 0
    system_share: float = 1.0
    systems: int = 1
    followup_share: float = 0.0
    open_conversations: int = 16
    followup_tokens: LengthDist = None
    max_prompt_tokens: int = 32_768

    KEYS = ("system_tokens", "system_share", "systems", "followup_share", "open_conversations",
            "followup_tokens", "max_prompt_tokens")

    @classmethod
    def from_dict(cls, data, path):
        F.check_keys(data, path, cls.KEYS)
        d = cls()
        followup = data.get("followup_tokens")
        out = cls(
            F.read_int(data, "system_tokens", path, default=d.system_tokens, lo=0, hi=MAX_TOKENS),
            F.read_number(data, "system_share", path, default=d.system_share, lo=0, hi=1),
            F.read_int(data, "systems", path, default=d.systems, lo=1, hi=10_000),
            F.read_number(data, "followup_share", path, default=d.followup_share, lo=0, hi=1),
            F.read_int(data, "open_conversations", path, default=d.open_conversations, lo=1, hi=100_000),
            None if followup is None else LengthDist.from_dict(followup, F.join(path, "followup_tokens")),
            F.read_int(data, "max_prompt_tokens", path, default=d.max_prompt_tokens, lo=1, hi=MAX_TOKENS),
        )
        if out.system_tokens >= out.max_prompt_tokens:
            raise LabError(F.join(path, "system_tokens"), f"{out.system_tokens:,} leaves no room for a message under "
                                                          f"max_prompt_tokens ({out.max_prompt_tokens:,}): use fewer")
        return out

    def to_dict(self):
        return _frozen_dict_of(self)


# Most block hashes one run's requests may carry in all (prompt tokens / prefix_block_tokens,
# summed): bounds the memory a tiny block size on long prompts could take.
MAX_HASH_IDS = 20_000_000


@dataclass(frozen=True)
class Workload:
    rate: float = None  # requests per second (Poisson); None only with a trace
    duration_s: float = 60.0
    prompt_tokens: LengthDist = None
    output_tokens: LengthDist = None
    phases: tuple = ()
    trace: Trace = None
    prefix_block_tokens: int = 512  # prompt tokens one block hash covers (Mooncake: 512)
    prefixes: Prefixes = None  # shared prefixes of generated requests; None = none

    @classmethod
    def from_dict(cls, data, path="workload", base_dir="", roots=None):
        F.check_keys(data, path, ("rate", "duration_s", "prompt_tokens", "output_tokens", "phases", "trace",
                                  "prefix_block_tokens", "prefixes"))
        trace = data.get("trace")
        block = F.read_int(data, "prefix_block_tokens", path, default=512, lo=16, hi=65_536)
        if trace is not None:
            for key in ("rate", "prompt_tokens", "output_tokens", "phases", "prefixes"):
                if data.get(key) is not None:
                    raise LabError(F.join(path, key), "a trace workload takes its arrivals and lengths from the trace; remove this field or the trace")
            trace = Trace.from_dict(trace, F.join(path, "trace"), base_dir, roots)
            duration = F.read_number(data, "duration_s", path, default=None, lo=0, hi=MAX_DURATION_S, lo_open=True)
            return cls(rate=None, duration_s=duration, trace=trace, prefix_block_tokens=block)
        rate = F.read_number(data, "rate", path, lo=0, hi=10_000)
        duration = F.read_number(data, "duration_s", path, default=60.0, lo=0, hi=MAX_DURATION_S, lo_open=True)
        prompt = LengthDist.from_dict(data.get("prompt_tokens"), F.join(path, "prompt_tokens")) if "prompt_tokens" in data else None
        output = LengthDist.from_dict(data.get("output_tokens"), F.join(path, "output_tokens")) if "output_tokens" in data else None
        if prompt is None:
            raise LabError(F.join(path, "prompt_tokens"), "required field is missing")
        if output is None:
            raise LabError(F.join(path, "output_tokens"), "required field is missing")
        phases = []
        for i, item in enumerate(F.read_list(data, "phases", path, default=[])):
            phase = Phase.from_dict(item, F.join(F.join(path, "phases"), i))
            if phases and phase.start_s <= phases[-1].start_s:
                raise LabError(F.join(F.join(F.join(path, "phases"), i), "start_s"), f"{phase.start_s:g} must be after the previous phase's start ({phases[-1].start_s:g})")
            if phase.start_s >= duration:
                raise LabError(F.join(F.join(F.join(path, "phases"), i), "start_s"), f"{phase.start_s:g} is not before workload.duration_s ({duration:g})")
            phases.append(phase)
        prefixes = data.get("prefixes")
        if prefixes is not None:
            prefixes = Prefixes.from_dict(F.read_dict(data, "prefixes", path), F.join(path, "prefixes"))
        wl = cls(rate, duration, prompt, output, tuple(phases), prefix_block_tokens=block, prefixes=prefixes)
        wl._check_request_count(path)
        return wl

    def _check_request_count(self, path):
        """Reject a workload whose Poisson draw could cross MAX_REQUESTS during a run."""
        expected = self.expected_requests()
        worst = expected + REQUEST_MARGIN_SD * math.sqrt(expected)
        if worst <= MAX_REQUESTS:
            return
        # Name the rate that contributes most: the base rate or one phase's own rate
        # (a phase without a rate uses the base rate).
        owners = {p.start_s: F.join(F.join(F.join(path, "phases"), i), "rate") for i, p in enumerate(self.phases) if p.rate is not None}
        share = {}
        for start, end, rate, _, _ in self.segments():
            where = owners.get(start, F.join(path, "rate"))
            share[where] = share.get(where, 0.0) + (end - start) * rate
        owner = max(share, key=share.get)
        raise LabError(
            owner,
            f"about {expected:,.0f} requests expected over the run (rate x length of each phase); with room for chance "
            f"({REQUEST_MARGIN_SD} standard deviations, up to {worst:,.0f}) that must stay under the limit of "
            f"{MAX_REQUESTS:,} requests: lower the rate or the duration",
        )

    def segments(self):
        """[(start, end, rate, prompt dist, output dist)] covering [0, duration)."""
        points = [(0.0, self.rate, self.prompt_tokens, self.output_tokens)]
        for p in self.phases:
            _, rate, prompt, output = points[-1]
            points.append((p.start_s, p.rate if p.rate is not None else self.rate,
                           p.prompt_tokens or self.prompt_tokens, p.output_tokens or self.output_tokens))
        if len(points) > 1 and points[1][0] == 0.0:
            points.pop(0)
        out = []
        for i, (start, rate, prompt, output) in enumerate(points):
            end = points[i + 1][0] if i + 1 < len(points) else self.duration_s
            out.append((start, end, rate, prompt, output))
        return out

    def expected_requests(self):
        if self.trace is not None:
            return 0.0
        return math.fsum((end - start) * rate for start, end, rate, _, _ in self.segments())

    def to_dict(self):
        out = _frozen_dict_of(self)
        if out.get("prefix_block_tokens") == 512:
            del out["prefix_block_tokens"]  # the default: keep older scenarios' JSON as it was
        return out


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


# ---------------------------------------------------------------- fleet

@dataclass(frozen=True)
class Link:
    """The prefill->decode interconnect that carries each prompt's KV cache."""

    gbytes_per_s: float = 50.0  # GB/s (bytes, not bits); 400 Gb/s InfiniBand = 50
    sharing: str = "fifo"  # fifo: one shared link, transfers queue; independent: each gets full bandwidth
    layerwise: bool = False  # stream layer by layer while the prefill runs

    SHARING = ("fifo", "independent")

    @classmethod
    def from_dict(cls, data, path="fleet.link"):
        F.check_keys(data, path, ("gbytes_per_s", "sharing", "layerwise"))
        d = cls()
        return cls(
            F.read_number(data, "gbytes_per_s", path, default=d.gbytes_per_s, lo=0.001, hi=100_000),
            F.read_choice(data, "sharing", path, cls.SHARING, default=d.sharing),
            F.read_bool(data, "layerwise", path, default=d.layerwise),
        )

    def to_dict(self):
        return _frozen_dict_of(self)


@dataclass(frozen=True)
class Admission:
    """Early rejection (`fleet.admission`, README "Early rejection"): the rule that turns an
    arriving request away. Off is no Admission at all (`Fleet.admission` None)."""

    reject_when: str = "predicted_ttft_over_slo"

    RULES = ("predicted_ttft_over_slo",)
    OFF = "off"

    @classmethod
    def from_dict(cls, data, path="fleet.admission"):
        """An Admission, or None for off: null, "off" or {"reject_when": "off"}."""
        if data is None or data == cls.OFF:
            return None
        if not isinstance(data, dict):
            raise LabError(path, f"expected an object such as {{\"reject_when\": \"predicted_ttft_over_slo\"}}, "
                                 f"null or \"off\", got {F.describe(data)}")
        F.check_keys(data, path, ("reject_when",))
        rule = F.read_choice(data, "reject_when", path, cls.RULES + (cls.OFF,))
        return None if rule == cls.OFF else cls(rule)

    def to_dict(self):
        return _frozen_dict_of(self)


@dataclass(frozen=True)
class PlanStep:
    """One row of a hand schedule: from `at_s` on, the pools have these sizes (in GPUs).
    `decode_gpus` None: the rest of the fleet (what a one-number control sets)."""

    at_s: float
    prefill_gpus: int
    decode_gpus: int = None

    def decode_of(self, total):
        return self.decode_gpus if self.decode_gpus is not None else total - self.prefill_gpus

    def to_dict(self):
        return _frozen_dict_of(self)


@dataclass(frozen=True)
class Planner:
    """`fleet.planner`: pools that change roles on a split fleet (README "Pools that change
    roles"; the rules are lab/core/planner.py). `utilization`: every `interval_s`, when one
    pool's utilisation exceeds the other's by more than `threshold`, one instance of the
    idler pool moves, never leaving it under `min_per_pool` instances. `schedule`: at each
    row's `at_s`, instances move until the pools have that row's sizes. A moving instance
    drains, then reloads for `switch_s`. `off` keeps the settings unused (a control can
    turn it on again); every field is validated whatever the policy, like the fleet's."""

    policy: str
    switch_s: float = 5.0
    interval_s: float = 10.0  # utilization
    threshold: float = 0.2
    min_per_pool: int = 1
    schedule: tuple = ()  # schedule: (PlanStep, ...), at_s increasing

    POLICIES = ("off", "utilization", "schedule")

    @property
    def active(self):
        return self.policy != "off"

    @classmethod
    def from_dict(cls, data, path="fleet.planner"):
        F.check_keys(data, path, ("policy", "interval_s", "threshold", "switch_s", "min_per_pool", "schedule"))
        kind = F.read_choice(data, "policy", path, cls.POLICIES)
        d = cls(kind)
        where_list = F.join(path, "schedule")
        rows = F.read_list(data, "schedule", path, default=[])
        if kind == "schedule" and not rows:
            raise LabError(where_list, "a schedule needs at least one row {at_s, prefill_gpus, decode_gpus}")
        if len(rows) > 100:
            raise LabError(where_list, f"{len(rows)} rows is more than the 100 a schedule may have")
        steps = []
        for i, row in enumerate(rows):
            where = F.join(where_list, i)
            if not isinstance(row, dict):
                raise LabError(where, f"expected an object {{at_s, prefill_gpus, decode_gpus}}, got {F.describe(row)}")
            F.check_keys(row, where, ("at_s", "prefill_gpus", "decode_gpus"))
            step = PlanStep(F.read_number(row, "at_s", where, lo=0, hi=MAX_DURATION_S, lo_open=True),
                            F.read_int(row, "prefill_gpus", where, lo=1, hi=MAX_GPUS),
                            F.read_int(row, "decode_gpus", where, default=None, lo=1, hi=MAX_GPUS))
            if steps and step.at_s <= steps[-1].at_s:
                raise LabError(F.join(where, "at_s"), f"{step.at_s:g} must be after the previous row's at_s ({steps[-1].at_s:g})")
            steps.append(step)
        return cls(
            kind,
            F.read_number(data, "switch_s", path, default=d.switch_s, lo=0, hi=MAX_DURATION_S),
            F.read_number(data, "interval_s", path, default=d.interval_s, lo=0.5, hi=MAX_DURATION_S),
            F.read_number(data, "threshold", path, default=d.threshold, lo=0, hi=1),
            F.read_int(data, "min_per_pool", path, default=d.min_per_pool, lo=1, hi=MAX_GPUS),
            tuple(steps),
        )

    def to_dict(self):
        out = _frozen_dict_of(self)
        if self.schedule:
            out["schedule"] = [s.to_dict() for s in self.schedule]
        return out

    def check(self, fleet, workload, path="fleet.planner"):
        """What needs the whole fleet (only when on): a split fleet whose two pools are alike
        (one tp, GPU type and power cap, so an instance can serve either), whole prompts' KV
        (no layer-wise link) and one shared prefill queue, schedule rows that size this fleet."""
        if not self.active:
            return
        if fleet.layout != "disaggregated":
            raise LabError(F.join(path, "policy"), f"{self.policy!r} needs a disaggregated fleet (fleet.layout is 'colocated'): pools change roles only on a split fleet; set it to 'off' or split the fleet")
        alike = (("prefill_tp", "decode_tp", "tensor parallelism"), ("prefill_gpu", "decode_gpu", "GPU type"),
                 ("prefill_power_cap_w", "decode_power_cap_w", "power cap"))
        for a, b, what in alike:
            if getattr(fleet, a) != getattr(fleet, b):
                raise LabError(F.join("fleet", b), f"{getattr(fleet, b)!r} differs from fleet.{a} ({getattr(fleet, a)!r}): "
                               f"with a planner an instance moves between pools, so both pools need the same {what}")
        if fleet.link.layerwise:
            raise LabError("fleet.link.layerwise", "true is not modelled with a planner (a moved sequence's KV crosses whole): set it to false or turn the planner off")
        if fleet.dispatch != "queue":
            raise LabError("fleet.dispatch", f"{fleet.dispatch!r} binds prompts to instances at arrival; with a planner the prefill pool changes size, so only 'queue' is allowed")
        tp = fleet.prefill_tp
        instances = fleet.total_gpus // tp
        if self.policy == "utilization":
            if 2 * self.min_per_pool > instances:
                raise LabError(F.join(path, "min_per_pool"), f"{self.min_per_pool} per pool needs {2 * self.min_per_pool} instances; the fleet has {instances}")
            return
        total = fleet.total_gpus
        end = workload.duration_s if workload.trace is None else None
        for i, step in enumerate(self.schedule):
            where = F.join(F.join(path, "schedule"), i)
            decode = step.decode_of(total)
            if step.decode_gpus is None and decode < 1:
                raise LabError(F.join(where, "prefill_gpus"), f"{step.prefill_gpus} GPUs leaves none of the fleet's {total} for decode: use fewer")
            if step.prefill_gpus + decode != total:
                raise LabError(F.join(where, "decode_gpus"), f"{step.prefill_gpus} + {decode} GPUs must add up to the fleet's {total} (prefill_gpus + decode_gpus)")
            for key, value in (("prefill_gpus", step.prefill_gpus), ("decode_gpus", decode)):
                if value % tp:
                    raise LabError(F.join(where, key), f"{value} GPUs is not a whole number of instances of prefill_tp = {tp} GPUs: use a multiple of {tp}",
                                   WHOLE_INSTANCES, {"gpus": value, "tp_field": "prefill_tp", "tp": tp})
            if end is not None and step.at_s >= end:
                raise LabError(F.join(where, "at_s"), f"{step.at_s:g} is not before workload.duration_s ({end:g}): a change after arrivals end never matters")


@dataclass(frozen=True)
class Fleet:
    layout: str = "colocated"
    gpus: int = None  # colocated
    prefill_gpus: int = None  # disaggregated
    decode_gpus: int = None
    chunk_tokens: int = None  # colocated: None = whole prefill, else chunked with this budget
    prefill_batch_tokens: int = 8192  # most prompt tokens one prefill step takes (at least one prompt)
    max_batch_seqs: int = 256  # most sequences one GPU runs at once (vLLM's max_num_seqs)
    link: Link = Link()
    first_token: str = "decode"  # disaggregated: when the first token counts (see README)
    # Tensor parallelism: an instance is `tp` GPUs; GPU counts above stay counts of GPUs.
    tp: int = 1  # colocated
    prefill_tp: int = 1
    decode_tp: int = 1
    prefill_gpu: str = None  # GPU type of each pool; None = model.gpu
    decode_gpu: str = None
    power_cap_w: float = None  # watts per GPU; None = uncapped (colocated)
    prefill_power_cap_w: float = None
    decode_power_cap_w: float = None
    dispatch: str = "queue"  # which instance takes a prompt (colocated) / which prefill instance
    long_prompt_tokens: int = None  # length_split: prompts of at least this many tokens...
    long_gpus: int = None  # ...go to the last this-many GPUs of the pool
    decode_pick: str = "most_free_kv"  # disaggregated: which decode instance a prompt's KV goes to
    prefill_chunk_tokens: int = None  # disaggregated: prefill pool's chunk budget; None = whole prompts
    long_prefill_tokens: int = None  # chunked prefill: a longer prompt takes at most this per step; None = no cap
    admission: Admission = None  # early rejection at arrival; None = off (every request joins a queue)
    # Prefix caching (README "Prefix caching", lab/core/prefix_cache.py): "off", "per_gpu"
    # (an LRU in `prefix_cache_gb` of each prefilling GPU's HBM, out of its KV capacity) or
    # "shared" (one pool of `prefix_pool_gb` in host memory, hits fetched at
    # `prefix_fetch_gbytes_per_s`). None sizes read as the PREFIX_DEFAULTS.
    prefix_cache: str = "off"
    prefix_cache_gb: float = None
    prefix_pool_gb: float = None
    prefix_fetch_gbytes_per_s: float = None
    # KV memory: "reserve" prompt + output at admission, or "on_demand" blocks of
    # kv_block_tokens as a sequence grows, preempting when a GPU runs out (lab/core/kv.py).
    kv_policy: str = "reserve"
    kv_block_tokens: int = 16
    planner: Planner = None  # disaggregated: pools that change roles; None = fixed pools

    LAYOUTS = ("colocated", "disaggregated")
    PREFIX_CACHES = ("off", "per_gpu", "shared")
    PREFIX_DEFAULTS = {"prefix_cache_gb": 8.0, "prefix_pool_gb": 200.0, "prefix_fetch_gbytes_per_s": 25.0}
    FIRST_TOKEN = ("decode", "prefill")
    DISPATCH = ("queue", "round_robin", "least_loaded", "length_split", "cache_affinity")
    DECODE_PICK = ("most_free_kv", "fewest_seqs")
    KV_POLICY = ("reserve", "on_demand")

    @classmethod
    def from_dict(cls, data, path="fleet"):
        F.check_keys(data, path, [f.name for f in dataclasses.fields(cls)])
        d = cls()
        layout = F.read_choice(data, "layout", path, cls.LAYOUTS)
        gpus = F.read_int(data, "gpus", path, default=None, lo=1, hi=MAX_GPUS)
        prefill = F.read_int(data, "prefill_gpus", path, default=None, lo=1, hi=MAX_GPUS)
        decode = F.read_int(data, "decode_gpus", path, default=None, lo=1, hi=MAX_GPUS)
        if layout == "colocated" and gpus is None:
            if prefill is None or decode is None:
                raise LabError(F.join(path, "gpus"), "required field is missing (a colocated fleet needs its number of GPUs)")
            gpus = prefill + decode  # switching a split fleet to colocated keeps its size
        if layout == "disaggregated":
            for key, value in (("prefill_gpus", prefill), ("decode_gpus", decode)):
                if value is None:
                    raise LabError(F.join(path, key), "required field is missing (a disaggregated fleet needs prefill_gpus and decode_gpus)")
            if prefill + decode > MAX_GPUS:
                raise LabError(F.join(path, "decode_gpus"), f"{prefill} + {decode} GPUs is over the limit of {MAX_GPUS}")
        tp = F.read_int(data, "tp", path, default=d.tp, lo=1, hi=MAX_TP)
        prefill_tp = F.read_int(data, "prefill_tp", path, default=d.prefill_tp, lo=1, hi=MAX_TP)
        decode_tp = F.read_int(data, "decode_tp", path, default=d.decode_tp, lo=1, hi=MAX_TP)
        # The fields of the layout in use must hold whole instances; the other layout's are
        # kept (a student switching layouts keeps them) and checked when it is chosen.
        counted = (("gpus", gpus, "tp", tp),) if layout == "colocated" else (
            ("prefill_gpus", prefill, "prefill_tp", prefill_tp), ("decode_gpus", decode, "decode_tp", decode_tp))
        for key, count, tp_key, size in counted:
            if count % size:
                raise LabError(F.join(path, key), f"{count} GPUs is not a whole number of instances of {tp_key} = {size} GPUs: use a multiple of {size}",
                               WHOLE_INSTANCES, {"gpus": count, "tp_field": tp_key, "tp": size})
        dispatch = F.read_choice(data, "dispatch", path, cls.DISPATCH, default=d.dispatch)
        long_prompt = F.read_int(data, "long_prompt_tokens", path, default=None, lo=1, hi=MAX_TOKENS)
        long_gpus = F.read_int(data, "long_gpus", path, default=None, lo=1, hi=MAX_GPUS)
        if dispatch == "length_split":
            pool_key, pool, size, size_key = ("gpus", gpus, tp, "tp") if layout == "colocated" else ("prefill_gpus", prefill, prefill_tp, "prefill_tp")
            for key, value in (("long_prompt_tokens", long_prompt), ("long_gpus", long_gpus)):
                if value is None:
                    raise LabError(F.join(path, key), "required field is missing (dispatch length_split needs long_prompt_tokens and long_gpus)")
            if long_gpus >= pool:
                raise LabError(F.join(path, "long_gpus"), f"{long_gpus} leaves none of the {pool} GPUs ({pool_key}) for short prompts: use fewer")
            if long_gpus % size:
                raise LabError(F.join(path, "long_gpus"), f"{long_gpus} GPUs is not a whole number of instances of {size_key} = {size} GPUs: use a multiple of {size}",
                               WHOLE_INSTANCES, {"gpus": long_gpus, "tp_field": size_key, "tp": size})
        return cls(
            layout=layout,
            gpus=gpus,
            prefill_gpus=prefill,
            decode_gpus=decode,
            chunk_tokens=_read_chunk(data, "chunk_tokens", path),
            prefill_batch_tokens=F.read_int(data, "prefill_batch_tokens", path, default=d.prefill_batch_tokens, lo=1, hi=10_000_000),
            max_batch_seqs=F.read_int(data, "max_batch_seqs", path, default=d.max_batch_seqs, lo=1, hi=100_000),
            link=Link.from_dict(F.read_dict(data, "link", path, default={}), F.join(path, "link")),
            first_token=F.read_choice(data, "first_token", path, cls.FIRST_TOKEN, default=d.first_token),
            tp=tp,
            prefill_tp=prefill_tp,
            decode_tp=decode_tp,
            prefill_gpu=None if data.get("prefill_gpu") is None else F.read_choice(data, "prefill_gpu", path, tuple(GPU_PRESETS)),
            decode_gpu=None if data.get("decode_gpu") is None else F.read_choice(data, "decode_gpu", path, tuple(GPU_PRESETS)),
            power_cap_w=F.read_number(data, "power_cap_w", path, default=None, lo=1, hi=100_000),
            prefill_power_cap_w=F.read_number(data, "prefill_power_cap_w", path, default=None, lo=1, hi=100_000),
            decode_power_cap_w=F.read_number(data, "decode_power_cap_w", path, default=None, lo=1, hi=100_000),
            dispatch=dispatch,
            long_prompt_tokens=long_prompt,
            long_gpus=long_gpus,
            decode_pick=F.read_choice(data, "decode_pick", path, cls.DECODE_PICK, default=d.decode_pick),
            prefill_chunk_tokens=_read_chunk(data, "prefill_chunk_tokens", path),
            long_prefill_tokens=F.read_int(data, "long_prefill_tokens", path, default=None, lo=16, hi=1_000_000),
            admission=Admission.from_dict(data.get("admission"), F.join(path, "admission")),
            prefix_cache=F.read_choice(data, "prefix_cache", path, cls.PREFIX_CACHES, default=d.prefix_cache),
            prefix_cache_gb=F.read_number(data, "prefix_cache_gb", path, default=None, lo=0, hi=10_000, lo_open=True),
            prefix_pool_gb=F.read_number(data, "prefix_pool_gb", path, default=None, lo=0, hi=1_000_000, lo_open=True),
            prefix_fetch_gbytes_per_s=F.read_number(data, "prefix_fetch_gbytes_per_s", path, default=None, lo=0.001, hi=100_000),
            kv_policy=F.read_choice(data, "kv_policy", path, cls.KV_POLICY, default=d.kv_policy),
            kv_block_tokens=F.read_int(data, "kv_block_tokens", path, default=d.kv_block_tokens, lo=1, hi=4096),
            planner=_read_planner(data, path),
        )

    def prefix_setting(self, key):
        """A prefix-cache size or rate: the field if set, else its PREFIX_DEFAULTS value."""
        value = getattr(self, key)
        return self.PREFIX_DEFAULTS[key] if value is None else value

    @property
    def total_gpus(self):
        return self.gpus if self.layout == "colocated" else self.prefill_gpus + self.decode_gpus

    @property
    def planner_on(self):
        """Whether pools change roles in this run (a planner whose policy is not "off")."""
        return self.planner is not None and self.planner.active

    def to_dict(self):
        out = _frozen_dict_of(self)
        if out.get("prefix_cache") == "off":
            del out["prefix_cache"]  # the default: keep older scenarios' JSON as it was
        return out


def _read_planner(data, path):
    raw = data.get("planner")
    if raw is None or raw == "off":  # (a bare "off" is no planner; {"policy": "off", ...} keeps its settings)
        return None
    return Planner.from_dict(F.read_dict(data, "planner", path), F.join(path, "planner"))


def _read_chunk(data, key, path):
    chunk = data.get(key)
    # 0 means whole prompts; `false == 0` in Python, so test the type first.
    whole = chunk is None or (F.is_number(chunk) and not isinstance(chunk, F.BigNumber) and chunk == 0)
    return None if whole else F.read_int(data, key, path, lo=16, hi=1_000_000)


@dataclass(frozen=True)
class Pool:
    """One pool of a fleet as the engine builds it: `gpus` GPUs of type `gpu` in instances of `tp`.

    `role` is "colocated", "prefill" or "decode"; `first_gpu` numbers its first GPU across
    the fleet (prefill pool first). `*_key` name the scenario fields, for error messages.
    """

    role: str
    gpus: int
    tp: int
    gpu: str
    power_cap_w: float
    first_gpu: int
    tp_key: str
    gpu_key: str
    cap_key: str

    @property
    def instances(self):
        return self.gpus // self.tp


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
        F.check_keys(data, path, cls.KEYS)
        return cls(
            workload=Workload.from_dict(F.read_dict(data, "workload", path), F.join(path, "workload"), base_dir, roots),
            fleet=Fleet.from_dict(F.read_dict(data, "fleet", path), F.join(path, "fleet")),
            model=Model.from_dict(F.read_dict(data, "model", path, default={}), F.join(path, "model")),
            slo=Slo.from_dict(F.read_dict(data, "slo", path, default={}), F.join(path, "slo")),
            seed=F.read_int(data, "seed", path, default=0, lo=0, hi=2**63 - 1),
            drain_s=F.read_number(data, "drain_s", path, default=120.0, lo=0, hi=MAX_DURATION_S),
        )

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
