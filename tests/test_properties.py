"""Property tests of the engine over random valid scenarios (hypothesis).

Invariants: every request accounted for; per-request times in order; no GPU in two
steps at once; no transfer before its prefill ends (layer-wise: no chunk before its layer
is ready); the fifo link never carries two transfers (or layer chunks) at once, and takes
layer chunks in order of ready time; a transfer lands when its last chunk does; KV memory
and batch slots never over capacity; same seed, same result; and the engine equals the
naive reference simulator.
"""

import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lab.core import generate_requests, load_scenario, request_gaps, request_metrics, simulate, summarize
from lab.core.spec import GPU_PRESETS

from reference_sim import reference_simulate
from test_reference import diff_engine_reference

PROPERTY_SETTINGS = settings(
    max_examples=50,
    deadline=None,
    database=None,  # no .hypothesis/ folder in the repo
    derandomize=True,  # the same examples on every run: CI failures reproduce
    suppress_health_check=[HealthCheck.too_slow],
)

# ---------------------------------------------------------------- strategies


def length_dist(max_tokens):
    fixed = st.integers(1, max_tokens)
    fixed_obj = st.builds(lambda v: {"dist": "fixed", "value": v}, st.integers(1, max_tokens))

    @st.composite
    def uniform(draw):
        low = draw(st.integers(1, max_tokens))
        high = draw(st.integers(low, max_tokens))
        return {"dist": "uniform", "low": low, "high": high}

    @st.composite
    def lognormal(draw):
        lo = draw(st.integers(1, max_tokens))
        hi = draw(st.integers(lo, max_tokens))
        return {"dist": "lognormal", "median": draw(st.floats(1, max_tokens)), "sigma": draw(st.floats(0, 1.5)),
                "min": lo, "max": hi}

    simple = st.one_of(fixed, fixed_obj, uniform(), lognormal())

    @st.composite
    def mix(draw):
        comps = draw(st.lists(st.tuples(st.floats(0.1, 10), simple), min_size=1, max_size=3))
        return {"dist": "mix", "components": [{"weight": w, "length": d} for w, d in comps]}

    return st.one_of(simple, mix())


@st.composite
def scenarios(draw, drain=st.sampled_from([30.0, 60.0]), max_duration=8.0):
    """A random valid scenario dict, small enough to simulate in milliseconds."""
    duration = draw(st.floats(0.5, max_duration))
    workload = {
        "rate": draw(st.floats(0.2, 6.0)),
        "duration_s": duration,
        "prompt_tokens": draw(length_dist(3000)),
        "output_tokens": draw(length_dist(150)),
    }
    if draw(st.booleans()):
        starts = sorted(set(draw(st.lists(st.floats(0.01, duration * 0.99), min_size=1, max_size=2))))
        phases = []
        for start in starts:
            phase = {"start_s": start, "rate": draw(st.floats(0.0, 10.0))}
            if draw(st.booleans()):
                phase["prompt_tokens"] = draw(length_dist(4000))
            phases.append(phase)
        workload["phases"] = phases
    layout = draw(st.sampled_from(["colocated", "disaggregated"]))
    fleet = {"layout": layout}
    if layout == "colocated":
        fleet["gpus"] = draw(st.integers(1, 3))
        fleet["chunk_tokens"] = draw(st.sampled_from([None, 16, 64, 256, 1000, 4096]))
    else:
        fleet["prefill_gpus"] = draw(st.integers(1, 3))
        fleet["decode_gpus"] = draw(st.integers(1, 3))
        fleet["link"] = {
            "gbytes_per_s": draw(st.sampled_from([0.3, 2.0, 50.0, 900.0])),
            "sharing": draw(st.sampled_from(["fifo", "independent"])),
            "layerwise": draw(st.booleans()),
        }
        fleet["first_token"] = draw(st.sampled_from(["decode", "prefill"]))
    pool = fleet["gpus"] if layout == "colocated" else fleet["prefill_gpus"]
    fleet["dispatch"] = draw(st.sampled_from(["queue", "round_robin", "least_loaded", "length_split"] if pool > 1 else
                                             ["queue", "round_robin", "least_loaded"]))
    if fleet["dispatch"] == "length_split":
        fleet["long_prompt_tokens"] = draw(st.integers(1, 4000))
        fleet["long_gpus"] = draw(st.integers(1, pool - 1))
    if layout == "disaggregated":
        fleet["decode_pick"] = draw(st.sampled_from(["most_free_kv", "fewest_seqs"]))
        fleet["prefill_chunk_tokens"] = draw(st.sampled_from([None, 16, 300, 2048]))
    fleet["prefill_batch_tokens"] = draw(st.sampled_from([1, 2000, 8192]))
    fleet["max_batch_seqs"] = draw(st.sampled_from([1, 3, 256]))
    fleet["long_prefill_tokens"] = draw(st.sampled_from([None, None, 16, 100, 700]))  # partial prefills
    model = {"cost": draw(st.sampled_from(["linear", "roofline"]))}
    model["gpu"] = draw(st.sampled_from(["h100", "a100", "h200"]))
    model["attention"] = draw(st.booleans())
    model["kv_capacity_tokens"] = draw(st.sampled_from([None, 800, 3000, 12000]))
    if model["kv_capacity_tokens"] is None:
        del model["kv_capacity_tokens"]
    return {"workload": workload, "fleet": fleet, "model": model,
            "seed": draw(st.integers(0, 10_000)), "drain_s": draw(drain)}


