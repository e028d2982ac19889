"""Routing policies (lab/core/policies.py): hand-built snapshots and hand-built runs."""

import pytest

from lab.core import load_scenario, simulate
from lab.core.policies import DecodeView, Router, bound_queues, least_loaded, pick_decode, prefill_slice, queue_plan

# ---------------------------------------------------------------- the functions


def test_queue_plan_per_rule():
    assert queue_plan("queue", 4) == [0, 0, 0, 0]
    assert queue_plan("round_robin", 3) == [0, 1, 2]
    assert queue_plan("least_loaded", 3) == [0, 1, 2]
    # length_split: the LAST long instances share the long queue
    assert queue_plan("length_split", 4, long_instances=1) == [0, 0, 0, 1]
    assert queue_plan("length_split", 4, long_instances=3) == [0, 1, 1, 1]


def test_round_robin_binds_the_nth_arrival_to_instance_n_mod_k():
    router = Router("round_robin", 3)
    assert [router.route(100) for _ in range(7)] == [0, 1, 2, 0, 1, 2, 0]


def test_round_robin_ignores_the_load():
    router = Router("round_robin", 2)

    def loads():
        raise AssertionError("round_robin must not read the fleet")

    assert [router.route(5, loads), router.route(5, loads)] == [0, 1]


def test_least_loaded_picks_the_smallest_load_ties_lowest_index():
    assert least_loaded([30, 10, 10, 40]) == 1
    assert least_loaded([0, 0, 0]) == 0
    assert least_loaded([5, 4, 3]) == 2
    router = Router("least_loaded", 3)
    assert router.route(1, lambda: [7, 2, 2]) == 1


def test_length_split_threshold_is_inclusive():
    router = Router("length_split", 3, long_prompt_tokens=4000)
    assert router.route(3999) == 0
    assert router.route(4000) == 1
    assert router.route(30000) == 1


def test_queue_rule_is_one_queue():
    router = Router("queue", 5)
    assert {router.route(p) for p in (1, 5000, 30000)} == {0}


def test_bound_queues_binds_what_the_router_binds_at_arrival_and_nothing_else():
    prompts = [100, 5000, 4096, 20, 9000, 4095, 300]
    assert bound_queues("round_robin", 3, None, prompts) == [0, 1, 2, 0, 1, 2, 0]
    assert bound_queues("length_split", 4, 4096, prompts) == [0, 1, 1, 0, 1, 0, 0]
    assert bound_queues("round_robin", 2, None, []) == []
    # the rest read the fleet at the arrival (or have one queue): nothing bound in advance
    for rule in ("queue", "least_loaded", "cache_affinity"):
        assert bound_queues(rule, 3, 4096, prompts) is None


def test_pick_decode_most_free_kv_and_fewest_seqs():
    # (sequences held, free KV tokens) per decode instance
    fleet = [DecodeView(*v) for v in ((5, 9000), (2, 4000), (2, 12000), (9, 20000))]
    assert pick_decode("most_free_kv", 1000, 256, fleet) == 3
    assert pick_decode("fewest_seqs", 1000, 256, fleet) == 1  # tie on 2 seqs: lowest index
    # an instance without room for this prompt is not a candidate
    assert pick_decode("fewest_seqs", 5000, 256, fleet) == 2
    # a full batch is not a candidate either
    assert pick_decode("most_free_kv", 1000, 9, fleet) == 2
    # ties on free KV: lowest index
    assert pick_decode("most_free_kv", 10, 256, [DecodeView(1, 500), DecodeView(0, 500)]) == 0


def test_pick_decode_none_when_nobody_has_room():
    assert pick_decode("most_free_kv", 5000, 256, [DecodeView(0, 4999), DecodeView(1, 100)]) is None
    assert pick_decode("fewest_seqs", 10, 1, [DecodeView(1, 9000), DecodeView(1, 9000)]) is None


# ---------------------------------------------------------------- in the engine

SHORT = {"workload": {"rate": 1, "duration_s": 1, "prompt_tokens": 100, "output_tokens": 20},
         "fleet": {"layout": "colocated", "gpus": 2}, "drain_s": 30}


def run(requests, **fleet):
    raw = {**SHORT, "fleet": {**SHORT["fleet"], **fleet}}
    return simulate(load_scenario(raw), requests=requests)


def test_fleet_queue_lets_a_free_gpu_take_the_next_prompt_but_binding_does_not():
    """Three prompts at once on 2 GPUs. With the fleet queue the third waits for whichever
    GPU frees first; bound round-robin puts it on GPU 0 behind the first long prompt even
    though GPU 1 finishes its short prompt much sooner."""
    requests = [(0.0, 9000, 2), (0.0, 100, 2), (0.001, 100, 2)]  # 9,000 > prefill_batch_tokens: alone
    queued = run(requests, dispatch="queue")
    bound = run(requests, dispatch="round_robin")
    assert [r.prefill_gpu for r in queued.requests] == [0, 1, 1]
    assert [r.prefill_gpu for r in bound.requests] == [0, 1, 0]
    assert bound.requests[2].first_token > queued.requests[2].first_token
    assert bound.requests[2].prefill_start >= bound.requests[0].prefill_end


