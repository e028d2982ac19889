"""Cost models: how long one instance's step takes, what it draws, and what it costs.

An instance is `tp` GPUs of one type (docs/model.md "Fleets as they are built"). A step
decodes one token for each of `decode_seqs` running sequences (whose KV caches hold
`context_tokens` tokens in all) and processes `prefill_tokens` prompt tokens.
`PoolCost(model, gpu, tp, power_cap_w)` is one pool's instance:

- `step_ticks(decode_seqs, context_tokens, prefill_tokens, attention_units=0.0,
  reread_tokens=0) -> ticks` (integer picoseconds, ticks.py), the function the engine
  and the reference simulator both call and add up, so their times agree exactly. Each
  per-unit cost is rounded to a whole tick once, when the model is built (docs/model.md "Time
  base"), so without attention a step is an integer affine function of its columns:
  linear a + b x seqs + c x context (+ d x prompt tokens); roofline the max of a memory
  term a + c x (context + prompt) and a compute term f x tokens, plus all-reduces;
- `decode_line(decode_seqs) -> (a, b, floor, slope)`: a decode-only step of that batch
  attending c tokens, `step_ticks(n, c, 0)`, is max(a + b x c, floor + slope x c) (linear:
  floor and slope 0; roofline: the compute term, plus all-reduces in both, slope 0;
  calibrated: the compute term's attention FLOPs grow with c): so the engine's decode run-ahead
  works out a batch's line once, not a call per step (docs/architecture.md "Scale"). None with attention;
  `decode_line_float` gives the same whole numbers as floats;
- `step_s(...) -> seconds`: the same step, `step_ticks / 10**12` (for rates, blame, plots);
- `parts(...) -> (memory_s, compute_s, comm_s)`, the same step split for the power model;
- `power_w(...)` per GPU during a step, and `energy_j(log, span)` of one instance's run.

`attention_units` (sum over the step's prompt chunks of c * (p + c / 2), c new tokens
after p earlier ones) and `reread_tokens` (sum of p) are accepted for `model.attention`;
with it off they are ignored. TP 1 without a power cap gives exactly the step times of
a single GPU as before tensor parallelism existed.
"""

import math
from operator import sub

from .stacks import STACK_PRESETS
from .ticks import TICKS_PER_S, to_seconds, to_ticks

__all__ = [
    "PoolCost",
    "pool_costs",
    "instance_costs",
    "step_time_fn",
    "step_ticks_fn",
    "kv_bytes_per_token",
    "clock_factor",
    "step_power_w",
    "MEMORY_BOUND_SHARE",
    "attention_flops_per_unit",
    "role_time",
    "energy_by_role",
]

# A step draws idle + (TDP - idle) x (MEMORY_BOUND_SHARE + (1 - it) x compute share):
# a memory-bound decode step ~0.35 of the dynamic range, a compute-bound prefill ~full TDP.
MEMORY_BOUND_SHARE = 0.35


def kv_bytes_per_token(model):
    """2 (K and V) x layers x KV heads x head dim x bytes per value (GQA-aware)."""
    return model.kv_bytes_per_token


def clock_factor(spec, cap):
    """The clock a power cap leaves: min(1, ((cap - idle) / (TDP - idle)) ** (1/3)).

    Dynamic power goes as clock cubed. The cube root is taken by Newton's method from 1
    (basic IEEE arithmetic only), so CPython and Pyodide, whose libm pow may differ in
    the last bit, get the same factor.
    """
    if cap is None:
        return 1.0
    ratio = (cap - spec["idle_w"]) / (spec["tdp_w"] - spec["idle_w"])
    if ratio >= 1.0:
        return 1.0
    x = 1.0  # from above: the iterates decrease monotonically to the root
    for _ in range(200):
        nxt = x - (x * x * x - ratio) / (3.0 * x * x)
        if nxt >= x:
            break
        x = nxt
    return x


def step_power_w(spec, cap, compute_s, step_s):
    """Watts one GPU draws during a step of `step_s` of which `compute_s` is compute."""
    idle = spec["idle_w"]
    share = compute_s / step_s if step_s > 0 else 0.0
    watts = idle + (spec["tdp_w"] - idle) * (MEMORY_BOUND_SHARE + (1.0 - MEMORY_BOUND_SHARE) * share)
    return watts if cap is None or watts < cap else cap


