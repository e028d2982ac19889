"""Cost models: the linear constants, KV bytes per token, and the roofline."""

import random

import pytest

from lab.core import load_scenario, step_ticks_fn, step_time_fn
from lab.core.cost import PoolCost
from lab.core.spec import GPU_PRESETS, LLM_PRESETS, Model


def model(**fields):
    return Model.from_dict(fields)


def approx(x):
    return pytest.approx(x, rel=1e-12, abs=0)


def tick_approx(x):
    """The roofline's per-token costs are whole picosecond ticks (docs/model.md "Time base"),
    rounded once: a step is within half a tick per token of the analytic figure, under
    2e-5 of it for these presets (the KV read, ~39,000 ticks a token, is the finest)."""
    return pytest.approx(x, rel=2e-5, abs=0)


# ---------------------------------------------------------------- linear


def test_linear_decode_step_constants():
    step = step_time_fn(model())
    # 8 ms + 0.25 ms per sequence + 0.00004 ms per context token
    assert step(1, 0, 0) == approx((8 + 0.25) / 1000)
    assert step(32, 64_000, 0) == approx((8 + 0.25 * 32 + 0.00004 * 64_000) / 1000)
    assert step(200, 1_000_000, 0) == approx((8 + 50 + 40) / 1000)


def test_linear_prefill_is_0_05_ms_per_token():
    step = step_time_fn(model())
    assert step(0, 0, 1) == approx(0.05 / 1000)
    assert step(0, 0, 2000) == approx(0.1)
    # no fixed decode cost for a prefill-only step
    assert step(0, 0, 4000) == approx(2 * step(0, 0, 2000))


def test_linear_mixed_step_adds_prefill_to_decode():
    step = step_time_fn(model())
    assert step(10, 20_000, 512) == approx(step(10, 20_000, 0) + step(0, 0, 512))
    assert step(10, 20_000, 512) == approx((8 + 2.5 + 0.8 + 25.6) / 1000)


def test_linear_empty_step_is_free_and_time_grows_with_work():
    step = step_time_fn(model())
    assert step(0, 0, 0) == 0
    assert step(2, 100, 0) > step(1, 100, 0)
    assert step(2, 200, 0) > step(2, 100, 0)
    assert step(2, 200, 10) > step(2, 200, 0)


def test_linear_constants_are_configurable():
    step = step_time_fn(model(decode_step_ms=4, decode_ms_per_seq=1, decode_ms_per_context_token=0.001,
                              prefill_ms_per_token=0.1))
    assert step(3, 1000, 100) == approx((4 + 3 + 1 + 10) / 1000)


def test_linear_defaults_are_the_documented_constants():
    m = model()
    assert (m.cost, m.decode_step_ms, m.decode_ms_per_seq, m.decode_ms_per_context_token, m.prefill_ms_per_token) == (
        "linear", 8.0, 0.25, 0.00004, 0.05)


# ---------------------------------------------------------------- KV bytes


def test_kv_bytes_per_token_llama3_8b():
    m = model(llm="llama3-8b")
    assert m.kv_bytes_per_token == 131072 == 2 * 32 * 8 * 128 * 2 == 128 * 1024


def test_kv_bytes_per_token_llama3_70b():
    assert model(llm="llama3-70b", kv_capacity_tokens=1000).kv_bytes_per_token == 2 * 80 * 8 * 128 * 2


