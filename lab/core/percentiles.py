"""Percentiles as the metrics take them: linear interpolation between the closest ranks,
bit for bit numpy's default `np.percentile(..., method="linear")`, written once here.

- `percentile`: of a list of values.
- `weighted_percentile`: of a multiset (values[i] appearing counts[i] times), by selecting
  the wanted ranks (`_select`) rather than sorting every value: the pooled inter-token
  gaps of a big run are millions of steps.
- `percentiles_at_ranks`: the ranks and the interpolation both share (and the metrics'
  numpy path, fast_metrics.py).
- `time_weighted_percentiles`: of levels held for a time (the KV use).

`_select`'s passes over every value are written for the interpreter running them: under
CPython as calls that loop in C (`map` with `bisect_right`, `compress`), under PyPy as plain
loops, which its JIT compiles (PyPy runs those calls as Python, several times slower than
the loops: benchmarks/README.md, "Under PyPy"). Same values either way (tests/test_scale.py).
"""

import math
import re
import sys
from bisect import bisect_right
from itertools import accumulate, compress, repeat

__all__ = ["percentile", "weighted_percentile", "percentiles_at_ranks", "time_weighted_percentiles"]

PYPY = sys.implementation.name == "pypy"  # (the passes below, and fast_metrics.usable's choice of numpy)


def _lerp(a, b, t):
    # numpy's _lerp: computed from the nearer end so that t=1 gives b exactly.
    diff = b - a
    if t >= 0.5:
        value = b - diff * (1 - t)
    else:
        value = a + diff * t
    return a if a == b else value


def percentile(values, q, presorted=False):
    """numpy.percentile(values, q) with the default linear method; None when empty."""
    if not values:
        return None
    xs = values if presorted else sorted(values)
    n = len(xs)
    pos = (q / 100) * (n - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, n - 1)
    return _lerp(xs[lo], xs[hi], pos - lo)


def weighted_percentile(values, counts, qs, convert=None):
    """Percentiles of the multiset where values[i] appears counts[i] times.

    Equal to numpy.percentile on the expanded data; `qs` is a list of percentiles.
    Returns a list, with None for an empty multiset. `convert` (e.g. ticks -> seconds),
    if given, is applied to the values at the wanted ranks before interpolating: the
    percentiles of the converted data, bit for bit, when it is monotonic (it keeps the
    order), for two conversions per percentile instead of one per value.
    """
    n = sum(counts)
    return percentiles_at_ranks(n, qs, lambda ranks: _select(values, counts, n, ranks), convert)


def percentiles_at_ranks(n, qs, values_at, convert=None):
    """The percentiles `qs` of a multiset of `n` copies (a None each when it is empty), from
    `values_at(ranks)`: {rank: the value at it} for the ranks (ascending, from 0) that
    linear interpolation needs; `convert` as in `weighted_percentile`."""
    if n == 0:
        return [None for _ in qs]
    wanted = []
    for q in qs:
        pos = (q / 100) * (n - 1)
        lo = math.floor(pos)
        wanted.append((pos - lo, lo, min(lo + 1, n - 1)))
    at_rank = values_at(sorted({rank for _, lo, hi in wanted for rank in (lo, hi)}))
    if convert is not None:
        at_rank = {rank: convert(value) for rank, value in at_rank.items()}
    return [_lerp(at_rank[lo], at_rank[hi], frac) for frac, lo, hi in wanted]


def _by_sort(values, counts, ranks):
    """{rank: value} for ranks of the multiset, from one sort (the exact, simple way)."""
    if 0 in counts:  # a value no copy stands for is never at a rank: leave it out of the sort
        values = list(compress(values, counts))
        counts = list(filter(None, counts))
    order = sorted(range(len(values)), key=values.__getitem__)
    # cumulative[k] = how many copies the k smallest values stand for, in total.
    cumulative = list(accumulate(map(counts.__getitem__, order)))
    return {rank: values[order[bisect_right(cumulative, rank)]] for rank in ranks}


