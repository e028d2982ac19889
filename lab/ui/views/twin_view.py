"""Twin runs on the page: "Compare with…" pins a fleet, then now and pinned side by side.

The state runs the pinned fleet on the same requests (LabState.run_twin); this view shows
the two: the headline metrics with their change (better / worse / same in words, not only
colour), both blame bars, and one point per request, pinned (across) against now (up), by
TTFT or worst gap, with the diagonal: points above it got worse. The pure helpers
(`metric_deltas`, `request_pairs`, `fleet_phrase`, `compare_html`) are tested without a
browser; `TwinView` is the widgets. Like the plots, the app calls `update()` a moment
after the canvas (its data would delay the canvas's patch), and nothing is sent while
nothing is pinned.
"""

import html

import numpy as np
import panel as pn
from bokeh.models import ColumnDataSource, CustomJSTickFormatter, FixedTicker, Range1d
from bokeh.plotting import figure

from lab.core.missions import CONTROL_SPECS

from ..words.fleet_words import is_plain, pool_text
from .blame_view import BLAME_CSS, blame_bar_html
from ..words.figures import (NBSP, PER_REQUESTS, fmt_joules, fmt_metric, fmt_ms, fmt_seconds, fmt_share, fmt_usd,
                      fmt_watts)
from ..browser.panel_shims import Html
from ..url_state import fleet_settings
from ..words.control_words import control_words
from ..words.theme import CSS, PALETTE
from .plots import MIN_PLOT_PX, MAX_X_TICKS, _legend_below, _padded, _style, _swatch, log_ticks, thin_ticks

__all__ = ["TwinView", "metric_deltas", "request_pairs", "fleet_phrase", "compare_html", "twin_sentence", "TWIN_METRICS",
           "MEASURES", "TWIN_CSS"]

TWIN_PLOT_HEIGHT = 280
# Per compared metric: name (summarize's, or "missed" from the blame summary), label, +1 when more is
# better / -1 when less is, the value's format, the change's format (of a difference, sign added).
TWIN_METRICS = (
    ("slo_attainment", "Meeting the SLO", +1, fmt_share, lambda d: f"{d * 100:+.0f}{NBSP}pts"),
    ("missed", "Requests missed", -1, lambda v: f"{v:,}", lambda d: f"{d:+,}"),
    ("ttft_p99_s", "TTFT p99", -1, fmt_seconds, None),
    ("tpot_p99_ms", "TPOT p99", -1, fmt_ms, None),
    ("worst_gap_p99_ms", "Worst gap p99", -1, fmt_ms, None),
    ("goodput_rps_per_gpu", "Goodput per GPU", +1, lambda v: fmt_metric("goodput_rps_per_gpu", v), lambda d: f"{d:+.2f}"),
    ("gpus", "GPUs", -1, lambda v: f"{v:,}", lambda d: f"{d:+,}"),
    ("usd_per_good_request", f"Cost per {PER_REQUESTS:,} good requests", -1, lambda v: fmt_usd(v * PER_REQUESTS), None),
    ("usd_per_hour", "Cost per hour", -1, fmt_usd, None),
    ("energy_j_per_token", "Energy per token", -1, fmt_joules, None),
    ("power_w_mean", "Mean power", -1, fmt_watts, None),
)
# How a request is compared: {toggle label: (row key, unit label, scale to the shown unit)}.
MEASURES = {"TTFT": ("ttft_s", "TTFT (s)", 1.0), "Worst gap": ("worst_gap_ms", "worst gap (ms)", 1.0)}
VERDICT_TEXT = {"better": "✓ better", "worse": "✗ worse", "same": "= same"}
REL_SAME = 1e-6  # a request's two values within this share of each other are "the same"

