"""Pools that change roles (`fleet.planner`): the spec's refusals, the rules in
lab/core/planner.py, the engine against the naive reference (named cases and random
scenarios), the invariants (a GPU serves one role at a time, a moved sequence's tokens
count once, every request ends once), the metrics and the blame cause `role_change`."""

import copy

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lab.core import load_scenario, request_blame, request_gaps, simulate, summarize
from lab.core.errors import LabError
from lab.core.planner import busy_in_window, pick_mover, schedule_moves, utilization, utilization_move

from test_reference import assert_matches

SPLIT = {
    "seed": 3,
    "workload": {"rate": 5, "duration_s": 30, "prompt_tokens": 2000,
                 "output_tokens": {"dist": "uniform", "low": 1, "high": 250},
                 "phases": [{"start_s": 15, "prompt_tokens": 6000, "output_tokens": 60}]},
    "fleet": {"layout": "disaggregated", "prefill_gpus": 2, "decode_gpus": 3},
    "slo": {"ttft_s": 1.5, "tpot_ms": 30},
    "drain_s": 60,
}
UTIL = {"policy": "utilization", "interval_s": 3, "threshold": 0.1, "switch_s": 2}
SCHEDULE = {"policy": "schedule", "switch_s": 1, "schedule": [
    {"at_s": 8, "prefill_gpus": 1, "decode_gpus": 4}, {"at_s": 15, "prefill_gpus": 4, "decode_gpus": 1},
    {"at_s": 16, "prefill_gpus": 2, "decode_gpus": 3}]}


def build(base=SPLIT, planner=None, **fleet):
    raw = copy.deepcopy(base)
    raw["fleet"].update(fleet)
    if planner is not None:
        raw["fleet"]["planner"] = planner
    return load_scenario(raw)


# ---------------------------------------------------------------- spec

@pytest.mark.parametrize("fleet, planner, path, words", [
    ({"layout": "colocated", "gpus": 4}, UTIL, "fleet.planner.policy", "disaggregated"),
    ({"decode_tp": 3, "decode_gpus": 3}, UTIL, "fleet.decode_tp", "same tensor parallelism"),
    ({"decode_gpu": "a100"}, UTIL, "fleet.decode_gpu", "'a100'"),
    ({"decode_power_cap_w": 400}, UTIL, "fleet.decode_power_cap_w", "power cap"),
    ({"link": {"layerwise": True}}, UTIL, "fleet.link.layerwise", "false"),
    ({"dispatch": "round_robin"}, UTIL, "fleet.dispatch", "'round_robin'"),
    ({}, {**UTIL, "min_per_pool": 0}, "fleet.planner.min_per_pool", "at least 1"),
    ({}, {**UTIL, "min_per_pool": 3}, "fleet.planner.min_per_pool", "the fleet has 5"),
    ({}, {**UTIL, "threshold": 1.5}, "fleet.planner.threshold", "1.5"),
    ({}, {**UTIL, "schedule": [{"at_s": 1, "prefill_gpus": 2, "decode_gpus": 2, "x": 1}]},
     "fleet.planner.schedule[0].x", "x"),
    ({}, {"policy": "schedule", "schedule": [{"at_s": 5, "prefill_gpus": 5}]},
     "fleet.planner.schedule[0].prefill_gpus", "leaves none of the fleet's 5"),
    ({}, {"policy": "sometimes"}, "fleet.planner.policy", "'sometimes'"),
    ({}, {"policy": "schedule", "schedule": []}, "fleet.planner.schedule", "at least one row"),
    ({}, {"policy": "schedule", "schedule": [{"at_s": 5, "prefill_gpus": 1, "decode_gpus": 3}]},
     "fleet.planner.schedule[0].decode_gpus", "must add up to the fleet's 5"),
    ({}, {"policy": "schedule", "schedule": [{"at_s": 5, "prefill_gpus": 1, "decode_gpus": 4},
                                             {"at_s": 5, "prefill_gpus": 2, "decode_gpus": 3}]},
     "fleet.planner.schedule[1].at_s", "after the previous row"),
    ({}, {"policy": "schedule", "schedule": [{"at_s": 30, "prefill_gpus": 1, "decode_gpus": 4}]},
     "fleet.planner.schedule[0].at_s", "not before workload.duration_s"),
    ({}, {"policy": "schedule", "schedule": [{"at_s": 3, "prefill_gpus": 0, "decode_gpus": 5}]},
     "fleet.planner.schedule[0].prefill_gpus", "at least 1"),
    ({"prefill_tp": 2, "decode_tp": 2, "prefill_gpus": 2, "decode_gpus": 4},
     {"policy": "schedule", "schedule": [{"at_s": 3, "prefill_gpus": 3, "decode_gpus": 3}]},
     "fleet.planner.schedule[0].prefill_gpus", "multiple of 2"),
    ({}, {"policy": "schedule", "schedule": [{"at_s": 3, "prefill_gpus": 1, "decode_gpus": 4, "when": 1}]},
     "fleet.planner.schedule[0].when", "when"),
    ({}, 7, "fleet.planner", "expected an object"),
])
def test_the_spec_refuses_what_the_model_cannot_do(fleet, planner, path, words):
    with pytest.raises(LabError) as err:
        build(planner=planner, **fleet)
    assert err.value.path == path
    assert words in str(err.value)