# Selection (`_select`): below this many values one sort is as quick. The sample it
# brackets a rank with has a 64th of the values, at least SELECT_SAMPLE and at most
# SELECT_SAMPLE_MAX (a bigger sample, a narrower bracket for the same safety); a bracket
# keeps SELECT_SIGMAS standard deviations of the sample's estimate of the rank either side
# of it (sqrt(p (1 - p) size) sample values for the p-th quantile), at least SELECT_MARGIN.
SELECT_MIN = 32768
SELECT_SAMPLE = 4096
SELECT_SAMPLE_MAX = 65536
SELECT_SIGMAS = 4
SELECT_MARGIN = 32


def _select(values, counts, n, ranks):
    """{rank: value} for the given ranks (ascending) of the multiset (n copies in all),
    exact without sorting it all. A strided sample of the values brackets each rank in an
    interval [a, b] (overlapping ones merged); one pass puts every value in its
    bucket (`bisect_right` over the bounds: a byte a value); the copies in the buckets
    outside the intervals place each interval among the ranks, and only the values inside
    are sorted. When an interval misses its ranks (checked by those counts), its missed
    side widens and the pass is made again, until it reaches the end of the data, so the
    worst case is the one sort `_by_sort` does."""
    if len(values) < SELECT_MIN or len(ranks) > 127:  # (a bucket is a byte: at most 255)
        return _by_sort(values, counts, ranks)
    stride = len(values) // max(SELECT_SAMPLE, min(SELECT_SAMPLE_MAX, len(values) // 64))
    sample, weights = values[::stride], counts[::stride]
    order = sorted(range(len(sample)), key=sample.__getitem__)
    cumulative = list(accumulate(map(weights.__getitem__, order)))
    scale = cumulative[-1] / n

    def value_at(k):  # the k-th smallest sample value; beyond either end, that end's infinity
        return -math.inf if k < 0 else math.inf if k >= len(order) else sample[order[k]]

    brackets = []  # [ka, kb, ranks]: values from the ka-th to the kb-th smallest in the sample
    for rank in ranks:
        k = bisect_right(cumulative, rank * scale)
        p = rank / n
        margin = max(SELECT_MARGIN, math.ceil(SELECT_SIGMAS * math.sqrt(p * (1 - p) * len(order))))
        brackets.append([k - margin, k + margin, [rank]])
    while True:
        merged = []  # disjoint [ka, kb, ranks], in order
        for ka, kb, inside in sorted(brackets):
            if merged and value_at(ka) <= value_at(merged[-1][1]):
                last = merged[-1]
                last[1] = max(last[1], kb)
                last[2] = sorted(last[2] + inside)
            else:
                merged.append([ka, kb, list(inside)])
        # bucket 2i + 1 is interval i (a <= value < just above b); even buckets lie outside them
        bounds = [bound for ka, kb, _ in merged for bound in (value_at(ka), _just_above(value_at(kb)))]
        buckets = _buckets(bounds, values)
        # Each bucket's share of the values, as the sample sees it: a small one is read at
        # its positions, a big one in a pass (which is quicker is all that depends on it).
        ends = [-1] + [k for ka, kb, _ in merged for k in (ka, kb)] + [len(order)]
        shares = [(min(hi, len(order)) - max(lo, -1)) / len(order) for lo, hi in zip(ends, ends[1:])]
        inner = [_in_bucket(values, counts, buckets, 2 * i + 1, shares[2 * i + 1]) for i in range(len(merged))]
        copies_in = [sum(in_counts) for _, in_counts in inner]
        outside = _outside_copies(counts, buckets, shares[::2], n - sum(copies_in))
        below, found, before, brackets = 0, {}, brackets, []
        for i, (ka, kb, inside) in enumerate(merged):
            below += outside[i]
            in_values, in_counts = inner[i]
            copies = copies_in[i]
            if below <= inside[0] and inside[-1] < below + copies:
                at = _by_sort(in_values, in_counts, [rank - below for rank in inside])
                found.update((rank, at[rank - below]) for rank in inside)
            # A miss widens its side by four times the interval's width, in the sample's
            # order (past the sample's end: to the end of the data), so a few more passes
            # at most, never a sort of nearly everything for a near miss.
            widen = 4 * (kb - ka)
            brackets.append([max(ka - widen, -1) if below > inside[0] else ka,
                             min(kb + widen, len(order)) if inside[-1] >= below + copies else kb, inside])
            below += copies
        if len(found) == len(ranks):
            return found
        if brackets == sorted(before):  # (nothing widened: cannot happen; never loop)
            return _by_sort(values, counts, ranks)


