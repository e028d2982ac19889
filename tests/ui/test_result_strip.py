"""The result strip's content (lab/ui/views/result_strip.py), without a browser."""

import pytest

pytest.importorskip("panel")

import lab.core as core  # noqa: E402
from lab.core.missions import list_missions  # noqa: E402
from lab.ui.views.metrics_view import fmt_share  # noqa: E402
from lab.ui.views.result_strip import MAX_STRIP_ROWS, row_shares, strip_html  # noqa: E402
from lab.ui.state import LabState  # noqa: E402

BY_ID = {m.id: m for m in list_missions()}


@pytest.mark.parametrize("mission_id", ["mixing-hurts", "decode-drowns", "memory-on-demand"])
def test_each_row_adds_up_to_its_gpus_busy_share_and_slow_steps_are_the_canvas_red(mission_id):
    mission = BY_ID[mission_id]
    result = core.simulate(mission.scenario)
    target = mission.scenario.slo.per_token_target_ms
    shares = row_shares(result, target)
    assert [label for label, *_ in shares] == [log.label for log in result.gpus]
    for (label, decode, prefill, slow), log in zip(shares, result.gpus):
        assert decode + prefill + slow == pytest.approx(log.busy_s() / result.end_time, rel=1e-9), label
        over = sum(e - s for s, e, b in zip(log.start, log.end, log.decode_seqs) if b and (e - s) * 1000 > target)
        assert slow == pytest.approx(over / result.end_time, rel=1e-9, abs=1e-15), label


def test_the_strip_says_the_runs_slo_share_and_waits_while_a_change_runs():
    state = LabState(BY_ID["mixing-hurts"])
    assert strip_html(state) == ""  # before the first run
    state.run()
    text = strip_html(state)
    assert f'{fmt_share(state.metrics["slo_attainment"])} meet the SLO' in text
    assert f'data-rows="{len(state.result.gpus)}"' in text and f'data-run="{state.run_id}"' in text
    state.change("gpus", state.settings["gpus"] + 1)
    assert 'data-busy="true"' in strip_html(state) and "Simulating" in strip_html(state)


def test_a_big_fleet_draws_at_most_max_rows_and_counts_the_rest():
    mission = BY_ID["mixing-hurts"]
    state = LabState(mission)
    state.change_many({"gpus": mission.controls["gpus"].max})
    state.run()
    n = len(state.result.gpus)
    text = strip_html(state)
    drawn = text.count('class="bar"') // 2  # the strip and its invisible twin
    assert drawn == min(n, MAX_STRIP_ROWS)
    assert (f"+{n - MAX_STRIP_ROWS}" in text) == (n > MAX_STRIP_ROWS)
