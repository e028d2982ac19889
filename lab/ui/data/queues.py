"""Queues and KV memory over time, derived from a `Result` (numpy, no Panel, no Bokeh).

What the canvas's queue rows and KV bands draw, as step functions: `(left, right, value)`
segments, each a span of time over which the value holds (spans where it is 0 are left
out, and neighbours of equal value are merged).

- `prefill_queue(result)`: requests waiting for their prefill to start: arrival ->
  `prefill_start` (colocated, that includes waiting for a GPU with KV room or a batch
  slot). A dropped request never waits, nor does a rejected one (early rejection turns
  it away at arrival: `rejections`); one still waiting when the run stopped waits until then.
- `rejections(result)`: the requests early rejection turned away, as (arrival times, ids,
  predicted TTFTs), in request order: the canvas marks them on the prefill queue row.
- `link_queue(result)`: KV caches that are ready (their prefill ended) and not yet on the
  wire, in two parts: `room` waits for KV room on a decode GPU (prefill end -> reserved,
  including those still unreserved when the run stopped) and `link` waits for the wire
  (the later of prefill end and reservation -> the first byte moves).
- `kv_usage(result)`: per instance that holds KV for decoding (colocated, decode; keyed by
  its GpuLog.index), the KV tokens reserved on it. The engine reserves a sequence's whole prompt + output when it
  admits it (colocated: its prefill starts; split: room is reserved for its transfer) and
  frees it all when the last token is emitted, so this is exactly what admission checks
  against the instance's capacity (`cost.PoolCost.kv_tokens`), not the tokens written so far (which grow to it one
  per step). A sequence not finished when the run stopped holds its room until then.
  On demand (`fleet.kv_policy: on_demand`) it is the blocks in use instead (GpuLog.kv_used).
"""

import numpy as np

__all__ = ["occupancy", "prefill_queue", "link_queue", "kv_usage", "run_stop", "rejections"]


def run_stop(result):
    """When the simulation stopped (what an interval open at the end runs to)."""
    return result.stopped_at if result.stopped_at is not None else result.end_time


def occupancy(starts, ends, weights=None):
    """The sum of `weights` (1 each by default) over the intervals [start, end) holding at
    each time, as (left, right, value) arrays of the spans where it is not 0.

    Empty or reversed intervals count for nothing. At a time where one interval ends and
    another starts the value changes once (no zero-width spike).
    """
    starts = np.asarray(starts, dtype=float)
    ends = np.asarray(ends, dtype=float)
    weights = np.ones(len(starts)) if weights is None else np.asarray(weights, dtype=float)
    keep = ends > starts
    starts, ends, weights = starts[keep], ends[keep], weights[keep]
    if not len(starts):
        return np.zeros(0), np.zeros(0), np.zeros(0)
    times = np.concatenate([starts, ends])
    deltas = np.concatenate([weights, -weights])
    order = np.argsort(times, kind="stable")
    times, deltas = times[order], deltas[order]
    level = np.cumsum(deltas)
    # The level after the last change at each distinct time.
    last = np.r_[times[1:] != times[:-1], True]
    times, level = times[last], level[last]
    level = np.where(np.abs(level) < 1e-9, 0.0, level)  # float weights cancel to 0, not 1e-16
    left, right, value = times[:-1], times[1:], level[:-1]
    # Merge neighbours of equal value, then drop the zero spans.
    new = np.r_[True, value[1:] != value[:-1]]
    idx = np.nonzero(new)[0]
    left, value = left[idx], value[idx]
    right = np.r_[left[1:], right[-1]] if len(idx) else right[:0]
    nz = value != 0
    return left[nz], right[nz], value[nz]


def prefill_queue(result):
    """(left, right, requests waiting for prefill)."""
    stop = run_stop(result)
    arrivals, begins = [], []
    for rec in result.requests:
        if rec.dropped is not None or rec.rejected:
            continue
        arrivals.append(rec.arrival)
        begins.append(stop if rec.prefill_start is None else rec.prefill_start)
    return occupancy(arrivals, begins)


