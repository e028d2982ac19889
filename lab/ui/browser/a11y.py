"""What the page tells a screen reader and a keyboard user that Panel and Bokeh leave out.

One small `JSComponent` (`A11yBridge`, in the page like the other bridges, so it works
over the server's websocket and in Pyodide's worker alike) looks after every widget by
its css class (stf-*), inside Panel's shadow roots:

- Sliders (`slider_spec`): the handle gets the control's label as its name and an
  `aria-valuetext` in the units a person reads ("4 GPUs", "512 tokens", "whole prompt",
  "12.5 req/s"): noUiSlider's own reads every value as "4.00". Kept up to date from the
  slider's `update` event, after noUiSlider's own handler.
- Cards (the Table view, the embed's Brief): the header says whether it is open (`aria-expanded`).
- Choices (`choice_spec`, Bokeh's RadioButtonGroup): the group is named and each button
  says whether it is the selected one (`aria-pressed`), kept in sync with Bokeh's class.
- Buttons: a leading glyph (▶, ↺) is left out of the name; a button styled inert
  (theme.INERT_STYLE: it has nothing to do) is `aria-disabled`.
- Bokeh canvases are no tab stop (their event layer takes focus for keyboard tools the
  lab does not use); a figure named by a `figure_spec` is an image with that label;
  the page's outermost layout is the `main` landmark (`landmark_spec`).
- Every shadow root adopts theme.FOCUS_CSS: focus is always visible.
- `announce`: a polite live region (outside every shadow root) reads one sentence
  after each run: the headline metrics and any star change (`run_summary`).

New components (a re-rendered widget, a layout that grew) are found by a MutationObserver
on each shadow root; it only looks at what was added and at class changes, and does so
when the browser is next idle (requestIdleCallback), off the path from a control change
to the redrawn canvas (done at once, it made that path 40 ms longer under `lab serve`).
"""

import json

import param

from ..words.figures import fmt_ms, fmt_seconds, fmt_share
from ..words.theme import FOCUS_CSS
from .bridge import Bridge

__all__ = ["A11yBridge", "slider_spec", "choice_spec", "figure_spec", "landmark_spec", "run_summary", "ANNOUNCE_ID", "decimals_for"]

ANNOUNCE_ID = "stf-announce"  # the live region's id (light DOM, so tests and AT find it alike)

