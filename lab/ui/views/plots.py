"""Plots people would rather look at than read.

- Worst gap against prompt length: one mark per request (circle = met the SLO,
  cross = missed), log scale, with the per-token target as a line; a request early
  rejection turned away has no gap, so it is a triangle along the floor at its prompt length. A click on a mark goes to
  `on_pick(request id)` (its story, story.py), which rings it (`mark`).
- The inter-token-gap distribution: every token's gap, as a share of all tokens,
  on log-spaced bins; gaps over the per-token target are red, hatched.

The per-token target is `Slo.per_token_target_ms` (the max gap if set, else TPOT), the
one the canvas marks steps against.
- Goodput against request rate: a sweep, run on demand with progress shown.

Every legend entry has a legend-only renderer (one point at NaN), so its swatch shows
even when its series is empty (no request missed, no sweep yet). Log axes get 1-2-5
ticks; y-axis labels are padded to a fixed width, so new data never changes an axis's
size (which would re-lay out the whole page in the browser).
"""

import contextlib
import html
import math

import numpy as np
import panel as pn
from bokeh.events import Tap
from bokeh.models import (
    BasicTicker,
    ColumnDataSource,
    CustomJSTickFormatter,
    FixedTicker,
    HoverTool,
    Label,
    Legend,
    LegendItem,
    NoOverlap,
    Range1d,
    Span,
)
from bokeh.plotting import figure

from ..browser.lean_models import lean_figure
from ..browser.panel_shims import Html, one_model_walk
from ..words.theme import CSS, FONT_STACK, PALETTE
from ..data.plot_data import JITTER, gap_scatter_data, itl_histogram, token_gaps
from .story import nearest_point

__all__ = ["Plots", "gap_scatter_data", "itl_histogram", "token_gaps", "log_ticks", "thin_ticks", "strip_view",
           "MAX_X_TICKS"]

PLOT_HEIGHT = 230
MIN_PLOT_PX = 200  # a plot fits a 320 px phone
MAX_STRIPS = 6  # up to this many distinct prompt lengths get a tick each (a strip view)
MAX_X_TICKS = 5  # labels like "20k" or "500": five fit a MIN_PLOT_PX wide plot without touching
# Prompt lengths read as 800, 2.5k, 20k: short labels, so five fit the narrowest plot.
COMPACT_TOKENS_JS = """
    const a = Math.abs(tick);
    if (a >= 1e6) return Number((tick / 1e6).toPrecision(3)) + "M";
    if (a >= 1e3) return Number((tick / 1e3).toPrecision(3)) + "k";
    return String(Number(tick.toPrecision(3)));"""


def log_ticks(lo, hi):
    """Ticks for a log axis a person can read: 1, 2 and 5 times the powers of ten in
    [lo, hi]; more mantissas on a short range, the powers alone on a long one."""
    if not (lo > 0 and hi > lo and math.isfinite(lo) and math.isfinite(hi)):
        return [1, 10, 100, 1000]
    decades = range(int(math.floor(math.log10(lo))), int(math.ceil(math.log10(hi))) + 1)
    for mantissas in ((1, 2, 5), (1, 2, 3, 5, 7), tuple(range(1, 10))):
        ticks = []
        for k in decades:
            for m in mantissas:
                v = m * 10.0 ** k
                if lo <= v <= hi:
                    ticks.append(int(round(v)) if v >= 1 else round(v, 6))
        if len(ticks) >= 3:
            break
    if len(ticks) > 9:  # many decades: the powers of ten only
        ticks = [t for t in ticks if f"{t:g}".lstrip("0.").startswith("1")]
    if len(ticks) < 2:  # a sliver of a decade: evenly spaced round numbers
        step = 10.0 ** math.floor(math.log10((hi - lo) / 2))
        for factor in (1, 2, 5, 10):
            if (hi - lo) / (step * factor) <= 6:
                step *= factor
                break
        first = math.ceil(lo / step) * step
        ticks = [round(first + i * step, 9) for i in range(int((hi - first) / step + 1e-9) + 1)]
        ticks = [int(t) if float(t).is_integer() else t for t in ticks]
    return ticks


