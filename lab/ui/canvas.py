"""The GPU-timeline canvas: a row per GPU on its own clock, rows for the queues and the link.

Each step of each GPU is a box from its start to its end. Blue: a decode step within
the per-token target; steps of that kind back to back are drawn as one box with thin white
ticks at their boundaries (`decode_runs`: the same picture as a box per step, a fraction of
the browser's painting; its tooltip sums the run). Red, hatched (and outlined): a decode step longer than the
per-token term the SLO uses, `Slo.per_token_target_ms` (the max gap if set, else TPOT):
every sequence in it waited longer than that for its next token. Amber: prefill work; a
step that both decodes and prefills carries an amber strip whose width is the prefill's
share of the step. On the link row, green boxes are KV caches on the wire and grey bars
the time a prompt's KV waited (for decode memory or the link). A dark triangle on a GPU row
marks a preemption (`fleet.kv_policy: on_demand`): a sequence lost its KV there at that step
boundary and went back to the queue.

Queues and memory (series from lab.ui.queues): the top row, "prefill queue", is a grey
area as tall as the number of requests waiting for their prefill (full height = the
run's peak, written in the row); on a split fleet the "link queue" row above the link
stacks the KV caches waiting for the wire (grey) under those waiting for room on a
decode GPU (purple). With early rejection (`fleet.admission`) each request turned away
is a cross on the prefill queue row at its arrival (it never waits); a click on one
opens its story. Every GPU that decodes has a purple band along the top of its row:
the KV memory reserved on it, the band's outline being its capacity (full = no room).
So the failure signatures read at a glance: prefill pool saturated (the prefill queue
climbs, decode rows thin out), decode pool saturated (KV bands full, the link queue
purple), link saturated (the link queue grey and growing).

A 2.5 s window scrolls through the run (play/pause, scrub, jump); an overview below
shows where the slow steps are over the whole run. A click on a step goes to
`on_step(gpu, step)` (a request's story, story.py), and `outline` frames the step or
transfer a story points at.

Data is built with numpy from the columnar step logs, and a change's canvas patch carries
only what its window needs: the GPU steps around the window are built alone (`step_layers`
over `step_range`: bisection into each log, so a minute-long run costs what its seconds
near the window cost; decode runs break at each whole second, so those steps give exactly the
whole run's runs there), the other layers once per run (`run_layers`: queues, KV bands, the
link, marks); the whole run's overview and its slow steps (`overview_data`) follow with the
plots, after the canvas is painted (`show_whole_run`). The steps are rebuilt for a new slice
as the window nears the slice's edge, so moving the window mostly just moves the x range.

Kept cheap for the browser on purpose (a change of the fleet used to cost more there
than the simulation did): the figure's height is fixed per mission (`max_rows`), the
rows share it, so a new GPU count never re-lays out the page; the row labels sit in an
HTML gutter beside the figure, not on a y axis whose width would follow them; the
tooltip derives the GPU, start and duration from other columns (every column is a
websocket frame per update); layers that stay empty are not resent.
"""

import bisect
import dataclasses
import html
import math

import numpy as np
import panel as pn
import param
from bokeh.events import Tap
from bokeh.models import (
    BoxAnnotation,
    ColumnDataSource,
    CustomJS,
    CustomJSHover,
    Dodge,
    HoverTool,
    Label,
    Range1d,
    Span,
)
from bokeh.plotting import figure

from lab.core.cost import instance_costs
from lab.core.prefix_cache import kv_taken_by_instance
from lab.core.report import slow_limit_t
from lab.core.result import instance_label
from lab.core.ticks import TICKS_PER_S, to_seconds

from .fleet_words import gpu_type_text
from .queues import kv_usage, link_queue, prefill_queue, rejections
from .state import WINDOW_S
from .targets import OVER_WORDS, over_target_label, over_target_meaning, target_phrase
from .story import STEP_TOLERANCE_S, step_at
from .panel_shims import Html
from .theme import CSS, FONT_STACK, INERT_STYLE, LIVE_STYLE, PALETTE
from .timers import every

__all__ = ["Canvas", "timeline_data", "run_layers", "step_layers", "step_range", "overview_data", "max_rows", "frame_px", "row_geometry", "box_geometry", "rows_html", "row_label",
           "legend_html", "roles_text", "ROW_PX", "EMBED_ROW_PX", "FRAME_MAX_PX", "PREFILL_QUEUE", "LINK_QUEUE"]

MIN_FIGURE_PX = 150  # narrow enough for a 320 px phone beside the row labels
EMBED_ROW_PX = 18  # in an embed: the 700 x 760 iframe shows the metrics under the canvas without scrolling
ROW_PX = 22  # height of one row in pixels when the mission shows as many rows as it can
ROWS_MIN = 6  # the frame is never sized for fewer rows than this
FRAME_MAX_PX = 300  # nor taller than this (the sandbox reaches 27 rows: they get thinner)
EMBED_FRAME_MAX_PX = 270  # in an embed: the 700 x 760 iframe still shows the headline metrics
BAR_MAX_PX = 30  # a step's box is never taller than this, however few rows there are
AXIS_PX = 50  # the figure's height beyond its frame (time axis and its label)
FRAME_TOP_PX = 6  # the plot area starts this far down the figure (no title, no toolbar)
FRAME_LEFT_PX = 4  # ... and this far right of the row labels' gutter
BUFFER_S = 1.5  # the browser holds the window plus this much on each side (see Canvas._slice)
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
SPEEDS = {"¼×": 0.25, "1×": 1.0, "4×": 4.0, "10×": 10.0}
TICK_MS = 100  # playback frame period
OVERVIEW_BINS = 240  # the overview's bars across the whole run (at most; half a second each when shorter)
KEPT_DATA = 6  # runs whose canvas data is kept (LabState keeps as many runs: MAX_KEPT_RUNS)

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


