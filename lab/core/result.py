"""What a simulation run produces: per-request records, per-GPU step logs, link transfers.

Step logs are columnar because the canvas draws them as columns and because appending
to a few columns is the cheapest bookkeeping per step. A run starts appending
to plain lists (for a few thousand steps a list append is about half the cost of an
array append, and it runs five times a step); once a run has logged engine.COMPACT_STEPS
steps, `GpuLog.compact` turns them into typed arrays (`array.array`, docs/architecture.md "Scale") at
its next arrival and it appends to those from then on: a step then costs 32 bytes (two
8-byte floats, two 4-byte ints, an 8-byte context) instead of about 100 as lists of boxed
numbers. Its times are whole-number ticks (docs/model.md "Time base"; floats, or ints in 'q'
arrays in a long run), and the Result keeps them (`GpuLog.start_t`, `end_t`): seconds
(`start`, `end`) are made from them when first read, each tick count divided once by
10**12 (an `array('d')` for a compacted column), so values read back bit for bit (in
CPython and in Pyodide alike: 'i' and 'q' are 4 and 8 bytes on both, unlike 'l').
Anything that reads a column as a sequence (indexing, slicing, iterating, `len`,
`numpy.asarray`) reads it either way; compare a column with `list(column)`.
Per-request inter-token gaps are not stored: a request's tokens after the first are
emitted at the ends of a contiguous range of steps on its decode GPU, so `metrics.py`
derives them.
"""

from array import array
from dataclasses import dataclass, field
from itertools import chain
from operator import sub

from .ticks import TICKS_PER_S, to_seconds, to_ticks

__all__ = ["GpuLog", "Transfer", "RequestRecord", "Result", "instance_label"]


def instance_label(gpu_ids):
    """"GPU 3" for one GPU, "GPUs 0–1" (en dash) for an instance spanning several."""
    if len(gpu_ids) == 1:
        return f"GPU {gpu_ids[0]}"
    return f"GPUs {gpu_ids[0]}\u2013{gpu_ids[-1]}"


