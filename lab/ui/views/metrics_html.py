"""The metrics users feel and the stars with a live tick per star, as HTML: no Panel, so the
pre-rendered first view (prerender.py) and the live panes (metrics_view.py) write the same lines.
Every value is formatted here; pass/fail is shown with a tick or a cross as well as a colour.
"""

import html

from ..words.figures import (NBSP, PER_REQUESTS, fmt_joules, fmt_metric, fmt_ms, fmt_seconds, fmt_share, model_words,
                      fmt_usd, fmt_watts, metric_title, star_test_text)
from ..words.mission_text import brief_html
from ..words.theme import PALETTE

__all__ = ["metrics_html", "stars_html", "fmt_seconds", "fmt_ms", "fmt_share", "fmt_usd", "fmt_joules", "fmt_watts",
           "cost_cards", "kv_card", "PER_REQUESTS", "run_error_html", "run_cut_html", "STARS_CSS", "STARS_WAIT_NOTE",
           "star_now_text"]


# Every figure is formatted by lab.ui.words.figures (imported here for the views that import them from here).
def _verdict(ok):
    if ok is None:
        return "", ""
    return ("ok", '<span class="ok" aria-label="meets the target">✓</span>') if ok else (
        "bad", '<span class="bad" aria-label="misses the target">✗</span>')


def _card(key, value, target="", ok=None, name="", pair=False):
    cls, mark = _verdict(ok)
    t = f'<div class="t">{mark} {target}</div>' if (target or mark) else '<div class="t">&nbsp;</div>'
    return (f'<div class="stf-card {cls}" data-metric="{name}"><div class="k">{html.escape(key)}</div>'
            f'<div class="v{" pair" if pair else ""}">{value}</div>{t}</div>')


def _bar(label, share, colour, name):
    if share is None:
        return ""
    pct = max(0.0, min(1.0, share)) * 100
    return (f'<span>{html.escape(label)}</span><span class="stf-bar" role="img" aria-label="{label} {pct:.0f}% busy">'
            f'<span style="width:{pct:.1f}%;background:{colour}"></span></span>'
            f'<span data-metric="{name}">{pct:.0f}%</span>')


