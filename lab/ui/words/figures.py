"""How every figure on the lab page reads: one formatter per kind of value, one per metric.

The metric cards, the star lines, a request's story, the twin table, the result strip and
the screen reader's summary all format through here, so a value reads the same wherever it
shows: "7.2 s" in the card, the star line and the story alike.

Rules:
- a time under 1 s in milliseconds ("340 ms", "13.4 ms" under 100 ms), from 1 s in seconds
  with one decimal ("7.2 s", "1,234.5 s");
- a share as a whole percent ("86%"), one decimal from 99.5% up to 100% ("99.7%");
- dollars with two decimals ("$0.30", "$41.20"), whole dollars from $1,000 ("$1,234"), two
  significant digits under a cent ("$0.0016");
- `fmt_metric(name, value, against=...)`: a metric by its `lab.core.metrics` name, in its
  card's unit; with `against` (a target or a star's bound) as many more digits as tell the
  two apart, so a value that misses its target never reads the same as the target.

`star_test_text(pred, actual)` is a star's test in the cards' words: "Meeting the SLO ≥ 95%
(now 86%)". Standard library only: the page's Python worker imports it too.
"""

import math

__all__ = ["model_words", "NBSP", "PER_REQUESTS", "fmt_seconds", "fmt_ms", "fmt_share", "fmt_usd", "fmt_joules", "fmt_watts",
           "fmt_count", "fmt_rps", "fmt_number", "fmt_metric", "METRIC_TITLES", "metric_title", "star_test_text",
           "OP_WORDS"]

NBSP = "\u00a0"  # between a number and its unit: a narrow card wraps between values, never inside one

# Cost per good request is shown per this many requests: a request costs fractions of a cent.
PER_REQUESTS = 1000
MAX_EXTRA = 3  # at most this many more digits to tell a value from its target


def fmt_seconds(value, extra=0):
    """A duration in seconds: "340 ms" under 1 s ("13.4 ms" under 100 ms), else "7.2 s"."""
    if value is None:
        return "—"
    ms = value * 1000.0
    if abs(round(ms, extra)) >= 1000:
        return f"{value:,.{1 + extra}f}{NBSP}s"
    if abs(round(ms, 1 + extra)) >= 100 or ms == 0:
        return f"{ms:,.{extra}f}{NBSP}ms"
    if abs(ms) >= 0.1:
        return f"{ms:,.{1 + extra}f}{NBSP}ms"
    return f"{ms:.{1 + extra}g}{NBSP}ms"


def fmt_ms(value, extra=0):
    """A duration in milliseconds, read as `fmt_seconds` reads it ("7,164" ms is "7.2 s")."""
    return "—" if value is None else fmt_seconds(value / 1000.0, extra)


def fmt_share(value, extra=0):
    """A share of 1 as a percent: "86%", "99.7%", "100%"."""
    if value is None:
        return "—"
    pct = value * 100
    if extra == 0 and (pct < 99.5 or value == 1):
        return f"{pct:.0f}%"
    return f"{pct:.{max(1, extra)}f}%"


def fmt_usd(value, extra=0):
    """Dollars: "$0.30", "$41.20", "$1,234"; under a cent two significant digits ("$0.0016")."""
    if value is None:
        return "—"
    if value >= 1000 and extra == 0:
        return f"${value:,.0f}"
    if value >= 0.01 or value == 0:
        return f"${value:,.{2 + extra}f}"
    return f"${value:.{2 + extra}g}" if value >= 1e-6 else f"${value:.1e}"


def fmt_joules(value, extra=0):
    """Energy: "2.1 J", "640 J", "3.2 kJ", "1.4 MJ"."""
    if value is None:
        return "—"
    for scale, unit in ((1e6, "MJ"), (1e3, "kJ")):
        if value >= scale:
            return f"{value / scale:,.{1 + extra}f}{NBSP}{unit}"
    if value >= 10:
        return f"{value:,.{extra}f}{NBSP}J"
    if value >= 1:
        return f"{value:.{1 + extra}f}{NBSP}J"
    return f"{value:.{2 + extra}g}{NBSP}J" if value >= 0.01 else f"{value:.1e}{NBSP}J"


