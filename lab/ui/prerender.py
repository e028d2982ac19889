"""The lab page's first view as static HTML + inline SVG, built at build time in CPython.

The static site's loader (static/site/loader.js) fetches prerender/ID[.embed].html at once
and puts it on screen, inert, while the Pyodide worker boots: a student sees the mission's
first simulation in well under a second, and the page's main thread stays free for the
live page (no BokehJS drawing a whole Panel document). The live document replaces it once
its first run is in.

It is the live page's first view, not a picture of it: the same deterministic run (same
scenario and seed: identical results in CPython and Pyodide), through the same functions
the live views use: the canvas's layers (`run_layers`, `step_layers` for the window's steps,
`overview_data`: the steps, their colours, the rows' geometry and labels), `legend_html`,
`metrics_html` and `stars_html`; the window the live page opens at (`first_window`). The
controls show their starting values, as real controls, disabled until the worker can answer
them (early_page.py, which draws the view again after each change with `view_html`). None of
it imports Panel or Bokeh (numpy, param and the lab's state only; a test holds it), so the
view can also be drawn in the browser before Panel's import is over.

Only a mission at its starting controls gets one (the address `?mission=ID`, optionally with
`embed=1`: the blog iframe's 700 x 760 layout is its own file). Any other address loads the
normal way; so does a file that is missing, from another build or unreadable (loader.js).

    first_view_html(query, missions_dir=None, stamp="") -> str   (one page's file)
    view_html(state, catalog, query, embed, ...) -> str             (the same, of a state after its run)
    prerender_name(mission_id, embed=False) -> "prerender/ID[.embed].html"
"""

import html
import math
import re

import numpy as np

from lab.core.missions import CONTROL_SPECS

from .catalog import get_catalog
from .data.canvas_data import (AXIS_PX, EMBED_FRAME_MAX_PX, EMBED_ROW_PX, FRAME_LEFT_PX, FRAME_TOP_PX, LABEL_PX_PER_CHAR,
                               STRIP, WAIT, box_geometry, frame_px, max_rows, overview_data, row_geometry, rows_html,
                               run_layers, split_label, step_layers)
from .state import WINDOW_S
from .timeline.legend import keys_html, legend_html
from .url_state import is_embed, parse_search
from .views.control_html import EMBED_CONTROL_FLEX, carried_html, idle_hint_html, locked_html, slider_notches
from .views.metrics_html import STARS_CSS, metrics_html, run_error_html, stars_html
from .words.control_words import CHOICE_LABELS, format_value
from .words.figures import model_words
from .words.theme import HUB_CSS, PALETTE

__all__ = ["PRERENDER_FORMAT", "first_view_html", "first_window", "prerender_name", "view_html", "view_state"]

# Bumped when the file's shape changes; loader.js ignores a file with another format.
PRERENDER_FORMAT = 3
FIRST_WINDOW_MAX_S = 10.0  # the live page opens its window here, or a quarter into the arrivals (app.LabApp._simulate)


def prerender_name(mission_id, embed=False):
    """The file a page's first view is written to (relative to the site): prerender/ID[.embed].html."""
    return f"prerender/{mission_id}{'.embed' if embed else ''}.html"


def first_window(result):
    """Where the live page's first window starts (LabApp._simulate, clamped like Canvas.set_window)."""
    end = max(result.end_time, WINDOW_S)
    t0 = min(FIRST_WINDOW_MAX_S, result.arrivals_end * 0.25)
    return round(float(min(max(t0, 0.0), max(end - WINDOW_S, 0.0))), 3)


def view_state(query, missions_dir=None):
    """(The LabState of lab.html?QUERY after its first run, simulated and judged as the live page has it, the catalog)."""
    from .state import LabState

    catalog = get_catalog(missions_dir)
    state = LabState.from_query(catalog, "?" + query)
    if state.simulate():
        if "t" not in parse_search("?" + query):
            state.window_start = first_window(state.result)
        state.finish()
    return state, catalog


# ---------------------------------------------------------------- the canvas as SVG