def thin_ticks(ticks, most):
    """At most `most` of `ticks`, so a narrow plot's labels never collide: the 1-2-5 marks of a
    log axis, then the 1-5 ones, then the powers of ten, else every k-th (the first kept)."""
    ticks = list(ticks)
    if len(ticks) <= most:
        return ticks
    for mantissas in ("125", "15", "1"):  # log ticks: the rounder marks first, then every k-th
        kept = [t for t in ticks if f"{t:.0e}"[0] in mantissas]
        if 2 <= len(kept) <= most:
            return kept
    if most <= 1:
        return ticks[:1]
    k = math.ceil((len(ticks) - 1) / (most - 1))
    return ticks[::k]


def strip_view(prompts):
    """The x range and ticks for prompt lengths that repeat (the scatter spreads them sideways):
    (start, end, ticks) around the few distinct lengths, or None when they vary enough for a
    plain axis. One length gives a strip: one tick, the jitter's width around it."""
    values = np.unique(np.asarray(prompts, float))
    if len(values) == 0 or len(values) > MAX_STRIPS:
        return None
    lo, hi = float(values[0]), float(values[-1])
    start, end = lo * (1 - JITTER * 2.5), hi * (1 + JITTER * 2.5)
    return max(0.0, start), end, [int(v) if float(v).is_integer() else float(v) for v in values]


def _padded(code, width=6):
    """A y-axis tick formatter whose labels are all `width` characters wide (figure spaces,
    as wide as a digit, in front): the axis then keeps its width whatever the ticks, and
    an axis that changes size makes Bokeh re-lay out the whole page, not just the plot."""
    return CustomJSTickFormatter(code="const text = (() => {%s})();\nreturn text.padStart(%d, \"\\u2007\");"
                                 % (code, width))


def _swatch(fig, method, **props):
    """A legend-only renderer: one point at NaN, which the plot never draws but the legend
    always can (a legend draws its swatch from the renderer's data, so a series with no
    points, e.g. no request missed, or no sweep yet, would otherwise get an empty swatch)."""
    source = ColumnDataSource({"x": np.array([np.nan]), "y": np.array([np.nan]),
                               "left": np.array([np.nan]), "right": np.array([np.nan]),
                               "top": np.array([np.nan])})
    if method == "quad":
        return fig.quad(source=source, left="left", right="right", bottom=0, top="top", **props)
    return getattr(fig, method)("x", "y", source=source, **props)


def _legend_below(fig, items):
    """A legend under the plot from [(label, legend-only renderer or renderers)]."""
    legend = Legend(items=[LegendItem(label=label, renderers=list(r) if isinstance(r, (list, tuple)) else [r])
                           for label, r in items])
    legend.orientation = "horizontal"
    legend.location = "center"
    legend.label_text_font_size = "11px"
    legend.padding = 0
    legend.margin = 2
    legend.spacing = 10
    legend.border_line_color = None
    legend.glyph_width = 14
    legend.label_standoff = 4
    fig.add_layout(legend, "below")


def _style(fig):
    fig.toolbar_location = None
    fig.outline_line_color = None
    fig.background_fill_color = "#fbfcfe"
    fig.xgrid.grid_line_color = PALETTE["grid"]
    fig.ygrid.grid_line_color = PALETTE["grid"]
    fig.title.text_font = FONT_STACK
    fig.title.text_font_size = "13px"
    fig.title.text_color = PALETTE["ink"]
    for ax in (fig.xaxis, fig.yaxis):
        ax.axis_label_text_font = FONT_STACK
        ax.axis_label_text_font_size = "11.5px"
        ax.axis_label_text_font_style = "normal"
        ax.axis_label_text_color = PALETTE["muted"]
        ax.major_label_text_font_size = "11px"
        ax.major_label_policy = NoOverlap(min_distance=6)  # a label that would touch its neighbour is left out
    fig.min_border_right = 14
    return lean_figure(fig)


