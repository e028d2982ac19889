"""A deliberately naive, per-token reference simulator of the lab's model.

Written from the model's rules (DESIGN.md "The model" and the reference rules in
tests/test_reference.py), independently of `lab/core/engine.py`. It is meant to be
obviously correct, not fast:

- one loop; each iteration scans for the earliest pending thing: the next arrival,
  the next KV landing, the next GPU step boundary, the next layer chunk to go on a
  shared (fifo) wire (ties: arrivals by request id, then landings by request id, then
  GPU boundaries by GPU index, then the wire);
- layer-wise streaming follows docs/model.md's rule ("Disaggregated") literally: every layer's chunk is an object;
  whenever the fifo wire is free, it takes the waiting chunk with the earliest ready time
  (ties: request id, then layer), found by scanning all of them;
- every request is an explicit `Seq` that keeps the list of every token timestamp;
- batch sizes, context sums, free KV and free slots are recomputed from scratch from
  the sequence objects every time they are needed (no incremental counters);
- routing (docs/model.md "Routing") is written out here again: every prompt-taking GPU has the
  number of the queue it takes from; least_loaded's loads are summed over the sequence
  objects at each arrival; the decode pick scans every decode GPU;
- attention (docs/model.md "Attention"): each step's prompt parts give their own c * (p + c/2)
  and p, from how far each prompt had got before the step;
- chunked prefill (docs/model.md "Chunked prefill and partial prefills"): every prompt holding
  a slot that is not fully prefilled is offered the budget, in admission order, before
  the queue; `long_prefill_tokens` caps a long prompt's share in one place (`chunk_share`);
- early rejection (docs/model.md "Early rejection"): at each arrival, after routing, the tokens
  ahead are summed over the sequence objects (the queue it joins, and every prompt whose
  prefill started on one of that queue's GPUs and has not ended), the rate is worked out
  from the cost model there and then (`predicted_ttft`).
- prefix caching (docs/model.md "Prefix caching"): a cache is a plain list of [hash, last use]
  entries with a use counter; a lookup scans it for each of the prompt's hashes in turn,
  eviction scans for the smallest last use; a per_gpu cache's blocks are taken out of
  the instance's KV capacity here, and a shared pool's fetch is added to the step that
  admits the prompt.
- KV on demand (docs/model.md "KV on demand", `fleet.kv_policy: on_demand`): every sequence keeps
  the number of blocks it holds; at each boundary every sequence of the next step's batch
  is asked whether its context (prompt + tokens it owns) still fits its blocks, and while
  the free blocks (recounted from the members) do not cover those that do not, the most
  recently admitted member of the batch is preempted, one at a time. A preempted sequence
  keeps its token list and prefills prompt + those tokens again (`todo`).
- pools that change roles (docs/model.md "Pools that change roles"): planner moments are one
  more kind of pending thing (after the wire; GPUs done reloading first, by index, then
  the decision); utilisations are summed over each member's step list, loads over the
  sequence objects; a leaving decode GPU hands every sequence it holds back to the front
  of the reservation line, its KV so far (its tokens emitted) crossing the link whole.

Pools (docs/model.md "Fleets as they are built") are built here from the fleet's fields, not
from `Scenario.pools`: a pool of G GPUs at tensor parallelism tp is G / tp instances,
each with its own GPU type, power cap and KV capacity (tp x HBM x memory_utilization -
weights, in KV tokens, unless model.kv_capacity_tokens sets it).

Only two things are shared with the engine by design: the cost model
(`lab.core.step_ticks_fn` and `step_time_fn`, per pool) and the request list
(`lab.core.generate_requests`).

Time (docs/model.md "Time base"): inside the run every time is an integer number of picosecond
ticks, as in the engine, so step durations add up exactly: each step's `step_ticks` is
added to the previous step's end. Seconds become ticks where they enter, by one rule
(`round(seconds * 1e12)`: arrivals, link wire times, prefix fetches, planner moments,
the cap), and the result is turned back into seconds at the end of `run` (ticks /
10**12, correctly rounded). The admission rule's prediction works in seconds
(`step_time_fn`), as docs/model.md "Early rejection" writes it.
"""

from lab.core import generate_requests, step_ticks_fn, step_time_fn
from lab.core.spec import GPU_PRESETS
from reference_blame import reference_blame, token_gaps  # noqa: F401 (the reference's blame, imported from here)
from reference_records import RefCache, RefChunk, RefGpu, RefResult, RefTransfer, Seq, ceil_div, to_ticks

__all__ = ["Seq", "RefGpu", "RefTransfer", "RefResult", "reference_simulate", "reference_blame", "token_gaps"]


