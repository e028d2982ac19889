"""The page's side of KV on demand (fleet.kv_policy): the preemption marks on the canvas,
the KV band on demand, the memory card, the story of a preempted request, the controls."""

import numpy as np
import pytest

pytest.importorskip("panel")

import lab.core as core  # noqa: E402
from lab.core.metrics import gap_steps, request_gaps  # noqa: E402
from lab.ui.timeline.canvas import legend_html  # noqa: E402
from lab.ui.data.canvas_data import timeline_data  # noqa: E402
from lab.ui.views.metrics_view import metrics_html  # noqa: E402
from lab.ui.data.queues import kv_usage  # noqa: E402
from lab.ui.views.story import focus_of, request_at_step, story_html  # noqa: E402

STORM = {
    "workload": {"rate": 8, "duration_s": 10, "prompt_tokens": 1500, "output_tokens": {"dist": "uniform", "low": 200, "high": 900}},
    "fleet": {"layout": "disaggregated", "prefill_gpus": 1, "decode_gpus": 2, "kv_policy": "on_demand"},
    "model": {"kv_capacity_tokens": 8000},
    "slo": {"ttft_s": 2, "tpot_ms": 40},
    "seed": 4, "drain_s": 60,
}


@pytest.fixture(scope="module")
def storm():
    result = core.simulate(core.load_scenario(STORM))
    assert sum(r.preemptions for r in result.requests) > 5
    return result


def test_every_preemption_is_a_mark_on_its_gpus_row_at_its_boundary(storm):
    data = timeline_data(storm, 40)
    marks = data["preempt"]
    expected = sorted((log.start[s] if s < len(log) else log.end[s - 1], rid)
                      for log in storm.gpus for s, rid in log.preempted)
    got = sorted(zip(marks["left"].astype(float), marks["req"].tolist()))
    assert len(got) == sum(r.preemptions for r in storm.requests) == len(expected)
    assert np.allclose([t for t, _ in got], [t for t, _ in expected], atol=1e-6)
    assert [r for _, r in got] == [r for _, r in expected]
    # On the rows of the decode GPUs that preempted (the canvas's row of each GPU).
    from lab.ui.data.canvas_data import _rows
    row_of = {log.index: row for log, row in zip(storm.gpus, _rows(storm)[0])}
    assert sorted(marks["y"].tolist()) == sorted(float(row_of[log.index]) for log in storm.gpus for _ in log.preempted)


def test_reserve_draws_no_marks_and_the_legend_names_them_only_when_they_can_happen():
    reserve = core.simulate(core.load_scenario({**STORM, "fleet": {**STORM["fleet"], "kv_policy": "reserve"}}))
    assert len(timeline_data(reserve, 40)["preempt"]["left"]) == 0
    slo = core.load_scenario(STORM).slo
    assert "preempted" in legend_html(slo, preemptions=True)
    assert "preempted" not in legend_html(slo)


def test_the_kv_band_on_demand_is_the_blocks_in_use(storm):
    block = storm.scenario.fleet.kv_block_tokens
    for log in storm.gpus:
        if log.role != "decode":
            continue
        left, right, tokens = kv_usage(storm)[log.index]
        assert tokens.max() <= 8000 and not (tokens % block).any()
        # The band's level at each change is the engine's count of blocks, in tokens.
        last = {}
        for t, used in log.kv_used:
            last[t] = used * block
        for a, v in zip(left, tokens):
            assert last[max(t for t in last if t <= a)] == v


def test_the_memory_card_shows_on_demand_only(storm):
    m = core.summarize(storm)
    html = metrics_html(m, storm.scenario)
    assert 'data-metric="kv"' in html and f'data-value="preemptions">{m["preemptions"]:,}<' in html
    reserve = core.load_scenario({**STORM, "fleet": {**STORM["fleet"], "kv_policy": "reserve"}})
    assert 'data-metric="kv"' not in metrics_html(m, reserve)


def test_a_preempted_requests_story_says_so_and_points_at_its_worst_gap(storm):
    rows = core.request_metrics(storm)
    blames = core.request_blame(storm, rows)
    rec = next(r for r in storm.requests if r.preemptions and r.finished and r.earlier and r.earlier[0][2] >= r.earlier[0][1])
    html = story_html(rows[rec.id], blames[rec.id], storm, storm.scenario)
    assert 'data-event="preempted"' in html and f'data-preemptions="{rec.preemptions}"' in html
    gaps = request_gaps(storm, rec)
    gpu, step = gap_steps(storm, rec)[gaps.index(max(gaps))]
    assert f'data-worst-ms="{max(gaps) * 1000.0!r}"' in html
    focus = focus_of(storm, rec, blames[rec.id])
    if blames[rec.id].dominant_cause not in core.TTFT_PARTS:
        assert focus == ("gpu", gpu, step)
    # A click on a step of an earlier stretch finds a request it served.
    g, a, b = rec.earlier[0]
    assert request_at_step(storm, rows, g, a) is not None


def test_the_block_size_control_waits_for_kv_on_demand():
    from lab.core.missions import CONTROL_REQUIRES, control_applies

    assert CONTROL_REQUIRES["kv_block_tokens"] == ("fleet.kv_policy", "on_demand")
    on = core.load_scenario(STORM)
    off = core.load_scenario({**STORM, "fleet": {**STORM["fleet"], "kv_policy": "reserve"}})
    assert control_applies("kv_block_tokens", on) and not control_applies("kv_block_tokens", off)
    assert control_applies("kv_policy", on) and control_applies("kv_policy", off)
