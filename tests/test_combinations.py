"""Memory and control together: KV on demand with a prefix cache, and a planner with KV on
demand, a prefix cache or early rejection (docs/model.md "KV on demand", "Prefix caching", "Early
rejection", "Pools that change roles"). The spec used to refuse these; now the engine models
them and the naive reference (tests/reference_sim.py) models them again on its own. Here:
the engine against the reference (named cases and random ones), the cases really exercise
what they claim, the invariants hold (KV never over capacity in the role a GPU has, every
request ends one way once, a preempted or moved request's tokens count once, a GPU serves
one role at a time), and a planner's price and energy follow each GPU's time in each role."""

import copy
import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lab.core import kv, load_scenario, request_gaps, simulate, summarize
from lab.core.cost import energy_by_role, pool_costs, role_time
from lab.core.prefix_cache import kv_taken_tokens

from test_planner import check_invariants as check_planner_invariants, role_at
from test_reference import assert_matches, diff_engine_reference

FOLLOWUPS = {"dist": "lognormal", "median": 600, "sigma": 1.0, "min": 16, "max": 6000}
PREFIXES = {"system_tokens": 1024, "system_share": 0.9, "systems": 2, "followup_share": 0.4,
            "open_conversations": 8, "followup_tokens": FOLLOWUPS, "max_prompt_tokens": 16000}
LONG_ANSWERS = {"dist": "uniform", "low": 50, "high": 700}
ADMISSION = {"reject_when": "predicted_ttft_over_slo"}
UTIL = {"policy": "utilization", "interval_s": 3, "threshold": 0.1, "switch_s": 2}
SCHEDULE = {"policy": "schedule", "switch_s": 1, "schedule": [
    {"at_s": 8, "prefill_gpus": 1, "decode_gpus": 4}, {"at_s": 15, "prefill_gpus": 4, "decode_gpus": 1},
    {"at_s": 16, "prefill_gpus": 2, "decode_gpus": 3}]}


def build(layout="disaggregated", workload=None, model=None, **fleet):
    """A small fleet on a shared-prefix workload (so a cache has hashes to hit)."""
    f = {"layout": layout}
    f.update({"gpus": 2} if layout == "colocated" else {"prefill_gpus": 2, "decode_gpus": 3})
    f.update(fleet)
    wl = {"rate": 5, "duration_s": 30, "prompt_tokens": {"dist": "lognormal", "median": 2000, "sigma": 0.8,
                                                         "min": 32, "max": 12000},
          "output_tokens": {"dist": "uniform", "low": 1, "high": 250}, "prefixes": PREFIXES,
          "phases": [{"start_s": 15, "prompt_tokens": 6000, "output_tokens": 60}]}
    wl.update(workload or {})
    raw = {"seed": 3, "workload": wl, "fleet": f, "slo": {"ttft_s": 1.5, "tpot_ms": 30}, "drain_s": 60}
    if model:
        raw["model"] = model
    return load_scenario(raw)