TWIN_CSS = BLAME_CSS + """
.stf-twin-head { display: flex; flex-wrap: wrap; align-items: baseline; gap: 2px 10px; font-size: 13px; }
.stf-twin-head b { font-weight: 650; }
.stf-twin-head .hint { color: var(--muted); font-size: 12px; }
.stf-twin-fleets { font-size: 12.5px; margin: 2px 0 6px; display: grid; gap: 1px; }
.stf-twin-fleets .who { display: inline-block; min-width: 52px; font-weight: 600; }
.stf-twin-table { border-collapse: collapse; font-size: 12.5px; font-variant-numeric: tabular-nums; width: 100%; }
.stf-twin-table caption { text-align: left; font-size: 12px; color: var(--muted); padding-bottom: 3px; }
.stf-twin-table th, .stf-twin-table td { padding: 3px 6px; border-bottom: 1px solid #e6e9ef; text-align: right;
                                         white-space: nowrap; }
.stf-twin-table th[scope="row"], .stf-twin-table thead th:first-child { text-align: left; font-weight: 600; }
.stf-twin-table thead th { font-weight: 600; color: var(--muted); font-size: 11.5px; }
.stf-twin-table td.better { color: var(--good); font-weight: 600; }
.stf-twin-table td.worse { color: var(--bad); font-weight: 600; }
.stf-twin-table td.same { color: var(--muted); }
.stf-twin-table td .why { display: block; font-size: 11px; font-weight: 500; }
.stf-twin-blames { display: grid; grid-template-columns: repeat(auto-fit, minmax(min(240px, 100%), 1fr)); gap: 8px;
                   margin-top: 8px; }
.stf-twin-counts { font-size: 12.5px; }
.stf-twin-counts .worse { color: var(--bad); font-weight: 600; }
.stf-twin-counts .better { color: var(--good); font-weight: 600; }
.stf-twin-wrap { overflow-x: auto; }
"""


def fleet_phrase(scenario):
    """A fleet in a few words: "4 colocated GPUs, whole prefill", "3 prefill + 1 decode GPUs, 25 GB/s link";
    a fleet built of more than plain H100s says of what ("2 × H100 in TP 2 prefill + 4 × A100 in TP 4 decode")."""
    f = scenario.fleet
    pools = scenario.pools()
    plain = is_plain(scenario)
    if f.layout == "colocated":
        chunk = f"{f.chunk_tokens:,}-token prefill chunks" if f.chunk_tokens else "whole prefill"
        gpus = f"{f.total_gpus} colocated GPUs" if plain else f"{pool_text(pools[0])} colocated"
        return f"{gpus}, {chunk}"
    split = (f"{f.prefill_gpus} prefill + {f.decode_gpus} decode GPUs" if plain
             else f"{pool_text(pools[0])} prefill + {pool_text(pools[1])} decode")
    return f"{split}, {f.link.gbytes_per_s:g} GB/s link"


def _diff(value, fmt, change):
    if change is not None:
        text = change(value)
        return "−" + text[1:] if text.startswith("-") else text  # a minus sign, as below
    return ("+" if value > 0 else "−" if value < 0 else "±") + fmt(abs(value))


def metric_deltas(now, pinned, now_missed=None, pinned_missed=None):
    """[{name, label, pinned, now, change, verdict}] for TWIN_METRICS: the values formatted,
    change = now − pinned, verdict "better", "worse", "same" (equal as shown) or None (a value
    missing). `now` / `pinned`: summarize() dicts; `*_missed`: the blame summaries' counts."""
    out = []
    for name, label, better, fmt, change in TWIN_METRICS:
        a = pinned_missed if name == "missed" else pinned.get(name)
        b = now_missed if name == "missed" else now.get(name)
        row = {"name": name, "label": label, "pinned": "—" if a is None else fmt(a),
               "now": "—" if b is None else fmt(b), "change": "", "verdict": None}
        if a is not None and b is not None:
            if row["pinned"] == row["now"]:
                row["verdict"] = "same"
                row["change"] = "no change"
            else:
                row["verdict"] = "better" if (b - a) * better > 0 else "worse"
                row["change"] = _diff(b - a, fmt, change)
        out.append(row)
    return out


def request_pairs(pinned_rows, now_rows, key):
    """Per request, pinned (x) against now (y) for row `key` ("ttft_s" or "worst_gap_ms"):
    {"worse"|"better"|"same": {x, y, id}} (numpy arrays; requests without the value on either
    side are left out) and "counts". The two runs have the same requests (the same ids)."""
    by_id = {r["id"]: r[key] for r in pinned_rows}
    ids, xs, ys = [], [], []
    for r in now_rows:
        a, b = by_id.get(r["id"]), r[key]
        if a is not None and b is not None:
            ids.append(r["id"])
            xs.append(a)
            ys.append(b)
    x = np.asarray(xs, float)
    y = np.asarray(ys, float)
    ids = np.asarray(ids, np.int64)
    tol = REL_SAME * np.maximum(np.abs(x), np.abs(y))
    worse = (y - x) > tol
    better = (x - y) > tol
    same = ~(worse | better)
    out = {}
    for name, mask in (("worse", worse), ("better", better), ("same", same)):
        out[name] = {"x": x[mask], "y": y[mask], "id": ids[mask]}
    out["counts"] = {name: int(out[name]["x"].size) for name in ("worse", "better", "same")}
    return out