def test_the_planner_round_trips_and_off_is_no_planner():
    for planner in (UTIL, SCHEDULE):
        sc = build(planner=planner)
        assert load_scenario(sc.to_dict()) == sc
    assert build(planner="off") == build() and build(planner="off").fleet.planner is None


def test_policy_off_keeps_its_settings_unused_even_where_they_could_not_run():
    """A control turns the planner off and on: off keeps every field, checks none against the fleet."""
    off = build(planner={**SCHEDULE, "policy": "off"}, layout="colocated", gpus=5)
    assert off.fleet.planner.schedule == build(planner=SCHEDULE).fleet.planner.schedule
    assert not off.fleet.planner_on
    on = off.with_changes({"fleet.planner.policy": "schedule", "fleet.layout": "disaggregated"})
    assert on.fleet.planner_on and load_scenario(on.to_dict()) == on
    res = simulate(build(planner={**SCHEDULE, "policy": "off"}))
    assert res.reconfigurations == [] and summarize(res)["reconfigurations"] == 0
    assert summarize(res)["reconfig_lost_gpu_s"] == 0.0


def test_a_rows_decode_gpus_default_to_the_rest_and_a_dotted_path_reaches_a_row():
    sc = build(planner={"policy": "schedule", "schedule": [{"at_s": 5, "prefill_gpus": 4}]})
    assert sc.fleet.planner.schedule[0].decode_of(sc.fleet.total_gpus) == 1
    moved = sc.with_changes({"fleet.planner.schedule.0.prefill_gpus": 3, "fleet.planner.schedule.0.at_s": 9})
    assert moved.fleet.planner.schedule[0].prefill_gpus == 3 and moved.fleet.planner.schedule[0].at_s == 9
    with pytest.raises(LabError) as err:
        sc.with_changes({"fleet.planner.schedule.3.at_s": 9})
    assert err.value.path == "fleet.planner.schedule.3.at_s" and "list of 1" in str(err.value)


# ---------------------------------------------------------------- the rules

def test_pick_mover_takes_the_least_loaded_ties_to_the_highest_index():
    assert pick_mover([3, 1, 1, 2]) == 2
    assert pick_mover([0, 0, 0]) == 2
    assert pick_mover([0, 5, 5]) == 0


def test_utilization_move_needs_the_threshold_and_leaves_min_per_pool():
    assert utilization_move(0.9, 0.5, 2, 3, 0.3, 1) == "prefill"
    assert utilization_move(0.75, 0.5, 2, 3, 0.25, 1) is None  # 0.25 is not more than the threshold
    assert utilization_move(0.2, 0.9, 2, 3, 0.3, 1) == "decode"
    assert utilization_move(0.2, 0.9, 2, 3, 0.3, 2) is None  # the prefill pool would go under 2
    assert utilization(3.0, 2, 2.0) == 0.75 and utilization(0.0, 0, 2.0) == 0.0


