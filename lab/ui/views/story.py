"""A request's life story: where its time went, from arrival to its last token.

`story_html(request, blame, result, scenario)` is a pure function (tested without a
browser): the request's metrics row (`core.request_metrics`), its `lab.core.blame.Blame`,
the run and its scenario in, escaped HTML out. It tells, in order: the arrival; the queue
wait; the prefill on GPU n (its own compute, and the wait for the other work sharing its
steps); on a split fleet the KV transfer to decode GPU m (room, link, wire, join); the
first token and where it counts; the decode (tokens, median and worst gap, the worst one
marked with its cause); and, for a miss, the dominant cause in words. Every TTFT part it
shows carries `data-part` / `data-s`, and they add up to the TTFT it shows (`data-ttft-s`).

A request early rejection turned away has a short story: its arrival and "rejected at
arrival: predicted TTFT x s, over the y s target".

Which request a click picks: `request_at_step` (a step on the canvas), a rejection's cross
on the prefill queue row, `nearest_point` (the worst-gap scatter), `missed_order` (the
"next missed request" button: the worst miss first, rejected requests after the served misses). `focus_of` names the step to outline and bring into view.

`StoryView` is the panel under the canvas: the button, the story, a close button; it
outlines the step on the canvas, moves the window there, and reads one sentence in the
live region (`say`).
"""

import bisect
import html
import math
import statistics

import panel as pn

from lab.core.blame import LINK_PARTS, TTFT_PARTS
from lab.core.metrics import gap_steps, request_gaps

from ..browser.panel_shims import Html
from ..state import WINDOW_S
from ..words.figures import NBSP, fmt_ms, fmt_seconds
from ..words.fleet_words import instance_name
from ..words.theme import CSS, INERT_STYLE, LIVE_STYLE
from .blame_view import CAUSE_FILLS, CAUSE_LABELS

__all__ = ["story_html", "StoryView", "request_at_step", "step_at", "missed_order", "focus_of", "focus_span", "nearest_point",
           "severity", "cause_sentence", "PART_NAMES", "CAUSE_WORDS", "STEP_TOLERANCE_S"]

STEP_TOLERANCE_S = 0.004  # a tap this close to a step (about a pixel at a 2.5 s window) still picks it
PART_NAMES = {p: CAUSE_LABELS[p] for p in TTFT_PARTS}  # the blame bar's words and fills, one set
PART_COLOURS = {p: CAUSE_FILLS[p] for p in TTFT_PARTS}
# A dominant cause in words ({tokens}, {batch}: the worst gap's step).
CAUSE_WORDS = {
    "queue": "it waited in the queue before a GPU took its prompt: the prefill side could not keep up.",
    "prefill": "its own prompt took that long to compute.",
    "chunk_wait": "its prefill shared its steps with other work (other prompts, other requests' tokens), "
                  "so it took longer than its own compute.",
    "kv_wait": "its KV cache waited for room on a decode GPU: the decode pool's memory was full.",
    "prefix_fetch": "its cached prompt blocks took that long to fetch from the shared pool.",
    "link_wait": "its KV cache waited for the link: other transfers were ahead of it.",
    "wire": "its KV cache took that long on the wire: the link is slow for a prompt this size.",
    "join_wait": "it waited for the decode GPU's next step to take it in.",
    "prefill_interference": "its worst gap was a step that also prefilled {tokens} prompt tokens: "
                            "prefill mixed into decoding stalled its stream.",
    "decode_batch": "its worst gap was a decode-only step with {batch}: the decode batch (and its context) "
                    "made the step too long.",
    "transfer": "its worst gap holds the KV transfer: with the first token counted at the prefill, the transfer "
                "lands before the second token.",
    "preemption": "it was preempted and waited to run again.",
    "role_change": "its decode GPU left for the prefill pool: its KV cache moved to another decode GPU "
                   "and its stream waited for the move.",
    "kv_capacity": "its prompt and answer never fit in one GPU's KV memory, so it was dropped.",
    "unfinished": "the run ended before its last token.",
    "rejected": "early rejection turned it away at arrival: its predicted TTFT was over the target.",
}
_GAP_CAUSE_SHORT = {"prefill_interference": "prefill mixed in: {tokens} prompt tokens in that step",
                    "decode_batch": "a decode-only step, {batch} decoding in it",
                    "transfer": "the KV transfer (first token counted at the prefill)",
                    "preemption": "the wait after a preemption, and its re-prefill",
                    "role_change": "a move: its decode GPU changed role"}