def metrics_html(metrics, scenario):
    """The metric cards for one run (an empty string before the first run)."""
    if not metrics:
        return '<div class="stf-metrics" aria-busy="true"></div>'
    slo = scenario.slo
    m = metrics
    cards = []
    ttft99 = m.get("ttft_p99_s")
    cards.append(_card(
        "TTFT p50 / p99",
        f'{fmt_metric("ttft_p50_s", m.get("ttft_p50_s"))} <small>/</small> '
        f'{fmt_metric("ttft_p99_s", ttft99, against=slo.ttft_s)}',
        f"target ≤ {fmt_seconds(slo.ttft_s)}" if slo.ttft_s else "time to first token",
        (ttft99 is not None and ttft99 <= slo.ttft_s) if slo.ttft_s else None, "ttft", pair=True,
    ))
    tpot99 = m.get("tpot_p99_ms")
    cards.append(_card(
        metric_title("tpot_p99_ms"), fmt_metric("tpot_p99_ms", tpot99, against=slo.tpot_ms),
        f"target ≤ {fmt_ms(slo.tpot_ms)}" if slo.tpot_ms else "time per output token",
        (tpot99 is not None and tpot99 <= slo.tpot_ms) if slo.tpot_ms else None, "tpot",
    ))
    gap99 = m.get("worst_gap_p99_ms")
    gap_target = slo.max_gap_ms
    cards.append(_card(
        metric_title("worst_gap_p99_ms"), fmt_metric("worst_gap_p99_ms", gap99, against=gap_target),
        f"target ≤ {fmt_ms(gap_target)}" if gap_target else "longest stall in a stream",
        (gap99 is not None and gap99 <= gap_target) if gap_target else None, "gap",
    ))
    share = m.get("slo_attainment")
    counted = f'{m.get("requests", 0):,} requests'
    if scenario.fleet.admission is not None:  # early rejection: who was turned away, how the rest did
        rejected = f'{m.get("rejected") or 0:,}'
        served = fmt_share(m.get("served_slo_attainment"))
        counted = f'{_value("rejected", rejected)} rejected · {_value("served_slo_attainment", served)} of the rest'
    cards.append(_card(metric_title("slo_attainment"), fmt_metric("slo_attainment", share), counted, None, "slo"))
    per_gpu = fmt_metric("goodput_rps_per_gpu", m.get("goodput_rps_per_gpu", 0)).split(NBSP)[0]
    cards.append(_card(
        metric_title("goodput_rps_per_gpu"), f'{per_gpu}{NBSP}<small>req/s</small>',
        f'{m.get("gpus")} GPUs · {fmt_metric("goodput_rps", m.get("goodput_rps", 0))} in all', None, "goodput",
    ))
    if getattr(scenario.fleet, "prefix_cache", "off") != "off":
        cards.append(prefix_card(m))
    cards.extend(cost_cards(m))
    if scenario.fleet.kv_policy == "on_demand":
        cards.append(kv_card(m))
    bars = []
    if scenario.fleet.layout == "colocated":
        bars.append(_bar("GPUs", m.get("util_gpu"), PALETTE["decode"], "util_gpu"))
    else:
        bars.append(_bar("Prefill", m.get("util_prefill"), PALETTE["prefill"], "util_prefill"))
        bars.append(_bar("Decode", m.get("util_decode"), PALETTE["decode"], "util_decode"))
        bars.append(_bar("Link", m.get("util_link"), PALETTE["link"], "util_link"))
    util = (f'<div class="stf-card" data-metric="util"><div class="k">Busy: share of the run</div>'
            f'<div class="stf-util" style="margin-top:4px">{"".join(bars)}</div></div>')
    foot = []
    cut = run_cut_html(m)
    if cut:
        foot.append(cut)
    elif m.get("unfinished"):
        foot.append(f'<b>{m["unfinished"]:,} requests never finished</b> (the run hit its time cap): they count as misses.')
    if m.get("rejected"):
        foot.append(f'<b>{m["rejected"]:,} of {m.get("requests", 0):,} requests rejected at arrival</b> (early '
                    f'rejection: predicted TTFT over the target): they count as misses; '
                    f'{fmt_share(m.get("served_slo_attainment"))} of the others met the SLO.')
    if scenario.fleet.layout == "disaggregated" and m.get("transfer_p99_ms") is not None:
        foot.append(f'KV transfer p99 (wait + wire): {fmt_ms(m["transfer_p99_ms"])}.')
    if scenario.fleet.planner_on:
        moves = m.get("reconfigurations") or 0
        foot.append(f'<span data-metric="reconfigurations">Role changes: <b>{moves}</b>'
                    + (f' ({m.get("reconfig_lost_gpu_s", 0):.1f}{NBSP}GPU-s lost draining and reloading)' if moves else "")
                    + '.</span>')
    foot.append(f'<span class="stf-model" data-model="{scenario.model.cost}">{model_words(scenario.model)}</span>')
    # Always there (empty or not), so a switch of layout keeps the pane's height.
    foot_html = f'<div class="stf-foot">{" ".join(foot)}</div>'
    return f'<div class="stf-metrics">{"".join(cards)}{util}</div>{foot_html}'


def kv_card(m):
    """KV memory on demand: how full the pool that holds answers' KV runs (p50 / p99 of its
    blocks in use), the preemptions, and the p99 wait for a place to hold a request's KV."""
    pre = m.get("preemptions") or 0
    word = "preemption" if pre == 1 else "preemptions"
    return _card(
        "KV memory p50 / p99",
        f'{_value("kv_util_p50", fmt_share(m.get("kv_util_p50")))} <small>/</small> '
        f'{_value("kv_util_p99", fmt_share(m.get("kv_util_p99")))}',
        f'{_value("preemptions", f"{pre:,}")} {word} · admission wait p99 '
        f'{_value("admission_wait_p99_ms", fmt_ms(m.get("admission_wait_p99_ms")))}',
        None if not m else pre == 0, "kv", pair=True,
    )


