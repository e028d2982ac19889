"""The canvas's data: numpy columns built from a run's step logs, no Bokeh, no Panel.

What the timeline draws, as column dicts (lab/ui/timeline/canvas.py puts them in its sources):
`run_layers` (once per run: queues, KV bands, the link, marks, role bands, and the rows'
`meta`), `step_layers` (the GPU steps of a span, around the window), `overview_data` (the
whole run's bars and slow steps), and the rows' geometry and labels. Pure functions of a
run and a few numbers, so they are tested without a browser, and under `lab serve` the
whole-run ones run in the worker process that simulated the run (lab/ui/data/run_views.py):
the server's loop, which serves every student, only looks them up.
"""

import bisect
import dataclasses
import html
import math

import numpy as np

from lab.core.cost import instance_costs
from lab.core.prefix_cache import kv_taken_by_instance
from lab.core.report import slow_limit_t
from lab.core.result import instance_label
from lab.core.ticks import TICKS_PER_S, to_seconds

from .run_views import per_run
from ..words.fleet_words import gpu_type_text
from .queues import kv_usage, link_queue, prefill_queue, rejections

EMBED_ROW_PX = 18  # in an embed: the 700 x 760 iframe shows the metrics under the canvas without scrolling
ROW_PX = 22  # height of one row in pixels when the mission shows as many rows as it can
ROWS_MIN = 6  # the frame is never sized for fewer rows than this
FRAME_MAX_PX = 300  # nor taller than this (the sandbox reaches 27 rows: they get thinner)
EMBED_FRAME_MAX_PX = 270  # in an embed: the 700 x 760 iframe still shows the headline metrics
BAR_MAX_PX = 30  # a step's box is never taller than this, however few rows there are
AXIS_PX = 50  # the figure's height beyond its frame (time axis and its label)
FRAME_TOP_PX = 6  # the plot area starts this far down the figure (no title, no toolbar)
FRAME_LEFT_PX = 4  # ... and this far right of the row labels' gutter
QUEUE_LAYERS = ("queue", "link_q", "room_q", "kv_track", "kv")  # quads: left, right, top, bottom, n
# fleet.planner: a GPU row's role over time, a tinted band behind its steps per role span
# (prefill, decode, and hatched grey while it reloads); only GPUs whose role changed.
ROLE_LAYERS = ("role_prefill", "role_decode", "role_switching")
LAYERS = ("decode", "bounds", "slow", "prefill", "strip", "wire", "wait", "rejected", "preempt") + QUEUE_LAYERS + ROLE_LAYERS
WHOLE_RUN_LAYERS = ("kv_track",) + ROLE_LAYERS  # not sliced around the window (see Canvas._slice)
HALF = 0.40  # half a row's box height, in row units (when rows are small enough)
STRIP = 0.42  # share of a step's box the prefill strip of a mixed step covers
WAIT = 0.175  # the height of a "KV waiting" bar, as a share of a link box
KV_BAND = 0.30  # share of a GPU row's box height its KV band takes, at the top
KV_GAP = 0.06  # ... and the gap between the band and the step boxes below it
PREFILL_QUEUE = "prefill queue"  # the queue rows' labels
LINK_QUEUE = "link queue"
LABEL_PX_PER_CHAR = 6.8  # a generous width of one character of a 12 px row label
TWO_LINE_PX = 26  # rows at least this far apart write a GPU type on a line of its own (rows_html)
OVERVIEW_BINS = 240  # the overview's bars across the whole run (at most; half a second each when shorter)

_STEP_COLS = ("left", "right", "y", "batch", "prompt")  # the tooltip derives the GPU, start and duration
_RUN_COLS = ("left", "right", "y", "batch", "batch_hi", "prompt", "steps")  # a run of decode steps (decode_runs)
_BOUND_COLS = ("left", "y")  # the step boundaries inside runs (_bound_ticks): a polyline, left is x
_STRIP_COLS = ("left", "right", "y")
_XFER_COLS = ("left", "right", "y", "req", "src", "dst", "mb", "wait_ms", "wire_ms", "ready_ms", "edge")
_QUAD_COLS = ("left", "right", "top", "bottom", "n")
_KV_COLS = _QUAD_COLS + ("hit",)  # hit: the band's top, so a hover anywhere on the band finds its level
_REJECT_COLS = ("left", "right", "y", "req", "pred")  # a rejected request: its arrival (left = right), predicted TTFT
REJECT_Y = 0.55  # a rejection's cross sits this share of half a row above the prefill queue row's centre
_PREEMPT_COLS = ("left", "right", "y", "req")  # a mark at one time (left = right), for the slicing
F32 = np.float32  # what the browser gets: half the bytes of float64, µs precision over a run



