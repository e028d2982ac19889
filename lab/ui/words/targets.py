"""The words for the one per-token target every view judges a step or a gap against.

The rule itself is `lab.core.spec.Slo.per_token_target_ms` (max gap if the SLO sets it,
else TPOT); this module only says it the same way everywhere: the canvas's legend and
tooltips, the "next slow step" button, the gap plots and the Table view. Over-target
steps are drawn "red, hatched" (the words the briefs use too).
"""

__all__ = ["OVER_WORDS", "target_phrase", "over_target_label", "over_target_meaning"]

OVER_WORDS = "red, hatched"  # how an over-target step looks, in the legend and the briefs


def _ms(value):
    return f"{value:g} ms"


def target_phrase(slo):
    """"the 50 ms max gap", "the 25 ms TPOT target", or None without a per-token target."""
    ms = slo.per_token_target_ms
    if ms is None:
        return None
    return f"the {_ms(ms)} max gap" if slo.per_token_target_name == "max_gap_ms" else f"the {_ms(ms)} TPOT target"


def over_target_label(slo, short=False):
    """A legend entry's name: what a red, hatched step is."""
    phrase = target_phrase(slo)
    if phrase is None:
        return "no per-token target: no step is marked"
    if short:
        return f"over {_ms(slo.per_token_target_ms)}"
    return f"{OVER_WORDS}: a step longer than {phrase}"


def over_target_meaning(slo):
    """What a marked step means for the SLO, in one sentence (None without a target)."""
    phrase = target_phrase(slo)
    if phrase is None:
        return None
    if slo.per_token_target_name == "max_gap_ms":
        return (f"every sequence in it waited longer than the target for its next token, "
                f"so each of those requests misses {phrase}")
    return ("every sequence in it waited longer than the target for its next token; a request misses "
            "the TPOT target only if its average over all its tokens does")
