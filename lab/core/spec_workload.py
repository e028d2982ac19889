"""The scenario's workload: arrivals and token lengths (generated, phased, or a trace) and shared prefixes.

Part of the scenario (lab/core/spec.py, which re-exports these); validated like the rest,
every error naming its field. The requests themselves are drawn by lab/core/workload.py.
"""

import math
from dataclasses import dataclass, field

from . import fields as F
from .errors import LabError
from .spec_limits import MAX_DURATION_S, MAX_REQUESTS, MAX_TOKENS, MAX_TRACE_TIME_S, REQUEST_MARGIN_SD, _frozen_dict_of


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
    """Shared prompt prefixes of a generated workload (docs/model.md "Prefix caching").

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