@dataclass
class GpuLog:
    """Every step one instance (`tp` GPUs acting as one) ran, in order. The name stays
    GpuLog: with tp 1 an instance is a GPU.

    Step times come in two units: `start_t` / `end_t` in integer ticks (ticks.py: whole
    numbers, floats or ints, exactly what the engine added up) and `start` / `end` in
    seconds. A log stores one unit, its source, and makes the other from it
    when read (`_TimeColumn`):
    - the engine's logs store ticks; their seconds are made once, on the first read, and
      kept (ticks / 10**12, one correctly rounded division each), so a run does not pay
      for seconds that nothing reads, and metrics loop over ticks (exact differences);
    - a log built with seconds (`GpuLog(..., start=[...], end=[...])`, or `GpuLog(i, role)`
      appended to through `log.start`, as tests and tools do) stores them, and is a
      `_SecondsGpuLog`; its ticks are `to_ticks` of them, made afresh on every read (such
      logs are small), so editing its seconds in place shows in its ticks.
    `stores_ticks` says which. Give a log its times through the constructor, and edit in
    place only the unit it stores (a made column is a copy; seconds made from ticks are
    kept)."""

    index: int  # global instance index; disaggregated fleets number prefill instances first
    role: str  # "colocated" | "prefill" | "decode"
    # The step columns: lists while the engine runs, typed arrays (COLUMN_TYPES) once compacted.
    start: list = None  # seconds (see the class docstring); [] when neither unit is given
    end: list = None
    decode_seqs: list = field(default_factory=list)  # sequences that emitted a token in the step
    prefill_tokens: list = field(default_factory=list)  # prompt tokens processed in the step
    context_tokens: list = field(default_factory=list)  # KV tokens the decoding sequences attend to
    tp: int = 1  # GPUs in the instance
    gpu_type: str = "h100"  # their type (a GPU_PRESETS key)
    # The GPU numbers it spans, numbered across the fleet (prefill pool first); default:
    # index x tp onwards, right when every instance has the same tp.
    gpu_ids: tuple = ()
    label: str = ""  # "GPU 3" / "GPUs 0–1"; default from gpu_ids
    # model.attention: step index -> (attention_units, reread_tokens) of steps with prompt
    # chunks, for the power model (cost.PoolCost.energy_j); empty otherwise.
    attention_args: dict = field(default_factory=dict)
    # fleet.prefix_cache shared: step index -> seconds the step spent fetching cached KV from
    # the host pool before its compute (docs/model.md "Prefix caching"); empty otherwise.
    fetch_s: dict = field(default_factory=dict)
    # fleet.planner: [(t, role)] from t on ("switching" while it reloads for its new role);
    # [(0.0, role)] unless it changed. `role` stays the role it started in.
    roles: list = None
    # fleet.kv_policy on_demand: (step index, request id) of each sequence preempted at the
    # boundary before that step (it held KV here and lost it), for the canvas; else empty.
    preempted: list = field(default_factory=list)
    # on_demand: (step index, request id, tokens it prefills, tokens it computes: less a prefix
    # cache's hit) of each re-prefill admitted at the boundary before that step (blame replays them), and (time, KV blocks in use) after
    # every change (the last entry at a time is the state once all at that time happened).
    readmitted: list = field(default_factory=list)
    kv_used: list = field(default_factory=list)
    start_t: list = None  # ticks (see the class docstring): the engine's logs give these
    end_t: list = None
    # The engine's sum of its steps' ticks (end - start), added up as it logged them (exact:
    # whole numbers); None: `busy_t` adds them up from the columns (hand-built logs, a run
    # cut short). Edit an engine log's step columns and set it to None.
    busy_ticks: object = field(default=None, compare=False, repr=False)

    def __post_init__(self):
        if self.roles is None:
            self.roles = [(0.0, self.role)]
        if not self.gpu_ids:
            self.gpu_ids = tuple(range(self.index * self.tp, (self.index + 1) * self.tp))
        if not self.label:
            self.label = instance_label(self.gpu_ids)
        # The unit it stores: ticks when given them (the engine), else seconds. The other
        # unit's attributes go (the dataclass set them to None), so reading one runs
        # _TimeColumn; a log in seconds is a _SecondsGpuLog, whose class makes its ticks.
        # (CPython 3.11 reads an attribute fast only while the object has no `__dict__`
        # made and its class no descriptor of that name: the engine reads `log.start_t`
        # and the other columns every step.)
        self.stores_ticks = self.start_t is not None or self.end_t is not None
        kept, made = (("start_t", "end_t"), ("start", "end")) if self.stores_ticks else (("start", "end"), ("start_t", "end_t"))
        for name in kept:
            if getattr(self, name) is None:
                setattr(self, name, [])
        for name in made:
            delattr(self, name)
        if not self.stores_ticks:
            self.__class__ = _SecondsGpuLog

    # Each step column's array typecode: times are doubles (seconds, or whole-number ticks
    # under 2**52: engine.FLOAT_TICKS_BELOW); batch and prompt tokens fit 4 bytes (spec.py
    # bounds them far below 2**31); a context sums a batch's KV, so 8.
    COLUMN_TYPES = (("start", "d"), ("end", "d"), ("decode_seqs", "i"), ("prefill_tokens", "i"),
                    ("context_tokens", "q"))
    # A long run's ticks are ints: 8-byte ints, the same size.
    TICK_COLUMN_TYPES = (("start", "q"), ("end", "q")) + COLUMN_TYPES[2:]

    def __len__(self):
        return len(self.end_t if self.stores_ticks else self.end)

    def compact(self, types=COLUMN_TYPES):
        """Store the step columns as typed arrays (see the module docstring), one at a time
        so a run's peak holds at most one column twice. A time column's code applies to its
        source (ticks or seconds); seconds made from ticks are doubles. Idempotent."""
        for name, code in types:
            if self.stores_ticks and name in ("start", "end"):
                name += "_t"  # (seconds made later from an array are an array too)
            column = getattr(self, name)
            if not isinstance(column, array):
                setattr(self, name, array(code, column))
        return self

    def busy_t(self):
        """Ticks it spent running steps: exact (whole numbers, each step's and their sum
        under 2**53 in a float-tick run)."""
        if self.busy_ticks is not None:
            return self.busy_ticks
        return sum(map(sub, self.end_t, self.start_t))

    def busy_s(self):
        return to_seconds(self.busy_t())


class _TimeColumn:
    """A GpuLog time column (`start`/`end` in seconds, `start_t`/`end_t` in ticks) that the
    log does not store, made from the other unit (see GpuLog). A non-data descriptor: a
    column the log stores is an instance attribute, read as a plain one (the engine
    appends to `start_t` every step); this runs only for the missing unit."""

    def __init__(self, name, ticks):
        self.name = name  # "start" | "end"
        self.ticks = ticks

    def __get__(self, log, owner=None):
        if log is None:
            return self
        if self.ticks:  # from seconds, afresh each time (a hand-built log)
            return _to_ticks_column(getattr(log, self.name))
        seconds = _seconds_column(log, self.name, getattr(log, self.name + "_t"))
        setattr(log, self.name, seconds)  # kept: the next read is a plain attribute
        return seconds


def _to_ticks_column(seconds):
    return [to_ticks(s) for s in seconds]


def _seconds_column(log, name, ticks):
    """Seconds of a tick column, each t / 10**12 (ticks.py), as `engine` used to make them at
    the end of every run: a list, or 'd' array for a compacted column. A step that starts
    where the one before it ended (most steps of a busy GPU) shares that end's float: no
    second division or object."""
    # A float tick (a whole number under 2**53) over the float 1e12 is the same correctly
    # rounded quotient as the int over 10**12, without converting an int each time.
    per = 1e12 if ticks and isinstance(ticks[0], float) else TICKS_PER_S
    if name == "end":
        seconds = [t / per for t in ticks]
    else:
        ends_t, ends = log.end_t, log.end
        seconds = [e if s == p else s / per for s, p, e in zip(ticks, chain((-1,), ends_t), chain((0.0,), ends))]
    return array("d", seconds) if isinstance(ticks, array) else seconds


