"""The "why requests missed" bar: the missed requests' shares by dominant cause.

`blame_bar_html(summary)` draws one `lab.core.blame_summary` as a stacked bar with the
count of missed requests and a legend that is also its text (cause, share, count), so
nothing is told by colour alone; causes with no share are left out. `BlameView` shows
the latest run's (`state.blame_summary`) beside the metrics. The twin view draws two.

Colours follow the canvas where a cause has a colour there (amber = prefill work,
green = KV on the wire, grey = KV waiting, blue = decode); the rest come from the same
Okabe & Ito palette, and causes of one family that share a colour get a hatch.
"""

import html


from lab.core.blame import CAUSES

from ..browser.panel_shims import Html
from ..words.theme import CSS, PALETTE
from .metrics_view import fade_while_busy

__all__ = ["BlameView", "blame_bar_html", "CAUSE_LABELS", "CAUSE_FILLS", "BLAME_CSS"]

# Short words a student reads for each dominant cause (lab.core.blame.CAUSES); the TTFT
# parts use the canvas's row names where there is one ("prefill queue", "link queue").
# A request's story (story.py) names and colours its TTFT parts with these too.
CAUSE_LABELS = {
    "queue": "prefill queue",
    "prefill": "own prefill",
    "chunk_wait": "shared prefill steps",
    "kv_wait": "KV room",
    "prefix_fetch": "cache fetch",
    "link_wait": "link queue",
    "wire": "on the wire",
    "join_wait": "join wait",
    "prefill_interference": "prefill mixed in",
    "decode_batch": "big decode batch",
    "transfer": "transfer in first gap",
    "preemption": "preempted",
    "role_change": "moved: GPU changed role",
    "kv_capacity": "KV capacity",
    "unfinished": "unfinished",
    "rejected": "rejected early",
}


def _hatch(colour):
    return f"repeating-linear-gradient(135deg, {colour} 0 3px, #ffffff 3px 5px)"


# CSS backgrounds per cause (a colour, or a colour hatched with white for a family's second
# member), in the canvas's colours for the same thing: its queue rows are grey (the prefill
# queue hatched here, to tell it from the link's), KV waiting for room is the KV band's purple.
CAUSE_FILLS = {
    "queue": _hatch(PALETTE["link_wait"]),
    "prefill": PALETTE["prefill"],
    "chunk_wait": _hatch(PALETTE["prefill"]),
    "kv_wait": PALETTE["kv"],
    "prefix_fetch": _hatch(PALETTE["kv"]),  # cached KV coming in from the host pool
    "link_wait": PALETTE["link_wait"],
    "wire": PALETTE["link"],
    "join_wait": _hatch(PALETTE["link"]),
    "prefill_interference": PALETTE["slow"],
    "decode_batch": PALETTE["decode"],
    "transfer": _hatch(PALETTE["decode"]),
    "preemption": _hatch(PALETTE["ink"]),
    "role_change": _hatch(PALETTE["kv"]),
    "kv_capacity": "#F0E442",  # Okabe & Ito's yellow (outlined: light on white)
    "unfinished": PALETTE["ink"],
    "rejected": PALETTE["bad"],  # the canvas's rejection marks on the prefill queue row
}
assert set(CAUSE_LABELS) == set(CAUSES) == set(CAUSE_FILLS), "every core cause needs a label and a fill"

BLAME_CSS = """
.stf-blame { background: #fff; border: 1px solid #dde2ea; border-radius: 8px; padding: 8px 10px; min-width: 0;
             box-sizing: border-box; }
.stf-blame-head { display: flex; flex-wrap: wrap; gap: 2px 10px; align-items: baseline; font-size: 13px; }
.stf-blame-head b { font-weight: 650; }
.stf-blame-head .n { color: var(--muted); font-size: 12px; font-variant-numeric: tabular-nums; }
.stf-blame-bar { display: flex; height: 14px; margin: 6px 0 4px; border-radius: 4px; overflow: hidden;
                 background: #e9edf3; outline: 1px solid #c9d2de; outline-offset: -1px; }
.stf-blame-bar > span { display: block; height: 100%; min-width: 2px; box-shadow: inset -1px 0 0 #fff; }
.stf-blame-legend { list-style: none; margin: 0; padding: 0; display: flex; flex-wrap: wrap; gap: 2px 14px;
                    font-size: 12px; line-height: 17px; }
.stf-blame-legend li { white-space: nowrap; font-variant-numeric: tabular-nums; }
.stf-blame-legend .sw { display: inline-block; width: 14px; height: 10px; border-radius: 2px; margin-right: 5px;
                        vertical-align: -1px; outline: 1px solid rgba(29, 36, 48, .35); outline-offset: -1px; }
.stf-blame-legend small { color: var(--muted); font-size: 11.5px; }
.stf-blame-none { color: var(--good); font-weight: 600; font-size: 12px; }
"""


