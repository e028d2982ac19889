"""Metrics users feel, derived from a `Result`.

Conventions (also in docs/model.md, "Metrics"):
- TTFT = first token - arrival. A request that never got its first token counts
  with (end of run - arrival), a lower bound, so overload shows in the tail.
- TPOT = (last token - first token) / (output - 1), as vLLM's benchmark; undefined
  (None) for one-token outputs, which then meet any TPOT or gap target.
- Inter-token gaps: first token -> second, ..., the last two. `worst_gap_ms` is a
  request's largest; `itl_*` pools every gap of every request. A gap is a difference of
  step ends in ticks (`GpuLog.end_t`: exact), in seconds once where a value is shown
  (`request_gap_ticks`, the one rule; `request_gaps` is it in seconds). Busy times sum
  ticks too; loops over steps never read the seconds columns (result.py makes those only
  when read).
- A request meets the SLO when it finished and meets every target the SLO sets.
- Early rejection (`fleet.admission`): a rejected request is a miss in `slo_attainment`
  and `goodput_rps`, is neither finished nor unfinished (`rejected` counts it), has no
  TTFT (None: it never waited for a token) and is left out of the latency percentiles;
  `served_slo_attainment` is the share meeting the SLO among the requests not rejected.
- Percentiles: linear interpolation between closest ranks, bit-for-bit numpy's
  default `np.percentile(..., method="linear")` (percentiles.py).
- Cost and energy (docs/model.md "Fleets as they are built"): a run costs the fleet's GPUs x
  each one's $/hour x the run's length (`end_time`); energy is every instance's step
  power x step time plus idle watts for the rest of the run, x its GPUs (`cost.PoolCost`).
  Per token means per output token of a finished request (the tokens
  `throughput_tokens_per_s` counts); per request, per finished request.
- Prefix caching (docs/model.md "Prefix caching"), over the requests whose prefill ended:
  `prefix_hit_rate` = their cached (skipped) prompt tokens / their prompt tokens (None
  when no prefill ended), `prefill_tokens_saved` = those cached tokens, and
  `prefix_fetch_p99_ms` = the p99 of their fetch times from a shared pool (misses
  count 0 ms; None unless fleet.prefix_cache is "shared").
- A run cut short says so: `run_cut` is the bound that stopped it (`Result.capped`:
  "drain_s" or "max_steps", None when every request ran to its end) and `run_end_s` the
  simulated time it stopped. They describe the run, not its quality, so they are not
  among the METRIC_NAMES that stars compare (RUN_NAMES; summarize returns both).
"""

import math
from array import array
from operator import sub

from . import fast_metrics, kv
from .collector import held_off
from .cost import energy_by_role, pool_costs, role_time
from .planner import busy_in_window
from .percentiles import percentile, time_weighted_percentiles, weighted_percentile
from .prefix_cache import kv_taken_tokens
from .ticks import TICKS_PER_S, to_seconds, to_ticks

__all__ = [
    "METRIC_NAMES",
    "RUN_NAMES",
    "percentile",
    "weighted_percentile",
    "request_metrics",
    "summarize",
    "cost_and_energy",
    "request_gaps",
    "request_gap_ticks",
    "first_token_ticks",
    "gap_steps",
    "pooled_gaps",
    "kv_use",
    "time_weighted_percentiles",
    "admission_waits",
    "role_spans",
    "reconfig_lost_gpu_s",
    "resumed_in_batch",
    "step_gaps_of",
    "RangeMax",
    "prefix_metrics",
]