def _t(seconds):
    """A moment of the run: 12.345 s."""
    return f"{seconds:,.3f}{NBSP}s"


def _seqs(n):
    n = n or 0
    return f"{n:,} sequence" + ("" if n == 1 else "s")


def _predicted(seconds):
    """A prediction next to its target: to the millisecond, so 1.003 s does not read as 1.00 s."""
    return f"{seconds:,.3f}{NBSP}s"


def _b(text):
    return f"<b>{text}</b>"


def severity(row, slo):
    """How badly a request missed (0 when it met the SLO): its worst ratio to a target it
    missed; a request that never finished ranks above every finished one."""
    if row["met_slo"]:
        return 0.0
    if not row["finished"]:
        return math.inf
    ratios = [1.0]
    if slo.ttft_s:
        ratios.append(row["ttft_s"] / slo.ttft_s)
    if slo.tpot_ms and row["tpot_ms"] is not None:
        ratios.append(row["tpot_ms"] / slo.tpot_ms)
    if slo.max_gap_ms and row["worst_gap_ms"] is not None:
        ratios.append(row["worst_gap_ms"] / slo.max_gap_ms)
    return max(ratios)


def missed_order(rows, slo):
    """Ids of the requests that missed, the worst miss first (ties: the earlier request); the
    rejected ones after every served miss (their stories are one line each)."""
    missed = [r for r in rows if not r["met_slo"]]
    missed.sort(key=lambda r: (bool(r.get("rejected")), -severity(r, slo), r["id"]))
    return [r["id"] for r in missed]


def _worst(result, rec):
    """(step index that ended its worst gap, gap s, that step's GPU) or None: the earliest of
    the largest gaps, as lab.core.blame names it (a preempted request's may be on a GPU it
    decoded on before its last)."""
    gaps = request_gaps(result, rec)
    if not gaps:
        return None
    worst = max(gaps)
    gpu, step = gap_steps(result, rec)[gaps.index(worst)]
    return step, worst, gpu


def _prefill_step(result, rec):
    """The first step of its prefill GPU that carried its prompt, or None."""
    if rec.prefill_gpu < 0 or rec.prefill_start is None:
        return None
    starts = result.gpus[rec.prefill_gpu].start
    j = bisect.bisect_left(starts, rec.prefill_start - 1e-12)
    return j if j < len(starts) else None


def focus_of(result, rec, blame=None):
    """Where to look for a request: ("gpu", gpu, step index) or ("link", transfer index), or None
    (it never started). A miss whose dominant cause is a TTFT part (`blame` given) points at
    that part: its transfer on the link row for the link's parts, else its first prefill
    step; otherwise the step that ended its worst gap, else its first prefill step."""
    cause = blame.dominant_cause if blame is not None else None
    if cause in LINK_PARTS and rec.transfer >= 0:
        return "link", rec.transfer
    worst = _worst(result, rec)
    if worst is not None and cause not in TTFT_PARTS:
        return "gpu", worst[2], worst[0]
    j = _prefill_step(result, rec)
    if j is not None:
        return "gpu", rec.prefill_gpu, j
    return ("gpu", worst[2], worst[0]) if worst is not None else None


def focus_span(result, focus):
    """(start, end) in seconds of a `focus_of` answer: the step, or the transfer from its prefill end to landing."""
    if focus[0] == "link":
        tr = result.transfers[focus[1]]
        return tr.ready, tr.end
    log = result.gpus[focus[1]]
    return log.start[focus[2]], log.end[focus[2]]