def _counts(summary):
    """[(cause, share, count)] of the causes with a share, in CAUSES order; counts sum to `missed`."""
    missed = int(summary.get("missed") or 0)
    shares = summary.get("missed_by_cause") or {}
    out = [(c, float(shares.get(c) or 0.0)) for c in CAUSES if (shares.get(c) or 0) > 0]
    counts = [int(round(s * missed)) for _, s in out]
    if out and sum(counts) != missed:  # rounding: the largest absorbs the difference
        i = max(range(len(out)), key=lambda k: out[k][1])
        counts[i] += missed - sum(counts)
    return [(c, s, n) for (c, s), n in zip(out, counts)]


def _pct(share):
    pct = share * 100
    return f"{pct:.0f}%" if pct >= 1 or pct == 0 else "<1%"


def blame_bar_html(summary, total=None, title="Why requests missed", key=""):
    """One blame summary as HTML: a heading with the missed count, the stacked bar, the legend.

    `summary`: lab.core.blame_summary (or {} before a run); `total`: requests in the run, for
    "N of M"; `key`: a data-blame attribute (e.g. "now", "pinned") for telling bars apart.
    """
    if not summary:
        return f'<div class="stf-blame" data-blame="{html.escape(key)}"></div>'
    missed = int(summary.get("missed") or 0)
    of = f" of {total:,}" if isinstance(total, int) else ""
    head = (f'<div class="stf-blame-head"><b>{html.escape(title)}</b>'
            f'<span class="n" data-missed="{missed}">{missed:,}{of} request{"" if missed == 1 and not of else "s"} '
            f'missed the SLO</span></div>')
    parts = _counts(summary)
    if not parts:
        spoken = f"{title}: no request missed the SLO"
        bar = f'<div class="stf-blame-bar" role="img" aria-label="{html.escape(spoken)}"></div>'
        legend = '<div class="stf-blame-none">✓ Nothing to blame: every request met the SLO.</div>'
    else:
        spoken = f"{title}: {missed:,} missed. " + ", ".join(f"{CAUSE_LABELS[c]} {_pct(s)}" for c, s, _ in parts)
        segs = "".join(
            f'<span data-cause="{c}" style="width:{s * 100:.2f}%;background:{CAUSE_FILLS[c]}" '
            f'title="{html.escape(CAUSE_LABELS[c])}: {_pct(s)} ({n:,})"></span>' for c, s, n in parts
        )
        bar = f'<div class="stf-blame-bar" role="img" aria-label="{html.escape(spoken)}">{segs}</div>'
        items = "".join(
            f'<li data-cause="{c}" data-share="{s:.4f}"><span class="sw" aria-hidden="true" '
            f'style="background:{CAUSE_FILLS[c]}"></span>{html.escape(CAUSE_LABELS[c])} <b>{_pct(s)}</b> '
            f'<small>({n:,})</small></li>' for c, s, n in parts
        )
        legend = f'<ul class="stf-blame-legend">{items}</ul>'
    return f'<div class="stf-blame" data-blame="{html.escape(key)}" data-missed="{missed}">{head}{bar}{legend}</div>'


class BlameView:
    """The latest run's blame bar, beside the metrics; rebuilt after each run."""

    def __init__(self, state):
        self.state = state
        self.pane = Html(blame_bar_html({}), sizing_mode="stretch_width", stylesheets=[CSS, BLAME_CSS],
                                 margin=(8, 0, 0, 0), css_classes=["stf-blame-pane"])
        self.view = self.pane
        state.param.watch(self._update, "run_id")
        fade_while_busy(self.pane, state)  # (the run before's, like the metric cards)
        if state.blame_summary or state.run_error:
            self._update()

    def _update(self, *_):
        s = self.state
        if s.run_error or not s.blame_summary:
            self.pane.object = blame_bar_html({})
        else:
            self.pane.object = blame_bar_html(s.blame_summary, total=len(s.rows), key="now")