def rejections(result):
    """(arrival times, request ids, predicted TTFTs in s) of the rejected requests (numpy arrays)."""
    turned = [rec for rec in result.requests if rec.rejected]
    return (np.fromiter((r.arrival for r in turned), float, len(turned)),
            np.fromiter((r.id for r in turned), np.int64, len(turned)),
            np.fromiter((r.predicted_ttft_s for r in turned), float, len(turned)))


def link_queue(result):
    """{"room": (left, right, n), "link": (left, right, n)}: KV caches waiting for room on a
    decode GPU, and for the wire. Empty for a colocated fleet."""
    stop = run_stop(result)
    room_a, room_b, link_a, link_b = [], [], [], []
    if any(g.role == "decode" for g in result.gpus):
        transfers = result.transfers
        for rec in result.requests:
            if rec.prefill_end is None or rec.dropped is not None:
                continue
            if rec.transfer < 0:
                if rec.output_tokens > 1:  # ready, never reserved: waits for room until the end
                    room_a.append(rec.prefill_end)
                    room_b.append(stop)
                continue
            tr = transfers[rec.transfer]
            room_a.append(tr.ready)
            room_b.append(tr.reserved)
            link_a.append(max(tr.ready, tr.reserved))
            link_b.append(stop if tr.start is None else tr.start)
    return {"room": occupancy(room_a, room_b), "link": occupancy(link_a, link_b)}


def kv_usage(result):
    """{GPU index: (left, right, KV tokens reserved)} for each GPU that decodes.

    With `fleet.kv_policy: on_demand` the tokens of the blocks in use instead, from the
    engine's log of them (`GpuLog.kv_used`): they grow as answers are written and drop at
    a preemption."""
    stop = run_stop(result)
    fleet = result.scenario.fleet
    if fleet.kv_policy == "on_demand":
        out = {}
        for g in result.gpus:
            if g.role not in ("colocated", "decode"):
                continue
            trace = [(t, used) for t, used in g.kv_used if t <= stop]
            times = [t for t, _ in trace] + [stop]
            out[g.index] = occupancy(times[:-1], times[1:], [used * fleet.kv_block_tokens for _, used in trace])
        return out
    # fleet.planner: a GPU that decodes at any time has a band, and a moved sequence holds KV
    # on each decode GPU from its reservation there until it was handed over (the next
    # transfer's `ready`) or finished.
    held = {g.index: ([], [], []) for g in result.gpus
            if g.role in ("colocated", "decode") or any(r == "decode" for _, r in g.roles)}
    split = any(g.role == "decode" for g in result.gpus)
    moves = {}
    if result.reconfigurations:
        for tr in result.transfers:
            moves.setdefault(tr.request, []).append(tr)
    for rec in result.requests:
        if rec.dropped is not None:
            continue
        if split and rec.id in moves and len(moves[rec.id]) > 1:
            trips = moves[rec.id]
            for tr, nxt in zip(trips, trips[1:] + [None]):
                if tr.dst_gpu in held:
                    a, b, w = held[tr.dst_gpu]
                    a.append(tr.reserved)
                    b.append(nxt.ready if nxt is not None else (stop if rec.finish is None else rec.finish))
                    w.append(rec.prompt_tokens + rec.output_tokens)
            continue
        if split:
            if rec.transfer < 0:
                continue
            tr = result.transfers[rec.transfer]
            gpu, since = tr.dst_gpu, tr.reserved
        else:
            if rec.prefill_start is None:
                continue
            gpu, since = rec.prefill_gpu, rec.prefill_start
        if gpu not in held:
            continue
        a, b, w = held[gpu]
        a.append(since)
        b.append(stop if rec.finish is None else rec.finish)
        w.append(rec.prompt_tokens + rec.output_tokens)
    return {gpu: occupancy(*cols) for gpu, cols in held.items()}