_ESM = r"""
const FOCUS_CSS = %(focus)s;
const ANNOUNCE_ID = %(announce_id)s;
// Leading arrows, triangles and dingbats, trailing » and →: drawn, not read.
const GLYPHS = /^[\s\u2190-\u21ff\u2500-\u27bf]+|[\s\u00bb\u2192]+$/g;
// Class: Bokeh marks the selected choice with one. Style: theme.INERT_STYLE is a host's inline style.
const OPTS = {childList: true, subtree: true, attributes: true, attributeFilter: ["class", "style"]};

function fmt(value, spec) {
  if (!Number.isFinite(value)) return "";
  if (spec.zero && Math.abs(value) < 1e-9) return spec.zero;
  const text = value.toLocaleString("en-US", {maximumFractionDigits: spec.decimals || 0});
  return spec.unit ? text + " " + spec.unit : text;
}

export function render({ model }) {
  let sheet = null;
  try { sheet = new CSSStyleSheet(); sheet.replaceSync(FOCUS_CSS); } catch (e) { /* old browser: its own focus ring */ }
  const seen = new WeakSet();
  const hooked = new WeakSet();
  const specOf = (host) => {
    const specs = model.widgets || {};
    if (host.classList) for (const c of host.classList) if (specs[c]) return specs[c];
    return null;
  };
  const applyHost = (host) => {
    const root = host.shadowRoot;
    const spec = specOf(host);
    if (spec && (spec.kind === "figure" || spec.kind === "landmark")) {
      host.setAttribute("role", spec.kind === "figure" ? "img" : spec.role);
      host.setAttribute("aria-label", spec.label);
    }
    if (!root) return;
    if (spec && spec.kind === "slider") {
      const target = root.querySelector(".noUi-target");
      const handle = root.querySelector(".noUi-handle");
      if (handle) handle.setAttribute("aria-label", spec.label);
      const api = target && target.noUiSlider;
      if (api && !hooked.has(target)) {
        hooked.add(target);
        api.on("update.stf", (values, i, unencoded) => {
          const h = target.querySelectorAll(".noUi-handle")[i];
          if (h) h.setAttribute("aria-valuetext", fmt(Number(unencoded[i]), spec));
        });
      }
      if (api && handle) handle.setAttribute("aria-valuetext", fmt(Number(api.get(true)), spec));
    }
    const group = root.querySelector(".bk-btn-group");
    if (group && spec && spec.kind === "choice") {
      group.setAttribute("role", "group");
      group.setAttribute("aria-label", spec.label);
    }
    const buttons = root.querySelectorAll("button.bk-btn");
    if (buttons.length) {
      const dimmed = host.style.pointerEvents === "none";  // INERT_STYLE is inline: no style recalc to read it
      for (const b of buttons) {
        if (spec && spec.kind === "choice") b.setAttribute("aria-pressed", String(b.classList.contains("bk-active")));
        const text = (b.textContent || "").trim();
        const name = text.replace(GLYPHS, "");
        if (name && name !== text) b.setAttribute("aria-label", name); else b.removeAttribute("aria-label");
        if (dimmed) b.setAttribute("aria-disabled", "true"); else b.removeAttribute("aria-disabled");
      }
    }
    for (const header of root.querySelectorAll("button.card-header")) {  // a Card: open or folded
      const body = header.nextElementSibling;
      header.setAttribute("aria-expanded", String(!!body && getComputedStyle(body).display !== "none"));
    }
    for (const layer of root.querySelectorAll(".bk-events")) if (layer.tabIndex !== -1) layer.tabIndex = -1;
  };
  const visit = (start) => {
    const stack = [start];
    while (stack.length) {
      const node = stack.pop();
      const sr = node.shadowRoot;
      if (node.classList && specOf(node) && !sr) applyHost(node);
      if (sr) {
        if (!seen.has(sr)) {
          seen.add(sr);
          if (sheet) sr.adoptedStyleSheets = [...sr.adoptedStyleSheets, sheet];
          observer.observe(sr, OPTS);
        }
        applyHost(node);
        stack.push(sr);
      }
      for (const child of (node.children || [])) stack.push(child);
    }
  };
  // What changed is looked at once the browser is idle, not while a run's patch is being
  // applied and painted: a screen reader needs the names soon, not in the same frame.
  const hosts = new Set();
  const added = [];
  let scheduled = false;
  const flush = () => {
    scheduled = false;
    const nodes = added.splice(0);
    const todo = [...hosts];
    hosts.clear();
    for (const n of nodes) if (n.isConnected) visit(n);
    for (const h of todo) if (h.isConnected) applyHost(h);
  };
  const schedule = () => {
    if (scheduled) return;
    scheduled = true;
    if (typeof requestIdleCallback === "function") requestIdleCallback(flush, {timeout: 250});
    else setTimeout(flush, 50);
  };
  const observer = new MutationObserver((records) => {
    for (const r of records) {
      const root = r.target.getRootNode && r.target.getRootNode();
      if (r.type === "attributes") {
        if (r.attributeName === "style") {  // only a button's host looks inert by its style
          if (r.target.shadowRoot && r.target.shadowRoot.querySelector("button.bk-btn")) hosts.add(r.target);
          continue;
        }
        if (r.target.shadowRoot) hosts.add(r.target);
      }
      if (root && root.host) hosts.add(root.host);
      for (const n of r.addedNodes) if (n.nodeType === 1) added.push(n);
    }
    if (hosts.size || added.length) schedule();
  });
  observer.observe(document.body, {childList: true, subtree: true});
  const sweep = () => visit(document.body);
  sweep();
  requestAnimationFrame(() => requestAnimationFrame(sweep));
  model.on("widgets", sweep);

  let region = document.getElementById(ANNOUNCE_ID);
  if (!region) {
    region = document.createElement("div");
    region.id = ANNOUNCE_ID;
    region.setAttribute("role", "status");
    region.setAttribute("aria-live", "polite");
    region.setAttribute("aria-atomic", "true");
    // Visually hidden, still read (not display:none).
    region.style.cssText = "position:absolute;width:1px;height:1px;margin:-1px;padding:0;overflow:hidden;"
      + "clip:rect(0 0 0 0);clip-path:inset(50%%);white-space:nowrap;border:0";
    document.body.appendChild(region);
  }
  const say = () => {
    const text = typeof model.announce === "string" ? model.announce.slice(0, 500) : "";
    if (region.textContent !== text) region.textContent = text;
    region.dataset.n = String(model.announce_n);
  };
  say();
  model.on("announce_n", say);
  // Shared by every bridge on the page (the static site's pre-rendered first view has one too,
  // removed when the live page takes over): the region goes with the last of them.
  region.dataset.users = String(Number(region.dataset.users || 0) + 1);
  model.on("remove", () => {
    observer.disconnect();
    const users = Number(region.dataset.users || 1) - 1;
    region.dataset.users = String(users);
    if (users <= 0) region.remove();
  });
  const el = document.createElement("span");
  el.hidden = true;
  return el;
}
""" % {"focus": json.dumps(FOCUS_CSS), "announce_id": json.dumps(ANNOUNCE_ID)}