class _SecondsGpuLog(GpuLog):
    """A GpuLog built in seconds (GpuLog.__post_init__ makes it one): its ticks are made
    from its seconds when read."""


# Set after the dataclass is built, so its defaults (None) stay out of the way.
for _name in ("start", "end"):
    setattr(GpuLog, _name, _TimeColumn(_name, ticks=False))
    delattr(GpuLog, _name + "_t")  # (the dataclass's default: no class attribute, see __post_init__)
    setattr(_SecondsGpuLog, _name + "_t", _TimeColumn(_name, ticks=True))


@dataclass
class Transfer:
    """One prompt's KV cache crossing the link from a prefill GPU to a decode GPU."""

    request: int
    src_gpu: int
    dst_gpu: int
    ready: float  # the prompt's prefill ended (its KV exists)
    reserved: float  # room was reserved on the decode GPU
    start: float  # bytes started moving on the wire
    end: float  # the last byte landed on the decode GPU
    bytes: int
    # Layer-wise streaming (lab/core/link.py): one chunk per layer, each `layer_s` on the
    # wire, started at `layer_starts` (in layer order). A whole transfer has neither.
    layer_s: float = 0.0
    layer_starts: list = None

    def wire_spans(self):
        """[(start, end)] of the times this transfer's bytes are on the wire."""
        if self.layer_starts is None:
            return [(self.start, self.end)]
        step = self.layer_s
        return [(s, s + step) for s in self.layer_starts]


@dataclass
class RequestRecord:
    id: int
    arrival: float
    prompt_tokens: int
    output_tokens: int
    prefill_gpu: int = -1
    decode_gpu: int = -1  # the GPU that emits tokens 2..n (colocated: the same GPU)
    prefill_start: float = None  # first prompt work began
    prefill_end: float = None
    first_token: float = None
    finish: float = None  # last token emitted; None when unfinished
    # Tokens 2..n are emitted at the ends of steps decode_first_step..decode_last_step
    # (inclusive, contiguous) of `decode_gpu`'s log; -1 when there are none.
    decode_first_step: int = -1
    decode_last_step: int = -1
    transfer: int = -1  # index into Result.transfers, disaggregated only
    dropped: str = None  # why the request could never be served (e.g. larger than KV memory)
    # fleet.admission: turned away at arrival (never queued, never on a GPU; not finished),
    # and the TTFT its rule predicted at arrival (every arrival's, admitted or not; None when off).
    rejected: bool = False
    predicted_ttft_s: float = None
    # Prefix caching (docs/model.md "Prefix caching"): its prompt's block hashes, the leading prompt
    # tokens its prefill found cached (and so did not compute), and the seconds spent
    # fetching them from a shared pool (inside the step that started its prefill).
    hash_ids: tuple = ()
    prefix_hit_tokens: int = 0
    prefix_fetch_s: float = 0.0
    # Decode stretches before the final one: [(decode_gpu, first_step, last_step)], in order
    # (a preemption, or a sequence moved by a role change, ends one). Tokens 2..n are the ends
    # of the steps of `stretches()` in order; empty for a request that decoded in one go.
    earlier: list = None
    preemptions: int = 0  # times it lost its KV (fleet.kv_policy on_demand)
    # The first token's tick (ticks.py), as the engine had it: metrics take its first gap in
    # ticks. None in a hand-built record (metrics then use to_ticks(first_token)).
    first_token_t: float = None

    @property
    def finished(self):
        return self.finish is not None

    def stretches(self):
        """[(gpu, first_step, last_step)]: `earlier` then the final stretch, if it has begun."""
        last = [(self.decode_gpu, self.decode_first_step, self.decode_last_step)] if self.decode_first_step >= 0 else []
        return list(self.earlier) + last if self.earlier else last


@dataclass
class Result:
    scenario: object
    requests: list
    gpus: list
    transfers: list
    end_time: float  # the run's time span for metrics: when it stopped, or when arrivals ended if later
    arrivals_end: float  # when arrivals stopped (the workload's duration)
    # Why the run was cut short, leaving requests unfinished: "drain_s" (overload: the
    # drain time after arrivals ran out) or "max_steps" (the step bound); None if not.
    capped: str = None
    events: int = 0  # loop iterations, for benchmarks and bounds
    # Simulated time the run stopped (the step bound may cut it before arrivals end);
    # None for a hand-built Result, read as end_time.
    stopped_at: float = None
    # fleet.planner: (t_decided, gpu_index, from_role, to_role, t_ready) per role change, in
    # decision order; t_ready None when the run ended before the instance was ready.
    reconfigurations: list = field(default_factory=list)

    @property
    def gpu_roles(self):
        return [g.role for g in self.gpus]