METRIC_NAMES = (
    "requests", "finished", "unfinished", "rejected",
    "ttft_p50_s", "ttft_p90_s", "ttft_p99_s",
    "tpot_p50_ms", "tpot_p99_ms",
    "itl_p50_ms", "itl_p99_ms",
    "worst_gap_p50_ms", "worst_gap_p99_ms",
    "slo_attainment", "served_slo_attainment", "goodput_rps", "goodput_rps_per_gpu", "throughput_tokens_per_s",
    "gpus", "prefill_gpus", "decode_gpus",
    "util_gpu", "util_prefill", "util_decode", "util_link",
    "transfer_p50_ms", "transfer_p99_ms",
    "usd_per_hour", "usd_per_million_tokens", "usd_per_good_request",
    "energy_j_per_token", "energy_j_per_request", "power_w_mean",
    "prefill_usd_per_hour", "decode_usd_per_hour", "prefill_energy_j", "decode_energy_j",
    "prefill_power_w_mean", "decode_power_w_mean",
    "prefix_hit_rate", "prefill_tokens_saved", "prefix_fetch_p99_ms",
    "preemptions", "kv_util_p50", "kv_util_p99", "admission_wait_p99_ms",
    "reconfigurations", "reconfig_lost_gpu_s",
)

# How the run ended; in every summary, after the metrics.
RUN_NAMES = ("run_cut", "run_end_s")


def step_gaps_of(log):
    """gaps[j] = end_t[j] - end_t[j-1], in ticks (exact): what a sequence decoding in step j
    waited (j >= 1). Seconds are `ticks.to_seconds` of a gap, once, where one is shown."""
    end = log.end_t
    if not end:
        return []
    # A compacted (big) run's gaps are an array of its ticks' kind: a quarter of a list's memory.
    # The first is a zero of the ticks' type: a float run's gaps all floats, so sorting them
    # compares floats directly (one int among them makes every comparison generic).
    zero = end[0] - end[0]
    gaps = array(end.typecode, [zero]) if isinstance(end, array) else [zero]
    gaps.extend(map(sub, end[1:], end))
    return gaps


def first_token_ticks(rec):
    """A request's first token, in ticks: the engine's (`RequestRecord.first_token_t`), or
    a hand-built record's seconds back in ticks."""
    t = rec.first_token_t
    return to_ticks(rec.first_token) if t is None else t


class RangeMax:
    """max(values[lo:hi + 1]) without copying the range: each BLOCK values' maximum is kept,
    so a range costs two partial blocks and its blocks' maxima. A request's worst gap reads
    its decode range of its GPU's step gaps; copying every range cost the sum of all
    outputs (batch x steps), the biggest term of `summarize` on long traces."""

    BLOCK = 64

    def __init__(self, values):
        self.values = values
        b = self.BLOCK
        self.blocks = [max(values[i:i + b]) for i in range(0, len(values), b)]

    def max(self, lo, hi, default):
        """The largest of values[lo..hi] (inclusive), or `default` when the range is empty."""
        values = self.values
        hi = min(hi, len(values) - 1)
        if hi < lo:
            return default
        b = self.BLOCK
        first, last = lo // b + 1, hi // b  # the whole blocks strictly inside the range
        if first >= last:
            return max(values[lo:hi + 1])
        best = max(self.blocks[first:last])
        head = max(values[lo:first * b])
        tail = max(values[last * b:hi + 1])
        if head > best:
            best = head
        return tail if tail > best else best


def request_gap_ticks(result, rec):
    """Every inter-token gap of one request, in ticks: over its decode stretches in order
    (`RequestRecord.stretches`); the gap into a later stretch runs from the last token of
    the one before (a preemption's wait, a move)."""
    if rec.first_token is None:
        return []
    gaps = []
    prev = first_token_ticks(rec)
    for g, a, b in rec.stretches():
        if b < a:
            continue  # preempted before it emitted in this stretch
        end = result.gpus[g].end_t
        last = min(b, len(end) - 1)
        if a > last:
            break  # (a run cut before this stretch's first token)
        gaps.append(end[a] - prev)
        gaps.extend(map(sub, end[a + 1:last + 1], end[a:last]))
        prev = end[last]
    return gaps


def request_gaps(result, rec):
    """Every inter-token gap of one request, in seconds (for tests and plots): each of
    `request_gap_ticks` converted once, the very values the metrics use."""
    return [to_seconds(gap) for gap in request_gap_ticks(result, rec)]


def gap_steps(result, rec):
    """(gpu, step index) that emitted each of tokens 2..n, in order: what ended each gap of
    `request_gaps` (same length and order)."""
    out = []
    for g, a, b in rec.stretches():
        if b < a:
            continue
        last = min(b, len(result.gpus[g]) - 1)
        if a > last:
            break
        out.extend((g, j) for j in range(a, last + 1))
    return out