def _n(x):
    """A coordinate in the SVG, short: 0.001 % of the window or 0.01 px is finer than any pixel."""
    return f"{x:.3f}".rstrip("0").rstrip(".") if math.isfinite(x) else "0"


class _Frame:
    """The plot area's coordinates: x in % of the window (the SVG stretches with the card, as the
    live figure does), y in px (its height is fixed per mission), so strokes and the red steps'
    hatching are drawn in real pixels."""

    def __init__(self, lo, rows, frame):
        self.lo, self.rows, self.frame = lo, rows, frame

    def x(self, t):
        return (t - self.lo) / WINDOW_S * 100.0

    def y(self, row):
        return (row + 0.5) * self.frame / self.rows


def _in_window(cols, lo, hi):
    left = np.asarray(cols["left"], dtype=float)
    right = np.asarray(cols.get("right", cols["left"]), dtype=float)
    return (right >= lo) & (left <= hi)


def _clip(f, left, right):
    """A box's x and width in %, cut to just beyond the window (what is off it costs bytes, shows nothing)."""
    a, b = f.x(max(left, f.lo - 0.01)), f.x(min(right, f.lo + WINDOW_S + 0.01))
    return a, max(b - a, 0.0)


def _rects(cols, f, top, height, cls, row_attr=False):
    """<rect>s for a layer's boxes in the window; `top(y)` gives a box's top (row units)."""
    keep = _in_window(cols, f.lo, f.lo + WINDOW_S)
    out = []
    h = height * f.frame / f.rows
    for left, right, y in zip(np.asarray(cols["left"], float)[keep], np.asarray(cols["right"], float)[keep],
                              np.asarray(cols["y"], float)[keep]):
        x, w = _clip(f, left, right)
        row = f' data-row="{int(y)}"' if row_attr else ""
        out.append(f'<rect class="{cls}"{row} x="{_n(x)}%" y="{_n(f.y(top(y)))}" width="{_n(w)}%" height="{_n(h)}"/>')
    return out


def _quads(cols, f, cls):
    """A layer of areas (queue rows, KV bands, role tints) in the window, as <rect>s."""
    keep = _in_window(cols, f.lo, f.lo + WINDOW_S)
    out = []
    for left, right, top, bottom in zip(*(np.asarray(cols[c], float)[keep] for c in ("left", "right", "top", "bottom"))):
        x, w = _clip(f, left, right)
        y0, y1 = f.y(min(top, bottom)), f.y(max(top, bottom))
        out.append(f'<rect class="{cls}" x="{_n(x)}%" y="{_n(y0)}" width="{_n(w)}%" height="{_n(y1 - y0)}"/>')
    return out


def _bounds_path(cols, f, offset):
    """The white ticks at step boundaries inside decode runs (canvas._bound_ticks: x, top, bottom, NaN)."""
    xs = np.asarray(cols["left"], float)
    ys = np.asarray(cols["y"], float)
    out = []
    for i in range(0, len(xs) - 1, 3):
        if f.lo <= xs[i] <= f.lo + WINDOW_S:
            x = _n(f.x(xs[i]))
            out.append(f'<line x1="{x}%" x2="{x}%" y1="{_n(f.y(ys[i] + offset))}" y2="{_n(f.y(ys[i + 1] + offset))}"/>')
    return f'<g class="bounds">{"".join(out)}</g>' if out else ""


def _ticks(t0):
    """The time axis's ticks in the window: every 0.5 s, labelled with one decimal (as Bokeh's
    ticker and formatter do for a 2.5 s range)."""
    first = math.ceil(t0 / 0.5 - 1e-9) * 0.5
    ticks = []
    t = first
    while t <= t0 + WINDOW_S + 1e-9:
        ticks.append(round(t, 3))
        t += 0.5
    return ticks