class PoolCost:
    """The instance of one pool: `tp` GPUs of type `gpu` (its preset with the scenario's
    `model.gpu_overrides`), each capped at `power_cap_w` watts (None: uncapped)."""

    def __init__(self, model, gpu=None, tp=1, power_cap_w=None):
        self.model = model
        self.gpu = gpu or model.gpu
        self.tp = tp
        self.power_cap_w = power_cap_w
        self.spec = model.gpu_spec(self.gpu)
        self.idle_w = self.spec["idle_w"]
        self.tdp_w = self.spec["tdp_w"]
        self.gpu_usd_per_hour = self.spec["usd_per_hour"]
        self.clock = clock_factor(self.spec, power_cap_w)
        self.kv_tokens = model.kv_tokens_per_instance(self.gpu, tp)
        if model.cost == "linear":
            self._linear()
        elif model.cost == "calibrated":
            self._calibrated()
        else:
            self._roofline()
        # A capped step draws what it would uncapped, at most the cap: the share comes from
        # the full-clock step (the lower clock is how the GPU stays under the cap; reading
        # the share off the slowed step would make a cap raise a decode step's watts).
        self._uncapped = self if power_cap_w is None else PoolCost(model, self.gpu, tp, None)

    @classmethod
    def for_pool(cls, model, pool):
        """The cost of one instance of `pool` (a `spec.Pool`)."""
        return cls(model, pool.gpu, pool.tp, pool.power_cap_w)

    @property
    def usd_per_hour(self):
        """One instance: tp GPUs at the GPU's hourly price."""
        return self.tp * self.gpu_usd_per_hour

    def describe(self):
        """'2 x h100, capped at 350 W' for messages and headers."""
        cap = f", capped at {self.power_cap_w:g} W" if self.power_cap_w is not None else ""
        return f"{self.tp} x {self.gpu}{cap}"

    # ------------------------------------------------------------------ linear

    def _linear(self):
        # The lab's illustrative constants (milliseconds): a decode step costs a fixed
        # launch/weights-read term, a per-sequence term and a per-context-token term; a
        # step that also prefills adds time proportional to its prompt tokens. The decode
        # part is read as memory-bound, the prompt part as compute (for power and caps).
        # tp GPUs run tp x tp_efficiency as fast; one GPU exactly as the constants say.
        m = self.model
        base = m.decode_step_ms
        per_seq = m.decode_ms_per_seq
        per_ctx = m.decode_ms_per_context_token
        per_prompt = m.prefill_ms_per_token
        speed = self.tp * m.tp_efficiency if self.tp > 1 else 1.0
        clock = self.clock

        def parts(decode_seqs, context_tokens, prefill_tokens, attention_units=0.0, reread_tokens=0):
            memory_ms = base + per_seq * decode_seqs + per_ctx * context_tokens if decode_seqs else 0.0
            compute_ms = per_prompt * prefill_tokens
            return memory_ms / speed / 1000.0, compute_ms / (speed * clock) / 1000.0, 0.0

        self.parts = parts
        # Per prompt token, for energy from a log's column sums.
        self._compute_per_prefill_token = per_prompt / (speed * clock) / 1000.0
        self._compute_per_decode_seq = 0.0
        # Ticks (ticks.py): each coefficient rounded to a whole picosecond once, here, so a
        # step is a + b x seqs + c x context (+ d x prompt tokens) in exact integers.
        fixed_t = to_ticks(base / speed / 1000.0)
        per_seq_t = to_ticks(per_seq / speed / 1000.0)
        per_ctx_t = to_ticks(per_ctx / speed / 1000.0)
        per_prompt_t = to_ticks(per_prompt / (speed * clock) / 1000.0)
        self.decode_affine = (fixed_t, per_seq_t, per_ctx_t)

        def make(num):  # (_set_step: ints, or the same whole numbers as floats)
            fixed, one_seq, one_ctx, one_prompt, zero = map(num, (fixed_t, per_seq_t, per_ctx_t, per_prompt_t, 0))

            def step_ticks(decode_seqs, context_tokens, prefill_tokens, attention_units=0.0, reread_tokens=0):
                ticks = fixed + one_seq * decode_seqs + one_ctx * context_tokens if decode_seqs else zero
                if prefill_tokens:
                    ticks += one_prompt * prefill_tokens
                return ticks

            def decode_line(decode_seqs):
                return fixed + one_seq * decode_seqs, one_ctx, zero, zero
            return step_ticks, decode_line

        self._set_step(make)

    # ---------------------------------------------------------------- roofline

    def _roofline(self):
        # A step reads the weights once plus the KV cache of its decoding sequences (and
        # writes its prompt tokens' KV), split over tp GPUs, and does 2 x params FLOPs per
        # token it processes, split likewise; it is bound by whichever of memory
        # bandwidth and (derated, clock-capped) compute takes longer. With tp > 1 every
        # layer adds two ring all-reduces of the step's activations over NVLink.
        # Attention FLOPs are left out unless model.attention is on (the source's
        # published table leaves them out).
        m = self.model
        hw = self.spec
        shape = m.shape
        tp = self.tp
        bandwidth = hw["hbm_tb_s"] * 1e12 * tp
        flops_per_s = m.peak_tflops(hw) * 1e12 * m.efficiency * tp * self.clock
        weights = m.weight_bytes
        kv_per_token = m.kv_bytes_per_token
        flops_per_token = 2.0 * shape["params"]
        allreduces = 2 * shape["layers"]
        if tp > 1:
            nvlink = hw["nvlink_gbytes_per_s"] * 1e9
            comm_per_token = allreduces * (2.0 * (tp - 1) / tp) * shape["hidden"] * 2 / nvlink
            comm_fixed = allreduces * hw["allreduce_latency_us"] * 1e-6
        else:
            comm_per_token = comm_fixed = 0.0

        # Ticks (ticks.py): per-token terms rounded to whole picoseconds once, here. A step
        # is max(weights + kv x (context + prompt), flops x tokens) + comm fixed + comm x
        # tokens in exact integers: decode-only, affine in the context for a fixed batch.
        ticks = (to_ticks(weights / bandwidth), to_ticks(kv_per_token / bandwidth),
                 to_ticks(flops_per_token / flops_per_s), to_ticks(comm_fixed), to_ticks(comm_per_token))

        if m.attention:
            self._roofline_with_attention(weights, kv_per_token, bandwidth, flops_per_token, flops_per_s,
                                          comm_fixed, comm_per_token, ticks)
            return

        def parts(decode_seqs, context_tokens, prefill_tokens, attention_units=0.0, reread_tokens=0):
            tokens = decode_seqs + prefill_tokens
            memory_s = (weights + kv_per_token * (context_tokens + prefill_tokens)) / bandwidth
            compute_s = flops_per_token * tokens / flops_per_s
            comm_s = comm_fixed + comm_per_token * tokens if tp > 1 else 0.0
            return memory_s, compute_s, comm_s

        self.parts = parts
        self._compute_per_prefill_token = self._compute_per_decode_seq = flops_per_token / flops_per_s
        self.decode_affine = ticks

        def make(num):  # (_set_step)
            w, kv, fl, cf, cm, zero = map(num, (*ticks, 0))

            def step_ticks(decode_seqs, context_tokens, prefill_tokens, attention_units=0.0, reread_tokens=0):
                tokens = decode_seqs + prefill_tokens
                memory = w + kv * (context_tokens + prefill_tokens)
                compute = fl * tokens
                return (memory if memory > compute else compute) + cf + cm * tokens

            def decode_line(decode_seqs):
                comm = cf + cm * decode_seqs
                return w + comm, kv, fl * decode_seqs + comm, zero
            return step_ticks, decode_line

        self._set_step(make)

    def _roofline_with_attention(self, weights, kv_per_token, bandwidth, flops_per_token, flops_per_s,
                                 comm_fixed, comm_per_token, ticks):
        # A decode token attends to its whole context; a prompt chunk to its earlier tokens
        # (re-read from HBM) and, causally, to half of its own (cost units: see the module).
        attention_flops = attention_flops_per_unit(self.model)

        def parts(decode_seqs, context_tokens, prefill_tokens, attention_units=0.0, reread_tokens=0):
            tokens = decode_seqs + prefill_tokens
            memory_s = (weights + kv_per_token * (context_tokens + prefill_tokens + reread_tokens)) / bandwidth
            compute_s = (flops_per_token * tokens + attention_flops * (context_tokens + attention_units)) / flops_per_s
            return memory_s, compute_s, comm_fixed + comm_per_token * tokens

        # Ticks: _roofline's `ticks`, plus the attention FLOPs (context + the chunks' units: a
        # float) computed in seconds and rounded to whole ticks once per step.
        attention_s = attention_flops / flops_per_s
        self.decode_affine = None  # the attention term is rounded per step: not affine

        def make(num):  # (_set_step)
            w, kv, fl, cf, cm = map(num, ticks)

            def step_ticks(decode_seqs, context_tokens, prefill_tokens, attention_units=0.0, reread_tokens=0):
                tokens = decode_seqs + prefill_tokens
                memory = w + kv * (context_tokens + prefill_tokens + reread_tokens)
                compute = fl * tokens + num(to_ticks(attention_s * (context_tokens + attention_units)))
                return (memory if memory > compute else compute) + cf + cm * tokens
            return step_ticks, None  # the attention term is rounded per step: no line

        self.parts = parts
        self._set_step(make)

    # ---------------------------------------------------------------- calibrated

    def _calibrated(self):
        # The roofline's two bounds with what measured GPUs add (docs/model.md "The calibrated
        # model"; the stack's constants: stacks.py). A step of n decoding sequences and p
        # prompt tokens (t = n + p tokens) takes
        #   host: step overhead + per sequence x n + per prompt token x p
        #   + max(memory: (weights + KV read and written) / (HBM x the GPU's STREAM share x hbm_share),
        #         compute: matmul FLOPs x (t + ramp) / t + attention FLOPs, at peak x compute share)
        #   + all-reduces (tp > 1): 2 per layer, each 2 (tp - 1) ring steps of a hop's latency
        #     (x the GPU's NCCL latency scale), plus its payload over NVLink x nvlink_share.
        # KV read: each decoding sequence's context, and each prompt chunk's earlier tokens
        # (a chunk re-reads what came before it). Attention FLOPs: each decode token over its
        # context, each chunk over its earlier tokens and half its own. A power cap slows the
        # clocked compute only: HBM, NVLink and the host keep their pace.
        m = self.model
        hw = self.spec
        stack = STACK_PRESETS[m.stack]
        shape = m.shape
        tp = self.tp
        share = stack["fp8_compute_share"] if m.dtype == "fp8" and hw["fp8_tflops"] > hw["peak_tflops"] else stack["compute_share"]
        bandwidth = hw["hbm_tb_s"] * 1e12 * hw["stream_share"] * stack["hbm_share"] * tp
        flops_per_s = m.peak_tflops(hw) * 1e12 * share * tp * self.clock
        weights = m.weight_bytes
        kv_per_token = m.kv_bytes_per_token
        flops_per_token = 2.0 * shape["params"]
        attention_flops = attention_flops_per_unit(m)
        ramp = stack["ramp_tokens"]
        allreduces = 2 * shape["layers"]
        if tp > 1:
            nvlink = hw["nvlink_gbytes_per_s"] * 1e9 * stack["nvlink_share"]
            # Activations stay BF16 (2 bytes) whatever the weights' dtype.
            comm_per_token = allreduces * (2.0 * (tp - 1) / tp) * shape["hidden"] * 2 / nvlink
            comm_fixed = allreduces * 2 * (tp - 1) * stack["allreduce_hop_us"] * hw["nccl_latency_scale"] * 1e-6
        else:
            comm_per_token = comm_fixed = 0.0
        host_fixed = stack["step_overhead_us"] * 1e-6
        host_per_seq = stack["host_us_per_seq"] * 1e-6
        host_per_prompt = stack["host_us_per_prompt_token"] * 1e-6
        attention_s = attention_flops / flops_per_s

        def parts(decode_seqs, context_tokens, prefill_tokens, attention_units=0.0, reread_tokens=0):
            # For the power model: compute_s is the time the step's own FLOPs need, without the
            # ramp (tiles a small step leaves idle draw little), so a batch-1 decode step reads
            # as memory-bound in watts too.
            tokens = decode_seqs + prefill_tokens
            memory_s = (weights + kv_per_token * (context_tokens + prefill_tokens + reread_tokens)) / bandwidth
            compute_s = (flops_per_token * tokens + attention_flops * (context_tokens + attention_units)) / flops_per_s
            host_s = host_fixed + host_per_seq * decode_seqs + host_per_prompt * prefill_tokens
            comm_s = comm_fixed + comm_per_token * tokens if tp > 1 else 0.0
            return memory_s, compute_s, comm_s + host_s

        self.parts = parts
        self.decode_affine = None  # two bounds, each a line: see decode_line
        # Ticks: every per-unit term rounded to whole picoseconds once, here; the prompt
        # chunks' attention units (a float) in seconds, rounded once per step.
        w, kv, fl, att, fixed, per_seq, per_prompt = (
            to_ticks(weights / bandwidth), to_ticks(kv_per_token / bandwidth), to_ticks(flops_per_token / flops_per_s),
            to_ticks(attention_s), to_ticks(host_fixed) + to_ticks(comm_fixed),
            to_ticks(host_per_seq) + to_ticks(comm_per_token), to_ticks(host_per_prompt) + to_ticks(comm_per_token))

        def make(num):  # (_set_step)
            w_, kv_, fl_, att_, fixed_, seq_, prompt_, ramp_ = map(num, (w, kv, fl, att, fixed, per_seq, per_prompt, ramp))

            def step_ticks(decode_seqs, context_tokens, prefill_tokens, attention_units=0.0, reread_tokens=0):
                memory = w_ + kv_ * (context_tokens + prefill_tokens + reread_tokens)
                compute = fl_ * (decode_seqs + prefill_tokens + ramp_) + att_ * context_tokens
                if attention_units:
                    compute += num(to_ticks(attention_s * attention_units))
                return (memory if memory > compute else compute) + fixed_ + seq_ * decode_seqs + prompt_ * prefill_tokens

            def decode_line(decode_seqs):
                # max(memory line, compute line) in the batch's context, plus the step's other terms.
                extra = fixed_ + seq_ * decode_seqs
                return w_ + extra, kv_, fl_ * (decode_seqs + ramp_) + extra, att_
            return step_ticks, decode_line

        self._set_step(make)

    def _set_step(self, make):
        # One truth for a step's time: `step_ticks` (what the engine and the reference
        # add up, ints); `step_s` is the same step in seconds, correctly rounded.
        # `step_ticks_float` gives the very same whole numbers as floats: exact while they
        # stay under 2**53, and CPython's float arithmetic is several times cheaper than
        # its arithmetic on ints past 2**30 (engine.py uses it when a run fits: docs/architecture.md
        # "Time base inside the engine"). `make` also gives `decode_line` (the module docstring), from the same
        # coefficients, so the engine's decode run-ahead reads the rule from here too.
        self.step_ticks, self.decode_line = make(int)
        self.step_ticks_float, self.decode_line_float = make(float)
        step_ticks = self.step_ticks

        def step_s(decode_seqs, context_tokens, prefill_tokens, attention_units=0.0, reread_tokens=0):
            return step_ticks(decode_seqs, context_tokens, prefill_tokens, attention_units, reread_tokens) / TICKS_PER_S

        self.step_s = step_s

    # ------------------------------------------------------------------ power

    def power_w(self, decode_seqs, context_tokens, prefill_tokens, attention_units=0.0, reread_tokens=0):
        """Watts one of the instance's GPUs draws during such a step: its full-clock power
        (compute share of the uncapped step), at most the cap."""
        free = self._uncapped
        _, compute_s, _ = free.parts(decode_seqs, context_tokens, prefill_tokens, attention_units, reread_tokens)
        step = free.step_s(decode_seqs, context_tokens, prefill_tokens, attention_units, reread_tokens)
        return step_power_w(self.spec, self.power_cap_w, compute_s, step)

    def energy_j(self, log, span, busy=None):
        """Joules all tp GPUs of one instance drew over a run of `span` seconds: each
        step's power x its time, and idle watts for the rest of the span.
        `busy`: `log.busy_s()`, if the caller has it."""
        if busy is None:
            busy = log.busy_s()
        idle_s = span - busy if span > busy else 0.0
        spec = self.spec
        dynamic = spec["tdp_w"] - spec["idle_w"]
        attention_args = getattr(log, "attention_args", None)
        if self.power_cap_w is None and not self.model.reads_attention:  # (calibrated reads attention)
            # Uncapped, power x time = (idle + 0.35 dyn) x time + 0.65 dyn x compute time,
            # and (without attention terms) compute time is linear in the log's columns.
            compute = (self._compute_per_decode_seq * sum(log.decode_seqs)
                       + self._compute_per_prefill_token * sum(log.prefill_tokens))
            active = ((spec["idle_w"] + dynamic * MEMORY_BOUND_SHARE) * busy
                      + dynamic * (1.0 - MEMORY_BOUND_SHARE) * compute)
        else:
            # Per step: the full-clock step's compute share (as power_w, inlined: this loop
            # runs once per logged step), at most the cap, for the step's own time.
            extra = attention_args or {}
            parts = self._uncapped.parts
            full_step = self._uncapped.step_s  # the full-clock step's time (whole ticks), as power_w
            base = spec["idle_w"] + dynamic * MEMORY_BOUND_SHARE
            slope = dynamic * (1.0 - MEMORY_BOUND_SHARE)
            cap = self.power_cap_w if self.power_cap_w is not None else math.inf
            terms = []  # watts x ticks (each step's time exact), in seconds once at the end
            for j, (s, e, n, p, c) in enumerate(zip(log.start_t, log.end_t, log.decode_seqs, log.prefill_tokens,
                                                    log.context_tokens)):
                args = (n, c, p, *extra.get(j, ())) if extra else (n, c, p)
                compute_s = parts(*args)[1]
                step = full_step(*args)
                watts = base + slope * (compute_s / step)
                terms.append((watts if watts < cap else cap) * (e - s))
            active = math.fsum(terms) / TICKS_PER_S
        return self.tp * (active + spec["idle_w"] * idle_s)


