"""Fleets as they are built (docs/model.md): tensor parallelism, a GPU type and a power cap per
pool, and the cost, power and energy they imply.

Formulas are recomputed here from docs/model.md's text, not from lab/core/cost.py.
"""

import json
import math

import pytest

from lab import cli
from lab.core import GpuLog, PoolCost, RequestRecord, Result, load_scenario, simulate, summarize
from lab.core.cost import clock_factor, step_power_w
from lab.core.metrics import METRIC_NAMES
from lab.core.spec import GPU_PRESETS, LLM_PRESETS, Model

from reference_sim import reference_simulate
from test_reference import assert_matches


def model(**fields):
    return Model.from_dict(fields)


def scenario(fleet, model=None, workload=None, slo=None, **extra):
    wl = {"rate": 4, "duration_s": 10, "prompt_tokens": 1500, "output_tokens": 60}
    wl.update(workload or {})
    return load_scenario({"workload": wl, "fleet": fleet, "model": model or {}, "slo": slo or {"ttft_s": 2, "tpot_ms": 60},
                          "seed": 3, **extra})


def old_roofline(m, n, ctx, p):
    """The single-GPU roofline as it was before tensor parallelism (same operation order)."""
    shape, hw = LLM_PRESETS[m.llm], GPU_PRESETS[m.gpu]
    memory_s = (shape["params"] * shape["bytes_per_value"]
                + 2 * shape["layers"] * shape["kv_heads"] * shape["head_dim"] * shape["bytes_per_value"] * (ctx + p)) / (
        hw["hbm_tb_s"] * 1e12)
    compute_s = 2.0 * shape["params"] * (n + p) / (hw["peak_tflops"] * 1e12 * m.efficiency)
    return memory_s if memory_s > compute_s else compute_s


def old_linear(m, n, ctx, p):
    ms = 0.0
    if n:
        ms = m.decode_step_ms + m.decode_ms_per_seq * n + m.decode_ms_per_context_token * ctx
    if p:
        ms += m.prefill_ms_per_token * p
    return ms / 1000.0


# Step times are whole picosecond ticks with per-token costs rounded once (docs/model.md "Time
# base"): within half a tick per token of the float formulas, under 5e-5 for these presets.
TICK_REL = 5e-5

STEPS = [(1, 100, 0), (32, 64_000, 0), (256, 500_000, 0), (0, 0, 1), (0, 0, 2000), (0, 0, 50_000), (64, 100_000, 512)]


# ---------------------------------------------------------------- TP 1 is today's model


@pytest.mark.parametrize("gpu", sorted(GPU_PRESETS))
def test_tp1_uncapped_is_the_single_gpu_model_bit_for_bit(gpu):
    for llm in LLM_PRESETS:
        m = model(cost="roofline", gpu=gpu, llm=llm, efficiency=0.7)
        cost = PoolCost(m, gpu, 1)
        for args in STEPS:
            assert cost.step_s(*args) == pytest.approx(old_roofline(m, *args), rel=TICK_REL), (llm, args)
            assert cost.parts(*args)[2] == 0.0  # no all-reduce on one GPU
    m = model(gpu=gpu)
    cost = PoolCost(m, gpu, 1)
    for args in STEPS:
        assert cost.step_s(*args) == pytest.approx(old_linear(m, *args), rel=1e-15), args  # whole-tick constants


def test_attention_arguments_are_accepted_and_ignored_without_model_attention():
    cost = PoolCost(model(cost="roofline"), "h100", 2)
    assert cost.step_s(4, 8000, 512, 300_000.0, 1024) == cost.step_s(4, 8000, 512)


# ---------------------------------------------------------------- TP > 1


def allreduce_s(llm, gpu, tp, tokens):
    shape, hw = LLM_PRESETS[llm], GPU_PRESETS[gpu]
    one = 2 * (tp - 1) / tp * tokens * shape["hidden"] * 2 / (hw["nvlink_gbytes_per_s"] * 1e9) + hw["allreduce_latency_us"] * 1e-6
    return 2 * shape["layers"] * one