def resumed_in_batch(result):
    """Whether a later stretch's first step counts the sequence among its `decode_seqs`.

    On a split fleet a preempted (or moved) sequence rejoins a decode GPU's batch, so yes;
    on a colocated fleet that step ends its re-prefill, whose token is prompt work, not one
    of the step's decoding sequences (like any request's first token)."""
    return result.scenario.fleet.layout != "colocated"


def request_metrics(result, step_gaps=None):
    """One dict per request: ttft_s, tpot_ms, worst_gap_ms, met_slo and where it ran."""
    rows = []
    for rec, (ttft, tpot_ms, worst_ms, transfer_ms, met) in zip(result.requests, _request_values(result, step_gaps)):
        rows.append({
            "id": rec.id,
            "arrival_s": rec.arrival,
            "prompt_tokens": rec.prompt_tokens,
            "output_tokens": rec.output_tokens,
            "prefill_gpu": rec.prefill_gpu,
            "decode_gpu": rec.decode_gpu,
            "ttft_s": ttft,
            "tpot_ms": tpot_ms,
            "worst_gap_ms": worst_ms,
            "transfer_ms": transfer_ms,
            "finish_s": rec.finish,
            "finished": rec.finished,
            "met_slo": met,
            "dropped": rec.dropped or "",
            "rejected": rec.rejected,
            "predicted_ttft_s": rec.predicted_ttft_s,
            "prefix_hit_tokens": rec.prefix_hit_tokens,
            "prefix_fetch_s": rec.prefix_fetch_s,
            "preemptions": rec.preemptions,
        })
    return rows


def _request_values(result, step_gaps=None):
    """Per request, in order: (ttft_s, tpot_ms, worst_gap_ms, transfer_ms, met_slo), the
    values `request_metrics` puts in its rows, worked out here once; `summarize` reads
    them as they come, without a row per request (544 bytes each: 0.54 GB for a million)."""
    slo = result.scenario.slo
    if step_gaps is None:
        step_gaps = [step_gaps_of(g) for g in result.gpus]
    ranges = [None] * len(step_gaps)  # a RangeMax per GPU, built when a request reads it
    transfers = result.transfers
    for rec in result.requests:
        ttft = (rec.first_token if rec.first_token is not None else result.end_time) - rec.arrival
        if rec.rejected:
            ttft = None
        tpot_ms = worst_ms = None
        finished = rec.finish is not None  # (rec.finished, without a call)
        if finished and rec.output_tokens > 1:
            tpot_ms = (rec.finish - rec.first_token) / (rec.output_tokens - 1) * 1000.0
            # The worst gap: the largest in ticks, converted once.
            if rec.earlier:
                worst_t = max(request_gap_ticks(result, rec))
            else:
                g = rec.decode_gpu
                first_t = rec.first_token_t  # (first_token_ticks, inline for the engine's records)
                if first_t is None:
                    first_t = first_token_ticks(rec)
                first_gap = result.gpus[g].end_t[rec.decode_first_step] - first_t
                if ranges[g] is None:
                    ranges[g] = RangeMax(step_gaps[g])
                rest = ranges[g].max(rec.decode_first_step + 1, rec.decode_last_step, first_gap)
                worst_t = first_gap if first_gap > rest else rest
            worst_ms = worst_t / TICKS_PER_S * 1000.0  # (to_seconds, inline: it runs per request)
        met = finished and (slo.ttft_s is None or ttft <= slo.ttft_s)  # (a rejected one never finished)
        if met and tpot_ms is not None:
            met = (slo.tpot_ms is None or tpot_ms <= slo.tpot_ms) and (
                slo.max_gap_ms is None or worst_ms <= slo.max_gap_ms
            )
        transfer_ms = None
        if rec.transfer >= 0 and transfers[rec.transfer].end <= result.end_time:
            tr = transfers[rec.transfer]  # (one still on the wire when a run was cut has no latency yet)
            transfer_ms = (tr.end - tr.ready) * 1000.0
        yield ttft, tpot_ms, worst_ms, transfer_ms, bool(met)


