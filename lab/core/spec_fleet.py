"""The scenario's fleet: its layout and pools, the link, admission, the planner, tensor parallelism and GPU types.

Part of the scenario (lab/core/spec.py, which re-exports these); validated like the rest,
every error naming its field.
"""

import dataclasses
from dataclasses import dataclass

from . import fields as F
from .errors import WHOLE_INSTANCES, LabError
from .spec_limits import GPU_PRESETS, MAX_DURATION_S, MAX_GPUS, MAX_TOKENS, MAX_TP, _frozen_dict_of


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
    """Early rejection (`fleet.admission`, docs/model.md "Early rejection"): the rule that turns an
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
    """`fleet.planner`: pools that change roles on a split fleet (docs/model.md "Pools that change
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
    first_token: str = "decode"  # disaggregated: when the first token counts (docs/model.md "Disaggregated")
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
    # Prefix caching (docs/model.md "Prefix caching", lab/core/prefix_cache.py): "off", "per_gpu"
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
