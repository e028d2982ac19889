"""The engine on small, hand-worked cases: every expected time is built from the cost
model's step function in the order the model adds it up (step k+1 starts at step k's end).

Expected times are integer ticks (docs/model.md "Time base": what the engine adds up); a
result's seconds are read back as ticks with `T` (exact for these short runs: a whole
number of ticks under 2**52 round-trips)."""

import pytest

from lab.core import generate_requests, load_scenario, request_gaps, simulate, step_ticks_fn, step_time_fn, summarize

KV_BYTES = 131072  # llama3-8b: 2 x 32 layers x 8 KV heads x 128 x 2 bytes


def colocated(**fleet):
    return {"layout": "colocated", "gpus": 1, **fleet}


def disaggregated(**fleet):
    return {"layout": "disaggregated", "prefill_gpus": 1, "decode_gpus": 1, **fleet}


def run(fleet, requests, duration=10.0, drain=100.0, **extra):
    raw = {"workload": {"rate": 1, "duration_s": duration, "prompt_tokens": 1, "output_tokens": 1},
           "fleet": fleet, "drain_s": drain, **extra}
    sc = load_scenario(raw)
    return simulate(sc, requests=requests)


STEP = step_ticks_fn(load_scenario({"workload": {"rate": 1, "prompt_tokens": 1, "output_tokens": 1},
                                   "fleet": colocated()}).model)


def prefill(p):
    return STEP(0, 0, p)


def decode(n, ctx):
    return STEP(n, ctx, 0)


def T(seconds):
    """A result's time in seconds back in ticks (the engine's rule, ticks.py)."""
    return round(seconds * 1e12)


def steps(log):
    """Every step, its start and end in ticks."""
    return [(T(a), T(b), n, p, c) for a, b, n, p, c in
            zip(log.start, log.end, log.decode_seqs, log.prefill_tokens, log.context_tokens)]


def gaps(res, rec):
    return [T(g) for g in request_gaps(res, rec)]


def tokens(res, rec):
    """Every token time of a request in ticks: first token, then the gaps added up."""
    out = [T(rec.first_token)]
    for g in gaps(res, rec):
        out.append(out[-1] + g)
    return out


# ---------------------------------------------------------------- colocated


def test_single_request_colocated_timeline():
    res = run(colocated(), [(0.5, 100, 4)])
    rec = res.requests[0]
    t0 = T(0.5)  # the arrival wakes the idle GPU at once
    t1 = t0 + prefill(100)
    t2 = t1 + decode(1, 101)
    t3 = t2 + decode(1, 102)
    t4 = t3 + decode(1, 103)
    assert steps(res.gpus[0]) == [(t0, t1, 0, 100, 0), (t1, t2, 1, 0, 101), (t2, t3, 1, 0, 102), (t3, t4, 1, 0, 103)]
    assert (rec.prefill_gpu, rec.decode_gpu) == (0, 0)
    assert tuple(map(T, (rec.prefill_start, rec.prefill_end, rec.first_token, rec.finish))) == (t0, t1, t1, t4)
    assert gaps(res, rec) == [t2 - t1, t3 - t2, t4 - t3]
    assert not res.capped


def test_one_token_request_finishes_at_its_prefill():
    res = run(colocated(), [(0.0, 300, 1)])
    rec = res.requests[0]
    assert rec.first_token == rec.finish == rec.prefill_end and T(rec.finish) == prefill(300)
    assert steps(res.gpus[0]) == [(0, prefill(300), 0, 300, 0)]
    assert request_gaps(res, rec) == []


def test_arrival_joins_the_running_batch():
    # r1 arrives while r0 decodes: the next step decodes r0 and prefills r1 together
    res = run(colocated(), [(0.0, 100, 5), (0.006, 200, 2)])
    r0, r1 = res.requests
    t1 = prefill(100)
    t2 = t1 + decode(1, 101)  # r1 arrived during this step
    t3 = t2 + STEP(1, 102, 200)
    assert steps(res.gpus[0])[:3] == [(0.0, t1, 0, 100, 0), (t1, t2, 1, 0, 101), (t2, t3, 1, 200, 102)]
    assert T(r1.prefill_start) == t2 and T(r1.first_token) == t3
    assert tokens(res, r1) == [t3, t3 + decode(2, 103 + 201)]