def role_time(log, end, reconfigurations=()):
    """[(role, from, to)] of one instance up to `end` (fleet.planner, `GpuLog.roles`): the
    time it served each role, a reload ("switching") counted in the pool it reloads for, so
    the pools' GPU-time adds up to the fleet's. `reconfigurations` (Result's) name where a
    reload still under way at `end` was going."""
    roles = log.roles
    out = []
    for i, (t0, role) in enumerate(roles):
        t1 = roles[i + 1][0] if i + 1 < len(roles) else end
        if role == "switching":
            if i + 1 < len(roles):
                role = roles[i + 1][1]
            else:
                role = next((r[3] for r in reversed(reconfigurations) if r[1] == log.index), roles[0][1])
        t0, t1 = min(t0, end), min(t1, end)
        if t1 <= t0:
            continue
        if out and out[-1][0] == role and out[-1][2] == t0:
            out[-1] = (role, out[-1][1], t1)
        else:
            out.append((role, t0, t1))
    return out or [(roles[0][1], 0.0, end)]


class _Steps:
    """The steps of one log begun in [t0, t1), as `PoolCost.energy_j` reads a log."""

    def __init__(self, log, first, last):
        self.start_t = log.start_t[first:last]
        self.end_t = log.end_t[first:last]
        self.decode_seqs = log.decode_seqs[first:last]
        self.prefill_tokens = log.prefill_tokens[first:last]
        self.context_tokens = log.context_tokens[first:last]
        extra = getattr(log, "attention_args", None) or {}
        self.attention_args = {j - first: v for j, v in extra.items() if first <= j < last}

    def busy_s(self):
        return to_seconds(sum(map(sub, self.end_t, self.start_t)))  # (whole ticks: exact)