SVG_CSS = """
.stf-fv-plot { position: relative; background: #fbfcfe; }
.stf-fv-plot svg { position: absolute; inset: 0; width: 100%%; height: 100%%; display: block; }
rect.decode { fill: %(decode)s; stroke: #fff; stroke-width: .6; }
rect.prefill { fill: %(prefill)s; stroke: #fff; stroke-width: .6; }
rect.slow { fill: url(#stf-fv-hatch); stroke: %(slow_edge)s; stroke-width: 1.3; }
rect.strip { fill: %(prefill)s; }
rect.wire { fill: %(link)s; fill-opacity: .85; stroke: #fff; stroke-width: .6; }
rect.wait, .queue, .link_q { fill: %(link_wait)s; }
.room_q, .kv { fill: %(kv)s; }
.kv_track { fill: %(kv_track)s; stroke: %(kv_edge)s; stroke-width: .8; }
.bounds line { stroke: #fff; stroke-width: .6; }
.role_prefill { fill: %(prefill)s; fill-opacity: .16; } .role_decode { fill: %(decode)s; fill-opacity: .12; }
.role_switching { fill: %(link_wait)s; fill-opacity: .35; stroke: %(muted)s; stroke-width: .8; }
line.grid { stroke: %(grid)s; stroke-width: 1; }
.stf-fv-axis { position: relative; height: %(axis)dpx; font-size: 12px; color: %(ink)s; }
.stf-fv-axis span { position: absolute; top: 4px; transform: translateX(-50%%); }
.stf-fv-axis .name { left: 50%%; top: 24px; color: %(muted)s; }
""" % {**PALETTE, "axis": AXIS_PX}


def canvas_html(state, embed):
    """The timeline as the live canvas shows it at its first window: the row labels' gutter and
    the plot area (an SVG in row and second units, stretched to the card's width)."""
    rows_max, longest = max_rows(state.mission)
    frame = frame_px(rows_max, EMBED_ROW_PX, EMBED_FRAME_MAX_PX) if embed else frame_px(rows_max)
    gutter = int(len(split_label(longest)[0]) * LABEL_PX_PER_CHAR) + 14
    result = state.result
    if result is None:
        return ""
    lo = state.window_start
    hi = lo + WINDOW_S
    # The live canvas's layers (timeline_data's parts): the steps of the window only, as the
    # live page builds them too (step_range: the same boxes there as the whole run's).
    target = state.scenario.slo.per_token_target_ms
    data = dict(run_layers(result, frame))
    data.update(step_layers(result, target, data["meta"], (lo, hi)))
    data["overview"] = overview_data(result, target)[0]
    meta = data["meta"]
    n = meta["rows"]
    half, font = row_geometry(n, frame)
    geo = box_geometry(half)
    f = _Frame(lo, n, frame)
    step_top = lambda y: y + geo["step_offset"] - geo["step_height"] / 2  # noqa: E731
    strip_h = geo["step_height"] * STRIP
    strip_top = lambda y: y + geo["step_offset"] + geo["step_height"] * (1 - STRIP) / 2 - strip_h / 2  # noqa: E731
    shapes = []
    for name in ("role_prefill", "role_decode", "role_switching", "kv_track", "kv", "queue", "link_q", "room_q"):
        shapes += _quads(data[name], f, name)
    for t in _ticks(lo):
        shapes.append(f'<line class="grid" x1="{_n(f.x(t))}%" x2="{_n(f.x(t))}%" y1="0" y2="{frame}"/>')
    shapes += _rects(data["decode"], f, step_top, geo["step_height"], "decode", row_attr=True)
    shapes.append(_bounds_path(data["bounds"], f, geo["step_offset"]))
    shapes += _rects(data["slow"], f, step_top, geo["step_height"], "slow", row_attr=True)
    shapes += _rects(data["prefill"], f, step_top, geo["step_height"], "prefill", row_attr=True)
    shapes += _rects(data["strip"], f, strip_top, strip_h, "strip")
    shapes += _rects(data["wait"], f, lambda y: y - half * WAIT, 2 * half * WAIT, "wait")
    shapes += _rects(data["wire"], f, lambda y: y - half, 2 * half, "wire")
    slow_rows = {}
    keep = _in_window(data["slow"], lo, hi)
    for y in np.asarray(data["slow"]["y"], float)[keep]:
        slow_rows[int(y)] = slow_rows.get(int(y), 0) + 1
    labels = [meta["labels"][i] for i in range(n)]
    gpu_rows = [r for r in range(n) if r not in (0, meta["link_row"], meta["link_queue_row"])]
    slow_text = ", ".join(f"{split_label(labels[r])[0]}: {slow_rows.get(r, 0)}" for r in gpu_rows)
    alt = (f"GPU timelines from {lo:.1f} s to {hi:.1f} s of simulated time, one row per GPU: "
           f"blue decode steps, amber prefill work, red hatched steps over the per-token target "
           f"(slow steps in this window: {slow_text}).")
    # Bokeh's "/" hatch at scale 7: white lines, 45 degrees, 7 px apart.
    hatch = (f'<defs><pattern id="stf-fv-hatch" patternUnits="userSpaceOnUse" width="7" height="7" '
             f'patternTransform="rotate(45)"><rect width="7" height="7" fill="{PALETTE["slow"]}"/>'
             f'<line x1="0" y1="0" x2="0" y2="7" stroke="#fff" stroke-opacity=".75" stroke-width="2.4"/></pattern></defs>')
    svg = (f'<svg role="img" aria-labelledby="stf-fv-alt" data-slow-rows=\'{_slow_json(slow_rows, gpu_rows)}\'>'
           f'<title id="stf-fv-alt">{html.escape(alt)}</title>{hatch}{"".join(s for s in shapes if s)}</svg>')
    ticks = "".join(f'<span style="left:{(t - lo) / WINDOW_S * 100:.3f}%">{t:.1f}</span>' for t in _ticks(lo))
    return (f'<div class="stf-fv-canvas" style="display:flex;align-items:flex-start">'
            f'<div class="stf-fv-gutter" style="width:{gutter}px;height:{frame + AXIS_PX}px;flex:none;position:relative">'
            f'{rows_html(labels, frame, font)}</div>'
            f'<div style="flex:1 1 auto;min-width:150px;padding:{FRAME_TOP_PX}px 16px 0 {FRAME_LEFT_PX}px;background:#fff">'
            f'<div class="stf-fv-plot" style="height:{frame}px">{svg}</div>'
            f'<div class="stf-fv-axis" aria-hidden="true">{ticks}<span class="name">simulated time (s)</span></div>'
            f'</div></div>' + _overview_html(data["overview"], result, lo, gutter))