class _Sim:
    def __init__(self, scenario, requests):
        self.sc = scenario
        self.fleet = scenario.fleet
        self.model = scenario.model
        self.seqs = [Seq(i, *r) for i, r in enumerate(requests)]
        f = self.fleet
        m = self.model
        self.block = scenario.workload.prefix_block_tokens
        kv_per_token = 2 * m.shape["layers"] * m.shape["kv_heads"] * m.shape["head_dim"] * m.shape["bytes_per_value"]
        block_bytes = self.block * kv_per_token
        shared = None
        if f.prefix_cache == "shared":
            pool_gb = f.prefix_pool_gb if f.prefix_pool_gb is not None else 200.0
            shared = RefCache(int(pool_gb * 1e9 // block_bytes))
            gbps = f.prefix_fetch_gbytes_per_s if f.prefix_fetch_gbytes_per_s is not None else 25.0
            self.fetch_s_per_token = kv_per_token / (gbps * 1e9)
        if f.layout == "colocated":
            pools = [("colocated", f.gpus, f.tp, m.gpu, f.power_cap_w)]
        else:
            pools = [("prefill", f.prefill_gpus, f.prefill_tp, f.prefill_gpu or m.gpu, f.prefill_power_cap_w),
                     ("decode", f.decode_gpus, f.decode_tp, f.decode_gpu or m.gpu, f.decode_power_cap_w)]
        self.gpus = []
        self.shared_cache = shared
        self.role_kv = {}  # role -> an instance's KV capacity in it (planner: a mover takes its new role's)
        self.per_gpu_cache_blocks = 0
        gpu_number = 0
        for role, count, tp, gpu, cap in pools:
            step_s = step_time_fn(m, gpu, tp, cap)
            step_t = step_ticks_fn(m, gpu, tp, cap)
            kv = self.kv_capacity(gpu, tp)
            cache_blocks = 0
            if f.prefix_cache == "per_gpu" and role != "decode":
                gb = f.prefix_cache_gb if f.prefix_cache_gb is not None else 8.0
                cache_blocks = int(tp * gb * 1e9 // block_bytes)
                kv -= cache_blocks * self.block  # the cache's share of HBM
                self.per_gpu_cache_blocks = cache_blocks
            self.role_kv[role] = kv
            for _ in range(count // tp):
                g = RefGpu(len(self.gpus), role, kv, f.max_batch_seqs, step_s, tp, gpu, gpu_number, step_t)
                g.cache = None
                if role != "decode" and f.prefix_cache == "per_gpu":
                    g.cache = RefCache(cache_blocks)
                elif role != "decode":
                    g.cache = shared  # None when caching is off
                self.gpus.append(g)
                gpu_number += tp
        self.on_demand = f.kv_policy == "on_demand"
        self.B = f.kv_block_tokens
        if self.on_demand:
            for g in self.gpus:
                g.block = self.B
        # A request no instance can hold is dropped: prompt + output over a colocated or
        # decode instance's KV, or its prompt over a prefill instance's. On demand: the
        # blocks of its last step's context (prompt + output - 1) over the whole blocks.
        for s in self.seqs:
            for g in self.gpus[:1] + self.gpus[-1:]:
                if g.role == "prefill":
                    too_big = s.P > g.kv_capacity
                elif self.on_demand:
                    too_big = ceil_div(s.P + max(s.O - 1, 0), self.B) > g.kv_capacity // self.B
                else:
                    too_big = s.kv_need > g.kv_capacity
                if too_big:
                    s.dropped = True
        self.take_count = 0
        self.pending = [s for s in self.seqs if not s.dropped]  # arrivals to come, by (arrival, id)
        self.pending.sort(key=lambda s: (s.arrival, s.id))
        self.queues = {}  # queue number -> FIFO of arrived, not admitted requests
        self.arrived = 0  # prompts that arrived so far (round_robin)
        self.waiting = []  # disaggregated: prefilled, waiting for decode room (FIFO)
        self.in_flight = []  # disaggregated: (seq, dst gpu) whose KV is crossing the link
        self.transfers = []
        self.link_free = 0
        self.wire_waiting = []  # layer-wise fifo: chunks not yet on the wire
        self.transfer_of = {}
        self.attention_on = scenario.model.reads_attention
        self.plans = []  # planner: pending (time, key) moments; key < GPUs: that GPU is ready
        self.reconfigurations = []
        # Routing: which queue each prompt-taking GPU takes from.
        takers = self.takers()
        for i, g in enumerate(takers):
            if f.dispatch == "queue":
                g.queue_id = "all"
            elif f.dispatch == "length_split":
                long_count = f.long_gpus // scenario.pools()[0].tp
                g.queue_id = "long" if i >= len(takers) - long_count else "short"
            else:
                g.queue_id = i
            self.queues.setdefault(g.queue_id, [])

    def takers(self):
        return [g for g in self.gpus if g.role in ("colocated", "prefill") and g.moving is None]

    def cached_tokens(self, g, s):
        """Tokens of `s`'s next prefill (its todo) that g's cache holds as a leading run of its
        prompt's blocks (never all of them: the last token is computed)."""
        if g.cache is None or not s.hash_ids:
            return 0
        n = g.cache.leading(s.hash_ids)
        return min(n * self.block, s.P, s.todo - 1) if n else 0  # (emitted tokens are never cached)

    def look_up(self, g, s):
        """At admission on g, every prefill (a re-prefill too): its cached head is prefilled
        already; a shared pool fetches it. Only the first prefill's hit is the request's."""
        hit = self.cached_tokens(g, s)
        if hit:
            g.cache.use(s.hash_ids[: g.cache.leading(s.hash_ids)], add=False)
            if not s.preemptions:
                s.hit = hit
            s.prefilled = hit
            if self.fleet.prefix_cache == "shared":
                if not s.preemptions:
                    s.fetch = hit * self.fetch_s_per_token  # seconds, as the record keeps it
                s.fetch_due = to_ticks(hit * self.fetch_s_per_token)

    def prefill_ended(self, g, s):
        if g.cache is not None:
            g.cache.use(s.hash_ids, add=True)

    def route(self, seq):
        """The queue an arriving prompt joins (docs/model.md "Routing")."""
        f = self.fleet
        takers = self.takers()
        n = self.arrived
        self.arrived += 1
        if f.dispatch == "queue":
            return "all"
        if f.dispatch == "length_split":
            return "long" if seq.P >= f.long_prompt_tokens else "short"
        if f.dispatch == "round_robin":
            return takers[n % len(takers)].queue_id
        if f.dispatch == "cache_affinity":  # the most cached leading blocks, then least loaded, then index
            runs = [g.cache.leading(seq.hash_ids) if g.cache is not None else 0 for g in takers]
            loads = self.loads(takers)
            best = min(range(len(takers)), key=lambda i: (-runs[i], loads[i], i))
            return takers[best].queue_id
        lowest = min(self.loads(takers))
        return takers[self.loads(takers).index(lowest)].queue_id

    def loads(self, takers):
        """least_loaded's load of each prompt-taking GPU, summed over the sequence objects."""
        loads = []
        for g in takers:
            load = sum(s.todo for s in self.queues[g.queue_id])
            if g.role == "colocated":
                load += sum(s.P + s.generated for s in g.members)
            else:  # its prompts whose prefill started and has not ended
                load += sum(s.todo for s in self.seqs if s.at_prefill == g.index and s.prefilled < s.todo)
            loads.append(load)
        return loads

    def kv_capacity(self, gpu, tp):
        m = self.model
        if m.kv_capacity_tokens is not None:
            return m.kv_capacity_tokens
        spec = dict(GPU_PRESETS[gpu], **(m.gpu_overrides or {}).get(gpu, {}))
        shape = m.shape
        weights = shape["params"] * shape["bytes_per_value"]
        kv_per_token = 2 * shape["layers"] * shape["kv_heads"] * shape["head_dim"] * shape["bytes_per_value"]
        return int((tp * spec["memory_gb"] * 1e9 * m.memory_utilization - weights) // kv_per_token)

    # ------------------------------------------------------------ loop

    def run(self, arrivals_end, cap_s):
        cap = to_ticks(cap_s)
        arrivals_end = to_ticks(arrivals_end)
        self.arrivals_end = arrivals_end
        for s in self.seqs:
            s.arrival = to_ticks(s.arrival)
        planner = self.fleet.planner
        if planner is not None and planner.policy == "utilization" and to_ticks(planner.interval_s) < arrivals_end:
            self.plans.append((to_ticks(planner.interval_s), len(self.gpus)))
        if planner is not None and planner.policy == "schedule":
            self.plans.extend((to_ticks(row.at_s), len(self.gpus) + i) for i, row in enumerate(planner.schedule)
                              if to_ticks(row.at_s) < arrivals_end)
        while True:
            best = None  # (time, class, tiebreak, what)
            if self.pending:
                s = self.pending[0]
                best = (s.arrival, 0, s.id, ("arrival", s))
            for seq, dst in self.in_flight:
                tr = self.transfers[self.transfer_of[seq.id]]
                cand = (tr.end, 1, seq.id, ("landing", (seq, dst)))
                if best is None or cand[:3] < best[:3]:
                    best = cand
            for g in self.gpus:
                if g.boundary is not None:
                    cand = (g.boundary, 2, g.index, ("gpu", g))
                    if best is None or cand[:3] < best[:3]:
                        best = cand
            if self.wire_waiting:
                chunk = self.next_chunk()
                cand = (max(chunk.ready, self.link_free), 3, 0, ("wire", chunk))
                if best is None or cand[:3] < best[:3]:
                    best = cand
            for when, key in self.plans:
                cand = (when, 4, key, ("plan", (when, key)))
                if best is None or cand[:3] < best[:3]:
                    best = cand
            if best is None:
                break
            t = best[0]
            if t > cap:
                break
            kind, obj = best[3]
            if kind == "arrival":
                self.pending.pop(0)
                self.on_arrival(obj, t)
            elif kind == "landing":
                self.in_flight.remove(obj)
                self.on_landing(obj[0], obj[1], t)
            elif kind == "wire":
                self.put_on_wire(obj, t)
            elif kind == "plan":
                self.plans.remove(obj)
                self.on_plan(obj[1], t)
            else:
                self.on_boundary(obj, t)
        # Chunks still waiting when the run stopped get the places the rule gives them,
        # as if it went on (nothing new would join them): transfers are always complete.
        while self.wire_waiting:
            chunk = self.next_chunk()
            self.put_on_wire(chunk, max(chunk.ready, self.link_free))
        # A step still running at the cap never completed: it emitted nothing and is not
        # part of the run (its tokens were never counted above either).
        for g in self.gpus:
            g.steps = [st for st in g.steps if st[1] <= cap]
            g.attention = {k: v for k, v in g.attention.items() if k < len(g.steps)}
            g.fetch_s = {k: v for k, v in g.fetch_s.items() if k < len(g.steps)}
        self.in_seconds()
        out = RefResult(self.seqs, self.gpus, self.transfers, cap / 10**12)
        out.reconfigurations = [(r[0] / 10**12, r[1], r[2], r[3], None if r[4] is None else r[4] / 10**12)
                                for r in self.reconfigurations]
        return out

    def in_seconds(self):
        """Every time of the run, ticks until now, as seconds (ticks / 10**12)."""
        def sec(t):
            return None if t is None else t / 10**12

        for s in self.seqs:
            s.arrival, s.prefill_start, s.prefill_end = sec(s.arrival), sec(s.prefill_start), sec(s.prefill_end)
            s.first_token, s.finish = sec(s.first_token), sec(s.finish)
            s.token_ticks = s.tokens  # kept: a gap is a difference of ticks (token_gaps)
            s.tokens = [sec(t) for t in s.tokens]
        for g in self.gpus:
            g.steps = [(sec(a), sec(b), n, p, c) for a, b, n, p, c in g.steps]
            g.roles = [(sec(t), role) for t, role in g.roles]
            g.kv_trace = [(sec(t), used) for t, used in g.kv_trace]
            g.fetch_s = {k: sec(v) for k, v in g.fetch_s.items()}
        for tr in self.transfers:
            tr.ready, tr.reserved, tr.start, tr.end = sec(tr.ready), sec(tr.reserved), sec(tr.start), sec(tr.end)
            tr.layer_s = sec(tr.layer_s)
            for c in tr.chunks or ():
                c.start, c.ready = sec(c.start), sec(c.ready)

    def predicted_ttft(self, seq, q):
        """docs/model.md "Early rejection": (prompt tokens ahead + its own) / the queue's prefill
        rate, + its KV's wire time on an idle link when the first token waits for it."""
        f = self.fleet
        takers = [g for g in self.takers() if g.queue_id == q]
        # Every prefill counted whole: a prompt, or a re-prefill's prompt + the tokens it owns.
        ahead = sum(s.todo for s in self.queues[q])
        for g in takers:
            ahead += sum(s.todo for s in self.seqs if s.prefilled < s.todo
                         and (s.at_prefill == g.index or g.role == "colocated" and s in g.members))
        if f.layout == "colocated":
            tokens = f.chunk_tokens if f.chunk_tokens is not None else f.prefill_batch_tokens
        else:
            tokens = f.prefill_chunk_tokens if f.prefill_chunk_tokens is not None else f.prefill_batch_tokens
        rate = len(takers) * (tokens / takers[0].step_s(0, 0, tokens))
        wire = 0.0
        if f.layout == "disaggregated" and f.first_token == "decode":
            nbytes = seq.P * self.model.kv_bytes_per_token
            if f.link.layerwise:
                wire = nbytes / self.model.shape["layers"] / (f.link.gbytes_per_s * 1e9)
            else:
                wire = nbytes / (f.link.gbytes_per_s * 1e9)
        return (ahead + seq.P) / rate + wire

    def on_arrival(self, seq, t):
        q = self.route(seq)
        if self.fleet.admission is not None:
            seq.predicted_ttft_s = self.predicted_ttft(seq, q)
            if seq.predicted_ttft_s > self.sc.slo.ttft_s:
                seq.rejected = True
                return
        self.queues[q].append(seq)
        for g in self.takers():
            if g.queue_id == q and g.boundary is None:
                g.boundary = t  # wake: it decides at this arrival time

    def on_landing(self, seq, dst, t):
        seq.landed = t
        dst.landed.append(seq)
        if dst.boundary is None:
            dst.boundary = t

    def on_boundary(self, g, t):
        if g.moving is not None and g.role == "prefill":
            self.prefill_boundary(g, t, leaving=True)
        elif g.moving is not None:
            self.leaving_decode_boundary(g, t)
        elif g.role == "colocated":
            self.colocated_boundary(g, t)
        elif g.role == "prefill":
            self.prefill_boundary(g, t)
        else:
            self.decode_boundary(g, t)

    def next_chunk(self):
        return min(self.wire_waiting, key=lambda c: (c.ready, c.transfer.request, c.layer))

    def put_on_wire(self, chunk, t):
        self.wire_waiting.remove(chunk)
        chunk.start = t
        self.link_free = t + chunk.transfer.layer_s
        tr = chunk.transfer
        if all(c.start is not None for c in tr.chunks):  # its last chunk: the landing is known
            tr.start = tr.chunks[0].start
            tr.end = tr.chunks[-1].start + tr.layer_s
            seq = self.seqs[tr.request]
            self.in_flight.append((seq, self.gpus[tr.dst_gpu]))

    def start_step(self, g, t, decode, prefill):
        """Begin a step at t with `decode` sequences and `prefill` [(seq, tokens)] parts."""
        n = len(decode)
        ctx = 0
        for s in decode:
            ctx += s.P + s.generated
        ptoks = 0
        for s, k in prefill:
            ptoks += k
            if not s.preemptions:  # blame's own prefill: its first prefill only
                s.prompt_pieces.append((k, s.prefilled))
        if n == 0 and ptoks == 0:
            g.step = None
            g.boundary = None  # idle
            return
        if self.attention_on and ptoks:
            units = 0.0
            reread = 0
            for s, k in prefill:  # k new tokens after the s.prefilled it already has
                units += k * (s.prefilled + k / 2)
                reread += s.prefilled
            g.attention[len(g.steps)] = (units, reread)
            duration = g.step_t(n, ctx, ptoks, units, reread)
        else:
            duration = g.step_t(n, ctx, ptoks)
        fetch = 0
        for s, k in prefill:  # the prompts it admitted fetch their cached heads first, in turn
            if s.fetch_due:
                fetch += s.fetch_due
                s.fetch_due = 0
        if fetch:
            g.fetch_s[len(g.steps)] = fetch
            duration += fetch  # the step lasts compute + fetches (docs/model.md "Prefix caching")
        end = t + duration
        g.steps.append((t, end, n, ptoks, ctx))
        g.step = {"decode": list(decode), "prefill": list(prefill), "start": t, "end": end}
        g.boundary = end

    def chunk_share(self, s, budget):
        """docs/model.md "Chunked prefill and partial prefills": what the prompt still needs, at most
        the budget left; a prompt of more than long_prefill_tokens tokens at most that many."""
        k = min(s.todo - s.prefilled, budget)
        cap = self.fleet.long_prefill_tokens
        if cap is not None and s.todo > cap:
            k = min(k, cap)
        return k

    @staticmethod
    def emit(seq, t, g):
        seq.tokens.append(t)
        seq.token_gpus.append(g.index)
        seq.generated += 1
        if seq.generated == seq.O:
            seq.finish = t

    # ------------------------------------------------------------ colocated

    def colocated_boundary(self, g, t):
        step = g.step
        if step is not None:
            for s in step["decode"]:
                self.emit(s, t, g)
            for s, k in step["prefill"]:
                s.prefilled += k
                if s.prefilled == s.todo:
                    self.prefill_ended(g, s)  # (a re-prefill's prompt blocks too)
                    if not s.preemptions:
                        s.prefill_end = t
                        s.first_token = t
                    self.emit(s, t, g)  # (a re-prefill emits its next token)
            g.members = [s for s in g.members if not s.finished]
        decode = [s for s in g.members if s.prefilled == s.todo]
        if self.on_demand:
            decode = self.grow(g, t, decode)
        prefill = []
        f = self.fleet
        queue = self.queues[g.queue_id]

        def admissible(s):
            if self.on_demand:
                return ceil_div(s.todo, self.B) * self.B <= g.free_kv() and g.free_slots() > 0
            return s.kv_need <= g.free_kv() and g.free_slots() > 0

        def admit(s):
            queue.pop(0)
            g.members.append(s)
            s.blocks = ceil_div(s.todo, self.B)
            if s.O > 1:  # decode_gpu = the GPU that emits tokens 2..O (none for one token)
                s.decode_gpu = g.index
            self.look_up(g, s)
            if s.preemptions:
                return  # its first prefill's GPU and start stay
            s.prefill_gpu = g.index
            s.prefill_start = t

        if f.chunk_tokens is None:
            total = 0
            while queue:
                s = queue[0]
                if not admissible(s):
                    break
                if prefill and total + s.todo - self.cached_tokens(g, s) > f.prefill_batch_tokens:
                    break
                admit(s)
                prefill.append((s, s.todo - s.prefilled))  # (its cached head is prefilled already)
                total += s.todo - s.prefilled
        else:
            budget = f.chunk_tokens
            for s in g.members:  # partly prefilled prompts first, in admission order
                if budget == 0:
                    break
                if s.prefilled < s.todo:
                    k = self.chunk_share(s, budget)
                    prefill.append((s, k))
                    budget -= k
            while budget > 0 and queue:
                s = queue[0]
                if not admissible(s):
                    break
                admit(s)
                k = self.chunk_share(s, budget)
                prefill.append((s, k))
                budget -= k
        if self.on_demand:
            g.note_kv(t)
        self.start_step(g, t, decode, prefill)

    # ------------------------------------------------------------ KV on demand

    def grow(self, g, t, decode):
        """Each sequence of the next step's batch needs ceil((prompt + tokens it owns) / B)
        blocks; while the free blocks do not cover those short of one, preempt the most
        recently admitted member of the batch. Returns the batch left."""
        while True:
            short = [s for s in decode if ceil_div(s.P + s.generated, self.B) > s.blocks]
            free = g.kv_capacity // self.B - g.used_blocks()
            if len(short) <= free:
                break
            victim = [s for s in g.members if s in decode][-1]
            self.preempt(g, victim, t)
            decode = [s for s in decode if s is not victim]
        for s in short:
            s.blocks += 1
        return decode

    def preempt(self, g, s, t):
        s.resumed_at.add(len(s.tokens))
        g.members.remove(s)
        s.blocks = 0
        s.preemptions += 1
        s.prefilled = 0
        s.todo = s.P + s.generated
        s.joined = False
        s.at_prefill = None
        queue_id = g.queue_id if g.role == "colocated" else self.gpus[s.prefill_gpu].queue_id
        self.queues[queue_id].insert(0, s)
        g.preempted.append((len(g.steps), s.id))
        for taker in self.takers():
            if taker.queue_id == queue_id and taker.boundary is None:
                taker.boundary = t

    # ------------------------------------------------------------ disaggregated

    def decode_gpus(self):
        return [g for g in self.gpus if g.role == "decode" and g.moving is None]

    def reserve(self, t):
        link = self.fleet.link
        while self.waiting:
            s = self.waiting[0]
            # docs/model.md "Routing": among decode GPUs with a free slot and room for it, the most
            # free KV (most_free_kv) or the fewest sequences (fewest_seqs); ties lowest index.
            need = ceil_div(s.todo, self.B) * self.B if self.on_demand else s.kv_need
            if self.on_demand and s.moved_from is not None:  # blocks for all it has: prompt + its tokens
                need = ceil_div(s.P + len(s.tokens), self.B) * self.B
            fits = [g for g in self.decode_gpus() if g.free_slots() > 0 and g.free_kv() >= need]
            if not fits:
                return
            if self.fleet.decode_pick == "most_free_kv":
                best = max(fits, key=lambda g: (g.free_kv(), -g.index))
            else:
                best = min(fits, key=lambda g: (len(g.members), g.index))
            self.waiting.pop(0)
            best.members.append(s)
            s.decode_gpu = best.index
            nbytes = s.todo * self.model.kv_bytes_per_token
            bandwidth = link.gbytes_per_s * 1e9
            if s.moved_from is not None:  # its prompt and every token emitted so far
                nbytes = (s.P + len(s.tokens)) * self.model.kv_bytes_per_token
                start = max(t, self.link_free) if link.sharing == "fifo" else t
                end = start + to_ticks(nbytes / bandwidth)
                if link.sharing == "fifo":
                    self.link_free = end
                src, ready = s.moved_from
                if self.on_demand:
                    s.blocks = need // self.B
                    best.note_kv(t)
                self.transfer_of[s.id] = len(self.transfers)  # (its landing is this one's)
                self.transfers.append(RefTransfer(s.id, src, best.index, ready, t, start, end, nbytes))
                self.in_flight.append((s, best))
                continue
            self.transfer_of[s.id] = len(self.transfers)
            src = s.at_prefill
            if self.on_demand:
                s.blocks = ceil_div(s.todo, self.B)
                best.note_kv(t)
            if link.layerwise:
                tr = RefTransfer(s.id, src, best.index, s.prefill_end_planned, t, None, None, nbytes)
                self.transfers.append(tr)
                self.stream_layers(tr, s, t, bandwidth)
                continue
            start = t
            if link.sharing == "fifo":
                start = max(t, self.link_free)
            end = start + to_ticks(nbytes / bandwidth)
            if link.sharing == "fifo":
                self.link_free = end
            self.transfers.append(RefTransfer(s.id, src, best.index, s.prefill_end_planned, t, start, end, nbytes))
            self.in_flight.append((s, best))

    def stream_layers(self, tr, s, reserved, bandwidth):
        """docs/model.md "Disaggregated": layer i of L is ready at prefill start + (prefill end - start) * (i + 1) / L
        (whole ticks, rounded down; the last at the end); a chunk carries bytes / L, may go
        once its layer is ready and room is reserved; on its own wire (independent) right
        after the previous chunk."""
        layers = self.model.shape["layers"]
        tr.layer_s = to_ticks(tr.bytes / layers / bandwidth)
        tr.chunks = []
        for i in range(layers):
            if i == layers - 1:
                layer_ready = s.prefill_end_planned
            else:  # over the step that carries its last prompt tokens
                layer_ready = s.last_step_start + (s.prefill_end_planned - s.last_step_start) * (i + 1) // layers
            tr.chunks.append(RefChunk(tr, i, max(layer_ready, reserved)))
        if self.fleet.link.sharing == "fifo":
            self.wire_waiting.extend(tr.chunks)
            return
        for i, c in enumerate(tr.chunks):
            c.start = c.ready if i == 0 else max(c.ready, tr.chunks[i - 1].start + tr.layer_s)
        tr.start = tr.chunks[0].start
        tr.end = tr.chunks[-1].start + tr.layer_s
        self.in_flight.append((s, self.gpus[tr.dst_gpu]))

    def prefill_boundary(self, g, t, leaving=False):
        f = self.fleet
        step = g.step
        if step is not None:
            for s, k in step["prefill"]:
                s.prefilled += k
                if s.prefilled < s.todo:
                    continue  # more chunks to come
                self.prefill_ended(g, s)  # (a re-prefill's prompt blocks too)
                if s.preemptions:  # a re-prefill: its KV crosses again
                    if not f.link.layerwise:
                        self.waiting.append(s)
                    continue
                s.prefill_end = t
                if s.O == 1:
                    self.emit(s, t, g)
                    s.first_token = t
                    continue
                if f.first_token == "prefill":
                    s.first_token = t
                    s.tokens.append(t)  # the prefill GPU emits the first token
                    s.token_gpus.append(g.index)
                if not f.link.layerwise:
                    self.waiting.append(s)
            self.reserve(t)
        batch = []
        queue = self.queues[g.queue_id]

        def take(s):
            queue.pop(0)
            s.at_prefill = g.index
            s.taken = self.take_count
            self.take_count += 1
            self.look_up(g, s)
            if s.preemptions:
                return
            s.prefill_gpu = g.index
            s.prefill_start = t

        if f.prefill_chunk_tokens is None:
            total = 0
            while queue and not leaving:
                s = queue[0]
                if batch and total + s.todo - self.cached_tokens(g, s) > f.prefill_batch_tokens:
                    break
                take(s)
                batch.append((s, s.todo - s.prefilled))
                total += s.todo - s.prefilled
        else:
            budget = f.prefill_chunk_tokens
            # its prompts under way first (in the order it took them), then the queue's head
            under_way = [s for s in self.seqs if s.at_prefill == g.index and s.prefilled < s.todo]
            under_way.sort(key=lambda s: s.taken)
            for s in under_way:
                if budget == 0:
                    break
                k = self.chunk_share(s, budget)
                batch.append((s, k))
                budget -= k
            while budget > 0 and queue and not leaving:
                s = queue[0]
                take(s)
                k = self.chunk_share(s, budget)
                batch.append((s, k))
                budget -= k
        self.start_step(g, t, [], batch)
        if leaving and g.step is None:
            self.start_reload(g, t)
        if g.step is not None:
            ending = [s for s, k in batch if s.prefilled + k == s.todo]  # its last chunk is in this step
            for s in ending:
                s.prefill_end_planned = g.step["end"]
                s.last_step_start = t
            if f.link.layerwise:
                for s in ending:
                    if s.O > 1:
                        self.waiting.append(s)
                self.reserve(t)

    def decode_boundary(self, g, t):
        step = g.step
        if step is not None:
            for s in step["decode"]:
                self.emit(s, t, g)
            before = len(g.members)
            g.members = [s for s in g.members if not s.finished]
            freed = len(g.members) < before
            if freed and not self.on_demand:
                self.reserve(t)
        else:
            freed = False
        self.join_landed(g, t)
        decode = [s for s in g.members if s.joined and not s.finished]
        if self.on_demand:
            # On demand: growth (and preemption) before freed blocks go to waiting prompts.
            count = len(g.preempted)
            decode = self.grow(g, t, decode)
            if freed or len(g.preempted) > count:
                self.reserve(t)
            g.note_kv(t)
        self.start_step(g, t, decode, [])

    def join_landed(self, g, t):
        for s in g.landed:
            s.joined = True
            s.moved_from = None
            if s.first_token is None:  # first_token: decode, and no token yet
                s.first_token = t
                s.tokens.append(t)
                s.token_gpus.append(g.index)
            s.generated = len(s.tokens)  # the tokens it already has (a moved or preempted one: all of them)
        g.landed = []

    # ------------------------------------------------------------ planner

    def leaving_decode_boundary(self, g, t):
        """Keeps serving while KV is still coming to it; then hands every sequence over."""
        step = g.step
        if step is not None:
            for s in step["decode"]:
                self.emit(s, t, g)
            g.members = [s for s in g.members if not s.finished]
        coming = [s for s in g.members if not s.joined and s not in g.landed]
        if coming:
            self.join_landed(g, t)
            decode = [s for s in g.members if s.joined]
            if self.on_demand:  # it grows and preempts as any decode GPU until it hands over
                decode = self.grow(g, t, decode)
                g.note_kv(t)
            self.start_step(g, t, decode, [])
            return
        handed = sorted(g.members, key=lambda s: s.id)
        for s in handed:
            s.joined = False
            s.moved_from = (g.index, t)
            s.blocks = 0  # on demand: its blocks here are freed; it takes new ones where it lands
        g.members = []
        g.landed = []
        if self.on_demand:
            g.note_kv(t)
        self.waiting[:0] = handed
        g.step = None
        g.boundary = None
        self.start_reload(g, t)
        self.reserve(t)

    def start_reload(self, g, t):
        g.cache = None  # the reload empties a per-GPU cache; a shared pool is out of reach
        g.roles.append((t, "switching"))
        ready = t + to_ticks(self.fleet.planner.switch_s)
        for r in self.reconfigurations:
            if r[1] == g.index and r[4] is None:
                r[4] = ready
        self.plans.append((ready, g.index))

    def on_plan(self, key, t):
        import math

        n = len(self.gpus)
        if key < n:  # reloaded: joins its new pool
            g = self.gpus[key]
            g.role, g.moving = g.moving, None
            g.roles.append((t, g.role))
            g.kv_capacity = self.role_kv[g.role]  # a per-GPU cache's share is a prefill instance's
            if g.role == "prefill":
                g.queue_id = "all"
                if self.fleet.prefix_cache == "per_gpu":
                    g.cache = RefCache(self.per_gpu_cache_blocks)  # empty: its reload emptied it
                else:
                    g.cache = self.shared_cache
                if self.queues["all"] and g.boundary is None:
                    g.boundary = t
            else:
                self.reserve(t)
            return
        planner = self.fleet.planner
        prefill = [g for g in self.gpus if g.role == "prefill" and g.moving is None]
        decode = self.decode_gpus()
        any_moving = any(g.moving for g in self.gpus)
        if planner.policy == "utilization":
            interval = to_ticks(planner.interval_s)
            if t + interval < self.arrivals_end:
                self.plans.append((t + interval, n))
            if any_moving:
                return
            t0 = t - interval

            def util(pool):
                busy = math.fsum(min(e, t) - max(b, t0) for g in pool for b, e, *_ in g.steps if e > t0 and b < t)
                return busy / (len(pool) * interval)

            up, ud = util(prefill), util(decode)
            if up - ud > planner.threshold and len(decode) > planner.min_per_pool:
                to, count = "prefill", 1
            elif ud - up > planner.threshold and len(prefill) > planner.min_per_pool:
                to, count = "decode", 1
            else:
                return
        else:
            row = planner.schedule[key - n]
            want = row.prefill_gpus // self.fleet.prefill_tp
            have = len(prefill) + sum(1 for g in self.gpus if g.moving == "prefill")
            if want == have:
                return
            to, count = ("prefill", want - have) if want > have else ("decode", have - want)
        source = decode if to == "prefill" else prefill
        count = min(count, len(source) - 1)
        for _ in range(count):
            def load(g):
                if g.role == "decode":
                    return len(g.members)
                return sum(s.P for s in self.seqs if s.prefill_gpu == g.index and s.prefill_start is not None
                           and s.prefill_end is None)

            g = min(source, key=lambda g: (load(g), -g.index))  # least loaded, ties highest index
            source.remove(g)
            self.reconfigurations.append([t, g.index, g.role, to, None])
            g.moving = to
            if g.boundary is None:  # idle: it leaves at once
                self.on_boundary(g, t)


def reference_simulate(scenario, requests=None):
    """Run the reference model. `requests`: [(arrival, prompt, output[, hash_ids])] (default: generated)."""
    if requests is None:
        requests = generate_requests(scenario.workload, scenario.seed)
    wl = scenario.workload
    if wl.trace is None:
        arrivals_end = wl.duration_s
    elif wl.duration_s is not None:
        arrivals_end = wl.duration_s
    else:
        arrivals_end = max((r[0] for r in requests), default=0.0)
    sim = _Sim(scenario, list(requests))
    last = max((r[0] for r in requests), default=0.0)
    return sim.run(arrivals_end, max(arrivals_end, last) + scenario.drain_s)