def test_whole_prefill_takes_queued_prompts_up_to_the_batch_budget():
    reqs = [(0.0, 1000, 2)] * 3
    # budget 8192: GPU 0 takes all three at once, GPU 1 finds the queue empty
    res = run(colocated(gpus=2), reqs)
    assert [r.prefill_gpu for r in res.requests] == [0, 0, 0]
    assert steps(res.gpus[0])[0] == (0.0, prefill(3000), 0, 3000, 0)
    assert len(res.gpus[1]) == 0
    # budget 1000: one prompt per step; GPU 0 then GPU 1 (by index), the third waits
    res = run(colocated(gpus=2, prefill_batch_tokens=1000), reqs)
    assert [r.prefill_gpu for r in res.requests] == [0, 1, 0]
    assert T(res.requests[2].prefill_start) == prefill(1000)
    # a prompt larger than the budget is still taken, alone
    res = run(colocated(prefill_batch_tokens=500), [(0.0, 1000, 2), (0.0, 10, 2)])
    assert steps(res.gpus[0])[0] == (0.0, prefill(1000), 0, 1000, 0)


def test_chunked_prefill_splits_and_packs_prompts():
    res = run(colocated(chunk_tokens=256), [(0.0, 300, 3), (0.0, 300, 2)])
    r0, r1 = res.requests
    t1 = prefill(256)  # 256 of r0
    t2 = t1 + prefill(256)  # last 44 of r0 + first 212 of r1
    t3 = t2 + STEP(1, 301, 88)  # r0 decodes, last 88 of r1
    t4 = t3 + decode(2, 302 + 301)
    assert steps(res.gpus[0])[:4] == [(0.0, t1, 0, 256, 0), (t1, t2, 0, 256, 0), (t2, t3, 1, 88, 301),
                                      (t3, t4, 2, 0, 603)]
    assert (T(r0.prefill_start), T(r0.first_token)) == (0, t2)
    assert (T(r1.prefill_start), T(r1.first_token)) == (t1, t3)
    assert T(r0.finish) == t4 and T(r1.finish) == t4


def test_chunked_prefill_of_a_long_prompt():
    res = run(colocated(chunk_tokens=64), [(0.0, 1000, 2)])
    log = res.gpus[0]
    assert list(log.prefill_tokens) == [64] * 15 + [40, 0]
    assert res.requests[0].first_token == log.end[15]


def test_kv_memory_blocks_admission_in_fifo_order():
    # capacity 3000: r0 holds 2000; r1 (2000) must wait for r0 to finish, and r2 (110),
    # which would fit, waits behind it: no skipping the queue's head
    res = run(colocated(), [(0.0, 1500, 500), (0.01, 1500, 500), (0.02, 100, 10)],
              model={"kv_capacity_tokens": 3000})
    r0, r1, r2 = res.requests
    assert r1.prefill_start == r0.finish
    assert r2.prefill_start == r0.finish
    assert max(res.gpus[0].context_tokens) <= 3000


def test_batch_slots_limit_admission():
    res = run(colocated(max_batch_seqs=1), [(0.0, 100, 3), (0.0, 100, 3)])
    r0, r1 = res.requests
    assert r1.prefill_start == r0.finish
    assert max(res.gpus[0].decode_seqs) == 1


def test_too_large_requests_are_dropped():
    res = run(colocated(), [(0.0, 600, 400), (0.1, 600, 401), (0.2, 10, 2)], model={"kv_capacity_tokens": 1000})
    ok, big, small = res.requests
    assert ok.finished and not ok.dropped
    assert big.dropped and "1,001" in big.dropped and "1,000" in big.dropped
    assert big.prefill_start is None and big.first_token is None and not big.finished
    assert small.finished
    m = summarize(res)
    assert (m["requests"], m["finished"], m["unfinished"]) == (3, 2, 1)


