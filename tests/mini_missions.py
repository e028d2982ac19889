"""Tiny hand-built missions for the checker's tests (15 s of traffic: each checks in about a second)."""

import copy

__all__ = ["star", "mini", "GOOD_STARS", "SEEDS", "good_mini"]


def star(label, *preds, debrief="Why this fix works."):
    out = {"label": label, "when": [{"metric": m, "op": op, "value": v} for m, op, v in preds]}
    if debrief is not None:
        out["debrief"] = debrief
    return out


def mini(controls=None, stars=None, outro="Next: the next mission.", **scenario_changes):
    """A small mission (15 s of traffic) that checks in well under a second."""
    scenario = {
        "workload": {"rate": 12, "duration_s": 15, "prompt_tokens": 2500, "output_tokens": 120},
        "fleet": {"layout": "colocated", "gpus": 2, "prefill_gpus": 1, "decode_gpus": 1},
        "slo": {"ttft_s": 1.5, "tpot_ms": 25},
        "seed": 3,
        "drain_s": 30,
    }
    for key, value in scenario_changes.items():
        scenario[key] = value
    return {
        "id": "mini",
        "title": "Mini",
        "order": 0,
        "summary": "A tiny mission for tests.",
        "brief": "Small.\n\n**Try:** anything.",
        "scenario": scenario,
        "controls": controls if controls is not None else {
            "layout": {"choices": ["colocated", "disaggregated"]},
            "gpus": {"min": 1, "max": 5},
            "prefill_gpus": {"min": 1, "max": 3},
            "decode_gpus": {"min": 1, "max": 3},
        },
        "stars": stars if stars is not None else [
            star("SLO", ("slo_attainment", ">=", 0.95)),
            star("SLO, smooth", ("slo_attainment", ">=", 0.95), ("worst_gap_p99_ms", "<=", 60)),
        ],
        **({"outro": outro} if outro is not None else {}),
    }


# Three stars, three different fixes (the start is 2 colocated GPUs; a 1 + 1 split is 1 change away):
# 95% on any fleet (cheapest: split 2 + 1), 95% colocated (4 GPUs), and 95% with every stall
# under 20 ms on at most 4 GPUs (split 2 + 2: the 2 + 1 split's lone decode GPU stalls longer).
GOOD_STARS = [
    star("95%", ("slo_attainment", ">=", 0.95)),
    star("95% colocated", ("slo_attainment", ">=", 0.95), ("prefill_gpus", "==", 0)),
    star("95% and smooth on four", ("slo_attainment", ">=", 0.95), ("worst_gap_p99_ms", "<=", 20), ("gpus", "<=", 4)),
]
SEEDS = (3, 4, 5, 6, 7)  # mini's seed and the next four: what check_mission runs by default


def good_mini():
    return mini(stars=copy.deepcopy(GOOD_STARS))  # (a copy: a test may spoil its mission's stars)