def pooled_gaps(result, step_gaps):
    """(values, counts): every emitted token's gap in ticks (as `request_gap_ticks`),
    grouped by the step that emitted it; `step_gaps`: each log's `step_gaps_of`.

    A token emitted at the end of step j waited end[j] - end[j-1], except the first token
    of each decode stretch, which waited from the token before it (the request's first
    token, or the last of its stretch before), so it is counted on its own
    (`stretch_first_gaps`).
    """
    gpus = result.gpus
    values, counts = [], []
    compacted = [log.end_t for log in gpus if isinstance(log.end_t, array)]
    if compacted:  # a big run: no number object per step (docs/architecture.md "Scale")
        values, counts = array(compacted[0].typecode), array("i")
    firsts = stretch_first_gaps(result, result.requests, values, counts)
    for g, log in enumerate(gpus):
        first = firsts[g]
        if first:
            seqs = log.decode_seqs[:]  # a copy of its kind: a compacted column's is an array (memcpy)
            for j, c in first.items():
                seqs[j] -= c
        else:
            seqs = log.decode_seqs
        values.extend(step_gaps[g])
        counts.extend(seqs)
    return values, counts


def stretch_first_gaps(result, records, values, counts):
    """The gap of the first token of each decode stretch of `records`, appended to `values`
    in ticks (from the request's first token, or the last token of its stretch before) with
    a count of 1 each; returns [{step: how many of these tokens it emitted}] per instance
    (`pooled_gaps` counts those steps' own gap that many times fewer)."""
    gpus = result.gpus
    firsts = [dict() for _ in gpus]
    in_batch = None
    for rec in records:
        a = rec.decode_first_step
        if rec.first_token is None:
            continue
        if rec.earlier:
            if in_batch is None:
                in_batch = resumed_in_batch(result)
            prev = first_token_ticks(rec)
            for k, (g, a, b) in enumerate(rec.stretches()):
                end = gpus[g].end_t
                if b < a:
                    continue
                if a >= len(end):
                    break
                if k == 0 or in_batch:
                    first = firsts[g]
                    first[a] = first.get(a, 0) + 1
                values.append(end[a] - prev)
                counts.append(1)
                prev = end[min(b, len(end) - 1)]
            continue
        end = gpus[rec.decode_gpu].end_t
        if a < 0 or a >= len(end):
            continue
        first = firsts[rec.decode_gpu]
        first[a] = first.get(a, 0) + 1
        first_t = rec.first_token_t  # (first_token_ticks, inline for the engine's records)
        if first_t is None:
            first_t = first_token_ticks(rec)
        values.append(end[a] - first_t)
        counts.append(1)
    return firsts


def kv_use(result, run=None):
    """{share of KV capacity in use: seconds}, over [0, end_time] and every instance of the
    pool that holds answers' KV (colocated instances, or the decode pool).

    on_demand: the blocks in use (`GpuLog.kv_used`) over the whole blocks; reserve: the
    tokens reserved (prompt + output of each sequence from its admission, a split fleet's
    from its reservation on the decode GPU, to its finish) over the KV capacity. Summed
    per level in one sweep per instance (no per-step work: summarize runs on every run).
    `run`: the run's fast_metrics.RunArrays, to sweep on numpy (the same sums)."""
    holders = _kv_holders(result)
    if holders is None:
        return {}
    cap, logs, on_demand = holders
    if run is not None:
        seconds = fast_metrics.kv_seconds(run, logs, on_demand)
    else:
        seconds = _kv_seconds(result, logs, on_demand)
    return {used / cap: w for used, w in seconds.items()}


