"""The discrete-event engine: colocated and disaggregated fleets.

The loop reads like SimPy's `Environment.step`: a heap of `(time, priority, key)`
events. At equal times arrivals come first, then KV transfers landing, then GPU step
boundaries (ordered by GPU index), then the layer-wise fifo wire's turn (it must see
every chunk that becomes ready at that time), then the planner's (`fleet.planner`:
instances that finished reloading join their new pool, by GPU index, then a planning
moment decides), so the order is fully determined by the scenario. The layer-wise link
itself lives in `link.py`; the planner's rules in `planner.py` and its handlers (an
instance's move: drain, hand-over, reload, join) in `role_changes.py`; arrivals (queues,
routing, early rejection) in `arrivals.py`; what a step prefills (admission, whole prompts
or chunks) in `batching.py`; what a sequence holds in KV in `kv_policy.py` (the run's
policy, which every handler here calls); a run's cut and its times back in seconds in
`run_end.py`.

Time is whole picosecond ticks throughout the loop (docs/model.md "Time base", ticks.py): a
step's end is its start + `cost.step_ticks(...)`, exact arithmetic on whole numbers, so
any order of adding a stretch's steps gives the same end. They are floats in a run that
stays under 2**52 ticks (`FLOAT_TICKS_BELOW`: exact there, and cheaper), ints beyond. Seconds become ticks once where they enter
(`__init__`: arrivals, the cap; `_reserve_and_send`: wire times; `_pop_queue`: prefix
fetches; the planner's moments) and the Result's per-request times are turned back into
seconds at the end (`run_end.in_seconds`); its step columns stay ticks (`GpuLog.start_t`,
`end_t`), their seconds made only when read (result.py).

Bookkeeping per step is O(1): a GPU keeps the number of decoding sequences and the sum
of their context lengths, and a map from step index to the sequences whose last token
that step emits. No per-token work is done; per-request gaps come from the step log.

Prefix caching (`prefix_cache.py`, docs/model.md "Prefix caching") touches the loop in three
places only, each once per prompt: the lookup when an instance admits a prompt
(`_pop_queue`), the insert when its prefill ends, and a shared pool's fetch added to the
step that admitted it (`_prefill_step_s`). With the cache off `self.cache` is None.
"""

import gc
from collections import deque
from heapq import heappop, heappush

from . import kv_policy
from .arrivals import Arrivals
from .batching import Batching
from .collector import held_off
from .cost import pool_costs
from .events import ARRIVAL, BOUNDARY, INF, LANDED, LINK, PLAN
from .link import FifoWire, stream_alone
from .policies import DECODE_PICKS
from .prefix_cache import build_cache, kv_taken_tokens
from .result import GpuLog, RequestRecord, Result, Transfer
from .role_changes import RoleChanges
from .run_end import cut_at, cut_kv_logs, in_seconds
from .ticks import TICKS_PER_S, to_seconds, to_ticks
from .workload import generate_requests

__all__ = ["simulate", "MAX_STEPS"]

# A hard bound on logged steps so no input can eat unbounded memory: a step costs about
# 100 bytes in CPython while its logs are lists (list slots, its end time and context as
# objects) and 32 once they are typed arrays (result.py), which a run's logs become after
# COMPACT_STEPS steps, so the bound's steps take about 1.2 GB (docs/architecture.md "Scale").
MAX_STEPS = 36_000_000
PROGRESS_ARRIVALS = 5_000  # a `progress` callback hears from the run this often (arrivals)
# A run's logs become typed arrays (GpuLog.compact) at the first arrival after it has
# logged this many steps (all GPUs), and at its end if it got there later, so the rest of
# a big run appends to arrays: a third of the memory, and at tens of millions of steps no
# slower than lists (1m-128: 53.8 s against 53.3 s, peak 2.8 against 6.5 GB), though at a
# few million a list's specialized append is quicker (100k-128: 5.2 s against 4.5 s:
# benchmarks/README.md, "Scale"); smaller runs, where the memory does not matter, keep
# their lists (mission-sized runs log 20k-50k steps).
COMPACT_STEPS = 1_000_000
# Runs whose times stay below this many ticks hold them as whole-number floats (exact
# under 2**53, with room to spare), longer runs as ints (docs/model.md "Time base", __init__).
FLOAT_TICKS_BELOW = 2**52