@pytest.mark.parametrize("tp", [2, 4, 8])
def test_llama3_70b_roofline_splits_memory_and_compute_over_tp_and_adds_allreduces(tp):
    m = model(cost="roofline", llm="llama3-70b")
    one = PoolCost(m, "h100", 1)  # weights do not fit, but the arithmetic is defined
    cost = PoolCost(m, "h100", tp)
    for args in STEPS:
        mem1, cmp1, comm1 = one.parts(*args)
        mem, cmp_, comm = cost.parts(*args)
        assert mem == mem1 / tp and cmp_ == cmp1 / tp  # exact: tp scales the divisor
        assert comm1 == 0.0 and comm > 0.0
        assert comm == pytest.approx(allreduce_s("llama3-70b", "h100", tp, args[0] + args[2]), rel=1e-12)
        assert cost.step_s(*args) == pytest.approx(max(mem, cmp_) + comm, rel=TICK_REL)
    # 2,000-token prefill is compute-bound: faster with tp, by less than tp (the all-reduces)
    assert one.step_s(0, 0, 2000) / tp < cost.step_s(0, 0, 2000) < one.step_s(0, 0, 2000)


def test_allreduce_grows_with_tp_and_decode_memory_halves():
    m = model(cost="roofline", llm="llama3-70b")
    comms = [PoolCost(m, "h100", tp).parts(32, 64_000, 0)[2] for tp in (2, 4, 8)]
    assert comms == sorted(comms) and comms[0] > 0
    mems = [PoolCost(m, "h100", tp).parts(32, 64_000, 0)[0] for tp in (2, 4, 8)]
    assert mems[1] == mems[0] / 2 and mems[2] == mems[1] / 2


def test_linear_cost_divides_by_tp_times_tp_efficiency():
    m = model()
    for tp in (2, 4, 8):
        cost = PoolCost(m, "h100", tp)
        for args in STEPS:
            assert cost.step_s(*args) == pytest.approx(old_linear(m, *args) / (tp * 0.9), rel=TICK_REL)
            assert cost.parts(*args)[2] == 0.0
    slower = PoolCost(model(tp_efficiency=0.5), "h100", 2)
    assert slower.step_s(0, 0, 2000) == pytest.approx(old_linear(m, 0, 0, 2000), rel=TICK_REL)