def _kv_holders(result):
    """(capacity, the logs of the instances that hold answers' KV, on_demand) for `kv_use`:
    the capacity in blocks on demand, else in tokens; None when there is no room at all."""
    scenario = result.scenario
    fleet = scenario.fleet
    holder = "decode" if fleet.layout == "disaggregated" else "colocated"
    cap = None
    for pool, cost in zip(scenario.pools(), pool_costs(scenario)):
        if pool.role == holder:
            cap = cost.kv_tokens - kv_taken_tokens(scenario, pool)  # a per_gpu prefix cache's share is not KV room
    if not cap or cap <= 0:
        return None
    logs = [log for log in result.gpus if log.role == holder]
    if fleet.kv_policy == "on_demand":
        cap = kv.capacity_blocks(cap, fleet.kv_block_tokens)
        if cap <= 0:
            return None  # less room than one block: every request was dropped, nothing was held
        return cap, logs, True
    return cap, logs, False


def _kv_seconds(result, logs, on_demand):
    """{units in use: seconds} of `kv_use`, one instance at a time in pure Python."""
    span = result.end_time
    if on_demand:
        # kv_used holds levels, not changes: the last entry at a time is the level from then.
        events = {log.index: log.kv_used for log in logs}
        levels = True
    else:
        # Per instance, the times reservations start and end and their changes, in parallel
        # lists: a tuple per change would be a container the garbage collector tracks, and
        # tens of thousands of them kept it collecting through the metrics.
        changes = {log.index: ([], []) for log in logs}
        split = result.scenario.fleet.layout == "disaggregated"
        transfers = result.transfers
        for rec in result.requests:
            if split:
                if rec.transfer < 0:
                    continue
                start, g = transfers[rec.transfer].reserved, rec.decode_gpu
            else:
                start, g = rec.prefill_start, rec.prefill_gpu
            if start is None or g not in changes:
                continue
            need = rec.prompt_tokens + rec.output_tokens
            times, deltas = changes[g]
            times.append(start)
            deltas.append(need)
            if rec.finish is not None:
                times.append(rec.finish)
                deltas.append(-need)
        # In time order; changes at the same time in any order, as the sweep below adds
        # time only when it moves on (the level between them lasts no time).
        events = {}
        for g, (times, deltas) in changes.items():
            order = sorted(range(len(times)), key=times.__getitem__)
            events[g] = zip(map(times.__getitem__, order), map(deltas.__getitem__, order))
        levels = False
    seconds = {}
    for column in events.values():
        t0, used = 0.0, 0
        for t, x in column:
            if t > span:
                break
            if t > t0:
                seconds[used] = seconds.get(used, 0.0) + (t - t0)
                t0 = t
            used = x if levels else used + x
        if span > t0:
            seconds[used] = seconds.get(used, 0.0) + (span - t0)
    return seconds


def admission_waits(result):
    """Seconds each request waited for a place that holds its KV (first admission only):
    colocated, arrival -> its prefill starts on a GPU (its queue wait); split, its prefill's
    end -> room reserved on a decode GPU (0 when reserved before, as layer-wise streaming
    does). One still waiting when the run ended counts with the end of the run."""
    split = result.scenario.fleet.layout == "disaggregated"
    end = result.end_time
    out = []
    for rec in result.requests:
        if rec.dropped:
            continue
        if not split:
            out.append((rec.prefill_start if rec.prefill_start is not None else end) - rec.arrival)
            continue
        if rec.prefill_end is None or rec.output_tokens == 1:
            continue
        reserved = result.transfers[rec.transfer].reserved if rec.transfer >= 0 else end
        out.append(max(0.0, reserved - rec.prefill_end))
    return out
def role_spans(log, end):
    """[(from, to, role)] of one instance up to `end`, from `GpuLog.roles` ("switching" while
    it reloads for a new role)."""
    out = []
    roles = log.roles
    for i, (t0, role) in enumerate(roles):
        t1 = roles[i + 1][0] if i + 1 < len(roles) else end
        t0, t1 = min(t0, end), min(t1, end)
        if t1 > t0:
            out.append((t0, t1, role))
    return out or [(0.0, end, roles[0][1])]


