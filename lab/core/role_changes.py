"""Pools that change roles (`fleet.planner`): the engine's planner events and an instance's move.

`RoleChanges` is the part of the engine's `_Simulation` that carries out what
`planner.py`'s rules decide (docs/model.md "Pools that change roles"): the planning moments on
the heap (`PLAN` events), an instance that starts moving (`_start_move`), drains at its
step boundaries (`_drain_prefill`, `_drain_decode`, which hands its sequences over),
reloads (`_start_switch`) and joins its new pool (`_join_pool`), and the moved
sequences that rejoin a decode instance (`_rejoin`). It holds no state of its own: every
attribute is a slot of `_Simulation` (engine.py), which keeps the event loop.
"""

import heapq
import math

from .events import BOUNDARY, INF, PLAN
from .planner import busy_in_window, pick_mover, schedule_moves, utilization, utilization_move

__all__ = ["RoleChanges"]


class RoleChanges:
    """The planner's handlers, mixed into `engine._Simulation` (no slots of its own)."""

    __slots__ = ()

    def _push_plan(self, t, key):
        heapq.heappush(self.heap, (t, PLAN, key))
        heapq.heappush(self.plan_times, t)
        if t < self.next_plan:
            self.next_plan = t

    def _plan_start(self):
        """The planner's moments before arrivals end: every interval_s, or each schedule row."""
        planner, n = self.planner, len(self.gpus)
        if planner.policy == "utilization":
            if self.plan_interval < self.arrivals_end:
                self._push_plan(self.plan_interval, n)
            return
        for i, row in enumerate(planner.schedule):
            at = self.tick(row.at_s)
            if at < self.arrivals_end:
                self._push_plan(at, n + i)

    def _plan(self, key, t):
        """A PLAN event: an instance done reloading joins its pool (key = its index), or a
        planning moment (key = GPUs + schedule row) decides which instances move."""
        times = self.plan_times
        heapq.heappop(times)
        self.next_plan = times[0] if times else INF
        n = len(self.gpus)
        if key < n:
            self._join_pool(self.gpus[key], t)
            return
        planner = self.planner
        tp = self.fleet.prefill_tp
        if planner.policy == "utilization":
            interval = self.plan_interval
            nxt = t + interval
            if nxt < self.arrivals_end:
                self._push_plan(nxt, n)
            if self.moving:
                return  # one change at a time
            t0 = t - interval
            utils = [utilization(math.fsum(busy_in_window(g.log.start_t, g.log.end_t, t0, t) for g in pool),
                                 len(pool), interval) for pool in (self.prefill_gpus, self.decode_gpus)]
            to = utilization_move(utils[0], utils[1], len(self.prefill_gpus), len(self.decode_gpus),
                                  planner.threshold, planner.min_per_pool)
            count = 1
        else:
            row = planner.schedule[key - n]
            going = sum(1 for g in self.gpus if g.moving == "prefill")
            to, count = schedule_moves(len(self.prefill_gpus) + going, row.prefill_gpus // tp)
        if to is None:
            return
        source = self.decode_gpus if to == "prefill" else self.prefill_gpus
        count = min(count, len(source) - 1)  # a pool always keeps an instance serving
        for _ in range(count):
            loads = [g.seqs for g in source] if to == "prefill" else [g.pending for g in source]
            self._start_move(source[pick_mover(loads)], to, t)

    def _start_move(self, gpu, to, t):
        """`gpu` stops taking new work: it leaves its pool's lists and drains at its boundaries."""
        self.moving += 1
        gpu.moving = to
        if gpu.role == "prefill":
            self.prefill_gpus.remove(gpu)
            self.takers_of[gpu.queue_k].remove(gpu)
            if self.fleet.admission is not None:
                self._rate_of(gpu.queue_k)  # early rejection predicts with the members left
            handler = self._drain_prefill
        else:
            self.decode_gpus.remove(gpu)
            handler = self._drain_decode
        self.boundary[gpu.index] = handler
        self.reconfigurations.append([t, gpu.index, gpu.role, to, None])
        if gpu.idle:  # no step running: it drains now
            gpu.idle = False
            handler(gpu, t)

    def _drain_prefill(self, gpu, t):
        """A prefill instance leaving: its prompts under way (chunked) run to their end, no new ones."""
        if gpu.completing:
            self._end_prefills(gpu, t, False)
        chunk = self.fleet.prefill_chunk_tokens
        taken = self._take_chunks(gpu, t, chunk, _admit_none) if chunk is not None and gpu.prefilling else 0
        end = self._start_step(gpu, t, taken)
        if end is None:
            self.prefill_next[gpu.index] = INF
            self._start_switch(gpu, t)
        else:
            self.prefill_next[gpu.index] = end

    def _drain_decode(self, gpu, t):
        """A decode instance leaving: once no KV is on its way to it, its sequences are handed
        over at a step boundary (their KV rejoins the decode pool's admission, first in line).
        On demand it serves as a decode instance does until then, growing and preempting, and
        the hand-over frees all its blocks."""
        policy = self.kv_policy
        if gpu.busy:
            self._finish_decode_step(gpu, t)
        if gpu.seqs > gpu.decoding + len(gpu.landed) + len(gpu.rejoin):
            # KV reserved before the decision is still on the link: keep serving until it lands.
            if gpu.landed:
                self._join_landed(gpu, t)
            if gpu.rejoin:
                self._rejoin(gpu, t)
            if gpu.grow_at:
                policy.grow(gpu, t)  # a victim re-enters the prefill queue; nothing reserves here
            policy.note(gpu, t)
            self._start_step(gpu, t, 0)
            return
        records = self.records
        done = len(gpu.log.start_t) - 1  # the step that just ended
        handed = []
        for rids in gpu.finish_at.values():
            for rid in rids:
                rec = records[rid]
                if rec.earlier is None:
                    rec.earlier = []
                rec.earlier.append((gpu.index, rec.decode_first_step, done))
                handed.append(rid)
        for rid in gpu.landed:
            handed.append(rid)
        handed.extend(gpu.rejoin)
        for rid in sorted(handed):
            rec = records[rid]
            emitted = 0 if rec.first_token is None else 1 + sum(b - a + 1 for _, a, b in (rec.earlier or ()))
            self.moved[rid] = (gpu.index, emitted)
            rec.decode_first_step = rec.decode_last_step = -1
        self.waiting_reserve.extendleft((rid, t, None) for rid in sorted(handed, reverse=True))
        gpu.seqs, gpu.decoding, gpu.context = 0, 0, 0
        gpu.finish_at, gpu.landed, gpu.rejoin = {}, [], []
        for rid in handed:  # every unit it held is freed; the sequences take theirs where they land
            policy.forget(rid)
        policy.clear(gpu)
        policy.note(gpu, t)
        gpu.busy = False
        self._start_switch(gpu, t)
        self._reserve_and_send(t)

    def _rejoin(self, gpu, t):
        """Moved sequences whose KV arrived: they decode on from the tokens they have."""
        records = self.records
        for rid in gpu.rejoin:
            rec = records[rid]
            _, emitted = self.moved.pop(rid)
            if emitted == 0:  # moved before it joined anywhere: its first token is now, as on landing
                rec.first_token = t
                emitted = 1
            self.before[rid] = emitted  # its KV was taken at reservation; on demand it grows from here
            self._decode_from(gpu, rec, emitted, rec.prompt_tokens + emitted)
        gpu.rejoin = []

    def _start_switch(self, gpu, t):
        """Drained: it reloads for its new role until t + switch_s (role "switching"). Its
        per-GPU prefix cache is emptied (and a shared pool's no longer reached) from now."""
        gpu.idle, gpu.busy = True, False
        if self.cache is not None:
            self.cache.caches[gpu.index] = None
        gpu.log.roles.append((t, "switching"))
        ready = t + self.switch_t
        for r in reversed(self.reconfigurations):
            if r[1] == gpu.index:
                r[4] = ready
                break
        self._push_plan(ready, gpu.index)

    def _join_pool(self, gpu, t):
        """Reloaded: `gpu` joins its new pool (lists kept in GPU order, as built)."""
        role = gpu.moving
        gpu.moving = None
        self.moving -= 1
        gpu.role = role
        gpu.log.roles.append((t, role))
        self.boundary[gpu.index] = self.handlers[role]
        # Its KV room is its new role's (a per-GPU prefix cache's share is a prefill
        # instance's), all free: it holds nothing.
        gpu.kv_tokens = self.role_kv[role]
        self.kv_policy.clear(gpu)
        if self.cache is not None and role == "prefill":
            self.cache.join(gpu.index)
        if role == "prefill":
            _insert_by_index(self.prefill_gpus, gpu)
            gpu.queue, gpu.queue_k = self.queues[0], 0
            _insert_by_index(self.takers_of[0], gpu)
            if self.fleet.admission is not None:
                self._rate_of(0)
            if gpu.queue:
                gpu.idle = False
                heapq.heappush(self.heap, (t, BOUNDARY, gpu.index))
        else:
            _insert_by_index(self.decode_gpus, gpu)
            if self.waiting_reserve:
                self._reserve_and_send(t)


def _admit_none(gpu, t):
    """A draining prefill instance admits nothing new."""
    return None


def _insert_by_index(gpus, gpu):
    """Put `gpu` into a pool's list, kept in GPU order as built."""
    k = 0
    while k < len(gpus) and gpus[k].index < gpu.index:
        k += 1
    gpus.insert(k, gpu)