def test_kv_capacity_per_instance_is_tp_times_usable_hbm_minus_weights():
    m = model(cost="roofline", llm="llama3-70b")
    kv_per_token = 2 * 80 * 8 * 128 * 2
    for gpu in ("h100", "a100", "h200"):
        for tp in (2, 4, 8):
            usable = tp * GPU_PRESETS[gpu]["memory_gb"] * 1e9 * 0.9 - 70.6e9 * 2
            assert PoolCost(m, gpu, tp).kv_tokens == int(usable // kv_per_token)
    # the weights are paid once per instance: tp 4 holds more than twice tp 2
    assert PoolCost(m, "h100", 4).kv_tokens > 2 * PoolCost(m, "h100", 2).kv_tokens
    assert PoolCost(model(kv_capacity_tokens=5000), "h100", 4).kv_tokens == 5000  # the override is per instance


def test_llama3_70b_on_one_h100_is_rejected_with_the_fix_named(capsys, tmp_path):
    path = tmp_path / "70b.json"
    path.write_text(json.dumps({"workload": {"rate": 1, "duration_s": 5, "prompt_tokens": 2000, "output_tokens": 10},
                                "fleet": {"layout": "colocated", "gpus": 8}, "model": {"cost": "roofline", "llm": "llama3-70b"}}))
    assert cli.main(["run", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: fleet.tp:") and "llama3-70b" in err and "raise tp" in err
    assert cli.main(["run", str(path), "--set", "fleet.tp=2", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["finished"] > 0


# ---------------------------------------------------------------- power caps


def test_clock_factor_is_the_cube_root_of_the_dynamic_share():
    h100 = GPU_PRESETS["h100"]
    assert clock_factor(h100, None) == 1.0 and clock_factor(h100, 700) == 1.0
    for cap in (101, 150, 350, 500, 699):
        assert clock_factor(h100, cap) == pytest.approx(((cap - 100) / 600) ** (1 / 3), rel=1e-15)


def test_capping_an_h100_at_350_w_slows_prefill_about_1_33x_and_leaves_decode_alone():
    m = model(cost="roofline")
    free, capped = PoolCost(m, "h100", 1), PoolCost(m, "h100", 1, 350)
    slowdown = capped.step_s(0, 0, 8000) / free.step_s(0, 0, 8000)
    assert slowdown == pytest.approx((600 / 250) ** (1 / 3), rel=TICK_REL)
    assert 1.33 < slowdown < 1.35
    assert capped.step_s(32, 64_000, 0) == free.step_s(32, 64_000, 0)  # memory-bound: same time
    assert free.power_w(0, 0, 8000) > 650 and capped.power_w(0, 0, 8000) == 350
    # a memory-bound decode step draws about 0.35 of the dynamic range: ~310 W alone, a bit
    # more at batch 32 (a larger compute share), which the cap trims without slowing it
    assert 310 <= free.power_w(1, 2000, 0) < 315
    assert capped.power_w(1, 2000, 0) == free.power_w(1, 2000, 0)  # under the cap: unchanged
    decode_w = free.power_w(32, 64_000, 0)
    assert 350 < decode_w < 400 and capped.power_w(32, 64_000, 0) == 350


def test_a_cap_never_raises_a_steps_power():
    """The clock a cap lowers must not read as a larger compute share (more watts)."""
    for cost_model in ("roofline", "linear"):
        m = model(cost=cost_model)
        free = PoolCost(m, "h100", 2)
        for cap in (150, 250, 350, 500, 700):
            capped = PoolCost(m, "h100", 2, cap)
            for args in STEPS:
                assert capped.power_w(*args) == min(free.power_w(*args), cap), (cost_model, cap, args)


def test_step_power_formula():
    h100 = GPU_PRESETS["h100"]
    assert step_power_w(h100, None, 0.0, 1.0) == 100 + 600 * 0.35
    assert step_power_w(h100, None, 1.0, 1.0) == 700
    assert step_power_w(h100, None, 0.5, 1.0) == pytest.approx(100 + 600 * (0.35 + 0.65 * 0.5))
    assert step_power_w(h100, 300, 0.5, 1.0) == 300


def test_linear_cap_slows_only_the_prompt_part():
    m = model()
    free, capped = PoolCost(m, "h100", 1), PoolCost(m, "h100", 1, 350)
    assert capped.step_s(8, 16_000, 0) == free.step_s(8, 16_000, 0)
    f = capped.clock
    assert capped.step_s(8, 16_000, 512) == pytest.approx(free.step_s(8, 16_000, 0) + free.step_s(0, 0, 512) / f, rel=TICK_REL)


# ---------------------------------------------------------------- GPU types, prices, overrides


def test_a100_pool_is_cheaper_per_hour_and_overrides_apply():
    m = model(cost="roofline")
    assert PoolCost(m, "a100", 4).usd_per_hour < PoolCost(m, "h100", 4).usd_per_hour
    assert PoolCost(m, "h100", 4).usd_per_hour == 4 * 2.50
    cheap = model(cost="roofline", gpu_overrides={"h100": {"usd_per_hour": 1.0, "hbm_tb_s": 6.7}})
    assert PoolCost(cheap, "h100", 2).usd_per_hour == 2.0
    assert PoolCost(cheap, "h100", 1).step_s(32, 64_000, 0) == pytest.approx(PoolCost(m, "h100", 1).step_s(32, 64_000, 0) / 2)


def test_pools_run_their_own_gpu_type_and_tp():
    sc = scenario({"layout": "disaggregated", "prefill_gpus": 2, "decode_gpus": 4, "prefill_tp": 2, "decode_tp": 1,
                   "prefill_gpu": "h100", "decode_gpu": "a100", "decode_power_cap_w": 300}, {"cost": "roofline"})
    res = simulate(sc)
    pre, dec = PoolCost(sc.model, "h100", 2), PoolCost(sc.model, "a100", 1, 300)
    assert [(g.role, g.tp, g.gpu_type) for g in res.gpus] == [("prefill", 2, "h100")] + [("decode", 1, "a100")] * 4
    for log in res.gpus:
        cost = pre if log.role == "prefill" else dec
        assert log
        for s, e, n, p, c in zip(log.start, log.end, log.decode_seqs, log.prefill_tokens, log.context_tokens):
            assert round(e * 1e12) == round(s * 1e12) + cost.step_ticks(n, c, p)  # in ticks: exact
    assert_matches(sc)


def test_instance_labels_and_gpu_ids_number_gpus_across_the_fleet():
    sc = scenario({"layout": "disaggregated", "prefill_gpus": 2, "decode_gpus": 5, "prefill_tp": 1, "decode_tp": 1})
    assert [g.label for g in simulate(sc).gpus] == [f"GPU {i}" for i in range(7)]
    sc = scenario({"layout": "disaggregated", "prefill_gpus": 3, "decode_gpus": 4, "decode_tp": 2})
    logs = simulate(sc).gpus
    assert [g.index for g in logs] == [0, 1, 2, 3, 4]
    assert [g.gpu_ids for g in logs] == [(0,), (1,), (2,), (3, 4), (5, 6)]
    assert [g.label for g in logs] == ["GPU 0", "GPU 1", "GPU 2", "GPUs 3\u20134", "GPUs 5\u20136"]
    ref = reference_simulate(sc)
    assert [g.gpu_ids for g in ref.gpus] == [g.gpu_ids for g in logs]
    logs = simulate(scenario({"layout": "colocated", "gpus": 8, "tp": 4})).gpus
    assert [g.label for g in logs] == ["GPUs 0\u20133", "GPUs 4\u20137"]


def test_requests_too_big_for_a_pools_instance_are_dropped_with_the_pool_named():
    fleet = {"layout": "disaggregated", "prefill_gpus": 2, "decode_gpus": 4, "prefill_tp": 2, "decode_tp": 4}
    sc = scenario(fleet, {"cost": "roofline", "llm": "llama3-70b"}, workload={"rate": 1, "duration_s": 3})
    prefill_kv = PoolCost(sc.model, "h100", 2).kv_tokens  # 8,544 tokens: 144 GB less 141 GB of weights
    decode_kv = PoolCost(sc.model, "h100", 4).kv_tokens
    reqs = [(0.0, prefill_kv + 1, 5), (0.1, 1000, 20), (0.2, 2000, decode_kv)]
    res = simulate(sc, reqs)
    assert "prefill instance (2 x h100)" in res.requests[0].dropped and f"{prefill_kv:,}" in res.requests[0].dropped
    assert not res.requests[1].dropped and res.requests[1].finished
    assert "decode instance (4 x h100)" in res.requests[2].dropped
    assert_matches(sc, reqs)


# ---------------------------------------------------------------- cost and energy metrics


def energy_by_hand(sc, log, span):
    """docs/model.md "Power": per step, idle + (TDP - idle) x (0.35 + 0.65 x compute / step) of the step at
    full clock, at most the cap, for the step's (capped) time; idle watts between steps;
    x the instance's GPUs."""
    pool = next(p for p in sc.pools() if p.role == log.role)
    full_clock = PoolCost(sc.model, pool.gpu, pool.tp)
    spec = dict(GPU_PRESETS[pool.gpu], **(sc.model.gpu_overrides or {}).get(pool.gpu, {}))
    joules, busy = 0.0, 0.0
    for s, e, n, p, c in zip(log.start, log.end, log.decode_seqs, log.prefill_tokens, log.context_tokens):
        _, compute_s, _ = full_clock.parts(n, c, p)
        share = compute_s / full_clock.step_s(n, c, p)
        watts = spec["idle_w"] + (spec["tdp_w"] - spec["idle_w"]) * (0.35 + 0.65 * share)
        if pool.power_cap_w is not None:
            watts = min(watts, pool.power_cap_w)
        joules += watts * (e - s)
        busy += e - s
    return pool.tp * (joules + spec["idle_w"] * (span - busy))


def test_cost_and_energy_of_a_hand_built_run():
    """One colocated instance of 2 H100s, two steps, 1 s run: the figures by hand."""
    sc = load_scenario({"workload": {"rate": 1, "duration_s": 1, "prompt_tokens": 10, "output_tokens": 2},
                        "fleet": {"layout": "colocated", "gpus": 2, "tp": 2},
                        "model": {"cost": "roofline"}, "slo": {"ttft_s": 5}})
    cost = PoolCost(sc.model, "h100", 2)
    d0, d1 = cost.step_s(0, 0, 4000), cost.step_s(1, 4001, 0)
    log = GpuLog(0, "colocated", start=[0.0, d0], end=[d0, d0 + d1], decode_seqs=[0, 1], prefill_tokens=[4000, 0],
                 context_tokens=[0, 4001], tp=2)
    req = RequestRecord(0, 0.0, 4000, 2, 0, 0, 0.0, d0, d0, d0 + d1, 1, 1)
    res = Result(sc, [req], [log], [], end_time=1.0, arrivals_end=1.0)
    m = summarize(res)
    # power by hand: the prefill step is compute-bound, the decode step memory-bound
    _, c0, _ = cost.parts(0, 0, 4000)
    _, c1, _ = cost.parts(1, 4001, 0)
    p0 = 100 + 600 * (0.35 + 0.65 * c0 / d0)
    p1 = 100 + 600 * (0.35 + 0.65 * c1 / d1)
    joules = 2 * (p0 * d0 + p1 * d1 + 100 * (1.0 - d0 - d1))
    assert m["power_w_mean"] == pytest.approx(joules / 1.0, rel=1e-12)
    assert m["energy_j_per_request"] == pytest.approx(joules, rel=1e-12)
    assert m["energy_j_per_token"] == pytest.approx(joules / 2, rel=1e-12)
    assert m["usd_per_hour"] == 5.0
    assert m["usd_per_good_request"] == pytest.approx(5.0 / 3600, rel=1e-12)
    assert m["usd_per_million_tokens"] == pytest.approx(5.0 / 3600 / 2 * 1e6, rel=1e-12)
    assert m["util_gpu"] == pytest.approx((d0 + d1) / 1.0, rel=1e-12)
    for key in ("prefill_usd_per_hour", "decode_usd_per_hour", "prefill_energy_j", "decode_energy_j",
                "prefill_power_w_mean", "decode_power_w_mean"):
        assert m[key] is None  # colocated: no pools


@pytest.mark.parametrize("caps", [(None, None), (450, 250)])
def test_pool_energy_and_prices_match_an_independent_computation(caps):
    sc = scenario({"layout": "disaggregated", "prefill_gpus": 2, "decode_gpus": 4, "prefill_tp": 2, "decode_tp": 2,
                   "decode_gpu": "a100", "prefill_power_cap_w": caps[0], "decode_power_cap_w": caps[1]},
                  {"cost": "roofline", "gpu_overrides": {"a100": {"usd_per_hour": 1.0}}}, workload={"rate": 6})
    res = simulate(sc)
    m = summarize(res)
    span = res.end_time
    energy = {role: sum(energy_by_hand(sc, g, span) for g in res.gpus if g.role == role) for role in ("prefill", "decode")}
    assert m["prefill_energy_j"] == pytest.approx(energy["prefill"], rel=1e-9)
    assert m["decode_energy_j"] == pytest.approx(energy["decode"], rel=1e-9)
    assert m["prefill_power_w_mean"] == pytest.approx(energy["prefill"] / span, rel=1e-9)
    assert m["decode_power_w_mean"] == pytest.approx(energy["decode"] / span, rel=1e-9)
    assert m["prefill_usd_per_hour"] == 2 * 2.50 and m["decode_usd_per_hour"] == 4 * 1.0
    assert m["usd_per_hour"] == 9.0
    total = energy["prefill"] + energy["decode"]
    met = sum(1 for r in res.requests if r.finished)  # (a loose SLO: all met)
    assert m["slo_attainment"] == 1.0
    assert m["energy_j_per_request"] == pytest.approx(total / met, rel=1e-9)
    assert m["usd_per_good_request"] == pytest.approx(9.0 * span / 3600 / met, rel=1e-12)
    # GPUs, not instances: 6 GPUs in 3 instances
    assert (m["gpus"], m["prefill_gpus"], m["decode_gpus"], len(res.gpus)) == (6, 2, 4, 3)


def test_util_gpu_weights_instances_by_their_gpus():
    sc = load_scenario({"workload": {"rate": 1, "duration_s": 1, "prompt_tokens": 10, "output_tokens": 2},
                        "fleet": {"layout": "disaggregated", "prefill_gpus": 1, "decode_gpus": 4, "decode_tp": 4}})
    logs = [GpuLog(0, "prefill", start=[0.0], end=[1.0], decode_seqs=[0], prefill_tokens=[10], context_tokens=[0]),
            GpuLog(1, "decode", tp=4, gpu_ids=(1, 2, 3, 4))]
    m = summarize(Result(sc, [], logs, [], end_time=1.0, arrivals_end=1.0))
    assert m["util_gpu"] == pytest.approx(1 / 5) and m["util_prefill"] == 1.0 and m["util_decode"] == 0.0


def test_a100_decode_pool_costs_less_per_hour_and_less_per_good_request_when_it_keeps_up():
    base = {"layout": "disaggregated", "prefill_gpus": 2, "decode_gpus": 2}
    slo = {"ttft_s": 3, "tpot_ms": 40}
    h100 = summarize(simulate(scenario(base, {"cost": "roofline"}, slo=slo)))
    a100 = summarize(simulate(scenario({**base, "decode_gpu": "a100"}, {"cost": "roofline"}, slo=slo)))
    assert a100["decode_usd_per_hour"] < h100["decode_usd_per_hour"]
    assert a100["slo_attainment"] == h100["slo_attainment"] == 1.0
    assert a100["usd_per_good_request"] < h100["usd_per_good_request"]
    assert a100["tpot_p50_ms"] > h100["tpot_p50_ms"]  # slower, but within the SLO


def test_capping_the_decode_pool_saves_watts_at_no_tpot_cost_and_capping_prefill_costs_ttft():
    base = {"layout": "disaggregated", "prefill_gpus": 2, "decode_gpus": 2}
    wl = {"rate": 3, "prompt_tokens": 4000}
    free = summarize(simulate(scenario(base, {"cost": "roofline"}, workload=wl)))
    dec = summarize(simulate(scenario({**base, "decode_power_cap_w": 300}, {"cost": "roofline"}, workload=wl)))
    pre = summarize(simulate(scenario({**base, "prefill_power_cap_w": 300}, {"cost": "roofline"}, workload=wl)))
    assert dec["decode_power_w_mean"] < free["decode_power_w_mean"]
    assert dec["tpot_p50_ms"] == free["tpot_p50_ms"]  # memory-bound decode steps keep their time
    mild = summarize(simulate(scenario({**base, "decode_power_cap_w": 600}, {"cost": "roofline"}, workload=wl)))
    assert mild["decode_power_w_mean"] == pytest.approx(free["decode_power_w_mean"], rel=1e-9)  # a cap above its draw: no change
    assert pre["ttft_p50_s"] > 1.3 * free["ttft_p50_s"]  # prefill runs at 0.69 of its clock
    assert pre["prefill_power_w_mean"] < free["prefill_power_w_mean"]


def test_energy_is_at_least_idle_power_and_at_most_tdp_over_the_run():
    for fleet, mdl in [({"layout": "colocated", "gpus": 4, "tp": 2, "power_cap_w": 400}, {"cost": "roofline"}),
                       ({"layout": "colocated", "gpus": 3, "chunk_tokens": 256}, {}),
                       ({"layout": "disaggregated", "prefill_gpus": 1, "decode_gpus": 2, "decode_gpu": "a100"}, {"cost": "roofline"})]:
        sc = scenario(fleet, mdl, workload={"rate": 8})
        res = simulate(sc)
        m = summarize(res)
        idle = sum(p.gpus * GPU_PRESETS[p.gpu]["idle_w"] for p in sc.pools())
        tdp = sum(p.gpus * (p.power_cap_w or GPU_PRESETS[p.gpu]["tdp_w"]) for p in sc.pools())
        assert idle < m["power_w_mean"] < tdp


def test_every_new_metric_is_a_metric_name():
    for name in ("usd_per_hour", "usd_per_million_tokens", "usd_per_good_request", "energy_j_per_token",
                 "energy_j_per_request", "power_w_mean", "prefill_usd_per_hour", "decode_usd_per_hour",
                 "prefill_energy_j", "decode_energy_j", "prefill_power_w_mean", "decode_power_w_mean"):
        assert name in METRIC_NAMES


def test_no_finished_request_gives_none_not_a_division_error():
    sc = load_scenario({"workload": {"rate": 1, "duration_s": 1, "prompt_tokens": 10, "output_tokens": 2},
                        "fleet": {"layout": "colocated", "gpus": 1}})
    m = summarize(Result(sc, [RequestRecord(0, 0.0, 10, 2)], [GpuLog(0, "colocated")], [], end_time=1.0, arrivals_end=1.0))
    assert m["usd_per_good_request"] is None and m["energy_j_per_request"] is None and m["energy_j_per_token"] is None
    assert m["power_w_mean"] == GPU_PRESETS["h100"]["idle_w"]  # one idle GPU
    assert math.isclose(m["usd_per_hour"], 2.5)