def request_at_step(result, rows, gpu, step):
    """The request a click on step `step` of GPU `gpu` means.

    Rule: the request whose worst gap that step ended (the step is why its stream stalled;
    of several, the largest gap, then the earliest request); else, of the requests the step
    served (decoding in it, or prefilling across it), the one with the largest TTFT (the
    one that waited most to get here); None when it served none.
    """
    log = result.gpus[gpu]
    if not 0 <= step < len(log):
        return None
    s, e = log.start[step], log.end[step]
    stalled, served = [], []
    for rec in result.requests:
        if any(g == gpu and a <= step <= b for g, a, b in rec.stretches()):
            served.append(rec.id)
            worst = _worst(result, rec)
            if worst is not None and (worst[2], worst[0]) == (gpu, step):
                stalled.append((-worst[1], rec.id))
        elif (rec.prefill_gpu == gpu and rec.prefill_start is not None and rec.prefill_start < e - 1e-12
              and (rec.prefill_end if rec.prefill_end is not None else math.inf) > s + 1e-12):
            served.append(rec.id)
    if stalled:
        return min(stalled)[1]
    if not served:
        return None
    return max(served, key=lambda i: (rows[i]["ttft_s"], -i))


def step_at(log, t, tolerance=STEP_TOLERANCE_S):
    """Index of the step of `log` running at time `t` (or within `tolerance` of it), else None."""
    starts = log.start
    j = bisect.bisect_right(starts, t) - 1
    candidates = [k for k in (j, j + 1) if 0 <= k < len(starts)]
    best = None
    for k in candidates:
        lo, hi = starts[k], log.end[k]
        dist = 0.0 if lo <= t <= hi else min(abs(t - lo), abs(t - hi))
        if dist <= tolerance and (best is None or dist < best[0]):
            best = (dist, k)
    return None if best is None else best[1]


def nearest_point(points, x, y, x_span, y_span, log_y=True, within=0.04):
    """Id of the point of `points` ({x, y, id} columns) nearest to (x, y), measured as shares
    of the axes' spans (log y on a log axis), if within `within` of it; else None."""
    best = None
    if not x_span or not y_span or y is None or (log_y and y <= 0):
        return None
    ty = math.log10(y) if log_y else y
    for px, py, pid in zip(points["x"], points["y"], points["id"]):
        qy = math.log10(py) if log_y else py
        d = math.hypot((float(px) - x) / x_span, (qy - ty) / y_span)
        if d <= within and (best is None or d < best[0]):
            best = (d, int(pid))
    return None if best is None else best[1]


# ---------------------------------------------------------------------- the story

def _missed_terms(row, slo):
    """What it missed, in words ([] when it met the SLO)."""
    if row["met_slo"]:
        return []
    if row["dropped"]:
        return ["dropped: it never fit in a GPU's KV memory"]
    if row.get("rejected"):
        return ["rejected at arrival (early rejection)"]
    terms = []
    if slo.ttft_s and row["ttft_s"] > slo.ttft_s:
        terms.append(f"TTFT {fmt_seconds(row['ttft_s'])} over the {fmt_seconds(slo.ttft_s)} target")
    if slo.tpot_ms and row["tpot_ms"] is not None and row["tpot_ms"] > slo.tpot_ms:
        terms.append(f"TPOT {fmt_ms(row['tpot_ms'])} over the {fmt_ms(slo.tpot_ms)} target")
    if slo.max_gap_ms and row["worst_gap_ms"] is not None and row["worst_gap_ms"] > slo.max_gap_ms:
        terms.append(f"worst gap {fmt_ms(row['worst_gap_ms'])} over the {fmt_ms(slo.max_gap_ms)} target")
    if not row["finished"]:
        terms.append("it never finished")
    return terms


def cause_sentence(blame):
    """The dominant cause of a miss in words, or ''."""
    cause = blame.dominant_cause
    if not cause:
        return ""
    return CAUSE_WORDS.get(cause, cause).format(tokens=f"{blame.worst_gap_prompt_tokens or 0:,}",
                                                batch=_seqs(blame.worst_gap_batch))


