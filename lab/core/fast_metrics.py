"""The metrics' heavy passes on numpy: the same values as metrics.py's pure passes, bit
for bit, in less time.

`summarize` (metrics.py) owns the rules; this module re-does three of its passes as
array operations and nothing else:
- `request_columns`: every request's TTFT, TPOT and worst gap, and which met the SLO
  (metrics._request_values, one request at a time there);
- `gap_percentiles`: percentiles of every emitted token's gap (metrics.pooled_gaps and
  weighted_percentile there);
- `kv_seconds`: the time each level of KV use lasted (metrics._kv_seconds there).

Why the values are the same, not merely close: every number is the same IEEE double
operation on the same doubles (a difference, a division, a multiply), in the same order
for each value; a worst gap is a maximum, which has no rounding; a percentile picks the
same ranks of the same multiset and interpolates with percentiles._lerp on Python floats; a
level's time is summed in the pure sweep's order (`np.add.at` adds in the order given).
Ticks (ticks.py) are whole numbers: floats below 2**52, or 8-byte ints in a long run,
which become doubles here exactly while they stay below 2**53 (a run of 2.5 hours);
past that `usable` says no and the pure path runs. Requests that decoded in several
stretches (a preemption, a move) are rare and go through the pure rule one at a time.

`summarize(result, numpy=None)` picks the path (`usable`); True or False forces one, as
tests/test_fast_metrics.py does to hold the two equal on every mission, the property
scenarios and the traces. numpy is never imported by the standard-library core unless
this path runs (bare Pyodide has none). Figures: benchmarks/README.md, "Metrics on numpy".
"""

import sys
from operator import attrgetter

from .percentiles import PYPY, percentiles_at_ranks
from .ticks import TICKS_PER_S, to_seconds, to_ticks

__all__ = ["FAST_MIN_STEPS", "FAST_MIN_STEPS_WITH_ROWS", "numpy_module", "usable", "RunArrays", "request_columns",
           "gap_percentiles", "kv_seconds"]

# Steps from which numpy is worth importing for `summarize` (`usable`; benchmarks/README.md
# "Metrics on numpy": the Azure conversation trace, 302,301 and 579,181 steps, gains either
# way without rows; with them, as `lab run` has, it ties at 302,301 and gains at 579,181).
FAST_MIN_STEPS = 250_000
FAST_MIN_STEPS_WITH_ROWS = 500_000
EXACT_BELOW = 2**53  # a whole number of ticks below this is a double exactly


def numpy_module():
    """numpy, or None where it is not installed (bare Pyodide, a minimal PyPy)."""
    try:
        import numpy
    except ImportError:
        return None
    return numpy


def usable(result, numpy=None, with_rows=False):
    """The numpy module when `summarize` should take this path, else None. `numpy`: True or
    False forces a path (True raises ImportError when numpy is missing); None chooses it
    when numpy is installed and either already imported (the page, where Panel imports it:
    then it is quicker at every mission's size) or worth its import (60-130 ms): the run
    logged at least FAST_MIN_STEPS steps, or FAST_MIN_STEPS_WITH_ROWS when the caller has
    the per-request values already (`with_rows`: `lab run`), as then only the passes over
    steps are left to gain on. Never by choice under PyPy, whose JIT runs the pure passes
    quickly and whose numpy pays for every number that crosses into it."""
    if numpy is False:
        return None
    if numpy is None:
        if PYPY:
            return None
        enough = FAST_MIN_STEPS_WITH_ROWS if with_rows else FAST_MIN_STEPS
        if "numpy" not in sys.modules and sum(len(log.end_t) for log in result.gpus) < enough:
            return None
    np = numpy_module()
    if np is None:
        if numpy:
            raise ImportError("summarize(numpy=True): numpy is not installed")
        return None
    for log in result.gpus:
        end = log.end_t
        if len(end) and not isinstance(end[-1], float) and end[-1] >= EXACT_BELOW:
            return None  # int ticks a double cannot hold: the pure path's exact ints
    return np