def _empty(cols):
    return {c: np.zeros(0, dtype=F32) for c in cols}


def _rows(result):
    """(row of each GPU, link row or None, link-queue row or None, labels by row).

    Top to bottom as a request travels: the prefill queue (row 0), the prefill (or
    colocated) GPUs, then on a split fleet the link queue, the link and the decode GPUs.
    """
    labels = {0: PREFILL_QUEUE}
    rows = []
    link_row = link_queue_row = None
    prefill = sum(1 for g in result.gpus if g.role == "prefill")
    split = any(g.role == "decode" for g in result.gpus)
    typed = len({g.gpu_type for g in result.gpus}) > 1
    for log in result.gpus:
        row = 1 + log.index + (2 if (split and log.role == "decode") else 0)
        rows.append(row)
        labels[row] = row_label(log.label, roles_text(log.roles), (log.gpu_type, log.tp) if typed else None)
    if split:
        link_queue_row, link_row = 1 + prefill, 2 + prefill
        labels[link_queue_row] = LINK_QUEUE
        labels[link_row] = "link (KV)"
    return rows, link_row, link_queue_row, labels


def roles_text(roles):
    """A row's role words from `GpuLog.roles`: "decode", or for a GPU that changed role
    (fleet.planner) the role it ended in after an arrow, "→prefill" ("⇄prefill" when it went
    back and forth): the row's place (it keeps its start's) and its tint say where it began,
    and the label stays about as short as a fixed GPU's, so a phone keeps its timeline."""
    served = [r for _, r in roles if r != "switching"]
    if len(served) == 1:
        return served[0]
    return f"→{served[-1]}" if len(served) == 2 else f"⇄{served[-1]}"


def row_label(label, role, kind=None):
    """A GPU row's label: the instance's GpuLog.label and role ("GPUs 0–1 · prefill"), and
    with `kind` = (GPU type, tp), given when the fleet mixes GPU types, what it is built of
    ("GPUs 0–1 · prefill · H100 ×2"). The hover takes the part before the first " · "."""
    text = f"{label} · {role}"
    return f"{text} · {gpu_type_text(*kind)}" if kind else text


def split_label(text):
    """A row label as (what the gutter's first line says, the GPU type or None)."""
    parts = text.split(" · ")
    if len(parts) == 3:
        return " · ".join(parts[:2]), parts[2]
    return text, None


def _pool_label(first, tp):
    return instance_label(tuple(range(first, first + tp)))