def _part_item(name, seconds, text):
    return (f'<li class="part" data-part="{name}" data-s="{seconds!r}"><span class="sw" '
            f'style="background:{PART_COLOURS[name]}"></span>{text}</li>')


def _ttft_bar(blame, ttft):
    shown = [(p, blame.parts[p]) for p in TTFT_PARTS if blame.parts[p] > 0]
    if not shown or not ttft or ttft <= 0:
        return ""
    spans = "".join(f'<span style="width:{100 * s / ttft:.2f}%;background:{PART_COLOURS[p]}" '
                    f'title="{PART_NAMES[p]}: {fmt_seconds(s)}"></span>' for p, s in shown)
    label = "; ".join(f"{PART_NAMES[p]} {fmt_seconds(s)}" for p, s in shown)
    return f'<div class="stf-story-bar" role="img" aria-label="TTFT {fmt_seconds(ttft)}: {html.escape(label)}">{spans}</div>'


ROUTING_WORDS = {"round_robin": "round robin", "least_loaded": "least loaded", "cache_affinity": "cache affinity"}


def _queue_words(fleet, rec, result, split):
    """Which queue a request waited in: the fleet's (dispatch `queue`), its long- or short-prompt
    group's (`length_split`), or the one instance it was bound to at arrival."""
    anyone = "a prefill GPU" if split else "a GPU with a free slot and KV room"
    if fleet.dispatch == "length_split":
        group = "long" if rec.prompt_tokens >= fleet.long_prompt_tokens else "short"
        return f"{anyone} among those for {group} prompts (routing by length)"
    if fleet.dispatch in ROUTING_WORDS and rec.prefill_gpu >= 0:
        return (f"{_b(instance_name(result, rec.prefill_gpu))}, the one it was bound to at arrival "
                f"({ROUTING_WORDS[fleet.dispatch]})")
    return anyone


