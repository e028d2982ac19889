"""`PaintSpeed`: a bridge that spares BokehJS work it repeats on every paint or data patch.

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

Two more of the same kind, found with a CPU profile of 8 changes of `mixing-hurts` in
Pyodide (benchmarks/bench_browser.py's page, 1366 px):
- **The plot's font size.** Every axis, at every paint, measures its tick labels against
  `PlotView.base_font_size`, which is `getComputedStyle(plot).fontSize`: after a patch that
  changed the page, a style recalculation (185 ms of the profile's main thread, about 23 ms a
  change). The lab never changes a plot's font size (the CSS of Panel and Bokeh sets it once
  on the plot's host), so the first px answer of a connected plot is kept for that plot.
- **Hatch tiles.** Each time a hatched glyph gets data (the red slow steps, at every run),
  BokehJS draws its hatch tile afresh on a new canvas, for each of a renderer's five glyph
  views (glyph, selection, nonselection, muted, decimated): 250 ms of the profile, ~30 ms a
  change, most of it `getContext`. The tile depends only on its pattern, colour, alpha,
  scale, weight and the device pixel ratio, and BokehJS only reads it (as a pattern's
  source), so one tile per such key is drawn once and shared. A vectorised hatch (values
  per row) or a custom texture is left to BokehJS.
- **One data update per renderer per patch.** A renderer's view redoes its five glyph views'
  data and visuals (`set_data`) on every change of its data source, of its glyph (a row
  height) and of a transform (a Dodge): a GPU-count change, whose patch changes all three,
  did it two or three times per renderer. A whole update asked for while one is pending joins
  it, and the one update runs once the patch has been applied (a microtask), with the newest
  values; a patch of some rows (`indices`) runs at once as before.
- **Glyph views that are never painted.** Of a renderer's five glyph views, BokehJS paints
  the selection and nonselection views only while something is selected, the muted one only
  while the renderer is muted, the decimated one only mid-interaction on a plot with more
  points than its level-of-detail threshold; yet it updates all five at every data change.
  The lab has no selection tool, no mutable legend and no pan or zoom, so after a renderer's
  first data only its glyph (and any hover glyph) follows the data; the first time any of
  those cases arises, that renderer's five views are brought up to date (one frame without
  it) and all of them follow from then on, as in BokehJS.
"""

from ..browser.bridge import Bridge

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
  keepFontSize(bokeh);
  shareHatchTiles(bokeh);
  oneDataUpdatePerPatch(bokeh);
  lazySecondaryGlyphs(bokeh);
  document.documentElement.dataset.stfPaintSpeed = "on";
}

function keepFontSize(bokeh) {
  let plot;
  try { plot = bokeh.require("models/plots/plot_canvas"); } catch (e) { return; }
  const proto = plot && plot.PlotView && plot.PlotView.prototype;
  const getter = proto && Object.getOwnPropertyDescriptor(proto, "base_font_size");
  if (!getter || typeof getter.get !== "function" || proto._stfKeptFontSize) return;
  const kept = new WeakMap();  // plot view -> its font size in px
  Object.defineProperty(proto, "base_font_size", {
    configurable: true,
    get() {
      const known = kept.get(this);
      if (known !== undefined) return known;
      const size = getter.get.call(this);
      if (size != null && this.el && this.el.isConnected) kept.set(this, size);  // a detached plot has no styles yet
      return size;
    },
  });
  proto._stfKeptFontSize = true;
}

function shareHatchTiles(bokeh) {
  let hatch;
  try { hatch = bokeh.require("core/visuals/hatch"); } catch (e) { return; }
  const proto = hatch && hatch.HatchVector && hatch.HatchVector.prototype;
  if (!proto || typeof proto.update !== "function" || proto._stfSharedTiles) return;
  const update = proto.update;
  const tiles = new Map();  // pattern|colour|alpha|scale|weight|pixel ratio -> {Uniform, image}
  const NAMES = ["hatch_pattern", "hatch_color", "hatch_alpha", "hatch_scale", "hatch_weight"];
  proto.update = function () {
    const props = NAMES.map((name) => this[name]);
    const scalar = props.every((prop) => prop && typeof prop.is_Scalar === "function" && prop.is_Scalar());
    const extra = this.hatch_extra && this.hatch_extra.value;
    if (!scalar || (extra && Object.keys(extra).length)) return update.call(this);
    const key = props.map((prop) => String(prop.value)).concat(String(self.devicePixelRatio || 1)).join("|");
    const tile = tiles.get(key);
    if (tile === undefined) {
      update.call(this);
      const image = this._hatch_image;
      if (image && typeof image.is_Scalar === "function" && image.is_Scalar()) {
        tiles.set(key, { Uniform: image.constructor, image: image.value });
      }
      return;
    }
    // What update() does for scalar values, with the tile drawn before.
    this._update_iteration++;
    this._static_doit = this._compute_static_doit();
    this._hatch_image = new tile.Uniform(this._static_doit ? tile.image : null, this.hatch_color.length);
  };
  proto._stfSharedTiles = true;
}