# A bucket holding less than this share of the values is read at its positions (a regex
# scan of the bucket bytes in C, then an index per value in it), not in a pass over every
# value: a pass makes an object per value of a compacted run's array, and either way reads
# every value (3.65 M values, 72 k of them in the bucket: 11 ms against 110 ms).
SPARSE_SHARE = 1 / 16


def _buckets(bounds, values):
    """Each value's bucket, a byte each: how many of the ascending `bounds` are <= it."""
    if not PYPY:
        return bytes(map(bisect_right, repeat(bounds), values))
    out = bytearray(len(values))
    last = len(bounds)
    for i in range(len(values)):
        value, k = values[i], 0
        while k < last and bounds[k] <= value:
            k += 1
        out[i] = k
    return out  # (a bytearray: what the callers do with bytes, it does too, without a copy)


def _bucket(buckets, k, share):
    """How to pick bucket `k`'s entries out of a column, in order (column -> iterable): at
    their positions when the bucket holds under SPARSE_SHARE of the values, else in a pass
    (`share`: the sample's estimate; only the speed depends on it)."""
    if share < SPARSE_SHARE:
        at = [m.start() for m in re.finditer(re.escape(bytes((k,))), buckets)]
        return lambda column: map(column.__getitem__, at)
    if PYPY:
        return lambda column: [column[i] for i in range(len(buckets)) if buckets[i] == k]
    mask = buckets.translate(_only(k))
    return lambda column: compress(column, mask)


def _in_bucket(values, counts, buckets, k, share):
    """(values, counts) of the entries in bucket `k`, in their order, as lists."""
    pick = _bucket(buckets, k, share)
    return list(pick(values)), list(pick(counts))


def _outside_copies(counts, buckets, shares, total):
    """The copies in each even bucket 0, 2, ... (around the intervals), `total` in all: each
    but the biggest summed as `_bucket` picks it, and the biggest as `total` less the others
    (one pass fewer: it is about half of the data)."""
    biggest = max(range(len(shares)), key=shares.__getitem__)
    out = [0 if i == biggest else _copies_in(counts, buckets, 2 * i, share) for i, share in enumerate(shares)]
    out[biggest] = total - sum(out)
    return out


def _copies_in(counts, buckets, k, share):
    """The copies in bucket `k` (under PyPy, a pass adds them up without a list of them)."""
    if PYPY and share >= SPARSE_SHARE:
        total = 0
        for i in range(len(buckets)):
            if buckets[i] == k:
                total += counts[i]
        return total
    return sum(_bucket(buckets, k, share)(counts))


def _just_above(bound):
    """The least value above `bound` of its kind (ticks are whole floats or ints)."""
    return bound + 1 if isinstance(bound, int) else math.nextafter(bound, math.inf)


def _only(bucket):
    """A `bytes.translate` table that turns the byte `bucket` into 1 and every other into 0."""
    return bytes(bucket) + b"\x01" + bytes(255 - bucket)


def time_weighted_percentiles(seconds_at, qs):
    """For each q, the lowest value v such that the time at values <= v is at least q% of
    the total (`seconds_at`: {value: seconds}); None for each when there is no time."""
    total = math.fsum(seconds_at.values())
    if total <= 0:
        return [None for _ in qs]
    values = sorted(v for v, w in seconds_at.items() if w > 0)
    out = []
    for q in qs:
        want = total * q / 100.0
        run = 0.0
        found = values[-1]
        for v in values:
            run += seconds_at[v]
            if run >= want:
                found = v
                break
        out.append(found)
    return out