class RunArrays:
    """A run's columns as arrays, made once for the passes: each instance's step ends and
    step gaps (doubles, in ticks; a compacted log's 'd' column is read in place), and the
    request columns the passes read. Kept per instance, never end to end: a big run's
    steps are tens of millions, and every array of them is hundreds of megabytes."""

    def __init__(self, np, result):
        self.np, self.result = np, result
        self._columns = {}
        logs, records = result.gpus, result.requests
        self.ends = [np.asarray(log.end_t, dtype=float) for log in logs]
        # metrics.step_gaps_of: each step's end less the one before (the first: 0)
        self.gaps = [np.diff(end, prepend=end[:1]) for end in self.ends]
        self.first = self.column("first_token")
        self.gpu = self.column("decode_gpu", np.int64)
        self.a = self.column("decode_first_step", np.int64)
        self.several = np.array(list(map(bool, map(attrgetter("earlier"), records))), dtype=bool)
        lengths = np.array([len(end) for end in self.ends] + [0], dtype=np.int64)
        self.gpu_steps = lengths[self.gpu]  # (a gpu of -1 reads the 0)
        self._first_ticks = None

    def by_instance(self, idx):
        """(instance, the entries of `idx` whose request decodes there), for each instance."""
        np = self.np
        where = self.gpu[idx]
        order = np.argsort(where, kind="stable")
        bounds = np.searchsorted(where[order], np.arange(len(self.ends) + 1))
        for g in range(len(self.ends)):
            if bounds[g + 1] > bounds[g]:
                yield g, idx[order[bounds[g]:bounds[g + 1]]]

    def column(self, name, dtype=float):
        """One request attribute as an array (None -> NaN in a float column), made once."""
        key = (name, dtype)
        if key not in self._columns:
            self._columns[key] = self.np.array(list(map(attrgetter(name), self.result.requests)), dtype=dtype)
        return self._columns[key]

    def first_ticks(self):
        """Each request's first token in ticks (`metrics.first_token_ticks`): the engine's, or
        to_ticks of a hand-built record's seconds (NaN: no first token)."""
        if self._first_ticks is None:
            np, records = self.np, self.result.requests
            ticks = self.column("first_token_t")
            for i in np.flatnonzero(np.isnan(ticks) & ~np.isnan(self.first)).tolist():
                ticks[i] = to_ticks(records[i].first_token)
            self._first_ticks = ticks
        return self._first_ticks

    def in_one_stretch(self, mask):
        """Of the requests in `mask`, those whose tokens 2..n are one range of steps on their
        decode instance that the log holds (the rest go through the pure rules)."""
        return mask & ~self.several & (self.a >= 0) & (self.a < self.gpu_steps) & (self.gpu >= 0)


def _range_max(np, values, lo, hi):
    """max(values[lo[i]..hi[i]]) for each i (inclusive, lo <= hi), by a sparse table built a
    level at a time: level k holds the maxima of windows of 2**k, and a range of length L
    is two (overlapping) windows of the largest 2**k <= L. Two levels in memory at once."""
    out = np.empty(len(lo))
    if not len(lo):
        return out
    length = hi - lo + 1
    level = np.zeros(len(lo), dtype=np.int64)
    while True:  # level = floor(log2(length)), in integers
        grow = (length >> (level + 1)) > 0
        if not grow.any():
            break
        level += grow
    table = values
    for k in range(int(level.max()) + 1):
        if k:
            half = 1 << (k - 1)
            table = np.maximum(table[:-half], table[half:])
        at = level == k
        if at.any():
            out[at] = np.maximum(table[lo[at]], table[hi[at] - (1 << k) + 1])
    return out