def _value(name, text):
    """A metric's value, tagged with its METRIC_NAMES name (the page's tests read it)."""
    return f'<span data-value="{name}">{text}</span>'


def prefix_card(m):
    """Prefix caching: the share of prompt tokens prefills found cached, the tokens saved and,
    for a shared pool, the fetch p99 (docs/model.md "Prefix caching")."""
    saved = m.get("prefill_tokens_saved") or 0
    sub = f"{saved:,} prompt tokens not computed"
    if m.get("prefix_fetch_p99_ms") is not None:
        sub += f" · fetch p99 {fmt_ms(m['prefix_fetch_p99_ms'])}"
    return _card(metric_title("prefix_hit_rate"), fmt_share(m.get("prefix_hit_rate")), sub, None, "prefix")


def cost_cards(m):
    """The cost and energy cards beside goodput per GPU (lab.core.metrics' cost_and_energy):
    cost per 1,000 good requests (usd_per_good_request x 1,000) with the fleet's $/hour and $ per
    million output tokens; energy per output token with the fleet's mean power and J per request."""
    per_good = m.get("usd_per_good_request")
    shown = None if per_good is None else per_good * PER_REQUESTS
    cost = _card(
        metric_title("usd_per_good_request"), _value("usd_per_good_request", fmt_usd(shown)) + f"{NBSP}<small>per 1k</small>",
        f'{_value("usd_per_hour", fmt_usd(m.get("usd_per_hour")))}/h · '
        f'{_value("usd_per_million_tokens", fmt_usd(m.get("usd_per_million_tokens")))} per M tokens', None, "cost")
    energy = _card(
        metric_title("energy_j_per_token"), _value("energy_j_per_token", fmt_joules(m.get("energy_j_per_token"))),
        f'{_value("power_w_mean", fmt_watts(m.get("power_w_mean")))} drawn · '
        f'{_value("energy_j_per_request", fmt_joules(m.get("energy_j_per_request")))} per request', None, "energy")
    return [cost, energy] if "usd_per_hour" in m else []


CUT_REASONS = {"drain_s": "drain limit", "max_steps": "step limit"}


def run_cut_html(metrics):
    """The warning for a run the engine cut short (`run_cut` set by the core), else ''."""
    cut = (metrics or {}).get("run_cut")
    if not cut:
        return ""
    reason = CUT_REASONS.get(cut, str(cut))
    end = metrics.get("run_end_s")
    when = f" at {end:,.0f} s" if isinstance(end, (int, float)) else ""
    n = metrics.get("unfinished") or 0
    counted = f"{n:,} request unfinished counts as a miss" if n == 1 else f"{n:,} requests unfinished count as misses"
    return (f'<span class="stf-cut" role="status" data-run-cut="{html.escape(str(cut))}">⚠ This run was cut{when} '
            f'({html.escape(reason)}): {counted}.</span>')


def run_error_html(message):
    """Where the metrics would be when a run failed: why (escaped), and that a change runs again."""
    return ('<div class="stf-notes stf-error stf-run-error" role="alert" data-run-error="true">'
            f'<b>The simulation could not run.</b> {html.escape(message)}'
            '<br><small>Change a control (or go back to the start) to run again.</small></div>')