def _changed(state):
    """The fleet settings the student moved since pinning: [(label, pinned value, now value)]."""
    now = fleet_settings(state.settings)
    out = []
    for name, value in (state.pin or {}).items():
        if name in now and now[name] != value and state.mission.controls.get(name) is not None:
            label = state.mission.controls[name].label or CONTROL_SPECS[name][1]
            out.append((label, control_words(name, value), control_words(name, now[name])))
    return out


def compare_html(state):
    """The comparison for a pinned state: the two fleets, the metric table, both blame bars."""
    twin = state.twin
    what = "the mission start" if state.pinned_start else "the fleet you pinned"
    if state.twin_error:
        return ('<div class="stf-notes stf-error" role="alert" data-twin-error="true"><b>The pinned fleet could not '
                f'run.</b> {html.escape(state.twin_error)}</div>')
    if state.run_error:
        return '<div class="stf-twin-fleets">This fleet\'s run failed (see above), so there is nothing to compare yet.</div>'
    if twin is None or not state.metrics:
        return '<div class="stf-twin-fleets" aria-busy="true">Running the pinned fleet…</div>'
    changed = _changed(state)
    moved = ("; ".join(f"{html.escape(lab)}: {html.escape(a)} → {html.escape(b)}" for lab, a, b in changed)
             if changed else "nothing yet: change a control to compare")
    fleets = (f'<div class="stf-twin-fleets"><span><span class="who">Pinned</span> {html.escape(fleet_phrase(twin["scenario"]))} '
              f'({what})</span><span><span class="who">Now</span> {html.escape(fleet_phrase(state.scenario))}</span>'
              f'<span class="hint" style="color:var(--muted)">Changed since the pin: {moved}</span></div>')
    rows = metric_deltas(state.metrics, twin["metrics"], state.blame_summary.get("missed"),
                         twin["blame_summary"].get("missed"))
    body = "".join(
        f'<tr data-metric="{r["name"]}" data-verdict="{r["verdict"] or ""}"><th scope="row">{html.escape(r["label"])}</th>'
        f'<td>{r["pinned"]}</td><td>{r["now"]}</td>'
        f'<td class="{r["verdict"] or ""}">{r["change"] if r["verdict"] != "same" else ""}'
        f'<span class="why">{VERDICT_TEXT.get(r["verdict"], "")}</span></td></tr>'
        for r in rows
    )
    n = len(state.rows)
    table = (f'<div class="stf-twin-wrap"><table class="stf-twin-table"><caption>Now against the pinned fleet, on the same '
             f'{n:,} requests</caption><thead><tr><th scope="col">metric</th><th scope="col">pinned</th>'
             f'<th scope="col">now</th><th scope="col">change</th></tr></thead><tbody>{body}</tbody></table></div>')
    blames = (f'<div class="stf-twin-blames">'
              f'{blame_bar_html(twin["blame_summary"], total=len(twin["rows"]), title="Pinned: why requests missed", key="pinned")}'
              f'{blame_bar_html(state.blame_summary, total=n, title="Now: why requests missed", key="now")}</div>')
    return f'<div class="stf-twin" data-twin="{state.twin_id}" data-run="{state.run_id}">{fleets}{table}{blames}</div>'


def twin_sentence(state):
    """For the live region after a run while pinned: the SLO share pinned and now, in words ('' otherwise)."""
    if state.pin is None or state.twin is None or not state.metrics or state.run_error:
        return ""
    row = metric_deltas(state.metrics, state.twin["metrics"])[0]  # slo_attainment
    verdict = {"better": "better", "worse": "worse", "same": "the same"}.get(row["verdict"], "")
    return f"Against the pinned fleet: SLO met by {row['now']} now, {row['pinned']} pinned ({verdict})."


def counts_html(pairs, measure):
    c = pairs["counts"]
    total = sum(c.values())
    return (f'<div class="stf-twin-counts" data-worse="{c["worse"]}" data-better="{c["better"]}" data-same="{c["same"]}">'
            f'By {html.escape(measure)}, of {total:,} requests: <span class="worse">{c["worse"]:,} got worse</span> '
            f'(above the diagonal), <span class="better">{c["better"]:,} got better</span> (below it), '
            f'{c["same"]:,} the same.</div>')