def reconfig_lost_gpu_s(result):
    """GPU-seconds role changes cost: from each decision until the instance serves its new
    pool (ready, or the run's end), less the time it ran steps while it drained."""
    end = result.end_time
    lost = []
    for t_decided, g, _, _, t_ready in result.reconfigurations:
        log = result.gpus[g]
        until = end if t_ready is None or t_ready > end else t_ready
        drained = until
        for t, role in log.roles:
            if role == "switching" and t >= t_decided:
                drained = min(t, until)
                break
        if until > t_decided:
            ran = to_seconds(busy_in_window(log.start_t, log.end_t, to_ticks(t_decided), to_ticks(drained)))
            lost.append(log.tp * ((until - t_decided) - ran))
    return math.fsum(lost)


def _per(total, count):
    return total / count if count else None


def cost_and_energy(result, finished, met, out_tokens, busy=None):
    """The cost, energy and power metrics (see the module docstring), by name.
    `busy`: each log's `busy_s()`, when the caller has them (they are the costly part)."""
    scenario = result.scenario
    span = result.end_time
    costs = pool_costs(scenario)
    by_role = {pool.role: cost for pool, cost in zip(scenario.pools(), costs)}
    usd_hour = {pool.role: pool.gpus * cost.gpu_usd_per_hour for pool, cost in zip(scenario.pools(), costs)}
    energy = dict.fromkeys(by_role, 0.0)
    parts = {role: [] for role in by_role}
    gpu_s = {role: [] for role in by_role}  # fleet.planner: GPU-seconds each pool had
    for i, log in enumerate(result.gpus):
        role = log.role if log.role in by_role else next(iter(by_role))  # (hand-built logs)
        if len(log.roles) > 1 and span > 0:
            # It changed roles: its price and energy count in each pool for its time there
            # (a reload in the pool it reloads for), each step in the role it began in.
            spans = role_time(log, span, result.reconfigurations)
            for r, t0, t1 in spans:
                gpu_s[r].append(log.tp * (t1 - t0))
            for r, joules in energy_by_role(by_role[role], log, spans).items():
                parts[r].append(joules)
            continue
        gpu_s[role].append(log.tp * span)
        parts[role].append(by_role[role].energy_j(log, span, None if busy is None else busy[i]))
    for role, joules in parts.items():
        energy[role] = math.fsum(joules)
    fleet_usd_hour = math.fsum(usd_hour.values())  # the fleet's GPUs never change
    if any(len(log.roles) > 1 for log in result.gpus) and span > 0:
        price = {pool.role: cost.gpu_usd_per_hour for pool, cost in zip(scenario.pools(), costs)}
        usd_hour = {role: price[role] * math.fsum(seconds) / span for role, seconds in gpu_s.items()}
    fleet_energy = math.fsum(energy.values())
    run_usd = fleet_usd_hour * span / 3600.0
    split = scenario.fleet.layout == "disaggregated"

    def pool(role, values, per_s=False):
        if not split:
            return None
        return _per(values[role], span) if per_s else values[role]

    return {
        "usd_per_hour": fleet_usd_hour,
        "usd_per_million_tokens": _per(run_usd * 1e6, out_tokens),
        "usd_per_good_request": _per(run_usd, met),
        "energy_j_per_token": _per(fleet_energy, out_tokens),
        "energy_j_per_request": _per(fleet_energy, finished),
        "power_w_mean": _per(fleet_energy, span),
        "prefill_usd_per_hour": pool("prefill", usd_hour),
        "decode_usd_per_hour": pool("decode", usd_hour),
        "prefill_energy_j": pool("prefill", energy),
        "decode_energy_j": pool("decode", energy),
        "prefill_power_w_mean": pool("prefill", energy, per_s=True),
        "decode_power_w_mean": pool("decode", energy, per_s=True),
    }