def request_columns(run, worst_gap_ticks):
    """(met, ttfts, tpots, worst, transfers) as `summarize` gathers them from
    metrics._request_values: the count of requests meeting the SLO, then each value list
    sorted, as Python floats. `worst_gap_ticks(rec)`: the pure rule, for the requests this
    path leaves to it."""
    np, result = run.np, run.result
    records, slo = result.requests, result.scenario.slo
    arrival, first, finish = run.column("arrival"), run.first, run.column("finish")
    outputs = run.column("output_tokens", np.int64)
    finished = ~np.isnan(finish)
    ttft = np.where(np.isnan(first), result.end_time, first) - arrival
    has_ttft = ~run.column("rejected", bool)
    decoded = finished & (outputs > 1)
    with np.errstate(divide="ignore", invalid="ignore"):  # (read only where decoded)
        tpot = (finish - first) / (outputs - 1) * 1000.0

    worst_t = np.zeros(len(records))
    plain = run.in_one_stretch(decoded)
    for i in np.flatnonzero(decoded & ~plain).tolist():
        worst_t[i] = worst_gap_ticks(records[i])
    first_ticks = run.first_ticks()
    last = run.column("decode_last_step", np.int64)
    for g, sel in run.by_instance(np.flatnonzero(plain)):
        a = run.a[sel]
        first_gap = run.ends[g][a] - first_ticks[sel]
        lo, hi = a + 1, np.minimum(last[sel], len(run.ends[g]) - 1)
        rest = first_gap.copy()  # an empty range: the first gap alone
        ranged = hi >= lo
        rest[ranged] = _range_max(np, run.gaps[g], lo[ranged], hi[ranged])
        worst_t[sel] = np.where(first_gap > rest, first_gap, rest)
    worst_ms = worst_t / TICKS_PER_S * 1000.0

    met = finished.copy()
    if slo.ttft_s is not None:
        met &= ttft <= slo.ttft_s
    limits = np.ones(len(records), dtype=bool)
    if slo.tpot_ms is not None:
        limits &= tpot <= slo.tpot_ms
    if slo.max_gap_ms is not None:
        limits &= worst_ms <= slo.max_gap_ms
    met &= ~decoded | limits

    transfers = result.transfers
    transfer_ms = [(transfers[rec.transfer].end - transfers[rec.transfer].ready) * 1000.0 for rec in records
                   if rec.transfer >= 0 and transfers[rec.transfer].end <= result.end_time]
    return (int(met.sum()), np.sort(ttft[has_ttft]).tolist(), np.sort(tpot[decoded]).tolist(),
            np.sort(worst_ms[decoded]).tolist(), sorted(transfer_ms))


def gap_percentiles(run, qs, first_gaps):
    """The percentiles `qs` of every emitted token's gap, in seconds (metrics.pooled_gaps's
    multiset), or a None each when no token had a gap. `first_gaps(records)`: metrics' pure
    rule for the first gap of each decode stretch of the requests given, for those this path
    leaves to it: (values, [{step: count}] per instance), as `metrics.stretch_first_gaps`.
    The ranks and the interpolation are the pure path's (`percentiles.percentiles_at_ranks`)."""
    np, result = run.np, run.result
    records = result.requests
    plain = run.in_one_stretch(~np.isnan(run.first))
    first_ticks = run.first_ticks()
    own = []  # each request's second token's gap, from its first token
    weights = []  # each instance's step gaps' weights: the step's batch, less those second tokens
    odd_values, odd_firsts = first_gaps([records[i] for i in np.flatnonzero(~plain).tolist()])
    decoding = dict(run.by_instance(np.flatnonzero(plain)))
    for g, log in enumerate(result.gpus):
        seqs = np.array(log.decode_seqs, dtype=np.int32)  # (a copy: the log's own column stays as it is)
        if g in decoding:
            sel = decoding[g]
            a = run.a[sel]
            own.append(run.ends[g][a] - first_ticks[sel])
            seqs -= np.bincount(a, minlength=len(seqs)).astype(np.int32)
        for j, c in odd_firsts[g].items():
            seqs[j] -= c
        weights.append(seqs)
    own.append(np.asarray(odd_values, dtype=float))
    firsts = np.concatenate(own)
    values = np.concatenate([firsts] + run.gaps)
    # Counts in 4 bytes, as the logs keep batch sizes (a big run's steps are tens of millions),
    # summed in 8.
    counts = np.concatenate([np.ones(len(firsts), np.int32)] + weights)
    del own, weights, firsts
    int_ticks = any(len(log.end_t) and not isinstance(log.end_t[-1], float) for log in result.gpus)
    return percentiles_at_ranks(int(counts.sum(dtype=np.int64)), qs, lambda ranks: _at_ranks(np, values, counts, ranks),
                                lambda value: to_seconds(int(value) if int_ticks else value))


SORT_BELOW = 4096  # a multiset of fewer distinct values is sorted; a bigger one narrowed first