def test_least_loaded_counts_queued_prompt_tokens_and_running_context():
    """GPU 0 takes an 8,000-token prompt; the next arrivals go to GPU 1 until its queued and
    running tokens pass GPU 0's."""
    requests = [(0.0, 8000, 50), (0.01, 3000, 50), (0.02, 3000, 50), (0.03, 3000, 50), (0.04, 3000, 50)]
    res = run(requests, dispatch="least_loaded")
    # Prefills take 0.4 s and 0.15 s, so nothing has finished by 0.04. Loads at each arrival:
    # [0, 0] -> 0; [8000, 0] -> 1; [8000, 3000] -> 1; [8000, 6000] -> 1; [8000, 9000] -> 0.
    assert [r.prefill_gpu for r in res.requests] == [0, 1, 1, 1, 0]


def test_length_split_keeps_short_prompts_off_the_long_gpu():
    requests = [(0.0, 30000, 5)] + [(0.01 * (i + 1), 200, 5) for i in range(10)]
    res = run(requests, gpus=3, dispatch="length_split", long_prompt_tokens=10000, long_gpus=1)
    assert res.requests[0].prefill_gpu == 2
    assert {r.prefill_gpu for r in res.requests[1:]} <= {0, 1}
    # the short prompts never wait behind the long one's prefill (1.5 s of linear cost)
    assert max(r.first_token - r.arrival for r in res.requests[1:]) < 0.1


def test_length_split_prompt_waits_for_its_own_group_even_if_others_are_idle():
    requests = [(0.0, 20000, 5), (0.01, 20000, 5)]
    res = run(requests, gpus=3, dispatch="length_split", long_prompt_tokens=10000, long_gpus=1)
    assert [r.prefill_gpu for r in res.requests] == [2, 2]
    assert res.requests[1].prefill_start >= res.requests[0].prefill_end


def test_decode_pick_fewest_seqs_spreads_by_count_not_memory():
    """Decode GPU 1 has less free KV (it holds one long sequence) but as many sequences as
    GPU 2 has... fewest_seqs fills by count, most_free_kv by memory."""
    base = {"layout": "disaggregated", "prefill_gpus": 1, "decode_gpus": 2}
    requests = [(0.0, 6000, 400)] + [(0.5 + 0.1 * i, 100, 400) for i in range(4)]
    raw = {**SHORT, "fleet": {**base, "decode_pick": "most_free_kv"}, "model": {"kv_capacity_tokens": 10000}}
    most_free = simulate(load_scenario(raw), requests=requests)
    raw["fleet"]["decode_pick"] = "fewest_seqs"
    fewest = simulate(load_scenario(raw), requests=requests)
    assert [r.decode_gpu for r in most_free.requests] == [1, 2, 2, 2, 2]
    assert [r.decode_gpu for r in fewest.requests] == [1, 2, 1, 2, 1]


@pytest.mark.parametrize("layout", ["colocated", "disaggregated"])
def test_dispatch_queue_is_the_default(layout):
    fleet = {"layout": layout, "gpus": 2} if layout == "colocated" else {"layout": layout, "prefill_gpus": 2, "decode_gpus": 1}
    raw = {**SHORT, "workload": {"rate": 8, "duration_s": 5, "prompt_tokens": 1500, "output_tokens": 30}, "fleet": fleet}
    default = simulate(load_scenario(raw))
    raw["fleet"] = {**fleet, "dispatch": "queue", "decode_pick": "most_free_kv"}
    explicit = simulate(load_scenario(raw))
    assert default.requests == explicit.requests and default.gpus == explicit.gpus


def test_least_loaded_counts_a_decoding_sequence_context():
    """GPU 0 decodes one 4,000-token-context sequence and has nothing queued; GPU 1 is busy
    only with a 100-token prompt. Both later arrivals go to GPU 1: 4,000+ > 100."""
    requests = [(0.0, 4000, 500), (1.0, 100, 5), (1.001, 100, 5)]
    res = run(requests, dispatch="least_loaded")
    assert res.requests[0].prefill_end < 1.0 < res.requests[0].finish
    assert [r.prefill_gpu for r in res.requests] == [0, 1, 1]


def test_prefill_slice_caps_only_prompts_over_the_threshold():
    assert prefill_slice(30_000, 30_000, 2048, None) == 2048  # no cap: all the budget
    assert prefill_slice(30_000, 30_000, 2048, 512) == 512  # a long prompt: at most 512
    assert prefill_slice(30_000, 300, 2048, 512) == 300  # its last piece: what it still needs
    assert prefill_slice(30_000, 30_000, 100, 512) == 100  # the budget left is smaller
    assert prefill_slice(513, 513, 2048, 512) == 512 and prefill_slice(513, 1, 2048, 512) == 1
    assert prefill_slice(512, 512, 2048, 512) == 512 and prefill_slice(400, 400, 2048, 16) == 16
    assert prefill_slice(400, 400, 2048, 400) == 400 and prefill_slice(400, 400, 300, 4096) == 300