def _slow_json(slow_rows, gpu_rows):
    return "{" + ",".join(f'"{r}":{slow_rows.get(r, 0)}' for r in gpu_rows) + "}"


def _overview_html(overview, result, lo, gutter):
    """The whole-run overview under the timeline: busy (light) and slow (red) share per bin, the window boxed."""
    end = max(result.end_time, WINDOW_S)
    xs = np.asarray(overview["x"], float)
    width = (xs[1] - xs[0]) if len(xs) > 1 else end
    lefts = xs - width * 0.46
    bars = []
    for values, colour in ((np.asarray(overview["busy"], float), "#c7d6e6"), (np.asarray(overview["slow"], float), PALETTE["slow"])):
        # One path per layer (a bar is "M x bottom v -h h w v h z"): 240 bins as rects would be most of the file.
        d = "".join(f"M{_n(x)} 1.02v{_n(-v)}h{_n(width * 0.92)}v{_n(v)}z" for x, v in zip(lefts, values) if v > 0)
        if d:
            bars.append(f'<path d="{d}" fill="{colour}"/>')
    box = (f'<rect x="{_n(lo)}" y="0" width="{WINDOW_S}" height="1.02" fill="{PALETTE["ink"]}" fill-opacity=".12" '
           f'stroke="{PALETTE["ink"]}" stroke-opacity=".8" stroke-width="1.5" vector-effect="non-scaling-stroke"/>')
    return (f'<div style="padding:2px 16px 18px {gutter + FRAME_LEFT_PX}px;height:44px;background:#fff" aria-hidden="true">'
            f'<div class="stf-fv-plot" style="height:44px;outline:1px solid #dde2ea">'
            f'<svg viewBox="0 0 {_n(end)} 1.02" preserveAspectRatio="none">{"".join(bars)}{box}</svg></div></div>')