def _at_ranks(np, values, counts, ranks):
    """{rank: the value at it} for `ranks` (from 0) of the multiset where values[i] appears
    counts[i] times, as Python numbers: a weighted quickselect. A pivot (an element: a
    sample's middle value) splits the values into below, equal and above; the copies below
    and equal say which part holds each rank; only those parts go on. About half the values
    go each round, so a few passes over the data; the last few thousand are sorted (the
    rank's value, as percentiles._by_sort finds it)."""
    if len(values) <= SORT_BELOW:
        order = np.argsort(values)
        at = np.searchsorted(np.cumsum(counts[order], dtype=np.int64), ranks, side="right")
        return dict(zip(ranks, values[order[at]].tolist()))
    sample = values[:: max(1, len(values) // 1024)]
    pivot = np.partition(sample, len(sample) // 2)[len(sample) // 2]
    below, equal = values < pivot, values == pivot
    copies_below = int(counts[below].sum(dtype=np.int64))
    copies_to = copies_below + int(counts[equal].sum(dtype=np.int64))  # (copies below the pivot, and equal to it)
    out = {rank: pivot.item() for rank in ranks if copies_below <= rank < copies_to}
    lower = [rank for rank in ranks if rank < copies_below]
    if lower:
        out.update(_at_ranks(np, values[below], counts[below], lower))
    upper = [rank - copies_to for rank in ranks if rank >= copies_to]
    if upper:
        above = ~(below | equal)
        found = _at_ranks(np, values[above], counts[above], upper)
        out.update((rank + copies_to, value) for rank, value in found.items())
    return out


def kv_seconds(run, logs, on_demand):
    """{units in use: seconds} as metrics._kv_seconds sums them, for the instances `logs`:
    the same additions, in the same order (np.add.at adds in the order given), of the same
    differences. A level gets time only where the sweep moves on (t above the latest time
    so far), before the run's end; then from the last change to the end."""
    np, result = run.np, run.result
    span = result.end_time
    per_log = []  # (levels held, seconds each held), per instance in order
    if on_demand:
        for log in logs:
            if log.kv_used:
                times, levels = (np.array(c, dtype=float) for c in zip(*log.kv_used))
            else:
                times, levels = np.zeros(0), np.zeros(0)
            per_log.append(_held(np, times, levels, span))
    else:
        need = run.column("prompt_tokens", np.int64) + run.column("output_tokens", np.int64)
        finish = run.column("finish")
        if result.scenario.fleet.layout == "disaggregated":
            reserved = np.array([t.reserved for t in result.transfers] + [None], dtype=float)
            start = reserved[run.column("transfer", np.int64)]  # (no transfer: -1 reads the None)
            where = run.gpu
        else:
            start = run.column("prefill_start")
            where = run.column("prefill_gpu", np.int64)
        has_start = ~np.isnan(start)
        for log in logs:
            mine = has_start & (where == log.index)
            ends = mine & ~np.isnan(finish)
            # Starts and finishes in time order; changes at the same time in any order, as in
            # the pure sweep (only the level before them gets time, and the one after all).
            times = np.concatenate((start[mine], finish[ends]))
            deltas = np.concatenate((need[mine], -need[ends]))
            order = np.argsort(times, kind="stable")
            per_log.append(_held(np, times[order], np.cumsum(deltas[order]), span))
    if not per_log:
        return {}
    levels = np.concatenate([lv for lv, _ in per_log])
    seconds = np.concatenate([dt for _, dt in per_log])
    kept = seconds > 0
    levels, seconds = levels[kept], seconds[kept]
    keys, slot = np.unique(levels, return_inverse=True)
    sums = np.zeros(len(keys))
    np.add.at(sums, slot, seconds)
    return dict(zip((int(k) for k in keys.tolist()), sums.tolist()))


def _held(np, times, after, span):
    """(level, seconds) pairs of one instance's sweep: `after[i]` is the level from change i
    on; each change that moves time on gives the level before it the time since the
    latest change (from 0.0), and the level after the last change before `span` holds to
    it. Changes after `span` end the sweep (the first one past it, in the order given)."""
    past = np.flatnonzero(times > span)
    if len(past):
        times, after = times[:past[0]], after[:past[0]]
    before = np.concatenate(([0], after[:-1])) if len(after) else np.zeros(0)
    latest = np.maximum.accumulate(np.concatenate(([0.0], times)))  # t0 before each change, then after the last
    moved = times > latest[:-1]
    dt = np.where(moved, times - latest[:-1], 0.0)
    final_level = after[-1] if len(after) else 0
    tail = span - latest[-1] if span > latest[-1] else 0.0
    return (np.concatenate((before, [final_level])).astype(float),
            np.concatenate((dt, [tail])))