any_drain = st.sampled_from([0.0, 0.3, 2.0, 60.0])

# ---------------------------------------------------------------- helpers


def T(seconds):
    """A result's time back in integer ticks (docs/model.md "Time base"): exact for these runs,
    whose ticks stay under 2**52, so relations that hold in the engine's ticks hold here."""
    return round(seconds * 1e12)


def check_invariants(res):
    sc = res.scenario
    fleet = sc.fleet
    reqs = res.requests
    # KV capacity per instance, by instance index (pools differ in GPU type and tp)
    caps = [sc.model.kv_tokens_per_instance(p.gpu, p.tp) for p in sc.pools() for _ in range(p.instances)]
    holds_all = caps[-1]  # a colocated or decode instance holds prompt + output
    holds_prompt = caps[0]  # a prefill instance holds the prompt while it prefills
    metrics = summarize(res)
    expected = generate_requests(sc.workload, sc.seed)

    # every request accounted for
    assert [(r.arrival, r.prompt_tokens, r.output_tokens) for r in reqs] == expected
    assert [r.id for r in reqs] == list(range(len(reqs)))
    assert metrics["requests"] == len(reqs)
    assert metrics["finished"] + metrics["unfinished"] == len(reqs)
    assert metrics["finished"] == sum(1 for r in reqs if r.finished)
    for r in reqs:
        if r.prompt_tokens + r.output_tokens > holds_all or r.prompt_tokens > holds_prompt:
            assert r.dropped and not r.finished and r.prefill_start is None
            continue
        assert not r.dropped
        if not res.capped:
            assert r.finished, f"request {r.id} unfinished in a run that was not capped"
        if r.finished:
            assert r.arrival <= r.prefill_start <= r.prefill_end <= r.first_token <= r.finish
            assert r.finish <= res.end_time
            assert len(request_gaps(res, r)) == r.output_tokens - 1
            gaps = request_gaps(res, r)
            assert all(g > 0 for g in gaps)
            if r.output_tokens == 1:
                assert r.finish == r.first_token
        if r.prefill_start is not None:
            assert r.arrival <= r.prefill_start <= res.end_time
        if r.first_token is not None:
            assert r.first_token <= res.end_time

    # no GPU in two steps at once; steps have positive length; batch limits respected
    for log in res.gpus:
        n = len(log)
        assert len(log.end) == len(log.decode_seqs) == len(log.prefill_tokens) == len(log.context_tokens) == n
        for k in range(n):
            assert log.end[k] > log.start[k]
            if k:
                assert log.start[k] >= log.end[k - 1]
            assert log.start[k] <= res.end_time
            assert 0 <= log.decode_seqs[k] <= fleet.max_batch_seqs
            assert log.decode_seqs[k] + log.prefill_tokens[k] > 0
            assert log.context_tokens[k] <= caps[log.index]
            if log.role == "prefill":
                assert log.decode_seqs[k] == 0 and log.context_tokens[k] == 0
                if fleet.prefill_chunk_tokens is not None:
                    assert log.prefill_tokens[k] <= fleet.prefill_chunk_tokens
            elif log.role == "decode":
                assert log.prefill_tokens[k] == 0
            elif fleet.chunk_tokens is not None:
                assert log.prefill_tokens[k] <= fleet.chunk_tokens
    check_routing(res)
    roles = [g.role for g in res.gpus]
    if fleet.layout == "colocated":
        assert roles == ["colocated"] * (fleet.gpus // fleet.tp)
    else:
        assert roles == ["prefill"] * (fleet.prefill_gpus // fleet.prefill_tp) + ["decode"] * (fleet.decode_gpus // fleet.decode_tp)
    # instances span consecutive GPUs, numbered across the fleet
    assert [i for g in res.gpus for i in g.gpu_ids] == list(range(fleet.total_gpus))

    # transfers: never before the prefill ends; the fifo link carries one at a time
    link = fleet.link
    for i, tr in enumerate(res.transfers):
        rec = reqs[tr.request]
        assert rec.transfer == i
        assert tr.src_gpu == rec.prefill_gpu and tr.dst_gpu == rec.decode_gpu
        assert res.gpus[tr.src_gpu].role == "prefill" and res.gpus[tr.dst_gpu].role == "decode"
        assert tr.bytes == rec.prompt_tokens * sc.model.kv_bytes_per_token
        wire = tr.bytes / (link.gbytes_per_s * 1e9)
        assert tr.start >= tr.reserved
        # In ticks (docs/model.md "Time base"): a whole transfer takes its wire time rounded to a
        # tick; a layer-wise one at least its chunks' (each rounded to a tick) back to back.
        on_wire = T(wire) if tr.layer_starts is None else len(tr.layer_starts) * T(tr.layer_s)
        assert T(tr.end) - T(tr.start) >= on_wire
        assert rec.prefill_start <= tr.reserved
        if not link.layerwise:
            assert tr.reserved >= tr.ready == rec.prefill_end
        assert tr.end > tr.ready
        if rec.prefill_end is not None:
            assert tr.end >= rec.prefill_end
        if rec.first_token is not None and fleet.first_token == "decode":
            assert rec.first_token >= tr.end
        if rec.finished:
            assert rec.finish >= tr.end
    if fleet.layout == "disaggregated" and link.layerwise:
        check_layer_chunks(res)
    elif fleet.layout == "disaggregated" and link.sharing == "fifo":
        wire_order = sorted(res.transfers, key=lambda t: t.start)
        for a, b in zip(wire_order, wire_order[1:]):
            assert b.start >= a.end, f"transfers {a.request} and {b.request} share the fifo link"
    if fleet.layout == "disaggregated":
        for r in reqs:
            if r.finished and r.output_tokens > 1:
                assert r.transfer >= 0
            if r.output_tokens == 1:
                assert r.transfer == -1

    # KV memory and batch slots: rebuild every holding over time from the records
    holders = {}  # gpu -> [(time, order, +/-kv, +/-1)]
    for r in reqs:
        if r.dropped or r.prefill_start is None:
            continue
        need = r.prompt_tokens + r.output_tokens
        if fleet.layout == "colocated":
            gpu, since = r.prefill_gpu, r.prefill_start
        else:
            if r.transfer < 0:
                continue
            tr = res.transfers[r.transfer]
            gpu, since = tr.dst_gpu, tr.reserved
        holders.setdefault(gpu, []).append((since, 1, need, 1))
        if r.finished:
            holders[gpu].append((r.finish, 0, -need, -1))  # at equal times, frees first
    for gpu, events in holders.items():
        used = seqs = 0
        for _, _, kv, n in sorted(events):
            used += kv
            seqs += n
            assert used <= caps[gpu], f"instance {gpu} holds {used} KV tokens > {caps[gpu]}"
            assert seqs <= fleet.max_batch_seqs, f"GPU {gpu} holds {seqs} sequences"

    # tokens: every token a decode step emits belongs to a request's gap list
    emitted = sum(sum(log.decode_seqs) for log in res.gpus)
    assert emitted == sum(len(request_gaps(res, r)) for r in reqs)

    # metrics are finite and in range
    rows = request_metrics(res)
    assert len(rows) == len(reqs)
    for key in ("slo_attainment", "util_gpu", "util_prefill", "util_decode"):
        if metrics[key] is not None:
            assert 0.0 <= metrics[key] <= 1.0 + 1e-9, key
    for key, value in metrics.items():
        if isinstance(value, float):
            assert math.isfinite(value), key

    # energy: every GPU draws at least its idle watts and at most its TDP (or cap) all run long
    idle = sum(p.gpus * sc.model.gpu_spec(p.gpu)["idle_w"] for p in sc.pools())
    full = sum(p.gpus * (p.power_cap_w or sc.model.gpu_spec(p.gpu)["tdp_w"]) for p in sc.pools())
    if res.end_time > 0:
        assert idle * (1 - 1e-9) <= metrics["power_w_mean"] <= full * (1 + 1e-9)
    usd = sum(p.gpus * sc.model.gpu_spec(p.gpu)["usd_per_hour"] for p in sc.pools())
    assert metrics["usd_per_hour"] == pytest.approx(usd, rel=1e-12)


def check_routing(res):
    """docs/model.md "Routing", from the records: where each prompt could go, and FIFO per queue."""
    fleet = res.scenario.fleet
    takers = [g.index for g in res.gpus if g.role in ("colocated", "prefill")]
    served = [r for r in res.requests if r.prefill_gpu >= 0]
    if fleet.dispatch == "round_robin":
        arrived = [r for r in res.requests if not r.dropped]
        for n, r in enumerate(arrived):
            assert r.prefill_gpu in (-1, takers[n % len(takers)]), f"request {r.id}, arrival {n}, on {r.prefill_gpu}"
    if fleet.dispatch == "length_split":
        long_instances = fleet.long_gpus // res.scenario.pools()[0].tp
        long_gpus = set(takers[len(takers) - long_instances:])
        for r in served:
            assert (r.prefill_gpu in long_gpus) == (r.prompt_tokens >= fleet.long_prompt_tokens), r
    # every GPU takes the prompts of its queue in arrival order
    for g in takers:
        mine = [r for r in served if r.prefill_gpu == g]
        assert [r.prefill_start for r in mine] == sorted(r.prefill_start for r in mine)


def check_layer_chunks(res):
    """Layer-wise transfers against docs/model.md's rule ("Disaggregated"), from the records alone."""
    sc = res.scenario
    layers = sc.model.shape["layers"]
    bandwidth = sc.fleet.link.gbytes_per_s * 1e9
    chunks = []  # (start, end, ready, request, layer), in ticks (docs/model.md "Time base")
    for tr in res.transfers:
        rec = res.requests[tr.request]
        starts = [T(s) for s in tr.layer_starts]
        layer_s = T(tr.layer_s)
        assert len(starts) == layers
        assert layer_s == T(tr.bytes / bandwidth / layers)
        # a transfer starts with its first chunk and lands when its last chunk does
        assert T(tr.start) == starts[0] and T(tr.end) == starts[-1] + layer_s
        # layers become ready over the step that ends its prefill (its last chunk)
        src = res.gpus[tr.src_gpu]
        if tr.ready not in src.end:
            # the step ending its prefill was still running when the run was cut: it is not
            # in the log, so its layers' ready times cannot be rebuilt here
            assert res.capped and tr.ready > res.stopped_at, tr
            continue
        prefill_start, prefill_end = T(src.start[src.end.index(tr.ready)]), T(tr.ready)
        assert prefill_start >= T(rec.prefill_start)
        for i, start in enumerate(starts):
            layer = prefill_end if i == layers - 1 else prefill_start + (prefill_end - prefill_start) * (i + 1) // layers
            ready = max(layer, T(tr.reserved))
            # no chunk before its layer exists and room is reserved; a transfer's chunks in layer order
            assert start >= ready, f"request {tr.request} layer {i} on the wire at {start}, ready at {ready}"
            if i:
                assert start >= starts[i - 1] + layer_s
            chunks.append((start, start + layer_s, ready, tr.request, i))
    if sc.fleet.link.sharing != "fifo":
        return
    chunks.sort()
    for a, b in zip(chunks, chunks[1:]):
        assert b[0] >= a[1], f"chunks {a[3:]} and {b[3:]} share the fifo link"
    # the wire's order is by ready time, then request id, then layer ...
    order = [c[2:] for c in chunks]
    assert order == sorted(order)
    # ... and it is never idle while a chunk is ready
    free = 0
    for start, end, ready, *_ in chunks:
        assert start == max(ready, free)
        free = end


# ---------------------------------------------------------------- properties


@PROPERTY_SETTINGS
@given(scenarios(drain=any_drain))
def test_invariants_hold(raw):
    check_invariants(simulate(load_scenario(raw)))


@PROPERTY_SETTINGS
@given(scenarios(drain=any_drain, max_duration=4.0))
def test_same_seed_same_result(raw):
    a = simulate(load_scenario(raw))
    b = simulate(load_scenario(raw))
    assert a == b
    assert summarize(a) == summarize(b)


@PROPERTY_SETTINGS
@given(scenarios(max_duration=5.0))
def test_engine_equals_reference(raw):
    problems = diff_engine_reference(load_scenario(raw))
    assert not problems, "\n".join(problems)


@PROPERTY_SETTINGS
@given(scenarios(drain=st.sampled_from([0.0, 0.2, 1.0]), max_duration=4.0))
def test_engine_equals_reference_when_the_drain_cap_cuts_the_run(raw):
    problems = diff_engine_reference(load_scenario(raw))
    assert not problems, "\n".join(problems)


@PROPERTY_SETTINGS
@given(scenarios(drain=st.sampled_from([0.0, 0.2, 1.0]), max_duration=4.0))
def test_no_token_is_counted_after_the_run_stops(raw):
    res = simulate(load_scenario(raw))
    for r in res.requests:
        gaps = request_gaps(res, r)
        if gaps:
            last = r.first_token + sum(gaps)
            assert last <= res.end_time + 1e-9, (
                f"request {r.id}: a token at {last} counted after the run stopped at {res.end_time}")
    for log in res.gpus:
        for start in log.start:
            assert start <= res.end_time


@PROPERTY_SETTINGS
@given(scenarios(max_duration=4.0))
def test_reference_invariants(raw):
    """The reference, checked on its own terms, so that agreement means something."""
    sc = load_scenario(raw)
    ref = reference_simulate(sc)
    for s in ref.requests:
        if s.dropped:
            assert not s.tokens
            continue
        assert len(s.tokens) <= s.O
        assert s.tokens == sorted(s.tokens)
        if s.finished:
            assert len(s.tokens) == s.O and s.tokens[-1] == s.finish and s.tokens[0] == s.first_token
    for g in ref.gpus:
        for a, b in zip(g.steps, g.steps[1:]):
            assert b[0] >= a[1]


@st.composite
def tie_heavy(draw):
    """Arrivals on a 5 ms grid, prompts in multiples of 100 tokens (5 ms of prefill),
    decode steps of exactly 5 ms and, disaggregated, 100 tokens of KV crossing the
    link in 5 ms: arrivals, landings and step boundaries keep landing on one instant."""
    n = draw(st.integers(1, 25))
    requests = sorted(
        (draw(st.integers(0, 200)) * 0.005, 100 * draw(st.integers(1, 6)), draw(st.integers(1, 12)))
        for _ in range(n))
    layout = draw(st.sampled_from(["colocated", "disaggregated"]))
    if layout == "colocated":
        fleet = {"layout": layout, "gpus": draw(st.integers(1, 3)),
                 "chunk_tokens": draw(st.sampled_from([None, 100, 200, 300]))}
    else:
        fleet = {"layout": layout, "prefill_gpus": draw(st.integers(1, 2)), "decode_gpus": draw(st.integers(1, 3)),
                 "link": {"gbytes_per_s": 100 * 131072 / 0.005 / 1e9 * draw(st.sampled_from([1, 2, 0.5])),
                          "sharing": draw(st.sampled_from(["fifo", "independent"])),
                          "layerwise": draw(st.booleans())},
                 "first_token": draw(st.sampled_from(["decode", "prefill"]))}
    fleet["prefill_batch_tokens"] = draw(st.sampled_from([100, 300, 8192]))
    fleet["max_batch_seqs"] = draw(st.sampled_from([1, 2, 256]))
    if layout == "disaggregated":
        fleet["prefill_chunk_tokens"] = draw(st.sampled_from([None, 200, 300]))
    fleet["long_prefill_tokens"] = draw(st.sampled_from([None, 100, 200]))
    raw = {"workload": {"rate": 1, "duration_s": 1.0, "prompt_tokens": 1, "output_tokens": 1},
           "fleet": fleet,
           "model": {"decode_step_ms": 5, "decode_ms_per_seq": 0, "decode_ms_per_context_token": 0,
                     "kv_capacity_tokens": draw(st.sampled_from([700, 1500, 100_000]))},
           "drain_s": draw(st.sampled_from([0.1, 5.0]))}
    return raw, requests


@PROPERTY_SETTINGS
@given(tie_heavy())
def test_engine_equals_reference_with_exact_ties(case):
    raw, requests = case
    problems = diff_engine_reference(load_scenario(raw), requests)
    assert not problems, "\n".join(problems)


# ---------------------------------------------------------------- fleets as they are built


@st.composite
def built_fleets(draw, **kwargs):
    """`scenarios()` with tensor parallelism, a GPU type and a power cap per pool: each
    pool's GPU count is its instance count x its tp; caps lie between idle and TDP."""
    raw = draw(scenarios(**kwargs))
    fleet, model = raw["fleet"], raw["model"]
    if draw(st.booleans()):
        model["llm"] = "llama3-70b"  # needs tp >= 2 on every preset GPU
        model.pop("kv_capacity_tokens", None)
    low = 2 if model.get("llm") == "llama3-70b" else 1
    tps = st.sampled_from([t for t in (1, 2, 4) if t >= low])

    def cap(gpu):
        spec = GPU_PRESETS[gpu]
        share = draw(st.sampled_from([None, 0.1, 0.5, 1.0]))
        return None if share is None else spec["idle_w"] + share * (spec["tdp_w"] - spec["idle_w"])

    if fleet["layout"] == "colocated":
        fleet["tp"] = draw(tps)
        fleet["gpus"] *= fleet["tp"]
        fleet["power_cap_w"] = cap(model["gpu"])
    else:
        for role in ("prefill", "decode"):
            tp = draw(tps)
            gpu = draw(st.sampled_from(sorted(GPU_PRESETS)))
            fleet[f"{role}_tp"] = tp
            fleet[f"{role}_gpus"] *= tp
            fleet[f"{role}_gpu"] = gpu
            fleet[f"{role}_power_cap_w"] = cap(gpu)
    if "long_gpus" in fleet:  # routing's long group is whole instances of the prompt-taking pool
        fleet["long_gpus"] *= fleet["tp"] if fleet["layout"] == "colocated" else fleet["prefill_tp"]
    if draw(st.booleans()):
        model["gpu_overrides"] = {"a100": {"usd_per_hour": 0.9, "hbm_tb_s": 1.6}}
    return raw


@PROPERTY_SETTINGS
@given(built_fleets(drain=any_drain, max_duration=4.0))
def test_invariants_hold_on_built_fleets(raw):
    check_invariants(simulate(load_scenario(raw)))


@PROPERTY_SETTINGS
@given(built_fleets(max_duration=4.0))
def test_engine_equals_reference_on_built_fleets(raw):
    problems = diff_engine_reference(load_scenario(raw))
    assert not problems, "\n".join(problems)