def test_gpus_run_on_their_own_clocks():
    res = run(colocated(gpus=2, prefill_batch_tokens=100), [(0.0, 100, 3), (0.001, 50, 3)])
    a, b = res.gpus
    assert a.start[0] == 0.0 and b.start[0] == 0.001
    assert T(b.end[0]) == T(0.001) + prefill(50)


# ---------------------------------------------------------------- disaggregated


def wire(p, gbytes_per_s):
    """Ticks on the wire: seconds = bytes / bandwidth, rounded once (docs/model.md "Time base")."""
    return T(p * KV_BYTES / (gbytes_per_s * 1e9))


def test_single_request_disaggregated_timeline():
    res = run(disaggregated(link={"gbytes_per_s": 2}), [(0.25, 1000, 3)])
    rec = res.requests[0]
    ready = T(0.25) + prefill(1000)
    land = ready + wire(1000, 2)
    t2 = land + decode(1, 1001)
    t3 = t2 + decode(1, 1002)
    assert steps(res.gpus[0]) == [(T(0.25), ready, 0, 1000, 0)]
    assert steps(res.gpus[1]) == [(land, t2, 1, 0, 1001), (t2, t3, 1, 0, 1002)]
    [tr] = res.transfers
    assert (tr.request, tr.src_gpu, tr.dst_gpu) == (0, 0, 1)
    assert (*map(T, (tr.ready, tr.reserved, tr.start, tr.end)), tr.bytes) == (ready, ready, ready, land, 1000 * KV_BYTES)
    assert (rec.prefill_gpu, rec.decode_gpu, rec.transfer) == (0, 1, 0)
    assert tuple(map(T, (rec.prefill_end, rec.first_token, rec.finish))) == (ready, land, t3)
    assert gaps(res, rec) == [t2 - land, t3 - t2]


def test_first_token_at_prefill_moves_only_the_first_token():
    reqs = [(0.0, 1000, 5), (0.05, 3000, 3), (0.3, 800, 1)]
    at_decode = run(disaggregated(link={"gbytes_per_s": 1}), reqs)
    at_prefill = run(disaggregated(link={"gbytes_per_s": 1}, first_token="prefill"), reqs)
    assert [steps(g) for g in at_decode.gpus] == [steps(g) for g in at_prefill.gpus]
    assert at_decode.transfers == at_prefill.transfers
    for a, b in zip(at_decode.requests, at_prefill.requests):
        assert a.finish == b.finish
        assert b.first_token == b.prefill_end
        if a.output_tokens > 1:
            assert a.first_token == at_decode.transfers[a.transfer].end > b.first_token
            # the transfer now sits inside the first gap (in ticks: gaps are tick differences)
            assert T(request_gaps(at_prefill, b)[0]) == T(request_gaps(at_decode, a)[0]) + T(a.first_token) - T(b.first_token)


def test_one_token_request_needs_no_transfer():
    res = run(disaggregated(), [(0.0, 500, 1)])
    rec = res.requests[0]
    assert res.transfers == [] and rec.transfer == -1 and rec.decode_gpu == -1
    assert rec.first_token == rec.finish == rec.prefill_end and T(rec.finish) == prefill(500)
    assert len(res.gpus[1]) == 0


def test_fifo_link_queues_transfers_independent_does_not():
    reqs = [(0.0, 1000, 2), (0.0, 2000, 2)]  # one prefill batch: both ready together
    ready = prefill(3000)
    fifo = run(disaggregated(decode_gpus=2, link={"gbytes_per_s": 1, "sharing": "fifo"}), reqs)
    a, b = fifo.transfers
    assert (a.request, T(a.start), T(a.end)) == (0, ready, ready + wire(1000, 1))
    assert (b.request, T(b.reserved), b.start, T(b.end)) == (1, ready, a.end, T(a.end) + wire(2000, 1))
    indep = run(disaggregated(decode_gpus=2, link={"gbytes_per_s": 1, "sharing": "independent"}), reqs)
    a, b = indep.transfers
    assert (T(a.start), T(a.end)) == (ready, ready + wire(1000, 1))
    assert (T(b.start), T(b.end)) == (ready, ready + wire(2000, 1))


