"""The canvas's words beside the figure: the legend (every mark's swatch and name, and what a red step
means against this SLO) and the keyboard shortcuts' line. Plain HTML, no Panel or Bokeh: the
pre-rendered first view (prerender.py) draws the same lines as the live canvas."""

import html

from ..words.targets import OVER_WORDS, over_target_label, over_target_meaning
from ..words.theme import PALETTE

__all__ = ["legend_html", "keys_html"]


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


def keys_html(note):
    """The shortcut line under the overview, with what the last "next slow step" found."""
    shown = f' <span class="stf-jump-note" role="status">· {html.escape(note)}</span>' if note else ""
    return ('<div class="stf-kbd">Keys: <kbd>K</kbd> play/pause · <kbd>J</kbd>/<kbd>L</kbd> back/forward 1 s · '
            f'<kbd>N</kbd> next slow step · click the overview to jump{shown}</div>')