class Plots:
    """The three plots; the sweep is driven by the app (it needs the event loop)."""

    def __init__(self, state, on_sweep, embed=False, follow_runs=True):
        """`follow_runs`: redraw after every run by watching the state; the lab page passes
        False and calls `update()` itself, a moment after the canvas had its turn."""
        self.state = state
        self.embed = embed
        self.gap_met = ColumnDataSource({"x": [], "y": [], "prompt": [], "id": []})
        self.gap_miss = ColumnDataSource({"x": [], "y": [], "prompt": [], "id": []})
        self.gap_rejected = ColumnDataSource({"x": [], "y": [], "prompt": [], "id": [], "pred": []}, name="gap-rejected")
        self.gap_pick = ColumnDataSource({"x": [], "y": []})  # a ring round the request whose story is open
        self.on_pick = None  # called with a request id when the student clicks its point (story.StoryView.show)
        self._marked = None
        self.hist_ok = ColumnDataSource({"left": [], "right": [], "share": []})
        self.hist_over = ColumnDataSource({"left": [], "right": [], "share": []})
        self.sweep_src = ColumnDataSource({"rate": [], "goodput": [], "ideal": [], "attainment": []})
        self._shown_sweep = None  # the sweep the plot shows (so a run does not resend it)
        # The figures (202 Bokeh models, a third of the page) are made when first needed, at the
        # first run's plots: the page's first document, built and drawn before the lab is live,
        # goes without them. Until then each pane keeps its figure's height.
        self._figs = None
        self.sweep_button = pn.widgets.Button(
            name="Sweep the request rate", button_type="primary", button_style="outline", margin=(4, 6),
            description="Re-run this fleet at 8 request rates and plot its goodput", css_classes=["stf-sweep"],
        )
        self.sweep_button.on_click(lambda _e: on_sweep())
        self.progress = pn.indicators.Progress(value=0, max=100, visible=False, width=140, margin=(12, 6),
                                               bar_color="primary", css_classes=["stf-sweep-progress"])
        self.sweep_note = Html("", stylesheets=[CSS], margin=(8, 6), sizing_mode="stretch_width",
                                       css_classes=["stf-sweep-note"])
        size = {"sizing_mode": "stretch_width", "margin": (0, 4)}
        self.gap_pane = gap_pane = pn.pane.Bokeh(None, min_height=PLOT_HEIGHT, **size)
        self.itl_pane = itl_pane = pn.pane.Bokeh(None, min_height=PLOT_HEIGHT, **size)
        self.sweep_pane = pn.pane.Bokeh(None, min_height=PLOT_HEIGHT - 40, **size)
        sweep_box = pn.Column(
            pn.Row(self.sweep_button, self.progress, self.sweep_note, sizing_mode="stretch_width", margin=0),
            self.sweep_pane, sizing_mode="stretch_width", margin=0,
        )
        if embed:
            self.view = pn.Tabs(("Worst gap", gap_pane), ("Gap distribution", itl_pane), ("Goodput vs rate", sweep_box),
                                sizing_mode="stretch_width", margin=0, dynamic=False)
        else:
            self.view = pn.FlexBox(
                pn.Column(gap_pane, sizing_mode="stretch_width", styles={"flex": "1 1 300px", "min-width": "min(280px, 100%)"}, margin=0),
                pn.Column(itl_pane, sizing_mode="stretch_width", styles={"flex": "1 1 300px", "min-width": "min(280px, 100%)"}, margin=0),
                pn.Column(sweep_box, sizing_mode="stretch_width", styles={"flex": "1 1 320px", "min-width": "min(300px, 100%)"}, margin=0),
                sizing_mode="stretch_width", margin=0, gap="10px", flex_wrap="wrap",
            )
        self._shown_run = None
        if follow_runs:
            state.param.watch(self._on_run, "run_id")
        state.param.watch(self._on_sweep, ["sweep", "sweep_progress"])
        if state.result is not None:
            self._on_run()
        self._on_sweep()

    # ------------------------------------------------------------ figures

    def _figures(self):
        """(gap, itl, sweep) figures, made and put in their panes the first time."""
        if self._figs is None:
            self._figs = (self._gap_figure(), self._itl_figure(), self._sweep_figure())
            for pane, fig in zip((self.gap_pane, self.itl_pane, self.sweep_pane), self._figs):
                pane.object = fig
        return self._figs

    @property
    def gap_fig(self):
        return self._figures()[0]

    @property
    def itl_fig(self):
        return self._figures()[1]

    @property
    def sweep_fig(self):
        return self._figures()[2]

    def _gap_figure(self):
        fig = figure(title="Worst gap vs prompt length", height=PLOT_HEIGHT, y_axis_type="log",
                     sizing_mode="stretch_width", min_width=MIN_PLOT_PX, tools="hover", x_axis_label="prompt tokens",
                     y_axis_label="worst gap in the answer (ms)", name="gap_plot",
                     x_range=Range1d(0, 1), y_range=Range1d(1, 1000))
        met = {"marker": "circle", "size": 5, "fill_color": PALETTE["decode"], "fill_alpha": 0.45, "line_color": None}
        miss = {"marker": "x", "size": 7, "line_color": PALETTE["slow"], "line_width": 1.6}
        r_met = fig.scatter("x", "y", source=self.gap_met, **met)
        r_miss = fig.scatter("x", "y", source=self.gap_miss, **miss)
        rejected = {"marker": "triangle", "size": 7, "fill_color": PALETTE["bad"], "fill_alpha": 0.7, "line_color": None}
        r_rejected = fig.scatter("x", "y", source=self.gap_rejected, **rejected)
        fig.scatter("x", "y", source=self.gap_pick, marker="circle", size=15, fill_color=None,
                    line_color=PALETTE["ink"], line_width=2.5)
        fig.hover.renderers = [r_met, r_miss]
        fig.hover.tooltips = [("request", "@id"), ("prompt", "@prompt{0,0} tokens"), ("worst gap", "@y{0,0.0} ms"),
                              ("", "click for its story")]
        if self.state.can_reject:  # its own hover, added after the default one's set-up (not under it)
            fig.add_tools(HoverTool(renderers=[r_rejected], tooltips=[
                ("request", "@id (rejected at arrival)"), ("prompt", "@prompt{0,0} tokens"),
                ("predicted TTFT", "@pred{0,0.000} s")]))
        fig.on_event(Tap, self._on_gap_tap)
        self.gap_target = Span(location=25, dimension="width", line_color=PALETTE["ink"], line_dash="dashed", line_width=1)
        # Above the points (overlay level) on a light box: the points never hide it.
        self.gap_label = Label(x=4, y=25, x_units="screen", text="TPOT target", text_font_size="10.5px",
                               text_color=PALETTE["ink"], y_offset=2, level="overlay",
                               background_fill_color="white", background_fill_alpha=0.85)
        fig.add_layout(self.gap_target)
        fig.add_layout(self.gap_label)
        items = [("met the SLO", _swatch(fig, "scatter", **met)), ("missed", _swatch(fig, "scatter", **miss))]
        if self.state.can_reject:
            items.append(("rejected", _swatch(fig, "scatter", **rejected)))
        _legend_below(fig, items)
        fig.yaxis.ticker = FixedTicker(ticks=log_ticks(1, 1000))
        fig.yaxis.formatter = _padded("""
            return tick >= 1 ? String(Math.round(tick)) : String(Number(tick.toPrecision(2)));""")
        fig.xaxis.ticker = BasicTicker(desired_num_ticks=3, num_minor_ticks=0)
        fig.xaxis.formatter = CustomJSTickFormatter(code=COMPACT_TOKENS_JS)
        self._gap_ticker = fig.xaxis.ticker
        self._strip_ticker = FixedTicker(ticks=[])
        return _style(fig)

    def _itl_figure(self):
        fig = figure(title="Inter-token gaps", height=PLOT_HEIGHT, x_axis_type="log",
                     sizing_mode="stretch_width", min_width=MIN_PLOT_PX, tools="hover", x_axis_label="gap before a token (ms)",
                     y_axis_label="share of all tokens", name="itl_plot", x_range=Range1d(1, 1000), y_range=Range1d(0, 1))
        ok = {"fill_color": PALETTE["decode"], "line_color": "white"}
        over = {"fill_color": PALETTE["slow"], "hatch_pattern": "/", "hatch_color": "white", "hatch_alpha": 0.7,
                "hatch_scale": 6, "line_color": PALETTE["slow_edge"]}
        r_ok = fig.quad(source=self.hist_ok, left="left", right="right", bottom=0, top="share", **ok)
        r_over = fig.quad(source=self.hist_over, left="left", right="right", bottom=0, top="share", **over)
        fig.hover.renderers = [r_ok, r_over]
        fig.hover.tooltips = [("gap", "@left{0,0.0}–@right{0,0.0} ms"), ("share", "@share{0.0%}")]
        fig.yaxis.formatter = _padded("""return Math.round(tick * 100) + "%";""", width=4)
        self.itl_target = Span(location=25, dimension="height", line_color=PALETTE["ink"], line_dash="dashed", line_width=1)
        fig.add_layout(self.itl_target)
        # Short, so the legend fits a phone: "over 25 ms" (the canvas's legend says which term it is).
        ms = self.state.scenario.slo.per_token_target_ms
        _legend_below(fig, [("within target", _swatch(fig, "quad", **ok)),
                            (f"over {ms:g} ms" if ms else "over the target", _swatch(fig, "quad", **over))])
        fig.xaxis.ticker = FixedTicker(ticks=thin_ticks(log_ticks(1, 1000), MAX_X_TICKS))
        return _style(fig)

    def _sweep_figure(self):
        fig = figure(title="Goodput vs request rate", height=PLOT_HEIGHT - 40, sizing_mode="stretch_width",
                     min_width=MIN_PLOT_PX, tools="hover", x_axis_label="request rate (req/s)",
                     y_axis_label="goodput per GPU (req/s)", x_range=Range1d(0, 1), y_range=Range1d(0, 1),
                     name="sweep_plot")
        ideal = {"line_color": PALETTE["muted"], "line_dash": "dotted"}
        good = {"line_color": PALETTE["link"], "line_width": 2}
        mark = {"marker": "square", "size": 7, "fill_color": PALETTE["link"], "line_color": "white"}
        fig.line("rate", "ideal", source=self.sweep_src, **ideal)
        fig.line("rate", "goodput", source=self.sweep_src, **good)
        r_mark = fig.scatter("rate", "goodput", source=self.sweep_src, **mark)
        fig.hover.renderers = [r_mark]
        fig.hover.tooltips = [("rate", "@rate{0.0} req/s"), ("goodput", "@goodput{0.00} req/s per GPU"),
                              ("meeting the SLO", "@attainment{0%}")]
        self.sweep_now = Span(location=0, dimension="height", line_color=PALETTE["ink"], line_dash="dashed",
                              line_width=1, line_alpha=0)
        fig.add_layout(self.sweep_now)
        _legend_below(fig, [("every request on time", _swatch(fig, "line", **ideal)),
                            ("goodput per GPU", [_swatch(fig, "line", **good), _swatch(fig, "scatter", **mark)])])
        return _style(fig)

    # ------------------------------------------------------------ picking a request

    def _on_gap_tap(self, event):
        """A click on the worst-gap plot picks the nearest request (missed ones first, they are on top)."""
        if self.on_pick is None or event.x is None or event.y is None:
            return
        xr, yr = self.gap_fig.x_range, self.gap_fig.y_range
        x_span = (xr.end or 0) - (xr.start or 0)
        y_span = math.log10(yr.end / yr.start) if yr.start and yr.end and yr.start > 0 and yr.end > 0 else 0
        for source in (self.gap_miss, self.gap_rejected, self.gap_met):
            rid = nearest_point(source.data, float(event.x), float(event.y), x_span, y_span)
            if rid is not None:
                self.on_pick(rid)
                return

    def mark(self, request_id):
        """Ring one request's point (None: no ring)."""
        self._marked = request_id
        for source in (self.gap_miss, self.gap_rejected, self.gap_met):
            ids = list(source.data.get("id", []))
            if request_id is not None and request_id in ids:
                i = ids.index(request_id)
                self.gap_pick.data = {"x": [float(source.data["x"][i])], "y": [float(source.data["y"][i])]}
                return
        if len(self.gap_pick.data["x"]):
            self.gap_pick.data = {"x": [], "y": []}

    # ------------------------------------------------------------ updates

    def update(self):
        """Show the latest run (no-op if it is already shown); the figures, even without one.
        The first time, the figures join the page and get their data in one walk of its models."""
        joining = one_model_walk(pn.state.curdoc) if self._figs is None else contextlib.nullcontext()
        with joining:
            self._figures()
            if self.state.result is not None and self._shown_run != self.state.run_id:
                self._on_run()

    def _on_run(self, *_):
        s = self.state
        result = s.result
        if result is None:
            return
        self._shown_run = s.run_id
        self._figures()
        target = s.scenario.slo.per_token_target_ms
        data = gap_scatter_data(s.rows, seed=s.scenario.seed)
        self.gap_met.data = data["met"]
        self.gap_miss.data = data["miss"]
        turned = data["rejected"]
        xs = np.concatenate([data["met"]["x"], data["miss"]["x"], turned["x"]])
        ys = np.concatenate([data["met"]["y"], data["miss"]["y"]])
        floor = None
        if len(xs):
            prompts = np.concatenate([data["met"]["prompt"], data["miss"]["prompt"], turned["prompt"]])
            strip = strip_view(prompts) if not np.array_equal(xs, prompts) else None
            if strip is not None:  # repeated lengths: a tick at each, no invented range between
                start, end, ticks = strip
                self._strip_ticker.ticks = thin_ticks(ticks, MAX_X_TICKS)
                ticker = self._strip_ticker
                label = (f"prompt tokens (all {ticks[0]:,}, spread sideways)" if len(ticks) == 1
                         else "prompt tokens (spread sideways)")
            else:
                pad = max((xs.max() - xs.min()) * 0.05, 1.0)
                start, end = max(0.0, float(xs.min()) - pad), float(xs.max()) + pad
                ticker, label = self._gap_ticker, "prompt tokens"
            self.gap_fig.x_range.update(start=start, end=end)
            if self.gap_fig.xaxis.ticker is not ticker:
                self.gap_fig.xaxis.ticker = ticker
            if self.gap_fig.xaxis.axis_label != label:
                self.gap_fig.xaxis.axis_label = label
            lines = [target] if target else []
            lo = min([float(ys.min())] + lines) if len(ys) else (target or 10.0)
            hi = max([float(ys.max())] + lines) if len(ys) else (target or 10.0)
            self.gap_fig.y_range.update(start=lo / 1.5, end=hi * 1.5)
            self.gap_fig.yaxis.ticker.ticks = log_ticks(lo / 1.5, hi * 1.5)
            floor = lo / 1.5 * 1.12  # the rejected have no gap: along the floor, just inside the frame
        self.gap_rejected.data = {**turned, "y": np.full(len(turned["x"]), floor if floor else 1.0)}
        self.mark(self._marked)
        self.gap_target.location = target if target else 0
        self.gap_target.line_alpha = 1 if target else 0
        self.gap_label.y = target or 0
        self.gap_label.text = ("gap target" if s.scenario.slo.per_token_target_name == "max_gap_ms" else "TPOT target") if target else ""
        self.gap_label.y_units = "data"
        hist = itl_histogram(result, target)
        over = np.asarray(hist["over"], dtype=bool)
        keys = ("left", "right", "share")
        # Lists, not arrays: a few dozen numbers each, and every array is its own websocket frame.
        self.hist_ok.data = {k: np.asarray(hist[k])[~over].tolist() for k in keys}
        self.hist_over.data = {k: np.asarray(hist[k])[over].tolist() for k in keys}
        self.itl_target.location = target or 0
        self.itl_target.line_alpha = 1 if target else 0
        if len(hist["share"]):
            self.itl_fig.y_range.end = float(np.max(hist["share"])) * 1.15
            lo, hi = float(hist["left"][0]), float(hist["right"][-1])
            if target:
                lo, hi = min(lo, target / 1.5), max(hi, target * 1.5)
            self.itl_fig.x_range.update(start=lo, end=hi)
            self.itl_fig.xaxis.ticker.ticks = thin_ticks(log_ticks(lo, hi), MAX_X_TICKS)
        self._on_sweep()

    def _on_sweep(self, *_):
        s = self.state
        running = s.sweep_progress is not None
        self.progress.visible = running
        self.progress.value = int(round((s.sweep_progress or 0) * 100))
        self.sweep_button.disabled = running or not s.can_sweep()
        # No rate to sweep (a trace replays): a clear note instead of an empty frame.
        if self.sweep_pane.visible != s.can_sweep():
            self.sweep_pane.visible = self.sweep_button.visible = s.can_sweep()
        sweep = s.sweep
        if running:
            self.sweep_note.object = '<span class="stf-status busy"><span class="stf-spin"></span>Sweeping…</span>'
        elif not s.can_sweep():
            self.sweep_note.object = '<span class="stf-lock">This workload replays a trace: no rate to sweep.</span>'
        elif sweep is None:
            self.sweep_note.object = '<span class="stf-lock">Runs this fleet at 8 rates (about a second).</span>'
        elif s.sweep_stale:
            self.sweep_note.object = '<span class="stf-lock">The fleet changed since this sweep: sweep again.</span>'
        elif sweep.get("stopped"):  # a point past the page's bounds: the curve ends before it
            self.sweep_note.object = f'<span class="stf-lock" role="status">{html.escape(sweep["stopped"])}</span>'
        else:
            self.sweep_note.object = ""
        if sweep is self._shown_sweep:  # e.g. after a run: only the note above may change
            return
        self._shown_sweep = sweep
        if sweep is None:
            self.sweep_src.data = {"rate": [], "goodput": [], "ideal": [], "attainment": []}
            if self._figs is not None:  # (a figure made later starts with its marker hidden)
                self.sweep_now.line_alpha = 0
            return
        rates = np.asarray(sweep["rates"], float)
        if not len(rates):  # (stopped at its first point: the note says why)
            self.sweep_src.data = {"rate": [], "goodput": [], "ideal": [], "attainment": []}
            return
        gpus = max(sweep["gpus"], 1)
        ideal = rates / gpus
        self.sweep_src.data = {"rate": rates, "goodput": np.asarray(sweep["goodput"], float), "ideal": ideal,
                               "attainment": np.asarray(sweep["attainment"], float)}
        self.sweep_fig.x_range.start = 0
        self.sweep_fig.x_range.end = float(rates.max()) * 1.05
        self.sweep_fig.y_range.start = 0
        self.sweep_fig.y_range.end = float(max(ideal.max(), max(sweep["goodput"]))) * 1.12
        self.sweep_now.location = sweep["rate"]
        self.sweep_now.line_alpha = 0.8