SHORT = {"duration_s": 15, "phases": [], "output_tokens": LONG_ANSWERS}
CASES = {
    # 1. on demand + a prefix cache: a re-prefill looks the cache up again
    "colocated-on-demand-per-gpu": build("colocated", workload={**SHORT, "rate": 8}, model={"kv_capacity_tokens": 16000},
                                         kv_policy="on_demand", prefix_cache="per_gpu", prefix_cache_gb=0.5),
    "colocated-on-demand-shared-chunked": build("colocated", workload={**SHORT, "rate": 8}, model={"kv_capacity_tokens": 9000},
                                                kv_policy="on_demand", prefix_cache="shared", chunk_tokens=512),
    "split-on-demand-per-gpu": build(workload={**SHORT, "rate": 6}, model={"kv_capacity_tokens": 14000}, decode_gpus=2,
                                     kv_policy="on_demand", prefix_cache="per_gpu", prefix_cache_gb=0.5),
    "split-on-demand-shared-chunked": build(workload={**SHORT, "rate": 6}, model={"kv_capacity_tokens": 9000}, decode_gpus=2,
                                            kv_policy="on_demand", prefix_cache="shared", prefill_chunk_tokens=1024),
    # 2. a planner + on demand: moved sequences take blocks where they land
    "utilization-on-demand": build(planner=UTIL, model={"kv_capacity_tokens": 12000}, kv_policy="on_demand"),
    "schedule-on-demand": build(planner=SCHEDULE, model={"kv_capacity_tokens": 12000}, kv_policy="on_demand"),
    "schedule-on-demand-first-token-prefill": build(planner=SCHEDULE, model={"kv_capacity_tokens": 10000},
                                                    kv_policy="on_demand", first_token="prefill", kv_block_tokens=64),
    # 3. a planner + a prefix cache: a reload empties a per-GPU cache
    "utilization-per-gpu": build(planner=UTIL, prefix_cache="per_gpu", prefix_cache_gb=1),
    "schedule-shared": build(planner=SCHEDULE, prefix_cache="shared"),
    "schedule-per-gpu-on-demand": build(planner=SCHEDULE, workload={"output_tokens": LONG_ANSWERS},
                                        model={"kv_capacity_tokens": 16000}, prefix_cache="per_gpu",
                                        prefix_cache_gb=0.5, kv_policy="on_demand"),
    # 4. a planner + early rejection: the rate of the pool's current members
    "utilization-admission": build(planner=UTIL, admission=ADMISSION),
    "schedule-admission-chunked": build(planner=SCHEDULE, admission=ADMISSION, prefill_chunk_tokens=1024),
    "schedule-everything": build(planner=SCHEDULE, workload={"rate": 8}, model={"kv_capacity_tokens": 16000},
                                 prefix_cache="shared", kv_policy="on_demand", admission=ADMISSION),
    "colocated-on-demand-per-gpu-admission": build("colocated", workload={**SHORT, "rate": 10},
                                                   model={"kv_capacity_tokens": 16000}, kv_policy="on_demand",
                                                   prefix_cache="per_gpu", prefix_cache_gb=0.5, admission=ADMISSION),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_engine_matches_reference_on_the_combinations(name):
    assert_matches(CASES[name])


def _reprefill_hits(res):
    """Re-prefills whose prefix cache lookup skipped some of what they prefill."""
    return sum(1 for log in res.gpus for _, _, todo, computed in log.readmitted if computed < todo)


def test_the_combination_cases_exercise_what_they_claim():
    runs = {name: simulate(sc) for name, sc in CASES.items()}
    for name, res in runs.items():
        fleet = res.scenario.fleet
        if fleet.kv_policy == "on_demand":
            assert sum(r.preemptions for r in res.requests), name
        if fleet.prefix_cache != "off":
            assert sum(r.prefix_hit_tokens for r in res.requests), name
        if fleet.planner_on:
            assert {to for _, _, _, to, _ in res.reconfigurations} == {"prefill", "decode"}, name
    # a preempted prompt found its own blocks cached when it was prefilled again
    assert _reprefill_hits(runs["colocated-on-demand-per-gpu"]) and _reprefill_hits(runs["split-on-demand-shared-chunked"])
    # a moved sequence was preempted at its destination
    assert _preempted_after_a_move(runs["schedule-on-demand"]) or _preempted_after_a_move(runs["schedule-per-gpu-on-demand"])
    # early rejection turned some away while the prefill pool changed size
    for name in ("utilization-admission", "schedule-admission-chunked", "colocated-on-demand-per-gpu-admission"):
        assert any(r.rejected for r in runs[name].requests), name


def _preempted_after_a_move(res):
    """Requests handed over by a leaving decode GPU and then preempted where they landed."""
    out = set()
    for tr in res.transfers:
        rec = res.requests[tr.request]
        if tr.src_gpu in {g for g, _, _ in (rec.earlier or ())}:  # its KV left a decode stretch: a move
            dst = res.gpus[tr.dst_gpu]
            if any(rid == rec.id and j < len(dst.start) and dst.start[j] >= tr.end for j, rid in dst.preempted):
                out.add(rec.id)
    return out


def test_a_re_prefill_looks_the_cache_up_again_and_computes_what_it_emitted():
    """Its prompt's blocks may hit; the tokens it emitted are never cached, so at least
    those are computed; the request's own hit stays its first prefill's."""
    res = simulate(CASES["colocated-on-demand-per-gpu"])
    block = res.scenario.workload.prefix_block_tokens
    seen = 0
    for log in res.gpus:
        for _, rid, todo, computed in log.readmitted:
            rec = res.requests[rid]
            assert todo > rec.prompt_tokens  # prompt + what it emitted
            assert computed >= todo - rec.prompt_tokens
            skipped = todo - computed
            assert skipped % block == 0 or skipped == rec.prompt_tokens  # cached blocks of its prompt (the last partial)
            seen += computed < todo
    assert seen


def test_a_re_prefills_hit_is_at_most_its_prompt_and_never_all_it_prefills():
    from lab.core.prefix_cache import hit_tokens

    assert hit_tokens(7, 512, 3245, 3250) == 3245  # every block hit, the last partial: the prompt, not its answer
    assert hit_tokens(7, 512, 3245) == 3244  # a first prefill still computes its last token
    assert hit_tokens(2, 512, 3245, 3250) == 1024
    assert hit_tokens(1, 512, 100, 101) == 100 and hit_tokens(1, 512, 100, 100) == 99


def test_a_per_gpu_cache_share_and_on_demand_blocks_split_the_hbm():
    """On demand the blocks come from what the cache leaves: floor((KV capacity - the cache's
    share) / B). Under pressure a GPU fills exactly that many, never more; a larger share
    leaves fewer blocks and drops the requests too large for the rest."""
    rooms, drops = [], []
    for gb in (0.25, 1.0):
        sc = build("colocated", workload={**SHORT, "rate": 8}, model={"kv_capacity_tokens": 16000},
                   kv_policy="on_demand", prefix_cache="per_gpu", prefix_cache_gb=gb)
        res = simulate(sc)
        room = kv.capacity_blocks(16000 - kv_taken_tokens(sc, sc.pools()[0]), sc.fleet.kv_block_tokens)
        assert max(used for log in res.gpus for _, used in log.kv_used) == room
        rooms.append(room)
        drops.append(sum(1 for r in res.requests if r.dropped))
    assert rooms[0] > rooms[1] and drops[0] < drops[1]


def test_a_reload_empties_a_per_gpu_cache():
    """A decode GPU that joins the prefill pool starts with an empty cache: its first prompts
    there hit nothing their own pool's history would have given them."""
    res = simulate(CASES["utilization-per-gpu"])
    joined = {(g, ready) for _, g, frm, to, ready in res.reconfigurations if to == "prefill" and ready is not None}
    assert joined
    for g, ready in joined:
        firsts = sorted((r for r in res.requests if r.prefill_gpu == g and r.prefill_start is not None
                         and r.prefill_start >= ready), key=lambda r: r.prefill_start)
        if firsts:
            assert firsts[0].prefix_hit_tokens == 0


def test_early_rejection_predicts_with_the_pools_current_members():
    """Each prediction's rate is that of the prefill instances serving at the arrival: the
    same arrivals predicted against a fixed pool of that size give the same TTFT."""
    res = simulate(CASES["schedule-admission-chunked"])
    from lab.core import admission
    fleet = res.scenario.fleet
    step_s = pool_costs(res.scenario)[0].step_s
    per_instance = admission.prefill_rate(1, step_s, admission.step_tokens(fleet))
    sizes = set()
    for rec in res.requests:
        if rec.predicted_ttft_s is None:
            continue
        serving = sum(1 for log in res.gpus if _serving_prefill(res, log, rec.arrival))
        sizes.add(serving)
        # predicted = (ahead + own) / (serving x per-instance rate): the own part alone bounds it
        assert rec.predicted_ttft_s >= rec.prompt_tokens / (serving * per_instance) * (1 - 1e-12)
    assert len(sizes) > 1  # the pool changed size under the predictions


def _serving_prefill(res, log, t):
    """Whether instance `log` takes prompts at t: in the prefill role, not deciding to leave."""
    if role_at(log.roles, t) != "prefill":
        return False
    for decided, g, frm, _, ready in res.reconfigurations:
        if g == log.index and frm == "prefill" and decided <= t:
            later_join = [t0 for t0, r in log.roles if r == "prefill" and t0 > decided]
            if not later_join or t < later_join[0]:
                return False
    return True


# ---------------------------------------------------------------- invariants

def check_combination(res):
    """KV never over the capacity of the role a GPU has; each request ends one way; tokens
    count once; a GPU serves one role at a time (the planner's invariants)."""
    sc = res.scenario
    fleet = sc.fleet
    full = {pool.role: cost.kv_tokens - kv_taken_tokens(sc, pool) for pool, cost in zip(sc.pools(), pool_costs(sc))}
    if fleet.kv_policy == "on_demand":
        block = fleet.kv_block_tokens
        for log in res.gpus:
            for t, used in log.kv_used:
                role = role_at(log.roles, t)
                assert used >= 0
                if role != "prefill":  # a GPU that left decode reads 0 from its hand-over on
                    room = full["decode" if role == "switching" else role]
                    assert used <= kv.capacity_blocks(room, block), (log.index, t, used)
    for rec in res.requests:
        ways = [rec.finished, rec.rejected, rec.dropped is not None,
                not rec.finished and not rec.rejected and rec.dropped is None]
        assert sum(bool(w) for w in ways) == 1, rec
        if rec.rejected:
            assert rec.first_token is None and rec.prefill_start is None and rec.preemptions == 0
        if rec.finished and rec.output_tokens > 1:
            assert sum(b - a + 1 for _, a, b in rec.stretches()) == rec.output_tokens - 1  # tokens 2..n once
            assert len(request_gaps(res, rec)) == rec.output_tokens - 1
        elif rec.output_tokens > 1:
            assert sum(b - a + 1 for _, a, b in rec.stretches()) <= rec.output_tokens - 1
    if fleet.planner_on:
        check_planner_invariants(res)
    m = summarize(res)
    assert m["finished"] + m["unfinished"] + m["rejected"] == m["requests"]
    assert m["preemptions"] == sum(r.preemptions for r in res.requests)



@pytest.mark.parametrize("name", sorted(CASES))
def test_invariants_hold_on_the_combinations(name):
    check_combination(simulate(CASES[name]))


COMBO_SETTINGS = settings(max_examples=30, deadline=None, database=None, derandomize=True,
                          suppress_health_check=[HealthCheck.too_slow])


@st.composite
def combinations(draw):
    """Small busy fleets drawing every mechanism of memory and control at once."""
    planner_on = draw(st.booleans())
    layout = "disaggregated" if planner_on else draw(st.sampled_from(["colocated", "disaggregated"]))
    duration = draw(st.integers(4, 10))
    if layout == "colocated":
        fleet = {"layout": layout, "gpus": draw(st.integers(1, 3)), "chunk_tokens": draw(st.sampled_from([None, 256, 1024]))}
    else:
        prefill, decode = draw(st.integers(1, 3)), draw(st.integers(1, 3))
        fleet = {"layout": layout, "prefill_gpus": prefill, "decode_gpus": decode,
                 "prefill_chunk_tokens": draw(st.sampled_from([None, 512])),
                 "first_token": draw(st.sampled_from(["decode", "prefill"])),
                 "decode_pick": draw(st.sampled_from(["most_free_kv", "fewest_seqs"])),
                 "link": {"sharing": draw(st.sampled_from(["fifo", "independent"])),
                          "gbytes_per_s": draw(st.sampled_from([2, 50]))}}
        if planner_on:
            total = prefill + decode
            if total < 2:
                fleet["decode_gpus"] = 2
                total = prefill + 2
            if draw(st.booleans()):
                fleet["planner"] = {"policy": "utilization", "interval_s": draw(st.sampled_from([0.5, 1.0, 2.5])),
                                    "threshold": draw(st.sampled_from([0.0, 0.1])),
                                    "switch_s": draw(st.sampled_from([0.0, 0.3, 1.5]))}
            else:
                p = draw(st.integers(1, total - 1))
                fleet["planner"] = {"policy": "schedule", "switch_s": draw(st.sampled_from([0.0, 0.4])),
                                    "schedule": [{"at_s": draw(st.sampled_from([0.7, 1.5, 3.0])), "prefill_gpus": p,
                                                  "decode_gpus": total - p}]}
    fleet["kv_policy"] = draw(st.sampled_from(["reserve", "on_demand"]))
    fleet["kv_block_tokens"] = draw(st.sampled_from([16, 64, 512]))
    fleet["prefix_cache"] = draw(st.sampled_from(["off", "per_gpu", "shared"]))
    fleet["prefix_cache_gb"] = draw(st.sampled_from([0.25, 1.0]))
    fleet["prefix_pool_gb"] = draw(st.sampled_from([0.5, 50.0]))
    if draw(st.booleans()):
        fleet["admission"] = ADMISSION
    model = {"kv_capacity_tokens": draw(st.sampled_from([14000, 20000, 40000]))}
    out_low = draw(st.integers(1, 300))
    workload = {"rate": draw(st.sampled_from([3, 8, 14])), "duration_s": duration,
                "prompt_tokens": {"dist": "uniform", "low": 50, "high": draw(st.sampled_from([1500, 5000]))},
                "output_tokens": {"dist": "uniform", "low": out_low, "high": out_low + draw(st.integers(0, 400))},
                "prefix_block_tokens": draw(st.sampled_from([64, 512])),
                "prefixes": {**PREFIXES, "max_prompt_tokens": 9000}}
    return load_scenario({"seed": draw(st.integers(0, 50)), "workload": workload, "fleet": fleet, "model": model,
                          "slo": {"ttft_s": draw(st.sampled_from([0.5, 2.0])), "tpot_ms": 40},
                          "drain_s": draw(st.sampled_from([1.0, 30.0]))})


@COMBO_SETTINGS
@given(combinations())
def test_engine_matches_reference_on_random_combinations(sc):
    problems = diff_engine_reference(sc)
    assert not problems, "engine != reference:\n  " + "\n  ".join(problems)


@COMBO_SETTINGS
@given(combinations())
def test_invariants_hold_on_random_combinations(sc):
    check_combination(simulate(sc))


# ---------------------------------------------------------------- price and energy by role

def test_a_planners_pool_price_and_energy_follow_each_gpus_time_in_each_role():
    """Each GPU's $/hour and energy count in the pool it served at the time (a reload in the
    pool it reloads for): the pools add up to the fleet, and a GPU's share is its time."""
    res = simulate(CASES["schedule-shared"])
    m = summarize(res)
    span = res.end_time
    price = pool_costs(res.scenario)[0].gpu_usd_per_hour
    seconds = {"prefill": 0.0, "decode": 0.0}
    for log in res.gpus:
        spans = role_time(log, span, res.reconfigurations)
        assert spans[0][1] == 0.0 and spans[-1][2] == span
        assert all(a[2] == b[1] and a[0] != b[0] for a, b in zip(spans, spans[1:]))  # contiguous, merged
        for role, t0, t1 in spans:
            seconds[role] += log.tp * (t1 - t0)
    assert m["prefill_usd_per_hour"] == pytest.approx(price * seconds["prefill"] / span, rel=1e-12)
    assert m["decode_usd_per_hour"] == pytest.approx(price * seconds["decode"] / span, rel=1e-12)
    assert m["prefill_usd_per_hour"] + m["decode_usd_per_hour"] == pytest.approx(m["usd_per_hour"], rel=1e-12)
    fixed = res.scenario.fleet.prefill_gpus * price
    assert m["prefill_usd_per_hour"] != pytest.approx(fixed)  # not the pool it started with
    assert m["prefill_energy_j"] + m["decode_energy_j"] == pytest.approx(m["power_w_mean"] * span, rel=1e-9)


def test_energy_by_role_splits_one_gpus_energy_without_losing_any():
    res = simulate(CASES["schedule-shared"])
    span = res.end_time
    cost = pool_costs(res.scenario)[0]
    moved = [log for log in res.gpus if len(log.roles) > 1]
    assert moved
    for log in moved:
        spans = role_time(log, span, res.reconfigurations)
        parts = energy_by_role(cost, log, spans)
        assert set(parts) <= {"prefill", "decode"} and len(parts) == 2
        assert math.fsum(parts.values()) == pytest.approx(cost.energy_j(log, span), rel=1e-12)
        # an instance idle in a role draws at least idle watts there
        idle_w = cost.spec["idle_w"] * log.tp
        for role, t0, t1 in spans:
            assert parts[role] >= idle_w * (t1 - t0) * (1 - 1e-12) or len(spans) > 2


def test_a_reload_still_under_way_at_the_end_counts_in_the_pool_it_reloads_for():
    sc = build(planner={"policy": "schedule", "switch_s": 500, "schedule": [{"at_s": 25, "prefill_gpus": 1, "decode_gpus": 4}]},
               prefix_cache="per_gpu")
    res = simulate(sc)
    mover = res.reconfigurations[0][1]
    spans = role_time(res.gpus[mover], res.end_time, res.reconfigurations)
    assert [role for role, _, _ in spans] == ["prefill", "decode"]
    assert spans[-1][2] == res.end_time
    m = summarize(res)
    assert m["decode_usd_per_hour"] > 3 * pool_costs(sc)[0].gpu_usd_per_hour  # more than its 3 starting GPUs


def test_the_combinations_load_and_round_trip():
    for name, sc in CASES.items():
        again = load_scenario(copy.deepcopy(sc.to_dict()))
        assert again == sc, name


# ---------------------------------------------------------------- blame

@pytest.mark.parametrize("name", ["colocated-on-demand-per-gpu", "colocated-on-demand-shared-chunked",
                                  "split-on-demand-shared-chunked", "schedule-per-gpu-on-demand", "schedule-everything"])
def test_blame_adds_up_and_equals_the_reference_on_the_combinations(name):
    """A re-prefill's cached head is not computed: blame replays its pieces from
    GpuLog.readmitted's computed tokens, so the request's own prefill and the others' chunk
    waits stay those the reference gets from its own records."""
    from lab.core import request_blame
    from reference_sim import reference_blame, reference_simulate

    sc = CASES[name]
    res = simulate(sc)
    ref = reference_blame(sc, reference_simulate(sc))
    compared = 0
    for b, rec in zip(request_blame(res), res.requests):
        if rec.first_token is None or rec.dropped:
            continue
        theirs = ref[rec.id]
        assert b.parts == pytest.approx(theirs["parts"], abs=1e-12), rec.id
        assert math.fsum(b.parts.values()) == pytest.approx(rec.first_token - rec.arrival, abs=1e-9)
        assert b.parts["prefix_fetch"] == rec.prefix_fetch_s
        if b.worst_gap_cause == "role_change":  # (the reference's blame has no planner cause)
            assert rec.earlier, rec.id
        elif theirs["worst_gap"] is not None:
            assert b.worst_gap_cause == theirs["worst_gap"][1], rec.id
        compared += 1
    assert compared
