"""The metrics users feel, and the stars with a live tick per star: two HTML panes over the
state, rebuilt after each run (their HTML is metrics_html.py's).
"""

import panel as pn

from ..browser.panel_shims import Html
from ..words.theme import CSS
from .metrics_html import (PER_REQUESTS, STARS_CSS, STARS_WAIT_NOTE, cost_cards, fmt_joules, fmt_ms,
                           fmt_seconds, fmt_share, fmt_usd, fmt_watts, kv_card, metrics_html, run_cut_html,
                           run_error_html, stars_html)

__all__ = ["MetricsView", "StarsView", "fade_while_busy", "STALE_STYLES", "FRESH_STYLES", "metrics_html",
           "stars_html", "fmt_seconds", "fmt_ms", "fmt_share", "fmt_usd", "fmt_joules", "fmt_watts", "cost_cards",
           "kv_card", "PER_REQUESTS", "run_error_html", "run_cut_html", "STARS_WAIT_NOTE"]


# While a change waits for its run's metrics (the state is busy), the panes still show the run
# before, and from the run's first half on the canvas already shows the new one: they fade, after
# a delay, so a quick run's panes do not flicker, and are back at once with the new run's values.
# Through the pane's `styles`, which BokehJS applies to its element alone: its `css_classes`
# would lay the whole page out again (LayoutDOMView invalidates the layout on them).
STALE_STYLES = {"opacity": "0.45", "transition": "opacity 0.2s ease 0.15s"}
FRESH_STYLES = {"opacity": "1", "transition": "none"}


def fade_while_busy(pane, state):
    """Fade `pane` while `state` is busy (its values are the run before's)."""
    state.param.watch(lambda event: setattr(pane, "styles", STALE_STYLES if event.new else FRESH_STYLES), "busy")


class MetricsView:
    def __init__(self, state):
        self.state = state
        self.pane = Html(metrics_html({}, state.scenario), sizing_mode="stretch_width", stylesheets=[CSS],
                                 margin=0, css_classes=["stf-metrics-pane"])
        self.view = self.pane
        state.param.watch(self._update, "run_id")
        fade_while_busy(self.pane, state)
        if state.metrics or state.run_error:
            self._update()

    def _update(self, *_):
        s = self.state
        if s.run_error:
            self.pane.object = run_error_html(s.run_error)
        else:
            self.pane.object = metrics_html(s.metrics, s.scenario)


class StarsView:
    """The stars of the mission, and (`tools`, a stars_bridge.ProgressTools) the progress-code buttons."""

    def __init__(self, state, tools=None):
        self.state = state
        self.pane = Html("", sizing_mode="stretch_width", stylesheets=[CSS, STARS_CSS], margin=0,
                                 css_classes=["stf-stars-pane"])
        self.tools = tools
        self.view = self.pane if tools is None else pn.Column(self.pane, tools.view, sizing_mode="stretch_width",
                                                              margin=0, css_classes=["stf-stars-panel"])
        state.param.watch(self._update, ["run_id", "saved_stars", "touched"])
        fade_while_busy(self.pane, state)
        self._update()

    def _update(self, *_):
        s = self.state
        self.pane.object = stars_html(s.mission, s.metrics, s.stars_now, s.saved_stars, counting=s.touched,
                                      from_link=s.from_link)
