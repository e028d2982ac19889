"""The metrics' numpy path: three of `summarize`'s passes, the same values bit for bit.

lab/core runs on the standard library alone (bare Pyodide, PyPy without numpy), and
metrics.py's loops are the reference. Where numpy imports and a run is big
(`FROM_REQUESTS` requests or more: below that, making arrays costs more than it saves),
`summarize` hands these passes to it:

- each request's worst gap: the largest of its decode stretch's step gaps, one
  `maximum.reduceat` per GPU instead of a range maximum per request (`worst_gap_ticks`);
- the pooled inter-token gaps' percentiles: one `argsort` of the gaps and a
  cumulative sum of their copies, instead of the selection in pure Python
  (`weighted_percentile`);
- the KV in use over time: each instance's changes sorted, summed into levels and their
  seconds added per level in the pure sweep's order (`kv_seconds`), so each level's float
  sum is the same.

Exactness: a run whose ticks are Python integers (past 2**52 of simulated time, ticks.py)
stays on the pure path, since a float64 cannot hold every such integer. Every operation
here is one IEEE operation on the same operands as the pure path's (a subtraction, a
comparison, a division by the same constant) or no arithmetic at all (sorting,
selecting), so the values are equal, not close; `tests/test_metrics_numpy.py` compares
both paths on every mission, the property scenarios and the traces.
"""

from array import array

try:  # numpy is optional: the pure path is complete without it
    import numpy as np
except ImportError:  # pragma: no cover (bare Pyodide, PyPy without numpy)
    np = None

__all__ = ["FROM_REQUESTS", "usable", "worst_gap_ticks", "weighted_percentile", "kv_seconds"]

FROM_REQUESTS = 5_000
FORCED = None  # tests: True or False to take or skip the numpy path whatever the size


def usable(result):
    """Whether `summarize` takes the numpy path for this run (see the module docstring)."""
    if np is None or FORCED is False:
        return False
    if FORCED is None and len(result.requests) < FROM_REQUESTS:
        return False
    for log in result.gpus:  # float ticks: whole numbers below 2**52, exact in a float64
        end = log.end_t
        if len(end) and not isinstance(end[0], float):
            return False
    return True


def _floats(column):
    """A float column (a list, or a compacted run's array) as a float64 array; through
    array('d') for a list, which reads a list of floats about twice as fast as asarray."""
    if getattr(column, "typecode", None) != "d":
        column = array("d", column)
    return np.frombuffer(column, dtype=np.float64)


def worst_gap_ticks(result, step_gaps, first_ticks):
    """{request index: its worst gap in ticks} for the requests the pure loop reads with a
    range maximum (finished, more than one token, one decode stretch): the larger of its
    first gap and its stretch's step gaps, as `RangeMax.max(first + 1, last, first_gap)`.
    `first_ticks(rec)`: its first token in ticks."""
    by_gpu = {}
    for i, rec in enumerate(result.requests):
        if rec.finish is not None and rec.output_tokens > 1 and not rec.earlier:
            by_gpu.setdefault(rec.decode_gpu, []).append(i)
    worst = {}
    requests = result.requests
    for g, index in by_gpu.items():
        end = result.gpus[g].end_t
        first_step = np.fromiter((requests[i].decode_first_step for i in index), dtype=np.int64, count=len(index))
        last_step = np.fromiter((requests[i].decode_last_step for i in index), dtype=np.int64, count=len(index))
        first_t = np.fromiter((first_ticks(requests[i]) for i in index), dtype=np.float64, count=len(index))
        first_gap = _floats(end)[first_step] - first_t
        gaps = _floats(step_gaps[g])
        lo = first_step + 1
        hi = np.minimum(last_step, len(gaps) - 1)
        some = lo <= hi
        best = first_gap.copy()
        if some.any():
            # reduceat over [lo, hi + 1): a zero after the last gap keeps hi + 1 in range
            bounds = np.empty(2 * int(some.sum()), dtype=np.int64)
            bounds[0::2], bounds[1::2] = lo[some], hi[some] + 1
            rest = np.maximum.reduceat(np.append(gaps, 0.0), bounds)[0::2]
            best[some] = np.where(first_gap[some] > rest, first_gap[some], rest)
        worst.update(zip(index, best.tolist()))
    return worst


def weighted_percentile(values, counts, qs, convert=None):
    """metrics.weighted_percentile on the numpy path: the values at the wanted ranks of the
    multiset (values[i] `counts[i]` times), from one sort, as `_by_sort` finds them."""
    from .metrics import _lerp  # (the one interpolation rule)

    v, c = _floats(values), np.asarray(counts, dtype=np.int64)
    n = int(c.sum())
    if n == 0:
        return [None for _ in qs]
    keep = c > 0
    v, c = v[keep], c[keep]
    order = np.argsort(v)  # (which of equal values comes first changes no value at a rank)
    cumulative = np.cumsum(c[order])
    wanted, ranks = [], set()
    for q in qs:
        pos = (q / 100) * (n - 1)
        lo = int(pos // 1)
        wanted.append((pos - lo, lo, min(lo + 1, n - 1)))
        ranks.update((lo, min(lo + 1, n - 1)))
    ranks = sorted(ranks)
    at = v[order[np.searchsorted(cumulative, ranks, side="right")]].tolist()
    at_rank = dict(zip(ranks, at))
    if convert is not None:
        at_rank = {rank: convert(value) for rank, value in at_rank.items()}
    return [_lerp(at_rank[lo], at_rank[hi], frac) for frac, lo, hi in wanted]


def kv_seconds(columns, span, levels):
    """{level: seconds} over [0, span], as metrics.kv_use's sweep adds them: `columns` one
    (times, values) pair per instance, in the sweep's order; `values` are levels, times
    ascending (`levels`), or changes to sum, in any order (sorted here by time). Each level's seconds are added one interval at a
    time in the sweep's order (a weighted bincount adds in index order), so the sums are
    the pure sweep's."""
    all_levels, all_seconds = [], []
    for times, values in columns:
        t = np.asarray(times, dtype=np.float64)
        x = np.asarray(values, dtype=np.int64)
        if not levels:  # (changes at one time: the level between them lasts no time, as in the sweep)
            order = np.argsort(t)
            t, x = t[order], x[order]
        inside = int(np.searchsorted(t, span, side="right"))  # the sweep stops at the first past span
        t, x = t[:inside], x[:inside]
        level = x if levels else np.cumsum(x)
        # The interval before each change (from the last change, or from 0 at level 0),
        # then the one after the last change to the end of the run.
        starts = np.concatenate(([0.0], t))
        ends = np.concatenate((t, [span]))
        at = np.concatenate(([0], level))
        if ends[-1] <= starts[-1]:
            starts, ends, at = starts[:-1], ends[:-1], at[:-1]
        seconds = ends - starts
        held = seconds > 0
        all_levels.append(at[held])
        all_seconds.append(seconds[held])
    if not all_levels:
        return {}
    at, seconds = np.concatenate(all_levels), np.concatenate(all_seconds)
    if not len(at):
        return {}
    distinct, which = np.unique(at, return_inverse=True)
    sums = np.bincount(which, weights=seconds, minlength=len(distinct))
    return dict(zip(distinct.tolist(), sums.tolist()))