def story_html(request, blame, result, scenario):
    """The story of one request (see the module docstring). `request`: its request_metrics row."""
    rid = request["id"]
    rec = result.requests[rid]
    fleet = scenario.fleet
    slo = scenario.slo
    split = fleet.layout == "disaggregated"
    first_at_prefill = split and fleet.first_token == "prefill"
    parts = blame.parts
    ttft = request["ttft_s"]
    missed = not request["met_slo"]
    terms = _missed_terms(request, slo)
    verdict = (f'<span class="bad">✗ missed the SLO</span>: {"; ".join(terms)}' if missed
               else '<span class="ok">✓ met the SLO</span>')
    head = (f'<div class="stf-story-head"><h3>Request {rid}</h3><span>{rec.prompt_tokens:,}-token prompt, '
            f'{rec.output_tokens:,}-token answer · {verdict}</span></div>')
    why = ""
    if missed and blame.dominant_cause:
        why = (f'<p class="stf-story-why" data-cause="{blame.dominant_cause}">Why it missed: '
               f'{html.escape(cause_sentence(blame))}</p>')
    items = [f'<li data-event="arrival">Arrived at {_b(_t(rec.arrival))}.</li>']
    if rec.dropped:
        items.append('<li data-event="dropped">Dropped at once: its prompt and answer never fit in one GPU\'s KV '
                     f'memory ({html.escape(rec.dropped)}).</li>')
    if rec.rejected:
        target = f", over the {fmt_seconds(slo.ttft_s)} target" if slo.ttft_s else ""
        items.append(f'<li data-event="rejected" data-predicted-s="{rec.predicted_ttft_s!r}">Rejected at arrival: '
                     f'predicted TTFT {_b(_predicted(rec.predicted_ttft_s))}{target} (early rejection: the prompt '
                     'tokens queued ahead of it and its own, at the prefill rate). It never queued.</li>')
    open_note = ""
    if blame.open_part:
        open_note = f" (still here when the run ended at {_t(result.end_time)})"
    if parts["queue"] > 0:
        where = _queue_words(fleet, rec, result, split)
        items.append(_part_item("queue", parts["queue"], f"Queued {_b(fmt_seconds(parts['queue']))} for {where}"
                                f"{open_note if blame.open_part == 'queue' else ''}."))
    if parts["prefix_fetch"] > 0:
        items.append(_part_item("prefix_fetch", parts["prefix_fetch"],
                                f"Fetched its {_b(f'{rec.prefix_hit_tokens:,}')} cached prompt tokens from the shared "
                                f"pool: {_b(fmt_seconds(parts['prefix_fetch']))}."))
    if rec.prefill_start is not None and (parts["prefill"] > 0 or parts["chunk_wait"] > 0):
        end = rec.prefill_end
        span = f"{_t(rec.prefill_start)} to {_t(end)}" if end is not None else f"from {_t(rec.prefill_start)}"
        cached = ""
        if rec.prefix_hit_tokens:  # the prompt's head was in the prefix cache: not computed
            cached = (f" for {_b(f'{rec.prompt_tokens - rec.prefix_hit_tokens:,}')} tokens "
                      f"({rec.prefix_hit_tokens:,} cached)")
        items.append(_part_item("prefill", parts["prefill"], f"Prefill on {_b(instance_name(result, rec.prefill_gpu))}, {span}: "
                                f"its own compute{cached} {_b(fmt_seconds(parts['prefill']))}"
                                f"{open_note if blame.open_part == 'prefill' else ''}."))
        if parts["chunk_wait"] > 0:
            items.append(_part_item("chunk_wait", parts["chunk_wait"],
                                    f"Its prefill steps also did other work (other prompts, other requests' tokens): "
                                    f"{_b(fmt_seconds(parts['chunk_wait']))} more."))
    tr = result.transfers[rec.transfer] if rec.transfer >= 0 else None
    if split and tr is not None:
        dst = instance_name(result, tr.dst_gpu)
        link = {
            "kv_wait": f"Its KV cache waited {_b(fmt_seconds(parts['kv_wait']))} for room on a decode GPU (KV memory).",
            "link_wait": f"Waited {_b(fmt_seconds(parts['link_wait']))} for the link (transfers ahead of it).",
            "wire": f"On the wire {_b(fmt_seconds(parts['wire']))}: {tr.bytes / 1e6:,.0f}{NBSP}MB to {_b(dst)}.",
            "join_wait": f"Landed; waited {_b(fmt_seconds(parts['join_wait']))} for {dst}'s next step to take it in.",
        }
        for name, text in link.items():
            if parts[name] > 0:
                items.append(_part_item(name, parts[name], text[:-1] + (open_note if blame.open_part == name else "")
                                        + "."))
    elif split and rec.prefill_end is not None and parts["kv_wait"] > 0:  # no room reserved yet
        items.append(_part_item("kv_wait", parts["kv_wait"], f"Its KV cache waited {_b(fmt_seconds(parts['kv_wait']))} "
                                f"for room on a decode GPU (KV memory){open_note if blame.open_part else ''}."))
    if rec.first_token is not None:
        if not split:
            where = "the GPU emits it at the end of the step that finishes the prefill"
        elif first_at_prefill:
            where = "first_token = prefill: it counts when the prefill ends, and the transfer falls in the next gap"
        else:
            where = "first_token = decode: it counts when the decode GPU emits it, after the transfer"
        items.append(f'<li data-event="first-token" data-ttft-s="{ttft!r}">First token at {_b(_t(rec.first_token))}: '
                     f'TTFT {_b(fmt_seconds(ttft))} ({where}).</li>')
    elif not rec.dropped and not rec.rejected:
        items.append(f'<li data-event="no-first-token" data-ttft-s="{ttft!r}">No first token by the end of the run: '
                     f'{_b(fmt_seconds(ttft))} and counting.</li>')
    if rec.preemptions:
        times = "once" if rec.preemptions == 1 else f"{rec.preemptions:,} times"
        where = "re-prefilled" if not split else "prefilled and crossed the link again with"
        items.append(f'<li data-event="preempted" data-preemptions="{rec.preemptions}">Preempted {_b(times)} '
                     f'(KV on demand): its GPU ran out of KV blocks, so it lost its KV, went back to the queue and '
                     f'{where} its prompt + the tokens it had written; each wait is in a gap.</li>')
    gaps = request_gaps(result, rec)
    if gaps:
        worst = max(gaps)
        gpu_j, j = gap_steps(result, rec)[gaps.index(worst)]
        when = result.gpus[gpu_j].end[j]
        per_token = slo.max_gap_ms or slo.tpot_ms
        over = per_token is not None and worst * 1000.0 > per_token
        term = "gap" if slo.max_gap_ms else "TPOT"
        target = f", over the {fmt_ms(per_token)} {term} target" if over else ""
        cause = _GAP_CAUSE_SHORT.get(blame.worst_gap_cause, blame.worst_gap_cause or "").format(
            tokens=f"{blame.worst_gap_prompt_tokens or 0:,}", batch=_seqs(blame.worst_gap_batch))
        first_gap = ""
        if first_at_prefill and blame.first_gap_parts:
            bits = [f"{name.replace('_', ' ')} {fmt_seconds(s)}" for name, s in blame.first_gap_parts.items() if s > 0]
            first_gap = f" Its first gap ({fmt_ms(gaps[0] * 1000.0)}): {html.escape(', '.join(bits))}."
        items.append(
            f'<li data-event="decode">Decode on {_b(instance_name(result, rec.decode_gpu))}: {len(gaps) + 1:,} tokens in all, '
            f'gaps median {fmt_ms(statistics.median(gaps) * 1000.0)}, worst '
            f'<mark class="stf-worst" data-worst-ms="{worst * 1000.0!r}" data-cause="{blame.worst_gap_cause or ""}">'
            f'{fmt_ms(worst * 1000.0)}</mark> ending at {_t(when)}{target}: {html.escape(cause)}.{first_gap}</li>')
    if rec.finish is not None:
        items.append(f'<li data-event="finish">Finished at {_b(_t(rec.finish))}.</li>')
    elif rec.first_token is not None:
        items.append(f'<li data-event="unfinished">Unfinished when the run ended at {_t(result.end_time)}.</li>')
    return (f'<section class="stf-story" data-request="{rid}" data-missed="{str(missed).lower()}" '
            f'data-cause="{blame.dominant_cause or ""}" aria-label="The story of request {rid}">'
            f'{head}{why}{_ttft_bar(blame, ttft)}<ol class="stf-story-steps">{"".join(items)}</ol></section>')


