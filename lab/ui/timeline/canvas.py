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

Queues and memory (series from lab.ui.data.queues): the top row, "prefill queue", is a grey
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

Data is built with numpy from the columnar step logs (lab/ui/data/canvas_data.py, no Bokeh), and a
change's canvas patch carries
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

from ..data.canvas_data import (  # the columns it draws (the public ones are this module's too, for callers)
    _BOUND_COLS, _KV_COLS, _PREEMPT_COLS, _QUAD_COLS, _REJECT_COLS, _RUN_COLS, _STEP_COLS, _STRIP_COLS,
    _XFER_COLS, AXIS_PX, EMBED_FRAME_MAX_PX, EMBED_ROW_PX, FRAME_LEFT_PX, FRAME_MAX_PX, FRAME_TOP_PX, HALF,
    LABEL_PX_PER_CHAR, LAYERS, LINK_QUEUE, PREFILL_QUEUE, QUEUE_LAYERS, ROLE_LAYERS, ROW_PX, STRIP, WAIT,
    WHOLE_RUN_LAYERS, _empty, _rows, box_geometry, frame_px, max_rows, overview_data, roles_text, row_geometry,
    row_label, rows_html, run_layers, split_label, step_layers, step_range, timeline_data,
)
from ..browser.lean_models import lean_figure
from ..browser.panel_shims import Html
from ..browser.timers import every
from ..state import WINDOW_S
from ..views.story import STEP_TOLERANCE_S, step_at
from ..words.targets import OVER_WORDS, target_phrase
from .legend import keys_html, legend_html
from ..words.theme import CSS, FONT_STACK, INERT_STYLE, LIVE_STYLE, PALETTE

__all__ = ["Canvas", "timeline_data", "run_layers", "step_layers", "step_range", "overview_data", "max_rows", "frame_px",
           "row_geometry", "box_geometry", "rows_html", "row_label", "legend_html", "roles_text", "ROW_PX",
           "EMBED_ROW_PX", "FRAME_MAX_PX", "PREFILL_QUEUE", "LINK_QUEUE"]

MIN_FIGURE_PX = 150  # narrow enough for a 320 px phone beside the row labels
BUFFER_S = 1.5  # the browser holds the window plus this much on each side (see Canvas._slice)
SPEEDS = {"¼×": 0.25, "1×": 1.0, "4×": 4.0, "10×": 10.0}
TICK_MS = 100  # playback frame period
KEPT_DATA = 6  # runs whose canvas data is kept (LabState keeps as many runs: MAX_KEPT_RUNS)


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
        # The timeline's plot area height (px), fixed for the mission (the page asks a worker
        # process for the run's layers at this height: LabState.prepare_run).
        self.plot_px = (frame_px(self._rows_max, EMBED_ROW_PX, EMBED_FRAME_MAX_PX) if embed
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
            height=self.plot_px + AXIS_PX,  # fixed for the mission: see max_rows
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
        return lean_figure(fig)

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
        return lean_figure(fig)

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
        keys = self.keys_pane = Html(keys_html(""), stylesheets=[CSS], margin=(2, 10, 6, 10),
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
            half, font = row_geometry(n, self.plot_px)
            self.labels_pane.object = rows_html([labels[i] for i in range(n)], self.plot_px, font)
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
        entry = {"result": result, "target": target_ms, "layers": run_layers(result, self.plot_px)}
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
            self.keys_pane.object = keys_html("")
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
            self.keys_pane.object = keys_html(note)
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
