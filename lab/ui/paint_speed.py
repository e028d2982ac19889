"""`PaintSpeed`: a bridge that spares BokehJS a style lookup per visual property per paint.

BokehJS 3.9 lets a page restyle a plot with CSS variables (`--bk-fill-color`,
`--bk-major-label-text-color`, ...): every time it paints a glyph, an axis, a tick label,
a span or a box annotation, each scalar fill, line, hatch and text property first asks
`getComputedStyle(el).getPropertyValue("--bk-...")`, and only then uses the model's value.
After a patch has changed the page (new HTML in a pane, a slider moved), the first of
those calls recalculates the styles of the shadow DOM, and the calls run by the hundred
per paint. Measured on `mixing-hurts` in Pyodide (benchmarks/bench_browser.py, the same
page before and after): that lookup was about a third of the main thread's time per control
change, and a change's canvas painted 70-120 ms sooner without it.

The lab styles its plots through the models only: no stylesheet of the lab, Panel or
Bokeh sets a `--bk-*` visual variable (tests/ui/test_paint_speed.py holds that), so the
lookup always answers "" and the model's value is used. `PaintSpeed` makes the lookup answer
"" without asking, once per page, and only for the BokehJS it was written against (a
different major version, or one without that method, is left alone).
"""

from .bridge import Bridge

__all__ = ["PaintSpeed", "BOKEH_MAJOR"]

BOKEH_MAJOR = "3."  # the BokehJS line whose VisualProperties._get_css_value this replaces

_ESM = r"""
const MAJOR = %(major)s;

export function render() {
  const bokeh = window.Bokeh;
  if (!bokeh || !String(bokeh.version || "").startsWith(MAJOR) || typeof bokeh.require !== "function") return;
  let visual;
  try { visual = bokeh.require("core/visuals/visual"); } catch (e) { return; }
  const proto = visual && visual.VisualProperties && visual.VisualProperties.prototype;
  if (!proto || typeof proto._get_css_value !== "function" || proto._stfNoCssLookup) return;
  // The lab sets no --bk-* visual variable: the answer is always "" (use the model's value).
  proto._get_css_value = function () { return ""; };
  proto._stfNoCssLookup = true;
  document.documentElement.dataset.stfPaintSpeed = "on";
}
""" % {"major": repr(BOKEH_MAJOR)}


class PaintSpeed(Bridge):
    """Zero-size: on render, BokehJS's per-paint CSS-variable lookups answer "none" (see the module)."""

    _esm = _ESM