def decimals_for(step):
    """How many decimals a slider with this step shows (0 for whole steps, at most 2)."""
    if step is None or float(step).is_integer():
        return 0
    text = f"{float(step):.6f}".rstrip("0")
    return min(2, len(text.split(".")[1]))


def slider_spec(label, unit="", step=1, zero=None):
    """A slider's name and how its value reads (`zero`: what 0 means, e.g. "whole prompt")."""
    return {"kind": "slider", "label": str(label), "unit": str(unit or ""), "decimals": decimals_for(step),
            "zero": zero}


def choice_spec(label):
    return {"kind": "choice", "label": str(label)}


def figure_spec(label):
    return {"kind": "figure", "label": str(label)}


def landmark_spec(role, label):
    """The page's outermost layout as a landmark (`main`), so everything on it is in one."""
    return {"kind": "landmark", "role": str(role), "label": str(label)}


class A11yBridge(Bridge):
    """Names, values, focus and announcements for the page's widgets (see the module docstring)."""

    widgets = param.Dict(default={}, doc="{css class: slider_spec | choice_spec | figure_spec}.")
    announce = param.String(default="", doc="The sentence the live region reads after a run.")
    announce_n = param.Integer(default=0, doc="Bumped with each announcement (the same sentence twice is read twice).")

    _esm = _ESM

    def say(self, text):
        self.param.update(announce=str(text)[:500], announce_n=self.announce_n + 1)


def _plain(text):
    return text.replace("\u00a0", " ")


def run_summary(metrics, scenario, before, now, saved_before, saved_now, run_error=""):
    """One sentence for the live region after a run: the headline metrics, then any star change.

    `before` / `now`: per star, whether the previous / this run earns it; `saved_before` /
    `saved_now`: whether it was earned (stored) before / after this run.
    """
    if run_error:
        return f"The simulation failed: {run_error}"
    if not metrics:
        return ""
    parts = []
    share = metrics.get("slo_attainment")
    if share is not None:
        parts.append(f"SLO met by {fmt_share(share)} of requests")
    if scenario.fleet.admission is not None:  # early rejection: said once, beside the share it lowers
        parts.append(f"{metrics.get('rejected') or 0:,} rejected at arrival, "
                     f"{fmt_share(metrics.get('served_slo_attainment'))} of the rest met it")
    parts.append(f"TTFT p90 {fmt_seconds(metrics.get('ttft_p90_s'))}")
    parts.append(f"TPOT p99 {fmt_ms(metrics.get('tpot_p99_ms'))}")
    if scenario.slo.max_gap_ms:
        parts.append(f"worst gap p99 {fmt_ms(metrics.get('worst_gap_p99_ms'))}")
    for i, live in enumerate(now):
        was = i < len(before) and before[i]
        if live and not was:
            new = i < len(saved_now) and saved_now[i] and not (i < len(saved_before) and saved_before[i])
            parts.append(f"star {i + 1} earned" if new else f"star {i + 1} met")
        elif was and not live:
            parts.append(f"star {i + 1} no longer met")
    return _plain("; ".join(parts)) + "."
