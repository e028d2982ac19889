"""Analytic pool sizing: lower bounds on instances from the workload's token rates.

A pool cannot be busier than all the time, so it needs at least

    prefill instances >= prompt tokens per second / one instance's prefill tokens per second
    decode instances  >= output tokens per second / one instance's decode tokens per second

and a colocated instance, which does both, at least the sum of the two shares. One instance's
prefill rate is a full `prefill_batch_tokens` batch's tokens over its step time (the cost
model's `step_s`); its decode rate is the largest batch whose step still meets the SLO's
per-token target (and fits `max_batch_seqs` and the KV memory, at the workload's mean
context) over that step's time. Both are best cases, so the bounds are lower bounds in
steady state: bursts, queueing and chunked prefill's mixing only add to them. What they can
miss: the mean context stands for every sequence's (a long-tailed mix decodes a little
slower than its mean), and a trace's average rate hides its busy minutes (the search walks
up from the bound until runs meet the target, so a bound too low costs runs, never the answer).
"""

import math
from dataclasses import dataclass

from lab.core.cost import PoolCost
from lab.core.workload import generate_requests

__all__ = ["Load", "Bounds", "workload_load", "instance_throughput", "lower_bounds"]


@dataclass(frozen=True)
class Load:
    """The workload's demand: requests per second, prompt and output tokens per second, means."""

    requests: int
    span_s: float
    rate: float
    prompt_tps: float
    output_tps: float
    mean_prompt: float
    mean_output: float
    arrivals: tuple = ()  # every request's arrival (s), for choosing screening windows


@dataclass(frozen=True)
class Bounds:
    """Whole instances per pool ((n,) colocated) and the fractional loads they round up."""

    instances: tuple
    loads: tuple


def workload_load(scenario):
    """The Load of the scenario's own requests (a trace's rows, or its seed's Poisson draw)."""
    reqs = generate_requests(scenario.workload, scenario.seed)
    n = len(reqs)
    if n == 0:
        return Load(0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0)
    span = max(reqs[-1][0] - reqs[0][0], scenario.workload.duration_s or 0.0, 1e-9)
    prompt = math.fsum(r[1] for r in reqs)
    output = math.fsum(r[2] for r in reqs)
    return Load(n, span, n / span, prompt / span, output / span, prompt / n, output / n, tuple(r[0] for r in reqs))


def instance_throughput(scenario, gpu, tp, load):
    """(prefill tokens/s, decode tokens/s) of one instance at its best (see the module)."""
    fleet, slo = scenario.fleet, scenario.slo
    cost = PoolCost(scenario.model, gpu, tp)
    batch = fleet.prefill_batch_tokens
    prefill = batch / cost.step_s(0, 0, batch)
    context = load.mean_prompt + load.mean_output / 2
    per_seq_kv = max(1.0, load.mean_prompt + load.mean_output)
    most = max(1, min(fleet.max_batch_seqs, int(cost.kv_tokens // per_seq_kv)))
    target = slo.per_token_target_ms
    step = lambda b: cost.step_s(b, round(b * context), 0)  # noqa: E731
    seqs = most
    if target is not None:
        # The step time grows with the batch: the largest batch within the target, by bisection.
        lo, hi = 1, most
        if step(most) > target / 1000.0:
            while lo < hi:
                mid = (lo + hi + 1) // 2
                if step(mid) <= target / 1000.0:
                    lo = mid
                else:
                    hi = mid - 1
            seqs = lo
    return prefill, seqs / step(seqs)


def lower_bounds(config, scenario, load):
    """Bounds for a Config: at least one instance per pool."""
    if config.layout == "colocated":
        prefill, decode = instance_throughput(scenario, config.gpu, config.tp, load)
        share = load.prompt_tps / prefill + load.output_tps / decode
        return Bounds((max(1, math.ceil(share - 1e-9)),), (share,))
    prefill, _ = instance_throughput(scenario, config.prefill_gpu, config.prefill_tp, load)
    _, decode = instance_throughput(scenario, config.decode_gpu, config.decode_tp, load)
    p, d = load.prompt_tps / prefill, load.output_tps / decode
    return Bounds((max(1, math.ceil(p - 1e-9)), max(1, math.ceil(d - 1e-9))), (p, d))
