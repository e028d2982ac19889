"""The fleet's knobs: the mission's controls as widgets, the rest listed as locked.

A widget change calls `on_change(name, value)` (the app validates it through the
state and schedules the re-simulation). Sliders report on release and on each key
press (`value_throttled`), so dragging does not start a run per pixel; each report is
answered with the value that runs, so a reply crossing a newer key press cannot leave the
slider showing another fleet (panel_shims.answer_page). Controls that
do nothing in the current layout (e.g. the pool sizes of a colocated fleet) stay
visible but disabled, with a hint saying when they matter: greyed (half opacity, a grey
bar where a live slider's is blue) and out of the tab order (`idle`, which the app
hands to the page bridge as inert controls).
"""

import html

import panel as pn

from lab.core.missions import CONTROL_SPECS

from ..browser.a11y import choice_spec, slider_spec
from ..browser.panel_shims import FloatSlider, Html, IntSlider
from ..browser.trace_upload import MAX_SENT_BYTES, MAX_UPLOAD_BYTES, TraceUpload
from ..catalog import SANDBOX_ID, TRACE_SOURCES
from ..words.control_words import CHOICE_LABELS, UNITS, ZERO_WORDS, format_value
from ..words.refusal import refusal_html
from ..words.theme import CSS, INERT_STYLE, LIVE_STYLE, PALETTE, SLIDER_CSS
from .control_html import EMBED_CONTROL_FLEX, carried_html, idle_hint_html, locked_html, slider_notches

__all__ = ["Controls", "EMBED_CONTROL_FLEX", "idle_hint_html", "locked_html", "replay_html",
           "sources_html"]

INSTANCE_COUNTS = ("gpus", "prefill_gpus", "decode_gpus", "long_gpus", "plan_prefill_gpus")  # sliders that count GPUs of a pool
WRAP_LABEL_CHARS = 36  # a choice group's labels, all told, beyond which it may wrap (the 33 of early rejection's fit at 320 px)
WRAP_GROUP_CSS = ".bk-btn-group { flex-wrap: wrap; } .bk-btn-group > .bk-btn { flex: 1 1 auto; }"
WIDGET_DEBOUNCE_MS = 0  # see Controls.__init__


def replay_html(state):
    """What the sandbox replays: the uploaded trace (or why the last upload was refused)."""
    parts = []
    if state.upload_error:
        parts.append(f'<p class="stf-notes stf-error stf-upload-error" role="alert">Not replayed: '
                     f'{html.escape(state.upload_error)}</p>')
    replay = state.replay
    if replay:
        parts.append(f'<p class="stf-replay" role="status" data-requests="{int(replay["requests"])}">'
                     f'Replaying <b>{html.escape(replay["name"])}</b>: {replay["requests"]:,} requests over '
                     f'{replay["span_s"]:,.0f} s. The request rate does not apply while it replays.</p>')
    return "".join(parts)


def sources_html():
    links = " · ".join(f'<a href="{html.escape(url)}" target="_blank" rel="noopener noreferrer">{html.escape(label)}</a> '
                       f'({html.escape(url.split("github.com/")[-1])})' for label, url in TRACE_SOURCES)
    return (f'<div class="stf-lock stf-trace-sources">Columns <code>arrival_s,prompt_tokens,output_tokens</code>, '
            f'Azure\'s <code>TIMESTAMP,ContextTokens,GeneratedTokens</code> or '
            f'<code>arrived_at,num_prefill_tokens,num_decode_tokens</code>; up to {MAX_UPLOAD_BYTES / 1e6:g} MB '
            f'({MAX_SENT_BYTES / 1e6:g} MB as sent: quotes and line breaks count twice). '
            f'Real traces: {links}.</div>')


def _caption_html(label, idle):
    return f'<div class="stf-choice-caption{" idle" if idle else ""}">{html.escape(label)}:</div>'