class _Gpu:
    """One instance's live state (`cost.tp` GPUs acting as one; with tp 1, a GPU).
    `log` is its step history, `step_t` its pool's step time in ticks (`cost.step_ticks`)."""

    __slots__ = (
        "index", "role", "log", "cost", "step_t", "kv_tokens", "idle", "busy", "kv_free", "seqs", "decoding", "context",
        "finish_at", "decode_line", "prefilling", "completing", "landed", "queue", "queue_k", "pending", "pieces", "fetch",
        "held", "grow_at", "moving", "rejoin", "line_seqs", "line_abf", "gap_ticks",
    )

    def __init__(self, index, role, cost, first_gpu):
        self.index = index
        self.role = role
        # The log stores its times as ticks (start_t, end_t), and so does the Result.
        self.log = GpuLog(index, role, tp=cost.tp, gpu_type=cost.gpu, start_t=[], end_t=[],
                          gpu_ids=tuple(range(first_gpu, first_gpu + cost.tp)))
        self.cost = cost
        self.step_t = cost.step_ticks
        self.decode_line = cost.decode_line  # a decode-only step as a line in its context (cost.py)
        self.line_seqs, self.line_abf = -1, None  # the last batch size its line was worked out for, and the line
        kv_tokens = self.kv_tokens = cost.kv_tokens
        self.idle = True  # no boundary event is scheduled: woken by an arrival or a landing
        self.busy = False  # a step is running; its outcome is applied at the next boundary
        # Ticks between its first step's start and its last step's end that ran no step:
        # its busy time is that span less these (GpuLog.busy_ticks), with no sum per step.
        self.gap_ticks = 0
        self.kv_free = kv_tokens  # tokens not reserved (prompt + output reserved per sequence)
        self.seqs = 0  # sequences holding a slot: prefilling, decoding or landing
        self.decoding = 0  # sequences that emit a token in the next step
        self.context = 0  # sum of their context lengths (prompt + tokens so far)
        self.finish_at = {}  # step index -> [request ids whose last token that step emits]
        self.prefilling = []  # [request id, prompt tokens still to prefill] (chunked prefill), admission order
        self.completing = []  # request ids whose prefill ends with the current step
        self.landed = []  # request ids whose KV has arrived, joining at the next boundary
        self.queue = None  # the FIFO it takes prompts from (shared or its own: policies.py)
        self.queue_k = 0  # that queue's number
        self.pending = 0  # prompt tokens of prompts admitted here, prefill not yet ended
        self.pieces = []  # model.attention: (new tokens, earlier tokens) of each prompt chunk in the next step
        self.fetch = 0  # shared prefix cache: ticks of cached KV the next step fetches first
        # The KV memory policy's units (kv_policy.py): those each sequence holding KV here has,
        # in admission order, and step index -> sequences that need one more in that step.
        self.held = {}
        self.grow_at = {}
        self.moving = None  # fleet.planner: the role it is draining or reloading for
        self.rejoin = []  # moved sequences whose KV has arrived (planner), joining at the next boundary


def simulate(scenario, requests=None, progress=None):
    """Run `scenario`; `requests` ([(arrival, prompt, output)] or [(arrival, prompt, output,
    hash_ids)]) overrides its workload. `progress(simulated_s, arrivals_end_s)`, if given, is
    called every PROGRESS_ARRIVALS arrivals (a long run's CLI shows it; it changes nothing)."""
    with held_off() as holding:  # (no collections during the run: lab/core/collector.py)
        if requests is None:
            requests = generate_requests(scenario.workload, scenario.seed)
        simulation = _Simulation(scenario, requests, progress)
        if holding:
            # Its records and step lists live to the end of the run: moved now, the lists
            # still empty, to the oldest generation, the collections after the run do not walk
            # them (docs/architecture.md "Scale").
            gc.collect(1)
        return simulation.run()