def fmt_watts(value, extra=0):
    """Power: "310 W", "3.2 kW"."""
    if value is None:
        return "—"
    if value >= 1000:
        return f"{value / 1000:,.{1 + extra}f}{NBSP}kW"
    return f"{value:,.{extra}f}{NBSP}W"


def fmt_count(value, extra=0, unit=""):
    """A whole count: "1,234" ("8 GPUs" with `unit`)."""
    if value is None:
        return "—"
    text = f"{value:,}" if isinstance(value, int) else f"{value:,.{extra}f}"
    return f"{text}{NBSP}{unit}" if unit else text


def fmt_rps(value, extra=0, digits=2):
    """Requests a second: "0.21 req/s"."""
    return "—" if value is None else f"{value:,.{digits + extra}f}{NBSP}req/s"


def fmt_number(value, extra=0):
    """Any other number: three significant digits, never e-notation ("1,243", "0.0123")."""
    if value is None:
        return "—"
    if isinstance(value, bool) or not isinstance(value, float):
        return f"{value:,}"
    if value == 0 or not math.isfinite(value):
        return f"{value:g}"
    digits = 3 + extra
    text = f"{value:,.{digits}g}"
    if "e" in text:
        text = (f"{value:,.{extra}f}" if abs(value) >= 1
                else f"{value:.{digits - 1 - math.floor(math.log10(abs(value)))}f}")
    return text


def _per_1k(value, extra=0):
    return "—" if value is None else f"{fmt_usd(value * PER_REQUESTS, extra)}{NBSP}per{NBSP}1k"


def _count(value, extra=0):
    return fmt_count(value, extra)


# Per metric (lab.core.metrics.METRIC_NAMES): its title, as its card (or the twin table) names
# it, and its formatter. A metric not listed reads as its name and fmt_number.
METRICS = {
    "requests": ("Requests", _count),
    "finished": ("Requests finished", _count),
    "unfinished": ("Requests unfinished", _count),
    "rejected": ("Requests rejected", _count),
    "ttft_p50_s": ("TTFT p50", fmt_seconds),
    "ttft_p90_s": ("TTFT p90", fmt_seconds),
    "ttft_p99_s": ("TTFT p99", fmt_seconds),
    "tpot_p50_ms": ("TPOT p50", fmt_ms),
    "tpot_p99_ms": ("TPOT p99", fmt_ms),
    "itl_p50_ms": ("Inter-token latency p50", fmt_ms),
    "itl_p99_ms": ("Inter-token latency p99", fmt_ms),
    "worst_gap_p50_ms": ("Worst gap p50", fmt_ms),
    "worst_gap_p99_ms": ("Worst gap p99", fmt_ms),
    "slo_attainment": ("Meeting the SLO", fmt_share),
    "served_slo_attainment": ("Meeting the SLO of those served", fmt_share),
    "goodput_rps": ("Goodput", lambda v, extra=0: fmt_rps(v, extra, digits=1)),
    "goodput_rps_per_gpu": ("Goodput per GPU", fmt_rps),
    "throughput_tokens_per_s": ("Output tokens per second", lambda v, extra=0: fmt_count(v, extra, "tokens/s")),
    "gpus": ("GPUs", _count),
    "prefill_gpus": ("Prefill GPUs", _count),
    "decode_gpus": ("Decode GPUs", _count),
    "util_gpu": ("GPUs busy", fmt_share),
    "util_prefill": ("Prefill busy", fmt_share),
    "util_decode": ("Decode busy", fmt_share),
    "util_link": ("Link busy", fmt_share),
    "transfer_p50_ms": ("KV transfer p50", fmt_ms),
    "transfer_p99_ms": ("KV transfer p99", fmt_ms),
    "usd_per_hour": ("Cost per hour", fmt_usd),
    "usd_per_million_tokens": ("Cost per million tokens", fmt_usd),
    "usd_per_good_request": ("Cost per good request", _per_1k),
    "energy_j_per_token": ("Energy per token", fmt_joules),
    "energy_j_per_request": ("Energy per request", fmt_joules),
    "power_w_mean": ("Mean power", fmt_watts),
    "prefill_usd_per_hour": ("Prefill cost per hour", fmt_usd),
    "decode_usd_per_hour": ("Decode cost per hour", fmt_usd),
    "prefill_energy_j": ("Prefill energy", fmt_joules),
    "decode_energy_j": ("Decode energy", fmt_joules),
    "prefill_power_w_mean": ("Prefill mean power", fmt_watts),
    "decode_power_w_mean": ("Decode mean power", fmt_watts),
    "prefix_hit_rate": ("Prefix cache hits", fmt_share),
    "prefill_tokens_saved": ("Prompt tokens not computed", _count),
    "prefix_fetch_p99_ms": ("Prefix fetch p99", fmt_ms),
    "preemptions": ("Preemptions", _count),
    "kv_util_p50": ("KV memory p50", fmt_share),
    "kv_util_p99": ("KV memory p99", fmt_share),
    "admission_wait_p99_ms": ("Admission wait p99", fmt_ms),
    "reconfigurations": ("Role changes", _count),
    "reconfig_lost_gpu_s": ("GPU time lost to role changes", fmt_seconds),
}
METRIC_TITLES = {name: title for name, (title, _) in METRICS.items()}