# ---------------------------------------------------------------------- the view

class StoryView:
    """The story panel under the canvas: "next missed request", the story, close.

    `canvas`: outlined and moved (`Canvas.outline`, `Canvas.set_window`); its step taps
    pick a request. `say`: the live region (a11y.A11yBridge.say). `show(id)` is what the
    scatter calls.
    """

    def __init__(self, state, canvas=None, say=None, plots=None):
        self.state = state
        self.canvas = canvas
        self.plots = plots
        self.say = say
        self.selected = None  # the request whose story is shown
        self._order = (-1, [])  # (run_id, missed_order of that run)
        self._cursor = -1  # position in that order of the last "next missed" pick
        self.next_button = pn.widgets.Button(
            name="Show the next missed request »", button_type="light", margin=(4, 6), width=250,
            description="Show the story of a request that missed the SLO (the worst miss first)",
            css_classes=["stf-next-missed"], styles=INERT_STYLE)
        self.next_button.on_click(lambda _e: self.next_missed())
        self.close_button = pn.widgets.Button(name="Close the story", button_type="light", margin=(4, 6), width=140,
                                              css_classes=["stf-story-close"], visible=False)
        self.close_button.on_click(lambda _e: self.close())
        self.hint = Html('<span class="stf-lock">Click a request in the worst-gap plot, or a step on the '
                                 'timelines, to see where its time went.</span>', stylesheets=[CSS], margin=(8, 6),
                                 sizing_mode="stretch_width", css_classes=["stf-story-hint"],
                                 styles={"flex": "1 1 240px", "min-width": "0"})  # beside the button when it fits
        self.pane = Html("", stylesheets=[CSS], margin=(0, 8, 8, 8), sizing_mode="stretch_width",
                                 visible=False, css_classes=["stf-story-pane"])
        bar = pn.FlexBox(self.next_button, self.close_button, self.hint, flex_wrap="wrap", align_items="center",
                         sizing_mode="stretch_width", margin=0)
        self.view = pn.Column(bar, self.pane, sizing_mode="stretch_width", margin=(0, 0, 10, 0),
                              styles={"background": "#ffffff", "border": "1px solid #dde2ea", "border-radius": "10px"},
                              css_classes=["stf-story-card"])
        if canvas is not None:
            canvas.on_step = self._on_step
            canvas.on_request = lambda rid: self.show(rid, jump=False)  # a rejection's cross
        if plots is not None:
            plots.on_pick = self.show
        state.param.watch(self._on_run, "run_id")

    def _missed(self):
        s = self.state
        if self._order[0] != s.run_id:
            self._order = (s.run_id, missed_order(s.rows, s.scenario.slo) if s.result is not None else [])
            self._cursor = -1
        return self._order[1]

    def _on_run(self, *_):
        s = self.state
        self.next_button.styles = LIVE_STYLE if self._missed() else INERT_STYLE
        if self.selected is None:
            return
        if s.result is None or self.selected >= len(s.rows):
            self.close()
            return
        self.show(self.selected, jump=False, announce=False)  # the same request in the new run

    def _on_step(self, gpu, step):
        s = self.state
        if s.result is None:
            return
        rid = request_at_step(s.result, s.rows, gpu, step)
        if rid is not None:
            self.show(rid, jump=False)  # the student is looking at that step already

    def next_missed(self):
        order = self._missed()
        if not order:
            return None
        self._cursor = (self._cursor + 1) % len(order)
        return self.show(order[self._cursor])

    def show(self, request_id, jump=True, announce=True):
        """Show one request's story; `jump`: bring its focus step into the canvas window."""
        s = self.state
        blame = s.blame_of(request_id)
        if blame is None:
            return None
        row = s.rows[request_id]
        self.selected = request_id
        self.pane.object = story_html(row, blame, s.result, s.scenario)
        self.pane.visible = self.close_button.visible = True
        self.hint.visible = False
        rec = s.result.requests[request_id]
        focus = focus_of(s.result, rec, blame)
        if self.canvas is not None:
            if focus is None:
                self.canvas.outline(None)
                left = rec.arrival
            else:
                left, right = focus_span(s.result, focus)
                self.canvas.outline(focus[1] if focus[0] == "gpu" else "link", left, right)
            if jump:  # its start a fifth into the window (a long transfer runs on past its end)
                self.canvas.set_window(left - 0.2 * WINDOW_S, user=True)
        if self.plots is not None:
            self.plots.mark(request_id)
        if announce and self.say is not None:
            self.say(self.sentence(row, blame))
        return request_id

    def sentence(self, row, blame):
        """What the live region reads when a story opens."""
        rid = row["id"]
        if row["met_slo"]:
            text = f"Request {rid} met the SLO: TTFT {fmt_seconds(row['ttft_s'])}"
        else:
            text = f"Request {rid} missed the SLO: {cause_sentence(blame) or 'see its story'}"
        return (text.rstrip(".") + ". Its story is under the timelines.").replace(NBSP, " ")

    def close(self):
        self.selected = None
        self.pane.visible = self.close_button.visible = False
        self.hint.visible = True
        if self.canvas is not None:
            self.canvas.outline(None)
        if self.plots is not None:
            self.plots.mark(None)