function oneDataUpdatePerPatch(bokeh) {
  let mod;
  try { mod = bokeh.require("models/renderers/glyph_renderer"); } catch (e) { return; }
  const proto = mod && mod.GlyphRendererView && mod.GlyphRendererView.prototype;
  if (!proto || typeof proto.update_data !== "function" || proto._stfOneUpdate) return;
  const update = proto.update_data;
  // A whole update asked for while one is pending joins it (see the module docstring).
  proto.update_data = function (indices) {
    if (indices !== undefined) return update.call(this, indices);  // some rows patched: as before
    if (this._stfUpdate) return this._stfUpdate;
    const pending = this._stfUpdate = Promise.resolve().then(() => {
      this._stfUpdate = null;
      return update.call(this);
    });
    return pending;
  };
  proto._stfOneUpdate = true;
}

// The glyph views a renderer paints only when something is selected, it is muted, or a plot
// is mid-interaction with many points (level of detail): see the module docstring.
const SECONDARY = ["decimated_glyph", "selection_glyph", "nonselection_glyph", "muted_glyph"];
const GATED = ["set_data", "set_visuals", "after_visuals", "after_lazy_visuals", "map_data"];

function needsSecondaries(view) {
  const model = view.model, doc = model.document, lod = view.plot_model.lod_threshold;
  if (model.muted || !model.data_source.selected.is_empty()) return true;
  return doc != null && doc.interactive_duration() > 0 && lod != null && view.all_indices.count > lod;
}

function gateSecondaries(renderer) {
  if (renderer._stfGated) return;
  renderer._stfGated = true;
  for (const name of SECONDARY) {
    const view = renderer[name];
    if (view == null) continue;
    for (const method of GATED) {
      const original = view[method];
      if (typeof original !== "function") continue;
      view[method] = function (...args) {
        if (renderer._stfAllGlyphs) return original.apply(this, args);
        renderer._stfStale = true;  // skipped: brought up to date if it is ever painted
        return method === "set_data" || method === "after_lazy_visuals" ? Promise.resolve() : undefined;
      };
    }
  }
}

function lazySecondaryGlyphs(bokeh) {
  let mod;
  try { mod = bokeh.require("models/renderers/glyph_renderer"); } catch (e) { return; }
  const proto = mod && mod.GlyphRendererView && mod.GlyphRendererView.prototype;
  if (!proto || typeof proto.lazy_initialize !== "function" || typeof proto._paint !== "function"
      || proto._stfLazyGlyphs) return;
  const init = proto.lazy_initialize, paint = proto._paint;
  proto.lazy_initialize = async function () {
    await init.call(this);  // (its first set_data fills all five views)
    gateSecondaries(this);
  };
  // The views built before this bridge rendered (the canvas comes first in the page).
  const seen = new Set();
  const walk = (view) => {
    if (view == null || seen.has(view)) return;
    seen.add(view);
    if (view instanceof mod.GlyphRendererView) gateSecondaries(view);
    const kids = typeof view.children_views === "function" ? view.children_views() : [];
    for (const kid of kids) walk(kid);
  };
  const roots = bokeh.index && bokeh.index.roots;
  if (roots) for (const root of roots) walk(root);
  proto._paint = function (ctx) {
    if (!this._stfAllGlyphs && needsSecondaries(this)) {
      this._stfAllGlyphs = true;  // from now on every view follows, as in BokehJS
      if (this._stfStale) {
        this.update_data();  // all five views brought up to date, then painted
        return;  // (this one frame without this renderer, rather than with stale views)
      }
    }
    return paint.call(this, ctx);
  };
  proto._stfLazyGlyphs = true;
}
""" % {"major": repr(BOKEH_MAJOR)}


class PaintSpeed(Bridge):
    """Zero-size: on render, BokehJS skips repeated per-paint style lookups and hatch tiles (see the module)."""

    _esm = _ESM