def test_schedule_moves_counts_what_it_takes():
    assert schedule_moves(1, 3) == ("prefill", 2)
    assert schedule_moves(3, 1) == ("decode", 2)
    assert schedule_moves(2, 2) == (None, 0)


def test_busy_in_window_clips_steps_to_the_window():
    starts, ends = [0.0, 1.0, 2.5, 4.0], [0.5, 2.0, 3.5, 6.0]
    assert busy_in_window(starts, ends, 1.5, 5.0) == 0.5 + 1.0 + 1.0
    assert busy_in_window(starts, ends, 6.0, 7.0) == 0.0


# ---------------------------------------------------------------- engine == reference

CASES = {
    "utilization": build(planner=UTIL),
    "utilization-first-token-prefill": build(planner=UTIL, first_token="prefill"),
    "utilization-chunked-prefill-partial": build(planner={**UTIL, "switch_s": 0.5}, prefill_chunk_tokens=768,
                                                 long_prefill_tokens=256),
    "schedule": build(planner=SCHEDULE),
    "schedule-slow-independent-link": build(planner=SCHEDULE, link={"sharing": "independent", "gbytes_per_s": 4}),
    "schedule-fewest-seqs": build(planner=SCHEDULE, decode_pick="fewest_seqs"),
    # decode KV tight: moved sequences wait for room in line with new prompts
    "schedule-kv-tight": load_scenario({**SPLIT, "model": {"kv_capacity_tokens": 8000},
                                        "workload": {**SPLIT["workload"], "rate": 8},
                                        "fleet": {**SPLIT["fleet"], "planner": SCHEDULE}}),
    "utilization-capped": load_scenario({**SPLIT, "drain_s": 1, "workload": {**SPLIT["workload"], "rate": 12},
                                         "fleet": {**SPLIT["fleet"], "planner": UTIL}}),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_engine_matches_reference_with_a_planner(name):
    assert_matches(CASES[name])


def test_planner_cases_exercise_what_they_claim():
    for name, sc in CASES.items():
        res = simulate(sc)
        assert res.reconfigurations, name
        assert {to for _, _, _, to, _ in res.reconfigurations} == {"prefill", "decode"}, name
    assert any(r.earlier for r in simulate(CASES["schedule"]).requests)
    assert simulate(CASES["utilization-capped"]).capped == "drain_s"
    tight = simulate(CASES["schedule-kv-tight"])
    moves = [tr for tr in tight.transfers if tr.src_gpu != tight.requests[tr.request].prefill_gpu]
    assert any(tr.reserved > tr.ready for tr in moves)  # a moved sequence waited for decode room


PLANNER_SETTINGS = settings(max_examples=40, deadline=None, database=None, derandomize=True,
                            suppress_health_check=[HealthCheck.too_slow])


@st.composite
def planner_scenarios(draw):
    prefill = draw(st.integers(1, 3))
    decode = draw(st.integers(1, 3))
    total = prefill + decode
    duration = draw(st.integers(4, 12))
    if draw(st.booleans()):
        planner = {"policy": "utilization", "interval_s": draw(st.sampled_from([0.5, 1.0, 2.5])),
                   "threshold": draw(st.sampled_from([0.0, 0.1, 0.4])),
                   "switch_s": draw(st.sampled_from([0.0, 0.3, 2.0])), "min_per_pool": 1}
    else:
        rows, at = [], 0.0
        for _ in range(draw(st.integers(1, 3))):
            at += draw(st.sampled_from([0.7, 1.5, 3.0]))
            if at >= duration:
                break
            p = draw(st.integers(1, total - 1))
            rows.append({"at_s": at, "prefill_gpus": p, "decode_gpus": total - p})
        if not rows:
            rows = [{"at_s": 1.0, "prefill_gpus": total - 1, "decode_gpus": 1}] if total > 2 else [
                {"at_s": 1.0, "prefill_gpus": 1, "decode_gpus": 1}]
        planner = {"policy": "schedule", "switch_s": draw(st.sampled_from([0.0, 0.4, 1.5])), "schedule": rows}
    fleet = {"layout": "disaggregated", "prefill_gpus": prefill, "decode_gpus": decode, "planner": planner,
             "first_token": draw(st.sampled_from(["decode", "prefill"])),
             "decode_pick": draw(st.sampled_from(["most_free_kv", "fewest_seqs"])),
             "link": {"sharing": draw(st.sampled_from(["fifo", "independent"])),
                      "gbytes_per_s": draw(st.sampled_from([2, 50]))}}
    if draw(st.booleans()):
        fleet["prefill_chunk_tokens"] = draw(st.sampled_from([256, 1024]))
    model = {"cost": "linear"}
    if draw(st.booleans()):
        model["kv_capacity_tokens"] = draw(st.sampled_from([4000, 12000]))
    workload = {"rate": draw(st.sampled_from([3, 8, 15])), "duration_s": duration,
                "prompt_tokens": {"dist": "uniform", "low": 50, "high": 3000},
                "output_tokens": {"dist": "uniform", "low": 1, "high": 120}}
    if draw(st.booleans()):
        workload["phases"] = [{"start_s": duration / 2, "prompt_tokens": {"dist": "uniform", "low": 2000, "high": 3500},
                               "output_tokens": 20}]
    return load_scenario({"seed": draw(st.integers(0, 50)), "workload": workload, "fleet": fleet, "model": model,
                          "drain_s": draw(st.sampled_from([1.0, 30.0]))})


@PLANNER_SETTINGS
@given(planner_scenarios())
def test_engine_matches_reference_on_random_planner_scenarios(sc):
    assert_matches(sc)


# ---------------------------------------------------------------- invariants

def role_at(roles, t):
    """The role a GPU holds at t, from its `GpuLog.roles`."""
    role = roles[0][1]
    for t0, r in roles:
        if t0 <= t:
            role = r
    return role


def check_invariants(res):
    for log in res.gpus:
        times = [t for t, _ in log.roles]
        assert times == sorted(times)
        kinds = [r for _, r in log.roles]
        for a, b in zip(kinds, kinds[1:]):  # a role, then switching, then the other role
            assert (a == "switching") != (b == "switching") and a != b
        for j, (s, e) in enumerate(zip(log.start, log.end)):
            role = role_at(log.roles, s)
            assert role != "switching", f"GPU {log.index} step {j} starts while it reloads"
            # a step never outlasts its role: the switch begins at or after its end
            later = [t for t, r in log.roles if t > s]
            assert not later or e <= later[0]
            if role == "prefill":
                assert log.decode_seqs[j] == 0
            else:
                assert log.prefill_tokens[j] == 0
    ends = 0
    for rec in res.requests:
        ends += 1
        stretches = rec.stretches()
        if rec.finished and rec.output_tokens > 1 and not rec.dropped:
            assert sum(b - a + 1 for _, a, b in stretches) == rec.output_tokens - 1
            assert len(request_gaps(res, rec)) == rec.output_tokens - 1
            for g, a, b in stretches:  # every stretch decodes on a GPU in its decode role
                assert role_at(res.gpus[g].roles, res.gpus[g].start[a]) == "decode"
    assert ends == len(res.requests)
    m = summarize(res)
    assert m["finished"] + m["unfinished"] + m["rejected"] == m["requests"]  # (rejected: early rejection)


@pytest.mark.parametrize("name", sorted(CASES))
def test_invariants_hold_with_a_planner(name):
    check_invariants(simulate(CASES[name]))


@PLANNER_SETTINGS
@given(planner_scenarios())
def test_invariants_hold_on_random_planner_scenarios(sc):
    check_invariants(simulate(sc))


def test_a_schedule_that_keeps_the_sizes_changes_nothing():
    """The planner's events stop the decode run-ahead; results must not move."""
    keep = {"policy": "schedule", "switch_s": 1, "schedule": [{"at_s": t, "prefill_gpus": 2, "decode_gpus": 3}
                                                             for t in (3.3, 9.9, 20.0)]}
    a, b = simulate(build()), simulate(build(planner=keep))
    assert b.reconfigurations == []
    assert [(r.first_token, r.finish) for r in a.requests] == [(r.first_token, r.finish) for r in b.requests]
    assert [g.end for g in a.gpus] == [g.end for g in b.gpus]
    assert summarize(b)["reconfigurations"] == 0 and summarize(a)["reconfigurations"] == 0


def test_a_reload_past_the_drain_cap_does_not_cut_the_run():
    sc = build(planner={"policy": "schedule", "switch_s": 500, "schedule": [
        {"at_s": 25, "prefill_gpus": 1, "decode_gpus": 4}]})
    res = simulate(sc)
    assert res.capped is None and all(r.finished for r in res.requests)
    assert res.reconfigurations[0][4] > res.end_time


# ---------------------------------------------------------------- metrics and blame

def test_reconfiguration_metrics_count_moves_and_lost_time():
    res = simulate(CASES["schedule"])
    m = summarize(res)
    moves = len(res.reconfigurations)
    assert m["reconfigurations"] == moves and moves >= 4  # the three rows need at least 1 + 3
    # each move loses at least its reload (1 s) and at most decision -> ready
    total = sum(ready - t for t, _, _, _, ready in res.reconfigurations)
    assert moves * 1.0 - 1e-9 <= m["reconfig_lost_gpu_s"] <= total + 1e-9  # (seconds: float sums)


def test_pool_utilisation_counts_each_gpu_by_its_time_in_each_role():
    """A GPU that spends half the run idle as prefill and half busy as decode adds nothing
    to the prefill pool's busy time: utilisation is busy / time in role, per pool."""
    res = simulate(CASES["schedule"])
    m = summarize(res)
    span = res.end_time
    busy = {"prefill": 0.0, "decode": 0.0}
    time = {"prefill": 0.0, "decode": 0.0}
    for log in res.gpus:
        for s, e in zip(log.start, log.end):
            busy[role_at(log.roles, s)] += min(e, span) - s
        marks = log.roles + [(span, None)]
        for (t0, r), (t1, _) in zip(marks, marks[1:]):
            if r in time:
                time[r] += min(t1, span) - min(t0, span)
    assert m["util_prefill"] == pytest.approx(busy["prefill"] / time["prefill"], rel=1e-12)
    assert m["util_decode"] == pytest.approx(busy["decode"] / time["decode"], rel=1e-12)


def test_a_moved_sequences_gap_is_blamed_on_the_role_change():
    sc = build(planner=SCHEDULE, link={"gbytes_per_s": 2})  # a slow link: the move is the worst gap
    res = simulate(sc)
    blames = request_blame(res)
    moved = [b for b, r in zip(blames, res.requests) if r.earlier and r.finished]
    assert moved and all(b.worst_gap_cause == "role_change" for b in moved)
    for b, r in zip(blames, res.requests):
        if b.worst_gap_cause == "role_change":
            assert r.earlier


# ---------------------------------------------------------------- command line

def test_lab_run_says_the_role_changes_and_refuses_a_planner_it_cannot_run(capsys):
    from pathlib import Path

    from lab.cli import main

    mission = str(Path(__file__).resolve().parents[1] / "missions" / "19-traffic-shifts.json")
    assert main(["run", mission, "--set", "fleet.planner.policy=schedule", "--set", "fleet.planner.schedule.0.at_s=24"]) == 0
    out = capsys.readouterr().out
    assert "Role changes              1 move " in out and "GPU-s (draining and reloading)" in out
    assert main(["run", mission]) == 0
    assert "Role changes" not in capsys.readouterr().out  # fixed pools: no line
    assert main(["run", mission, "--set", "fleet.planner.policy=utilization", "--set", "fleet.layout=colocated"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: fleet.planner.policy: 'utilization' needs a disaggregated fleet") and "Traceback" not in err