class _Simulation(Arrivals, Batching, RoleChanges):
    # Slots, not a __dict__: CPython 3.11 keeps `self.x` fast for a dict only while the class
    # has at most 30 attribute names (its shared-keys limit; a 30th cost 5% more instructions
    # per run, valgrind on benchmarks/scenarios.py's disagg-4p4d), and each mechanism adds
    # its own state. Every attribute the engine sets is listed here, so a new one that is
    # not fails at once (AttributeError).
    __slots__ = (
        "admit", "arrival_t", "arrivals_end", "arrivals_end_s", "attention", "before", "block", "boundary", "cache", "capped", "decode_gpus",
        "extra_terms", "fleet", "floats", "gpus", "handlers", "heap", "kv_bytes", "kv_grows", "kv_policy", "landings", "layers",
        "link_free", "link_wake", "moved", "moving", "next_arrival", "next_plan", "plan_times",
        "plan_interval", "planner", "preempt_into", "prefill_gpus", "prefill_next", "progress", "queue_arrivals", "queue_next", "queue_rates",
        "queued_tokens", "queues", "reconfigurations", "records", "role_kv", "route", "scenario", "skip", "src", "steps", "switch_t",
        "takers", "takers_of", "tick", "time_cap", "todo", "transfer_args", "transfers", "ttft_target", "waiting_reserve",
        "wire",
    )

    def __init__(self, scenario, requests, progress=None):
        self.scenario = scenario
        self.progress = progress  # (simulate's callback, when one is given)
        fleet = scenario.fleet
        self.fleet = fleet
        self.admit = self._admit  # bound once: _take_prompts hands it on at every step
        self.kv_bytes = scenario.model.kv_bytes_per_token
        self.layers = scenario.model.shape["layers"]
        if any(len(r) > 3 for r in requests):  # some carry block hashes (prefix caching)
            self.records = [RequestRecord(i, *r[:3], hash_ids=tuple(r[3]) if len(r) > 3 else ())
                            for i, r in enumerate(requests)]
        else:
            self.records = [RequestRecord(i, a, p, o) for i, (a, p, o) in enumerate(requests)]
        # Prompt tokens each request's next prefill processes: its prompt, or after a
        # preemption (kv_policy on_demand) prompt + the tokens it already emitted.
        self.todo = [rec.prompt_tokens for rec in self.records]
        # Prompt tokens its current prefill skips: what the prefix cache held at its admission
        # (its first prefill's is rec.prefix_hit_tokens; a re-prefill looks the cache up again).
        self.skip = [0] * len(self.records)
        # Time inside the run is integer ticks (ticks.py), converted once here and back to
        # seconds in the Result (run_end.in_seconds). A record's arrival becomes the tick it arrives at.
        wl = scenario.workload
        last_arrival = requests[-1][0] if requests else 0.0
        arrivals_end = wl.duration_s if wl.duration_s is not None and wl.trace is None else last_arrival
        if wl.trace is not None and wl.duration_s is not None:
            arrivals_end = max(wl.duration_s, last_arrival)
        cap_s = max(arrivals_end, last_arrival) + scenario.drain_s
        # Ticks are whole numbers. A run whose times stay under 2**52 ticks (75 minutes: its
        # cap, plus every request's KV on the link once, which may run past it) holds them
        # as floats, exact there and much cheaper in CPython than ints past 2**30; a longer
        # run holds them as ints. Same whole numbers either way, so the same results.
        horizon = to_ticks(cap_s)
        if fleet.layout == "disaggregated":
            tokens = sum(rec.prompt_tokens + rec.output_tokens for rec in self.records)
            horizon += to_ticks(tokens * self.kv_bytes / (fleet.link.gbytes_per_s * 1e9))
        if fleet.planner_on:
            horizon += to_ticks(fleet.planner.switch_s)
        self.floats = horizon < FLOAT_TICKS_BELOW
        tick = self.tick = _float_ticks if self.floats else to_ticks
        self.arrival_t = [tick(rec.arrival) for rec in self.records]
        for rec, t in zip(self.records, self.arrival_t):
            rec.arrival = t / TICKS_PER_S
        self.arrivals_end_s = arrivals_end
        self.arrivals_end = tick(arrivals_end)
        self.time_cap = tick(cap_s)
        self.heap = []
        self.transfers = []
        self.steps = 0
        self.capped = None  # why the run was cut short: "drain_s", "max_steps" or None
        # Instances, pool by pool in GPU order; each runs its pool's cost and KV capacity.
        self.gpus = []
        self.role_kv = {}  # role -> an instance's KV tokens in it (a planner's mover takes its new role's)
        for pool, cost in zip(scenario.pools(), pool_costs(scenario)):
            taken = kv_taken_tokens(scenario, pool)  # a per_gpu prefix cache's share of HBM
            self.role_kv[pool.role] = cost.kv_tokens - taken
            for k in range(pool.instances):
                gpu = _Gpu(len(self.gpus), pool.role, cost, pool.first_gpu + k * pool.tp)
                if taken:
                    gpu.kv_tokens -= taken
                    gpu.kv_free = gpu.kv_tokens
                if self.floats:
                    gpu.step_t = cost.step_ticks_float
                    gpu.decode_line = cost.decode_line_float
                self.gpus.append(gpu)
        self.prefill_gpus = [g for g in self.gpus if g.role == "prefill"]
        self.decode_gpus = [g for g in self.gpus if g.role == "decode"]
        # Disaggregated: (request id, prefill end, start of the step that ends it: layer-wise
        # only) waiting for decode KV, FIFO.
        self.waiting_reserve = deque()
        self.link_free = 0  # fifo link, whole transfers: when the wire is next free
        link = fleet.link
        # Layer-wise on a fifo link: the shared wire, and when its next turn is on the heap.
        self.wire = FifoWire(self.layers) if link.layerwise and link.sharing == "fifo" else None
        self.link_wake = INF
        self.next_arrival = float("inf")  # time of the next request not yet arrived
        self.landings = []  # heap of pending KV landing times
        # Each prefill GPU's next boundary, by GPU index (with a planner any GPU may prefill).
        self.prefill_next = [float("inf")] * len(self.gpus if fleet.planner_on else self.prefill_gpus)
        self.planner = fleet.planner if fleet.planner_on else None
        if self.planner is not None:  # its moments and reload time, in ticks
            self.plan_interval = tick(self.planner.interval_s) if self.planner.policy == "utilization" else None
            self.switch_t = tick(self.planner.switch_s)
        self.next_plan = INF  # the earliest planner event on the heap: decode run-ahead stops there
        self.plan_times = []  # heap of the planner events' times
        self.moving = 0  # instances draining or reloading
        self.moved = {}  # request id -> (source GPU, tokens emitted) of a sequence being moved
        self.reconfigurations = []  # [t decided, GPU, from, to, t ready]
        # Attention terms only where the cost model reads them (Model.reads_attention).
        self.attention = scenario.model.reads_attention
        # Prefix caching (prefix_cache.py): None when off, so the default path only tests it
        # once per prompt; a shared pool's fetch time joins attention in the one per-step
        # test of prefill steps that need extra terms.
        self.cache = build_cache(scenario, [g.role for g in self.gpus])
        self.extra_terms = self.attention or (self.cache is not None and fleet.prefix_cache == "shared")
        self._plan_queues(scenario)
        if fleet.admission is not None:
            self._plan_admission(scenario)
        # KV memory (kv_policy.py): every handler below asks the policy what a sequence holds.
        policy = self.kv_policy = kv_policy.make(fleet, self.records, self.gpus, self._preempt)
        self.block = policy.block
        # Whether sequences take more KV as they decode (on demand): the policy's work at every
        # boundary (growth, its log), and no shortcut that skips it. Reserve: none of it.
        self.kv_grows = policy.grows
        # Per queue: whether another instance taking from it can preempt into it (so a
        # decode-only run-ahead must stop where one first could).
        self.preempt_into = [policy.grows and len(takers) > 1 for takers in self.takers_of]
        self.before = {}  # request id -> tokens it emitted before its current stretch (preempted, moved)
        self.src = {}  # request id -> the GPU of its latest re-prefill (split fleet)


    # ------------------------------------------------------------------ loop

    def run(self):
        heap = self.heap
        self._drop_oversized()
        self._plan_arrivals()
        self._push_next_arrival(0)
        self.handlers = handlers = {"colocated": self._colocated_boundary, "prefill": self._prefill_boundary,
                                    "decode": self._decode_boundary}
        self.boundary = boundary = [handlers[g.role] for g in self.gpus]  # by GPU index; the planner swaps them
        if self.planner is not None:
            self._plan_start()
        gpus = self.gpus
        pop = heappop
        cap = self.time_cap
        events = 0
        arrive = self._arrive if self.fleet.admission is None else self._arrive_admitting
        compact_at = COMPACT_STEPS  # a big run's logs become typed arrays as it goes (COMPACT_STEPS)
        report_at = PROGRESS_ARRIVALS if self.progress is not None else INF  # (request index of the next report)
        # `while True` and a break, not `while heap`: CPython 3.11 warms a function up for
        # specialization only on plain backward jumps, and run() is called once per run, so
        # under `while heap` the event loop ran unspecialized for a session's first eight
        # runs (9% more instructions on benchmarks/bench_core.py's scenarios).
        while True:
            if not heap:
                break
            t, kind, key = pop(heap)
            if t > cap or self.steps >= MAX_STEPS:
                if kind == LINK and t != self.link_wake or kind == PLAN:
                    continue  # a superseded wire turn, or the planner alone, says nothing about the run
                self.capped = "max_steps" if self.steps >= MAX_STEPS else "drain_s"
                stop = cap if self.capped == "drain_s" else t
                break
            events += 1
            if kind == BOUNDARY:
                boundary[key](gpus[key], t)
            elif kind == ARRIVAL:
                arrive(key, t)
                if self.steps >= compact_at:  # checked per arrival, not per event: cheaper
                    compact_at = INF
                    for gpu in gpus:
                        gpu.log.compact(GpuLog.COLUMN_TYPES if self.floats else GpuLog.TICK_COLUMN_TYPES)
                if key >= report_at:
                    report_at = key + PROGRESS_ARRIVALS
                    self.progress(t / TICKS_PER_S, self.arrivals_end_s)
            elif kind == LANDED:
                self._land(key, t)
            elif kind == LINK:
                self._link_turn(t)
            else:
                self._plan(key, t)
        if self.wire is not None:
            self.wire.serve(INF)  # a cut run: chunks still waiting get their places as if it went on
        if self.capped:
            cut_at(self.gpus, self.records, stop)  # (its logs lose steps: their `busy_t` adds up those kept)
            cut_kv_logs(self.gpus, stop)  # (empty under reserve)
            end_time = stop
        else:
            for gpu in self.gpus:
                log = gpu.log
                log.busy_ticks = log.end_t[-1] - log.start_t[0] - gpu.gap_ticks if log.end_t else 0
            end_time = max((g.log.end_t[-1] for g in self.gpus if g.log.end_t), default=0)
            end_time = stop = max(end_time, self.arrivals_end)
        in_seconds(self.records, [g.log for g in self.gpus], self.transfers, self.floats)
        end_s = max(end_time / TICKS_PER_S, self.arrivals_end_s)
        stopped_s = stop / TICKS_PER_S if self.capped else end_s
        result = Result(
            scenario=self.scenario,
            requests=self.records,
            gpus=_compacted([g.log for g in self.gpus], self.floats),
            transfers=self.transfers,
            end_time=end_s,
            arrivals_end=self.arrivals_end_s,
            capped=self.capped,
            events=events,
            stopped_at=stopped_s,
            reconfigurations=[(to_seconds(r[0]), r[1], r[2], r[3], to_seconds(r[4])) for r in self.reconfigurations],
        )
        return result

    def _drop_oversized(self):
        """Requests no instance could ever hold: the most KV a request holds (kv_policy.py) over
        a colocated or decode instance's room, or the prompt over a prefill instance's KV."""
        policy = self.kv_policy
        holder = (self.decode_gpus or self.gpus)[0]  # holds prompt + output
        prefill = self.prefill_gpus[0] if self.prefill_gpus else None  # holds the prompt
        room = policy.room(holder.kv_tokens) // self.block
        most_prompt = prefill.kv_tokens if prefill is not None else holder.kv_tokens
        for rec in self.records:
            need = policy.peak(rec)
            if need > room:
                rec.dropped = f"needs {need:,} {policy.unit_words}; {_holder(holder)} holds {room:,}"
            elif rec.prompt_tokens > most_prompt:
                rec.dropped = f"needs {rec.prompt_tokens:,} KV tokens; {_holder(prefill)} holds {most_prompt:,}"

    def _start_step(self, gpu, t, prefill_tokens, schedule=True):
        """Log a step beginning at t and (if `schedule`) put its end on the heap.

        Returns the step's end, or None when there is nothing to do and the GPU idles.
        """
        if not gpu.decoding and not prefill_tokens:
            gpu.idle = True
            gpu.busy = False
            return None
        log = gpu.log
        # A step starts where the one before ended unless the GPU stopped in between (idle,
        # or reloading for a new role: busy is False; the run-ahead loops never stop).
        if not gpu.busy and log.end_t:
            gpu.gap_ticks += t - log.end_t[-1]
        gpu.busy = True
        if prefill_tokens and self.extra_terms:
            duration = self._prefill_step_s(gpu, log, prefill_tokens)
        else:
            duration = gpu.step_t(gpu.decoding, gpu.context, prefill_tokens)
        end = t + duration
        log.start_t.append(t)
        log.end_t.append(end)
        log.decode_seqs.append(gpu.decoding)
        log.prefill_tokens.append(prefill_tokens)
        log.context_tokens.append(gpu.context)
        self.steps += 1
        if schedule:
            heappush(self.heap, (end, BOUNDARY, gpu.index))
        return end

    def _prefill_step_s(self, gpu, log, prefill_tokens):
        """A prompt step's time with its extra terms: attention, a shared cache's fetch."""
        if self.attention:
            # Each chunk of c new tokens after p earlier ones: c * (p + c/2) attention
            # units and a re-read of the p earlier tokens' KV (cost.py); the log keeps
            # them for the power model.
            units = 0.0
            reread = 0
            for c, p in gpu.pieces:
                units += c * (p + c / 2)
                reread += p
            gpu.pieces = []
            log.attention_args[len(log.start_t)] = (units, reread)
            duration = gpu.step_t(gpu.decoding, gpu.context, prefill_tokens, units, reread)
        else:
            duration = gpu.step_t(gpu.decoding, gpu.context, prefill_tokens)
        if gpu.fetch:
            # The prompts this step starts fetch their cached KV first, one after another,
            # and the GPU waits for it (docs/model.md "Prefix caching").
            log.fetch_s[len(log.start_t)] = gpu.fetch
            duration += gpu.fetch
            gpu.fetch = 0
        return duration

    def _finish_decode_step(self, gpu, t):
        """Account for the step that just ended on a decoding GPU; returns True if KV was freed."""
        step = len(gpu.log.start_t) - 1
        gpu.context += gpu.decoding  # every decoding sequence grew by one token
        done = gpu.finish_at.pop(step, None)
        if not done:
            return False
        records = self.records
        held = gpu.held
        for rid in done:
            rec = records[rid]
            rec.finish = t
            gpu.decoding -= 1
            gpu.context -= rec.prompt_tokens + rec.output_tokens
            gpu.kv_free += held.pop(rid) * self.block
            gpu.seqs -= 1
        return True

    def _decode_from(self, gpu, rec, emitted, context, first=None):
        """`rec`, having emitted `emitted` tokens, decodes on `gpu` one token a step until its
        last, from the next step (or from step `first`: a re-prefill's, which emits its next
        token); in the next step it attends `context` tokens, where its KV growth starts."""
        rid = rec.id
        step = len(gpu.log.start_t)
        if first is None:
            first = step
        last = first + rec.output_tokens - emitted - 1
        rec.decode_gpu = gpu.index
        rec.decode_first_step = first
        rec.decode_last_step = last
        gpu.decoding += 1
        gpu.context += context
        gpu.finish_at.setdefault(last, []).append(rid)
        if self.kv_grows:
            self.kv_policy.track(gpu, rec, step, context)

    # ------------------------------------------------------------- colocated

    def _colocated_boundary(self, gpu, t):
        if gpu.busy and not gpu.completing and not gpu.queue and not gpu.prefilling and not self.kv_grows:
            # A decode-only boundary with nothing to take (most boundaries of a busy fleet):
            # the run-ahead loop applies it, logs the next step and runs on to the limit,
            # as the general path below would, without its calls.
            limit = self.next_arrival if self.queue_next is None else self.queue_next[gpu.queue_k]
            end = self._run_decode_only(gpu, t, limit)
            if end is not None:
                heappush(self.heap, (end, BOUNDARY, gpu.index))
            return
        records = self.records
        grows = self.kv_grows
        if gpu.busy:
            self._finish_decode_step(gpu, t)
            cache = self.cache
            for rid in gpu.completing:
                rec = records[rid]
                if cache is not None:  # every prefill's end adds its prompt's blocks, a re-prefill's too
                    cache.insert(gpu.index, rec.hash_ids)
                gpu.pending -= self.todo[rid]
                if rec.preemptions:
                    # A re-prefill (kv_policy on_demand) emits its next token now: its new
                    # stretch starts with this step.
                    emitted = self.before[rid]
                    ended = len(gpu.log.start_t) - 1
                    if emitted + 1 < rec.output_tokens:
                        self._decode_from(gpu, rec, emitted, rec.prompt_tokens + emitted + 1, ended)
                        continue
                    rec.decode_gpu, rec.decode_first_step, rec.decode_last_step = gpu.index, ended, ended
                else:
                    rec.prefill_end = t
                    rec.first_token = t
                    if rec.output_tokens > 1:
                        self._decode_from(gpu, rec, 1, rec.prompt_tokens + 1)
                        continue
                rec.finish = t  # its last token
                gpu.kv_free += gpu.held.pop(rid) * self.block
                gpu.seqs -= 1
            gpu.completing = []
        if grows and gpu.grow_at:
            self.kv_policy.grow(gpu, t)
        prefill_tokens = self._take_prompts(gpu, t) if (gpu.queue or gpu.prefilling) else 0
        if grows:
            self.kv_policy.note(gpu, t)
        end = self._start_step(gpu, t, prefill_tokens, schedule=False)
        if end is None:
            return
        # Colocated GPUs share only their queues: while this one's is empty, nothing before
        # the next arrival can touch this GPU (least_loaded reads it only at arrivals), so
        # its decode-only steps can run ahead; with a rule that binds prompts from their
        # order or length (_plan_arrivals), until the next arrival into its own queue; on
        # demand, on a queue other GPUs take from too, only until one of them could preempt
        # (its victim would join this queue).
        if not prefill_tokens and not gpu.prefilling and not gpu.queue:
            limit = self.next_arrival if self.queue_next is None else self.queue_next[gpu.queue_k]
            if grows and end < limit and self.preempt_into[gpu.queue_k]:
                quiet = self.kv_policy.quiet_until(gpu, self.takers_of[gpu.queue_k])
                if quiet < limit:
                    limit = quiet
            if end < limit:
                end = self._run_decode_only(gpu, end, limit)
        if end is not None:
            heappush(self.heap, (end, BOUNDARY, gpu.index))

    def _run_decode_only(self, gpu, t, limit):
        """Fast path: take a GPU's decode-only steps without the event heap.

        Callers guarantee that no event before `limit` can read or change this GPU's
        state (see `_colocated_boundary` and `_decode_boundary`), so its boundaries
        before `limit` are processed here in a tight loop, exactly as the heap would.
        `t` is the end of the step just logged. Returns the boundary to put on the
        heap, or None when the GPU went idle.

        While the batch stays the same a step's time is a line in its context,
        max(a + b x context, floor + slope x context) (`cost.decode_line`, the cost model's own rule, exact in
        whole ticks), worked out again only when sequences finish and kept on the GPU between
        calls (`line_seqs`, `line_abf`): no call per step, nor per call of one step. A cost
        model without such a line (`model.attention`) is called each step.

        KV growth (`gpu.grow_at`: empty unless the KV policy grows sequences, on demand) costs
        nothing per step: the loop stops at `stop`, the boundary before the next step in which
        a sequence needs another block (or the step bound), and there gives the blocks as the
        policy's `grow` would (growing sequences never finish there, so before the finished
        ones free theirs). A boundary whose growth does not fit would preempt: it is handed
        back (t returned) before anything of it is applied.
        """
        cap = self.time_cap
        if t > cap:
            return t  # a boundary after the cap is the heap's: popping it stops the run there
        log = gpu.log
        starts, ends = log.start_t, log.end_t
        seqs_col, prefill_col, context_col = log.decode_seqs, log.prefill_tokens, log.context_tokens
        finish_at = gpu.finish_at
        line = gpu.decode_line
        decoding = gpu.decoding
        context = gpu.context
        if not line:
            a = b = floor = slope = 0
            step_t = gpu.step_t
        elif gpu.line_seqs == decoding:  # (at 128 GPUs most calls take one step: no call for it)
            a, b, floor, slope = gpu.line_abf
        else:
            a, b, floor, slope = gpu.line_abf = line(decoding)
            gpu.line_seqs = decoding
        first = step = len(starts) - 1  # the step that ends at t
        stop = step + (MAX_STEPS - self.steps or 1)  # where the steps bound stops it (after one step at least)
        if gpu.grow_at:
            due = min(gpu.grow_at)  # the next step in which a sequence needs another block
            if due <= stop:
                stop = due - 1
        while True:
            # The boundary at t: the step that just ended emitted a token per sequence.
            if step >= stop:
                last = first + (MAX_STEPS - self.steps or 1)  # (self.steps is as at the start)
                if step >= last:
                    gpu.decoding, gpu.context = decoding, context
                    self.steps += step - first
                    return t
                done = finish_at.get(step)
                if not self.kv_policy.give(gpu, step + 1, done):  # it would preempt
                    gpu.decoding, gpu.context = decoding, context
                    self.steps += step - first
                    return t
                if not done:  # (else logged once they have freed theirs, below)
                    self.kv_policy.note(gpu, t)
                stop = last
                if gpu.grow_at:
                    due = min(gpu.grow_at)
                    if due <= last:
                        stop = due - 1
            context += decoding
            if step in finish_at:
                done = finish_at.pop(step)
                records = self.records
                held = gpu.held
                block = self.block
                for rid in done:
                    rec = records[rid]
                    rec.finish = t
                    decoding -= 1
                    context -= rec.prompt_tokens + rec.output_tokens
                    gpu.kv_free += held.pop(rid) * block
                    gpu.seqs -= 1
                if self.kv_grows:
                    self.kv_policy.note(gpu, t)
                if not decoding:
                    gpu.decoding, gpu.context = 0, context
                    gpu.idle, gpu.busy = True, False
                    self.steps += step - first
                    return None
                if line:
                    a, b, floor, slope = gpu.line_abf = line(decoding)
                    gpu.line_seqs = decoding
            if line:
                duration = a + b * context
                bound = floor + slope * context if slope else floor
                end = t + (duration if duration > bound else bound)
            else:
                end = t + step_t(decoding, context, 0)
            starts.append(t)
            ends.append(end)
            seqs_col.append(decoding)
            prefill_col.append(0)
            context_col.append(context)
            step += 1
            t = end
            if end >= limit or end > cap:
                gpu.decoding, gpu.context = decoding, context
                self.steps += step - first
                return end


    # --------------------------------------------------------- disaggregated

    def _prefill_boundary(self, gpu, t):
        records = self.records
        layerwise = self.fleet.link.layerwise
        if gpu.completing:
            self._end_prefills(gpu, t, layerwise)
        # Next step: queued prompts up to the token budget (at least one), or a chunk budget.
        chunk = self.fleet.prefill_chunk_tokens
        if chunk is None:
            taken = self._take_whole(gpu, t, self._pop_queue) if gpu.queue else 0
        else:
            taken = self._take_chunks(gpu, t, chunk, self._pop_queue)
        end = self._start_step(gpu, t, taken)
        self.prefill_next[gpu.index] = INF if end is None else end
        if end is not None and layerwise:
            # Streaming starts with the first layer of the step that ends a prompt's prefill
            # (its last chunk), so room is reserved when that step starts; its layers are
            # ready over that step.
            for rid in gpu.completing:
                if records[rid].output_tokens > 1:
                    self.waiting_reserve.append((rid, end, t))
            self._reserve_and_send(t)

    def _end_prefills(self, gpu, t, layerwise):
        """The prompts whose prefill ended with the step that ends at t: first token or KV out."""
        records = self.records
        first_at_prefill = self.fleet.first_token == "prefill"
        cache = self.cache
        for rid in gpu.completing:
            rec = records[rid]
            if cache is not None:
                cache.insert(gpu.index, rec.hash_ids)
            gpu.pending -= self.todo[rid]
            if rec.preemptions:  # a re-prefill (kv_policy on_demand): its KV goes again
                if not layerwise:
                    self.waiting_reserve.append((rid, t, None))
                continue
            rec.prefill_end = t
            if rec.output_tokens == 1:
                rec.first_token = rec.finish = t  # nothing left to decode: no transfer
                continue
            if first_at_prefill:
                rec.first_token = t
            if not layerwise:
                self.waiting_reserve.append((rid, t, None))
        gpu.completing = []
        if not layerwise:
            self._reserve_and_send(t)

    def _reserve_and_send(self, t):
        """Reserve decode KV for waiting prompts in FIFO order and put their KV on the link."""
        records = self.records
        waiting = self.waiting_reserve
        max_seqs = self.fleet.max_batch_seqs
        link = self.fleet.link
        bandwidth = link.gbytes_per_s * 1e9
        pick_decode = DECODE_PICKS[self.fleet.decode_pick]
        decode_gpus = self.decode_gpus
        policy = self.kv_policy
        while waiting:
            rid, prefill_end, layers_from = waiting[0]
            rec = records[rid]
            moved = self.moved.get(rid) if self.moved else None  # (source GPU, tokens emitted)
            # Its KV: what it prefilled, or a moved sequence's context; the policy's units for it.
            tokens = self.todo[rid] if moved is None else rec.prompt_tokens + moved[1]
            units = policy.units(rec, tokens)
            need = units * self.block
            pick = pick_decode(need, max_seqs, decode_gpus)
            if pick is None:
                return
            best = decode_gpus[pick]
            waiting.popleft()
            best.kv_free -= need
            best.held[rid] = units
            best.seqs += 1
            if self.kv_grows:
                policy.note(best, t)
            rec.decode_gpu = best.index
            if moved is not None:
                # A sequence moved off an instance that changes role: its KV so far goes
                # whole from there; rec.transfer stays its prompt's.
                src = moved[0]
            elif rec.preemptions:
                src = self.src[rid]  # its re-prefill's GPU; rec.transfer stays its first
            else:
                src = rec.prefill_gpu
                rec.transfer = len(self.transfers)
            nbytes = tokens * self.kv_bytes
            if link.layerwise and moved is None:
                tr = Transfer(rec.id, src, best.index, prefill_end, t, None, None, nbytes,
                              self.tick(nbytes / self.layers / bandwidth))
                self.transfers.append(tr)
                if self.wire is not None:
                    self.wire.add(tr, layers_from)  # its landing is known once its chunks have places
                    self._wake_link()
                    continue
                stream_alone(tr, layers_from, self.layers)
                self._schedule_landing(tr)
                continue
            start = t
            if link.sharing == "fifo" and self.link_free > start:
                start = self.link_free
            end = start + self.tick(nbytes / bandwidth)
            if link.sharing == "fifo":
                self.link_free = end
            tr = Transfer(rec.id, src, best.index, prefill_end, t, start, end, nbytes)
            self.transfers.append(tr)
            self._schedule_landing(tr)

    def _schedule_landing(self, tr):
        heappush(self.heap, (tr.end, LANDED, tr.request))
        heappush(self.landings, tr.end)

    def _wake_link(self):
        """Give the fifo wire a turn when its earliest waiting chunk becomes ready."""
        when = self.wire.next_ready()
        if when < self.link_wake:
            self.link_wake = when
            heappush(self.heap, (when, LINK, 0))

    def _link_turn(self, t):
        """Place the chunks whose order on the fifo wire can no longer change."""
        if t != self.link_wake:
            return  # superseded by an earlier turn
        self.link_wake = INF
        # New chunks come from reservations: while prompts wait for room any decode step
        # may make one (ready after now); otherwise only a prefill batch starting, at a
        # prefill boundary or an arrival, and its layers are ready after that moment.
        horizon = t
        if not self.waiting_reserve:
            horizon = max(t, min(self.next_arrival, min(self.prefill_next)) - 1)  # the tick before (inf stays inf)
        for tr in self.wire.serve(horizon):
            self._schedule_landing(tr)
        self._wake_link()

    def _land(self, rid, t):
        heappop(self.landings)
        rec = self.records[rid]
        gpu = self.gpus[rec.decode_gpu]
        if self.moved and rid in self.moved:
            gpu.rejoin.append(rid)
        else:
            gpu.landed.append(rid)
        if gpu.idle:
            gpu.idle = False
            heappush(self.heap, (t, BOUNDARY, gpu.index))

    def _join_landed(self, gpu, t):
        """Prompts whose KV has landed join the batch: from the next step on they decode (a
        re-prefill's KV: its stretch goes on from the tokens it emitted)."""
        records = self.records
        first_at_decode = self.fleet.first_token == "decode"
        for rid in gpu.landed:
            rec = records[rid]
            if rec.preemptions:
                emitted = self.before[rid]
                self._decode_from(gpu, rec, emitted, rec.prompt_tokens + emitted)
                continue
            if first_at_decode:
                rec.first_token = t
            self._decode_from(gpu, rec, 1, rec.prompt_tokens + 1)
        gpu.landed = []

    def _decode_boundary(self, gpu, t):
        freed = self._finish_decode_step(gpu, t) if gpu.busy else False
        if gpu.landed:
            self._join_landed(gpu, t)
        if gpu.rejoin:
            self._rejoin(gpu, t)
        grows = self.kv_grows
        if grows and gpu.grow_at and self.kv_policy.grow(gpu, t):
            freed = True
        if freed and self.waiting_reserve:
            self._reserve_and_send(t)
        if grows:
            self.kv_policy.note(gpu, t)
        end = self._start_step(gpu, t, 0, schedule=False)
        if end is None:
            return
        # Only a prefill boundary (which may reserve room here), an arrival that wakes
        # an idle prefill GPU (starting one) or a landing can touch a decode GPU; other decode GPUs matter only
        # while prompts wait for room. Before the earliest of these it may run ahead. With a
        # planner, also its next event, and not at all while an instance drains (its hand-over
        # reserves room at its own boundaries) or reloads. On demand, while a prefill GPU
        # idles, also only until another decode GPU could preempt (its victim's re-prefill
        # would start there at once and may reserve room here).
        if not self.waiting_reserve and not self.moving:
            limit = min(self.prefill_next)
            if self.next_plan < limit:
                limit = self.next_plan
            if (self.next_arrival < limit or grows) and any(g.idle for g in self.prefill_gpus):
                if self.next_arrival < limit:
                    limit = self.next_arrival  # it will start a batch on an idle prefill GPU
                if grows:
                    quiet = self.kv_policy.quiet_until(gpu, self.decode_gpus)
                    if quiet < limit:
                        limit = quiet
            if self.landings and self.landings[0] < limit:
                limit = self.landings[0]
            if self.link_wake < limit:
                limit = self.link_wake  # the wire's next turn may schedule a landing here
            if end < limit:
                end = self._run_decode_only(gpu, end, limit)
        if end is not None:
            heappush(self.heap, (end, BOUNDARY, gpu.index))

    def _preempt(self, gpu, rid, step, t):
        """`rid` loses its KV before `step` (kv_policy on_demand: its instance's growth did not
        fit): its stretch ends, and it re-enters the front of the queue it came from to
        prefill prompt + the tokens it emitted."""
        rec = self.records[rid]
        first = rec.decode_first_step
        emitted = self.before.get(rid, 1) + (step - first)
        if rec.earlier is None:
            rec.earlier = []
        rec.earlier.append((gpu.index, first, step - 1))  # (empty if it had not emitted in it)
        self.before[rid] = emitted
        rec.preemptions += 1
        ending = gpu.finish_at[rec.decode_last_step]
        ending.remove(rid)
        if not ending:
            del gpu.finish_at[rec.decode_last_step]
        gpu.decoding -= 1
        gpu.context -= rec.prompt_tokens + emitted
        gpu.kv_free += gpu.held.pop(rid) * self.block
        gpu.seqs -= 1
        rec.decode_first_step = rec.decode_last_step = -1
        tokens = self.todo[rid] = rec.prompt_tokens + emitted
        k = gpu.queue_k if gpu.role == "colocated" else self.gpus[rec.prefill_gpu].queue_k
        self.queues[k].appendleft(rid)
        self.queued_tokens[k] += tokens
        gpu.log.preempted.append((step, rid))
        for taker in self.takers_of[k]:
            if taker.idle:
                taker.idle = False
                heappush(self.heap, (t, BOUNDARY, taker.index))
                if taker.role == "prefill":
                    self.prefill_next[taker.index] = t  # (decode GPUs' fast paths stop there)


def _float_ticks(seconds):
    """`to_ticks` as a float holding the same whole number (runs that fit 2**52 ticks)."""
    return float(round(seconds * 1e12))


def _holder(gpu):
    """Who holds a request's KV, for drop reasons: "a GPU", "a decode GPU", "an instance
    (2 x h100)", "a prefill instance (2 x h100)"."""
    role = "" if gpu.role == "colocated" else f"{gpu.role} "
    if gpu.log.tp == 1:
        return f"a {role}GPU"
    return f"{'an' if not role else 'a'} {role}instance ({gpu.log.tp} x {gpu.log.gpu_type})"


def _compacted(logs, floats):
    """The run's logs, compacted when they are big enough to be worth it (COMPACT_STEPS)."""
    if sum(len(log) for log in logs) >= COMPACT_STEPS:
        for log in logs:
            log.compact(GpuLog.COLUMN_TYPES if floats else GpuLog.TICK_COLUMN_TYPES)
    return logs