def legend_html(slo, embed=False, rejection=False, preemptions=False, roles=False):
    """The canvas's legend: every mark's swatch and name, and a line saying what a red,
    hatched step is against this SLO and what it means for it (the embed says less).
    `rejection`: the mission can turn early rejection on, so its cross is listed too;
    `preemptions`: the fleet may preempt (KV on demand), so the legend names its mark;
    `roles`: GPUs may change roles (fleet.planner): name the role bands too."""
    sw = lambda cls, colour=None: (f'<span class="{" ".join(("sw", cls)).strip()}"'  # noqa: E731
                                   + (f' style="background:{colour}"' if colour else "") + "></span>")
    entries = (
        (sw("", PALETTE["decode"]), "decode", "decode step"),
        (sw("", PALETTE["prefill"]), "prefill", "prefill work (amber)"),
        (sw("mixed"), "step that also prefills", "step that also prefills (strip = its share)"),
        (sw("", PALETTE["link"]), "KV on the link", "KV on the link"),
        (sw("wait"), "KV waiting", "KV waiting"),
        (sw("queue"), "queued", "queue rows: how many wait (full height = the peak)"),
        (sw("kv"), "KV memory", "KV band: memory reserved (full = no room)"),
    ) + (((_PREEMPT_SWATCH, "preempted", "preempted: lost its KV, back to the queue"),) if preemptions else ()) + ((
        (sw("roles"), "role over time", "row tint: the GPU's role over time (amber prefill, blue decode, hatched grey reloading)"),
    ) if roles else ())
    if rejection:
        cross = (f'<span class="sw" style="background:none;color:{PALETTE["bad"]};font-weight:700;'
                 'text-align:center;line-height:11px">×</span>')
        entries += ((cross, "rejected", "rejected at arrival (early rejection)"),)
    items = "".join(f"<span>{swatch}{html.escape(short if embed else full)}</span>" for swatch, short, full in entries)
    label = over_target_label(slo, short=embed)
    meaning = None if embed else over_target_meaning(slo)
    over = (f'<span class="stf-legend-over">{sw("slow")}{html.escape(label)}'
            + (f": {html.escape(meaning)}" if meaning else "") + "</span>")
    if embed:
        over = f'<span>{sw("slow")}{html.escape(OVER_WORDS)}: {html.escape(label)}</span>'
    return f'<div class="stf-legend" aria-label="legend">{items}{over}</div>'


_PREEMPT_SWATCH = f'<span class="sw-mark" style="color:{PALETTE["ink"]}" aria-hidden="true">▼</span>'


def _keys_html(note):
    """The shortcut line under the overview, with what the last "next slow step" found."""
    shown = f' <span class="stf-jump-note" role="status">· {html.escape(note)}</span>' if note else ""
    return ('<div class="stf-kbd">Keys: <kbd>K</kbd> play/pause · <kbd>J</kbd>/<kbd>L</kbd> back/forward 1 s · '
            f'<kbd>N</kbd> next slow step · click the overview to jump{shown}</div>')


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
    out = run_layers(result, frame)
    out.update(step_layers(result, target_ms, out["meta"]))
    out["overview"], _slow_starts = overview_data(result, target_ms)
    return out


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
        # making those: README "Time base"); slow is judged on the ticks, as report's table does.
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
    # By instance (pools differ), less a per-GPU prefix cache's share (README "Prefix caching").
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