def energy_by_role(cost, log, spans):
    """{role: joules} of one instance over `spans` (`role_time`): each step in the role it
    was begun in, idle watts for the rest of each span (a planner's pools share one GPU
    type, tp and cap, so one `cost` serves both)."""
    parts = {}
    starts = log.start_t
    first = 0
    for role, t0, t1 in spans:
        last = first
        t1_t = to_ticks(t1)
        while last < len(starts) and starts[last] < t1_t:
            last += 1
        steps = _Steps(log, first, last)
        parts.setdefault(role, []).append(cost.energy_j(steps, t1 - t0, steps.busy_s()))
        first = last
    return {role: math.fsum(joules) for role, joules in parts.items()}


def pool_costs(scenario):
    """One `PoolCost` per pool of the fleet, in GPU order (see `Scenario.pools`)."""
    return tuple(PoolCost.for_pool(scenario.model, pool) for pool in scenario.pools())


def instance_costs(scenario):
    """The `PoolCost` of every instance, by instance index (prefill instances first)."""
    out = []
    for cost, pool in zip(pool_costs(scenario), scenario.pools()):
        out.extend([cost] * pool.instances)
    return out


def step_time_fn(model, gpu=None, tp=1, power_cap_w=None):
    """`step_s` of one instance of `tp` GPUs of type `gpu` (default `model.gpu`)."""
    return PoolCost(model, gpu, tp, power_cap_w).step_s


def step_ticks_fn(model, gpu=None, tp=1, power_cap_w=None):
    """`step_ticks` (integer picoseconds, ticks.py) of one such instance: what the engine
    and the reference simulator both add up."""
    return PoolCost(model, gpu, tp, power_cap_w).step_ticks


def attention_flops_per_unit(model):
    """4 x layers x heads x head dim: attention FLOPs of one query token over one key token
    (QK^T and the weighted sum of V, 2 FLOPs per multiply-add each)."""
    shape = model.shape
    return 4.0 * shape["layers"] * shape["heads"] * shape["head_dim"]
