"""The result where a student on a phone looks: a strip fixed to the bottom of a narrow screen.

On a phone (390 px) or in a narrow blog embed (374 x 760), the controls alone fill the
screen and the canvas and the cards start a screen or two further down, so a change gave no
feedback without scrolling. Under STRIP_MAX_PX of width this strip stays at the bottom of
the screen: the share meeting the SLO, the two latencies the SLO names, and one thin bar per
GPU row over the whole run (decode steps blue, steps carrying prompt work amber, decode
steps over the per-token target red, idle grey), the same colours as the canvas. It says
"Simulating…" while a run is on its way and the run it shows (`data-run`). Wider screens
never show it: the canvas and the cards are beside the controls there.

`strip_html(state)` is pure (tested without a browser); `ResultStrip` is the pane.
"""

import html

import numpy as np

from lab.core.report import slow_limit_t
from lab.core.ticks import TICKS_PER_S

from ..browser.panel_shims import Html
from ..words.figures import NBSP, fmt_ms, fmt_seconds, fmt_share
from ..words.theme import PALETTE

__all__ = ["ResultStrip", "strip_html", "row_shares", "STRIP_MAX_PX", "STRIP_CSS", "MAX_STRIP_ROWS"]

STRIP_MAX_PX = 640  # the strip shows at this width and under (the page's two columns stack below ~700 px)
MAX_STRIP_ROWS = 16  # GPU rows drawn in the strip; more are summed up in words
STRIP_CSS = f"""
.stf-strip, .stf-strip-space {{ display: none; }}
@media (max-width: {STRIP_MAX_PX}px) {{
  .stf-strip-space {{ display: block; visibility: hidden; padding: 5px 10px 6px; }}
  .stf-strip {{ display: block; position: fixed; left: 0; right: 0; bottom: 0; z-index: 50;
    background: #ffffff; border-top: 1px solid #c9cfd9; box-shadow: 0 -2px 6px rgba(0,0,0,.08);
    padding: 5px 10px 6px; font: 12.5px/1.3 system-ui, -apple-system, "Segoe UI", sans-serif; color: {PALETTE["ink"]}; }}
}}
.stf-strip .head {{ display: flex; flex-wrap: wrap; gap: 2px 12px; align-items: baseline; }}
.stf-strip .slo {{ font-weight: 700; font-size: 14px; }}
.stf-strip .busy {{ color: {PALETTE["muted"]}; }}
.stf-strip .rows {{ display: grid; grid-template-columns: auto 1fr; gap: 1px 6px; margin-top: 4px; align-items: center; }}
.stf-strip .lab {{ font-size: 10.5px; color: {PALETTE["muted"]}; white-space: nowrap; }}
.stf-strip .bar {{ display: flex; height: 5px; background: {PALETTE["grid"]}; border-radius: 2px; overflow: hidden; }}
.stf-strip .bar span {{ display: block; height: 100%; }}
"""


def row_shares(result, target_ms):
    """Per GPU row (an instance's log): (label, decode, prefill, slow) shares of the run's
    length: decode-only steps within the target, steps with prompt tokens, decode steps over
    the per-token target (`target_ms`; None: none is). The canvas's colours, summed: a step is
    slow by the canvas's rule (report.slow_limit_t, on its exact length in ticks)."""
    span = max(float(result.end_time), 1e-12)
    limit = slow_limit_t(target_ms)
    out = []
    for log in result.gpus:
        # (ticks, as the engine logged them: seconds columns would be made for this alone)
        dur_t = np.asarray(log.end_t) - np.asarray(log.start_t)
        dur = dur_t / TICKS_PER_S
        prefill = np.asarray(log.prefill_tokens, dtype=np.int64) > 0
        decoding = np.asarray(log.decode_seqs, dtype=np.int64) > 0
        slow = decoding & (dur_t > limit)
        out.append((log.label, float(dur[decoding & ~prefill & ~slow].sum()) / span,
                    float(dur[prefill & ~slow].sum()) / span, float(dur[slow].sum()) / span))
    return out


def _bar(decode, prefill, slow):
    parts = []
    for share, colour in ((decode, PALETTE["decode"]), (prefill, PALETTE["prefill"]), (slow, PALETTE["slow"])):
        pct = max(0.0, min(100.0, share * 100.0))
        if pct >= 0.05:
            parts.append(f'<span style="width:{pct:.1f}%;background:{colour}"></span>')
    return f'<div class="bar">{"".join(parts)}</div>'


def strip_html(state):
    """The strip for the state's latest run ('' before the first)."""
    m, result = state.metrics, state.result
    if state.busy and state.run_id:
        return _twice(f'data-run="{state.run_id}" data-busy="true"', '<div class="head"><span class="busy">Simulating…</span></div>')
    if state.run_error:
        return _twice(f'data-run="{state.run_id}" data-busy="false"', '<div class="head"><span class="slo">The run failed</span></div>')
    if not m or result is None:
        return ""
    slo = state.scenario.slo
    head = [f'<span class="slo" data-metric="slo">{fmt_share(m.get("slo_attainment"))} meet the SLO</span>']
    if slo.ttft_s:
        head.append(f'<span>TTFT p99 {fmt_seconds(m.get("ttft_p99_s"))}</span>')
    if slo.max_gap_ms:
        head.append(f'<span>worst gap p99 {fmt_ms(m.get("worst_gap_p99_ms"))}</span>')
    elif slo.tpot_ms:
        head.append(f'<span>TPOT p99 {fmt_ms(m.get("tpot_p99_ms"))}</span>')
    shares = row_shares(result, slo.per_token_target_ms)
    rows = [f'<span class="lab">{html.escape(label)}</span>{_bar(d, p, s)}' for label, d, p, s in shares[:MAX_STRIP_ROWS]]
    if len(shares) > MAX_STRIP_ROWS:
        rows.append(f'<span class="lab">+{len(shares) - MAX_STRIP_ROWS:,}{NBSP}more</span><span></span>')
    return _twice(f'data-run="{state.run_id}" data-busy="false" data-rows="{len(shares)}"',
                  f'<div class="head">{"".join(head)}</div><div class="rows">{"".join(rows)}</div>')


def _twice(attrs, body):
    """The strip, fixed to the screen's bottom, and its invisible twin in the page's flow, which
    keeps the room it covers at the page's end (so nothing is ever hidden under it). Hidden from
    screen readers: the page's live region already reads each run's headline (a11y.py)."""
    return (f'<div class="stf-strip-space" aria-hidden="true">{body}</div>'
            f'<div class="stf-strip" aria-hidden="true" {attrs}>{body}</div>')


class ResultStrip:
    """The strip's pane: redrawn when a run finishes (`run_id`) or the page turns busy."""

    def __init__(self, state):
        self.state = state
        self.pane = Html("", stylesheets=[STRIP_CSS], margin=0, sizing_mode="stretch_width",
                         css_classes=["stf-strip-pane"])
        state.param.watch(self._update, ["run_id", "busy"])
        self._update()

    def _update(self, *_):
        text = strip_html(self.state)
        if self.pane.object != text:
            self.pane.object = text