# ---------------------------------------------------------------- the rest of the page

def _control_value(name, value):
    if name in CHOICE_LABELS:
        return CHOICE_LABELS[name].get(value, format_value(value))
    return format_value(value)


def controls_html(state, embed=False, note=""):
    """The mission's controls at their values, as the sidebar shows them: a choice as its
    buttons (the chosen one filled), a slider as its value and bar, a control that does nothing
    in this layout greyed with the line saying when it matters, the reset button, the locked
    settings. Real buttons and range inputs (`data-control`, each button's `data-value` and
    the input's value as the address writes them; the reset button's `data-reset`), all
    disabled: loader.js enables the live ones once the worker can answer them (early_page.py);
    a greyed one stays disabled. Under them, as on the live page, `note` (a refused change's,
    refusal_html) and the tp controls a layout switch set too."""
    items = []
    idle = []
    for name, control in state.mission.controls.items():
        label = control.label or CONTROL_SPECS[name][1]
        value = state.settings.get(name)
        grey = "" if state.applies(name) else " idle"
        if grey:
            idle.append((name, label))
        if control.kind == "choice":
            caption = "" if name == "layout" else f'<div class="stf-fv-label">{html.escape(label)}:</div>'
            buttons = "".join(
                f'<button type="button" class="stf-fv-btn{" on" if c == value else ""}" '
                f'data-value="{html.escape(format_value(c))}" aria-pressed="{"true" if c == value else "false"}" '
                f'disabled>{html.escape(_control_value(name, c))}</button>'
                for c in control.choices)
            items.append(f'<div class="stf-fv-control{grey}" data-control="{name}">{caption}'
                         f'<div class="stf-fv-group" role="group" aria-label="{html.escape(label)}">{buttons}</div></div>')
        else:
            lo, hi, step = slider_notches(state.mission, state.scenario, state.settings, name)
            share = 0.0 if hi <= lo or value is None else (float(value) - lo) / (hi - lo)
            shown = html.escape(_control_value(name, value))
            items.append(f'<div class="stf-fv-control{grey}" data-control="{name}"><label class="stf-fv-label" '
                         f'for="stf-fv-{name}">{html.escape(label)}: <b>{shown}</b></label>'
                         f'<div class="stf-fv-slider"><span style="width:{max(0.0, min(1.0, share)) * 100:.1f}%">'
                         f'</span><input type="range" id="stf-fv-{name}" min="{format_value(lo)}" max="{format_value(hi)}" '
                         f'step="{format_value(step)}" value="{html.escape(format_value(value))}" '
                         f'aria-valuetext="{shown}" disabled></div></div>')
    hint = idle_hint_html(state.scenario, idle)
    hint = f'<div style="margin:0 10px 2px 10px">{hint}</div>' if hint else ""
    hint += "".join(f'<div style="margin:4px 10px">{part}</div>' for part in (note, carried_html(state)) if part)
    # (greyed at the mission's start, where it has nothing to undo, as on the live page; disabled
    # until loader.js enables it with the controls: early_page.RESET)
    at_start = ' aria-disabled="true"' if state.is_start else ""
    reset = f'<button type="button" class="stf-fv-btn stf-fv-reset" data-reset{at_start} disabled>↺ Back to the start</button>'
    locked = locked_html(state, compact=embed)
    locked = f'<div style="margin:6px 10px 0 10px">{locked}</div>' if locked else ""
    wrap = ' style="display:flex;flex-wrap:wrap"' if embed else ""
    return f'<div class="stf-fv-controls"{wrap}>{"".join(items)}</div>{hint}{reset}{locked}'