class Canvas(param.Parameterized):
    """The timeline figure, its overview and the playback controls, over a LabState."""

    playing = param.Boolean(default=False)
    speed = param.Selector(default="1×", objects=list(SPEEDS))

    def __init__(self, state, embed=False, **params):
        super().__init__(**params)
        self.state = state
        self.embed = embed
        self._timer = None
        self.after_toggle = None  # called after the play button's label changed (focus repair)
        self._end = WINDOW_S
        self._slow_starts = np.zeros(0)  # None: not found yet for this run (slow_starts)
        self._whole_of = None  # the result show_whole_run last showed
        self._full = {}
        self._buffer = None
        self._built = []  # [{result, target, layers, ...}], newest last (_data_for)
        self.sources = {name: ColumnDataSource(_empty(_STEP_COLS)) for name in ("slow", "prefill")}
        self.sources["decode"] = ColumnDataSource(_empty(_RUN_COLS), name="canvas-decode")
        self.sources["bounds"] = ColumnDataSource(_empty(_BOUND_COLS), name="canvas-bounds")
        self.sources["strip"] = ColumnDataSource(_empty(_STRIP_COLS))
        self.sources["wire"] = ColumnDataSource(_empty(_XFER_COLS))
        self.sources["wait"] = ColumnDataSource(_empty(_XFER_COLS))
        self.sources["rejected"] = ColumnDataSource(_empty(_REJECT_COLS), name="canvas-rejected")
        self.sources["preempt"] = ColumnDataSource(_empty(_PREEMPT_COLS), name="canvas-preempt")
        for name in QUEUE_LAYERS + ROLE_LAYERS:  # named, so the page (tests) can read what a row shows
            self.sources[name] = ColumnDataSource(_empty(_KV_COLS if name == "kv" else _QUAD_COLS), name=f"canvas-{name}")
        self.overview_source = ColumnDataSource({"x": [], "slow": [], "busy": []})
        self._labels = None
        self._geometry = None
        self._rows_max, longest = max_rows(state.mission)
        self._frame_px = (frame_px(self._rows_max, EMBED_ROW_PX, EMBED_FRAME_MAX_PX) if embed
                          else frame_px(self._rows_max))
        self._gutter_px = int(len(split_label(longest)[0]) * LABEL_PX_PER_CHAR) + 14
        self.on_user_window = None  # called after the student moved the window (not playback)
        self._jump_note = ""  # what the last "next slow step" found, beside the keys
        self._syncing_slider = False
        self.on_step = None  # called with (gpu, step index) when the student clicks a step (story.StoryView)
        self.on_request = None  # called with a request id when the student clicks a rejection's cross
        self.focus_source = ColumnDataSource({"left": [], "right": [], "y": []})  # the outlined step (outline)
        self.meta = ColumnDataSource({"run": [0], "rows": [""], "x": [float("nan")], "y": [float("nan")]})
        self.figure = self._make_figure()
        self.overview = self._make_overview()
        self._make_widgets()
        self.view = self._layout()
        state.param.watch(self._on_run, "sim_id")  # the simulation alone: not its metrics
        state.param.watch(self._on_window, "window_start")
        if state.result is not None:
            self._on_run()
            self.show_whole_run()

    # ------------------------------------------------------------ figures

    def _make_figure(self):
        fig = figure(
            height=self._frame_px + AXIS_PX,  # fixed for the mission: see max_rows
            sizing_mode="stretch_width",
            min_width=MIN_FIGURE_PX,
            x_range=Range1d(0, WINDOW_S, bounds=None),
            y_range=Range1d(3.5, -0.5),
            tools="",
            toolbar_location=None,
            output_backend="canvas",
            x_axis_label="simulated time (s)",
            name="timeline",
        )
        fig.min_border_left = FRAME_LEFT_PX  # the row labels are in an HTML gutter on the left
        fig.min_border_right = 16  # room for half the last time label
        fig.min_border_top = FRAME_TOP_PX
        fig.min_border_bottom = AXIS_PX - 6
        fig.outline_line_color = None
        fig.background_fill_color = "#fbfcfe"
        fig.border_fill_color = PALETTE["panel"]
        fig.ygrid.grid_line_color = None
        fig.xgrid.grid_line_color = PALETTE["grid"]
        fig.xaxis.axis_label_text_font_style = "normal"
        fig.xaxis.axis_label_text_font_size = "12px"
        fig.xaxis.axis_label_text_color = PALETTE["muted"]
        fig.xaxis.major_label_text_font = FONT_STACK
        fig.xaxis.axis_label_text_font = FONT_STACK
        fig.xaxis.major_label_text_font_size = "12px"
        fig.xaxis.major_label_text_color = PALETTE["ink"]
        # Rows are labelled in an HTML gutter beside the figure (see rows_html), not by a y
        # axis: an axis whose labels get wider or narrower (a colocated fleet becoming a
        # split one) changes size, and Bokeh then re-lays out the whole page, not just this
        # figure. (Labels inside the figure would be clipped to the plot area.)
        fig.yaxis.visible = False
        self.row_labels = ColumnDataSource({"y": [], "text": []})  # for the tooltips
        self.instance_names = ColumnDataSource({"text": []}, name="canvas-instances")  # GpuLog.label by instance
        self._queue_renderers = self._add_queue_glyphs(fig)
        # A GPU row's step boxes sit under its KV band (box_geometry): a Dodge, so a new row
        # height only changes its `value`; the prefill strip of a mixed step sits at the
        # bottom of its box (rows grow downwards), a Dodge too.
        geo = box_geometry(HALF)
        self.step_dodge = Dodge(value=geo["step_offset"], range=fig.y_range)
        self.strip_dodge = Dodge(value=geo["step_offset"] + geo["step_height"] * (1 - STRIP) / 2, range=fig.y_range)
        bar = {"y": {"field": "y", "transform": self.step_dodge}, "left": "left", "right": "right",
               "height": geo["step_height"]}
        r_decode = fig.hbar(source=self.sources["decode"], **bar,
                            fill_color=PALETTE["decode"], line_color="white", line_width=0.6)
        # A run of decode steps is one box (decode_runs); its step boundaries, white as the
        # boxes' edges, are one polyline broken by NaN: one stroke, not a box per step.
        fig.line(source=self.sources["bounds"], x="left", y={"field": "y", "transform": self.step_dodge},
                 line_color="white", line_width=0.6)
        r_slow = fig.hbar(source=self.sources["slow"], **bar,
                          fill_color=PALETTE["slow"], hatch_pattern="/", hatch_color="white", hatch_alpha=0.75,
                          hatch_scale=7, hatch_weight=1.2, line_color=PALETTE["slow_edge"], line_width=1.3)
        r_prefill = fig.hbar(source=self.sources["prefill"], **bar,
                             fill_color=PALETTE["prefill"], line_color="white", line_width=0.6)
        r_strip = fig.hbar(source=self.sources["strip"], y={"field": "y", "transform": self.strip_dodge},
                           left="left", right="right", height=geo["step_height"] * STRIP,
                           fill_color=PALETTE["prefill"], line_color=None)
        r_wait = fig.hbar(source=self.sources["wait"], y="y", left="left", right="right", height=2 * HALF * WAIT,
                          fill_color=PALETTE["link_wait"], line_color=None)
        r_wire = fig.hbar(source=self.sources["wire"], y="y", left="left", right="right", height=2 * HALF,
                          fill_color=PALETTE["link"], fill_alpha=0.85, line_color="white", line_width=0.6,
                          line_alpha="edge")
        step_tips = """
<div style="font: 12px %s; min-width: 170px">
  <div style="font-weight:600; margin-bottom:2px">@y{custom} · {kind}</div>
  <div>batch: <b>@batch</b> sequences decoding</div>
  <div>prompt tokens: <b>@prompt{0,0}</b></div>
  <div>start: @left{custom} ms · duration: <b>@right{custom} ms</b></div>
</div>"""
        # Derived in the browser, so the data carries fewer columns (each one is a buffer
        # in every update): the row's GPU from the axis labels, start and duration in ms.
        gpu_of_row = CustomJSHover(args={"labels": self.row_labels}, code="""
            const ys = labels.data.y, texts = labels.data.text;
            for (let i = 0; i < ys.length; i++) {
                if (ys[i] == value) {  // "GPUs 0–1", with its type when the row names one: "GPUs 0–1 (H100 ×2)"
                    const parts = String(texts[i]).split(" · ");
                    return parts.length == 3 ? parts[0] + " (" + parts[2] + ")" : parts[0];
                }
            }
            return "row " + value;""")
        in_ms = CustomJSHover(code="""
            return (value * 1000).toLocaleString("en-US", {minimumFractionDigits: 1, maximumFractionDigits: 1});""")
        over = target_phrase(self.state.scenario.slo)
        kinds = ((r_decode, "decode step"), (r_slow, f"decode step over {over}" if over else "decode step"),
                 (r_prefill, "prefill step"))
        run_tips = """
<div style="font: 12px %s; min-width: 170px">
  <div style="font-weight:600; margin-bottom:2px">@y{custom} · {kind}</div>
  <div><b>@steps</b> steps back to back; batch: <b>@batch–@batch_hi</b> sequences decoding</div>
  <div>prompt tokens: <b>@prompt{0,0}</b></div>
  <div>start: @left{custom} ms · duration: <b>@right{custom} ms</b></div>
  <div style="color:#666">click a step for a request's story</div>
</div>"""
        for renderer, kind in kinds:
            duration = CustomJSHover(args={"src": renderer.data_source}, code="""
                const d = src.data, i = special_vars.index;
                return ((d.right[i] - d.left[i]) * 1000).toFixed(1);""")
            tips = run_tips.replace("{kind}", "decode steps") if renderer is r_decode else step_tips.replace("{kind}", kind)
            fig.add_tools(HoverTool(renderers=[renderer], tooltips=tips.replace("%s", FONT_STACK),
                                    formatters={"@y": gpu_of_row, "@left": in_ms, "@right": duration},
                                    point_policy="follow_mouse", attachment="above"))
        wire_tips = """
<div style="font: 12px %s; min-width: 170px">
  <div style="font-weight:600; margin-bottom:2px">KV of request @req: @src{custom} → @dst{custom}</div>
  <div>size: <b>@mb{0,0} MB</b></div>
  <div>waited: @wait_ms{0,0.0} ms · on the wire: <b>@wire_ms{0,0.0} ms</b></div>
  <div>prefill ended at @ready_ms{0,0.0} ms</div>
</div>""".replace("%s", FONT_STACK)
        # src and dst are instance indices: the instance's label ("GPUs 0–1") comes from the run.
        instance_name = CustomJSHover(args={"names": self.instance_names}, code="""
            const t = names.data.text[value];
            return t === undefined ? "GPU " + value : String(t);""")
        fig.add_tools(HoverTool(renderers=[r_wire, r_wait], tooltips=wire_tips, point_policy="follow_mouse", attachment="above",
                                formatters={"@src": instance_name, "@dst": instance_name}))
        # Early rejection: a cross per request turned away, at its arrival on the prefill queue row.
        r_rejected = fig.scatter(source=self.sources["rejected"], x="left", y="y", marker="x", size=8,
                                 line_color=PALETTE["bad"], line_width=2)
        fig.add_tools(HoverTool(renderers=[r_rejected], point_policy="snap_to_data", attachment="above", tooltips=(
            f'<div style="font: 12px {FONT_STACK}">Request <b>@req</b> rejected at arrival: '
            'predicted TTFT <b>@pred{0,0.000} s</b></div>')))
        # Preemptions: a dark triangle at the top of the row's step boxes, pointing down at the
        # boundary where the sequence lost its KV.
        self.mark_dodge = Dodge(value=geo["step_offset"] - geo["step_height"] / 2, range=fig.y_range)
        r_preempt = fig.scatter(source=self.sources["preempt"], x="left", y={"field": "y", "transform": self.mark_dodge},
                                marker="inverted_triangle", size=9, fill_color=PALETTE["ink"], line_color="white",
                                line_width=1, level="overlay")
        fig.add_tools(HoverTool(renderers=[r_preempt], point_policy="follow_mouse", attachment="above", tooltips=(
            f'<div style="font: 12px {FONT_STACK}">request <b>@req</b> preempted: its KV freed, back to the queue</div>')))
        # The step a request's story points at: a thick dark frame around its whole row's height.
        r_focus = fig.hbar(source=self.focus_source, y="y", left="left", right="right", height=2 * HALF + 0.14,
                           fill_color=None, line_color=PALETTE["ink"], line_width=3, level="overlay")
        self._focus_glyph = r_focus.glyph
        fig.on_event(Tap, self._on_step_tap)
        self._box_glyphs = [r.glyph for r in (r_decode, r_slow, r_prefill)]
        self._wire_glyph = r_wire.glyph
        self._strip_glyph = r_strip.glyph
        self._wait_glyph = r_wait.glyph
        self.slow_line = Span(location=0, dimension="height", line_color=PALETTE["slow"], line_alpha=0, line_width=1)
        fig.add_layout(self.slow_line)
        # Tells the page (tests, benchmark) that a run's data arrived and was painted. The
        # invisible glyph keeps `meta` in the document.
        fig.scatter("x", "y", source=self.meta, visible=False)
        self.meta.js_on_change("data", CustomJS(args={"meta": self.meta}, code="""
            const run = String(meta.data.run[0]);
            const root = document.documentElement;
            root.dataset.canvasRows = String(meta.data.rows[0]);
            root.dataset.canvasRun = run;
            window.__stfArrived = {run: Number(run), at: performance.now()};
            requestAnimationFrame(() => requestAnimationFrame(() => {
                root.dataset.canvasPainted = run;
                window.__stfPainted = {run: Number(run), at: performance.now()};
                // The worker measures the run once it is on screen (page_bridge.py, LabApp).
                document.dispatchEvent(new CustomEvent("stf-painted", {detail: Number(run)}));
            }));
        """))
        fig.x_range.js_on_change("start", CustomJS(code="""
            document.documentElement.dataset.canvasWindow = cb_obj.start.toFixed(3);
        """))
        return fig

    def _add_queue_glyphs(self, fig):
        """The queue rows' areas and the KV bands (drawn first: under everything else),
        their compact tooltips, and a label per queue row for its scale."""
        quad = {"left": "left", "right": "right", "top": "top", "bottom": "bottom"}
        src = self.sources
        # Role bands first: under the KV band and the steps (fleet.planner).
        r_roles = [
            fig.quad(source=src["role_prefill"], **quad, fill_color=PALETTE["prefill"], fill_alpha=0.16, line_color=None),
            fig.quad(source=src["role_decode"], **quad, fill_color=PALETTE["decode"], fill_alpha=0.12, line_color=None),
            fig.quad(source=src["role_switching"], **quad, fill_color=PALETTE["link_wait"], fill_alpha=0.35,
                     hatch_pattern="/", hatch_color="white", hatch_alpha=0.9, hatch_scale=6, line_color=PALETTE["muted"],
                     line_width=0.8),
        ]
        role_tip = '<div style="font: 12px %s">%s from <b>@left{0,0.0} s</b> to @right{0,0.0} s</div>'
        for renderer, what in zip(r_roles, ("a prefill GPU", "a decode GPU", "reloading for its new role")):
            fig.add_tools(HoverTool(renderers=[renderer], tooltips=role_tip % (FONT_STACK, what),
                                    point_policy="follow_mouse", attachment="above"))
        r_track = fig.quad(source=src["kv_track"], **quad, fill_color=PALETTE["kv_track"],
                           line_color=PALETTE["kv_edge"], line_width=0.8)
        r_kv = fig.quad(source=src["kv"], **quad, fill_color=PALETTE["kv"], line_color=None)
        r_kv_hit = fig.quad(source=src["kv"], left="left", right="right", top="hit", bottom="bottom",
                            fill_alpha=0, line_alpha=0)  # the whole band's height: a hover needs no pixel-exact aim
        r_queue = fig.quad(source=src["queue"], **quad, fill_color=PALETTE["link_wait"], line_color=None)
        r_link = fig.quad(source=src["link_q"], **quad, fill_color=PALETTE["link_wait"], line_color=None)
        r_room = fig.quad(source=src["room_q"], **quad, fill_color=PALETTE["kv"], line_color=None)
        tip = '<div style="font: 12px %s">%s</div>'
        for renderer, text in ((r_queue, "<b>@n{0,0}</b> requests waiting for their prefill"),
                               (r_link, "<b>@n{0,0}</b> KV caches waiting for the link"),
                               (r_room, "<b>@n{0,0}</b> KV caches waiting for room on a decode GPU"),
                               (r_kv_hit, "KV memory: <b>@n{0%}</b> reserved")):
            fig.add_tools(HoverTool(renderers=[renderer], tooltips=tip % (FONT_STACK, text),
                                    point_policy="follow_mouse", attachment="above"))
        self.peak_labels = {}
        for key in ("prefill", "link"):
            label = Label(x=3, y=0, x_units="screen", y_units="data", text="", text_font_size="9.5px",
                          text_color=PALETTE["muted"], text_baseline="top", y_offset=-1,
                          background_fill_color="white", background_fill_alpha=0.75, level="overlay")
            fig.add_layout(label)
            self.peak_labels[key] = label
        return [r_track, r_kv, r_queue, r_link, r_room]

    def _show_peaks(self, meta):
        """Each queue row says what its full height stands for (the run's peak)."""
        half = meta["half"]
        rows = {"prefill": 0, "link": meta["link_queue_row"]}
        for key, label in self.peak_labels.items():
            row = rows[key]
            peak = meta["peaks"].get(row) if row is not None else None
            text = "" if peak is None else (f"peak {peak:,}" if peak else "none waiting")
            y = (row if row is not None else 0) - half
            if label.text != text or label.y != y:
                label.update(text=text, y=y)

    def _make_overview(self):
        fig = figure(
            height=64,
            sizing_mode="stretch_width",
            min_width=MIN_FIGURE_PX,
            x_range=Range1d(0, 60),
            y_range=Range1d(0, 1.02),
            tools="",
            toolbar_location=None,
            name="overview",
        )
        fig.min_border_left = self._gutter_px + FRAME_LEFT_PX  # lined up with the timeline's plot area
        fig.min_border_right = 16
        fig.min_border_top = 2
        fig.min_border_bottom = 18
        fig.outline_line_color = "#dde2ea"
        fig.background_fill_color = "#fbfcfe"
        fig.yaxis.visible = False
        fig.xgrid.grid_line_color = None
        fig.ygrid.grid_line_color = None
        fig.xaxis.major_label_text_font_size = "11px"
        fig.xaxis.major_label_text_color = PALETTE["muted"]
        fig.vbar(source=self.overview_source, x="x", top="busy", width=0.5, fill_color="#c7d6e6", line_color=None)
        fig.vbar(source=self.overview_source, x="x", top="slow", width=0.5, fill_color=PALETTE["slow"],
                 hatch_pattern="/", hatch_color="white", hatch_alpha=0.6, hatch_scale=5, line_color=None)
        self.window_box = BoxAnnotation(left=0, right=WINDOW_S, fill_color=PALETTE["ink"], fill_alpha=0.12,
                                        line_color=PALETTE["ink"], line_width=1.5, line_alpha=0.8)
        fig.add_layout(self.window_box)
        self.arrivals_span = Span(location=60, dimension="height", line_color=PALETTE["muted"], line_dash="dashed", line_width=1)
        fig.add_layout(self.arrivals_span)
        fig.add_layout(Label(x=4, y=44, x_units="screen", y_units="screen", text="whole run: share of GPU time in slow steps",
                             text_font_size="10.5px", text_color=PALETTE["muted"], background_fill_color="white",
                             background_fill_alpha=0.7))
        fig.on_event(Tap, self._on_tap)
        return fig

    def _make_widgets(self):
        self.play_button = pn.widgets.Button(
            name="▶ Play", button_type="primary", width=96, margin=(4, 6, 4, 0),
            description="Play or pause the timeline (the window moves through the run)",
            css_classes=["stf-play"],
        )
        self.play_button.on_click(lambda _e: self.toggle())
        self.speed_select = pn.widgets.RadioButtonGroup(
            name="Speed", options=list(SPEEDS), value=self.speed, button_type="light", margin=(4, 6), width=180,
            css_classes=["stf-speed"], description="Playback speed (simulated seconds per real second)",
        )
        self.speed_select.link(self, value="speed")
        self.slider = pn.widgets.FloatSlider(
            name="Window start (s)", start=0.0, end=60.0, step=0.05, value=self.state.window_start,
            sizing_mode="stretch_width", min_width=140, margin=(0, 10), format="0.00", css_classes=["stf-scrub"],
            styles={"flex": "1 1 160px"},
        )
        self.slider.param.watch(self._on_slider, "value")
        over = target_phrase(self.state.scenario.slo)
        self.next_button = pn.widgets.Button(
            name="Next slow step »", button_type="light", width=150, margin=(4, 0, 4, 6),
            description=(f"Jump to the next step longer than {over} ({OVER_WORDS})" if over
                         else "Jump to the next slow step (this mission sets no per-token target: none is marked)"),
            css_classes=["stf-next-slow"],
        )
        self.next_button.on_click(lambda _e: self.jump_to_slow())

    def _layout(self):
        # Wraps (not a Row): at phone widths the four would push the page wider than the screen.
        controls = pn.FlexBox(self.play_button, self.speed_select, self.slider, self.next_button,
                              sizing_mode="stretch_width", align_items="center", flex_wrap="wrap", margin=(0, 6))
        self.pane = pn.pane.Bokeh(self.figure, sizing_mode="stretch_width", margin=0, css_classes=["stf-canvas"])
        self.labels_pane = Html("", width=self._gutter_px, height=self.figure.height, margin=0,
                                        stylesheets=[CSS], css_classes=["stf-row-labels"])
        timeline = pn.Row(self.labels_pane, self.pane, sizing_mode="stretch_width", margin=0)
        overview = pn.pane.Bokeh(self.overview, sizing_mode="stretch_width", margin=0, css_classes=["stf-overview"])
        keys = self.keys_pane = Html(_keys_html(""), stylesheets=[CSS], margin=(2, 10, 6, 10),
                                             sizing_mode="stretch_width", css_classes=["stf-keys"])
        return pn.Column(timeline, controls, overview, keys, sizing_mode="stretch_width", margin=0)

    # ------------------------------------------------------------ updates

    def _on_run(self, *_):
        """A new run: the canvas's patch carries what the window shows (its steps alone,
        built around it: step_layers over step_range) and the run's rows; the whole run's
        overview and slow steps follow with the plots (show_whole_run), after the paint."""
        state = self.state
        result = state.result
        self._whole_of = None
        self._slow_starts = None  # the run's slow steps: show_whole_run (or a jump) finds them
        if result is None:  # the run failed: no stale timeline next to its error
            self._full = {}
            self._buffer = None
            self._slow_starts = np.zeros(0)
            for name, source in self.sources.items():
                if len(source.data["left"]):
                    source.data = _empty(tuple(source.data))
            self.overview_source.data = {"x": [], "slow": [], "busy": []}
            for label in self.peak_labels.values():  # no peak of a run that is not shown
                if label.text:
                    label.text = ""
            self.next_button.styles = INERT_STYLE
            self.meta.data = {"run": [state.sim_id], "rows": [""], "x": [float("nan")], "y": [float("nan")]}
            return
        entry = self._data_for(result, state.scenario.slo.per_token_target_ms)
        data = entry["layers"]
        meta = data["meta"]
        self._full = {name: data[name] for name in LAYERS if name in data and name not in WHOLE_RUN_LAYERS}
        for name in WHOLE_RUN_LAYERS:  # a few boxes spanning the run: sent once per run, not per slice
            source, cols = self.sources[name], data[name]
            if len(cols["left"]) or len(source.data["left"]):
                source.data = cols
        self._buffer = None  # forces a fresh slice in _on_window
        n = meta["rows"]
        fig = self.figure
        labels = dict(meta["labels"])
        if labels != self._labels:  # the figure's height never changes (see max_rows): rows fill it
            self._labels = labels
            fig.y_range.update(start=n - 0.5, end=-0.5)
            self.row_labels.data = {"y": list(range(n)), "text": [labels[i] for i in range(n)]}
            self.instance_names.data = {"text": [log.label for log in result.gpus]}
            half, font = row_geometry(n, self._frame_px)
            self.labels_pane.object = rows_html([labels[i] for i in range(n)], self._frame_px, font)
            self._set_geometry(half)
        self._show_peaks(meta)
        self._end = max(result.end_time, WINDOW_S)
        slider_end = round(max(self._end - WINDOW_S, 0.05), 2)
        if self.slider.end != slider_end:
            self.slider.end = slider_end
        self._on_window()
        rows = " | ".join(meta["labels"][i] for i in range(meta["rows"]))
        self.meta.data = {"run": [state.sim_id], "rows": [rows], "x": [float("nan")], "y": [float("nan")]}

    def show_whole_run(self):
        """The run's whole-run views: the overview (its bars, length and arrivals' end) and the
        slow steps "next slow step" jumps to. The page calls it with the plots, after the
        canvas's own patch is painted (a second figure repainted in that patch would delay it)."""
        result = self.state.result
        if result is None or self._whole_of is result:
            return
        self._whole_of = result
        entry = self._data_for(result, self.state.scenario.slo.per_token_target_ms)
        overview, slow_starts = self._whole_for(entry)
        # Small columns go as JSON lists: every array column would be its own websocket frame.
        self.overview_source.data = {k: np.asarray(v).tolist() for k, v in overview.items()}
        bin_width = entry["layers"]["meta"]["bin"]
        for r in self.overview.renderers:
            if r.glyph.width != bin_width * 0.92:
                r.glyph.width = bin_width * 0.92
        if self.overview.x_range.end != self._end:
            self.overview.x_range.update(start=0, end=self._end)
        if self.arrivals_span.location != result.arrivals_end:
            self.arrivals_span.location = result.arrivals_end
        self._slow_starts = slow_starts
        # Styled, not `disabled`: toggling that re-renders the button and re-lays out the page
        # in the browser. A click with nothing to jump to does nothing.
        style = INERT_STYLE if len(slow_starts) == 0 else LIVE_STYLE
        if self.next_button.styles != style:
            self.next_button.styles = style

    def _whole_for(self, entry):
        if "whole" not in entry:
            entry["whole"] = overview_data(entry["result"], entry["target"])
        return entry["whole"]

    def slow_starts(self):
        """The start times of the run's slow steps, sorted (found once per run)."""
        if self._slow_starts is None:
            result = self.state.result
            if result is None:
                return np.zeros(0)
            self._slow_starts = self._whole_for(self._data_for(result, self.state.scenario.slo.per_token_target_ms))[1]
        return self._slow_starts

    def _data_for(self, result, target_ms):
        """The run's layers other than the steps (run_layers), built once while the state keeps
        the run (a setting the student comes back to reuses its run: LabState._kept), with its
        overview once built and its last slice of steps."""
        for i, entry in enumerate(self._built):
            if entry["result"] is result and entry["target"] == target_ms:
                self._built.append(self._built.pop(i))
                return entry
        entry = {"result": result, "target": target_ms, "layers": run_layers(result, self._frame_px)}
        # Only runs the state still keeps (it also bounds them by their steps: MAX_HELD_STEPS).
        kept = [e for e in self._built[-(KEPT_DATA - 1):] if self.state.is_kept(e["result"])]
        self._built = kept + [entry]
        return entry

    def _set_geometry(self, half):
        if half == self._geometry:
            return
        self._geometry = half
        geo = box_geometry(half)
        for glyph in self._box_glyphs:
            glyph.height = geo["step_height"]
        self.step_dodge.value = geo["step_offset"]
        self.mark_dodge.value = geo["step_offset"] - geo["step_height"] / 2
        self._wire_glyph.height = 2 * half
        self._strip_glyph.height = geo["step_height"] * STRIP
        self.strip_dodge.value = geo["step_offset"] + geo["step_height"] * (1 - STRIP) / 2
        self._wait_glyph.height = 2 * half * WAIT
        self._focus_glyph.height = 2 * half + 0.14

    def _on_window(self, *_):
        t0 = self.state.window_start
        self._slice(t0)
        self.figure.x_range.update(start=t0, end=t0 + WINDOW_S)
        self.window_box.update(left=t0, right=t0 + WINDOW_S)
        if abs(self.slider.value - t0) > 1e-9:
            self._syncing_slider = True  # not the student's doing: no on_user_window
            try:
                self.slider.value = min(t0, self.slider.end)
            finally:
                self._syncing_slider = False

    def _slice(self, t0):
        """Send the browser the steps around the window only (see BUFFER_S).

        Drawing cost in the browser grows with every bar in a data source, not just the
        visible ones, so a whole run (tens of thousands of steps) would make every
        repaint slow. The buffer is re-sliced when the window nears its edge: the GPU steps
        are built for it from the logs (step_layers), the other layers cut from the run's.
        """
        result = self.state.result
        if not self._full or result is None:
            return
        lo, hi = t0, t0 + WINDOW_S
        if self._buffer is not None and self._buffer[0] <= lo and hi <= self._buffer[1]:
            return
        lo, hi = t0 - BUFFER_S, t0 + WINDOW_S + BUFFER_S
        self._buffer = (lo, hi)
        entry = self._data_for(result, self.state.scenario.slo.per_token_target_ms)
        if entry.get("span") != (lo, hi):
            entry["span"], entry["steps"] = (lo, hi), step_layers(result, entry["target"], entry["layers"]["meta"], (lo, hi))
        layers = dict(entry["steps"])
        for name, cols in self._full.items():
            if len(cols["left"]):
                keep = (cols.get("right", cols["left"]) >= lo) & (cols["left"] <= hi)
                cols = {c: v[keep] for c, v in cols.items()}
            layers[name] = cols
        for name, cols in layers.items():
            source = self.sources[name]
            if not len(cols["left"]):
                if len(source.data["left"]):  # an empty layer stays empty: nothing to send
                    source.data = _empty(tuple(cols))
                continue
            source.data = cols

    def _on_slider(self, event):
        if not self._syncing_slider:
            self.set_window(event.new, user=True)

    def _on_tap(self, event):
        if event.x is not None:
            self.set_window(event.x - WINDOW_S / 2, user=True)

    def _on_step_tap(self, event):
        """A click on the timelines: the step under it goes to `on_step` (a GPU row only)."""
        result = self.state.result
        if self.on_step is None or result is None or event.x is None or event.y is None:
            return
        row = int(round(event.y))
        rows, _link, _link_queue, _labels = _rows(result)
        if row == 0 and self.on_request is not None:  # the prefill queue row: a rejection's cross?
            rid = self._rejection_at(float(event.x))
            if rid is not None:
                self.on_request(rid)
            return
        if row not in rows:
            return
        gpu = rows.index(row)
        step = step_at(result.gpus[gpu], float(event.x))
        if step is not None:
            self.on_step(gpu, step)

    def _rejection_at(self, t):
        """The rejected request whose cross is nearest time `t` (within a tap's reach), or None."""
        cols = self._full.get("rejected")
        if not cols or not len(cols["left"]):
            return None
        i = int(np.argmin(np.abs(cols["left"].astype(float) - t)))
        reach = max(STEP_TOLERANCE_S, WINDOW_S / 60)  # a few pixels on a phone: the nearest cross wins
        return int(cols["req"][i]) if abs(float(cols["left"][i]) - t) <= reach else None

    def outline(self, gpu, left=None, right=None):
        """Frame [left, right] on GPU `gpu`'s row, or on the link's row (`gpu="link"`); None: frame nothing."""
        result = self.state.result
        rows, link, _link_queue, _labels = _rows(result) if result is not None else ([], None, None, {})
        row = link if gpu == "link" else (rows[gpu] if isinstance(gpu, int) and 0 <= gpu < len(rows) else None)
        if row is None:
            if len(self.focus_source.data["left"]):
                self.focus_source.data = {"left": [], "right": [], "y": []}
            return
        self.focus_source.data = {"left": [float(left)], "right": [float(right)], "y": [row]}

    def set_window(self, t0, user=False):
        """Move the window to start at `t0` (clamped to the run). `user`: the student did it."""
        t0 = float(min(max(t0, 0.0), max(self._end - WINDOW_S, 0.0)))
        self.state.window_start = round(t0, 3)
        if user and self._jump_note:  # the note was about the window it leaves
            self._jump_note = ""
            self.keys_pane.object = _keys_html("")
        if user and self.on_user_window is not None:
            self.on_user_window()

    def nudge(self, seconds):
        self.set_window(self.state.window_start + seconds, user=True)

    def jump_to_slow(self):
        """Show the next slow step the window does not show yet, a fifth into the window.

        "Next" is after the window's end (after every slow step on screen): from a window's
        start, a run full of slow steps would find one a millisecond on and barely move.
        After the last one it wraps to the first; returns "moved", "wrapped" or "none"
        (no slow step, or every one is already on screen), also shown beside the keys.
        """
        starts = self.slow_starts()
        t0 = self.state.window_start
        end = t0 + WINDOW_S
        if not len(starts):
            return self._jumped("none")
        i = int(np.searchsorted(starts, end + 1e-6, side="right"))
        if i < len(starts):
            how, target = "moved", float(starts[i])
        else:
            how, target = "wrapped", float(starts[0])
            if t0 - 1e-6 <= target <= end + 1e-6:
                return self._jumped("none")
        self.set_window(target - WINDOW_S * 0.2, user=True)
        return self._jumped(how)

    def _jumped(self, how):
        note = {"moved": "", "wrapped": "back to the first slow step",
                "none": "no more slow steps beyond this window" if len(self.slow_starts()) else "no slow steps in this run"}[how]
        if note != self._jump_note:
            self._jump_note = note
            self.keys_pane.object = _keys_html(note)
        return how

    # ------------------------------------------------------------ playback

    def toggle(self):
        if self.playing:
            self.pause()
        else:
            self.play()

    def play(self):
        if self.playing:
            return
        if self.state.window_start >= self._end - WINDOW_S - 1e-6:
            self.set_window(0.0)
        self.playing = True
        self.play_button.name = "❚❚ Pause"
        self._timer = every(self._tick, TICK_MS)
        if self.after_toggle is not None:
            self.after_toggle()

    def pause(self):
        self.playing = False
        self.play_button.name = "▶ Play"
        if self._timer is not None:
            self._timer.stop()
            self._timer = None
        if self.after_toggle is not None:
            self.after_toggle()

    def _tick(self):
        if not self.playing:
            return
        step = SPEEDS[self.speed] * TICK_MS / 1000.0
        t0 = self.state.window_start + step
        last = max(self._end - WINDOW_S, 0.0)
        if t0 >= last:
            self.set_window(last)
            self.pause()
        else:
            self.set_window(t0)