class Controls:
    """Widgets for `state.mission.controls`, kept in sync with `state.settings`."""

    def __init__(self, state, on_change, on_reset=None, embed=False, on_upload=None, on_clear_replay=None):
        self.state = state
        self.embed = embed
        self.on_change = on_change
        self.widgets = {}
        self.idle = []  # names of the controls that do nothing in the current layout
        self._styles = {}  # each widget's own styles, under the live/idle look
        self.captions = {}  # choice control name -> the caption above its buttons
        self._syncing = False
        rows = []
        for name, control in state.mission.controls.items():
            widget = self._widget(name, control)
            # Under `lab serve`, Panel waits `_debounce` ms (50) before handing a browser-side
            # change to Python. The app coalesces bursts of changes itself (app.DEBOUNCE_MS),
            # so the next turn of the event loop will do (Pyodide never waits).
            widget._debounce = WIDGET_DEBOUNCE_MS
            self.widgets[name] = widget
            self._styles[name] = dict(widget.styles or {})
            if control.kind == "choice" and name != "layout":  # a button group shows no name of its own
                caption = Html(_caption_html(widget.name, False),
                                       stylesheets=[CSS], margin=(6, 10, 0, 10), sizing_mode="stretch_width",
                                       styles={"flex": "1 1 100%"} if embed else {})
                self.captions[name] = caption
                rows.append(caption)
            rows.append(widget)
        self.hint = Html("", margin=(0, 10, 2, 10), css_classes=["stf-hint"], stylesheets=[CSS],
                                 sizing_mode="stretch_width", visible=False)
        self.locked = Html("", sizing_mode="stretch_width", stylesheets=[CSS], margin=(6, 10, 0, 10),
                                   css_classes=["stf-locked"])
        self.error = Html("", sizing_mode="stretch_width", stylesheets=[CSS], margin=(4, 10),
                                  visible=False, css_classes=["stf-control-error"])
        self.carried = Html("", sizing_mode="stretch_width", stylesheets=[CSS], margin=(4, 10),
                                    visible=False, css_classes=["stf-control-carried"])
        self.reset_button = pn.widgets.Button(
            name="↺ Back to the start", button_type="light", margin=(8, 10, 4, 10), width=170,
            description="Put every control back where the mission starts", css_classes=["stf-reset"],
        )
        if on_reset is not None:
            self.reset_button.on_click(lambda _e: on_reset())
        if embed:  # compact: controls wrap (one a row in the side column); the reset button and the locked line share one
            for name, w in self.widgets.items():
                self._styles[name] = {"flex": EMBED_CONTROL_FLEX}
            rows = [pn.FlexBox(*rows, sizing_mode="stretch_width", margin=0, flex_wrap="wrap")]
            self.locked.margin = (14, 10, 0, 4)
            self.locked.styles = {"flex": "1 1 180px", "min-width": "0"}
            tail = [pn.FlexBox(self.reset_button, self.locked, sizing_mode="stretch_width", margin=0, flex_wrap="wrap")]
        else:
            tail = [self.reset_button, self.locked]
        replay = self._replay_block(on_upload, on_clear_replay) if state.mission.id == SANDBOX_ID else []
        self.view = pn.Column(*rows, self.hint, self.error, self.carried, *tail, *replay, sizing_mode="stretch_width",
                              margin=0, css_classes=["stf-controls"])
        state.param.watch(self._sync, ["settings", "scenario", "error", "refusal", "carried"])
        self._sync()

    def a11y_specs(self):
        """{css class: spec} naming each control and saying how its value reads (a11y.A11yBridge)."""
        out = {}
        for name, control in self.state.mission.controls.items():
            label = self.widgets[name].name
            if control.kind == "choice":
                out[f"stf-control-{name}"] = choice_spec(label)
            else:
                zero = ZERO_WORDS.get(name)  # 0 = whole prompt, no cap
                out[f"stf-control-{name}"] = slider_spec(label, UNITS.get(name, ""), self.widgets[name].step, zero)
        return out

    def _replay_block(self, on_upload, on_clear_replay):
        """The sandbox's upload: pick a trace CSV, see what replays, go back to the generated workload."""
        state = self.state
        self.upload = TraceUpload(on_file=on_upload, on_refused=lambda why: setattr(state, "upload_error", why),
                                  margin=(10, 10, 0, 10), css_classes=["stf-trace-upload"])
        self.replay_note = Html("", sizing_mode="stretch_width", stylesheets=[CSS], margin=(2, 10, 0, 10),
                                        css_classes=["stf-replay-pane"])
        self.clear_replay = pn.widgets.Button(name="Back to the generated workload", button_type="light",
                                              margin=(2, 10, 0, 10), width=230, css_classes=["stf-clear-replay"],
                                              visible=False)
        if on_clear_replay is not None:
            self.clear_replay.on_click(lambda _e: on_clear_replay())
        sources = Html(sources_html(), sizing_mode="stretch_width", stylesheets=[CSS], margin=(2, 10, 4, 10))

        def show(*_):
            self.replay_note.object = replay_html(state)
            self.clear_replay.visible = bool(state.replay)

        state.param.watch(show, ["replay", "upload_error"])
        show()
        return [self.upload, self.replay_note, self.clear_replay, sources]

    def _widget(self, name, control):
        label = control.label or CONTROL_SPECS[name][1]
        value = self.state.settings.get(name)
        common = {"sizing_mode": "stretch_width", "margin": (4, 10, 0, 10), "css_classes": [f"stf-control-{name}"]}
        if control.kind == "choice":
            labels = CHOICE_LABELS.get(name, {})
            options = {labels.get(c, format_value(c)): c for c in control.choices}
            # Four buttons, or long labels ("Reserve (prompt + answer)"), outgrow a 320 px
            # sidebar: they wrap onto a second line.
            if len(options) > 3 or sum(map(len, options)) > WRAP_LABEL_CHARS:
                common["stylesheets"] = [WRAP_GROUP_CSS]
            widget = pn.widgets.RadioButtonGroup(name=label, options=options, value=value, button_type="primary",
                                                 button_style="outline", **common)
            widget.param.watch(lambda e, n=name: self._changed(n, e.new), "value")
            return widget
        common.update(bar_color=PALETTE["decode"], stylesheets=[SLIDER_CSS])
        if control.kind == "int":
            step = int(control.step or 1)
            widget = IntSlider(name=label, start=int(control.min), end=int(control.max), step=step,
                                          value=int(value if value is not None else control.min), **common)
        else:
            step = control.step or (control.max - control.min) / 100.0
            widget = FloatSlider(name=label, start=float(control.min), end=float(control.max), step=step,
                                            value=float(value if value is not None else control.min), **common)
        widget.param.watch(lambda e, n=name: self._changed(n, e.new), "value_throttled")
        return widget

    def _whole_instances(self, name, widget):
        """A GPU-count slider moves in whole instances of its pool's tp (control_html.slider_notches)."""
        notches = slider_notches(self.state.mission, self.state.scenario, self.state.settings, name)
        if (widget.start, widget.end, widget.step) != notches:
            widget.param.update(start=notches[0], end=notches[1], step=notches[2])

    def _changed(self, name, value):
        if self._syncing:
            return
        if value != self.state.settings.get(name):
            self.on_change(name, value)
            if self.state.settings.get(name) != value:  # refused or snapped: the control goes back to what runs
                self._sync()
        widget = self.widgets[name]
        if hasattr(widget, "answer_page"):  # a slider's release: the page's last word is what runs (panel_shims)
            widget.answer_page()

    def _sync(self, *_):
        state = self.state
        self._syncing = True
        try:
            for name, widget in self.widgets.items():
                value = state.settings.get(name)
                if value is not None and widget.value != value:
                    if hasattr(widget, "set_value"):  # a slider: its release value too (panel_shims)
                        widget.set_value(value)
                    else:
                        widget.value = value
                if name in INSTANCE_COUNTS:
                    self._whole_instances(name, widget)
                idle = not state.applies(name)
                widget.disabled = idle
                widget.styles = {**self._styles.get(name, {}), **(INERT_STYLE if idle else LIVE_STYLE)}
                if name in self.captions:  # muted by colour, not opacity, so it keeps 4.5:1 contrast
                    self.captions[name].object = _caption_html(widget.name, idle)
        finally:
            self._syncing = False
        idle = [n for n in self.widgets if not state.applies(n)]
        self.idle = idle
        self.hint.object = idle_hint_html(state.scenario, [(n, self.widgets[n].name) for n in idle])
        self.hint.visible = bool(idle)
        self.locked.object = locked_html(state, compact=self.embed)
        self.locked.visible = bool(self.locked.object)
        self.error.object = refusal_html(state.refusal, state.error)
        self.error.visible = bool(state.error)
        self.carried.object = carried_html(state)
        self.carried.visible = bool(self.carried.object)
        # Looks and acts disabled at the start, by style only: toggling `disabled` makes Bokeh
        # re-render the button and re-lay out the whole page on every first step off the start.
        self.reset_button.styles = INERT_STYLE if state.is_start else LIVE_STYLE
