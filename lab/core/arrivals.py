"""Arrivals (the engine's ARRIVAL events): the queues prompts wait in, which queue an arriving
prompt joins, and whether it joins at all.

`Arrivals` is the part of the engine's `_Simulation` that plans the FIFO queues and which
instances take from each (`_plan_queues`, with the routing rules of policies.py), the
arrival times a decode-only run-ahead may stop at (`_plan_arrivals`), early rejection's
prefill rates (`_plan_admission`, `_rate_of`: the rule is admission.py's), and handles an
arrival: routed (`_route`), turned away or queued (`_arrive`, `_arrive_admitting`,
`_join`), which wakes the idle instances that take from its queue. It holds no state of
its own: every attribute is a slot of `_Simulation` (engine.py), which keeps the event loop.
"""

import heapq
from collections import deque

from . import admission
from .events import ARRIVAL, BOUNDARY, INF
from .policies import Router, bound_queues, queue_plan

__all__ = ["Arrivals"]


class Arrivals:
    """The arrival handlers, mixed into `engine._Simulation` (no slots of its own)."""

    __slots__ = ()

    def _plan_queues(self, scenario):
        """The FIFO queues prompts wait in and which instances take from each (policies.py)."""
        fleet = self.fleet
        self.takers = takers = self.prefill_gpus or self.gpus  # the instances that take prompts
        long_instances = 0
        if fleet.dispatch == "length_split":
            long_instances = fleet.long_gpus // scenario.pools()[0].tp
        plan = queue_plan(fleet.dispatch, len(takers), long_instances)
        self.queues = [deque() for _ in range(max(plan) + 1)]  # request ids waiting for prefill
        self.queued_tokens = [0] * len(self.queues)  # prompt tokens waiting in each
        self.takers_of = [[] for _ in self.queues]
        for gpu, k in zip(takers, plan):
            gpu.queue, gpu.queue_k = self.queues[k], k
            self.takers_of[k].append(gpu)
        # With one queue there is nothing to route (dispatch queue): no call per arrival.
        self.route = Router(fleet.dispatch, len(takers), fleet.long_prompt_tokens).route if len(self.queues) > 1 else None
        self.queue_next = self.queue_arrivals = None  # (_plan_arrivals)

    def _plan_arrivals(self):
        """Colocated, with a rule that binds each prompt at arrival from its order and length
        alone (round_robin, length_split): each queue's arrival times, so that an instance's
        decode-only run-ahead stops only at the arrivals that join its own queue (the rest
        touch other instances only). `queue_next[k]`: the next arrival into queue k."""
        if self.route is None or self.fleet.layout != "colocated":
            return
        arriving = [rec for rec in self.records if not rec.dropped]
        queues = bound_queues(self.fleet.dispatch, len(self.takers), self.fleet.long_prompt_tokens,
                              [rec.prompt_tokens for rec in arriving])
        if queues is None:
            return
        times = [deque() for _ in self.queues]
        for rec, k in zip(arriving, queues):
            times[k].append(self.arrival_t[rec.id])
        self.queue_arrivals = times
        self.queue_next = [q[0] if q else INF for q in times]

    def _plan_admission(self, scenario):
        """Early rejection (admission.py): each queue's prefill rate and the transfer term,
        worked out once; arrivals then go through `_arrive_admitting` (run() picks it). Off, nothing here runs."""
        fleet = self.fleet
        self.queue_rates = [0.0] * len(self.takers_of)
        for k in range(len(self.takers_of)):
            self._rate_of(k)
        self.ttft_target = scenario.slo.ttft_s
        link = fleet.link
        self.transfer_args = None  # colocated, or first_token prefill: no transfer before the first token
        if fleet.layout == "disaggregated" and fleet.first_token == "decode":
            self.transfer_args = (self.kv_bytes, link.gbytes_per_s, link.layerwise, self.layers)

    def _rate_of(self, k):
        """Queue k's prefill rate from the instances taking from it now: with a planner an
        instance leaves the count when it starts draining and enters it when it joins."""
        takers = self.takers_of[k]
        step_s = self.takers[0].cost.step_s  # the prompt takers are one pool: one cost
        self.queue_rates[k] = admission.prefill_rate(len(takers), step_s, admission.step_tokens(self.fleet))

    def _push_next_arrival(self, index):
        records = self.records
        n = len(records)
        while index < n and records[index].dropped:
            index += 1
        if index < n:
            self.next_arrival = self.arrival_t[index]
            heapq.heappush(self.heap, (self.next_arrival, ARRIVAL, index))
        else:
            self.next_arrival = float("inf")

    def _arrive(self, rid, t):
        rec = self.records[rid]
        self._join(rid, self._route(rec), rec.prompt_tokens, t)

    def _route(self, rec):
        """The queue an arriving prompt joins (policies.py; with one queue, queue 0)."""
        if self.route is None:
            return 0
        if self.fleet.dispatch == "cache_affinity":
            return self.route(rec.prompt_tokens, self._loads, lambda: self._cached_runs(rec.hash_ids))
        k = self.route(rec.prompt_tokens, self._loads)
        if self.queue_next is not None:
            times = self.queue_arrivals[k]
            times.popleft()  # this arrival, which _plan_arrivals bound to queue k
            self.queue_next[k] = times[0] if times else INF
        return k

    def _arrive_admitting(self, rid, t):
        """`_arrive` with early rejection: routed as ever, then admitted or turned away."""
        rec = self.records[rid]
        prompt = rec.prompt_tokens
        k = self._route(rec)
        ahead = self.queued_tokens[k]
        for gpu in self.takers_of[k]:
            ahead += gpu.pending
        transfer = 0.0 if self.transfer_args is None else admission.transfer_s(prompt, *self.transfer_args)
        rec.predicted_ttft_s = predicted = admission.predicted_ttft_s(ahead, prompt, self.queue_rates[k], transfer)
        if admission.rejects(predicted, self.ttft_target):
            rec.rejected = True
            self._push_next_arrival(rid + 1)
            return
        self._join(rid, k, prompt, t)

    def _join(self, rid, k, prompt, t):
        """The arrived request waits in queue k."""
        self.queues[k].append(rid)
        self.queued_tokens[k] += prompt
        self._push_next_arrival(rid + 1)
        # Wake the idle instances that take from this queue; each checks it at its boundary.
        for gpu in self.takers_of[k]:
            if gpu.idle:
                gpu.idle = False
                heapq.heappush(self.heap, (t, BOUNDARY, gpu.index))

    def _cached_runs(self, hash_ids):
        """cache_affinity's snapshot: each prompt-taking instance's cached leading blocks of `hash_ids`."""
        cache = self.cache
        if cache is None or not hash_ids:
            return [0] * len(self.takers)
        return [cache.caches[g.index].leading_run(hash_ids) for g in self.takers]

    def _loads(self):
        """least_loaded's snapshot: each instance's queued prompt tokens + the context it runs."""
        return [q + g.pending + g.context for q, g in zip(self.queued_tokens, self.takers)]