def _status_html(state, embed=False, early=False):
    """The canvas card's status line, without the run's wall-clock time (the live page shows its own);
    `early`: the run was made in the browser just now (early_page.py), not at build time."""
    m = state.metrics or {}
    if state.result is None or not m:
        return '<span class="stf-status" data-busy="false"></span>'
    return (f'<span class="stf-status" data-busy="false" data-run="{state.run_id}" data-model="{state.scenario.model.cost}">'
            f'{m.get("requests", 0):,} requests over {state.result.end_time:,.0f} s'
            f'{"" if embed else ", simulated while the lab loads" if early else ", simulated in advance"}'
            f' · {model_words(state.scenario.model, short=True)}</span>')


def _progress_tools(embed):
    """The progress-code buttons under the stars (stars_bridge.ProgressTools), in their place."""
    width = 150 if embed else 170
    return (f'<div class="stf-fv-bar" style="margin:0;gap:8px"><span class="stf-fv-btn plain" style="width:{width - 18}px">'
            f'Copy my progress</span><span class="stf-fv-input" style="width:{(180 if embed else 220) - 18}px">Paste a progress '
            f'code</span><span class="stf-fv-btn plain" style="width:{width - 38}px">Paste progress</span></div>')


def _head_stars(state):
    total = len(state.mission.stars)
    if not total:
        return ""
    glyphs = "".join("<span>☆</span>" for _ in range(total))
    return (f'<div class="stf-head-stars" data-earned="0"><span class="stars" aria-label="0 of {total} stars earned">'
            f'{glyphs}</span><small>0/{total}</small></div>')


PAGE_CSS = """
.stf-first { font-family: Helvetica, Arial, sans-serif; font-size: 12px; color: %(ink)s; background: %(page)s;
             min-height: 100vh; }  /* Panel's font, which the live panes end up in */
.stf-first h1, .stf-stars-pane { line-height: 1.43; }  /* ... and its line height where the panes keep it */
.stf-fv-card { background: #fff; border: 1px solid #dde2ea; border-radius: 10px; }
.stf-fv-body { display: flex; flex-wrap: wrap; gap: 14px; align-items: flex-start; margin: 6px 8px 16px 8px; }
.stf-fv-side { flex: 0 1 340px; min-width: min(280px, 100%%); }
.stf-fv-main { flex: 1 1 560px; min-width: min(300px, 100%%); }
.stf-fv-control { margin: 4px 10px 0 10px; font-size: 12px; }
.stf-fv-control.idle { opacity: .5; }
.stf-fv-embed .stf-fv-control { flex: %(flex)s; }
.stf-fv-reset { display: inline-block; margin: 8px 10px 4px 10px; width: 150px; border-color: #ccc;
                color: %(ink)s; border-radius: 4px; }
.stf-fv-reset:disabled, .stf-fv-reset[aria-disabled="true"] { opacity: .5; }
.stf-fv-label { margin: 4px 0; overflow-wrap: anywhere; }  /* a control's label, as .bk-slider-title */
.stf-fv-group { display: flex; flex-wrap: wrap; }
.stf-fv-btn { flex: 1 1 auto; text-align: center; padding: 8px 8px;  /* 31 px tall, as Bokeh's buttons */ border: 1px solid #0072B2; color: #0072B2;
              margin-right: -1px; font-size: 13px; }
.stf-fv-btn:first-child { border-radius: 4px 0 0 4px; } .stf-fv-btn:last-child { border-radius: 0 4px 4px 0; }
.stf-fv-btn.on { background: #0072B2; color: #fff; }
.stf-fv-slider { position: relative; height: 6px; background: #e6e9ef; border-radius: 3px; margin: 8px 0 12px; }
.stf-fv-slider span { display: block; height: 100%%; background: %(decode)s; border-radius: 3px; }
/* the range input lies over the bar, unseen: the bar is what shows, the input what takes the mouse and keys */
.stf-fv-slider input { position: absolute; left: 0; top: -8px; width: 100%%; height: 22px; margin: 0; opacity: 0;
                       cursor: pointer; }
.stf-fv-slider input:disabled { cursor: default; }
.stf-fv-slider:focus-within { outline: 2px solid #0072B2; outline-offset: 5px; }
button.stf-fv-btn { font: inherit; font-size: 13px; background: #fff; cursor: pointer; }
button.stf-fv-btn.on { background: #0072B2; }
button.stf-fv-btn:disabled { cursor: default; }  /* not greyed: it shows what runs, and goes live in a moment */
button.stf-fv-btn:focus-visible { outline: 2px solid #0072B2; outline-offset: 2px; z-index: 1; }
.stf-fv-bar { display: flex; flex-wrap: wrap; align-items: center; gap: 6px; margin: 4px 12px; min-height: 40px;
              font-size: 13px; }
.stf-fv-bar .stf-fv-btn { flex: none; border-radius: 4px; }
.stf-fv-btn.plain { border-color: transparent; color: %(ink)s; }
.stf-fv-input { flex: none; border: 1px solid #ccc; border-radius: 4px; padding: 6px 8px; color: #757575; }
.stf-fv-embed .stf-fv-body { gap: 8px; margin: 0; }
.stf-fv-embed .stf-fv-side { flex: 1 1 200px; min-width: min(190px, 100%%); max-width: 100%%; }
.stf-fv-embed .stf-fv-main { flex: 3 1 340px; min-width: min(300px, 100%%); }
""" % {**PALETTE, "flex": EMBED_CONTROL_FLEX}


