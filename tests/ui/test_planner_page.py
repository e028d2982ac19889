"""The page's share of pools that change roles (`fleet.planner`), without a browser: the
canvas's role bands (timeline_data), the legend entry, the metrics' line, the KV bands of a
moved sequence, and the planner controls' words. tests/ui/test_planner_browser.py drives it
in Chromium."""

import numpy as np

from lab.core import load_mission, simulate, summarize
from lab.core.missions import list_missions
from lab.ui.timeline.canvas import legend_html
from lab.ui.data.canvas_data import ROLE_LAYERS, timeline_data
from lab.ui.words.control_words import CHOICE_LABELS
from lab.ui.views.control_html import REQUIRES_WORDS
from lab.ui.views.metrics_view import metrics_html
from lab.ui.data.queues import kv_usage

MISSION = next(m for m in list_missions() if m.id == "traffic-shifts")
BY_HAND = {"planner": "schedule", "plan_at_s": 24, "plan_prefill_gpus": 4}


def run(settings):
    scenario = MISSION.apply(settings)
    return scenario, simulate(scenario)


def test_role_bands_cover_each_moved_gpus_run_and_nothing_else():
    _, res = run(BY_HAND)
    data = timeline_data(res, 20)
    moved = {g for _, g, _, _, _ in res.reconfigurations}
    assert moved
    rows = {}
    for name in ROLE_LAYERS:
        cols = data[name]
        for left, right, top, bottom in zip(cols["left"], cols["right"], cols["top"], cols["bottom"]):
            rows.setdefault(round(float(top + bottom) / 2), []).append((float(left), float(right), name))
    assert len(rows) == len(moved)  # one row per GPU that changed role
    for spans in rows.values():
        spans.sort()
        assert spans[0][0] == 0.0 and spans[-1][1] >= res.end_time - 1e-3
        for (_, right, _), (left, _, _) in zip(spans, spans[1:]):
            assert abs(right - left) < 1e-3  # the spans tile the run
        names = [n for _, _, n in spans]
        assert names == ["role_decode", "role_switching", "role_prefill"]  # decode, reload, prefill


def test_fixed_pools_draw_no_role_bands():
    _, res = run({})
    data = timeline_data(res, 20)
    assert all(len(data[name]["left"]) == 0 for name in ROLE_LAYERS)


def test_the_legend_names_the_role_bands_only_when_roles_can_change():
    slo = MISSION.scenario.slo
    assert "role over time" in legend_html(slo, roles=True) and "reloading" in legend_html(slo, roles=True)
    assert "role over time" not in legend_html(slo)


def test_the_metrics_say_how_many_role_changes_and_what_they_cost():
    scenario, res = run(BY_HAND)
    m = summarize(res)
    text = metrics_html(m, scenario)
    assert f"Role changes: <b>{m['reconfigurations']}</b>" in text
    assert f"{m['reconfig_lost_gpu_s']:.1f}" in text and m["reconfigurations"] == 2
    fixed, res = run({})
    assert "Role changes" not in metrics_html(summarize(res), fixed)


def test_a_gpu_that_left_the_decode_pool_holds_no_kv_after_it_handed_over():
    _, res = run(BY_HAND)
    usage = kv_usage(res)
    for _, g, was, _, _ in res.reconfigurations:
        if was != "decode":
            continue
        handed = next(t for t, role in res.gpus[g].roles if role == "switching")
        left, right, tokens = usage[g]
        after = right > handed + 1e-9
        assert not np.any(tokens[after] > 0), (g, handed)
    # ...and the GPUs that kept decoding hold the moved sequences: every moved request's
    # tokens are on exactly one band at a time (the fleet's total never counts one twice).
    capacity = MISSION.scenario.model.kv_tokens_per_gpu
    for g, (_, _, tokens) in usage.items():
        assert not len(tokens) or tokens.max() <= capacity


def test_the_planner_controls_have_words():
    assert set(CHOICE_LABELS["planner"]) == {"off", "utilization", "schedule"}
    assert ("fleet.planner.policy", "schedule") in REQUIRES_WORDS and ("fleet.planner.policy", "utilization") in REQUIRES_WORDS
    m = load_mission(MISSION.path)
    assert m.settings()["planner"] == "off" and m.settings()["plan_at_s"] == 28


def test_a_moved_gpus_row_label_says_both_roles_and_fits_the_gutter():
    from lab.ui.data.canvas_data import max_rows, roles_text, split_label

    assert roles_text([(0.0, "decode")]) == "decode"
    assert roles_text([(0.0, "decode"), (5.0, "switching"), (8.0, "prefill")]) == "→prefill"
    assert roles_text([(0.0, "prefill"), (1.0, "switching"), (2.0, "decode"), (9.0, "switching"),
                       (10.0, "prefill")]) == "⇄prefill"
    _, res = run(BY_HAND)
    labels = timeline_data(res, 20)["meta"]["labels"].values()
    moved = [t for t in labels if "→prefill" in t]
    assert len(moved) == len(res.reconfigurations)
    _, longest = max_rows(MISSION)  # the gutter is sized for the longest label the mission can show
    assert all(len(split_label(t)[0]) <= len(split_label(longest)[0]) for t in labels)