def test_kv_capacity_derived_from_memory():
    m = model(gpu="h100", memory_utilization=0.9)
    usable = 80e9 * 0.9 - 8.03e9 * 2
    assert m.kv_tokens_per_gpu == int(usable // 131072)
    assert 400_000 < m.kv_tokens_per_gpu < 450_000
    assert model(gpu="h200").kv_tokens_per_gpu > m.kv_tokens_per_gpu
    assert model(memory_utilization=0.5).kv_tokens_per_gpu < m.kv_tokens_per_gpu
    assert model(kv_capacity_tokens=1234).kv_tokens_per_gpu == 1234


# ---------------------------------------------------------------- roofline


def roofline_parts(m, decode_seqs, context, prefill):
    shape, hw = LLM_PRESETS[m.llm], GPU_PRESETS[m.gpu]
    weights = shape["params"] * shape["bytes_per_value"]
    kv = 2 * shape["layers"] * shape["kv_heads"] * shape["head_dim"] * shape["bytes_per_value"]
    memory_s = (weights + kv * (context + prefill)) / (hw["hbm_tb_s"] * 1e12)
    compute_s = 2 * shape["params"] * (decode_seqs + prefill) / (hw["peak_tflops"] * 1e12 * m.efficiency)
    return memory_s, compute_s


def test_roofline_h100_presets():
    assert GPU_PRESETS["h100"]["hbm_tb_s"] == 3.35
    assert GPU_PRESETS["h100"]["peak_tflops"] == 989.0
    assert model(cost="roofline").efficiency == 0.5


def test_roofline_decode_step_is_memory_bound_on_h100():
    m = model(cost="roofline", gpu="h100")
    step = step_time_fn(m)
    memory_s, compute_s = roofline_parts(m, 32, 64_000, 0)
    assert memory_s > compute_s
    assert step(32, 64_000, 0) == tick_approx(memory_s)
    # reads 16 GB of weights + 8.4 GB of KV at 3.35 TB/s: about 7.3 ms
    assert 0.007 < step(32, 64_000, 0) < 0.0075


def test_roofline_2000_token_prefill_is_compute_bound_on_h100():
    m = model(cost="roofline", gpu="h100")
    step = step_time_fn(m)
    memory_s, compute_s = roofline_parts(m, 0, 0, 2000)
    assert compute_s > memory_s
    assert step(0, 0, 2000) == tick_approx(compute_s)
    # 2 x 8.03e9 x 2000 FLOPs at 494.5 TFLOP/s: about 65 ms
    assert step(0, 0, 2000) == tick_approx(2 * 8.03e9 * 2000 / (989e12 * 0.5))


def test_roofline_is_the_max_of_memory_and_compute():
    for gpu in ("h100", "a100", "h200"):
        m = model(cost="roofline", gpu=gpu, efficiency=0.7)
        step = step_time_fn(m)
        for args in [(1, 100, 0), (256, 500_000, 0), (0, 0, 1), (0, 0, 50_000), (64, 100_000, 512)]:
            memory_s, compute_s = roofline_parts(m, *args)
            assert step(*args) == tick_approx(max(memory_s, compute_s)), (gpu, args)


def test_roofline_crossover_in_prefill_tokens():
    m = model(cost="roofline", gpu="h100")
    step = step_time_fn(m)
    # a tiny prefill is memory-bound (the weights must be read once), a big one compute-bound
    small_mem, small_cmp = roofline_parts(m, 0, 0, 10)
    assert small_mem > small_cmp and step(0, 0, 10) == tick_approx(small_mem)
    # the weight read alone: 16.06 GB / 3.35 TB/s
    assert step(1, 0, 0) == tick_approx((8.03e9 * 2 + 0) / 3.35e12)


def test_roofline_a100_is_slower_than_h100():
    h100 = step_time_fn(model(cost="roofline", gpu="h100"))
    a100 = step_time_fn(model(cost="roofline", gpu="a100"))
    assert a100(32, 64_000, 0) > h100(32, 64_000, 0)
    assert a100(0, 0, 2000) > h100(0, 0, 2000)


def test_scenario_model_is_what_the_engine_uses():
    sc = load_scenario({"workload": {"rate": 1, "prompt_tokens": 10, "output_tokens": 2},
                        "fleet": {"layout": "colocated", "gpus": 1}, "model": {"cost": "roofline", "gpu": "a100"}})
    assert step_time_fn(sc.model)(0, 0, 2000) == tick_approx(roofline_parts(sc.model, 0, 0, 2000)[1])


# ---------------------------------------------------------------- attention (model.attention)


def _attention_per_unit(m):
    shape = LLM_PRESETS[m.llm]
    return 4 * shape["layers"] * shape["heads"] * shape["head_dim"]


@pytest.mark.parametrize("tokens,low,high", [(8_500, 0.13, 0.15), (16_000, 0.25, 0.27)])
def test_attention_lengthens_a_long_prefill_as_the_issue_says(tokens, low, high):
    """8,500 tokens: ~14% longer, 16,000: ~26% (Llama-3-8B on H100, compute-bound)."""
    m = model(cost="roofline", attention=True)
    off = step_time_fn(model(cost="roofline"))(0, 0, tokens)
    on = step_time_fn(m)(0, 0, tokens, tokens * (0 + tokens / 2), 0)
    flops = 2 * LLM_PRESETS[m.llm]["params"] * tokens
    assert on / off == tick_approx(1 + _attention_per_unit(m) * tokens * tokens / 2 / flops)
    assert low < on / off - 1 < high


def test_attention_off_ignores_the_attention_terms():
    for m in (model(cost="roofline"), model()):
        step = step_time_fn(m)
        assert step(3, 9000, 4000, 4000 * 2000.0, 0) == step(3, 9000, 4000)
        assert step(0, 0, 512, 512 * (5000 + 256), 5000) == step(0, 0, 512)


def test_attention_has_no_effect_on_linear_costs():
    step = step_time_fn(model(attention=True))
    assert step(2, 5000, 700, 700 * 350.0, 300) == step(2, 5000, 700)


def test_a_chunk_rereads_its_earlier_kv():
    """16 new tokens after 100,000 earlier ones: memory-bound, and the earlier KV is read."""
    m = model(cost="roofline", attention=True)
    hw = GPU_PRESETS[m.gpu]
    kv = m.kv_bytes_per_token
    expected = (m.weight_bytes + kv * (16 + 100_000)) / (hw["hbm_tb_s"] * 1e12)
    assert step_time_fn(m)(0, 0, 16, 16 * (100_000 + 8), 100_000) == tick_approx(expected)


def test_a_chunk_attends_to_its_earlier_tokens():
    """Compute-bound (a GPU with near-infinite bandwidth): a chunk's attention FLOPs are
    4 L H d x c x (p + c/2), a decode token's 4 L H d x its context."""
    m = model(cost="roofline", attention=True, gpu_overrides={"h100": {"hbm_tb_s": 1e6}})
    per_s = GPU_PRESETS["h100"]["peak_tflops"] * 1e12 * m.efficiency
    linear_flops = 2 * LLM_PRESETS[m.llm]["params"]
    unit = _attention_per_unit(m)
    step = step_time_fn(m)
    c, p = 2048, 6000
    assert step(0, 0, c, c * (p + c / 2), p) == tick_approx((linear_flops * c + unit * c * (p + c / 2)) / per_s)
    assert step(40, 200_000, 0) == tick_approx((linear_flops * 40 + unit * 200_000) / per_s)


def test_decode_attention_does_not_slow_memory_bound_decode():
    """A decode token's KV read is already in the roofline; its attention FLOPs are far
    below the memory time on every preset GPU."""
    for gpu in GPU_PRESETS:
        on = step_time_fn(model(cost="roofline", gpu=gpu, attention=True))
        off = step_time_fn(model(cost="roofline", gpu=gpu))
        assert on(32, 32 * 3000, 0) == off(32, 32 * 3000, 0)


# ---------------------------------------------------------------- ticks (docs/model.md "Time base")


def test_step_ticks_are_integers_and_step_s_is_them_in_seconds():
    for m in (model(), model(cost="roofline"), model(cost="roofline", attention=True), model(tp_efficiency=0.7),
              model(cost="calibrated"), model(cost="calibrated", dtype="fp8", stack="vllm-2023")):
        ticks, seconds = step_ticks_fn(m), step_time_fn(m)
        for args in [(1, 0, 0), (32, 64_000, 0), (0, 0, 2000), (10, 20_000, 512)]:
            assert type(ticks(*args)) is int
            assert seconds(*args) == ticks(*args) / 10**12


def test_a_decode_step_is_affine_in_the_context_with_whole_tick_coefficients():
    """What lets a decode-only stretch be summed in closed form: for a fixed batch each
    more context token adds the same whole number of ticks."""
    linear = PoolCost(model(), "h100", 2)  # tp 2: per-token costs no longer whole ms
    fixed, per_seq, per_ctx = linear.decode_affine
    for n, ctx in [(1, 100), (32, 64_000), (7, 12_345)]:
        assert linear.step_ticks(n, ctx, 0) == fixed + per_seq * n + per_ctx * ctx
    roof = PoolCost(model(cost="roofline"), "h100", 4)
    weights, kv, flops, comm_fixed, comm = roof.decode_affine
    assert comm_fixed > 0 and comm > 0  # tp 4: all-reduces
    for n, ctx in [(1, 100), (32, 64_000), (256, 10)]:
        memory, compute = weights + kv * ctx, flops * n
        assert roof.step_ticks(n, ctx, 0) == max(memory, compute) + comm_fixed + comm * n
    assert PoolCost(model(cost="roofline", attention=True)).decode_affine is None  # rounded per step


def test_a_batchs_decode_line_gives_every_decode_step_time_exactly():
    """The engine's decode run-ahead reads a step's time off `decode_line` (the larger of two
    lines in the context), worked out once per batch: it must equal `step_ticks` for every
    context, on both sides of the compute/memory crossover, as ints and floats."""
    rng = random.Random(7)
    costs = [PoolCost(model(), "h100", 1), PoolCost(model(), "a100", 2),
             PoolCost(model(cost="roofline"), "h100", 1), PoolCost(model(cost="roofline"), "h200", 8),
             PoolCost(model(cost="calibrated"), "h100", 1), PoolCost(model(cost="calibrated", dtype="fp8"), "h200", 4),
             PoolCost(model(cost="calibrated", stack="vllm-2023", llm="llama2-70b"), "a100", 8)]
    for cost in costs:
        sides = set()
        for _ in range(400):
            n = rng.choice([1, 2, 7, 64, 256, 600, 1024, 4096])
            ctx = rng.choice([0, n, rng.randint(0, 2_000), rng.randint(0, 500_000)])
            a, b, floor, slope = cost.decode_line(n)
            line, bound = a + b * ctx, floor + slope * ctx
            assert (line if line > bound else bound) == cost.step_ticks(n, ctx, 0)
            fa, fb, ffloor, fslope = cost.decode_line_float(n)
            fline, fbound = fa + fb * ctx, ffloor + fslope * ctx
            assert (fline if fline > fbound else fbound) == cost.step_ticks_float(n, ctx, 0)
            sides.add(line > bound)
        if cost.model.cost != "linear":
            assert sides == {True, False}, cost.model  # both the memory-bound and the compute-bound side
        assert (slope > 0) == (cost.model.cost == "calibrated")  # decode attention FLOPs: the calibrated model's
    assert PoolCost(model(cost="roofline", attention=True)).decode_line is None