def _scoped(css):
    """The panes' shadow-root CSS for one shadow root: `:host` is the view's root, and the
    compact variants (`:host(.X)`) are classes on wrappers."""
    return re.sub(r":host\((\.[\w-]+)\)", r"\1", css).replace(":host", ".stf-first")


def first_view_html(query, missions_dir=None, stamp=""):
    """lab.html?QUERY's first view: one HTML fragment (with its own styles) that loader.js puts
    in a shadow root. The root carries the stamp and format loader.js checks, and the query."""
    state, catalog = view_state(query, missions_dir)
    return view_html(state, catalog, query, is_embed(parse_search("?" + query)), stamp)


def view_html(state, catalog, query, embed, stamp="", early=False, note=""):
    """The view of a state after its run (first_view_html's, and early_page's after a change:
    `early`; `note`: a refused change's, under the controls)."""
    from .words.mission_text import brief_html, plain

    m = state.mission
    s = state.scenario
    kicker = catalog.kicker(m)
    title = plain(m.title)
    may_preempt = s.fleet.kv_policy == "on_demand" or "kv_policy" in m.controls
    roles = "planner" in m.controls or s.fleet.planner_on
    legend = legend_html(s.slo, embed, rejection=state.can_reject, preemptions=may_preempt, roles=roles)
    # Panel's margin (10 px) and the pane's own 4 px above a section's title
    section = lambda text: f'<div class="stf-section" style="margin:14px 10px 0 10px">{text}</div>'  # noqa: E731
    timelines = "GPU timelines" + ("" if embed else " · 2.5 s window")
    play_bar = ('<div class="stf-fv-bar"><span class="stf-fv-btn on">▶ Play</span>'
                + "".join(f'<span class="stf-fv-btn{" on" if k == "1×" else ""}">{k}</span>' for k in ("¼×", "1×", "4×", "10×"))
                + f'<div style="flex:1 1 160px;min-width:140px;margin:0 10px"><div>Window start (s): '
                f'<b>{state.window_start:.2f}</b></div><div class="stf-fv-slider"><span style="width:0"></span></div></div>'
                + '<span class="stf-fv-btn">Next slow step »</span></div>')
    keys = f'<div class="{"stf-keys-compact" if embed else ""}" style="margin:2px 10px 6px 10px">{keys_html("")}</div>'
    canvas_card = (f'<div class="stf-fv-card stf-canvas-card" style="margin:0 0 10px 0">'
                   f'<div style="display:flex;align-items:center;margin:4px"><div class="stf-section" style="margin:0">'
                   f'{timelines}</div><div style="margin:0 4px">{_status_html(state, embed, early)}</div></div>'
                   f'<div style="margin:0 4px">{legend}</div>{canvas_html(state, embed)}{play_bar}{keys}</div>')
    metrics = (f'<div class="stf-metrics-pane{" stf-metrics-compact" if embed else ""}">'
               f'{metrics_html(state.metrics, s) if state.metrics else run_error_html(state.run_error) if state.run_error else ""}'
               '</div>')
    star_rows = stars_html(m, state.metrics, state.stars_now, state.saved_stars, counting=state.touched,
                           from_link=state.from_link)
    stars = (f'<div class="stf-stars-pane{" stf-stars-compact" if embed else ""}">{star_rows}</div>'
             + _progress_tools(embed))
    brief = f'<div class="stf-brief" style="margin:0 10px">{brief_html(m.brief)}</div>'
    if embed:
        head = (f'<div style="display:flex;align-items:center;margin:4px 10px 0 10px"><div class="stf-header">'
                f'<span class="stf-kicker">{html.escape(kicker)}</span><h1 class="stf-title" style="font-size:17px">'
                f'{title}</h1></div><span class="stf-spacer"></span>{_head_stars(state)}</div>')
        side = (f'<div class="stf-fv-side"><div class="stf-fv-card" style="margin:0 0 4px 0;padding:6px 10px">'
                f'<h2 class="stf-card-title" style="margin:0;font-size:14px">Brief</h2></div>'
                f'{controls_html(state, embed, note)}{section("Stars")}<div style="margin:2px 6px">{stars}</div></div>')
        body = f'<div class="stf-fv-body"><div class="stf-fv-side-wrap" style="display:contents">{side}</div>' \
               f'<div class="stf-fv-main">{canvas_card}{metrics}</div></div>'
        inner = f'<div style="margin:0 6px">{head}{body}</div>'
    else:
        nav_next = catalog.next_after(m)
        nav = f'<span>Next: {plain(nav_next.title)} →</span>' if nav_next else ""
        header = (f'<div style="background:#fff;border-bottom:1px solid #dde2ea"><div class="stf-header" '
                  f'style="margin:8px 16px 0 16px;padding-bottom:8px"><span class="stf-brand"><span class="logo" '
                  f'aria-hidden="true"></span>Split the Fleet</span><span>← All missions</span>'
                  f'<span class="stf-spacer"></span>{nav}</div></div>')
        title_row = (f'<div style="display:flex"><div style="margin:10px 10px 0 16px;flex:1 1 auto;min-width:0">'
                     f'<div class="stf-kicker">{html.escape(kicker)}</div><h1 class="stf-title">{title}</h1></div>'
                     f'<div style="margin:14px 16px 0 10px">{_head_stars(state)}</div></div>')
        side = (f'<div class="stf-fv-side stf-fv-card">{section("Brief")}{brief}{section("Controls")}'
                f'{controls_html(state, note=note)}{section("Stars")}<div style="margin:4px 10px">{stars}</div></div>')
        story = ('<div class="stf-fv-card stf-fv-bar" style="margin:0 0 10px 0">'
                 '<button type="button" class="stf-fv-btn" style="opacity:.5;width:250px" disabled>'
                 'Show the next missed request »</button>'
                 '<span class="stf-lock" style="flex:1 1 240px;margin:8px 6px">Click a request in the worst-gap plot, '
                 'or a step on the timelines, to see where its time went.</span></div>')
        body = f'<div class="stf-fv-body">{side}<div class="stf-fv-main">{canvas_card}{story}{metrics}</div></div>'
        inner = header + title_row + body
    styles = _scoped(HUB_CSS + STARS_CSS) + SVG_CSS + PAGE_CSS  # HUB_CSS: the panes' CSS and the header stars'
    return (f'<div class="stf-first{" stf-fv-embed" if embed else ""}" data-stamp="{html.escape(stamp)}" '
            f'data-format="{PRERENDER_FORMAT}" data-query="{html.escape(query)}">'
            f'<style>{styles}</style>{inner}</div>\n')