def prefix_metrics(result):
    """prefix_hit_rate, prefill_tokens_saved, prefix_fetch_p99_ms (see the module docstring)."""
    shared = getattr(result.scenario.fleet, "prefix_cache", "off") == "shared"
    if getattr(result.scenario.fleet, "prefix_cache", "off") == "off":
        # Off, nothing is cached (docs/model.md "Metrics": 0.0 with the cache off): one request's prefill
        # ending is all it takes to know, not a sweep of every request.
        ended = any(rec.prefill_end is not None for rec in result.requests)
        return {"prefix_hit_rate": 0.0 if ended else None, "prefill_tokens_saved": 0, "prefix_fetch_p99_ms": None}
    prompt = saved = 0
    fetches = []
    for rec in result.requests:
        if rec.prefill_end is not None:
            prompt += rec.prompt_tokens
            saved += rec.prefix_hit_tokens
            fetches.append(rec.prefix_fetch_s * 1000.0)
    return {
        "prefix_hit_rate": saved / prompt if prompt else None,
        "prefill_tokens_saved": saved,
        "prefix_fetch_p99_ms": percentile(fetches, 99) if shared else None,
    }


def _memory_metrics(result, run=None):
    kv50, kv99 = time_weighted_percentiles(kv_use(result, run), (50, 99))
    wait99 = percentile(admission_waits(result), 99)
    return {
        # Only on_demand preempts: with reserve the count is 0 without a sweep.
        "preemptions": (sum(rec.preemptions for rec in result.requests)
                        if getattr(result.scenario.fleet, "kv_policy", "reserve") == "on_demand" else 0),
        "kv_util_p50": kv50,
        "kv_util_p99": kv99,
        "admission_wait_p99_ms": wait99 * 1000.0 if wait99 is not None else None,
    }


def _gather(values):
    """(met, ttfts, tpots, worst, transfers) from `_request_values`-shaped tuples: how many
    met the SLO, and each value's defined ones, sorted."""
    met = 0
    ttfts, tpots, worst, transfers = [], [], [], []
    for ttft, tpot_ms, worst_ms, transfer_ms, met_slo in values:
        met += met_slo
        if ttft is not None:
            ttfts.append(ttft)
        if tpot_ms is not None:
            tpots.append(tpot_ms)
        if worst_ms is not None:
            worst.append(worst_ms)
        if transfer_ms is not None:
            transfers.append(transfer_ms)
    for column in (ttfts, tpots, worst, transfers):
        column.sort()
    return met, ttfts, tpots, worst, transfers


def _first_gaps_of(result, records):
    """`stretch_first_gaps` of `records` into fresh lists: (values, firsts)."""
    values = []
    firsts = stretch_first_gaps(result, records, values, [])
    return values, firsts


