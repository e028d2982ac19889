"""The plots' data: numpy from a run and its rows, no Bokeh, no Panel (lab/ui/views/plots.py draws it).

`itl_histogram` is a whole-run view (lab/ui/data/run_views.py): kept with the run, and under
`lab serve` computed in the worker process that simulated it.
"""

import numpy as np

from lab.core.metrics import first_token_ticks, pooled_gaps, step_gaps_of
from lab.core.ticks import TICKS_PER_S

from .run_views import per_run

__all__ = ["token_gaps", "itl_histogram", "gap_scatter_data", "JITTER"]

JITTER = 0.04  # repeated prompt lengths spread by up to this share sideways, so each request shows


def token_gaps(result):
    """(gaps in ms, tokens that waited each): every inter-token gap of the run, exactly.

    A token emitted at the end of step j (j > 0) of a GPU waited end[j] - end[j-1],
    except a request's second token, which waited from its first token.
    """
    values, weights = [], []
    reqs = result.requests
    if not reqs:
        return np.zeros(0), np.zeros(0)
    if any(r.earlier for r in reqs):
        # Preempted requests decode in several stretches (KV on demand): the core's pooling
        # knows where each stretch starts.
        pooled, counts = pooled_gaps(result, [step_gaps_of(g) for g in result.gpus])
        v, c = np.asarray(pooled, dtype=float), np.asarray(counts, dtype=float)
        return v[c > 0] / TICKS_PER_S * 1000.0, c[c > 0]
    dgpu = np.fromiter((r.decode_gpu for r in reqs), np.int64, len(reqs))
    first = np.fromiter((r.decode_first_step for r in reqs), np.int64, len(reqs))
    # In ticks, as the metrics take gaps (metrics.request_gap_ticks), in ms once at the end.
    ftok = np.fromiter((first_token_ticks(r) if r.first_token is not None else np.nan for r in reqs), float, len(reqs))
    for g, log in enumerate(result.gpus):
        n = len(log)
        if n == 0:
            continue
        end = np.asarray(log.end_t, dtype=float)
        seqs = np.asarray(log.decode_seqs, dtype=np.int64)
        mine = (dgpu == log.index) & (first >= 0) & (first < n) & ~np.isnan(ftok)
        firsts = np.bincount(first[mine], minlength=n)[:n]
        count = seqs - firsts
        count[0] = 0
        gaps = np.empty(n)
        gaps[0] = 0.0
        gaps[1:] = np.diff(end)
        keep = count > 0
        values.append(gaps[keep])
        weights.append(count[keep])
        values.append(end[first[mine]] - ftok[mine])
        weights.append(np.ones(int(mine.sum()), dtype=np.int64))
    if not values:
        return np.zeros(0), np.zeros(0)
    return np.concatenate(values) / TICKS_PER_S * 1000.0, np.concatenate(weights).astype(float)


@per_run
def itl_histogram(result, target_ms=None, bins=36):
    """{left, right, share, over} on log bins from the run's token gaps."""
    gaps, weights = token_gaps(result)
    ok = gaps > 0
    gaps, weights = gaps[ok], weights[ok]
    if len(gaps) == 0:
        return {"left": [], "right": [], "share": [], "over": []}
    lo = max(gaps.min() * 0.9, 0.1)
    hi = max(gaps.max() * 1.1, lo * 2)
    edges = np.geomspace(lo, hi, bins + 1)
    if target_ms and lo < target_ms < hi:  # put an edge on the target so bars don't straddle it
        i = int(np.argmin(np.abs(edges - target_ms)))
        edges[i] = target_ms
        edges = np.unique(edges)
    counts, edges = np.histogram(gaps, bins=edges, weights=weights)
    share = counts / max(weights.sum(), 1.0)
    mid = np.sqrt(edges[:-1] * edges[1:])
    over = (mid > target_ms) if target_ms else np.zeros(len(mid), bool)
    return {"left": edges[:-1], "right": edges[1:], "share": share, "over": over}


def gap_scatter_data(rows, seed=0):
    """Worst gap against prompt length per request; x is jittered when prompts repeat.
    "rejected": the requests early rejection turned away (x, prompt, id, pred: the predicted
    TTFT in s), whose y the plot sets along its floor."""
    xs = np.array([r["prompt_tokens"] for r in rows if r["worst_gap_ms"] is not None], dtype=float)
    ys = np.array([r["worst_gap_ms"] for r in rows if r["worst_gap_ms"] is not None], dtype=float)
    met = np.array([r["met_slo"] for r in rows if r["worst_gap_ms"] is not None], dtype=bool)
    ids = np.array([r["id"] for r in rows if r["worst_gap_ms"] is not None], dtype=np.int64)
    shown = xs.copy()
    if len(xs) and len(np.unique(xs)) <= max(3, len(xs) // 20):
        rng = np.random.default_rng(seed)
        shown = xs * (1 + rng.uniform(-JITTER, JITTER, len(xs)))
    ys = np.maximum(ys, 0.1)  # log axis
    turned = [r for r in rows if r.get("rejected")]
    rx = np.array([r["prompt_tokens"] for r in turned], dtype=float)
    rshown = rx.copy()
    if len(rx) and len(np.unique(rx)) <= max(3, len(rx) // 20):
        rshown = rx * (1 + np.random.default_rng(seed + 1).uniform(-JITTER, JITTER, len(rx)))
    return {
        "met": {"x": shown[met], "y": ys[met], "prompt": xs[met], "id": ids[met]},
        "miss": {"x": shown[~met], "y": ys[~met], "prompt": xs[~met], "id": ids[~met]},
        "rejected": {"x": rshown, "prompt": rx, "id": np.array([r["id"] for r in turned], dtype=np.int64),
                     "pred": np.array([r["predicted_ttft_s"] for r in turned], dtype=float)},
    }