def test_fifo_link_is_shared_across_prefill_gpus():
    res = run(disaggregated(prefill_gpus=2, prefill_batch_tokens=1000, link={"gbytes_per_s": 0.5}),
              [(0.0, 1000, 2), (0.0, 1000, 2)])
    a, b = res.transfers
    assert a.src_gpu != b.src_gpu and a.ready == b.ready
    assert b.start == a.end


def layer_s(p, gbytes_per_s, layers=32):
    return T(p * KV_BYTES / layers / (gbytes_per_s * 1e9))


def layer_ready(start, end, i, layers=32):
    """docs/model.md "Disaggregated": layer i of L is ready at start + (end - start) * (i + 1) / L (whole ticks,
    rounded down), the last at the end."""
    return end if i == layers - 1 else start + (end - start) * (i + 1) // layers


def test_layerwise_streams_during_the_prefill():
    # fast link: each layer's chunk crosses as soon as the layer exists; the last lands
    # one chunk after the prefill ends
    res = run(disaggregated(link={"gbytes_per_s": 400, "layerwise": True}), [(0.0, 2000, 2)])
    [tr] = res.transfers
    end = prefill(2000)
    assert (T(tr.ready), tr.reserved, T(tr.layer_s)) == (end, 0.0, layer_s(2000, 400))
    assert [T(s) for s in tr.layer_starts] == [layer_ready(0, end, i) for i in range(32)]
    assert T(tr.start) == end // 32 and T(tr.end) == end + T(tr.layer_s)
    assert res.requests[0].first_token == tr.end
    # slow link: the wire is the bottleneck; chunks go back to back from the first layer on
    res = run(disaggregated(link={"gbytes_per_s": 1, "layerwise": True}), [(0.0, 2000, 2)])
    [tr] = res.transfers
    expected = [end // 32]
    for _ in range(31):
        expected.append(expected[-1] + layer_s(2000, 1))
    assert [T(s) for s in tr.layer_starts] == expected
    assert T(tr.end) == expected[-1] + layer_s(2000, 1)
    assert T(tr.end) > end + wire(2000, 1) / 32


def test_layerwise_fifo_leaves_the_wire_free_between_layers():
    """A long prefill streaming its layers must not hold the shared wire for its whole
    duration (it once did: a short prompt prefilled meanwhile waited for the long one to
    end). Chunks go in order of ready time, so the short prompt's fit in between."""
    reqs = [(0.0, 8000, 2), (0.01, 1000, 2)]  # 0.4 s of prefill on GPU 0, 0.05 s on GPU 1
    res = run(disaggregated(prefill_gpus=2, decode_gpus=2, link={"layerwise": True}), reqs)
    a, b = sorted(res.transfers, key=lambda t: t.request)
    assert (a.src_gpu, b.src_gpu) == (0, 1)
    b_end = T(0.01) + prefill(1000)
    assert T(b.ready) == b_end and T(b.end) == b_end + layer_s(1000, 50) < T(a.ready)
    # B's second layer is ready (0.013125 s) while A's first chunk is on the wire: it waits for it
    assert T(a.layer_starts[0]) == prefill(8000) // 32
    assert T(b.layer_starts[1]) == T(a.layer_starts[0]) + T(a.layer_s) > layer_ready(T(0.01), b_end, 1)
    chunks = sorted((T(s), T(s) + T(t.layer_s)) for t in res.transfers for s in t.layer_starts)
    assert all(nxt[0] >= prev[1] for prev, nxt in zip(chunks, chunks[1:]))
    # the link is busy only while bytes move
    m = summarize(res)
    assert m["util_link"] == pytest.approx(wire(9000, 50) / 1e12 / res.end_time, rel=1e-9)
    assert m["transfer_p99_ms"] < 1.0


def test_decode_gpu_with_most_free_kv_is_chosen():
    # decode GPUs 1 and 2 (10,000 tokens each); requests one at a time through the prefill GPU
    reqs = [(0.0, 1000, 3000), (0.1, 1000, 100), (0.2, 100, 100), (0.3, 100, 5000)]
    res = run(disaggregated(decode_gpus=2), reqs, model={"kv_capacity_tokens": 10_000})
    # r0: tie, lowest index (1); r1: GPU 2 (10,000 free vs 6,000); r2: GPU 2 (8,900 vs 6,000);
    # r3: GPU 2 (8,700 vs 6,000)
    assert [r.decode_gpu for r in res.requests] == [1, 2, 2, 2]


def test_decode_room_blocks_in_fifo_order():
    # one decode GPU of 5,000 tokens: r0 holds 4,000; r1 (2,000) waits for it to finish,
    # and r2 (200), which would fit, waits behind r1
    reqs = [(0.0, 1000, 3000), (0.01, 1500, 500), (0.02, 100, 100)]
    res = run(disaggregated(), reqs, model={"kv_capacity_tokens": 5000})
    t0, t1, t2 = res.transfers
    r0 = res.requests[0]
    assert t1.ready < r0.finish and t2.ready < r0.finish
    assert t1.reserved == r0.finish and t2.reserved == r0.finish
    assert [t.request for t in res.transfers] == [0, 1, 2]


def test_decode_slots_block_reservations():
    res = run(disaggregated(max_batch_seqs=1), [(0.0, 100, 20), (0.0, 100, 20)])
    t0, t1 = res.transfers
    assert t1.reserved == res.requests[0].finish


# ---------------------------------------------------------------- ending


def test_drain_cap_cuts_an_overloaded_run():
    res = run(colocated(), [(0.0, 100, 5000), (0.1, 100, 3)], duration=1.0, drain=2.0)
    assert res.capped
    assert res.end_time == 3.0
    r0, r1 = res.requests
    assert not r0.finished and r1.finished
    for log in res.gpus:
        assert all(e <= res.end_time for e in log.end)
    assert len(tokens(res, r0)) == sum(1 for e in res.gpus[0].end if e > r0.first_token) + 1
    m = summarize(res)
    assert m["unfinished"] == 1 and m["slo_attainment"] == 0.5


def test_run_without_requests():
    res = run(colocated(gpus=2), [])
    assert res.requests == [] and res.transfers == [] and all(len(g) == 0 for g in res.gpus)
    assert not res.capped
    m = summarize(res)
    assert m["requests"] == 0 and m["ttft_p50_s"] is None


def test_zero_drain_stops_at_the_last_arrival_time():
    res = run(colocated(), [(0.0, 100, 100)], duration=0.5, drain=0.0)
    assert res.capped and res.end_time == 0.5
    assert not res.requests[0].finished


def test_requests_argument_overrides_the_workload():
    sc = load_scenario({"workload": {"rate": 50, "duration_s": 10, "prompt_tokens": 100, "output_tokens": 2},
                        "fleet": colocated()})
    assert len(simulate(sc).requests) > 300
    assert len(simulate(sc, requests=[(1.0, 10, 2)]).requests) == 1


@pytest.mark.parametrize("fleet", [colocated(gpus=3), colocated(gpus=2, chunk_tokens=128),
                                   disaggregated(prefill_gpus=2, decode_gpus=2),
                                   disaggregated(link={"layerwise": True, "sharing": "independent"})])
def test_results_are_repeatable(fleet):
    raw = {"workload": {"rate": 8, "duration_s": 10, "prompt_tokens": {"dist": "lognormal", "median": 800, "sigma": 1},
                        "output_tokens": {"dist": "uniform", "low": 1, "high": 200}}, "fleet": fleet, "seed": 3}
    a = simulate(load_scenario(raw))
    b = simulate(load_scenario(raw))
    assert a == b
    c = simulate(load_scenario({**raw, "seed": 4}))
    assert [r.arrival for r in c.requests] != [r.arrival for r in a.requests]


# ---------------------------------------------------------------- prefill-pool chunks, attention


def test_prefill_pool_chunks_a_long_prompt_over_several_steps():
    """prefill_chunk_tokens 1,000: a 2,500-token prompt takes three prefill steps; its KV
    goes over the link only after the last one."""
    res = run(disaggregated(prefill_chunk_tokens=1000, link={"gbytes_per_s": 10}), [(0.0, 2500, 3)])
    log, rec, tr = res.gpus[0], res.requests[0], res.transfers[0]
    t1 = prefill(1000)
    t2 = t1 + prefill(1000)
    t3 = t2 + prefill(500)
    assert steps(log) == [(0, t1, 0, 1000, 0), (t1, t2, 0, 1000, 0), (t2, t3, 0, 500, 0)]
    assert (T(rec.prefill_start), T(rec.prefill_end)) == (0, t3)
    assert tuple(map(T, (tr.ready, tr.reserved, tr.start))) == (t3, t3, t3)
    assert T(tr.end) == t3 + T(2500 * KV_BYTES / 10e9)


def test_prefill_pool_chunks_keep_fifo_order_a_short_prompt_shares_the_long_ones_last_chunk():
    """Like colocated chunk_tokens, the prompt under way gets the budget first: a short
    prompt behind a 30,000-token one starts in the step carrying the long one's last chunk
    (30,000 = 58 x 512 + 304, so 208 tokens of budget are left), not before."""
    requests = [(0.0, 30_000, 2), (0.01, 200, 2)]
    whole = run(disaggregated(), requests)
    chunked = run(disaggregated(prefill_chunk_tokens=512), requests)
    assert whole.requests[1].prefill_start == whole.requests[0].prefill_end
    log = chunked.gpus[0]
    assert list(log.prefill_tokens) == [512] * 58 + [504]
    long, short = chunked.requests
    assert short.prefill_start == log.start[58] and short.prefill_end == long.prefill_end == log.end[58]


def test_layerwise_streaming_of_a_chunked_prompt_starts_with_its_last_chunk():
    res = run(disaggregated(prefill_chunk_tokens=1000, link={"gbytes_per_s": 1000, "layerwise": True}),
              [(0.0, 2500, 3)])
    log, tr = res.gpus[0], res.transfers[0]
    # reserved when the step that ends its prefill starts; the first layer ready 1/32 into it
    assert tr.reserved == log.start[2]
    assert tr.layer_starts[0] == log.start[2] + (log.end[2] - log.start[2]) * 1 / 32
    assert tr.ready == log.end[2]


def test_attention_terms_are_logged_per_prefill_step():
    """Chunks of 1,024 of a 3,000-token prompt: units c x (p + c/2) and p re-read tokens, in
    GpuLog.attention_args (only when attention is on) and in the step times."""
    model = {"cost": "roofline", "attention": True}
    res = run(colocated(chunk_tokens=1024), [(0.0, 3000, 2)], model=model)
    log = res.gpus[0]
    expected = {0: (1024 * 512.0, 0), 1: (1024 * (1024 + 512.0), 1024), 2: (952 * (2048 + 476.0), 2048)}
    assert log.attention_args == expected
    step = step_time_fn(load_scenario({"workload": {"rate": 1, "prompt_tokens": 1, "output_tokens": 1},
                                       "fleet": colocated(), "model": model}).model)
    assert log.end[1] - log.start[1] == pytest.approx(step(0, 0, 1024, *expected[1]), rel=1e-12)
    assert log.end[2] - log.start[2] == pytest.approx(step(1, 3001, 952, *expected[2]) if log.decode_seqs[2] else
                                                      step(0, 0, 952, *expected[2]), rel=1e-12)
    off = run(colocated(chunk_tokens=1024), [(0.0, 3000, 2)], model={"cost": "roofline"})
    assert off.gpus[0].attention_args == {}
    assert off.gpus[0].end[0] < log.end[0]


def test_a_run_cut_short_drops_the_attention_terms_of_steps_it_never_finished():
    res = run(colocated(chunk_tokens=1024), [(0.0, 30_000, 2)], duration=0.01, drain=0.05,
              model={"cost": "roofline", "attention": True})
    log = res.gpus[0]
    assert res.capped == "drain_s"
    assert log.attention_args and set(log.attention_args) == set(range(len(log.start)))


# ---------------------------------------------------------------- partial prefills (long_prefill_tokens)


def test_prefill_pool_partial_prefills_let_short_prompts_pass_a_long_one():
    """Budget 2,048, long_prefill_tokens 512: the 30,000-token prompt takes 512 of each step
    and the short ones behind it are admitted into the rest, finishing in their first step,
    instead of waiting for the long one's 59th chunk as with FIFO chunks."""
    requests = [(0.0, 30_000, 2), (0.01, 200, 2), (0.02, 300, 2)]
    fifo = run(disaggregated(prefill_chunk_tokens=2048), requests)
    partial = run(disaggregated(prefill_chunk_tokens=2048, long_prefill_tokens=512), requests)
    f_long, f_short, _ = fifo.requests
    assert f_short.prefill_end == f_long.prefill_end  # FIFO: behind the long one's last chunk
    log = partial.gpus[0]
    t1 = prefill(512)  # step 0: only the long prompt had arrived, and it takes at most 512
    assert steps(log)[:2] == [(0.0, t1, 0, 512, 0), (t1, t1 + prefill(512 + 200 + 300), 0, 1012, 0)]
    assert list(log.prefill_tokens) == [512, 1012] + [512] * 56 + [30_000 - 58 * 512]
    long, a, b = partial.requests
    assert a.prefill_start == b.prefill_start and T(a.prefill_start) == t1 and a.prefill_end == b.prefill_end == log.end[1]
    assert a.first_token < f_short.first_token / 10
    # the long one still ends, in its 59th step, all its tokens taken
    assert (long.prefill_start, long.prefill_end) == (0.0, log.end[58])
    assert long.first_token is not None and long.finish is not None


def test_colocated_partial_prefills_decode_the_short_prompts_beside_the_long_ones_chunks():
    requests = [(0.0, 30_000, 3), (0.01, 400, 3)]
    partial = run(colocated(chunk_tokens=2048, long_prefill_tokens=512), requests)
    log = partial.gpus[0]
    long, short = partial.requests
    t1 = prefill(512)
    assert steps(log)[:3] == [(0.0, t1, 0, 512, 0), (t1, t1 + prefill(912), 0, 912, 0),
                              (t1 + prefill(912), T(log.end[2]), 1, 512, 401)]
    assert short.first_token == log.end[1] and short.finish == log.end[3]  # its 3 tokens beside the chunks
    assert long.prefill_end == log.end[58] and long.finish is not None
    fifo = run(colocated(chunk_tokens=2048), requests)
    assert fifo.requests[1].first_token == fifo.requests[0].first_token  # FIFO chunks: it waited


def test_partial_prefills_take_two_long_prompts_at_once_and_only_prompts_over_the_threshold():
    """Two long prompts share the budget (512 each); a prompt of exactly 512 is not long."""
    res = run(disaggregated(prefill_chunk_tokens=2048, long_prefill_tokens=512),
              [(0.0, 20_000, 2), (0.0, 10_000, 2), (0.0, 513, 2), (0.0, 512, 2)])
    log = res.gpus[0]
    a, b, c, d = res.requests
    assert list(log.prefill_tokens[:2]) == [512 + 512 + 512 + 512, 512 + 512 + 1]
    assert c.prefill_end == log.end[1] and d.prefill_end == log.end[0]  # 513: capped, 1 left
    # 10,000 = 19 x 512 + 272 ends in step 19, before 20,000 = 39 x 512 + 32 in step 39
    assert list(log.prefill_tokens) == [2048, 1025] + [1024] * 17 + [512 + 272] + [512] * 19 + [32]
    assert (b.prefill_end, a.prefill_end) == (log.end[19], log.end[39])


def test_partial_prefill_completions_stay_fifo_among_prompts_under_the_threshold():
    requests = [(0.0, 30_000, 2)] + [(0.001 * k, 100 + 37 * k, 2) for k in range(1, 40)]
    for fleet in (colocated(chunk_tokens=1024, long_prefill_tokens=256),
                  disaggregated(prefill_chunk_tokens=1024, long_prefill_tokens=256)):
        res = run(fleet, requests)
        shorts = res.requests[1:]
        ends = [r.prefill_end for r in shorts]
        assert ends == sorted(ends) and ends[-1] < res.requests[0].prefill_end
        assert [r.prefill_start for r in shorts] == sorted(r.prefill_start for r in shorts)


def test_long_prefill_tokens_changes_nothing_without_a_chunk_budget_or_a_long_prompt():
    requests = [(0.0, 30_000, 3), (0.01, 400, 3), (0.02, 900, 2)]
    for fleet in (colocated(), disaggregated()):
        assert steps(run({**fleet, "long_prefill_tokens": 64}, requests).gpus[0]) == steps(run(fleet, requests).gpus[0])
    short_only = [(0.0, 400, 3), (0.01, 500, 3)]
    assert steps(run(colocated(chunk_tokens=256, long_prefill_tokens=512), short_only).gpus[0]) == \
        steps(run(colocated(chunk_tokens=256), short_only).gpus[0])


def test_the_simulation_keeps_its_state_in_slots_for_fast_attribute_reads():
    """CPython 3.11 reads `self.x` fast from a __dict__ only while a class has at most 30
    attribute names (a 30th on _Simulation cost 5% more instructions per run); slots have no
    such limit, and a mechanism's new state that is not a slot fails here (AttributeError)."""
    from lab.core.engine import _Simulation

    fleets = ({"layout": "colocated", "gpus": 2, "prefix_cache": "shared"},
              {"layout": "colocated", "gpus": 2, "kv_policy": "on_demand",
               "admission": {"reject_when": "predicted_ttft_over_slo"}},
              {"layout": "disaggregated", "prefill_gpus": 1, "decode_gpus": 1, "link": {"layerwise": True}},
              {"layout": "disaggregated", "prefill_gpus": 1, "decode_gpus": 2, "kv_policy": "on_demand"},
              {"layout": "disaggregated", "prefill_gpus": 1, "decode_gpus": 2,
               "planner": {"policy": "schedule", "switch_s": 0.5, "schedule": [{"at_s": 1, "prefill_gpus": 2}]}})
    for fleet in fleets:
        sc = load_scenario({"workload": {"rate": 4, "duration_s": 3, "prompt_tokens": 400, "output_tokens": 20},
                            "fleet": fleet, "slo": {"ttft_s": 1.0}})
        sim = _Simulation(sc, generate_requests(sc.workload, sc.seed))
        sim.run()
        assert not hasattr(sim, "__dict__"), fleet


def test_every_attribute_the_simulation_sets_is_one_of_its_slots():
    # Read from the source, so a mechanism's new state fails here, not only on the run that sets it.
    import inspect
    import re

    from lab.core import engine

    # (the arrival, batch-forming and planner handlers live in the classes _Simulation mixes
    # in: arrivals.Arrivals, batching.Batching, role_changes.RoleChanges; none has slots)
    mixins = [cls for cls in engine._Simulation.__mro__[1:] if cls is not object]
    assert [cls.__name__ for cls in mixins] == ["Arrivals", "Batching", "RoleChanges"]
    source = inspect.getsource(engine._Simulation) + "".join(inspect.getsource(cls) for cls in mixins)
    assert all(cls.__slots__ == () for cls in mixins)
    assigned = set(re.findall(r"self\.(\w+)\s*(?:=|\+=|-=)(?!=)", source))
    assert assigned <= set(engine._Simulation.__slots__), sorted(assigned - set(engine._Simulation.__slots__))