class TwinView:
    """The "Compare with…" card: pin buttons, then (while pinned) the comparison and the scatter."""

    def __init__(self, state, on_pin, on_unpin, follow_runs=True):
        self.state = state
        self.measure = "TTFT"
        btn = {"button_type": "primary", "button_style": "outline", "margin": (2, 4)}
        self.pin_button = pn.widgets.Button(label="Pin this fleet", css_classes=["stf-pin-current"],
                                            description="Keep this fleet to compare: later runs also run it on the "
                                                        "same requests", **btn)
        self.start_button = pn.widgets.Button(label="Pin the mission start", css_classes=["stf-pin-start"],
                                              description="Compare with the fleet the mission starts with", **btn)
        self.unpin_button = pn.widgets.Button(label="Unpin", css_classes=["stf-unpin"], visible=state.pin is not None,
                                              description="Stop comparing", **btn)
        self.pin_button.on_click(lambda _e: on_pin("current"))
        self.start_button.on_click(lambda _e: on_pin("start"))
        self.unpin_button.on_click(lambda _e: on_unpin())
        self.head = Html("", stylesheets=[CSS, TWIN_CSS], margin=(6, 6, 0, 10), sizing_mode="stretch_width",
                                 css_classes=["stf-twin-head-pane"])
        self.compare = Html("", stylesheets=[CSS, TWIN_CSS], margin=(0, 10), sizing_mode="stretch_width",
                                    css_classes=["stf-twin-compare"])
        self.toggle = pn.widgets.RadioButtonGroup(options=list(MEASURES), value=self.measure, button_type="light",
                                                  margin=(4, 10), css_classes=["stf-twin-measure"])
        self.toggle.param.watch(self._on_measure, "value")
        self.counts = Html("", stylesheets=[CSS, TWIN_CSS], margin=(4, 10), sizing_mode="stretch_width",
                                   css_classes=["stf-twin-counts-pane"])
        self.src = {k: ColumnDataSource({"x": [], "y": [], "id": []}) for k in ("worse", "better", "same")}
        self.diag = ColumnDataSource({"x": [], "y": []})
        # The scatter's figure (some 85 Bokeh models) is made at the first pin: until then the
        # card shows no plot, and the page need not build it while the lab loads.
        self.fig = None
        self.plot = pn.pane.Bokeh(None, sizing_mode="stretch_width", margin=(0, 6), css_classes=["stf-twin-plot"])
        scatter = pn.Column(pn.Row(self.toggle, self.counts, sizing_mode="stretch_width", margin=0), self.plot,
                            sizing_mode="stretch_width", margin=0,
                            styles={"flex": "1 1 300px", "min-width": "min(280px, 100%)"})
        left = pn.Column(self.compare, sizing_mode="stretch_width", margin=0,
                         styles={"flex": "1 1 340px", "min-width": "min(280px, 100%)"})
        self.body = pn.FlexBox(left, scatter, gap="8px", flex_wrap="wrap", sizing_mode="stretch_width", margin=(0, 0, 8, 0),
                               visible=False, css_classes=["stf-twin-body"])
        buttons = pn.FlexBox(self.pin_button, self.start_button, self.unpin_button, flex_wrap="wrap", margin=(2, 6),
                             sizing_mode="stretch_width")
        self.view = pn.Column(self.head, buttons, self.body, sizing_mode="stretch_width", margin=(8, 0, 0, 0),
                              css_classes=["stf-twin-card"],
                              styles={"background": "#ffffff", "border": "1px solid #dde2ea", "border-radius": "10px"})
        self._shown = None  # (run_id, twin_id, measure) on screen
        if follow_runs:
            state.param.watch(lambda *_: self.update(), ["run_id", "twin_id"])
        self.update()

    def _figure(self):
        fig = figure(title="Per request: pinned vs now", height=TWIN_PLOT_HEIGHT, x_axis_type="log",
                     y_axis_type="log", sizing_mode="stretch_width", min_width=MIN_PLOT_PX, tools="hover",
                     x_axis_label="pinned: TTFT (s)", y_axis_label="now: TTFT (s)", name="twin_plot",
                     x_range=Range1d(0.1, 10), y_range=Range1d(0.1, 10))
        diag = {"line_color": PALETTE["ink"], "line_dash": "dashed", "line_width": 1}
        styles = {
            "worse": {"marker": "x", "size": 7, "line_color": PALETTE["slow"], "line_width": 1.6},
            "better": {"marker": "circle", "size": 5, "fill_color": PALETTE["decode"], "fill_alpha": 0.5,
                       "line_color": None},
            "same": {"marker": "circle", "size": 4, "fill_color": PALETTE["link_wait"], "fill_alpha": 0.5,
                     "line_color": None},
        }
        fig.line("x", "y", source=self.diag, **diag)
        renderers = [fig.scatter("x", "y", source=self.src[k], **styles[k]) for k in ("same", "better", "worse")]
        fig.hover.renderers = renderers
        fig.hover.tooltips = [("request", "@id"), ("pinned", "@x{0,0.000}"), ("now", "@y{0,0.000}")]
        # Three short entries: a wider legend would push a phone's page sideways (the diagonal is
        # named in the counts beside the plot).
        _legend_below(fig, [("got worse", _swatch(fig, "scatter", **styles["worse"])),
                            ("got better", _swatch(fig, "scatter", **styles["better"])),
                            ("same", _swatch(fig, "scatter", **styles["same"]))])
        label = "return tick >= 1 ? String(Math.round(tick)) : String(Number(tick.toPrecision(2)));"
        fig.xaxis.ticker = FixedTicker(ticks=log_ticks(0.1, 10))
        fig.yaxis.ticker = FixedTicker(ticks=log_ticks(0.1, 10))
        fig.xaxis.formatter = CustomJSTickFormatter(code=label)
        fig.yaxis.formatter = _padded(label)
        fig.css_classes = ["stf-twin-plot"]  # on the figure itself: the pane's class does not always reach the page
        return _style(fig)

    def _on_measure(self, event):
        self.measure = event.new
        self.update()

    def update(self):
        """Show the current pin, comparison and scatter (no-op when they are on screen already)."""
        s = self.state
        pinned = s.pin is not None
        key = (s.run_id, s.twin_id, self.measure, pinned)
        if key == self._shown:
            return
        self._shown = key
        if self.unpin_button.visible != pinned:
            self.unpin_button.visible = pinned
        if not pinned:
            self.head.object = ('<div class="stf-twin-head"><b>Compare with…</b><span class="hint">Pin a fleet, then '
                                'change the controls: both run on the same requests, side by side.</span></div>')
            if self.body.visible:
                self.body.visible = False
            return
        what = "the mission start" if s.pinned_start else "a fleet you pinned"
        self.head.object = (f'<div class="stf-twin-head" data-pinned="true"><b>Compared with {what}</b>'
                            '<span class="hint">Both fleets run on the same requests; change the controls to '
                            'compare.</span></div>')
        self.compare.object = compare_html(s)
        if self.fig is None:
            self.fig = self._figure()
            self.plot.object = self.fig
        ready = s.twin is not None and bool(s.rows)
        if ready:
            row_key, unit, _ = MEASURES[self.measure]
            pairs = request_pairs(s.twin["rows"], s.rows, row_key)
            for k in ("worse", "better", "same"):
                self.src[k].data = {c: np.maximum(pairs[k][c], 1e-3) if c != "id" else pairs[k][c] for c in ("x", "y", "id")}
            values = np.concatenate([np.concatenate([pairs[k]["x"], pairs[k]["y"]]) for k in ("worse", "better", "same")])
            values = values[values > 0]
            lo = float(values.min()) / 1.3 if values.size else 0.1
            hi = float(values.max()) * 1.3 if values.size else 10.0
            hi = max(hi, lo * 4)
            self.diag.data = {"x": [lo, hi], "y": [lo, hi]}
            self.fig.x_range.update(start=lo, end=hi)
            self.fig.y_range.update(start=lo, end=hi)
            ticks = log_ticks(lo, hi)
            self.fig.xaxis.ticker.ticks = thin_ticks(ticks, MAX_X_TICKS)
            self.fig.yaxis.ticker.ticks = ticks
            self.fig.xaxis.axis_label = f"pinned: {unit}"
            self.fig.yaxis.axis_label = f"now: {unit}"
            self.counts.object = counts_html(pairs, self.measure)
        else:
            self.counts.object = ""
        if not self.body.visible:
            self.body.visible = True