# The debrief under an earned star, and the outro once all are earned (only the stars pane uses them).
STARS_CSS = """
.stf-star .debrief { grid-column: 2; font-size: 12.5px; color: #2f3a48; border-left: 3px solid #E69F00;
                     padding: 1px 0 1px 8px; margin-top: 2px; }
.stf-star .debrief p, .stf-outro p { margin: 0 0 4px; }
.stf-star .debrief p:last-child, .stf-outro p:last-child { margin-bottom: 0; }
.stf-outro { margin-top: 8px; padding: 8px 10px; background: #fff8e6; border: 1px solid #e8c66a; border-radius: 6px;
             font-size: 13px; color: #2f3a48; }
.stf-outro .head { font-weight: 650; margin-bottom: 3px; }
"""

STARS_WAIT_NOTE = "Stars count once you change a control"


def star_now_text(earned, live, ran=True, counting=True):
    """(text, ok) of a star's line for the latest run: an earned star says so first, whether
    or not these settings meet it; `ran` False (no run yet): an ellipsis."""
    if earned:
        return ("✓ earned" if live or not ran else "✓ earned · these settings miss it"), True
    if not ran:
        return "…", False
    if live:
        return ("✓ this run earns it" if counting else "✓ met here: change a control to earn it"), True
    return "✗ not with these settings", False


def stars_html(mission, metrics, now, saved, counting=True, from_link=False):
    """One row per star: saved (★/☆), live tick for the latest run, and each test's value.

    An earned star also shows its debrief (why its fix works); once every star is earned,
    the mission's outro follows the list. Both are the mission's Markdown, rendered safely.
    `counting` False (LabState.touched not yet): a star the run meets reads "met" rather than
    earned; if the page also opened a link's settings (`from_link`, LabState.from_link), a note
    says stars count once a control changes (opened from the hub, there is no link to explain)."""
    if not mission.stars:
        return '<p class="stf-lock">The sandbox has no stars: play freely.</p>'
    items = []
    for i, star in enumerate(mission.stars):
        earned = i < len(saved) and saved[i]
        live = i < len(now) and now[i]
        tests = []
        for pred, actual, holds in star.explain(metrics or {}):
            mark = "✓" if holds else "✗"
            test, now_part = star_test_text(pred, actual).rsplit(" (now ", 1)
            tests.append(
                f'<span class="stf-tick {"ok" if holds else "no"}" data-test-metric="{html.escape(pred.metric)}">'
                f'{mark} {html.escape(test)} <span style="color:#5b6472">(now {html.escape(now_part)}</span></span>'
            )
        status = "earned" if earned else "not yet earned"
        now_text, now_ok = star_now_text(earned, live, bool(metrics), counting)
        items.append(
            f'<li class="stf-star{" earned" if earned else ""}" data-star="{i}" data-earned="{str(bool(earned)).lower()}" '
            f'data-live="{str(bool(live)).lower()}">'
            f'<span class="glyph" role="img" aria-label="star {i + 1} {status}">{"★" if earned else "☆"}</span>'
            f'<span class="label">{html.escape(star.label)}</span>'
            f'<span class="now {"ok" if now_ok else "no"}">{now_text}</span>'
            f'<span class="tests">{"".join(tests)}</span>{_debrief_html(i, star) if earned else ""}</li>'
        )
    all_earned = len(saved) >= len(mission.stars) and all(saved[:len(mission.stars)])
    outro = getattr(mission, "outro", "") if all_earned else ""
    outro_html = (f'<div class="stf-outro" role="status" data-outro="true"><div class="head">★ Every star earned</div>'
                  f'{brief_html(outro)}</div>') if outro else ""
    note = "" if counting or not from_link else (
        f'<p class="stf-stars-note" role="note" data-stars-wait="true">{STARS_WAIT_NOTE}.<span class="more"> '
        'A link opens its fleet as sent; only a change you make here earns a star.</span></p>')
    return f'{note}<ul class="stf-stars">{"".join(items)}</ul>{outro_html}'


def _debrief_html(i, star):
    text = getattr(star, "debrief", "")
    if not text:
        return ""
    return f'<div class="debrief" data-debrief="{i}">{brief_html(text)}</div>'