# How a star's comparison reads.
OP_WORDS = {"<": "<", "<=": "≤", ">": ">", ">=": "≥", "==": "="}


def metric_title(name):
    """A metric's title as its card names it ("Worst gap p99"); else its name in words."""
    return METRIC_TITLES.get(name) or str(name).replace("_", " ").capitalize()


def fmt_metric(name, value, against=None):
    """`value` of metric `name` in its card's unit and rounding ("7.2 s", "86%", "$0.30 per 1k").
    With `against` (its target, a star's bound): more digits when both would read the same
    but differ ("94.96%" against 95%), up to MAX_EXTRA."""
    if value is None or isinstance(value, bool):
        return "—" if value is None else str(value)
    fmt = METRICS.get(name, (None, fmt_number))[1]
    text = fmt(value)
    if against is None or isinstance(against, bool) or value == against:
        return text
    extra = 0
    while extra < MAX_EXTRA and text == fmt(against, extra):
        extra += 1
        text = fmt(value, extra)
    return text


def star_test_text(pred, actual):
    """A star's test in the cards' words, and where this run stands: "Meeting the SLO ≥ 95%
    (now 86%)". `pred` has .metric, .op and .value (lab.core.stars.Predicate)."""
    now = fmt_metric(pred.metric, actual, against=pred.value)
    want = fmt_metric(pred.metric, pred.value)
    return f"{metric_title(pred.metric)} {OP_WORDS.get(pred.op, pred.op)} {want} (now {now})"


# ---------------------------------------------------------------- the model a run used

STACK_WORDS = {"optimized": "a current optimised engine", "vllm-2023": "vLLM as of 2023"}


def model_words(model, short=False):
    """Which step-time model drew a run, in the page's words: short for the status line beside
    the timelines ("calibrated model": it must fit a 700 px embed's line), long for the line
    under the cards."""
    from lab.ui.words.control_words import CHOICE_LABELS

    llm = CHOICE_LABELS["llm"].get(model.llm, model.llm)
    gpu = CHOICE_LABELS["gpu"].get(model.gpu, model.gpu)
    if model.cost == "calibrated":
        if short:
            return "calibrated model"
        return (f"Step times: calibrated on published measurements ({STACK_WORDS.get(model.stack, model.stack)}), "
                f"{llm} on {gpu}, {model.dtype.upper()}.")
    if model.cost == "roofline":
        if short:
            return "roofline model"
        return (f"Step times: the textbook roofline, {llm} on {gpu}: weights read at full bandwidth, no overheads "
                f"(faster than measured GPUs).")
    return "lab constants" if short else "Step times: the lab's constants, a simple model, not a measured GPU."