def max_rows(mission):
    """(most canvas rows the mission's controls can reach, longest row label).

    The canvas is sized for this once, so moving a GPU-count or tp control never changes
    the figure's height: in the browser that would re-lay out the whole page (every plot
    re-measured and repainted), which is most of the cost of a change. A row is an
    instance, so the most rows come with the most GPUs at the smallest tp.
    """
    scenario = mission.scenario
    controls = mission.controls
    fleet = scenario.fleet

    def most(name, default):
        control = controls.get(name)
        if control is not None and control.max is not None:
            return int(control.max)
        return int(default or 0)

    def choices(name, default):
        control = controls.get(name)
        return tuple(control.choices) if control is not None else (default,)

    llms = choices("llm", scenario.model.llm)

    def sizes(name, default, gpus):
        """The tp values of a pool whose weights fit some GPU type it can have (70B never runs at TP 1)."""
        tps = choices(name, default)
        model = scenario.model
        fit = [tp for tp in tps if model.kv_capacity_tokens is not None or any(
            dataclasses.replace(model, llm=llm).derived_kv_capacity_tokens(gpu, tp) >= 1 for llm in llms for gpu in gpus)]
        return tuple(fit) or tps

    def longest(last, tps, role, typed):
        """The longest label of an instance of `role` whose GPUs end by GPU `last`."""
        texts = [row_label(_pool_label(max(last - tp + 1, 0), tp), role, ("h100", tp) if typed else None)
                 for tp in tps]
        return max(texts, key=len)

    layouts = list(controls["layout"].choices) if "layout" in controls else [fleet.layout]
    rows, labels = 1, ["link (KV)", PREFILL_QUEUE, LINK_QUEUE]
    if "colocated" in layouts:
        n = most("gpus", fleet.total_gpus)
        tps = sizes("tp", fleet.tp, choices("gpu", scenario.model.gpu))
        rows = max(rows, n // min(tps) + 1)  # and the prefill queue
        labels.append(longest(max(n - 1, 0), tps, "colocated", False))
    if "disaggregated" in layouts:
        p = most("prefill_gpus", fleet.prefill_gpus or 1)
        d = most("decode_gpus", fleet.decode_gpus or 1)
        ptps = sizes("prefill_tp", fleet.prefill_tp, choices("prefill_gpu", fleet.prefill_gpu or scenario.model.gpu))
        dtps = sizes("decode_tp", fleet.decode_tp, choices("decode_gpu", fleet.decode_gpu or scenario.model.gpu))
        rows = max(rows, p // min(ptps) + d // min(dtps) + 3)  # and the prefill queue, the link queue and the link
        typed = _types_can_differ(mission)
        labels += [longest(max(p - 1, 0), ptps, "prefill", typed), longest(max(p + d - 1, 0), dtps, "decode", typed)]
        if "planner" in controls or fleet.planner_on:  # a GPU that changed role says so
            labels.append(longest(max(p + d - 1, 0), dtps, "→prefill", typed))
    return rows, max(labels, key=len)


def _types_can_differ(mission):
    """Whether the split fleet's pools can have different GPU types (rows then name theirs)."""
    controls = mission.controls
    fleet, model = mission.scenario.fleet, mission.scenario.model
    if "prefill_gpu" in controls or "decode_gpu" in controls:
        return True
    if "gpu" in controls and (fleet.prefill_gpu is None) != (fleet.decode_gpu is None):
        return True
    return (fleet.prefill_gpu or model.gpu) != (fleet.decode_gpu or model.gpu)


def frame_px(rows, row_px=ROW_PX, max_px=FRAME_MAX_PX):
    """The timeline's plot area height (px) for a mission that can show `rows` rows."""
    return int(min(max(rows, ROWS_MIN) * row_px, max_px))


def row_geometry(rows, frame):
    """(half a box's height in row units, label font size) for `rows` rows in `frame` px."""
    pitch = frame / max(rows, 1)
    half = min(HALF, BAR_MAX_PX / 2.0 / pitch)
    font = "12px" if pitch >= 18 else ("10.5px" if pitch >= 13 else "9px")
    return half, font


def box_geometry(half):
    """Where things sit in a row (row units, offsets from its centre; y grows downwards).

    A row's box spans [-half, +half]. On a GPU row the KV band takes its top
    (`band_top`..`band_bottom`) and the step boxes the rest below a small gap
    (`step_height`, centred at `step_offset`); the link row's boxes and the queue rows'
    areas take the whole box.
    """
    band = 2 * half * KV_BAND
    gap = 2 * half * KV_GAP
    return {"band_top": -half, "band_bottom": -half + band, "step_height": 2 * half - band - gap,
            "step_offset": (band + gap) / 2}


def rows_html(labels, frame, font="12px"):
    """The row labels for the gutter beside the figure: each centred on its row of the
    plot area, which starts FRAME_TOP_PX down the figure and is `frame` px tall.

    A row that names its GPU type ("GPUs 0–1 · prefill · H100 ×2") writes the type on a
    second, smaller line when rows are at least TWO_LINE_PX apart, and leaves it out when
    they are thinner (the hover and the Table view still say it): the gutter is only as
    wide as "GPUs 0–1 · prefill", so the timeline keeps its width on a phone."""
    pitch = frame / max(len(labels), 1)
    items = []
    for i, text in enumerate(labels):
        head, kind = split_label(text)
        shown = html.escape(head)
        if kind and pitch >= TWO_LINE_PX:
            shown += f'<span class="ty">{html.escape(kind)}</span>'
        items.append(f'<div style="top:{FRAME_TOP_PX + (i + 0.5) * pitch:.1f}px">{shown}</div>')
    return f'<div class="stf-rows" style="font-size:{font}" data-rows="{len(labels)}">{"".join(items)}</div>'


def _decode_only_s(cost, batch, ctx):
    """Per step: how long it would take on its instance (`cost`, a PoolCost) without its
    prompt tokens (the decode part)."""
    model = cost.model
    if model.cost == "linear" and cost.tp == 1:  # the constants as they are: vectorised
        ms = model.decode_step_ms + model.decode_ms_per_seq * batch + model.decode_ms_per_context_token * ctx
        return ms / 1000.0
    step_s = cost.step_s
    return np.fromiter((step_s(int(b), int(c), 0) for b, c in zip(batch, ctx)), dtype=float, count=len(batch))


def timeline_data(result, target_ms, frame=None):
    """Column dicts for the canvas over the whole run: decode, slow, prefill, strip, wire,
    wait, the queue rows' and KV bands' quads (QUEUE_LAYERS), overview.

    `target_ms`: the per-token target a decode step is "slow" against (pass
    `slo.per_token_target_ms`; None: no step is). `frame`: the plot area's height in px,
    which sets the rows' geometry (row_geometry; default frame_px of the row count).
    Pure numpy over the step logs (no Bokeh), so it is tested without a browser. The live
    canvas builds the same parts apart: `run_layers` once per run, `step_layers` for the
    steps around the window only, `overview_data` after the canvas is painted.
    """
    out = dict(run_layers.uncached(result, frame))  # (built afresh: a benchmark times this)
    out.update(step_layers(result, target_ms, out["meta"]))
    out["overview"], _slow_starts = overview_data.uncached(result, target_ms)
    return out


@per_run
def run_layers(result, frame=None):
    """The layers that are not GPU steps (wire, wait, rejected, preempt, the queue rows, KV
    bands and role bands) over the whole run, and `meta` (rows, labels, geometry, peaks)."""
    rows, link_row, link_queue_row, labels = _rows(result)
    half = row_geometry(len(labels), frame or frame_px(len(labels)))[0]
    costs = instance_costs(result.scenario)
    out = {"preempt": _preempt_marks(result, rows)}
    out.update(_link_layers(result, link_row))
    times, ids, predicted = rejections(result)
    out["rejected"] = {"left": _narrow(times), "right": _narrow(times), "y": np.full(len(times), -half * REJECT_Y, dtype=F32),
                       "req": ids.astype(np.int32), "pred": _narrow(predicted)}
    peaks = _queue_layers(result, out, rows, link_queue_row, half, costs)
    _role_layers(result, out, rows, half)
    span = max(result.end_time, 1e-9)
    bins = max(1, min(OVERVIEW_BINS, int(math.ceil(span / 0.5))))
    out["meta"] = {"rows": len(labels), "labels": labels, "link_row": link_row, "link_queue_row": link_queue_row,
                   "bin": span / bins, "half": half, "peaks": peaks, "gpu_rows": rows}
    return out


def step_range(log, lo, hi):
    """The steps of `log` to draw for the span [lo, hi] s, as indices [i0, i1): every step
    that overlaps it, widened to the whole seconds of simulated time its first and last
    start in (decode_runs breaks a run at each whole second, so the runs built from these
    steps are exactly the whole run's runs there). Bisection: the log is in time order."""
    # On the log's ticks, each read as the seconds step_layers makes of it (t / 10**12), so
    # the seconds columns are never made.
    starts, ends = log.start_t, log.end_t
    first = bisect.bisect_left(ends, lo, key=_seconds)  # the first step that ends at or after lo
    last = bisect.bisect_right(starts, hi, key=_seconds)  # past the last one that starts by hi
    if first >= last:
        return 0, 0
    i0 = bisect.bisect_left(starts, math.floor(_seconds(starts[first])), key=_seconds)
    i1 = bisect.bisect_left(starts, math.floor(_seconds(starts[last - 1])) + 1, key=_seconds)
    return i0, i1


def _seconds(ticks):
    return ticks / TICKS_PER_S


def step_layers(result, target_ms, meta, span=None):
    """The GPU steps' layers (decode runs and their bounds, slow, prefill, strip) of the steps
    in `span` (lo, hi) seconds (step_range), or of the whole run (None). `meta`: run_layers'."""
    rows = meta["gpu_rows"]
    costs = instance_costs(result.scenario)
    limit = slow_limit_t(target_ms)
    parts = {"decode": [], "slow": [], "prefill": [], "strip": [], "bounds": []}
    for log, row in zip(result.gpus, rows):
        i0, i1 = (0, len(log)) if span is None else step_range(log, *span)
        if i0 >= i1:
            continue
        # The log's ticks, in seconds here (the same doubles as its `start`/`end`, without
        # making those: docs/model.md "Time base"); slow is judged on the ticks, as report's table does.
        start_t, end_t = np.asarray(log.start_t[i0:i1]), np.asarray(log.end_t[i0:i1])
        start, end = start_t / TICKS_PER_S, end_t / TICKS_PER_S
        batch = np.asarray(log.decode_seqs[i0:i1], dtype=np.int32)
        prompt = np.asarray(log.prefill_tokens[i0:i1], dtype=np.int32)
        decodes = batch > 0
        slow = decodes & (end_t - start_t > limit)
        groups = {"slow": slow, "prefill": ~decodes}
        for name, mask in groups.items():
            k = int(mask.sum())
            if not k:
                continue
            parts[name].append({
                "left": start[mask], "right": end[mask], "y": np.full(k, row, dtype=F32),
                "batch": batch[mask], "prompt": prompt[mask],
            })
        runs, bounds = decode_runs(start, end, batch, prompt, decodes & ~slow, second=np.floor(start))
        if runs is not None:
            runs["y"] = np.full(len(runs["left"]), row, dtype=F32)
            parts["decode"].append(runs)
            parts["bounds"].append({"at": bounds, "y": np.full(len(bounds), row, dtype=F32)})
        mixed = decodes & (prompt > 0)
        if mixed.any():
            idx = np.nonzero(mixed)[0]
            ctx = np.asarray(log.context_tokens[i0:i1], dtype=float)[idx]
            decode_only = _decode_only_s(costs[log.index], batch[idx].astype(float), ctx)
            width = end[idx] - start[idx]
            share = np.clip((width - decode_only) / np.where(width > 0, width, 1.0), 0.0, 1.0)
            parts["strip"].append({
                "left": start[idx], "right": start[idx] + width * share,
                "y": np.full(len(idx), row, dtype=F32),  # drawn at the box's bottom (a Dodge)
            })
    out = {}
    bounds = parts.pop("bounds")
    for name, chunks in parts.items():
        cols = {"strip": _STRIP_COLS, "decode": _RUN_COLS}.get(name, _STEP_COLS)
        if chunks:
            out[name] = {c: _narrow(np.concatenate([ch[c] for ch in chunks])) for c in cols}
        else:
            out[name] = _empty(cols)
    out["bounds"] = _bound_ticks(bounds, box_geometry(meta["half"])["step_height"])
    return out


def _link_layers(result, link_row):
    """{"wire", "wait"}: the link's boxes. Wire time and waiting (ready..first byte on the
    wire). A layer-wise transfer is on the wire only while its layers' chunks are
    (Transfer.wire_spans): drawing it start..end would paint other transfers' chunks, which
    share the wire in between, as its own."""
    transfers = result.transfers
    if not transfers or link_row is None:
        return {"wire": _empty(_XFER_COLS), "wait": _empty(_XFER_COLS)}
    k = len(transfers)
    ready = np.fromiter((t.ready for t in transfers), float, k)
    begin = np.fromiter((t.start for t in transfers), float, k)
    spans = [t.wire_spans() for t in transfers]
    per = np.fromiter((len(sp) for sp in spans), np.intp, k)  # intp: wasm32 cannot repeat by int64
    lefts = np.fromiter((a for sp in spans for a, _ in sp), float, int(per.sum()))
    rights = np.fromiter((b for sp in spans for _, b in sp), float, int(per.sum()))
    owner = np.repeat(np.arange(k), per)
    wire_s = np.bincount(owner, weights=rights - lefts, minlength=k)
    common = {
        "req": np.fromiter((t.request for t in transfers), np.int32, k),
        "src": np.fromiter((t.src_gpu for t in transfers), np.int32, k),
        "dst": np.fromiter((t.dst_gpu for t in transfers), np.int32, k),
        "mb": np.fromiter((t.bytes for t in transfers), float, k) / 1e6,
        "wait_ms": (begin - ready) * 1000.0,
        "wire_ms": wire_s * 1000.0,
        "ready_ms": ready * 1000.0,
        "y": np.full(k, link_row, dtype=F32),
        # A white edge parts back-to-back whole transfers; a layer's chunk is too thin for one
        # (at a 2.5 s window the edges would paint the stream white).
        "edge": np.fromiter((t.layer_starts is None for t in transfers), F32, k),
    }
    waiting = begin > ready
    return {
        "wire": {c: _narrow(v) for c, v in {"left": lefts, "right": rights,
                                            **{n: col[owner] for n, col in common.items()}}.items()},
        "wait": {c: _narrow(v[waiting]) for c, v in {"left": ready, "right": begin, **common}.items()},
    }


@per_run
def overview_data(result, target_ms):
    """({x, slow, busy}: per bin of the whole run, the share of GPU time in slow steps and in
    any step; the sorted start times of every slow step, for "next slow step")."""
    span = max(result.end_time, 1e-9)
    bins = max(1, min(OVERVIEW_BINS, int(math.ceil(span / 0.5))))
    width = span / bins
    edges = np.arange(bins + 1) * width
    limit = slow_limit_t(target_ms)
    starts, ends, slow = [], [], []
    for log in result.gpus:
        if not len(log):
            continue
        start_t, end_t = np.asarray(log.start_t), np.asarray(log.end_t)  # (as step_layers)
        starts.append(start_t / TICKS_PER_S)
        ends.append(end_t / TICKS_PER_S)
        slow.append((np.asarray(log.decode_seqs, dtype=np.int32) > 0) & (end_t - start_t > limit))
    if starts:
        start, end, slow = np.concatenate(starts), np.concatenate(ends), np.concatenate(slow)
    else:
        start = end = np.zeros(0)
        slow = np.zeros(0, dtype=bool)
    slow_time = _binned(start[slow], end[slow], edges)
    busy = _binned(start, end, edges)
    gpus = max(1, len(result.gpus))
    overview = {
        "x": _narrow((edges[:-1] + edges[1:]) / 2),
        "slow": _narrow(np.clip(slow_time / (gpus * width), 0, 1)),
        "busy": _narrow(np.clip(busy / (gpus * width), 0, 1)),
    }
    return overview, np.sort(start[slow].astype(F32))


def decode_runs(start, end, batch, prompt, mask, second=None):
    """One GPU's decode steps within the target (`mask` over its steps) as runs of steps back
    to back: ({left, right, batch (the run's smallest), batch_hi, prompt (summed), steps}, the
    start times of the steps inside runs, where a run's step boundaries are drawn), or (None,
    empty) when there is none. A run is steps next to each other in the log with no gap between
    them (each starts exactly where the one before ended): a slow step, a prefill-only step or
    an idle moment ends it; so does a new value of `second` (the canvas passes each step's
    start's whole second: a run never crosses one, so the steps around a window build alone,
    step_range; the break is drawn as the box's white edge, as a tick would be). Drawing a run as one box instead of ~50 paints the canvas several
    times faster in the browser; a click still finds its step (story.step_at reads the log)."""
    idx = np.nonzero(mask)[0]
    if not len(idx):
        return None, np.zeros(0)
    left, right = start[idx], end[idx]
    new = np.ones(len(idx), dtype=bool)
    new[1:] = (idx[1:] != idx[:-1] + 1) | (left[1:] != right[:-1])
    if second is not None:
        whole = second[idx]
        new[1:] |= whole[1:] != whole[:-1]
    firsts = np.nonzero(new)[0]
    lasts = np.append(firsts[1:], len(idx)) - 1
    b = batch[idx]
    runs = {
        "left": left[firsts], "right": right[lasts],
        "batch": np.minimum.reduceat(b, firsts), "batch_hi": np.maximum.reduceat(b, firsts),
        "prompt": np.add.reduceat(prompt[idx], firsts), "steps": (lasts - firsts + 1).astype(np.int32),
    }
    return runs, left[~new]


def _bound_ticks(chunks, height):
    """The step boundaries inside decode runs as one polyline broken by NaN: per boundary a
    vertical tick across the box (x: t, t, t; y: top, bottom, NaN), so the browser strokes
    them all in one path. `left` is x (every point of a tick has its time, so Canvas._slice
    keeps or drops a tick whole)."""
    if not chunks:
        return _empty(_BOUND_COLS)
    at = np.concatenate([c["at"] for c in chunks])
    y = np.concatenate([c["y"] for c in chunks]).astype(float)
    ys = np.empty(3 * len(at))
    ys[0::3], ys[1::3], ys[2::3] = y - height / 2, y + height / 2, np.nan
    return {"left": _narrow(np.repeat(at, 3)), "y": _narrow(ys)}


def _preempt_marks(result, rows):
    """One mark per preemption (GpuLog.preempted): at the boundary before the step it names
    (that step's start, or the end of the last step when the GPU then had none), on its row."""
    xs, ys, reqs = [], [], []
    for log, row in zip(result.gpus, rows):
        for step, rid in log.preempted:
            if step < len(log):
                xs.append(to_seconds(log.start_t[step]))
            elif step:
                xs.append(to_seconds(log.end_t[step - 1]))
            else:
                continue
            ys.append(row)
            reqs.append(rid)
    x = np.asarray(xs, dtype=float)
    return {"left": _narrow(x), "right": _narrow(x), "y": np.asarray(ys, dtype=F32), "req": np.asarray(reqs, dtype=np.int32)}


def _role_layers(result, out, rows, half):
    """Fill out's ROLE_LAYERS: per GPU whose role changed, a band over its row's whole box
    for each span of `GpuLog.roles` (n = the span's start, for the tooltip)."""
    spans = {name: [] for name in ROLE_LAYERS}
    end = max(result.end_time, 0.0)
    for log, row in zip(result.gpus, rows):
        if len(log.roles) < 2:
            continue
        marks = list(log.roles) + [(end, None)]
        for (t0, role), (t1, _) in zip(marks, marks[1:]):
            if t1 > t0:
                spans["role_" + role].append((t0, t1, row))
    for name, items in spans.items():
        if not items:
            out[name] = _empty(_QUAD_COLS)
            continue
        lo = np.array([a for a, _, _ in items], dtype=float)
        hi = np.array([b for _, b, _ in items], dtype=float)
        ys = np.array([r for _, _, r in items], dtype=float)
        out[name] = _quads(lo, hi, ys - half - 0.04, ys + half + 0.04, lo)


def _quads(left, right, top, bottom, n):
    return {"left": _narrow(left), "right": _narrow(right), "top": _narrow(top), "bottom": _narrow(bottom),
            "n": _narrow(n)}


def _queue_layers(result, out, rows, link_queue_row, half, costs):
    """Fill out's QUEUE_LAYERS (see the module docstring); returns {row: peak} of the queue rows.

    A queue row's area grows up from its box's bottom, full height at the run's peak (at
    least 1); the link queue stacks its waiting-for-room part on its waiting-for-link part.
    A KV band's fill grows up from the band's bottom, full at the instance's capacity
    (`costs`: each instance's PoolCost).
    """
    peaks = {}
    left, right, n = prefill_queue(result)
    peak = max(float(n.max()) if len(n) else 0.0, 1.0)
    peaks[0] = int(n.max()) if len(n) else 0
    out["queue"] = _quads(left, right, half - 2 * half * n / peak, np.full(len(n), half), n)
    if link_queue_row is not None:
        parts = link_queue(result)
        times = np.unique(np.concatenate([parts["link"][0], parts["link"][1], parts["room"][0], parts["room"][1]]))
        waits = {k: _level_at(*parts[k], times[:-1]) for k in ("link", "room")}
        total = waits["link"] + waits["room"]
        peak = max(float(total.max()) if len(total) else 0.0, 1.0)
        peaks[link_queue_row] = int(total.max()) if len(total) else 0
        y0 = link_queue_row + half
        mid = y0 - 2 * half * waits["link"] / peak
        for name, key, top, bottom in (("link_q", "link", mid, np.full(len(mid), y0)),
                                       ("room_q", "room", mid - 2 * half * waits["room"] / peak, mid)):
            keep = waits[key] > 0
            out[name] = _quads(times[:-1][keep], times[1:][keep], top[keep], bottom[keep], waits[key][keep])
    else:
        out["link_q"] = _empty(_QUAD_COLS)
        out["room_q"] = _empty(_QUAD_COLS)
    geo = box_geometry(half)
    # By instance (pools differ), less a per-GPU prefix cache's share (docs/model.md "Prefix caching").
    capacity = [float(cost.kv_tokens - taken) for cost, taken in zip(costs, kv_taken_by_instance(result.scenario))]
    row_of = {log.index: row for log, row in zip(result.gpus, rows)}
    usage = kv_usage(result)
    band = geo["band_bottom"] - geo["band_top"]
    tracks, fills = [], []
    span = max(result.end_time, 0.0)
    for gpu, (lo, hi, tokens) in usage.items():
        r = row_of[gpu]
        tracks.append((r, len(tokens)))
        share = np.clip(tokens / capacity[gpu], 0.0, 1.0)  # of this instance's KV capacity
        fills.append((lo, hi, r + geo["band_bottom"] - band * share, np.full(len(lo), r + geo["band_bottom"]), share,
                      np.full(len(lo), r + geo["band_top"])))
    if tracks:
        ys = np.array([r for r, _ in tracks], dtype=float)
        out["kv_track"] = _quads(np.zeros(len(ys)), np.full(len(ys), span), ys + geo["band_top"], ys + geo["band_bottom"],
                                 np.ones(len(ys)))
        out["kv"] = {c: _narrow(np.concatenate([np.asarray(f[i], dtype=float) for f in fills]))
                     for i, c in enumerate(_KV_COLS)}
    else:
        out["kv_track"] = _empty(_QUAD_COLS)
        out["kv"] = _empty(_KV_COLS)
    return peaks


def _level_at(left, right, value, times):
    """A step series' value at each of `times` (0 outside its spans)."""
    if not len(left):
        return np.zeros(len(times))
    i = np.searchsorted(left, times, side="right") - 1
    inside = (i >= 0) & (times < right[np.maximum(i, 0)])
    return np.where(inside, value[np.maximum(i, 0)], 0.0)


def _narrow(values):
    values = np.asarray(values)
    return values.astype(F32) if values.dtype == np.float64 else values


def _binned(left, right, edges):
    """Per bin [edges[i], edges[i+1]): the total length of the intervals [left, right) in it.

    Vectorised: with F(t) = total length of the intervals' parts before t, a bin holds
    F(b) - F(a), and F(t) = sum over left < t of (t - left) - sum over right < t of (t - right).
    """
    if len(left) == 0:
        return np.zeros(len(edges) - 1)
    left = np.sort(np.asarray(left, dtype=float))
    right = np.sort(np.asarray(right, dtype=float))
    cl = np.concatenate([[0.0], np.cumsum(left)])
    cr = np.concatenate([[0.0], np.cumsum(right)])
    nl = np.searchsorted(left, edges, side="left")
    nr = np.searchsorted(right, edges, side="left")
    f = (edges * nl - cl[nl]) - (edges * nr - cr[nr])
    return np.maximum(np.diff(f), 0.0)