@held_off()  # (no collections while it reads the run: lab/core/collector.py)
def summarize(result, rows=None, numpy=None):
    """The fleet metrics, keyed by METRIC_NAMES then RUN_NAMES (None where undefined).
    `rows`: the run's `request_metrics`, when the caller has them (their values are used).
    `numpy`: three heavy passes on numpy (fast_metrics.py: the same values): None lets
    `fast_metrics.usable` choose (numpy already imported, or a big run), True forces them,
    False never."""
    np = fast_metrics.usable(result, numpy, with_rows=rows is not None)
    run = fast_metrics.RunArrays(np, result) if np is not None else None
    step_gaps = [step_gaps_of(g) for g in result.gpus] if run is None else None
    if run is not None and rows is None:
        met, ttfts, tpots, worst, transfers = fast_metrics.request_columns(
            run, lambda rec: max(request_gap_ticks(result, rec)))  # (the rule, for the few it leaves)
    else:
        met, ttfts, tpots, worst, transfers = _gather(
            _request_values(result, step_gaps) if rows is None else
            [(r["ttft_s"], r["tpot_ms"], r["worst_gap_ms"], r["transfer_ms"], r["met_slo"]) for r in rows])
    if run is not None:
        itl50, itl99 = fast_metrics.gap_percentiles(run, (50, 99), lambda records: _first_gaps_of(result, records))
    else:
        itl50, itl99 = weighted_percentile(*pooled_gaps(result, step_gaps), (50, 99), to_seconds)
    fleet = result.scenario.fleet
    n = len(result.requests)
    finished = sum(1 for rec in result.requests if rec.finish is not None)  # (rec.finished, without a call each)
    rejected = sum(1 for rec in result.requests if rec.rejected)
    window = result.arrivals_end if result.arrivals_end > 0 else result.end_time
    goodput = met / window if window > 0 else 0.0
    gpus = fleet.total_gpus
    span = result.end_time if result.end_time > 0 else 1.0
    busy = {"colocated": 0.0, "prefill": 0.0, "decode": 0.0}
    count = {"colocated": 0, "prefill": 0, "decode": 0}
    gpu_busy = []  # busy GPU-seconds: an instance's busy time counts once per GPU it spans
    log_busy = [log.busy_s() for log in result.gpus]
    role_time = {"colocated": 0.0, "prefill": 0.0, "decode": 0.0}  # instance-seconds in each role
    for log, raw in zip(result.gpus, log_busy):
        b = min(raw, span)
        gpu_busy.append(b * log.tp)
        count[log.role] += 1
        if len(log.roles) == 1:
            busy[log.role] += b
            role_time[log.role] += span
            continue
        # fleet.planner: each step counts in the role the instance had when it started, each
        # instance in a pool for the time it was in it (reloading counts in neither)
        spans = role_spans(log, span)
        span_t, starts_t = to_ticks(span), [to_ticks(t0) for t0, _, _ in spans]
        ticks_in = dict.fromkeys(busy, 0)  # this instance's busy ticks per role (exact sums)
        k = 0
        for start, end in zip(log.start_t, log.end_t):
            if start >= span_t:
                break
            while k + 1 < len(spans) and starts_t[k + 1] <= start:
                k += 1
            ticks_in[spans[k][2]] += (end if end < span_t else span_t) - start
        for role, ticks in ticks_in.items():
            busy[role] += to_seconds(ticks)
        for t0, t1, role in spans:
            if role in role_time:
                role_time[role] += t1 - t0
    wire = math.fsum(min(e, span) - s for t in result.transfers for s, e in t.wire_spans() if s < span)
    out_tokens = sum(r.output_tokens for r in result.requests if r.finish is not None)

    def util(role):  # a pool's instances all have its tp: per instance = per GPU
        return busy[role] / role_time[role] if count[role] and role_time[role] else (0.0 if count[role] else None)

    log_gpus = sum(log.tp for log in result.gpus)
    return {
        "requests": n,
        "finished": finished,
        "unfinished": n - finished - rejected,
        "rejected": rejected,
        "ttft_p50_s": percentile(ttfts, 50, True),
        "ttft_p90_s": percentile(ttfts, 90, True),
        "ttft_p99_s": percentile(ttfts, 99, True),
        "tpot_p50_ms": percentile(tpots, 50, True),
        "tpot_p99_ms": percentile(tpots, 99, True),
        "itl_p50_ms": itl50 * 1000.0 if itl50 is not None else None,
        "itl_p99_ms": itl99 * 1000.0 if itl99 is not None else None,
        "worst_gap_p50_ms": percentile(worst, 50, True),
        "worst_gap_p99_ms": percentile(worst, 99, True),
        "slo_attainment": met / n if n else None,
        "served_slo_attainment": met / (n - rejected) if n > rejected else None,
        "goodput_rps": goodput,
        "goodput_rps_per_gpu": goodput / gpus,
        "throughput_tokens_per_s": out_tokens / span,
        "gpus": gpus,
        "prefill_gpus": fleet.prefill_gpus if fleet.layout == "disaggregated" else 0,
        "decode_gpus": fleet.decode_gpus if fleet.layout == "disaggregated" else 0,
        "util_gpu": math.fsum(gpu_busy) / (log_gpus * span) if result.gpus else None,
        "util_prefill": util("prefill"),
        "util_decode": util("decode"),
        "util_link": wire / span if fleet.layout == "disaggregated" else None,
        "transfer_p50_ms": percentile(transfers, 50, True),
        "transfer_p99_ms": percentile(transfers, 99, True),
        **cost_and_energy(result, finished, met, out_tokens, log_busy),
        **prefix_metrics(result),
        **_memory_metrics(result, run),
        "reconfigurations": len(result.reconfigurations),  # 0 with fixed pools (no planner)
        "reconfig_lost_gpu_s": reconfig_lost_gpu_s(result),
        "run_cut": result.capped,
        "run_end_s": result.stopped_at if result.stopped_at is not None else result.end_time,
    }
